// How a submitting thread grows and reuses its carpets (runtime/submit.c).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "knit/knit.h"
#include "tests/carpet_growth_check.h"
#include "tests/pool_util.h"

namespace {

void *echo(knit_task *, void *arg) { return arg; }

}  // namespace

// With its only worker held, a thread's lanes stay in flight, so every 32
// submits need another carpet. The thread tries at most KNIT__PROBES of its
// own full carpets before it takes a new one: growing to N carpets costs
// at most about KNIT__PROBES x N probes of a full carpet (the walk over
// every one of them, as before, cost N^2 / 2: 20,000 for 200). Once the
// worker drained them, a second burst of the same size reuses them: no
// new carpet, and few probes of a full one.
TEST(CarpetGrowth, ProbesOfFullCarpetsGrowLinearlyAndABurstReusesDrainedCarpets) {
    constexpr unsigned kCarpets = 200, kTasks = kCarpets * 32;
    knit_test::Pool pool(1);
    ASSERT_NE(nullptr, pool.p);
    knit_test_carpet_totals before = knit_test_carpet_totals_get(pool);
    uint64_t carpets[2], full[2];
    for (int burst = 0; burst < 2; burst++) {
        knit_test::Gate gate;
        knit_future *blocker = knit_test::hold_worker(pool, gate);
        ASSERT_NE(nullptr, blocker);
        std::vector<knit_future *> fs(kTasks, nullptr);
        for (unsigned i = 0; i < kTasks; i++)
            ASSERT_EQ(0, knit_submit(pool, echo, reinterpret_cast<void *>(uintptr_t(i + 1)), &fs[i]))
                << knit_last_error();
        knit_test_carpet_totals now = knit_test_carpet_totals_get(pool);
        carpets[burst] = now.carpets;
        full[burst] = now.full - before.full;
        before = now;
        knit_test::release_worker(gate, blocker);
        for (unsigned i = 0; i < kTasks; i++) {
            void *r = nullptr;
            EXPECT_EQ(0, knit_await(fs[i], -1, &r));
            EXPECT_EQ(reinterpret_cast<void *>(uintptr_t(i + 1)), r);
            EXPECT_EQ(0, knit_future_release(fs[i]));
        }
    }
    std::printf("carpets %llu / %llu, probes of a full carpet %llu / %llu\n",
                (unsigned long long)carpets[0], (unsigned long long)carpets[1],
                (unsigned long long)full[0], (unsigned long long)full[1]);
    // Every lane: the tasks' and the two gates'.
    EXPECT_EQ(2ull * (kTasks + 1), before.published);
    // Carpets: the tasks' lanes, plus the gate's.
    EXPECT_GE(carpets[0], kCarpets);
    EXPECT_LE(carpets[0], kCarpets + 2);
    EXPECT_LE(full[0], uint64_t(before.probes_max + 1) * carpets[0]);
    EXPECT_EQ(carpets[0], carpets[1]) << "the second burst grew the registry";
    EXPECT_LE(full[1], uint64_t(before.probes_max + 1) * carpets[1]);
}
