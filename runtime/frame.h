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

/* idx of a frame whose child already ran at the fork. */
#define KNIT__FR_INLINE UINT32_MAX
/* idx of a frame that was joined (or never forked): a second join fails. */
#define KNIT__FR_JOINED (UINT32_MAX - 1)

struct knit__frame {
    knit_fn fn;
    void *arg;
    void *result;           /* the child's, once it ran */
    const knit_task *parent; /* the forking task (valid until the join) */
    char *message;          /* a failed child's knit_task_fail text */
    int code, task_code;    /* 0 / KNIT_ETASK and the child's code */
    uint32_t idx;           /* slot in the fork deque, or KNIT__FR_* */
    uint32_t magic;         /* KNIT__FR_MAGIC while forked */
    /* Written by the owner before the frame can be stolen (relaxed: the
     * share's release CAS publishes it); then by the thief. */
    _Atomic uintptr_t state;
};
#define KNIT__FR_MAGIC 0x6b666672u /* "kffr" */

_Static_assert(sizeof(struct knit__frame) <= sizeof(knit_frame),
               "knit_frame is too small for struct knit__frame");
_Static_assert(_Alignof(struct knit__frame) <= _Alignof(knit_frame),
               "knit_frame is not aligned enough");

/* One per consumer id. [tail, split) is shared (thieves take from tail
 * with a CAS on ts); [split, head) is private to the owner. */
typedef struct knit__fdq {
    /* tail in the low 32 bits, split in the high 32: one word, so a thief's
     * CAS fails when either moved. Thieves move tail, the owner split (and
     * tail when it resets an emptied deque). */
    alignas(64) _Atomic uint64_t ts;
    /* Set by an idle thief that found nothing shared; the owner shares
     * half its private part at its next fork and clears it. */
    alignas(64) _Atomic uint32_t movesplit;
    /* Owner-only (and whoever holds the consumer id next: the id's hand-
     * over orders them). */
    alignas(64) uint32_t head; /* one line with split and poll */
    uint32_t split, poll;
    struct knit__frame *_Atomic cells[KNIT_FORK_DEPTH];
} knit__fdq;

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
/* Debug check at the end of a task: the task's frames are all joined. */
void knit__fdq_check_joined(const knit__fdq *q, uint32_t head_at_entry,
                            knit_fn fn);

#endif
