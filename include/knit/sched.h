/* knit — the scheduler plugin ABI: claim disciplines.
 *
 * A carpet is knit's lane core: one producer, any number of consumers, 32
 * lanes. The producer publishes a task into a free lane; consumers claim
 * published lanes. *How* consumers agree on who takes which lane is a claim
 * discipline, and a discipline is a plugin: a `knit_sched_ops` struct
 * registered by name. The built-ins ("ticket", the default, "dekker" and
 * "single") are registered through the same knit_sched_register() a user
 * calls, and use only the functions declared here.
 *
 * Threads and calls, per op (the carpet is the lane core; see
 * runtime/carpet.c for the words):
 *   check          any thread, before any carpet exists; pure.
 *   init           the creating thread, once per carpet, before any other
 *                  op; `state` is `state_size` zeroed bytes, 64-byte aligned.
 *   publish        the carpet's producer thread only, once per published
 *                  lane, after the slot is written and before the producer
 *                  toggles the lane's bit in host_bits (release).
 *   flush          the producer thread only, at the end of every burst of
 *                  publishes (also when a burst ends in an error). Returns 1
 *                  when it made lanes visible that were not before.
 *   claim          any consumer thread, concurrently with each other and
 *                  with the producer. `consumer` is the caller's id in
 *                  [0, consumers); one thread per id at a time. Calls
 *                  visit(ctx, lane) for each lane it owns, in run order, then
 *                  retires every visited lane with knit_carpet_retire() (one
 *                  call per claim, also when visit fails). Returns the
 *                  number of lanes visited, 0 when it found none, or a
 *                  negative code: visit's own error, or KNIT_ECLOSED.
 *                  A visit must only copy the slot out; tasks run after the
 *                  claim returns, so no lane is held while a task runs.
 *   consumer_dead  any thread, once per consumer that will never claim
 *                  again (it exited or crashed mid-claim); may race claims.
 *   fini           the destroying thread, once, after every other call.
 *   trace_note     only when a claim trace is attached; see below.
 */
#ifndef KNIT_SCHED_H
#define KNIT_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "knit/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KNIT_LANES 32u
#define KNIT_SCHED_ABI_VERSION 1u
/* Most registered disciplines, built-ins included. */
#define KNIT_SCHED_MAX 16u
/* Most consumers a carpet accepts. */
#define KNIT_SCHED_MAX_CONSUMERS 64u

typedef struct knit_carpet knit_carpet; /* opaque */

/* Fixed when the carpet is created. */
typedef struct knit_sched_params {
    unsigned consumers;    /* consumer ids are 0 .. consumers-1 */
    unsigned region_lanes; /* a power of two in [1, 32]; batch or region size */
} knit_sched_params;

/* Called by a claim once per owned lane, in run order. Nonzero stops the
 * claim: it retires the lanes visited so far (the failing one included)
 * and returns this value if it is negative, KNIT_ETASK if positive. */
typedef int (*knit_lane_visit_fn)(void *ctx, unsigned lane);

/* Receives one trace line per successful claim (no trailing newline). */
typedef void (*knit_claim_trace_fn)(void *ctx, const char *line);

typedef struct knit_sched_ops {
    uint32_t abi_version; /* KNIT_SCHED_ABI_VERSION */
    uint32_t size;        /* sizeof(knit_sched_ops) */
    const char *name;     /* 1-32 of [a-z0-9_-], unique in the registry */
    const char *summary;  /* one line */
    size_t state_size;    /* per-carpet state the runtime allocates */

    /* Optional. Rejects a configuration with a message (knit_sched_fail). */
    int (*check)(const knit_sched_params *p);
    /* Optional. Sets up `state` (zeroed) for a new carpet. */
    int (*init)(knit_carpet *c, void *state, const knit_sched_params *p);
    /* Optional. Producer: lane `lane` is written and about to be published. */
    void (*publish)(knit_carpet *c, void *state, unsigned lane);
    /* Optional. Producer: end of a burst. NULL means host_bits alone
     * publishes (each lane is claimable from its host_bits store). */
    int (*flush)(knit_carpet *c, void *state);
    /* Required. Consumer: claim lanes; see the contract above. */
    int (*claim)(knit_carpet *c, void *state, unsigned consumer,
                 knit_lane_visit_fn visit, void *ctx);
    /* Optional. */
    void (*consumer_dead)(knit_carpet *c, void *state, unsigned consumer);
    /* Optional. */
    void (*fini)(knit_carpet *c, void *state);
    /* Optional. Trace fields. Before a claim (after == 0) snapshot what the
     * line needs into note[] and return how many lanes look claimable to
     * this consumer; after a successful claim (after == 1) write the
     * discipline's fields ("head=8->16", "region=2 home=0") into buf and
     * return 0; note[3] then holds the number of lanes the claim visited.
     * Without it the line has the lanes and lost polls only. */
    long (*trace_note)(knit_carpet *c, void *state, unsigned consumer,
                       int after, uint64_t note[4], char *buf, size_t len);
} knit_sched_ops;

/* ---- the registry ---- */

/* Adds a discipline. `ops` must stay valid for the life of the process.
 * KNIT_EINVAL: NULL, a missing claim op, a bad name; KNIT_EABI: another
 * abi_version or a size smaller than version 1's; KNIT_EEXIST: the name is
 * taken (or was removed and is reserved, like "cas-mask"). Thread-safe. */
int knit_sched_register(const knit_sched_ops *ops);

/* The discipline registered as `name`, or NULL. Thread-safe. */
const knit_sched_ops *knit_sched_find(const char *name);

/* Validates a name coming from `source` (for the message, e.g. "sched" or
 * "KNIT_SCHED"). Unknown, misspelled and removed names fail with
 * KNIT_EINVAL and a message listing the valid names (and, for a removed one,
 * what to use instead). There is no fallback. */
int knit_sched_lookup(const char *name, const char *source,
                      const knit_sched_ops **out);

/* Picks the discipline for a pool: `requested` if not NULL, else the
 * KNIT_SCHED environment variable if set, else "ticket"; each validated
 * with knit_sched_lookup(). */
int knit_sched_resolve(const char *requested, const knit_sched_ops **out);

/* Copies up to `cap` registered disciplines (in registration order) into
 * out[] and returns how many are registered. */
size_t knit_sched_list(const knit_sched_ops **out, size_t cap);

/* The default discipline's name: "ticket". */
const char *knit_sched_default_name(void);

/* ---- what a discipline may use ---- */

/* host_bits: bit i toggles when the producer publishes lane i (acquire). */
uint32_t knit_carpet_host_bits(const knit_carpet *c);
/* worker_bits: bit i toggles when lane i is retired (acquire). A lane is
 * in flight iff its bit differs between the two words. */
uint32_t knit_carpet_worker_bits(const knit_carpet *c);
/* Retires `lanes` (xor into worker_bits, release): the producer may reuse
 * them as soon as it sees the bits. Exactly once per visited lane. */
void knit_carpet_retire(knit_carpet *c, uint32_t lanes);
/* Publication number of the task in an in-flight lane the caller owns or
 * has acquired through host_bits; increases by one per publish. */
uint64_t knit_carpet_lane_seq(const knit_carpet *c, unsigned lane);
/* Sets this thread's knit_last_error() message and returns `code`. */
int knit_sched_fail(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif /* KNIT_SCHED_H */
