/* knit's side of //bench:compare: every row through the public API only
 * (<knit/knit.h>), under the discipline given by --sched.
 *
 *   knit_work --row rtt --threads 2 --sched ticket [--reps 5] [--quick]
 *   knit_work --list-sched --threads 2   # "SCHED <name> ok" or
 *                                        # "SCHED <name> no <why>" per discipline
 *
 * Output: see work_util.h. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <knit/knit.h>

#include "work_util.h"

static wu_opts O;

/* Any failure inside a task (a submit or an await that returned an error).
 * relaxed: read by main only after the root task's await, which orders it. */
static atomic_int g_task_error;

static void task_error(int rc) {
    atomic_store_explicit(&g_task_error, rc, memory_order_relaxed);
}

static void check_task_errors(const char *row) {
    int rc = atomic_load_explicit(&g_task_error, memory_order_relaxed);
    if (rc != 0) wu_die("%s: a task saw error %d (%s)", row, rc, knit_strerror(rc));
}

/* A pool of O.threads workers under O.variant with the given bound and
 * backpressure (0, KNIT_BLOCK: the defaults). */
static knit_pool *make_pool_bounded(size_t max_pending, int backpressure) {
    knit_pool_options po = KNIT_POOL_OPTIONS_INIT;
    po.threads = O.threads;
    po.sched = O.variant;
    po.max_pending = max_pending;
    po.backpressure = backpressure;
    knit_pool *pool = NULL;
    int rc = knit_pool_create(&po, &pool);
    if (rc != 0) wu_die("knit_pool_create(threads=%u, sched=%s): %s", O.threads, O.variant,
                        knit_last_error());
    return pool;
}

static knit_pool *make_pool(void) { return make_pool_bounded(0, KNIT_BLOCK); }

/* O with variant "<sched><suffix>" (written into name[cap], which must
 * outlive the results): how a row reports a second way of running it. */
static wu_opts suffixed_opts(char *name, size_t cap, const char *suffix) {
    snprintf(name, cap, "%.16s%s", O.variant, suffix);
    wu_opts o = O;
    o.variant = name;
    return o;
}

/* What the pool did over the whole row (INFO; //bench:compare ignores
 * it): how many carpets it grew and moved between threads, how many
 * lanes a claim took on average, how often workers slept. */
static void pool_info(knit_pool *pool) {
    knit_pool_stats_t st = {.size = sizeof st};
    if (knit_pool_stats(pool, &st) != 0) return;
    printf("INFO %s knit %s carpets=%llu moved=%llu claims=%llu lanes_per_claim=%.2f "
           "polls_lost=%llu parks=%llu wakes=%llu helped=%llu pending_high=%llu\n",
           O.row, O.variant, (unsigned long long)st.carpets,
           (unsigned long long)st.carpets_moved, (unsigned long long)st.total.claims,
           st.total.claims ? (double)st.total.lanes_claimed / (double)st.total.claims : 0.0,
           (unsigned long long)st.total.polls_lost, (unsigned long long)st.total.parks,
           (unsigned long long)st.total.wakes, (unsigned long long)st.helped,
           (unsigned long long)st.pending_high);
}

static void destroy_pool(knit_pool *pool) {
    pool_info(pool);
    int64_t t0 = wu_now_ns();
    int rc = knit_pool_destroy(pool, KNIT_DRAIN);
    if (rc != 0) wu_die("knit_pool_destroy: %s", knit_last_error());
    printf("INFO %s knit %s destroy=%.3f ms\n", O.row, O.variant,
           (double)(wu_now_ns() - t0) * 1e-6);
}

/* The empty task: counts itself and hands its argument back. */
static void *empty_task(knit_task *t, void *arg) {
    (void)t;
    wu_count();
    return arg;
}

static void await_one(knit_future *f, void *want, const char *row) {
    void *r = NULL;
    int rc = knit_await(f, -1, &r);
    if (rc != 0) wu_die("%s: knit_await: %s", row, knit_last_error());
    if (r != want) wu_die("%s: a task returned %p, expected %p", row, r, want);
    knit_future_release(f);
}

/* ---- rtt ---- */

static void row_rtt(void) {
    knit_pool *pool = make_pool();
    unsigned n = WU_RTT_N(O.quick);
    for (unsigned rep = 0; rep <= O.reps; rep++) { /* rep 0: warm-up */
        wu_reset();
        int64_t t0 = wu_now_ns();
        for (unsigned i = 0; i < n; i++) {
            knit_future *f;
            void *arg = (void *)(uintptr_t)(i + 1);
            int rc = knit_submit(pool, empty_task, arg, &f);
            if (rc != 0) wu_die("rtt: knit_submit: %s", knit_last_error());
            await_one(f, arg, "rtt");
        }
        int64_t t1 = wu_now_ns();
        wu_check_count("rtt", n);
        if (rep > 0) wu_result(&O, "rtt", rep, (double)(t1 - t0) / n, "ns", "lower");
    }
    /* Who ran the tasks: the rtt of a process depends on it (a task the
     * awaiting thread ran itself never crossed cores). */
    knit_pool_stats_t st = {.size = sizeof st};
    if (knit_pool_stats(pool, &st) == 0)
        printf("INFO rtt knit %s workers_ran=%llu awaiter_ran=%llu parks=%llu wakes=%llu\n",
               O.variant, (unsigned long long)st.total.tasks_run,
               (unsigned long long)st.helped, (unsigned long long)st.total.parks,
               (unsigned long long)st.total.wakes);
    destroy_pool(pool);
}

/* ---- throughput-1 / throughput-4 ---- */

/* Submits n empty tasks, then awaits each (checking its result) and
 * releases it. */
static void submit_await_n(knit_pool *pool, knit_future **fs, unsigned n, uintptr_t base,
                           const char *row) {
    for (unsigned i = 0; i < n; i++) {
        int rc = knit_submit(pool, empty_task, (void *)(base + i), &fs[i]);
        if (rc != 0) wu_die("%s: knit_submit: %s", row, knit_last_error());
    }
    for (unsigned i = 0; i < n; i++) await_one(fs[i], (void *)(base + i), row);
}

/* The group variant of the throughput rows, reported as "<sched>+group":
 * the same empty tasks submitted to one knit_group (no future each), then
 * one knit_group_wait. */
static wu_opts group_opts(void) {
    static char name[24];
    return suffixed_opts(name, sizeof name, "+group");
}

static void submit_group_n(knit_group *g, unsigned n, uintptr_t base, const char *row) {
    for (unsigned i = 0; i < n; i++) {
        int rc = knit_group_submit(g, empty_task, (void *)(base + i));
        if (rc != 0) wu_die("%s: knit_group_submit: %s", row, knit_last_error());
    }
    int rc = knit_group_wait(g, -1);
    if (rc != 0) wu_die("%s: knit_group_wait: %s", row, knit_last_error());
}

/* One repetition's figures besides the RESULT line: the submitting
 * thread's CPU time per task (steadier than the wall-clock rate on a
 * shared 2-core machine: it leaves out the time the thread sat
 * preempted), and for rep 0, the cold one, its rate: the first burst of
 * a new pool pays for the memory of its futures. */
static void tp1_info(const char *row, const char *variant, unsigned rep, unsigned n,
                     int64_t wall_ns, int64_t cpu_ns) {
    printf("INFO %s knit %s rep %u%s rate=%.3f Mtasks/s submitter_cpu=%.1f ns/task\n", row,
           variant, rep, rep == 0 ? " (cold)" : "", n / ((double)wall_ns * 1e-9) / 1e6,
           (double)cpu_ns / n);
}

/* throughput-1 on `pool`: n empty tasks from this thread, with futures
 * (variant O.variant) and in a group (O.variant+group), alternating. */
static void tp1_on(knit_pool *pool, const char *row) {
    unsigned n = WU_TP1_N(O.quick);
    knit_future **fs = malloc(n * sizeof *fs);
    if (fs == NULL) wu_die("out of memory");
    wu_opts go = group_opts();
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        wu_reset();
        int64_t c0 = wu_thread_cpu_ns();
        int64_t t0 = wu_now_ns();
        submit_await_n(pool, fs, n, 1, row);
        int64_t t1 = wu_now_ns();
        int64_t c1 = wu_thread_cpu_ns();
        wu_check_count(row, n);
        tp1_info(row, O.variant, rep, n, t1 - t0, c1 - c0);
        if (rep > 0)
            wu_result(&O, row, rep, n / ((double)(t1 - t0) * 1e-9) / 1e6, "Mtasks/s",
                      "higher");
        knit_group *g = NULL;
        if (knit_group_create(pool, &g) != 0)
            wu_die("%s: knit_group_create: %s", row, knit_last_error());
        wu_reset();
        c0 = wu_thread_cpu_ns();
        t0 = wu_now_ns();
        submit_group_n(g, n, 1, row);
        t1 = wu_now_ns();
        c1 = wu_thread_cpu_ns();
        wu_check_count(row, n);
        if (knit_group_destroy(g) != 0)
            wu_die("%s: knit_group_destroy: %s", row, knit_last_error());
        tp1_info(row, go.variant, rep, n, t1 - t0, c1 - c0);
        if (rep > 0)
            wu_result(&go, row, rep, n / ((double)(t1 - t0) * 1e-9) / 1e6, "Mtasks/s",
                      "higher");
    }
    free(fs);
}

static void row_tp1(void) {
    knit_pool *pool = make_pool();
    tp1_on(pool, "throughput-1");
    destroy_pool(pool);
}

/* throughput-1 with KNIT_CALLER_RUNS at max_pending = 64 x threads: past
 * the bound the submitting thread runs the task itself, as libgomp runs a
 * task undeferred once 64 x threads are queued (omp_work's same row). */
static void row_tp1_caller_runs(void) {
    knit_pool *pool = make_pool_bounded(64 * (size_t)O.threads, KNIT_CALLER_RUNS);
    tp1_on(pool, "throughput-1-caller-runs");
    destroy_pool(pool);
}

typedef struct tp4_arg {
    knit_pool *pool;
    knit_group *group; /* the +group variant: every submitter's members */
    pthread_barrier_t *start;
    unsigned index;
} tp4_arg;

static void *tp4_submitter(void *p) {
    tp4_arg *a = p;
    unsigned n = WU_TP4_PER(O.quick);
    knit_future **fs = a->group == NULL ? malloc(n * sizeof *fs) : NULL;
    if (a->group == NULL && fs == NULL) wu_die("out of memory");
    pthread_barrier_wait(a->start);
    if (a->group != NULL)
        submit_group_n(a->group, n, 1 + (uintptr_t)a->index * n, "throughput-4");
    else
        submit_await_n(a->pool, fs, n, 1 + (uintptr_t)a->index * n, "throughput-4");
    free(fs);
    return NULL;
}

/* One throughput-4 run: WU_TP4_THREADS submitters, with futures or (g
 * set) all into group g, each waiting for it. Returns the rate. */
static double tp4_run(knit_pool *pool, knit_group *g) {
    unsigned per = WU_TP4_PER(O.quick);
    wu_reset();
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, WU_TP4_THREADS + 1);
    pthread_t th[WU_TP4_THREADS];
    tp4_arg args[WU_TP4_THREADS];
    for (unsigned i = 0; i < WU_TP4_THREADS; i++) {
        args[i] = (tp4_arg){pool, g, &start, i};
        if (pthread_create(&th[i], NULL, tp4_submitter, &args[i]) != 0)
            wu_die("pthread_create failed");
    }
    pthread_barrier_wait(&start);
    int64_t t0 = wu_now_ns();
    for (unsigned i = 0; i < WU_TP4_THREADS; i++) pthread_join(th[i], NULL);
    int64_t t1 = wu_now_ns();
    pthread_barrier_destroy(&start);
    wu_check_count("throughput-4", (uint64_t)per * WU_TP4_THREADS);
    return (double)per * WU_TP4_THREADS / ((double)(t1 - t0) * 1e-9) / 1e6;
}

static void row_tp4(void) {
    knit_pool *pool = make_pool();
    wu_opts go = group_opts();
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        double rate = tp4_run(pool, NULL);
        if (rep > 0) wu_result(&O, "throughput-4", rep, rate, "Mtasks/s", "higher");
        knit_group *g = NULL;
        if (knit_group_create(pool, &g) != 0)
            wu_die("throughput-4: knit_group_create: %s", knit_last_error());
        rate = tp4_run(pool, g);
        if (knit_group_destroy(g) != 0)
            wu_die("throughput-4: knit_group_destroy: %s", knit_last_error());
        if (rep > 0) wu_result(&go, "throughput-4", rep, rate, "Mtasks/s", "higher");
    }
    destroy_pool(pool);
}

/* ---- fib ---- */

static void row_fib_frames(knit_pool *pool);

static void *fib_task(knit_task *t, void *arg) {
    intptr_t n = (intptr_t)arg;
    if (n < 2) return arg;
    knit_future *a;
    int rc = knit_submit(knit_task_pool(t), fib_task, (void *)(n - 1), &a);
    if (rc != 0) {
        task_error(rc);
        return NULL;
    }
    intptr_t b = (intptr_t)fib_task(t, (void *)(n - 2));
    void *ra = NULL;
    rc = knit_await(a, -1, &ra);
    if (rc != 0) task_error(rc);
    knit_future_release(a);
    return (void *)((intptr_t)ra + b);
}

static void row_fib(void) {
    knit_pool *pool = make_pool();
    int n = WU_FIB_N(O.quick);
    intptr_t want = (intptr_t)wu_fib_serial(n);
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        int64_t t0 = wu_now_ns();
        knit_future *f;
        int rc = knit_submit(pool, fib_task, (void *)(intptr_t)n, &f);
        if (rc != 0) wu_die("fib: knit_submit: %s", knit_last_error());
        void *r = NULL;
        rc = knit_await(f, -1, &r);
        int64_t t1 = wu_now_ns();
        if (rc != 0) wu_die("fib: knit_await: %s", knit_last_error());
        knit_future_release(f);
        check_task_errors("fib");
        if ((intptr_t)r != want) wu_die("fib(%d) = %ld, expected %ld", n, (long)(intptr_t)r, (long)want);
        wu_fib_results(&O, rep, n, (double)(t1 - t0));
    }
    row_fib_frames(pool);
    destroy_pool(pool);
}

/* The same rows with fork-join frames (knit_fork / knit_join) in place of
 * futures, reported as variant "<sched>+frames". */
static wu_opts frames_opts(void) {
    static char name[24];
    return suffixed_opts(name, sizeof name, "+frames");
}

static void *fib_frames_task(knit_task *t, void *arg) {
    intptr_t n = (intptr_t)arg;
    if (n < 2) return arg;
    knit_frame fr;
    int rc = knit_fork(t, &fr, fib_frames_task, (void *)(n - 1));
    if (rc != 0) {
        task_error(rc);
        return NULL;
    }
    intptr_t b = (intptr_t)fib_frames_task(t, (void *)(n - 2));
    void *ra = NULL;
    rc = knit_join(t, &fr, &ra);
    if (rc != 0) task_error(rc);
    return (void *)((intptr_t)ra + b);
}

/* Runs root(arg) as one submitted task and awaits it; *ns: how long. */
static void *run_root_timed(knit_pool *pool, knit_fn root, void *arg, const char *row,
                            int64_t *ns) {
    int64_t t0 = wu_now_ns();
    knit_future *f;
    int rc = knit_submit(pool, root, arg, &f);
    if (rc != 0) wu_die("%s: knit_submit: %s", row, knit_last_error());
    void *r = NULL;
    rc = knit_await(f, -1, &r);
    *ns = wu_now_ns() - t0;
    if (rc != 0) wu_die("%s: knit_await: %s", row, knit_last_error());
    knit_future_release(f);
    check_task_errors(row);
    return r;
}

static void row_fib_frames(knit_pool *pool) {
    wu_opts fo = frames_opts();
    int n = WU_FIB_N(O.quick);
    intptr_t want = (intptr_t)wu_fib_serial(n);
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        int64_t ns;
        void *r = run_root_timed(pool, fib_frames_task, (void *)(intptr_t)n, "fib", &ns);
        if ((intptr_t)r != want)
            wu_die("fib(%d) by frames = %ld, expected %ld", n, (long)(intptr_t)r, (long)want);
        wu_fib_results(&fo, rep, n, (double)ns);
    }
}

/* ---- skynet ---- */

/* arg: num << 32 | size (num < 10^6, size <= 10^6). Returns the sum of
 * the leaves num .. num + size - 1. */
static void *skynet_task(knit_task *t, void *arg) {
    uint64_t a = (uintptr_t)arg, num = a >> 32, size = a & 0xffffffffu;
    if (size == 1) return (void *)(uintptr_t)num;
    uint64_t sub = size / 10, sum = 0;
    knit_future *f[10];
    for (unsigned i = 0; i < 10; i++) {
        int rc = knit_submit(knit_task_pool(t), skynet_task,
                             (void *)(uintptr_t)(((num + i * sub) << 32) | sub), &f[i]);
        if (rc != 0) {
            task_error(rc);
            f[i] = NULL;
        }
    }
    for (unsigned i = 0; i < 10; i++) {
        if (f[i] == NULL) continue;
        void *r = NULL;
        int rc = knit_await(f[i], -1, &r);
        if (rc != 0) task_error(rc);
        knit_future_release(f[i]);
        sum += (uintptr_t)r;
    }
    return (void *)(uintptr_t)sum;
}

static void *skynet_frames_task(knit_task *t, void *arg) {
    uint64_t a = (uintptr_t)arg, num = a >> 32, size = a & 0xffffffffu;
    if (size == 1) return (void *)(uintptr_t)num;
    uint64_t sub = size / 10, sum = 0;
    knit_frame fr[10];
    for (unsigned i = 0; i < 10; i++) {
        int rc = knit_fork(t, &fr[i], skynet_frames_task,
                           (void *)(uintptr_t)(((num + i * sub) << 32) | sub));
        if (rc != 0) task_error(rc);
    }
    for (unsigned i = 10; i-- > 0;) {
        void *r = NULL;
        int rc = knit_join(t, &fr[i], &r);
        if (rc != 0) task_error(rc);
        sum += (uintptr_t)r;
    }
    return (void *)(uintptr_t)sum;
}

static void row_skynet_frames(knit_pool *pool) {
    wu_opts fo = frames_opts();
    int depth = WU_SKYNET_DEPTH(O.quick);
    uint64_t leaves = wu_pow10(depth), want = wu_skynet_sum(depth);
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        int64_t ns;
        void *r = run_root_timed(pool, skynet_frames_task, (void *)(uintptr_t)leaves,
                                 "skynet", &ns);
        if ((uint64_t)(uintptr_t)r != want)
            wu_die("skynet by frames: sum %llu, expected %llu",
                   (unsigned long long)(uintptr_t)r, (unsigned long long)want);
        if (rep > 0) wu_result(&fo, "skynet", rep, (double)ns / 1e6, "ms", "lower");
    }
}

static void row_skynet(void) {
    knit_pool *pool = make_pool();
    int depth = WU_SKYNET_DEPTH(O.quick);
    uint64_t leaves = wu_pow10(depth), want = wu_skynet_sum(depth);
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        int64_t t0 = wu_now_ns();
        knit_future *f;
        int rc = knit_submit(pool, skynet_task, (void *)(uintptr_t)leaves, &f);
        if (rc != 0) wu_die("skynet: knit_submit: %s", knit_last_error());
        void *r = NULL;
        rc = knit_await(f, -1, &r);
        int64_t t1 = wu_now_ns();
        if (rc != 0) wu_die("skynet: knit_await: %s", knit_last_error());
        knit_future_release(f);
        check_task_errors("skynet");
        if ((uint64_t)(uintptr_t)r != want)
            wu_die("skynet sum %llu, expected %llu", (unsigned long long)(uintptr_t)r,
                   (unsigned long long)want);
        if (rep > 0) wu_result(&O, "skynet", rep, (double)(t1 - t0) / 1e6, "ms", "lower");
    }
    row_skynet_frames(pool);
    destroy_pool(pool);
}

/* ---- pipeline ---- */

typedef struct pipe_slot {
    uint64_t *buf;
    atomic_int busy;     /* set by fill, cleared by sink */
    wu_atomic_u64 hash;  /* written by the hash stage, read by the sink */
} pipe_slot;

typedef struct pipe_job {
    pipe_slot *ring;
    unsigned nring, nbufs;
    uint64_t next_in;   /* input: the next seq (input thread only) */
    uint64_t next_sink; /* sink: the seq it expects (serial stage only) */
    uint64_t total;     /* sink only */
} pipe_job;

static int pipe_input(void *ctx, knit_buf *item) {
    pipe_job *j = ctx;
    if (j->next_in == j->nbufs) return 0;
    uint64_t seq = j->next_in++;
    pipe_slot *s = &j->ring[seq % j->nring];
    /* acquire: pairs with the sink's release store of 0, so the sink's
     * last reads of this buffer happen before we overwrite it. */
    if (atomic_exchange_explicit(&s->busy, 1, memory_order_acquire) != 0)
        return knit_error(KNIT_EINVAL, "buffer %llu reused while in flight",
                          (unsigned long long)seq);
    wu_fill(s->buf, WU_PIPE_BYTES / 8, seq);
    *item = (knit_buf){.data = s->buf, .len = WU_PIPE_BYTES}; /* borrowed: no free_fn */
    return 1;
}

static int pipe_hash(void *ctx, uint64_t seq, knit_buf *item) {
    pipe_job *j = ctx;
    pipe_slot *s = &j->ring[seq % j->nring];
    if (item->data != s->buf || item->len != WU_PIPE_BYTES)
        return knit_error(KNIT_EINVAL, "item %llu arrived with the wrong buffer",
                          (unsigned long long)seq);
    /* relaxed: the pipeline's hand-off from this stage to the sink orders it. */
    atomic_store_explicit(&s->hash, wu_fnv1a64(item->data, WU_PIPE_BYTES / 8),
                          memory_order_relaxed);
    return 0;
}

static int pipe_sink(void *ctx, uint64_t seq, knit_buf *item) {
    pipe_job *j = ctx;
    if (seq != j->next_sink)
        return knit_error(KNIT_EINVAL, "sink got item %llu, expected %llu",
                          (unsigned long long)seq, (unsigned long long)j->next_sink);
    j->next_sink++;
    pipe_slot *s = &j->ring[seq % j->nring];
    /* relaxed: see pipe_hash. */
    j->total = wu_fold(j->total, seq, atomic_load_explicit(&s->hash, memory_order_relaxed));
    *item = (knit_buf){0};
    /* release: pairs with the input's acquire exchange (the buffer is free). */
    atomic_store_explicit(&s->busy, 0, memory_order_release);
    return 0;
}

static void row_pipeline(void) {
    knit_pool *pool = make_pool();
    unsigned nbufs = WU_PIPE_BUFS(O.quick), nring = 4 * O.threads;
    uint64_t want = wu_pipe_expected(nbufs);
    pipe_slot *ring = calloc(nring, sizeof *ring);
    if (ring == NULL) wu_die("out of memory");
    for (unsigned i = 0; i < nring; i++) {
        if (posix_memalign((void **)&ring[i].buf, 64, WU_PIPE_BYTES) != 0) wu_die("out of memory");
        memset(ring[i].buf, 0, WU_PIPE_BYTES); /* fault the pages in */
    }
    knit_stage stages[] = {
        {KNIT_STAGE_PARALLEL, pipe_hash, NULL},
        {KNIT_STAGE_SERIAL_IN_ORDER, pipe_sink, NULL},
    };
    /* Two ways, alternating: the input on this thread (the default), and
     * in pool tasks (KNIT_PIPELINE_INPUT_IN_TASKS, reported as
     * "<sched>+input-in-tasks"), where the worker that fills a buffer
     * hashes it next, as oneTBB's input filter runs. */
    static char name[40];
    wu_opts io = suffixed_opts(name, sizeof name, "+input-in-tasks");
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        for (int way = 0; way < 2; way++) {
            pipe_job j = {.ring = ring, .nring = nring, .nbufs = nbufs};
            stages[0].ctx = stages[1].ctx = &j;
            knit_pipeline_options po = KNIT_PIPELINE_OPTIONS_INIT;
            po.input = pipe_input;
            po.input_ctx = &j;
            po.stages = stages;
            po.nstages = 2;
            po.max_in_flight = nring;
            po.flags = way ? KNIT_PIPELINE_INPUT_IN_TASKS : 0;
            knit_pipeline *pl;
            int64_t t0 = wu_now_ns();
            if (knit_pipeline_create(pool, &po, &pl) != 0)
                wu_die("knit_pipeline_create: %s", knit_last_error());
            int rc = knit_pipeline_run(pl);
            if (rc != 0) wu_die("knit_pipeline_run: %s", knit_last_error());
            knit_pipeline_destroy(pl);
            int64_t t1 = wu_now_ns();
            if (j.next_sink != nbufs || j.total != want)
                wu_die("pipeline: %llu items reached the sink (want %u), total %016llx (want "
                       "%016llx)",
                       (unsigned long long)j.next_sink, nbufs, (unsigned long long)j.total,
                       (unsigned long long)want);
            if (rep > 0)
                wu_result(way ? &io : &O, "pipeline", rep, wu_pipe_gibs(nbufs, t1 - t0), "GiB/s",
                          "higher");
        }
    }
    for (unsigned i = 0; i < nring; i++) free(ring[i].buf);
    free(ring);
    destroy_pool(pool);
}

/* ---- reduce ----
 *
 * knit_parallel_reduce over the shared array: the body sums a piece with
 * wu_sum_range, the combine adds. Reported with grain 0 (the default:
 * (end - begin) / 256 per piece) as the discipline's own variant. */

static const double *g_reduce_a;

static int reduce_body(void *ctx, size_t b, size_t e, void *out) {
    (void)ctx;
    *(double *)out = wu_sum_range(g_reduce_a, b, e, 0.0);
    return 0;
}

static void reduce_combine(void *ctx, void *left, const void *right) {
    (void)ctx;
    *(double *)left += *(const double *)right;
}

static void reduce_reps(knit_pool *pool, const wu_opts *o, size_t n, size_t grain) {
    for (unsigned rep = 0; rep <= o->reps; rep++) { /* rep 0: warm-up */
        double sum = -1;
        wu_clobber(g_reduce_a);
        int64_t t0 = wu_now_ns();
        int rc = knit_parallel_reduce(pool, 0, n, grain, sizeof sum, reduce_body,
                                      reduce_combine, NULL, &sum);
        int64_t t1 = wu_now_ns();
        if (rc != 0) wu_die("reduce: knit_parallel_reduce: %s", knit_last_error());
        wu_reduce_check(o->variant, sum, n);
        if (rep > 0) wu_result(o, "reduce", rep, wu_reduce_gibs(n, t1 - t0), "GiB/s", "higher");
    }
}

static void row_reduce(void) {
    size_t n = WU_REDUCE_N(O.quick);
    double *a = wu_reduce_array(n);
    g_reduce_a = a;
    knit_pool *pool = make_pool();
    reduce_reps(pool, &O, n, 0);
    destroy_pool(pool);
    free(a);
}

/* ---- idle ---- */

static void burst(knit_pool *pool) {
    static knit_future *fs[WU_IDLE_BURST];
    wu_reset();
    submit_await_n(pool, fs, WU_IDLE_BURST, 1, "idle");
    wu_check_count("idle burst", WU_IDLE_BURST);
}

static void row_idle(void) {
    knit_pool *pool = make_pool();
    int delay = WU_IDLE_DELAY_MS(O.quick), window = WU_IDLE_WINDOW_MS(O.quick);
    for (unsigned rep = 1; rep <= O.reps; rep++) {
        burst(pool);
        wu_sleep_ms(delay);
        int64_t c0 = wu_cpu_ns();
        wu_sleep_ms(window);
        int64_t c1 = wu_cpu_ns();
        /* CPU ms per 2 s of idling (the quick window is scaled up). */
        wu_result(&O, "idle", rep, (double)(c1 - c0) / 1e6 * (2000.0 / window), "cpu-ms/2s",
                  "lower");
    }
    knit_pool_stats_t st = {.size = sizeof st};
    if (knit_pool_stats(pool, &st) == 0)
        printf("INFO idle knit %s parks=%llu wakes=%llu\n", O.variant,
               (unsigned long long)st.total.parks, (unsigned long long)st.total.wakes);
    destroy_pool(pool);
}

/* ---- wake ---- */

static void *wake_task(knit_task *t, void *arg) {
    (void)t;
    wu_probe_hit(arg);
    return NULL;
}

static void row_wake(void) {
    knit_pool *pool = make_pool();
    unsigned ns = WU_WAKE_SAMPLES(O.quick);
    double *lat = malloc(ns * sizeof *lat);
    if (lat == NULL) wu_die("out of memory");
    for (unsigned rep = 1; rep <= O.reps; rep++) {
        for (unsigned i = 0; i < ns; i++) {
            wu_wake_probe p;
            wu_probe_init(&p);
            wu_sleep_ms(WU_WAKE_GAP_MS);
            int64_t t0 = wu_now_ns();
            /* Detached: the sampler waits on its own flag, so it never runs
             * the task itself (an await would help). */
            int rc = knit_submit(pool, wake_task, &p, NULL);
            if (rc != 0) wu_die("wake: knit_submit: %s", knit_last_error());
            lat[i] = wu_probe_wait(&p, t0);
        }
        wu_result(&O, "wake", rep, wu_median(lat, ns), "us", "lower");
    }
    free(lat);
    destroy_pool(pool);
}

/* ---- the discipline list ---- */

static void list_sched(void) {
    const knit_sched_ops *ops[KNIT_SCHED_MAX];
    size_t n = knit_sched_list(ops, KNIT_SCHED_MAX);
    for (size_t i = 0; i < n && i < KNIT_SCHED_MAX; i++) {
        knit_pool_options po = KNIT_POOL_OPTIONS_INIT;
        po.threads = O.threads;
        po.sched = ops[i]->name;
        knit_pool *pool = NULL;
        if (knit_pool_create(&po, &pool) == 0) {
            printf("SCHED %s ok\n", ops[i]->name);
            knit_pool_destroy(pool, KNIT_DRAIN);
        } else {
            printf("SCHED %s no %s\n", ops[i]->name, knit_last_error());
        }
    }
}

int main(int argc, char **argv) {
    O = wu_parse(argc, argv, "knit");
    if (O.list_sched) {
        list_sched();
        return 0;
    }
    if (strcmp(O.variant, "-") == 0) O.variant = knit_sched_default_name();
    if (wu_is(&O, "rtt")) row_rtt();
    else if (wu_is(&O, "throughput-1")) row_tp1();
    else if (wu_is(&O, "throughput-1-caller-runs")) row_tp1_caller_runs();
    else if (wu_is(&O, "throughput-4")) row_tp4();
    else if (wu_is(&O, "fib")) row_fib();
    else if (wu_is(&O, "skynet")) row_skynet();
    else if (wu_is(&O, "pipeline")) row_pipeline();
    else if (wu_is(&O, "reduce")) row_reduce();
    else if (wu_is(&O, "idle")) row_idle();
    else if (wu_is(&O, "wake")) row_wake();
    else wu_unknown_row(&O);
    return 0;
}
