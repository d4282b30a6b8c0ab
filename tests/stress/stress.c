/* knit stress and soak: one program, parameterised, that checks every task.
 *
 * Uses only the public API (<knit/knit.h>, link //:knit).
 *
 *   ./bazelw run //tests/stress:stress -- [options]
 *
 *   --producers N      submitting threads (3)
 *   --workers N        pool worker threads (2)
 *   --sched NAME       claim discipline: ticket, dekker, single, ... (ticket)
 *   --tasks N          top-level tasks over all producers (3,500,000; under
 *                      --config=asan 2,000,000, --config=tsan 400,000)
 *   --seconds S        time-bounded soak instead of a task count
 *   --mix A,B,C,D,E    weights of payload kinds none,inline,arena,binary,
 *                      moved (10,25,20,20,25)
 *   --max-size BYTES   largest payload (1M; K and M suffixes); sizes are
 *                      skewed: most are small, a few are near the maximum
 *   --cancel R         fraction of tasks cancelled (0.05): half right after
 *                      submit, half two submits later (often while running)
 *   --fail R           fraction of tasks that call knit_task_fail (0.05)
 *   --timeout R        fraction awaited first with a 1-100 us timeout (0.05);
 *                      on KNIT_ETIMEDOUT: await again, cancel and await, or
 *                      abandon (release without awaiting, maybe cancelled)
 *   --nest R           fraction of tasks that submit 1-3 children and await
 *                      them from inside the task (0.05)
 *   --depth D          nested-submit depth (3; at most 8)
 *   --then R           fraction with a continuation, knit_future_then (0.03)
 *   --window N         futures each producer keeps in flight (32)
 *   --churn N          producers live in bursts of 1..N tasks with windows
 *                      of 1..--window, every other burst on a fresh thread
 *                      that exits after it (0: off; see producer_main)
 *   --seed S           seed of every random choice (1): each task's plan and
 *                      bytes are a function of (seed, task id)
 *   --arena-mb N       pool arena_bytes in MiB (64)
 *   --max-pending N    pool max_pending (0: the pool's default)
 *   --progress S       print a progress line every S seconds (0: off)
 *   --hang S           fail if no task finishes for S seconds (60)
 *
 * What is checked (any violation prints "stress: VIOLATION ..." with the
 * seed and the task id, and exits 1):
 *   - every future settles exactly once with the outcome its plan and the
 *     cancel result dictate: 0 and the exact result value; KNIT_ETASK with
 *     the planned code and message for failing tasks (code 4242 when a task
 *     saw its own cancellation while running); KNIT_ECANCELED only when
 *     knit_future_cancel returned 0, and then the task never ran; a second
 *     await (timeout 0) returns the same outcome; no task runs twice;
 *   - knit_await_all returns the first failure by index; a continuation
 *     sees the antecedent's outcome (knit_task_antecedent) and the
 *     returned buffer goes to exactly one taker;
 *   - every payload's bytes (seed-derived, with a header naming the task
 *     when it has 16 bytes or more) as the task sees them, and every
 *     buffer a task returns as its taker sees it;
 *   - every moved buffer freed exactly once (a counting free function and
 *     a per-buffer atomic flag: LIVE -> FREED; anything else is a double
 *     free or a free of a buffer never made), all of them freed at the end;
 *   - knit_pool_stats adds up at quiescence: submitted, tasks_run,
 *     cancelled, failed and arena_allocs equal this program's own counts,
 *     skipped == cancelled, completed == submitted, pending == 0, arena_bytes == 0,
 *     total.tasks_run + helped == tasks_run, the workers sum to the total,
 *     pending_high <= max_pending + continuations (they bypass the bound);
 *   - no leak: every task record is freed (own count), and LSan under
 *     --config=asan.
 *
 * CI (tests/stress/BUILD): stress_ticket and stress_dekker run the default
 * task count with 3 producers, 2 workers and seed 1, in the plain build and
 * under --config=asan and --config=tsan (each about 1-2 minutes when the two
 * run side by side on 2 cores).
 *
 * Soak (about an hour; documented in tests/stress/README.md too):
 *
 *   ./bazelw run //tests/stress:stress -- --seconds 3600 --producers 4 \
 *       --workers 2 --sched ticket --progress 60 --seed $RANDOM
 *
 * and the same with --sched dekker.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <knit/knit.h>

/* Default task counts: each CI test takes about 1-2 minutes in every build
 * when the two run side by side on the 2-core machine. Measured that way,
 * top-level tasks per second per test: opt ~50k, ASan ~30k, TSan ~6k. */
#if defined(KNIT_TSAN)
#define STRESS_DEFAULT_TASKS 400000u
#define STRESS_SPIN_SCALE 4u /* slow tasks spin this many times less */
#elif defined(KNIT_SANITIZER)
#define STRESS_DEFAULT_TASKS 2000000u
#define STRESS_SPIN_SCALE 2u
#else
#define STRESS_DEFAULT_TASKS 3500000u
#define STRESS_SPIN_SCALE 1u
#endif

/* ------------------------------------------------------------------ */
/* Configuration                                                        */
/* ------------------------------------------------------------------ */

enum { K_NONE, K_INLINE, K_ARENA, K_BINARY, K_MOVED, K_COUNT };
static const char *const kind_name[K_COUNT] = {"none", "inline", "arena",
                                               "binary", "moved"};

static struct config {
    unsigned producers, workers;
    const char *sched;
    uint64_t tasks;
    double seconds;
    unsigned mix[K_COUNT];
    size_t max_size;
    double cancel, fail, timeout, nest, then;
    unsigned depth, window;
    uint64_t churn;
    uint64_t seed;
    size_t arena_mb, max_pending;
    double progress, hang;
    double groups, promises; /* rates of group and promise rounds */
    bool caller_runs;        /* KNIT_CALLER_RUNS instead of KNIT_BLOCK */
} cfg = {
    .producers = 3,
    .workers = 2,
    .sched = "ticket",
    .tasks = STRESS_DEFAULT_TASKS,
    .seconds = 0,
    .mix = {10, 25, 20, 20, 25},
    .max_size = 1u << 20,
    .cancel = 0.05,
    .fail = 0.05,
    .timeout = 0.05,
    .nest = 0.05,
    .then = 0.03,
    .depth = 3,
    .window = 32,
    .seed = 1,
    .arena_mb = 64,
    .max_pending = 0,
    .progress = 0,
    .hang = 60,
    .groups = 0.002,
    .promises = 0.004,
    .caller_runs = false,
};

static char g_cmdline[1024]; /* for the reproducing command in messages */
static knit_pool *g_pool;
static uint64_t g_mask0, g_mask1; /* header scrambling, from the seed */

/* ------------------------------------------------------------------ */
/* Violations                                                           */
/* ------------------------------------------------------------------ */

static pthread_mutex_t g_die_lock = PTHREAD_MUTEX_INITIALIZER;

static void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void violation(const char *fmt, ...) {
    pthread_mutex_lock(&g_die_lock); /* one report, never unlocked */
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "stress: VIOLATION: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nstress: seed=%" PRIu64 " sched=%s; reproduce with: %s\n",
            cfg.seed, cfg.sched, g_cmdline);
    fflush(stderr);
    fflush(stdout);
    _exit(1); /* other threads are mid-flight: no atexit, no leak report */
}

#define CHECK(cond, ...)                  \
    do {                                  \
        if (!(cond)) violation(__VA_ARGS__); \
    } while (0)

/* ------------------------------------------------------------------ */
/* Shared counters                                                      */
/* ------------------------------------------------------------------ */

/* All are statistics of this program, compared with the pool's own at the
 * end. Unless a comment says otherwise they are relaxed: each is only an
 * accumulator, and every final read happens after pthread_join of the
 * producers (join orders their writes) and after the acquire load of
 * `finished` that establishes quiescence (see wait_quiescent), which orders
 * the writes tasks made before their release increment of `finished`. */
static struct counters {
    _Atomic uint64_t submitted;      /* successful submits: top, nested, then */
    _Atomic uint64_t top;            /* top-level tasks submitted */
    _Atomic uint64_t nested;         /* children submitted from inside tasks */
    _Atomic uint64_t conts;          /* continuations (knit_future_then) */
    _Atomic uint64_t runs;           /* task functions entered (any kind) */
    _Atomic uint64_t finished;       /* task functions returned; RELEASE, see
                                        task_done / wait_quiescent */
    _Atomic uint64_t failures;       /* tasks that called knit_task_fail */
    _Atomic uint64_t cancels_ok;     /* knit_future_cancel returned 0 */
    _Atomic uint64_t cancels_busy;   /* ... KNIT_EBUSY (it was running) */
    _Atomic uint64_t cancels_late;   /* ... KNIT_EALREADY (it had settled) */
    _Atomic uint64_t saw_cancel;     /* tasks that saw knit_task_cancelled */
    _Atomic uint64_t timeouts;       /* awaits that returned KNIT_ETIMEDOUT */
    _Atomic uint64_t abandoned;      /* released after a timeout, unawaited */
    _Atomic uint64_t payloads;       /* payloads whose bytes were verified */
    _Atomic uint64_t payload_bytes;  /* ... and their bytes */
    _Atomic uint64_t returned;       /* returned buffers taken and verified */
    _Atomic uint64_t arena_allocs;   /* arena allocations we caused */
    _Atomic uint64_t moved_made;     /* moved buffers created */
    _Atomic uint64_t moved_freed;    /* ... freed by their free_fn */
    _Atomic uint64_t recs_live;      /* task records not yet freed */
    _Atomic uint64_t awaited;        /* outcomes checked by an awaiter */
    _Atomic uint64_t groups;         /* group rounds (knit_group_*) */
    _Atomic uint64_t members;        /* members submitted to them */
    _Atomic uint64_t promises;       /* promise rounds (knit_promise_*) */
} C;

static inline void cnt_add(_Atomic uint64_t *c, uint64_t v) {
    atomic_fetch_add_explicit(c, v, memory_order_relaxed); /* see above */
}
static inline uint64_t cnt_get(_Atomic uint64_t *c) {
    return atomic_load_explicit(c, memory_order_relaxed); /* see above */
}

/* ------------------------------------------------------------------ */
/* Deterministic randomness and payload bytes                           */
/* ------------------------------------------------------------------ */

#define GOLDEN 0x9E3779B97F4A7C15ull

static inline uint64_t mix64(uint64_t z) {
    z += GOLDEN;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

typedef struct rng {
    uint64_t s;
} rng;
static inline uint64_t rng_next(rng *r) { return mix64(r->s += GOLDEN); }
static inline double rng_unit(rng *r) {
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}
static inline uint64_t rng_below(rng *r, uint64_t n) {
    return n == 0 ? 0 : rng_next(r) % n;
}
static inline uint64_t rng_range(rng *r, uint64_t lo, uint64_t hi) { /* [lo,hi] */
    return hi <= lo ? lo : lo + rng_below(r, hi - lo + 1);
}

/* Payloads of HDR_BYTES or more start with (id ^ mask0, rec ^ mask1): the
 * task finds its record there. Shorter ("tiny") ones carry only bytes
 * derived from (seed, len), and their tasks have no record. */
#define HDR_BYTES 16u
#define TINY_TAG 0x7469E7ull

static inline uint64_t pat_key(uint64_t id, size_t len) {
    return len >= HDR_BYTES ? mix64(cfg.seed ^ mix64(id))
                            : mix64(cfg.seed ^ TINY_TAG ^ (uint64_t)len);
}
static inline uint64_t pat_word(uint64_t key, size_t k) {
    return mix64(key + (uint64_t)k * 0xD1B54A32D192ED03ull);
}

static void fill_bytes(unsigned char *p, size_t len, uint64_t id, const void *rec) {
    uint64_t key = pat_key(id, len);
    size_t k = 0;
    for (; (k + 1) * 8 <= len; k++) {
        uint64_t w = pat_word(key, k);
        memcpy(p + k * 8, &w, 8);
    }
    if (k * 8 < len) {
        uint64_t w = pat_word(key, k);
        memcpy(p + k * 8, &w, len - k * 8);
    }
    if (len >= HDR_BYTES) {
        uint64_t h0 = id ^ g_mask0, h1 = (uint64_t)(uintptr_t)rec ^ g_mask1;
        memcpy(p, &h0, 8);
        memcpy(p + 8, &h1, 8);
    }
}

/* Returns SIZE_MAX if p[0..len) is what fill_bytes wrote for (id, rec),
 * else the offset of the first differing 8-byte word (in *got and *want). */
static size_t verify_bytes(const unsigned char *p, size_t len, uint64_t id,
                           const void *rec, uint64_t *got, uint64_t *want) {
    uint64_t key = pat_key(id, len);
    size_t k = 0;
    if (len >= HDR_BYTES) {
        uint64_t h[2], e[2] = {id ^ g_mask0, (uint64_t)(uintptr_t)rec ^ g_mask1};
        memcpy(h, p, 16);
        for (int i = 0; i < 2; i++)
            if (h[i] != e[i]) {
                *got = h[i];
                *want = e[i];
                return (size_t)i * 8;
            }
        k = 2;
    }
    for (; (k + 1) * 8 <= len; k++) {
        uint64_t w, e = pat_word(key, k);
        memcpy(&w, p + k * 8, 8);
        if (w != e) {
            *got = w;
            *want = e;
            return k * 8;
        }
    }
    if (k * 8 < len) {
        uint64_t w = 0, e = 0, full = pat_word(key, k);
        memcpy(&w, p + k * 8, len - k * 8);
        memcpy(&e, &full, len - k * 8);
        if (w != e) {
            *got = w;
            *want = e;
            return k * 8;
        }
    }
    return SIZE_MAX;
}

static void check_bytes(const void *p, size_t len, uint64_t id, const void *rec,
                        const char *kind, const char *where) {
    uint64_t got = 0, want = 0;
    size_t off = verify_bytes(p, len, id, rec, &got, &want);
    CHECK(off == SIZE_MAX,
          "%s: payload of task id=%#" PRIx64 " (%s, %zu bytes) differs at byte "
          "%zu: got %#" PRIx64 ", want %#" PRIx64,
          where, id, kind, len, off, got, want);
    cnt_add(&C.payloads, 1);
    cnt_add(&C.payload_bytes, len);
}

/* Skewed sizes in [lo, hi]: most small, a few near the top. */
static size_t skewed_size(rng *r, size_t lo, size_t hi) {
    if (hi <= lo) return lo;
    double u = rng_unit(r);
    size_t cap;
    if (u < 0.50) cap = 256;
    else if (u < 0.80) cap = 4096;
    else if (u < 0.95) cap = 64 << 10;
    else if (u < 0.99) cap = 512 << 10;
    else if (u < 0.998) cap = hi;
    else return hi; /* the maximum itself, now and then */
    if (cap > hi) cap = hi;
    if (cap < lo) cap = lo;
    return (size_t)rng_range(r, lo, cap);
}

/* ------------------------------------------------------------------ */
/* Moved buffers: a counting free function, one atomic flag per buffer  */
/* ------------------------------------------------------------------ */

/* Flags live in chunks of 64 Ki buffers, made on first use and freed once
 * every buffer in them is freed (a free that finds its chunk retired is a
 * double free), so an hour-long soak needs little memory. */
#define BT_SHIFT 16u
#define BT_CHUNK (1u << BT_SHIFT)
#define BT_CHUNKS (1u << 16)
enum { BUF_NONE = 0, BUF_LIVE = 1, BUF_FREED = 2 };
#define BT_RETIRED ((_Atomic uint8_t *)(uintptr_t)1)

static _Atomic(_Atomic uint8_t *) bt_chunk[BT_CHUNKS];
static _Atomic uint32_t bt_freed[BT_CHUNKS];
static _Atomic uint64_t bt_next;

static uint64_t bt_new(void) {
    /* relaxed: ids only need to be unique. */
    uint64_t id = atomic_fetch_add_explicit(&bt_next, 1, memory_order_relaxed);
    CHECK(id < (uint64_t)BT_CHUNK * BT_CHUNKS, "more than %u moved buffers",
          BT_CHUNK * BT_CHUNKS);
    uint32_t c = (uint32_t)(id >> BT_SHIFT);
    /* acquire: pairs with the release CAS below that published the chunk. */
    _Atomic uint8_t *chunk = atomic_load_explicit(&bt_chunk[c], memory_order_acquire);
    if (chunk == NULL) {
        _Atomic uint8_t *mine = calloc(BT_CHUNK, 1);
        CHECK(mine != NULL, "out of memory (buffer flags)");
        _Atomic uint8_t *expect = NULL;
        /* acq_rel: release publishes the zeroed chunk to bt_new/bt_free
         * acquire loads; acquire (on failure too) reads the winner's. */
        if (atomic_compare_exchange_strong_explicit(&bt_chunk[c], &expect, mine,
                                                    memory_order_acq_rel,
                                                    memory_order_acquire))
            chunk = mine;
        else {
            free(mine);
            chunk = expect;
        }
    }
    CHECK(chunk != BT_RETIRED, "buffer flag chunk %u retired before buffer %" PRIu64
          " was made", c, id);
    /* release: pairs with the acq_rel exchange in bt_free, so a free that
     * sees LIVE also sees this buffer's bytes and header. (knit's own
     * hand-off orders them too; this does not rely on it.) */
    atomic_store_explicit(&chunk[id & (BT_CHUNK - 1)], BUF_LIVE, memory_order_release);
    cnt_add(&C.moved_made, 1);
    return id;
}

static void bt_free(uint64_t id, const char *how) {
    uint32_t c = (uint32_t)(id >> BT_SHIFT);
    CHECK(id < atomic_load_explicit(&bt_next, memory_order_relaxed),
          "%s: free of buffer id %" PRIu64 " that was never made", how, id);
    /* acquire: pairs with the release CAS in bt_new. */
    _Atomic uint8_t *chunk = atomic_load_explicit(&bt_chunk[c], memory_order_acquire);
    CHECK(chunk != NULL && chunk != BT_RETIRED,
          "%s: buffer id %" PRIu64 " freed twice (its flag chunk is %s)", how, id,
          chunk == NULL ? "missing" : "retired: all its buffers were freed");
    /* acq_rel: acquire pairs with bt_new's release store of LIVE; release
     * orders this free before a later double free's exchange reads FREED. */
    uint8_t was = atomic_exchange_explicit(&chunk[id & (BT_CHUNK - 1)], BUF_FREED,
                                           memory_order_acq_rel);
    CHECK(was == BUF_LIVE, "%s: buffer id %" PRIu64 " %s", how, id,
          was == BUF_FREED ? "freed twice (double free)" : "freed but never made live");
    cnt_add(&C.moved_freed, 1);
    /* acq_rel: the thread that frees the chunk's last buffer must see every
     * other free's flag write as done before it frees the chunk. */
    if (atomic_fetch_add_explicit(&bt_freed[c], 1, memory_order_acq_rel) + 1 ==
        BT_CHUNK) {
        /* acq_rel: the exchange hands the chunk from the table to us. */
        _Atomic uint8_t *old = atomic_exchange_explicit(&bt_chunk[c], BT_RETIRED,
                                                        memory_order_acq_rel);
        free((void *)old);
    }
}

/* At the end: every buffer made was freed. */
static void bt_check_all_freed(void) {
    uint64_t n = atomic_load_explicit(&bt_next, memory_order_relaxed);
    for (uint64_t c = 0; c * BT_CHUNK < n; c++) {
        _Atomic uint8_t *chunk = atomic_load_explicit(&bt_chunk[c], memory_order_acquire);
        if (chunk == BT_RETIRED) continue;
        CHECK(chunk != NULL, "buffer flag chunk %" PRIu64 " missing", c);
        uint64_t end = (c + 1) * BT_CHUNK < n ? (c + 1) * BT_CHUNK : n;
        for (uint64_t id = c * BT_CHUNK; id < end; id++) {
            uint8_t f = atomic_load_explicit(&chunk[id & (BT_CHUNK - 1)],
                                             memory_order_acquire);
            CHECK(f == BUF_FREED, "moved buffer id %" PRIu64 " was never freed "
                  "(leak: state %u)", id, f);
        }
        free((void *)chunk);
        atomic_store_explicit(&bt_chunk[c], NULL, memory_order_relaxed);
    }
}

/* A moved buffer: this header, then the bytes the task sees. */
#define MHDR_MAGIC 0x4D4F564544425546ull /* "MOVEDBUF" */
#define MHDR_DEAD 0xDEADDEADDEADDEADull
struct rec;
struct mhdr {
    uint64_t magic;
    uint64_t buf_id;
    struct rec *rec;
    uint64_t len;
};

static void moved_free(void *ctx, void *data, size_t len) {
    uint64_t id = (uint64_t)(uintptr_t)ctx - 1;
    bt_free(id, "moved buffer free_fn");
    struct mhdr *m = (struct mhdr *)data - 1;
    CHECK(m->magic == MHDR_MAGIC && m->buf_id == id && m->len == len,
          "moved buffer free_fn: ctx says buffer %" PRIu64 " (%zu bytes) but the "
          "memory says magic %#" PRIx64 " buffer %" PRIu64 " (%" PRIu64 " bytes)",
          id, len, m->magic, m->buf_id, m->len);
    m->magic = MHDR_DEAD;
    free(m);
}

/* ------------------------------------------------------------------ */
/* Task plans and records                                               */
/* ------------------------------------------------------------------ */

enum { D_LEAVE, D_TAKE_FREE, D_TAKE_RETURN };
enum { C_NONE, C_NOW, C_LATE };
enum { T_AGAIN, T_CANCEL, T_ABANDON };

#define CANCEL_CODE 4242 /* a task that sees its cancel fails with this */
#define CONT_TAG 0xC0417ull

struct plan {
    uint64_t id;
    size_t len;
    int kind;
    bool tiny;       /* no record reachable from the task */
    bool fail;
    int fail_code;
    int cancel;      /* C_* */
    bool timed;      /* first await has a short timeout */
    int64_t timeout_ns;
    int on_timeout;  /* T_* */
    bool abandon_cancel;
    unsigned spin_us; /* busy time, watching knit_task_cancelled */
    unsigned depth, children;
    int disp;        /* D_*: what the task does with its input */
    bool take_out;   /* the awaiter takes a returned buffer */
    bool then, cont_take;
    bool await_all;  /* a parent awaits its children with knit_await_all */
    bool probe;      /* a parent first tests a child with timeout 0 */
};

#define REC_MAGIC 0x5245434F52445354ull
struct rec {
    uint64_t magic;
    struct plan p;
    uint64_t buf_id;             /* moved: its flag index */
    _Atomic uint32_t refs;       /* owner (producer or parent), task, cont */
    _Atomic uint32_t runs;       /* task entries: must stay <= 1 */
    _Atomic uint32_t cont_runs;  /* continuation entries: must stay <= 1 */
    _Atomic uint32_t cancel_req; /* a cancel was requested (before the call) */
    _Atomic uint32_t cancel_ok;  /* knit_future_cancel returned 0 */
    /* Written by the task (or continuation) and read by the awaiter after
     * the await: plain fields on purpose, ordered only by knit's settle ->
     * await hand-off, the contract under test (TSan reports it if knit
     * fails to order them). */
    bool saw_cancel;
    bool returned;
    int cont_rc;
    void *cont_res;
    int cont_take_rc;
};

static uint64_t expect_result(const struct plan *p) {
    if (p->tiny) return mix64(TINY_TAG ^ (uint64_t)p->len);
    return mix64(p->id ^ mix64((uint64_t)p->len));
}

static struct rec *rec_new(const struct plan *p) {
    struct rec *r = calloc(1, sizeof *r);
    CHECK(r != NULL, "out of memory (task record)");
    r->magic = REC_MAGIC;
    r->p = *p;
    uint32_t refs = 1 + (p->tiny ? 0 : 1) + (p->then ? 1 : 0);
    atomic_init(&r->refs, refs);
    atomic_init(&r->runs, 0);
    atomic_init(&r->cont_runs, 0);
    atomic_init(&r->cancel_req, 0);
    atomic_init(&r->cancel_ok, 0);
    cnt_add(&C.recs_live, 1);
    return r;
}

static void rec_unref(struct rec *r) {
    /* acq_rel: every holder's use of r happens before the free. */
    uint32_t was = atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel);
    CHECK(was >= 1, "record of task id=%#" PRIx64 " released too often", r->p.id);
    if (was == 1) {
        r->magic = 0;
        free(r);
        /* relaxed: a statistic; the final read follows quiescence. */
        atomic_fetch_sub_explicit(&C.recs_live, 1, memory_order_relaxed);
    }
}

static int pick_kind(rng *r) {
    unsigned total = 0;
    for (int k = 0; k < K_COUNT; k++) total += cfg.mix[k];
    uint64_t x = rng_below(r, total);
    for (int k = 0; k < K_COUNT; k++) {
        if (x < cfg.mix[k]) return k;
        x -= cfg.mix[k];
    }
    return K_NONE;
}

/* The plan of a task: a pure function of (seed, id, depth, nested). */
static struct plan make_plan(uint64_t id, unsigned depth, bool child) {
    rng r = {mix64(cfg.seed ^ mix64(id))};
    struct plan p;
    memset(&p, 0, sizeof p);
    p.id = id;
    p.kind = pick_kind(&r);
    size_t max = child && cfg.max_size > 4096 ? 4096 : cfg.max_size;
    switch (p.kind) {
    case K_NONE: p.len = 0; break;
    case K_INLINE: p.len = (size_t)rng_range(&r, 0, KNIT_INLINE_BYTES); break;
    case K_ARENA:
        p.len = skewed_size(&r, KNIT_INLINE_BYTES + 1,
                            max > KNIT_INLINE_BYTES ? max : KNIT_INLINE_BYTES + 1);
        break;
    default: p.len = skewed_size(&r, 0, max); break;
    }
    if (p.len > max && p.kind != K_ARENA) p.len = max;
    p.tiny = (p.kind == K_INLINE || p.kind == K_ARENA || p.kind == K_BINARY) &&
             p.len < HDR_BYTES;
    p.fail = rng_unit(&r) < cfg.fail;
    p.fail_code = (int)rng_range(&r, 1, 1000);
    double u = rng_unit(&r);
    p.cancel = u < cfg.cancel / 2 ? C_NOW : u < cfg.cancel ? C_LATE : C_NONE;
    if (!child) {
        p.timed = rng_unit(&r) < cfg.timeout;
        p.timeout_ns = (int64_t)rng_range(&r, 1, 100) * 1000;
        u = rng_unit(&r);
        p.on_timeout = u < 0.4 ? T_AGAIN : u < 0.7 ? T_CANCEL : T_ABANDON;
        p.abandon_cancel = rng_unit(&r) < 0.5;
        p.then = rng_unit(&r) < cfg.then;
        p.cont_take = rng_unit(&r) < 0.5;
    } else if (p.cancel == C_LATE) {
        p.cancel = C_NOW; /* children: cancelled right after submit */
    }
    if (!p.tiny) {
        if (p.timed || p.cancel == C_LATE || rng_unit(&r) < 0.01)
            p.spin_us = (unsigned)rng_range(&r, 20, child ? 50 : 300) /
                        STRESS_SPIN_SCALE;
        if (depth > 0) {
            p.depth = depth;
            p.children = (unsigned)rng_range(&r, 1, child ? 2 : 3);
        } else if (!child && cfg.depth > 0 && rng_unit(&r) < cfg.nest) {
            p.depth = (unsigned)rng_range(&r, 1, cfg.depth);
            p.children = (unsigned)rng_range(&r, 1, 3);
        }
        p.await_all = rng_unit(&r) < 0.5;
        p.probe = rng_unit(&r) < 0.5;
        u = rng_unit(&r);
        p.disp = p.kind == K_NONE ? D_LEAVE
                 : u < 0.4        ? D_LEAVE
                 : u < 0.7        ? D_TAKE_FREE
                                  : D_TAKE_RETURN;
    }
    p.take_out = rng_unit(&r) < 0.75;
    return p;
}

static uint64_t child_id(uint64_t parent, unsigned i) {
    return mix64(parent ^ ((uint64_t)(i + 1) * 0xA24BAED4963EE407ull)) |
           (1ull << 63);
}

/* ------------------------------------------------------------------ */
/* Tasks                                                                */
/* ------------------------------------------------------------------ */

static void *task_none(knit_task *t, void *arg);
static void *task_bytes(knit_task *t, void *arg);
static void *task_moved(knit_task *t, void *arg);
static void *task_tiny(knit_task *t, void *arg);
static void *task_tiny_fail(knit_task *t, void *arg);
static void *task_cont(knit_task *t, void *arg);

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Every task function ends here. */
static void task_done(void) {
    /* release: pairs with the acquire load in wait_quiescent; everything
     * this task did (counters, its children's counts) happens before a
     * quiescence that counts it. */
    atomic_fetch_add_explicit(&C.finished, 1, memory_order_release);
}

struct sub {
    knit_future *f, *g;
    struct rec *r;
    /* A producer's timed await right after the submit (timed_first). */
    bool pre_done, abandoned;
    size_t arena_len; /* arena bytes its payload (or returned buffer) holds */
    int pre_rc;
    void *pre_res;
    char pre_msg[160];
};

static void submit_planned(knit_pool *pool, const struct plan *p, struct sub *s,
                           unsigned char *scratch, const char *where);
static void do_cancel(struct rec *r, knit_future *f, const char *where);
static int expected_rc(struct rec *r, uint64_t *res);
static void check_settled(struct rec *r, knit_future *f, int rc, void *res,
                          const char *msg, const char *where);
static void take_returned(struct rec *r, knit_future *f, const char *where);

/* Children: submitted from inside a task, maybe cancelled, awaited. */
static void run_children(knit_task *t, struct rec *parent) {
    const struct plan *pp = &parent->p;
    knit_pool *pool = knit_task_pool(t);
    CHECK(pool == g_pool, "knit_task_pool: %p, not the pool %p", (void *)pool,
          (void *)g_pool);
    struct sub s[3];
    knit_future *fs[3];
    unsigned n = pp->children;
    unsigned char *scratch = malloc(4096);
    CHECK(scratch != NULL, "out of memory (child scratch)");
    for (unsigned i = 0; i < n; i++) {
        struct plan cp = make_plan(child_id(pp->id, i), pp->depth - 1, true);
        submit_planned(pool, &cp, &s[i], scratch, "nested submit");
        cnt_add(&C.nested, 1);
        fs[i] = s[i].f;
        if (cp.cancel == C_NOW) do_cancel(s[i].r, s[i].f, "nested cancel");
    }
    free(scratch);
    if (pp->probe) {
        int rc = knit_await(fs[0], 0, NULL);
        if (rc == KNIT_ETIMEDOUT) cnt_add(&C.timeouts, 1);
    }
    if (pp->await_all) {
        int rc = knit_await_all(fs, n, -1);
        int want = 0;
        for (unsigned i = 0; i < n && want == 0; i++) {
            uint64_t ignored;
            want = expected_rc(s[i].r, &ignored);
        }
        CHECK(rc == want,
              "knit_await_all over %u children of task id=%#" PRIx64
              " returned %d (%s), expected %d (the first failure by index)",
              n, pp->id, rc, knit_strerror(rc), want);
    }
    for (unsigned i = 0; i < n; i++) {
        void *res = NULL;
        int rc = knit_await(s[i].f, -1, &res);
        check_settled(s[i].r, s[i].f, rc, res, rc < 0 ? knit_last_error() : "",
                      "nested await");
        take_returned(s[i].r, s[i].f, "nested take");
        CHECK(knit_future_release(s[i].f) == 0, "nested release: %s",
              knit_last_error());
        if (atomic_load_explicit(&s[i].r->cancel_ok, memory_order_relaxed) &&
            !s[i].r->p.tiny)
            rec_unref(s[i].r); /* the task's reference: it never ran */
        rec_unref(s[i].r);
    }
}

/* The common body of every task that has a record. */
static void *task_body(knit_task *t, struct rec *r, const void *bytes, size_t len) {
    const struct plan *p = &r->p;
    /* acq_rel: a second entry (double run) sees the first. */
    uint32_t runs = atomic_fetch_add_explicit(&r->runs, 1, memory_order_acq_rel);
    CHECK(runs == 0, "task id=%#" PRIx64 " ran %u times", p->id, runs + 1);
    /* relaxed: a cancelled task never runs, so a legitimate run cannot
     * race with the store; a run after a successful cancel is the bug. */
    CHECK(!atomic_load_explicit(&r->cancel_ok, memory_order_relaxed),
          "task id=%#" PRIx64 " ran although knit_future_cancel returned 0",
          p->id);
    cnt_add(&C.runs, 1);
    CHECK(len == p->len, "task id=%#" PRIx64 " (%s) sees %zu bytes, submitted %zu",
          p->id, kind_name[p->kind], len, p->len);
    if (p->kind != K_NONE) check_bytes(bytes, len, p->id, r, kind_name[p->kind], "task");
    r->saw_cancel = false;
    if (p->spin_us > 0) {
        int64_t end = now_ns() + (int64_t)p->spin_us * 1000;
        while (now_ns() < end) {
            if (knit_task_cancelled(t)) {
                /* acquire: pairs with do_cancel's release store, made before
                 * knit_future_cancel asked this task to stop. */
                CHECK(atomic_load_explicit(&r->cancel_req, memory_order_acquire),
                      "task id=%#" PRIx64 " sees knit_task_cancelled() but was "
                      "never cancelled", p->id);
                r->saw_cancel = true;
                cnt_add(&C.saw_cancel, 1);
                break;
            }
        }
    }
    if (p->children > 0) run_children(t, r);
    /* Input: leave it to the runtime, take and free it, or return it. */
    r->returned = false;
    if (p->disp != D_LEAVE) {
        knit_buf b = knit_task_take_buf(t);
        CHECK(b.len == len && (b.data != NULL || len == 0),
              "task id=%#" PRIx64 ": knit_task_take_buf gave %zu bytes at %p, "
              "expected %zu", p->id, b.len, b.data, len);
        CHECK(p->kind == K_INLINE || b.data == bytes,
              "task id=%#" PRIx64 " (%s): taken buffer %p is not its input %p",
              p->id, kind_name[p->kind], b.data, bytes);
        if (p->kind == K_INLINE) check_bytes(b.data, b.len, p->id, r, "inline take", "task");
        size_t l2 = 99;
        const void *after = knit_task_bytes(t, &l2);
        CHECK(after == NULL && l2 == 0,
              "task id=%#" PRIx64 ": knit_task_bytes after the take: %p, %zu",
              p->id, after, l2);
        if (p->disp == D_TAKE_FREE) {
            knit_buf_free(&b);
            CHECK(b.data == NULL && b.free_fn == NULL, "knit_buf_free left data");
        } else {
            int rc = knit_task_return_buf(t, &b);
            CHECK(rc == 0 && b.data == NULL,
                  "task id=%#" PRIx64 ": knit_task_return_buf: %d (%s)", p->id, rc,
                  knit_last_error());
            rc = knit_task_return_buf(t, &b);
            CHECK(rc == KNIT_EALREADY,
                  "task id=%#" PRIx64 ": second knit_task_return_buf: %d, "
                  "expected KNIT_EALREADY", p->id, rc);
            r->returned = true;
        }
    }
    uint64_t result = expect_result(p);
    if (r->saw_cancel) {
        knit_task_fail(t, CANCEL_CODE, "stress: task id=%#" PRIx64 " saw its cancel",
                       p->id);
        cnt_add(&C.failures, 1);
    } else if (p->fail) {
        int rc = knit_task_fail(t, p->fail_code,
                                "stress: task id=%#" PRIx64 " fails as planned",
                                p->id);
        CHECK(rc == KNIT_ETASK, "knit_task_fail returned %d", rc);
        cnt_add(&C.failures, 1);
    }
    task_done();
    rec_unref(r); /* the task's reference; r may be gone now */
    return (void *)(uintptr_t)result;
}

static struct rec *rec_check(struct rec *r, const char *how) {
    CHECK(r != NULL && r->magic == REC_MAGIC,
          "%s: task record %p is not a live record (magic %#" PRIx64 ")", how,
          (void *)r, r != NULL ? r->magic : 0);
    return r;
}

static void *task_none(knit_task *t, void *arg) {
    size_t len = 77;
    const void *b = knit_task_bytes(t, &len);
    CHECK(b == NULL && len == 0, "task without payload: knit_task_bytes %p %zu", b,
          len);
    return task_body(t, rec_check(arg, "task_none"), NULL, 0);
}

static void *task_bytes(knit_task *t, void *arg) {
    size_t len = 0;
    const unsigned char *b = knit_task_bytes(t, &len);
    CHECK(b == arg, "payload task: arg %p is not knit_task_bytes %p", arg,
          (const void *)b);
    CHECK(b != NULL && len >= HDR_BYTES,
          "payload task: %zu bytes at %p, expected a header", len, (const void *)b);
    uint64_t h0, h1;
    memcpy(&h0, b, 8);
    memcpy(&h1, b + 8, 8);
    struct rec *r = rec_check((struct rec *)(uintptr_t)(h1 ^ g_mask1), "task_bytes");
    CHECK(r->p.id == (h0 ^ g_mask0),
          "payload task: header id %#" PRIx64 " but its record is task %#" PRIx64,
          h0 ^ g_mask0, r->p.id);
    return task_body(t, r, b, len);
}

static void *task_moved(knit_task *t, void *arg) {
    size_t len = 0;
    const unsigned char *b = knit_task_bytes(t, &len);
    CHECK(b == arg && b != NULL, "moved task: arg %p, knit_task_bytes %p", arg,
          (const void *)b);
    const struct mhdr *m = (const struct mhdr *)b - 1;
    CHECK(m->magic == MHDR_MAGIC && m->len == len,
          "moved task: buffer header magic %#" PRIx64 " len %" PRIu64 ", task sees %zu",
          m->magic, m->len, len);
    return task_body(t, rec_check(m->rec, "task_moved"), b, len);
}

static void *task_tiny_common(knit_task *t, bool fail) {
    size_t len = 0;
    const void *b = knit_task_bytes(t, &len);
    cnt_add(&C.runs, 1);
    CHECK(len < HDR_BYTES && (b != NULL || len == 0),
          "tiny task: %zu bytes at %p", len, b);
    check_bytes(b, len, 0, NULL, "tiny", "tiny task");
    if (fail) {
        knit_task_fail(t, 1000 + (int)len, "stress: tiny task (%zu bytes) fails",
                       len);
        cnt_add(&C.failures, 1);
    }
    task_done();
    return (void *)(uintptr_t)mix64(TINY_TAG ^ (uint64_t)len);
}
static void *task_tiny(knit_task *t, void *arg) {
    (void)arg;
    return task_tiny_common(t, false);
}
static void *task_tiny_fail(knit_task *t, void *arg) {
    (void)arg;
    return task_tiny_common(t, true);
}

static void *task_cont(knit_task *t, void *arg) {
    struct rec *r = rec_check(arg, "continuation");
    /* acq_rel: a second entry sees the first. */
    uint32_t runs = atomic_fetch_add_explicit(&r->cont_runs, 1, memory_order_acq_rel);
    CHECK(runs == 0, "continuation of task id=%#" PRIx64 " ran %u times", r->p.id,
          runs + 1);
    cnt_add(&C.runs, 1);
    void *res = NULL;
    r->cont_rc = knit_task_antecedent(t, &res);
    r->cont_res = res;
    r->cont_take_rc = 1; /* not tried */
    if (r->p.cont_take) {
        knit_buf b = {0};
        r->cont_take_rc = knit_task_antecedent_buf(t, &b);
        if (r->cont_take_rc == 0) {
            CHECK(b.len == r->p.len, "continuation of task id=%#" PRIx64
                  ": taken buffer has %zu bytes, expected %zu", r->p.id, b.len,
                  r->p.len);
            check_bytes(b.data, b.len, r->p.id, r, "returned", "continuation");
            cnt_add(&C.returned, 1);
            knit_buf_free(&b);
        }
    }
    uint64_t out = mix64(CONT_TAG ^ r->p.id);
    task_done();
    rec_unref(r); /* the continuation's reference */
    return (void *)(uintptr_t)out;
}

/* ------------------------------------------------------------------ */
/* Submitting, cancelling, checking outcomes                            */
/* ------------------------------------------------------------------ */

static void submit_planned(knit_pool *pool, const struct plan *p, struct sub *s,
                           unsigned char *scratch, const char *where) {
    struct rec *r = rec_new(p);
    s->r = r;
    s->f = s->g = NULL;
    /* Counted before the submit: the task may finish (and be counted as
     * finished) before knit_submit returns; a failed submit exits. */
    cnt_add(&C.submitted, 1);
    int rc;
    switch (p->kind) {
    case K_NONE:
        rc = knit_submit(pool, task_none, r, &s->f);
        break;
    case K_INLINE:
    case K_ARENA:
        fill_bytes(scratch, p->len, p->id, r);
        rc = knit_submit_copy(pool, p->tiny ? (p->fail ? task_tiny_fail : task_tiny)
                                            : task_bytes,
                              scratch, p->len, &s->f);
        if (rc == 0 && p->len > KNIT_INLINE_BYTES) cnt_add(&C.arena_allocs, 1);
        break;
    case K_BINARY: {
        void *mem = knit_payload_alloc(pool, p->len);
        CHECK(mem != NULL, "%s: knit_payload_alloc(%zu): %s", where, p->len,
              knit_last_error());
        cnt_add(&C.arena_allocs, 1);
        fill_bytes(mem, p->len, p->id, r);
        knit_buf b = knit_payload_buf(pool, mem, p->len);
        CHECK(b.data == mem && b.len == p->len && b.free_fn != NULL,
              "%s: knit_payload_buf did not wrap arena memory: %s", where,
              knit_last_error());
        rc = knit_submit_buf(pool, p->tiny ? (p->fail ? task_tiny_fail : task_tiny)
                                           : task_bytes,
                             &b, &s->f);
        CHECK(rc != 0 || (b.data == NULL && b.len == 0),
              "%s: knit_submit_buf succeeded but left the caller's buffer set", where);
        break;
    }
    case K_MOVED: {
        struct mhdr *m = malloc(sizeof *m + p->len);
        CHECK(m != NULL, "out of memory (moved buffer of %zu bytes)", p->len);
        m->magic = MHDR_MAGIC;
        m->rec = r;
        m->len = p->len;
        fill_bytes((unsigned char *)(m + 1), p->len, p->id, r);
        m->buf_id = bt_new(); /* last: publishes the filled buffer */
        r->buf_id = m->buf_id;
        knit_buf b = {m + 1, p->len, moved_free, (void *)(uintptr_t)(m->buf_id + 1)};
        rc = knit_submit_buf(pool, task_moved, &b, &s->f);
        CHECK(rc != 0 || (b.data == NULL && b.len == 0 && b.free_fn == NULL),
              "%s: knit_submit_buf succeeded but left the caller's buffer set", where);
        break;
    }
    default:
        rc = KNIT_EINVAL;
    }
    CHECK(rc == 0 && s->f != NULL,
          "%s: submit of task id=%#" PRIx64 " (%s, %zu bytes) failed: %d (%s)", where,
          p->id, kind_name[p->kind], p->len, rc, rc < 0 ? knit_last_error() : "");
    if (p->then) {
        cnt_add(&C.submitted, 1); /* before, as above */
        rc = knit_future_then(s->f, task_cont, r, &s->g);
        CHECK(rc == 0 && s->g != NULL, "%s: knit_future_then on task id=%#" PRIx64
              ": %d (%s)", where, p->id, rc, knit_last_error());
        cnt_add(&C.conts, 1);
    }
}

static void do_cancel(struct rec *r, knit_future *f, const char *where) {
    if (atomic_load_explicit(&r->cancel_req, memory_order_relaxed)) return;
    /* release: pairs with the task's acquire load after it sees
     * knit_task_cancelled() (task_body). */
    atomic_store_explicit(&r->cancel_req, 1, memory_order_release);
    int rc = knit_future_cancel(f);
    switch (rc) {
    case 0:
        /* relaxed: read by this thread later, and by a task that must not
         * run (see task_body). */
        atomic_store_explicit(&r->cancel_ok, 1, memory_order_relaxed);
        cnt_add(&C.cancels_ok, 1);
        break;
    case KNIT_EBUSY: cnt_add(&C.cancels_busy, 1); break;
    case KNIT_EALREADY: cnt_add(&C.cancels_late, 1); break;
    default:
        violation("%s: knit_future_cancel of task id=%#" PRIx64 " returned %d (%s)",
                  where, r->p.id, rc, knit_last_error());
    }
}

/* The outcome a settled future must have: its code, and *res for 0. */
static int expected_rc(struct rec *r, uint64_t *res) {
    const struct plan *p = &r->p;
    *res = 0;
    if (atomic_load_explicit(&r->cancel_ok, memory_order_relaxed)) return KNIT_ECANCELED;
    if (!p->tiny && r->saw_cancel) return KNIT_ETASK;
    if (p->fail) return KNIT_ETASK;
    *res = expect_result(p);
    return 0;
}

static void check_settled(struct rec *r, knit_future *f, int rc, void *res,
                          const char *msg, const char *where) {
    const struct plan *p = &r->p;
    cnt_add(&C.awaited, 1);
    bool cancelled = atomic_load_explicit(&r->cancel_ok, memory_order_relaxed);
    CHECK(rc != KNIT_ECANCELED || cancelled,
          "%s: task id=%#" PRIx64 " settled KNIT_ECANCELED but no cancel of it "
          "returned 0 (%s)", where, p->id, msg);
    uint64_t want_res;
    int want = expected_rc(r, &want_res);
    CHECK(rc == want,
          "%s: task id=%#" PRIx64 " (%s, %zu bytes, fail=%d, cancel_ok=%d, "
          "saw_cancel=%d) settled %d (%s: %s), expected %d (%s)",
          where, p->id, kind_name[p->kind], p->len, p->fail, cancelled,
          !p->tiny && r->saw_cancel, rc, knit_strerror(rc), msg, want,
          knit_strerror(want));
    if (!p->tiny) {
        /* acquire: pairs with the task's acq_rel entry increment. */
        uint32_t runs = atomic_load_explicit(&r->runs, memory_order_acquire);
        CHECK(runs == (cancelled ? 0u : 1u),
              "%s: task id=%#" PRIx64 " settled %s but its function ran %u times",
              where, p->id, knit_strerror(rc), runs);
    }
    char code[64];
    switch (want) {
    case 0:
        CHECK((uint64_t)(uintptr_t)res == want_res,
              "%s: task id=%#" PRIx64 " result %#" PRIx64 ", expected %#" PRIx64,
              where, p->id, (uint64_t)(uintptr_t)res, want_res);
        break;
    case KNIT_ETASK:
        snprintf(code, sizeof code, "(code %d)",
                 p->tiny ? 1000 + (int)p->len
                         : r->saw_cancel ? CANCEL_CODE : p->fail_code);
        CHECK(strstr(msg, code) != NULL && strstr(msg, "stress: ") != NULL,
              "%s: task id=%#" PRIx64 " failed with message \"%s\", expected %s "
              "and the task's text", where, p->id, msg, code);
        break;
    case KNIT_ECANCELED:
        CHECK(strstr(msg, "cancel") != NULL,
              "%s: cancelled task id=%#" PRIx64 ": message \"%s\"", where, p->id, msg);
        break;
    }
    /* Settled once: the outcome is stable. */
    CHECK(knit_future_done(f), "%s: task id=%#" PRIx64 " awaited but not done",
          where, p->id);
    void *res2 = NULL;
    int rc2 = knit_await(f, 0, &res2);
    CHECK(rc2 == rc && (rc != 0 || res2 == res),
          "%s: task id=%#" PRIx64 " awaited again: %d (result %p), first %d (%p)",
          where, p->id, rc2, res2, rc, res);
}

/* After the settle: the buffer the task returned goes to one taker. */
static void take_returned(struct rec *r, knit_future *f, const char *where) {
    const struct plan *p = &r->p;
    bool cancelled = atomic_load_explicit(&r->cancel_ok, memory_order_relaxed);
    bool returned = !p->tiny && !cancelled && r->returned;
    CHECK(returned == (!p->tiny && !cancelled && p->disp == D_TAKE_RETURN),
          "%s: task id=%#" PRIx64 " returned=%d against its plan", where, p->id,
          returned);
    bool cont_took = p->then && p->cont_take;
    if (cont_took)
        CHECK(r->cont_take_rc == (returned ? 0 : KNIT_ENOENT),
              "%s: continuation of task id=%#" PRIx64 ": knit_task_antecedent_buf "
              "%d, expected %d", where, p->id, r->cont_take_rc,
              returned ? 0 : KNIT_ENOENT);
    if (!p->take_out && !cont_took) return; /* freed with the future */
    knit_buf b = {0};
    int rc = knit_future_take_buf(f, &b);
    int want = !returned ? KNIT_ENOENT : cont_took ? KNIT_EALREADY : 0;
    CHECK(rc == want, "%s: knit_future_take_buf of task id=%#" PRIx64
          ": %d (%s), expected %d", where, p->id, rc, knit_strerror(rc), want);
    if (rc == 0) {
        CHECK(b.len == p->len && (b.data != NULL || b.len == 0),
              "%s: returned buffer of task id=%#" PRIx64 ": %zu bytes, expected %zu",
              where, p->id, b.len, p->len);
        if (p->kind == K_MOVED) {
            const struct mhdr *m = (const struct mhdr *)b.data - 1;
            CHECK(b.free_fn == moved_free && m->magic == MHDR_MAGIC &&
                      m->buf_id == r->buf_id && m->rec == r,
                  "%s: returned moved buffer of task id=%#" PRIx64 " is not its "
                  "input (buffer %" PRIu64 ")", where, p->id, r->buf_id);
        }
        check_bytes(b.data, b.len, p->id, r, "returned", where);
        cnt_add(&C.returned, 1);
        knit_buf_free(&b);
        knit_buf again = {0};
        rc = knit_future_take_buf(f, &again);
        CHECK(rc == KNIT_EALREADY, "%s: second knit_future_take_buf of task id=%#"
              PRIx64 ": %d, expected KNIT_EALREADY", where, p->id, rc);
    }
}

/* ------------------------------------------------------------------ */
/* Producers                                                            */
/* ------------------------------------------------------------------ */

static int64_t g_start_ns, g_end_ns;

struct producer {
    pthread_t thread;
    unsigned index;
    uint64_t quota; /* tasks, or UINT64_MAX with --seconds */
    struct sub *ring;
    unsigned char *scratch;
    /* Records of tasks cancelled before they ran, held (with the task's
     * reference) so that a run after the cancel is reported, not a
     * use-after-free; checked and dropped when the ring wraps and at the
     * end. */
    struct rec **grave;
    size_t ngrave, grave_cap, grave_next;
    size_t held; /* arena bytes of the ring's tasks (see arena_budget) */
};

/* The arena bytes one producer may hold in tasks it has not completed.
 * Without a bound a producer can fill the arena with finished futures
 * whose returned buffers it has not taken yet, then block for ever in
 * knit_payload_alloc (KNIT_BLOCK): a deadlock of the test, not of knit.
 * Half the arena (less jemalloc's 2 MiB of metadata) over the producers. */
static size_t arena_budget;

static void grave_drop(struct rec *r) {
    /* acquire: pairs with a (buggy) run's acq_rel increment. */
    CHECK(atomic_load_explicit(&r->runs, memory_order_acquire) == 0,
          "task id=%#" PRIx64 " ran after knit_future_cancel returned 0", r->p.id);
    rec_unref(r);
}

static void grave_add(struct producer *pr, struct rec *r) {
    if (pr->ngrave < pr->grave_cap) {
        pr->grave[pr->ngrave++] = r;
        return;
    }
    grave_drop(pr->grave[pr->grave_next]);
    pr->grave[pr->grave_next] = r;
    pr->grave_next = (pr->grave_next + 1) % pr->grave_cap;
}

/* Right after the submit of a timed task: a short await, then the planned
 * reaction to KNIT_ETIMEDOUT (await again later, cancel, or abandon). */
static void timed_first(struct sub *s) {
    struct rec *r = s->r;
    const struct plan *p = &r->p;
    void *res = NULL;
    int rc = knit_await(s->f, p->timeout_ns, &res);
    if (rc != KNIT_ETIMEDOUT) {
        s->pre_done = true;
        s->pre_rc = rc;
        s->pre_res = res;
        snprintf(s->pre_msg, sizeof s->pre_msg, "%s", rc < 0 ? knit_last_error() : "");
        return;
    }
    cnt_add(&C.timeouts, 1);
    switch (p->on_timeout) {
    case T_AGAIN: break; /* complete() awaits without a limit */
    case T_CANCEL: do_cancel(r, s->f, "cancel after timeout"); break;
    default:
        if (p->abandon_cancel) do_cancel(r, s->f, "cancel and abandon");
        s->abandoned = true;
        break;
    }
}

static void complete(struct producer *pr, struct sub *s) {
    struct rec *r = s->r;
    const struct plan *p = &r->p;
    int rc;
    void *res = NULL;
    if (p->cancel == C_LATE) do_cancel(r, s->f, "cancel before await");
    if (s->abandoned) {
        cnt_add(&C.abandoned, 1);
        CHECK(knit_future_release(s->f) == 0, "release: %s", knit_last_error());
        s->f = NULL;
        if (s->g != NULL) {
            /* The antecedent is released unawaited: its outcome is checked
             * through what the continuation saw. */
            void *gres = NULL;
            int grc = knit_await(s->g, -1, &gres);
            CHECK(grc == 0 && (uint64_t)(uintptr_t)gres == mix64(CONT_TAG ^ p->id),
                  "continuation of abandoned task id=%#" PRIx64 ": %d (%s)", p->id,
                  grc, knit_last_error());
            uint64_t want_res;
            int want = expected_rc(r, &want_res);
            CHECK(r->cont_rc == want &&
                      (want != 0 || (uint64_t)(uintptr_t)r->cont_res == want_res),
                  "continuation of abandoned task id=%#" PRIx64 " saw %d, expected %d",
                  p->id, r->cont_rc, want);
        }
    } else {
        const char *msg;
        if (s->pre_done) {
            rc = s->pre_rc;
            res = s->pre_res;
            msg = s->pre_msg;
        } else {
            rc = knit_await(s->f, -1, &res);
            msg = rc < 0 ? knit_last_error() : "";
        }
        check_settled(r, s->f, rc, res, msg, s->pre_done ? "timed await" : "await");
        if (s->g != NULL) {
            void *gres = NULL;
            int grc = knit_await(s->g, -1, &gres);
            CHECK(grc == 0 && (uint64_t)(uintptr_t)gres == mix64(CONT_TAG ^ p->id),
                  "continuation of task id=%#" PRIx64 ": %d (%s), result %p",
                  p->id, grc, knit_last_error(), gres);
            CHECK(r->cont_rc == rc && (rc != 0 || r->cont_res == res),
                  "continuation of task id=%#" PRIx64 " saw outcome %d (%p), the "
                  "awaiter %d (%p)", p->id, r->cont_rc, r->cont_res, rc, res);
        }
        take_returned(r, s->f, "await");
        CHECK(knit_future_release(s->f) == 0, "knit_future_release: %s",
              knit_last_error());
    }
    if (s->g != NULL)
        CHECK(knit_future_release(s->g) == 0, "knit_future_release (then): %s",
              knit_last_error());
    if (atomic_load_explicit(&r->cancel_ok, memory_order_relaxed) && !p->tiny)
        grave_add(pr, r); /* keeps the task's reference */
    rec_unref(r);         /* ours */
    memset(s, 0, sizeof *s);
}

/* ---- group rounds: a group of members, some failing, some adding members
 * to their own group, maybe cancelled midway; the wait's outcome and the
 * counts must agree with what the members did. ---- */
struct group_round {
    knit_group *g;
    uint64_t id;
    _Atomic uint64_t slots, submitted, ran, failed;
};

static void *task_member(knit_task *t, void *arg);

/* A member's argument: the round and the member's own number. Members
 * never outlive the round's wait, so these live in the round's array. */
struct member_arg {
    struct group_round *round;
    uint64_t n;
};

#define ROUND_MEMBERS 96

struct group_round_args {
    struct group_round round;
    struct member_arg args[ROUND_MEMBERS];
};

static void member_submit(struct group_round_args *ga, bool nested) {
    /* A slot of its own (never reused: a refused member leaves a hole). */
    uint64_t n = atomic_fetch_add_explicit(&ga->round.slots, 1, memory_order_relaxed);
    if (n >= ROUND_MEMBERS) return;
    ga->args[n].round = &ga->round;
    ga->args[n].n = n;
    /* Counted before the submit (undone if refused): a member may finish
     * before knit_group_submit returns, and quiescence checks finished <=
     * submitted. */
    cnt_add(&C.submitted, 1);
    atomic_fetch_add_explicit(&ga->round.submitted, 1, memory_order_relaxed);
    int rc = knit_group_submit(ga->round.g, task_member, &ga->args[n]);
    /* Only a cancelled group refuses a member here (no KNIT_FAIL pool). */
    CHECK(rc == 0 || rc == KNIT_ECANCELED, "knit_group_submit: %d (%s)", rc,
          knit_last_error());
    if (rc != 0) {
        atomic_fetch_sub_explicit(&C.submitted, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&ga->round.submitted, 1, memory_order_relaxed);
        return;
    }
    cnt_add(&C.members, 1);
    if (nested) cnt_add(&C.nested, 1);
}

static void *task_member(knit_task *t, void *arg) {
    struct member_arg *m = arg;
    struct group_round *round = m->round;
    /* The array that holds m: the round is its first member. */
    struct group_round_args *ga = (struct group_round_args *)(void *)round;
    cnt_add(&C.runs, 1);
    atomic_fetch_add_explicit(&round->ran, 1, memory_order_relaxed);
    uint64_t h = mix64(round->id ^ (m->n * GOLDEN));
    if ((double)(h >> 11) / 9007199254740992.0 < cfg.nest) member_submit(ga, true);
    if (knit_task_cancelled(t)) cnt_add(&C.saw_cancel, 1);
    if ((double)(mix64(h) >> 11) / 9007199254740992.0 < cfg.fail) {
        atomic_fetch_add_explicit(&round->failed, 1, memory_order_relaxed);
        cnt_add(&C.failures, 1);
        knit_task_fail(t, (int)(m->n + 1), "member %" PRIu64 " of group %#" PRIx64,
                       m->n, round->id);
    }
    task_done();
    return NULL;
}

static void group_round(uint64_t id, rng *r) {
    struct group_round_args *ga = calloc(1, sizeof *ga);
    CHECK(ga != NULL, "out of memory");
    ga->round.id = id;
    int rc = knit_group_create(g_pool, &ga->round.g);
    CHECK(rc == 0, "knit_group_create: %d (%s)", rc, knit_last_error());
    unsigned k = (unsigned)rng_range(r, 1, ROUND_MEMBERS / 2);
    bool cancel = rng_unit(r) < cfg.cancel * 4;
    for (unsigned i = 0; i < k; i++) {
        if (cancel && i == k / 2) CHECK(knit_group_cancel(ga->round.g) == 0, "cancel");
        member_submit(ga, false);
    }
    rc = knit_group_wait(ga->round.g, -1);
    /* relaxed: the wait ordered every member's writes before it. */
    uint64_t sub = atomic_load_explicit(&ga->round.submitted, memory_order_relaxed);
    uint64_t ran = atomic_load_explicit(&ga->round.ran, memory_order_relaxed);
    uint64_t failed = atomic_load_explicit(&ga->round.failed, memory_order_relaxed);
    CHECK(ran <= sub, "group %#" PRIx64 ": %" PRIu64 " members ran, %" PRIu64
          " submitted", id, ran, sub);
    if (!cancel)
        CHECK(ran == sub && rc == (failed ? KNIT_ETASK : 0),
              "group %#" PRIx64 ": wait %d (%s), %" PRIu64 " of %" PRIu64
              " ran, %" PRIu64 " failed", id, rc, knit_last_error(), ran, sub, failed);
    else
        CHECK(rc == KNIT_ECANCELED || (rc == KNIT_ETASK && failed > 0),
              "cancelled group %#" PRIx64 ": wait %d (%s)", id, rc, knit_last_error());
    if (rc == KNIT_ETASK)
        CHECK(strstr(knit_last_error(), "of group") != NULL,
              "group failure message: %s", knit_last_error());
    /* Members cancelled before they ran count as cancelled tasks. */
    cnt_add(&C.cancels_ok, sub - ran);
    /* A second wait reports the same outcome. */
    int again = knit_group_wait(ga->round.g, 0);
    CHECK(again == rc, "group %#" PRIx64 ": second wait %d, first %d", id, again, rc);
    rc = knit_group_destroy(ga->round.g);
    CHECK(rc == 0, "knit_group_destroy: %d (%s)", rc, knit_last_error());
    cnt_add(&C.groups, 1);
    free(ga);
}

/* ---- promise rounds: a task settles a promise the producer awaits (or a
 * cancel races it), a continuation follows the promise. ---- */
struct promise_round {
    knit_future *p;
    uint64_t id;
    bool reject;
    int settle_rc; /* what the settling task got */
    _Atomic int cont_rc;
};

static void *task_settle(knit_task *t, void *arg) {
    (void)t;
    struct promise_round *pr = arg;
    cnt_add(&C.runs, 1);
    pr->settle_rc = pr->reject ? knit_promise_reject(pr->p, 7, "promise %#" PRIx64, pr->id)
                               : knit_promise_resolve(pr->p, (void *)(uintptr_t)pr->id);
    task_done();
    return NULL;
}

static void *task_promise_cont(knit_task *t, void *arg) {
    struct promise_round *pr = arg;
    cnt_add(&C.runs, 1);
    void *res = NULL;
    int rc = knit_task_antecedent(t, &res);
    CHECK(rc != 0 || res == (void *)(uintptr_t)pr->id,
          "promise continuation: result %p", res);
    /* release: pairs with the producer's acquire load after it awaited
     * this continuation's future. */
    atomic_store_explicit(&pr->cont_rc, rc, memory_order_release);
    task_done();
    return NULL;
}

static void promise_round(uint64_t id, rng *r) {
    struct promise_round pr = {NULL, id, rng_unit(r) < 0.3, 1, 1};
    int rc = knit_promise_create(g_pool, &pr.p);
    CHECK(rc == 0, "knit_promise_create: %d (%s)", rc, knit_last_error());
    knit_future *cont = NULL, *settler = NULL;
    /* Counted first: each may finish before its call returns. */
    cnt_add(&C.submitted, 2);
    cnt_add(&C.conts, 1);
    cnt_add(&C.top, 1);
    CHECK(knit_future_then(pr.p, task_promise_cont, &pr, &cont) == 0, "then: %s",
          knit_last_error());
    CHECK(knit_submit(g_pool, task_settle, &pr, &settler) == 0, "submit: %s",
          knit_last_error());
    int cancel_rc = 1;
    if (rng_unit(r) < 0.25) cancel_rc = knit_future_cancel(pr.p); /* races it */
    void *res = NULL;
    rc = knit_await(pr.p, -1, &res);
    /* Kept now: the awaits below may run other tasks on this thread
     * (helping), which set its last error. */
    char msg[160];
    snprintf(msg, sizeof msg, "%s", rc < 0 ? knit_last_error() : "");
    CHECK(knit_await(settler, -1, NULL) == 0, "settler: %s", knit_last_error());
    if (cancel_rc == 0) {
        CHECK(rc == KNIT_ECANCELED && pr.settle_rc == KNIT_EALREADY,
              "promise %#" PRIx64 " cancelled: await %d, settle %d", id, rc,
              pr.settle_rc);
    } else {
        CHECK(cancel_rc == 1 || cancel_rc == KNIT_EALREADY, "promise cancel: %d",
              cancel_rc);
        CHECK(pr.settle_rc == 0, "promise settle: %d", pr.settle_rc);
        CHECK(pr.reject ? rc == KNIT_ETASK && strstr(msg, "(code 7)")
                        : rc == 0 && res == (void *)(uintptr_t)id,
              "promise %#" PRIx64 ": await %d (%s)", id, rc, msg);
    }
    CHECK(knit_await(cont, -1, NULL) == 0, "promise continuation: %s",
          knit_last_error());
    /* acquire: pairs with the continuation's release store. */
    CHECK(atomic_load_explicit(&pr.cont_rc, memory_order_acquire) == rc,
          "promise continuation saw %d, the awaiter %d", pr.cont_rc, rc);
    knit_future_release(settler);
    knit_future_release(cont);
    knit_future_release(pr.p);
    cnt_add(&C.promises, 1);
}

/* Submits tasks [from, to) of pr's quota keeping at most w in flight, then
 * completes them all. */
static void producer_segment(struct producer *pr, uint64_t from, uint64_t to,
                             unsigned w) {
    unsigned head = 0, count = 0;
    rng gr = {cfg.seed ^ mix64(0x6A0u + pr->index) ^ from};
    for (uint64_t seq = from; seq < to; seq++) {
        if (cfg.seconds > 0 && now_ns() >= g_end_ns) break; /* time is up */
        uint64_t id = ((uint64_t)(pr->index + 1) << 40) | seq;
        /* Now and then a group or a promise round, between the futures
         * still in flight (mixed with them, cancels and failures). */
        double u = rng_unit(&gr);
        if (u < cfg.groups) group_round(id, &gr);
        else if (u < cfg.groups + cfg.promises) promise_round(id, &gr);
        struct plan p = make_plan(id, 0, false);
        size_t need = p.kind == K_ARENA || p.kind == K_BINARY ? p.len : 0;
        while (count == w || (count > 0 && pr->held + need > arena_budget)) {
            pr->held -= pr->ring[head].arena_len;
            complete(pr, &pr->ring[head]);
            count--;
            head = (head + 1) % w;
        }
        struct sub *s = &pr->ring[(head + count) % w];
        memset(s, 0, sizeof *s);
        s->arena_len = need;
        pr->held += need;
        submit_planned(g_pool, &p, s, pr->scratch, "submit");
        cnt_add(&C.top, 1);
        count++;
        if (p.cancel == C_NOW) do_cancel(s->r, s->f, "cancel after submit");
        if (p.timed) timed_first(s);
        /* A late cancel hits the task submitted two before this one: queued,
         * running or done, whichever it is by now. */
        if (count >= 3) {
            struct sub *old = &pr->ring[(head + count - 3) % w];
            if (old->r->p.cancel == C_LATE && !old->abandoned)
                do_cancel(old->r, old->f, "late cancel");
        }
    }
    while (count > 0) {
        pr->held -= pr->ring[head].arena_len;
        complete(pr, &pr->ring[head]);
        count--;
        head = (head + 1) % w;
    }
}

/* One life of a churning producer: a segment on a thread of its own. */
struct life {
    struct producer *pr;
    uint64_t from, to;
    unsigned window;
};

static void *life_main(void *arg) {
    struct life *l = arg;
    producer_segment(l->pr, l->from, l->to, l->window);
    return NULL;
}

/* Without --churn: the whole quota on this thread, window --window. With
 * --churn N: lives of 1..N tasks with windows of 1..--window, alternately
 * on this thread and on a fresh thread that exits after its life (this
 * thread then sits idle in pthread_join, holding the carpets its last
 * burst grew, while the new thread bursts: carpets change hands both
 * ways). The producer's ring, grave and arena share pass from life to
 * life through pthread_create and pthread_join. */
static void *producer_main(void *arg) {
    struct producer *pr = arg;
    if (cfg.churn == 0) {
        producer_segment(pr, 0, pr->quota, cfg.window);
        return NULL;
    }
    rng r = {cfg.seed ^ mix64(0xC4u + pr->index)};
    uint64_t seq = 0;
    for (unsigned n = 0; seq < pr->quota; n++) {
        if (cfg.seconds > 0 && now_ns() >= g_end_ns) break;
        uint64_t len = rng_range(&r, 1, cfg.churn);
        struct life l = {pr, seq, pr->quota - seq < len ? pr->quota : seq + len,
                         (unsigned)rng_range(&r, 1, cfg.window)};
        if (n % 2 == 0) {
            producer_segment(pr, l.from, l.to, l.window);
        } else {
            pthread_t t;
            CHECK(pthread_create(&t, NULL, life_main, &l) == 0, "pthread_create");
            pthread_join(t, NULL);
        }
        seq = l.to;
    }
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Stats, watchdog, quiescence                                          */
/* ------------------------------------------------------------------ */

static void stats_get(knit_pool_stats_t *st) {
    memset(st, 0, sizeof *st);
    st->size = sizeof *st;
    int rc = knit_pool_stats(g_pool, st);
    CHECK(rc == 0, "knit_pool_stats: %d (%s)", rc, knit_last_error());
}

static void stats_print(FILE *out, const char *tag) {
    knit_pool_stats_t st;
    stats_get(&st);
    fprintf(out,
            "stress: %s: pool submitted=%" PRIu64 " completed=%" PRIu64
            " tasks_run=%" PRIu64 " cancelled=%" PRIu64 " skipped=%" PRIu64
            " failed=%" PRIu64 " pending=%" PRIu64 " pending_high=%" PRIu64
            " helped=%" PRIu64 " help_depth_max=%" PRIu64 " arena_bytes=%" PRIu64
            " arena_high=%" PRIu64 " arena_allocs=%" PRIu64 " arena_failures=%" PRIu64
            " carpets=%" PRIu64 " spare=%" PRIu64 " moved=%" PRIu64 "; ours submitted=%" PRIu64 " runs=%" PRIu64
            " finished=%" PRIu64 " cancels_ok=%" PRIu64 " failures=%" PRIu64
            " moved=%" PRIu64 "/%" PRIu64 "\n",
            tag, st.submitted, st.completed, st.tasks_run, st.cancelled, st.skipped,
            st.failed, st.pending, st.pending_high, st.helped, st.help_depth_max,
            st.arena_bytes, st.arena_high, st.arena_allocs, st.arena_failures,
            st.carpets, st.carpets_spare, st.carpets_moved, cnt_get(&C.submitted), cnt_get(&C.runs),
            cnt_get(&C.finished), cnt_get(&C.cancels_ok), cnt_get(&C.failures),
            cnt_get(&C.moved_freed), cnt_get(&C.moved_made));
    fflush(out);
}

static _Atomic int g_watch_stop;
/* Set (to the start time) while knit_pool_destroy runs: the watchdog then
 * only times it and no longer touches the pool. */
static _Atomic int64_t g_destroy_start;

/* Progress lines and the hang detector. */
static void *watchdog_main(void *arg) {
    (void)arg;
    uint64_t last = UINT64_MAX;
    int64_t last_change = now_ns(), last_print = now_ns();
    /* acquire: pairs with main's release store; only a flag. */
    while (!atomic_load_explicit(&g_watch_stop, memory_order_acquire)) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        int64_t now = now_ns();
        /* acquire: pairs with main's release store before it calls
         * knit_pool_destroy; from then on the pool is not ours to read. */
        int64_t ds = atomic_load_explicit(&g_destroy_start, memory_order_acquire);
        if (ds != 0) {
            CHECK(now - ds <= (int64_t)(cfg.hang * 1e9),
                  "knit_pool_destroy(KNIT_DRAIN) has not returned after %.0f s, "
                  "although every task had settled and the stats added up "
                  "(submitted=%" PRIu64 ", ran=%" PRIu64 ", cancelled=%" PRIu64
                  ", continuations=%" PRIu64 ", nested=%" PRIu64 ")",
                  cfg.hang, cnt_get(&C.submitted), cnt_get(&C.runs),
                  cnt_get(&C.cancels_ok), cnt_get(&C.conts), cnt_get(&C.nested));
            continue;
        }
        /* acquire: pairs with task_done (only progress is judged here). */
        uint64_t fin = atomic_load_explicit(&C.finished, memory_order_acquire);
        if (fin != last) {
            last = fin;
            last_change = now;
        } else if (now - last_change > (int64_t)(cfg.hang * 1e9)) {
            stats_print(stderr, "hang");
            violation("no task finished for %.0f s (finished=%" PRIu64
                      ", submitted=%" PRIu64 ", cancels_ok=%" PRIu64
                      "): lost task or hang", cfg.hang, fin, cnt_get(&C.submitted),
                      cnt_get(&C.cancels_ok));
        }
        if (cfg.progress > 0 && now - last_print >= (int64_t)(cfg.progress * 1e9)) {
            last_print = now;
            knit_pool_stats_t st;
            stats_get(&st);
            /* Invariants that hold at any instant (each counter is read
             * on its own, so only one-sided bounds). */
            CHECK(st.pending <= st.pending_high && st.arena_bytes <= st.arena_cap,
                  "stats: pending %" PRIu64 " > high %" PRIu64 " or arena %" PRIu64
                  " > cap %" PRIu64, st.pending, st.pending_high, st.arena_bytes,
                  st.arena_cap);
            printf("stress: %.0f s: tasks=%" PRIu64 " nested=%" PRIu64
                   " payloads=%" PRIu64 " (%.1f MiB) moved freed=%" PRIu64
                   " cancels=%" PRIu64 " failures=%" PRIu64 " timeouts=%" PRIu64
                   " pool: submitted=%" PRIu64 " run=%" PRIu64 " pending=%" PRIu64
                   " arena=%" PRIu64 " high=%" PRIu64 "\n",
                   (double)(now - g_start_ns) / 1e9, cnt_get(&C.top),
                   cnt_get(&C.nested), cnt_get(&C.payloads),
                   (double)cnt_get(&C.payload_bytes) / (1 << 20),
                   cnt_get(&C.moved_freed), cnt_get(&C.cancels_ok),
                   cnt_get(&C.failures), cnt_get(&C.timeouts), st.submitted,
                   st.tasks_run, st.pending, st.arena_bytes, st.arena_high);
            fflush(stdout);
        }
    }
    return NULL;
}

/* Every submitted task has finished or was cancelled before it ran. */
static void wait_quiescent(void) {
    int64_t deadline = now_ns() + (int64_t)(cfg.hang * 1e9);
    for (;;) {
        /* acquire: pairs with task_done's release increments, so every
         * counter a finished task wrote (its nested submits included) is
         * visible below. */
        uint64_t fin = atomic_load_explicit(&C.finished, memory_order_acquire);
        uint64_t sub = cnt_get(&C.submitted), can = cnt_get(&C.cancels_ok);
        CHECK(fin + can <= sub,
              "more tasks finished (%" PRIu64 ") plus cancelled (%" PRIu64
              ") than submitted (%" PRIu64 "): a cancelled task ran, or one ran twice",
              fin, can, sub);
        if (fin + can == sub) return;
        if (now_ns() > deadline) {
            stats_print(stderr, "quiescence");
            violation("lost tasks: %" PRIu64 " submitted, %" PRIu64 " finished, %"
                      PRIu64 " cancelled; %" PRIu64 " never settled after %.0f s",
                      sub, fin, can, sub - fin - can, cfg.hang);
        }
        usleep(1000);
    }
}

/* The pool's stats at quiescence: they must match ours exactly. */
static void check_stats(knit_pool_stats_t *st) {
    uint64_t sub = cnt_get(&C.submitted), runs = cnt_get(&C.runs),
             can = cnt_get(&C.cancels_ok), fails = cnt_get(&C.failures),
             allocs = cnt_get(&C.arena_allocs);
    /* Stats are owner-written and read relaxed; the last lanes of cancelled
     * tasks are skipped and the last payloads freed just after the tasks
     * settle: poll until everything adds up or the time is out. */
    int64_t deadline = now_ns() + (int64_t)(cfg.hang * 1e9);
    for (;;) {
        stats_get(st);
        bool ok = st->submitted == sub && st->tasks_run == runs &&
                  st->cancelled == can &&
                  st->skipped == st->cancelled &&
                  st->completed == st->submitted && st->failed == fails &&
                  st->pending == 0 && st->arena_bytes == 0 &&
                  st->arena_allocs == allocs &&
                  cnt_get(&C.moved_freed) == cnt_get(&C.moved_made);
        if (ok || now_ns() > deadline) break;
        usleep(1000);
    }
#define EQ(a, b, what)                                                        \
    CHECK((a) == (b), "stats at quiescence: %s: %" PRIu64 " != %" PRIu64, what, \
          (uint64_t)(a), (uint64_t)(b))
    EQ(st->submitted, sub, "pool submitted vs our successful submits");
    EQ(st->tasks_run, runs, "pool tasks_run vs our task entries");
    EQ(st->cancelled, can, "pool cancelled vs our cancels that returned 0");
    /* A lane or deque entry is skipped when its task was cancelled
     * before anyone came to it. */
    EQ(st->skipped, st->cancelled, "pool skipped entries vs cancelled");
    CHECK(st->inlined <= st->tasks_run, "inlined %" PRIu64 " > tasks_run %" PRIu64,
          st->inlined, st->tasks_run);
    EQ(st->completed, st->submitted, "pool completed vs submitted");
    EQ(st->completed, st->tasks_run + st->cancelled, "completed vs run + cancelled");
    EQ(st->failed, fails, "pool failed vs our knit_task_fail calls");
    EQ(st->pending, 0, "pool pending");
    EQ(st->arena_bytes, 0, "arena bytes in use after every payload was freed");
    EQ(st->arena_allocs, allocs, "arena allocations vs ours");
    EQ(cnt_get(&C.moved_freed), cnt_get(&C.moved_made), "moved buffers freed vs made");
    EQ(st->total.tasks_run + st->helped, st->tasks_run, "workers' + helpers' runs");
    uint64_t sum = 0;
    for (unsigned i = 0; i < st->threads && i < 64; i++) sum += st->worker[i].tasks_run;
    EQ(sum, st->total.tasks_run, "sum of worker tasks_run vs total");
    EQ(st->threads, cfg.workers, "threads");
    CHECK(strcmp(st->sched, cfg.sched) == 0, "stats sched \"%s\", asked \"%s\"",
          st->sched, cfg.sched);
    /* A continuation is scheduled by the thread that settles its antecedent
     * and bypasses the bound (runtime/submit.c, knit__continuation_schedule:
     * it cannot block there), so each may add one over max_pending. */
    uint64_t maxp = (cfg.max_pending ? cfg.max_pending : 65536) + cnt_get(&C.conts);
    CHECK(st->pending_high <= maxp,
          "pending_high %" PRIu64 " over max_pending %zu + %" PRIu64
          " continuations", st->pending_high, cfg.max_pending ? cfg.max_pending : 65536,
          cnt_get(&C.conts));
    CHECK(st->arena_high <= st->arena_cap, "arena_high %" PRIu64 " over cap %" PRIu64,
          st->arena_high, st->arena_cap);
#undef EQ
}

/* ------------------------------------------------------------------ */
/* Command line                                                         */
/* ------------------------------------------------------------------ */

static void usage(FILE *out) {
    fprintf(out,
            "usage: stress [--producers N] [--workers N] [--sched NAME]\n"
            "              [--tasks N | --seconds S] [--mix none,inline,arena,binary,moved]\n"
            "              [--max-size BYTES] [--cancel R] [--fail R] [--timeout R]\n"
            "              [--nest R] [--depth D] [--then R] [--window N] [--churn N]\n"
            "              [--seed S]\n"
            "              [--arena-mb N] [--max-pending N] [--progress S] [--hang S]\n"
            "              [--groups R] [--promises R] [--backpressure block|caller-runs]\n"
            "defaults: 3 producers, 2 workers, ticket, %u tasks, mix 10,25,20,20,25,\n"
            "max-size 1M, cancel/fail/timeout/nest 0.05, depth 3, then 0.03,\n"
            "window 32, seed 1, arena 64 MiB, hang 60 s. See the top of stress.c.\n",
            STRESS_DEFAULT_TASKS);
}

static void bad_arg(const char *opt, const char *val) {
    fprintf(stderr, "stress: bad value \"%s\" for %s\n", val ? val : "(none)", opt);
    usage(stderr);
    exit(2);
}

static uint64_t parse_u64(const char *opt, const char *v) {
    if (v == NULL) bad_arg(opt, v);
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 0);
    if (errno || end == v) bad_arg(opt, v);
    if (*end == 'k' || *end == 'K') x <<= 10, end++;
    else if (*end == 'm' || *end == 'M') x <<= 20, end++;
    if (*end != 0) bad_arg(opt, v);
    return x;
}

static double parse_double(const char *opt, const char *v, double lo, double hi) {
    if (v == NULL) bad_arg(opt, v);
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end != 0 || !(x >= lo && x <= hi)) bad_arg(opt, v);
    return x;
}

static void parse_args(int argc, char **argv) {
    size_t off = 0;
    for (int i = 0; i < argc && off < sizeof g_cmdline - 2; i++)
        off += (size_t)snprintf(g_cmdline + off, sizeof g_cmdline - off, "%s%s",
                                i ? " " : "", argv[i]);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        char name[64];
        const char *v;
        const char *eq = strchr(a, '=');
        if (eq != NULL && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            v = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
            v = i + 1 < argc ? argv[++i] : NULL;
        }
        if (strcmp(name, "--producers") == 0) {
            cfg.producers = (unsigned)parse_u64(name, v);
            if (cfg.producers < 1 || cfg.producers > 64) bad_arg(name, v);
        } else if (strcmp(name, "--workers") == 0) {
            cfg.workers = (unsigned)parse_u64(name, v);
            if (cfg.workers < 1 || cfg.workers > KNIT_MAX_THREADS) bad_arg(name, v);
        } else if (strcmp(name, "--sched") == 0) {
            if (v == NULL) bad_arg(name, v);
            cfg.sched = v;
        } else if (strcmp(name, "--tasks") == 0) {
            cfg.tasks = parse_u64(name, v);
        } else if (strcmp(name, "--seconds") == 0) {
            cfg.seconds = parse_double(name, v, 0.001, 1e7);
        } else if (strcmp(name, "--mix") == 0) {
            if (v == NULL) bad_arg(name, v);
            unsigned m[K_COUNT], total = 0;
            const char *s = v;
            for (int k = 0; k < K_COUNT; k++) {
                char *end;
                unsigned long x = strtoul(s, &end, 10);
                if (end == s || x > 1000000) bad_arg(name, v);
                m[k] = (unsigned)x;
                total += m[k];
                s = end;
                if (k < K_COUNT - 1) {
                    if (*s != ',' && *s != ':') bad_arg(name, v);
                    s++;
                }
            }
            if (*s != 0 || total == 0) bad_arg(name, v);
            memcpy(cfg.mix, m, sizeof m);
        } else if (strcmp(name, "--max-size") == 0) {
            cfg.max_size = (size_t)parse_u64(name, v);
            if (cfg.max_size > (64u << 20)) bad_arg(name, v);
        } else if (strcmp(name, "--cancel") == 0) {
            cfg.cancel = parse_double(name, v, 0, 1);
        } else if (strcmp(name, "--fail") == 0) {
            cfg.fail = parse_double(name, v, 0, 1);
        } else if (strcmp(name, "--timeout") == 0) {
            cfg.timeout = parse_double(name, v, 0, 1);
        } else if (strcmp(name, "--nest") == 0) {
            cfg.nest = parse_double(name, v, 0, 1);
        } else if (strcmp(name, "--depth") == 0) {
            cfg.depth = (unsigned)parse_u64(name, v);
            if (cfg.depth > 8) bad_arg(name, v);
        } else if (strcmp(name, "--then") == 0) {
            cfg.then = parse_double(name, v, 0, 1);
        } else if (strcmp(name, "--churn") == 0) {
            cfg.churn = parse_u64(name, v);
            if (cfg.churn > (1u << 24)) bad_arg(name, v);
        } else if (strcmp(name, "--window") == 0) {
            cfg.window = (unsigned)parse_u64(name, v);
            if (cfg.window < 1 || cfg.window > 65536) bad_arg(name, v);
        } else if (strcmp(name, "--seed") == 0) {
            cfg.seed = parse_u64(name, v);
        } else if (strcmp(name, "--arena-mb") == 0) {
            cfg.arena_mb = (size_t)parse_u64(name, v);
            if (cfg.arena_mb < 8 || cfg.arena_mb > 65536) bad_arg(name, v);
        } else if (strcmp(name, "--max-pending") == 0) {
            cfg.max_pending = (size_t)parse_u64(name, v);
        } else if (strcmp(name, "--groups") == 0) {
            cfg.groups = parse_double(name, v, 0, 1);
        } else if (strcmp(name, "--promises") == 0) {
            cfg.promises = parse_double(name, v, 0, 1);
        } else if (strcmp(name, "--backpressure") == 0) {
            if (strcmp(v, "caller-runs") == 0)
                cfg.caller_runs = true;
            else if (strcmp(v, "block") == 0)
                cfg.caller_runs = false;
            else
                bad_arg(name, v);
        } else if (strcmp(name, "--progress") == 0) {
            cfg.progress = parse_double(name, v, 0, 1e6);
        } else if (strcmp(name, "--hang") == 0) {
            cfg.hang = parse_double(name, v, 1, 1e6);
        } else {
            fprintf(stderr, "stress: unknown option %s\n", a);
            usage(stderr);
            exit(2);
        }
    }
}

/* ------------------------------------------------------------------ */
/* main                                                                 */
/* ------------------------------------------------------------------ */

int main(int argc, char **argv) {
    parse_args(argc, argv);
    g_mask0 = mix64(cfg.seed ^ 0xA1A1A1A1ull);
    g_mask1 = mix64(cfg.seed ^ 0xB2B2B2B2ull);

    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = cfg.workers;
    o.sched = cfg.sched;
    o.max_pending = cfg.max_pending;
    o.backpressure = cfg.caller_runs ? KNIT_CALLER_RUNS : KNIT_BLOCK;
    o.arena_bytes = cfg.arena_mb << 20;
    /* every payload must fit: max_payload defaults to arena_bytes / 4 */
    if (cfg.max_size > o.arena_bytes / 4) {
        fprintf(stderr, "stress: --max-size %zu is over a quarter of the arena "
                "(%zu MiB); raise --arena-mb\n", cfg.max_size, cfg.arena_mb);
        return 2;
    }
    arena_budget = (o.arena_bytes - (2u << 20)) / 2 / cfg.producers;
    int rc = knit_pool_create(&o, &g_pool);
    if (rc != 0) {
        fprintf(stderr, "stress: knit_pool_create: %s\n", knit_last_error());
        return 2;
    }
    printf("stress: sched=%s producers=%u workers=%u %s=%.*f mix=%u,%u,%u,%u,%u "
           "max-size=%zu cancel=%.3f fail=%.3f timeout=%.3f nest=%.3f depth=%u "
           "then=%.3f window=%u churn=%" PRIu64 " seed=%" PRIu64 "%s\n",
           cfg.sched, cfg.producers, cfg.workers,
           cfg.seconds > 0 ? "seconds" : "tasks", cfg.seconds > 0 ? 1 : 0,
           cfg.seconds > 0 ? cfg.seconds : (double)cfg.tasks, cfg.mix[0], cfg.mix[1],
           cfg.mix[2], cfg.mix[3], cfg.mix[4], cfg.max_size, cfg.cancel, cfg.fail,
           cfg.timeout, cfg.nest, cfg.depth, cfg.then, cfg.window, cfg.churn, cfg.seed,
#ifdef KNIT_SANITIZER
           " (sanitizer build)"
#else
           ""
#endif
    );
    fflush(stdout);

    g_start_ns = now_ns();
    g_end_ns = g_start_ns + (int64_t)(cfg.seconds * 1e9);
    pthread_t watchdog;
    CHECK(pthread_create(&watchdog, NULL, watchdog_main, NULL) == 0, "pthread_create");

    struct producer *prs = calloc(cfg.producers, sizeof *prs);
    CHECK(prs != NULL, "out of memory");
    for (unsigned i = 0; i < cfg.producers; i++) {
        struct producer *pr = &prs[i];
        pr->index = i;
        pr->quota = cfg.seconds > 0 ? UINT64_MAX
                                    : cfg.tasks / cfg.producers +
                                          (i < cfg.tasks % cfg.producers ? 1 : 0);
        pr->ring = calloc(cfg.window, sizeof *pr->ring);
        pr->scratch = malloc(cfg.max_size > 4096 ? cfg.max_size : 4096);
        pr->grave_cap = 1u << 16;
        pr->grave = calloc(pr->grave_cap, sizeof *pr->grave);
        CHECK(pr->ring && pr->scratch && pr->grave, "out of memory");
        CHECK(pthread_create(&pr->thread, NULL, producer_main, pr) == 0,
              "pthread_create");
    }
    for (unsigned i = 0; i < cfg.producers; i++) pthread_join(prs[i].thread, NULL);
    double submit_secs = (double)(now_ns() - g_start_ns) / 1e9;

    wait_quiescent();
    knit_pool_stats_t st;
    check_stats(&st);

    /* release: pairs with the watchdog's acquire load; it stops reading
     * the pool's stats and times the destroy instead. */
    atomic_store_explicit(&g_destroy_start, now_ns(), memory_order_release);
    rc = knit_pool_destroy(g_pool, KNIT_DRAIN);
    CHECK(rc == 0, "knit_pool_destroy: %d (%s)", rc, knit_last_error());
    /* release: pairs with the watchdog's acquire load (only a flag; the
     * join orders the rest). */
    atomic_store_explicit(&g_watch_stop, 1, memory_order_release);
    pthread_join(watchdog, NULL);
    knit_future *late = NULL;
    rc = knit_submit(g_pool, task_none, NULL, &late);
    CHECK(rc == KNIT_ESHUTDOWN && late == NULL,
          "submit after destroy: %d, expected KNIT_ESHUTDOWN", rc);

    for (unsigned i = 0; i < cfg.producers; i++) {
        struct producer *pr = &prs[i];
        for (size_t k = 0; k < pr->ngrave; k++) grave_drop(pr->grave[k]);
        free(pr->grave);
        free(pr->ring);
        free(pr->scratch);
    }
    free(prs);
    bt_check_all_freed();
    CHECK(cnt_get(&C.recs_live) == 0, "%" PRIu64 " task records never freed (a "
          "task or continuation that never ran or never finished)",
          cnt_get(&C.recs_live));
    CHECK(cnt_get(&C.moved_freed) == cnt_get(&C.moved_made),
          "moved buffers: %" PRIu64 " made, %" PRIu64 " freed",
          cnt_get(&C.moved_made), cnt_get(&C.moved_freed));

    double secs = (double)(now_ns() - g_start_ns) / 1e9;
    printf("stress: OK sched=%s seed=%" PRIu64 " tasks=%" PRIu64 " (top=%" PRIu64
           " nested=%" PRIu64 " continuations=%" PRIu64 ", ran=%" PRIu64
           ", outcomes checked=%" PRIu64 ") payloads checked=%" PRIu64 " (%.1f MiB,"
           " returned buffers=%" PRIu64 ") moved buffers freed=%" PRIu64 "/%" PRIu64
           " cancels=%" PRIu64 " (running=%" PRIu64 " saw=%" PRIu64 ", settled=%" PRIu64
           ") failures=%" PRIu64 " timeouts=%" PRIu64 " abandoned=%" PRIu64
           " helped=%" PRIu64 " help_depth_max=%" PRIu64 " arena_high=%.1fMiB"
           " carpets=%" PRIu64 " (spare %" PRIu64 ", moved %" PRIu64 ")"
           " groups=%" PRIu64 " (members %" PRIu64 ") promises=%" PRIu64
           " backpressure=%s"
           " elapsed=%.2fs (submitting %.2fs)\n",
           cfg.sched, cfg.seed, cnt_get(&C.submitted), cnt_get(&C.top),
           cnt_get(&C.nested), cnt_get(&C.conts), cnt_get(&C.runs),
           cnt_get(&C.awaited), cnt_get(&C.payloads),
           (double)cnt_get(&C.payload_bytes) / (1 << 20), cnt_get(&C.returned),
           cnt_get(&C.moved_freed), cnt_get(&C.moved_made), cnt_get(&C.cancels_ok),
           cnt_get(&C.cancels_busy), cnt_get(&C.saw_cancel), cnt_get(&C.cancels_late),
           cnt_get(&C.failures), cnt_get(&C.timeouts), cnt_get(&C.abandoned),
           st.helped, st.help_depth_max, (double)st.arena_high / (1 << 20),
           st.carpets, st.carpets_spare, st.carpets_moved, cnt_get(&C.groups),
           cnt_get(&C.members), cnt_get(&C.promises),
           cfg.caller_runs ? "caller-runs" : "block", secs, submit_secs);
    return 0;
}
