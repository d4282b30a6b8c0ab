/* "single": the single-consumer claim, the simplest discipline.
 *
 * One consumer owns every published lane: it needs no arbitration, only
 * host_bits (acquire) and worker_bits (its own retires). It runs the
 * claimed lanes in publication order (by each slot's sequence number) and
 * retires them with one xor, also when a visit fails part way.
 */
#include <stdint.h>

#include "knit/sched.h"

static int knit__single_check(const knit_sched_params *p) {
    if (p->consumers != 1)
        return knit_sched_fail(KNIT_EINVAL,
                               "sched \"single\" serves 1 consumer, not %u; "
                               "use ticket or dekker",
                               p->consumers);
    return 0;
}

static int knit__single_claim(knit_carpet *c, void *state, unsigned consumer,
                              knit_lane_visit_fn visit, void *ctx) {
    (void)state;
    (void)consumer;
    /* host_bits acquire: the slots of the lanes we see are written. */
    uint32_t pending = knit_carpet_host_bits(c) ^ knit_carpet_worker_bits(c);
    if (pending == 0) return 0;
    unsigned lanes[KNIT_LANES];
    uint64_t seqs[KNIT_LANES];
    unsigned n = 0;
    for (uint32_t bits = pending; bits != 0; bits &= bits - 1) {
        unsigned lane = (unsigned)__builtin_ctz(bits);
        uint64_t seq = knit_carpet_lane_seq(c, lane);
        unsigned at = n++;
        /* Insertion by sequence number: mostly in order already. */
        while (at > 0 && seqs[at - 1] > seq) {
            seqs[at] = seqs[at - 1];
            lanes[at] = lanes[at - 1];
            at--;
        }
        seqs[at] = seq;
        lanes[at] = lane;
    }
    uint32_t done = 0;
    int rc = 0;
    for (unsigned i = 0; i < n; i++) {
        rc = visit(ctx, lanes[i]);
        done |= 1u << lanes[i];
        if (rc != 0) break;
    }
    /* One retire per claim, on every path. */
    knit_carpet_retire(c, done);
    return rc != 0 ? (rc < 0 ? rc : KNIT_ETASK) : (int)n;
}

const knit_sched_ops knit__sched_single = {
    .abi_version = KNIT_SCHED_ABI_VERSION,
    .size = sizeof(knit_sched_ops),
    .name = "single",
    .summary = "one consumer, no arbitration; publication order",
    .check = knit__single_check,
    .claim = knit__single_claim,
};
