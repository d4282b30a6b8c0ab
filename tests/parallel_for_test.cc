// knit_parallel_for: every index exactly once for every grain, piece
// bounds, argument checks, the first failure and its message, nesting (in
// a task on one worker, and a range function that calls parallel_for),
// a 10M-index sum, concurrent callers, a tiny max_pending, ranges at the
// top of size_t, the pool destroyed (DRAIN / CANCEL) under a running
// parallel_for; both disciplines, 1 and 2 workers.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "knit/knit.h"
#include "pool_util.h"

namespace {

#ifdef KNIT_SANITIZER
constexpr uint64_t kScale = 10; // sanitizers run ~10-20x slower
#else
constexpr uint64_t kScale = 1;
#endif

using knit_test::Pool;

// Awaits a future that must settle; a deadlock ends the binary with a
// message instead of hanging until Bazel's timeout (the pool could not be
// destroyed cleanly anyway).
int await_or_die(knit_future *f, int seconds, void **result, const char *what) {
    int rc = knit_await(f, int64_t(seconds) * 1000000000, result);
    if (rc == KNIT_ETIMEDOUT) {
        std::fprintf(stderr, "FATAL: %s did not finish in %d s (deadlock?)\n", what, seconds);
        std::fflush(stderr);
        std::_Exit(1);
    }
    return rc;
}

// Records every piece and every index it covers.
struct Coverage {
    size_t begin, end, grain;
    std::vector<std::atomic<uint32_t>> hits;
    std::atomic<uint64_t> pieces{0};
    std::atomic<uint64_t> bad_pieces{0};   // outside [begin, end) or b > e
    std::atomic<uint64_t> empty_pieces{0}; // b == e
    std::atomic<uint64_t> too_long{0};     // longer than grain
    Coverage(size_t b, size_t e, size_t g) : begin(b), end(e), grain(g), hits(e) {
        for (auto &h : hits) h.store(0);
    }
    static int fn(void *ctx, size_t b, size_t e) {
        auto *c = static_cast<Coverage *>(ctx);
        c->pieces++;
        if (b < c->begin || e > c->end || b > e) {
            c->bad_pieces++;
            return 0;
        }
        if (b == e) c->empty_pieces++;
        if (c->grain != 0 && e - b > c->grain) c->too_long++;
        for (size_t i = b; i < e; i++) c->hits[i].fetch_add(1, std::memory_order_relaxed);
        return 0;
    }
};

using Config = std::tuple<const char *, unsigned>; // sched, workers

class ParallelFor : public ::testing::TestWithParam<Config> {
  protected:
    const char *sched() const { return std::get<0>(GetParam()); }
    unsigned workers() const { return std::get<1>(GetParam()); }
};

TEST_P(ParallelFor, EveryIndexExactlyOnceForEveryGrain) {
    Pool pool(workers(), sched());
    const std::pair<size_t, size_t> ranges[] = {{0, 0}, {5, 6}, {0, 1000}};
    const size_t grains[] = {1, 7, 0, 1000, 5000};
    for (auto [b, e] : ranges)
        for (size_t g : grains) {
            SCOPED_TRACE("range [" + std::to_string(b) + ", " + std::to_string(e) +
                         ") grain " + std::to_string(g));
            Coverage c(b, e, g);
            ASSERT_EQ(0, knit_parallel_for(pool, b, e, g, Coverage::fn, &c))
                << knit_last_error();
            EXPECT_EQ(0u, c.bad_pieces.load());
            EXPECT_EQ(0u, c.empty_pieces.load()) << "fn called with an empty piece";
            EXPECT_EQ(0u, c.too_long.load()) << "a piece longer than the grain";
            uint64_t wrong = 0;
            for (size_t i = 0; i < e; i++) wrong += c.hits[i].load() != (i >= b ? 1u : 0u);
            EXPECT_EQ(0u, wrong) << "indices not covered exactly once";
            size_t n = e - b;
            if (n == 0) {
                EXPECT_EQ(0u, c.pieces.load()) << "an empty range calls nothing";
            } else if (g != 0) {
                EXPECT_GE(c.pieces.load(), (n + g - 1) / g);
                EXPECT_LE(c.pieces.load(), n);
            } else {
                // Default grain: "about 8 pieces per worker".
                EXPECT_GE(c.pieces.load(), std::min<uint64_t>(n, 2)) << "default grain";
                EXPECT_LE(c.pieces.load(), 64u * workers()) << "default grain";
            }
        }
}

TEST_P(ParallelFor, BadArgumentsAreEinval) {
    Pool pool(workers(), sched());
    Coverage c(0, 10, 1);
    EXPECT_EQ(KNIT_EINVAL, knit_parallel_for(pool, 10, 5, 1, Coverage::fn, &c));
    EXPECT_STRNE("", knit_last_error());
    EXPECT_EQ(KNIT_EINVAL, knit_parallel_for(pool, 0, 10, 1, nullptr, &c));
    EXPECT_STRNE("", knit_last_error());
    EXPECT_EQ(KNIT_EINVAL, knit_parallel_for(nullptr, 0, 10, 1, Coverage::fn, &c));
    EXPECT_STRNE("", knit_last_error());
    EXPECT_EQ(0u, c.pieces.load()) << "fn never runs on bad arguments";
    // The pool still works afterwards.
    EXPECT_EQ(0, knit_parallel_for(pool, 0, 10, 1, Coverage::fn, &c)) << knit_last_error();
    EXPECT_EQ(10u, c.pieces.load());
}

TEST(ParallelForShutdown, DestroyedPoolIsEshutdown) {
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 1;
    knit_pool *p = nullptr;
    ASSERT_EQ(0, knit_pool_create(&o, &p)) << knit_last_error();
    ASSERT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
    Coverage c(0, 10, 1);
    EXPECT_EQ(KNIT_ESHUTDOWN, knit_parallel_for(p, 0, 10, 1, Coverage::fn, &c));
    EXPECT_EQ(0u, c.pieces.load());
}

// knit_pool_destroy from another thread while a parallel_for runs: DRAIN
// lets it finish every piece; CANCEL makes it return KNIT_ECANCELED (or 0
// if it got there first). Neither may hang or touch freed memory. The
// first piece is slow (it is the one the calling thread keeps for itself),
// so the destroy happens while the caller is inside it and still owes
// awaits. In a child process (a death test) so that a crash fails this
// test alone; returns the child's exit code, 0 when every check passed.
int destroy_during_parallel_for(int how) {
    for (int round = 0; round < 3; round++) {
        knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
        o.threads = 2;
        knit_pool *p = nullptr;
        if (knit_pool_create(&o, &p) != 0) {
            std::fprintf(stderr, "pool: %s\n", knit_last_error());
            return 10;
        }
        const size_t n = 500;
        struct Ctx {
            std::atomic<uint64_t> pieces{0};
            std::atomic<bool> slow_started{false};
        } ctx;
        std::atomic<int> rc{1};
        std::thread caller([&] {
            rc = knit_parallel_for(
                p, 0, n, 1,
                [](void *c, size_t b, size_t) -> int {
                    auto *x = static_cast<Ctx *>(c);
                    if (b == 0) {
                        x->slow_started = true;
                        std::this_thread::sleep_for(std::chrono::milliseconds(100));
                    } else {
                        std::this_thread::sleep_for(std::chrono::microseconds(20));
                    }
                    x->pieces++;
                    return 0;
                },
                &ctx);
        });
        while (!ctx.slow_started.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
        if (int d = knit_pool_destroy(p, how); d != 0) {
            std::fprintf(stderr, "knit_pool_destroy: %d %s\n", d, knit_last_error());
            return 11;
        }
        caller.join();
        bool ok = how == KNIT_DRAIN ? rc.load() == 0 && ctx.pieces.load() == n
                                    : (rc.load() == KNIT_ECANCELED ||
                                       (rc.load() == 0 && ctx.pieces.load() == n));
        if (!ok) {
            std::fprintf(stderr, "round %d: parallel_for returned %d after %" PRIu64 " of %zu pieces\n",
                         round, rc.load(), ctx.pieces.load(), n);
            return 12;
        }
    }
    return 0;
}

TEST(ParallelForShutdown, PoolDestroyDrainDuringRun) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::_Exit(destroy_during_parallel_for(KNIT_DRAIN)), ::testing::ExitedWithCode(0), "");
}

TEST(ParallelForShutdown, PoolDestroyCancelDuringRun) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::_Exit(destroy_during_parallel_for(KNIT_CANCEL)), ::testing::ExitedWithCode(0), "");
}

TEST(KnitError, SetsMessageAndReturnsCode) {
    EXPECT_EQ(-77, knit_error(-77, "range %d broke", 12));
    EXPECT_STREQ("range 12 broke", knit_last_error());
    EXPECT_EQ(KNIT_ETASK, knit_error(KNIT_ETASK, "%s", "again"));
    EXPECT_STREQ("again", knit_last_error());
}

// One piece fails: its code comes back and its message is in the caller's
// knit_last_error() (set on whichever thread ran the piece).
TEST_P(ParallelFor, FailureReturnsCodeAndMessage) {
    Pool pool(workers(), sched());
    for (int code : {-77, int(KNIT_ETASK), int(KNIT_ECANCELED)}) {
        struct Ctx {
            int code;
            std::atomic<uint64_t> calls{0};
            std::atomic<size_t> bad_b{0}, bad_e{0};
        } ctx{code};
        int rc = knit_parallel_for(
            pool, 0, 1000, 10,
            [](void *p, size_t b, size_t e) -> int {
                auto *c = static_cast<Ctx *>(p);
                c->calls++;
                // The first leaf in split order (the caller runs it before
                // any other of its own pieces): only pieces a thief started
                // meanwhile run before the failure, all later ones skip.
                // (A failure deep in the range cannot bound the calls: a
                // thief may finish a whole half before the failing piece
                // is reached.)
                if (b <= 3 && 3 < e) {
                    c->bad_b = b;
                    c->bad_e = e;
                    return knit_error(c->code, "piece [%zu, %zu) hit the bad index", b, e);
                }
                return 0;
            },
            &ctx);
        EXPECT_EQ(code, rc);
        char want[96];
        std::snprintf(want, sizeof want, "piece [%zu, %zu) hit the bad index", ctx.bad_b.load(),
                      ctx.bad_e.load());
        EXPECT_NE(nullptr, std::strstr(knit_last_error(), want))
            << "knit_last_error() = \"" << knit_last_error() << "\"";
        EXPECT_GE(ctx.calls.load(), 1u);
        EXPECT_LE(ctx.calls.load(), 100u);
    }
    // A failure without a message still returns the code.
    int rc = knit_parallel_for(
        pool, 0, 100, 1,
        [](void *, size_t b, size_t) -> int { return b == 42 ? -123 : 0; }, nullptr);
    EXPECT_EQ(-123, rc);
}

// Every piece fails with its own code and message: the code returned is
// one of them, and the message in knit_last_error() is that same piece's.
TEST_P(ParallelFor, ManyFailuresReturnOneConsistently) {
    Pool pool(workers(), sched());
    for (int round = 0; round < 20; round++) {
        int rc = knit_parallel_for(
            pool, 0, 640, 10,
            [](void *, size_t b, size_t) -> int {
                std::this_thread::sleep_for(std::chrono::microseconds(b % 7 * 10));
                return knit_error(-1000 - int(b / 10), "piece %zu failed", b / 10);
            },
            nullptr);
        ASSERT_LE(rc, -1000);
        ASSERT_GT(rc, -1064);
        char want[64];
        std::snprintf(want, sizeof want, "piece %d failed", -1000 - rc);
        EXPECT_NE(nullptr, std::strstr(knit_last_error(), want))
            << "rc " << rc << " but knit_last_error() = \"" << knit_last_error() << "\"";
    }
}

// Sums i over [0, 10M) in pieces of 1000.
TEST_P(ParallelFor, TenMillionIndicesSumCorrectly) {
    Pool pool(workers(), sched());
    struct Ctx {
        std::atomic<uint64_t> sum{0}, pieces{0}, count{0};
    } ctx;
    const size_t n = 10'000'000;
    ASSERT_EQ(0, knit_parallel_for(
                     pool, 0, n, 1000,
                     [](void *p, size_t b, size_t e) -> int {
                         auto *c = static_cast<Ctx *>(p);
                         uint64_t s = 0;
                         for (size_t i = b; i < e; i++) s += i;
                         c->sum += s;
                         c->count += e - b;
                         c->pieces++;
                         return 0;
                     },
                     &ctx))
        << knit_last_error();
    EXPECT_EQ(uint64_t(n) * (n - 1) / 2, ctx.sum.load());
    EXPECT_EQ(n, ctx.count.load());
    EXPECT_GE(ctx.pieces.load(), n / 1000) << "pieces are at most 1000 long";
}

// A task on a 1-worker pool calls parallel_for on that pool: the one
// worker is busy running the task, so the task must run the pieces itself.
TEST_P(ParallelFor, FromTaskOnOneWorkerDoesNotDeadlock) {
    Pool pool(1, sched());
    Coverage c(0, 5000, 10);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(
                     pool,
                     [](knit_task *t, void *arg) -> void * {
                         int rc = knit_parallel_for(knit_task_pool(t), 0, 5000, 10,
                                                    Coverage::fn, arg);
                         if (rc != 0) knit_task_fail(t, rc, "parallel_for: %s", knit_last_error());
                         return arg;
                     },
                     &c, &f));
    void *r = nullptr;
    EXPECT_EQ(0, await_or_die(f, 60, &r, "parallel_for inside a task")) << knit_last_error();
    EXPECT_EQ(&c, r);
    knit_future_release(f);
    uint64_t wrong = 0;
    for (auto &h : c.hits) wrong += h.load() != 1;
    EXPECT_EQ(0u, wrong);
}

// Several tasks at once, each running a parallel_for on the same pool.
TEST_P(ParallelFor, ManyTasksEachRunParallelFor) {
    Pool pool(workers(), sched());
    constexpr int kTasks = 8;
    std::vector<std::unique_ptr<Coverage>> cs;
    std::vector<knit_future *> fs(kTasks);
    for (int i = 0; i < kTasks; i++) {
        cs.emplace_back(new Coverage(0, 2000, 3));
        ASSERT_EQ(0, knit_submit(
                         pool,
                         [](knit_task *t, void *arg) -> void * {
                             int rc = knit_parallel_for(knit_task_pool(t), 0, 2000, 3,
                                                        Coverage::fn, arg);
                             if (rc != 0) knit_task_fail(t, rc, "%s", knit_last_error());
                             return nullptr;
                         },
                         cs.back().get(), &fs[i]));
    }
    for (auto *f : fs) {
        EXPECT_EQ(0, await_or_die(f, 60, nullptr, "tasks running parallel_for"))
            << knit_last_error();
        knit_future_release(f);
    }
    for (auto &c : cs) {
        uint64_t wrong = 0;
        for (auto &h : c->hits) wrong += h.load() != 1;
        EXPECT_EQ(0u, wrong);
    }
}

// A range function that itself calls parallel_for on the same pool (from
// the calling thread, and from inside a task).
struct Nested {
    knit_pool *pool;
    size_t outer, inner;
    std::vector<std::atomic<uint32_t>> hits; // outer * inner
    std::atomic<int> inner_failures{0};
    Nested(knit_pool *p, size_t o, size_t i) : pool(p), outer(o), inner(i), hits(o * i) {
        for (auto &h : hits) h.store(0);
    }
    struct Row {
        Nested *n;
        size_t row;
    };
    static int inner_fn(void *ctx, size_t b, size_t e) {
        auto *r = static_cast<Row *>(ctx);
        for (size_t j = b; j < e; j++) r->n->hits[r->row * r->n->inner + j]++;
        return 0;
    }
    static int outer_fn(void *ctx, size_t b, size_t e) {
        auto *n = static_cast<Nested *>(ctx);
        for (size_t row = b; row < e; row++) {
            Row r{n, row};
            int rc = knit_parallel_for(n->pool, 0, n->inner, 7, inner_fn, &r);
            if (rc != 0) {
                n->inner_failures++;
                return rc;
            }
        }
        return 0;
    }
    uint64_t wrong() const {
        uint64_t w = 0;
        for (auto &h : hits) w += h.load() != 1;
        return w;
    }
};

TEST_P(ParallelFor, RangeFunctionCallsParallelFor) {
    Pool pool(workers(), sched());
    Nested n(pool, 32, 500);
    ASSERT_EQ(0, knit_parallel_for(pool, 0, n.outer, 1, Nested::outer_fn, &n))
        << knit_last_error();
    EXPECT_EQ(0, n.inner_failures.load());
    EXPECT_EQ(0u, n.wrong());
}

TEST_P(ParallelFor, NestedParallelForInsideTask) {
    Pool pool(workers(), sched());
    Nested n(pool, 16, 300);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(
                     pool,
                     [](knit_task *t, void *arg) -> void * {
                         auto *n = static_cast<Nested *>(arg);
                         int rc = knit_parallel_for(n->pool, 0, n->outer, 1, Nested::outer_fn, n);
                         if (rc != 0) knit_task_fail(t, rc, "%s", knit_last_error());
                         return nullptr;
                     },
                     &n, &f));
    EXPECT_EQ(0, await_or_die(f, 60, nullptr, "nested parallel_for in a task"))
        << knit_last_error();
    knit_future_release(f);
    EXPECT_EQ(0u, n.wrong());
}

// Three levels deep, on one worker: a task -> parallel_for -> parallel_for
// -> parallel_for.
TEST_P(ParallelFor, ThreeLevelsOnOneWorker) {
    Pool pool(1, sched());
    struct Ctx {
        knit_pool *pool;
        std::atomic<uint64_t> leaves{0};
        static int l3(void *p, size_t b, size_t e) {
            static_cast<Ctx *>(p)->leaves += e - b;
            return 0;
        }
        static int l2(void *p, size_t b, size_t e) {
            for (size_t i = b; i < e; i++) {
                int rc = knit_parallel_for(static_cast<Ctx *>(p)->pool, 0, 10, 1, l3, p);
                if (rc) return rc;
            }
            return 0;
        }
        static int l1(void *p, size_t b, size_t e) {
            for (size_t i = b; i < e; i++) {
                int rc = knit_parallel_for(static_cast<Ctx *>(p)->pool, 0, 10, 1, l2, p);
                if (rc) return rc;
            }
            return 0;
        }
    } ctx{pool.p};
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(
                     pool,
                     [](knit_task *t, void *arg) -> void * {
                         int rc = knit_parallel_for(knit_task_pool(t), 0, 10, 1, Ctx::l1, arg);
                         if (rc != 0) knit_task_fail(t, rc, "%s", knit_last_error());
                         return nullptr;
                     },
                     &ctx, &f));
    EXPECT_EQ(0, await_or_die(f, 60, nullptr, "three nested parallel_fors")) << knit_last_error();
    knit_future_release(f);
    EXPECT_EQ(1000u, ctx.leaves.load());
}

// A failure deep inside nested parallel_fors comes out of the outer one
// with the inner message.
TEST_P(ParallelFor, NestedFailurePropagates) {
    Pool pool(workers(), sched());
    struct Ctx {
        knit_pool *pool;
        static int inner(void *, size_t b, size_t) {
            return b == 33 ? knit_error(-55, "inner piece %zu broke", b) : 0;
        }
        static int outer(void *p, size_t b, size_t) {
            if (b != 3) return 0;
            return knit_parallel_for(static_cast<Ctx *>(p)->pool, 0, 100, 1, inner, p);
        }
    } ctx{pool.p};
    EXPECT_EQ(-55, knit_parallel_for(pool, 0, 8, 1, Ctx::outer, &ctx));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "inner piece 33 broke"))
        << knit_last_error();
}

// Several outside threads call parallel_for on the same pool at once.
TEST_P(ParallelFor, ConcurrentCallers) {
    Pool pool(workers(), sched());
    constexpr int kCallers = 4;
    const int rounds = int(50 / kScale) + 5;
    std::vector<std::thread> ts;
    std::atomic<int> bad{0};
    for (int c = 0; c < kCallers; c++)
        ts.emplace_back([&] {
            for (int r = 0; r < rounds; r++) {
                Coverage cov(0, 3000, 16);
                if (knit_parallel_for(pool, 0, 3000, 16, Coverage::fn, &cov) != 0) bad++;
                for (auto &h : cov.hits)
                    if (h.load() != 1) bad++;
            }
        });
    for (auto &t : ts) t.join();
    EXPECT_EQ(0, bad.load());
}

// Ranges near SIZE_MAX: no overflow in the piece arithmetic.
TEST_P(ParallelFor, RangeAtTopOfSizeT) {
    Pool pool(workers(), sched());
    const size_t top = SIZE_MAX;
    struct Ctx {
        size_t lo;
        std::atomic<uint64_t> count{0}, bad{0};
    } ctx{top - 1000};
    for (size_t g : {size_t(1), size_t(7), size_t(0), size_t(1000), SIZE_MAX}) {
        ctx.count = 0;
        ASSERT_EQ(0, knit_parallel_for(
                         pool, top - 1000, top, g,
                         [](void *p, size_t b, size_t e) -> int {
                             auto *c = static_cast<Ctx *>(p);
                             if (b < c->lo || e < b) c->bad++;
                             else c->count += e - b;
                             return 0;
                         },
                         &ctx))
            << knit_last_error();
        EXPECT_EQ(1000u, ctx.count.load()) << "grain " << g;
    }
    EXPECT_EQ(0u, ctx.bad.load());
}

// A pool that takes at most 1 or 4 pending tasks, with either policy:
// pieces that cannot be submitted run on the caller; from outside and
// from inside a task.
TEST_P(ParallelFor, TinyMaxPending) {
    for (int bp : {int(KNIT_BLOCK), int(KNIT_FAIL)})
        for (size_t max_pending : {size_t(1), size_t(4)}) {
            SCOPED_TRACE(std::string(bp == KNIT_BLOCK ? "KNIT_BLOCK" : "KNIT_FAIL") +
                         " max_pending " + std::to_string(max_pending));
            Pool pool(workers(), sched(), max_pending, bp);
            Coverage c(0, 20000, 5);
            ASSERT_EQ(0, knit_parallel_for(pool, 0, 20000, 5, Coverage::fn, &c))
                << knit_last_error();
            uint64_t wrong = 0;
            for (auto &h : c.hits) wrong += h.load() != 1;
            EXPECT_EQ(0u, wrong);

            Nested n(pool, 8, 200);
            knit_future *f = nullptr;
            ASSERT_EQ(0, knit_submit(
                             pool,
                             [](knit_task *t, void *arg) -> void * {
                                 auto *n = static_cast<Nested *>(arg);
                                 int rc = knit_parallel_for(n->pool, 0, n->outer, 1,
                                                            Nested::outer_fn, n);
                                 if (rc != 0) knit_task_fail(t, rc, "%s", knit_last_error());
                                 return nullptr;
                             },
                             &n, &f));
            EXPECT_EQ(0, await_or_die(f, 60, nullptr, "parallel_for with a tiny max_pending"))
                << knit_last_error();
            knit_future_release(f);
            EXPECT_EQ(0u, n.wrong());
        }
}

INSTANTIATE_TEST_SUITE_P(Scheds, ParallelFor,
                         ::testing::Combine(::testing::Values("ticket", "dekker"),
                                            ::testing::Values(1u, 2u)),
                         [](const ::testing::TestParamInfo<Config> &info) {
                             return std::string(std::get<0>(info.param)) + "_" +
                                    std::to_string(std::get<1>(info.param)) + "w";
                         });

} // namespace
