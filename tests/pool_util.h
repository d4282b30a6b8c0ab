// A pool for the length of a test: created with the given shape, drained and
// destroyed (checked) at the end, unless release() handed it over; and a
// gate that holds a pool's only worker while a test fills its carpets.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "knit/knit.h"

namespace knit_test {

struct Pool {
    knit_pool *p = nullptr;
    explicit Pool(unsigned threads, const char *sched = nullptr, size_t max_pending = 0,
                  int backpressure = KNIT_BLOCK) {
        knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
        o.threads = threads;
        o.sched = sched;
        o.max_pending = max_pending;
        o.backpressure = backpressure;
        EXPECT_EQ(0, knit_pool_create(&o, &p)) << knit_last_error();
    }
    ~Pool() {
        if (p) {
            EXPECT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN)) << knit_last_error();
        }
    }
    // Hands the pool over to a test that destroys it itself.
    knit_pool *release() {
        knit_pool *q = p;
        p = nullptr;
        return q;
    }
    Pool(const Pool &) = delete;
    Pool &operator=(const Pool &) = delete;
    operator knit_pool *() const { return p; }
};

struct Gate {
    std::atomic<int> open{0};
    std::atomic<int> entered{0};
};

inline void *wait_gate(knit_task *, void *arg) {
    auto *g = static_cast<Gate *>(arg);
    // Acquire/release: pairs with the test thread's release of `open`.
    g->entered.fetch_add(1, std::memory_order_release);
    while (g->open.load(std::memory_order_acquire) == 0) std::this_thread::yield();
    return nullptr;
}

// Holds the pool's only worker in wait_gate until release_worker.
inline knit_future *hold_worker(knit_pool *pool, Gate &gate) {
    knit_future *blocker = nullptr;
    EXPECT_EQ(0, knit_submit(pool, wait_gate, &gate, &blocker));
    while (gate.entered.load(std::memory_order_acquire) == 0) std::this_thread::yield();
    return blocker;
}

inline void release_worker(Gate &gate, knit_future *blocker) {
    gate.open.store(1, std::memory_order_release);
    EXPECT_EQ(0, knit_await(blocker, -1, nullptr));
    EXPECT_EQ(0, knit_future_release(blocker));
}

}  // namespace knit_test
