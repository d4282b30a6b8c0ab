/* Task groups: members without futures, counted in one word per group.
 *
 * A member is submitted like a detached task (knit__submit) whose record
 * names its group instead of carrying a future's settle: task.c runs it
 * and calls knit__group_member_done, which records a failure or cancel if
 * it is the group's first and takes the member off `live`.
 *
 * `live` holds two counts: members submitted and not finished (low 32
 * bits) and finishers that brought the first count to 0 and are still
 * ringing the waiters (high 32 bits). A finisher that is not the last
 * touches the group only with its one CAS; the last one announces itself
 * in that same CAS, takes the waiter list, and leaves with a release
 * subtraction, after which it touches only the waiters' own records (on
 * their stacks, held until it marks them released, as a future's settle
 * does). So a wait that saw no live member may destroy the group at once:
 * destroy waits out the few instructions of a last finisher still in it.
 *
 * No lost wake-up: a waiter stores `watched` (seq-cst) and then loads
 * `live` (seq-cst) under the group's lock before it links its record; the
 * last finisher's CAS is seq-cst and it loads `watched` (seq-cst) after
 * it. Either the waiter sees no live member, or the finisher sees
 * `watched` and takes the list under the lock (after the link).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/cpu.h"
#include "base/error.h"
#include "runtime/pool.h"

#define KNIT__GROUP_LIVE_MASK 0xffffffffull
#define KNIT__GROUP_RINGING_ONE (1ull << 32)

enum {
    KNIT__OUTCOME_NONE = 0,
    KNIT__OUTCOME_WRITING = 1,
    KNIT__OUTCOME_SET = 2,
};

/* Set by knit__group_outcome_set for a cancel; KNIT_ETASK keeps the
 * member's message. */
static const char knit__group_cancelled_msg[] = "the group was cancelled";
static const char knit__group_pool_cancelled_msg[] =
    "a member was cancelled by knit_pool_destroy(KNIT_CANCEL)";

/* Records the group's outcome if it is the first; `message` is the
 * group's afterwards either way (freed when it loses). */
static void knit__group_outcome_set(struct knit_group *g, int code,
                                    int task_code, char *message,
                                    const char *reason) {
    uint32_t expect = KNIT__OUTCOME_NONE;
    /* relaxed: the CAS only elects the writer; the fields are published
     * by the release store below. */
    if (!atomic_compare_exchange_strong_explicit(&g->outcome, &expect,
                                                 KNIT__OUTCOME_WRITING,
                                                 memory_order_relaxed,
                                                 memory_order_relaxed)) {
        free(message);
        return;
    }
    g->code = code;
    g->task_code = task_code;
    g->message = message;
    g->reason = reason;
    /* release: pairs with the acquire load in knit__group_outcome. */
    atomic_store_explicit(&g->outcome, KNIT__OUTCOME_SET, memory_order_release);
}

/* Takes n members off `live` (see the top of this file). */
static void knit__group_live_drop(struct knit_group *g, uint32_t n) {
    uint64_t v = atomic_load_explicit(&g->live, memory_order_relaxed);
    uint64_t next;
    do {
        next = (v & KNIT__GROUP_LIVE_MASK) == n ? v - n + KNIT__GROUP_RINGING_ONE
                                                : v - n;
        /* seq-cst: the finisher's half of the waiting protocol (pairs with
         * the waiter's seq-cst store of watched then load of live); its
         * release half orders the members' effects before a waiter's
         * seq-cst (acquire) load that sees the group idle. */
    } while (!atomic_compare_exchange_weak_explicit(
        &g->live, &v, next, memory_order_seq_cst, memory_order_relaxed));
    if ((v & KNIT__GROUP_LIVE_MASK) != n) return; /* not the last: done */
    struct knit__waiter *list = NULL;
    /* seq-cst: after the CAS above; see the top of this file. */
    if (atomic_load_explicit(&g->watched, memory_order_seq_cst) != 0) {
        knit__spin_lock(&g->lock);
        list = g->waiters;
        g->waiters = NULL;
        knit__spin_unlock(&g->lock);
    }
    /* release: pairs with the acquire loads in knit_group_destroy: our
     * last access to the group happens before its free. */
    atomic_fetch_sub_explicit(&g->live, KNIT__GROUP_RINGING_ONE,
                              memory_order_release);
    knit__waiters_ring_list(list);
}

void knit__group_drop_flush(struct knit__worker *w) {
    if (w->drop_n == 0) return;
    struct knit_group *g = w->drop_group;
    uint32_t n = w->drop_n;
    w->drop_group = NULL;
    w->drop_n = 0;
    knit__group_live_drop(g, n);
}

/* Keeping finished members back: a worker that runs member after member
 * of one group from its loop (a stream of submits, claimed in batches)
 * paid one CAS per member on `live`, the line the submitter adds to, so
 * the line crossed cores twice per member. It now keeps the count and
 * takes it off `live` in one CAS when its loop is about to run anything
 * else, finds nothing to run (before it spins or parks), has kept 64, or
 * exits (knit__worker_main). While it keeps any, the group cannot look
 * idle to a waiter any earlier than before: either the worker is running
 * another member of the same group, which is live itself, or it is
 * between two steps of its loop. Only from the loop's own tasks: inside
 * a task (an await that helps), or in a continuation's wait for a lane,
 * the worker's next step is the user's code or another task, which may
 * wait for this very group; so knit__task_run passes w only for a task
 * the loop started, and knit__claim_into hands the count over before it
 * runs a task itself. */
static void knit__group_drop_defer(struct knit_group *g, struct knit__worker *w) {
    if (w->drop_group != g) {
        knit__group_drop_flush(w);
        w->drop_group = g;
    }
    if (++w->drop_n >= 64) knit__group_drop_flush(w);
}

void knit__group_member_done(struct knit_group *g, struct knit__worker *w,
                             int code, int task_code, char *message) {
    if (code == KNIT_ECANCELED)
        knit__group_outcome_set(g, code, 0, NULL,
                                atomic_load_explicit(&g->cancelled,
                                                     memory_order_relaxed)
                                    ? knit__group_cancelled_msg
                                    : knit__group_pool_cancelled_msg);
    else if (code != 0)
        knit__group_outcome_set(g, code, task_code, message, NULL);
    else
        free(message);
    if (w != NULL)
        knit__group_drop_defer(g, w);
    else
        knit__group_live_drop(g, 1);
}

bool knit__group_cancelled(const struct knit_group *g) {
    /* acquire: pairs with knit_group_cancel's release store. */
    return atomic_load_explicit(&g->cancelled, memory_order_acquire) != 0;
}

int knit_group_create(knit_pool *h, knit_group **out) {
    if (out == NULL) return knit__fail(KNIT_EINVAL, "knit_group_create: out is NULL");
    *out = NULL;
    int rc = knit__pool_enter(h, false);
    if (rc < 0) return rc;
    struct knit_group *g = knit__aligned_alloc(KNIT__LINE, sizeof *g);
    if (g == NULL) {
        knit__pool_exit(h);
        return knit__fail(KNIT_ENOMEM, "knit_group_create: no memory for a group");
    }
    memset(g, 0, sizeof *g);
    g->pool = h;
    atomic_init(&g->live, 0);
    atomic_init(&g->cancelled, 0);
    atomic_init(&g->outcome, KNIT__OUTCOME_NONE);
    atomic_init(&g->lock, 0);
    atomic_init(&g->watched, 0);
    atomic_init(&g->users, 0);
    knit__pool_exit(h);
    *out = g;
    return 0;
}

int knit_group_submit(knit_group *g, knit_fn fn, void *arg) {
    if (g == NULL) return knit__fail(KNIT_EINVAL, "knit_group_submit: group is NULL");
    if (fn == NULL) return knit__fail(KNIT_EINVAL, "knit_group_submit: fn is NULL");
    if (knit__group_cancelled(g))
        return knit__fail(KNIT_ECANCELED,
                          "knit_group_submit: the group was cancelled");
    /* relaxed: the member cannot finish before its publication, which
     * releases this count to whoever runs it (so the decrement comes
     * after it); a waiter that misses it waited for the group before
     * this submit. */
    atomic_fetch_add_explicit(&g->live, 1, memory_order_relaxed);
    int rc = knit__submit_member(g, fn, arg);
    if (rc < 0) knit__group_live_drop(g, 1); /* message kept: the submit's */
    return rc;
}

/* The group's outcome so far, as knit_group_wait returns it. */
static int knit__group_outcome(const struct knit_group *g) {
    /* acquire: pairs with the release store in knit__group_outcome_set. An
     * outcome still being written belongs to a member that is live, so it
     * is not part of this wait's result. */
    if (atomic_load_explicit(&g->outcome, memory_order_acquire) !=
        KNIT__OUTCOME_SET)
        return 0;
    if (g->code == KNIT_ETASK)
        return knit__fail(KNIT_ETASK, "task failed (code %d): %s", g->task_code,
                          g->message != NULL ? g->message : "");
    return knit__fail(g->code, "knit_group_wait: %s", g->reason);
}

bool knit__group_idle(struct knit_group *g) {
    /* seq-cst: the waiter's load of the waiting protocol (the top of this
     * file); acquire, so the finished members' effects are visible. */
    return (atomic_load_explicit(&g->live, memory_order_seq_cst) &
            KNIT__GROUP_LIVE_MASK) == 0;
}

int knit_group_wait(knit_group *g, int64_t timeout_ns) {
    if (g == NULL) return knit__fail(KNIT_EINVAL, "knit_group_wait: group is NULL");
    const knit_task *cur = knit__tls_get()->current;
    if (cur != NULL && cur->future != NULL && cur->future->group == g)
        return knit__fail(KNIT_EBUSY, "knit_group_wait: called by a member of "
                                      "the same group (it would wait for "
                                      "itself)");
    /* relaxed: destroy's check of users is for a wait already inside; the
     * release decrement below orders our accesses before its free. */
    atomic_fetch_add_explicit(&g->users, 1, memory_order_relaxed);
    int rc = 0;
    if (!knit__group_idle(g)) {
        if (timeout_ns == 0) {
            rc = KNIT_ETIMEDOUT;
        } else {
            knit_pool *h = g->pool;
            rc = knit__pool_enter(h, true);
            if (rc == 0) {
                rc = knit__wait_group(g, h->p, timeout_ns);
                knit__pool_exit(h);
            }
        }
    }
    if (rc == KNIT_ETIMEDOUT)
        rc = knit__fail(KNIT_ETIMEDOUT,
                        "knit_group_wait: members still live after %lld ns",
                        (long long)timeout_ns);
    else if (rc == 0)
        rc = knit__group_outcome(g);
    /* release: pairs with knit_group_destroy's acquire load. */
    atomic_fetch_sub_explicit(&g->users, 1, memory_order_release);
    return rc;
}

int knit_group_cancel(knit_group *g) {
    if (g == NULL) return knit__fail(KNIT_EINVAL, "knit_group_cancel: group is NULL");
    atomic_fetch_add_explicit(&g->users, 1, memory_order_relaxed); /* as wait */
    /* release: pairs with the acquire loads of members about to start
     * (task.c), knit_task_cancelled and knit_group_submit. */
    atomic_store_explicit(&g->cancelled, 1, memory_order_release);
    knit__group_outcome_set(g, KNIT_ECANCELED, 0, NULL, knit__group_cancelled_msg);
    atomic_fetch_sub_explicit(&g->users, 1, memory_order_release);
    return 0;
}

int knit_group_destroy(knit_group *g) {
    if (g == NULL) return knit__fail(KNIT_EINVAL, "knit_group_destroy: group is NULL");
    for (;;) {
        /* acquire: pairs with the release subtractions of the last
         * finisher and of wait/cancel: their accesses happen before the
         * free. */
        uint64_t v = atomic_load_explicit(&g->live, memory_order_acquire);
        uint32_t users = atomic_load_explicit(&g->users, memory_order_acquire);
        if ((v & KNIT__GROUP_LIVE_MASK) != 0 || users != 0)
            return knit__fail(KNIT_EBUSY,
                              "knit_group_destroy: %llu members are live and "
                              "%u threads are waiting or cancelling",
                              (unsigned long long)(v & KNIT__GROUP_LIVE_MASK),
                              users);
        if (v == 0) break;
        /* The last finisher is still taking the waiter list: a few
         * instructions, never a wait of its own. */
        knit__cpu_relax();
    }
    free(g->message);
    free(g);
    return 0;
}
