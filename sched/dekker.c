/* "dekker": regions claimed through a Dekker handshake of intent words.
 *
 * The 32 lanes form 32/region_lanes regions; there must be at least one
 * region per consumer. Consumer i has a home region (regions*i/consumers)
 * and an intent word on its own line (the set of regions it is claiming).
 *
 * Claim, for consumer `me`:
 *   1. pending = host_bits ^ worker_bits; nothing pending: return, no write.
 *   2. Pick a region with pending lanes, from home onwards, preferring one
 *      no live peer wants; failing that, one no live senior wants.
 *   3. Store intent (seq-cst), then load the peers' intents (seq-cst): the
 *      StoreLoad order of Dekker. All intent stores and these loads are in
 *      one total order, so of two consumers that want one region at least
 *      one sees the other's intent.
 *   4. A live senior (lower id) with the region in its intent wins: clear
 *      ours and return. A live junior with it: wait until it clears (a
 *      junior that saw us withdraws; one that did not is finishing its
 *      claim). The liveness mask is re-read while waiting, so a dead junior
 *      never stalls a senior forever.
 *   5. take = pending lanes of the region (the last control loads).
 *   6. Visit them roughly oldest first (the producer fills lanes from high
 *      to low, so the walk starts at the highest pending lane whose upper
 *      neighbour, rotating within the region, is not pending), retire
 *      every visited lane with one xor, and only then clear intent
 *      (release): a peer that sees our intent clear (acquire) also sees the
 *      retire. Only roughly: the bits cannot tell a refilled upper lane
 *      from an old one. tests/model/dekker.pml (-DCHECK_OLDEST) shows a
 *      run where lane 1 is refilled while lane 0 is still pending and the
 *      newer task runs first. Nothing relies on the order within a region
 *      (single.c is the discipline that claims strictly in order).
 * A visit failure stops the walk; the visited lanes are retired, the rest
 * stay pending and the region is released.
 */
#include "sched/dekker.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

#include "runtime/carpet.h"
#include "base/cpu.h"

#define KNIT__DEKKER_MAX_CONSUMERS 32u

struct knit__dekker_consumer {
    alignas(KNIT__CACHE_LINE) _Atomic uint32_t want; /* its intent word */
    unsigned last_region; /* owner-only: region of the last claim (trace) */
};

struct knit__dekker {
    alignas(KNIT__CACHE_LINE) _Atomic uint32_t live;
    alignas(KNIT__CACHE_LINE) unsigned consumers, regions, region_lanes;
    uint32_t region_bits; /* mask of one region's lanes, at lane 0 */
    struct knit__dekker_consumer c[KNIT__DEKKER_MAX_CONSUMERS];
};

_Static_assert(sizeof(struct knit__dekker_consumer) == KNIT__CACHE_LINE,
               "each intent word alone on its line");

static int knit__dekker_check(const knit_sched_params *p) {
    unsigned regions = KNIT_LANES / p->region_lanes;
    if (regions < p->consumers)
        return knit_sched_fail(KNIT_EINVAL,
                               "dekker: region_lanes=%u yields %u regions, "
                               "too few for %u consumers",
                               p->region_lanes, regions, p->consumers);
    return 0;
}

static int knit__dekker_init(knit_carpet *c, void *state,
                             const knit_sched_params *p) {
    (void)c;
    struct knit__dekker *d = state;
    d->consumers = p->consumers;
    d->region_lanes = p->region_lanes;
    d->regions = KNIT_LANES / p->region_lanes;
    d->region_bits = p->region_lanes == KNIT_LANES
                         ? 0xffffffffu
                         : (1u << p->region_lanes) - 1u;
    for (unsigned i = 0; i < KNIT__DEKKER_MAX_CONSUMERS; i++)
        atomic_init(&d->c[i].want, 0);
    atomic_init(&d->live, p->consumers == 32 ? 0xffffffffu
                                             : (1u << p->consumers) - 1u);
    return 0;
}

static inline uint32_t knit__dekker_lanes(const struct knit__dekker *d,
                                          unsigned region) {
    return d->region_bits << (region * d->region_lanes);
}

static inline unsigned knit__dekker_home(const struct knit__dekker *d,
                                         unsigned me) {
    return (d->regions * me) / d->consumers;
}

static bool knit__dekker_junior_wants(struct knit__dekker *d, unsigned me,
                                      uint32_t intent) {
    uint32_t live = atomic_load_explicit(&d->live, memory_order_acquire);
    for (unsigned j = me + 1; j < d->consumers; j++) {
        if (!(live & (1u << j))) continue;
        /* seq-cst: the Dekker load (see step 3); it also acquires, pairing
         * with the junior's release clear: its retire is visible once we
         * see its intent gone. */
        if (atomic_load_explicit(&d->c[j].want, memory_order_seq_cst) & intent)
            return true;
    }
    return false;
}

/* The first lane to run in `region`: the oldest pending one, as far as
 * the bits can tell (see step 6 at the top). */
static unsigned knit__dekker_oldest(const struct knit__dekker *d,
                                    unsigned region, uint32_t take) {
    unsigned low = region * d->region_lanes;
    uint32_t lanes = (take >> low) & d->region_bits;
    uint32_t preds = ((lanes >> 1) | (lanes << (d->region_lanes - 1))) &
                     d->region_bits;
    uint32_t oldest = lanes & ~preds;
    return low + (oldest == 0 ? d->region_lanes - 1
                              : 31u - (unsigned)__builtin_clz(oldest));
}

static int knit__dekker_claim(knit_carpet *c, void *state, unsigned me,
                              knit_lane_visit_fn visit, void *ctx) {
    struct knit__dekker *d = state;
    uint32_t pending = knit_carpet_host_bits(c) ^ knit_carpet_worker_bits(c);
    if (pending == 0) return 0;
    uint32_t live = atomic_load_explicit(&d->live, memory_order_acquire);
    uint32_t peer_intent = 0, senior_intent = 0;
    for (unsigned i = 0; i < d->consumers; i++) {
        if (i == me || !(live & (1u << i))) continue;
        uint32_t w = atomic_load_explicit(&d->c[i].want, memory_order_relaxed);
        peer_intent |= w;
        if (i < me) senior_intent |= w;
    }
    /* The handshake below is the mutual exclusion; this choice is what
     * keeps the handshake live. Skipping regions that peers want (then
     * those seniors want) means a junior does not keep announcing intent
     * for a senior's region: tests/model/dekker.pml finds a non-progress
     * cycle (junior announces, withdraws, announces... while the senior
     * always finds its intent set) when any pending region may be chosen,
     * and none with this choice. */
    unsigned home = knit__dekker_home(d, me), region = d->regions;
    for (int pass = 0; pass < 2 && region == d->regions; pass++) {
        uint32_t avoid = pass == 0 ? peer_intent : senior_intent;
        for (unsigned k = 0; k < d->regions; k++) {
            unsigned r = (home + k) % d->regions;
            if ((pending & knit__dekker_lanes(d, r)) && !(avoid & (1u << r))) {
                region = r;
                break;
            }
        }
    }
    if (region == d->regions) return 0; /* all wanted by seniors */
    uint32_t intent = 1u << region;
    /* StoreLoad: this seq-cst store and the seq-cst loads of the peers'
     * intents below (and in knit__dekker_junior_wants) cannot reorder;
     * pairs with the same store/load pair in every other consumer's claim.
     * On x86 the store is an xchg, a full barrier. */
    atomic_store_explicit(&d->c[me].want, intent, memory_order_seq_cst);
    for (unsigned s = 0; s < me; s++) {
        if (!(live & (1u << s))) continue;
        if (atomic_load_explicit(&d->c[s].want, memory_order_seq_cst) &
            intent) {
            /* A senior wants it: withdraw. */
            atomic_store_explicit(&d->c[me].want, 0, memory_order_release);
            return 0;
        }
    }
    while (knit__dekker_junior_wants(d, me, intent)) knit__cpu_relax();
    uint32_t take = (knit_carpet_host_bits(c) ^ knit_carpet_worker_bits(c)) &
                    knit__dekker_lanes(d, region);
    if (take == 0) {
        atomic_store_explicit(&d->c[me].want, 0, memory_order_release);
        return 0;
    }
    unsigned low = region * d->region_lanes;
    unsigned high = low + d->region_lanes - 1;
    unsigned at = knit__dekker_oldest(d, region, take);
    uint32_t left = take, done = 0;
    int rc = 0, n = 0;
    for (unsigned step = 0; step < d->region_lanes && left; step++) {
        uint32_t bit = 1u << at;
        if (left & bit) {
            rc = visit(ctx, at);
            left ^= bit;
            done |= bit;
            n++;
            if (rc != 0) break;
        }
        at = at == low ? high : at - 1;
    }
    /* Retire before clearing intent (see step 6). */
    knit_carpet_retire(c, done);
    d->c[me].last_region = region;
    atomic_store_explicit(&d->c[me].want, 0, memory_order_release);
    return rc != 0 ? (rc < 0 ? rc : KNIT_ETASK) : n;
}

static void knit__dekker_consumer_dead(knit_carpet *c, void *state,
                                       unsigned consumer) {
    (void)c;
    struct knit__dekker *d = state;
    /* Peers stop honouring its intent: its region is free again. */
    atomic_fetch_and_explicit(&d->live, ~(1u << consumer), memory_order_acq_rel);
}

static long knit__dekker_trace_note(knit_carpet *c, void *state,
                                    unsigned consumer, int after,
                                    uint64_t note[4], char *buf, size_t len) {
    (void)note;
    struct knit__dekker *d = state;
    if (!after)
        return __builtin_popcount(knit_carpet_host_bits(c) ^
                                  knit_carpet_worker_bits(c));
    unsigned region = d->c[consumer].last_region;
    unsigned home = knit__dekker_home(d, consumer);
    snprintf(buf, len, "region=%u home=%u%s", region, home,
             region == home ? "" : " steal");
    return 0;
}

const knit_sched_ops knit__sched_dekker = {
    .abi_version = KNIT_SCHED_ABI_VERSION,
    .size = sizeof(knit_sched_ops),
    .name = "dekker",
    .summary = "regions claimed through intent words and a StoreLoad handshake",
    .state_size = sizeof(struct knit__dekker),
    .check = knit__dekker_check,
    .init = knit__dekker_init,
    .claim = knit__dekker_claim,
    .consumer_dead = knit__dekker_consumer_dead,
    .trace_note = knit__dekker_trace_note,
};

uint32_t knit__dekker_intent(const knit_carpet *c, unsigned consumer) {
    struct knit__dekker *d = knit__carpet_state(c);
    return atomic_load_explicit(&d->c[consumer].want, memory_order_acquire);
}

uint32_t knit__dekker_live(const knit_carpet *c) {
    struct knit__dekker *d = knit__carpet_state(c);
    return atomic_load_explicit(&d->live, memory_order_acquire);
}

void knit__dekker_force_intent(knit_carpet *c, unsigned consumer,
                               uint32_t regions) {
    struct knit__dekker *d = knit__carpet_state(c);
    atomic_store_explicit(&d->c[consumer].want, regions, memory_order_seq_cst);
}
