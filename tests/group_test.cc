// Task groups (issue 13, part 2): knit_group_create / submit / wait /
// cancel / destroy. Every test checks outcomes and counts, never timing.
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

void *count_up(knit_task *, void *arg) {
    static_cast<std::atomic<uint64_t> *>(arg)->fetch_add(1);
    return nullptr;
}

struct Gate {
    std::atomic<int> started{0};
    std::atomic<bool> open{false};
    std::atomic<int> saw_cancel{0};
};

void *gated(knit_task *task, void *arg) {
    auto *g = static_cast<Gate *>(arg);
    g->started.fetch_add(1);
    while (!g->open.load()) std::this_thread::sleep_for(100us);
    if (knit_task_cancelled(task)) g->saw_cancel.fetch_add(1);
    return nullptr;
}

knit_group *make_group(knit_pool *pool) {
    knit_group *g = nullptr;
    EXPECT_EQ(0, knit_group_create(pool, &g)) << knit_last_error();
    return g;
}

TEST(Group, WaitsForEveryMember) {
    Pool pool(2);
    knit_group *g = make_group(pool);
    std::atomic<uint64_t> n{0};
    for (int i = 0; i < 10000; i++) ASSERT_EQ(0, knit_group_submit(g, count_up, &n));
    EXPECT_EQ(0, knit_group_wait(g, -1)) << knit_last_error();
    EXPECT_EQ(10000u, n.load());
    EXPECT_EQ(0, knit_group_destroy(g));
    knit_pool_stats_t s{};
    s.size = sizeof s;
    ASSERT_EQ(0, knit_pool_stats(pool, &s));
    EXPECT_EQ(s.submitted, s.completed);
}

TEST(Group, EmptyGroupWaitReturnsAtOnce) {
    Pool pool(1);
    knit_group *g = make_group(pool);
    ASSERT_NE(nullptr, g);
    EXPECT_EQ(0, knit_group_wait(g, 0));
    EXPECT_EQ(0, knit_group_wait(g, -1));
    EXPECT_EQ(0, knit_group_destroy(g));
}

void *fail_if_odd(knit_task *task, void *arg) {
    auto i = reinterpret_cast<uintptr_t>(arg);
    if (i % 2 == 1) knit_task_fail(task, static_cast<int>(i), "member %u failed", unsigned(i));
    return nullptr;
}

TEST(Group, FirstFailureIsReportedAndKept) {
    Pool pool(2);
    knit_group *g = make_group(pool);
    ASSERT_NE(nullptr, g);
    for (uintptr_t i = 0; i < 64; i++)
        ASSERT_EQ(0, knit_group_submit(g, fail_if_odd, reinterpret_cast<void *>(i)));
    EXPECT_EQ(KNIT_ETASK, knit_group_wait(g, -1));
    std::string msg = knit_last_error();
    EXPECT_NE(std::string::npos, msg.find("task failed (code ")) << msg;
    EXPECT_NE(std::string::npos, msg.find("failed")) << msg;
    // The outcome is kept: a second wait, and a wait after more members
    // that succeed, report the same failure.
    EXPECT_EQ(KNIT_ETASK, knit_group_wait(g, -1));
    EXPECT_EQ(msg, std::string(knit_last_error()));
    ASSERT_EQ(0, knit_group_submit(g, fail_if_odd, reinterpret_cast<void *>(2)));
    EXPECT_EQ(KNIT_ETASK, knit_group_wait(g, -1));
    EXPECT_EQ(msg, std::string(knit_last_error()));
    EXPECT_EQ(0, knit_group_destroy(g));
}

TEST(Group, RewaitWaitsForNewMembers) {
    Pool pool(2);
    knit_group *g = make_group(pool);
    ASSERT_NE(nullptr, g);
    std::atomic<uint64_t> n{0};
    for (int round = 1; round <= 5; round++) {
        for (int i = 0; i < 100; i++) ASSERT_EQ(0, knit_group_submit(g, count_up, &n));
        EXPECT_EQ(0, knit_group_wait(g, -1));
        EXPECT_EQ(uint64_t(round) * 100, n.load());
    }
    EXPECT_EQ(0, knit_group_destroy(g));
}

TEST(Group, TimeoutThenDestroyBusyThenWait) {
    Pool pool(1);
    knit_group *g = make_group(pool);
    ASSERT_NE(nullptr, g);
    Gate gate;
    ASSERT_EQ(0, knit_group_submit(g, gated, &gate));
    EXPECT_EQ(KNIT_ETIMEDOUT, knit_group_wait(g, 0));
    EXPECT_EQ(KNIT_ETIMEDOUT, knit_group_wait(g, 1000000));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "still live"));
    EXPECT_EQ(KNIT_EBUSY, knit_group_destroy(g));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "1 members are live"));
    gate.open = true;
    EXPECT_EQ(0, knit_group_wait(g, -1));
    EXPECT_EQ(0, knit_group_destroy(g));
}

// A worker keeps the members it finished back from their group's count
// while it runs member after member of that group, and hands them over
// before it runs anything else. Here the one worker runs 200 members of
// g1, then a task that blocks (a member of another group, or a future's
// task): g1's wait must return while that task still runs. A round where
// the blocker ran before some member of g1 proves nothing and is not
// counted.
TEST(Group, KeptBackMembersReachTheirGroupBeforeTheWorkerRunsAnythingElse) {
    Pool pool(1);
    int ordered = 0;
    for (int round = 0; round < 40; round++) {
        knit_group *g1 = make_group(pool);
        knit_group *g2 = make_group(pool);
        ASSERT_NE(nullptr, g1);
        ASSERT_NE(nullptr, g2);
        std::atomic<uint64_t> n{0};
        Gate gate;
        for (int i = 0; i < 200; i++) ASSERT_EQ(0, knit_group_submit(g1, count_up, &n));
        knit_future *f = nullptr;
        if (round % 2)
            ASSERT_EQ(0, knit_group_submit(g2, gated, &gate));
        else
            ASSERT_EQ(0, knit_submit(pool, gated, &gate, &f));
        auto until = std::chrono::steady_clock::now() + 30s;
        while (gate.started.load() == 0 && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(50us);
        ASSERT_EQ(1, gate.started.load()) << "the blocking task never started";
        if (n.load() == 200) {
            ordered++;
            // The worker is inside the blocker, so this wait finds nothing
            // to run itself: only g1's count can end it.
            EXPECT_EQ(0, knit_group_wait(g1, 10 * 1000000000LL))
                << "round " << round << ": " << knit_last_error();
        }
        gate.open = true;
        EXPECT_EQ(0, knit_group_wait(g1, -1));
        EXPECT_EQ(200u, n.load());
        EXPECT_EQ(0, knit_group_wait(g2, -1));
        if (f != nullptr) {
            EXPECT_EQ(0, knit_await(f, -1, nullptr));
            knit_future_release(f);
        }
        EXPECT_EQ(0, knit_group_destroy(g1));
        EXPECT_EQ(0, knit_group_destroy(g2));
    }
    EXPECT_GT(ordered, 0) << "no round ran g1's members before the blocker";
}

// Members kept back by a worker are handed over when it runs out of work,
// also when nothing else is submitted: a wait from outside and a destroy
// right after it see every member done. Many groups one after another, so
// the worker's kept-back group changes often.
TEST(Group, KeptBackMembersReachTheirGroupWhenTheWorkerGoesIdle) {
    Pool pool(2);
    for (int round = 0; round < 500; round++) {
        knit_group *g = make_group(pool);
        ASSERT_NE(nullptr, g);
        std::atomic<uint64_t> n{0};
        int members = 1 + round % 130; /* across the flush at 64 */
        for (int i = 0; i < members; i++) ASSERT_EQ(0, knit_group_submit(g, count_up, &n));
        while (n.load() != uint64_t(members)) std::this_thread::yield();
        ASSERT_EQ(0, knit_group_wait(g, 10 * 1000000000LL)) << knit_last_error();
        ASSERT_EQ(0, knit_group_destroy(g)) << knit_last_error();
    }
}

TEST(Group, CancelSkipsUnstartedAndTellsRunning) {
    Pool pool(1);
    knit_group *g = make_group(pool);
    ASSERT_NE(nullptr, g);
    Gate gate;
    std::atomic<uint64_t> n{0};
    ASSERT_EQ(0, knit_group_submit(g, gated, &gate));
    while (gate.started.load() == 0) std::this_thread::sleep_for(100us);
    // The one worker is held: these cannot start before the cancel.
    for (int i = 0; i < 50; i++) ASSERT_EQ(0, knit_group_submit(g, count_up, &n));
    EXPECT_EQ(0, knit_group_cancel(g));
    EXPECT_EQ(KNIT_ECANCELED, knit_group_submit(g, count_up, &n));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "cancelled"));
    gate.open = true;
    EXPECT_EQ(KNIT_ECANCELED, knit_group_wait(g, -1));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "the group was cancelled"));
    EXPECT_EQ(0u, n.load()) << "a cancelled member ran";
    EXPECT_EQ(1, gate.saw_cancel.load()) << "the running member did not see the cancel";
    EXPECT_EQ(0, knit_group_cancel(g)); // again: harmless
    EXPECT_EQ(0, knit_group_destroy(g));
    knit_pool_stats_t s{};
    s.size = sizeof s;
    ASSERT_EQ(0, knit_pool_stats(pool, &s));
    EXPECT_EQ(50u, s.cancelled);
    EXPECT_EQ(s.submitted, s.completed);
}

TEST(Group, FailureBeforeCancelWins) {
    Pool pool(1);
    knit_group *g = make_group(pool);
    ASSERT_NE(nullptr, g);
    ASSERT_EQ(0, knit_group_submit(g, fail_if_odd, reinterpret_cast<void *>(7)));
    EXPECT_EQ(KNIT_ETASK, knit_group_wait(g, -1));
    EXPECT_EQ(0, knit_group_cancel(g));
    EXPECT_EQ(KNIT_ETASK, knit_group_wait(g, -1));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "(code 7): member 7 failed"));
    EXPECT_EQ(0, knit_group_destroy(g));
}

// A member submits to its own group (a tree of 1 + 2 + ... members), and
// a task outside the group waits for a group of its own: nested waits run
// tasks, so one worker is enough.
struct Tree {
    knit_group *g;
    std::atomic<uint64_t> nodes{0};
};

struct Node {
    Tree *t;
    int depth;
};

void *tree_node(knit_task *, void *arg) {
    auto *nd = static_cast<Node *>(arg);
    nd->t->nodes.fetch_add(1);
    if (nd->depth > 0)
        for (int i = 0; i < 2; i++) {
            auto *c = new Node{nd->t, nd->depth - 1};
            if (knit_group_submit(nd->t->g, tree_node, c) != 0) delete c;
        }
    delete nd;
    return nullptr;
}

TEST(Group, MembersSubmitToTheirOwnGroup) {
    Pool pool(2);
    Tree t;
    ASSERT_EQ(0, knit_group_create(pool, &t.g));
    ASSERT_EQ(0, knit_group_submit(t.g, tree_node, new Node{&t, 10}));
    EXPECT_EQ(0, knit_group_wait(t.g, -1)) << knit_last_error();
    EXPECT_EQ((1u << 11) - 1, t.nodes.load());
    EXPECT_EQ(0, knit_group_destroy(t.g));
}

void *nested_group(knit_task *task, void *arg) {
    auto depth = reinterpret_cast<intptr_t>(arg);
    if (depth == 0) return reinterpret_cast<void *>(1);
    knit_group *g = nullptr;
    if (knit_group_create(knit_task_pool(task), &g) != 0) return nullptr;
    std::atomic<uint64_t> n{0};
    for (int i = 0; i < 3; i++) knit_group_submit(g, count_up, &n);
    knit_future *f = nullptr;
    knit_submit(knit_task_pool(task), nested_group, reinterpret_cast<void *>(depth - 1), &f);
    int rc = knit_group_wait(g, -1);
    void *r = nullptr;
    int rf = f != nullptr ? knit_await(f, -1, &r) : -1;
    if (f != nullptr) knit_future_release(f);
    knit_group_destroy(g);
    return rc == 0 && rf == 0 && r != nullptr && n.load() == 3 ? r : nullptr;
}

TEST(Group, NestedWaitsDoNotDeadlockOnOneWorker) {
    Pool pool(1);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(pool, nested_group, reinterpret_cast<void *>(20), &f));
    void *r = nullptr;
    EXPECT_EQ(0, knit_await(f, -1, &r)) << knit_last_error();
    EXPECT_EQ(reinterpret_cast<void *>(1), r);
    knit_future_release(f);
}

TEST(Group, MemberWaitingForItsOwnGroupIsBusy) {
    Pool pool(1);
    knit_group *g = make_group(pool);
    ASSERT_NE(nullptr, g);
    struct Probe {
        knit_group *g;
        std::atomic<int> rc{1};
    } probe{g};
    ASSERT_EQ(0, knit_group_submit(
                     g,
                     [](knit_task *, void *arg) -> void * {
                         auto *p = static_cast<Probe *>(arg);
                         p->rc = knit_group_wait(p->g, -1);
                         return nullptr;
                     },
                     &probe));
    EXPECT_EQ(0, knit_group_wait(g, -1));
    EXPECT_EQ(KNIT_EBUSY, probe.rc.load());
    EXPECT_EQ(0, knit_group_destroy(g));
}

TEST(Group, ManyThreadsSubmitAndWaitAtOnce) {
    Pool pool(2);
    knit_group *g = make_group(pool);
    ASSERT_NE(nullptr, g);
    std::atomic<uint64_t> n{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; t++)
        ts.emplace_back([&] {
            for (int i = 0; i < 5000; i++) ASSERT_EQ(0, knit_group_submit(g, count_up, &n));
            EXPECT_EQ(0, knit_group_wait(g, -1));
        });
    for (auto &t : ts) t.join();
    EXPECT_EQ(0, knit_group_wait(g, -1));
    EXPECT_EQ(20000u, n.load());
    EXPECT_EQ(0, knit_group_destroy(g));
}

TEST(Group, DestroyRightAfterWaitIsSafe) {
    // The last finisher may still be ringing when the wait returns: the
    // destroy must not free the group under it (ASan and TSan check).
    Pool pool(2);
    for (int round = 0; round < 2000; round++) {
        knit_group *g = nullptr;
        ASSERT_EQ(0, knit_group_create(pool, &g));
        std::atomic<uint64_t> n{0};
        ASSERT_EQ(0, knit_group_submit(g, count_up, &n));
        ASSERT_EQ(0, knit_group_submit(g, count_up, &n));
        ASSERT_EQ(0, knit_group_wait(g, -1));
        ASSERT_EQ(0, knit_group_destroy(g));
        ASSERT_EQ(2u, n.load());
    }
}

TEST(Group, PoolDestroyCancelSettlesMembersAndWaitStillWorks) {
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 1;
    knit_pool *pool = nullptr;
    ASSERT_EQ(0, knit_pool_create(&o, &pool));
    knit_group *g = make_group(pool);
    ASSERT_NE(nullptr, g);
    Gate gate;
    std::atomic<uint64_t> n{0};
    ASSERT_EQ(0, knit_group_submit(g, gated, &gate));
    while (gate.started.load() == 0) std::this_thread::sleep_for(100us);
    for (int i = 0; i < 20; i++) ASSERT_EQ(0, knit_group_submit(g, count_up, &n));
    std::thread opener([&] {
        std::this_thread::sleep_for(5ms);
        gate.open = true;
    });
    EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_CANCEL));
    opener.join();
    EXPECT_EQ(0u, n.load());
    EXPECT_EQ(KNIT_ECANCELED, knit_group_wait(g, -1));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "knit_pool_destroy"));
    EXPECT_EQ(KNIT_ESHUTDOWN, knit_group_submit(g, count_up, &n));
    EXPECT_EQ(0, knit_group_destroy(g));
}

TEST(Group, PoolDestroyDrainRunsMembers) {
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 2;
    knit_pool *pool = nullptr;
    ASSERT_EQ(0, knit_pool_create(&o, &pool));
    knit_group *g = make_group(pool);
    ASSERT_NE(nullptr, g);
    std::atomic<uint64_t> n{0};
    for (int i = 0; i < 1000; i++) ASSERT_EQ(0, knit_group_submit(g, count_up, &n));
    EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN));
    EXPECT_EQ(1000u, n.load());
    EXPECT_EQ(0, knit_group_wait(g, -1));
    EXPECT_EQ(0, knit_group_destroy(g));
}

TEST(Group, FailPolicyAtTheBound) {
    Pool pool(1, nullptr, 4, KNIT_FAIL);
    knit_group *g = make_group(pool);
    ASSERT_NE(nullptr, g);
    Gate gate;
    ASSERT_EQ(0, knit_group_submit(g, gated, &gate));
    while (gate.started.load() == 0) std::this_thread::sleep_for(100us);
    std::atomic<uint64_t> n{0};
    int ok = 0, again = 0;
    for (int i = 0; i < 10; i++) {
        int rc = knit_group_submit(g, count_up, &n);
        if (rc == 0) ok++;
        if (rc == KNIT_EAGAIN) again++;
    }
    EXPECT_EQ(4, ok);
    EXPECT_EQ(6, again);
    gate.open = true;
    EXPECT_EQ(0, knit_group_wait(g, -1)) << "a refused submit is no failure";
    EXPECT_EQ(4u, n.load());
    EXPECT_EQ(0, knit_group_destroy(g));
}

}  // namespace
