// Misuse and bad input (issue 8): a table of wrong calls to the public API,
// each with the KNIT_E* code it must return and the words its
// knit_last_error() message must contain (the option, the value, the
// limit). Around every row the test also checks that the failed call
// changed nothing: out-pointers are cleared (never a dangling handle),
// moved buffers stay with the caller, the shared pool's counters are the
// same, it still runs a task with the right result, and the discipline
// registry lists the same names. Leaks are LSan's job (--config=asan).
//
// Misuses that cannot be detected by design (calling them would be
// undefined behaviour, so the table does not):
//  - Any call on a future after knit_pool_destroy: destroy frees every
//    future of the pool (knit.h: "the pool's futures are invalid"); only the
//    pool handle is kept as a tombstone.
//  - await / cancel / then / release of a released future once its slot
//    was recycled: a released future goes back to the releasing thread's
//    cache and the next submit on that thread may hand the same memory out
//    again, so a stale handle then names someone else's future. The rows
//    below use a released handle before any further submit on the thread,
//    which is where the runtime does detect it (KNIT_EALREADY, knit.h).
//  - knit_future_take_buf / knit_future_done on a released future: they
//    do not check the handle (take_buf still never double-frees: the
//    buffer was dropped with the future, so a late take sees TAKEN).
//  - knit_pipeline_* on a destroyed pipeline, knit_buf_free of a buffer
//    that was moved (the move empties the caller's knit_buf, so that is a
//    no-op only if the caller kept no copy of the struct), a knit_task
//    pointer used after its task returned.
//
// Not misuses, although they look like them (the header defines them):
// knit_submit with out == NULL (a detached task), threads == 0 (one per
// CPU), region_lanes == 0 (the default), parallel_for grain == 0 (about 8
// pieces per worker), any negative await timeout (no limit), timeout 0
// (just test: KNIT_ETIMEDOUT on an unsettled future, which is a row). The
// header documents no invalid timeout; the NotMisuse tests check that the
// extreme ones (INT64_MIN, INT64_MAX) behave.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pool_util.h"
#include "test_util.h"

namespace {

using namespace std::chrono_literals;
using knit_test::ScopedSchedEnv;
using knit_test::valid_ops;

// ---- tasks and helpers -------------------------------------------------

void *add_one(knit_task *, void *arg) {
    return reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(arg) + 1);
}

// A task that holds its worker until the test opens the gate.
struct Gate {
    std::atomic<bool> started{false};
    std::atomic<bool> open{false};
    void wait_started() const {
        while (!started.load()) std::this_thread::sleep_for(100us);
    }
};

void *gated(knit_task *, void *arg) {
    auto *g = static_cast<Gate *>(arg);
    g->started.store(true);
    while (!g->open.load()) std::this_thread::sleep_for(100us);
    return arg;
}

// Returns a 16-byte malloc'ed buffer to whoever takes it.
void *returns_buf(knit_task *task, void *) {
    void *mem = std::malloc(16);
    std::memset(mem, 0xab, 16);
    knit_buf b = knit_buf_malloced(mem, 16);
    if (knit_task_return_buf(task, &b) != 0) knit_buf_free(&b);
    return nullptr;
}

// A reduce that counts elements (as a double), and its combine.
int reduce_count(void *, size_t b, size_t e, void *out) {
    double n = static_cast<double>(e - b);
    std::memcpy(out, &n, sizeof n);
    return 0;
}

void reduce_add(void *, void *left, const void *right) {
    double l, r;
    std::memcpy(&l, left, sizeof l);
    std::memcpy(&r, right, sizeof r);
    l += r;
    std::memcpy(left, &l, sizeof l);
}

// What a misuse made inside a task saw; the test thread checks it.
struct InTask {
    int rc = 0;
    std::string msg;
    bool untouched = true; // an argument the failed call must not change
    void record(int code) {
        rc = code;
        msg = knit_last_error();
    }
};

knit_pool *const kSentinelPool = reinterpret_cast<knit_pool *>(uintptr_t{0x5e47});
knit_future *const kSentinelFuture = reinterpret_cast<knit_future *>(uintptr_t{0x5e47});
knit_pipeline *const kSentinelPipeline =
    reinterpret_cast<knit_pipeline *>(uintptr_t{0x5e47});

// Submits add_one(41) and expects 42: the pool still works.
void expect_pool_works(knit_pool *p) {
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(p, add_one, reinterpret_cast<void *>(uintptr_t{41}), &f))
        << knit_last_error();
    void *r = nullptr;
    EXPECT_EQ(0, knit_await(f, -1, &r)) << knit_last_error();
    EXPECT_EQ(42u, reinterpret_cast<uintptr_t>(r));
    EXPECT_EQ(0, knit_future_release(f));
}

// A pool created with `edit` applied to the options; nullptr on failure.
knit_pool *make_pool(const std::function<void(knit_pool_options &)> &edit) {
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 1;
    o.sched = "ticket";
    edit(o);
    knit_pool *p = nullptr;
    EXPECT_EQ(0, knit_pool_create(&o, &p)) << knit_last_error();
    return p;
}

knit_pool *make_pool() {
    return make_pool([](knit_pool_options &) {});
}

// A pool handle after knit_pool_destroy (the tombstone stays valid).
knit_pool *dead_pool() {
    knit_pool *p = make_pool();
    EXPECT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN)) << knit_last_error();
    return p;
}

// knit_pool_create with `edit` applied; a failed create must leave no pool.
int create_with(const std::function<void(knit_pool_options &)> &edit) {
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 1;
    o.sched = "ticket";
    edit(o);
    knit_pool *p = kSentinelPool;
    int rc = knit_pool_create(&o, &p);
    if (rc == 0) {
        ADD_FAILURE() << "the misuse created a pool";
        knit_pool_destroy(p, KNIT_DRAIN);
    } else {
        // Not promised by knit.h; what pool.c does: *out = NULL first.
        EXPECT_EQ(nullptr, p) << "a failed create clears *out";
    }
    return rc;
}


// knit_pool_create with opts.sched = NULL and KNIT_SCHED = value.
int create_with_env(const char *value) {
    ScopedSchedEnv env(value);
    return create_with([](knit_pool_options &o) { o.sched = nullptr; });
}


// knit_sched_register keeps the pointer on success, so the ops live for
// the process (a row that wrongly succeeded must not leave a dangling one).
int register_edited(const char *name, const std::function<void(knit_sched_ops &)> &edit) {
    static std::vector<std::unique_ptr<knit_sched_ops>> kept;
    kept.push_back(std::make_unique<knit_sched_ops>(valid_ops(name)));
    edit(*kept.back());
    return knit_sched_register(kept.back().get());
}

std::vector<std::string> registry_names() {
    const knit_sched_ops *all[KNIT_SCHED_MAX] = {};
    size_t n = knit_sched_list(all, KNIT_SCHED_MAX);
    std::vector<std::string> names;
    for (size_t i = 0; i < n && i < KNIT_SCHED_MAX; i++) names.push_back(all[i]->name);
    return names;
}

// Pipelines: an input of `n` malloc'ed items, a stage that does nothing.
struct Items {
    int left;
};
int input_n(void *ctx, knit_buf *item) {
    auto *it = static_cast<Items *>(ctx);
    if (it->left == 0) return 0;
    it->left--;
    *item = knit_buf_malloced(std::malloc(8), 8);
    return 1;
}
int stage_noop(void *, uint64_t, knit_buf *) { return 0; }

const knit_stage kOneStage[] = {{KNIT_STAGE_PARALLEL, stage_noop, nullptr}};

int pipeline_create_with(knit_pool *pool,
                         const std::function<void(knit_pipeline_options &)> &edit) {
    static Items none{0};
    knit_pipeline_options o = KNIT_PIPELINE_OPTIONS_INIT;
    o.input = input_n;
    o.input_ctx = &none;
    o.stages = kOneStage;
    o.nstages = 1;
    edit(o);
    knit_pipeline *pl = kSentinelPipeline;
    int rc = knit_pipeline_create(pool, &o, &pl);
    if (rc == 0) {
        ADD_FAILURE() << "the misuse created a pipeline";
        knit_pipeline_destroy(pl);
    } else {
        EXPECT_EQ(nullptr, pl) << "a failed create clears *out";
    }
    return rc;
}

int range_ok(void *, size_t, size_t) { return 0; }

// ---- the shared pool's counters ----------------------------------------

struct Counters {
    uint64_t submitted, completed, tasks_run, cancelled, failed, pending, carpets,
        arena_bytes, arena_allocs, arena_failures;
};

Counters counters(knit_pool *p) {
    knit_pool_stats_t s{};
    s.size = sizeof s;
    EXPECT_EQ(0, knit_pool_stats(p, &s)) << knit_last_error();
    return {s.submitted, s.completed,  s.tasks_run,   s.cancelled,    s.failed,
            s.pending,   s.carpets,    s.arena_bytes, s.arena_allocs, s.arena_failures};
}

// Waits (up to 10 s) until every task submitted to p has settled and been
// counted: a row's tasks (a pipeline's last item, a detached task, the
// previous row's expect_pool_works) may still be finishing when the call
// that waited for them returned, and the next row compares counters.
void quiesce(knit_pool *p) {
    for (int i = 0; i < 10000; i++) {
        Counters c = counters(p);
        if (c.submitted == c.completed && c.pending == 0) return;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, nullptr);
    }
    ADD_FAILURE() << "the shared pool did not settle its tasks within 10 s";
}

void expect_same(const Counters &a, const Counters &b) {
#define KNIT_SAME(x) EXPECT_EQ(a.x, b.x) << "stats." #x " changed by a failed call"
    KNIT_SAME(submitted);
    KNIT_SAME(completed);
    KNIT_SAME(tasks_run);
    KNIT_SAME(cancelled);
    KNIT_SAME(failed);
    KNIT_SAME(pending);
    KNIT_SAME(carpets);
    KNIT_SAME(arena_bytes);
    KNIT_SAME(arena_allocs);
    KNIT_SAME(arena_failures);
#undef KNIT_SAME
}

// ---- the table -----------------------------------------------------------

// What a row's lambda gets: the shared pool, and `call`, which runs the
// misuse itself between two snapshots of the shared pool's counters and
// keeps its message. A row that sets things up first (submits, awaits)
// wraps only the misuse in call(); a row that does not use call() is
// checked around the whole lambda (it must not touch the shared pool
// successfully); a row whose misuse runs inside a task hands its message
// over with from_task() and skips the counter check (tasks move them).
struct Env {
    knit_pool *shared = nullptr;
    bool called = false;
    bool in_task = false;
    std::string msg;

    template <class F> int call(F f) {
        Counters before = counters(shared);
        int rc = f();
        msg = knit_last_error();
        called = true;
        expect_same(before, counters(shared));
        return rc;
    }
    int from_task(const InTask &t) {
        in_task = true;
        msg = t.msg;
        return t.rc;
    }
};

struct Case {
    std::string name;
    std::function<int(Env &)> run;
    int code;
    std::vector<std::string> words; // the message contains each
};

// gtest prints a failing row by its name, not as bytes.
void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

std::string str(size_t v) { return std::to_string(v); }

std::vector<Case> table() {
    const std::string opts_size = str(sizeof(knit_pool_options));
    std::vector<Case> t;

    // ---- knit_pool_create: pointers and the size field ----
    t.push_back({"create_null_out",
                 [](Env &) {
                     knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
                     return knit_pool_create(&o, nullptr);
                 },
                 KNIT_EINVAL, {"out is NULL"}});
    t.push_back({"create_null_options",
                 [](Env &) {
                     knit_pool *p = kSentinelPool;
                     int rc = knit_pool_create(nullptr, &p);
                     EXPECT_EQ(nullptr, p);
                     return rc;
                 },
                 KNIT_EINVAL, {"options is NULL"}});
    t.push_back({"create_size_zero",
                 [](Env &) { return create_with([](knit_pool_options &o) { o.size = 0; }); },
                 KNIT_EINVAL, {"options.size=0", "expected " + opts_size, "KNIT_POOL_OPTIONS_INIT"}});
    t.push_back({"create_size_too_small",
                 [](Env &) {
                     return create_with([](knit_pool_options &o) { o.size = sizeof o - 8; });
                 },
                 KNIT_EINVAL,
                 {"options.size=" + str(sizeof(knit_pool_options) - 8), "expected " + opts_size}});
    t.push_back({"create_size_too_big",
                 [](Env &) {
                     return create_with([](knit_pool_options &o) { o.size = sizeof o + 8; });
                 },
                 KNIT_EINVAL,
                 {"options.size=" + str(sizeof(knit_pool_options) + 8), "expected " + opts_size}});

    // ---- threads ----
    t.push_back({"create_threads_over_max",
                 [](Env &) {
                     return create_with(
                         [](knit_pool_options &o) { o.threads = KNIT_MAX_THREADS + 1; });
                 },
                 KNIT_EINVAL, {"threads=" + str(KNIT_MAX_THREADS + 1), str(KNIT_MAX_THREADS)}});
    t.push_back({"create_threads_uint_max",
                 [](Env &) {
                     return create_with([](knit_pool_options &o) { o.threads = UINT32_MAX; });
                 },
                 KNIT_EINVAL, {"threads=4294967295", str(KNIT_MAX_THREADS)}});
    // KNIT_MAX_THREADS is what a carpet serves (64 consumers): one more
    // is refused before any thread starts.
    t.push_back({"create_threads_over_consumers",
                 [](Env &) {
                     return create_with([](knit_pool_options &o) {
                         o.threads = KNIT_SCHED_MAX_CONSUMERS + 1;
                     });
                 },
                 KNIT_EINVAL,
                 {"threads=" + str(KNIT_SCHED_MAX_CONSUMERS + 1), str(KNIT_SCHED_MAX_CONSUMERS)}});

    // ---- backpressure, max_pending ----
    t.push_back({"create_backpressure_unknown",
                 [](Env &) {
                     return create_with([](knit_pool_options &o) { o.backpressure = 3; });
                 },
                 KNIT_EINVAL, {"backpressure=3", "KNIT_BLOCK", "KNIT_FAIL", "KNIT_CALLER_RUNS"}});
    t.push_back({"create_backpressure_negative",
                 [](Env &) {
                     return create_with([](knit_pool_options &o) { o.backpressure = -1; });
                 },
                 KNIT_EINVAL, {"backpressure=-1"}});
    t.push_back({"create_max_pending_over_limit",
                 [](Env &) {
                     return create_with(
                         [](knit_pool_options &o) { o.max_pending = (size_t{1} << 20) + 1; });
                 },
                 KNIT_EINVAL, {"max_pending=1048577", "1048576"}});

    // ---- region_lanes ----
    t.push_back({"create_region_lanes_not_pow2",
                 [](Env &) {
                     return create_with([](knit_pool_options &o) { o.region_lanes = 3; });
                 },
                 KNIT_EINVAL, {"region_lanes=3", "power of two", "32"}});
    t.push_back({"create_region_lanes_too_large",
                 [](Env &) {
                     return create_with([](knit_pool_options &o) { o.region_lanes = 64; });
                 },
                 KNIT_EINVAL, {"region_lanes=64", "power of two", "32"}});
    t.push_back({"create_region_lanes_huge",
                 [](Env &) {
                     return create_with(
                         [](knit_pool_options &o) { o.region_lanes = 1u << 31; });
                 },
                 KNIT_EINVAL, {"region_lanes=2147483648"}});
    t.push_back({"create_dekker_fewer_regions_than_consumers",
                 [](Env &) {
                     return create_with([](knit_pool_options &o) {
                         o.sched = "dekker";
                         o.threads = 2;
                         o.region_lanes = 32;
                     });
                 },
                 KNIT_EINVAL, {"dekker", "region_lanes=32", "1 regions", "2 consumers"}});
    t.push_back({"create_dekker_too_many_threads",
                 [](Env &) {
                     return create_with([](knit_pool_options &o) {
                         o.sched = "dekker";
                         o.threads = 40;
                     });
                 },
                 KNIT_EINVAL, {"dekker", "32 regions", "40 consumers"}});
    t.push_back({"create_single_with_two_threads",
                 [](Env &) {
                     return create_with([](knit_pool_options &o) {
                         o.sched = "single";
                         o.threads = 2;
                     });
                 },
                 KNIT_EINVAL, {"single", "1 consumer", "not 2"}});

    // ---- discipline names: the option ----
    t.push_back({"create_sched_unknown",
                 [](Env &) {
                     return create_with([](knit_pool_options &o) { o.sched = "fifo"; });
                 },
                 KNIT_EINVAL, {"sched must be one of", "ticket", "dekker", "single", "\"fifo\""}});
    t.push_back({"create_sched_misspelled",
                 [](Env &) {
                     return create_with([](knit_pool_options &o) { o.sched = "tickt"; });
                 },
                 KNIT_EINVAL, {"sched must be one of", "ticket", "\"tickt\""}});
    t.push_back({"create_sched_removed",
                 [](Env &) {
                     return create_with([](knit_pool_options &o) { o.sched = "cas-mask"; });
                 },
                 KNIT_EINVAL, {"\"cas-mask\"", "cas-mask was removed; use ticket"}});
    t.push_back({"create_sched_wrong_case",
                 [](Env &) {
                     return create_with([](knit_pool_options &o) { o.sched = "Ticket"; });
                 },
                 KNIT_EINVAL, {"sched must be one of", "\"Ticket\""}});
    t.push_back({"create_sched_empty",
                 [](Env &) { return create_with([](knit_pool_options &o) { o.sched = ""; }); },
                 KNIT_EINVAL, {"sched must be one of", "got \"\""}});

    // ---- discipline names: KNIT_SCHED ----
    t.push_back({"env_sched_misspelled", [](Env &) { return create_with_env("tickt"); },
                 KNIT_EINVAL, {"KNIT_SCHED must be one of", "ticket", "\"tickt\""}});
    t.push_back({"env_sched_removed", [](Env &) { return create_with_env("cas-mask"); },
                 KNIT_EINVAL, {"KNIT_SCHED", "\"cas-mask\"", "use ticket"}});
    t.push_back({"env_sched_unknown", [](Env &) { return create_with_env("work-first"); },
                 KNIT_EINVAL, {"KNIT_SCHED", "\"work-first\"", "dekker"}});
    t.push_back({"env_sched_empty", [](Env &) { return create_with_env(""); }, KNIT_EINVAL,
                 {"KNIT_SCHED must be one of", "got \"\""}});

    // ---- arena and payload limits ----
    t.push_back({"create_arena_below_min",
                 [](Env &) {
                     return create_with([](knit_pool_options &o) { o.arena_bytes = 1 << 20; });
                 },
                 KNIT_EINVAL, {"arena_bytes=1048576", "4194304"}});
    t.push_back({"create_arena_above_max",
                 [](Env &) {
                     return create_with(
                         [](knit_pool_options &o) { o.arena_bytes = size_t{128} << 30; });
                 },
                 KNIT_EINVAL, {"arena_bytes=137438953472", "68719476736"}});
    t.push_back({"create_max_payload_over_arena",
                 [](Env &) {
                     return create_with([](knit_pool_options &o) {
                         o.arena_bytes = 4 << 20;
                         o.max_payload = 8 << 20;
                     });
                 },
                 KNIT_EINVAL, {"max_payload=8388608", "arena_bytes=4194304"}});

    // ---- knit_pool_destroy ----
    t.push_back({"destroy_null", [](Env &) { return knit_pool_destroy(nullptr, KNIT_DRAIN); },
                 KNIT_EINVAL, {"pool is NULL"}});
    t.push_back({"destroy_bad_how",
                 [](Env &e) { return e.call([&] { return knit_pool_destroy(e.shared, 7); }); },
                 KNIT_EINVAL, {"how=7", "KNIT_DRAIN", "KNIT_CANCEL"}});
    t.push_back({"destroy_twice",
                 [](Env &) { return knit_pool_destroy(dead_pool(), KNIT_DRAIN); },
                 KNIT_ESHUTDOWN, {"already destroyed"}});
    t.push_back({"destroy_inside_own_task",
                 [](Env &e) {
                     InTask r;
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(
                                      e.shared,
                                      [](knit_task *task, void *arg) -> void * {
                                          static_cast<InTask *>(arg)->record(knit_pool_destroy(
                                              knit_task_pool(task), KNIT_CANCEL));
                                          return nullptr;
                                      },
                                      &r, &f));
                     EXPECT_EQ(0, knit_await(f, -1, nullptr)) << knit_last_error();
                     EXPECT_EQ(0, knit_future_release(f));
                     return e.from_task(r);
                 },
                 KNIT_EBUSY, {"knit_pool_destroy", "own task"}});

    // ---- knit_submit ----
    t.push_back({"submit_null_pool",
                 [](Env &) {
                     knit_future *f = kSentinelFuture;
                     int rc = knit_submit(nullptr, add_one, nullptr, &f);
                     EXPECT_EQ(nullptr, f);
                     return rc;
                 },
                 KNIT_EINVAL, {"pool is NULL"}});
    t.push_back({"submit_null_fn",
                 [](Env &e) {
                     knit_future *f = kSentinelFuture;
                     int rc = e.call([&] { return knit_submit(e.shared, nullptr, nullptr, &f); });
                     EXPECT_EQ(nullptr, f) << "a failed submit clears *out";
                     return rc;
                 },
                 KNIT_EINVAL, {"task function is NULL"}});
    t.push_back({"submit_null_fn_detached",
                 [](Env &e) {
                     return e.call([&] { return knit_submit(e.shared, nullptr, nullptr, nullptr); });
                 },
                 KNIT_EINVAL, {"task function is NULL"}});
    t.push_back({"submit_after_destroy",
                 [](Env &) {
                     knit_pool *dead = dead_pool();
                     knit_future *f = kSentinelFuture;
                     int rc = knit_submit(dead, add_one, nullptr, &f);
                     EXPECT_EQ(nullptr, f);
                     return rc;
                 },
                 KNIT_ESHUTDOWN, {"destroyed"}});
    t.push_back({"submit_copy_after_destroy",
                 [](Env &) {
                     char bytes[200] = {1};
                     knit_future *f = kSentinelFuture;
                     int rc = knit_submit_copy(dead_pool(), add_one, bytes, sizeof bytes, &f);
                     EXPECT_EQ(nullptr, f);
                     return rc;
                 },
                 KNIT_ESHUTDOWN, {"destroyed"}});
    t.push_back({"submit_max_pending_fail",
                 [](Env &) {
                     knit_pool *p = make_pool([](knit_pool_options &o) {
                         o.max_pending = 1;
                         o.backpressure = KNIT_FAIL;
                     });
                     Gate g;
                     knit_future *held = nullptr, *queued = nullptr;
                     EXPECT_EQ(0, knit_submit(p, gated, &g, &held));
                     g.wait_started(); // claimed: no longer pending
                     EXPECT_EQ(0, knit_submit(p, add_one, nullptr, &queued));
                     knit_future *f = kSentinelFuture;
                     int rc = knit_submit(p, add_one, nullptr, &f);
                     std::string msg = knit_last_error();
                     EXPECT_EQ(nullptr, f);
                     knit_pool_stats_t s{};
                     s.size = sizeof s;
                     EXPECT_EQ(0, knit_pool_stats(p, &s));
                     EXPECT_EQ(2u, s.submitted) << "the refused task is not counted";
                     EXPECT_EQ(1u, s.pending);
                     g.open = true;
                     EXPECT_EQ(0, knit_await(held, -1, nullptr));
                     EXPECT_EQ(0, knit_await(queued, -1, nullptr));
                     knit_future_release(held);
                     knit_future_release(queued);
                     expect_pool_works(p);
                     EXPECT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
                     return knit_error(rc, "%s", msg.c_str());
                 },
                 KNIT_EAGAIN, {"max_pending=1", "KNIT_FAIL"}});

    // ---- payloads ----
    t.push_back({"submit_copy_null_bytes",
                 [](Env &e) {
                     knit_future *f = kSentinelFuture;
                     int rc =
                         e.call([&] { return knit_submit_copy(e.shared, add_one, nullptr, 10, &f); });
                     EXPECT_EQ(nullptr, f);
                     return rc;
                 },
                 KNIT_EINVAL, {"bytes is NULL"}});
    t.push_back({"submit_copy_null_fn_arena_size",
                 [](Env &e) {
                     std::vector<char> v(1000, 'x');
                     knit_future *f = kSentinelFuture;
                     int rc = e.call(
                         [&] { return knit_submit_copy(e.shared, nullptr, v.data(), v.size(), &f); });
                     EXPECT_EQ(nullptr, f);
                     return rc;
                 },
                 KNIT_EINVAL, {"task function is NULL"}});
    t.push_back({"submit_copy_over_max_payload",
                 [](Env &e) {
                     std::vector<char> v((1 << 20) + 1, 'x');
                     knit_future *f = kSentinelFuture;
                     int rc = e.call(
                         [&] { return knit_submit_copy(e.shared, add_one, v.data(), v.size(), &f); });
                     EXPECT_EQ(nullptr, f);
                     return rc;
                 },
                 KNIT_E2BIG, {"1048577", "max_payload=1048576"}});
    t.push_back({"submit_buf_over_max_payload",
                 [](Env &e) {
                     const size_t n = (1 << 20) + 1;
                     void *mem = std::malloc(n);
                     knit_buf b = knit_buf_malloced(mem, n);
                     knit_future *f = kSentinelFuture;
                     int rc = e.call([&] { return knit_submit_buf(e.shared, add_one, &b, &f); });
                     EXPECT_EQ(nullptr, f);
                     EXPECT_EQ(mem, b.data) << "a failed move leaves the buffer with the caller";
                     EXPECT_EQ(n, b.len);
                     knit_buf_free(&b);
                     return rc;
                 },
                 KNIT_E2BIG, {"1048577", "max_payload=1048576"}});
    t.push_back({"submit_buf_null",
                 [](Env &e) {
                     knit_future *f = kSentinelFuture;
                     int rc = e.call([&] { return knit_submit_buf(e.shared, add_one, nullptr, &f); });
                     EXPECT_EQ(nullptr, f);
                     return rc;
                 },
                 KNIT_EINVAL, {"buf is NULL"}});
    t.push_back({"submit_buf_null_data_with_len",
                 [](Env &e) {
                     knit_buf b = {nullptr, 5, nullptr, nullptr};
                     int rc = e.call([&] { return knit_submit_buf(e.shared, add_one, &b, nullptr); });
                     EXPECT_EQ(5u, b.len) << "untouched";
                     return rc;
                 },
                 KNIT_EINVAL, {"data is NULL", "len=5"}});
    t.push_back({"submit_buf_null_fn",
                 [](Env &e) {
                     void *mem = std::malloc(32);
                     knit_buf b = knit_buf_malloced(mem, 32);
                     int rc = e.call([&] { return knit_submit_buf(e.shared, nullptr, &b, nullptr); });
                     EXPECT_EQ(mem, b.data) << "a failed move leaves the buffer with the caller";
                     knit_buf_free(&b);
                     return rc;
                 },
                 KNIT_EINVAL, {"task function is NULL"}});
    t.push_back({"submit_buf_arena_of_another_pool",
                 [](Env &e) {
                     knit_pool *other = make_pool();
                     void *mem = knit_payload_alloc(other, 1000);
                     EXPECT_NE(nullptr, mem) << knit_last_error();
                     knit_buf b = knit_payload_buf(other, mem, 1000);
                     EXPECT_EQ(mem, b.data);
                     int rc = e.call([&] { return knit_submit_buf(e.shared, add_one, &b, nullptr); });
                     EXPECT_EQ(mem, b.data) << "untouched";
                     knit_buf_free(&b); // back into the other pool's arena
                     expect_pool_works(other);
                     EXPECT_EQ(0, knit_pool_destroy(other, KNIT_DRAIN));
                     return rc;
                 },
                 KNIT_EINVAL, {"arena buffer of another pool"}});
    // knit_payload_alloc and knit_payload_buf report failure by NULL / an
    // empty buffer and a message: the row's code is the one the message
    // stands for.
    t.push_back({"payload_alloc_over_max_payload",
                 [](Env &e) {
                     void *mem = nullptr;
                     e.call([&] {
                         mem = knit_payload_alloc(e.shared, (1 << 20) + 1);
                         return 0;
                     });
                     return mem == nullptr ? KNIT_E2BIG : 0;
                 },
                 KNIT_E2BIG, {"1048577", "max_payload=1048576"}});
    t.push_back({"payload_buf_not_arena_memory",
                 [](Env &e) {
                     char local[64];
                     knit_buf b{};
                     e.call([&] {
                         b = knit_payload_buf(e.shared, local, sizeof local);
                         return 0;
                     });
                     return b.data == nullptr && b.free_fn == nullptr ? KNIT_EINVAL : 0;
                 },
                 KNIT_EINVAL, {"knit_payload_buf", "not memory from this pool's arena"}});
    t.push_back({"arena_exhausted_backpressure_fail",
                 [](Env &) {
                     knit_pool *p = make_pool([](knit_pool_options &o) {
                         o.arena_bytes = 4 << 20;
                         o.backpressure = KNIT_FAIL;
                     });
                     std::vector<void *> held;
                     void *m;
                     while ((m = knit_payload_alloc(p, 256 << 10)) != nullptr) held.push_back(m);
                     EXPECT_GE(held.size(), 4u);
                     std::vector<char> v(256 << 10, 'x');
                     knit_pool_stats_t before{};
                     before.size = sizeof before;
                     EXPECT_EQ(0, knit_pool_stats(p, &before));
                     knit_future *f = kSentinelFuture;
                     int rc = knit_submit_copy(p, add_one, v.data(), v.size(), &f);
                     std::string msg = knit_last_error();
                     EXPECT_EQ(nullptr, f);
                     knit_pool_stats_t after{};
                     after.size = sizeof after;
                     EXPECT_EQ(0, knit_pool_stats(p, &after));
                     EXPECT_EQ(before.submitted, after.submitted);
                     EXPECT_EQ(before.arena_bytes, after.arena_bytes);
                     EXPECT_EQ(before.arena_allocs, after.arena_allocs);
                     for (void *h : held) knit_payload_free(p, h);
                     EXPECT_EQ(0, knit_submit_copy(p, add_one, v.data(), v.size(), &f))
                         << knit_last_error();
                     EXPECT_EQ(0, knit_await(f, -1, nullptr));
                     knit_future_release(f);
                     expect_pool_works(p);
                     EXPECT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
                     return knit_error(rc, "%s", msg.c_str());
                 },
                 KNIT_ENOMEM, {"cap 4194304", "asked 262144", "KNIT_FAIL"}});

    // ---- futures ----
    t.push_back({"await_null", [](Env &) { return knit_await(nullptr, -1, nullptr); },
                 KNIT_EINVAL, {"knit_await", "future is NULL"}});
    t.push_back({"await_timeout_zero_unsettled",
                 [](Env &e) {
                     Gate g;
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(e.shared, gated, &g, &f));
                     g.wait_started();
                     void *r = kSentinelFuture;
                     int rc = e.call([&] { return knit_await(f, 0, &r); });
                     EXPECT_EQ(kSentinelFuture, r) << "*result untouched";
                     EXPECT_FALSE(knit_future_done(f));
                     g.open = true;
                     EXPECT_EQ(0, knit_await(f, -1, &r)) << "awaitable again";
                     EXPECT_EQ(&g, r);
                     EXPECT_EQ(0, knit_future_release(f));
                     return rc;
                 },
                 KNIT_ETIMEDOUT, {"knit_await", "not done after 0 ns"}});
    t.push_back({"await_released",
                 [](Env &e) {
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(e.shared, add_one, nullptr, &f));
                     EXPECT_EQ(0, knit_await(f, -1, nullptr));
                     EXPECT_EQ(0, knit_future_release(f));
                     void *r = kSentinelFuture;
                     int rc = e.call([&] { return knit_await(f, -1, &r); });
                     EXPECT_EQ(kSentinelFuture, r);
                     return rc;
                 },
                 KNIT_EALREADY, {"knit_await", "released"}});
    t.push_back({"await_released_unsettled",
                 [](Env &e) {
                     // Released while running: the runtime still holds it.
                     // The gate outlives the detached task (static), and the
                     // row waits for the task to settle before it returns.
                     static Gate g;
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(e.shared, gated, &g, &f));
                     g.wait_started();
                     EXPECT_EQ(0, knit_future_release(f));
                     const uint64_t done = counters(e.shared).completed;
                     int rc = e.call([&] { return knit_await(f, -1, nullptr); });
                     g.open = true;
                     for (int i = 0; i < 5000 && counters(e.shared).completed == done; i++)
                         std::this_thread::sleep_for(1ms);
                     EXPECT_LT(done, counters(e.shared).completed) << "the detached task ran";
                     return rc;
                 },
                 KNIT_EALREADY, {"knit_await", "released"}});
    t.push_back({"release_twice",
                 [](Env &e) {
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(e.shared, add_one, nullptr, &f));
                     EXPECT_EQ(0, knit_await(f, -1, nullptr));
                     EXPECT_EQ(0, knit_future_release(f));
                     return e.call([&] { return knit_future_release(f); });
                 },
                 KNIT_EALREADY, {"already released"}});
    t.push_back({"release_null", [](Env &) { return knit_future_release(nullptr); },
                 KNIT_EINVAL, {"knit_future_release", "NULL"}});
    t.push_back({"cancel_released",
                 [](Env &e) {
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(e.shared, add_one, nullptr, &f));
                     EXPECT_EQ(0, knit_await(f, -1, nullptr));
                     EXPECT_EQ(0, knit_future_release(f));
                     return e.call([&] { return knit_future_cancel(f); });
                 },
                 KNIT_EALREADY, {"knit_future_cancel", "released"}});
    t.push_back({"cancel_settled",
                 [](Env &e) {
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(e.shared, add_one, nullptr, &f));
                     EXPECT_EQ(0, knit_await(f, -1, nullptr));
                     int rc = e.call([&] { return knit_future_cancel(f); });
                     void *r = nullptr;
                     EXPECT_EQ(0, knit_await(f, 0, &r)) << "still succeeded";
                     EXPECT_EQ(1u, reinterpret_cast<uintptr_t>(r));
                     EXPECT_EQ(0, knit_future_release(f));
                     return rc;
                 },
                 KNIT_EALREADY, {"already settled"}});
    t.push_back({"then_on_released",
                 [](Env &e) {
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(e.shared, add_one, nullptr, &f));
                     EXPECT_EQ(0, knit_await(f, -1, nullptr));
                     EXPECT_EQ(0, knit_future_release(f));
                     knit_future *g = kSentinelFuture;
                     int rc = e.call([&] { return knit_future_then(f, add_one, nullptr, &g); });
                     EXPECT_EQ(nullptr, g);
                     return rc;
                 },
                 KNIT_EALREADY, {"knit_future_then", "released"}});
    t.push_back({"then_null_fn",
                 [](Env &e) {
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(e.shared, add_one, nullptr, &f));
                     EXPECT_EQ(0, knit_await(f, -1, nullptr));
                     knit_future *g = kSentinelFuture;
                     int rc = e.call([&] { return knit_future_then(f, nullptr, nullptr, &g); });
                     EXPECT_EQ(nullptr, g);
                     EXPECT_EQ(0, knit_future_release(f)) << "the antecedent is still ours";
                     return rc;
                 },
                 KNIT_EINVAL, {"knit_future_then", "fn is NULL"}});
    t.push_back({"then_null_future",
                 [](Env &) {
                     knit_future *g = kSentinelFuture;
                     int rc = knit_future_then(nullptr, add_one, nullptr, &g);
                     EXPECT_EQ(nullptr, g);
                     return rc;
                 },
                 KNIT_EINVAL, {"knit_future_then", "future is NULL"}});
    t.push_back({"await_all_null_array",
                 [](Env &) { return knit_await_all(nullptr, 2, -1); }, KNIT_EINVAL,
                 {"fs is NULL"}});
    t.push_back({"await_all_with_released",
                 [](Env &e) {
                     knit_future *fs[2] = {};
                     EXPECT_EQ(0, knit_submit(e.shared, add_one, nullptr, &fs[0]));
                     EXPECT_EQ(0, knit_submit(e.shared, add_one, nullptr, &fs[1]));
                     EXPECT_EQ(0, knit_await_all(fs, 2, -1));
                     EXPECT_EQ(0, knit_future_release(fs[1]));
                     int rc = e.call([&] { return knit_await_all(fs, 2, -1); });
                     EXPECT_EQ(0, knit_future_release(fs[0]));
                     return rc;
                 },
                 KNIT_EALREADY, {"knit_await_all", "released"}});
    t.push_back({"await_any_none",
                 [](Env &) {
                     size_t which = 77;
                     int rc = knit_await_any(nullptr, 0, -1, &which);
                     EXPECT_EQ(77u, which);
                     return rc;
                 },
                 KNIT_EINVAL, {"knit_await_any", "no futures"}});
    t.push_back({"await_any_two_pools",
                 [](Env &e) {
                     knit_pool *other = make_pool();
                     knit_future *fs[2] = {};
                     EXPECT_EQ(0, knit_submit(e.shared, add_one, nullptr, &fs[0]));
                     EXPECT_EQ(0, knit_submit(other, add_one, nullptr, &fs[1]));
                     EXPECT_EQ(0, knit_await(fs[0], -1, nullptr));
                     size_t which = 77;
                     int rc = e.call([&] { return knit_await_any(fs, 2, -1, &which); });
                     EXPECT_EQ(77u, which);
                     EXPECT_EQ(0, knit_await(fs[1], -1, nullptr));
                     EXPECT_EQ(0, knit_future_release(fs[0]));
                     EXPECT_EQ(0, knit_future_release(fs[1]));
                     EXPECT_EQ(0, knit_pool_destroy(other, KNIT_DRAIN));
                     return rc;
                 },
                 KNIT_EINVAL, {"knit_await_any", "different pools"}});

    // ---- returned buffers ----
    t.push_back({"take_buf_twice",
                 [](Env &e) {
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(e.shared, returns_buf, nullptr, &f));
                     EXPECT_EQ(0, knit_await(f, -1, nullptr));
                     knit_buf b{};
                     EXPECT_EQ(0, knit_future_take_buf(f, &b));
                     EXPECT_EQ(16u, b.len);
                     knit_buf again = {kSentinelFuture, 3, nullptr, nullptr};
                     int rc = e.call([&] { return knit_future_take_buf(f, &again); });
                     EXPECT_EQ(kSentinelFuture, again.data) << "*out untouched";
                     knit_buf_free(&b);
                     EXPECT_EQ(0, knit_future_release(f));
                     return rc;
                 },
                 KNIT_EALREADY, {"already taken"}});
    t.push_back({"take_buf_none_returned",
                 [](Env &e) {
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(e.shared, add_one, nullptr, &f));
                     EXPECT_EQ(0, knit_await(f, -1, nullptr));
                     knit_buf b{};
                     int rc = e.call([&] { return knit_future_take_buf(f, &b); });
                     EXPECT_EQ(nullptr, b.data);
                     EXPECT_EQ(0, knit_future_release(f));
                     return rc;
                 },
                 KNIT_ENOENT, {"returned no buffer"}});
    t.push_back({"take_buf_unsettled",
                 [](Env &e) {
                     Gate g;
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(e.shared, gated, &g, &f));
                     g.wait_started();
                     knit_buf b{};
                     int rc = e.call([&] { return knit_future_take_buf(f, &b); });
                     g.open = true;
                     EXPECT_EQ(0, knit_await(f, -1, nullptr));
                     EXPECT_EQ(0, knit_future_release(f));
                     return rc;
                 },
                 KNIT_EBUSY, {"not settled"}});
    t.push_back({"take_buf_null_out",
                 [](Env &e) {
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(e.shared, returns_buf, nullptr, &f));
                     EXPECT_EQ(0, knit_await(f, -1, nullptr));
                     int rc = e.call([&] { return knit_future_take_buf(f, nullptr); });
                     knit_buf b{};
                     EXPECT_EQ(0, knit_future_take_buf(f, &b)) << "still there to take";
                     knit_buf_free(&b);
                     EXPECT_EQ(0, knit_future_release(f));
                     return rc;
                 },
                 KNIT_EINVAL, {"knit_future_take_buf", "NULL"}});
    t.push_back({"task_return_buf_twice",
                 [](Env &e) {
                     InTask r;
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(
                                      e.shared,
                                      [](knit_task *task, void *arg) -> void * {
                                          auto *r = static_cast<InTask *>(arg);
                                          void *m1 = std::malloc(4), *m2 = std::malloc(4);
                                          knit_buf b1 = knit_buf_malloced(m1, 4);
                                          knit_buf b2 = knit_buf_malloced(m2, 4);
                                          EXPECT_EQ(0, knit_task_return_buf(task, &b1));
                                          r->record(knit_task_return_buf(task, &b2));
                                          r->untouched = b2.data == m2 && b2.len == 4;
                                          knit_buf_free(&b2);
                                          return nullptr;
                                      },
                                      &r, &f));
                     EXPECT_EQ(0, knit_await(f, -1, nullptr));
                     EXPECT_TRUE(r.untouched) << "the refused buffer stays with the task";
                     knit_buf b{};
                     EXPECT_EQ(0, knit_future_take_buf(f, &b)) << "the first one is there";
                     EXPECT_EQ(4u, b.len);
                     knit_buf_free(&b);
                     EXPECT_EQ(0, knit_future_release(f));
                     return e.from_task(r);
                 },
                 KNIT_EALREADY, {"knit_task_return_buf", "already returned"}});
    t.push_back({"antecedent_buf_taken_twice",
                 [](Env &e) {
                     InTask r;
                     knit_future *f = nullptr, *g = nullptr;
                     EXPECT_EQ(0, knit_submit(e.shared, returns_buf, nullptr, &f));
                     EXPECT_EQ(0, knit_future_then(
                                      f,
                                      [](knit_task *task, void *arg) -> void * {
                                          auto *r = static_cast<InTask *>(arg);
                                          knit_buf b{};
                                          EXPECT_EQ(0, knit_task_antecedent_buf(task, &b));
                                          knit_buf again{};
                                          r->record(knit_task_antecedent_buf(task, &again));
                                          r->untouched = again.data == nullptr;
                                          knit_buf_free(&b);
                                          return nullptr;
                                      },
                                      &r, &g))
                         << knit_last_error();
                     EXPECT_EQ(0, knit_await(g, -1, nullptr));
                     EXPECT_TRUE(r.untouched);
                     knit_buf b{};
                     EXPECT_EQ(KNIT_EALREADY, knit_future_take_buf(f, &b)) << "never twice";
                     EXPECT_EQ(0, knit_future_release(g));
                     EXPECT_EQ(0, knit_future_release(f));
                     return e.from_task(r);
                 },
                 KNIT_EALREADY, {"already taken"}});
    t.push_back({"antecedent_in_plain_task",
                 [](Env &e) {
                     InTask r;
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(
                                      e.shared,
                                      [](knit_task *task, void *arg) -> void * {
                                          void *res = kSentinelFuture;
                                          static_cast<InTask *>(arg)->record(
                                              knit_task_antecedent(task, &res));
                                          static_cast<InTask *>(arg)->untouched =
                                              res == kSentinelFuture;
                                          return nullptr;
                                      },
                                      &r, &f));
                     EXPECT_EQ(0, knit_await(f, -1, nullptr));
                     EXPECT_EQ(0, knit_future_release(f));
                     EXPECT_TRUE(r.untouched);
                     return e.from_task(r);
                 },
                 KNIT_EINVAL, {"knit_task_antecedent", "not in a continuation"}});
    t.push_back({"task_fail_null_task",
                 [](Env &) { return knit_task_fail(nullptr, 3, "x"); }, KNIT_EINVAL,
                 {"knit_task_fail", "task is NULL"}});

    // ---- stats ----
    t.push_back({"stats_null_out",
                 [](Env &e) { return e.call([&] { return knit_pool_stats(e.shared, nullptr); }); },
                 KNIT_EINVAL, {"stats out is NULL"}});
    t.push_back({"stats_size_wrong",
                 [](Env &e) {
                     knit_pool_stats_t s{};
                     s.size = 8;
                     s.submitted = 12345;
                     int rc = e.call([&] { return knit_pool_stats(e.shared, &s); });
                     EXPECT_EQ(12345u, s.submitted) << "*out untouched";
                     return rc;
                 },
                 KNIT_EINVAL, {"stats.size=8", "expected " + str(sizeof(knit_pool_stats_t))}});
    t.push_back({"stats_after_destroy",
                 [](Env &) {
                     knit_pool_stats_t s{};
                     s.size = sizeof s;
                     return knit_pool_stats(dead_pool(), &s);
                 },
                 KNIT_ESHUTDOWN, {"destroyed"}});

    // ---- parallel_for ----
    t.push_back({"parallel_for_null_body",
                 [](Env &e) {
                     return e.call(
                         [&] { return knit_parallel_for(e.shared, 0, 100, 10, nullptr, nullptr); });
                 },
                 KNIT_EINVAL, {"knit_parallel_for", "NULL fn"}});
    t.push_back({"parallel_for_null_pool",
                 [](Env &) { return knit_parallel_for(nullptr, 0, 100, 10, range_ok, nullptr); },
                 KNIT_EINVAL, {"knit_parallel_for", "NULL pool"}});
    t.push_back({"parallel_for_begin_after_end",
                 [](Env &e) {
                     return e.call(
                         [&] { return knit_parallel_for(e.shared, 10, 5, 1, range_ok, nullptr); });
                 },
                 KNIT_EINVAL, {"begin=10", "end=5"}});
    t.push_back({"parallel_for_after_destroy",
                 [](Env &) { return knit_parallel_for(dead_pool(), 0, 100, 10, range_ok, nullptr); },
                 KNIT_ESHUTDOWN, {"destroyed"}});

    // ---- fork-join frames ----
    t.push_back({"fork_null_frame",
                 [](Env &e) { return e.call([] { return knit_fork(nullptr, nullptr, add_one, nullptr); }); },
                 KNIT_EINVAL, {"knit_fork", "frame is NULL"}});
    t.push_back({"fork_null_fn",
                 [](Env &e) {
                     knit_frame fr;
                     return e.call([&] { return knit_fork(nullptr, &fr, nullptr, nullptr); });
                 },
                 KNIT_EINVAL, {"knit_fork", "function is NULL"}});
    t.push_back({"join_null_frame",
                 [](Env &e) { return e.call([] { return knit_join(nullptr, nullptr, nullptr); }); },
                 KNIT_EINVAL, {"knit_join", "frame is NULL"}});
    t.push_back({"join_never_forked",
                 [](Env &e) {
                     knit_frame fr;
                     std::memset(&fr, 0, sizeof fr);
                     void *res = kSentinelFuture;
                     int rc = e.call([&] { return knit_join(nullptr, &fr, &res); });
                     EXPECT_EQ(kSentinelFuture, res) << "*result untouched";
                     return rc;
                 },
                 KNIT_EINVAL, {"knit_join", "not forked"}});
    t.push_back({"join_twice",
                 [](Env &e) {
                     knit_frame fr;
                     EXPECT_EQ(0, knit_fork(nullptr, &fr, add_one, nullptr));
                     EXPECT_EQ(0, knit_join(nullptr, &fr, nullptr));
                     return e.call([&] { return knit_join(nullptr, &fr, nullptr); });
                 },
                 KNIT_EINVAL, {"knit_join", "joined already"}});
    t.push_back({"join_not_lifo",
                 [](Env &e) {
                     InTask r;
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(
                                      e.shared,
                                      [](knit_task *task, void *arg) -> void * {
                                          knit_frame a, b;
                                          knit_fork(task, &a, add_one, nullptr);
                                          knit_fork(task, &b, add_one, nullptr);
                                          void *res = kSentinelFuture;
                                          auto *in = static_cast<InTask *>(arg);
                                          in->record(knit_join(task, &a, &res));
                                          in->untouched = res == kSentinelFuture;
                                          // Nothing was popped: the right order works.
                                          EXPECT_EQ(0, knit_join(task, &b, nullptr));
                                          EXPECT_EQ(0, knit_join(task, &a, nullptr));
                                          return nullptr;
                                      },
                                      &r, &f));
                     EXPECT_EQ(0, knit_await(f, -1, nullptr));
                     EXPECT_EQ(0, knit_future_release(f));
                     EXPECT_TRUE(r.untouched);
                     return e.from_task(r);
                 },
                 KNIT_EINVAL, {"knit_join", "LIFO", "newest first"}});
    t.push_back({"join_by_another_task",
                 [](Env &e) {
                     InTask r;
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(
                                      e.shared,
                                      [](knit_task *task, void *arg) -> void * {
                                          knit_frame a;
                                          knit_fork(task, &a, add_one, nullptr);
                                          static_cast<InTask *>(arg)->record(
                                              knit_join(nullptr, &a, nullptr));
                                          EXPECT_EQ(0, knit_join(task, &a, nullptr));
                                          return nullptr;
                                      },
                                      &r, &f));
                     EXPECT_EQ(0, knit_await(f, -1, nullptr));
                     EXPECT_EQ(0, knit_future_release(f));
                     return e.from_task(r);
                 },
                 KNIT_EINVAL, {"knit_join", "another task"}});
    t.push_back({"take_buf_in_frame_child",
                 [](Env &e) {
                     InTask r;
                     knit_frame fr;
                     // Outside a task the child runs at the fork, on this thread.
                     EXPECT_EQ(0, knit_fork(nullptr, &fr,
                                            [](knit_task *task, void *arg) -> void * {
                                                knit_buf mine = knit_buf_malloced(std::malloc(4), 4);
                                                static_cast<InTask *>(arg)->record(
                                                    knit_task_return_buf(task, &mine));
                                                static_cast<InTask *>(arg)->untouched =
                                                    mine.data != nullptr;
                                                knit_buf_free(&mine);
                                                return nullptr;
                                            },
                                            &r));
                     EXPECT_EQ(0, knit_join(nullptr, &fr, nullptr));
                     EXPECT_TRUE(r.untouched) << "the caller keeps its buffer";
                     return e.from_task(r);
                 },
                 KNIT_EINVAL, {"knit_task_return_buf", "knit_fork"}});

    // ---- parallel_reduce ----
    t.push_back({"parallel_reduce_null_body",
                 [](Env &e) {
                     double r = 0;
                     return e.call([&] {
                         return knit_parallel_reduce(e.shared, 0, 10, 1, sizeof r, nullptr,
                                                     reduce_add, nullptr, &r);
                     });
                 },
                 KNIT_EINVAL, {"knit_parallel_reduce", "NULL body"}});
    t.push_back({"parallel_reduce_null_combine",
                 [](Env &e) {
                     double r = 0;
                     return e.call([&] {
                         return knit_parallel_reduce(e.shared, 0, 10, 1, sizeof r, reduce_count,
                                                     nullptr, nullptr, &r);
                     });
                 },
                 KNIT_EINVAL, {"knit_parallel_reduce", "NULL combine"}});
    t.push_back({"parallel_reduce_null_result",
                 [](Env &e) {
                     return e.call([&] {
                         return knit_parallel_reduce(e.shared, 0, 10, 1, 8, reduce_count,
                                                     reduce_add, nullptr, nullptr);
                     });
                 },
                 KNIT_EINVAL, {"knit_parallel_reduce", "NULL result"}});
    t.push_back({"parallel_reduce_value_too_big",
                 [](Env &e) {
                     double r = 7;
                     int rc = e.call([&] {
                         return knit_parallel_reduce(e.shared, 0, 10, 1, KNIT_REDUCE_MAX_VALUE + 1,
                                                     reduce_count, reduce_add, nullptr, &r);
                     });
                     EXPECT_EQ(7, r) << "*result untouched";
                     return rc;
                 },
                 KNIT_EINVAL, {"value_size=" + str(KNIT_REDUCE_MAX_VALUE + 1), str(KNIT_REDUCE_MAX_VALUE)}});
    t.push_back({"parallel_reduce_begin_after_end",
                 [](Env &e) {
                     double r = 0;
                     return e.call([&] {
                         return knit_parallel_reduce(e.shared, 9, 3, 1, sizeof r, reduce_count,
                                                     reduce_add, nullptr, &r);
                     });
                 },
                 KNIT_EINVAL, {"begin=9", "end=3"}});
    t.push_back({"parallel_reduce_after_destroy",
                 [](Env &) {
                     double r = 0;
                     return knit_parallel_reduce(dead_pool(), 0, 10, 1, sizeof r, reduce_count,
                                                 reduce_add, nullptr, &r);
                 },
                 KNIT_ESHUTDOWN, {"destroyed"}});

    // ---- pipelines ----
    t.push_back({"pipeline_null_out",
                 [](Env &e) {
                     knit_pipeline_options o = KNIT_PIPELINE_OPTIONS_INIT;
                     return e.call([&] { return knit_pipeline_create(e.shared, &o, nullptr); });
                 },
                 KNIT_EINVAL, {"pipeline", "out is NULL"}});
    t.push_back({"pipeline_null_options",
                 [](Env &e) {
                     knit_pipeline *pl = kSentinelPipeline;
                     int rc = e.call([&] { return knit_pipeline_create(e.shared, nullptr, &pl); });
                     EXPECT_EQ(nullptr, pl);
                     return rc;
                 },
                 KNIT_EINVAL, {"pipeline", "NULL options"}});
    t.push_back({"pipeline_null_pool",
                 [](Env &) { return pipeline_create_with(nullptr, [](knit_pipeline_options &) {}); },
                 KNIT_EINVAL, {"pipeline", "NULL pool"}});
    t.push_back({"pipeline_size_wrong",
                 [](Env &e) {
                     return e.call([&] {
                         return pipeline_create_with(e.shared,
                                                     [](knit_pipeline_options &o) { o.size = 0; });
                     });
                 },
                 KNIT_EINVAL,
                 {"options.size=0", "expected " + str(sizeof(knit_pipeline_options))}});
    t.push_back({"pipeline_no_input",
                 [](Env &e) {
                     return e.call([&] {
                         return pipeline_create_with(
                             e.shared, [](knit_pipeline_options &o) { o.input = nullptr; });
                     });
                 },
                 KNIT_EINVAL, {"no input function"}});
    t.push_back({"pipeline_no_stages",
                 [](Env &e) {
                     return e.call([&] {
                         return pipeline_create_with(e.shared,
                                                     [](knit_pipeline_options &o) { o.nstages = 0; });
                     });
                 },
                 KNIT_EINVAL, {"nstages=0", "1..64"}});
    t.push_back({"pipeline_stages_null",
                 [](Env &e) {
                     return e.call([&] {
                         return pipeline_create_with(
                             e.shared, [](knit_pipeline_options &o) { o.stages = nullptr; });
                     });
                 },
                 KNIT_EINVAL, {"nstages=1", "stages is NULL"}});
    t.push_back({"pipeline_too_many_stages",
                 [](Env &e) {
                     static knit_stage many[65];
                     for (auto &s : many) s = kOneStage[0];
                     return e.call([&] {
                         return pipeline_create_with(e.shared, [](knit_pipeline_options &o) {
                             o.stages = many;
                             o.nstages = 65;
                         });
                     });
                 },
                 KNIT_EINVAL, {"nstages=65", "1..64"}});
    t.push_back({"pipeline_null_stage_fn",
                 [](Env &e) {
                     static const knit_stage stages[] = {
                         {KNIT_STAGE_SERIAL_IN_ORDER, stage_noop, nullptr},
                         {KNIT_STAGE_PARALLEL, nullptr, nullptr}};
                     return e.call([&] {
                         return pipeline_create_with(e.shared, [](knit_pipeline_options &o) {
                             o.stages = stages;
                             o.nstages = 2;
                         });
                     });
                 },
                 KNIT_EINVAL, {"stage 1 has no function"}});
    t.push_back({"pipeline_bad_stage_mode",
                 [](Env &e) {
                     static const knit_stage stages[] = {
                         {static_cast<knit_stage_mode>(7), stage_noop, nullptr}};
                     return e.call([&] {
                         return pipeline_create_with(e.shared, [](knit_pipeline_options &o) {
                             o.stages = stages;
                         });
                     });
                 },
                 KNIT_EINVAL, {"stage 0 has mode 7"}});
    t.push_back({"pipeline_max_in_flight_over",
                 [](Env &e) {
                     return e.call([&] {
                         return pipeline_create_with(
                             e.shared, [](knit_pipeline_options &o) { o.max_in_flight = 65537; });
                     });
                 },
                 KNIT_EINVAL, {"max_in_flight=65537", "65536"}});
    t.push_back({"pipeline_on_destroyed_pool",
                 [](Env &) { return pipeline_create_with(dead_pool(), [](knit_pipeline_options &) {}); },
                 KNIT_ESHUTDOWN, {"destroyed"}});
    t.push_back({"pipeline_run_twice",
                 [](Env &e) {
                     Items items{3};
                     knit_pipeline_options o = KNIT_PIPELINE_OPTIONS_INIT;
                     o.input = input_n;
                     o.input_ctx = &items;
                     o.stages = kOneStage;
                     o.nstages = 1;
                     knit_pipeline *pl = nullptr;
                     EXPECT_EQ(0, knit_pipeline_create(e.shared, &o, &pl)) << knit_last_error();
                     EXPECT_EQ(0, knit_pipeline_run(pl)) << knit_last_error();
                     int rc = e.call([&] { return knit_pipeline_run(pl); });
                     knit_pipeline_stats st{};
                     EXPECT_EQ(0, knit_pipeline_stats_get(pl, &st));
                     EXPECT_EQ(3u, st.items);
                     EXPECT_EQ(3u, st.completed);
                     knit_pipeline_destroy(pl);
                     return rc;
                 },
                 KNIT_EALREADY, {"pipeline", "already run"}});
    t.push_back({"pipeline_run_after_pool_destroy",
                 [](Env &) {
                     knit_pool *p = make_pool();
                     Items items{3};
                     knit_pipeline_options o = KNIT_PIPELINE_OPTIONS_INIT;
                     o.input = input_n;
                     o.input_ctx = &items;
                     o.stages = kOneStage;
                     o.nstages = 1;
                     knit_pipeline *pl = nullptr;
                     EXPECT_EQ(0, knit_pipeline_create(p, &o, &pl)) << knit_last_error();
                     EXPECT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
                     int rc = knit_pipeline_run(pl);
                     std::string msg = knit_last_error();
                     EXPECT_EQ(3, items.left) << "the input was never called";
                     knit_pipeline_destroy(pl);
                     return knit_error(rc, "%s", msg.c_str());
                 },
                 KNIT_ESHUTDOWN, {"destroyed"}});
    t.push_back({"pipeline_run_null", [](Env &) { return knit_pipeline_run(nullptr); },
                 KNIT_EINVAL, {"pipeline is NULL"}});
    t.push_back({"pipeline_stats_null",
                 [](Env &) {
                     knit_pipeline_stats st{};
                     return knit_pipeline_stats_get(nullptr, &st);
                 },
                 KNIT_EINVAL, {"pipeline stats", "NULL"}});

    // ---- the scheduler registry ----
    t.push_back({"register_null", [](Env &) { return knit_sched_register(nullptr); },
                 KNIT_EINVAL, {"sched ops is NULL"}});
    t.push_back({"register_abi_version_newer",
                 [](Env &) {
                     return register_edited("misuse-abi",
                                            [](knit_sched_ops &o) { o.abi_version = 2; });
                 },
                 KNIT_EABI, {"abi_version=2", "speaks 1"}});
    t.push_back({"register_abi_version_zero",
                 [](Env &) {
                     return register_edited("misuse-abi0",
                                            [](knit_sched_ops &o) { o.abi_version = 0; });
                 },
                 KNIT_EABI, {"abi_version=0", "speaks 1"}});
    t.push_back({"register_size_too_small",
                 [](Env &) {
                     return register_edited("misuse-size", [](knit_sched_ops &o) { o.size = 16; });
                 },
                 KNIT_EABI, {"size=16", "at least"}});
    t.push_back({"register_no_claim",
                 [](Env &) {
                     return register_edited("misuse-noclaim",
                                            [](knit_sched_ops &o) { o.claim = nullptr; });
                 },
                 KNIT_EINVAL, {"\"misuse-noclaim\"", "no claim op"}});
    t.push_back({"register_duplicate_builtin",
                 [](Env &) { return register_edited("ticket", [](knit_sched_ops &) {}); },
                 KNIT_EEXIST, {"\"ticket\"", "already registered"}});
    t.push_back({"register_removed_name",
                 [](Env &) { return register_edited("cas-mask", [](knit_sched_ops &) {}); },
                 KNIT_EEXIST, {"\"cas-mask\"", "reserved", "use ticket"}});
    t.push_back({"register_name_uppercase",
                 [](Env &) { return register_edited("Mine", [](knit_sched_ops &) {}); },
                 KNIT_EINVAL, {"\"Mine\"", "1-32 of [a-z0-9_-]"}});
    t.push_back({"register_name_empty",
                 [](Env &) { return register_edited("", [](knit_sched_ops &) {}); },
                 KNIT_EINVAL, {"\"\"", "1-32"}});
    t.push_back({"register_name_too_long",
                 [](Env &) {
                     static const std::string n33(33, 'a');
                     return register_edited(n33.c_str(), [](knit_sched_ops &) {});
                 },
                 KNIT_EINVAL, {std::string(33, 'a'), "1-32"}});
    t.push_back({"register_name_null",
                 [](Env &) { return register_edited(nullptr, [](knit_sched_ops &) {}); },
                 KNIT_EINVAL, {"(null)", "1-32"}});
    t.push_back({"lookup_null_name",
                 [](Env &) {
                     const knit_sched_ops *ops = reinterpret_cast<const knit_sched_ops *>(1);
                     int rc = knit_sched_lookup(nullptr, "mysrc", &ops);
                     EXPECT_EQ(reinterpret_cast<const knit_sched_ops *>(1), ops);
                     return rc;
                 },
                 KNIT_EINVAL, {"mysrc must be one of", "got NULL"}});
    t.push_back({"lookup_misspelled",
                 [](Env &) { return knit_sched_lookup("dekkr", "mysrc", nullptr); },
                 KNIT_EINVAL, {"mysrc must be one of", "ticket, dekker, single", "\"dekkr\""}});

    // ---- groups ----
    t.push_back({"group_create_null_pool",
                 [](Env &) {
                     knit_group *g = reinterpret_cast<knit_group *>(uintptr_t{0x5e47});
                     int rc = knit_group_create(nullptr, &g);
                     EXPECT_EQ(nullptr, g) << "a failed create clears *out";
                     return rc;
                 },
                 KNIT_EINVAL, {"pool is NULL"}});
    t.push_back({"group_create_null_out",
                 [](Env &e) { return e.call([&] { return knit_group_create(e.shared, nullptr); }); },
                 KNIT_EINVAL, {"knit_group_create", "out is NULL"}});
    t.push_back({"group_create_dead_pool",
                 [](Env &) {
                     knit_group *g = nullptr;
                     return knit_group_create(dead_pool(), &g);
                 },
                 KNIT_ESHUTDOWN, {"destroyed"}});
    t.push_back({"group_submit_null_group",
                 [](Env &) { return knit_group_submit(nullptr, add_one, nullptr); },
                 KNIT_EINVAL, {"knit_group_submit", "group is NULL"}});
    t.push_back({"group_submit_null_fn",
                 [](Env &e) {
                     knit_group *g = nullptr;
                     EXPECT_EQ(0, knit_group_create(e.shared, &g));
                     int rc = e.call([&] { return knit_group_submit(g, nullptr, nullptr); });
                     EXPECT_EQ(0, knit_group_wait(g, 0)) << "nothing was submitted";
                     EXPECT_EQ(0, knit_group_destroy(g));
                     return rc;
                 },
                 KNIT_EINVAL, {"knit_group_submit", "fn is NULL"}});
    t.push_back({"group_submit_cancelled",
                 [](Env &e) {
                     knit_group *g = nullptr;
                     EXPECT_EQ(0, knit_group_create(e.shared, &g));
                     EXPECT_EQ(0, knit_group_cancel(g));
                     int rc = e.call([&] { return knit_group_submit(g, add_one, nullptr); });
                     EXPECT_EQ(0, knit_group_destroy(g)) << "the refused member is not live";
                     return rc;
                 },
                 KNIT_ECANCELED, {"knit_group_submit", "cancelled"}});
    t.push_back({"group_submit_dead_pool",
                 [](Env &) {
                     knit_pool *p = make_pool();
                     knit_group *g = nullptr;
                     EXPECT_EQ(0, knit_group_create(p, &g));
                     EXPECT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
                     int rc = knit_group_submit(g, add_one, nullptr);
                     std::string msg = knit_last_error();
                     EXPECT_EQ(0, knit_group_wait(g, -1)) << "no member, no outcome";
                     EXPECT_EQ(0, knit_group_destroy(g)) << "the refused member is not live";
                     knit_error(rc, "%s", msg.c_str());
                     return rc;
                 },
                 KNIT_ESHUTDOWN, {"destroyed"}});
    t.push_back({"group_wait_null", [](Env &) { return knit_group_wait(nullptr, -1); },
                 KNIT_EINVAL, {"knit_group_wait", "group is NULL"}});
    t.push_back({"group_wait_timeout",
                 [](Env &e) {
                     static Gate gate;
                     knit_group *g = nullptr;
                     EXPECT_EQ(0, knit_group_create(e.shared, &g));
                     EXPECT_EQ(0, knit_group_submit(g, gated, &gate));
                     gate.wait_started();
                     int rc = e.call([&] { return knit_group_wait(g, 0); });
                     gate.open = true;
                     EXPECT_EQ(0, knit_group_wait(g, -1));
                     EXPECT_EQ(0, knit_group_destroy(g));
                     return rc;
                 },
                 KNIT_ETIMEDOUT, {"knit_group_wait", "still live after 0 ns"}});
    t.push_back({"group_wait_from_own_member",
                 [](Env &e) {
                     struct Probe {
                         knit_group *g;
                         InTask r;
                     } probe{};
                     EXPECT_EQ(0, knit_group_create(e.shared, &probe.g));
                     EXPECT_EQ(0, knit_group_submit(
                                      probe.g,
                                      [](knit_task *, void *arg) -> void * {
                                          auto *p = static_cast<Probe *>(arg);
                                          p->r.record(knit_group_wait(p->g, -1));
                                          return nullptr;
                                      },
                                      &probe));
                     EXPECT_EQ(0, knit_group_wait(probe.g, -1)) << "the member did not fail";
                     EXPECT_EQ(0, knit_group_destroy(probe.g));
                     return e.from_task(probe.r);
                 },
                 KNIT_EBUSY, {"knit_group_wait", "member of the same group"}});
    t.push_back({"group_cancel_null", [](Env &) { return knit_group_cancel(nullptr); },
                 KNIT_EINVAL, {"knit_group_cancel", "group is NULL"}});
    t.push_back({"group_destroy_null", [](Env &) { return knit_group_destroy(nullptr); },
                 KNIT_EINVAL, {"knit_group_destroy", "group is NULL"}});
    t.push_back({"group_destroy_busy",
                 [](Env &e) {
                     static Gate gate;
                     knit_group *g = nullptr;
                     EXPECT_EQ(0, knit_group_create(e.shared, &g));
                     EXPECT_EQ(0, knit_group_submit(g, gated, &gate));
                     gate.wait_started();
                     int rc = e.call([&] { return knit_group_destroy(g); });
                     gate.open = true;
                     EXPECT_EQ(0, knit_group_wait(g, -1)) << "the group is still usable";
                     EXPECT_EQ(0, knit_group_destroy(g));
                     return rc;
                 },
                 KNIT_EBUSY, {"knit_group_destroy", "1 members are live"}});

    // ---- promises ----
    t.push_back({"promise_create_null_pool",
                 [](Env &) {
                     knit_future *f = kSentinelFuture;
                     int rc = knit_promise_create(nullptr, &f);
                     EXPECT_EQ(nullptr, f);
                     return rc;
                 },
                 KNIT_EINVAL, {"pool is NULL"}});
    t.push_back({"promise_create_null_out",
                 [](Env &e) {
                     return e.call([&] { return knit_promise_create(e.shared, nullptr); });
                 },
                 KNIT_EINVAL, {"knit_promise_create", "out is NULL"}});
    t.push_back({"promise_create_dead_pool",
                 [](Env &) {
                     knit_future *f = kSentinelFuture;
                     int rc = knit_promise_create(dead_pool(), &f);
                     EXPECT_EQ(nullptr, f);
                     return rc;
                 },
                 KNIT_ESHUTDOWN, {"destroyed"}});
    t.push_back({"promise_resolve_null",
                 [](Env &) { return knit_promise_resolve(nullptr, nullptr); }, KNIT_EINVAL,
                 {"knit_promise_resolve", "future is NULL"}});
    t.push_back({"promise_reject_null",
                 [](Env &) { return knit_promise_reject(nullptr, 1, "x"); }, KNIT_EINVAL,
                 {"knit_promise_reject", "future is NULL"}});
    t.push_back({"promise_resolve_twice",
                 [](Env &e) {
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_promise_create(e.shared, &f));
                     EXPECT_EQ(0, knit_promise_resolve(f, &e));
                     int rc = e.call([&] { return knit_promise_resolve(f, nullptr); });
                     void *r = nullptr;
                     EXPECT_EQ(0, knit_await(f, 0, &r));
                     EXPECT_EQ(&e, r) << "the first settle stands";
                     EXPECT_EQ(0, knit_future_release(f));
                     return rc;
                 },
                 KNIT_EALREADY, {"knit_promise_resolve", "already settled"}});
    t.push_back({"promise_reject_after_resolve",
                 [](Env &e) {
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_promise_create(e.shared, &f));
                     EXPECT_EQ(0, knit_promise_resolve(f, nullptr));
                     int rc = e.call([&] { return knit_promise_reject(f, 2, "late"); });
                     EXPECT_EQ(0, knit_await(f, 0, nullptr)) << "the first settle stands";
                     EXPECT_EQ(0, knit_future_release(f));
                     return rc;
                 },
                 KNIT_EALREADY, {"knit_promise_reject", "already settled"}});
    t.push_back({"promise_resolve_cancelled",
                 [](Env &e) {
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_promise_create(e.shared, &f));
                     EXPECT_EQ(0, knit_future_cancel(f));
                     int rc = e.call([&] { return knit_promise_resolve(f, nullptr); });
                     EXPECT_EQ(KNIT_ECANCELED, knit_await(f, 0, nullptr));
                     EXPECT_EQ(0, knit_future_release(f));
                     knit_error(rc, "%s", e.msg.c_str());
                     return rc;
                 },
                 KNIT_EALREADY, {"knit_promise_resolve", "already settled"}});
    t.push_back({"promise_resolve_task_future",
                 [](Env &e) {
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_submit(e.shared, add_one, nullptr, &f));
                     EXPECT_EQ(0, knit_await(f, -1, nullptr)); // counters settle first
                     int rc = e.call([&] { return knit_promise_resolve(f, nullptr); });
                     void *r = nullptr;
                     EXPECT_EQ(0, knit_await(f, 0, &r)) << "the task's outcome stands";
                     EXPECT_EQ(1u, reinterpret_cast<uintptr_t>(r));
                     EXPECT_EQ(0, knit_future_release(f));
                     return rc;
                 },
                 KNIT_EINVAL, {"knit_promise_resolve", "not a promise"}});
    t.push_back({"promise_reject_released",
                 [](Env &e) {
                     knit_future *f = nullptr;
                     EXPECT_EQ(0, knit_promise_create(e.shared, &f));
                     EXPECT_EQ(0, knit_promise_resolve(f, nullptr));
                     EXPECT_EQ(0, knit_future_release(f));
                     return e.call([&] { return knit_promise_reject(f, 1, "x"); });
                 },
                 KNIT_EALREADY, {"knit_promise_reject", "released"}});
    return t;
}

// ---- running the table ---------------------------------------------------

class Misuse : public ::testing::TestWithParam<Case> {
  protected:
    static void SetUpTestSuite() {
        knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
        o.threads = 2;
        o.sched = "ticket";
        o.arena_bytes = 8 << 20;
        o.max_payload = 1 << 20;
        ASSERT_EQ(0, knit_pool_create(&o, &shared_)) << knit_last_error();
    }
    static void TearDownTestSuite() {
        EXPECT_EQ(0, knit_pool_destroy(shared_, KNIT_DRAIN)) << knit_last_error();
        shared_ = nullptr;
    }
    static knit_pool *shared_;
};

knit_pool *Misuse::shared_ = nullptr;

TEST_P(Misuse, FailsCleanly) {
    const Case &c = GetParam();
    ASSERT_NE(nullptr, shared_);
    const std::vector<std::string> names = registry_names();
    knit_error(0, "stale message"); // a row must write its own

    Env env;
    env.shared = shared_;
    quiesce(shared_);
    Counters before = counters(shared_);
    int rc = c.run(env);
    std::string msg = env.called || env.in_task ? env.msg : std::string(knit_last_error());
    if (!env.called && !env.in_task) expect_same(before, counters(shared_));

    EXPECT_EQ(c.code, rc) << knit_strerror(rc) << ": " << msg;
    EXPECT_NE("stale message", msg) << "the failed call set no message";
    for (const std::string &w : c.words)
        EXPECT_NE(std::string::npos, msg.find(w)) << "message lacks \"" << w << "\": " << msg;

    // Nothing else changed: the registry, and the shared pool still works.
    EXPECT_EQ(names, registry_names());
    expect_pool_works(shared_);
}

INSTANTIATE_TEST_SUITE_P(Table, Misuse, ::testing::ValuesIn(table()),
                         [](const ::testing::TestParamInfo<Case> &info) { return info.param.name; });

TEST(MisuseTable, HasAtLeastThirtyDistinctCases) {
    std::vector<Case> t = table();
    EXPECT_GE(t.size(), 30u);
    std::vector<std::string> names;
    for (const Case &c : t) {
        EXPECT_LT(c.code, 0) << c.name;
        EXPECT_FALSE(c.words.empty()) << c.name;
        names.push_back(c.name);
    }
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names.end(), std::adjacent_find(names.begin(), names.end()));
}

// ---- look like misuses, are not (the header defines them) ----------------

std::atomic<int> detached_runs{0};
void *count_run(knit_task *, void *) {
    detached_runs++;
    return nullptr;
}

TEST(NotMisuse, NullFutureOutIsADetachedTask) {
    knit_test::Pool pool(2);
    for (int i = 0; i < 100; i++) ASSERT_EQ(0, knit_submit(pool, count_run, nullptr, nullptr));
    for (int i = 0; i < 2000 && detached_runs.load() < 100; i++) std::this_thread::sleep_for(1ms);
    EXPECT_EQ(100, detached_runs.load());
}

TEST(NotMisuse, ZeroThreadsAndZeroRegionLanesAreDefaults) {
    knit_test::Pool pool(0);
    ASSERT_NE(nullptr, pool.p);
    knit_pool_stats_t s{};
    s.size = sizeof s;
    ASSERT_EQ(0, knit_pool_stats(pool, &s));
    EXPECT_GE(s.threads, 1u);
    expect_pool_works(pool);
}

std::atomic<size_t> covered{0};
int count_range(void *, size_t b, size_t e) {
    covered += e - b;
    return 0;
}

TEST(NotMisuse, ParallelForGrainZeroIsTheDefault) {
    knit_test::Pool pool(2);
    covered = 0;
    EXPECT_EQ(0, knit_parallel_for(pool, 0, 10000, 0, count_range, nullptr)) << knit_last_error();
    EXPECT_EQ(10000u, covered.load());
    EXPECT_EQ(0, knit_parallel_for(pool, 5, 5, 0, count_range, nullptr)) << "empty range";
}

// No timeout value is invalid: any negative one is "no limit", and a huge
// positive one must wait (not overflow into "already expired").
TEST(NotMisuse, ExtremeAwaitTimeouts) {
    knit_test::Pool pool(1);
    for (int64_t timeout : {INT64_MIN, int64_t{-2}, INT64_MAX}) {
        SCOPED_TRACE(timeout);
        Gate g;
        knit_future *f = nullptr;
        ASSERT_EQ(0, knit_submit(pool, gated, &g, &f));
        g.wait_started();
        std::thread opener([&] {
            std::this_thread::sleep_for(20ms);
            g.open = true;
        });
        void *r = nullptr;
        EXPECT_EQ(0, knit_await(f, timeout, &r)) << knit_last_error();
        EXPECT_EQ(&g, r);
        opener.join();
        knit_future *fs[1] = {f};
        EXPECT_EQ(0, knit_await_all(fs, 1, timeout)) << knit_last_error();
        size_t which = 9;
        EXPECT_EQ(0, knit_await_any(fs, 1, timeout, &which)) << knit_last_error();
        EXPECT_EQ(0u, which);
        EXPECT_EQ(0, knit_future_release(f));
    }
    // The same through await_all, whose deadline is computed separately.
    Gate g;
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(pool, gated, &g, &f));
    g.wait_started();
    std::thread opener([&] {
        std::this_thread::sleep_for(20ms);
        g.open = true;
    });
    knit_future *fs[1] = {f};
    EXPECT_EQ(0, knit_await_all(fs, 1, INT64_MAX)) << knit_last_error();
    opener.join();
    EXPECT_EQ(0, knit_future_release(f));
}

// await_spin_ns is "how long an outside await spins/helps": INT64_MAX is
// "always", not an overflow.
TEST(NotMisuse, HugeAwaitSpin) {
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 1;
    o.await_spin_ns = INT64_MAX;
    knit_pool *p = nullptr;
    ASSERT_EQ(0, knit_pool_create(&o, &p)) << knit_last_error();
    Gate g;
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(p, gated, &g, &f));
    g.wait_started();
    std::thread opener([&] {
        std::this_thread::sleep_for(20ms);
        g.open = true;
    });
    EXPECT_EQ(0, knit_await(f, -1, nullptr)) << knit_last_error();
    opener.join();
    EXPECT_EQ(0, knit_future_release(f));
    EXPECT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
}

} // namespace
