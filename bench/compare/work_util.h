/* What every workload binary of //bench:compare shares (C11 and C++17).
 *
 * A workload binary runs one row for one runtime:
 *
 *   X_work --row NAME --threads N [--reps R] [--quick] [--sched NAME]
 *
 * and prints one line per repetition on stdout:
 *
 *   RESULT <row> <runtime> <variant> <rep> <value> <unit> <higher|lower>
 *
 * (a row may report more than one metric: fib prints "fib" and
 * "fib-task"). Anything else on stdout starts with "INFO". A failed check
 * (a wrong sum, a lost task, an error code) prints "error: ..." on stderr
 * and exits 1 without a RESULT line for that repetition, so a broken
 * runtime cannot report a fast number.
 *
 * Sizes live here so that every runtime runs exactly the same work.
 */
#ifndef KNIT_BENCH_WORK_UTIL_H
#define KNIT_BENCH_WORK_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef __cplusplus
#include <atomic>
typedef std::atomic<uint64_t> wu_atomic_u64;
typedef std::atomic<unsigned> wu_atomic_uint;
typedef std::atomic<int> wu_atomic_int;
using std::atomic_fetch_add_explicit;
using std::atomic_load_explicit;
using std::atomic_store_explicit;
using std::memory_order_acquire;
using std::memory_order_relaxed;
using std::memory_order_release;
#define WU_TLS thread_local
#define WU_NORETURN [[noreturn]]
#else
#include <stdatomic.h>
typedef _Atomic uint64_t wu_atomic_u64;
typedef _Atomic unsigned wu_atomic_uint;
typedef _Atomic int wu_atomic_int;
#define WU_TLS _Thread_local
#define WU_NORETURN _Noreturn
#endif

/* ---- sizes (full / --quick) ---- */

#define WU_RTT_N(q) ((q) ? 10000u : 100000u)          /* round trips */
#define WU_TP1_N(q) ((q) ? 100000u : 1000000u)        /* tasks */
#define WU_TP4_THREADS 4u
#define WU_TP4_PER(q) ((q) ? 25000u : 250000u)        /* tasks per submitter */
#define WU_FIB_N(q) ((q) ? 25 : 30)
#define WU_SKYNET_DEPTH(q) ((q) ? 5 : 6)              /* leaves: 10^depth */
#define WU_PIPE_BUFS(q) ((q) ? 64u : 512u)
#define WU_PIPE_BYTES ((size_t)1 << 20)
#define WU_IDLE_BURST 10000u
#define WU_IDLE_DELAY_MS(q) ((q) ? 50 : 100)
#define WU_IDLE_WINDOW_MS(q) ((q) ? 250 : 2000)
#define WU_WAKE_SAMPLES(q) ((q) ? 10u : 50u)
#define WU_WAKE_GAP_MS 20                              /* so every worker parks */
#define WU_FLOOR_LINE_N(q) ((q) ? 20000u : 200000u)
#define WU_FLOOR_FUTEX_N(q) ((q) ? 2000u : 20000u)
#define WU_REDUCE_N(q) ((size_t)1 << ((q) ? 20 : 26)) /* doubles (8 MiB / 512 MiB) */

/* ---- options ---- */

typedef struct wu_opts {
    const char *runtime; /* "knit", "tbb", ... */
    const char *row;
    const char *variant; /* knit: the discipline; others: "-" */
    unsigned threads;
    unsigned reps;
    int quick;
    int list_sched;
} wu_opts;

WU_NORETURN static inline void wu_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
WU_NORETURN static inline void wu_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stdout);
    exit(1);
}

static inline unsigned wu_parse_uint(const char *opt, const char *s, unsigned lo, unsigned hi) {
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        wu_die("%s: '%s' is not a number in %u..%u", opt, s, lo, hi);
    return (unsigned)v;
}

/* Parses the common command line; exits 2 on bad usage. */
static inline wu_opts wu_parse(int argc, char **argv, const char *runtime) {
    wu_opts o;
    memset(&o, 0, sizeof o);
    o.runtime = runtime;
    o.variant = "-";
    o.threads = 2;
    o.reps = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            o.quick = 1;
        } else if (strcmp(a, "--list-sched") == 0) {
            o.list_sched = 1;
        } else if (v != NULL && strcmp(a, "--row") == 0) {
            o.row = v, i++;
        } else if (v != NULL && strcmp(a, "--sched") == 0) {
            o.variant = v, i++;
        } else if (v != NULL && strcmp(a, "--threads") == 0) {
            o.threads = wu_parse_uint("--threads", v, 1, 256), i++;
        } else if (v != NULL && strcmp(a, "--reps") == 0) {
            o.reps = wu_parse_uint("--reps", v, 1, 1000), i++;
        } else {
            fprintf(stderr,
                    "usage: %s_work --row NAME [--threads N] [--reps R] [--quick] "
                    "[--sched NAME]%s\n(unknown or incomplete argument '%s')\n",
                    runtime, strcmp(runtime, "knit") == 0 ? " | --list-sched" : "", a);
            exit(2);
        }
    }
    if (o.row == NULL && !o.list_sched) {
        fprintf(stderr, "%s_work: --row is required\n", runtime);
        exit(2);
    }
    return o;
}

WU_NORETURN static inline void wu_unknown_row(const wu_opts *o) {
    fprintf(stderr, "%s_work: no row '%s' for this runtime\n", o->runtime, o->row);
    exit(2);
}

static inline int wu_is(const wu_opts *o, const char *row) { return strcmp(o->row, row) == 0; }

static inline void wu_result(const wu_opts *o, const char *row, unsigned rep, double value,
                             const char *unit, const char *better) {
    printf("RESULT %s %s %s %u %.6g %s %s\n", row, o->runtime, o->variant, rep, value, unit,
           better);
    fflush(stdout);
}

/* ---- time ---- */

static inline int64_t wu_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CPU time of the whole process (every thread), ns. */
static inline int64_t wu_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CPU time of the calling thread only, ns: beside a wall-clock rate it
 * says what one thread paid per item, without the time it sat preempted
 * (three threads on two cores spend much of a run waiting for a core). */
static inline int64_t wu_thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void wu_sleep_ms(int ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static inline void wu_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* ---- the wake row ----
 *
 * The sampler stamps t0, submits a task that stamps its start and sets a
 * flag, and waits for the flag by sleeping in short naps rather than
 * spinning: on 2 cores a spinning sampler would hold the core the woken
 * worker is placed on until the next scheduler tick (4 ms here). */

typedef struct wu_wake_probe {
    wu_atomic_u64 start_ns; /* when the task started */
    wu_atomic_int ran;
} wu_wake_probe;

static inline void wu_probe_init(wu_wake_probe *p) {
    /* relaxed: the submit that follows publishes the probe to the task. */
    atomic_store_explicit(&p->start_ns, 0, memory_order_relaxed);
    atomic_store_explicit(&p->ran, 0, memory_order_relaxed);
}

/* In the task. */
static inline void wu_probe_hit(wu_wake_probe *p) {
    /* relaxed: published by the release store of `ran`. */
    atomic_store_explicit(&p->start_ns, (uint64_t)wu_now_ns(), memory_order_relaxed);
    /* release: pairs with the acquire load in wu_probe_wait. */
    atomic_store_explicit(&p->ran, 1, memory_order_release);
}

/* In the sampler: us from t0 to the task's start. */
static inline double wu_probe_wait(wu_wake_probe *p, int64_t t0) {
    struct timespec nap;
    nap.tv_sec = 0;
    nap.tv_nsec = 20000;
    /* acquire: pairs with wu_probe_hit's release store. */
    while (atomic_load_explicit(&p->ran, memory_order_acquire) == 0) {
        nanosleep(&nap, NULL);
        if (wu_now_ns() - t0 > 2000000000) wu_die("wake: the task did not start in 2 s");
    }
    /* relaxed: ordered by the acquire above. */
    return (double)((int64_t)atomic_load_explicit(&p->start_ns, memory_order_relaxed) - t0) / 1e3;
}

static inline int wu_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of v[0..n) (sorts v). */
static inline double wu_median(double *v, size_t n) {
    qsort(v, n, sizeof *v, wu_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the task counter ----
 *
 * Every empty task counts itself, so that a runtime that loses or
 * duplicates tasks fails the check. Each thread owns one slot on its own
 * cache line (no contended RMW on the task path); threads beyond the slots
 * share an RMW overflow counter. */

#define WU_SLOTS 256u

typedef struct wu_slot {
    wu_atomic_u64 n;
    char pad[64 - sizeof(uint64_t)];
} wu_slot;

static wu_slot wu_slots[WU_SLOTS] __attribute__((aligned(64)));
static wu_atomic_u64 wu_overflow;
static wu_atomic_uint wu_next_slot;
static WU_TLS unsigned wu_my_slot; /* slot + 1; 0: none yet */

static inline void wu_count(void) {
    unsigned s = wu_my_slot;
    if (s == 0) {
        /* relaxed: only uniqueness matters; nothing is published with it. */
        s = wu_my_slot = 1 + atomic_fetch_add_explicit(&wu_next_slot, 1u, memory_order_relaxed);
    }
    if (s <= WU_SLOTS) {
        /* relaxed load + store: this thread is the slot's only writer. The
         * reader (wu_total) runs after the runtime's own wait for the tasks,
         * which is what orders these stores before it (that wait is the
         * release/acquire pair; if a runtime's wait were broken, the total
         * would come out wrong, which is the point). */
        wu_atomic_u64 *c = &wu_slots[s - 1].n;
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    } else {
        /* relaxed RMW: shared by late threads; ordered like the above. */
        atomic_fetch_add_explicit(&wu_overflow, 1, memory_order_relaxed);
    }
}

/* This thread's counting slot, assigned now if it has none (so a thread
 * can be named before it runs any task), or 0 past the slots. Read back
 * with wu_slot_total. */
static inline unsigned wu_slot_claim(void) {
    if (wu_my_slot == 0)
        /* relaxed: as in wu_count. */
        wu_my_slot = 1 + atomic_fetch_add_explicit(&wu_next_slot, 1u, memory_order_relaxed);
    return wu_my_slot <= WU_SLOTS ? wu_my_slot : 0;
}

/* Tasks the thread of slot s (from wu_slot_claim; 0: none) counted since
 * the last reset. Call only after the runtime's wait (see wu_count). */
static inline uint64_t wu_slot_total(unsigned s) {
    /* relaxed: ordered by the runtime's wait (see wu_count). */
    return s == 0 ? 0 : atomic_load_explicit(&wu_slots[s - 1].n, memory_order_relaxed);
}

/* Tasks counted since the last reset. Call only after the runtime's wait
 * for all tasks (see wu_count). */
static inline uint64_t wu_total(void) {
    /* relaxed: ordered by the runtime's wait (see wu_count). */
    uint64_t t = atomic_load_explicit(&wu_overflow, memory_order_relaxed);
    for (unsigned i = 0; i < WU_SLOTS; i++)
        t += atomic_load_explicit(&wu_slots[i].n, memory_order_relaxed);
    return t;
}

/* Zeroes the counters. Call only while no task runs: the next submit
 * (the runtime's release/acquire hand-off) orders these stores before the
 * tasks' increments. */
static inline void wu_reset(void) {
    atomic_store_explicit(&wu_overflow, 0, memory_order_relaxed);
    for (unsigned i = 0; i < WU_SLOTS; i++)
        atomic_store_explicit(&wu_slots[i].n, 0, memory_order_relaxed);
}

static inline void wu_check_count(const char *what, uint64_t want) {
    uint64_t got = wu_total();
    if (got != want)
        wu_die("%s: %llu tasks ran, expected %llu", what, (unsigned long long)got,
               (unsigned long long)want);
}

/* ---- checksums of the recursive rows ---- */

static inline int64_t wu_fib_serial(int n) { return n < 2 ? n : wu_fib_serial(n - 1) + wu_fib_serial(n - 2); }

/* fib(n) with one child spawned per call (fib(n-1)) and fib(n-2) run
 * inline, plus the root: F(n+1) tasks. */
static inline double wu_fib_tasks(int n) { return (double)wu_fib_serial(n + 1); }

/* The fib row and its per-task figure for one repetition of fib(n) that
 * took ns (repetition 0 is the warm-up and is not reported). */
static inline void wu_fib_results(const wu_opts *o, unsigned rep, int n, double ns) {
    if (rep == 0) return;
    wu_result(o, "fib", rep, ns / 1e6, "ms", "lower");
    wu_result(o, "fib-task", rep, ns / wu_fib_tasks(n), "ns/task", "lower");
}

static inline uint64_t wu_pow10(int d) {
    uint64_t p = 1;
    while (d-- > 0) p *= 10;
    return p;
}

/* Skynet: leaves numbered 0 .. 10^depth - 1, their sum. */
static inline uint64_t wu_skynet_sum(int depth) {
    uint64_t n = wu_pow10(depth);
    return n * (n - 1) / 2;
}

/* Tasks in the skynet tree: 1 + 10 + ... + 10^depth. */
static inline double wu_skynet_tasks(int depth) {
    double t = 0;
    for (int d = 0; d <= depth; d++) t += (double)wu_pow10(d);
    return t;
}

/* ---- the pipeline row ----
 *
 * fill (serial, in order): buffer `seq` gets words seq*K + i; hash
 * (parallel): FNV-1a over 64-bit words; sink (serial, in order): folds
 * (seq, hash) into an order-dependent total, checked against a serial run.
 * Buffers: a ring of max_in_flight buffers, slot seq % ring; a busy flag
 * per slot catches a runtime that lets more items in flight than it
 * promised (the total would also come out wrong). */

#define WU_FNV_OFFSET 0xcbf29ce484222325ull
#define WU_FNV_PRIME 0x100000001b3ull

static inline void wu_fill(uint64_t *w, size_t nwords, uint64_t seq) {
    uint64_t x = seq * 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < nwords; i++) w[i] = x + i;
}

static inline uint64_t wu_fnv1a64(const uint64_t *w, size_t nwords) {
    uint64_t h = WU_FNV_OFFSET;
    for (size_t i = 0; i < nwords; i++) {
        h ^= w[i];
        h *= WU_FNV_PRIME;
    }
    return h;
}

static inline uint64_t wu_fold(uint64_t total, uint64_t seq, uint64_t hash) {
    return (total ^ (hash + seq)) * WU_FNV_PRIME;
}

/* The total a correct pipeline run produces (computed serially). */
static inline uint64_t wu_pipe_expected(unsigned nbufs) {
    size_t nw = WU_PIPE_BYTES / 8;
    uint64_t *w = (uint64_t *)malloc(WU_PIPE_BYTES);
    if (w == NULL) wu_die("out of memory");
    uint64_t total = 0;
    for (unsigned s = 0; s < nbufs; s++) {
        wu_fill(w, nw, s);
        total = wu_fold(total, s, wu_fnv1a64(w, nw));
    }
    free(w);
    return total;
}

/* GiB/s of a pipeline run of nbufs buffers in ns. */
static inline double wu_pipe_gibs(unsigned nbufs, int64_t ns) {
    return (double)nbufs * (double)WU_PIPE_BYTES / (double)(1u << 30) / ((double)ns * 1e-9);
}

/* ---- the reduce row ----
 *
 * The sum of n doubles a[i] = (i % 1024) * 0.5, filled once outside the
 * timing. Every value and every partial sum is a multiple of 0.5 below
 * 2^36, exactly representable, so any association of the additions (any
 * split, any thread count, any combine order) gives exactly
 * (n / 1024) * 0.5 * (1023 * 1024 / 2): the check is an exact equality.
 * Each runtime's per-piece body is the same plain loop (wu_sum_range; for
 * OpenMP the loop under `reduction(+:sum)`): one accumulator, no fast-math,
 * so the compiler keeps the serial add chain in every runtime alike. The
 * figure is GiB/s of the array read per sum (higher is better). */

static inline double *wu_reduce_array(size_t n) {
    double *a = NULL;
    if (posix_memalign((void **)&a, 64, n * sizeof *a) != 0) wu_die("out of memory");
    for (size_t i = 0; i < n; i++) a[i] = (double)(i % 1024) * 0.5;
    return a;
}

static inline double wu_reduce_expected(size_t n) {
    return (double)(n / 1024) * 0.5 * (1023.0 * 1024.0 / 2.0);
}

/* init + a[b] + ... + a[e - 1], left to right. */
static inline double wu_sum_range(const double *a, size_t b, size_t e, double init) {
    for (size_t i = b; i < e; i++) init += a[i];
    return init;
}

/* Keeps the compiler from hoisting a repeated sum of an unchanged array
 * out of the repetition loop (the array may have changed, as far as it
 * knows). */
static inline void wu_clobber(const void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

static inline void wu_reduce_check(const char *who, double got, size_t n) {
    double want = wu_reduce_expected(n);
    if (got != want) wu_die("reduce (%s): sum %.17g, expected %.17g", who, got, want);
}

/* GiB/s of one sum of n doubles in ns. */
static inline double wu_reduce_gibs(size_t n, int64_t ns) {
    return (double)n * sizeof(double) / (double)(1u << 30) / ((double)ns * 1e-9);
}

#endif /* KNIT_BENCH_WORK_UTIL_H */
