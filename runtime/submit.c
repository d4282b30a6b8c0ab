/* Submitting: per-thread producer records, their carpets, the bound on
 * pending tasks, and knit_submit.
 *
 * Each thread that submits to a pool gets a producer record on first use
 * (found again through a small thread-local map) and publishes only into
 * its own carpets, so every carpet keeps exactly one producer. When all of
 * its carpets are full it takes another one, up to the pool's registry
 * capacity (max_pending / 32 plus slack), so a submitted task is always
 * claimable without the producer's further help. A thread's record (and
 * its carpets, with any tasks still in flight) is marked orphaned when the
 * thread exits and adopted by the next thread that registers: carpets are
 * reused, never leaked, and nothing in flight is lost.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime/alloc.h"
#include "payload/payload.h"
#include "runtime/cpu.h"
#include "runtime/error.h"
#include "runtime/pool.h"

#define KNIT__TLS_POOLS 8

struct knit__tls_entry {
    knit_pool *h;
    uint64_t gen;
    struct knit__producer *rec;
};

static _Thread_local struct knit__tls_entry knit__tls_map[KNIT__TLS_POOLS];
static _Thread_local unsigned knit__tls_next;
static pthread_key_t knit__exit_key;
static pthread_once_t knit__exit_once = PTHREAD_ONCE_INIT;

/* Gives up a map entry's record: it stays with its pool, adoptable by the
 * next thread that registers (its carpets may still carry tasks; workers
 * keep claiming those). The handle outlives the pool, so locking it is
 * safe; a dead pool has freed the record already. */
static void knit__tls_entry_orphan(struct knit__tls_entry *e) {
    pthread_mutex_lock(&e->h->lock);
    if (atomic_load_explicit(&e->h->state, memory_order_acquire) !=
            KNIT__POOL_DEAD &&
        e->h->gen == e->gen)
        e->rec->orphaned = true;
    pthread_mutex_unlock(&e->h->lock);
    e->h = NULL;
}

/* Thread exit: orphan every record of this thread. */
static void knit__thread_exit(void *unused) {
    (void)unused;
    for (unsigned i = 0; i < KNIT__TLS_POOLS; i++)
        if (knit__tls_map[i].h != NULL) knit__tls_entry_orphan(&knit__tls_map[i]);
}

static void knit__exit_key_create(void) {
    pthread_key_create(&knit__exit_key, knit__thread_exit);
}

void knit__thread_exit_hook_install(void) {
    pthread_once(&knit__exit_once, knit__exit_key_create);
}

void knit__producer_free(struct knit__producer *rec) {
    /* The carpets belong to the pool's registry, which frees them. */
    free(rec->mine);
    free(rec);
}

static struct knit__producer *knit__producer_new(struct knit__pool *p) {
    struct knit__producer *rec = knit__aligned_alloc(KNIT__LINE, sizeof *rec);
    if (rec == NULL) return NULL;
    memset(rec, 0, sizeof *rec);
    rec->pool = p;
    rec->worker = -1;
    atomic_init(&rec->submitted, 0);
    atomic_init(&rec->helped, 0);
    atomic_init(&rec->cancelled, 0);
    atomic_init(&rec->skipped, 0);
    atomic_init(&rec->failed, 0);
    return rec;
}

struct knit__producer *knit__producer_add(struct knit__pool *p,
                                          bool adopt) {
    knit_pool *h = p->handle;
    pthread_mutex_lock(&h->lock);
    struct knit__producer *rec = NULL;
    if (adopt)
        for (struct knit__producer *r = p->producers; r != NULL; r = r->next)
            if (r->orphaned) {
                r->orphaned = false;
                rec = r;
                break;
            }
    if (rec == NULL) {
        rec = knit__producer_new(p);
        if (rec != NULL) {
            rec->next = p->producers;
            p->producers = rec;
        }
    }
    pthread_mutex_unlock(&h->lock);
    return rec;
}

struct knit__producer *knit__producer_get(knit_pool *h, struct knit__pool *p) {
    struct knit__tls *tls = knit__tls_get();
    if (tls->worker != NULL && tls->worker->pool == p) return tls->worker->rec;
    for (unsigned i = 0; i < KNIT__TLS_POOLS; i++)
        if (knit__tls_map[i].h == h && knit__tls_map[i].gen == h->gen)
            return knit__tls_map[i].rec;
    /* First use on this thread: adopt an exited thread's record (and its
     * carpets) or make one. */
    struct knit__producer *rec = knit__producer_add(p, true);
    if (rec == NULL) return NULL;
    struct knit__tls_entry *e = &knit__tls_map[knit__tls_next++ % KNIT__TLS_POOLS];
    if (e->h != NULL) knit__tls_entry_orphan(e); /* evicted from the map */
    e->h = h;
    e->gen = h->gen;
    e->rec = rec;
    pthread_setspecific(knit__exit_key, (void *)1);
    return rec;
}

/* A new carpet for rec, registered with the pool, in *out: 0, KNIT_EAGAIN
 * at capacity (lanes free up as workers claim: wait), KNIT_ENOMEM (with
 * the message set; nothing changed). */
static int knit__carpet_take(struct knit__pool *p, struct knit__producer *rec,
                             knit_carpet **out) {
    knit_pool *h = p->handle;
    knit_carpet *c = NULL;
    int rc = KNIT_EAGAIN;
    pthread_mutex_lock(&h->lock);
    uint32_t n = atomic_load_explicit(&p->nall, memory_order_relaxed);
    if (n < p->capall && rec->nmine < p->capall) {
        if (rec->nmine == rec->capmine) {
            unsigned cap = rec->capmine ? rec->capmine * 2 : 4;
            knit_carpet **m = knit__realloc(rec->mine, cap * sizeof *m);
            if (m == NULL) {
                rc = knit__fail(KNIT_ENOMEM, "cannot grow this thread's "
                                             "list of carpets to %u",
                                cap);
                goto out;
            }
            rec->mine = m;
            rec->capmine = cap;
        }
        rc = knit__carpet_create(p->ops, &p->params, p->trace, p->trace_ctx, &c);
        if (rc < 0) {
            c = NULL;
            goto out;
        }
        atomic_store_explicit(&p->all[n], c, memory_order_relaxed);
        /* release (and seq-cst, for the parking re-check's seq-cst load of
         * nall): the entry is written before workers can see it. */
        atomic_store_explicit(&p->nall, n + 1, memory_order_seq_cst);
        rec->mine[rec->nmine++] = c;
    }
out:
    pthread_mutex_unlock(&h->lock);
    *out = c;
    return c != NULL ? 0 : rc;
}

int knit__publish(struct knit__pool *p, struct knit__producer *rec,
                  knit_future *f) {
    knit__lane_task t;
    memset(&t, 0, sizeof t);
    t.future = f; /* the future carries fn and arg */
    for (unsigned k = 0; k < rec->nmine; k++) {
        unsigned i = (rec->cur + k) % rec->nmine;
        knit_carpet *c = rec->mine[i];
        if (knit__carpet_publish(c, &t, NULL, 0) >= 0) {
            rec->cur = i;
            knit__carpet_flush(c); /* B1 of the parking protocol */
            knit__pool_notify(p);
            return 0;
        }
    }
    knit_carpet *c;
    int rc = knit__carpet_take(p, rec, &c);
    if (rc < 0) return rc;
    rec->cur = rec->nmine - 1;
    int lane = knit__carpet_publish(c, &t, NULL, 0);
    if (lane < 0) return lane; /* a fresh carpet is never full */
    knit__carpet_flush(c);
    knit__pool_notify(p);
    return 0;
}

/* Waits a little for room under max_pending or for a carpet: a task helps
 * (runs claimable tasks), an outside thread helps if a helper id is free,
 * else sleeps until a worker starts something. */
static void knit__space_wait(struct knit__pool *p, struct knit__producer *rec) {
    struct knit__tls *tls = knit__tls_get();
    if (tls->worker != NULL && tls->worker->pool == p) {
        if (!knit__pool_run_some(p, tls->worker->id, tls->worker, rec))
            sched_yield();
        return;
    }
    uint32_t seq = atomic_load_explicit(&p->space_seq, memory_order_acquire);
    /* seq-cst RMW then seq-cst load: pairs with knit__space_notify. */
    atomic_fetch_add_explicit(&p->space_waiters, 1, memory_order_seq_cst);
    if (KNIT__PENDING(atomic_load_explicit(&p->counts, memory_order_seq_cst)) >=
        (int64_t)p->max_pending) {
        struct timespec ts = {0, 1000000}; /* bounded: re-check state */
        syscall(SYS_futex, (uint32_t *)&p->space_seq, FUTEX_WAIT_PRIVATE, seq,
                &ts, NULL, 0);
    } else {
        sched_yield();
    }
    atomic_fetch_sub_explicit(&p->space_waiters, 1, memory_order_relaxed);
}

static void knit__pending_undo(struct knit__pool *p) {
    atomic_fetch_sub_explicit(&p->counts, 1 + KNIT__LIVE_ONE,
                              memory_order_relaxed);
}

static void knit__pending_high(struct knit__pool *p, int64_t now) {
    uint64_t high = atomic_load_explicit(&p->pending_high, memory_order_relaxed);
    while ((uint64_t)now > high &&
           !atomic_compare_exchange_weak_explicit(&p->pending_high, &high,
                                                  (uint64_t)now,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

/* Counts one more pending and live task, waiting or failing at the bound.
 * Undo with knit__pending_undo. */
static int knit__pending_acquire(knit_pool *h, struct knit__pool *p,
                                 struct knit__producer *rec, bool bypass) {
    for (;;) {
        /* seq-cst RMW, then the seq-cst load of state below: pairs with
         * destroy's seq-cst store of state followed by its seq-cst load of
         * counts (knit__pool_quiescent). Either destroy sees this task as
         * live and waits for it, or we see the pool stopping and undo. */
        uint64_t c = atomic_fetch_add_explicit(&p->counts, 1 + KNIT__LIVE_ONE,
                                               memory_order_seq_cst);
        int64_t n = KNIT__PENDING(c);
        if (bypass || n < (int64_t)p->max_pending) {
            if (!bypass) {
                struct knit__tls *tls = knit__tls_get();
                bool own = tls->worker != NULL && tls->worker->pool == p;
                uint32_t st = atomic_load_explicit(&h->state, memory_order_seq_cst);
                if (st != KNIT__POOL_LIVE && !own) {
                    knit__pending_undo(p);
                    return knit__fail(KNIT_ESHUTDOWN, "the pool is shutting down");
                }
            }
            knit__pending_high(p, n + 1);
            return 0;
        }
        atomic_fetch_sub_explicit(&p->counts, 1 + KNIT__LIVE_ONE,
                                  memory_order_relaxed);
        if (p->backpressure == KNIT_FAIL)
            return knit__fail(KNIT_EAGAIN,
                              "max_pending=%zu tasks are submitted and not "
                              "started (backpressure KNIT_FAIL)",
                              p->max_pending);
        uint32_t st = atomic_load_explicit(&h->state, memory_order_acquire);
        struct knit__tls *tls = knit__tls_get();
        bool own = tls->worker != NULL && tls->worker->pool == p;
        if (st != KNIT__POOL_LIVE && !own)
            return knit__fail(KNIT_ESHUTDOWN, "the pool is shutting down");
        knit__space_wait(p, rec);
    }
}

/* Publishes f (fn/arg set), already counted by knit__pending_acquire. */
static int knit__enqueue(knit_pool *h, struct knit__pool *p,
                         struct knit__producer *rec, knit_future *f) {
    for (;;) {
        int rc = knit__publish(p, rec, f);
        if (rc == 0) break;
        if (rc == KNIT_ENOMEM) { /* a new carpet was needed: message set */
            knit__pending_undo(p);
            return rc;
        }
        /* No carpet to be had: wait for lanes to free up. */
        uint32_t st = atomic_load_explicit(&h->state, memory_order_acquire);
        if (st >= KNIT__POOL_STOPPING) {
            knit__pending_undo(p);
            return knit__fail(KNIT_ESHUTDOWN, "the pool is shutting down");
        }
        knit__space_wait(p, rec);
    }
    knit__stat_add(&rec->submitted, 1);
    return 0;
}

/* From inside a task: push the subtask onto the running consumer's deque
 * (the owner pops it newest-first, depth-first like any work-stealing
 * runtime; idle peers steal the oldest). Counted as live, not pending:
 * the deque's capacity bounds these. Returns false when the deque is full
 * (the caller falls back to its carpets). */
static bool knit__push_local(struct knit__pool *p, struct knit__tls *tls,
                             knit_future *f) {
    /* Counted before the push makes f stealable: the deque's release of
     * f orders this count before any settle of f, which destroy relies on
     * (knit__pool_quiescent). An undo only ever over-counts for a moment. */
    struct knit__worker *w =
        tls->worker != NULL && tls->worker->pool == p ? tls->worker : NULL;
    if (w != NULL)
        knit__stat_add(&w->pushed, 1); /* owner-written */
    else /* a helper thread: RMW on the shared count (relaxed: as above) */
        atomic_fetch_add_explicit(&p->shared_pushed, 1, memory_order_relaxed);
    f->counted_local = true;
    if (knit__deque_push_batch(&p->deques[tls->consumer], &f, 1) == 0) {
        f->counted_local = false;
        if (w != NULL)
            atomic_store_explicit(
                &w->pushed,
                atomic_load_explicit(&w->pushed, memory_order_relaxed) - 1,
                memory_order_relaxed);
        else
            atomic_fetch_sub_explicit(&p->shared_pushed, 1,
                                      memory_order_relaxed);
        return false;
    }
    /* B1 was the push's seq-cst bottom store; get a sleeper to steal. */
    knit__pool_notify(p);
    return true;
}

/* Fills a fresh future: task, references, and the payload it carries. */
static void knit__future_setup(knit_future *f, knit_fn fn, void *arg,
                               const struct knit__submit_payload *pl,
                               bool user) {
    f->fn = fn;
    f->arg = arg;
    atomic_store_explicit(&f->refs, user ? 2 : 1, memory_order_relaxed);
    atomic_store_explicit(&f->user, user ? 1 : 0, memory_order_relaxed);
    if (pl == NULL) return;
    f->always_run = pl->always_run;
    if (pl->bytes == NULL && pl->buf == NULL && pl->kind == KNIT__PAY_NONE)
        return; /* flags only, no payload */
    if (pl->buf != NULL) {
        f->in = *pl->buf;
    } else {
        if (pl->len) memcpy(f->inline_data, pl->bytes, pl->len);
        f->in.data = f->inline_data;
        f->in.len = pl->len;
    }
    f->in_kind = pl->kind;
    f->arg = f->in.data; /* a payload task's arg is its bytes */
}

/* Undoes a setup whose submit failed: the caller keeps its buffer. */
static void knit__future_discard(knit_future *f, struct knit__producer *rec) {
    memset(&f->in, 0, sizeof f->in);
    f->in_kind = KNIT__PAY_NONE;
    knit__future_free_unused(f, rec);
}

int knit__submit(knit_pool *h, knit_fn fn, void *arg,
                 const struct knit__submit_payload *pl, knit_future **out) {
    if (out != NULL) *out = NULL;
    if (fn == NULL) return knit__fail(KNIT_EINVAL, "task function is NULL");
    int rc = knit__pool_enter(h, false);
    if (rc < 0) return rc;
    struct knit__pool *p = h->p;
    struct knit__tls *tls = knit__tls_get();
    bool own = tls->worker != NULL && tls->worker->pool == p;
    struct knit__producer *rec = knit__producer_get(h, p);
    if (rec == NULL) {
        knit__pool_exit(h);
        return knit__fail(KNIT_ENOMEM, "cannot register this thread");
    }
    if (tls->cpool == p && tls->current != NULL) {
        /* From inside a task: onto this consumer's deque. */
        knit_future *f = knit__future_alloc(p, rec);
        if (f == NULL) {
            knit__pool_exit(h);
            return knit__fail(KNIT_ENOMEM, "cannot allocate a future");
        }
        knit__future_setup(f, fn, arg, pl, out != NULL);
        if (knit__push_local(p, tls, f)) {
            knit__stat_add(&rec->submitted, 1);
            if (out != NULL) *out = f;
            knit__pool_exit(h);
            return 0;
        }
        knit__future_discard(f, rec); /* deque full: through the carpets */
    }
    uint32_t st = atomic_load_explicit(&h->state, memory_order_acquire);
    if (st != KNIT__POOL_LIVE && !own) {
        knit__pool_exit(h);
        return knit__fail(KNIT_ESHUTDOWN, "the pool is shutting down");
    }
    rc = knit__pending_acquire(h, p, rec, false);
    if (rc < 0) {
        knit__pool_exit(h);
        return rc;
    }
    knit_future *f = knit__future_alloc(p, rec);
    if (f == NULL) {
        knit__pending_undo(p);
        knit__pool_exit(h);
        return knit__fail(KNIT_ENOMEM, "cannot allocate a future");
    }
    knit__future_setup(f, fn, arg, pl, out != NULL);
    rc = knit__enqueue(h, p, rec, f);
    if (rc < 0) {
        knit__future_discard(f, rec);
        knit__pool_exit(h);
        return rc;
    }
    if (out != NULL) *out = f;
    knit__pool_exit(h);
    return 0;
}

int knit_submit(knit_pool *h, knit_fn fn, void *arg, knit_future **out) {
    return knit__submit(h, fn, arg, NULL, out);
}

void knit__continuation_schedule(knit_future *g) {
    struct knit__pool *p = g->pool;
    knit_pool *h = p->handle;
    uint32_t st = atomic_load_explicit(&h->state, memory_order_acquire);
    if (st == KNIT__POOL_CANCELLING || st >= KNIT__POOL_STOPPING) {
        uint32_t expect = KNIT__F_PENDING;
        if (atomic_compare_exchange_strong_explicit(
                &g->state, &expect, KNIT__F_RUNNING, memory_order_acq_rel,
                memory_order_acquire))
            knit__future_settle(g, KNIT_ECANCELED, NULL, 0, NULL);
        knit__future_unref(g); /* the reference the antecedent held */
        return;
    }
    struct knit__producer *rec = knit__producer_get(h, p);
    int rc = KNIT_ENOMEM;
    if (rec != NULL) {
        knit__pending_acquire(h, p, rec, true);
        rc = knit__enqueue(h, p, rec, g); /* ENOMEM or ESHUTDOWN, undone */
    }
    if (rc < 0) {
        uint32_t expect = KNIT__F_PENDING;
        if (atomic_compare_exchange_strong_explicit(
                &g->state, &expect, KNIT__F_RUNNING, memory_order_acq_rel,
                memory_order_acquire))
            knit__future_settle(g, rc, NULL, 0, NULL);
        knit__future_unref(g);
    }
}
