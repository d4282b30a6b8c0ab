/* Internal: fork-join frames and the per-consumer fork deque (a split
 * deque). The protocol is described at the top of runtime/frame.c. C only.
 */
#ifndef KNIT_RUNTIME_FRAME_H
#define KNIT_RUNTIME_FRAME_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "knit/knit.h"

struct knit__pool;
struct knit__worker;

/* A frame's state word: QUEUED, STOLEN, DONE, or else the address of the
 * doorbell the forking task sleeps on while a thief runs the child. */
#define KNIT__FR_QUEUED ((uintptr_t)0)
#define KNIT__FR_STOLEN ((uintptr_t)1)
#define KNIT__FR_DONE ((uintptr_t)2)

/* struct knit__frame, knit__fdq and struct knit_task are defined in
 * <knit/fork.h> (its private layout section), which the inline knit_fork
 * and knit_join compile against. */
#ifndef KNIT__FORK_LAYOUT
#error "runtime/ is C11 with atomics: <knit/fork.h> must define the layout"
#endif

_Static_assert(sizeof(struct knit__frame) <= sizeof(knit_frame),
               "knit_frame is too small for struct knit__frame");
_Static_assert(_Alignof(struct knit__frame) <= _Alignof(knit_frame),
               "knit_frame is not aligned enough");

void knit__fdq_init(knit__fdq *q);
/* True when some frame is shared and not taken (seq-cst load: the parking
 * re-check, A2 in pool.c). */
bool knit__fdq_shared(knit__fdq *q);
/* A thief's try: takes the oldest shared frame of q (then run it with
 * knit__frame_run_stolen), or NULL; with nothing shared it asks q's owner
 * to share (movesplit). */
struct knit__frame *knit__fdq_take(knit__fdq *q);
/* Runs a taken frame's child as consumer `consumer` and hands the outcome
 * to the frame's owner. */
void knit__frame_run_stolen(struct knit__pool *p, struct knit__frame *f,
                            unsigned consumer, struct knit__worker *w);
/* Runs fn(task, arg), which forks, as a task of h: directly when the
 * caller is running one of h's tasks, else as a submitted task that the
 * caller awaits (helping); with the bound reached under KNIT_FAIL, on the
 * caller with task NULL (every fork then runs inline). fn reports its own
 * failures through its arg; returns 0 or the submit's or await's error. */
int knit__frames_root(knit_pool *h, knit_fn fn, void *arg);
/* Debug check at the end of a task: the task's frames are all joined
 * (nothing in builds with NDEBUG). */
void knit__fdq_unjoined(const knit__fdq *q, uint32_t head_at_entry, knit_fn fn);
static inline void knit__fdq_check_joined(const knit__fdq *q,
                                          uint32_t head_at_entry, knit_fn fn) {
#ifdef NDEBUG
    (void)q;
    (void)head_at_entry;
    (void)fn;
#else
    if (q->head != head_at_entry) knit__fdq_unjoined(q, head_at_entry, fn);
#endif
}

#endif
