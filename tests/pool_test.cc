// The pool: submit/await, timeouts, all/any, cancel, continuations,
// failures, fork-join, backpressure, destroy, exiting producers, stats.
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "knit/knit.h"
#include "pool_util.h"

namespace {

#ifdef KNIT_SANITIZER
constexpr uint64_t kScale = 10;  // sanitizers run ~10-20x slower
#else
constexpr uint64_t kScale = 1;
#endif

using knit_test::Pool;

void *ret_arg(knit_task *, void *arg) { return arg; }

void *bump(knit_task *, void *arg) {
    static_cast<std::atomic<int> *>(arg)->fetch_add(1);
    return nullptr;
}

void *sleep_ms(knit_task *, void *arg) {
    std::this_thread::sleep_for(std::chrono::milliseconds(reinterpret_cast<intptr_t>(arg)));
    return arg;
}

knit_pool_stats_t quiet_stats(knit_pool *pool, uint64_t submitted) {
    // Stats are owner-written, and a lane whose task was cancelled stays
    // pending until a worker passes over it: poll until everything adds
    // up.
    knit_pool_stats_t st;
    st.size = sizeof st;
    for (int i = 0; i < 10000; i++) {
        EXPECT_EQ(0, knit_pool_stats(pool, &st));
        if (st.submitted == submitted && st.completed == submitted && st.pending == 0 &&
            st.skipped == st.cancelled)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return st;
}

class PoolBySched : public ::testing::TestWithParam<const char *> {};

TEST_P(PoolBySched, SubmitAwaitReturnsResult) {
    Pool pool(2, GetParam());
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(pool, ret_arg, reinterpret_cast<void *>(42), &f));
    void *r = nullptr;
    EXPECT_EQ(0, knit_await(f, -1, &r)) << knit_last_error();
    EXPECT_EQ(reinterpret_cast<void *>(42), r);
    EXPECT_TRUE(knit_future_done(f));
    EXPECT_EQ(0, knit_future_release(f));
}

// Every task runs exactly once and every future settles, from 1, 2 and 8
// submitting threads.
TEST_P(PoolBySched, ExactlyOnceFromManySubmitters) {
    for (unsigned submitters : {1u, 2u, 8u}) {
        const uint64_t total = 1000000 / kScale;
        std::vector<std::atomic<uint8_t>> hits(total);
        for (auto &h : hits) h.store(0);
        {
            Pool pool(2, GetParam());
            std::vector<std::thread> threads;
            std::atomic<uint64_t> settled{0};
            for (unsigned s = 0; s < submitters; s++)
                threads.emplace_back([&, s] {
                    std::vector<knit_future *> fs;
                    fs.reserve(1024);
                    for (uint64_t i = s; i < total; i += submitters) {
                        knit_future *f = nullptr;
                        ASSERT_EQ(0, knit_submit(
                                         pool,
                                         [](knit_task *, void *a) -> void * {
                                             auto *h = static_cast<std::atomic<uint8_t> *>(a);
                                             h->fetch_add(1, std::memory_order_relaxed);
                                             return a;
                                         },
                                         &hits[i], &f))
                            << knit_last_error();
                        fs.push_back(f);
                        if (fs.size() == 1024) {
                            EXPECT_EQ(0, knit_await_all(fs.data(), fs.size(), -1));
                            for (auto *g : fs) EXPECT_EQ(0, knit_future_release(g));
                            settled += fs.size();
                            fs.clear();
                        }
                    }
                    EXPECT_EQ(0, knit_await_all(fs.data(), fs.size(), -1));
                    for (auto *g : fs) EXPECT_EQ(0, knit_future_release(g));
                    settled += fs.size();
                });
            for (auto &t : threads) t.join();
            EXPECT_EQ(total, settled.load());
            knit_pool_stats_t st;
            st.size = sizeof st;
            ASSERT_EQ(0, knit_pool_stats(pool, &st));
            EXPECT_EQ(total, st.submitted);
            EXPECT_EQ(total, st.completed);
            EXPECT_EQ(total, st.tasks_run) << "tasks run = tasks submitted";
            EXPECT_EQ(0u, st.pending);
        }
        uint64_t bad = 0;
        for (auto &h : hits) bad += h.load() != 1;
        EXPECT_EQ(0u, bad) << submitters << " submitters";
    }
}

INSTANTIATE_TEST_SUITE_P(Scheds, PoolBySched, ::testing::Values("ticket", "dekker"));

TEST(Pool, AwaitTimeoutExpiresThenSucceeds) {
    Pool pool(1);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(pool, sleep_ms, reinterpret_cast<void *>(200), &f));
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(KNIT_ETIMEDOUT, knit_await(f, 20'000'000, nullptr));
    auto waited = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(waited, std::chrono::milliseconds(19));
    EXPECT_EQ(KNIT_ETIMEDOUT, knit_await(f, 0, nullptr)) << "0 only tests";
    void *r = nullptr;
    EXPECT_EQ(0, knit_await(f, -1, &r));
    EXPECT_EQ(reinterpret_cast<void *>(200), r);
    knit_future_release(f);
}

// A task of pool Q awaits a future of pool P from Q's worker: the await
// helps P under one of P's helper ids, and gives the thread back to Q
// afterwards. Then the task goes on as Q's own: a nested submit and await
// on Q (its one worker) must still run on Q's deque and ids (before the
// fix it ran under P's helper id, past the end of Q's arrays: ASan) and
// a fork-join on Q still works.
TEST(Pool, AwaitOnAnotherPoolFromATaskKeepsTheTasksIds) {
    Pool q(1), p(4);
    struct Ctx {
        knit_pool *p;
        std::atomic<int> ok{0};
    } ctx{p, {}};
    knit_future *outer = nullptr;
    ASSERT_EQ(0, knit_submit(
                     q,
                     [](knit_task *t, void *a) -> void * {
                         auto *c = static_cast<Ctx *>(a);
                         for (int round = 0; round < 20; round++) {
                             knit_future *f = nullptr;
                             if (knit_submit(c->p, sleep_ms, reinterpret_cast<void *>(1), &f) != 0)
                                 return nullptr;
                             if (knit_await(f, -1, nullptr) != 0) return nullptr;
                             knit_future_release(f);
                             knit_future *g = nullptr;
                             if (knit_submit(knit_task_pool(t), ret_arg,
                                             reinterpret_cast<void *>(7), &g) != 0)
                                 return nullptr;
                             void *r = nullptr;
                             if (knit_await(g, -1, &r) != 0 || r != reinterpret_cast<void *>(7))
                                 return nullptr;
                             knit_future_release(g);
                         }
                         c->ok = 1;
                         return nullptr;
                     },
                     &ctx, &outer));
    ASSERT_EQ(0, knit_await(outer, 60'000'000'000, nullptr)) << knit_last_error();
    knit_future_release(outer);
    EXPECT_EQ(1, ctx.ok.load());
}

TEST(Pool, AwaitAllAndAny) {
    // Tasks 0 and 2 hold until the test lets them go; task 1 returns at
    // once, so it is the only one await_any can see done. (Tasks timed
    // 1000, 1 and 700 ms apart failed under load: one worker may claim a
    // batch and run its lanes in another order than they were published,
    // which nothing promises.) Three workers, so every task gets one, and
    // an await that never helps: this thread must not take a held task.
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 3;
    o.await_spin_ns = -1;
    knit_pool *pool = nullptr;
    ASSERT_EQ(0, knit_pool_create(&o, &pool)) << knit_last_error();
    struct Held {
        std::atomic<int> open{0};
    } held;
    knit_fn hold = [](knit_task *, void *arg) -> void * {
        while (!static_cast<Held *>(arg)->open.load()) std::this_thread::sleep_for(
            std::chrono::microseconds(100));
        return nullptr;
    };
    knit_future *fs[3];
    ASSERT_EQ(0, knit_submit(pool, hold, &held, &fs[0]));
    ASSERT_EQ(0, knit_submit(pool, ret_arg, nullptr, &fs[1]));
    ASSERT_EQ(0, knit_submit(pool, hold, &held, &fs[2]));
    size_t which = 99;
    EXPECT_EQ(0, knit_await_any(fs, 3, -1, &which)) << knit_last_error();
    EXPECT_EQ(1u, which);
    EXPECT_EQ(KNIT_ETIMEDOUT, knit_await_all(fs, 3, 1'000'000));
    EXPECT_FALSE(knit_future_done(fs[0]));
    EXPECT_FALSE(knit_future_done(fs[2]));
    held.open = 1;
    EXPECT_EQ(0, knit_await_all(fs, 3, -1));
    for (auto *f : fs) EXPECT_TRUE(knit_future_done(f));
    for (auto *f : fs) knit_future_release(f);
    EXPECT_EQ(KNIT_EINVAL, knit_await_any(nullptr, 0, -1, &which));
    EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN)) << knit_last_error();
}

TEST(Pool, CancelBeforeStartNeverRuns) {
    Pool pool(1);
    std::atomic<int> ran{0};
    knit_future *blocker = nullptr, *f = nullptr;
    // The only worker is busy: the second task cannot start.
    ASSERT_EQ(0, knit_submit(pool, sleep_ms, reinterpret_cast<void *>(100), &blocker));
    ASSERT_EQ(0, knit_submit(pool, bump, &ran, &f));
    EXPECT_EQ(0, knit_future_cancel(f));
    EXPECT_EQ(KNIT_ECANCELED, knit_await(f, -1, nullptr));
    EXPECT_EQ(KNIT_EALREADY, knit_future_cancel(f));
    EXPECT_EQ(0, knit_await(blocker, -1, nullptr));
    // Let the worker pass the cancelled lane.
    knit_future *after = nullptr;
    ASSERT_EQ(0, knit_submit(pool, ret_arg, nullptr, &after));
    EXPECT_EQ(0, knit_await(after, -1, nullptr));
    EXPECT_EQ(0, ran.load()) << "a cancelled task never runs";
    for (auto *g : {blocker, f, after}) knit_future_release(g);
}

TEST(Pool, CancelWhileRunningSetsFlag) {
    Pool pool(1);
    std::atomic<int> started{0};
    struct Ctx {
        std::atomic<int> *started;
    } ctx{&started};
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(
                     pool,
                     [](knit_task *t, void *a) -> void * {
                         static_cast<Ctx *>(a)->started->store(1);
                         auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
                         while (!knit_task_cancelled(t) && std::chrono::steady_clock::now() < end)
                             std::this_thread::yield();
                         return reinterpret_cast<void *>(knit_task_cancelled(t) ? 1 : 0);
                     },
                     &ctx, &f));
    while (!started.load()) std::this_thread::yield();
    EXPECT_EQ(KNIT_EBUSY, knit_future_cancel(f));
    void *saw = nullptr;
    EXPECT_EQ(0, knit_await(f, -1, &saw));
    EXPECT_EQ(reinterpret_cast<void *>(1), saw) << "the task saw the flag";
    knit_future_release(f);
}

TEST(Pool, FailureCodeAndMessageReachAwaiter) {
    Pool pool(2);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(
                     pool,
                     [](knit_task *t, void *) -> void * {
                         knit_task_fail(t, 77, "disk %s is full", "/dev/sda");
                         return nullptr;
                     },
                     nullptr, &f));
    EXPECT_EQ(KNIT_ETASK, knit_await(f, -1, nullptr));
    std::string msg = knit_last_error();
    EXPECT_NE(std::string::npos, msg.find("77")) << msg;
    EXPECT_NE(std::string::npos, msg.find("disk /dev/sda is full")) << msg;
    knit_pool_stats_t st;
    st.size = sizeof st;
    ASSERT_EQ(0, knit_pool_stats(pool, &st));
    EXPECT_EQ(1u, st.failed);
    knit_future_release(f);
}

struct Order {
    std::atomic<int> next{0};
    int seen[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
};

TEST(Pool, ContinuationsRunOnceInOrder) {
    Pool pool(2);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(pool, sleep_ms, reinterpret_cast<void *>(30), &f));
    static Order order;
    static std::atomic<int> runs[4];
    for (auto &r : runs) r = 0;
    struct Arg {
        int id;
    };
    static Arg args[4] = {{0}, {1}, {2}, {3}};
    knit_future *g[4];
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(0, knit_future_then(
                         f,
                         [](knit_task *t, void *a) -> void * {
                             int id = static_cast<Arg *>(a)->id;
                             runs[id]++;
                             void *res = nullptr;
                             int rc = knit_task_antecedent(t, &res);
                             order.seen[order.next++] = id;
                             return reinterpret_cast<void *>(
                                 static_cast<intptr_t>(rc == 0 ? reinterpret_cast<intptr_t>(res) : -1));
                         },
                         &args[i], &g[i]))
            << knit_last_error();
    EXPECT_EQ(0, knit_await_all(g, 4, -1));
    for (int i = 0; i < 4; i++) {
        EXPECT_EQ(1, runs[i].load());
        void *r = nullptr;
        EXPECT_EQ(0, knit_await(g[i], 0, &r));
        EXPECT_EQ(reinterpret_cast<void *>(30), r) << "saw the antecedent's result";
    }
    // Attached after the antecedent settled: runs at once.
    knit_future *late = nullptr;
    ASSERT_EQ(0, knit_future_then(f, ret_arg, reinterpret_cast<void *>(5), &late));
    void *r = nullptr;
    EXPECT_EQ(0, knit_await(late, -1, &r));
    EXPECT_EQ(reinterpret_cast<void *>(5), r);
    for (auto *x : g) knit_future_release(x);
    knit_future_release(late);
    knit_future_release(f);
}

// fib by nested submit/await, no cutoff.
void *fib(knit_task *t, void *arg) {
    intptr_t n = reinterpret_cast<intptr_t>(arg);
    if (n < 2) return arg;
    knit_future *a = nullptr;
    if (knit_submit(knit_task_pool(t), fib, reinterpret_cast<void *>(n - 1), &a) != 0)
        return reinterpret_cast<void *>(-1000000);
    void *b = fib(t, reinterpret_cast<void *>(n - 2));
    void *ra = nullptr;
    knit_await(a, -1, &ra);
    knit_future_release(a);
    return reinterpret_cast<void *>(reinterpret_cast<intptr_t>(ra) + reinterpret_cast<intptr_t>(b));
}

TEST(Pool, NestedForkJoinFib) {
#ifdef KNIT_SANITIZER
    const intptr_t n = 22, want = 17711;
#else
    const intptr_t n = 32, want = 2178309;
#endif
    for (unsigned workers : {1u, 2u, 4u}) {
        Pool pool(workers);
        knit_future *f = nullptr;
        ASSERT_EQ(0, knit_submit(pool, fib, reinterpret_cast<void *>(n), &f));
        void *r = nullptr;
        ASSERT_EQ(0, knit_await(f, -1, &r)) << knit_last_error();
        EXPECT_EQ(want, reinterpret_cast<intptr_t>(r)) << workers << " workers";
        knit_future_release(f);
        knit_pool_stats_t st;
        st.size = sizeof st;
        ASSERT_EQ(0, knit_pool_stats(pool, &st));
        EXPECT_LE(st.help_depth_max, 200u);
    }
}

TEST(Pool, BackpressureFailReturnsEagain) {
    Pool pool(1, nullptr, 4, KNIT_FAIL);
    knit_future *blocker = nullptr;
    static std::atomic<bool> started;
    started = false;
    ASSERT_EQ(0, knit_submit(
                     pool,
                     [](knit_task *, void *) -> void * {
                         started = true;
                         std::this_thread::sleep_for(std::chrono::milliseconds(200));
                         return nullptr;
                     },
                     nullptr, &blocker));
    while (!started.load()) std::this_thread::yield();  // it no longer counts as pending
    std::vector<knit_future *> fs;
    int rc = 0;
    for (int i = 0; i < 10 && rc == 0; i++) {
        knit_future *f = nullptr;
        rc = knit_submit(pool, ret_arg, nullptr, &f);
        if (rc == 0) fs.push_back(f);
    }
    EXPECT_EQ(KNIT_EAGAIN, rc);
    EXPECT_EQ(4u, fs.size()) << "exactly max_pending accepted";
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "max_pending=4"));
    knit_pool_stats_t st;
    st.size = sizeof st;
    ASSERT_EQ(0, knit_pool_stats(pool, &st));
    EXPECT_LE(st.pending_high, 4u);
    EXPECT_EQ(0, knit_await_all(fs.data(), fs.size(), -1));
    for (auto *f : fs) knit_future_release(f);
    knit_await(blocker, -1, nullptr);
    knit_future_release(blocker);
}

TEST(Pool, BackpressureBlockWaitsForRoom) {
    Pool pool(1, nullptr, 4, KNIT_BLOCK);
    std::atomic<int> ran{0};
    for (int i = 0; i < 200; i++) ASSERT_EQ(0, knit_submit(pool, bump, &ran, nullptr));
    knit_pool_stats_t st;
    st.size = sizeof st;
    ASSERT_EQ(0, knit_pool_stats(pool, &st));
    EXPECT_LE(st.pending_high, 4u) << "the bound held";
    knit_future *last = nullptr;
    ASSERT_EQ(0, knit_submit(pool, ret_arg, nullptr, &last));
    knit_await(last, -1, nullptr);
    knit_future_release(last);
    // Detached tasks: wait for them through the stats.
    for (int i = 0; i < 1000 && ran.load() < 200; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(200, ran.load());
}

TEST(Pool, DestroyDrainRunsEverything) {
    std::atomic<int> ran{0};
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 2;
    knit_pool *p = nullptr;
    ASSERT_EQ(0, knit_pool_create(&o, &p));
    for (int i = 0; i < 10000; i++) ASSERT_EQ(0, knit_submit(p, bump, &ran, nullptr));
    EXPECT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
    EXPECT_EQ(10000, ran.load());
    EXPECT_EQ(KNIT_ESHUTDOWN, knit_submit(p, bump, &ran, nullptr));
    EXPECT_EQ(KNIT_ESHUTDOWN, knit_pool_destroy(p, KNIT_DRAIN));
}

TEST(Pool, DestroyCancelSettlesUnstarted) {
    std::atomic<int> ran{0};
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 1;
    knit_pool *p = nullptr;
    ASSERT_EQ(0, knit_pool_create(&o, &p));
    knit_future *blocker = nullptr;
    ASSERT_EQ(0, knit_submit(p, sleep_ms, reinterpret_cast<void *>(50), &blocker));
    for (int i = 0; i < 10000; i++) ASSERT_EQ(0, knit_submit(p, bump, &ran, nullptr));
    knit_future_release(blocker);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(0, knit_pool_destroy(p, KNIT_CANCEL));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
    EXPECT_LT(ran.load(), 10000) << "unstarted tasks were cancelled";
    EXPECT_EQ(KNIT_ESHUTDOWN, knit_submit(p, bump, &ran, nullptr));
}

uint64_t pending_now(knit_pool *p) {
    knit_pool_stats_t st;
    st.size = sizeof st;
    EXPECT_EQ(0, knit_pool_stats(p, &st));
    return st.pending;
}

uint64_t carpets_now(knit_pool *p) {
    knit_pool_stats_t st;
    st.size = sizeof st;
    EXPECT_EQ(0, knit_pool_stats(p, &st));
    return st.carpets;
}

TEST(Pool, ProducerThreadExitsWithTasksInFlight) {
    Pool pool(1);
    std::atomic<int> ran{0};
    auto round = [&] {
        std::thread t([&] {
            for (int i = 0; i < 100; i++) ASSERT_EQ(0, knit_submit(pool, bump, &ran, nullptr));
        });
        t.join();  // exits, most likely with tasks still queued in its carpets
    };
    // One thread at a time, 25 of them, each exiting with tasks queued. A
    // thread with 100 tasks in flight needs at most 4 carpets (32 lanes
    // each); the main thread has none. If exited threads' records and
    // carpets were not adopted, carpets would grow with every thread
    // (25 threads: up to 100); adopted, they stay at what one thread's
    // worst backlog needed.
    for (int r = 0; r < 25; r++) {
        round();
        for (int i = 0; i < 5000 && pending_now(pool) > 0; i++)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_LE(carpets_now(pool), 5u) << "exited threads' carpets are reused";
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(pool, ret_arg, nullptr, &f));
    knit_await(f, -1, nullptr);
    knit_future_release(f);
    for (int i = 0; i < 5000 && ran.load() < 2500; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(2500, ran.load()) << "every task of every exited thread ran";
}

TEST(Pool, OptionsAreValidated) {
    knit_pool *p = nullptr;
    EXPECT_EQ(KNIT_EINVAL, knit_pool_create(nullptr, &p));
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.size = 3;
    EXPECT_EQ(KNIT_EINVAL, knit_pool_create(&o, &p));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "KNIT_POOL_OPTIONS_INIT"));
    o = KNIT_POOL_OPTIONS_INIT;
    o.threads = KNIT_MAX_THREADS + 1;
    EXPECT_EQ(KNIT_EINVAL, knit_pool_create(&o, &p));
    o = KNIT_POOL_OPTIONS_INIT;
    o.sched = "cas-mask";
    EXPECT_EQ(KNIT_EINVAL, knit_pool_create(&o, &p));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "use ticket"));
    o = KNIT_POOL_OPTIONS_INIT;
    o.region_lanes = 3;
    EXPECT_EQ(KNIT_EINVAL, knit_pool_create(&o, &p));
    o = KNIT_POOL_OPTIONS_INIT;
    o.sched = "dekker";
    o.threads = 6;
    o.region_lanes = 8;
    EXPECT_EQ(KNIT_EINVAL, knit_pool_create(&o, &p));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "6 consumers")) << knit_last_error();
    EXPECT_EQ(nullptr, p);
    EXPECT_EQ(KNIT_EINVAL, knit_submit(nullptr, ret_arg, nullptr, nullptr));
}

TEST(Pool, SingleDisciplineWithOneWorker) {
    Pool pool(1, "single");
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(pool, ret_arg, reinterpret_cast<void *>(9), &f));
    void *r = nullptr;
    EXPECT_EQ(0, knit_await(f, -1, &r));
    EXPECT_EQ(reinterpret_cast<void *>(9), r);
    knit_future_release(f);
    EXPECT_EQ(KNIT_EALREADY, knit_future_release(f)) << "second release detected";
}

TEST(Pool, IdleWorkersPark) {
    Pool pool(2);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(pool, ret_arg, nullptr, &f));
    knit_await(f, -1, nullptr);
    knit_future_release(f);
    knit_pool_stats_t a, b;
    a.size = b.size = sizeof a;
    // Once idle, both workers park and stay parked: a 100 ms window with no
    // park, wake or claim must come (on a loaded machine a worker may get
    // the CPU late, so the window is looked for, for up to 10 s).
    bool still = false;
    ASSERT_EQ(0, knit_pool_stats(pool, &a));
    for (int i = 0; i < 100 && !still; i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        ASSERT_EQ(0, knit_pool_stats(pool, &b));
        still = a.total.parks == b.total.parks && a.total.wakes == b.total.wakes &&
                a.total.claims == b.total.claims && b.worker[0].parks >= 1 &&
                b.worker[1].parks >= 1;
        a = b;
    }
    EXPECT_TRUE(still) << "parked workers stay parked";
    EXPECT_GE(b.total.parks, 2u);
}

// ---- an await runs its own unstarted task ----

// A task held until the test opens its gate; returns 7.
struct Gate {
    std::atomic<int> open{0}, started{0};
};

void *wait_gate(knit_task *, void *arg) {
    auto *gate = static_cast<Gate *>(arg);
    gate->started = 1;
    while (!gate->open.load()) std::this_thread::yield();
    return reinterpret_cast<void *>(7);
}

struct Where {
    std::atomic<int> runs{0};
    std::thread::id thread;
    int seq = -1; // when it ran, among every note_thread run
};

std::atomic<int> g_where_seq{0};

void *note_thread(knit_task *, void *arg) {
    auto *w = static_cast<Where *>(arg);
    w->thread = std::this_thread::get_id();
    w->seq = g_where_seq.fetch_add(1);
    w->runs.fetch_add(1);
    return reinterpret_cast<void *>(11);
}

TEST(Pool, OutsideAwaitHelpsWithItsOwnTaskExactly) {
    Pool pool(1);
    Gate gate;
    Where where;
    knit_future *blocker = nullptr, *f = nullptr;
    // The only worker is held (once it started the blocker): f cannot
    // start on it, and the awaiting thread claims and runs it.
    ASSERT_EQ(0, knit_submit(pool, wait_gate, &gate, &blocker));
    while (!gate.started.load()) std::this_thread::yield();
    ASSERT_EQ(0, knit_submit(pool, note_thread, &where, &f));
    void *r = nullptr;
    EXPECT_EQ(0, knit_await(f, -1, &r)) << knit_last_error();
    EXPECT_EQ(reinterpret_cast<void *>(11), r);
    EXPECT_EQ(1, where.runs.load());
    EXPECT_EQ(std::this_thread::get_id(), where.thread) << "ran on the awaiting thread";
    // Nothing is left pending behind it: a KNIT_FAIL submit would find room.
    knit_pool_stats_t st;
    st.size = sizeof st;
    ASSERT_EQ(0, knit_pool_stats(pool, &st));
    EXPECT_EQ(0u, st.pending);
    gate.open = 1;
    EXPECT_EQ(0, knit_await(blocker, -1, &r));
    EXPECT_EQ(reinterpret_cast<void *>(7), r);
    st = quiet_stats(pool, 2);
    EXPECT_EQ(0u, st.inlined);
    EXPECT_EQ(0u, st.skipped);
    EXPECT_EQ(2u, st.tasks_run);
    EXPECT_EQ(1, where.runs.load());
    knit_future_release(f);
    knit_future_release(blocker);
}

// An idle spinner leaves a lone lane of another thread's carpet alone for
// a moment (the thread may be about to await it and run it itself), and
// once it saw an awaiter take such lanes it looks less often. Neither may
// keep a task that nobody awaits from a worker: rounds of submit + await
// (the awaiter takes them, the spinner learns to wait) alternate with a
// submit that is never awaited, which must run on a worker, soon.
TEST_P(PoolBySched, AnUnawaitedSubmitStillReachesAWorker) {
    Pool pool(2, GetParam());
    uint64_t submitted = 0;
    for (int round = 0; round < 40; round++) {
        for (int i = 0; i < 50; i++) {
            knit_future *f = nullptr;
            ASSERT_EQ(0, knit_submit(pool, ret_arg, reinterpret_cast<void *>(5), &f));
            void *r = nullptr;
            ASSERT_EQ(0, knit_await(f, -1, &r)) << knit_last_error();
            EXPECT_EQ(reinterpret_cast<void *>(5), r);
            knit_future_release(f);
            submitted++;
        }
        // A pause of 0-3 ms: the spinner is somewhere in its idle spell
        // (its grace, a paced scan, its yields, or parked) when the lone
        // task arrives.
        std::this_thread::sleep_for(std::chrono::microseconds((round % 4) * 1000));
        Where where;
        knit_future *f = nullptr;
        ASSERT_EQ(0, knit_submit(pool, note_thread, &where, &f));
        submitted++;
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (where.runs.load() == 0 && std::chrono::steady_clock::now() < deadline)
            std::this_thread::yield();
        ASSERT_EQ(1, where.runs.load()) << "round " << round << ": never ran";
        EXPECT_NE(std::this_thread::get_id(), where.thread);
        void *r = nullptr;
        EXPECT_EQ(0, knit_await(f, -1, &r));
        EXPECT_EQ(reinterpret_cast<void *>(11), r);
        knit_future_release(f);
    }
    knit_pool_stats_t st = quiet_stats(pool, submitted);
    EXPECT_EQ(submitted, st.completed);
    EXPECT_EQ(submitted, st.tasks_run);
    EXPECT_EQ(0u, st.pending);
}

TEST(Pool, AwaitInsideATaskRunsTheYoungerSiblingFirst) {
    // One worker, and the main thread's wait is bounded (it never helps):
    // the parent's children can only run on the parent's thread.
    Pool pool(1);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(
                     pool,
                     [](knit_task *t, void *) -> void * {
                         Where w1, w2;
                         knit_future *c1 = nullptr, *c2 = nullptr;
                         if (knit_submit(knit_task_pool(t), note_thread, &w1, &c1) != 0 ||
                             knit_submit(knit_task_pool(t), note_thread, &w2, &c2) != 0)
                             return nullptr;
                         // c1 is under c2 in the deque: the await of c1
                         // runs c2 first (the deque's young end), then c1,
                         // both as claimed tasks; nothing is left behind.
                         void *r1 = nullptr, *r2 = nullptr;
                         int rc1 = knit_await(c1, -1, &r1);
                         bool c2_first = w2.runs.load() == 1 && w2.seq < w1.seq;
                         int rc2 = knit_await(c2, -1, &r2);
                         knit_future_release(c1);
                         knit_future_release(c2);
                         auto me = std::this_thread::get_id();
                         bool ok = rc1 == 0 && rc2 == 0 && r1 == reinterpret_cast<void *>(11) &&
                                   r2 == reinterpret_cast<void *>(11) && c2_first &&
                                   w1.runs.load() == 1 && w2.runs.load() == 1 &&
                                   w1.thread == me && w2.thread == me;
                         return reinterpret_cast<void *>(ok ? 1 : 2);
                     },
                     nullptr, &f));
    void *r = nullptr;
    EXPECT_EQ(0, knit_await(f, INT64_C(60) * 1000 * 1000 * 1000, &r)) << knit_last_error();
    EXPECT_EQ(reinterpret_cast<void *>(1), r);
    knit_pool_stats_t st = quiet_stats(pool, 3);
    EXPECT_EQ(3u, st.tasks_run);
    EXPECT_EQ(0u, st.inlined) << "c1 was not the newest entry when awaited";
    EXPECT_EQ(0u, st.skipped) << "no entry was left to pass over";
    EXPECT_EQ(0u, st.cancelled);
    EXPECT_EQ(0u, st.pending);
    knit_future_release(f);
}

TEST(Pool, BoundedAwaitDoesNotRunTheTask) {
    Pool pool(1);
    Gate gate;
    Where where;
    knit_future *blocker = nullptr, *f = nullptr;
    ASSERT_EQ(0, knit_submit(pool, wait_gate, &gate, &blocker));
    ASSERT_EQ(0, knit_submit(pool, note_thread, &where, &f));
    EXPECT_EQ(KNIT_ETIMEDOUT, knit_await(f, 20 * 1000 * 1000, nullptr));
    EXPECT_EQ(0, where.runs.load()) << "a bounded wait never runs a task";
    gate.open = 1;
    EXPECT_EQ(0, knit_await(f, -1, nullptr));
    EXPECT_EQ(1, where.runs.load());
    EXPECT_EQ(0, knit_await(blocker, -1, nullptr));
    knit_future_release(f);
    knit_future_release(blocker);
}

TEST(Pool, AwaitNeverRunsAContinuationBeforeItsAntecedent) {
    Pool pool(1);
    Gate gate;
    knit_future *a = nullptr, *g = nullptr;
    ASSERT_EQ(0, knit_submit(pool, wait_gate, &gate, &a));
    struct Seen {
        Gate *gate;
        std::atomic<int> gate_at_run{-1};
    } seen{&gate};
    ASSERT_EQ(0, knit_future_then(
                     a,
                     [](knit_task *t, void *arg) -> void * {
                         auto *s = static_cast<Seen *>(arg);
                         s->gate_at_run = s->gate->open.load();
                         void *res = nullptr;
                         return knit_task_antecedent(t, &res) == 0 ? res : nullptr;
                     },
                     &seen, &g));
    std::thread opener([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        gate.open = 1;
    });
    void *r = nullptr;
    EXPECT_EQ(0, knit_await(g, -1, &r)) << knit_last_error();
    opener.join();
    EXPECT_EQ(1, seen.gate_at_run.load()) << "ran after its antecedent";
    EXPECT_EQ(reinterpret_cast<void *>(7), r);
    knit_future_release(g);
    knit_future_release(a);
}

TEST(Pool, AwaitInsideATaskRunsItsChild) {
    // One worker: the parent's child can only run on the parent's thread.
    Pool pool(1);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(
                     pool,
                     [](knit_task *t, void *) -> void * {
                         Where w;
                         knit_future *c = nullptr;
                         if (knit_submit(knit_task_pool(t), note_thread, &w, &c) != 0)
                             return nullptr;
                         void *r = nullptr;
                         int rc = knit_await(c, -1, &r);
                         knit_future_release(c);
                         bool ok = rc == 0 && r == reinterpret_cast<void *>(11) &&
                                   w.runs.load() == 1 &&
                                   w.thread == std::this_thread::get_id();
                         return reinterpret_cast<void *>(ok ? 1 : 2);
                     },
                     nullptr, &f));
    // A bounded wait never runs the parent here: the worker does.
    void *r = nullptr;
    EXPECT_EQ(0, knit_await(f, INT64_C(60) * 1000 * 1000 * 1000, &r)) << knit_last_error();
    EXPECT_EQ(reinterpret_cast<void *>(1), r);
    // The child was the newest entry of the parent's deque: popped and
    // run by the await (`inlined`), no entry left behind (nothing
    // `skipped`).
    knit_pool_stats_t st = quiet_stats(pool, 2);
    EXPECT_EQ(2u, st.tasks_run);
    EXPECT_EQ(1u, st.inlined);
    EXPECT_EQ(0u, st.skipped);
    knit_future_release(f);
}

// A worker of pool P awaits a task of pool Q while Q's workers are all
// busy: it runs that task under Q's helper id, and the task awaits a P
// future. That inner await must not use the Q helper id as one of P's
// consumer ids (P has fewer: an out-of-range deque before the fix).
knit_pool *g_xp, *g_xq;
void *xp_leaf(knit_task *, void *a) { return a; }
void *xq_task(knit_task *, void *) {
    knit_future *g = nullptr;
    if (knit_submit(g_xp, xp_leaf, reinterpret_cast<void *>(5), &g) != 0) return nullptr;
    void *r = nullptr;
    int rc = knit_await(g, -1, &r);
    knit_future_release(g);
    return rc == 0 ? r : nullptr;
}
void *xp_task(knit_task *, void *) {
    knit_future *fq = nullptr;
    if (knit_submit(g_xq, xq_task, nullptr, &fq) != 0) return nullptr;
    void *r = nullptr;
    int rc = knit_await(fq, -1, &r);
    knit_future_release(fq);
    return rc == 0 ? r : nullptr;
}

TEST(Pool, AwaitAcrossPoolsUnderAnotherPoolsHelperId) {
    Pool p(1), q(8);
    g_xp = p;
    g_xq = q;
    Gate gate;
    knit_future *b[8];
    for (auto &x : b) ASSERT_EQ(0, knit_submit(q, wait_gate, &gate, &x));
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(p, xp_task, nullptr, &f));
    void *r = nullptr;
    EXPECT_EQ(0, knit_await(f, INT64_C(60) * 1000 * 1000 * 1000, &r)) << knit_last_error();
    EXPECT_EQ(reinterpret_cast<void *>(5), r);
    gate.open = 1;
    for (auto *x : b) {
        EXPECT_EQ(0, knit_await(x, -1, nullptr));
        knit_future_release(x);
    }
    knit_future_release(f);
}

}  // namespace
