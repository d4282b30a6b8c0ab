/* What pgzip and mpi_pgzip share (see gzip_util.h). */
#define _POSIX_C_SOURCE 200809L /* sigaction */
#include "gzip_util.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

double mib(uint64_t bytes) { return (double)bytes / (double)MIB; }

void put_le32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

void gzip_header(unsigned char hdr[10], unsigned char xfl) {
    static const unsigned char h[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    memcpy(hdr, h, sizeof h);
    hdr[8] = xfl;
}

void catch_stop_signals(void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* Set once by main before any thread starts; read-only afterwards. */
static const char *usage_prog = "pgzip";
static int usage_print = 1;

void usage_init(const char *prog, int print) {
    usage_prog = prog;
    usage_print = print;
}

int bad_usage(const char *fmt, ...) {
    if (usage_print) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "%s: ", usage_prog);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\nTry '%s --help'.\n", usage_prog);
    }
    return -1;
}

/* A decimal number with nothing before it; 0 and *out on success. */
static int parse_u64(const char *s, uint64_t *out, char **end) {
    if (s == NULL || *s < '0' || *s > '9') return -1;
    errno = 0;
    unsigned long long v = strtoull(s, end, 10);
    if (errno != 0) return -1;
    *out = v;
    return 0;
}

int parse_uint(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out) {
    char *end;
    if (parse_u64(s, out, &end) != 0 || *end != '\0')
        return bad_usage("%s: '%s' is not a number", opt, s);
    if (*out < lo || *out > hi)
        return bad_usage("%s %s is out of range (%" PRIu64 "..%" PRIu64 ")", opt, s, lo, hi);
    return 0;
}

int parse_size(const char *s, size_t *out) {
    uint64_t v;
    char *end;
    if (parse_u64(s, &v, &end) != 0)
        return bad_usage("--block: '%s' is not a size (like 65536, 64K or 1M)", s);
    uint64_t mul = 1;
    if (*end == 'k' || *end == 'K') mul = KIB, end++;
    else if (*end == 'm' || *end == 'M') mul = MIB, end++;
    if (mul != 1 && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0)) end += strlen(end);
    if (*end != '\0')
        return bad_usage("--block: '%s' is not a size (like 65536, 64K or 1M)", s);
    if (v > MAX_BLOCK || v * mul > MAX_BLOCK || v * mul < MIN_BLOCK)
        return bad_usage("--block %s is out of range: at least 16K (16384), at most 64M", s);
    *out = (size_t)(v * mul);
    return 0;
}

void common_defaults(common_options *co) {
    *co = (common_options){.level = 6, .block = DEFAULT_BLOCK, .corpus_mib = DEFAULT_CORPUS_MIB};
}

int parse_common(int c, const char *arg, common_options *co) {
    uint64_t v;
    switch (c) {
    case OPT_THREADS:
        if (parse_uint("--threads", arg, 1, KNIT_MAX_THREADS, &v) != 0) return -1;
        co->threads = (unsigned)v;
        return 1;
    case OPT_SCHED:
        co->sched = arg;
        return 1;
    case OPT_LEVEL:
        if (parse_uint("--level", arg, 0, 9, &v) != 0) return -1;
        co->level = (int)v;
        co->level_given = 1;
        return 1;
    case OPT_BLOCK:
        return parse_size(arg, &co->block) != 0 ? -1 : 1;
    case OPT_CORPUS_MIB:
        if (parse_uint("--corpus-mib", arg, 0, MAX_CORPUS_MIB, &v) != 0) return -1;
        co->corpus_mib = (unsigned)v;
        co->corpus_given = 1;
        return 1;
    default:
        return 0;
    }
}

void usage_common(FILE *f, const char *threads_default) {
    fprintf(f,
            "  --threads N       workers (default: %s; at most %u)\n"
            "  --sched NAME      claim discipline (ticket, dekker, single, ...;\n"
            "                    default: $KNIT_SCHED, else ticket)\n"
            "  --block SIZE      block size with K or M suffix, 16K..64M (default 1M)\n"
            "  --corpus-mib N    built-in corpus size in MiB (default %u)\n",
            threads_default, KNIT_MAX_THREADS, DEFAULT_CORPUS_MIB);
}

knit_buf item_alloc(knit_pool *pool, size_t len, _Atomic uint64_t *arena,
                    _Atomic uint64_t *malloced) {
    /* The counters are statistics read after the pipeline has finished
     * (knit_pipeline_run returns after every stage): relaxed, nothing to
     * order. */
    void *p = knit_payload_alloc(pool, len);
    if (p != NULL) {
        knit_buf b = knit_payload_buf(pool, p, len);
        if (b.data != NULL) {
            atomic_fetch_add_explicit(arena, 1, memory_order_relaxed);
            return b;
        }
        knit_payload_free(pool, p);
    }
    p = malloc(len);
    if (p == NULL) return (knit_buf){0};
    atomic_fetch_add_explicit(malloced, 1, memory_order_relaxed);
    return knit_buf_malloced(p, len);
}

size_t arena_bytes(unsigned threads, uint64_t item_bytes) {
    uint64_t slots = 2 * (2 * (uint64_t)threads + 2) + 4;
    uint64_t arena = slots * (item_bytes + item_bytes / 4);
    if (arena < 64 * MIB) arena = 64 * MIB;
    if (arena > 4096 * (uint64_t)MIB) arena = 4096 * (uint64_t)MIB;
    return (size_t)((arena + 2 * MIB - 1) / (2 * MIB) * (2 * MIB));
}

void keep_tail(unsigned char *tail, size_t *tail_len, const unsigned char *data, size_t n) {
    if (n >= DICT_BYTES) {
        memcpy(tail, data + n - DICT_BYTES, DICT_BYTES);
        *tail_len = DICT_BYTES;
        return;
    }
    size_t keep = *tail_len + n > DICT_BYTES ? DICT_BYTES - n : *tail_len;
    memmove(tail, tail + *tail_len - keep, keep);
    memcpy(tail + keep, data, n);
    *tail_len = keep + n;
}

int run_blocks(knit_pool *pool, unsigned threads, knit_input_fn input, knit_stage_fn deflate,
               knit_stage_fn sink, void *ctx, knit_pipeline_stats *st, char *why,
               size_t why_len) {
    knit_stage stages[2] = {
        {KNIT_STAGE_PARALLEL, deflate, ctx},
        {KNIT_STAGE_SERIAL_IN_ORDER, sink, ctx},
    };
    knit_pipeline_options po = KNIT_PIPELINE_OPTIONS_INIT;
    po.input = input;
    po.input_ctx = ctx;
    po.stages = stages;
    po.nstages = 2;
    po.max_in_flight = 2 * (size_t)threads + 2;
    knit_pipeline *pl;
    int rc = knit_pipeline_create(pool, &po, &pl);
    if (rc != 0) {
        snprintf(why, why_len, "%s", knit_last_error());
        return rc;
    }
    rc = knit_pipeline_run(pl);
    snprintf(why, why_len, "%s", rc != 0 ? knit_last_error() : "");
    if (st != NULL) knit_pipeline_stats_get(pl, st);
    knit_pipeline_destroy(pl);
    return rc;
}

int gz_verify(FILE *f, const char *name, uint64_t total, verify_want_fn want, void *want_ctx,
              void (*progress)(void *ctx, uint64_t done), void *progress_ctx,
              unsigned *members, char *err, size_t err_len) {
    const size_t chunk = 256 * KIB;
    unsigned char *zbuf = malloc(chunk), *got = malloc(chunk), *exp = malloc(chunk);
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    int zinit = 0, rc = -1;
    uint64_t done = 0;
    *members = 0;
    err[0] = '\0';
    if (!zbuf || !got || !exp) {
        snprintf(err, err_len, "out of memory");
        goto out;
    }
    if (inflateInit2(&zs, 31) != Z_OK) { /* 31: gzip; checks CRC and ISIZE */
        snprintf(err, err_len, "inflateInit2 failed");
        goto out;
    }
    zinit = 1;
    for (;;) {
        if (zs.avail_in == 0) {
            size_t n = fread(zbuf, 1, chunk, f);
            if (n == 0) {
                if (ferror(f)) {
                    snprintf(err, err_len, "read %s: %s", name, strerror(errno));
                    goto out;
                }
                break; /* the end: checked below */
            }
            zs.next_in = zbuf;
            zs.avail_in = (uInt)n;
        }
        zs.next_out = got;
        zs.avail_out = (uInt)chunk;
        int zr = inflate(&zs, Z_NO_FLUSH);
        if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
            snprintf(err, err_len, "%s is not valid gzip after %" PRIu64 " bytes: %s", name,
                     done, zs.msg ? zs.msg : zError(zr));
            goto out;
        }
        size_t n = chunk - zs.avail_out;
        if (n > 0) {
            if (want(want_ctx, exp, n) != n) {
                snprintf(err, err_len, "%s inflates to more than the %" PRIu64 " input bytes",
                         name, total);
                goto out;
            }
            if (memcmp(got, exp, n) != 0) {
                size_t i = 0;
                while (got[i] == exp[i]) i++;
                snprintf(err, err_len, "byte %" PRIu64 " differs from the input", done + i);
                goto out;
            }
            done += n;
            if (progress) progress(progress_ctx, done);
        }
        if (zr == Z_STREAM_END) { /* a member ends; another may follow */
            ++*members;
            inflateReset(&zs);
        }
    }
    /* After a whole member inflateReset zeroes the totals: anything else is
     * a member cut short. */
    if (*members == 0 || zs.total_in != 0 || zs.total_out != 0) {
        snprintf(err, err_len, "%s is truncated", name);
        goto out;
    }
    if (done != total) {
        snprintf(err, err_len, "%s inflates to %" PRIu64 " bytes, not %" PRIu64, name, done,
                 total);
        goto out;
    }
    rc = 0;
out:
    if (zinit) inflateEnd(&zs);
    free(zbuf);
    free(got);
    free(exp);
    return rc;
}
