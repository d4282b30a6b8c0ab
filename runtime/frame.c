/* Fork-join frames (knit_fork / knit_join) over a split deque.
 *
 * Each consumer id (worker, or helper id lent to an awaiting thread) has a
 * fork deque: a stack of frame pointers cells[0 .. head) split in two.
 *
 *   [tail, split)   shared: thieves take the oldest with a CAS on ts;
 *   [split, head)   private: only the owner touches them.
 *
 * tail and split live in one 64-bit word `ts`; head, and the owner's copy
 * of split, are owner-private. Thieves only ever move tail, forward, by a
 * CAS on ts; the owner moves split (by a CAS on ts, or a store when no
 * thief can succeed) and never reads a shared cell after it was taken.
 *
 * Fork (owner): cells[head] = fr, head++. No RMW, no fence: the frame is
 * private. Rarely (the deque was empty, or a thief asked through
 * movesplit; every worker that looks for work asks each deque before it
 * parks, so a parked worker's request is seen at the owner's next fork)
 * it shares: a seq-cst CAS moves split up to share the older half of the
 * private part; the CAS releases the frames' fields and cells to the
 * thief's acquire CAS, and as B1 of the parking protocol it pairs with a
 * parking worker's re-check (knit__fdq_shared), then knit__pool_notify.
 *
 * The common fork and join are inline in <knit/fork.h> (C11, NDEBUG);
 * they fall back to knit_fork / knit_join below for everything else.
 * Fork-join children that the forking thread runs at the join are
 * "light" tasks (see struct knit_task): three stores, not a full context.
 *
 * Join (owner) of frame h = head - 1: pop (head = h). If h >= split, the
 * frame was private all along (split only grows when the owner says so),
 * and the child runs here: a plain call. Otherwise split == h + 1 (every
 * earlier slow join left split <= its index) and the frame was shared:
 *   - tail <= h: not taken yet. A CAS of ts from {tail, h+1} to {tail, s'}
 *     with s' <= h makes it private again (s' keeps the older half of the
 *     shared part shared); the CAS decides the race with a thief's CAS on
 *     the same word. Then the child runs here.
 *   - tail == h + 1: a thief took it. The owner keeps slot h (head
 *     stays h + 1) and waits for the frame's state to become DONE,
 *     running other work, whose forks go above h: the thief reads
 *     cells[h] after its CAS, so the slot must not be reused before the
 *     thief's DONE (tests/model/fork_deque.pml found that a reset before
 *     the wait let a helped task's fork overwrite it). Then, with
 *     tail == split == h + 1 (no thief can succeed), it stores
 *     ts = {h, h}: the deque is empty up to head again.
 * A stale thief snapshot that matches ts again after a reset (ABA) takes
 * a frame that is shared at that moment and whose slot is not reused
 * before that thief is done with it.
 *
 * Steal (thief): load ts; if tail < split, CAS tail+1 (acq_rel: acquires
 * the owner's share); read cells[tail]; mark the frame STOLEN; run the
 * child with a knit_task of its own; write result and failure into the
 * frame; exchange the state to DONE (acq_rel and seq-cst: the owner reads
 * the result after its acquire load of DONE; see the sleep below). The
 * exchange is the thief's last touch of the frame, which lives on the
 * owner's stack. If it returns a doorbell address, it rings it.
 *
 * A waiting owner on a worker sleeps on its own doorbell: it CASes the
 * state STOLEN -> &bell (never from QUEUED: the thief's STOLEN store would
 * overwrite it), then parks, re-checking DONE after it armed (seq-cst,
 * pairs with the thief's seq-cst exchange: either the thief saw the bell
 * and rings it, or the park's re-check sees DONE). A worker's doorbell
 * outlives every frame, so a ring that arrives after the owner saw DONE
 * and moved on only makes a later park look again. A thread that is not a
 * worker naps instead (its doorbell is thread-local and may be gone by
 * the time a late ring comes).
 */
#define _GNU_SOURCE
/* This file defines knit_fork and knit_join: no inline macros here. */
#define KNIT__FORK_OUT_OF_LINE 1
#include "runtime/frame.h"

#include <dlfcn.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cpu.h"
#include "base/error.h"
#include "runtime/pool.h"

static inline uint64_t knit__ts(uint32_t tail, uint32_t split) {
    return (uint64_t)split << 32 | tail;
}
static inline uint32_t knit__ts_tail(uint64_t v) { return (uint32_t)v; }
static inline uint32_t knit__ts_split(uint64_t v) { return (uint32_t)(v >> 32); }

static inline struct knit__frame *knit__fr(knit_frame *fr) {
    return (struct knit__frame *)(void *)fr;
}

void knit__fdq_init(knit__fdq *q) {
    atomic_init(&q->ts, 0);
    atomic_init(&q->movesplit, 0);
    q->head = 0;
    q->split = 0;
    for (unsigned i = 0; i < KNIT_FORK_DEPTH; i++) atomic_init(&q->cells[i], NULL);
}

bool knit__fdq_shared(knit__fdq *q) {
    uint64_t v = atomic_load_explicit(&q->ts, memory_order_seq_cst);
    return knit__ts_tail(v) < knit__ts_split(v);
}

/* Owner: shares the older half of the private part (at least one frame
 * when there is any), then lets a sleeping worker know. */
static void knit__fdq_share(struct knit__pool *p, knit__fdq *q) {
    uint32_t head = q->head, split = q->split;
    if (split >= head) return;
    uint32_t ns = split + (head - split + 1) / 2;
    for (uint32_t i = split; i < ns; i++) {
        /* Still private: plain and relaxed; the CAS below publishes. */
        struct knit__frame *f = atomic_load_explicit(&q->cells[i], memory_order_relaxed);
        f->message = NULL;
        atomic_store_explicit(&f->state, KNIT__FR_QUEUED, memory_order_relaxed);
    }
    uint64_t v = atomic_load_explicit(&q->ts, memory_order_relaxed);
    /* Only thieves move tail meanwhile; retry with the new tail. seq-cst:
     * releases the frames and cells below ns to the thief's CAS, and is
     * B1 of the parking protocol (pairs with knit__fdq_shared's load in a
     * parking worker's re-check). */
    while (!atomic_compare_exchange_weak_explicit(
        &q->ts, &v, knit__ts(knit__ts_tail(v), ns), memory_order_seq_cst,
        memory_order_relaxed)) {
    }
    q->split = ns;
    knit__pool_notify(p);
}

/* The fork's rare path: a root task's first fork, or a thief asked. Every
 * worker that looks for work asks (knit__fdq_take) before it parks, so a
 * parked worker learns of private frames at the owner's next fork. */
static __attribute__((noinline)) void knit__fork_slow(struct knit__pool *p,
                                                      knit__fdq *q) {
    /* Relaxed: a hint; the share's seq-cst CAS is what publishes. */
    atomic_store_explicit(&q->movesplit, 0, memory_order_relaxed);
    knit__fdq_share(p, q);
}

/* A full child task (see knit_task in pool.h) of `parent` (or of nothing,
 * outside a task), forking into q. */
static inline knit_task knit__child_task(const knit_task *parent, knit__fdq *q) {
    knit_task child = {.fdq = q, .frame_child = true};
    if (parent != NULL) {
        child.pool = parent->full->pool;
        child.future = parent->full->future;
    }
    return child;
}

/* Keeps a finished full child's outcome in its frame, for the join. */
static inline void knit__frame_keep(struct knit__frame *f, void *result,
                                    const knit_task *child) {
    f->result = result;
    f->code = child->failed ? KNIT_ETASK : 0;
    f->task_code = child->code;
    f->message = child->failed ? child->message : NULL;
}

/* A fork that runs its child at once: outside a task, or a full deque. */
static __attribute__((noinline)) int knit__fork_inline(knit_task *task,
                                                       struct knit__frame *f,
                                                       knit_fn fn, void *arg) {
    if (f == NULL || fn == NULL)
        return knit__fail(KNIT_EINVAL, "knit_fork: %s is NULL",
                          f == NULL ? "the frame" : "the function");
    f->fn = fn;
    f->arg = arg;
    f->parent = task;
    f->inl = KNIT__FR_INLINE;
    knit__fdq *q = task != NULL ? task->fdq : NULL;
    knit_task child = knit__child_task(task, q);
    child.full = &child;
    uint32_t entry = q != NULL ? q->head : 0;
    void *r = fn(&child, arg);
    if (q != NULL) knit__fdq_check_joined(q, entry, fn);
    knit__frame_keep(f, r, &child);
    return 0;
}

int knit_fork(knit_task *task, knit_frame *frame, knit_fn fn, void *arg) {
    struct knit__frame *f = knit__fr(frame);
    knit__fdq *q;
    uint32_t h;
    if (__builtin_expect(f == NULL || fn == NULL || task == NULL ||
                             (q = task->fdq) == NULL ||
                             (h = q->head) == KNIT_FORK_DEPTH,
                         0))
        return knit__fork_inline(task, f, fn, arg);
    f->fn = fn;
    f->arg = arg;
    f->parent = task;
    /* Relaxed: a private frame is the owner's; a share's seq-cst CAS
     * publishes the cell and the frame to the thief. (state and message
     * are set only for frames that get shared, in knit__fdq_share.) */
    atomic_store_explicit(&q->cells[h], f, memory_order_relaxed);
    q->head = h + 1;
    if (__builtin_expect(h == 0 || atomic_load_explicit(&q->movesplit,
                                                        memory_order_relaxed) != 0,
                         0))
        knit__fork_slow(task->full->pool, q);
    return 0;
}

/* A failed child's outcome (cold): its code and message. */
static __attribute__((noinline, cold)) int knit__child_failed(int task_code,
                                                              char *message) {
    int rc = knit__fail(KNIT_ETASK, "forked task failed (code %d): %s", task_code,
                        message ? message : "");
    free(message);
    return rc;
}

/* The outcome the join returns, from a frame whose child ran at its fork
 * or on a thief. */
static int knit__frame_outcome(struct knit__frame *f, void **result) {
    f->inl = 0;
    if (f->code != 0) return knit__child_failed(f->task_code, f->message);
    if (result != NULL) *result = f->result;
    return 0;
}

/* Runs f's child at the join, on the forking thread, as a light child of
 * task (see knit_task in pool.h): two stores and the call. */
static inline __attribute__((always_inline)) int
knit__join_call(knit_task *task, knit__fdq *q, struct knit__frame *f,
                void **result) {
    knit_task child;
    child.full = task->full;
    child.fdq = q;
    child.failed = 0;
    uint32_t entry = q->head;
    void *r = f->fn(&child, f->arg);
    knit__fdq_check_joined(q, entry, f->fn);
    if (__builtin_expect(child.failed, 0))
        return knit__child_failed(child.code, child.message);
    if (result != NULL) *result = r;
    return 0;
}

static bool knit__frame_done(void *ctx) {
    /* seq-cst: the park's re-check after it armed (see the top). */
    return atomic_load_explicit(&((struct knit__frame *)ctx)->state,
                                memory_order_seq_cst) == KNIT__FR_DONE;
}

/* Waits for a thief to finish f, running other work meanwhile. */
static void knit__frame_wait(struct knit__pool *p, struct knit__frame *f) {
    struct knit__tls *tls = knit__tls_get();
    struct knit__worker *w =
        tls->worker != NULL && tls->worker->pool == p ? tls->worker : NULL;
    struct knit__producer *rec = knit__producer_get(p->handle, p);
    unsigned idle = 0;
    for (;;) {
        /* acquire: pairs with the thief's exchange; its result is ours. */
        if (atomic_load_explicit(&f->state, memory_order_acquire) == KNIT__FR_DONE)
            return;
        if (rec != NULL && tls->depth < KNIT__MAX_DEPTH &&
            knit__pool_run_some(p, tls->consumer, w, rec)) {
            idle = 0;
            continue;
        }
        if (++idle < p->spin) {
            knit__cpu_relax();
            continue;
        }
        idle = 0;
        if (w == NULL) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
            continue;
        }
        uintptr_t st = KNIT__FR_STOLEN;
        /* release: nothing to publish but the bell's address; acquire on
         * failure to see DONE's result if that is why it failed. */
        if (atomic_compare_exchange_strong_explicit(
                &f->state, &st, (uintptr_t)&w->bell, memory_order_seq_cst,
                memory_order_acquire) ||
            st == (uintptr_t)&w->bell)
            knit__pool_park(p, w, 1000000, knit__frame_done, f);
        else if (st == KNIT__FR_QUEUED) /* the thief has not marked it yet */
            sched_yield();
    }
}

/* Everything but the private join: checks and their messages, frames that
 * ran at the fork, and shared frames (taken back, or waited for). */
static __attribute__((noinline)) int knit__join_slow(knit_task *task,
                                                     struct knit__frame *f,
                                                     void **result) {
    if (f == NULL) return knit__fail(KNIT_EINVAL, "knit_join: the frame is NULL");
    knit__fdq *q = task != NULL ? task->fdq : NULL;
    /* The newest slot holding f: every cell below head is a live frame. */
    uint32_t h = q != NULL ? q->head : 0;
    while (h > 0 && atomic_load_explicit(&q->cells[h - 1], memory_order_relaxed) != f)
        h--;
    if (h == 0) {
        if (f->inl == KNIT__FR_INLINE && f->parent == task)
            return knit__frame_outcome(f, result);
        /* A frame in this thread's deque that another task forked. */
        const knit_task *cur = knit__tls_get()->current;
        bool other = f->inl == KNIT__FR_INLINE;
        if (cur != NULL && cur->fdq != NULL && cur->fdq != q)
            for (uint32_t i = 0; i < cur->fdq->head && !other; i++)
                other = atomic_load_explicit(&cur->fdq->cells[i],
                                             memory_order_relaxed) == f;
        return knit__fail(KNIT_EINVAL,
                          other ? "knit_join: the frame was forked by another task"
                                : "knit_join: the frame was not forked, or was "
                                  "joined already");
    }
    h--;
    if (f->parent != task)
        return knit__fail(KNIT_EINVAL,
                          "knit_join: the frame was forked by another task");
    if (h + 1 != q->head)
        return knit__fail(KNIT_EINVAL,
                          "knit_join: joins are LIFO: frame %u joined while "
                          "%u frames of this worker are unjoined (join the "
                          "newest first)",
                          h, q->head);
    q->head = h;
    if (h >= q->split) /* private after all */
        return knit__join_call(task, q, f, result);
    /* Shared (split == h + 1): take it back, or wait for its thief. */
    uint64_t v = atomic_load_explicit(&q->ts, memory_order_acquire);
    for (;;) {
        uint32_t t = knit__ts_tail(v);
        if (t > h) break; /* stolen */
        uint32_t ns = t < h ? (t + h + 1) / 2 : h;
        /* acq_rel: decides the race with a thief's CAS on ts (the
         * StoreLoad of the protocol is this RMW against theirs). */
        if (atomic_compare_exchange_weak_explicit(&q->ts, &v, knit__ts(t, ns),
                                                  memory_order_acq_rel,
                                                  memory_order_acquire)) {
            q->split = ns;
            return knit__join_call(task, q, f, result);
        }
    }
    /* tail == split == h + 1: a thief took it. Slot h stays ours while we
     * wait (head = h + 1, "pre-leap"): the thief may not have read
     * cells[h] yet, and a fork made by a task this wait runs must not
     * reuse the slot (found by tests/model/fork_deque.pml). */
    q->head = h + 1;
    knit__frame_wait(task->full->pool, f);
    /* Everything forked during the wait was joined, so ts is {h+1, h+1}
     * again: no thief can succeed, and the deque empties down to h.
     * Relaxed: nothing to publish (a later share's CAS publishes its
     * frames); the thief read cells[h] before its DONE exchange, which we
     * acquired. */
    atomic_store_explicit(&q->ts, knit__ts(h, h), memory_order_relaxed);
    q->split = h;
    q->head = h;
    return knit__frame_outcome(f, result);
}

int knit_join(knit_task *task, knit_frame *frame, void **result) {
    struct knit__frame *f = knit__fr(frame);
    /* The fast path, the same test as the inline join's (<knit/fork.h>). */
    knit__fdq *q = knit__join_private_top(task, f);
    if (__builtin_expect(q != NULL, 1)) {
        q->head--;
        return knit__join_call(task, q, f, result);
    }
    return knit__join_slow(task, f, result);
}

struct knit__frame *knit__fdq_take(knit__fdq *q) {
    uint64_t v = atomic_load_explicit(&q->ts, memory_order_acquire);
    uint32_t t = knit__ts_tail(v), s = knit__ts_split(v);
    if (t >= s) {
        /* Nothing shared: ask the owner (a hint; relaxed both ways). */
        if (atomic_load_explicit(&q->movesplit, memory_order_relaxed) == 0)
            atomic_store_explicit(&q->movesplit, 1, memory_order_relaxed);
        return NULL;
    }
    /* acq_rel: acquires the owner's share (seq-cst CAS) that published
     * the cell and the frame. */
    if (!atomic_compare_exchange_strong_explicit(&q->ts, &v, knit__ts(t + 1, s),
                                                 memory_order_acq_rel,
                                                 memory_order_relaxed))
        return NULL;
    struct knit__frame *f = atomic_load_explicit(&q->cells[t], memory_order_relaxed);
    /* Relaxed: only lets the owner's CAS STOLEN -> bell succeed; the
     * result travels with DONE. */
    atomic_store_explicit(&f->state, KNIT__FR_STOLEN, memory_order_relaxed);
    return f;
}

void knit__frame_run_stolen(struct knit__pool *p, struct knit__frame *f,
                            unsigned consumer, struct knit__worker *w) {
    struct knit__tls *tls = knit__tls_get();
    knit__fdq *mine = &p->fdqs[consumer];
    knit_task *outer = tls->current;
    /* The child counts as this thread's current task: a submit or an
     * await inside it works as inside any task. */
    knit_task child = knit__child_task(f->parent, mine);
    child.full = &child;
    tls->current = &child;
    tls->depth++;
    uint32_t entry = mine->head;
    /* The timeline: a stolen frame is a span of its own (and a steal from
     * its owner's fork deque; f->parent is valid until the DONE below). */
    int64_t t0 = KNIT__TL_ON(p) ? knit__now_ns() : 0;
    unsigned victim = (unsigned)(f->parent->fdq - p->fdqs);
    void *r = f->fn(&child, f->arg);
    knit__fdq_check_joined(mine, entry, f->fn);
    tls->depth--;
    tls->current = outer;
    if (KNIT__TL_ON(p))
        knit__tl_frame(p, w, (uintptr_t)f->fn, child.label, t0, tls->depth + 1,
                       outer != NULL || w == NULL, victim);
    knit__frame_keep(f, r, &child);
    if (w != NULL) {
        knit__stat_add(&w->frames_stolen, 1);
    } else { /* a thread that helps while it awaits: its own record */
        struct knit__producer *rec = knit__producer_get(p->handle, p);
        if (rec != NULL) knit__stat_add(&rec->frames_stolen, 1);
    }
    /* seq-cst (so also acq_rel): releases the result to the owner's
     * acquire load; seq-cst against the owner's park re-check (see the
     * top). The last touch of f. */
    uintptr_t old = atomic_exchange_explicit(&f->state, KNIT__FR_DONE,
                                             memory_order_seq_cst);
    if (old > KNIT__FR_DONE) knit__doorbell_ring((knit__doorbell *)old);
}

void knit__fdq_unjoined(const knit__fdq *q, uint32_t head_at_entry,
                        knit_fn fn) {
    Dl_info info;
    const char *name = NULL;
    if (dladdr((void *)(uintptr_t)fn, &info) != 0) name = info.dli_sname;
    fprintf(stderr,
            "knit: task %s (%p) returned with %u forked frame(s) not joined; "
            "every knit_fork must be matched by a knit_join before the task "
            "returns\n",
            name != NULL ? name : "?", (void *)(uintptr_t)fn,
            q->head - head_at_entry);
    abort();
}

int knit__frames_root(knit_pool *h, knit_fn fn, void *arg) {
    struct knit__tls *tls = knit__tls_get();
    if (tls->current != NULL && tls->cpool == h->p) {
        /* Inside one of this pool's tasks: fork from it. */
        fn(tls->current, arg);
        return 0;
    }
    knit_future *f = NULL;
    int rc = knit_submit(h, fn, arg, &f);
    if (rc == KNIT_EAGAIN) { /* the bound, under KNIT_FAIL: run it here */
        fn(NULL, arg);
        return 0;
    }
    if (rc < 0) return rc;
    rc = knit_await(f, -1, NULL);
    knit_future_release(f);
    return rc;
}
