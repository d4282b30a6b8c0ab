/* Submitting: per-thread producer records, their carpets, the bound on
 * pending tasks, and knit_submit.
 *
 * Each thread that submits to a pool gets a producer record on first use
 * (found again through a small thread-local map) and publishes only into
 * its own carpets, so every carpet keeps exactly one producer. When all of
 * its carpets are full it takes another one: a spare one, else a new one
 * up to the pool's registry capacity (max_pending / 32 plus slack), else
 * one taken from a thread that is not publishing (see knit__producer.hold
 * in pool.h), so a submitted task is always claimable without the
 * producer's further help and a submit never waits while idle carpets
 * exist, whoever grew them. When a thread exits, its carpets (with any
 * tasks still in flight) become spares at once and its record is adopted
 * by the next thread that registers: carpets are reused, never leaked,
 * and nothing in flight is lost.
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

#include "base/alloc.h"
#include "payload/payload.h"
#include "base/cpu.h"
#include "base/error.h"
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

/* Lanes in flight in c. Exact for the caller that holds c's producer
 * side (its owner's hold, or the pool lock for a spare carpet): host_bits
 * is then stable, and worker_bits only loses bits as lanes retire. */
static unsigned knit__carpet_in_flight(const knit_carpet *c) {
    return (unsigned)__builtin_popcount(knit_carpet_host_bits(c) ^
                                        knit_carpet_worker_bits(c));
}

/* Moves r's carpet at index i to the pool's spares (pool lock, and r held
 * by the caller or r's owner gone). The list stays dense; cur restarts. */
static void knit__carpet_give_back(struct knit__pool *p,
                                   struct knit__producer *r, uint32_t i) {
    uint32_t n = atomic_load_explicit(&r->nmine, memory_order_relaxed);
    p->spare[p->nspare++] =
        atomic_load_explicit(&r->mine[i], memory_order_relaxed);
    atomic_store_explicit(&r->mine[i],
                          atomic_load_explicit(&r->mine[n - 1],
                                               memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&r->nmine, n - 1, memory_order_relaxed);
    r->cur = 0;
}

/* Gives up a map entry's record: it stays with its pool, adoptable by the
 * next thread that registers, and its carpets go to the pool's spares at
 * once (those still carrying tasks too: workers keep claiming them). The
 * handle outlives the pool, so locking it is safe; a dead pool has freed
 * the record already. The exiting thread is the record's owner, and a
 * taker holds the pool lock, so nobody else touches its list here. */
static void knit__tls_entry_orphan(struct knit__tls_entry *e) {
    pthread_mutex_lock(&e->h->lock);
    if (atomic_load_explicit(&e->h->state, memory_order_acquire) !=
            KNIT__POOL_DEAD &&
        e->h->gen == e->gen) {
        struct knit__pool *p = e->h->p;
        struct knit__producer *r = e->rec;
        while (atomic_load_explicit(&r->nmine, memory_order_relaxed) > 0)
            knit__carpet_give_back(p, r, 0);
        r->orphaned = true;
    }
    pthread_mutex_unlock(&e->h->lock);
    e->h = NULL;
}

/* Thread exit: orphan every producer record of this thread and take its
 * entry record off the registry. */
static void knit__thread_exit(void *unused) {
    (void)unused;
    for (unsigned i = 0; i < KNIT__TLS_POOLS; i++)
        if (knit__tls_map[i].h != NULL) knit__tls_entry_orphan(&knit__tls_map[i]);
    knit__entries_unlink();
}

int knit__thread_exit_arm(void) {
    return pthread_setspecific(knit__exit_key, (void *)1);
}

static void knit__exit_key_create(void) {
    pthread_key_create(&knit__exit_key, knit__thread_exit);
}

void knit__thread_exit_hook_install(void) {
    pthread_once(&knit__exit_once, knit__exit_key_create);
}

void knit__producer_free(struct knit__producer *rec) {
    /* The carpets belong to the pool's registry, which frees them. */
    free((void *)rec->mine);
    free(rec);
}

static struct knit__producer *knit__producer_new(struct knit__pool *p) {
    struct knit__producer *rec = knit__aligned_alloc(KNIT__LINE, sizeof *rec);
    if (rec == NULL) return NULL;
    memset(rec, 0, sizeof *rec);
    rec->pool = p;
    rec->worker = -1;
    atomic_init(&rec->hold, KNIT__HOLD_FREE);
    atomic_init(&rec->nmine, 0);
    atomic_init(&rec->submitted, 0);
    atomic_init(&rec->helped, 0);
    atomic_init(&rec->cancelled, 0);
    atomic_init(&rec->skipped, 0);
    atomic_init(&rec->failed, 0);
    atomic_init(&rec->frames_stolen, 0);
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

/* Takes carpets from the records of threads that are not publishing now
 * (pool lock held; `self` is the caller's record, which it holds). First
 * pass: every empty carpet beyond a record's first KNIT__CARPET_RESERVE
 * goes back to the spares (an idle thread keeps a small reserve, not its
 * whole last burst). If that found nothing, second pass: the first carpet
 * with a free lane, reserve or not (only the one the caller needs: idle
 * threads keep the rest). A record whose owner is publishing is
 * skipped: it is not idle, and the taker never waits for an owner.
 * Returns the carpets moved. */
static unsigned knit__carpets_reclaim(struct knit__pool *p,
                                      struct knit__producer *self) {
    unsigned moved = 0;
    for (int pass = 0; pass < 2 && moved == 0; pass++) {
        for (struct knit__producer *r = p->producers; r != NULL; r = r->next) {
            if (r == self) continue;
            uint32_t free_ = KNIT__HOLD_FREE;
            /* acquire: pairs with the owner's release of hold at the end
             * of its last publish; its carpets' producer-private state
             * (shadow, host copy, discipline tail) is then ours to hand
             * on. */
            if (!atomic_compare_exchange_strong_explicit(
                    &r->hold, &free_, KNIT__HOLD_TAKER, memory_order_acquire,
                    memory_order_relaxed))
                continue;
            uint32_t keep = pass == 0 ? KNIT__CARPET_RESERVE : 0;
            for (uint32_t i = atomic_load_explicit(&r->nmine,
                                                   memory_order_relaxed);
                 i-- > keep;) {
                knit_carpet *c =
                    atomic_load_explicit(&r->mine[i], memory_order_relaxed);
                unsigned busy = knit__carpet_in_flight(c);
                if (pass == 0 ? busy == 0 : busy < KNIT_LANES) {
                    knit__carpet_give_back(p, r, i);
                    moved++;
                    if (pass == 1) break; /* the one the caller needs */
                }
            }
            /* release: pairs with the owner's acquire CAS in
             * knit__hold_enter; it sees its shorter list. */
            atomic_store_explicit(&r->hold, KNIT__HOLD_FREE,
                                  memory_order_release);
            if (pass == 1 && moved > 0) break;
        }
    }
    p->carpets_moved += moved;
    return moved;
}

/* A spare carpet with a free lane, removed from the spares (pool lock),
 * or NULL. */
static knit_carpet *knit__spare_take(struct knit__pool *p) {
    for (uint32_t i = 0; i < p->nspare; i++) {
        knit_carpet *c = p->spare[i];
        if (knit__carpet_in_flight(c) < KNIT_LANES) {
            p->spare[i] = p->spare[--p->nspare];
            return c;
        }
    }
    return NULL;
}

/* Another carpet for rec (which the caller holds) in *out: a spare one, a
 * new one while the registry has room, or (with `reclaim`) one taken from
 * an idle thread.
 * 0; KNIT_EAGAIN when every carpet in the pool is full or held by a thread
 * that is publishing (lanes free up as workers claim: wait);
 * KNIT_ENOMEM (with the message set; nothing changed). */
static int knit__carpet_take(struct knit__pool *p, struct knit__producer *rec,
                             bool reclaim, knit_carpet **out) {
    knit_pool *h = p->handle;
    knit_carpet *c = NULL;
    int rc = KNIT_EAGAIN;
    pthread_mutex_lock(&h->lock);
    uint32_t nmine = atomic_load_explicit(&rec->nmine, memory_order_relaxed);
    if (nmine == rec->capmine) {
        unsigned cap = rec->capmine ? rec->capmine * 2 : 4;
        knit_carpet *_Atomic *m = knit__realloc((void *)rec->mine,
                                                cap * sizeof *m);
        if (m == NULL) {
            rc = knit__fail(KNIT_ENOMEM, "cannot grow this thread's "
                                         "list of carpets to %u",
                            cap);
            goto out;
        }
        rec->mine = m;
        rec->capmine = cap;
    }
    c = knit__spare_take(p);
    uint32_t n = atomic_load_explicit(&p->nall, memory_order_relaxed);
    if (c == NULL && n < p->capall) {
        rc = knit__carpet_create(p->ops, &p->params, p->trace, p->trace_ctx, &c);
        if (rc < 0) {
            c = NULL;
            goto out;
        }
        atomic_store_explicit(&p->all[n], c, memory_order_relaxed);
        /* release (and seq-cst, for the parking re-check's seq-cst load of
         * nall): the entry is written before workers can see it. */
        atomic_store_explicit(&p->nall, n + 1, memory_order_seq_cst);
    }
    if (c == NULL && reclaim && knit__carpets_reclaim(p, rec) > 0)
        c = knit__spare_take(p);
    if (c != NULL) {
        atomic_store_explicit(&rec->mine[nmine], c, memory_order_relaxed);
        atomic_store_explicit(&rec->nmine, nmine + 1, memory_order_relaxed);
        rec->cur = nmine;
    }
out:
    pthread_mutex_unlock(&h->lock);
    *out = c;
    return c != NULL ? 0 : rc;
}

/* The owner takes its record's hold for a publication. It waits only while
 * a taker (under the pool lock, never waiting itself) moves carpets out. */
static void knit__hold_enter(struct knit__producer *rec) {
    uint32_t free_ = KNIT__HOLD_FREE;
    /* acquire: pairs with a taker's release of hold (knit__carpets_reclaim):
     * the list we read is the one it left. */
    while (!atomic_compare_exchange_weak_explicit(&rec->hold, &free_,
                                                  KNIT__HOLD_OWNER,
                                                  memory_order_acquire,
                                                  memory_order_relaxed)) {
        free_ = KNIT__HOLD_FREE;
        knit__cpu_relax();
    }
}

static void knit__hold_exit(struct knit__producer *rec) {
    /* release: pairs with a taker's acquire CAS: it sees the carpets'
     * producer state as this publication left it. */
    atomic_store_explicit(&rec->hold, KNIT__HOLD_FREE, memory_order_release);
}

/* Publishes t into c if it has a free lane (B1 flushed); false if full. */
static bool knit__publish_into(knit_carpet *c, const knit__lane_task *t) {
    if (knit__carpet_publish(c, t, NULL, 0) < 0) return false;
    knit__carpet_flush(c); /* B1 of the parking protocol */
    return true;
}

/* Tries rec's carpets the `from`-th to the `to`-th after `start`
 * (wrapping at n); true once t is published (rec->cur is then its
 * carpet). */
static bool knit__publish_mine(struct knit__producer *rec, const knit__lane_task *t,
                               uint32_t n, uint32_t start, uint32_t from, uint32_t to) {
    for (uint32_t k = from; k < to; k++) {
        uint32_t i = start + k < n ? start + k : start + k - n; /* start < n */
        if (knit__publish_into(atomic_load_explicit(&rec->mine[i], memory_order_relaxed), t)) {
            rec->cur = i;
            return true;
        }
    }
    return false;
}

/* Finding a free lane. The thread's carpets are tried in turn from the
 * one it published into last, but only KNIT__PROBES of them before it
 * takes a spare carpet or grows the registry: a carpet it filled after
 * the current one is still full unless the workers drained it, and every
 * probe of a full carpet costs two cache misses (its producer line and
 * its worker_bits). Walking them all before each new carpet made growing
 * to N carpets cost N^2 / 2 probes, and at the registry's capacity, with
 * four threads submitting, four probes of a full carpet per task. Only
 * when no spare is left and the registry is full (or memory runs out)
 * does it try the rest of its own and then take from idle threads
 * (knit__carpets_reclaim), as before: a submit still never waits while a
 * free lane exists in a carpet it can have. */
static int knit__publish_held(struct knit__pool *p, struct knit__producer *rec,
                              const knit__lane_task *t) {
    uint32_t n = atomic_load_explicit(&rec->nmine, memory_order_relaxed);
    uint32_t start = rec->cur < n ? rec->cur : 0;
    uint32_t tried = n < KNIT__PROBES ? n : KNIT__PROBES;
    if (knit__publish_mine(rec, t, n, start, 0, tried)) return 0;
    knit_carpet *c;
    int rc;
    if (tried < n) {
        rc = knit__carpet_take(p, rec, false, &c);
        /* A spare or new carpet has a free lane. Else (none to be had, or
         * no memory for one) the rest of ours may; if they do not, a
         * failed allocation is the submit's ENOMEM (message set), as it
         * was before the walk was bounded, not a second try. */
        if (rc == 0) return knit__publish_into(c, t) ? 0 : KNIT_EAGAIN;
        if (knit__publish_mine(rec, t, n, start, tried, n)) return 0;
        if (rc == KNIT_ENOMEM) return rc;
    }
    rc = knit__carpet_take(p, rec, true, &c);
    if (rc < 0) return rc;
    return knit__publish_into(c, t) ? 0 : KNIT_EAGAIN; /* a taken carpet has a free lane */
}

int knit__publish(struct knit__pool *p, struct knit__producer *rec,
                  const knit__lane_task *t) {
    knit__hold_enter(rec);
    int rc = knit__publish_held(p, rec, t);
    knit__hold_exit(rec);
    if (rc == 0) knit__pool_notify_published(p);
    return rc;
}

/* A future's lane: the future carries fn and arg. */
static void knit__future_lane(knit__lane_task *t, knit_future *f) {
    memset(t, 0, sizeof *t);
    t->future = f;
}

/* A group member's lane, with no record: fn, arg and the group travel in
 * the slot, and the claimer makes the record from its own cache
 * (knit__member_record in pool.c). The submitter writes no line but the
 * slot's, and the worker reads none but the slot's and its own. */
static void knit__member_lane(knit__lane_task *t, knit_fn fn, void *arg,
                              struct knit_group *g) {
    memset(t, 0, sizeof *t);
    static_assert(sizeof fn == sizeof t->fn, "a task function fits the slot's fn");
    memcpy(&t->fn, &fn, sizeof fn);
    t->arg = arg;
    t->user[0] = (uint64_t)(uintptr_t)g;
}

/* Waits a little for room under max_pending or (`carpet`) for a carpet
 * with a free lane: a task helps (runs claimable tasks); an outside thread
 * sleeps until claims took pending down to the low-water mark, or (a lane
 * waiter) until any claim (knit__space_notify rings space_seq), at most
 * 1 ms, so space that appears without a claim (an exiting thread's
 * carpets) is found too. */
static void knit__space_wait(struct knit__pool *p, struct knit__producer *rec,
                             bool carpet) {
    struct knit__tls *tls = knit__tls_get();
    if (tls->worker != NULL && tls->worker->pool == p) {
        if (!knit__pool_run_some(p, tls->worker->id, tls->worker, rec))
            sched_yield();
        return;
    }
    uint32_t seq = atomic_load_explicit(&p->space_seq, memory_order_acquire);
    /* seq-cst RMWs then seq-cst load: pair with knit__space_notify's loads
     * after its counts RMW (a lane waiter is counted before it is a
     * waiter, so a claimer that sees it as a waiter sees it as both). */
    if (carpet) atomic_fetch_add_explicit(&p->lane_waiters, 1, memory_order_seq_cst);
    atomic_fetch_add_explicit(&p->space_waiters, 1, memory_order_seq_cst);
    /* A destroy that stored its state and rang space_seq before our load
     * of seq above is seen here (acquire: the load of seq read its ring,
     * which the state store precedes), so we do not sleep through its
     * wake-up until the timeout: pending may still look full, held up by
     * other submitters' units that they are about to undo. The caller
     * then finds the state in knit__pending_acquire. (A lane waiter
     * holds a task that was accepted: it waits on while the pool drains.) */
    bool stopping = !carpet && atomic_load_explicit(&p->handle->state,
                                                    memory_order_acquire) !=
                                   KNIT__POOL_LIVE;
    if (!stopping &&
        (carpet ||
         KNIT__PENDING(atomic_load_explicit(&p->counts, memory_order_seq_cst)) >=
             (int64_t)p->max_pending)) {
        struct timespec ts = {0, 1000000}; /* bounded: re-check state */
        syscall(SYS_futex, (uint32_t *)&p->space_seq, FUTEX_WAIT_PRIVATE, seq,
                &ts, NULL, 0);
    } else if (!stopping) {
        sched_yield();
    }
    atomic_fetch_sub_explicit(&p->space_waiters, 1, memory_order_relaxed);
    if (carpet) atomic_fetch_sub_explicit(&p->lane_waiters, 1, memory_order_relaxed);
}

static void knit__pending_undo(struct knit__pool *p) {
    atomic_fetch_sub_explicit(&p->counts, KNIT__TASK_UNIT,
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

/* KNIT_CALLER_RUNS: what a submit returns internally when the submitting
 * thread is to run the task itself; the task is then counted as live but
 * not as pending. */
#define KNIT__RUN_HERE 1

/* A consumer id under which this thread may run a task of p now
 * (KNIT_CALLER_RUNS): its own inside one of p's tasks, else a free helper
 * id (*helper set: give it back), else UINT32_MAX. */
static unsigned knit__caller_id(struct knit__pool *p, bool *helper) {
    struct knit__tls *tls = knit__tls_get();
    *helper = false;
    if (tls->cpool == p && tls->current != NULL)
        return tls->depth < KNIT__MAX_DEPTH ? tls->consumer : UINT32_MAX;
    unsigned id = knit__pool_helper_acquire(p);
    *helper = id != UINT32_MAX;
    return id;
}

/* Counts one more pending and live task, waiting or failing at the bound.
 * Undo with knit__pending_undo. With `run` (KNIT_CALLER_RUNS submits
 * only): at the bound, KNIT__RUN_HERE with *run a consumer id for the
 * caller to run the task under, counted as live only.
 *
 * Credits (runtime/entry.c): a thread inside h through an entry slot
 * takes units from counts K at a time (p->credit_k) and keeps those it has
 * not used in its slot, so most submits pay no RMW here. The caller has
 * checked the state (acquire) after it entered, and a credit is a unit
 * counts already holds, so destroy waits for it: no Dekker pair is needed
 * to use one. Credits are taken only while pending (credits included)
 * stays at or below half the bound, so all of them together never pass
 * max_pending / 2 and at least half of the bound is left to real tasks;
 * above that, submits count one unit each, as without credits. Any room
 * check at or below the bound keeps it live (credits alone never fill it,
 * so a submitter waiting there waits for a real task, which a worker
 * claims; tests/model/submit_credits.pml); the half rule also keeps the
 * wake-up prompt: all credits together stay under space_low (7/8 of the
 * bound), so the claims of the real tasks cross it and ring the waiter
 * (knit__space_notify), rather than its 1 ms timeout. */
static int knit__pending_acquire(knit_pool *h, struct knit__pool *p,
                                 struct knit__producer *rec, bool bypass,
                                 unsigned *run, bool *helper) {
    if (!bypass && knit__credit_use(h)) return 0;
    bool reclaimed = false;
    for (;;) {
        unsigned k = bypass ? 1 : knit__credit_units(h, p->credit_k);
        /* seq-cst RMW, then the seq-cst load of state below: pairs with
         * destroy's seq-cst store of state followed by its seq-cst load of
         * counts (knit__pool_quiescent). Either destroy sees these units
         * as live and waits for them, or we see the pool stopping and
         * undo. */
        uint64_t c = atomic_fetch_add_explicit(&p->counts, k * KNIT__TASK_UNIT,
                                               memory_order_seq_cst);
        int64_t n = KNIT__PENDING(c);
        int64_t half = (int64_t)(p->max_pending / 2);
        unsigned keep = 0;
        if (k > 1) {
            if (n + (int64_t)k <= half) {
                keep = k - 1;
            } else {
                /* Over half the bound: one unit, exact (relaxed, as an
                 * undo). */
                atomic_fetch_sub_explicit(&p->counts, (k - 1) * KNIT__TASK_UNIT,
                                          memory_order_relaxed);
            }
        }
        bool here = false;
        if (!bypass && n >= (int64_t)p->max_pending && p->credit_k > 1 && !reclaimed) {
            /* At the bound: take back the credits of threads that are not
             * inside a call (they may never call again), then look
             * again. */
            reclaimed = true;
            if (knit__entries_revoke(h) > 0) {
                knit__pending_undo(p);
                continue;
            }
        }
        if (!bypass && n >= (int64_t)p->max_pending && run != NULL &&
            p->backpressure == KNIT_CALLER_RUNS) {
            *run = knit__caller_id(p, helper);
            here = *run != UINT32_MAX;
        }
        if (bypass || here || n < (int64_t)p->max_pending) {
            if (!bypass) {
                struct knit__tls *tls = knit__tls_get();
                bool own = tls->worker != NULL && tls->worker->pool == p;
                uint32_t st = atomic_load_explicit(&h->state, memory_order_seq_cst);
                if (st != KNIT__POOL_LIVE && !own) {
                    /* relaxed, as an undo */
                    atomic_fetch_sub_explicit(&p->counts,
                                              (keep + 1) * KNIT__TASK_UNIT,
                                              memory_order_relaxed);
                    if (here && *helper) knit__pool_helper_release(p, *run);
                    return knit__fail(KNIT_ESHUTDOWN, "the pool is shutting down");
                }
                if (p->credit_k > 1)
                    knit__credit_keep(h, keep, n + (int64_t)p->credit_k <= half);
            }
            if (here) {
                /* Runs here: it never waits for a claim (relaxed, as the
                 * claim's own subtraction of started tasks). */
                atomic_fetch_sub_explicit(&p->counts, 1, memory_order_relaxed);
                return KNIT__RUN_HERE;
            }
            knit__pending_high(p, n + 1 + keep);
            return 0;
        }
        knit__pending_undo(p);
        if (p->credit_k > 1) knit__credit_keep(h, 0, false);
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
        knit__space_wait(p, rec, false);
        reclaimed = false;
    }
}

/* Publishes lane t (a future's, fn/arg set, or a member's), already
 * counted by knit__pending_acquire.
 * With no carpet to be had: KNIT_EAGAIN under KNIT_FAIL, unless `bypass`
 * (a continuation, which must run); under KNIT_CALLER_RUNS (with `run`)
 * KNIT__RUN_HERE as knit__pending_acquire; else waits for lanes to free
 * up. */
static int knit__enqueue(knit_pool *h, struct knit__pool *p,
                         struct knit__producer *rec, const knit__lane_task *t,
                         bool bypass, unsigned *run, bool *helper) {
    for (;;) {
        int rc = knit__publish(p, rec, t);
        if (rc == 0) break;
        if (rc == KNIT_ENOMEM) { /* a new carpet was needed: message set */
            knit__pending_undo(p);
            return rc;
        }
        if (p->backpressure == KNIT_FAIL && !bypass) {
            knit__pending_undo(p);
            return knit__fail(KNIT_EAGAIN,
                              "all %u carpets have every lane in flight or "
                              "belong to threads that are submitting "
                              "(backpressure KNIT_FAIL)",
                              p->capall);
        }
        uint32_t st = atomic_load_explicit(&h->state, memory_order_acquire);
        if (st >= KNIT__POOL_STOPPING) {
            knit__pending_undo(p);
            return knit__fail(KNIT_ESHUTDOWN, "the pool is shutting down");
        }
        if (run != NULL && p->backpressure == KNIT_CALLER_RUNS) {
            *run = knit__caller_id(p, helper);
            if (*run != UINT32_MAX) {
                /* Not pending any more: it runs here (relaxed, as the
                 * claim's subtraction). */
                atomic_fetch_sub_explicit(&p->counts, 1, memory_order_relaxed);
                return KNIT__RUN_HERE;
            }
        }
        knit__space_wait(p, rec, true);
    }
    knit__stat_add(&rec->submitted, 1);
    return 0;
}

/* KNIT_CALLER_RUNS: runs f (counted as live, not pending) on this thread
 * under consumer id `id`, as a helper would; its future settles and its
 * continuations are scheduled as if a worker had run it. */
static void knit__run_here(struct knit__pool *p, struct knit__producer *rec,
                           knit_future *f, unsigned id, bool helper) {
    struct knit__tls *tls = knit__tls_get();
    struct knit__pool *cpool = tls->cpool; /* another pool's, maybe */
    unsigned consumer = tls->consumer;
    tls->cpool = p;
    tls->consumer = id;
    struct knit__worker *w =
        tls->worker != NULL && tls->worker->pool == p ? tls->worker : NULL;
    knit__stat_add(&rec->submitted, 1);
    knit__task_run(p, f, w, rec);
    tls->cpool = cpool;
    tls->consumer = consumer;
    if (helper) knit__pool_helper_release(p, id);
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

/* Whether a submit with pl carries an input (its future is then a
 * struct knit__future_in); pl may only carry flags. */
static bool knit__payload_carried(const struct knit__submit_payload *pl) {
    return pl != NULL && (pl->bytes != NULL || pl->buf != NULL || pl->kind != KNIT__PAY_NONE);
}

/* Fills a fresh future: task, references, and the payload it carries. */
static void knit__future_setup(knit_future *f, knit_fn fn, void *arg,
                               const struct knit__submit_payload *pl,
                               bool user) {
    f->fn = fn;
    f->arg = arg;
    atomic_store_explicit(&f->refs, user ? 2 | KNIT__REFS_USER : 1, memory_order_relaxed);
    if (pl == NULL) return;
    f->always_run = pl->always_run;
    if (!knit__payload_carried(pl)) return; /* flags only, no payload */
    struct knit__future_in *fi = knit__fin(f);
    if (pl->buf != NULL) {
        fi->in = *pl->buf;
    } else {
        if (pl->len) memcpy(fi->inline_data, pl->bytes, pl->len);
        fi->in.data = fi->inline_data;
        fi->in.len = pl->len;
    }
    f->in_kind = pl->kind;
    f->arg = fi->in.data; /* a payload task's arg is its bytes */
}

/* Undoes a setup whose submit failed: the caller keeps its buffer. */
static void knit__future_discard(knit_future *f, struct knit__producer *rec) {
    if (f->with_in) memset(&knit__fin(f)->in, 0, sizeof knit__fin(f)->in);
    f->in_kind = KNIT__PAY_NONE;
    knit__future_free_unused(f, rec);
}

/* A submit: a future's task (with payload pl, or none), or a member of
 * group g (no future: out is NULL). */
static int knit__submit_task(knit_pool *h, knit_fn fn, void *arg,
                             const struct knit__submit_payload *pl,
                             struct knit_group *g, knit_future **out) {
    if (out != NULL) *out = NULL;
    if (fn == NULL) return knit__fail(KNIT_EINVAL, "task function is NULL");
    bool with_in = knit__payload_carried(pl);
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
        knit_future *f = knit__future_alloc(p, rec, with_in);
        if (f == NULL) {
            knit__pool_exit(h);
            return knit__fail(KNIT_ENOMEM, "cannot allocate a future");
        }
        knit__future_setup(f, fn, arg, pl, out != NULL);
        f->group = g;
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
    unsigned run = UINT32_MAX;
    bool helper = false;
    rc = knit__pending_acquire(h, p, rec, false, &run, &helper);
    if (rc < 0) {
        knit__pool_exit(h);
        return rc;
    }
    if (g != NULL && pl == NULL && rc != KNIT__RUN_HERE) {
        knit__lane_task t;
        knit__member_lane(&t, fn, arg, g);
        rc = knit__enqueue(h, p, rec, &t, false, &run, &helper);
        if (rc != KNIT__RUN_HERE) { /* published, or failed and undone */
            knit__pool_exit(h);
            return rc < 0 ? rc : 0;
        }
        /* KNIT_CALLER_RUNS with every carpet full: it runs here, with a
         * record, as below. */
    }
    knit_future *f = knit__future_alloc(p, rec, with_in);
    if (f == NULL) {
        if (rc == KNIT__RUN_HERE) {
            /* relaxed, as the undo of a count: nothing was published. */
            atomic_fetch_sub_explicit(&p->counts, KNIT__LIVE_ONE,
                                      memory_order_relaxed);
            if (helper) knit__pool_helper_release(p, run);
        } else {
            knit__pending_undo(p);
        }
        knit__pool_exit(h);
        return knit__fail(KNIT_ENOMEM, "cannot allocate a future");
    }
    knit__future_setup(f, fn, arg, pl, out != NULL);
    f->group = g;
    if (rc != KNIT__RUN_HERE) {
        knit__lane_task t;
        knit__future_lane(&t, f);
        rc = knit__enqueue(h, p, rec, &t, false, &run, &helper);
    }
    if (rc < 0) {
        knit__future_discard(f, rec);
        knit__pool_exit(h);
        return rc;
    }
    if (out != NULL) *out = f;
    if (rc == KNIT__RUN_HERE) knit__run_here(p, rec, f, run, helper);
    knit__pool_exit(h);
    return 0;
}

int knit__submit(knit_pool *h, knit_fn fn, void *arg,
                 const struct knit__submit_payload *pl, knit_future **out) {
    return knit__submit_task(h, fn, arg, pl, NULL, out);
}

int knit__submit_member(struct knit_group *g, knit_fn fn, void *arg) {
    return knit__submit_task(g->pool, fn, arg, NULL, g, NULL);
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
        knit__pending_acquire(h, p, rec, true, NULL, NULL);
        knit__lane_task t;
        knit__future_lane(&t, g);
        rc = knit__enqueue(h, p, rec, &t, true, NULL, NULL); /* ENOMEM or
                                                               ESHUTDOWN, undone */
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
