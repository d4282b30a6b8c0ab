/* How a submitting thread grows its carpets (runtime/submit.c,
 * knit__publish_held): it tries a few of its own before it takes a new
 * one, rather than every one of them, so growing to N carpets costs O(N)
 * probes of full carpets, not N^2 / 2; and once the workers drained them,
 * the next burst reuses them rather than growing again. */
#include "tests/carpet_growth_check.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "runtime/carpet.h"
#include "runtime/pool.h"

static _Atomic int gate_started, gate_open;

static void *gate_task(knit_task *t, void *arg) {
    (void)t;
    atomic_store_explicit(&gate_started, 1, memory_order_release);
    while (!atomic_load_explicit(&gate_open, memory_order_acquire)) {
    }
    return arg;
}

static void *echo_task(knit_task *t, void *arg) {
    (void)t;
    return arg;
}

/* Sums the carpets' counters (pool lock: the registry does not grow). */
static void registry_totals(knit_pool *h, uint64_t *carpets, uint64_t *full,
                            uint64_t *published) {
    struct knit__pool *p = h->p;
    pthread_mutex_lock(&h->lock);
    uint32_t n = atomic_load_explicit(&p->nall, memory_order_acquire);
    *carpets = n;
    *full = 0;
    *published = 0;
    for (uint32_t i = 0; i < n; i++) {
        knit__carpet_stats s;
        knit__carpet_stats_get(atomic_load_explicit(&p->all[i], memory_order_relaxed), &s);
        *full += s.full;
        *published += s.published;
    }
    pthread_mutex_unlock(&h->lock);
}

knit_test_growth_result knit_test_carpet_growth(unsigned tasks) {
    knit_test_growth_result r = {0};
    r.probes_max = KNIT__PROBES;
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 1;
    knit_pool *h = NULL;
    if (knit_pool_create(&o, &h) != 0) {
        r.rc = 1;
        return r;
    }
    knit_future **fs = malloc((size_t)tasks * sizeof *fs);
    if (fs == NULL) {
        knit_pool_destroy(h, KNIT_DRAIN);
        r.rc = 2;
        return r;
    }
    uint64_t full_before = 0, published = 0;
    for (int burst = 0; burst < 2 && r.rc == 0; burst++) {
        atomic_store(&gate_started, 0);
        atomic_store(&gate_open, 0);
        knit_future *gate = NULL;
        if (knit_submit(h, gate_task, NULL, &gate) != 0) {
            r.rc = 3;
            break;
        }
        while (!atomic_load_explicit(&gate_started, memory_order_acquire)) {
        }
        unsigned made = 0;
        for (; made < tasks; made++)
            if (knit_submit(h, echo_task, (void *)(uintptr_t)(made + 1), &fs[made]) != 0) {
                r.rc = 4;
                break;
            }
        uint64_t full_now;
        registry_totals(h, &r.carpets[burst], &full_now, &published);
        r.full[burst] = full_now - full_before;
        full_before = full_now;
        atomic_store_explicit(&gate_open, 1, memory_order_release);
        for (unsigned i = 0; i < made; i++) {
            void *res = NULL;
            if (knit_await(fs[i], -1, &res) == 0 && res == (void *)(uintptr_t)(i + 1)) r.ran++;
            knit_future_release(fs[i]);
        }
        knit_await(gate, -1, NULL);
        knit_future_release(gate);
    }
    r.published = published;
    free(fs);
    if (knit_pool_destroy(h, KNIT_DRAIN) != 0 && r.rc == 0) r.rc = 5;
    return r;
}
