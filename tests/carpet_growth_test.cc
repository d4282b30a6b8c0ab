// How a submitting thread grows and reuses its carpets (runtime/submit.c).
#include <gtest/gtest.h>

#include <cstdio>

#include "tests/carpet_growth_check.h"

// With its only worker held, a thread's lanes stay in flight, so every 32
// submits need another carpet. The thread tries at most KNIT__PROBES of its
// own full carpets before it takes a new one: growing to N carpets costs
// at most about KNIT__PROBES x N probes of a full carpet (the walk over
// every one of them, as before, cost N^2 / 2: 20,000 for 200). Once the
// worker drained them, a second burst of the same size reuses them: no
// new carpet, and few probes of a full one.
TEST(CarpetGrowth, ProbesOfFullCarpetsGrowLinearlyAndABurstReusesDrainedCarpets) {
    constexpr unsigned kCarpets = 200, kTasks = kCarpets * 32;
    knit_test_growth_result r = knit_test_carpet_growth(kTasks);
    ASSERT_EQ(0, r.rc);
    std::printf("carpets %llu / %llu, probes of a full carpet %llu / %llu\n",
                (unsigned long long)r.carpets[0], (unsigned long long)r.carpets[1],
                (unsigned long long)r.full[0], (unsigned long long)r.full[1]);
    EXPECT_EQ(2ull * kTasks, r.ran);
    EXPECT_EQ(2ull * (kTasks + 1), r.published); // and the two gate tasks
    // Carpets: the tasks' lanes, plus the gate's.
    EXPECT_GE(r.carpets[0], kCarpets);
    EXPECT_LE(r.carpets[0], kCarpets + 2);
    EXPECT_LE(r.full[0], uint64_t(r.probes_max + 1) * r.carpets[0]);
    EXPECT_EQ(r.carpets[0], r.carpets[1]) << "the second burst grew the registry";
    EXPECT_LE(r.full[1], uint64_t(r.probes_max + 1) * r.carpets[1]);
}
