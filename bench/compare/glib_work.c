/* GThreadPool's side of //bench:compare (Debian's libglib2.0-dev).
 *
 *   glib_work --row NAME --threads N [--reps R] [--quick]
 *
 * N threads: g_thread_pool_new(func, NULL, N, exclusive = TRUE): N threads
 * started at once and kept for this pool (GLib's docs: exclusive pools
 * start max_threads threads immediately and keep them). Tasks go in with
 * g_thread_pool_push (data must not be NULL). GThreadPool has no per-task
 * wait, so completion is signalled the way GLib's docs suggest for
 * threads: a GMutex + GCond (here a count-down latch: the last task of a
 * batch locks, sets `done`, signals).
 *   rtt           push one task, wait on the latch, 100k times
 *   throughput-1  push n tasks, wait on the latch (count n)
 *   throughput-4  4 GThreads push n/4 each into the one pool; latch of n
 *   idle burst    as throughput-1
 *   wake          push; the sampler naps until the task sets a flag
 * Output: see work_util.h. */
#define _GNU_SOURCE
#include <glib.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "work_util.h"

static wu_opts O;

typedef struct latch {
    wu_atomic_u64 left; /* tasks still to finish */
    GMutex mu;
    GCond cv;
    int done; /* guarded by mu */
} latch;

static void latch_init(latch *l) {
    g_mutex_init(&l->mu);
    g_cond_init(&l->cv);
}

/* Only while no task of the previous batch runs; the push that follows
 * (GLib's queue lock) orders these stores before the tasks. */
static void latch_arm(latch *l, uint64_t n) {
    atomic_store_explicit(&l->left, n, memory_order_relaxed); /* relaxed: see above */
    g_mutex_lock(&l->mu);
    l->done = 0;
    g_mutex_unlock(&l->mu);
}

static void latch_down(latch *l) {
    /* acq_rel: every task's release makes its work visible to the task
     * that brings the count to zero (acquire), which then hands it all to
     * the waiter through the mutex. */
    if (atomic_fetch_sub_explicit(&l->left, 1, memory_order_acq_rel) == 1) {
        g_mutex_lock(&l->mu);
        l->done = 1;
        g_cond_signal(&l->cv);
        g_mutex_unlock(&l->mu);
    }
}

static void latch_wait(latch *l) {
    g_mutex_lock(&l->mu);
    while (!l->done) g_cond_wait(&l->cv, &l->mu);
    g_mutex_unlock(&l->mu);
}

/* What a pushed pointer asks for. */
typedef struct job {
    int kind; /* JOB_COUNT or JOB_WAKE */
    latch *l;
    wu_wake_probe probe;    /* JOB_WAKE */
} job;
enum { JOB_COUNT = 1, JOB_WAKE = 2 };

static void pool_func(gpointer data, gpointer user_data) {
    (void)user_data;
    job *j = data;
    if (j->kind == JOB_WAKE) {
        wu_probe_hit(&j->probe);
        return;
    }
    wu_count();
    latch_down(j->l);
}

static GThreadPool *make_pool(void) {
    GError *err = NULL;
    GThreadPool *p = g_thread_pool_new(pool_func, NULL, (gint)O.threads, TRUE, &err);
    if (p == NULL) wu_die("g_thread_pool_new: %s", err ? err->message : "failed");
    return p;
}

static void push(GThreadPool *p, job *j) {
    GError *err = NULL;
    if (!g_thread_pool_push(p, j, &err)) wu_die("g_thread_pool_push: %s", err ? err->message : "failed");
}

static void row_rtt(void) {
    GThreadPool *p = make_pool();
    unsigned n = WU_RTT_N(O.quick);
    latch l;
    latch_init(&l);
    job j = {.kind = JOB_COUNT, .l = &l};
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        wu_reset();
        int64_t t0 = wu_now_ns();
        for (unsigned i = 0; i < n; i++) {
            latch_arm(&l, 1);
            push(p, &j);
            latch_wait(&l);
        }
        int64_t t1 = wu_now_ns();
        wu_check_count("rtt", n);
        if (rep > 0) wu_result(&O, "rtt", rep, (double)(t1 - t0) / n, "ns", "lower");
    }
    g_thread_pool_free(p, FALSE, TRUE);
}

static void push_n_wait(GThreadPool *p, latch *l, unsigned n) {
    job j = {.kind = JOB_COUNT, .l = l};
    latch_arm(l, n);
    for (unsigned i = 0; i < n; i++) push(p, &j);
    latch_wait(l);
}

static void row_tp1(void) {
    GThreadPool *p = make_pool();
    unsigned n = WU_TP1_N(O.quick);
    latch l;
    latch_init(&l);
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        wu_reset();
        int64_t t0 = wu_now_ns();
        push_n_wait(p, &l, n);
        int64_t t1 = wu_now_ns();
        wu_check_count("throughput-1", n);
        if (rep > 0)
            wu_result(&O, "throughput-1", rep, n / ((double)(t1 - t0) * 1e-9) / 1e6, "Mtasks/s",
                      "higher");
    }
    g_thread_pool_free(p, FALSE, TRUE);
}

typedef struct tp4_arg {
    GThreadPool *pool;
    job *j;
    GMutex *gate_mu;
    GCond *gate_cv;
    int *gate_open; /* guarded by gate_mu */
} tp4_arg;

static gpointer tp4_submitter(gpointer p) {
    tp4_arg *a = p;
    g_mutex_lock(a->gate_mu);
    while (!*a->gate_open) g_cond_wait(a->gate_cv, a->gate_mu);
    g_mutex_unlock(a->gate_mu);
    unsigned n = WU_TP4_PER(O.quick);
    for (unsigned i = 0; i < n; i++) push(a->pool, a->j);
    return NULL;
}

static void row_tp4(void) {
    GThreadPool *p = make_pool();
    unsigned per = WU_TP4_PER(O.quick);
    latch l;
    latch_init(&l);
    job j = {.kind = JOB_COUNT, .l = &l};
    GMutex gate_mu;
    GCond gate_cv;
    g_mutex_init(&gate_mu);
    g_cond_init(&gate_cv);
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        wu_reset();
        latch_arm(&l, (uint64_t)per * WU_TP4_THREADS);
        int gate_open = 0;
        tp4_arg a = {p, &j, &gate_mu, &gate_cv, &gate_open};
        GThread *th[WU_TP4_THREADS];
        for (unsigned i = 0; i < WU_TP4_THREADS; i++) th[i] = g_thread_new("submitter", tp4_submitter, &a);
        wu_sleep_ms(5); /* let them reach the gate */
        int64_t t0 = wu_now_ns();
        g_mutex_lock(&gate_mu);
        gate_open = 1;
        g_cond_broadcast(&gate_cv);
        g_mutex_unlock(&gate_mu);
        latch_wait(&l);
        int64_t t1 = wu_now_ns();
        for (unsigned i = 0; i < WU_TP4_THREADS; i++) g_thread_join(th[i]);
        wu_check_count("throughput-4", (uint64_t)per * WU_TP4_THREADS);
        if (rep > 0)
            wu_result(&O, "throughput-4", rep,
                      (double)per * WU_TP4_THREADS / ((double)(t1 - t0) * 1e-9) / 1e6,
                      "Mtasks/s", "higher");
    }
    g_thread_pool_free(p, FALSE, TRUE);
}

static void row_idle(void) {
    GThreadPool *p = make_pool();
    latch l;
    latch_init(&l);
    int delay = WU_IDLE_DELAY_MS(O.quick), window = WU_IDLE_WINDOW_MS(O.quick);
    for (unsigned rep = 1; rep <= O.reps; rep++) {
        wu_reset();
        push_n_wait(p, &l, WU_IDLE_BURST);
        wu_check_count("idle burst", WU_IDLE_BURST);
        wu_sleep_ms(delay);
        int64_t c0 = wu_cpu_ns();
        wu_sleep_ms(window);
        int64_t c1 = wu_cpu_ns();
        wu_result(&O, "idle", rep, (double)(c1 - c0) / 1e6 * (2000.0 / window), "cpu-ms/2s",
                  "lower");
    }
    g_thread_pool_free(p, FALSE, TRUE);
}

static void row_wake(void) {
    GThreadPool *p = make_pool();
    unsigned ns = WU_WAKE_SAMPLES(O.quick);
    double *lat = malloc(ns * sizeof *lat);
    if (lat == NULL) wu_die("out of memory");
    for (unsigned rep = 1; rep <= O.reps; rep++) {
        for (unsigned i = 0; i < ns; i++) {
            job j = {.kind = JOB_WAKE};
            wu_probe_init(&j.probe);
            wu_sleep_ms(WU_WAKE_GAP_MS);
            int64_t t0 = wu_now_ns();
            push(p, &j);
            lat[i] = wu_probe_wait(&j.probe, t0);
        }
        wu_result(&O, "wake", rep, wu_median(lat, ns), "us", "lower");
    }
    free(lat);
    g_thread_pool_free(p, FALSE, TRUE);
}

int main(int argc, char **argv) {
    O = wu_parse(argc, argv, "glib");
    if (wu_is(&O, "rtt")) row_rtt();
    else if (wu_is(&O, "throughput-1")) row_tp1();
    else if (wu_is(&O, "throughput-4")) row_tp4();
    else if (wu_is(&O, "idle")) row_idle();
    else if (wu_is(&O, "wake")) row_wake();
    else wu_unknown_row(&O);
    return 0;
}
