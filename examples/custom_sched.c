/* custom_sched: write a claim discipline, register it, and run a pool on it.
 *
 *   ./bazelw run //examples:custom_sched
 *
 * The discipline itself is in lock_sched.c (about 80 lines against
 * <knit/sched.h>). This program registers it, lists every discipline, and
 * sums 1..100000 with a pool that claims through "lock", then through each
 * built-in, checking the answer each time.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <knit/knit.h>

#include "examples/lock_sched.h"

static void *square(knit_task *task, void *arg) {
    (void)task;
    uintptr_t v = (uintptr_t)arg;
    return (void *)(v * v % 1000003u);
}

static int run(const char *sched) {
    knit_pool_options opts = KNIT_POOL_OPTIONS_INIT;
    opts.threads = 2;
    opts.sched = sched;
    knit_pool *pool;
    if (knit_pool_create(&opts, &pool) != 0) {
        fprintf(stderr, "custom_sched: %s\n", knit_last_error());
        return 1;
    }
    enum { N = 100000 };
    static knit_future *fs[N];
    uint64_t want = 0, got = 0;
    for (uintptr_t i = 0; i < N; i++) {
        want += i * i % 1000003u;
        if (knit_submit(pool, square, (void *)i, &fs[i]) != 0) {
            fprintf(stderr, "custom_sched: submit: %s\n", knit_last_error());
            return 1;
        }
    }
    for (size_t i = 0; i < N; i++) {
        void *r;
        if (knit_await(fs[i], -1, &r) != 0) {
            fprintf(stderr, "custom_sched: await: %s\n", knit_last_error());
            return 1;
        }
        got += (uintptr_t)r;
        knit_future_release(fs[i]);
    }
    knit_pool_stats_t st = {.size = sizeof st};
    knit_pool_stats(pool, &st);
    printf("%-8s %" PRIu64 " tasks, %" PRIu64 " claims, %.1f lanes/claim, "
           "%" PRIu64 " lost polls: %s\n",
           st.sched, st.tasks_run, st.total.claims,
           st.total.claims ? (double)st.total.lanes_claimed / st.total.claims : 0.0,
           st.total.polls_lost, got == want ? "verified" : "WRONG");
    knit_pool_destroy(pool, KNIT_DRAIN);
    return got == want ? 0 : 1;
}

int main(void) {
    if (lock_sched_register() != 0) {
        fprintf(stderr, "custom_sched: %s\n", knit_last_error());
        return 1;
    }
    const knit_sched_ops *all[KNIT_SCHED_MAX];
    size_t n = knit_sched_list(all, KNIT_SCHED_MAX);
    printf("registered disciplines:\n");
    for (size_t i = 0; i < n; i++) printf("  %-8s %s\n", all[i]->name, all[i]->summary);
    int rc = run("lock");
    rc |= run("ticket");
    rc |= run("dekker");
    return rc;
}
