// Entering a pool (runtime/entry.c): destroy waits for every call inside,
// through a thread's entry slots, nested calls (depth) and the overflow
// count past the slots; an enter the state refuses leaves no slot held;
// a thread's record leaves the registry when the thread exits.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <chrono>
#include <thread>
#include <vector>

#include "knit/knit.h"

extern "C" {
int knit__pool_enter(knit_pool *h, bool any);
void knit__pool_exit(knit_pool *h);
unsigned knit__entries_held(void);
unsigned knit__entries_registered(void);
}

namespace {

knit_pool *make_pool() {
    knit_pool_options po = KNIT_POOL_OPTIONS_INIT;
    po.threads = 1;
    knit_pool *p = nullptr;
    EXPECT_EQ(0, knit_pool_create(&po, &p)) << knit_last_error();
    return p;
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
// refused, and nothing is touched after the free (ASan / TSan).
TEST(Entry, RacesWithDestroy) {
    for (int round = 0; round < 20; round++) {
        knit_pool *p = make_pool();
        std::atomic<bool> stop{false};
        std::atomic<uint64_t> in{0}, refused{0};
        std::vector<std::thread> ts;
        for (int i = 0; i < 3; i++)
            ts.emplace_back([&] {
                while (!stop.load()) {
                    knit_pool_stats_t st{};
                    st.size = sizeof st;
                    int rc = knit_pool_stats(p, &st);
                    if (rc == 0)
                        in++;
                    else if (rc == KNIT_ESHUTDOWN)
                        refused++;
                    if (rc == KNIT_ESHUTDOWN) break;
                }
            });
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        EXPECT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
        stop = true;
        for (auto &t : ts) t.join();
        EXPECT_GT(in.load() + refused.load(), 0u);
    }
}

} // namespace
