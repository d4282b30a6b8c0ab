/* The deflate engines of the pgzip examples: zlib, libdeflate and ISA-L
 * (igzip), behind one interface, with a cache of compressors that the
 * pipeline's workers share.
 *
 *   engine_conf c;
 *   engine_configure(ENGINE_LIBDEFLATE, 6, &c, why, sizeof why);  pigz's -6
 *   engine *e = engine_new(&c);
 *   engine_deflate(e, dict, dict_len, data, len, final, out, cap, &n, err, sizeof err);
 *   crc = engine_crc32(e, crc, data, len);
 *   engine_free(e);
 *
 * Levels are pigz's (0-9): each engine maps them to a level of its own
 * whose output is no larger than pigz -N's on the built-in corpus with
 * 1 MiB blocks (measured; see engine.c). ISA-L cannot match pigz above -2,
 * so engine_configure refuses those levels for it.
 *
 * Streams: zlib takes a preset dictionary and can end a block on a byte
 * boundary without ending the stream (a sync flush), so pgzip writes one
 * gzip member for the whole input with it, as pigz does. libdeflate takes
 * no dictionary and always ends the stream; pgzip writes ISA-L the same
 * way (its dictionary priming costs speed and gains ~0.3% at 1 MiB
 * blocks): one gzip member per block (RFC 1952 2.2: gzip, pigz and zlib
 * read them as one file). engine_conf.members says which.
 */
#ifndef KNIT_EXAMPLES_ENGINE_H
#define KNIT_EXAMPLES_ENGINE_H

#include <stddef.h>
#include <stdint.h>

typedef enum engine_kind { ENGINE_ZLIB, ENGINE_LIBDEFLATE, ENGINE_ISAL } engine_kind;

#define ENGINE_NAMES "zlib, libdeflate, isal"

typedef struct engine_conf {
    engine_kind kind;
    int level;   /* pigz's scale, 0-9; -1 with fast */
    int native;  /* the engine's own level */
    int fast;    /* --fast: ISA-L's fastest level, no ratio promise */
    int members; /* one gzip member per block (the engine cannot sync-flush) */
} engine_conf;

/* "zlib", "libdeflate", "isal" -> the kind; -1 for any other name. */
int engine_parse(const char *name, engine_kind *kind);
const char *engine_name(engine_kind kind);

/* The default engine for pigz level `level`: the fastest whose output is
 * no larger than pigz's at that level. */
engine_kind engine_default(int level);

/* Fills *c for `kind` at pigz level `level` (0-9). -1 with the reason in
 * why when the engine has no level that matches pigz's ratio there. */
int engine_configure(engine_kind kind, int level, engine_conf *c, char *why, size_t why_len);

/* --fast: ISA-L's fastest level. */
void engine_configure_fast(engine_conf *c);

/* The gzip header's XFL byte for this configuration (2: best, 4: fastest). */
unsigned char engine_xfl(const engine_conf *c);

typedef struct engine engine;

/* A compressor cache for one configuration; NULL if out of memory. */
engine *engine_new(const engine_conf *c);
void engine_free(engine *e);

/* The most raw deflate bytes engine_deflate makes from `len` input bytes
 * (a sync flush's empty stored block included). */
size_t engine_bound(const engine_conf *c, size_t len);

/* The CRC-32 of gzip (RFC 1952) continued over p[0..n), with the engine's
 * own CRC code (libdeflate's and ISA-L's are several times zlib's speed). */
uint32_t engine_crc32(const engine *e, uint32_t crc, const void *p, size_t n);

/* Raw deflate of data[0..len) into out[0..cap): the stream ends with this
 * block if `final`, else (zlib only) it ends on a byte boundary with a sync
 * flush, and the next block continues it. dict: the input before the
 * block, to prime the window (zlib only; NULL or 0 bytes for none).
 * Thread-safe: each call takes a compressor from the cache. 0 and *out_len,
 * or -1 with a message in err. */
int engine_deflate(engine *e, const unsigned char *dict, size_t dict_len,
                   const unsigned char *data, size_t len, int final, unsigned char *out,
                   size_t cap, size_t *out_len, char *err, size_t err_len);

/* How many compressors the cache made (one per worker that compressed at
 * the same time as another). */
size_t engine_compressors(engine *e);

#endif
