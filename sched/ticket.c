/* "ticket" (the default discipline): one monotonic counter arbitrates.
 *
 * Words (each on its own line, in the carpet's discipline block):
 *   head   int64, consumers CAS it forward; -1 closes the queue for good.
 *   tail   uint32, the producer's published ticket count (low 32 bits),
 *          one release store per burst.
 *   order  the ring: order[t & 31] is the lane the producer filled for
 *          ticket t (producer writes, consumers read).
 * The producer's private tail and last published tail sit on a fourth line.
 *
 * A ticket names a lane without being the lane: the producer keeps its
 * free-bit allocation, and claims follow publication order. A consumer reads
 * head and tail; nothing available returns after two loads and no write. It
 * reads the lane ids of its batch *before* the CAS: cell head & 31 cannot be
 * refilled while the head still sits at `head` (refilling needs a 33rd lane
 * in flight), but once the CAS moves the head past a ticket the producer may
 * reuse the cell at once. A successful CAS of the 64-bit head validates the
 * whole snapshot: the head never wraps, so with it unchanged at most 32
 * tickets are pending and the unsigned 32-bit distance tail - head is exact,
 * also across the tail's wrap. Distances over 32 are stale snapshots.
 *
 * The head closes (-1) when it would pass 2^63-1, when a visit fails part
 * way through a batch (the rest of the batch cannot be replayed safely), and
 * when a consumer dies (nothing records what a dead claimant owned). A
 * closed queue answers KNIT_ECLOSED to every claim; its owner reports it.
 */
#include "sched/ticket.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

#include "runtime/carpet.h"

#define KNIT__TICKET_LIMIT INT64_MAX
/* CAS retries before a claimant goes back to its own loop. */
#define KNIT__TICKET_ATTEMPTS 2

struct knit__ticket {
    alignas(KNIT__CACHE_LINE) _Atomic int64_t head;
    alignas(KNIT__CACHE_LINE) _Atomic uint32_t tail;
    alignas(KNIT__CACHE_LINE) _Atomic uint8_t order[KNIT_LANES];
    alignas(KNIT__CACHE_LINE) struct {
        uint32_t tail;      /* next ticket to hand out (private) */
        uint32_t published; /* the tail last stored */
    } prod;
    alignas(KNIT__CACHE_LINE) unsigned batch; /* read-only after init */
};

_Static_assert(offsetof(struct knit__ticket, tail) -
                       offsetof(struct knit__ticket, head) >=
                   KNIT__CACHE_LINE,
               "head and tail on different lines");

static int knit__ticket_init(knit_carpet *c, void *state,
                             const knit_sched_params *p) {
    (void)c;
    struct knit__ticket *t = state;
    atomic_init(&t->head, 0);
    atomic_init(&t->tail, 0);
    for (unsigned i = 0; i < KNIT_LANES; i++) atomic_init(&t->order[i], 0);
    t->batch = p->region_lanes;
    return 0;
}

static void knit__ticket_publish(knit_carpet *c, void *state, unsigned lane) {
    (void)c;
    struct knit__ticket *t = state;
    /* Relaxed: the tail's release store at flush publishes the cell. */
    atomic_store_explicit(&t->order[t->prod.tail & (KNIT_LANES - 1)],
                          (uint8_t)lane, memory_order_relaxed);
    t->prod.tail++;
}

static int knit__ticket_flush(knit_carpet *c, void *state) {
    (void)c;
    struct knit__ticket *t = state;
    /* At most 32 tickets can be staged, so equality is exact across wrap. */
    if (t->prod.published == t->prod.tail) return 0;
    t->prod.published = t->prod.tail;
    /* One atomic per burst. Pairs with the consumers' acquire load of the
     * tail: the slots, ring cells and host_bits of the burst are visible
     * to whoever sees the new tail. Nothing of the burst is claimable
     * before this store, which is what makes the batch atomic. */
    atomic_store_explicit(&t->tail, t->prod.tail, memory_order_release);
    return 1;
}

static int knit__ticket_claim(knit_carpet *c, void *state, unsigned consumer,
                              knit_lane_visit_fn visit, void *ctx) {
    (void)consumer;
    struct knit__ticket *t = state;
    unsigned char lanes[KNIT_LANES];
    for (int attempt = 0; attempt < KNIT__TICKET_ATTEMPTS; attempt++) {
        int64_t head = atomic_load_explicit(&t->head, memory_order_acquire);
        if (head < 0) return KNIT_ECLOSED;
        uint32_t low = (uint32_t)head;
        /* acquire pairs with the release store in knit__ticket_flush. */
        uint32_t available =
            atomic_load_explicit(&t->tail, memory_order_acquire) - low;
        if (available == 0) return 0;
        if (available > KNIT_LANES) continue; /* stale head snapshot */
        uint32_t batch = available < t->batch ? available : t->batch;
        if ((uint64_t)head + batch > (uint64_t)KNIT__TICKET_LIMIT) {
            atomic_store_explicit(&t->head, KNIT__TICKET_CLOSED,
                                  memory_order_release);
            return knit_sched_fail(KNIT_ECLOSED,
                                   "ticket queue exhausted its 64-bit "
                                   "sequence at head=%lld",
                                   (long long)head);
        }
        for (uint32_t i = 0; i < batch; i++)
            lanes[i] = atomic_load_explicit(
                           &t->order[(low + i) & (KNIT_LANES - 1)],
                           memory_order_relaxed) &
                       (KNIT_LANES - 1);
        /* acq_rel: success orders our slot reads after the claim and makes
         * the claim visible to peers; failure means a stale snapshot. */
        if (!atomic_compare_exchange_strong_explicit(
                &t->head, &head, head + (int64_t)batch, memory_order_acq_rel,
                memory_order_relaxed))
            continue;
        uint32_t done = 0;
        int rc = 0;
        for (uint32_t i = 0; i < batch; i++) {
            rc = visit(ctx, lanes[i]);
            done |= 1u << lanes[i];
            if (rc != 0) break;
        }
        if (rc != 0) {
            /* The visit may have consumed the lane's payload: replaying the
             * rest of the batch is unsafe. Close, so the owner settles the
             * stranded lanes instead of hanging on them. */
            atomic_store_explicit(&t->head, KNIT__TICKET_CLOSED,
                                  memory_order_release);
        }
        knit_carpet_retire(c, done); /* one retire per claim, every path */
        return rc != 0 ? (rc < 0 ? rc : KNIT_ETASK) : (int)batch;
    }
    return 0;
}

static void knit__ticket_consumer_dead(knit_carpet *c, void *state,
                                       unsigned consumer) {
    (void)c;
    (void)consumer;
    struct knit__ticket *t = state;
    /* No durable record says what a dead claimant owned: close the queue
     * rather than risk a lane claimed twice or lost silently. */
    atomic_store_explicit(&t->head, KNIT__TICKET_CLOSED, memory_order_release);
}

static long knit__ticket_trace_note(knit_carpet *c, void *state,
                                    unsigned consumer, int after,
                                    uint64_t note[4], char *buf, size_t len) {
    (void)c;
    (void)consumer;
    struct knit__ticket *t = state;
    int64_t head = atomic_load_explicit(&t->head, memory_order_acquire);
    if (!after) {
        note[0] = (uint64_t)head;
        if (head < 0) return 0;
        return (long)(uint32_t)(atomic_load_explicit(&t->tail,
                                                     memory_order_acquire) -
                                (uint32_t)head);
    }
    int64_t before = (int64_t)note[0];
    snprintf(buf, len, "head=%lld->%lld peers=%lld", (long long)before,
             (long long)head,
             head < 0 ? 0LL : (long long)(head - before - (int64_t)note[3]));
    return 0;
}

const knit_sched_ops knit__sched_ticket = {
    .abi_version = KNIT_SCHED_ABI_VERSION,
    .size = sizeof(knit_sched_ops),
    .name = "ticket",
    .summary = "one 64-bit head CAS per batch; claims in publication order",
    .state_size = sizeof(struct knit__ticket),
    .init = knit__ticket_init,
    .publish = knit__ticket_publish,
    .flush = knit__ticket_flush,
    .claim = knit__ticket_claim,
    .consumer_dead = knit__ticket_consumer_dead,
    .trace_note = knit__ticket_trace_note,
};

int64_t knit__ticket_head(const knit_carpet *c) {
    struct knit__ticket *t = knit__carpet_state(c);
    return atomic_load_explicit(&t->head, memory_order_acquire);
}

uint32_t knit__ticket_tail(const knit_carpet *c) {
    struct knit__ticket *t = knit__carpet_state(c);
    return atomic_load_explicit(&t->tail, memory_order_acquire);
}

void knit__ticket_seed(knit_carpet *c, int64_t head) {
    struct knit__ticket *t = knit__carpet_state(c);
    t->prod.tail = t->prod.published = (uint32_t)head;
    atomic_store_explicit(&t->tail, (uint32_t)head, memory_order_release);
    atomic_store_explicit(&t->head, head, memory_order_release);
}
