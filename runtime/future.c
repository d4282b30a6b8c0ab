/* Futures: allocation from per-thread caches, settling, waiting, cancel,
 * continuations and release.
 *
 * Waiting without lost wake-ups: a waiter arms its doorbell (seq-cst),
 * then, under the future's lock, sets `watched` (seq-cst) and links a
 * record into the future's list unless it finds the future DONE. The
 * settler stores DONE (seq-cst), then loads `watched` (seq-cst): if it is
 * 0, no list can have an entry (a registrant that comes later sees DONE,
 * by the order of the two seq-cst pairs) and the settler is done without
 * the lock, which is the common case; else it takes the lists under the
 * lock, rings every record's doorbell and marks it released (a worker's
 * record is released first: its bell outlives it). So a waiter either sees DONE or is in
 * the list the settler rings; and a waiter that stops waiting unlinks its
 * record itself, or (if the settler took it) waits for `released` before
 * its stack frame goes away.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/alloc.h"
#include "payload/payload.h"
#include "base/cpu.h"
#include "base/error.h"
#include "runtime/pool.h"

void knit__spin_lock(_Atomic uint8_t *lock) {
    unsigned spins = 0;
    /* acquire: pairs with the release in knit__spin_unlock. */
    while (atomic_exchange_explicit(lock, 1, memory_order_acquire)) {
        if (++spins < 64)
            knit__cpu_relax();
        else
            sched_yield(); /* the holder may be preempted (2 cores) */
    }
}

void knit__spin_unlock(_Atomic uint8_t *lock) {
    atomic_store_explicit(lock, 0, memory_order_release);
}

static void knit__flock(knit_future *f) { knit__spin_lock(&f->lock); }

static void knit__funlock(knit_future *f) { knit__spin_unlock(&f->lock); }

/* ---- allocation ---- */

/* A new slab (pool lock held): KNIT__SLAB_FIRST bytes, then twice the
 * last, up to KNIT__SLAB_MAX. The pages are fresh and zero: no memset,
 * and a page is first touched when its futures are carved. Where the
 * system's transparent huge pages are "always", the kernel may back the
 * largest slabs with huge pages; knit does not ask for them (madvise):
 * on this kind of VM a burst of a million futures then ran 2x slower
 * cold (the kernel's clear_page of never-used memory took half of the
 * samples), though 12% faster warm (the cause not measured). NULL if
 * the mapping fails. */
static struct knit__slab *knit__slab_map(struct knit__pool *p, unsigned cls) {
    size_t bytes = p->slab_next_bytes[cls] != 0 ? p->slab_next_bytes[cls] : KNIT__SLAB_FIRST;
    if (knit__alloc_fails()) return NULL;
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    struct knit__slab *s = (struct knit__slab *)m;
    s->bytes = bytes;
    s->stride = cls == KNIT__FC_IN ? sizeof(struct knit__future_in) : sizeof(knit_future);
    s->count = (unsigned)((bytes - offsetof(struct knit__slab, f)) / s->stride);
    s->carved = 0;
    s->next = p->slabs;
    p->slabs = s;
    p->carving[cls] = s;
    p->slab_next_bytes[cls] = bytes < KNIT__SLAB_MAX ? 2 * bytes : bytes;
    return s;
}

static knit_future *knit__slab_future(struct knit__slab *s, unsigned i) {
    return (knit_future *)(void *)(s->f + (size_t)i * s->stride);
}

/* c's loaded magazine, made of up to KNIT__FUTURE_CACHE futures of class
 * cls never used before (pool lock held), in address order. false if a
 * slab was needed and could not be mapped. */
static bool knit__futures_carve(struct knit__pool *p, unsigned cls, struct knit__fcache *c) {
    struct knit__slab *s = p->carving[cls];
    if (s == NULL || s->carved == s->count) {
        s = knit__slab_map(p, cls);
        if (s == NULL) return false;
    }
    unsigned k = s->count - s->carved;
    if (k > KNIT__FUTURE_CACHE) k = KNIT__FUTURE_CACHE;
    knit_future *list = NULL;
    for (unsigned i = s->carved + k; i-- > s->carved;) {
        knit_future *f = knit__slab_future(s, i);
        f->with_in = cls == KNIT__FC_IN; /* the rest of it is zero */
        f->free_next = list;
        list = f;
    }
    s->carved += k;
    c->cache = list;
    c->ncache = k;
    return true;
}

knit_future *knit__future_alloc(struct knit__pool *p, struct knit__producer *rec, bool with_in) {
    unsigned cls = knit__fclass(with_in);
    struct knit__fcache *c = &rec->fc[cls];
    if (c->cache == NULL && c->spare != NULL) {
        /* The full spare becomes the loaded magazine: no lock. */
        c->cache = c->spare;
        c->ncache = c->nspare;
        c->spare = NULL;
        c->nspare = 0;
    }
    if (c->cache == NULL) {
        knit_pool *h = p->handle;
        pthread_mutex_lock(&h->lock);
        knit_future *m = p->magazines[cls];
        if (m != NULL) {
            p->magazines[cls] = m->mag_next;
            p->magazine_moves++;
            c->cache = m;
            c->ncache = m->mag_count;
        } else if (!knit__futures_carve(p, cls, c)) {
            pthread_mutex_unlock(&h->lock);
            return NULL;
        }
        pthread_mutex_unlock(&h->lock);
    }
    knit_future *f = c->cache;
    c->cache = f->free_next;
    c->ncache--;
    rec->futures_out++;
    /* The next future was most likely freed on another core: fetch its
     * line 0 now, for writing, so the next submit does not wait for it. */
    if (c->cache != NULL) __builtin_prefetch(c->cache, 1, 3);
    /* Not shared yet: the lane's release store publishes these. Line 0
     * only: line 1 is at its defaults in a free future, and `in`, `out`
     * and the promise links are valid only as these flags say (see
     * struct knit_future). */
    assert(f->message == NULL && f->waiters == NULL && f->conts == NULL &&
           f->antecedent == NULL && !f->promise_linked && f->with_in == with_in);
    atomic_init(&f->state, KNIT__F_PENDING);
    atomic_init(&f->refs, 1);
    f->code = 0;
    atomic_init(&f->lock, 0);
    atomic_init(&f->cancel, 0);
    atomic_init(&f->watched, 0);
    atomic_init(&f->out_state, KNIT__OUT_NONE);
    f->in_kind = KNIT__PAY_NONE;
    f->always_run = false;
    f->counted_local = false; /* only knit__push_local sets it */
    f->promise = false;
    f->chained = false;
    f->fn = NULL;
    f->arg = NULL;
    f->group = NULL;
    f->result = NULL; /* was free_next */
    f->pool = p;
    return f;
}

void knit__future_free_unused(knit_future *f, struct knit__producer *rec) {
    struct knit__fcache *c = &rec->fc[knit__fclass(f->with_in)];
    f->free_next = c->cache;
    c->cache = f;
    c->ncache++;
    rec->futures_out--;
}

/* rec's loaded magazine is full: it becomes the spare, and a spare that
 * was already full goes to the pool. A thread gives a magazine back only
 * after it freed KNIT__FUTURE_CACHE more than it allocated since it last
 * had an empty loaded magazine, and takes one only when both of its own
 * are empty: with one magazine (all of the cache handed over when full,
 * one taken back when empty), a worker at the edge paid a lock to give
 * and a lock to take per group member (2.3% of throughput-1's profile
 * in pthread_mutex_lock). */
static void knit__magazine_full(struct knit__pool *p, unsigned cls, struct knit__fcache *c) {
    knit_future *m = c->spare;
    if (m != NULL) {
        m->mag_count = c->nspare;
        pthread_mutex_lock(&p->handle->lock);
        m->mag_next = p->magazines[cls];
        p->magazines[cls] = m;
        p->magazine_moves++;
        pthread_mutex_unlock(&p->handle->lock);
    }
    c->spare = c->cache;
    c->nspare = c->ncache;
    c->cache = NULL;
    c->ncache = 0;
}

static void knit__future_free(knit_future *f) {
    struct knit__pool *p = f->pool;
    /* Line 1 back to its defaults (see struct knit_future), read only
     * where line 0 says it was used. */
    knit_future *antecedent = NULL;
    if (f->chained) {
        antecedent = f->antecedent;
        f->antecedent = NULL;
    }
    if (f->code != 0) {
        free(f->message);
        f->message = NULL;
    }
    knit__payload_drop(f); /* a returned buffer nobody took */
    unsigned cls = knit__fclass(f->with_in);
    struct knit__producer *rec = knit__producer_get(p->handle, p);
    if (rec != NULL) {
        struct knit__fcache *c = &rec->fc[cls];
        rec->futures_out--;
        f->free_next = c->cache;
        c->cache = f;
        /* A thread that frees more than it allocates (a worker) passes
         * its futures back in magazines. */
        if (++c->ncache >= KNIT__FUTURE_CACHE) knit__magazine_full(p, cls, c);
    } else {
        f->free_next = NULL;
        f->mag_count = 1;
        pthread_mutex_lock(&p->handle->lock);
        f->mag_next = p->magazines[cls];
        p->magazines[cls] = f;
        p->futures_freed_bare++;
        pthread_mutex_unlock(&p->handle->lock);
    }
    if (antecedent != NULL) knit__future_unref(antecedent);
}

void knit__future_recycle(knit_future *f) { knit__future_free(f); }

void knit__future_unref(knit_future *f) {
    /* acq_rel: every use of f by other holders happens before the free. */
    if (atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1)
        knit__future_free(f);
}

void knit__future_free_all(struct knit__pool *p, bool in_use) {
    struct knit__slab *s = p->slabs;
    while (s != NULL) {
        struct knit__slab *next = s->next;
        /* Futures the user never released: their buffers go now. A free
         * future holds none (its free dropped them), so when every future
         * was freed the walk is skipped: after a burst of a million it
         * read 128 MiB. */
        for (unsigned i = 0; in_use && i < s->carved; i++) {
            knit_future *f = knit__slab_future(s, i);
            knit__payload_settle(f);
            knit__payload_drop(f);
            free(f->message);
        }
        munmap(s, s->bytes);
        s = next;
    }
    p->slabs = NULL;
    for (unsigned c = 0; c < KNIT__FCLASSES; c++) {
        p->carving[c] = NULL;
        p->magazines[c] = NULL;
    }
}

/* ---- settling ---- */

void knit__waiters_ring_list(struct knit__waiter *w) {
    while (w != NULL) {
        /* Everything we need from the record first: once `released` is
         * set the waiter may drop it. */
        struct knit__waiter *next = w->next;
        knit__doorbell *bell = w->bell;
        if (w->bell_in_pool) {
            /* A worker's bell lives as long as the pool, which outlives
             * this settle: let the waiter go before the ring, whose futex
             * call it would otherwise spin through (release: pairs with
             * its acquire load of `released`). A late ring only makes the
             * worker look for work once more. */
            atomic_store_explicit(&w->released, 1, memory_order_release);
            knit__doorbell_ring(bell);
        } else {
            /* An outside thread's bell is thread-local: ring while the
             * record (and so the thread) is held. */
            knit__doorbell_ring(bell);
            atomic_store_explicit(&w->released, 1, memory_order_release);
        }
        w = next;
    }
}

void knit__future_settle(knit_future *f, int code, void *result, int task_code,
                         char *message) {
    knit__payload_settle(f); /* the input the task did not take */
    f->code = code;
    f->result = result;
    /* A success leaves line 1 alone (its defaults; see struct
     * knit_future): the worker writes one line of the future. */
    assert(code != 0 || message == NULL);
    if (code != 0) {
        f->task_code = task_code;
        f->message = message;
    }
    /* seq-cst: pairs with a registrant's seq-cst store of `watched` then
     * load of state (see the top of the file). The store also releases
     * code/result to acquire loads of state. */
    atomic_store_explicit(&f->state, KNIT__F_DONE, memory_order_seq_cst);
    if (atomic_load_explicit(&f->watched, memory_order_seq_cst) == 0) return;
    knit__flock(f);
    struct knit__waiter *w = f->waiters;
    knit_future *conts = f->conts;
    f->waiters = NULL;
    f->conts = NULL;
    knit__funlock(f);
    knit__waiters_ring_list(w);
    /* The list is newest first; run continuations in registration order. */
    knit_future *rev = NULL;
    while (conts != NULL) {
        knit_future *next = conts->cont_next;
        conts->cont_next = rev;
        rev = conts;
        conts = next;
    }
    while (rev != NULL) {
        knit_future *next = rev->cont_next;
        rev->cont_next = NULL;
        knit__continuation_schedule(rev);
        rev = next;
    }
}

int knit__future_outcome(const knit_future *f, void **result) {
    switch (f->code) {
    case 0:
        if (result != NULL) *result = f->result;
        return 0;
    case KNIT_ETASK:
        return knit__fail(KNIT_ETASK, "%s (code %d): %s",
                          f->promise ? "promise rejected" : "task failed",
                          f->task_code, f->message ? f->message : "");
    case KNIT_ECANCELED:
        if (f->message != NULL) /* a promise rejected by pool destroy */
            return knit__fail(KNIT_ECANCELED, "%s", f->message);
        return knit__fail(KNIT_ECANCELED, "%s",
                          f->promise ? "the promise was cancelled"
                                     : "the task was cancelled before it ran");
    case KNIT_ESHUTDOWN:
        return knit__fail(KNIT_ESHUTDOWN, "the pool shut down before the task ran");
    default:
        return knit__fail(f->code, "%s", knit_strerror(f->code));
    }
}

/* ---- waiting ---- */

/* What a wait waits for: one of the futures fs[0..n) settled, or (g set,
 * n == 1) the group g idle. The group's waiter list works like a
 * future's (group.c); only the condition differs. */
struct knit__set {
    knit_future *const *fs;
    size_t n;
    size_t which;
    struct knit_group *g;
};

/* Element i's condition. seq-cst: the loads of the waiting protocol (the
 * re-check after an arm, and the load after `watched`; see the top of
 * the file and of group.c). */
static bool knit__set_one_done(struct knit__set *s, size_t i) {
    if (s->g != NULL) return knit__group_idle(s->g);
    return atomic_load_explicit(&s->fs[i]->state, memory_order_seq_cst) ==
           KNIT__F_DONE;
}

/* Element i's waiter list: its lock, its `watched` flag and its head. */
static void knit__set_list(struct knit__set *s, size_t i, _Atomic uint8_t **lock,
                           _Atomic uint8_t **watched,
                           struct knit__waiter ***head) {
    if (s->g != NULL) {
        *lock = &s->g->lock;
        *watched = &s->g->watched;
        *head = &s->g->waiters;
    } else {
        *lock = &s->fs[i]->lock;
        *watched = &s->fs[i]->watched;
        *head = &s->fs[i]->waiters;
    }
}

static bool knit__set_done(void *ctx) {
    struct knit__set *s = ctx;
    for (size_t i = 0; i < s->n; i++)
        if (knit__set_one_done(s, i)) {
            s->which = i;
            return true;
        }
    return false;
}

static void knit__waiters_link(struct knit__set *s, struct knit__waiter *w,
                               knit__doorbell *bell, bool bell_in_pool) {
    for (size_t i = 0; i < s->n; i++) {
        _Atomic uint8_t *lock, *watched;
        struct knit__waiter **head;
        knit__set_list(s, i, &lock, &watched, &head);
        w[i].bell = bell;
        w[i].bell_in_pool = bell_in_pool;
        atomic_init(&w[i].released, 0);
        knit__spin_lock(lock);
        atomic_store_explicit(watched, 1, memory_order_seq_cst);
        w[i].linked = !knit__set_one_done(s, i);
        if (w[i].linked) {
            w[i].next = *head;
            *head = &w[i];
        }
        knit__spin_unlock(lock);
    }
}

static void knit__waiters_unlink(struct knit__set *s, struct knit__waiter *w) {
    for (size_t i = 0; i < s->n; i++) {
        if (!w[i].linked) continue;
        _Atomic uint8_t *lock, *watched;
        struct knit__waiter **head;
        knit__set_list(s, i, &lock, &watched, &head);
        bool found = false;
        knit__spin_lock(lock);
        for (struct knit__waiter **pp = head; *pp != NULL; pp = &(*pp)->next)
            if (*pp == &w[i]) {
                *pp = w[i].next;
                found = true;
                break;
            }
        knit__spin_unlock(lock);
        if (!found) /* the settler has it: wait until it lets go */
            while (!atomic_load_explicit(&w[i].released, memory_order_acquire))
                knit__cpu_relax();
        w[i].linked = false;
    }
}

/* start + span, saturating: a negative span, or one past INT64_MAX, is no
 * limit (INT64_MAX), not an overflow. */
static int64_t knit__deadline(int64_t start, int64_t span) {
    return span < 0 || span > INT64_MAX - start ? INT64_MAX : start + span;
}

/* An outside waiter has helped long enough: gives its helper id back; from
 * now on it only sleeps. */
static void knit__helper_stop(struct knit__pool *p, struct knit__tls *tls,
                              bool *own_id, unsigned *consumer,
                              struct knit__pool *cpool, unsigned outer) {
    knit__pool_helper_release(p, *consumer);
    tls->cpool = cpool; /* the thread's own: another pool's task, maybe */
    tls->consumer = outer;
    *own_id = false;
    *consumer = UINT32_MAX;
}

/* Waits until one of fs[0..n) is DONE: 0 and *which, or KNIT_ETIMEDOUT.
 * `help`: an outside thread may run claimable tasks while it waits. Only
 * an unbounded wait for one future helps: a helper runs whole batches, so
 * a bounded or any-of wait that helped could return long after its time. */
static int knit__wait_set(struct knit__set *sp, struct knit__pool *p,
                          int64_t timeout_ns, size_t *which, bool help) {
    struct knit__set set = *sp;
    size_t n = set.n;
    if (knit__set_done(&set)) {
        *which = set.which;
        return 0;
    }
    if (timeout_ns == 0) return KNIT_ETIMEDOUT;
    /* The clock is read only when needed: at once for a bounded wait, else
     * when the wait first runs out of work to help with (a nested await
     * whose child it runs itself never reads it). */
    int64_t start = timeout_ns > 0 ? knit__now_ns() : 0;
    int64_t deadline = knit__deadline(start, timeout_ns);
    knit_pool *h = p->handle;
    struct knit__tls *tls = knit__tls_get();
    /* A worker of p, unless it is running another pool's task under that
     * pool's helper id (tls->cpool): then its consumer id is not one of
     * p's, and it waits as an outside thread. */
    struct knit__worker *w = tls->worker != NULL && tls->worker->pool == p &&
                                     tls->cpool == p
                                 ? tls->worker
                                 : NULL;
    struct knit__waiter local[8];
    struct knit__waiter *recs = n <= 8 ? local : knit__malloc(n * sizeof *recs);
    if (recs == NULL)
        return knit__fail(KNIT_ENOMEM, "await: no memory for %zu waiter records",
                          n);
    int rc = KNIT_ETIMEDOUT;
    /* The timeline's await span. It starts at the first task this wait
     * runs or at its first sleep, whichever comes first, and ends at the
     * end of the last task it ran if it returns right after that task:
     * a wait that only helps (fork-join) reads no clock of its own. Spins
     * before the first task or sleep are not part of it. */
    bool tl = KNIT__TL_ON(p);
    int64_t tl_t0 = -1;
    bool tl_after_task = false; /* the last thing done was a recorded task */
    unsigned ran = 0;           /* tasks run while waiting */

    /* A consumer id to help with: a worker's own; the helper id of an
     * outside thread that is running a task (a nested await must keep
     * helping or nested fork-join could deadlock); or, for an unbounded
     * wait, a free helper id for a while. */
    unsigned consumer = UINT32_MAX;
    bool nested = tls->cpool == p && tls->current != NULL;
    bool own_id = false;
    bool entered = false;
    /* What this thread was before it took a helper id here: a task of
     * another pool, on that pool's worker or helper id; restored when the
     * id is given back, or that task would go on under ours. */
    struct knit__pool *outer_pool = tls->cpool;
    unsigned outer_consumer = tls->consumer;
    if (w != NULL || nested) {
        consumer = tls->consumer;
    } else if (help && p->await_spin_ns > 0 && knit__pool_enter(h, true) == 0) {
        entered = true;
        consumer = knit__pool_helper_acquire(p);
        if (consumer != UINT32_MAX) {
            own_id = true;
            tls->cpool = p;
            tls->consumer = consumer;
        }
    }
    /* An outside helper's time to help starts now (below). */
    if (own_id && start == 0) start = knit__now_ns();
    struct knit__producer *rec =
        consumer != UINT32_MAX ? knit__producer_get(h, p) : NULL;
    int64_t spin_end = start != 0 ? knit__deadline(start, p->await_spin_ns)
                                  : INT64_MAX; /* set with start */
    unsigned idle = 0, helped = 0;
    knit__doorbell *bell = w != NULL ? &w->bell : &tls->bell;
    /* A wait for one future runs its task here first if it is a subtask
     * nobody has started (knit__task_inline). Tried once: a task taken by
     * someone else is not given back. Not for await_any, where another
     * future could settle long before this task would end. */
    bool try_inline = n == 1 && set.g == NULL;
    for (;;) {
        if (knit__set_done(&set)) {
            rc = 0;
            break;
        }
        uint64_t tl_seen = tls->tl_tasks;
        bool can_run = consumer != UINT32_MAX && rec != NULL &&
                       tls->depth < KNIT__MAX_DEPTH;
        bool inlined = can_run && try_inline &&
                       knit__task_inline(p, set.fs[0], w, rec);
        try_inline = false;
        if (inlined || (can_run && knit__pool_run_some(p, consumer, w, rec))) {
            idle = 0;
            ran++;
            if (tl) {
                /* A task ran (not one skipped as cancelled): its times. */
                tl_after_task = tls->tl_tasks != tl_seen;
                if (tl_after_task && tl_t0 < 0) tl_t0 = tls->tl_t0;
            }
            /* An outside thread helps for await_spin_ns, also while there
             * is always work: past that, with as many workers as cores, it
             * only takes the CPU from them (a preempted worker holds up
             * everyone who waits for its tasks). */
            if (own_id && (++helped & 15) == 0 && knit__now_ns() >= spin_end)
                knit__helper_stop(p, tls, &own_id, &consumer, outer_pool,
                                  outer_consumer);
            continue;
        }
        tl_after_task = false;
        if (++idle < p->spin) {
            knit__cpu_relax();
            continue;
        }
        idle = 0;
        int64_t now = knit__now_ns();
        if (tl && tl_t0 < 0) tl_t0 = now; /* before any park it records */
        if (start == 0) {
            start = now;
            spin_end = knit__deadline(start, p->await_spin_ns);
        }
        if (now >= deadline) break;
        if (own_id && now >= spin_end)
            knit__helper_stop(p, tls, &own_id, &consumer, outer_pool, outer_consumer);
        if (entered && consumer == UINT32_MAX) {
            knit__pool_exit(h);
            entered = false;
        }
        int64_t left = deadline == INT64_MAX ? -1 : deadline - now;
        knit__doorbell_arm(bell);
        knit__waiters_link(&set, recs, bell, w != NULL);
        if (w != NULL) {
            /* A settle rings our doorbell, and so does a submit. */
            knit__pool_park(p, w, left, knit__set_done, &set);
        } else if (!knit__set_done(&set)) {
            /* A helper running a task is not woken by submits: nap and
             * look for work again. */
            if (consumer != UINT32_MAX && (left < 0 || left > 200000))
                left = 200000;
            knit__doorbell_sleep(bell, left);
        } else {
            knit__doorbell_disarm(bell);
        }
        knit__waiters_unlink(&set, recs);
    }
    if (own_id) knit__helper_stop(p, tls, &own_id, &consumer, outer_pool, outer_consumer);
    if (tl) {
        int64_t t1 = tl_after_task ? tls->tl_t1 : knit__now_ns();
        knit__tl_await(p, w, tl_t0 >= 0 ? tl_t0 : t1, t1, ran);
    }
    if (entered) knit__pool_exit(h);
    if (recs != local) free(recs);
    if (rc == 0) *which = set.which;
    return rc;
}

static int knit__wait(knit_future *const *fs, size_t n, int64_t timeout_ns,
                      size_t *which, bool help) {
    struct knit__set set = {fs, n, 0, NULL};
    return knit__wait_set(&set, fs[0]->pool, timeout_ns, which, help);
}

int knit__wait_group(struct knit_group *g, struct knit__pool *p,
                     int64_t timeout_ns) {
    struct knit__set set = {NULL, 1, 0, g};
    size_t which;
    /* As knit_await: only an unbounded wait helps from outside. */
    return knit__wait_set(&set, p, timeout_ns, &which, timeout_ns < 0);
}

static int knit__check_future(const knit_future *f, const char *what) {
    if (f == NULL) return knit__fail(KNIT_EINVAL, "%s: future is NULL", what);
    if ((atomic_load_explicit(&f->refs, memory_order_relaxed) & KNIT__REFS_USER) == 0)
        return knit__fail(KNIT_EALREADY, "%s: the future was released", what);
    return 0;
}

int knit_await(knit_future *f, int64_t timeout_ns, void **result) {
    int rc = knit__check_future(f, "knit_await");
    if (rc < 0) return rc;
    /* Settled already (the await loop after a batch of submits): no wait
     * to set up. acquire: pairs with the settle's store of DONE, which
     * releases code and result. */
    if (atomic_load_explicit(&f->state, memory_order_acquire) == KNIT__F_DONE)
        return knit__future_outcome(f, result);
    size_t which;
    rc = knit__wait(&f, 1, timeout_ns, &which, timeout_ns < 0);
    if (rc == KNIT_ENOMEM) return rc;
    if (rc != 0)
        return knit__fail(KNIT_ETIMEDOUT, "knit_await: not done after %lld ns",
                          (long long)timeout_ns);
    return knit__future_outcome(f, result);
}

int knit_await_all(knit_future *const *fs, size_t n, int64_t timeout_ns) {
    if (fs == NULL && n > 0) return knit__fail(KNIT_EINVAL, "await_all: fs is NULL");
    for (size_t i = 0; i < n; i++) {
        int rc = knit__check_future(fs[i], "knit_await_all");
        if (rc < 0) return rc;
    }
    int64_t deadline = knit__deadline(knit__now_ns(), timeout_ns);
    for (size_t i = 0; i < n; i++) {
        int64_t left = deadline == INT64_MAX ? -1 : deadline - knit__now_ns();
        if (left < 0 && deadline != INT64_MAX) left = 0;
        size_t which;
        int rc = knit__wait(&fs[i], 1, left, &which, left < 0);
        if (rc == KNIT_ENOMEM) return rc; /* message set */
        if (rc != 0)
            return knit__fail(KNIT_ETIMEDOUT,
                              "knit_await_all: future %zu of %zu not done after "
                              "%lld ns",
                              i, n, (long long)timeout_ns);
    }
    for (size_t i = 0; i < n; i++)
        if (fs[i]->code != 0) return knit__future_outcome(fs[i], NULL);
    return 0;
}

int knit_await_any(knit_future *const *fs, size_t n, int64_t timeout_ns,
                   size_t *which) {
    if (fs == NULL || n == 0)
        return knit__fail(KNIT_EINVAL, "knit_await_any: no futures");
    for (size_t i = 0; i < n; i++) {
        int rc = knit__check_future(fs[i], "knit_await_any");
        if (rc < 0) return rc;
        if (fs[i]->pool != fs[0]->pool)
            return knit__fail(KNIT_EINVAL,
                              "knit_await_any: futures %zu and 0 belong to "
                              "different pools",
                              i);
    }
    size_t w = 0;
    int rc = knit__wait(fs, n, timeout_ns, &w, false);
    if (rc == KNIT_ENOMEM) return rc; /* the waiter records; message set */
    if (rc != 0)
        return knit__fail(KNIT_ETIMEDOUT, "knit_await_any: none of %zu done after "
                          "%lld ns", n, (long long)timeout_ns);
    if (which != NULL) *which = w;
    return knit__future_outcome(fs[w], NULL);
}

bool knit_future_done(const knit_future *f) {
    return f != NULL &&
           atomic_load_explicit(&f->state, memory_order_acquire) == KNIT__F_DONE;
}

/* ---- cancel, then, release ---- */

int knit_future_cancel(knit_future *f) {
    int rc = knit__check_future(f, "knit_future_cancel");
    if (rc < 0) return rc;
    knit_pool *h = f->pool->handle;
    rc = knit__pool_enter(h, true);
    if (rc < 0) return rc;
    uint32_t expect = KNIT__F_PENDING;
    /* Winning PENDING -> RUNNING is the right to settle: the worker that
     * claims the lane later loses the same CAS and skips the task. */
    if (atomic_compare_exchange_strong_explicit(&f->state, &expect,
                                                KNIT__F_RUNNING,
                                                memory_order_acq_rel,
                                                memory_order_acquire)) {
        knit__future_settle(f, KNIT_ECANCELED, NULL, 0, NULL);
        if (f->promise) knit__promise_settled(f); /* its own reference */
        struct knit__producer *rec = knit__producer_get(h, f->pool);
        if (rec != NULL && !f->promise) knit__stat_add(&rec->cancelled, 1);
        knit__pool_exit(h);
        return 0;
    }
    knit__pool_exit(h);
    if (expect == KNIT__F_DONE)
        return knit__fail(KNIT_EALREADY, "knit_future_cancel: already settled");
    /* A promise never runs: RUNNING means a resolve, reject or destroy won
     * the CAS and is settling it right now, so it counts as settled. */
    if (f->promise)
        return knit__fail(KNIT_EALREADY,
                          "knit_future_cancel: the promise is being settled");
    /* Running: ask it to stop; it reads this with knit_task_cancelled. */
    atomic_store_explicit(&f->cancel, 1, memory_order_release);
    return knit__fail(KNIT_EBUSY, "knit_future_cancel: the task is running; "
                                  "it was asked to stop");
}

int knit_future_then(knit_future *f, knit_fn fn, void *arg, knit_future **out) {
    if (out != NULL) *out = NULL;
    int rc = knit__check_future(f, "knit_future_then");
    if (rc < 0) return rc;
    if (fn == NULL) return knit__fail(KNIT_EINVAL, "knit_future_then: fn is NULL");
    struct knit__pool *p = f->pool;
    knit_pool *h = p->handle;
    rc = knit__pool_enter(h, false);
    if (rc < 0) return rc;
    struct knit__producer *rec = knit__producer_get(h, p);
    knit_future *g = rec != NULL ? knit__future_alloc(p, rec, false) : NULL;
    if (g == NULL) {
        knit__pool_exit(h);
        return knit__fail(KNIT_ENOMEM, "knit_future_then: no memory");
    }
    g->fn = fn;
    g->arg = arg;
    g->antecedent = f;
    g->chained = true;
    atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
    /* One reference for the antecedent's list (then the lane), one for
     * the caller. */
    atomic_store_explicit(&g->refs, out != NULL ? 2 | KNIT__REFS_USER : 1,
                          memory_order_relaxed);
    knit__flock(f);
    atomic_store_explicit(&f->watched, 1, memory_order_seq_cst);
    bool done = atomic_load_explicit(&f->state, memory_order_seq_cst) ==
                KNIT__F_DONE;
    if (!done) {
        g->cont_next = f->conts;
        f->conts = g;
    }
    knit__funlock(f);
    if (out != NULL) *out = g;
    if (done) knit__continuation_schedule(g);
    knit__pool_exit(h);
    return 0;
}

int knit_future_release(knit_future *f) {
    if (f == NULL) return knit__fail(KNIT_EINVAL, "knit_future_release: NULL");
    /* Detects a second release while the runtime still holds the future;
     * once it is recycled, a stale handle is undefined behaviour. */
    const char *again = "knit_future_release: already released";
    uint32_t v = atomic_load_explicit(&f->refs, memory_order_relaxed);
    if ((v & KNIT__REFS_USER) == 0) return knit__fail(KNIT_EALREADY, "%s", again);
    knit_pool *h = f->pool->handle;
    int rc = knit__pool_enter(h, true);
    if (rc < 0) return rc;
    /* The flag and the handle's reference in one RMW; a CAS, so of two
     * racing releases one wins and the other is told. acq_rel, as
     * knit__future_unref: every use of f by other holders happens before
     * the free. */
    while (!atomic_compare_exchange_weak_explicit(&f->refs, &v, v - KNIT__REFS_USER - 1,
                                                  memory_order_acq_rel,
                                                  memory_order_relaxed))
        if ((v & KNIT__REFS_USER) == 0) {
            knit__pool_exit(h);
            return knit__fail(KNIT_EALREADY, "%s", again);
        }
    if (v == KNIT__REFS_USER + 1) knit__future_free(f);
    knit__pool_exit(h);
    return 0;
}
