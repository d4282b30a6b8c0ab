// The "ticket" claim discipline (sched/ticket.c): idle polls, publication
// order under real threads, the 64-bit head's arithmetic at the 32-bit and
// 63-bit boundaries, failure and consumer death closing the queue, and the
// doorbell ringing only once a burst's tickets are visible.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "sched/ticket.h"
#include "test_util.h"

using knit_test::Barrier;
using knit_test::Carpet;
using knit_test::Collector;
using knit_test::lane_mask;
using knit_test::pending;

namespace {

constexpr int64_t kTwo32 = int64_t{1} << 32;

// Publishes ids [first, first + n) as one burst and flushes it.
void publish_burst(Carpet &c, uint64_t first, unsigned n) {
    for (unsigned i = 0; i < n; i++) ASSERT_GE(c.publish(first + i), 0) << i;
    knit__carpet_flush(c);
}

} // namespace

// ---- idle polls ----------------------------------------------------------

// An idle poll is two loads (head, tail) and no write: after 1,000 of them,
// from every consumer id, head and tail are still 0 and no lane moved.
TEST(Ticket, IdlePollWritesNothing) {
    Carpet c("ticket", 3, 8);
    ASSERT_NE(nullptr, c.c);
    for (int i = 0; i < 1000; i++) {
        Collector col(c);
        ASSERT_EQ(0, col.claim(i % 3)) << i;
        ASSERT_TRUE(col.lanes.empty());
    }
    EXPECT_EQ(0, knit__ticket_head(c));
    EXPECT_EQ(0u, knit__ticket_tail(c));
    EXPECT_EQ(0u, knit_carpet_host_bits(c));
    EXPECT_EQ(0u, knit_carpet_worker_bits(c));
}

// The same after some traffic: a drained queue polled 1,000 times keeps its
// head, its tail and worker_bits exactly where the last claim left them.
TEST(Ticket, IdlePollAfterTrafficWritesNothing) {
    Carpet c("ticket", 2, 4);
    ASSERT_NE(nullptr, c.c);
    publish_burst(c, 0, 10);
    Collector col(c);
    while (col.ids.size() < 10) ASSERT_GT(col.claim(0), 0);
    ASSERT_EQ(10, knit__ticket_head(c));
    const uint32_t worker = knit_carpet_worker_bits(c);
    for (int i = 0; i < 1000; i++) {
        Collector idle(c);
        ASSERT_EQ(0, idle.claim(i % 2)) << i;
    }
    EXPECT_EQ(10, knit__ticket_head(c));
    EXPECT_EQ(10u, knit__ticket_tail(c));
    EXPECT_EQ(worker, knit_carpet_worker_bits(c));
    EXPECT_EQ(0u, pending(c));
}

// ---- publication order under real threads --------------------------------

struct OrderCase {
    unsigned consumers, region_lanes;
};

class TicketOrder : public ::testing::TestWithParam<OrderCase> {};

// One producer thread and N consumer threads (each claiming with its own id,
// all released by one barrier) pass 500 tasks. Tickets are publication
// order, so: every claim takes consecutive, increasing ids (a run of
// tickets), at most region_lanes of them; each consumer's sequence over all
// its claims increases (the head only moves forward); every id is seen
// exactly once with its payload intact.
TEST_P(TicketOrder, ClaimsFollowPublicationOrder) {
    const OrderCase p = GetParam();
    constexpr uint64_t kTasks = 500;
    Carpet c("ticket", p.consumers, p.region_lanes);
    ASSERT_NE(nullptr, c.c);

    struct Consumer {
        explicit Consumer(knit_carpet *carpet) : col(carpet) {}
        Collector col;
        std::vector<size_t> claim_sizes;
        int error = 0;
    };
    std::vector<Consumer> consumers;
    consumers.reserve(p.consumers);
    for (unsigned i = 0; i < p.consumers; i++) consumers.emplace_back(c.c);

    std::atomic<uint64_t> claimed{0};
    std::atomic<bool> stop{false};
    Barrier start(p.consumers + 1);
    std::vector<std::thread> threads;
    for (unsigned id = 0; id < p.consumers; id++) {
        threads.emplace_back([&, id] {
            Consumer &me = consumers[id];
            start.wait();
            while (claimed.load(std::memory_order_acquire) < kTasks &&
                   !stop.load(std::memory_order_relaxed)) {
                int n = me.col.claim(id);
                if (n > 0) {
                    me.claim_sizes.push_back(static_cast<size_t>(n));
                    claimed.fetch_add(static_cast<uint64_t>(n),
                                      std::memory_order_acq_rel);
                } else if (n == 0) {
                    std::this_thread::yield();
                } else {
                    me.error = n;
                    stop = true;
                }
            }
        });
    }
    threads.emplace_back([&] {
        start.wait();
        uint64_t id = 0;
        unsigned burst = 0, burst_len = 1;
        while (id < kTasks && !stop.load(std::memory_order_relaxed)) {
            int lane = c.publish(id, 8 + id % 57);
            if (lane >= 0) {
                id++;
                if (++burst >= burst_len) { // bursts of 1..13 tickets
                    knit__carpet_flush(c);
                    burst = 0;
                    burst_len = burst_len % 13 + 1;
                }
                continue;
            }
            if (lane != KNIT_EAGAIN) {
                stop = true;
                break;
            }
            knit__carpet_flush(c);
            burst = 0;
            std::this_thread::yield();
        }
        knit__carpet_flush(c);
    });
    for (auto &t : threads) t.join();

    std::vector<int> seen(kTasks, 0);
    for (unsigned id = 0; id < p.consumers; id++) {
        const Consumer &me = consumers[id];
        EXPECT_EQ(0, me.error) << "consumer " << id;
        EXPECT_FALSE(me.col.corrupt) << "consumer " << id;
        const auto &ids = me.col.ids;
        size_t at = 0;
        for (size_t n : me.claim_sizes) {
            EXPECT_LE(n, p.region_lanes) << "batch is region_lanes";
            for (size_t i = 1; i < n; i++)
                EXPECT_EQ(ids[at + i - 1] + 1, ids[at + i])
                    << "consumer " << id << ": a claim is a run of tickets";
            at += n;
        }
        EXPECT_EQ(ids.size(), at) << "visits match the claims' counts";
        for (size_t i = 1; i < ids.size(); i++)
            EXPECT_LT(ids[i - 1], ids[i]) << "consumer " << id << " at " << i;
        for (uint64_t x : ids) {
            ASSERT_LT(x, kTasks);
            seen[x]++;
        }
    }
    for (uint64_t x = 0; x < kTasks; x++) EXPECT_EQ(1, seen[x]) << "id " << x;
    EXPECT_EQ(static_cast<int64_t>(kTasks), knit__ticket_head(c));
    EXPECT_EQ(0u, pending(c));
}

INSTANTIATE_TEST_SUITE_P(
    Configs, TicketOrder,
    ::testing::Values(OrderCase{2, 1}, OrderCase{3, 4}, OrderCase{4, 8},
                      OrderCase{6, 8}),
    [](const ::testing::TestParamInfo<OrderCase> &info) {
        return "consumers" + std::to_string(info.param.consumers) + "_region" +
               std::to_string(info.param.region_lanes);
    });

// ---- ticket arithmetic ---------------------------------------------------

// The tail is 32 bits, the head 64: 40 tasks from head 0xFFFFFFF0 cross the
// tail's wrap in the middle of a claim, keep publication order, and leave
// the head at 0xFFFFFFF0 + 40 = 0x100000018 (>= 0x100000001), its low word
// equal to the wrapped tail.
TEST(TicketArithmetic, CrossesThe32BitBoundary) {
    Carpet c("ticket", 1, 8);
    ASSERT_NE(nullptr, c.c);
    const int64_t start = 0xFFFFFFF0;
    knit__ticket_seed(c, start);
    ASSERT_EQ(start, knit__ticket_head(c));
    Collector col(c);
    uint64_t id = 0;
    bool spanned = false;
    while (id < 40) {
        const unsigned burst = id + 7 <= 40 ? 7 : static_cast<unsigned>(40 - id);
        publish_burst(c, id, burst);
        id += burst;
        while (pending(c) != 0) {
            const int64_t before = knit__ticket_head(c);
            ASSERT_GT(col.claim(), 0);
            const int64_t after = knit__ticket_head(c);
            if (static_cast<uint32_t>(after) < static_cast<uint32_t>(before))
                spanned = true; // the low word wrapped inside this claim
            EXPECT_LT(before, after);
        }
    }
    EXPECT_TRUE(spanned) << "some claim took tickets on both sides of 2^32";
    ASSERT_EQ(40u, col.ids.size());
    for (uint64_t i = 0; i < 40; i++) EXPECT_EQ(i, col.ids[i]);
    EXPECT_FALSE(col.corrupt);
    EXPECT_EQ(start + 40, knit__ticket_head(c));
    EXPECT_GE(knit__ticket_head(c), int64_t{0x100000001});
    EXPECT_EQ(static_cast<uint32_t>(start + 40), knit__ticket_tail(c));
}

// available = tail - low(head) is an unsigned 32-bit distance: it is exact
// when the tail has crossed 0x7fffffff -> 0x80000000 (a signed compare would
// go negative) or 0xffffffff -> 0 (the tail is numerically below the head's
// low word). Seeded there, k published tickets make one claim take
// min(k, batch), for several batch sizes.
TEST(TicketArithmetic, UnsignedDistanceAcrossSignAndWrap) {
    const int64_t seeds[] = {0x7FFFFFFC, 0x7FFFFFFF, 0xFFFFFFFC, 0xFFFFFFFF,
                             0x17FFFFFFF, 0x2FFFFFFFE};
    const unsigned ks[] = {1, 3, 5, 8, 20, 32};
    const unsigned batches[] = {1, 4, 8, 32};
    for (int64_t seed : seeds) {
        for (unsigned batch : batches) {
            for (unsigned k : ks) {
                SCOPED_TRACE(::testing::Message()
                             << "seed=0x" << std::hex << seed << std::dec
                             << " batch=" << batch << " k=" << k);
                Carpet c("ticket", 2, batch);
                ASSERT_NE(nullptr, c.c);
                knit__ticket_seed(c, seed);
                publish_burst(c, 0, k);
                ASSERT_EQ(static_cast<uint32_t>(seed + k), knit__ticket_tail(c));
                const unsigned want = k < batch ? k : batch;
                Collector col(c);
                ASSERT_EQ(static_cast<int>(want), col.claim(1));
                EXPECT_EQ(seed + static_cast<int64_t>(want), knit__ticket_head(c));
                for (unsigned i = 0; i < want; i++) EXPECT_EQ(i, col.ids[i]);
                // The rest is still claimable, in order.
                while (col.ids.size() < k) ASSERT_GT(col.claim(0), 0);
                for (unsigned i = 0; i < k; i++) EXPECT_EQ(i, col.ids[i]);
                EXPECT_EQ(seed + static_cast<int64_t>(k), knit__ticket_head(c));
                EXPECT_EQ(0u, pending(c));
            }
        }
    }
}

// A stale CAS after a full low-word cycle is rejected.
//
// The hazard: a consumer loads head = H, stalls while 2^32 tickets go by,
// then loads the tail. The tail's low word is back near low(H), so
// available = tail - low(H) is small and plausible, and the ring cells it
// reads name lanes of *other* tickets. It must not claim them. It does not,
// because the CAS compares the full 64-bit head: it expects H, the head is
// now H + 2^32 (+ whatever), same low word, different value, and the CAS
// fails; the claim then retries with a fresh snapshot.
//
// A test cannot stop a claim between its loads and its CAS, so this asserts
// the two facts the argument rests on, on one carpet: (1) the head carries
// its high word through claims -- it is never recomputed from the 32-bit
// tail -- and (2) heads with equal low words and different high words are
// different heads: after running at H, re-seeding at H + 2^32 (same low
// word) and claiming n tickets ends at exactly H + 2^32 + n, with the
// tickets claimed correctly, in order.
TEST(TicketArithmetic, StaleLowWordCycleIsADifferentHead) {
    Carpet c("ticket", 2, 8);
    ASSERT_NE(nullptr, c.c);
    const int64_t h = 0x12345678;
    knit__ticket_seed(c, h);
    publish_burst(c, 0, 6);
    Collector first(c);
    ASSERT_EQ(6, first.claim(0));
    ASSERT_EQ(h + 6, knit__ticket_head(c));

    // Drained; the same low word, one full cycle later.
    knit__ticket_seed(c, h + kTwo32);
    ASSERT_EQ(static_cast<uint32_t>(h), knit__ticket_tail(c));
    ASSERT_EQ(h + kTwo32, knit__ticket_head(c));
    const unsigned n = 13;
    publish_burst(c, 100, n);
    Collector second(c);
    while (second.ids.size() < n) ASSERT_GT(second.claim(1), 0);
    for (unsigned i = 0; i < n; i++) EXPECT_EQ(100 + i, second.ids[i]);
    EXPECT_FALSE(second.corrupt);
    EXPECT_EQ(h + kTwo32 + n, knit__ticket_head(c)) << "64-bit, not low word";
    EXPECT_NE(h + n, knit__ticket_head(c));
    EXPECT_EQ(static_cast<uint32_t>(h + n), knit__ticket_tail(c));
    EXPECT_EQ(0u, pending(c));
}

// The head's arithmetic is exact up to its limit: from 2^63-2 one ticket
// moves it to exactly 2^63-1 (INT64_MAX).
TEST(TicketArithmetic, IdentityExactNearInt64Max) {
    Carpet c("ticket", 1, 8);
    ASSERT_NE(nullptr, c.c);
    const int64_t start = INT64_MAX - 1; // 2^63 - 2
    knit__ticket_seed(c, start);
    publish_burst(c, 7, 1);
    Collector col(c);
    ASSERT_EQ(1, col.claim());
    ASSERT_EQ(1u, col.ids.size());
    EXPECT_EQ(7u, col.ids[0]);
    EXPECT_EQ(INT64_MAX, knit__ticket_head(c));
    EXPECT_EQ(static_cast<uint32_t>(INT64_MAX), knit__ticket_tail(c));
}

// Exhaustion closes the queue: at head 2^63-1 the next ticket cannot be
// claimed (the head would pass INT64_MAX), so the claim closes the queue
// (head = -1), answers KNIT_ECLOSED with an "exhausted" message, visits
// nothing, and every later claim is KNIT_ECLOSED too. The unclaimed lane
// stays in flight for the owner to settle.
TEST(TicketArithmetic, ExhaustionClosesTheQueue) {
    Carpet c("ticket", 2, 8);
    ASSERT_NE(nullptr, c.c);
    knit__ticket_seed(c, INT64_MAX - 1);
    publish_burst(c, 0, 1);
    Collector col(c);
    ASSERT_EQ(1, col.claim(0));
    ASSERT_EQ(INT64_MAX, knit__ticket_head(c));

    publish_burst(c, 1, 1);
    Collector after(c);
    EXPECT_EQ(KNIT_ECLOSED, after.claim(0));
    EXPECT_TRUE(after.lanes.empty());
    EXPECT_EQ(KNIT__TICKET_CLOSED, knit__ticket_head(c));
    EXPECT_EQ(-1, knit__ticket_head(c));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "exhausted"))
        << knit_last_error();
    EXPECT_EQ(KNIT_ECLOSED, after.claim(1));
    EXPECT_TRUE(after.lanes.empty());
    EXPECT_EQ(1, __builtin_popcount(pending(c))) << "left in flight";
}

// ---- failure and death close the queue -----------------------------------

// A visit failure part way through a batch: the claim saw the whole burst
// (8 tickets, batch 8) and visited it in ticket order; the lanes visited,
// the failing one included, are retired; the queue closes (the rest of the
// batch cannot be replayed), so the 4 unvisited lanes stay in flight and
// every later claim is KNIT_ECLOSED.
TEST(TicketFailure, VisitFailureRetiresVisitedAndCloses) {
    Carpet c("ticket", 2, 8);
    ASSERT_NE(nullptr, c.c);
    publish_burst(c, 0, 8); // lanes 31..24, ids 0..7
    Collector col(c);
    col.fail_at = 3;
    EXPECT_EQ(KNIT_ETASK, col.claim(0));
    ASSERT_EQ((std::vector<uint64_t>{0, 1, 2, 3}), col.ids);
    ASSERT_EQ((std::vector<unsigned>{31, 30, 29, 28}), col.lanes);
    EXPECT_EQ(lane_mask(28, 4), knit_carpet_worker_bits(c))
        << "exactly the four visited lanes retired";
    EXPECT_EQ(lane_mask(24, 4), pending(c)) << "the unvisited rest in flight";
    EXPECT_EQ(KNIT__TICKET_CLOSED, knit__ticket_head(c));
    Collector other(c);
    EXPECT_EQ(KNIT_ECLOSED, other.claim(1));
    EXPECT_EQ(KNIT_ECLOSED, other.claim(0));
    EXPECT_TRUE(other.lanes.empty());
    EXPECT_EQ(lane_mask(24, 4), pending(c));
}

// The claim returns the visit's own negative code; the same retire/close.
// A failure at the first and at the last lane of a batch: the first retires
// one lane, the last retires the whole batch (nothing stranded), and both
// close the queue.
TEST(TicketFailure, VisitErrorCodeAndBatchEdges) {
    {
        Carpet c("ticket", 1, 4);
        ASSERT_NE(nullptr, c.c);
        publish_burst(c, 0, 6);
        Collector col(c);
        col.fail_at = 0;
        col.fail_code = -42;
        EXPECT_EQ(-42, col.claim());
        EXPECT_EQ((std::vector<uint64_t>{0}), col.ids);
        EXPECT_EQ(lane_mask(31, 1), knit_carpet_worker_bits(c));
        EXPECT_EQ(lane_mask(26, 5), pending(c));
        EXPECT_EQ(KNIT__TICKET_CLOSED, knit__ticket_head(c));
    }
    {
        Carpet c("ticket", 1, 4);
        ASSERT_NE(nullptr, c.c);
        publish_burst(c, 0, 6);
        Collector col(c);
        col.fail_at = 3; // the last lane of the first batch of 4
        EXPECT_EQ(KNIT_ETASK, col.claim());
        EXPECT_EQ((std::vector<uint64_t>{0, 1, 2, 3}), col.ids);
        EXPECT_EQ(lane_mask(28, 4), knit_carpet_worker_bits(c));
        EXPECT_EQ(lane_mask(26, 2), pending(c)) << "the next batch, unclaimed";
        EXPECT_EQ(KNIT__TICKET_CLOSED, knit__ticket_head(c));
        EXPECT_EQ(KNIT_ECLOSED, col.claim());
    }
}

// A positive visit result also stops the claim, but it cannot come back as
// is (the caller would read it as a lane count): the claim answers
// KNIT_ETASK, with the same retire and close.
TEST(TicketFailure, PositiveVisitResultBecomesEtask) {
    Carpet c("ticket", 1, 8);
    ASSERT_NE(nullptr, c.c);
    publish_burst(c, 0, 4);
    Collector col(c);
    col.fail_at = 1;
    col.fail_code = 3;
    EXPECT_EQ(KNIT_ETASK, col.claim());
    EXPECT_EQ(2u, col.ids.size());
    EXPECT_EQ(lane_mask(30, 2), knit_carpet_worker_bits(c));
    EXPECT_EQ(KNIT__TICKET_CLOSED, knit__ticket_head(c));
}

// Earlier claims of the same burst were real: a successful claim of the
// first batch, then a failing claim in the second batch, retire exactly
// what both visited.
TEST(TicketFailure, EarlierTicketsOfTheBurstStayClaimed) {
    Carpet c("ticket", 2, 4);
    ASSERT_NE(nullptr, c.c);
    publish_burst(c, 0, 10); // lanes 31..22
    Collector ok(c);
    ASSERT_EQ(4, ok.claim(0));
    EXPECT_EQ((std::vector<uint64_t>{0, 1, 2, 3}), ok.ids);
    ASSERT_EQ(4, knit__ticket_head(c));
    Collector bad(c);
    bad.fail_at = 1;
    EXPECT_EQ(KNIT_ETASK, bad.claim(1));
    EXPECT_EQ((std::vector<uint64_t>{4, 5}), bad.ids);
    EXPECT_EQ(lane_mask(26, 6), knit_carpet_worker_bits(c));
    EXPECT_EQ(lane_mask(22, 4), pending(c));
    EXPECT_EQ(KNIT__TICKET_CLOSED, knit__ticket_head(c));
}

// A dead consumer may have died between its CAS and its retire; nothing
// records what it owned, so the queue closes: every claim answers
// KNIT_ECLOSED, for any consumer, with or without work published.
TEST(TicketDeath, ConsumerDeathClosesTheQueue) {
    Carpet c("ticket", 3, 8);
    ASSERT_NE(nullptr, c.c);
    publish_burst(c, 0, 4);
    knit__carpet_consumer_dead(c, 2);
    EXPECT_EQ(KNIT__TICKET_CLOSED, knit__ticket_head(c));
    Collector col(c);
    EXPECT_EQ(KNIT_ECLOSED, col.claim(0));
    EXPECT_EQ(KNIT_ECLOSED, col.claim(1));
    EXPECT_TRUE(col.lanes.empty());
    publish_burst(c, 4, 2);
    EXPECT_EQ(KNIT_ECLOSED, col.claim(0));
    EXPECT_EQ(6, __builtin_popcount(pending(c)));

    Carpet idle("ticket", 2, 8);
    ASSERT_NE(nullptr, idle.c);
    knit__carpet_consumer_dead(idle, 0);
    Collector none(idle);
    EXPECT_EQ(KNIT_ECLOSED, none.claim(1)) << "closed even when idle";
}

// ---- the notifier --------------------------------------------------------

// The doorbell rings once per burst, and only once the burst's tickets are
// visible: with a sleeper armed, five publishes without a flush leave the
// tail at its old value and a claim finds nothing; the flush stores the
// tail, rings (returns 1), and then one claim (batch 8) takes all five.
TEST(TicketDoorbell, RingsOncePerBurstWithEveryTicketVisible) {
    Carpet c("ticket", 1, 8);
    ASSERT_NE(nullptr, c.c);
    knit__carpet_arm(c);
    for (uint64_t i = 0; i < 5; i++) ASSERT_GE(c.publish(i), 0);
    EXPECT_EQ(0u, knit__ticket_tail(c)) << "nothing visible before the flush";
    Collector col(c);
    EXPECT_EQ(0, col.claim());
    EXPECT_TRUE(col.lanes.empty());
    EXPECT_EQ(0, knit__ticket_head(c));

    EXPECT_EQ(1, knit__carpet_flush(c)) << "rang";
    EXPECT_EQ(5u, knit__ticket_tail(c));
    EXPECT_EQ(0, knit__carpet_flush(c)) << "an empty flush never rings";
    EXPECT_EQ(5, col.claim());
    EXPECT_EQ((std::vector<uint64_t>{0, 1, 2, 3, 4}), col.ids);
    EXPECT_EQ(5, knit__ticket_head(c));

    // A second burst while the bell is still SIGNALLED (not drained): no
    // second ring; after draining and re-arming, the next burst rings once.
    publish_burst(c, 5, 3);
    knit__carpet_stats st;
    knit__carpet_stats_get(c, &st);
    EXPECT_EQ(1u, st.rings);
    EXPECT_EQ(3, col.claim());
    EXPECT_EQ(1, knit__carpet_sleep_if_idle(c, 0))
        << "drains the SIGNALLED bell (the earlier ring) without sleeping";
    EXPECT_EQ(0u, knit__carpet_doorbell_state(c));
    knit__carpet_arm(c);
    for (uint64_t i = 8; i < 12; i++) ASSERT_GE(c.publish(i), 0);
    EXPECT_EQ(8u, knit__ticket_tail(c));
    EXPECT_EQ(1, knit__carpet_flush(c));
    knit__carpet_stats_get(c, &st);
    EXPECT_EQ(2u, st.rings);
    EXPECT_EQ(3u, st.flushes) << "three bursts, two rings";
    EXPECT_EQ(12u, knit__ticket_tail(c));
    EXPECT_EQ(4, col.claim());
}

// The same with real threads: a consumer parks on the doorbell and claims
// once woken; the producer publishes a burst of five only after it sees the
// bell armed. Whatever the interleaving of arm, re-check and publication,
// the first claim that finds work finds the whole burst (the tail is one
// store), and when the park returned "rung" that claim is the very next.
TEST(TicketDoorbell, WokenConsumerSeesTheWholeBurst) {
    for (int round = 0; round < 20; round++) {
        Carpet c("ticket", 1, 8);
        ASSERT_NE(nullptr, c.c);
        std::atomic<bool> consumer_done{false};
        auto consumer = std::async(std::launch::async, [&] {
            std::vector<int> claims; // nonzero results, in order
            int rung_then = -100;
            auto deadline =
                std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (claims.empty() && std::chrono::steady_clock::now() < deadline) {
                int rung = knit__carpet_park(c, 100'000'000);
                Collector col(c);
                int n = col.claim();
                if (rung == 1) rung_then = n;
                if (n != 0) claims.push_back(n);
            }
            consumer_done = true;
            return std::make_pair(claims, rung_then);
        });
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (knit__carpet_doorbell_state(c) != 1 &&
               std::chrono::steady_clock::now() < deadline)
            std::this_thread::yield();
        for (uint64_t i = 0; i < 5; i++) {
            ASSERT_GE(c.publish(i), 0);
            if (round % 2) std::this_thread::yield(); // widen the window
        }
        const int rang = knit__carpet_flush(c);
        auto got = consumer.get();
        ASSERT_FALSE(got.first.empty()) << "round " << round;
        EXPECT_EQ(5, got.first.front()) << "round " << round;
        if (got.second != -100) {
            EXPECT_EQ(5, got.second) << "woken by the ring: all five visible";
            EXPECT_EQ(1, rang);
        }
    }
}
