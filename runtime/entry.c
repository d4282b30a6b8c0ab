/* Entering a pool: how a public call keeps the pool alive while it runs.
 *
 * Every public entry point that touches a pool enters it first
 * (knit__pool_enter) and leaves it last (knit__pool_exit);
 * knit_pool_destroy moves the state to DEAD and then waits until no thread
 * is inside before it frees anything.
 *
 * A thread says it is inside by storing the handle into one of its own
 * entry slots (a per-thread record on a line only that thread writes) and
 * then re-checking the state: a seq-cst store, then a seq-cst load.
 * destroy stores the state (seq-cst) and then loads every thread's slots
 * (seq-cst), under the registry lock that keeps records from going away.
 * A Dekker pair (tests/model/pool_enter.pml): either the thread sees DEAD
 * and backs out, or destroy sees the slot and waits until the thread
 * clears it with a release store, which destroy's seq-cst load acquires,
 * so everything the call did happens before the free.
 *
 * So a submit, an await or a release from outside the pool pays no shared
 * read-modify-write to get in and out: before, every one of them added to
 * and subtracted from the handle's `users`, one line that every
 * submitting and awaiting thread bounced between the cores.
 *
 * A nested call into a pool the thread is already inside reuses its slot
 * (a depth count; the pool cannot go away meanwhile). A thread inside more
 * than KNIT__ENTRY_SLOTS pools at once counts the further ones in the
 * handle's `users` (an RMW), which destroy waits for as well. Inside one
 * of the pool's own tasks the pool cannot go away (destroy waits for every
 * task to settle), so entering and leaving cost nothing there.
 *
 * A thread's record is linked into the registry on its first entry and
 * unlinked when the thread exits (knit__thread_exit), under the registry
 * lock.
 *
 * Submit credits. A slot is one word {handle, INSIDE, credits}: the
 * handle is line-aligned, so its 6 low bits hold the INSIDE bit (a call
 * is under way) and up to 31 credits. A credit is one unit (1 pending + 1
 * live task) that this thread added to the pool's `counts` and has not
 * used for a task yet: with max_pending >= 2048 a submit that has none
 * takes 32 units in one RMW and keeps 31 (runtime/submit.c,
 * knit__pending_acquire), so 31 of 32 submits pay no RMW on `counts`, the
 * line every claim and every other submitter writes. When the call ends
 * with credits left and the pool LIVE, the slot keeps them and the handle
 * with INSIDE clear ("sticky"); the next call enters it with a seq-cst
 * CAS, which replaces the seq-cst store of a free slot (same cost, same
 * Dekker pair with destroy).
 *
 * The rule that keeps it cheap: only the owner writes a slot whose INSIDE
 * bit is set, so using a credit, keeping a refill and leaving are plain
 * stores; anyone else only CASes a sticky slot (INSIDE clear) to empty and
 * subtracts its credits from `counts` (knit__slot_revoke). That happens:
 *   - at destroy, in every round of its wait for the tasks to settle,
 *     from its store of DRAINING or CANCELLING on (threads that never
 *     call again would otherwise keep their units for ever); a thread
 *     inside gives its credits back itself when it leaves, as the pool is
 *     no longer LIVE;
 *   - at the bound: a submitter about to wait or fail takes back idle
 *     threads' credits first and looks again;
 *   - when a thread whose four slots are all sticky enters a fifth pool
 *     (eviction), and when a thread exits (knit__entries_unlink).
 * An owner's CAS that fails lost to a revoke: the slot is empty, the
 * credits are gone with it, and it enters afresh. The pool of a sticky
 * slot cannot be freed meanwhile: its units are in `counts`, and destroy
 * waits until `counts` holds none (knit__pool_quiescent).
 *
 * Credits are handed out only while pending (credits included) stays at
 * or below max_pending / 2: all credits together never pass half the
 * bound, which is left to real tasks whoever holds credits, and credits
 * stay under space_low, so the claims that drain the real tasks ring a
 * submitter waiting at the bound (credits alone can never fill it, so it
 * always waits for a real task, which a worker claims). What users see: a
 * submit may wait (or fail under KNIT_FAIL) with up to 31 fewer tasks
 * pending per other thread that is inside a call into the pool (idle
 * threads' credits are taken back at the bound); below 2048 nothing
 * changes. stats.pending leaves unused credits out (knit__entries_credits);
 * stats.pending_high counts them (it is the highest pending seen by a
 * refill). Modelled in tests/model/submit_credits.pml.
 */
#include <assert.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdbool.h>

#include "base/error.h"
#include "runtime/pool.h"

#define KNIT__ENTRY_SLOTS 4

/* A slot word: the handle (line-aligned, so its low 6 bits are free), the
 * INSIDE bit, and the credits (see the top of this file). */
#define KNIT__SLOT_INSIDE ((uintptr_t)32)
#define KNIT__SLOT_CREDITS ((uintptr_t)31)
#define KNIT__SLOT_LOW (KNIT__SLOT_INSIDE | KNIT__SLOT_CREDITS)
static_assert(KNIT__LINE > KNIT__SLOT_LOW, "a line-aligned handle leaves the slot's low bits free");
static_assert(KNIT__CREDITS_MAX - 1 <= KNIT__SLOT_CREDITS, "a refill keeps K - 1 credits in the slot");

struct knit__entries {
    /* Written by the owner while INSIDE is set, else by whoever CASes it
     * (the owner's enter, a revoke); read by destroy (seq-cst). */
    alignas(KNIT__LINE) _Atomic uintptr_t slot[KNIT__ENTRY_SLOTS];
    unsigned depth[KNIT__ENTRY_SLOTS]; /* calls inside slot[i] (owner only) */
    bool narrow[KNIT__ENTRY_SLOTS];    /* refill one unit, not K (owner) */
    unsigned last;                     /* the slot entered last: a hint (owner) */
    bool linked;                       /* on the registry (owner, lock) */
    bool exited;                       /* unlinked at thread exit: never again */
    struct knit__entries *prev, *next; /* the registry (lock) */
};

static _Thread_local struct knit__entries knit__my_entries;
static pthread_mutex_t knit__entries_lock = PTHREAD_MUTEX_INITIALIZER;
static struct knit__entries *knit__entries_head;

static inline knit_pool *knit__slot_pool(uintptr_t v) {
    return (knit_pool *)(v & ~KNIT__SLOT_LOW);
}

static inline unsigned knit__slot_credits(uintptr_t v) {
    return (unsigned)(v & KNIT__SLOT_CREDITS);
}

/* Inside one of the pool's own tasks (see the top of this file). The test
 * is the same in enter and exit, and tls->current is restored after any
 * task nested in between. */
static inline bool knit__inside_own_task(const knit_pool *h) {
    const knit_task *cur = knit__tls_get()->current;
    return cur != NULL && cur->pool->handle == h;
}

/* The index of this thread's slot that holds h (NULL: a free one), or
 * KNIT__ENTRY_SLOTS. Relaxed: a slot of this thread changes under it only
 * from sticky to empty (a revoke), which the owner's CAS on entering
 * finds out. */
static unsigned knit__slot_find(const struct knit__entries *e, const knit_pool *h) {
    for (unsigned i = 0; i < KNIT__ENTRY_SLOTS; i++)
        if (knit__slot_pool(atomic_load_explicit(&e->slot[i], memory_order_relaxed)) == h)
            return i;
    return KNIT__ENTRY_SLOTS;
}

/* The index of this thread's slot of h it is inside through (depth > 0),
 * or KNIT__ENTRY_SLOTS. The slot entered last is tried first: a submit
 * asks up to three times (knit__credit_use, _units, _keep) right after
 * its enter. */
static unsigned knit__slot_inside_index(const knit_pool *h) {
    const struct knit__entries *e = &knit__my_entries;
    unsigned j = e->last;
    if (e->depth[j] > 0 &&
        knit__slot_pool(atomic_load_explicit(&e->slot[j], memory_order_relaxed)) == h)
        return j;
    for (unsigned i = 0; i < KNIT__ENTRY_SLOTS; i++)
        if (e->depth[i] > 0 &&
            knit__slot_pool(atomic_load_explicit(&e->slot[i], memory_order_relaxed)) == h)
            return i;
    return KNIT__ENTRY_SLOTS;
}

/* Gives n credits of h back to its counts. h's pool is alive: destroy
 * waits until counts holds no unit (knit__pool_quiescent). relaxed: a
 * count, as knit__pending_undo; destroy's seq-cst load of counts reads
 * it in its modification order. */
static void knit__credits_give_back(knit_pool *h, unsigned n) {
    if (n > 0)
        atomic_fetch_sub_explicit(&h->p->counts, n * KNIT__TASK_UNIT,
                                  memory_order_relaxed);
}

/* Empties slot *s if it is sticky (INSIDE clear, credits > 0) and of `of`
 * (NULL: any pool), returning its credits to their pool. Anyone may call
 * it for any thread's slot (the registry lock keeps other threads'
 * records alive). acq_rel CAS: the acquire pairs with the owner's release
 * store at its exit (what its calls did happens before the credits go);
 * a CAS that fails lost to the owner's enter (INSIDE set) or to another
 * revoke. Returns the credits taken. */
static unsigned knit__slot_revoke(_Atomic uintptr_t *s, const knit_pool *of) {
    uintptr_t v = atomic_load_explicit(s, memory_order_relaxed);
    if ((v & KNIT__SLOT_INSIDE) != 0 || knit__slot_credits(v) == 0 ||
        (of != NULL && knit__slot_pool(v) != of))
        return 0;
    if (!atomic_compare_exchange_strong_explicit(s, &v, 0, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return 0;
    knit__credits_give_back(knit__slot_pool(v), knit__slot_credits(v));
    return knit__slot_credits(v);
}

/* Links this thread's record: false when it must not be (the thread is
 * exiting, or its exit hook cannot be armed, so nothing would unlink the
 * record before its memory goes): the caller counts itself in `users`. */
static bool knit__entries_link(struct knit__entries *e) {
    if (e->exited || knit__thread_exit_arm() != 0) return false;
    pthread_mutex_lock(&knit__entries_lock);
    e->prev = NULL;
    e->next = knit__entries_head;
    if (knit__entries_head != NULL) knit__entries_head->prev = e;
    knit__entries_head = e;
    e->linked = true;
    pthread_mutex_unlock(&knit__entries_lock);
    return true;
}

void knit__entries_unlink(void) {
    struct knit__entries *e = &knit__my_entries;
    /* A later thread-exit destructor that calls knit must not link the
     * record again: its memory goes with the thread. */
    e->exited = true;
    if (!e->linked) return;
    pthread_mutex_lock(&knit__entries_lock);
    /* Sticky slots give their credits back (a revoke may win the race:
     * then it did). */
    for (unsigned i = 0; i < KNIT__ENTRY_SLOTS; i++) (void)knit__slot_revoke(&e->slot[i], NULL);
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        knit__entries_head = e->next;
    if (e->next != NULL) e->next->prev = e->prev;
    e->linked = false;
    pthread_mutex_unlock(&knit__entries_lock);
}

static int knit__enter_refused(uint32_t st) {
    return knit__fail(KNIT_ESHUTDOWN, "the pool is %s",
                      st == KNIT__POOL_DEAD ? "destroyed" : "shutting down");
}

static bool knit__enter_allowed(uint32_t st, bool any) {
    return any ? st != KNIT__POOL_DEAD
               : (st == KNIT__POOL_LIVE || st == KNIT__POOL_DRAINING ||
                  st == KNIT__POOL_CANCELLING);
}

/* The overflow path: more pools at once than slots. */
static int knit__enter_counted(knit_pool *h, bool any) {
    /* seq-cst RMW then seq-cst load: pairs with destroy's seq-cst state
     * store followed by its seq-cst loads of `users`. */
    atomic_fetch_add_explicit(&h->users, 1, memory_order_seq_cst);
    uint32_t st = atomic_load_explicit(&h->state, memory_order_seq_cst);
    if (!knit__enter_allowed(st, any)) {
        atomic_fetch_sub_explicit(&h->users, 1, memory_order_release);
        return knit__enter_refused(st);
    }
    return 0;
}

/* A slot for a new entry: a free one, else a sticky one emptied (its
 * credits go back to its pool), else KNIT__ENTRY_SLOTS. */
static unsigned knit__slot_free(struct knit__entries *e) {
    unsigned i = knit__slot_find(e, NULL);
    if (i < KNIT__ENTRY_SLOTS) return i;
    for (i = 0; i < KNIT__ENTRY_SLOTS; i++)
        if (e->depth[i] == 0) {
            /* Sticky (not inside): empty it; a failed revoke means a
             * destroy or a reclaim emptied it first. */
            (void)knit__slot_revoke(&e->slot[i], NULL);
            if (atomic_load_explicit(&e->slot[i], memory_order_relaxed) == 0) return i;
        }
    return KNIT__ENTRY_SLOTS;
}

int knit__pool_enter(knit_pool *h, bool any) {
    if (h == NULL) return knit__fail(KNIT_EINVAL, "pool is NULL");
    if (knit__inside_own_task(h)) return 0;
    struct knit__entries *e = &knit__my_entries;
    unsigned i = knit__slot_find(e, h);
    if (i < KNIT__ENTRY_SLOTS && e->depth[i] > 0) {
        /* Already inside: the pool cannot be freed under us; only the
         * state decides (acquire: as any state read). */
        uint32_t st = atomic_load_explicit(&h->state, memory_order_acquire);
        if (!knit__enter_allowed(st, any)) return knit__enter_refused(st);
        e->depth[i]++;
        e->last = i;
        return 0;
    }
    if (i < KNIT__ENTRY_SLOTS) {
        /* Sticky: our credits are in it. seq-cst CAS then seq-cst load:
         * the same Dekker pair as the store below; the CAS fails only if
         * a revoke emptied the slot (then the credits went with it). */
        uintptr_t v = atomic_load_explicit(&e->slot[i], memory_order_relaxed);
        if (knit__slot_pool(v) == h && /* not emptied since the find */
            atomic_compare_exchange_strong_explicit(&e->slot[i], &v, v | KNIT__SLOT_INSIDE,
                                                    memory_order_seq_cst,
                                                    memory_order_relaxed)) {
            uint32_t st = atomic_load_explicit(&h->state, memory_order_seq_cst);
            if (!knit__enter_allowed(st, any)) {
                /* The owner's slot while INSIDE: plain stores. release:
                 * pairs with destroy's seq-cst loads of the slots. */
                knit__credits_give_back(h, knit__slot_credits(v));
                atomic_store_explicit(&e->slot[i], 0, memory_order_release);
                return knit__enter_refused(st);
            }
            e->depth[i] = 1;
            e->last = i;
            return 0;
        }
        /* Emptied by a revoke: enter afresh through it. */
    } else {
        if (!e->linked && !knit__entries_link(e)) return knit__enter_counted(h, any);
        i = knit__slot_free(e);
        if (i == KNIT__ENTRY_SLOTS) return knit__enter_counted(h, any);
    }
    /* seq-cst store then seq-cst load: pairs with destroy's seq-cst state
     * store followed by its seq-cst loads of the slots
     * (knit__entries_wait_out). */
    atomic_store_explicit(&e->slot[i], (uintptr_t)h | KNIT__SLOT_INSIDE, memory_order_seq_cst);
    uint32_t st = atomic_load_explicit(&h->state, memory_order_seq_cst);
    if (!knit__enter_allowed(st, any)) {
        atomic_store_explicit(&e->slot[i], 0, memory_order_release);
        return knit__enter_refused(st);
    }
    e->depth[i] = 1;
    e->narrow[i] = false;
    e->last = i;
    return 0;
}

void knit__pool_exit(knit_pool *h) {
    if (knit__inside_own_task(h)) return;
    struct knit__entries *e = &knit__my_entries;
    unsigned i = knit__slot_find(e, h);
    if (i < KNIT__ENTRY_SLOTS && e->depth[i] > 0) {
        if (--e->depth[i] == 0) {
            uintptr_t v = atomic_load_explicit(&e->slot[i], memory_order_relaxed);
            unsigned c = knit__slot_credits(v);
            /* Credits stay (sticky) only while the pool is LIVE: a
             * stopping pool gets them back here rather than from destroy's
             * revoke. acquire: as any state read. */
            if (c > 0 &&
                atomic_load_explicit(&h->state, memory_order_acquire) != KNIT__POOL_LIVE) {
                knit__credits_give_back(h, c);
                c = 0;
            }
            /* release: what this call did to the pool happens before
             * destroy (seq-cst load of the slot) frees it, or before a
             * revoke (acquire CAS) returns the credits. */
            atomic_store_explicit(&e->slot[i], c > 0 ? (uintptr_t)h | c : 0,
                                  memory_order_release);
        }
        return;
    }
    /* release: as above, for destroy's seq-cst loads of `users`. */
    atomic_fetch_sub_explicit(&h->users, 1, memory_order_release);
}

/* ---- credits ---- */

bool knit__credit_use(const knit_pool *h) {
    unsigned i = knit__slot_inside_index(h);
    if (i == KNIT__ENTRY_SLOTS) return false;
    _Atomic uintptr_t *s = &knit__my_entries.slot[i];
    uintptr_t v = atomic_load_explicit(s, memory_order_relaxed);
    if (knit__slot_credits(v) == 0) return false;
    /* The owner's slot while INSIDE: nobody else writes it (relaxed: the
     * unit is already counted, and the exit's release store publishes). */
    atomic_store_explicit(s, v - 1, memory_order_relaxed);
    return true;
}

unsigned knit__credit_units(const knit_pool *h, unsigned k) {
    if (k <= 1) return 1;
    unsigned i = knit__slot_inside_index(h);
    if (i == KNIT__ENTRY_SLOTS) return 1; /* no slot (overflow): no credits */
    return knit__my_entries.narrow[i] ? 1 : k;
}

void knit__credit_keep(const knit_pool *h, unsigned n, bool room) {
    unsigned i = knit__slot_inside_index(h);
    if (i == KNIT__ENTRY_SLOTS) return;
    struct knit__entries *e = &knit__my_entries;
    uintptr_t v = atomic_load_explicit(&e->slot[i], memory_order_relaxed);
    /* Called only when the thread has no credit left. */
    assert(n == 0 || knit__slot_credits(v) == 0);
    e->narrow[i] = !room;
    if (n > 0) /* the owner's slot while INSIDE (relaxed: as above) */
        atomic_store_explicit(&e->slot[i], v + n, memory_order_relaxed);
}

unsigned knit__entries_revoke(const knit_pool *h) {
    unsigned n = 0;
    pthread_mutex_lock(&knit__entries_lock);
    for (struct knit__entries *e = knit__entries_head; e != NULL; e = e->next)
        for (unsigned i = 0; i < KNIT__ENTRY_SLOTS; i++) n += knit__slot_revoke(&e->slot[i], h);
    pthread_mutex_unlock(&knit__entries_lock);
    return n;
}

uint64_t knit__entries_credits(const knit_pool *h) {
    uint64_t n = 0;
    pthread_mutex_lock(&knit__entries_lock);
    for (struct knit__entries *e = knit__entries_head; e != NULL; e = e->next)
        for (unsigned i = 0; i < KNIT__ENTRY_SLOTS; i++) {
            /* relaxed: statistics */
            uintptr_t v = atomic_load_explicit(&e->slot[i], memory_order_relaxed);
            if (knit__slot_pool(v) == h) n += knit__slot_credits(v);
        }
    pthread_mutex_unlock(&knit__entries_lock);
    return n;
}

void knit__entries_wait_out(knit_pool *h) {
    /* seq-cst: pairs with the seq-cst RMW of the overflow path. */
    while (atomic_load_explicit(&h->users, memory_order_seq_cst) != 0) sched_yield();
    for (;;) {
        bool inside = false;
        pthread_mutex_lock(&knit__entries_lock);
        for (struct knit__entries *e = knit__entries_head; e != NULL && !inside;
             e = e->next)
            for (unsigned i = 0; i < KNIT__ENTRY_SLOTS; i++)
                /* seq-cst: the other half of the Dekker pair (see
                 * knit__pool_enter); it also acquires the leaving call's
                 * release store. A slot of h here is INSIDE: a sticky one
                 * holds credits, and destroy only gets here once counts
                 * holds none. */
                if (knit__slot_pool(atomic_load_explicit(&e->slot[i], memory_order_seq_cst)) ==
                    h) {
                    inside = true;
                    break;
                }
        pthread_mutex_unlock(&knit__entries_lock);
        if (!inside) return;
        sched_yield();
    }
}

bool knit__entries_inside(const knit_pool *h) {
    return knit__slot_inside_index(h) < KNIT__ENTRY_SLOTS;
}

/* ---- introspection (tests) ---- */

unsigned knit__entries_held(void) {
    unsigned n = 0;
    for (unsigned i = 0; i < KNIT__ENTRY_SLOTS; i++) n += knit__my_entries.depth[i] > 0;
    return n;
}

unsigned knit__entries_sticky(void) {
    unsigned n = 0;
    for (unsigned i = 0; i < KNIT__ENTRY_SLOTS; i++)
        n += knit__my_entries.depth[i] == 0 &&
             atomic_load_explicit(&knit__my_entries.slot[i], memory_order_relaxed) != 0;
    return n;
}

unsigned knit__entries_registered(void) {
    unsigned n = 0;
    pthread_mutex_lock(&knit__entries_lock);
    for (struct knit__entries *e = knit__entries_head; e != NULL; e = e->next) n++;
    pthread_mutex_unlock(&knit__entries_lock);
    return n;
}
