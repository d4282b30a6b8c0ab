// Promises (issue 13, part 3) and KNIT_CALLER_RUNS backpressure (part 4).
// Outcomes and counts only, never timing.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "pool_util.h"

namespace {

using knit_test::Pool;
using namespace std::chrono_literals;

knit_pool *make_pool(unsigned threads) {
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = threads;
    knit_pool *p = nullptr;
    EXPECT_EQ(0, knit_pool_create(&o, &p)) << knit_last_error();
    return p;
}

TEST(Promise, ResolveFromAnotherThread) {
    Pool pool(2);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_promise_create(pool, &f)) << knit_last_error();
    EXPECT_FALSE(knit_future_done(f));
    EXPECT_EQ(KNIT_ETIMEDOUT, knit_await(f, 0, nullptr));
    int value = 42;
    std::thread t([&] {
        std::this_thread::sleep_for(1ms);
        EXPECT_EQ(0, knit_promise_resolve(f, &value));
    });
    void *r = nullptr;
    EXPECT_EQ(0, knit_await(f, -1, &r)) << knit_last_error();
    EXPECT_EQ(&value, r);
    t.join();
    EXPECT_TRUE(knit_future_done(f));
    EXPECT_EQ(KNIT_EALREADY, knit_promise_resolve(f, nullptr));
    EXPECT_EQ(KNIT_EALREADY, knit_promise_reject(f, 1, "late"));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "already settled"));
    EXPECT_EQ(0, knit_await(f, -1, &r)) << "a late settle changed nothing";
    EXPECT_EQ(&value, r);
    EXPECT_EQ(0, knit_future_release(f));
}

TEST(Promise, RejectGivesTheCodeAndMessage) {
    Pool pool(1);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_promise_create(pool, &f));
    EXPECT_EQ(0, knit_promise_reject(f, 17, "disk %s", "gone"));
    EXPECT_EQ(KNIT_ETASK, knit_await(f, -1, nullptr));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "(code 17): disk gone"))
        << knit_last_error();
    EXPECT_EQ(0, knit_future_release(f));
}

TEST(Promise, SettleOnATaskFutureIsInvalid) {
    Pool pool(1);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(pool, [](knit_task *, void *) -> void * { return nullptr; },
                             nullptr, &f));
    EXPECT_EQ(KNIT_EINVAL, knit_promise_resolve(f, nullptr));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "not a promise"));
    EXPECT_EQ(0, knit_await(f, -1, nullptr));
    EXPECT_EQ(0, knit_future_release(f));
}

void *after(knit_task *task, void *arg) {
    void *r = nullptr;
    int rc = knit_task_antecedent(task, &r);
    static_cast<std::atomic<int> *>(arg)->store(rc == 0 ? 1 : rc);
    return r;
}

TEST(Promise, ThenAllAnyWork) {
    Pool pool(2);
    knit_future *a = nullptr, *b = nullptr;
    ASSERT_EQ(0, knit_promise_create(pool, &a));
    ASSERT_EQ(0, knit_promise_create(pool, &b));
    std::atomic<int> seen{0};
    knit_future *c = nullptr;
    ASSERT_EQ(0, knit_future_then(a, after, &seen, &c));
    knit_future *both[2] = {a, b};
    size_t which = 9;
    EXPECT_EQ(KNIT_ETIMEDOUT, knit_await_any(both, 2, 0, &which));
    int x = 5;
    EXPECT_EQ(0, knit_promise_resolve(b, &x));
    EXPECT_EQ(0, knit_await_any(both, 2, -1, &which));
    EXPECT_EQ(1u, which);
    EXPECT_EQ(KNIT_ETIMEDOUT, knit_await_all(both, 2, 0));
    EXPECT_EQ(0, knit_promise_resolve(a, &x));
    EXPECT_EQ(0, knit_await_all(both, 2, -1));
    void *r = nullptr;
    EXPECT_EQ(0, knit_await(c, -1, &r));
    EXPECT_EQ(&x, r);
    EXPECT_EQ(1, seen.load());
    for (knit_future *f : {a, b, c}) EXPECT_EQ(0, knit_future_release(f));
}

TEST(Promise, CancelSettlesItAndLaterSettlesAreAlready) {
    Pool pool(1);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_promise_create(pool, &f));
    EXPECT_EQ(0, knit_future_cancel(f));
    EXPECT_EQ(KNIT_ECANCELED, knit_await(f, -1, nullptr));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "promise was cancelled"));
    EXPECT_EQ(KNIT_EALREADY, knit_promise_resolve(f, nullptr));
    EXPECT_EQ(KNIT_EALREADY, knit_future_cancel(f));
    EXPECT_EQ(0, knit_future_release(f));
    knit_pool_stats_t s{};
    s.size = sizeof s;
    ASSERT_EQ(0, knit_pool_stats(pool, &s));
    EXPECT_EQ(0u, s.cancelled) << "a promise is not a task";
}

TEST(Promise, ReleasedUnsettledPromiseCanStillBeAwaitedThroughAContinuation) {
    std::atomic<int> seen{0}; // outlives the pool: destroy runs the continuation
    Pool pool(2);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_promise_create(pool, &f));
    knit_future *c = nullptr;
    ASSERT_EQ(0, knit_future_then(f, after, &seen, &c));
    // The handle is gone, so nobody can settle it: pool destroy rejects
    // it (below, in PoolDestroy*); here the continuation only waits.
    EXPECT_EQ(0, knit_future_release(f));
    EXPECT_EQ(KNIT_ETIMEDOUT, knit_await(c, 1000000, nullptr));
    EXPECT_EQ(0, knit_future_release(c));
}

void *await_promise(knit_task *, void *arg) {
    int rc = knit_await(static_cast<knit_future *>(arg), -1, nullptr);
    return reinterpret_cast<void *>(static_cast<intptr_t>(rc));
}

TEST(Promise, PoolDestroyDrainRejectsAndRunsContinuations) {
    knit_pool *pool = make_pool(1);
    knit_future *p = nullptr, *q = nullptr;
    ASSERT_EQ(0, knit_promise_create(pool, &p));
    ASSERT_EQ(0, knit_promise_create(pool, &q));
    std::atomic<int> seen{0};
    ASSERT_EQ(0, knit_future_then(p, after, &seen, nullptr));
    // A task blocked on q: destroy must not wait for it forever.
    ASSERT_EQ(0, knit_submit(pool, await_promise, q, nullptr));
    EXPECT_EQ(0, knit_future_release(p)); // released unsettled: still found
    EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN));
    EXPECT_EQ(KNIT_ECANCELED, seen.load()) << "the continuation ran and saw the rejection";
    EXPECT_EQ(KNIT_ESHUTDOWN, knit_promise_create(pool, &p));
}

TEST(Promise, PoolDestroyCancelCancelsContinuations) {
    knit_pool *pool = make_pool(1);
    knit_future *p = nullptr;
    ASSERT_EQ(0, knit_promise_create(pool, &p));
    std::atomic<int> seen{0};
    ASSERT_EQ(0, knit_future_then(p, after, &seen, nullptr));
    EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_CANCEL));
    EXPECT_EQ(0, seen.load()) << "a continuation ran under KNIT_CANCEL";
}

struct Awaited {
    knit_future *f;
    std::atomic<int> rc{1};
    std::string msg;
};

void *await_and_keep(knit_task *, void *arg) {
    auto *a = static_cast<Awaited *>(arg);
    a->rc = knit_await(a->f, -1, nullptr);
    a->msg = knit_last_error();
    return nullptr;
}

TEST(Promise, RejectedAtDestroyIsSeenByAnAwaiterWithTheReason) {
    knit_pool *pool = make_pool(2);
    Awaited a;
    ASSERT_EQ(0, knit_promise_create(pool, &a.f));
    ASSERT_EQ(0, knit_submit(pool, await_and_keep, &a, nullptr));
    EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN));
    EXPECT_EQ(KNIT_ECANCELED, a.rc.load());
    EXPECT_NE(std::string::npos, a.msg.find("destroyed before the promise was settled")) << a.msg;
}

TEST(Promise, ManySettlersOneWins) {
    Pool pool(2);
    for (int round = 0; round < 200; round++) {
        knit_future *f = nullptr;
        ASSERT_EQ(0, knit_promise_create(pool, &f));
        std::atomic<int> wins{0}, already{0};
        std::vector<std::thread> ts;
        for (int i = 0; i < 3; i++)
            ts.emplace_back([&, i] {
                int rc = i == 0   ? knit_promise_resolve(f, nullptr)
                         : i == 1 ? knit_promise_reject(f, 1, "r")
                                  : knit_future_cancel(f);
                if (rc == 0) wins++;
                if (rc == KNIT_EALREADY) already++;
            });
        for (auto &t : ts) t.join();
        EXPECT_EQ(1, wins.load());
        EXPECT_EQ(2, already.load());
        EXPECT_TRUE(knit_future_done(f));
        EXPECT_EQ(0, knit_future_release(f));
    }
}

// A cancel that meets a settle under way (the settler won the CAS and is
// still settling) reads a settled promise: KNIT_EALREADY, never the
// "running task" KNIT_EBUSY. Two long-lived threads start each round
// together so the cancel lands inside the settle's window often.
TEST(Promise, CancelRacingASettleIsAlreadyNeverBusy) {
    Pool pool(2);
    constexpr int kRounds = 20000;
    std::atomic<knit_future *> cur{nullptr};
    std::atomic<int> go{0}, done{0};
    std::atomic<int> busy{0}, cancel_wins{0}, settle_wins{0};
    // Every promise made before the settler starts: an ASSERT that returned
    // with the thread running would end the test in std::terminate.
    std::vector<knit_future *> fs(kRounds, nullptr);
    for (auto &f : fs) ASSERT_EQ(0, knit_promise_create(pool, &f)) << knit_last_error();
    std::thread settler([&] {
        for (int r = 1; r <= kRounds; r++) {
            while (go.load(std::memory_order_acquire) < r) std::this_thread::yield();
            int rc = knit_promise_resolve(cur.load(std::memory_order_acquire), nullptr);
            if (rc == 0) settle_wins++;
            else EXPECT_EQ(KNIT_EALREADY, rc);
            done.fetch_add(1, std::memory_order_acq_rel);
        }
    });
    for (int r = 1; r <= kRounds; r++) {
        knit_future *f = fs[r - 1];
        cur.store(f, std::memory_order_release);
        go.store(r, std::memory_order_release);
        int rc = knit_future_cancel(f);
        if (rc == 0) cancel_wins++;
        else if (rc == KNIT_EBUSY) busy++;
        else EXPECT_EQ(KNIT_EALREADY, rc);
        while (done.load(std::memory_order_acquire) < r) std::this_thread::yield();
        EXPECT_TRUE(knit_future_done(f));
        EXPECT_EQ(0, knit_future_release(f));
    }
    settler.join();
    EXPECT_EQ(0, busy.load());
    EXPECT_EQ(kRounds, cancel_wins.load() + settle_wins.load())
        << "exactly one of the two settles each round";
}

// ---- KNIT_CALLER_RUNS ----

void *where(knit_task *, void *arg) {
    auto *self = static_cast<std::thread::id *>(arg);
    *self = std::this_thread::get_id();
    return arg;
}

struct Hold {
    std::atomic<bool> started{false}, open{false};
};

void *hold(knit_task *, void *arg) {
    auto *h = static_cast<Hold *>(arg);
    h->started = true;
    while (!h->open.load()) std::this_thread::sleep_for(100us);
    return nullptr;
}

TEST(CallerRuns, AtTheBoundTheSubmitterRunsIt) {
    Pool pool(1, nullptr, 2, KNIT_CALLER_RUNS);
    Hold h;
    knit_future *held = nullptr;
    ASSERT_EQ(0, knit_submit(pool, hold, &h, &held));
    while (!h.started.load()) std::this_thread::sleep_for(100us);
    // The worker is held: two tasks fill max_pending, the third runs here.
    std::thread::id ids[3];
    knit_future *f[3] = {};
    for (int i = 0; i < 3; i++) ASSERT_EQ(0, knit_submit(pool, where, &ids[i], &f[i]));
    EXPECT_TRUE(knit_future_done(f[2])) << "the third ran inside its submit";
    EXPECT_EQ(std::this_thread::get_id(), ids[2]);
    std::atomic<int> seen{0};
    knit_future *c = nullptr;
    ASSERT_EQ(0, knit_future_then(f[2], after, &seen, &c));
    h.open = true;
    for (auto *x : f) {
        void *r = nullptr;
        EXPECT_EQ(0, knit_await(x, -1, &r));
        EXPECT_NE(nullptr, r);
        knit_future_release(x);
    }
    EXPECT_EQ(0, knit_await(c, -1, nullptr));
    EXPECT_EQ(1, seen.load());
    knit_future_release(c);
    EXPECT_EQ(0, knit_await(held, -1, nullptr));
    knit_future_release(held);
    knit_pool_stats_t s{};
    s.size = sizeof s;
    ASSERT_EQ(0, knit_pool_stats(pool, &s));
    EXPECT_EQ(s.submitted, s.completed);
    // The two pending tasks and the continuation (which max_pending does
    // not hold back): a task run here is never pending.
    EXPECT_LE(s.pending_high, 3u);
}

void *fail_here(knit_task *task, void *) {
    knit_task_fail(task, 3, "ran here and failed");
    return nullptr;
}

TEST(CallerRuns, FailuresAndGroupMembersSettleAsUsual) {
    Pool pool(1, nullptr, 1, KNIT_CALLER_RUNS);
    Hold h;
    ASSERT_EQ(0, knit_submit(pool, hold, &h, nullptr));
    while (!h.started.load()) std::this_thread::sleep_for(100us);
    knit_future *a = nullptr, *b = nullptr;
    ASSERT_EQ(0, knit_submit(pool, fail_here, nullptr, &a)); // pending
    ASSERT_EQ(0, knit_submit(pool, fail_here, nullptr, &b)); // runs here
    EXPECT_TRUE(knit_future_done(b));
    EXPECT_EQ(KNIT_ETASK, knit_await(b, 0, nullptr));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "ran here and failed"));
    knit_group *g = nullptr;
    ASSERT_EQ(0, knit_group_create(pool, &g));
    ASSERT_EQ(0, knit_group_submit(g, fail_here, nullptr)); // runs here
    EXPECT_EQ(KNIT_ETASK, knit_group_wait(g, 0)) << "the member already finished";
    h.open = true;
    EXPECT_EQ(KNIT_ETASK, knit_await(a, -1, nullptr));
    EXPECT_EQ(0, knit_group_destroy(g));
    knit_future_release(a);
    knit_future_release(b);
}

void *spawner(knit_task *task, void *arg) {
    auto *n = static_cast<std::atomic<uint64_t> *>(arg);
    knit_pool *pool = knit_task_pool(task);
    std::vector<knit_future *> fs;
    for (int i = 0; i < 3000; i++) {
        knit_future *f = nullptr;
        if (knit_submit(pool,
                        [](knit_task *, void *a) -> void * {
                            static_cast<std::atomic<uint64_t> *>(a)->fetch_add(1);
                            return nullptr;
                        },
                        n, &f) == 0)
            fs.push_back(f);
    }
    int rc = knit_await_all(fs.data(), fs.size(), -1);
    for (auto *f : fs) knit_future_release(f);
    return reinterpret_cast<void *>(static_cast<intptr_t>(rc == 0 ? 1 : 0));
}

TEST(CallerRuns, ManyProducersAndNestedSubmitsAllRun) {
    // Deques fill up inside tasks (thousands of subtasks each), so nested
    // submits reach the carpets and the bound too.
    Pool pool(2, nullptr, 64, KNIT_CALLER_RUNS);
    std::atomic<uint64_t> n{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 3; t++)
        ts.emplace_back([&] {
            knit_future *f = nullptr;
            ASSERT_EQ(0, knit_submit(pool, spawner, &n, &f));
            void *r = nullptr;
            EXPECT_EQ(0, knit_await(f, -1, &r)) << knit_last_error();
            EXPECT_EQ(reinterpret_cast<void *>(1), r);
            knit_future_release(f);
            for (int i = 0; i < 2000; i++) {
                knit_future *g = nullptr;
                ASSERT_EQ(0, knit_submit(pool,
                                         [](knit_task *, void *a) -> void * {
                                             static_cast<std::atomic<uint64_t> *>(a)
                                                 ->fetch_add(1);
                                             return nullptr;
                                         },
                                         &n, &g));
                knit_future_release(g);
            }
        });
    for (auto &t : ts) t.join();
    ASSERT_EQ(0, knit_pool_destroy(pool.p, KNIT_DRAIN));
    pool.p = nullptr;
    EXPECT_EQ(3u * 3000 + 3u * 2000, n.load());
}

}  // namespace
