// Both claim disciplines ("ticket" and "dekker") under real threads: one
// producer thread, N consumer threads each claiming with its own id, started
// together by a barrier. Every task must be seen exactly once with its
// payload intact; for ticket, each consumer also sees increasing ids.
//
// The machine these run on has two cores: consumers that find nothing yield
// (a spinning consumer starves the producer), and the producer yields when
// all 32 lanes are in flight.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "examples/lock_sched.h"
#include "sched/ticket.h"
#include "test_util.h"

using knit_test::Barrier;
using knit_test::Carpet;
using knit_test::pending;

namespace {

// The third discipline, from examples/, registered at run time like a
// user's plugin, runs the same exactly-once test.
const int kLockRegistered = lock_sched_register();

struct Shape {
    unsigned consumers, region_lanes;
};

struct Outcome {
    uint64_t claimed = 0;       // lanes visited, over all claims
    uint64_t claims = 0;        // successful claims
    uint64_t empty_polls = 0;   // claims that returned 0
    uint64_t bad_payload = 0;   // slot bytes or length not what was published
    uint64_t bad_id = 0;        // an id outside [0, tasks)
    uint64_t out_of_order = 0;  // ticket only: a consumer's ids not increasing
    uint64_t seen_twice = 0;    // ids visited more than once
    uint64_t never_seen = 0;    // ids never visited
    int error = 0;              // a claim's or publish's negative code
    bool timed_out = false;
    double seconds = 0;
};

inline size_t payload_len(uint64_t id) { return 8 + id % 57; }

// One run: `tasks` tasks through a `sched` carpet of the given shape.
Outcome run(const char *sched, Shape shape, uint64_t tasks,
            std::chrono::seconds limit) {
    Outcome out;
    Carpet c(sched, shape.consumers, shape.region_lanes);
    if (c.c == nullptr) {
        out.error = KNIT_EINVAL;
        return out;
    }
    const bool ticket = std::string(sched) == "ticket";
    std::unique_ptr<std::atomic<uint8_t>[]> seen(new std::atomic<uint8_t>[tasks]());

    struct Consumer {
        knit_carpet *c = nullptr;
        std::atomic<uint8_t> *seen = nullptr;
        uint64_t tasks = 0;
        bool ticket = false;
        bool have_last = false;
        uint64_t last = 0;
        uint64_t claimed = 0, claims = 0, empty = 0;
        uint64_t bad_payload = 0, bad_id = 0, out_of_order = 0;
        int error = 0;
        static int visit(void *ctx, unsigned lane) {
            auto *k = static_cast<Consumer *>(ctx);
            const knit__slot *s = knit__carpet_slot(k->c, lane);
            const uint64_t id = reinterpret_cast<uintptr_t>(s->task.arg);
            if (id >= k->tasks) {
                k->bad_id++;
                return 0;
            }
            if (s->task.len != payload_len(id) || !Carpet::intact(s))
                k->bad_payload++;
            if (k->ticket && k->have_last && id <= k->last) k->out_of_order++;
            k->have_last = true;
            k->last = id;
            k->seen[id].fetch_add(1, std::memory_order_relaxed);
            return 0;
        }
    };
    std::vector<Consumer> consumers(shape.consumers);
    for (auto &k : consumers) {
        k.c = c.c;
        k.seen = seen.get();
        k.tasks = tasks;
        k.ticket = ticket;
    }

    std::atomic<uint64_t> claimed{0};
    std::atomic<bool> stop{false};
    std::atomic<int> producer_error{0};
    const auto deadline = std::chrono::steady_clock::now() + limit;
    Barrier start(shape.consumers + 1);
    std::vector<std::thread> threads;
    threads.reserve(shape.consumers + 1);
    for (unsigned id = 0; id < shape.consumers; id++) {
        threads.emplace_back([&, id] {
            Consumer &me = consumers[id];
            start.wait();
            uint64_t idle = 0;
            while (claimed.load(std::memory_order_acquire) < tasks &&
                   !stop.load(std::memory_order_relaxed)) {
                int n = knit__carpet_claim(me.c, id, &Consumer::visit, &me);
                if (n > 0) {
                    me.claimed += static_cast<uint64_t>(n);
                    me.claims++;
                    claimed.fetch_add(static_cast<uint64_t>(n),
                                      std::memory_order_acq_rel);
                } else if (n == 0) {
                    me.empty++;
                    std::this_thread::yield();
                    if ((++idle & 1023) == 0 &&
                        std::chrono::steady_clock::now() > deadline)
                        stop = true;
                } else {
                    me.error = n;
                    stop = true;
                }
            }
        });
    }
    threads.emplace_back([&] {
        start.wait();
        uint64_t id = 0, full = 0;
        unsigned burst = 0, burst_len = 1;
        while (id < tasks && !stop.load(std::memory_order_relaxed)) {
            int lane = c.publish(id, payload_len(id));
            if (lane >= 0) {
                id++;
                if (++burst >= burst_len) { // bursts of 1..16 lanes
                    knit__carpet_flush(c);
                    burst = 0;
                    burst_len = burst_len % 16 + 1;
                }
                continue;
            }
            if (lane != KNIT_EAGAIN) {
                producer_error = lane;
                stop = true;
                break;
            }
            knit__carpet_flush(c);
            burst = 0;
            std::this_thread::yield();
            if ((++full & 1023) == 0 && std::chrono::steady_clock::now() > deadline)
                stop = true;
        }
        knit__carpet_flush(c);
    });
    const auto t0 = std::chrono::steady_clock::now();
    for (auto &t : threads) t.join();
    out.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    out.timed_out = stop.load() && producer_error.load() == 0;
    out.error = producer_error.load();
    for (const auto &k : consumers) {
        out.claimed += k.claimed;
        out.claims += k.claims;
        out.empty_polls += k.empty;
        out.bad_payload += k.bad_payload;
        out.bad_id += k.bad_id;
        out.out_of_order += k.out_of_order;
        if (k.error != 0) {
            out.error = k.error;
            out.timed_out = false;
        }
    }
    for (uint64_t i = 0; i < tasks; i++) {
        uint8_t n = seen[i].load(std::memory_order_relaxed);
        if (n == 0) out.never_seen++;
        if (n > 1) out.seen_twice++;
    }
    EXPECT_EQ(0u, pending(c)) << "no lane left in flight";
    if (ticket) {
        EXPECT_EQ(static_cast<int64_t>(tasks), knit__ticket_head(c));
    }
    return out;
}

void expect_exactly_once(const Outcome &o, uint64_t tasks, const char *sched) {
    EXPECT_EQ(0, o.error) << knit_last_error();
    EXPECT_FALSE(o.timed_out) << "no progress before the deadline";
    EXPECT_EQ(tasks, o.claimed);
    EXPECT_EQ(0u, o.never_seen);
    EXPECT_EQ(0u, o.seen_twice);
    EXPECT_EQ(0u, o.bad_id);
    EXPECT_EQ(0u, o.bad_payload);
    if (std::string(sched) == "ticket") {
        EXPECT_EQ(0u, o.out_of_order) << "ticket: each consumer's ids increase";
    }
}

std::string shape_name(const char *sched, Shape s) {
    return std::string(sched) + "_consumers" + std::to_string(s.consumers) +
           "_region" + std::to_string(s.region_lanes);
}

} // namespace

// ---- exactly once, for each shape ----------------------------------------

class ExactlyOnce
    : public ::testing::TestWithParam<std::tuple<const char *, Shape>> {};

// 20,000 tasks (bursts of 1..16, payloads of 8..64 bytes) through each
// (consumers, region_lanes) shape: every id seen exactly once, payload
// intact, nothing left in flight; for ticket, per-consumer order too.
TEST_P(ExactlyOnce, EveryTaskSeenOnceWithItsPayload) {
    const char *sched = std::get<0>(GetParam());
    const Shape shape = std::get<1>(GetParam());
    ASSERT_EQ(0, kLockRegistered) << knit_last_error();
    constexpr uint64_t kTasks = 20000;
    Outcome o = run(sched, shape, kTasks, std::chrono::seconds(60));
    expect_exactly_once(o, kTasks, sched);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ExactlyOnce,
    ::testing::Combine(::testing::Values("ticket", "dekker", "lock"),
                       ::testing::Values(Shape{2, 8}, Shape{3, 8}, Shape{4, 4},
                                         Shape{2, 16}, Shape{6, 4})),
    [](const ::testing::TestParamInfo<std::tuple<const char *, Shape>> &info) {
        return shape_name(std::get<0>(info.param), std::get<1>(info.param));
    });

// ---- stress ---------------------------------------------------------------

// Ten million tasks, one producer, 2, 4 and 8 consumers. Shapes: region_lanes
// 8 for 2 and 4 consumers (4 regions: valid for dekker), 4 for 8 consumers
// (dekker needs 8 regions for 8 consumers; ticket uses the same shape, i.e.
// batches of 4).
//
// Under the sanitizers (the build defines KNIT_SANITIZER=1 for --config=asan
// and --config=tsan) the count drops to one million by default: TSan slows
// every atomic and every slot read by an order of magnitude (about 3 s per
// million tasks per shape on two cores, so 10M x 6 shapes would take minutes
// of the shared machine). The protocol paths exercised are the same. In
// sanitizer builds only, KNIT_STRESS_TASKS=<n> overrides the count, e.g.
// --test_env=KNIT_STRESS_TASKS=10000000 for the full run under TSan.
uint64_t stress_tasks() {
#ifdef KNIT_SANITIZER
    if (const char *env = std::getenv("KNIT_STRESS_TASKS")) {
        const unsigned long long n = std::strtoull(env, nullptr, 10);
        if (n > 0) return n;
    }
    return 1'000'000;
#else
    return 10'000'000;
#endif
}

class Stress : public ::testing::TestWithParam<std::tuple<const char *, Shape>> {};

TEST_P(Stress, TenMillionTasksExactlyOnce) {
    const char *sched = std::get<0>(GetParam());
    const Shape shape = std::get<1>(GetParam());
    const uint64_t tasks = stress_tasks();
    Outcome o = run(sched, shape, tasks, std::chrono::seconds(300));
    expect_exactly_once(o, tasks, sched);
    RecordProperty("seconds", std::to_string(o.seconds));
    std::printf("%s: %llu tasks in %.2f s, %llu claims (%.2f lanes/claim), "
                "%llu empty polls\n",
                shape_name(sched, shape).c_str(),
                static_cast<unsigned long long>(tasks), o.seconds,
                static_cast<unsigned long long>(o.claims),
                o.claims ? static_cast<double>(o.claimed) / o.claims : 0.0,
                static_cast<unsigned long long>(o.empty_polls));
}

INSTANTIATE_TEST_SUITE_P(
    Consumers, Stress,
    ::testing::Combine(::testing::Values("ticket", "dekker"),
                       ::testing::Values(Shape{2, 8}, Shape{4, 8}, Shape{8, 4})),
    [](const ::testing::TestParamInfo<std::tuple<const char *, Shape>> &info) {
        return shape_name(std::get<0>(info.param), std::get<1>(info.param));
    });
