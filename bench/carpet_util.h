// Shared by the lane-core benchmarks: making a carpet, and the producer
// loop (bursts of 8, yield when all 32 lanes are in flight).
#pragma once

#include <cstdint>
#include <thread>

#include "knit/sched.h"
#include "runtime/carpet.h"

namespace knit_bench {

inline knit_carpet *make_carpet(const char *sched, unsigned consumers, unsigned region) {
    const knit_sched_ops *ops = nullptr;
    if (knit_sched_lookup(sched, "bench", &ops) != 0) return nullptr;
    knit_sched_params p{consumers, region};
    knit_carpet *c = nullptr;
    if (knit__carpet_create(ops, &p, nullptr, nullptr, &c) != 0) return nullptr;
    return c;
}

// Publishes n tasks (arg = their number) and flushes the last burst.
inline void produce(knit_carpet *c, uint64_t n) {
    knit__lane_task t{};
    for (uint64_t sent = 0; sent < n;) {
        t.arg = reinterpret_cast<void *>(sent);
        if (knit__carpet_publish(c, &t, nullptr, 0) >= 0) {
            if ((++sent & 7) == 0) knit__carpet_flush(c);
        } else {
            knit__carpet_flush(c);
            std::this_thread::yield();
        }
    }
    knit__carpet_flush(c);
}

}  // namespace knit_bench
