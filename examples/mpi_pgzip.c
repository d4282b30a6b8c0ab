/* mpi_pgzip: pgzip over MPI ranks, one knit pool per rank.
 *
 *   mpirun -np 2 mpi_pgzip [options] OUTPUT.gz              the built-in corpus
 *   mpirun -np 2 mpi_pgzip [options] --input FILE OUTPUT.gz  a file, via MPI-IO
 *
 * Each of the P ranks takes the slice [r*N/P, (r+1)*N/P) of the N input
 * bytes (as evenly as bytes allow: with N < P some slices are empty) and
 * compresses it on its own knit pipeline, as examples/pgzip.c does:
 *   input     (the main thread, inside knit_pipeline_run) reads one block of
 *             the slice: MPI_File_read_at from the input file, or the
 *             corpus generated from the slice's offset (examples/corpus.h),
 *             so no rank reads or generates more than its slice;
 *   stage 1   PARALLEL: raw deflate of the block primed with the 32 KiB
 *             before it, ending with Z_SYNC_FLUSH, or Z_FINISH for the
 *             rank's last block; plus the block's CRC-32;
 *   stage 2   SERIAL_IN_ORDER: appends the deflate data to the rank's
 *             output buffer and combines the CRC.
 * Every rank's output is one gzip member (a header, its deflate stream, CRC
 * and ISIZE); MPI_Exscan over the member sizes gives each rank its offset
 * and MPI_File_write_at_all writes them side by side: a file of P members,
 * which gzip and zlib read as one stream (RFC 1952, 2.2). With --single the
 * file is one member, as pigz writes it: each rank primes its first block
 * with the 32 KiB before its slice, only the last rank ends the deflate
 * stream, rank 0 writes the header, the last rank the trailer, whose CRC
 * comes from an MPI_Allreduce with a user MPI_Op over crc32_combine.
 *
 * MPI is called only by the main thread (the one that called
 * MPI_Init_thread); knit's workers never call it, so MPI_THREAD_FUNNELED is
 * the level asked for, and a lower `provided` is an error. The pool is
 * created after MPI_Init_thread and destroyed before MPI_Finalize.
 *
 * Failures: every step that can fail on one rank ends with an agreement
 * (an MPI_Allreduce), so all ranks stop together; the lowest failing rank
 * prints one message and every rank exits 1 (2 for bad usage). Output is
 * written to "OUTPUT.XXXXXX" (made by rank 0, so OUTPUT's directory must be
 * shared by all ranks) and renamed at the end: a failure never leaves a
 * partial output behind, and an existing OUTPUT is untouched.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>
#include <zlib.h>

#include <knit/knit.h>

#include "corpus.h"
#include "engine.h"    /* the zlib engine and its compressor cache */
#include "gzip_util.h" /* sizes, option parsing, the verifier, shared with pgzip */

#define IO_CHUNK ((size_t)1 << 30) /* MPI counts are int: write in 1 GiB pieces */

/* Exit codes: 0 done, 1 failure, 2 bad usage (EXIT_USAGE). */

static const char *prog = "mpi_pgzip";
static int rank, nranks;

/* ------------------------------------------------------------------ */
/* Failing together                                                    */

/* This rank's first failure: its message and exit code (1, or 2), and
 * whether it is the job's failure rather than this rank's (rank 0 alone
 * makes the output file, for everyone). */
static char why[600];
static int why_code, why_job;

static int fail_code(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail_code(int code, const char *fmt, ...) {
    if (why_code == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof why, fmt, ap);
        va_end(ap);
        why_code = code;
    }
    return -1;
}
#define fail(...) fail_code(1, __VA_ARGS__)

/* The text of an MPI error code. */
static const char *mpi_err(int rc) {
    static char s[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", rc);
    return s;
}

/* Collective: did any rank fail? The lowest failing rank prints its
 * message (naming itself unless every rank failed alike) and every rank
 * returns the highest exit code among them; 0 when none failed. */
static int agree(void) {
    int in[2] = {why_code, why_code ? nranks - rank : 0}, out[2];
    MPI_Allreduce(in, out, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (out[0] == 0) return 0;
    int failed = why_code != 0, nfailed;
    MPI_Allreduce(&failed, &nfailed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == nranks - out[1]) {
        if (nfailed == nranks || nranks == 1 || why_job)
            fprintf(stderr, "%s: %s\n", prog, why);
        else
            fprintf(stderr, "%s: rank %d of %d: %s\n", prog, rank, nranks, why);
        fflush(stderr);
    }
    return out[0];
}

/* The temporary output, made and removed by rank 0. A signal removes it
 * on every rank that knows its name: mpirun passes ^C on to the ranks as
 * SIGTERM and sends SIGKILL as soon as the first of them has died (Open
 * MPI 4.1 cuts its grace period short on that SIGCHLD), so the rank whose
 * handler runs first must remove it, whichever rank that is. A rank other
 * than 0 learns the name from rank 0's broadcast; a signal before that
 * finds its handler with nothing to remove.
 *
 * tmp_exists is read by the handler, which may run on any thread of the
 * process (knit's workers and MPI's threads do not block signals): a
 * lock-free atomic, so reading it is async-signal-safe. */
static char tmp_name[PATH_MAX + 8];
static atomic_int tmp_exists;

static void on_signal(int sig) {
    /* acquire: pairs with the release store that publishes tmp_name. */
    if (atomic_load_explicit(&tmp_exists, memory_order_acquire)) unlink(tmp_name);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* tmp_name holds the temporary output's name (rank 0: made it; others:
 * received it), or no longer (renamed or removed). */
static void tmp_set(int exists) {
    /* release: the name's bytes are written before a handler that sees 1
     * reads them (pairs with the acquire load in on_signal). */
    atomic_store_explicit(&tmp_exists, exists, memory_order_release);
}

static void remove_tmp(void) {
    if (rank == 0 && atomic_load_explicit(&tmp_exists, memory_order_relaxed)) {
        unlink(tmp_name); /* a signal in between unlinks a name already gone */
        tmp_set(0);
    }
}

/* ------------------------------------------------------------------ */
/* Options                                                             */

typedef struct options {
    common_options c; /* --threads (0: this rank's share of the node's CPUs),
                         --sched, --level, --block, --corpus-mib */
    int single, verify;
    int fail_rank; /* -1: none */
    const char *in, *out;
} options;

static void usage(FILE *f) {
    fprintf(f,
            "usage: mpirun [-np P] %s [options] [--input FILE] OUTPUT\n"
            "Compresses FILE, or a built-in text corpus, to OUTPUT as gzip: each MPI\n"
            "rank deflates its slice of the input on a knit pipeline, and the\n"
            "ranks write their parts side by side with MPI-IO. Rank 0 prints the\n"
            "throughput.\n"
            "\n"
            "  --input FILE      the input (read with MPI-IO by every rank: it must be\n"
            "                    visible to all of them); default: the built-in corpus\n"
            "  --single          one gzip member (as pigz writes) rather than one per rank\n"
            "  --verify          rank 0 inflates OUTPUT and compares it byte for byte\n",
            prog);
    usage_common(f, "the rank's share of its CPUs");
    fprintf(f,
            "  --level 0-9       compression level on pigz's scale (zlib; default 6)\n"
            "  --fail-rank R     make rank R fail after compressing (tests the\n"
            "                    clean-up: no output, one message)\n"
            "  --help, -h        this text\n"
            "\n"
            "Exit status: 0 done, 1 failure (on any rank), 2 bad usage.\n");
}

/* 0, 1 (--help: exit 0) or -1 (bad usage, reported by rank 0). */
static int parse_options(int argc, char **argv, options *o) {
    enum { O_INPUT = OPT_OWN, O_SINGLE, O_VERIFY, O_FAIL };
    static const struct option longs[] = {
        COMMON_LONG_OPTIONS,
        {"input", required_argument, NULL, O_INPUT},
        {"single", no_argument, NULL, O_SINGLE},
        {"verify", no_argument, NULL, O_VERIFY},
        {"fail-rank", required_argument, NULL, O_FAIL},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (options){.fail_rank = -1};
    common_defaults(&o->c);
    opterr = 0;
    int c;
    uint64_t v;
    while ((c = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
        int common = parse_common(c, optarg, &o->c);
        if (common < 0) return -1;
        if (common > 0) continue;
        switch (c) {
        case O_INPUT:
            o->in = optarg;
            break;
        case O_SINGLE:
            o->single = 1;
            break;
        case O_VERIFY:
            o->verify = 1;
            break;
        case O_FAIL:
            if (parse_uint("--fail-rank", optarg, 0, INT_MAX, &v) != 0) return -1;
            o->fail_rank = (int)v;
            break;
        case 'h':
            if (rank == 0) usage(stdout);
            return 1;
        case ':':
            return bad_usage("option '%s' needs a value", argv[optind - 1]);
        default:
            return bad_usage("unknown option '%s'", argv[optind - 1]);
        }
    }
    int rest = argc - optind;
    if (rest == 0) return bad_usage("no output file named");
    if (rest > 1) return bad_usage("too many arguments ('%s' ...)", argv[optind + 1]);
    o->out = argv[optind];
    if (o->in != NULL && o->c.corpus_given)
        return bad_usage("--corpus-mib applies only without --input");
    if ((o->in && !*o->in) || !*o->out) return bad_usage("empty file name");
    if (strlen(o->out) > PATH_MAX - 1) return bad_usage("output name too long");
    return 0;
}

/* ------------------------------------------------------------------ */
/* One rank's slice through the knit pipeline                          */

/* An input item: this header, the dictionary (up to 32 KiB of input before
 * the block), the block. */
typedef struct in_item {
    uint64_t seq;
    uint32_t len, dict_len;
    uint32_t last; /* the slice's last block */
    uint32_t pad;
} in_item;

/* A compressed item: this header, then the deflate output. */
typedef struct out_item {
    uint64_t seq;
    uint32_t in_len, out_len;
    uint32_t crc;
    uint32_t pad;
} out_item;

typedef struct slice {
    knit_pool *pool;
    engine_conf conf; /* zlib at --level: --single needs its sync flush */
    engine *eng;      /* deflate streams to reuse */
    size_t block;
    int finish; /* end the deflate stream (Z_FINISH) with the last block */
    /* the input: the file, or a corpus generator at the slice's start */
    MPI_File fh; /* MPI_FILE_NULL: the corpus */
    corpus *gen;
    const char *name;
    uint64_t start, len, pos; /* the slice, and how much is read */
    uint64_t next_seq;
    unsigned char tail[DICT_BYTES]; /* the last input bytes read */
    size_t tail_len;
    /* the output: a growing buffer, appended to by the serial stage */
    unsigned char *out;
    size_t out_len, out_cap;
    uint64_t write_seq, in_done;
    uint32_t crc;
    _Atomic uint64_t arena_items, malloc_items;
} slice;

/* Memory for an item: the pool's arena if it has room, else malloc. */
static knit_buf slice_alloc(slice *s, size_t len) {
    return item_alloc(s->pool, len, &s->arena_items, &s->malloc_items);
}

/* Reads n bytes of the input at `offset` (file or corpus position): 0, or
 * -1 with a message in msg. Main thread only (MPI is FUNNELED). */
static int read_at(slice *s, uint64_t offset, unsigned char *buf, size_t n, char *msg,
                   size_t msg_len) {
    if (s->fh == MPI_FILE_NULL) {
        if (corpus_fill(s->gen, buf, n) != n) {
            snprintf(msg, msg_len, "the corpus ended early");
            return -1;
        }
        return 0;
    }
    MPI_Status st;
    int rc = MPI_File_read_at(s->fh, (MPI_Offset)offset, buf, (int)n, MPI_BYTE, &st);
    int got = 0;
    if (rc == MPI_SUCCESS) MPI_Get_count(&st, MPI_BYTE, &got);
    if (rc != MPI_SUCCESS || got != (int)n) {
        snprintf(msg, msg_len, "read %s at byte %" PRIu64 ": %s", s->name, offset,
                 rc != MPI_SUCCESS ? mpi_err(rc) : "unexpected end of file (did it shrink?)");
        return -1;
    }
    return 0;
}

/* The pipeline's input (called by the thread in knit_pipeline_run: the
 * main thread): the slice's next block, primed with the previous 32 KiB. */
static int input_fn(void *ctx, knit_buf *item) {
    slice *s = ctx;
    if (s->pos == s->len) return 0;
    size_t n = s->len - s->pos < s->block ? (size_t)(s->len - s->pos) : s->block;
    size_t hdr = sizeof(in_item) + s->tail_len;
    knit_buf b = slice_alloc(s, hdr + n);
    if (b.data == NULL) return knit_error(KNIT_ENOMEM, "no memory for a %zu-byte block", n);
    unsigned char *data = (unsigned char *)b.data + hdr;
    char msg[400];
    if (read_at(s, s->start + s->pos, data, n, msg, sizeof msg) != 0) {
        knit_buf_free(&b);
        return knit_error(KNIT_EINVAL, "%s", msg);
    }
    in_item *h = b.data;
    *h = (in_item){.seq = s->next_seq++, .len = (uint32_t)n,
                   .dict_len = (uint32_t)s->tail_len, .last = s->pos + n == s->len};
    memcpy(h + 1, s->tail, s->tail_len);
    keep_tail(s->tail, &s->tail_len, data, n); /* the next block's dictionary */
    s->pos += n;
    *item = b;
    return 1;
}

/* Stage 1 (parallel, on any worker; no MPI here): deflate one block. */
static int deflate_stage(void *ctx, uint64_t seq, knit_buf *item) {
    slice *s = ctx;
    const in_item *h = item->data;
    if (h == NULL || item->len < sizeof *h || item->len != sizeof *h + h->dict_len + h->len ||
        h->seq != seq)
        return knit_error(KNIT_EINVAL, "deflate: item %" PRIu64 " is malformed", seq);
    const unsigned char *dict = (const unsigned char *)(h + 1), *data = dict + h->dict_len;
    size_t cap = engine_bound(&s->conf, h->len);
    knit_buf out = slice_alloc(s, sizeof(out_item) + cap);
    if (out.data == NULL) return knit_error(KNIT_ENOMEM, "deflate: no memory for %zu bytes", cap);
    size_t n = 0;
    char err[200];
    if (engine_deflate(s->eng, dict, h->dict_len, data, h->len, h->last && s->finish,
                       (unsigned char *)out.data + sizeof(out_item), cap, &n, err,
                       sizeof err) != 0) {
        knit_buf_free(&out);
        return knit_error(KNIT_EINVAL, "deflate of block %" PRIu64 " failed: %s", seq, err);
    }
    out_item *oh = out.data;
    *oh = (out_item){.seq = seq, .in_len = h->len, .out_len = (uint32_t)n,
                     .crc = engine_crc32(s->eng, 0, data, h->len)};
    out.len = sizeof *oh + oh->out_len;
    knit_buf_free(item);
    *item = out;
    return 0;
}

/* Appends n bytes to the slice's output. */
static int out_append(slice *s, const void *p, size_t n) {
    if (s->out_cap - s->out_len < n) {
        size_t cap = s->out_cap ? s->out_cap : 64 * KIB;
        while (cap - s->out_len < n) cap *= 2;
        unsigned char *q = realloc(s->out, cap);
        if (q == NULL) return -1;
        s->out = q;
        s->out_cap = cap;
    }
    memcpy(s->out + s->out_len, p, n);
    s->out_len += n;
    return 0;
}

/* Stage 2 (serial, in order): append, combine the CRC. */
static int append_stage(void *ctx, uint64_t seq, knit_buf *item) {
    slice *s = ctx;
    const out_item *h = item->data;
    if (h == NULL || item->len != sizeof *h + h->out_len || h->seq != seq ||
        seq != s->write_seq)
        return knit_error(KNIT_EINVAL, "append: got item %" PRIu64 " where %" PRIu64
                          " was due", seq, s->write_seq);
    if (out_append(s, h + 1, h->out_len) != 0)
        return knit_error(KNIT_ENOMEM, "no memory for %zu bytes of output",
                          s->out_len + h->out_len);
    s->crc = (uint32_t)crc32_combine(s->crc, h->crc, (z_off_t)h->in_len);
    s->in_done += h->in_len;
    s->write_seq++;
    knit_buf_free(item);
    return 0;
}

/* Runs the slice through the pipeline, appending to s->out. 0 or -1. */
static int compress_slice(slice *s, unsigned threads) {
    char why_run[512];
    int rc = run_blocks(s->pool, threads, input_fn, deflate_stage, append_stage, s, NULL,
                        why_run, sizeof why_run);
    if (rc != 0) return fail("%s", why_run);
    if (s->in_done != s->len || s->write_seq != s->next_seq)
        return fail("internal error: %" PRIu64 " of %" PRIu64 " bytes compressed",
                    s->in_done, s->len);
    return 0;
}

/* ------------------------------------------------------------------ */
/* The pool                                                            */

/* Default workers per rank: the CPUs this rank may run on; when mpirun did
 * not bind it (the mask is every online CPU), its share of them among the
 * ranks on this node. */
static unsigned default_threads(void) {
    MPI_Comm node;
    int local = 1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_size(node, &local);
        MPI_Comm_free(&node);
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN), n = online;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
    if (n >= online && local > 1) n /= local;
    if (n < 1) n = 1;
    if (n > (long)KNIT_MAX_THREADS) n = KNIT_MAX_THREADS;
    return (unsigned)n;
}

/* A pool whose arena holds every item in flight; KNIT_FAIL makes a full
 * arena a NULL from knit_payload_alloc (then malloc), never a wait. */
static int make_pool(const options *o, unsigned threads, knit_pool **pool) {
    knit_pool_options po = KNIT_POOL_OPTIONS_INIT;
    po.threads = threads;
    po.sched = o->c.sched;
    po.backpressure = KNIT_FAIL;
    engine_conf zc;
    char why[200];
    engine_configure(ENGINE_ZLIB, o->c.level, &zc, why, sizeof why); /* 0-9: never fails */
    uint64_t in = sizeof(in_item) + DICT_BYTES + o->c.block;
    uint64_t out = sizeof(out_item) + engine_bound(&zc, o->c.block);
    po.arena_bytes = arena_bytes(threads, in > out ? in : out);
    po.max_payload = po.arena_bytes;
    int rc = knit_pool_create(&po, pool);
    if (rc != 0) return fail_code(rc == KNIT_EINVAL ? EXIT_USAGE : 1, "%s", knit_last_error());
    return 0;
}

/* ------------------------------------------------------------------ */
/* Verification (rank 0)                                               */

/* The input again, for the verifier: the file, or the corpus. */
typedef struct want_src {
    FILE *f;
    corpus *gen;
} want_src;

static size_t want_bytes(void *ctx, unsigned char *buf, size_t n) {
    want_src *w = ctx;
    return w->f ? fread(buf, 1, n, w->f) : corpus_fill(w->gen, buf, n);
}

/* Inflates `gz` (any number of members) and compares it with the input,
 * read again from `in` (NULL: the corpus). 0, or -1 with a message. */
static int verify(const char *gz, const char *in, uint64_t total, unsigned *members) {
    FILE *f = fopen(gz, "rb");
    want_src w = {.f = in ? fopen(in, "rb") : NULL, .gen = in ? NULL : corpus_new(0, total)};
    int rc = -1;
    char err[400];
    *members = 0;
    if (f == NULL || (in && w.f == NULL))
        fail("verify: cannot open %s: %s", f == NULL ? gz : in, strerror(errno));
    else if (!in && w.gen == NULL)
        fail("verify: out of memory");
    else if (gz_verify(f, gz, total, want_bytes, &w, NULL, NULL, members, err, sizeof err) != 0)
        fail("verify: %s", err);
    else
        rc = 0;
    if (f) fclose(f);
    if (w.f) fclose(w.f);
    corpus_free(w.gen);
    return rc;
}

/* ------------------------------------------------------------------ */
/* The job                                                             */

/* The CRC of a concatenation: (c1, l1) o (c2, l2) = (crc32_combine(c1, c2,
 * l2), l1 + l2). Associative, not commutative: MPI applies it in rank
 * order, invec holding the lower ranks' part. */
static void crc_op(void *invec, void *inoutvec, int *len, MPI_Datatype *type) {
    (void)type;
    const uint64_t *a = invec;
    uint64_t *b = inoutvec;
    for (int i = 0; i < *len; i++, a += 2, b += 2) {
        b[0] = (uint32_t)crc32_combine((uLong)a[0], (uLong)b[0], (z_off_t)b[1]);
        b[1] += a[1];
    }
}

/* Writes each rank's buffer at its offset with MPI_File_write_at_all, in
 * rounds of at most IO_CHUNK bytes (all ranks make the same number of
 * calls, collective as they are). 0 or -1. */
static int write_all(MPI_File fh, MPI_Offset offset, const unsigned char *buf, size_t len,
                     const char *name) {
    unsigned long long mine = (len + IO_CHUNK - 1) / IO_CHUNK, rounds;
    MPI_Allreduce(&mine, &rounds, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (rounds == 0) rounds = 1;
    size_t done = 0;
    int bad = 0;
    for (unsigned long long r = 0; r < rounds; r++) {
        size_t n = bad ? 0 : len - done < IO_CHUNK ? len - done : IO_CHUNK;
        MPI_Status st;
        int rc = MPI_File_write_at_all(fh, offset + (MPI_Offset)done, buf + done, (int)n,
                                       MPI_BYTE, &st);
        int put = 0;
        if (rc == MPI_SUCCESS) MPI_Get_count(&st, MPI_BYTE, &put);
        if (!bad && (rc != MPI_SUCCESS || put != (int)n)) {
            bad = 1;
            fail("write %s at byte %lld: %s", name, (long long)(offset + (MPI_Offset)done),
                 rc != MPI_SUCCESS ? mpi_err(rc) : "short write");
        }
        done += n;
    }
    return bad ? -1 : 0;
}

static int run(const options *o) {
    int code = 0;
    unsigned threads = o->c.threads ? o->c.threads : default_threads();
    knit_pool *pool = NULL;
    make_pool(o, threads, &pool);
    if ((code = agree()) != 0) return code;

    slice s;
    memset(&s, 0, sizeof s);
    s.pool = pool;
    s.block = o->c.block;
    s.fh = MPI_FILE_NULL;
    s.name = o->in ? o->in : "the corpus";
    MPI_File out_fh = MPI_FILE_NULL;
    uint64_t total = (uint64_t)o->c.corpus_mib * MIB;
    char why_conf[200];
    if (engine_configure(ENGINE_ZLIB, o->c.level, &s.conf, why_conf, sizeof why_conf) != 0)
        fail("%s", why_conf);
    else if ((s.eng = engine_new(&s.conf)) == NULL)
        fail("out of memory");
    if ((code = agree()) != 0) goto done;

    /* (1) The input: stat it here first for a plain message (a missing
     * file, a directory), then open it collectively. */
    if (o->in != NULL) {
        struct stat st;
        if (stat(o->in, &st) != 0)
            fail("cannot open %s: %s", o->in, strerror(errno));
        else if (S_ISDIR(st.st_mode))
            fail("%s is a directory", o->in);
        if ((code = agree()) != 0) goto done;
        int rc = MPI_File_open(MPI_COMM_WORLD, o->in, MPI_MODE_RDONLY, MPI_INFO_NULL, &s.fh);
        if (rc != MPI_SUCCESS) {
            s.fh = MPI_FILE_NULL;
            fail("cannot open %s: %s", o->in, mpi_err(rc));
        } else {
            MPI_Offset size = 0;
            rc = MPI_File_get_size(s.fh, &size);
            if (rc != MPI_SUCCESS) fail("cannot size %s: %s", o->in, mpi_err(rc));
            total = (uint64_t)size;
        }
        if ((code = agree()) != 0) goto done;
    }

    /* (2) This rank's slice; with --single, the 32 KiB before it too. */
    uint64_t base = total / (uint64_t)nranks, extra = total % (uint64_t)nranks;
    uint64_t r = (uint64_t)rank;
    s.start = r * base + (r < extra ? r : extra);
    s.len = base + (r < extra);
    int last_rank = total == 0 ? 0 : (int)((uint64_t)nranks < total ? (uint64_t)nranks - 1
                                                                    : total - 1);
    s.finish = !o->single || rank == last_rank;
    if (o->single && s.len > 0 && s.start > 0) {
        s.tail_len = s.start < DICT_BYTES ? (size_t)s.start : DICT_BYTES;
        uint64_t at = s.start - s.tail_len;
        if (s.fh == MPI_FILE_NULL) {
            s.gen = corpus_new(at, s.tail_len);
            if (s.gen == NULL) fail("out of memory");
        }
        char msg[400];
        if (s.gen != NULL || s.fh != MPI_FILE_NULL)
            if (read_at(&s, at, s.tail, s.tail_len, msg, sizeof msg) != 0) fail("%s", msg);
        corpus_free(s.gen);
        s.gen = NULL;
    }
    if (s.fh == MPI_FILE_NULL) {
        s.gen = corpus_new(s.start, s.len);
        if (s.gen == NULL) fail("out of memory");
    }
    if ((code = agree()) != 0) goto done;

    /* (3) The temporary output, made by rank 0 before any work, so an
     * unwritable output fails at once; its name goes to every rank. */
    if (rank == 0) {
        snprintf(tmp_name, sizeof tmp_name, "%s.XXXXXX", o->out);
        int fd = mkostemp(tmp_name, O_CLOEXEC);
        if (fd < 0) {
            fail("cannot create %s: %s", o->out, strerror(errno));
            why_job = 1;
        } else {
            tmp_set(1);
            close(fd);
        }
    }
    if ((code = agree()) != 0) goto done;
    MPI_Bcast(tmp_name, (int)sizeof tmp_name, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank != 0) tmp_set(1); /* its handler removes it too (see on_signal) */

    /* (4) Compress the slice into memory: a header (rank 0, or every rank
     * with one member each), the deflate stream, and a trailer. */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    int header = rank == 0 || (!o->single && s.len > 0);
    if (header) {
        unsigned char hdr[10];
        gzip_header(hdr, engine_xfl(&s.conf));
        if (out_append(&s, hdr, sizeof hdr) != 0) fail("out of memory");
    }
    if (why_code == 0 && s.len > 0) compress_slice(&s, threads);
    if (why_code == 0 && total == 0 && rank == 0) {
        static const unsigned char empty_final[2] = {0x03, 0x00}; /* no data at all */
        if (out_append(&s, empty_final, sizeof empty_final) != 0) fail("out of memory");
    }
    if (why_code == 0 && rank == o->fail_rank)
        fail("failing as asked (--fail-rank %d), after compressing %" PRIu64 " bytes",
             o->fail_rank, s.in_done);
    double t_deflate = MPI_Wtime() - t0;
    if ((code = agree()) != 0) goto done;

    /* (5) Trailers: each member's own CRC, or the whole input's CRC
     * combined across ranks (in rank order) for the single member. */
    uint32_t crc = s.crc;
    if (o->single) {
        MPI_Datatype pair;
        MPI_Op op;
        MPI_Type_contiguous(2, MPI_UINT64_T, &pair);
        MPI_Type_commit(&pair);
        MPI_Op_create(crc_op, 0 /* not commutative */, &op);
        uint64_t in[2] = {s.crc, s.len}, outv[2];
        MPI_Allreduce(in, outv, 1, pair, op, MPI_COMM_WORLD);
        MPI_Op_free(&op);
        MPI_Type_free(&pair);
        crc = (uint32_t)outv[0];
    }
    if (o->single ? rank == last_rank : header) {
        unsigned char trailer[8];
        put_le32(trailer, crc);
        put_le32(trailer + 4, (uint32_t)(o->single ? total : s.len)); /* ISIZE: mod 2^32 */
        if (out_append(&s, trailer, sizeof trailer) != 0) fail("out of memory");
    }
    if ((code = agree()) != 0) goto done;

    /* (6) Offsets, then every rank writes its part. */
    MPI_Offset mine = (MPI_Offset)s.out_len, offset = 0, out_total = 0;
    MPI_Exscan(&mine, &offset, 1, MPI_OFFSET, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) offset = 0; /* MPI_Exscan leaves rank 0's undefined */
    MPI_Allreduce(&mine, &out_total, 1, MPI_OFFSET, MPI_SUM, MPI_COMM_WORLD);
    int rc = MPI_File_open(MPI_COMM_WORLD, tmp_name, MPI_MODE_WRONLY, MPI_INFO_NULL, &out_fh);
    if (rc != MPI_SUCCESS) {
        out_fh = MPI_FILE_NULL;
        fail("cannot open %s on this rank: %s", tmp_name, mpi_err(rc));
    }
    if ((code = agree()) != 0) goto done;
    write_all(out_fh, offset, s.out, s.out_len, o->out);
    rc = MPI_File_close(&out_fh);
    if (rc != MPI_SUCCESS) fail("close %s: %s", o->out, mpi_err(rc));
    if ((code = agree()) != 0) goto done;
    double t_written = MPI_Wtime() - t0;

    /* (7) Rank 0 gives the file its final name (and the usual mode). */
    if (rank == 0) {
        mode_t um = umask(0);
        umask(um);
        if (chmod(tmp_name, 0666 & ~um) != 0)
            fail("chmod %s: %s", tmp_name, strerror(errno));
        else if (rename(tmp_name, o->out) != 0)
            fail("cannot rename %s to %s: %s", tmp_name, o->out, strerror(errno));
        else
            tmp_set(0);
        why_job = 1;
    }
    if ((code = agree()) != 0) goto done;
    if (rank != 0) tmp_set(0); /* renamed: its handler must not remove the name now */

    /* (8) The report: the slowest rank's deflate time, and the whole. */
    double t_deflate_max = 0;
    MPI_Reduce(&t_deflate, &t_deflate_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    uint64_t counts[2] = {s.arena_items, s.malloc_items}, sums[2];
    MPI_Reduce(counts, sums, 2, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        knit_pool_stats_t ps = {.size = sizeof ps};
        knit_pool_stats(pool, &ps);
        printf("%s: %d rank%s x %u thread%s (rank 0: discipline %s), level %d, %zu KiB "
               "blocks, %s\n",
               prog, nranks, nranks == 1 ? "" : "s", threads, threads == 1 ? "" : "s",
               ps.sched, o->c.level, o->c.block / KIB,
               o->single ? "one gzip member" : "one gzip member per rank");
        printf("%s: compressed %.1f MiB of %s to %.1f MiB (ratio %.2f) in %.2f s: "
               "%.1f MiB/s\n",
               prog, mib(total), o->in ? o->in : "built-in text", mib((uint64_t)out_total),
               out_total ? (double)total / (double)out_total : 0.0, t_written,
               t_written > 0 ? mib(total) / t_written : 0.0);
        printf("%s: slowest rank deflated its slice in %.2f s; offsets, MPI-IO write and "
               "rename: %.2f s; %" PRIu64 " blocks in the payload arenas, %" PRIu64
               " malloc'ed\n",
               prog, t_deflate_max, t_written - t_deflate_max, sums[0], sums[1]);
        fflush(stdout);
    }

    /* (9) --verify: rank 0 inflates the file and compares; the others wait
     * in agree(). */
    if (o->verify) {
        if (rank == 0) {
            double tv = MPI_Wtime();
            unsigned members = 0;
            if (verify(o->out, o->in, total, &members) == 0) {
                printf("%s: verified: %s inflates (%u member%s) to the %" PRIu64
                       " input bytes, byte for byte, in %.2f s\n",
                       prog, o->out, members, members == 1 ? "" : "s", total,
                       MPI_Wtime() - tv);
                fflush(stdout);
            } else {
                why_job = 1;
            }
        }
        code = agree();
    }
done:
    if (out_fh != MPI_FILE_NULL) MPI_File_close(&out_fh);
    if (s.fh != MPI_FILE_NULL) MPI_File_close(&s.fh);
    remove_tmp(); /* only if something failed */
    corpus_free(s.gen);
    engine_free(s.eng);
    free(s.out);
    knit_pool_destroy(pool, KNIT_DRAIN); /* before MPI_Finalize */
    return code;
}

int main(int argc, char **argv) {
    /* FUNNELED: only this thread calls MPI; knit's workers never do. */
    const int required = MPI_THREAD_FUNNELED;
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(&argc, &argv, required, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "%s: MPI_Init_thread failed\n", prog);
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    usage_init(prog, rank == 0); /* every rank parses the same arguments */
    if (provided < required)
        fail("MPI provides thread level %d, below MPI_THREAD_FUNNELED (%d) which this "
             "program needs: the main thread calls MPI while knit's worker threads run",
             provided, required);
    int code = agree();
    options o;
    if (code == 0) {
        int rc = parse_options(argc, argv, &o);
        code = rc < 0 ? EXIT_USAGE : 0;
        if (rc == 0) {
            catch_stop_signals(on_signal); /* every rank: see on_signal */
            code = run(&o);
        }
    }
    MPI_Finalize();
    return code;
}
