// knit_pool_destroy under load: with tasks blocked in nested awaits, and
// with producers still submitting from other threads; for both ways of
// stopping and both disciplines. Destroy must return in bounded time, every
// task that was accepted must be run (DRAIN) or run or cancelled (CANCEL)
// exactly once, every await inside a task must end with a proper code,
// every worker thread must be joined, and nothing may leak (LSan in the
// asan build). The 10,000-pending case is in pool_test.
#include <dirent.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "knit/knit.h"

namespace {

using Clock = std::chrono::steady_clock;

// Worker threads of any knit pool alive in this process now (workers are
// named knit-w<N>; counting by name leaves out threads a sanitizer's
// runtime starts on its own).
int workers_now() {
    DIR *d = opendir("/proc/self/task");
    if (d == nullptr) return -1;
    int n = 0;
    while (struct dirent *e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        std::string path = std::string("/proc/self/task/") + e->d_name + "/comm";
        FILE *f = std::fopen(path.c_str(), "r");
        if (f == nullptr) continue; // it exited meanwhile
        char comm[32] = {0};
        if (std::fgets(comm, sizeof comm, f) != nullptr &&
            std::strncmp(comm, "knit-w", 6) == 0)
            n++;
        std::fclose(f);
    }
    closedir(d);
    return n;
}

// destroy joins every worker; the kernel may list a joined thread for a
// moment longer.
void expect_no_workers_left() {
    auto end = Clock::now() + std::chrono::seconds(5);
    while (workers_now() != 0 && Clock::now() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(0, workers_now()) << "every worker thread is joined";
}

struct Tree {
    knit_pool *pool;
    std::atomic<int64_t> leaves_submitted{0};
    std::atomic<int64_t> leaves_ran{0};
    std::atomic<int64_t> awaits_ok{0};
    std::atomic<int64_t> awaits_cancelled{0};
    std::atomic<int64_t> awaits_other{0};
    std::atomic<int64_t> submits_refused{0};
};

struct Node {
    Tree *tree;
    int depth;
};

constexpr int kFan = 4;

void *node(knit_task *, void *arg);

void *leaf(knit_task *, void *arg) {
    auto *t = static_cast<Tree *>(arg);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    // Relaxed: counted; read after destroy returned (which joined every
    // thread that ran a task).
    t->leaves_ran.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
}

// An inner node submits kFan children and awaits each: while it waits it
// is a task blocked in a nested await (it helps, or sleeps).
void *node(knit_task *, void *arg) {
    auto *n = static_cast<Node *>(arg);
    Tree *t = n->tree;
    knit_future *kids[kFan] = {};
    Node sub[kFan];
    for (int i = 0; i < kFan; i++) {
        int rc;
        if (n->depth == 1) {
            rc = knit_submit(t->pool, leaf, t, &kids[i]);
            if (rc == 0) t->leaves_submitted.fetch_add(1, std::memory_order_relaxed);
        } else {
            sub[i] = {t, n->depth - 1};
            rc = knit_submit(t->pool, node, &sub[i], &kids[i]);
        }
        if (rc != 0) {
            kids[i] = nullptr;
            t->submits_refused.fetch_add(1, std::memory_order_relaxed);
        }
    }
    for (int i = 0; i < kFan; i++) {
        if (kids[i] == nullptr) continue;
        int rc = knit_await(kids[i], -1, nullptr);
        if (rc == 0) {
            t->awaits_ok.fetch_add(1, std::memory_order_relaxed);
        } else if (rc == KNIT_ECANCELED) {
            t->awaits_cancelled.fetch_add(1, std::memory_order_relaxed);
        } else {
            t->awaits_other.fetch_add(1, std::memory_order_relaxed);
        }
        knit_future_release(kids[i]);
    }
    return nullptr;
}

class Shutdown : public ::testing::TestWithParam<std::tuple<const char *, int>> {
  protected:
    const char *sched() const { return std::get<0>(GetParam()); }
    int how() const { return std::get<1>(GetParam()); }
    knit_pool *make(unsigned threads) {
        knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
        o.threads = threads;
        o.sched = sched();
        knit_pool *p = nullptr;
        EXPECT_EQ(0, knit_pool_create(&o, &p)) << knit_last_error();
        return p;
    }
};

TEST_P(Shutdown, WithTasksBlockedInNestedAwaits) {
    knit_pool *pool = make(2);
    ASSERT_NE(nullptr, pool);
    EXPECT_EQ(2, workers_now());
    Tree t;
    t.pool = pool;
    constexpr int kRoots = 6, kDepth = 4; // 6 * 4^4 = 1536 leaves
    std::vector<Node> roots(kRoots, Node{&t, kDepth});
    for (auto &r : roots) ASSERT_EQ(0, knit_submit(pool, node, &r, nullptr));
    // Destroy once the trees are well under way: inner nodes are waiting.
    while (t.leaves_ran.load(std::memory_order_relaxed) < 20)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    auto t0 = Clock::now();
    EXPECT_EQ(0, knit_pool_destroy(pool, how())) << knit_last_error();
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(60));
    expect_no_workers_left();

    int64_t submitted = t.leaves_submitted.load();
    int64_t ran = t.leaves_ran.load();
    EXPECT_EQ(0, t.awaits_other.load()) << "an await ended with another code";
    if (how() == KNIT_DRAIN) {
        EXPECT_EQ(int64_t{kRoots} * 256, submitted);
        EXPECT_EQ(submitted, ran);
        EXPECT_EQ(0, t.awaits_cancelled.load());
        EXPECT_EQ(0, t.submits_refused.load()) << "tasks may submit while draining";
    } else {
        EXPECT_LE(ran, submitted);
        // Every child an inner node submitted settled one way or the other,
        // and its await saw it: ok + cancelled awaits cover every submit.
        int64_t awaited = t.awaits_ok.load() + t.awaits_cancelled.load();
        EXPECT_GE(awaited, ran);
    }
    EXPECT_EQ(KNIT_ESHUTDOWN, knit_submit(pool, leaf, &t, nullptr));
}

void *bump(knit_task *, void *arg) {
    // Relaxed: a count read after destroy joined every worker.
    static_cast<std::atomic<int64_t> *>(arg)->fetch_add(1, std::memory_order_relaxed);
    return nullptr;
}

TEST_P(Shutdown, WhileProducersAreSubmitting) {
    knit_pool *pool = make(2);
    ASSERT_NE(nullptr, pool);
    EXPECT_EQ(2, workers_now());
    constexpr int kProducers = 3;
    std::atomic<int64_t> ran{0};
    std::atomic<int64_t> accepted{0};
    std::atomic<int> bad_code{0};
    std::vector<std::thread> producers;
    for (int i = 0; i < kProducers; i++) {
        producers.emplace_back([&] {
            for (;;) {
                int rc = knit_submit(pool, bump, &ran, nullptr);
                if (rc == 0) {
                    accepted.fetch_add(1, std::memory_order_relaxed);
                    continue;
                }
                // The only way to be refused here: the pool is stopping or
                // gone (the handle stays a tombstone).
                if (rc != KNIT_ESHUTDOWN) bad_code.store(rc, std::memory_order_relaxed);
                break;
            }
        });
    }
    while (accepted.load(std::memory_order_relaxed) < 5000)
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    auto t0 = Clock::now();
    EXPECT_EQ(0, knit_pool_destroy(pool, how())) << knit_last_error();
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(60));
    for (auto &p : producers) p.join();
    expect_no_workers_left();
    EXPECT_EQ(0, bad_code.load()) << knit_strerror(bad_code.load());
    if (how() == KNIT_DRAIN) {
        EXPECT_EQ(accepted.load(), ran.load()) << "every accepted task ran";
    } else {
        EXPECT_LE(ran.load(), accepted.load());
    }
}

// Continuations whose futures come from a worker's cache, where they last
// served as subtasks pushed onto its deque: destroy must still see every
// task settled (a stale subtask mark once kept `live` from reaching 0).
void *ret_one(knit_task *, void *) { return reinterpret_cast<void *>(1); }

void *then_after_children(knit_task *task, void *arg) {
    auto *done = static_cast<std::atomic<int> *>(arg);
    knit_pool *pool = knit_task_pool(task);
    for (int round = 0; round < 8; round++) {
        knit_future *kids[16];
        for (auto &k : kids)
            if (knit_submit(pool, ret_one, nullptr, &k) != 0) return nullptr;
        for (auto k : kids) {
            knit_await(k, -1, nullptr);
            knit_future_release(k);
        }
        // The kids' futures are back in this worker's cache: the
        // continuation's future is one of them.
        knit_future *c = nullptr, *t = nullptr;
        if (knit_submit(pool, ret_one, nullptr, &c) != 0) return nullptr;
        knit_await(c, -1, nullptr);
        if (knit_future_then(c, ret_one, nullptr, &t) == 0) {
            knit_await(t, -1, nullptr);
            knit_future_release(t);
            done->fetch_add(1, std::memory_order_relaxed);
        }
        knit_future_release(c);
    }
    return nullptr;
}

TEST_P(Shutdown, AfterContinuationsOnReusedSubtaskFutures) {
    knit_pool *pool = make(2);
    ASSERT_NE(nullptr, pool);
    std::atomic<int> done{0};
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(0, knit_submit(pool, then_after_children, &done, nullptr));
    std::atomic<bool> returned{false};
    std::thread d([&] {
        EXPECT_EQ(0, knit_pool_destroy(pool, how())) << knit_last_error();
        returned.store(true, std::memory_order_release);
    });
    auto end = Clock::now() + std::chrono::seconds(60);
    while (!returned.load(std::memory_order_acquire) && Clock::now() < end)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!returned.load(std::memory_order_acquire)) {
        ADD_FAILURE() << "knit_pool_destroy did not return within 60 s";
        std::abort(); // the destroying thread cannot be taken back
    }
    d.join();
    if (how() == KNIT_DRAIN) {
        EXPECT_EQ(32, done.load());
    }
}

INSTANTIATE_TEST_SUITE_P(
    All, Shutdown,
    ::testing::Combine(::testing::Values("ticket", "dekker"),
                       ::testing::Values(int{KNIT_DRAIN}, int{KNIT_CANCEL})),
    [](const ::testing::TestParamInfo<Shutdown::ParamType> &i) {
        return std::string(std::get<0>(i.param)) +
               (std::get<1>(i.param) == KNIT_DRAIN ? "_drain" : "_cancel");
    });

}  // namespace
