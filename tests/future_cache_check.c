/* The per-thread future cache (runtime/future.c): two magazines, so that
 * alternating allocs and frees never move a magazine through the pool's
 * lock, and a thread never keeps more than two magazines' worth. */
#include "tests/future_cache_check.h"

#include <pthread.h>
#include <stdlib.h>

#include "runtime/pool.h"

static uint64_t moves(struct knit__pool *p) {
    pthread_mutex_lock(&p->handle->lock);
    uint64_t m = p->magazine_moves;
    pthread_mutex_unlock(&p->handle->lock);
    return m;
}

knit_test_cache_result knit_test_future_cache(unsigned many, unsigned rounds, int with_in) {
    knit_test_cache_result r = {0, 0, 0, 0, KNIT__FUTURE_CACHE, 0, 0, (unsigned)sizeof(knit_future),
                                (unsigned)sizeof(struct knit__future_in)};
    const unsigned cls = knit__fclass(with_in);
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 1;
    knit_pool *h = NULL;
    if (knit_pool_create(&o, &h) != 0) {
        r.rc = 1;
        return r;
    }
    knit_future **fs = malloc((size_t)many * sizeof *fs);
    if (fs == NULL || knit__pool_enter(h, false) != 0) {
        free(fs);
        knit_pool_destroy(h, KNIT_DRAIN);
        r.rc = 2;
        return r;
    }
    struct knit__pool *p = h->p;
    struct knit__producer *rec = knit__producer_get(h, p);
    if (rec == NULL) {
        r.rc = 3;
        goto out;
    }
    for (unsigned i = 0; i < many; i++)
        if ((fs[i] = knit__future_alloc(p, rec, with_in != 0)) == NULL) {
            for (unsigned k = 0; k < i; k++) knit__future_recycle(fs[k]);
            r.rc = 4;
            goto out;
        }
    for (unsigned i = 0; i < many; i++) r.wrong_class += fs[i]->with_in != (with_in != 0);
    uint64_t m0 = moves(p);
    for (unsigned i = 0; i < many; i++) knit__future_recycle(fs[i]);
    uint64_t m1 = moves(p);
    r.moves_drain = m1 - m0;
    for (unsigned i = 0; i < rounds; i++) {
        knit_future *f = knit__future_alloc(p, rec, with_in != 0);
        if (f == NULL) {
            r.rc = 5;
            goto out;
        }
        r.wrong_class += f->with_in != (with_in != 0);
        knit__future_recycle(f);
    }
    r.moves_edge = moves(p) - m1;
    r.kept = rec->fc[cls].ncache + rec->fc[cls].nspare;
    r.other_kept = rec->fc[1 - cls].ncache + rec->fc[1 - cls].nspare;
out:
    knit__pool_exit(h);
    free(fs);
    if (knit_pool_destroy(h, KNIT_DRAIN) != 0 && r.rc == 0) r.rc = 6;
    return r;
}
