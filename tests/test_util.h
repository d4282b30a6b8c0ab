// Shared helpers for knit's GoogleTest suites.
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "knit/sched.h"
#include "runtime/carpet.h"

namespace knit_test {

// Owns a carpet for the life of a test.
struct Carpet {
    knit_carpet *c = nullptr;
    Carpet(const char *sched, unsigned consumers, unsigned region_lanes,
           knit_claim_trace_fn trace = nullptr, void *trace_ctx = nullptr) {
        const knit_sched_ops *ops = nullptr;
        EXPECT_EQ(0, knit_sched_lookup(sched, "test", &ops)) << knit_last_error();
        knit_sched_params p{consumers, region_lanes};
        int rc = knit__carpet_create(ops, &p, trace, trace_ctx, &c);
        EXPECT_EQ(0, rc) << knit_last_error();
    }
    ~Carpet() { knit__carpet_destroy(c); }
    Carpet(const Carpet &) = delete;
    Carpet &operator=(const Carpet &) = delete;
    operator knit_carpet *() const { return c; }

    // Publishes one task whose arg is `id`, with `len` inline bytes derived
    // from it. Returns the lane or a negative code.
    int publish(uint64_t id, size_t len = 8) {
        knit__lane_task t{};
        t.arg = reinterpret_cast<void *>(static_cast<uintptr_t>(id));
        unsigned char bytes[KNIT__INLINE_BYTES];
        fill(id, bytes, len);
        return knit__carpet_publish(c, &t, bytes, len);
    }
    static void fill(uint64_t id, unsigned char *b, size_t len) {
        for (size_t i = 0; i < len; i++)
            b[i] = static_cast<unsigned char>((id * 131u + i * 7u) ^ (id >> 8));
    }
    static bool intact(const knit__slot *s) {
        uint64_t id = reinterpret_cast<uintptr_t>(s->task.arg);
        unsigned char want[KNIT__INLINE_BYTES];
        fill(id, want, s->task.len);
        return std::memcmp(want, s->data, s->task.len) == 0;
    }
};

// A visitor that copies lanes out and records them in run order; it can be
// told to fail at the n-th visit.
struct Collector {
    knit_carpet *c;
    std::vector<unsigned> lanes;
    std::vector<uint64_t> ids;
    int fail_at = -1; // visit index that returns fail_code
    int fail_code = KNIT_ETASK;
    bool corrupt = false;

    explicit Collector(knit_carpet *carpet) : c(carpet) {}

    static int visit(void *ctx, unsigned lane) {
        auto *self = static_cast<Collector *>(ctx);
        const knit__slot *s = knit__carpet_slot(self->c, lane);
        if (!Carpet::intact(s)) self->corrupt = true;
        int index = static_cast<int>(self->lanes.size());
        self->lanes.push_back(lane);
        self->ids.push_back(reinterpret_cast<uintptr_t>(s->task.arg));
        if (index == self->fail_at) return self->fail_code;
        return 0;
    }
    int claim(unsigned consumer = 0) {
        return knit__carpet_claim(c, consumer, &Collector::visit, this);
    }
};

inline uint32_t pending(knit_carpet *c) {
    return knit_carpet_host_bits(c) ^ knit_carpet_worker_bits(c);
}

// A one-shot start line for `parties` threads (C++17 has no std::barrier):
// each calls wait(); all return once the last one arrives.
class Barrier {
  public:
    explicit Barrier(unsigned parties) : left_(parties) {}
    void wait() {
        std::unique_lock<std::mutex> lock(mu_);
        if (--left_ == 0) {
            cv_.notify_all();
            return;
        }
        cv_.wait(lock, [this] { return left_ == 0; });
    }

  private:
    std::mutex mu_;
    std::condition_variable cv_;
    unsigned left_;
};

// The mask of lanes [low, low + n).
inline uint32_t lane_mask(unsigned low, unsigned n) {
    uint32_t bits = n >= 32 ? 0xffffffffu : ((1u << n) - 1u);
    return bits << low;
}

// Sets (or unsets, for nullptr) KNIT_SCHED for one scope and restores the
// previous value on exit, so no test leaks its environment into another.
class ScopedSchedEnv {
  public:
    explicit ScopedSchedEnv(const char *value) {
        const char *old = std::getenv("KNIT_SCHED");
        had_ = old != nullptr;
        if (had_) old_ = old;
        if (value != nullptr)
            setenv("KNIT_SCHED", value, 1);
        else
            unsetenv("KNIT_SCHED");
    }
    ~ScopedSchedEnv() {
        if (had_)
            setenv("KNIT_SCHED", old_.c_str(), 1);
        else
            unsetenv("KNIT_SCHED");
    }
    ScopedSchedEnv(const ScopedSchedEnv &) = delete;
    ScopedSchedEnv &operator=(const ScopedSchedEnv &) = delete;

  private:
    bool had_ = false;
    std::string old_;
};

inline int noop_claim(knit_carpet *, void *, unsigned, knit_lane_visit_fn, void *) {
    return 0;
}

// A valid ops struct named `name` whose claim takes nothing; tests break
// one field at a time.
inline knit_sched_ops valid_ops(const char *name) {
    knit_sched_ops ops{};
    ops.abi_version = KNIT_SCHED_ABI_VERSION;
    ops.size = sizeof(knit_sched_ops);
    ops.name = name;
    ops.summary = "test discipline";
    ops.claim = noop_claim;
    return ops;
}

} // namespace knit_test
