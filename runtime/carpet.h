/* Internal API of the lane core (a "carpet"). C and C++ may include this
 * header: the struct with the atomic words stays inside carpet.c. The
 * protocol and who writes which word are described at the top of carpet.c.
 */
#ifndef KNIT_RUNTIME_CARPET_H
#define KNIT_RUNTIME_CARPET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "knit/sched.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KNIT__CACHE_LINE 64u
/* Bytes of payload a slot carries inline, after its one-line header. */
#define KNIT__INLINE_BYTES 64u

/* A slot's header: one cache line. The producer writes it with plain stores
 * before it publishes the lane; the claiming consumer copies it out. */
typedef struct knit__lane_task {
    void *fn;            /* what to run */
    void *arg;           /* its argument, or a payload descriptor */
    void *future;        /* where the result goes */
    uint64_t enqueue_ns; /* when it was published (0 if not measured) */
    uint64_t seq;        /* publication number, set by the carpet */
    uint32_t len;        /* bytes used in the inline area */
    uint16_t kind;       /* payload kind (inline, arena, moved, ...) */
    uint16_t flags;
    uint64_t user[2];    /* two words for the runtime above the carpet */
} knit__lane_task;

/* A lane's slot: the header line plus the inline payload area. */
typedef struct knit__slot {
    knit__lane_task task;
    unsigned char data[KNIT__INLINE_BYTES];
} knit__slot;

typedef int (*knit__claim_fn)(knit_carpet *c, void *state, unsigned consumer,
                              knit_lane_visit_fn visit, void *ctx);

/* Creates a carpet claimed through `ops` by p->consumers consumers. `trace`
 * (may be NULL) wraps every claim. KNIT_EINVAL with a message for a bad
 * configuration (ops->check), KNIT_ENOMEM. */
int knit__carpet_create(const knit_sched_ops *ops, const knit_sched_params *p,
                        knit_claim_trace_fn trace, void *trace_ctx,
                        knit_carpet **out);
void knit__carpet_destroy(knit_carpet *c);

/* ---- producer (one thread) ---- */

/* Writes `t` and `len` inline bytes into a free lane and publishes it.
 * Returns the lane (0..31), KNIT_EAGAIN when all 32 lanes are in flight,
 * KNIT_E2BIG when len > KNIT__INLINE_BYTES. The lane handed out is the
 * highest free lane in the producer's shadow; the shadow of worker_bits is
 * reloaded only when it shows no free lane. End each burst with _flush. */
int knit__carpet_publish(knit_carpet *c, const knit__lane_task *t,
                         const void *bytes, size_t len);
/* Ends a burst: lets the discipline make it visible (ticket's tail store),
 * then rings the doorbell if a consumer is parked on it. Returns 1 when it
 * rang, else 0. Cheap when there is nothing to flush. */
int knit__carpet_flush(knit_carpet *c);
/* Lanes the producer sees in flight (host ^ its shadow; may over-count). */
uint32_t knit__carpet_producer_busy(const knit_carpet *c);

/* ---- consumers ---- */

/* Claims through the discipline (or its trace wrapper). See sched.h. */
int knit__carpet_claim(knit_carpet *c, unsigned consumer,
                       knit_lane_visit_fn visit, void *ctx);
/* The function _claim calls: the discipline's own claim when untraced. */
knit__claim_fn knit__carpet_claim_fn(const knit_carpet *c);
/* The slot of a lane the caller owns (inside a visit). */
const knit__slot *knit__carpet_slot(const knit_carpet *c, unsigned lane);
/* Declares consumer `consumer` dead (the discipline's consumer_dead). */
void knit__carpet_consumer_dead(knit_carpet *c, unsigned consumer);
/* True when some lane is in flight (host_bits ^ worker_bits != 0). */
bool knit__carpet_pending(const knit_carpet *c);

/* Parks the calling consumer on the carpet's doorbell until a publication
 * (or timeout_ns; < 0: no limit). Arms, re-checks `pending`, and sleeps only
 * if nothing is pending. Returns 1 if it slept and was rung, 0 otherwise.
 * One sleeper per carpet at a time. */
int knit__carpet_park(knit_carpet *c, int64_t timeout_ns);
/* The two halves of _park, for tests that interleave a publication. */
void knit__carpet_arm(knit_carpet *c);
int knit__carpet_sleep_if_idle(knit_carpet *c, int64_t timeout_ns);
uint32_t knit__carpet_doorbell_state(const knit_carpet *c);

/* ---- introspection ---- */

typedef struct knit__carpet_stats {
    uint64_t published;      /* lanes published */
    uint64_t flushes;        /* bursts that made lanes visible */
    uint64_t rings;          /* doorbell wakes */
    uint64_t shadow_reloads; /* producer reloads of worker_bits */
    uint64_t full;           /* publishes that found no free lane */
} knit__carpet_stats;

void knit__carpet_stats_get(const knit_carpet *c, knit__carpet_stats *out);
const knit_sched_ops *knit__carpet_ops(const knit_carpet *c);
void *knit__carpet_state(const knit_carpet *c);
const knit_sched_params *knit__carpet_params(const knit_carpet *c);

/* The trace wrapper's view (runtime/trace.c). */
void knit__carpet_trace_sink(const knit_carpet *c, knit_claim_trace_fn *fn,
                             void **ctx);
uint64_t *knit__carpet_trace_lost(knit_carpet *c, unsigned consumer);

#ifdef __cplusplus
}
#endif
#endif
