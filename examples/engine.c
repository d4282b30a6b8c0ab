/* The deflate engines of the pgzip examples (see engine.h). */
#include "engine.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l.h>
#include <libdeflate.h>
#include <zlib.h>

/* Each engine's level for pigz's -0..-9. Measured on the built-in corpus
 * (64 MiB, 1 MiB blocks; pigz 2.6 -p2 at its default 128 KiB blocks):
 *
 *   pigz -N      1      2      3      4      5      6      7      8-9
 *   ratio     2.573  2.758  2.966  3.032  3.221  3.305  3.315  3.325
 *   zlib        1 2.568, 2 2.752, 3 2.954, 4 3.035, 5 3.224, 6 3.308,
 *               7 3.319, 8-9 3.329 (one member, primed, like pigz)
 *   libdeflate  1 2.789, 2 3.018, 3 3.140, 5 3.251, 6 3.302, 7 3.322,
 *               8 3.347 (one member per block)
 *   ISA-L       0 2.457, 1 2.571, 2 2.680, 3 2.795 (one member per block)
 *
 * so zlib at 1 MiB blocks is 0.2-0.4% short of pigz at -1 to -3 (those
 * take the next level), libdeflate needs level 7 for pigz -6 (its level 6
 * is 0.1% larger), and ISA-L matches pigz only up to -2 (level 1 is 0.04%
 * short of -1, so -1 takes level 2). Level 0 is stored blocks for zlib and libdeflate;
 * ISA-L has no stored mode and its level 0 is smaller than stored. A
 * smaller --block costs the per-block engines ratio (libdeflate 6 at
 * 256 KiB: 3.250): the table holds at 1 MiB and above. -1: no level. */
static const int ZLIB_LEVEL[10] = {0, 2, 3, 4, 4, 5, 6, 7, 8, 9};
static const int LIBDEFLATE_LEVEL[10] = {0, 1, 1, 2, 3, 5, 7, 7, 8, 8};
static const int ISAL_LEVEL[10] = {0, 2, 3, -1, -1, -1, -1, -1, -1, -1};
#define ISAL_FAST_LEVEL 0

static const char *const NAMES[] = {"zlib", "libdeflate", "isal"};

int engine_parse(const char *name, engine_kind *kind) {
    for (int k = 0; k < 3; k++)
        if (name != NULL && strcmp(name, NAMES[k]) == 0) {
            *kind = (engine_kind)k;
            return 0;
        }
    return -1;
}

const char *engine_name(engine_kind kind) {
    return (unsigned)kind < 3 ? NAMES[kind] : "?";
}

/* ISA-L (200+ MiB/s per core here) where it matches pigz (-1: its level
 * 2; at -2 its level 3 is slower than libdeflate 1), else libdeflate
 * (2-5x zlib at the same ratio; at -0 it stores at memcpy speed). */
engine_kind engine_default(int level) {
    return level == 1 ? ENGINE_ISAL : ENGINE_LIBDEFLATE;
}

int engine_configure(engine_kind kind, int level, engine_conf *c, char *why,
                     size_t why_len) {
    if (level < 0 || level > 9) {
        snprintf(why, why_len, "level %d is out of range (0..9)", level);
        return -1;
    }
    int native = kind == ENGINE_ZLIB         ? ZLIB_LEVEL[level]
                 : kind == ENGINE_LIBDEFLATE ? LIBDEFLATE_LEVEL[level]
                                             : ISAL_LEVEL[level];
    if (native < 0) {
        snprintf(why, why_len,
                 "isal has no level that matches pigz -%d's ratio (it reaches "
                 "pigz -2's at most): use --level 0-2, --fast, or --engine "
                 "libdeflate or zlib",
                 level);
        return -1;
    }
    *c = (engine_conf){.kind = kind, .level = level, .native = native,
                       .members = kind != ENGINE_ZLIB};
    return 0;
}

void engine_configure_fast(engine_conf *c) {
    *c = (engine_conf){.kind = ENGINE_ISAL, .level = -1, .native = ISAL_FAST_LEVEL,
                       .fast = 1, .members = 1};
}

unsigned char engine_xfl(const engine_conf *c) {
    return c->level == 9 ? 2 : c->level == 1 || c->fast ? 4 : 0;
}

size_t engine_bound(const engine_conf *c, size_t len) {
    switch (c->kind) {
    case ENGINE_ZLIB:
        /* Above deflateBound (len + len/4096 + len/16384 + 13 for these
         * parameters), with room for the sync flush's empty stored block. */
        return len + (len >> 10) + 4096;
    case ENGINE_LIBDEFLATE:
        return libdeflate_deflate_compress_bound(NULL, len);
    case ENGINE_ISAL:
        /* Level 0 codes incompressible bytes with its fixed tables and does
         * not fall back to stored blocks: at most 15 bits a byte (deflate's
         * longest code), plus a header of at most ISAL_DEF_MAX_HDR_SIZE. */
        return len + len / 8 * 7 + 8 + ISAL_DEF_MAX_HDR_SIZE + 1024;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* The compressor cache                                                */

typedef struct comp {
    struct comp *next;
    union {
        z_stream zs;
        struct libdeflate_compressor *ld;
        struct {
            struct isal_zstream zs;
            uint8_t *level_buf;
            uint32_t level_buf_size;
        } isal;
    } u;
} comp;

struct engine {
    engine_conf conf;
    pthread_mutex_t lock; /* guards free and made */
    comp *free;
    size_t made;
};

engine *engine_new(const engine_conf *c) {
    engine *e = calloc(1, sizeof *e);
    if (e == NULL) return NULL;
    e->conf = *c;
    pthread_mutex_init(&e->lock, NULL);
    return e;
}

static void comp_free(const engine_conf *c, comp *k) {
    if (c->kind == ENGINE_ZLIB) deflateEnd(&k->u.zs);
    else if (c->kind == ENGINE_LIBDEFLATE) libdeflate_free_compressor(k->u.ld);
    else free(k->u.isal.level_buf);
    free(k);
}

void engine_free(engine *e) {
    if (e == NULL) return;
    while (e->free) {
        comp *k = e->free;
        e->free = k->next;
        comp_free(&e->conf, k);
    }
    pthread_mutex_destroy(&e->lock);
    free(e);
}

size_t engine_compressors(engine *e) {
    pthread_mutex_lock(&e->lock);
    size_t n = e->made;
    pthread_mutex_unlock(&e->lock);
    return n;
}

/* ISA-L's level buffer for a level (0 needs none). */
static uint32_t isal_level_buf_size(int level) {
    switch (level) {
    case 1: return ISAL_DEF_LVL1_DEFAULT;
    case 2: return ISAL_DEF_LVL2_DEFAULT;
    case 3: return ISAL_DEF_LVL3_DEFAULT;
    default: return 0;
    }
}

/* A compressor ready for a new stream: from the cache, else a new one.
 * NULL if out of memory. */
static comp *comp_get(engine *e) {
    pthread_mutex_lock(&e->lock);
    comp *k = e->free;
    if (k) e->free = k->next;
    pthread_mutex_unlock(&e->lock);
    const engine_conf *c = &e->conf;
    if (k != NULL) {
        if (c->kind == ENGINE_ZLIB) deflateReset(&k->u.zs);
        return k; /* libdeflate keeps no stream; ISA-L is reset per block */
    }
    k = calloc(1, sizeof *k);
    if (k == NULL) return NULL;
    int ok = 1;
    if (c->kind == ENGINE_ZLIB) {
        /* windowBits -15: raw deflate, no zlib header or trailer. */
        ok = deflateInit2(&k->u.zs, c->native, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) ==
             Z_OK;
    } else if (c->kind == ENGINE_LIBDEFLATE) {
        k->u.ld = libdeflate_alloc_compressor(c->native);
        ok = k->u.ld != NULL;
    } else {
        k->u.isal.level_buf_size = isal_level_buf_size(c->native);
        if (k->u.isal.level_buf_size > 0) {
            k->u.isal.level_buf = malloc(k->u.isal.level_buf_size);
            ok = k->u.isal.level_buf != NULL;
        }
    }
    if (!ok) {
        free(k);
        return NULL;
    }
    pthread_mutex_lock(&e->lock);
    e->made++;
    pthread_mutex_unlock(&e->lock);
    return k;
}

static void comp_put(engine *e, comp *k) {
    pthread_mutex_lock(&e->lock);
    k->next = e->free;
    e->free = k;
    pthread_mutex_unlock(&e->lock);
}

uint32_t engine_crc32(const engine *e, uint32_t crc, const void *p, size_t n) {
    switch (e->conf.kind) {
    case ENGINE_LIBDEFLATE: return libdeflate_crc32(crc, p, n);
    case ENGINE_ISAL: return crc32_gzip_refl(crc, p, n);
    default: return (uint32_t)crc32_z(crc, p, n);
    }
}

static int zlib_block(z_stream *zs, const engine_conf *c, const unsigned char *dict,
                      size_t dict_len, const unsigned char *data, size_t len, int final,
                      unsigned char *out, size_t cap, size_t *out_len, char *err,
                      size_t err_len) {
    int rc = Z_OK;
    if (dict_len > 0 && c->native > 0) rc = deflateSetDictionary(zs, dict, (uInt)dict_len);
    if (rc == Z_OK) {
        zs->next_in = (unsigned char *)data;
        zs->avail_in = (uInt)len;
        zs->next_out = out;
        zs->avail_out = (uInt)cap;
        rc = deflate(zs, final ? Z_FINISH : Z_SYNC_FLUSH);
    }
    int ok = final ? rc == Z_STREAM_END
                   : rc == Z_OK && zs->avail_in == 0 && zs->avail_out > 0;
    if (!ok) {
        snprintf(err, err_len, "zlib deflate: %s (%d)", zs->msg ? zs->msg : zError(rc), rc);
        return -1;
    }
    *out_len = cap - zs->avail_out;
    return 0;
}

static int isal_block(comp *k, const engine_conf *c, const unsigned char *data, size_t len,
                      unsigned char *out, size_t cap, size_t *out_len, char *err,
                      size_t err_len) {
    struct isal_zstream *zs = &k->u.isal.zs;
    isal_deflate_init(zs);
    zs->level = (uint32_t)c->native;
    zs->level_buf = k->u.isal.level_buf;
    zs->level_buf_size = k->u.isal.level_buf_size;
    zs->gzip_flag = IGZIP_DEFLATE; /* raw: pgzip writes the gzip member around it */
    zs->flush = NO_FLUSH;
    zs->end_of_stream = 1;
    zs->next_in = (uint8_t *)data;
    zs->avail_in = (uint32_t)len;
    zs->next_out = out;
    zs->avail_out = (uint32_t)cap;
    int rc = isal_deflate(zs);
    if (rc != COMP_OK || zs->internal_state.state != ZSTATE_END) {
        snprintf(err, err_len, "isal_deflate: %s (%d, %u input bytes left)",
                 rc == COMP_OK ? "output larger than its bound" : "failed", rc,
                 zs->avail_in);
        return -1;
    }
    *out_len = zs->total_out;
    return 0;
}

int engine_deflate(engine *e, const unsigned char *dict, size_t dict_len,
                   const unsigned char *data, size_t len, int final, unsigned char *out,
                   size_t cap, size_t *out_len, char *err, size_t err_len) {
    const engine_conf *c = &e->conf;
    if (c->kind != ENGINE_ZLIB && (!final || dict_len > 0)) {
        snprintf(err, err_len, "%s writes whole streams only (no dictionary, no sync flush)",
                 engine_name(c->kind));
        return -1;
    }
    if (len > UINT32_MAX || cap > UINT32_MAX) {
        snprintf(err, err_len, "a %zu-byte block is too large", len);
        return -1;
    }
    comp *k = comp_get(e);
    if (k == NULL) {
        snprintf(err, err_len, "no memory for a %s compressor", engine_name(c->kind));
        return -1;
    }
    int rc = 0;
    if (c->kind == ENGINE_ZLIB) {
        rc = zlib_block(&k->u.zs, c, dict, dict_len, data, len, final, out, cap, out_len, err,
                        err_len);
    } else if (c->kind == ENGINE_LIBDEFLATE) {
        *out_len = libdeflate_deflate_compress(k->u.ld, data, len, out, cap);
        if (*out_len == 0) {
            snprintf(err, err_len, "libdeflate: output larger than its bound (%zu bytes)", cap);
            rc = -1;
        }
    } else {
        rc = isal_block(k, c, data, len, out, cap, out_len, err, err_len);
    }
    comp_put(e, k);
    return rc;
}
