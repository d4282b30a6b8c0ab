/* The machine itself, for //bench:compare: the floors no runtime can beat
 * and the serial baselines.
 *
 *   machine_work --row floor  [--reps R] [--quick]   # rows floor-line, floor-futex
 *   machine_work --row fib    [--reps R] [--quick]   # serial fib, runtime "serial"
 *   machine_work --row skynet [--reps R] [--quick]   # serial skynet
 *   machine_work --row reduce [--reps R] [--quick]   # serial sum of the array
 *   machine_work --row pipeline [--threads N] [--reps R] [--quick]
 *                             # serial fill+hash+sink, and N x it ("limit")
 *
 * floor-line: two threads pass one cache line back and forth (each spins
 * until the other's write arrives); ns per round trip. floor-futex: the
 * same hand-off, but each side sleeps in FUTEX_WAIT until the other's
 * FUTEX_WAKE; us per round trip. Each repetition reports the median of
 * its batches (1000 round trips each for the line, 100 for the futex).
 * Output: see work_util.h. */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "work_util.h"

static wu_opts O;

/* The ball: odd values are the pinger's throws, even the ponger's. Alone
 * on its cache line. */
static struct {
    _Alignas(64) atomic_uint v;
    char pad[64 - sizeof(unsigned)];
} ball;

/* Set before the ponger starts; relaxed: pthread_create orders them. */
static atomic_uint rounds;
static atomic_int use_futex;

static void futex_wait(atomic_uint *w, unsigned val) {
    syscall(SYS_futex, (unsigned *)w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(atomic_uint *w) {
    syscall(SYS_futex, (unsigned *)w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Waits until the ball holds `want`. acquire: pairs with the thrower's
 * release store, so each round trip is a real hand-off. */
static void wait_for(unsigned want) {
    unsigned v;
    while ((v = atomic_load_explicit(&ball.v, memory_order_acquire)) != want) {
        if (atomic_load_explicit(&use_futex, memory_order_relaxed)) /* see above */
            futex_wait(&ball.v, v);
        else
            wu_pause();
    }
}

/* release: pairs with the catcher's acquire load in wait_for. */
static void throw_ball(unsigned val) {
    atomic_store_explicit(&ball.v, val, memory_order_release);
    if (atomic_load_explicit(&use_futex, memory_order_relaxed)) futex_wake(&ball.v); /* see above */
}

static void *ponger(void *arg) {
    (void)arg;
    unsigned n = atomic_load_explicit(&rounds, memory_order_relaxed); /* see above */
    for (unsigned i = 0; i < n; i++) {
        wait_for(2 * i + 1);
        throw_ball(2 * i + 2);
    }
    return NULL;
}

/* One measurement: `n` round trips in batches of `batch`; returns the
 * median batch's ns per round trip (robust to the odd preemption: on a
 * 2-core machine shared with other work, a spinning pair loses whole time
 * slices now and then). */
static double ping_pong(unsigned n, unsigned batch, int futex) {
    atomic_store_explicit(&rounds, n, memory_order_relaxed);      /* see above */
    atomic_store_explicit(&use_futex, futex, memory_order_relaxed);
    /* relaxed: before the ponger exists (pthread_create orders it). */
    atomic_store_explicit(&ball.v, 0, memory_order_relaxed);
    unsigned nb = n / batch;
    double *per = malloc(nb * sizeof *per);
    if (per == NULL) wu_die("out of memory");
    pthread_t th;
    if (pthread_create(&th, NULL, ponger, NULL) != 0) wu_die("pthread_create failed");
    int64_t t0 = wu_now_ns();
    for (unsigned b = 0; b < nb; b++) {
        for (unsigned i = b * batch; i < (b + 1) * batch; i++) {
            throw_ball(2 * i + 1);
            wait_for(2 * i + 2);
        }
        int64_t t1 = wu_now_ns();
        per[b] = (double)(t1 - t0) / batch;
        t0 = t1;
    }
    pthread_join(th, NULL);
    /* relaxed: after the join. */
    unsigned end = atomic_load_explicit(&ball.v, memory_order_relaxed);
    if (end != 2 * nb * batch || nb * batch != n)
        wu_die("floor: the ball ended at %u, expected %u", end, 2 * n);
    double m = wu_median(per, nb);
    free(per);
    return m;
}

static void row_floor(void) {
    unsigned nl = WU_FLOOR_LINE_N(O.quick), nf = WU_FLOOR_FUTEX_N(O.quick);
    ping_pong(nl / 10, 1000, 0); /* warm-up */
    ping_pong(nf / 10, 100, 1);
    for (unsigned rep = 1; rep <= O.reps; rep++) {
        wu_result(&O, "floor-line", rep, ping_pong(nl, 1000, 0), "ns", "lower");
        wu_result(&O, "floor-futex", rep, ping_pong(nf, 100, 1) / 1e3, "us", "lower");
    }
}

static void row_fib(void) {
    int n = WU_FIB_N(O.quick);
    int64_t want = wu_fib_serial(n);
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        int64_t t0 = wu_now_ns();
        /* volatile: keep the compiler from folding the call. */
        volatile int vn = n;
        int64_t r = wu_fib_serial(vn);
        int64_t t1 = wu_now_ns();
        if (r != want) wu_die("fib(%d) = %lld", n, (long long)r);
        wu_fib_results(&O, rep, n, (double)(t1 - t0));
    }
}

static uint64_t skynet(uint64_t num, uint64_t size) {
    if (size == 1) return num;
    uint64_t sub = size / 10, sum = 0;
    for (unsigned i = 0; i < 10; i++) sum += skynet(num + i * sub, sub);
    return sum;
}

static void row_skynet(void) {
    int depth = WU_SKYNET_DEPTH(O.quick);
    uint64_t want = wu_skynet_sum(depth);
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        volatile uint64_t leaves = wu_pow10(depth);
        int64_t t0 = wu_now_ns();
        uint64_t r = skynet(0, leaves);
        int64_t t1 = wu_now_ns();
        if (r != want) wu_die("skynet sum %llu", (unsigned long long)r);
        if (rep > 0) wu_result(&O, "skynet", rep, (double)(t1 - t0) / 1e6, "ms", "lower");
    }
}

static void row_reduce(void) {
    size_t n = WU_REDUCE_N(O.quick);
    double *a = wu_reduce_array(n);
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        wu_clobber(a);
        int64_t t0 = wu_now_ns();
        double sum = wu_sum_range(a, 0, n, 0.0);
        int64_t t1 = wu_now_ns();
        wu_reduce_check("serial", sum, n);
        if (rep > 0) wu_result(&O, "reduce", rep, wu_reduce_gibs(n, t1 - t0), "GiB/s", "higher");
    }
    free(a);
}

/* The pipeline row's baseline: one thread fills, hashes and sinks every
 * item in turn (the same work as the pipelines, no hand-off), and the
 * limit a pipeline on `threads` threads could reach, threads x that rate
 * (runtime "limit"). */
static void row_pipeline(void) {
    unsigned nbufs = WU_PIPE_BUFS(O.quick);
    uint64_t want = wu_pipe_expected(nbufs);
    size_t nw = WU_PIPE_BYTES / 8;
    uint64_t *w = NULL;
    if (posix_memalign((void **)&w, 64, WU_PIPE_BYTES) != 0) wu_die("out of memory");
    memset(w, 0, WU_PIPE_BYTES); /* fault the pages in */
    unsigned threads = O.threads;
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        int64_t t0 = wu_now_ns();
        uint64_t total = 0;
        for (uint64_t seq = 0; seq < nbufs; seq++) {
            wu_fill(w, nw, seq);
            total = wu_fold(total, seq, wu_fnv1a64(w, nw));
        }
        int64_t t1 = wu_now_ns();
        if (total != want) wu_die("serial pipeline: total %016llx, want %016llx",
                                  (unsigned long long)total, (unsigned long long)want);
        if (rep > 0) {
            double gibs = wu_pipe_gibs(nbufs, t1 - t0);
            O.runtime = "serial";
            wu_result(&O, "pipeline", rep, gibs, "GiB/s", "higher");
            O.runtime = "limit";
            wu_result(&O, "pipeline", rep, gibs * threads, "GiB/s", "higher");
        }
    }
    free(w);
}

int main(int argc, char **argv) {
    O = wu_parse(argc, argv, "machine");
    if (wu_is(&O, "floor")) {
        row_floor();
    } else if (wu_is(&O, "fib")) {
        O.runtime = "serial";
        row_fib();
    } else if (wu_is(&O, "skynet")) {
        O.runtime = "serial";
        row_skynet();
    } else if (wu_is(&O, "reduce")) {
        O.runtime = "serial";
        row_reduce();
    } else if (wu_is(&O, "pipeline")) {
        row_pipeline();
    } else {
        wu_unknown_row(&O);
    }
    return 0;
}
