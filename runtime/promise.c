/* Promises: futures that no task settles.
 *
 * A promise is a future from the creating thread's cache with no task:
 * it stays PENDING until someone wins its PENDING -> RUNNING CAS (a
 * resolve, a reject, knit_future_cancel, or pool destroy) and settles it
 * with knit__future_settle, which wakes its waiters and schedules its
 * continuations as for any future.
 *
 * While unsettled it is on the pool's `promises` list (pool lock) and
 * holds a reference of its own, so releasing the user's handle early
 * neither frees it nor loses it: destroy still finds it. The winner takes
 * it off the list only after the settle (continuations included), and
 * destroy, which rejects every promise it can win, waits for any it
 * cannot win to leave the list: so when destroy starts its drain, every
 * continuation of every promise is already counted as a task, and the
 * drain waits for it.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "runtime/pool.h"

/* Takes f off the pool's list (pool lock held). */
static void knit__promise_unlink_locked(struct knit__pool *p, knit_future *f) {
    if (!f->promise_linked) return;
    if (f->promise_prev != NULL)
        f->promise_prev->promise_next = f->promise_next;
    else
        p->promises = f->promise_next;
    if (f->promise_next != NULL) f->promise_next->promise_prev = f->promise_prev;
    f->promise_prev = f->promise_next = NULL;
    f->promise_linked = false;
}

void knit__promise_settled(knit_future *f) {
    struct knit__pool *p = f->pool;
    pthread_mutex_lock(&p->handle->lock);
    knit__promise_unlink_locked(p, f);
    pthread_mutex_unlock(&p->handle->lock);
    knit__future_unref(f); /* the promise's own reference */
}

int knit_promise_create(knit_pool *h, knit_future **out) {
    if (out == NULL) return knit__fail(KNIT_EINVAL, "knit_promise_create: out is NULL");
    *out = NULL;
    int rc = knit__pool_enter(h, false);
    if (rc < 0) return rc;
    struct knit__pool *p = h->p;
    struct knit__producer *rec = knit__producer_get(h, p);
    knit_future *f = rec != NULL ? knit__future_alloc(p, rec, false) : NULL;
    if (f == NULL) {
        knit__pool_exit(h);
        return knit__fail(KNIT_ENOMEM, "knit_promise_create: no memory");
    }
    f->promise = true;
    f->promise_linked = false; /* not zeroed by the allocation */
    /* The user's handle and the promise's own (dropped after its settle).
     * Relaxed: f is not shared until the list (pool lock) or *out. */
    atomic_store_explicit(&f->refs, 2 | KNIT__REFS_USER, memory_order_relaxed);
    pthread_mutex_lock(&h->lock);
    /* Under the lock destroy moves the state on with: either it rejects
     * this promise, or we see it leaving LIVE. */
    if (atomic_load_explicit(&h->state, memory_order_relaxed) != KNIT__POOL_LIVE) {
        pthread_mutex_unlock(&h->lock);
        knit__future_free_unused(f, rec);
        knit__pool_exit(h);
        return knit__fail(KNIT_ESHUTDOWN,
                          "knit_promise_create: the pool is shutting down");
    }
    f->promise_linked = true;
    f->promise_prev = NULL;
    f->promise_next = p->promises;
    if (p->promises != NULL) p->promises->promise_prev = f;
    p->promises = f;
    pthread_mutex_unlock(&h->lock);
    knit__pool_exit(h);
    *out = f;
    return 0;
}

/* Settles promise f, if it can be won: 0, or KNIT_EALREADY /
 * KNIT_EINVAL / KNIT_ESHUTDOWN (message owned by us: freed on failure). */
static int knit__promise_settle(knit_future *f, const char *what, int code,
                                void *result, int task_code, char *message) {
    int rc = 0;
    if (f == NULL)
        rc = knit__fail(KNIT_EINVAL, "%s: future is NULL", what);
    else if ((atomic_load_explicit(&f->refs, memory_order_relaxed) & KNIT__REFS_USER) == 0)
        rc = knit__fail(KNIT_EALREADY, "%s: the future was released", what);
    else if (!f->promise)
        rc = knit__fail(KNIT_EINVAL, "%s: the future is not a promise (a task "
                                     "settles it)",
                        what);
    if (rc < 0) {
        free(message);
        return rc;
    }
    knit_pool *h = f->pool->handle;
    rc = knit__pool_enter(h, true);
    if (rc < 0) {
        free(message);
        return rc;
    }
    uint32_t expect = KNIT__F_PENDING;
    /* acq_rel: winning is the right to settle (as knit_future_cancel and
     * a task's start); acquire pairs with a winner's release so a loser
     * reads a settled state. */
    if (!atomic_compare_exchange_strong_explicit(&f->state, &expect,
                                                 KNIT__F_RUNNING,
                                                 memory_order_acq_rel,
                                                 memory_order_acquire)) {
        knit__pool_exit(h);
        free(message);
        return knit__fail(KNIT_EALREADY, "%s: the promise is already settled%s",
                          what,
                          atomic_load_explicit(&h->state, memory_order_relaxed) !=
                                  KNIT__POOL_LIVE
                              ? " (rejected by knit_pool_destroy)"
                              : "");
    }
    knit__future_settle(f, code, result, task_code, message);
    knit__promise_settled(f);
    knit__pool_exit(h);
    return 0;
}

int knit_promise_resolve(knit_future *f, void *result) {
    return knit__promise_settle(f, "knit_promise_resolve", 0, result, 0, NULL);
}

int knit_promise_reject(knit_future *f, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = knit__vformat(fmt, ap);
    va_end(ap);
    return knit__promise_settle(f, "knit_promise_reject", KNIT_ETASK, NULL, code,
                                msg);
}

void knit__promises_reject_all(struct knit__pool *p) {
    knit_pool *h = p->handle;
    knit_future *won = NULL;
    for (;;) {
        bool busy = false;
        pthread_mutex_lock(&h->lock);
        knit_future *f = p->promises;
        while (f != NULL) {
            knit_future *next = f->promise_next;
            uint32_t expect = KNIT__F_PENDING;
            /* acq_rel: as knit__promise_settle's CAS. */
            if (atomic_compare_exchange_strong_explicit(
                    &f->state, &expect, KNIT__F_RUNNING, memory_order_acq_rel,
                    memory_order_acquire)) {
                knit__promise_unlink_locked(p, f);
                f->promise_next = won; /* off the list: a private chain */
                won = f;
            } else {
                busy = true; /* its winner settles it and unlinks it */
            }
            f = next;
        }
        pthread_mutex_unlock(&h->lock);
        if (!busy) break;
        sched_yield();
    }
    while (won != NULL) {
        knit_future *next = won->promise_next;
        won->promise_next = NULL;
        /* NULL (no memory) reads as a plain cancel. */
        char *msg = strdup("the pool was destroyed before the promise was "
                           "settled");
        knit__future_settle(won, KNIT_ECANCELED, NULL, 0, msg);
        knit__future_unref(won); /* the promise's own reference */
        won = next;
    }
}
