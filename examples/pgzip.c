/* pgzip: a parallel gzip on the knit pipeline.
 *
 *   ./bazelw run //examples:pgzip                  # compress a built-in 256 MiB
 *                                                  # corpus, verify, report
 *   pgzip [options] [input [output]]               # compress a file ("-": stdio)
 *
 * The pipeline (knit_pipeline_*):
 *   input     (the thread in knit_pipeline_run) reads one block into an item:
 *             a header, the previous 32 KiB of input (the dictionary; zlib
 *             only) and the block. It reads one block ahead, so it knows
 *             which is the last.
 *   stage 1   PARALLEL: deflate of the block with the engine (engine.h) and
 *             the block's CRC-32 with the engine's CRC code. zlib: raw
 *             deflate primed with the dictionary, ending with a sync flush
 *             (byte-aligned, not final) or, for the last block, the end of
 *             the stream. libdeflate and ISA-L: a whole gzip member (header,
 *             deflate, CRC-32, ISIZE). The item becomes a new buffer: a
 *             header and that output.
 *   stage 2   SERIAL_IN_ORDER: fwrite, combine the CRC (zlib: crc32_combine),
 *             count, draw the progress bar.
 * Items live in the pool's payload arena (knit_payload_alloc +
 * knit_payload_buf, moved between stages without copies); when the arena
 * is full the example falls back to malloc (knit_buf_malloced) rather than
 * wait, so the arena is an optimisation, never a limit.
 *
 * With zlib the output is one gzip member (RFC 1952) like pigz writes: a
 * 10-byte header (no name, mtime 0), the blocks' deflate data back to back
 * (each non-last block ends on a byte boundary with an empty stored block,
 * so the concatenation is one valid deflate stream), then CRC-32 and ISIZE.
 * libdeflate cannot prime a block with a dictionary nor end one without
 * ending its stream, so with it (and with ISA-L, whose priming costs more
 * speed than it saves bytes) each block is a member of its own; gzip,
 * pigz, zlib's gzread and the verifier here read them as one file.
 * Files are written to "<output>.XXXXXX" and renamed at the end: a failure
 * (or ^C) never leaves a partial output behind.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include <knit/knit.h>

#include "corpus.h"    /* the built-in corpus, shared with mpi_pgzip */
#include "engine.h"    /* zlib, libdeflate, ISA-L */
#include "gzip_util.h" /* sizes, option parsing, the verifier */

/* Exit codes: 0 done, 1 failure (I/O, compression, verification),
 * 2 usage (bad option or value, unknown discipline or engine). */

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */

static const char *prog = "pgzip";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ^C, SIGTERM, SIGHUP: stop the pipeline and clean up instead of dying
 * with a temporary file behind. */
static atomic_int interrupted; /* lock-free: fine in a handler, read by workers */

/* relaxed, both sides: the word is the whole message (which signal), no
 * other data is published with it, so there is nothing to order. */
static void on_signal(int sig) {
    atomic_store_explicit(&interrupted, sig, memory_order_relaxed);
}

static int stopped(void) { return atomic_load_explicit(&interrupted, memory_order_relaxed); }

/* Handlers on, and the signals blocked in the calling thread: call it
 * before the pool starts its workers, which inherit the mask, then
 * unblock_signals() in the main thread, so that a signal interrupts the
 * main thread's read() rather than a worker's wait. */
static void catch_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    catch_stop_signals(on_signal);
}

static void unblock_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

/* ------------------------------------------------------------------ */
/* Progress bar (stderr, only when it is a terminal)                   */

typedef struct progress {
    int on, drawn;
    const char *what;
    uint64_t total; /* 0: unknown */
    double start, last;
} progress;

static void progress_draw(progress *pg, uint64_t done, int final) {
    if (!pg->on) return;
    double t = now_s();
    if (final ? !pg->drawn : t - pg->last < 0.1) return; /* quick: no bar at all */
    pg->last = t;
    pg->drawn = 1;
    double el = t - pg->start, rate = el > 0 ? mib(done) / el : 0;
    char line[160];
    int n;
    if (pg->total) {
        double frac = (double)done / (double)pg->total;
        if (frac > 1) frac = 1;
        char bar[21];
        int fill = (int)(frac * 20);
        for (int i = 0; i < 20; i++) bar[i] = i < fill ? '#' : '.';
        bar[20] = '\0';
        double eta = rate > 0 ? (mib(pg->total) - mib(done)) / rate : 0;
        if (eta < 0) eta = 0;
        n = snprintf(line, sizeof line,
                     "%s: %s [%s] %3.0f%% %.1f/%.1f MiB %.1f MiB/s ETA %d:%02d",
                     prog, pg->what, bar, frac * 100, mib(done), mib(pg->total), rate,
                     (int)eta / 60, (int)eta % 60);
    } else {
        n = snprintf(line, sizeof line, "%s: %s %.1f MiB %.1f MiB/s", prog, pg->what,
                     mib(done), rate);
    }
    (void)n;
    fprintf(stderr, "\r%-78s%s", line, final ? "\n" : "");
    fflush(stderr);
}

/* Ends the bar's line, if one was drawn. */
static void progress_abort(progress *pg) {
    if (pg->on && pg->drawn) fputc('\n', stderr);
    pg->drawn = 0;
}

/* ------------------------------------------------------------------ */
/* The compressor                                                      */

/* What the input stage makes: this header, the dictionary (the 32 KiB of
 * input before the block, less at the start), the block. */
typedef struct in_item {
    uint64_t seq;     /* input order, checked against the stage's seq */
    uint32_t len;     /* block bytes */
    uint32_t dict_len;
    uint32_t last;    /* the final block: ends with Z_FINISH */
    uint32_t pad;
} in_item;

/* What the compress stage makes: this header, then the deflate output. */
typedef struct out_item {
    uint64_t seq;
    uint32_t in_len, out_len;
    uint32_t crc; /* CRC-32 of the block */
    uint32_t last;
} out_item;

/* Where the input comes from: a file descriptor or the corpus. */
typedef struct source {
    int fd; /* -1: the corpus */
    corpus *gen;
    const char *name;
} source;

typedef struct job {
    knit_pool *pool;
    engine_conf conf;
    engine *eng; /* the compressors the workers share */
    size_t block;
    /* input stage */
    source *src;
    knit_buf ahead;       /* the block read ahead (empty at the end) */
    int primed, eof;
    uint64_t next_seq;
    unsigned char tail[DICT_BYTES]; /* the last input bytes */
    size_t tail_len;
    uint64_t bytes_read;
    /* arena vs malloc, counted by any stage */
    _Atomic uint64_t arena_items, malloc_items;
    _Atomic unsigned deflating, deflating_max; /* compress stages running */
    /* write stage */
    FILE *out;
    const char *out_name;
    uint64_t write_seq;   /* the seq the writer expects next */
    uint32_t crc; /* zlib's single member: the CRC-32 of all input so far */
    uint64_t in_total, out_total; /* out_total: what the blocks wrote */
    int saw_last;
    progress pg;
} job;

/* Memory for an item: the pool's arena if it has room, else malloc. */
static knit_buf job_alloc(job *j, size_t len) {
    return item_alloc(j->pool, len, &j->arena_items, &j->malloc_items);
}

/* Reads up to n bytes (fewer only at the end). -1 with errno on failure. */
static ssize_t source_read(job *j, unsigned char *buf, size_t n) {
    source *s = j->src;
    if (s->fd < 0) return (ssize_t)corpus_fill(s->gen, buf, n);
    size_t got = 0;
    while (got < n) {
        if (stopped()) {
            errno = EINTR;
            return -1;
        }
        ssize_t r = read(s->fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* Reads the next block into a new item; an empty buffer at the end of the
 * input. < 0 with knit_error() on failure. */
static int read_block(job *j, knit_buf *out) {
    *out = (knit_buf){0};
    if (j->eof) return 0;
    size_t hdr = sizeof(in_item) + j->tail_len;
    knit_buf b = job_alloc(j, hdr + j->block);
    if (b.data == NULL)
        return knit_error(KNIT_ENOMEM, "no memory for a %zu-byte block", j->block);
    unsigned char *data = (unsigned char *)b.data + hdr;
    ssize_t n = source_read(j, data, j->block);
    if (n < 0) {
        int e = errno;
        knit_buf_free(&b);
        if (stopped()) return knit_error(KNIT_ECANCELED, "interrupted");
        return knit_error(KNIT_EINVAL, "read %s: %s", j->src->name, strerror(e));
    }
    if (n == 0) {
        knit_buf_free(&b);
        j->eof = 1;
        return 0;
    }
    if ((size_t)n < j->block) j->eof = 1; /* a short read is the end */
    in_item *h = b.data;
    *h = (in_item){.seq = j->next_seq++, .len = (uint32_t)n,
                   .dict_len = (uint32_t)j->tail_len};
    memcpy(h + 1, j->tail, j->tail_len);
    b.len = hdr + (size_t)n;
    /* Keep the last 32 KiB of all input so far: the next block's
     * dictionary (zlib only; the other engines write a member per block). */
    if (!j->conf.members) keep_tail(j->tail, &j->tail_len, data, (size_t)n);
    j->bytes_read += (size_t)n;
    *out = b;
    return 0;
}

/* The pipeline's input: one block per call, in order. It reads one block
 * ahead so that it can mark the last one. */
static int input_fn(void *ctx, knit_buf *item) {
    job *j = ctx;
    if (stopped()) return knit_error(KNIT_ECANCELED, "interrupted");
    if (!j->primed) {
        j->primed = 1;
        int rc = read_block(j, &j->ahead);
        if (rc < 0) return rc;
    }
    if (j->ahead.data == NULL) return 0;
    knit_buf cur = j->ahead;
    j->ahead = (knit_buf){0};
    int rc = read_block(j, &j->ahead);
    if (rc < 0) {
        knit_buf_free(&cur);
        return rc;
    }
    if (j->ahead.data == NULL) ((in_item *)cur.data)->last = 1;
    *item = cur;
    return 1;
}

static int deflate_block(job *j, uint64_t seq, knit_buf *item);

/* Stage 1 (parallel): deflate one block. */
static int compress_stage(void *ctx, uint64_t seq, knit_buf *item) {
    job *j = ctx;
    if (item->data == NULL || item->len < sizeof(in_item))
        return knit_error(KNIT_EINVAL, "compress: item %" PRIu64 " is empty", seq);
    const in_item *h = item->data;
    if (h->seq != seq)
        return knit_error(KNIT_EINVAL,
                          "compress: stage got seq %" PRIu64 " for block %" PRIu64,
                          seq, h->seq);
    if (item->len != sizeof(in_item) + h->dict_len + h->len)
        return knit_error(KNIT_EINVAL, "compress: block %" PRIu64 " has %zu bytes, "
                          "expected %zu", seq, item->len,
                          sizeof(in_item) + h->dict_len + (size_t)h->len);
    /* Statistics only (how many blocks deflate at once), read after the
     * pipeline has finished: relaxed, nothing to order. */
    unsigned now = atomic_fetch_add_explicit(&j->deflating, 1, memory_order_relaxed) + 1;
    unsigned seen = atomic_load_explicit(&j->deflating_max, memory_order_relaxed);
    while (now > seen &&
           !atomic_compare_exchange_weak_explicit(&j->deflating_max, &seen, now,
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
    int rc = deflate_block(j, seq, item);
    atomic_fetch_sub_explicit(&j->deflating, 1, memory_order_relaxed);
    return rc;
}

/* The block as raw deflate (zlib: primed with the dictionary, ending with
 * a sync flush unless it is the last), or as a whole gzip member (the
 * other engines: header, deflate, CRC-32, ISIZE). */
static int deflate_block(job *j, uint64_t seq, knit_buf *item) {
    const in_item *h = item->data;
    const unsigned char *dict = (const unsigned char *)(h + 1);
    const unsigned char *data = dict + h->dict_len;
    size_t wrap = j->conf.members ? 10 + 8 : 0;
    size_t cap = engine_bound(&j->conf, h->len);
    knit_buf out = job_alloc(j, sizeof(out_item) + wrap + cap);
    if (out.data == NULL)
        return knit_error(KNIT_ENOMEM, "compress: no memory for %zu bytes", cap);
    unsigned char *dst = (unsigned char *)out.data + sizeof(out_item);
    size_t n = 0;
    char err[200];
    if (engine_deflate(j->eng, dict, h->dict_len, data, h->len, h->last || j->conf.members,
                       dst + (wrap ? 10 : 0), cap, &n, err, sizeof err) != 0) {
        knit_buf_free(&out);
        return knit_error(KNIT_EINVAL, "deflate of block %" PRIu64 " failed: %s", seq, err);
    }
    uint32_t crc = engine_crc32(j->eng, 0, data, h->len);
    if (wrap) {
        gzip_header(dst, engine_xfl(&j->conf));
        put_le32(dst + 10 + n, crc);
        put_le32(dst + 10 + n + 4, h->len); /* ISIZE */
        n += wrap;
    }
    out_item *oh = out.data;
    *oh = (out_item){.seq = h->seq, .in_len = h->len, .out_len = (uint32_t)n, .crc = crc,
                     .last = h->last};
    out.len = sizeof(out_item) + n;
    knit_buf_free(item); /* the input block is done with */
    *item = out;
    return 0;
}

/* Stage 2 (serial, in order): write, combine the CRC, show progress. */
static int write_stage(void *ctx, uint64_t seq, knit_buf *item) {
    job *j = ctx;
    const out_item *h = item->data;
    if (h == NULL || item->len < sizeof *h || item->len != sizeof *h + h->out_len)
        return knit_error(KNIT_EINVAL, "write: item %" PRIu64 " is malformed", seq);
    if (seq != j->write_seq || h->seq != seq)
        return knit_error(KNIT_EINVAL,
                          "write: got block %" PRIu64 " (stage seq %" PRIu64
                          ") where block %" PRIu64 " was due",
                          h->seq, seq, j->write_seq);
    if (stopped()) return knit_error(KNIT_ECANCELED, "interrupted");
    if (fwrite(h + 1, 1, h->out_len, j->out) != h->out_len)
        return knit_error(KNIT_EINVAL, "write %s: %s", j->out_name, strerror(errno));
    if (!j->conf.members) /* one member: its CRC spans every block */
        j->crc = (uint32_t)crc32_combine(j->crc, h->crc, (z_off_t)h->in_len);
    j->in_total += h->in_len;
    j->out_total += h->out_len;
    j->write_seq++;
    if (h->last) j->saw_last = 1;
    knit_buf_free(item); /* early: the arena gets it back now */
    progress_draw(&j->pg, j->in_total, 0);
    return 0;
}

typedef struct result {
    uint64_t in_bytes, out_bytes; /* out_bytes: the whole .gz */
    double seconds;
    knit_pipeline_stats pst;
} result;

/* Compresses j->src to j->out: one gzip member (zlib), or one per block
 * (the other engines; compress_stage writes each whole). 0, or -1 after
 * printing why. */
static int compress_stream(job *j, result *res) {
    static const unsigned char empty_final[2] = {0x03, 0x00};
    knit_pool_stats_t ps = {.size = sizeof ps};
    knit_pool_stats(j->pool, &ps);
    unsigned threads = ps.threads ? ps.threads : 1;

    unsigned char hdr[10];
    gzip_header(hdr, engine_xfl(&j->conf));
    double t0 = now_s();
    j->pg.start = j->pg.last = t0;
    size_t head = j->conf.members ? 0 : sizeof hdr; /* written before the blocks */
    if (fwrite(hdr, 1, head, j->out) != head) {
        fprintf(stderr, "%s: write %s: %s\n", prog, j->out_name, strerror(errno));
        return -1;
    }

    char why[512];
    int rc = run_blocks(j->pool, threads, input_fn, compress_stage, write_stage, j, &res->pst,
                        why, sizeof why);
    knit_buf_free(&j->ahead); /* read ahead before a stop */
    if (rc != 0) {
        progress_abort(&j->pg);
        if (stopped())
            fprintf(stderr, "%s: interrupted\n", prog);
        else
            fprintf(stderr, "%s: %s\n", prog, why);
        return -1;
    }
    /* Sanity checks on what the pipeline delivered. */
    if (j->in_total != j->bytes_read || j->write_seq != j->next_seq ||
        res->pst.items != j->next_seq || res->pst.completed != j->next_seq ||
        (j->next_seq > 0 && !j->saw_last)) {
        fprintf(stderr,
                "%s: internal error: read %" PRIu64 " bytes in %" PRIu64
                " blocks but wrote %" PRIu64 " bytes in %" PRIu64
                " blocks (pipeline: %" PRIu64 " items, %" PRIu64 " completed)\n",
                prog, j->bytes_read, j->next_seq, j->in_total, j->write_seq,
                res->pst.items, res->pst.completed);
        return -1;
    }
    /* The single member's trailer. Empty input, any engine: one member
     * whose deflate stream is an empty final block. */
    unsigned char trailer[8];
    put_le32(trailer, j->crc);
    put_le32(trailer + 4, (uint32_t)j->in_total); /* ISIZE: mod 2^32 */
    size_t extra = 0;
    if (j->next_seq == 0) {
        if (fwrite(hdr, 1, sizeof hdr - head, j->out) != sizeof hdr - head ||
            fwrite(empty_final, 1, sizeof empty_final, j->out) != sizeof empty_final)
            goto write_failed;
        extra = sizeof hdr - head + sizeof empty_final;
    }
    if (j->next_seq == 0 || !j->conf.members) {
        if (fwrite(trailer, 1, sizeof trailer, j->out) != sizeof trailer) goto write_failed;
        extra += sizeof trailer;
    }
    if (fflush(j->out) != 0) goto write_failed;
    progress_draw(&j->pg, j->in_total, 1);
    res->seconds = now_s() - t0;
    res->in_bytes = j->in_total;
    res->out_bytes = head + j->out_total + extra;
    return 0;
write_failed:
    progress_abort(&j->pg);
    fprintf(stderr, "%s: write %s: %s\n", prog, j->out_name, strerror(errno));
    return -1;
}

/* ------------------------------------------------------------------ */
/* Options                                                             */

typedef struct options {
    common_options c; /* --threads (0: one per CPU), --sched, --level, --block,
                         --corpus-mib */
    engine_conf conf; /* --engine, --level, --fast */
    int quiet;
    const char *corpus_out;
    const char *timeline; /* --timeline FILE: the pool's timeline */
    const char *in, *out;
} options;

static void usage(FILE *f) {
    fprintf(f,
            "usage: %s [options] [input [output]]\n"
            "Compresses input (\"-\": stdin) to output (\"-\": stdout; default:\n"
            "input.gz, or stdout for stdin) as gzip, deflating blocks in\n"
            "parallel on a knit pipeline. With no input it compresses a built-in\n"
            "text corpus to a temporary file, verifies the round trip with zlib\n"
            "and prints the throughput and pool statistics.\n"
            "\n",
            prog);
    usage_common(f, "one per CPU");
    fprintf(f,
            "  --level 0-9       compression level on pigz's scale: the output is no\n"
            "                    larger than pigz -N's (default 6)\n"
            "  --engine NAME     zlib (one gzip member, like pigz), libdeflate or\n"
            "                    isal (one member per block); default: the fastest\n"
            "                    that matches pigz's ratio at the level: isal at 1,\n"
            "                    libdeflate otherwise. isal matches pigz up to -2.\n"
            "  --fast            isal's fastest level (no ratio promise)\n"
            "  --quiet, -q       no progress bar\n"
            "  --corpus-out FILE write the built-in corpus, uncompressed, and exit\n"
            "                    (to compare with other compressors)\n"
            "  --timeline FILE   write what every worker did as a Chrome Trace\n"
            "                    Event JSON (ui.perfetto.dev; ./bazelw run\n"
            "                    //tools:timeline -- FILE --png chart.png)\n"
            "  --help, -h        this text\n"
            "\n"
            "Exit status: 0 done, 1 failure, 2 bad usage.\n");
}

/* --engine, --level and --fast into o->conf: 0, or -1 (reported). */
static int parse_engine(const char *name, int fast, options *o) {
    engine_kind kind = engine_default(o->c.level);
    if (name != NULL && engine_parse(name, &kind) != 0)
        return bad_usage("--engine: unknown engine '%s' (valid: %s)", name, ENGINE_NAMES);
    if (fast) {
        if (o->c.level_given) return bad_usage("--fast and --level exclude each other");
        if (name != NULL && kind != ENGINE_ISAL)
            return bad_usage("--fast is isal's fastest level; it takes no --engine %s", name);
        engine_configure_fast(&o->conf);
        return 0;
    }
    char why[200];
    if (engine_configure(kind, o->c.level, &o->conf, why, sizeof why) != 0)
        return bad_usage("--engine %s --level %d: %s", engine_name(kind), o->c.level, why);
    return 0;
}

/* 0, 1 (--help: exit 0) or -1 (bad usage, reported). */
static int parse_options(int argc, char **argv, options *o) {
    enum { O_ENGINE = OPT_OWN, O_FAST, O_CORPUS_OUT, O_TIMELINE };
    static const struct option longs[] = {
        COMMON_LONG_OPTIONS,
        {"engine", required_argument, NULL, O_ENGINE},
        {"fast", no_argument, NULL, O_FAST},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"corpus-out", required_argument, NULL, O_CORPUS_OUT},
        {"timeline", required_argument, NULL, O_TIMELINE},
        {NULL, 0, NULL, 0},
    };
    *o = (options){0};
    common_defaults(&o->c);
    opterr = 0;
    int c, fast = 0;
    const char *engine_arg = NULL;
    while ((c = getopt_long(argc, argv, ":qh", longs, NULL)) != -1) {
        int common = parse_common(c, optarg, &o->c);
        if (common < 0) return -1;
        if (common > 0) continue;
        switch (c) {
        case O_ENGINE:
            engine_arg = optarg;
            break;
        case O_FAST:
            fast = 1;
            break;
        case O_CORPUS_OUT:
            o->corpus_out = optarg;
            break;
        case O_TIMELINE:
            if (!*optarg) return bad_usage("--timeline: empty file name");
            o->timeline = optarg;
            break;
        case 'q':
            o->quiet = 1;
            break;
        case 'h':
            usage(stdout);
            return 1;
        case ':':
            return bad_usage("option '%s' needs a value", argv[optind - 1]);
        default:
            return bad_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    int rest = argc - optind;
    if (rest > 2) return bad_usage("too many arguments ('%s' ...)", argv[optind + 2]);
    if (rest >= 1) o->in = argv[optind];
    if (rest == 2) o->out = argv[optind + 1];
    if (o->in != NULL && o->c.corpus_given)
        return bad_usage("--corpus-mib applies only without an input file");
    if (o->in != NULL && o->corpus_out != NULL)
        return bad_usage("--corpus-out takes no input file");
    if ((o->in && !*o->in) || (o->out && !*o->out)) return bad_usage("empty file name");
    return parse_engine(engine_arg, fast, o);
}

/* A pool sized for the job: the arena holds every item in flight (input
 * blocks and their compressed copies, jemalloc's size-class rounding
 * included), and KNIT_FAIL makes a full arena a NULL from
 * knit_payload_alloc (the example then uses malloc) instead of a wait. */
static int make_pool(const options *o, knit_pool **pool) {
    knit_pool_options po = KNIT_POOL_OPTIONS_INIT;
    po.threads = o->c.threads;
    po.sched = o->c.sched;
    po.timeline = o->timeline; /* NULL: $KNIT_TIMELINE, else none */
    po.backpressure = KNIT_FAIL;
    unsigned threads = o->c.threads;
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (unsigned)n : 1;
    }
    uint64_t item = sizeof(in_item) + DICT_BYTES + o->c.block;
    uint64_t bound = sizeof(out_item) + 18 + engine_bound(&o->conf, o->c.block);
    if (bound > item) item = bound;
    po.arena_bytes = arena_bytes(threads, item);
    po.max_payload = po.arena_bytes;
    int rc = knit_pool_create(&po, pool);
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", prog, knit_last_error());
        return rc == KNIT_EINVAL ? EXIT_USAGE : 1; /* a bad --sched is usage */
    }
    return 0;
}

/* 0, or -1 if out of memory (reported). */
static int job_init(job *j, const options *o, knit_pool *pool, source *src, FILE *out,
                    const char *out_name, uint64_t total, const char *what) {
    memset(j, 0, sizeof *j);
    j->pool = pool;
    j->conf = o->conf;
    j->eng = engine_new(&o->conf);
    j->block = o->c.block;
    j->src = src;
    j->out = out;
    j->out_name = out_name;
    j->pg.on = !o->quiet && isatty(2);
    j->pg.what = what;
    j->pg.total = total;
    if (j->eng == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return -1;
    }
    return 0;
}

static void job_fini(job *j) {
    knit_buf_free(&j->ahead);
    engine_free(j->eng);
    j->eng = NULL;
}

/* ------------------------------------------------------------------ */
/* File mode                                                           */

static int compress_file(const options *o, knit_pool *pool) {
    int to_stdout = 0, from_stdin = strcmp(o->in, "-") == 0;
    char *out_name = NULL;
    if (o->out != NULL) {
        to_stdout = strcmp(o->out, "-") == 0;
        out_name = strdup(o->out);
    } else if (from_stdin) {
        to_stdout = 1;
        out_name = strdup("-");
    } else if (asprintf(&out_name, "%s.gz", o->in) < 0) {
        out_name = NULL;
    }
    if (out_name == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    const char *shown_out = to_stdout ? "(stdout)" : out_name;
    int status = 1, fd = -1, tmp_fd = -1;
    char *tmp_name = NULL;
    FILE *out = NULL;
    struct stat st;
    mode_t mode = 0666;

    if (to_stdout && isatty(1)) {
        fprintf(stderr, "%s: refusing to write compressed data to a terminal "
                "(name an output file, or redirect stdout)\n", prog);
        goto done;
    }
    /* The input first: an unreadable input creates no output at all. */
    if (from_stdin) {
        fd = 0;
    } else {
        fd = open(o->in, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            fprintf(stderr, "%s: cannot open %s: %s\n", prog, o->in, strerror(errno));
            goto done;
        }
    }
    if (fstat(fd, &st) != 0) {
        fprintf(stderr, "%s: cannot stat %s: %s\n", prog, o->in, strerror(errno));
        goto done;
    }
    if (S_ISDIR(st.st_mode)) {
        fprintf(stderr, "%s: %s is a directory\n", prog, o->in);
        goto done;
    }
    uint64_t total = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    if (S_ISREG(st.st_mode) && !from_stdin) mode = st.st_mode & 0777;

    if (to_stdout) {
        out = stdout;
    } else {
        if (asprintf(&tmp_name, "%s.XXXXXX", out_name) < 0) {
            tmp_name = NULL;
            fprintf(stderr, "%s: out of memory\n", prog);
            goto done;
        }
        tmp_fd = mkostemp(tmp_name, O_CLOEXEC);
        if (tmp_fd < 0) {
            fprintf(stderr, "%s: cannot create %s: %s\n", prog, tmp_name,
                    strerror(errno));
            free(tmp_name);
            tmp_name = NULL;
            goto done;
        }
        out = fdopen(tmp_fd, "wb");
        if (out == NULL) {
            fprintf(stderr, "%s: %s: %s\n", prog, tmp_name, strerror(errno));
            goto done;
        }
        tmp_fd = -1; /* owned by out */
    }
    static char obuf[1 << 20];
    setvbuf(out, obuf, _IOFBF, sizeof obuf);

    source src = {.fd = fd, .name = from_stdin ? "(stdin)" : o->in};
    job j;
    result res;
    memset(&res, 0, sizeof res);
    int rc = job_init(&j, o, pool, &src, out, shown_out, total, "compressing");
    if (rc == 0) rc = compress_stream(&j, &res);
    job_fini(&j);
    if (rc != 0) goto done;

    if (!to_stdout) {
        mode_t um = umask(0);
        umask(um);
        if (fchmod(fileno(out), mode & ~um) != 0) { /* mkstemp made it 0600 */
            fprintf(stderr, "%s: chmod %s: %s\n", prog, tmp_name, strerror(errno));
            goto done;
        }
        int ce = fclose(out);
        out = NULL;
        if (ce != 0) {
            fprintf(stderr, "%s: write %s: %s\n", prog, shown_out, strerror(errno));
            goto done;
        }
        if (rename(tmp_name, out_name) != 0) {
            fprintf(stderr, "%s: cannot rename %s to %s: %s\n", prog, tmp_name, out_name,
                    strerror(errno));
            goto done;
        }
        free(tmp_name);
        tmp_name = NULL; /* nothing to clean up any more */
    } else if (fflush(stdout) != 0) {
        fprintf(stderr, "%s: write (stdout): %s\n", prog, strerror(errno));
        goto done;
    }
    if (!o->quiet && isatty(2))
        fprintf(stderr,
                "%s: %s -> %s: %.1f MiB -> %.1f MiB (%.2fx) in %.2f s, %.1f MiB/s\n",
                prog, src.name, shown_out, mib(res.in_bytes), mib(res.out_bytes),
                res.out_bytes ? (double)res.in_bytes / (double)res.out_bytes : 0.0,
                res.seconds, res.seconds > 0 ? mib(res.in_bytes) / res.seconds : 0.0);
    status = 0;
done:
    if (out != NULL && out != stdout) fclose(out);
    if (tmp_fd >= 0) close(tmp_fd);
    if (tmp_name != NULL) {
        unlink(tmp_name);
        free(tmp_name);
    }
    if (fd > 0) close(fd);
    free(out_name);
    return status;
}

/* ------------------------------------------------------------------ */
/* Corpus mode: the README's main command                              */

static size_t corpus_want(void *ctx, unsigned char *buf, size_t n) {
    return corpus_fill(ctx, buf, n);
}

static void verify_progress(void *ctx, uint64_t done) { progress_draw(ctx, done, 0); }

/* Inflates the gzip file (one member or many) and compares it with a
 * regenerated corpus, a chunk at a time. 1 if they match. */
static int verify(FILE *f, uint64_t expect_bytes, const options *o, double *secs,
                  unsigned *members) {
    corpus *gen = corpus_new(0, expect_bytes);
    char err[300] = "";
    double t0 = now_s();
    progress pg = {.on = !o->quiet && isatty(2), .what = "verifying",
                   .total = expect_bytes, .start = t0, .last = t0};
    *members = 0;
    if (gen == NULL)
        snprintf(err, sizeof err, "out of memory");
    else if (fflush(f) != 0 || fseek(f, 0, SEEK_SET) != 0)
        snprintf(err, sizeof err, "rewind: %s", strerror(errno));
    else if (gz_verify(f, "the output", expect_bytes, corpus_want, gen, verify_progress, &pg,
                       members, err, sizeof err) == 0)
        progress_draw(&pg, expect_bytes, 1);
    if (err[0]) {
        progress_abort(&pg);
        fprintf(stderr, "%s: verify: %s\n", prog, err);
    }
    *secs = now_s() - t0;
    corpus_free(gen);
    return err[0] == '\0';
}

static int write_corpus(const options *o) {
    uint64_t total = (uint64_t)o->c.corpus_mib * MIB;
    corpus *gen = corpus_new(0, total);
    unsigned char *buf = malloc(MIB);
    FILE *f = strcmp(o->corpus_out, "-") == 0 ? stdout : fopen(o->corpus_out, "wb");
    int status = 1;
    if (gen == NULL || buf == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
    } else if (f == NULL) {
        fprintf(stderr, "%s: cannot create %s: %s\n", prog, o->corpus_out,
                strerror(errno));
    } else {
        size_t n;
        status = 0;
        while ((n = corpus_fill(gen, buf, MIB)) > 0)
            if (fwrite(buf, 1, n, f) != n) break;
        if (ferror(f) || fflush(f) != 0) {
            fprintf(stderr, "%s: write %s: %s\n", prog, o->corpus_out, strerror(errno));
            status = 1;
        }
    }
    if (f != NULL && f != stdout && fclose(f) != 0 && status == 0) {
        fprintf(stderr, "%s: write %s: %s\n", prog, o->corpus_out, strerror(errno));
        status = 1;
    }
    corpus_free(gen);
    free(buf);
    return status;
}

static int run_corpus(const options *o, knit_pool *pool) {
    uint64_t total = (uint64_t)o->c.corpus_mib * MIB;
    const char *dir = getenv("TMPDIR");
    if (dir == NULL || *dir == '\0') dir = "/tmp";
    char *tmp_name = NULL;
    if (asprintf(&tmp_name, "%s/pgzip-corpus-XXXXXX", dir) < 0) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    int fd = mkostemp(tmp_name, O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot create %s: %s\n", prog, tmp_name, strerror(errno));
        free(tmp_name);
        return 1;
    }
    /* Unlinked at once: the open file is all we need, and nothing is left
     * behind whatever happens. */
    unlink(tmp_name);
    FILE *out = fdopen(fd, "w+b");
    if (out == NULL) {
        fprintf(stderr, "%s: %s: %s\n", prog, tmp_name, strerror(errno));
        close(fd);
        free(tmp_name);
        return 1;
    }
    static char obuf[1 << 20];
    setvbuf(out, obuf, _IOFBF, sizeof obuf);

    corpus *gen = corpus_new(0, total);
    if (gen == NULL) {
        fprintf(stderr, "%s: out of memory\n", prog);
        fclose(out);
        free(tmp_name);
        return 1;
    }
    source src = {.fd = -1, .gen = gen, .name = "the corpus"};
    job j;
    result res;
    memset(&res, 0, sizeof res);
    int rc = job_init(&j, o, pool, &src, out, tmp_name, total, "compressing");
    if (rc == 0) rc = compress_stream(&j, &res);
    /* After the pipeline: every stage has finished (knit_pipeline_run
     * returned), so relaxed loads see the final counts. */
    uint64_t arena_items = atomic_load_explicit(&j.arena_items, memory_order_relaxed);
    uint64_t malloc_items = atomic_load_explicit(&j.malloc_items, memory_order_relaxed);
    unsigned deflating_max = atomic_load_explicit(&j.deflating_max, memory_order_relaxed);
    size_t compressors = j.eng ? engine_compressors(j.eng) : 0;
    job_fini(&j);
    corpus_free(gen);

    knit_pool_stats_t ps = {.size = sizeof ps};
    knit_pool_stats(pool, &ps);
    int verified = 0;
    double vsecs = 0;
    unsigned members = 0;
    if (rc == 0) verified = verify(out, total, o, &vsecs, &members);
    fclose(out);
    free(tmp_name);
    if (rc != 0) return 1;

    double rate = res.seconds > 0 ? mib(res.in_bytes) / res.seconds : 0;
    printf("%s: compressed %.1f MiB of built-in text to %.1f MiB (ratio %.2f) in %.2f s: "
           "%.1f MiB/s\n",
           prog, mib(res.in_bytes), mib(res.out_bytes),
           res.out_bytes ? (double)res.in_bytes / (double)res.out_bytes : 0.0,
           res.seconds, rate);
    char level[32];
    if (o->conf.fast)
        snprintf(level, sizeof level, "--fast");
    else
        snprintf(level, sizeof level, "level %d", o->conf.level);
    printf("%s: %u threads, discipline %s, engine %s (its level %d), %s, %zu KiB blocks, "
           "%zu compressors\n",
           prog, ps.threads, ps.sched, engine_name(o->conf.kind), o->conf.native, level,
           o->c.block / KIB, compressors);
    printf("%s: pipeline: %" PRIu64 " blocks, %" PRIu64 " completed, at most %" PRIu64
           " in flight, at most %u deflating at once\n",
           prog, res.pst.items, res.pst.completed, res.pst.max_in_flight, deflating_max);
    printf("%s: pool: %" PRIu64 " tasks run, %" PRIu64 " claims, %" PRIu64
           " parks, %" PRIu64 " wakes\n",
           prog, ps.tasks_run, ps.total.claims, ps.total.parks, ps.total.wakes);
    printf("%s: payload arena: high-water %.1f MiB of %.0f MiB, %" PRIu64
           " items in the arena, %" PRIu64 " malloc'ed\n",
           prog, mib(ps.arena_high), mib(ps.arena_cap), arena_items, malloc_items);
    if (verified)
        printf("%s: round trip through zlib inflate (%u gzip member%s) in %.2f s: verified\n",
               prog, members, members == 1 ? "" : "s", vsecs);
    else
        printf("%s: round trip through zlib inflate: FAILED\n", prog);
    return verified ? 0 : 1;
}

int main(int argc, char **argv) {
    options o;
    usage_init(prog, 1);
    int rc = parse_options(argc, argv, &o);
    if (rc != 0) return rc > 0 ? 0 : EXIT_USAGE;
    if (o.corpus_out != NULL) return write_corpus(&o);

    knit_pool *pool;
    catch_signals();
    rc = make_pool(&o, &pool);
    unblock_signals();
    if (rc != 0) return rc;
    int status = o.in == NULL ? run_corpus(&o, pool) : compress_file(&o, pool);
    knit_pool_destroy(pool, KNIT_DRAIN); /* writes the timeline, if any */
    if (o.timeline != NULL && !o.quiet)
        fprintf(stderr, "%s: timeline written to %s\n", prog, o.timeline);
    if (stopped()) { /* cleaned up: now die of the signal, as expected */
        int sig = stopped();
        signal(sig, SIG_DFL);
        raise(sig);
    }
    return status;
}
