/* What pgzip and mpi_pgzip share besides the engines (engine.h): sizes and
 * limits, the gzip member's header and trailer fields, command-line
 * parsing with one way of reporting bad usage, the payload-arena-or-malloc
 * item allocation, the 32 KiB dictionary tail, and the verifier that
 * inflates a gzip file of any number of members and compares it with what
 * went in.
 */
#ifndef KNIT_EXAMPLES_GZIP_UTIL_H
#define KNIT_EXAMPLES_GZIP_UTIL_H

#include <getopt.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <knit/knit.h>

#define KIB ((size_t)1024)
#define MIB ((size_t)1024 * 1024)
#define DICT_BYTES ((size_t)32768) /* deflate's window */
#define MIN_BLOCK (16 * KIB)
#define MAX_BLOCK (64 * MIB)
#define DEFAULT_BLOCK MIB
#define DEFAULT_CORPUS_MIB 256u
#define MAX_CORPUS_MIB (1u << 20) /* 1 TiB */

/* Exit codes: 0 done, 1 failure, 2 bad usage. */
enum { EXIT_USAGE = 2 };

double mib(uint64_t bytes);

/* Little-endian, as gzip's CRC-32 and ISIZE fields are. */
void put_le32(unsigned char *p, uint32_t v);

/* A gzip member's 10-byte header: deflate, no flags, mtime 0, xfl, Unix. */
void gzip_header(unsigned char hdr[10], unsigned char xfl);

/* Installs handler for SIGINT, SIGTERM and SIGHUP (the signals that stop
 * a compressor whose temporary output must go), with an empty mask. */
void catch_stop_signals(void (*handler)(int));

/* bad_usage's program name, and whether this process prints (an MPI job
 * prints on rank 0 only). */
void usage_init(const char *prog, int print);

/* Prints "prog: <message>" and a pointer to --help; returns -1. */
int bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A decimal number in lo..hi for option `opt`: 0 and *out, or -1 after
 * bad_usage. */
int parse_uint(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* --block: 65536, 64K, 64k, 64KiB, 1M, 1MiB, 1MB within MIN_BLOCK..MAX_BLOCK. */
int parse_size(const char *s, size_t *out);

/* The options both programs take. */
typedef struct common_options {
    unsigned threads; /* 0: the program's default */
    const char *sched;
    int level; /* pigz's scale, 0-9 */
    int level_given, corpus_given;
    size_t block;
    unsigned corpus_mib;
} common_options;

/* Their getopt_long codes and entries; a program's own codes start at
 * OPT_OWN. */
enum { OPT_THREADS = 256, OPT_SCHED, OPT_LEVEL, OPT_BLOCK, OPT_CORPUS_MIB, OPT_OWN };
#define COMMON_LONG_OPTIONS                                   \
    {"threads", required_argument, NULL, OPT_THREADS},        \
    {"sched", required_argument, NULL, OPT_SCHED},            \
    {"level", required_argument, NULL, OPT_LEVEL},            \
    {"block", required_argument, NULL, OPT_BLOCK},            \
    {"corpus-mib", required_argument, NULL, OPT_CORPUS_MIB}

/* Level 6, 1 MiB blocks, the 256 MiB corpus, the rest 0. */
void common_defaults(common_options *co);

/* Option `c` with value `arg`: 1 if it is a common option (parsed into
 * *co), 0 if it is not one, -1 if its value is bad (reported). */
int parse_common(int c, const char *arg, common_options *co);

/* Their lines of --help (all but --level, whose meaning differs):
 * --threads with the program's default, --sched, --block, --corpus-mib. */
void usage_common(FILE *f, const char *threads_default);

/* Memory for a pipeline item: the pool's payload arena if it has room,
 * else malloc; counts which in *arena or *malloced. Empty if out of
 * memory. */
knit_buf item_alloc(knit_pool *pool, size_t len, _Atomic uint64_t *arena,
                    _Atomic uint64_t *malloced);

/* The payload arena for `threads` workers with items of at most
 * `item_bytes`: room for every item in flight (2 threads + 2 blocks, each
 * with its compressed copy) and jemalloc's size-class rounding, between
 * 64 MiB and 4 GiB, in 2 MiB steps. */
size_t arena_bytes(unsigned threads, uint64_t item_bytes);

/* Keeps in tail[0..*tail_len) the last DICT_BYTES bytes of everything
 * read so far, after n more bytes at data (n may be less than that). */
void keep_tail(unsigned char *tail, size_t *tail_len, const unsigned char *data, size_t n);

/* The block pipeline both programs run: `input` reads blocks, `deflate`
 * (parallel) compresses them, `sink` (serial, in order) writes them, all
 * with ctx, at most 2 * threads + 2 blocks in flight. 0, or the error of
 * the first failure with its message in why; *st (may be NULL) gets the
 * pipeline's statistics. */
int run_blocks(knit_pool *pool, unsigned threads, knit_input_fn input, knit_stage_fn deflate,
               knit_stage_fn sink, void *ctx, knit_pipeline_stats *st, char *why,
               size_t why_len);

/* The bytes the gzip file must inflate to, in order: fills buf with n
 * bytes and returns how many it had (fewer: the input ended). */
typedef size_t (*verify_want_fn)(void *ctx, unsigned char *buf, size_t n);

/* Inflates the gzip file f from where it stands (any number of members,
 * each checked against its CRC-32 and ISIZE) and compares it with `want`,
 * which must give exactly `total` bytes. progress (may be NULL) is told the
 * bytes verified so far. 0 and *members, or -1 with a message in err. */
int gz_verify(FILE *f, const char *name, uint64_t total, verify_want_fn want, void *want_ctx,
              void (*progress)(void *ctx, uint64_t done), void *progress_ctx,
              unsigned *members, char *err, size_t err_len);

#endif
