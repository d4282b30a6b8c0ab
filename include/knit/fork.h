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

/* A complete type so it can live on the stack; its fields are private. */
typedef struct knit_frame {
    union {
        void *align_p_;
        uint64_t align_u_;
        unsigned char bytes_[72];
    } private_;
} knit_frame;

/* Forks fn(child, arg). 0; KNIT_EINVAL (fr or fn NULL). */
int knit_fork(knit_task *task, knit_frame *fr, knit_fn fn, void *arg);

/* Joins the newest unjoined frame fr of task: 0 and the child's result in
 * *result (if result is not NULL); KNIT_ETASK when the child failed (its
 * code and message in knit_last_error()); KNIT_EINVAL (NULL frame, a frame
 * that is not the newest unjoined one of this task, or one not forked). */
int knit_join(knit_task *task, knit_frame *fr, void **result);

#ifdef __cplusplus
}
#endif
#endif /* KNIT_FORK_H */
