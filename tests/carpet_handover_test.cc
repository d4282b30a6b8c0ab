// Carpets change hands (issue 18): a thread's submit is never left waiting
// for a carpet while another thread holds idle ones, whoever grew them.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "knit/knit.h"
#include "pool_util.h"

using knit_test::Pool;

namespace {

// A gate tasks wait on until the test opens it.
struct Gate {
    std::mutex m;
    std::condition_variable cv;
    bool open = false;
    void wait() {
        std::unique_lock<std::mutex> l(m);
        cv.wait(l, [&] { return open; });
    }
    void release() {
        {
            std::lock_guard<std::mutex> l(m);
            open = true;
        }
        cv.notify_all();
    }
};

void *gated(knit_task *, void *arg) {
    static_cast<Gate *>(arg)->wait();
    return nullptr;
}

// A gate that counts the tasks that passed it, so a test can wait for
// detached tasks before the gate goes away.
struct CountedGate {
    Gate gate;
    std::atomic<long> passed{0};
    // Waits (bounded) until n tasks passed the gate.
    bool wait_passed(long n) {
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
        while (passed.load() < n) {
            if (std::chrono::steady_clock::now() > until) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return true;
    }
};

void *counted_gated(knit_task *, void *arg) {
    auto *g = static_cast<CountedGate *>(arg);
    g->gate.wait();
    g->passed.fetch_add(1);
    return nullptr;
}

void *ret_arg(knit_task *, void *arg) { return arg; }

void *bump(knit_task *, void *arg) {
    static_cast<std::atomic<long> *>(arg)->fetch_add(1);
    return nullptr;
}

knit_pool_stats_t stats(knit_pool *p) {
    knit_pool_stats_t st;
    std::memset(&st, 0, sizeof st);
    st.size = sizeof st;
    EXPECT_EQ(0, knit_pool_stats(p, &st)) << knit_last_error();
    return st;
}

// A flag a thread raises, and a bounded wait for it: a hang shows up as a
// failure with a message, not as the test's timeout.
struct Flag {
    std::mutex m;
    std::condition_variable cv;
    bool up = false;
    void raise() {
        {
            std::lock_guard<std::mutex> l(m);
            up = true;
        }
        cv.notify_all();
    }
    bool wait_for(std::chrono::seconds s) {
        std::unique_lock<std::mutex> l(m);
        return cv.wait_for(l, s, [&] { return up; });
    }
};

class Handover : public ::testing::TestWithParam<int> {};

// A burst from this thread that grows ~2,045 carpets (nearly the whole
// registry of the default max_pending), run and awaited.
void grow_carpets(knit_pool *pool) {
    const size_t burst = 65436;  // under the default max_pending (65,536)
    Gate g1;
    std::vector<knit_future *> fs;
    fs.reserve(burst);
    for (size_t i = 0; i < burst; i++) {
        knit_future *f = nullptr;
        int rc = knit_submit(pool, gated, &g1, &f);
        EXPECT_EQ(0, rc) << i << ": " << knit_last_error();
        if (rc != 0) break;  // the submitted ones still run (g1 outlives them)
        fs.push_back(f);
    }
    const uint64_t grown = stats(pool).carpets;
    EXPECT_GE(grown, burst / KNIT_LANES) << "the burst needed its own carpets";
    g1.release();
    ASSERT_EQ(0, knit_await_all(fs.data(), fs.size(), -1)) << knit_last_error();
    for (auto *f : fs) knit_future_release(f);
}

// While `holder` keeps the carpets grown_carpets made: thread A needs more
// carpets than the registry has left, and thread B submits for the first
// time while A's tasks are stuck behind a closed gate. Both must be
// served from the holder's carpets.
void others_are_served(knit_pool *pool, const char *holder) {
    CountedGate g2;
    Flag a_done, b_submitted;
    std::atomic<int> a_rc{0}, b_rc{1};
    std::atomic<long> a_submitted{0};
    std::thread a([&] {
        for (int i = 0; i < 4000; i++) {
            int rc = knit_submit(pool, counted_gated, &g2, nullptr);
            if (rc != 0) {
                a_rc = rc;
                break;
            }
            a_submitted.fetch_add(1);
        }
        a_done.raise();
    });
    bool a_served = a_done.wait_for(std::chrono::seconds(60));
    EXPECT_TRUE(a_served) << "thread A's submits did not return while " << holder
                          << " held idle carpets";
    EXPECT_EQ(0, a_rc.load()) << knit_last_error();
    knit_future *bf = nullptr;
    std::thread b([&] {
        b_rc = knit_submit(pool, ret_arg, &b_rc, &bf);
        b_submitted.raise();
        if (b_rc == 0) {
            void *r = nullptr;
            EXPECT_EQ(0, knit_await(bf, -1, &r));
            EXPECT_EQ(static_cast<void *>(&b_rc), r);
            knit_future_release(bf);
        }
    });
    // B must get a carpet while A's tasks are still stuck behind the gate.
    bool served = b_submitted.wait_for(std::chrono::seconds(60));
    EXPECT_TRUE(served) << "thread B's first submit waited for a carpet";
    EXPECT_EQ(0, b_rc.load());
    knit_pool_stats_t st = stats(pool);
    EXPECT_GT(st.carpets_moved, 0u) << "A's carpets came from " << holder;
    EXPECT_LE(st.carpets, 65536u / KNIT_LANES + 2 + 64) << "never past the registry";
    g2.gate.release();
    a.join();
    b.join();
    // A's detached tasks wait on g2: all of them run before it goes away.
    EXPECT_TRUE(g2.wait_passed(a_submitted.load())) << "A's tasks did not all run";
}

// The reproduction: the main thread grows ~2,045 carpets in one
// burst and goes idle; then others_are_served. Before the fix B waited
// forever (and A too, once the registry ran out).
TEST_P(Handover, IdleThreadsCarpetsServeOthers) {
    Pool pool(2, nullptr, 0, GetParam());
    grow_carpets(pool);
    others_are_served(pool, "the idle main thread");
}

// The same with the holder inside a call into the pool that waits for
// long (knit_group_wait) rather than outside it: a thread inside the pool
// that is not publishing keeps no carpet from a taker. (A record is held
// only while its owner publishes, see struct knit__producer; a hold that
// lasted as long as a call would keep these carpets, and this test fails
// with such a hold.)
TEST_P(Handover, CarpetsOfAThreadWaitingInsideThePoolServeOthers) {
    Pool pool(2, nullptr, 0, GetParam());
    Gate hold;
    Flag grown;
    std::atomic<bool> waiting{false};
    std::atomic<int> wait_rc{1};
    std::thread holder([&] {
        grow_carpets(pool);
        knit_group *g = nullptr;
        int rc = knit_group_create(pool, &g);
        EXPECT_EQ(0, rc) << knit_last_error();
        if (rc == 0) {
            rc = knit_group_submit(g, gated, &hold);
            EXPECT_EQ(0, rc) << knit_last_error();
        }
        waiting = rc == 0;
        grown.raise();  // also on a failure, so the main thread goes on
        if (rc == 0) wait_rc = knit_group_wait(g, -1);  // inside until `hold` opens
        if (g != nullptr) {
            EXPECT_EQ(0, knit_group_destroy(g)) << knit_last_error();
        }
    });
    bool up = grown.wait_for(std::chrono::seconds(120));
    EXPECT_TRUE(up) << "the holder's burst did not end";
    EXPECT_TRUE(waiting.load()) << "the holder has no group to wait in";
    if (up && waiting.load()) {
        // Let the holder get into its wait (it helps for a while first).
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        others_are_served(pool, "a thread waiting inside the pool");
    }
    hold.release();
    holder.join();
    if (waiting.load()) {
        EXPECT_EQ(0, wait_rc.load());
    }
}

INSTANTIATE_TEST_SUITE_P(Policies, Handover, ::testing::Values(KNIT_BLOCK, KNIT_FAIL),
                         [](const ::testing::TestParamInfo<int> &i) {
                             return std::string(i.param == KNIT_BLOCK ? "Block" : "Fail");
                         });

// A thread that exits gives its carpets back at once, tasks in flight and
// all: the next thread takes them instead of growing the registry.
TEST(Handover, ExitedThreadsCarpetsBecomeSpare) {
    Pool pool(1);
    Gate g;
    knit_future *blocker = nullptr;
    ASSERT_EQ(0, knit_submit(pool, gated, &g, &blocker));
    std::atomic<long> ran{0};
    std::thread t([&] {
        for (int i = 0; i < 100; i++) ASSERT_EQ(0, knit_submit(pool, bump, &ran, nullptr));
    });
    t.join();  // its 100 tasks are still queued behind the gate
    knit_pool_stats_t st = stats(pool);
    EXPECT_GE(st.carpets_spare, 4u) << "100 queued tasks fill 4 carpets, now spare";
    const uint64_t before = st.carpets;
    std::thread u([&] {
        for (int i = 0; i < 20; i++) ASSERT_EQ(0, knit_submit(pool, bump, &ran, nullptr));
    });
    u.join();
    EXPECT_EQ(before, stats(pool).carpets) << "the spare carpet served the new thread";
    g.release();
    EXPECT_EQ(0, knit_await(blocker, -1, nullptr));
    knit_future_release(blocker);
    for (int i = 0; i < 5000 && ran.load() < 120; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(120, ran.load()) << "tasks in spare carpets still ran";
}

// Threads come and go with bursts of different sizes on a pool whose
// registry is small (max_pending 256: 8 + 2 + 64 carpets), some of them
// staying alive and idle with their carpets while others burst. Every task
// runs exactly once and no submit is refused or stuck.
TEST(Handover, ChurningThreadsWithBursts) {
    Pool pool(2, nullptr, 256, KNIT_BLOCK);
    std::atomic<long> ran{0};
    std::atomic<long> submitted{0};
    std::mt19937 rng(18);
    for (int round = 0; round < 12; round++) {
        std::vector<std::thread> ts;
        Gate hold;  // idle holders wait here while the others burst
        for (int k = 0; k < 6; k++) {
            unsigned n = 1 + rng() % 3000;
            bool stay = k % 2 == 0;
            ts.emplace_back([&, n, stay] {
                std::vector<knit_future *> mine(n);
                for (unsigned i = 0; i < n; i++)
                    ASSERT_EQ(0, knit_submit(pool, bump, &ran, &mine[i])) << knit_last_error();
                submitted += n;
                ASSERT_EQ(0, knit_await_all(mine.data(), n, -1)) << knit_last_error();
                for (auto *f : mine) knit_future_release(f);
                if (stay) hold.wait();  // alive, idle, holding its carpets
            });
        }
        hold.release();
        for (auto &t : ts) t.join();
    }
    EXPECT_EQ(submitted.load(), ran.load());
    knit_pool_stats_t st = stats(pool);
    EXPECT_LE(st.carpets, 256u / KNIT_LANES + 2 + 64);
}

}  // namespace
