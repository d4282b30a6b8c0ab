/* The lane core ("carpet"): one producer, N consumers, 32 lanes.
 *
 * Words, and who writes them
 * --------------------------
 *   host_bits    written only by the producer (release store). Bit i toggles
 *                each time the producer publishes lane i.
 *   worker_bits  written only by consumers (atomic xor, release), each xor
 *                retiring exactly the lanes its claim visited. The producer
 *                only reads it (acquire), to refresh its shadow.
 *   doorbell     armed by the one consumer that parks on this carpet,
 *                signalled by the producer (see doorbell.h).
 *   discipline   words the claim discipline keeps (ticket: head, tail and
 *                order ring; dekker: intent words and liveness mask), in the
 *                state block after the slots, each on its own line.
 *   slots        slot i is written (plain stores) only by the producer and
 *                only while lane i is free; it is read only by the consumer
 *                that owns lane i, between its claim and its retire.
 * Each control word sits alone on its own 64-byte line, and the producer's
 * private fields on another, so a poll never shares a line with a write it
 * does not need to see.
 *
 * Lane i is in flight iff bit i of (host_bits ^ worker_bits) is set.
 *
 * Why a lane is never claimed twice
 * ---------------------------------
 * A consumer visits a lane only once the discipline has made it the lane's
 * sole owner (ticket: a successful CAS of the 64-bit head past the lane's
 * ticket; dekker: exclusive intent on the lane's region; single: there is
 * one consumer). It retires the lane by xor-ing its bit into worker_bits
 * exactly once, which makes bit i of host ^ worker clear: the lane reads
 * free, to every discipline, until the producer publishes it again.
 *
 * Why a published lane is never lost
 * ----------------------------------
 * The producer hands out only lanes free in its shadow, free =
 * ~(host_local ^ worker_shadow). The shadow is an old value of worker_bits,
 * and worker_bits only changes by retiring in-flight lanes, so a stale
 * shadow can only show a lane as busy that is already free (false busy),
 * never a pending lane as free: the producer never overwrites a slot a
 * consumer has not retired. Every publish toggles host_bits with a release
 * store after the slot is written, so a consumer that sees the bit (acquire)
 * sees the slot. A published lane stays in flight until some consumer
 * retires it, and the disciplines retire on every exit path of a claim.
 * When no lane is free the producer reloads worker_bits once and, if still
 * full, reports KNIT_EAGAIN: it never waits here, so work already published
 * keeps flowing without the producer's help.
 */
#include "runtime/carpet.h"

#include <assert.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/asym_fence.h"
#include "runtime/doorbell.h"
#include "base/error.h"
#include "runtime/trace.h"

static_assert(sizeof(knit__lane_task) == KNIT__CACHE_LINE,
              "a slot's header is exactly one cache line");
static_assert(sizeof(knit__slot) % KNIT__CACHE_LINE == 0,
              "slots are whole cache lines");

/* The producer's private line: nobody else reads or writes it. */
struct knit__producer {
    uint32_t host_local;    /* the value of host_bits it last stored */
    uint32_t worker_shadow; /* a (possibly stale) copy of worker_bits */
    uint64_t seq;           /* next publication number */
    uint32_t burst;         /* lanes published since the last flush */
    uint64_t published, flushes, shadow_reloads, full; /* stats */
};

struct knit_carpet {
    alignas(KNIT__CACHE_LINE) _Atomic uint32_t host_bits;
    alignas(KNIT__CACHE_LINE) _Atomic uint32_t worker_bits;
    alignas(KNIT__CACHE_LINE) knit__doorbell bell;
    alignas(KNIT__CACHE_LINE) _Atomic uint64_t rings; /* stat, producer */
    alignas(KNIT__CACHE_LINE) struct knit__producer prod;
    /* Read-mostly configuration, set before the carpet is shared. */
    alignas(KNIT__CACHE_LINE) const knit_sched_ops *ops;
    void *state;         /* the discipline's block (after the slots) */
    knit__claim_fn claim; /* ops->claim, or the trace wrapper */
    knit_sched_params params;
    knit_claim_trace_fn trace;
    void *trace_ctx;
    uint64_t *trace_lost; /* per consumer, written by that consumer only */
    alignas(KNIT__CACHE_LINE) knit__slot slots[KNIT_LANES];
};

static_assert(offsetof(struct knit_carpet, host_bits) % KNIT__CACHE_LINE == 0,
              "host_bits starts a line");
static_assert(offsetof(struct knit_carpet, worker_bits) ==
                  offsetof(struct knit_carpet, host_bits) + KNIT__CACHE_LINE,
              "worker_bits alone on the next line");
static_assert(offsetof(struct knit_carpet, bell) ==
                  offsetof(struct knit_carpet, worker_bits) + KNIT__CACHE_LINE,
              "the doorbell alone on its line");
static_assert(offsetof(struct knit_carpet, prod) % KNIT__CACHE_LINE == 0,
              "producer-private fields on their own line");
static_assert(sizeof(struct knit__producer) <= KNIT__CACHE_LINE,
              "producer-private fields fit one line");
static_assert(offsetof(struct knit_carpet, slots) % KNIT__CACHE_LINE == 0,
              "slot 0 starts a line");
static_assert(sizeof(struct knit_carpet) % KNIT__CACHE_LINE == 0,
              "the state block after the carpet starts a line");

static size_t knit__round_line(size_t n) {
    return (n + KNIT__CACHE_LINE - 1) & ~(size_t)(KNIT__CACHE_LINE - 1);
}

static bool knit__is_pow2(unsigned v) { return v != 0 && (v & (v - 1)) == 0; }

int knit__carpet_create(const knit_sched_ops *ops, const knit_sched_params *p,
                        knit_claim_trace_fn trace, void *trace_ctx,
                        knit_carpet **out) {
    if (out == NULL) return knit__fail(KNIT_EINVAL, "carpet: out is NULL");
    *out = NULL;
    if (ops == NULL || ops->claim == NULL || p == NULL)
        return knit__fail(KNIT_EINVAL, "carpet: no discipline or parameters");
    if (p->consumers < 1 || p->consumers > KNIT_SCHED_MAX_CONSUMERS)
        return knit__fail(KNIT_EINVAL, "consumers=%u must be in 1..%u",
                          p->consumers, KNIT_SCHED_MAX_CONSUMERS);
    if (!knit__is_pow2(p->region_lanes) || p->region_lanes > KNIT_LANES)
        return knit__fail(KNIT_EINVAL,
                          "region_lanes=%u must be a power of two in 1..%u",
                          p->region_lanes, KNIT_LANES);
    if (ops->check != NULL) {
        int rc = ops->check(p);
        if (rc < 0) return rc;
    }
    size_t base = sizeof(struct knit_carpet);
    size_t state = knit__round_line(ops->state_size);
    size_t lost = trace ? knit__round_line(sizeof(uint64_t) * p->consumers) : 0;
    size_t total = base + state + lost;
    struct knit_carpet *c = knit__aligned_alloc(KNIT__CACHE_LINE, total);
    if (c == NULL)
        return knit__fail(KNIT_ENOMEM, "carpet: cannot allocate %zu bytes",
                          total);
    memset(c, 0, total);
    atomic_init(&c->host_bits, 0);
    atomic_init(&c->worker_bits, 0);
    atomic_init(&c->bell.word, KNIT__BELL_OFF);
    atomic_init(&c->rings, 0);
    c->ops = ops;
    c->state = ops->state_size ? (char *)c + base : NULL;
    c->params = *p;
    c->trace = trace;
    c->trace_ctx = trace_ctx;
    c->trace_lost = trace ? (uint64_t *)((char *)c + base + state) : NULL;
    /* Chosen once: an untraced carpet calls the discipline's claim itself,
     * so the hot path pays no flag test for tracing. */
    c->claim = trace ? knit__trace_claim : ops->claim;
    if (ops->init != NULL) {
        int rc = ops->init(c, c->state, p);
        if (rc < 0) {
            free(c);
            return rc;
        }
    }
    *out = c;
    return 0;
}

void knit__carpet_destroy(knit_carpet *c) {
    if (c == NULL) return;
    if (c->ops->fini != NULL) c->ops->fini(c, c->state);
    free(c);
}

/* ---- producer ---- */

int knit__carpet_publish(knit_carpet *c, const knit__lane_task *t,
                         const void *bytes, size_t len) {
    if (len > KNIT__INLINE_BYTES)
        return knit__fail(KNIT_E2BIG, "inline payload of %zu bytes over %u",
                          len, KNIT__INLINE_BYTES);
    struct knit__producer *pr = &c->prod;
    uint32_t free_lanes = ~(pr->host_local ^ pr->worker_shadow);
    if (free_lanes == 0) {
        /* The shadow shows no free lane: reload it, once. acquire pairs with
         * the consumers' release xor in knit_carpet_retire, so their reads
         * of a retired slot happen before we overwrite it. */
        pr->worker_shadow =
            atomic_load_explicit(&c->worker_bits, memory_order_acquire);
        pr->shadow_reloads++;
        free_lanes = ~(pr->host_local ^ pr->worker_shadow);
        if (free_lanes == 0) {
            pr->full++;
            return KNIT_EAGAIN;
        }
    }
    unsigned lane = 31u - (unsigned)__builtin_clz(free_lanes);
    knit__slot *s = &c->slots[lane];
    /* Lanes go out from high to low: the next one is usually lane - 1,
     * last read by a consumer on another core. Fetch it for writing. */
    if (lane > 0) __builtin_prefetch(&c->slots[lane - 1], 1, 3);
    s->task = *t;
    s->task.seq = pr->seq++;
    s->task.len = (uint32_t)len;
    if (len) memcpy(s->data, bytes, len);
    if (c->ops->publish != NULL) c->ops->publish(c, c->state, lane);
    pr->host_local ^= 1u << lane;
    /* Publishes the slot: pairs with the consumers' acquire loads of
     * host_bits (dekker, single) or, for ticket, is covered by the tail's
     * release store at flush, which follows it in program order. */
    atomic_store_explicit(&c->host_bits, pr->host_local, memory_order_release);
    pr->burst++;
    pr->published++;
    return (int)lane;
}

int knit__carpet_flush(knit_carpet *c) {
    struct knit__producer *pr = &c->prod;
    if (pr->burst == 0) return 0;
    pr->burst = 0;
    if (c->ops->flush != NULL) c->ops->flush(c, c->state);
    pr->flushes++;
    /* B1 of the doorbell protocol (doorbell.h), between the publication's
     * store of host_bits (the word the parked consumer's re-check loads,
     * A2) and the doorbell load in knit__doorbell_ring (B2). With the
     * asymmetric fence on, a compiler barrier: the parker's membarrier
     * (knit__asym_heavy, between its A1 and A2) pays for the StoreLoad
     * order, so a publish does not wait here for the host_bits line that
     * a polling consumer just read. Off, a seq-cst RMW on host_bits that
     * changes nothing. */
    if (knit__asym_on())
        knit__asym_light();
    else
        atomic_fetch_or_explicit(&c->host_bits, 0, memory_order_seq_cst);
    if (knit__doorbell_ring(&c->bell)) {
        /* Only the producer writes this counter; relaxed is enough. */
        atomic_store_explicit(
            &c->rings, atomic_load_explicit(&c->rings, memory_order_relaxed) + 1,
            memory_order_relaxed);
        return 1;
    }
    return 0;
}

uint32_t knit__carpet_producer_busy(const knit_carpet *c) {
    return c->prod.host_local ^ c->prod.worker_shadow;
}

/* ---- consumers ---- */

int knit__carpet_claim(knit_carpet *c, unsigned consumer,
                       knit_lane_visit_fn visit, void *ctx) {
    return c->claim(c, c->state, consumer, visit, ctx);
}

knit__claim_fn knit__carpet_claim_fn(const knit_carpet *c) { return c->claim; }

const knit__slot *knit__carpet_slot(const knit_carpet *c, unsigned lane) {
    return &c->slots[lane & (KNIT_LANES - 1)];
}

void knit__carpet_consumer_dead(knit_carpet *c, unsigned consumer) {
    if (consumer >= c->params.consumers) return;
    if (c->ops->consumer_dead != NULL)
        c->ops->consumer_dead(c, c->state, consumer);
}

bool knit__carpet_pending(const knit_carpet *c) {
    /* seq-cst: these are the re-check loads (A2) of the doorbell protocol. */
    return (atomic_load_explicit(&c->host_bits, memory_order_seq_cst) ^
            atomic_load_explicit(&c->worker_bits, memory_order_seq_cst)) != 0;
}

void knit__carpet_arm(knit_carpet *c) { knit__doorbell_arm(&c->bell); }

int knit__carpet_sleep_if_idle(knit_carpet *c, int64_t timeout_ns) {
    /* The re-check (A2) after the arm (A1): a publication that raced the
     * arm is seen here, without sleeping. With the asymmetric fence, the
     * heavy side of B1 (see knit__carpet_flush) comes first, and only
     * when a cheap look finds nothing (it is a syscall): a producer that
     * did not see ARMED made its publication visible to the re-check. */
    if (knit__asym_on() && !knit__carpet_pending(c)) knit__asym_heavy();
    if (knit__carpet_pending(c)) {
        knit__doorbell_disarm(&c->bell);
        return 0;
    }
    return knit__doorbell_sleep(&c->bell, timeout_ns) ? 1 : 0;
}

int knit__carpet_park(knit_carpet *c, int64_t timeout_ns) {
    knit__carpet_arm(c);
    return knit__carpet_sleep_if_idle(c, timeout_ns);
}

uint32_t knit__carpet_doorbell_state(const knit_carpet *c) {
    return knit__doorbell_state(&c->bell);
}

/* ---- the plugin ABI's view ---- */

uint32_t knit_carpet_host_bits(const knit_carpet *c) {
    /* Pairs with the producer's release store in knit__carpet_publish. */
    return atomic_load_explicit(&c->host_bits, memory_order_acquire);
}

uint32_t knit_carpet_worker_bits(const knit_carpet *c) {
    /* Pairs with the release xor in knit_carpet_retire. */
    return atomic_load_explicit(&c->worker_bits, memory_order_acquire);
}

void knit_carpet_retire(knit_carpet *c, uint32_t lanes) {
    if (lanes == 0) return;
    /* release: this consumer's reads of the retired slots happen before the
     * producer (acquire reload of its shadow) may overwrite them. */
    atomic_fetch_xor_explicit(&c->worker_bits, lanes, memory_order_release);
}

uint64_t knit_carpet_lane_seq(const knit_carpet *c, unsigned lane) {
    return c->slots[lane & (KNIT_LANES - 1)].task.seq;
}

/* ---- introspection ---- */

void knit__carpet_stats_get(const knit_carpet *c, knit__carpet_stats *out) {
    out->published = c->prod.published;
    out->flushes = c->prod.flushes;
    out->rings = atomic_load_explicit(&c->rings, memory_order_relaxed);
    out->shadow_reloads = c->prod.shadow_reloads;
    out->full = c->prod.full;
}

const knit_sched_ops *knit__carpet_ops(const knit_carpet *c) { return c->ops; }
void *knit__carpet_state(const knit_carpet *c) { return c->state; }
const knit_sched_params *knit__carpet_params(const knit_carpet *c) {
    return &c->params;
}

void knit__carpet_trace_sink(const knit_carpet *c, knit_claim_trace_fn *fn,
                             void **ctx) {
    *fn = c->trace;
    *ctx = c->trace_ctx;
}

uint64_t *knit__carpet_trace_lost(knit_carpet *c, unsigned consumer) {
    return &c->trace_lost[consumer];
}
