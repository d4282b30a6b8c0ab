// The per-thread future cache: two magazines (runtime/future.c).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "knit/knit.h"
#include "tests/future_cache_check.h"
#include "tests/pool_util.h"

// A thread that alternates one alloc and one free (a worker making and
// recycling group members' records) must not move a magazine through the
// pool's lock for either, wherever in a magazine it stands: with one
// magazine, a thread at its edge gave the whole cache away on the free and
// took it back on the next alloc, two lock round trips per task.
// Both size classes (futures with and without an input) have caches of
// their own and behave alike.
TEST(FutureCache, AllocFreeAtAMagazinesEdgeTakesNoLock) {
    for (int with_in : {0, 1})
        for (unsigned many : {1u, 511u, 512u, 513u, 1023u, 1024u, 1025u, 1536u, 4096u}) {
            knit_test_cache_result r = knit_test_future_cache(many, 10000, with_in);
            ASSERT_EQ(0, r.rc) << "many=" << many << " with_in=" << with_in;
            EXPECT_EQ(0u, r.moves_edge) << "many=" << many << " with_in=" << with_in;
            EXPECT_EQ(0u, r.wrong_class) << "many=" << many << " with_in=" << with_in;
            EXPECT_EQ(0u, r.other_kept) << "the other class's cache stays empty";
        }
}

// A future without an input is three cache lines (the line a task that
// succeeds touches, the failure/waiter/chain line, the returned buffer);
// the input and its inline bytes live only in the larger class.
TEST(FutureCache, AFutureWithoutAnInputIsThreeLines) {
    knit_test_cache_result r = knit_test_future_cache(1, 0, 0);
    ASSERT_EQ(0, r.rc);
    EXPECT_EQ(192u, r.size_plain);
    EXPECT_GE(r.size_in, r.size_plain + 32 + KNIT_INLINE_BYTES);
}

// Freeing many more than it allocates (a thread that releases futures
// others made) hands all but two magazines back to the pool: what a
// thread keeps stays bounded.
TEST(FutureCache, AThreadKeepsAtMostTwoMagazines) {
    for (int with_in : {0, 1})
        for (unsigned many : {100u, 1024u, 5000u, 20000u}) {
            knit_test_cache_result r = knit_test_future_cache(many, 0, with_in);
            ASSERT_EQ(0, r.rc) << "many=" << many << " with_in=" << with_in;
            EXPECT_EQ(0u, r.other_kept) << "many=" << many << " with_in=" << with_in;
            EXPECT_LE(r.kept, 2 * r.cache_max) << "many=" << many;
            // Everything beyond the two magazines went back in whole ones.
            if (many > 2 * r.cache_max) {
                EXPECT_GE(r.moves_drain, (many - 2 * r.cache_max) / r.cache_max);
            }
        }
}

// A recycled future starts clean: a future's second line (a failure's
// message and code, waiter and continuation lists, the antecedent) is
// read only behind flags on its first line and is not rewritten at
// allocation, so each use that fills it must leave it at its defaults.
// Rounds of failures with messages, continuations, and awaits that time
// out with a waiter linked, then plain tasks on the same futures: every
// plain task succeeds with its own result and is not a continuation.
// (In the asan and tsan configurations the allocation also asserts the
// defaults.)
namespace {

void *fail_task(knit_task *t, void *a) {
    return (void *)(intptr_t)knit_task_fail(t, 7, "failure %d", (int)(intptr_t)a);
}

void *echo_task(knit_task *t, void *a) {
    void *r = nullptr;
    // Not a continuation: a stale chain would make this succeed.
    if (knit_task_antecedent(t, &r) != KNIT_EINVAL) return nullptr;
    return a;
}

void *then_task(knit_task *t, void *) {
    void *r = nullptr;
    int rc = knit_task_antecedent(t, &r);
    return (void *)(intptr_t)(rc == KNIT_ETASK ? 1 : 2);
}

std::atomic<bool> slow_open{false};

void *slow_task(knit_task *, void *a) {
    while (!slow_open.load()) std::this_thread::yield();
    return a;
}

}  // namespace

TEST(FutureCache, ARecycledFutureStartsClean) {
    knit_test::Pool p(1);
    const int n = 700;  // more than a magazine: futures move between threads
    for (int round = 0; round < 4; round++) {
        std::vector<knit_future *> fs(n), cs(n);
        for (int i = 0; i < n; i++)
            ASSERT_EQ(0, knit_submit(p, fail_task, (void *)(intptr_t)i, &fs[i]));
        for (int i = 0; i < n; i++)
            ASSERT_EQ(0, knit_future_then(fs[i], then_task, nullptr, &cs[i]));
        for (int i = 0; i < n; i++) {
            ASSERT_EQ(KNIT_ETASK, knit_await(fs[i], -1, nullptr));
            EXPECT_NE(nullptr, strstr(knit_last_error(), "failure")) << knit_last_error();
            void *r = nullptr;
            ASSERT_EQ(0, knit_await(cs[i], -1, &r));
            EXPECT_EQ((void *)(intptr_t)1, r) << "the continuation saw its antecedent fail";
        }
        // A waiter that links itself and leaves on its timeout.
        slow_open = false;
        knit_future *slow = nullptr;
        ASSERT_EQ(0, knit_submit(p, slow_task, (void *)5, &slow));
        EXPECT_EQ(KNIT_ETIMEDOUT, knit_await(slow, 2000000, nullptr));
        slow_open = true;
        void *r = nullptr;
        ASSERT_EQ(0, knit_await(slow, -1, &r));
        EXPECT_EQ((void *)5, r);
        ASSERT_EQ(0, knit_future_release(slow));
        for (int i = 0; i < n; i++) {
            ASSERT_EQ(0, knit_future_release(fs[i]));
            ASSERT_EQ(0, knit_future_release(cs[i]));
        }
        // The same futures again, for tasks that succeed.
        for (int i = 0; i < n; i++)
            ASSERT_EQ(0, knit_submit(p, echo_task, (void *)(intptr_t)(i + 1), &fs[i]))
                << knit_last_error();
        for (int i = 0; i < n; i++) {
            void *r2 = nullptr;
            EXPECT_EQ(0, knit_await(fs[i], -1, &r2)) << knit_last_error();
            EXPECT_EQ((void *)(intptr_t)(i + 1), r2);
            ASSERT_EQ(0, knit_future_release(fs[i]));
        }
    }
}
