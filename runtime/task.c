/* Running a claimed task, and what a task can ask about itself. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "payload/payload.h"
#include "runtime/pool.h"

/* One settled lane or deque entry. A subtask counted in its pusher's
 * `pushed` is counted in the settler's `child_settled` (release: pairs with
 * the acquire loads in knit__pool_quiescent, so destroy that sees this
 * settle also sees its push); anything else comes off `live`, batched on a
 * worker, at once elsewhere. */
static void knit__settled(struct knit__pool *p, struct knit__worker *w,
                          bool local) {
    if (local) {
        if (w != NULL)
            atomic_store_explicit(
                &w->child_settled,
                atomic_load_explicit(&w->child_settled, memory_order_relaxed) + 1,
                memory_order_release); /* owner-written */
        else
            atomic_fetch_add_explicit(&p->shared_child_settled, 1,
                                      memory_order_release);
    } else if (w != NULL) {
        w->unsettled++;
    } else {
        /* release: pairs with destroy's acquire load of counts. */
        atomic_fetch_sub_explicit(&p->counts, KNIT__LIVE_ONE,
                                  memory_order_release);
    }
}

/* Calls the task's function on this thread: the task context, nesting
 * depth, the timeline and the run counted; *task holds its failure. */
static void *knit__task_call(struct knit__pool *p, knit_future *f,
                             struct knit__worker *w, struct knit__producer *rec,
                             knit_task *task) {
    struct knit__tls *tls = knit__tls_get();
    knit__fdq *q = &p->fdqs[tls->consumer];
    *task = (knit_task){.pool = p, .future = f, .fdq = q};
    task->full = task;
    uint32_t forks_at_entry = q->head;
    knit_task *outer = tls->current;
    tls->current = task;
    unsigned depth = ++tls->depth;
    uint64_t high = atomic_load_explicit(&p->help_depth_max, memory_order_relaxed);
    while (depth > high &&
           !atomic_compare_exchange_weak_explicit(&p->help_depth_max, &high, depth,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
    /* The timeline: one test of a pointer constant for the pool's life. */
    int64_t t0 = KNIT__TL_ON(p) ? knit__now_ns() : 0;
    void *result = f->fn(task, f->arg);
    knit__fdq_check_joined(q, forks_at_entry, f->fn);
    tls->depth--;
    tls->current = outer;
    /* Counted before the settle, so an awaiter that wakes sees it. */
    knit__stat_add(w ? &w->tasks_run : &rec->helped, 1);
    /* A task nested in another on this stack, or run by a thread that is
     * not a worker, ran while its thread awaited: helping. */
    if (KNIT__TL_ON(p)) {
        tls->tl_t1 = knit__tl_task(p, w, (uintptr_t)f->fn, task->label, t0, depth,
                                   outer != NULL || w == NULL);
        tls->tl_t0 = t0;
        tls->tl_tasks++;
    }
    if (task->failed) knit__stat_add(w ? &w->failed : &rec->failed, 1);
    return result;
}

/* A group member (runtime/group.c): nobody else holds its record, so it
 * needs no start CAS; its group's cancel (or the pool's) skips it. The
 * record goes back to this thread's cache, unless it is `bare` (on the
 * stack of knit__member_run_bare): then only a buffer it returned is
 * freed. */
static void knit__member_body(struct knit__pool *p, knit_future *f,
                              struct knit__worker *w, struct knit__producer *rec,
                              bool local, bool bare, bool top) {
    struct knit_group *g = f->group;
    bool by_group = knit__group_cancelled(g);
    int code = KNIT_ECANCELED, task_code = 0;
    char *message = NULL;
    if (by_group ||
        atomic_load_explicit(&p->handle->state, memory_order_acquire) ==
            KNIT__POOL_CANCELLING) {
        /* As a future's: a cancel by the user (here the group's) is a
         * cancelled task and a skipped lane; the pool's cancel only the
         * former. */
        knit__stat_add(w ? &w->cancelled : &rec->cancelled, 1);
        if (by_group) knit__stat_add(w ? &w->skipped : &rec->skipped, 1);
    } else {
        knit_task task;
        (void)knit__task_call(p, f, w, rec, &task);
        code = task.failed ? KNIT_ETASK : 0;
        task_code = task.code;
        message = task.message;
    }
    /* The record is done with before the group hears of it: the last
     * member's report may let a waiter destroy the group. */
    if (bare)
        knit__payload_drop(f);
    else
        knit__future_recycle(f);
    knit__group_member_done(g, top ? w : NULL, code, task_code, message);
    knit__settled(p, w, local);
}

static void knit__member_run(struct knit__pool *p, knit_future *f,
                             struct knit__worker *w, struct knit__producer *rec,
                             bool local, bool top) {
    knit__member_body(p, f, w, rec, local, false, top);
}

void knit__member_run_bare(struct knit__pool *p, knit_fn fn, void *arg,
                           struct knit_group *g, struct knit__worker *w,
                           struct knit__producer *rec) {
    /* What the task's calls read of their record: lines 0 and 1, zeroed
     * (no payload, no antecedent, not cancelled; `out` is read only
     * behind out_state). */
    knit_future f;
    memset(&f, 0, offsetof(knit_future, out));
    atomic_init(&f.refs, 1);
    atomic_init(&f.out_state, KNIT__OUT_NONE);
    f.in_kind = KNIT__PAY_NONE;
    f.fn = fn;
    f.arg = arg;
    f.group = g;
    f.pool = p;
    knit__member_body(p, &f, w, rec, false, true, false);
}

/* The task of a future whose start CAS this thread won: settled as
 * cancelled if the pool is cancelling (unless it must always run), else
 * run here. */
static bool knit__task_started(struct knit__pool *p, knit_future *f,
                               struct knit__worker *w,
                               struct knit__producer *rec) {
    if (!f->always_run &&
        atomic_load_explicit(&p->handle->state, memory_order_acquire) ==
            KNIT__POOL_CANCELLING) {
        knit__stat_add(w ? &w->cancelled : &rec->cancelled, 1);
        knit__future_settle(f, KNIT_ECANCELED, NULL, 0, NULL);
        return false;
    }
    knit_task task;
    void *result = knit__task_call(p, f, w, rec, &task);
    knit__future_settle(f, task.failed ? KNIT_ETASK : 0, result, task.code,
                        task.message);
    return true;
}

bool knit__task_run(struct knit__pool *p, knit_future *f,
                    struct knit__worker *w, struct knit__producer *rec) {
    uint32_t expect = KNIT__F_PENDING;
    /* Read now: f may be freed by the unref before knit__settled. Written
     * before the push that handed us f. */
    bool local = f->counted_local;
    /* Set by the worker loop for the task it starts itself, and taken
     * here, so no task run from inside this one (an await that helps, a
     * continuation's wait for a lane) sees it: only a member the loop
     * started may be kept back from its group (knit__group_member_done). */
    bool top = w != NULL && w->top_run;
    if (top) w->top_run = false;
    if (f->group != NULL) {
        knit__member_run(p, f, w, rec, local, top);
        return true;
    }
    /* The right to run: a cancel that won this CAS first already settled
     * the future or is settling it, and we only drop the lane's
     * reference. */
    if (!atomic_compare_exchange_strong_explicit(&f->state, &expect,
                                                 KNIT__F_RUNNING,
                                                 memory_order_acq_rel,
                                                 memory_order_acquire)) {
        knit__stat_add(w ? &w->skipped : &rec->skipped, 1);
        knit__future_unref(f);
        knit__settled(p, w, local);
        return false;
    }
    bool ran = knit__task_started(p, f, w, rec);
    knit__future_unref(f);
    knit__settled(p, w, local);
    return ran;
}

bool knit__task_inline(struct knit__pool *p, knit_future *f,
                       struct knit__worker *w, struct knit__producer *rec) {
    /* Only a task that can be in a deque: a promise has none, a
     * continuation may still wait for its antecedent, a group member
     * has no future to await. Written before the future reached its
     * user. The relaxed load skips the deque when a worker has the task
     * already. The two flags are loaded one byte each (relaxed builtin
     * loads of plain bytes, which the compiler may not merge): as plain
     * loads of adjacent bytes, gcc read them as one 8-byte word that also
     * holds in_kind, which the worker's settle may be writing
     * (knit__payload_settle): no race in C, but a wider load than the
     * program's, and TSan reported it. */
    if (__atomic_load_n(&f->promise, __ATOMIC_RELAXED) ||
        __atomic_load_n(&f->chained, __ATOMIC_RELAXED) || f->group != NULL ||
        atomic_load_explicit(&f->state, memory_order_relaxed) != KNIT__F_PENDING)
        return false;
    /* Fork-join: a child pushed from a task on this thread is usually the
     * newest element of this consumer's deque. Popping it takes the entry
     * with the task and runs it as any claimed task.
     *
     * Only the newest: a child further down is left where it is, and the
     * await runs the entries above it first (its younger siblings, by
     * knit__pool_run_some), the owner working from the young end while
     * thieves take from the old one. Taking an older child out of order
     * by its start CAS (tried: the entry then stays for its popper or a
     * thief to pass over) made the owner and the thieves work the old end
     * together: skynet, which awaits its ten children oldest first, ran
     * at 0.6x, thieves stealing entries the owner had already run. A
     * task still in a lane is not taken either: its lane would hold a
     * pending slot after the task ran. */
    struct knit__tls *tls = knit__tls_get();
    if (knit__deque_pop_if(&p->deques[tls->consumer], f) != f) return false;
    /* Counted only when it ran: a task the pool's cancel settled first is
     * `cancelled` (or `skipped`, if a knit_future_cancel won). */
    if (knit__task_run(p, f, w, rec)) knit__stat_add(&rec->inlined, 1);
    return true;
}

int knit_task_fail(knit_task *task, int code, const char *fmt, ...) {
    if (task == NULL) return knit__fail(KNIT_EINVAL, "knit_task_fail: task is NULL");
    va_list ap;
    va_start(ap, fmt);
    char *msg = knit__vformat(fmt, ap);
    va_end(ap);
    if (task->failed) free(task->message); /* else not set (a light child) */
    task->message = msg;
    task->failed = 1;
    task->code = code;
    return KNIT_ETASK;
}

bool knit_task_cancelled(const knit_task *task) {
    if (task == NULL) return false;
    task = task->full;
    if (task->pool == NULL) return false; /* a child forked outside a task */
    /* A group member's record has no cancel of its own: its group's. */
    if (task->future->group != NULL && knit__group_cancelled(task->future->group))
        return true;
    return atomic_load_explicit(&task->future->cancel, memory_order_acquire) ||
           atomic_load_explicit(&task->pool->handle->state,
                                memory_order_acquire) == KNIT__POOL_CANCELLING;
}

knit_pool *knit_task_pool(const knit_task *task) {
    return task != NULL && task->full->pool != NULL ? task->full->pool->handle
                                                    : NULL;
}

int knit_task_antecedent(const knit_task *task, void **result) {
    if (task == NULL || knit__task_is_frame_child(task) ||
        !task->future->chained)
        return knit__fail(KNIT_EINVAL,
                          "knit_task_antecedent: not in a continuation");
    return knit__future_outcome(task->future->antecedent, result);
}
