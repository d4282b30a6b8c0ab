// The work-stealing deque (runtime/deque.c) on its own: the owner's push,
// pop and pop_if against thieves, step by step and under real threads,
// every element taken exactly once (the owner's early return on an empty
// deque included).
#include <gtest/gtest.h>

#include "tests/deque_check.h"

namespace {

TEST(Deque, Sequence) { EXPECT_EQ(0, knit_test_deque_sequence()); }

TEST(Deque, OwnerAndThievesTakeEveryElementOnce) {
    for (unsigned thieves = 1; thieves <= 3; thieves++)
        for (unsigned long seed = 1; seed <= 4; seed++) {
            unsigned long stolen = 0;
            EXPECT_EQ(0, knit_test_deque_race(200000, thieves, seed, &stolen))
                << thieves << " thieves, seed " << seed;
            EXPECT_LE(stolen, 200000u);
        }
}

}  // namespace
