// Entering a pool (runtime/entry.c): destroy waits for every call inside,
// through a thread's entry slots, nested calls (depth) and the overflow
// count past the slots; an enter the state refuses leaves no slot held;
// a thread's record leaves the registry when the thread exits; submit
// credits kept in a slot (K at a time with max_pending >= 2048) come back
// at thread exit, at eviction, at destroy and at the bound.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <chrono>
#include <thread>
#include <vector>

#include "knit/knit.h"
#include "pool_util.h"

extern "C" {
int knit__pool_enter(knit_pool *h, bool any);
void knit__pool_exit(knit_pool *h);
unsigned knit__entries_held(void);
unsigned knit__entries_sticky(void);
unsigned knit__entries_registered(void);
uint64_t knit__entries_credits(const knit_pool *h);
}

namespace {

// A pool of the given shape that the test destroys itself (in threads,
// on the thread that holds credits, at a chosen moment).
knit_pool *make_pool(size_t max_pending = 0, int backpressure = KNIT_BLOCK,
                     unsigned threads = 1) {
    return knit_test::Pool(threads, nullptr, max_pending, backpressure).release();
}

// Destroys a pool on its own thread; `done` says it returned.
struct Destroyer {
    std::atomic<bool> done{false};
    std::atomic<int> rc{-1};
    std::thread t;
    explicit Destroyer(knit_pool *p)
        : t([this, p] {
              rc = knit_pool_destroy(p, KNIT_DRAIN);
              done = true;
          }) {}
    bool wait_done() {
        for (int i = 0; i < 20000 && !done.load(); i++)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return done.load();
    }
};

void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }

// Six pools entered at once from one thread: four in its slots (one of
// them twice), two past them in the handles' counts. Each destroy waits
// until that pool's last call has left, and no longer.
TEST(Entry, DestroyWaitsForSlotsNestingAndOverflow) {
    ASSERT_EQ(0u, knit__entries_held());
    knit_pool *p[6];
    for (auto &x : p) x = make_pool();
    for (auto *x : p) ASSERT_EQ(0, knit__pool_enter(x, false)) << knit_last_error();
    ASSERT_EQ(0, knit__pool_enter(p[0], false)) << knit_last_error(); // nested
    EXPECT_EQ(4u, knit__entries_held());
    std::vector<std::unique_ptr<Destroyer>> d;
    for (auto *x : p) d.emplace_back(new Destroyer(x));
    settle();
    for (int i = 0; i < 6; i++) EXPECT_FALSE(d[i]->done.load()) << "pool " << i;
    // A call inside a pool being destroyed still gets in (nested) but a
    // new outside call is refused once the state moved on.
    knit__pool_exit(p[5]);
    knit__pool_exit(p[4]);
    EXPECT_TRUE(d[5]->wait_done());
    EXPECT_TRUE(d[4]->wait_done());
    knit__pool_exit(p[0]);
    settle();
    EXPECT_FALSE(d[0]->done.load()) << "destroy returned with a nested call still inside";
    EXPECT_EQ(4u, knit__entries_held());
    for (int i = 0; i < 4; i++) knit__pool_exit(p[i]);
    EXPECT_EQ(0u, knit__entries_held());
    for (int i = 0; i < 4; i++) EXPECT_TRUE(d[i]->wait_done()) << "pool " << i;
    for (auto &x : d) {
        x->t.join();
        EXPECT_EQ(0, x->rc.load());
    }
}

// Refused enters (a destroyed pool, a pool shutting down) hold no slot:
// more of them than there are slots, then a live pool still gets one.
TEST(Entry, RefusedEnterHoldsNoSlot) {
    knit_pool *dead = make_pool();
    ASSERT_EQ(0, knit_pool_destroy(dead, KNIT_DRAIN));
    for (int i = 0; i < 10; i++) {
        EXPECT_EQ(KNIT_ESHUTDOWN, knit__pool_enter(dead, false));
        EXPECT_EQ(KNIT_ESHUTDOWN, knit__pool_enter(dead, true));
    }
    EXPECT_EQ(0u, knit__entries_held());
    knit_future *f = nullptr;
    EXPECT_EQ(KNIT_ESHUTDOWN, knit_submit(dead, [](knit_task *, void *) -> void * { return nullptr; },
                                          nullptr, &f));
    EXPECT_EQ(0u, knit__entries_held());
    knit_pool *live = make_pool();
    ASSERT_EQ(0, knit__pool_enter(live, false));
    EXPECT_EQ(1u, knit__entries_held());
    // A nested enter re-checks the state: refused once destroy began.
    Destroyer d(live);
    for (int i = 0; i < 2000 && knit__pool_enter(live, false) == 0; i++) {
        knit__pool_exit(live); // still live: undo, look again
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(KNIT_ESHUTDOWN, knit__pool_enter(live, false));
    EXPECT_EQ(1u, knit__entries_held());
    settle();
    EXPECT_FALSE(d.done.load()) << "destroy returned with a call still inside";
    knit__pool_exit(live);
    EXPECT_EQ(0u, knit__entries_held());
    EXPECT_TRUE(d.wait_done());
    d.t.join();
}

// Threads that submit and await once, then exit: their records leave the
// registry, which stays as long as it was.
TEST(Entry, ExitedThreadsLeaveTheRegistry) {
    knit_pool *p = make_pool();
    ASSERT_EQ(0, knit__pool_enter(p, true)); // this thread is registered
    knit__pool_exit(p);
    unsigned before = knit__entries_registered();
    for (int round = 0; round < 10; round++) {
        std::vector<std::thread> ts;
        std::atomic<int> ok{0};
        for (int i = 0; i < 20; i++)
            ts.emplace_back([p, &ok] {
                knit_future *f = nullptr;
                if (knit_submit(p, [](knit_task *, void *a) -> void * { return a; },
                                reinterpret_cast<void *>(7), &f) != 0)
                    return;
                void *r = nullptr;
                if (knit_await(f, -1, &r) == 0 && r == reinterpret_cast<void *>(7)) ok++;
                knit_future_release(f);
            });
        for (auto &t : ts) t.join();
        EXPECT_EQ(20, ok.load());
    }
    EXPECT_EQ(before, knit__entries_registered());
    EXPECT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
}

// Many threads entering and leaving while the pool is destroyed: destroy
// returns, every call either got in before it (and finished) or was
// refused, and nothing is touched after the free (ASan / TSan). Each
// thread calls until it is refused (the handle outlives the pool, so that
// ends), and destroy starts only once every thread has made a call: a
// sleep alone gave no thread time to start on a loaded CI machine (no call
// at all in a round, under ASan).
TEST(Entry, RacesWithDestroy) {
    for (int round = 0; round < 20; round++) {
        knit_pool *p = make_pool();
        std::atomic<unsigned> started{0};
        std::atomic<uint64_t> in{0}, refused{0}, other{0};
        std::vector<std::thread> ts;
        for (int i = 0; i < 3; i++)
            ts.emplace_back([&] {
                for (bool first = true;; first = false) {
                    knit_pool_stats_t st{};
                    st.size = sizeof st;
                    int rc = knit_pool_stats(p, &st);
                    if (rc == 0)
                        in++;
                    else if (rc == KNIT_ESHUTDOWN)
                        refused++;
                    else
                        other++;
                    if (first) started++;
                    if (rc != 0) break;
                }
            });
        while (started.load() < 3) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        EXPECT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
        for (auto &t : ts) t.join();
        EXPECT_EQ(3u, refused.load()) << "every thread ends refused";
        EXPECT_EQ(0u, other.load()) << "a call during destroy is in or refused";
        EXPECT_GT(in.load(), 0u);
    }
}

// ---- submit credits ----

void *nop(knit_task *, void *a) { return a; }

// One task submitted, awaited and released.
void run_one(knit_pool *p) {
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(p, nop, nullptr, &f)) << knit_last_error();
    ASSERT_EQ(0, knit_await(f, -1, nullptr));
    knit_future_release(f);
}

uint64_t stats_pending(knit_pool *p) {
    knit_pool_stats_t st{};
    st.size = sizeof st;
    EXPECT_EQ(0, knit_pool_stats(p, &st)) << knit_last_error();
    return st.pending;
}

// Holds the pool's only worker in a task until release().
struct Gate {
    std::atomic<bool> open{false}, in{false};
    knit_future *f = nullptr;
    static void *body(knit_task *, void *a) {
        auto *g = static_cast<Gate *>(a);
        g->in = true;
        while (!g->open.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
        return nullptr;
    }
    explicit Gate(knit_pool *p) {
        EXPECT_EQ(0, knit_submit(p, body, this, &f)) << knit_last_error();
        while (!in.load()) std::this_thread::yield();
    }
    void release() {
        open = true;
        EXPECT_EQ(0, knit_await(f, -1, nullptr));
        knit_future_release(f);
    }
};

// One submit under a large bound keeps the rest of its refill in the slot
// (sticky after the call), and the statistics leave it out; under a small
// bound nothing is kept.
TEST(Credits, KeptInTheSlotOnlyUnderALargeBound) {
    for (size_t bound : {size_t(64), size_t(2047), size_t(2048), size_t(65536)}) {
        knit_pool *p = make_pool(bound, KNIT_BLOCK);
        ASSERT_NE(nullptr, p);
        run_one(p);
        bool credits = bound >= 2048;
        EXPECT_EQ(credits ? 1u : 0u, knit__entries_sticky()) << "bound " << bound;
        EXPECT_EQ(credits ? 31u : 0u, knit__entries_credits(p)) << "bound " << bound;
        EXPECT_EQ(0u, stats_pending(p)) << "bound " << bound;
        EXPECT_EQ(0u, knit__entries_held());
        // destroy on the thread that keeps them: its own revoke takes them.
        ASSERT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN)) << knit_last_error();
        EXPECT_EQ(0u, knit__entries_sticky());
    }
}

// A thread that exits gives its credits back: the units leave counts, so
// the pending count is 0 again and destroy does not wait for them.
TEST(Credits, ThreadExitGivesThemBack) {
    knit_pool *p = make_pool(0, KNIT_BLOCK); // the default bound, 65536
    for (int i = 0; i < 8; i++) {
        std::thread t([p] {
            for (int k = 0; k < 5; k++) {
                run_one(p);
            }
            EXPECT_EQ(1u, knit__entries_sticky());
            EXPECT_EQ(27u, knit__entries_credits(p));
        });
        t.join();
        EXPECT_EQ(0u, knit__entries_credits(p));
        EXPECT_EQ(0u, stats_pending(p));
    }
    Destroyer d(p);
    EXPECT_TRUE(d.wait_done());
    d.t.join();
    EXPECT_EQ(0, d.rc.load());
}

// Threads that took credits and never call again (they stay alive,
// blocked): destroy takes the credits back and returns.
TEST(Credits, DestroyRevokesThreadsThatNeverCallAgain) {
    knit_pool *p = make_pool(0, KNIT_BLOCK, 2);
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> ts;
    for (int i = 0; i < 6; i++)
        ts.emplace_back([&] {
            knit_future *f = nullptr;
            ASSERT_EQ(0, knit_submit(p, nop, nullptr, &f)) << knit_last_error();
            knit_future_release(f);
            EXPECT_EQ(1u, knit__entries_sticky());
            ready++;
            while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            // After destroy: the slot was emptied, the pool refuses.
            EXPECT_EQ(0u, knit__entries_sticky());
            EXPECT_EQ(KNIT_ESHUTDOWN, knit_submit(p, nop, nullptr, &f));
        });
    while (ready.load() < 6) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(6u * 31u, knit__entries_credits(p));
    Destroyer d(p);
    EXPECT_TRUE(d.wait_done()) << "destroy waited for credits of idle threads";
    go = true;
    for (auto &t : ts) t.join();
    d.t.join();
    EXPECT_EQ(0, d.rc.load());
}

// A thread that keeps credits in all four slots and enters a fifth pool
// empties one of them (its credits go back to that pool).
TEST(Credits, AFifthPoolEvictsASlot) {
    knit_pool *p[5];
    for (auto &x : p) x = make_pool(0, KNIT_BLOCK);
    for (auto *x : p) {
        run_one(x);
    }
    EXPECT_EQ(4u, knit__entries_sticky());
    uint64_t kept = 0;
    for (auto *x : p) {
        uint64_t c = knit__entries_credits(x);
        EXPECT_TRUE(c == 0 || c == 31u) << c;
        kept += c;
        EXPECT_EQ(0u, stats_pending(x)); // stats enters: may evict again
    }
    EXPECT_LE(kept, 4u * 31u);
    for (auto *x : p) EXPECT_LE(knit__entries_credits(x), 31u);
    for (auto *x : p) ASSERT_EQ(0, knit_pool_destroy(x, KNIT_DRAIN)) << knit_last_error();
    EXPECT_EQ(0u, knit__entries_sticky());
}

// The bound with credits: N producers, the worker held back, KNIT_FAIL.
// Each submits until it is refused. A refused producer holds no credit,
// and each other producer holds at most 31, so every refusal comes at no
// fewer than max_pending - 31 x (N - 1) real pending tasks, and never
// above max_pending; the count the test reads may lag by one submit per
// other producer (counted after its knit_submit returns). After the gate opens, everything runs.
TEST(Credits, TheBoundWithManyProducers) {
    const size_t bound = 4096;
    const unsigned n = 4;
    for (int round = 0; round < 5; round++) {
        knit_pool *p = make_pool(bound, KNIT_FAIL);
        Gate gate(p);
        std::atomic<uint64_t> accepted{0};
        std::atomic<unsigned> done{0};
        std::atomic<bool> finish{false};
        std::vector<std::thread> ts;
        for (unsigned i = 0; i < n; i++)
            ts.emplace_back([&] {
                for (;;) {
                    int rc = knit_submit(p, nop, nullptr, nullptr);
                    if (rc == 0) {
                        accepted++;
                        continue;
                    }
                    EXPECT_EQ(KNIT_EAGAIN, rc) << knit_last_error();
                    // Refused: never above the bound, never far below it.
                    uint64_t a = accepted.load();
                    EXPECT_LE(a, bound);
                    // Each other producer may hold 31 credits and have one
                    // accepted submit it has not counted yet.
                    EXPECT_GE(a + 32u * (n - 1), bound) << "refused early";
                    break;
                }
                done++;
                while (!finish.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            });
        while (done.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        EXPECT_EQ(accepted.load(), stats_pending(p));
        gate.release();
        finish = true;
        for (auto &t : ts) t.join();
        ASSERT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN)) << knit_last_error();
    }
}

// Under KNIT_BLOCK, threads that took credits and went idle must not keep
// a submitter waiting at the bound: it takes their credits back.
TEST(Credits, AnIdleThreadsCreditsDoNotBlockTheBound) {
    const size_t bound = 2048;
    knit_pool *p = make_pool(bound, KNIT_BLOCK);
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> idle;
    for (int i = 0; i < 8; i++)
        idle.emplace_back([&] {
            run_one(p);
            ready++;
            while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        });
    while (ready.load() < 8) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(8u * 31u, knit__entries_credits(p));
    {
        Gate gate(p);
        // Fill to the bound with the worker held: the last submits wait
        // until the gate opens, then go on.
        std::thread filler([&] {
            for (size_t i = 0; i < bound + 100; i++)
                ASSERT_EQ(0, knit_submit(p, nop, nullptr, nullptr)) << knit_last_error();
        });
        for (int i = 0; i < 100 && stats_pending(p) + 1 < bound - 31; i++)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        // The filler waits at the bound now, and takes idle credits back
        // in each round of its wait. This thread's own (from the gate's
        // submit) may have escaped a round while it was inside the stats
        // call above, so look for the outcome, without entering the pool.
        for (int i = 0; i < 400 && knit__entries_credits(p) != 0; i++)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        EXPECT_EQ(0u, knit__entries_credits(p)) << "the bound took the idle credits";
        gate.release();
        filler.join();
    }
    go = true;
    for (auto &t : idle) t.join();
    ASSERT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN)) << knit_last_error();
}

} // namespace
