// The lane core: publish, claim, retire, the producer's shadow, the
// doorbell, and a two-thread hand-off of ten million tasks.
#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "test_util.h"

using knit_test::Carpet;
using knit_test::Collector;
using knit_test::pending;

TEST(Carpet, ThirtyTwoPublishesThenFull) {
    Carpet c("single", 1, 8);
    for (int i = 0; i < 32; i++) EXPECT_GE(c.publish(i), 0) << i;
    EXPECT_EQ(KNIT_EAGAIN, c.publish(32));
    EXPECT_EQ(0xffffffffu, knit_carpet_host_bits(c));
    EXPECT_EQ(0u, knit_carpet_worker_bits(c));
    knit__carpet_stats st;
    knit__carpet_stats_get(c, &st);
    EXPECT_EQ(32u, st.published);
    EXPECT_EQ(1u, st.full);
}

TEST(Carpet, DrainLeavesWorkerEqualHost) {
    Carpet c("single", 1, 8);
    for (int i = 0; i < 20; i++) ASSERT_GE(c.publish(i), 0);
    knit__carpet_flush(c);
    Collector col(c);
    EXPECT_EQ(20, col.claim());
    EXPECT_EQ(knit_carpet_host_bits(c), knit_carpet_worker_bits(c));
    EXPECT_FALSE(col.corrupt);
    Collector again(c);
    EXPECT_EQ(0, again.claim());
    EXPECT_TRUE(again.lanes.empty());
}

TEST(Carpet, RandomPublishClaimSteps) {
    Carpet c("single", 1, 8);
    std::mt19937 rng(12345);
    uint64_t next_id = 0, next_run = 0;
    for (int step = 0; step < 5000; step++) {
        uint32_t before = pending(c);
        if (rng() % 3 != 0) {
            uint32_t host_before = knit_carpet_host_bits(c);
            int lane = c.publish(next_id);
            if (lane == KNIT_EAGAIN) {
                EXPECT_EQ(0xffffffffu, before);
                continue;
            }
            ASSERT_GE(lane, 0);
            uint32_t toggled = knit_carpet_host_bits(c) ^ host_before;
            EXPECT_EQ(1u << lane, toggled) << "exactly one bit";
            EXPECT_EQ(0u, before & toggled) << "a previously free lane";
            next_id++;
        } else {
            knit__carpet_flush(c);
            Collector col(c);
            int n = col.claim();
            EXPECT_EQ(__builtin_popcount(before), n);
            EXPECT_EQ(0u, pending(c));
            EXPECT_FALSE(col.corrupt);
            for (uint64_t id : col.ids) EXPECT_EQ(next_run++, id);
        }
    }
}

// Lanes are handed out from the highest free lane down; the shadow of
// worker_bits is reloaded only when it shows no free lane.
TEST(Carpet, ShadowRefreshedOnlyWhenExhausted) {
    Carpet c("single", 1, 8);
    knit__carpet_stats st;
    EXPECT_EQ(31, c.publish(0));
    EXPECT_EQ(30, c.publish(1));
    EXPECT_EQ(29, c.publish(2));
    Collector col(c);
    ASSERT_EQ(3, col.claim()); // lanes 31..29 are free again...
    // ...but the producer's shadow does not know: it goes on downwards.
    for (int lane = 28; lane >= 0; lane--) EXPECT_EQ(lane, c.publish(100 + lane));
    knit__carpet_stats_get(c, &st);
    EXPECT_EQ(0u, st.shadow_reloads);
    // The shadow shows all 32 busy (false busy), 29 truly are.
    EXPECT_EQ(0xffffffffu, knit__carpet_producer_busy(c));
    EXPECT_EQ(29, __builtin_popcount(pending(c)));
    // Exhausted: one reload finds 31..29.
    EXPECT_EQ(31, c.publish(200));
    knit__carpet_stats_get(c, &st);
    EXPECT_EQ(1u, st.shadow_reloads);
    EXPECT_EQ(30, c.publish(201));
    EXPECT_EQ(29, c.publish(202));
    EXPECT_EQ(KNIT_EAGAIN, c.publish(203));
    knit__carpet_stats_get(c, &st);
    EXPECT_EQ(2u, st.shadow_reloads);
}

TEST(Carpet, FailedClaimStillRetiresWhatItTook) {
    Carpet c("single", 1, 8);
    for (int i = 0; i < 10; i++) ASSERT_GE(c.publish(i), 0);
    knit__carpet_flush(c);
    Collector col(c);
    col.fail_at = 3;
    EXPECT_EQ(KNIT_ETASK, col.claim());
    ASSERT_EQ(4u, col.lanes.size());
    uint32_t took = 0;
    for (unsigned lane : col.lanes) took |= 1u << lane;
    EXPECT_EQ(took, knit_carpet_worker_bits(c)) << "all four visited retired";
    EXPECT_EQ(0u, pending(c) & took);
    EXPECT_EQ(6, __builtin_popcount(pending(c))) << "the rest stay claimable";
    Collector rest(c);
    EXPECT_EQ(6, rest.claim());
    EXPECT_EQ(4u, rest.ids.front());
}

TEST(Carpet, PayloadOverInlineLimitIsRejected) {
    Carpet c("single", 1, 8);
    knit__lane_task t{};
    unsigned char big[KNIT__INLINE_BYTES + 1] = {};
    EXPECT_EQ(KNIT_E2BIG, knit__carpet_publish(c, &t, big, sizeof big));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "65"));
    EXPECT_EQ(0u, knit_carpet_host_bits(c));
}

TEST(Doorbell, PublicationRacingTheArmIsSeenWithoutSleeping) {
    Carpet c("single", 1, 8);
    knit__carpet_arm(c); // the sleeper armed...
    ASSERT_GE(c.publish(1), 0); // ...and the publication lands before its re-check
    EXPECT_EQ(1, knit__carpet_flush(c)) << "the producer saw ARMED and rang";
    // The re-check sees the lane; -1 (no limit) would hang if it slept.
    EXPECT_EQ(0, knit__carpet_sleep_if_idle(c, -1));
    EXPECT_EQ(0u, knit__carpet_doorbell_state(c));
}

TEST(Doorbell, RecheckSeesPublicationBeforeArm) {
    Carpet c("single", 1, 8);
    ASSERT_GE(c.publish(1), 0);
    EXPECT_EQ(0, knit__carpet_flush(c)) << "nobody armed: no ring";
    EXPECT_EQ(0, knit__carpet_park(c, -1));
}

TEST(Doorbell, PublicationWakesParkedWaiter) {
    Carpet c("single", 1, 8);
    std::atomic<int> woke{-1};
    auto t0 = std::chrono::steady_clock::now();
    std::thread sleeper([&] { woke = knit__carpet_park(c, 10'000'000'000LL); });
    // Wait until the sleeper has armed, give it time to get into the
    // futex, then publish.
    while (knit__carpet_doorbell_state(c) != 1) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_GE(c.publish(7), 0);
    int rang = knit__carpet_flush(c);
    sleeper.join();
    auto waited = std::chrono::steady_clock::now() - t0;
    // Usually asleep by now and woken by the ring (1). A sleeper still
    // between its arm and its re-check (its membarrier, base/asym_fence.h,
    // is a syscall) sees the lane and does not sleep (0); the producer may
    // have rung its ARMED doorbell all the same. Never the 10 s timeout.
    EXPECT_LT(waited, std::chrono::seconds(5)) << "slept through the publication";
    ASSERT_TRUE(woke.load() == 0 || woke.load() == 1) << woke.load();
    knit__carpet_stats st;
    knit__carpet_stats_get(c, &st);
    EXPECT_EQ(uint64_t(rang), st.rings);
    if (woke.load() == 1) {
        EXPECT_EQ(1, rang) << "woken, so the producer rang";
    }
}

TEST(Doorbell, TimeoutReturnsWithoutRing) {
    Carpet c("single", 1, 8);
    EXPECT_EQ(0, knit__carpet_park(c, 1'000'000));
    EXPECT_EQ(0u, knit__carpet_doorbell_state(c));
}

TEST(Doorbell, BurstOfThirtyTwoRingsOnce) {
    for (const char *sched : {"single", "ticket", "dekker"}) {
        Carpet c(sched, 1, 8);
        knit__carpet_arm(c);
        for (int i = 0; i < 32; i++) ASSERT_GE(c.publish(i), 0);
        EXPECT_EQ(1, knit__carpet_flush(c)) << sched;
        EXPECT_EQ(0, knit__carpet_flush(c)) << "an empty flush never rings";
        knit__carpet_stats st;
        knit__carpet_stats_get(c, &st);
        EXPECT_EQ(1u, st.rings) << sched;
        EXPECT_EQ(2u, knit__carpet_doorbell_state(c)) << "SIGNALLED until drained";
        EXPECT_EQ(1, knit__carpet_sleep_if_idle(c, -1) == 0 ? 1 : 0);
    }
}

// One producer thread, one consumer thread, ten million tasks through one
// carpet: each seen exactly once, in publication order, payload intact.
TEST(Carpet, TwoThreadsPassTenMillionTasks) {
    constexpr uint64_t kTasks = 10'000'000;
    Carpet c("single", 1, 8);
    std::thread producer([&] {
        uint64_t id = 0;
        while (id < kTasks) {
            int lane = c.publish(id, 8 + id % 57);
            if (lane >= 0) {
                id++;
                if ((id & 15) == 0) knit__carpet_flush(c);
                continue;
            }
            ASSERT_EQ(KNIT_EAGAIN, lane);
            knit__carpet_flush(c);
            std::this_thread::yield();
        }
        knit__carpet_flush(c);
    });
    struct Check {
        knit_carpet *c;
        uint64_t next = 0, bad_order = 0, bad_payload = 0;
        static int visit(void *ctx, unsigned lane) {
            auto *k = static_cast<Check *>(ctx);
            const knit__slot *s = knit__carpet_slot(k->c, lane);
            uint64_t id = reinterpret_cast<uintptr_t>(s->task.arg);
            if (id != k->next) k->bad_order++;
            if (s->task.len != 8 + id % 57 || !Carpet::intact(s)) k->bad_payload++;
            k->next = id + 1;
            return 0;
        }
    } check{c};
    uint64_t seen = 0, parks = 0;
    while (seen < kTasks) {
        int n = knit__carpet_claim(c, 0, &Check::visit, &check);
        ASSERT_GE(n, 0);
        if (n > 0) {
            seen += n;
        } else if (++parks % 64 == 0) {
            knit__carpet_park(c, 1'000'000); // bounded: a bug cannot hang us
        }
    }
    producer.join();
    EXPECT_EQ(kTasks, seen);
    EXPECT_EQ(kTasks, check.next);
    EXPECT_EQ(0u, check.bad_order);
    EXPECT_EQ(0u, check.bad_payload);
    EXPECT_EQ(0u, pending(c));
}
