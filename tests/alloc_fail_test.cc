// Failing allocations: built against //:knit_faults, where the n-th
// allocation point reached on a thread can be made to fail
// (base/alloc.h). For each operation below, every n from 1 up to the
// number of allocation points the operation reaches is tried: the call must
// return KNIT_ENOMEM with a message, free everything it had taken, change
// nothing (the pool's counters stay as they were) and leave the pool
// usable. The walk ends at the first n the operation no longer reaches.
//
// "Frees everything": in the plain build the test reads jemalloc's per
// thread byte counters (thread.allocated / thread.deallocated: knit's
// malloc is jemalloc) around operations that must own nothing after a
// failure; under --config=asan, malloc is ASan's and LeakSanitizer checks
// the whole process after each walk (and again at exit).
#include <gtest/gtest.h>
#include <jemalloc/jemalloc.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "knit/knit.h"
#include "base/alloc.h"
#include "tests/pool_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define KNIT_TEST_ASAN 1
#endif
#ifdef KNIT_TEST_ASAN
#include <sanitizer/lsan_interface.h>
#endif

#ifndef KNIT_FAULT_INJECTION
#error "alloc_fail_test must be built against //:knit_faults"
#endif

namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Bytes this thread has allocated minus bytes it has freed, through
// jemalloc (malloc, and the arena's mallocx).
int64_t net_bytes() {
    uint64_t a = 0, d = 0;
    size_t sz = sizeof a;
    if (mallctl("thread.allocated", &a, &sz, nullptr, 0) != 0) return 0;
    sz = sizeof d;
    if (mallctl("thread.deallocated", &d, &sz, nullptr, 0) != 0) return 0;
    return static_cast<int64_t>(a - d);
}

void leak_check() {
#ifdef KNIT_TEST_ASAN
    EXPECT_EQ(0, __lsan_do_recoverable_leak_check()) << "LeakSanitizer found a leak";
#endif
}

// Walks the failure points of an operation: op(n) sets up, arms the n-th
// allocation point on the thread that runs the operation, runs it, checks
// the outcome and cleans up; it returns whether the failure fired. The walk
// ends at the first n the operation does not reach. Returns the number of
// points that failed.
template <class Op>
unsigned walk(const char *what, Op op, unsigned limit = 400) {
    unsigned points = 0;
    for (unsigned n = 1; n <= limit; n++) {
        SCOPED_TRACE(std::string(what) + ": allocation point " + std::to_string(n));
        bool fired = op(n);
        knit__fault_arm(0);
        if (!fired) {
            leak_check();
            return points;
        }
        points++;
    }
    ADD_FAILURE() << what << ": more than " << limit << " allocation points";
    return points;
}

void *ret_arg(knit_task *, void *arg) { return arg; }

using knit_test::Gate;
using knit_test::hold_worker;
using knit_test::release_worker;
using knit_test::wait_gate;

knit_pool *make_pool(unsigned threads, int backpressure = KNIT_BLOCK) {
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = threads;
    o.arena_bytes = 8 * kMiB;
    o.backpressure = backpressure;
    knit_pool *pool = nullptr;
    EXPECT_EQ(0, knit_pool_create(&o, &pool)) << knit_last_error();
    return pool;
}

knit_pool_stats_t stats(knit_pool *pool) {
    knit_pool_stats_t s;
    std::memset(&s, 0, sizeof s);
    s.size = sizeof s;
    EXPECT_EQ(0, knit_pool_stats(pool, &s));
    return s;
}

// The pool still runs a task and returns its value.
void expect_usable(knit_pool *pool) {
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(pool, ret_arg, reinterpret_cast<void *>(77), &f))
        << knit_last_error();
    void *r = nullptr;
    EXPECT_EQ(0, knit_await(f, -1, &r));
    EXPECT_EQ(reinterpret_cast<void *>(77), r);
    EXPECT_EQ(0, knit_future_release(f));
}

// Every future in fs settles with a result; all are released.
void expect_all_ran(const std::vector<knit_future *> &fs) {
    for (knit_future *f : fs) {
        void *r = nullptr;
        EXPECT_EQ(0, knit_await(f, -1, &r));
        EXPECT_NE(nullptr, r);
        EXPECT_EQ(0, knit_future_release(f));
    }
}

void expect_enomem(int rc) {
    EXPECT_EQ(KNIT_ENOMEM, rc);
    EXPECT_STRNE("", knit_last_error());
}

TEST(AllocFail, PoolCreate) {
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 2;
    o.arena_bytes = 8 * kMiB;
    unsigned points = walk("knit_pool_create", [&](unsigned n) {
        knit_pool *pool = reinterpret_cast<knit_pool *>(1);
        int64_t before = net_bytes();
        knit__fault_arm(n);
        int rc = knit_pool_create(&o, &pool);
        bool fired = knit__fault_fired();
        knit__fault_arm(0);
        if (!fired) {
            EXPECT_EQ(0, rc) << knit_last_error();
            if (rc == 0) {
                expect_usable(pool);
                EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN));
            }
            return false;
        }
        expect_enomem(rc);
        EXPECT_EQ(nullptr, pool);
        // When a later worker thread cannot start, the ones that did have
        // come and gone: glibc keeps a little of their bookkeeping (its
        // thread cache), allocated on this thread. LSan (asan build) still
        // checks those points for leaks.
        if (std::strstr(knit_last_error(), "cannot start worker thread") == nullptr) {
            EXPECT_EQ(before, net_bytes()) << "bytes left allocated";
        }
        return true;
    });
    // The pool, its handle, the arena (header, region, free ranges,
    // jemalloc's arena), the carpet registry, workers, deques and one
    // producer record and one thread per worker.
    EXPECT_GE(points, 13u);
    std::printf("knit_pool_create: %u allocation points\n", points);
}

// The first submit from a thread registers it (a producer record, its
// first carpet, a slab of futures); each failure leaves the pool as it was
// and a later submit from the same thread works.
TEST(AllocFail, FirstSubmitFromANewThread) {
    unsigned points = walk("first submit", [&](unsigned n) {
        knit_pool *pool = make_pool(2);
        knit_pool_stats_t s0 = stats(pool);
        bool fired = false;
        std::thread t([&] {
            knit_future *f = reinterpret_cast<knit_future *>(1);
            knit__fault_arm(n);
            int rc = knit_submit(pool, ret_arg, reinterpret_cast<void *>(5), &f);
            fired = knit__fault_fired();
            knit__fault_arm(0);
            if (!fired) {
                ASSERT_EQ(0, rc) << knit_last_error();
                void *r = nullptr;
                EXPECT_EQ(0, knit_await(f, -1, &r));
                EXPECT_EQ(reinterpret_cast<void *>(5), r);
                EXPECT_EQ(0, knit_future_release(f));
                return;
            }
            expect_enomem(rc);
            EXPECT_EQ(nullptr, f);
            knit_pool_stats_t s1 = stats(pool);
            EXPECT_EQ(s0.submitted, s1.submitted);
            EXPECT_EQ(0u, s1.pending);
            expect_usable(pool); // the same thread, now without a failure
        });
        t.join();
        EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN));
        return fired;
    });
    EXPECT_GE(points, 3u);
    std::printf("first submit: %u allocation points\n", points);
}

// Growth while the only worker is held: every 32 submits need a new carpet
// (and now and then the thread's list of carpets grows), every 128 a slab
// of futures. The failing submit returns ENOMEM and is not counted; every
// other one runs.
TEST(AllocFail, CarpetAndFutureGrowth) {
    constexpr int kTasks = 300;
    unsigned points = walk("growth", [&](unsigned n) {
        knit_pool *pool = make_pool(1);
        Gate gate;
        knit_future *blocker = hold_worker(pool, gate);
        std::vector<knit_future *> ok;
        int failures = 0;
        knit__fault_arm(n);
        for (int i = 0; i < kTasks; i++) {
            knit_future *f = nullptr;
            int rc = knit_submit(pool, ret_arg,
                                 reinterpret_cast<void *>(uintptr_t(i + 1)), &f);
            if (rc == 0) {
                ok.push_back(f);
            } else {
                expect_enomem(rc);
                EXPECT_EQ(nullptr, f);
                failures++;
            }
        }
        bool fired = knit__fault_fired();
        knit__fault_arm(0);
        EXPECT_EQ(fired ? 1 : 0, failures);
        knit_pool_stats_t s = stats(pool);
        EXPECT_EQ(ok.size() + 1, s.submitted);
        EXPECT_EQ(ok.size(), s.pending);
        gate.open.store(1, std::memory_order_release);
        expect_all_ran(ok);
        release_worker(gate, blocker);
        expect_usable(pool);
        EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN));
        return fired;
    });
    EXPECT_GE(points, 8u);
    std::printf("carpet and future growth: %u allocation points\n", points);
}

// Subtasks submitted from inside a task take futures from the worker's own
// cache: when it needs a new slab and cannot get one, that submit fails
// with ENOMEM and the task goes on.
struct Nest {
    knit_pool *pool;
    unsigned n;
    int failures;
    int ran;
    bool fired;
};

void *nest_parent(knit_task *, void *arg) {
    auto *x = static_cast<Nest *>(arg);
    std::vector<knit_future *> kids;
    knit__fault_arm(x->n);
    for (int i = 0; i < 400; i++) {
        knit_future *f = nullptr;
        int rc = knit_submit(x->pool, ret_arg, reinterpret_cast<void *>(1), &f);
        if (rc == 0) {
            kids.push_back(f);
        } else {
            expect_enomem(rc);
            x->failures++;
        }
    }
    x->fired = knit__fault_fired();
    knit__fault_arm(0);
    for (knit_future *f : kids) {
        void *r = nullptr;
        if (knit_await(f, -1, &r) == 0 && r != nullptr) x->ran++;
        knit_future_release(f);
    }
    return nullptr;
}

TEST(AllocFail, NestedSubmit) {
    unsigned points = walk("nested submit", [&](unsigned n) {
        knit_pool *pool = make_pool(2);
        Nest x{pool, n, 0, 0, false};
        knit_future *f = nullptr;
        EXPECT_EQ(0, knit_submit(pool, nest_parent, &x, &f));
        EXPECT_EQ(0, knit_await(f, -1, nullptr));
        EXPECT_EQ(0, knit_future_release(f));
        EXPECT_EQ(x.fired ? 1 : 0, x.failures);
        EXPECT_EQ(400 - x.failures, x.ran);
        expect_usable(pool);
        EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN));
        return x.fired;
    });
    EXPECT_GE(points, 1u);
    std::printf("nested submit: %u allocation points\n", points);
}

// await_any over more than 8 pending futures allocates its waiter records.
TEST(AllocFail, AwaitAnyOfMany) {
    knit_pool *pool = make_pool(1);
    unsigned points = walk("knit_await_any", [&](unsigned n) {
        Gate gate;
        std::vector<knit_future *> fs(20);
        for (auto &f : fs) EXPECT_EQ(0, knit_submit(pool, wait_gate, &gate, &f));
        knit__fault_arm(n);
        size_t which = 99;
        int rc = knit_await_any(fs.data(), fs.size(), 1000000, &which);
        EXPECT_EQ(99u, which);
        bool fired = knit__fault_fired();
        knit__fault_arm(0);
        if (fired) {
            expect_enomem(rc);
        } else {
            EXPECT_EQ(KNIT_ETIMEDOUT, rc);
        }
        gate.open.store(1, std::memory_order_release);
        EXPECT_EQ(0, knit_await_all(fs.data(), fs.size(), -1));
        for (auto f : fs) EXPECT_EQ(0, knit_future_release(f));
        return fired;
    });
    EXPECT_EQ(1u, points);
    expect_usable(pool);
    EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN));
}

// Payloads: an arena allocation that fails under KNIT_FAIL is ENOMEM for
// knit_payload_alloc and knit_submit_copy; nothing is submitted.
TEST(AllocFail, Payloads) {
    knit_pool *pool = make_pool(2, KNIT_FAIL);
    std::vector<char> bytes(1000, 'x');
    unsigned points = walk("knit_submit_copy", [&](unsigned n) {
        knit_pool_stats_t s0 = stats(pool);
        knit_future *f = nullptr;
        knit__fault_arm(n);
        int rc = knit_submit_copy(pool, ret_arg, bytes.data(), bytes.size(), &f);
        bool fired = knit__fault_fired();
        knit__fault_arm(0);
        if (!fired) {
            EXPECT_EQ(0, rc) << knit_last_error();
            EXPECT_EQ(0, knit_await(f, -1, nullptr));
            EXPECT_EQ(0, knit_future_release(f));
            return false;
        }
        expect_enomem(rc);
        EXPECT_EQ(nullptr, f);
        knit_pool_stats_t s1 = stats(pool);
        EXPECT_EQ(s0.submitted, s1.submitted);
        EXPECT_EQ(s0.arena_bytes, s1.arena_bytes);
        return true;
    });
    EXPECT_GE(points, 1u);
    points = walk("knit_payload_alloc", [&](unsigned n) {
        knit__fault_arm(n);
        void *p = knit_payload_alloc(pool, 4096);
        bool fired = knit__fault_fired();
        knit__fault_arm(0);
        if (fired) {
            EXPECT_EQ(nullptr, p);
            EXPECT_NE(nullptr, std::strstr(knit_last_error(), "arena"))
                << knit_last_error();
        } else {
            EXPECT_NE(nullptr, p);
            knit_payload_free(pool, p);
        }
        return fired;
    });
    EXPECT_EQ(1u, points);
    expect_usable(pool);
    EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN));
}

// Taking an inline payload copies it into malloc'ed memory: when that
// fails the task gets an empty buffer and the bytes stay in place, so a
// second take gets them.
struct Msg {
    std::atomic<int> *flag;
    char tag[8];
};

void *take_inline(knit_task *task, void *arg) {
    std::atomic<int> *flag = static_cast<Msg *>(arg)->flag;
    knit__fault_arm(1);
    knit_buf b = knit_task_take_buf(task);
    bool fired = knit__fault_fired();
    knit__fault_arm(0);
    int outcome = 1;
    size_t len = 0;
    if (!fired || b.data != nullptr || knit_task_bytes(task, &len) == nullptr ||
        len != sizeof(Msg))
        outcome = 2;
    knit_buf again = knit_task_take_buf(task);
    if (again.data == nullptr || again.len != sizeof(Msg) ||
        std::memcmp(static_cast<Msg *>(again.data)->tag, "payload", 8) != 0)
        outcome = 3;
    knit_buf_free(&again);
    // Relaxed: the test reads it after the await, which orders it.
    flag->store(outcome, std::memory_order_relaxed);
    return nullptr;
}

TEST(AllocFail, TakeInlineBuffer) {
    knit_pool *pool = make_pool(1);
    std::atomic<int> outcome{0};
    Msg msg{&outcome, {'p', 'a', 'y', 'l', 'o', 'a', 'd', 0}};
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit_copy(pool, take_inline, &msg, sizeof msg, &f));
    EXPECT_EQ(0, knit_await(f, -1, nullptr));
    EXPECT_EQ(0, knit_future_release(f));
    EXPECT_EQ(1, outcome.load(std::memory_order_relaxed));
    expect_usable(pool);
    EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN));
}

// Pipeline set-up: the pipeline, its items, the reorder ring of each
// serial-in-order stage. A failed create owns nothing.
int count_input(void *ctx, knit_buf *item) {
    auto *left = static_cast<int *>(ctx);
    if (*left == 0) return 0;
    (*left)--;
    void *m = std::malloc(16);
    if (m == nullptr) return KNIT_ENOMEM;
    std::memset(m, 1, 16);
    *item = knit_buf_malloced(m, 16);
    return 1;
}

int touch(void *, uint64_t, knit_buf *item) {
    return item->len == 16 ? 0 : KNIT_EINVAL;
}

// A pipeline of count_input (`*left` items) through `stages`.
knit_pipeline_options count_options(int *left, knit_stage *stages, size_t nstages,
                                    unsigned flags = 0) {
    knit_pipeline_options o = KNIT_PIPELINE_OPTIONS_INIT;
    o.input = count_input;
    o.input_ctx = left;
    o.stages = stages;
    o.nstages = nstages;
    o.flags = flags;
    return o;
}

TEST(AllocFail, PipelineCreate) {
    knit_pool *pool = make_pool(2);
    knit_stage stages[3] = {
        {KNIT_STAGE_SERIAL_IN_ORDER, touch, nullptr},
        {KNIT_STAGE_PARALLEL, touch, nullptr},
        {KNIT_STAGE_SERIAL_IN_ORDER, touch, nullptr},
    };
    unsigned points = walk("knit_pipeline_create", [&](unsigned n) {
        int left = 50;
        knit_pipeline_options o = count_options(&left, stages, 3);
        knit_pipeline *pl = reinterpret_cast<knit_pipeline *>(1);
        int64_t before = net_bytes();
        knit__fault_arm(n);
        int rc = knit_pipeline_create(pool, &o, &pl);
        bool fired = knit__fault_fired();
        knit__fault_arm(0);
        if (!fired) {
            EXPECT_EQ(0, rc) << knit_last_error();
            EXPECT_EQ(0, knit_pipeline_run(pl)) << knit_last_error();
            knit_pipeline_stats ps;
            EXPECT_EQ(0, knit_pipeline_stats_get(pl, &ps));
            EXPECT_EQ(50u, ps.completed);
            knit_pipeline_destroy(pl);
            return false;
        }
        expect_enomem(rc);
        EXPECT_EQ(before, net_bytes()) << "bytes left allocated";
        return true;
    });
    EXPECT_EQ(4u, points); // the pipeline, its items, two rings
    expect_usable(pool);
    EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN));
}

// A group member submitted from outside travels in its lane with no
// record; the thread that claims it makes one from its own cache. Here the
// only worker is held, so the member is claimed by the thread that waits
// for the group, and every allocation point that thread reaches fails in
// turn: in the submit (KNIT_ENOMEM, nothing counted), or in the claim,
// where the member then runs with a record on the claimer's stack. Either
// way the group ends with every accepted member run exactly once.
TEST(AllocFail, GroupMemberInALaneRunsWithoutARecord) {
    knit_pool *pool = make_pool(1);
    unsigned points = walk("group member from outside", [&](unsigned n) {
        bool fired = false;
        std::thread outside([&] {
            std::atomic<int> hold{1}, started{0}, ran{0};
            struct Hold {
                std::atomic<int> *hold, *started;
            } h{&hold, &started};
            knit_future *blocker = nullptr;
            ASSERT_EQ(0, knit_submit(
                             pool,
                             [](knit_task *, void *a) -> void * {
                                 auto *x = static_cast<Hold *>(a);
                                 x->started->store(1);
                                 while (x->hold->load() != 0) std::this_thread::yield();
                                 return nullptr;
                             },
                             &h, &blocker));
            while (started.load() == 0) std::this_thread::yield();
            knit_group *g = nullptr;
            ASSERT_EQ(0, knit_group_create(pool, &g)) << knit_last_error();
            knit__fault_arm(n);
            int rc = knit_group_submit(
                g,
                [](knit_task *, void *a) -> void * {
                    static_cast<std::atomic<int> *>(a)->fetch_add(1);
                    return nullptr;
                },
                &ran);
            int wrc = knit_group_wait(g, -1);
            fired = knit__fault_fired();
            knit__fault_arm(0);
            if (rc == 0) {
                EXPECT_EQ(0, wrc) << knit_last_error();
                EXPECT_EQ(1, ran.load());
            } else {
                expect_enomem(rc);
                EXPECT_EQ(0, wrc);
                EXPECT_EQ(0, ran.load());
            }
            hold = 0;
            EXPECT_EQ(0, knit_await(blocker, -1, nullptr));
            knit_future_release(blocker);
            EXPECT_EQ(0, knit_group_destroy(g));
            EXPECT_EQ(rc == 0 ? 1 : 0, ran.load());
        });
        outside.join();
        return fired;
    });
    EXPECT_GE(points, 1u); // the claim's record, at least
    expect_usable(pool);
    EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN));
}

// KNIT_PIPELINE_INPUT_IN_TASKS: a submit of the input task that fails
// (every allocation point the calling thread reaches in the run: its
// producer record, its futures, its carpets) is absorbed: the calling
// thread calls the input itself, and the run still ends with every item
// through every stage. A fresh thread each time, so its first submit
// reaches every point again.
TEST(AllocFail, PipelineInputInTasksSurvivesFailedSubmits) {
    knit_pool *pool = make_pool(2);
    knit_stage stages[2] = {
        {KNIT_STAGE_PARALLEL, touch, nullptr},
        {KNIT_STAGE_SERIAL_IN_ORDER, touch, nullptr},
    };
    unsigned points = walk("knit_pipeline_run with the input in tasks", [&](unsigned n) {
        bool fired = false;
        std::thread driver([&] {
            int left = 50;
            knit_pipeline_options o =
                count_options(&left, stages, 2, KNIT_PIPELINE_INPUT_IN_TASKS);
            knit_pipeline *pl = nullptr;
            ASSERT_EQ(0, knit_pipeline_create(pool, &o, &pl)) << knit_last_error();
            knit__fault_arm(n);
            int rc = knit_pipeline_run(pl);
            fired = knit__fault_fired();
            knit__fault_arm(0);
            EXPECT_EQ(0, rc) << knit_last_error();
            knit_pipeline_stats ps;
            EXPECT_EQ(0, knit_pipeline_stats_get(pl, &ps));
            EXPECT_EQ(50u, ps.items);
            EXPECT_EQ(50u, ps.completed);
            EXPECT_EQ(0, left);
            knit_pipeline_destroy(pl);
        });
        driver.join();
        return fired;
    });
    EXPECT_GE(points, 1u);
    expect_usable(pool);
    EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN));
}

}  // namespace

// Groups (issue 13): creating a group and submitting members from a new
// thread while the only worker is held (the group, the thread's record,
// carpets, future slabs for the member records). A failed create leaves
// no group; a failed member submit is not counted in the group, so the
// wait still returns and destroy is not busy.
void *count_member(knit_task *, void *arg) {
    static_cast<std::atomic<int> *>(arg)->fetch_add(1);
    return nullptr;
}

TEST(AllocFail, GroupCreateAndMembers) {
    constexpr int kMembers = 300;
    unsigned points = walk("group", [&](unsigned n) {
        knit_pool *pool = make_pool(1);
        Gate gate;
        knit_future *blocker = hold_worker(pool, gate);
        bool fired = false;
        std::atomic<int> ran{0};
        std::thread t([&] {
            knit_group *g = reinterpret_cast<knit_group *>(1);
            knit__fault_arm(n);
            int rc = knit_group_create(pool, &g);
            int ok = 0, failures = 0;
            if (rc == 0) {
                for (int i = 0; i < kMembers; i++) {
                    int r = knit_group_submit(g, count_member, &ran);
                    if (r == 0) {
                        ok++;
                    } else {
                        expect_enomem(r);
                        failures++;
                    }
                }
            }
            fired = knit__fault_fired();
            knit__fault_arm(0);
            if (rc != 0) {
                expect_enomem(rc);
                EXPECT_EQ(nullptr, g);
                EXPECT_TRUE(fired);
                return;
            }
            EXPECT_EQ(fired ? 1 : 0, failures);
            gate.open.store(1, std::memory_order_release);
            EXPECT_EQ(0, knit_group_wait(g, -1)) << knit_last_error();
            EXPECT_EQ(ok, ran.load());
            EXPECT_EQ(0, knit_group_destroy(g));
        });
        t.join();
        release_worker(gate, blocker);
        knit_pool_stats_t s = stats(pool);
        EXPECT_EQ(s.submitted, s.completed);
        expect_usable(pool);
        EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN));
        return fired;
    });
    EXPECT_GE(points, 4u);
    std::printf("group create and members: %u allocation points\n", points);
}

// Promises from a new thread: the record, the first future slab; a
// failure leaves no promise behind (pool destroy has nothing to reject)
// and the next create on the same thread works.
TEST(AllocFail, PromiseCreate) {
    unsigned points = walk("promise", [&](unsigned n) {
        knit_pool *pool = make_pool(1);
        bool fired = false;
        std::thread t([&] {
            knit_future *f = reinterpret_cast<knit_future *>(1);
            knit__fault_arm(n);
            int rc = knit_promise_create(pool, &f);
            fired = knit__fault_fired();
            knit__fault_arm(0);
            if (fired) {
                expect_enomem(rc);
                EXPECT_EQ(nullptr, f);
                ASSERT_EQ(0, knit_promise_create(pool, &f)) << knit_last_error();
            } else {
                ASSERT_EQ(0, rc) << knit_last_error();
            }
            EXPECT_EQ(0, knit_promise_resolve(f, f));
            void *r = nullptr;
            EXPECT_EQ(0, knit_await(f, -1, &r));
            EXPECT_EQ(f, r);
            EXPECT_EQ(0, knit_future_release(f));
        });
        t.join();
        EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN));
        return fired;
    });
    EXPECT_GE(points, 2u);
    std::printf("promise create: %u allocation points\n", points);
}

// KNIT_CALLER_RUNS at max_pending = 4 with the only worker held: after
// four pending tasks every submit runs its task on the submitting thread.
// A failing allocation (a future for a task to run here, or a carpet) is
// KNIT_ENOMEM with nothing counted; every accepted task settles.
TEST(AllocFail, CallerRuns) {
    constexpr int kTasks = 300;
    unsigned points = walk("caller runs", [&](unsigned n) {
        knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
        o.threads = 1;
        o.arena_bytes = 8 * kMiB;
        o.max_pending = 4;
        o.backpressure = KNIT_CALLER_RUNS;
        knit_pool *pool = nullptr;
        EXPECT_EQ(0, knit_pool_create(&o, &pool)) << knit_last_error();
        Gate gate;
        knit_future *blocker = hold_worker(pool, gate);
        bool fired = false;
        std::thread t([&] {
            std::vector<knit_future *> ok;
            int failures = 0, here = 0;
            knit__fault_arm(n);
            for (int i = 0; i < kTasks; i++) {
                knit_future *f = nullptr;
                int rc = knit_submit(pool, ret_arg, reinterpret_cast<void *>(uintptr_t(i + 1)),
                                     &f);
                if (rc == 0) {
                    if (knit_future_done(f)) here++;
                    ok.push_back(f);
                } else {
                    expect_enomem(rc);
                    EXPECT_EQ(nullptr, f);
                    failures++;
                }
            }
            fired = knit__fault_fired();
            knit__fault_arm(0);
            EXPECT_EQ(fired ? 1 : 0, failures);
            EXPECT_GE(here, kTasks - 4 - failures) << "tasks past the bound ran here";
            knit_pool_stats_t s = stats(pool);
            EXPECT_EQ(ok.size() + 1, s.submitted);
            gate.open.store(1, std::memory_order_release);
            expect_all_ran(ok);
        });
        t.join();
        release_worker(gate, blocker);
        expect_usable(pool);
        EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN));
        return fired;
    });
    EXPECT_GE(points, 3u);
    std::printf("caller runs: %u allocation points\n", points);
}
