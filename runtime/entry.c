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
 */
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdbool.h>

#include "base/error.h"
#include "runtime/pool.h"

#define KNIT__ENTRY_SLOTS 4

struct knit__entries {
    /* Written by the owner only; read by destroy (seq-cst). */
    alignas(KNIT__LINE) knit_pool *_Atomic slot[KNIT__ENTRY_SLOTS];
    unsigned depth[KNIT__ENTRY_SLOTS]; /* calls inside slot[i] (owner only) */
    bool linked;                       /* on the registry (owner, lock) */
    bool exited;                       /* unlinked at thread exit: never again */
    struct knit__entries *prev, *next; /* the registry (lock) */
};

static _Thread_local struct knit__entries knit__my_entries;
static pthread_mutex_t knit__entries_lock = PTHREAD_MUTEX_INITIALIZER;
static struct knit__entries *knit__entries_head;

/* Inside one of the pool's own tasks (see the top of this file). The test
 * is the same in enter and exit, and tls->current is restored after any
 * task nested in between. */
static inline bool knit__inside_own_task(const knit_pool *h) {
    const knit_task *cur = knit__tls_get()->current;
    return cur != NULL && cur->pool->handle == h;
}

/* The index of this thread's slot that holds h (NULL: a free one), or
 * KNIT__ENTRY_SLOTS. Relaxed: the slots are this thread's own. */
static unsigned knit__slot_find(const struct knit__entries *e, const knit_pool *h) {
    for (unsigned i = 0; i < KNIT__ENTRY_SLOTS; i++)
        if (atomic_load_explicit(&e->slot[i], memory_order_relaxed) == h) return i;
    return KNIT__ENTRY_SLOTS;
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

int knit__pool_enter(knit_pool *h, bool any) {
    if (h == NULL) return knit__fail(KNIT_EINVAL, "pool is NULL");
    if (knit__inside_own_task(h)) return 0;
    struct knit__entries *e = &knit__my_entries;
    unsigned i = knit__slot_find(e, h);
    if (i < KNIT__ENTRY_SLOTS) {
        /* Already inside: the pool cannot be freed under us; only the
         * state decides (acquire: as any state read). */
        uint32_t st = atomic_load_explicit(&h->state, memory_order_acquire);
        if (!knit__enter_allowed(st, any)) return knit__enter_refused(st);
        e->depth[i]++;
        return 0;
    }
    unsigned free_ = knit__slot_find(e, NULL);
    if (free_ == KNIT__ENTRY_SLOTS || (!e->linked && !knit__entries_link(e)))
        return knit__enter_counted(h, any);
    /* seq-cst store then seq-cst load: pairs with destroy's seq-cst state
     * store followed by its seq-cst loads of the slots
     * (knit__entries_wait_out). */
    atomic_store_explicit(&e->slot[free_], h, memory_order_seq_cst);
    uint32_t st = atomic_load_explicit(&h->state, memory_order_seq_cst);
    if (!knit__enter_allowed(st, any)) {
        atomic_store_explicit(&e->slot[free_], NULL, memory_order_release);
        return knit__enter_refused(st);
    }
    e->depth[free_] = 1;
    return 0;
}

void knit__pool_exit(knit_pool *h) {
    if (knit__inside_own_task(h)) return;
    struct knit__entries *e = &knit__my_entries;
    unsigned i = knit__slot_find(e, h);
    if (i < KNIT__ENTRY_SLOTS) {
        if (--e->depth[i] == 0)
            /* release: what this call did to the pool happens before
             * destroy (seq-cst load of the slot) frees it. */
            atomic_store_explicit(&e->slot[i], NULL, memory_order_release);
        return;
    }
    /* release: as above, for destroy's seq-cst loads of `users`. */
    atomic_fetch_sub_explicit(&h->users, 1, memory_order_release);
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
                 * release store. */
                if (atomic_load_explicit(&e->slot[i], memory_order_seq_cst) == h) {
                    inside = true;
                    break;
                }
        pthread_mutex_unlock(&knit__entries_lock);
        if (!inside) return;
        sched_yield();
    }
}

bool knit__entries_inside(const knit_pool *h) {
    return knit__slot_find(&knit__my_entries, h) < KNIT__ENTRY_SLOTS;
}

/* ---- introspection (tests) ---- */

unsigned knit__entries_held(void) {
    unsigned n = 0;
    for (unsigned i = 0; i < KNIT__ENTRY_SLOTS; i++)
        n += atomic_load_explicit(&knit__my_entries.slot[i], memory_order_relaxed) != NULL;
    return n;
}

unsigned knit__entries_registered(void) {
    unsigned n = 0;
    pthread_mutex_lock(&knit__entries_lock);
    for (struct knit__entries *e = knit__entries_head; e != NULL; e = e->next) n++;
    pthread_mutex_unlock(&knit__entries_lock);
    return n;
}
