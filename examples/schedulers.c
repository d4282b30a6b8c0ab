/* schedulers: one workload under every registered claim discipline, with
 * their pool counters side by side.
 *
 *   ./bazelw run //examples:schedulers -- [tasks] [threads]
 *
 * Registers the "lock" discipline from lock_sched.c (a user-written one),
 * then lists every registered discipline with knit_sched_list() and, for
 * each, creates a pool (threads workers, default 2; a discipline that
 * rejects that configuration, like "single" with more than one consumer,
 * is run with 1 worker instead), runs the same workload — `tasks` small
 * tasks (default 200000) whose results are summed into a checksum, then
 * fib(25) by nested submit/await — checks both answers, and prints one
 * row per discipline: wall time, tasks run, claims, lanes per claim, lost
 * polls, parks and wake-ups. Prints "verified" only if every discipline
 * that ran got both answers right, and ticket and dekker both ran.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <knit/knit.h>

#include "examples/lock_sched.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mix(uint64_t x) { /* splitmix64's finaliser */
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void *small_task(knit_task *task, void *arg) {
    (void)task;
    return (void *)(uintptr_t)(mix((uintptr_t)arg) & 0xffffffffu);
}

static void *fib(knit_task *task, void *arg) {
    uintptr_t n = (uintptr_t)arg;
    if (n < 2) return arg;
    knit_future *f;
    if (knit_submit(knit_task_pool(task), fib, (void *)(n - 1), &f) != 0) {
        knit_task_fail(task, 1, "submit: %s", knit_last_error());
        return NULL;
    }
    uintptr_t b = (uintptr_t)fib(task, (void *)(n - 2));
    void *a;
    int rc = knit_await(f, -1, &a);
    knit_future_release(f);
    if (rc != 0) {
        knit_task_fail(task, 1, "fib(%" PRIuPTR "): %s", n - 1, knit_last_error());
        return NULL;
    }
    return (void *)((uintptr_t)a + b);
}

enum { BATCH = 4096, FIB_N = 25, FIB_WANT = 75025 };

/* Runs the workload; 0 when both answers are right. */
static int workload(knit_pool *pool, uint64_t tasks) {
    static knit_future *fs[BATCH];
    uint64_t want = 0, got = 0;
    for (uint64_t i = 0; i < tasks; i++) want += mix(i) & 0xffffffffu;
    for (uint64_t done = 0; done < tasks;) {
        size_t n = tasks - done < BATCH ? (size_t)(tasks - done) : BATCH;
        for (size_t i = 0; i < n; i++)
            if (knit_submit(pool, small_task, (void *)(uintptr_t)(done + i), &fs[i]) != 0) {
                fprintf(stderr, "schedulers: submit: %s\n", knit_last_error());
                return 1;
            }
        for (size_t i = 0; i < n; i++) {
            void *r;
            if (knit_await(fs[i], -1, &r) != 0) {
                fprintf(stderr, "schedulers: await: %s\n", knit_last_error());
                return 1;
            }
            got += (uintptr_t)r;
            knit_future_release(fs[i]);
        }
        done += n;
    }
    knit_future *f;
    if (knit_submit(pool, fib, (void *)(uintptr_t)FIB_N, &f) != 0) {
        fprintf(stderr, "schedulers: submit: %s\n", knit_last_error());
        return 1;
    }
    void *r = NULL;
    int rc = knit_await(f, -1, &r);
    knit_future_release(f);
    if (rc != 0) {
        fprintf(stderr, "schedulers: fib: %s\n", knit_last_error());
        return 1;
    }
    int bad = 0;
    if (got != want) {
        fprintf(stderr, "schedulers: checksum %" PRIu64 ", want %" PRIu64 "\n", got, want);
        bad = 1;
    }
    if ((uintptr_t)r != FIB_WANT) {
        fprintf(stderr, "schedulers: fib(%d) = %" PRIuPTR ", want %d\n", FIB_N, (uintptr_t)r,
                FIB_WANT);
        bad = 1;
    }
    return bad;
}

int main(int argc, char **argv) {
    uint64_t tasks = argc > 1 ? strtoull(argv[1], NULL, 10) : 200000;
    unsigned threads = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 2;
    if (tasks == 0 || threads == 0) {
        fprintf(stderr, "usage: schedulers [tasks > 0] [threads > 0]\n");
        return 2;
    }
    if (lock_sched_register() != 0) {
        fprintf(stderr, "schedulers: register lock: %s\n", knit_last_error());
        return 1;
    }
    const knit_sched_ops *ops[KNIT_SCHED_MAX];
    size_t nops = knit_sched_list(ops, KNIT_SCHED_MAX);
    if (nops > KNIT_SCHED_MAX) nops = KNIT_SCHED_MAX;

    printf("%" PRIu64 " small tasks + fib(%d), %u workers (1 where a discipline needs it)\n\n",
           tasks, FIB_N, threads);
    printf("%-8s %3s %9s %10s %9s %11s %11s %7s %7s  %s\n", "sched", "thr", "time(ms)",
           "tasks_run", "claims", "lanes/claim", "polls_lost", "parks", "wakes", "result");
    int failures = 0;
    bool ran_ticket = false, ran_dekker = false;
    for (size_t i = 0; i < nops; i++) {
        const char *name = ops[i]->name;
        knit_pool_options opts = KNIT_POOL_OPTIONS_INIT;
        opts.threads = threads;
        opts.sched = name;
        knit_pool *pool;
        if (knit_pool_create(&opts, &pool) != 0) {
            /* e.g. "single" serves one consumer: try one worker. */
            char why[256];
            snprintf(why, sizeof why, "%s", knit_last_error());
            opts.threads = 1;
            if (threads == 1 || knit_pool_create(&opts, &pool) != 0) {
                printf("%-8s skipped: %s\n", name, why);
                continue;
            }
        }
        double t0 = now_s();
        int bad = workload(pool, tasks);
        double ms = (now_s() - t0) * 1e3;
        knit_pool_stats_t st = {.size = sizeof st};
        knit_pool_stats(pool, &st);
        if (knit_pool_destroy(pool, KNIT_DRAIN) != 0) {
            fprintf(stderr, "schedulers: destroy: %s\n", knit_last_error());
            bad = 1;
        }
        printf("%-8s %3u %9.1f %10" PRIu64 " %9" PRIu64 " %11.2f %11" PRIu64 " %7" PRIu64
               " %7" PRIu64 "  %s\n",
               st.sched, st.threads, ms, st.tasks_run, st.total.claims,
               st.total.claims ? (double)st.total.lanes_claimed / (double)st.total.claims : 0.0,
               st.total.polls_lost, st.total.parks, st.total.wakes, bad ? "WRONG" : "ok");
        failures += bad;
        if (strcmp(name, "ticket") == 0) ran_ticket = true;
        if (strcmp(name, "dekker") == 0) ran_dekker = true;
    }
    printf("\n(tasks_run counts tasks run by workers and by awaiting threads; claims,\n"
           " lanes, polls, parks and wakes are the workers' totals)\n");
    if (failures != 0 || !ran_ticket || !ran_dekker) {
        printf("FAILED\n");
        return 1;
    }
    printf("verified\n");
    return 0;
}
