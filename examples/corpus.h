/* The built-in corpus of the pgzip examples: deterministic, text-like
 * bytes that compress like English prose (about 3.3x with gzip -6).
 *
 * The corpus is one endless stream that depends on nothing but a fixed
 * seed. It is cut into 1 MiB segments, each generated from its own seed,
 * so a generator can start at any offset without producing what comes
 * before it: examples/mpi_pgzip.c has each MPI rank generate only its own
 * slice, and examples/pgzip.c regenerates the whole stream to verify.
 *
 *   corpus *c = corpus_new(offset, bytes);     the bytes [offset, offset+bytes)
 *   while ((n = corpus_fill(c, buf, sizeof buf)) > 0) use(buf, n);
 *   corpus_free(c);
 */
#ifndef KNIT_EXAMPLES_CORPUS_H
#define KNIT_EXAMPLES_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#define CORPUS_SEGMENT ((uint64_t)1 << 20) /* bytes per independently seeded segment */

typedef struct corpus corpus;

/* A generator of the `bytes` bytes of the stream that start at `offset`.
 * NULL if out of memory (it needs about 300 KiB). */
corpus *corpus_new(uint64_t offset, uint64_t bytes);

/* Fills buf with the next min(n, bytes left) bytes; returns how many (0 at
 * the end). The stream does not depend on how it is cut into calls. */
size_t corpus_fill(corpus *c, unsigned char *buf, size_t n);

void corpus_free(corpus *c);

#endif
