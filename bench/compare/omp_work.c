/* OpenMP's side of //bench:compare (GCC's libgomp, -fopenmp).
 *
 *   omp_work --row NAME --threads N [--reps R] [--quick]
 *
 * N threads: `#pragma omp parallel num_threads(N)` (the encountering
 * thread is one of the N and runs tasks at the barrier and in taskwait).
 * Usage per row, as the OpenMP specification's task examples do it:
 *   throughput-1  one producer in `omp single` creates n `omp task`s; the
 *                 barrier at the end of the single construct waits for them
 *   fib, skynet   `omp task` per child (shared result), `omp taskwait`
 *   reduce        `omp parallel for reduction(+:sum) schedule(static)` over
 *                 the array (work_util.h)
 * Output: see work_util.h. */
#define _GNU_SOURCE
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "work_util.h"

static wu_opts O;

/* `row`: throughput-1, or throughput-1-caller-runs, the same run beside
 * knit's KNIT_CALLER_RUNS (libgomp runs tasks undeferred on the creating
 * thread once 64 x threads are queued: that is what knit's row copies).
 * Each rep also prints how many tasks ran on the creating thread
 * ("INFO creator-ran <row> <variant> <fraction>", the variant its result
 * carries), read from that thread's own counting slot after the parallel
 * region: nothing is added to the task.
 * In throughput-1 the result is the variant "inline": past the queue's
 * bound most tasks are function calls on the creating thread, so the row
 * is shown beside the others but is not a hand-off peer (compare skips
 * it when it picks the best peer). */
static void row_tp1(const char *row) {
    unsigned n = WU_TP1_N(O.quick);
    wu_opts o = O;
    if (strcmp(row, "throughput-1") == 0) o.variant = "inline";
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        wu_reset();
        unsigned creator = 0;
        int64_t t0 = wu_now_ns();
#pragma omp parallel num_threads(O.threads) shared(creator)
#pragma omp single
        {
            creator = wu_slot_claim();
            for (unsigned i = 0; i < n; i++) {
#pragma omp task
                wu_count();
            }
        }
        int64_t t1 = wu_now_ns();
        wu_check_count(row, n);
        if (rep > 0) {
            if (creator != 0)
                printf("INFO creator-ran %s %s %.4f\n", row, o.variant,
                       (double)wu_slot_total(creator) / (double)n);
            wu_result(&o, row, rep, n / ((double)(t1 - t0) * 1e-9) / 1e6, "Mtasks/s",
                      "higher");
        }
    }
}

static int64_t fib(int n) {
    if (n < 2) return n;
    int64_t a = 0, b;
#pragma omp task shared(a) firstprivate(n)
    a = fib(n - 1);
    b = fib(n - 2);
#pragma omp taskwait
    return a + b;
}

static void row_fib(void) {
    int n = WU_FIB_N(O.quick);
    int64_t want = wu_fib_serial(n);
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        int64_t r = 0;
        int64_t t0 = wu_now_ns();
#pragma omp parallel num_threads(O.threads) shared(r)
#pragma omp single
        r = fib(n);
        int64_t t1 = wu_now_ns();
        if (r != want) wu_die("fib(%d) = %lld, expected %lld", n, (long long)r, (long long)want);
        wu_fib_results(&O, rep, n, (double)(t1 - t0));
    }
}

static uint64_t skynet(uint64_t num, uint64_t size) {
    if (size == 1) return num;
    uint64_t sub = size / 10, part[10], sum = 0;
    for (unsigned i = 0; i < 10; i++) {
#pragma omp task shared(part) firstprivate(i)
        part[i] = skynet(num + i * sub, sub);
    }
#pragma omp taskwait
    for (unsigned i = 0; i < 10; i++) sum += part[i];
    return sum;
}

static void row_skynet(void) {
    int depth = WU_SKYNET_DEPTH(O.quick);
    uint64_t want = wu_skynet_sum(depth), leaves = wu_pow10(depth);
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        uint64_t r = 0;
        int64_t t0 = wu_now_ns();
#pragma omp parallel num_threads(O.threads) shared(r)
#pragma omp single
        r = skynet(0, leaves);
        int64_t t1 = wu_now_ns();
        if (r != want)
            wu_die("skynet sum %llu, expected %llu", (unsigned long long)r, (unsigned long long)want);
        if (rep > 0) wu_result(&O, "skynet", rep, (double)(t1 - t0) / 1e6, "ms", "lower");
    }
}

static void row_reduce(void) {
    size_t n = WU_REDUCE_N(O.quick);
    double *a = wu_reduce_array(n);
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        double sum = 0;
        wu_clobber(a);
        int64_t t0 = wu_now_ns();
#pragma omp parallel for num_threads(O.threads) schedule(static) reduction(+ : sum)
        for (size_t i = 0; i < n; i++) sum += a[i];
        int64_t t1 = wu_now_ns();
        wu_reduce_check("omp", sum, n);
        if (rep > 0) wu_result(&O, "reduce", rep, wu_reduce_gibs(n, t1 - t0), "GiB/s", "higher");
    }
    free(a);
}

int main(int argc, char **argv) {
    O = wu_parse(argc, argv, "omp");
    omp_set_dynamic(0);
    if (wu_is(&O, "throughput-1")) row_tp1("throughput-1");
    else if (wu_is(&O, "throughput-1-caller-runs")) row_tp1("throughput-1-caller-runs");
    else if (wu_is(&O, "fib")) row_fib();
    else if (wu_is(&O, "skynet")) row_skynet();
    else if (wu_is(&O, "reduce")) row_reduce();
    else wu_unknown_row(&O);
    return 0;
}
