// Fork-join frames (knit_fork / knit_join): results, exactly-once over
// random fork trees mixed with futures, failures, LIFO and other misuse,
// cancellation, the inline fallbacks, deep recursion.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "knit/knit.h"
#include "pool_util.h"

using knit_test::Pool;

namespace {

uint64_t fib_serial(unsigned n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

void *fib_frames(knit_task *task, void *arg) {
    uintptr_t n = reinterpret_cast<uintptr_t>(arg);
    if (n < 2) return reinterpret_cast<void *>(n);
    knit_frame fr;
    EXPECT_EQ(0, knit_fork(task, &fr, fib_frames, reinterpret_cast<void *>(n - 1)));
    void *b = fib_frames(task, reinterpret_cast<void *>(n - 2));
    void *a = nullptr;
    EXPECT_EQ(0, knit_join(task, &fr, &a)) << knit_last_error();
    return reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(a) +
                                    reinterpret_cast<uintptr_t>(b));
}

uint64_t run_root(knit_pool *pool, knit_fn fn, void *arg) {
    knit_future *f = nullptr;
    EXPECT_EQ(0, knit_submit(pool, fn, arg, &f)) << knit_last_error();
    void *r = nullptr;
    EXPECT_EQ(0, knit_await(f, -1, &r)) << knit_last_error();
    knit_future_release(f);
    return reinterpret_cast<uintptr_t>(r);
}

class FramesBy : public ::testing::TestWithParam<std::tuple<unsigned, const char *>> {};

TEST_P(FramesBy, Fib) {
    Pool pool(std::get<0>(GetParam()), std::get<1>(GetParam()));
    for (unsigned n : {0u, 1u, 2u, 10u, 24u})
        EXPECT_EQ(fib_serial(n), run_root(pool, fib_frames, reinterpret_cast<void *>(
                                                                uintptr_t{n})))
            << "fib(" << n << ")";
}

// ---- random fork trees, exactly once ----

// A node of a random tree: its children are forked (or, for some, submitted
// as futures and awaited inside the task); some fail. Every node counts its
// runs; the parent checks each child's outcome.
struct Tree {
    std::vector<std::atomic<int>> runs;
    explicit Tree(size_t n) : runs(n) {}
};

struct NodeArg {
    Tree *tree;
    uint64_t id;   // position in the tree: children of id are id * 5 + 1 .. + 5
    unsigned depth;
    uint64_t seed;
};

uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

constexpr unsigned kMaxDepth = 6;
constexpr uint64_t kNodes = (1 + 5 + 25 + 125 + 625 + 3125 + 15625);  // 5-ary, depth 6

bool node_fails(uint64_t seed, uint64_t id) { return id != 0 && mix(seed ^ (id * 3)) % 13 == 0; }

// The value a node returns: its id plus its successful children's values.
uint64_t expected_value(uint64_t seed, uint64_t id, unsigned depth);

unsigned width(uint64_t seed, uint64_t id, unsigned depth) {
    if (depth >= kMaxDepth) return 0;
    // Near the root 2..4 children, so every tree has some size; below, 0..4.
    return static_cast<unsigned>(depth < 2 ? 2 + mix(seed ^ id) % 3 : mix(seed ^ id) % 5);
}

uint64_t expected_value(uint64_t seed, uint64_t id, unsigned depth) {
    uint64_t v = id;
    for (unsigned c = 0; c < width(seed, id, depth); c++) {
        uint64_t cid = id * 5 + 1 + c;
        if (!node_fails(seed, cid)) v += expected_value(seed, cid, depth + 1);
    }
    return v;
}

void *node(knit_task *task, void *argp) {
    NodeArg *a = static_cast<NodeArg *>(argp);
    a->tree->runs[a->id].fetch_add(1);
    unsigned w = width(a->seed, a->id, a->depth);
    NodeArg kids[5];
    knit_frame frames[5];
    knit_future *futs[5] = {};
    bool as_future[5] = {};
    for (unsigned c = 0; c < w; c++) {
        kids[c] = {a->tree, a->id * 5 + 1 + c, a->depth + 1, a->seed};
        // Some children are futures submitted from inside the task.
        as_future[c] = mix(a->seed ^ (kids[c].id * 7)) % 6 == 0;
        if (as_future[c])
            EXPECT_EQ(0, knit_submit(knit_task_pool(task), node, &kids[c], &futs[c]));
        else
            EXPECT_EQ(0, knit_fork(task, &frames[c], node, &kids[c]));
    }
    uint64_t v = a->id;
    for (unsigned c = w; c-- > 0;) {  // LIFO
        void *r = nullptr;
        int rc = as_future[c] ? knit_await(futs[c], -1, &r) : knit_join(task, &frames[c], &r);
        if (as_future[c]) knit_future_release(futs[c]);
        if (node_fails(a->seed, kids[c].id)) {
            EXPECT_EQ(KNIT_ETASK, rc);
            EXPECT_NE(nullptr, std::strstr(knit_last_error(),
                                           ("node " + std::to_string(kids[c].id)).c_str()))
                << knit_last_error();
        } else {
            EXPECT_EQ(0, rc) << knit_last_error();
            v += reinterpret_cast<uintptr_t>(r);
        }
    }
    if (node_fails(a->seed, a->id)) {
        knit_task_fail(task, 7, "node %llu failed on purpose",
                       static_cast<unsigned long long>(a->id));
        return nullptr;
    }
    return reinterpret_cast<void *>(static_cast<uintptr_t>(v));
}

void check_tree(const Tree &t, uint64_t seed, uint64_t id, unsigned depth, bool reached) {
    ASSERT_EQ(reached ? 1 : 0, t.runs[id].load()) << "node " << id;
    for (unsigned c = 0; c < width(seed, id, depth); c++)
        check_tree(t, seed, id * 5 + 1 + c, depth + 1, reached);
}

TEST_P(FramesBy, RandomTreesExactlyOnce) {
    Pool pool(std::get<0>(GetParam()), std::get<1>(GetParam()));
    for (uint64_t seed = 1; seed <= 12; seed++) {
        Tree tree(kNodes);
        NodeArg root{&tree, 0, 0, seed};
        uint64_t v = run_root(pool, node, &root);
        EXPECT_EQ(expected_value(seed, 0, 0), v) << "seed " << seed;
        check_tree(tree, seed, 0, 0, true);
        size_t total = 0;
        for (auto &r : tree.runs) total += r.load();
        EXPECT_GT(total, 3u);
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FramesBy,
    ::testing::Combine(::testing::Values(1u, 2u, 4u), ::testing::Values("ticket", "dekker")),
    [](const ::testing::TestParamInfo<std::tuple<unsigned, const char *>> &i) {
        return std::string(std::get<1>(i.param)) + "_" + std::to_string(std::get<0>(i.param));
    });

// ---- the rest ----

void *twice(knit_task *, void *arg) {
    return reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(arg) * 2);
}

void *fails(knit_task *task, void *) {
    knit_task_fail(task, 42, "child says no");
    return nullptr;
}

TEST(Frames, OutsideATaskRunsAtTheFork) {
    knit_frame fr;
    ASSERT_EQ(0, knit_fork(nullptr, &fr, twice, reinterpret_cast<void *>(21)));
    void *r = nullptr;
    EXPECT_EQ(0, knit_join(nullptr, &fr, &r));
    EXPECT_EQ(42u, reinterpret_cast<uintptr_t>(r));
    ASSERT_EQ(0, knit_fork(nullptr, &fr, fails, nullptr));
    EXPECT_EQ(KNIT_ETASK, knit_join(nullptr, &fr, &r));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "child says no"));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "42"));
    // fib outside any pool: every fork runs inline.
    EXPECT_EQ(fib_serial(15), reinterpret_cast<uintptr_t>(fib_frames(nullptr, reinterpret_cast<void *>(15))));
}

void *misuse_root(knit_task *task, void *) {
    knit_frame a, b;
    EXPECT_EQ(KNIT_EINVAL, knit_fork(task, nullptr, twice, nullptr));
    EXPECT_EQ(KNIT_EINVAL, knit_fork(task, &a, nullptr, nullptr));
    EXPECT_EQ(KNIT_EINVAL, knit_join(task, nullptr, nullptr));
    knit_frame never;
    std::memset(&never, 0, sizeof never);
    EXPECT_EQ(KNIT_EINVAL, knit_join(task, &never, nullptr));
    EXPECT_EQ(0, knit_fork(task, &a, twice, reinterpret_cast<void *>(1)));
    EXPECT_EQ(0, knit_fork(task, &b, twice, reinterpret_cast<void *>(2)));
    void *r = nullptr;
    EXPECT_EQ(KNIT_EINVAL, knit_join(task, &a, &r)) << "not the newest";
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "LIFO")) << knit_last_error();
    EXPECT_EQ(0, knit_join(task, &b, &r)) << "nothing was popped";
    EXPECT_EQ(4u, reinterpret_cast<uintptr_t>(r));
    EXPECT_EQ(0, knit_join(task, &a, &r));
    EXPECT_EQ(2u, reinterpret_cast<uintptr_t>(r));
    EXPECT_EQ(KNIT_EINVAL, knit_join(task, &a, &r)) << "joined twice";
    // Forked by this task, joined as if by another.
    EXPECT_EQ(0, knit_fork(task, &a, twice, reinterpret_cast<void *>(3)));
    EXPECT_EQ(KNIT_EINVAL, knit_join(nullptr, &a, &r));
    EXPECT_EQ(0, knit_join(task, &a, &r));
    EXPECT_EQ(6u, reinterpret_cast<uintptr_t>(r));
    // A frame can be forked again after its join.
    EXPECT_EQ(0, knit_fork(task, &a, fails, nullptr));
    EXPECT_EQ(KNIT_ETASK, knit_join(task, &a, &r));
    return reinterpret_cast<void *>(1);
}

TEST(Frames, Misuse) {
    Pool pool(2);
    EXPECT_EQ(1u, run_root(pool, misuse_root, nullptr));
}

void *payload_calls(knit_task *task, void *) {
    size_t len = 99;
    EXPECT_EQ(nullptr, knit_task_bytes(task, &len));
    EXPECT_EQ(0u, len);
    knit_buf b = knit_task_take_buf(task);
    EXPECT_EQ(nullptr, b.data);
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "knit_fork")) << knit_last_error();
    knit_buf mine = knit_buf_malloced(malloc(8), 8);
    EXPECT_EQ(KNIT_EINVAL, knit_task_return_buf(task, &mine));
    knit_buf_free(&mine);
    EXPECT_EQ(KNIT_EINVAL, knit_task_antecedent(task, nullptr));
    knit_buf out;
    EXPECT_EQ(KNIT_EINVAL, knit_task_antecedent_buf(task, &out));
    return nullptr;
}

void *payload_root(knit_task *task, void *) {
    knit_frame fr;
    EXPECT_EQ(0, knit_fork(task, &fr, payload_calls, nullptr));
    EXPECT_EQ(0, knit_join(task, &fr, nullptr));
    return nullptr;
}

TEST(Frames, PayloadCallsFailInAFrameChild) {
    Pool pool(1);
    run_root(pool, payload_root, nullptr);
}

// Deeper than the fork deque: the forks past it run inline.
void *chain(knit_task *task, void *arg) {
    uintptr_t n = reinterpret_cast<uintptr_t>(arg);
    if (n == 0) return nullptr;
    knit_frame fr;
    EXPECT_EQ(0, knit_fork(task, &fr, chain, reinterpret_cast<void *>(n - 1)));
    void *r = nullptr;
    EXPECT_EQ(0, knit_join(task, &fr, &r));
    return reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(r) + 1);
}

void *deep_root(knit_task *task, void *arg) {
    // Hold KNIT_FORK_DEPTH frames unjoined, then fork past them.
    std::unique_ptr<knit_frame[]> frs(new knit_frame[KNIT_FORK_DEPTH]);
    for (unsigned i = 0; i < KNIT_FORK_DEPTH; i++)
        EXPECT_EQ(0, knit_fork(task, &frs[i], twice, reinterpret_cast<void *>(uintptr_t{i})));
    knit_frame extra;
    EXPECT_EQ(0, knit_fork(task, &extra, chain, arg));  // runs at once
    void *r = nullptr;
    EXPECT_EQ(0, knit_join(task, &extra, &r));
    uint64_t sum = reinterpret_cast<uintptr_t>(r);
    for (unsigned i = KNIT_FORK_DEPTH; i-- > 0;) {
        EXPECT_EQ(0, knit_join(task, &frs[i], &r));
        EXPECT_EQ(2u * i, reinterpret_cast<uintptr_t>(r));
    }
    return reinterpret_cast<void *>(static_cast<uintptr_t>(sum));
}

TEST(Frames, FullForkDequeRunsInline) {
    Pool pool(2);
    EXPECT_EQ(100u, run_root(pool, deep_root, reinterpret_cast<void *>(100)));
}

TEST(Frames, Fib32OnOneWorker) {
    Pool pool(1);
    EXPECT_EQ(fib_serial(32), run_root(pool, fib_frames, reinterpret_cast<void *>(32)));
}

// Cancelling the root future shows in every frame child.
std::atomic<int> g_started{0}, g_saw_cancel{0};

void *spin_until_cancelled(knit_task *task, void *) {
    g_started.fetch_add(1);
    while (!knit_task_cancelled(task)) std::this_thread::sleep_for(std::chrono::microseconds(50));
    g_saw_cancel.fetch_add(1);
    return nullptr;
}

void *cancel_root(knit_task *task, void *) {
    knit_frame a, b;
    EXPECT_EQ(0, knit_fork(task, &a, spin_until_cancelled, nullptr));
    EXPECT_EQ(0, knit_fork(task, &b, spin_until_cancelled, nullptr));
    spin_until_cancelled(task, nullptr);
    EXPECT_EQ(0, knit_join(task, &b, nullptr));
    EXPECT_EQ(0, knit_join(task, &a, nullptr));
    return nullptr;
}

TEST(Frames, RootCancelReachesChildren) {
    Pool pool(2);
    g_started = 0;
    g_saw_cancel = 0;
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(pool, cancel_root, nullptr, &f));
    while (g_started.load() == 0) std::this_thread::yield();
    EXPECT_EQ(KNIT_EBUSY, knit_future_cancel(f)) << "running: the flag is set";
    knit_await(f, -1, nullptr);
    knit_future_release(f);
    EXPECT_EQ(3, g_saw_cancel.load());
}

// A child that only a thief can start (the root does not join until it
// started), and that runs long enough for the root to sleep in its join.
std::atomic<int> g_child_started{0};

void *slow_child(knit_task *, void *arg) {
    g_child_started = 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return arg;
}

void *steal_root(knit_task *task, void *) {
    knit_frame fr;
    EXPECT_EQ(0, knit_fork(task, &fr, slow_child, reinterpret_cast<void *>(77)));
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!g_child_started.load() && std::chrono::steady_clock::now() < end)
        std::this_thread::yield();
    EXPECT_EQ(1, g_child_started.load()) << "the first fork of a root is shared and a worker woken";
    void *r = nullptr;
    EXPECT_EQ(0, knit_join(task, &fr, &r));
    return r;
}

TEST(Frames, StolenChildIsJoined) {
    Pool pool(2);
    for (int i = 0; i < 5; i++) {
        g_child_started = 0;
        EXPECT_EQ(77u, run_root(pool, steal_root, nullptr));
    }
    knit_pool_stats_t st;
    std::memset(&st, 0, sizeof st);
    st.size = sizeof st;
    ASSERT_EQ(0, knit_pool_stats(pool, &st));
    EXPECT_EQ(5u, st.frames_stolen);
}

#ifndef NDEBUG
}  // namespace
// External, and the test links with -rdynamic: dladdr names it.
extern "C" void *forgets_join(knit_task *task, void *) {
    knit_frame fr;
    knit_fork(task, &fr, twice, nullptr);
    return nullptr;  // misuse: fr is never joined
}
namespace {

TEST(FramesDeathTest, UnjoinedFrameIsNamed) {
#if defined(KNIT_TSAN)
    GTEST_SKIP() << "death tests fork; not under TSan";
#endif
    ::testing::FLAGS_gtest_death_test_style = "threadsafe";
    EXPECT_DEATH(
        {
            Pool pool(1);
            run_root(pool, forgets_join, nullptr);
        },
        "forgets_join.*not joined");
}
#endif

}  // namespace
