/* The "lock" discipline (see lock_sched.h). Uses only <knit/sched.h>. */
#include "examples/lock_sched.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

struct lock_state {
    /* The spinlock, alone on its line: every claimant writes it. */
    _Alignas(64) atomic_flag held;
    _Alignas(64) unsigned batch; /* region_lanes, read-only after init */
};

static int lock_init(knit_carpet *c, void *state, const knit_sched_params *p) {
    (void)c;
    struct lock_state *s = state;
    atomic_flag_clear_explicit(&s->held, memory_order_relaxed);
    s->batch = p->region_lanes;
    return 0;
}

static int lock_claim(knit_carpet *c, void *state, unsigned consumer,
                      knit_lane_visit_fn visit, void *ctx) {
    (void)consumer;
    struct lock_state *s = state;
    /* An idle poll writes nothing: look before taking the lock. */
    if ((knit_carpet_host_bits(c) ^ knit_carpet_worker_bits(c)) == 0) return 0;
    unsigned spins = 0;
    /* acquire: pairs with the release in atomic_flag_clear below, so the
     * previous holder's retire is visible to our pending computation. */
    while (atomic_flag_test_and_set_explicit(&s->held, memory_order_acquire))
        if (++spins % 64 == 0) sched_yield();
    /* Only the holder claims: pending lanes are ours to take. */
    uint32_t pending = knit_carpet_host_bits(c) ^ knit_carpet_worker_bits(c);
    unsigned lanes[KNIT_LANES], n = 0;
    uint64_t seqs[KNIT_LANES];
    for (uint32_t bits = pending; bits != 0; bits &= bits - 1) {
        unsigned lane = (unsigned)__builtin_ctz(bits);
        uint64_t seq = knit_carpet_lane_seq(c, lane);
        unsigned at = n++;
        while (at > 0 && seqs[at - 1] > seq) { /* oldest first */
            seqs[at] = seqs[at - 1];
            lanes[at] = lanes[at - 1];
            at--;
        }
        seqs[at] = seq;
        lanes[at] = lane;
    }
    if (n > s->batch) n = s->batch;
    uint32_t done = 0;
    int rc = 0;
    unsigned visited = 0;
    for (unsigned i = 0; i < n && rc == 0; i++) {
        rc = visit(ctx, lanes[i]);
        done |= 1u << lanes[i];
        visited++;
    }
    knit_carpet_retire(c, done); /* before the lock goes: see above */
    atomic_flag_clear_explicit(&s->held, memory_order_release);
    if (rc != 0) return rc < 0 ? rc : KNIT_ETASK;
    return (int)visited;
}

const knit_sched_ops lock_sched_ops = {
    .abi_version = KNIT_SCHED_ABI_VERSION,
    .size = sizeof(knit_sched_ops),
    .name = "lock",
    .summary = "a spinlock per carpet; the holder takes a batch, oldest first",
    .state_size = sizeof(struct lock_state),
    .init = lock_init,
    .claim = lock_claim,
};

int lock_sched_register(void) {
    if (knit_sched_find("lock") == &lock_sched_ops) return 0;
    return knit_sched_register(&lock_sched_ops);
}
