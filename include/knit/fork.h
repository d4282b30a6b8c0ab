/* Fork-join frames: the second kind of child task, beside futures.
 *
 *   knit_frame fr;                         // on the forking task's stack
 *   knit_fork(task, &fr, fib_task, &n1);   // child 1: may be stolen
 *   void *b = fib_task(task, &n2);         // the caller's own share
 *   void *a; knit_join(task, &fr, &a);     // child 1's result
 *
 * A forked child sits in the forking worker's fork deque. Most are never
 * stolen: the join then calls fn right there, a plain call with no atomic
 * read-modify-write and no fence. When another worker is idle, the oldest
 * forked children are shared and a thief runs them; the join then waits
 * for the thief, running other work meanwhile. Pick frames for recursive
 * divide and conquer inside a task (fib, quicksort, tree walks, reduce);
 * pick futures (knit_submit) for anything that outlives the forking call,
 * is awaited by another thread, has a timeout, a continuation or a
 * payload, or is cancelled on its own.
 *
 * Rules (the frame lives on the caller's stack, so these are not
 * optional):
 *   - every fork is joined by the task that forked it, before that task
 *     returns; joins are LIFO: the newest unjoined frame first (a join of
 *     any other is KNIT_EINVAL and changes nothing). A task that returns
 *     with frames unjoined is undefined behaviour; builds without NDEBUG
 *     abort and name the function.
 *   - a frame is forked once and joined once; after the join it may be
 *     forked again.
 *
 * The child gets a knit_task of its own: it may fork, submit, await, and
 * fail (knit_task_fail), and the join reports that failure like
 * knit_await. knit_task_cancelled(child) is true when the root task's
 * future was cancelled or the pool is cancelling; a child is never skipped
 * for it (check the flag). knit_task_bytes, knit_task_take_buf,
 * knit_task_return_buf and knit_task_antecedent are for future tasks only:
 * in a frame child they fail with KNIT_EINVAL.
 *
 * With task == NULL (outside any task) fn runs at the fork, on the calling
 * thread, and the join returns its outcome; so does a fork when the
 * worker's fork deque is full (KNIT_FORK_DEPTH frames): never an abort.
 */
#ifndef KNIT_FORK_H
#define KNIT_FORK_H

#include <stdint.h>

#include "knit/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct knit_task knit_task;
typedef void *(*knit_fn)(knit_task *task, void *arg);

/* Frames one worker holds unjoined before a fork runs its child at once. */
#define KNIT_FORK_DEPTH 4096

/* A complete type so it can live on the stack; its fields are private.
 * Pointer-sized words, not bytes: a char array would make GCC's
 * -fstack-protector put a stack canary in every function that forks. */
typedef struct knit_frame {
    union {
        void *align_p_;
        uint64_t align_u_;
        void *words_[9];
    } private_;
} knit_frame;

/* Forks fn(child, arg). 0; KNIT_EINVAL (fr or fn NULL). */
int knit_fork(knit_task *task, knit_frame *fr, knit_fn fn, void *arg);

/* Joins the newest unjoined frame fr of task: 0 and the child's result in
 * *result (if result is not NULL); KNIT_ETASK when the child failed (its
 * code and message in knit_last_error()); KNIT_EINVAL (NULL frame, a frame
 * that is not the newest unjoined one of this task, or one not forked). */
int knit_join(knit_task *task, knit_frame *fr, void **result);


/* ---- Private: the layout the inline knit_fork / knit_join use ----
 *
 * Nothing below is API. It is here so that, in C11 with NDEBUG, the two
 * calls of the common case compile into the caller: a fork is three
 * stores into the frame and two into the worker's fork deque; a join of
 * a child nobody took is a few loads and compares, three stores and the
 * call (the design is in runtime/frame.c). Anything else (outside a task,
 * a shared or stolen frame, a misuse, a full deque, C++, a build without
 * NDEBUG, or KNIT_NO_INLINE_FORK defined) calls the library's knit_fork /
 * knit_join, which check everything. The layout may change in any
 * release, with the library's major version. */
#if !defined(__cplusplus) && defined(__STDC_VERSION__) && \
    __STDC_VERSION__ >= 201112L && !defined(__STDC_NO_ATOMICS__) && \
    defined(__GNUC__)
#define KNIT__FORK_LAYOUT 1
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>

struct knit__pool;
struct knit_future;

/* `inl` of a frame whose child already ran (at its fork, outside a task
 * or with the deque full; or at an inline join that failed), until the
 * library's knit_join reports its outcome. */
#define KNIT__FR_INLINE 0x6b66696eu /* "kfin" */

/* A forked child. The fork writes fn, arg and parent; the rest is written
 * only when the frame is shared, stolen or run at its fork. */
struct knit__frame {
    knit_fn fn;
    void *arg;
    knit_task *parent;   /* the forking task (valid until the join) */
    void *result;        /* a stolen or inline child's */
    char *message;       /* a stolen or inline failed child's text */
    int code, task_code; /* 0 / KNIT_ETASK and the child's code */
    uint32_t inl;        /* KNIT__FR_INLINE: ran at the fork */
    /* Written by the owner before the frame can be stolen (relaxed: the
     * share's seq-cst CAS publishes it); then by the thief. */
    _Atomic uintptr_t state;
};

/* One per consumer id (worker, or helper id lent to an awaiting thread).
 * [tail, split) is shared (thieves take from tail with a CAS on ts);
 * [split, head) is private to the owner. */
typedef struct knit__fdq {
    /* tail in the low 32 bits, split in the high 32: one word, so a thief's
     * CAS fails when either moved. Thieves move tail, the owner split (and
     * tail when it resets an emptied deque). */
    alignas(64) _Atomic uint64_t ts;
    /* Set by a thief that found nothing shared; the owner shares half its
     * private part at its next fork and clears it. */
    alignas(64) _Atomic uint32_t movesplit;
    /* Owner-only (and whoever holds the consumer id next: the id's hand-
     * over orders them). */
    alignas(64) uint32_t head; /* one line with split */
    uint32_t split;
    struct knit__frame *_Atomic cells[KNIT_FORK_DEPTH];
} knit__fdq;

/* A running task's context. A task run from a future, a stolen frame
 * child and a frame child run at its fork are "full": every field is set
 * and `full` points to the task itself. A frame child that its forking
 * thread runs at the join (the common case) is "light": only full, fdq
 * and failed are set on entry; `full` is the full task of the thread
 * that runs it, which the fields below `label` are read through. code
 * and message are valid only when failed is set; label only once
 * knit_task_label set it (a light child gets no timeline span). */
struct knit_task {
    knit_task *full;
    knit__fdq *fdq; /* where its forks go: its thread's consumer id's */
    int failed;
    int code;
    char *message;
    const char *label; /* knit_task_label, for the timeline */
    /* Full tasks only: */
    struct knit__pool *pool;    /* NULL: a frame child forked outside a task */
    struct knit_future *future; /* a frame child: its root task's (cancel) */
    bool frame_child;           /* forked (knit_fork), not submitted */
};

/* The fork of the common case: a task with room in its deque that is not
 * its deque's first (which shares) and that no thief asked for. */
static inline __attribute__((always_inline)) int
knit__fork_fast(knit_task *task, knit_frame *frame, knit_fn fn, void *arg) {
    struct knit__frame *f = (struct knit__frame *)(void *)frame;
    knit__fdq *q;
    uint32_t h;
    if (__builtin_expect(task != NULL && f != NULL && fn != NULL &&
                             (q = task->fdq) != NULL &&
                             (h = q->head) - 1u < KNIT_FORK_DEPTH - 1u &&
                             atomic_load_explicit(&q->movesplit,
                                                  memory_order_relaxed) == 0,
                         1)) {
        f->fn = fn;
        f->arg = arg;
        f->parent = task;
        /* Relaxed: a private frame is the owner's; a later share's
         * seq-cst CAS on ts publishes the cell and the frame. */
        atomic_store_explicit(&q->cells[h], f, memory_order_relaxed);
        q->head = h + 1;
        return 0;
    }
    return (knit_fork)(task, frame, fn, arg);
}

/* The deque of task if f is its newest frame and was never shared (split
 * only grows when the owner shares), else NULL. Every cell below head is a
 * live frame, so f == cells[h] also rules out a NULL, joined or
 * never-forked frame. Plain and relaxed accesses to the owner's lines. */
static inline __attribute__((always_inline)) knit__fdq *
knit__join_private_top(knit_task *task, struct knit__frame *f) {
    knit__fdq *q;
    if (__builtin_expect(task != NULL && (q = task->fdq) != NULL, 1)) {
        uint32_t h = q->head - 1u;
        if (__builtin_expect(h < KNIT_FORK_DEPTH && h >= q->split &&
                                 atomic_load_explicit(&q->cells[h],
                                                      memory_order_relaxed) == f &&
                                 f->parent == task,
                             1))
            return q;
    }
    return NULL;
}

/* The join of the common case (see knit__join_private_top): pops the
 * frame and runs the child here as a light task. */
static inline __attribute__((always_inline)) int
knit__join_fast(knit_task *task, knit_frame *frame, void **result) {
    struct knit__frame *f = (struct knit__frame *)(void *)frame;
    knit__fdq *q = knit__join_private_top(task, f);
    if (__builtin_expect(q != NULL, 1)) {
        q->head--;
        knit_task child;
        child.full = task->full;
        child.fdq = q;
        child.failed = 0;
        void *r = f->fn(&child, f->arg);
        if (__builtin_expect(!child.failed, 1)) {
            if (result != NULL) *result = r;
            return 0;
        }
        /* Failed (rare): hand the outcome over as a frame run at its
         * fork; the library's join reports it and frees the message. */
        f->code = KNIT_ETASK;
        f->task_code = child.code;
        f->message = child.message;
        f->inl = KNIT__FR_INLINE;
        return (knit_join)(task, frame, result);
    }
    return (knit_join)(task, frame, result);
}

#if defined(NDEBUG) && !defined(KNIT_NO_INLINE_FORK) && \
    !defined(KNIT__FORK_OUT_OF_LINE)
#define knit_fork(task, frame, fn, arg) knit__fork_fast(task, frame, fn, arg)
#define knit_join(task, frame, result) knit__join_fast(task, frame, result)
#endif
#endif /* the private layout */

#ifdef __cplusplus
}
#endif
#endif /* KNIT_FORK_H */
