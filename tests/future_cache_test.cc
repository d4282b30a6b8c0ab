// The per-thread future cache: two magazines (runtime/future.c).
#include <gtest/gtest.h>

#include "tests/future_cache_check.h"

// A thread that alternates one alloc and one free (a worker making and
// recycling group members' records) must not move a magazine through the
// pool's lock for either, wherever in a magazine it stands: with one
// magazine, a thread at its edge gave the whole cache away on the free and
// took it back on the next alloc, two lock round trips per task.
TEST(FutureCache, AllocFreeAtAMagazinesEdgeTakesNoLock) {
    for (unsigned many : {1u, 511u, 512u, 513u, 1023u, 1024u, 1025u, 1536u, 4096u}) {
        knit_test_cache_result r = knit_test_future_cache(many, 10000);
        ASSERT_EQ(0, r.rc) << "many=" << many;
        EXPECT_EQ(0u, r.moves_edge) << "many=" << many;
    }
}

// Freeing many more than it allocates (a thread that releases futures
// others made) hands all but two magazines back to the pool: what a
// thread keeps stays bounded.
TEST(FutureCache, AThreadKeepsAtMostTwoMagazines) {
    for (unsigned many : {100u, 1024u, 5000u, 20000u}) {
        knit_test_cache_result r = knit_test_future_cache(many, 0);
        ASSERT_EQ(0, r.rc) << "many=" << many;
        EXPECT_LE(r.kept, 2 * r.cache_max) << "many=" << many;
        // Everything beyond the two magazines went back in whole ones.
        if (many > 2 * r.cache_max) {
            EXPECT_GE(r.moves_drain, (many - 2 * r.cache_max) / r.cache_max);
        }
    }
}
