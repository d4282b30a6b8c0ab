/* The carpets' own counters, for tests/carpet_growth_test.cc: how many
 * publications found a carpet full shows how a submitting thread looked
 * for a free lane (runtime/submit.c, knit__publish_held). */
#include "tests/carpet_growth_check.h"

#include "runtime/carpet.h"
#include "runtime/pool.h"

knit_test_carpet_totals knit_test_carpet_totals_get(knit_pool *h) {
    knit_test_carpet_totals t = {KNIT__PROBES, 0, 0, 0};
    struct knit__pool *p = h->p;
    /* The pool lock: the registry does not grow meanwhile. */
    pthread_mutex_lock(&h->lock);
    uint32_t n = atomic_load_explicit(&p->nall, memory_order_acquire);
    t.carpets = n;
    for (uint32_t i = 0; i < n; i++) {
        knit__carpet_stats s;
        knit__carpet_stats_get(atomic_load_explicit(&p->all[i], memory_order_relaxed), &s);
        t.full += s.full;
        t.published += s.published;
    }
    pthread_mutex_unlock(&h->lock);
    return t;
}
