// Pipelines: serial-in-order stages see input order under random delays,
// serial stages never overlap themselves, the in-flight bound holds,
// failures in every position (input, first, middle, last stage) return
// their code and message, stop the input and free every item exactly once,
// cancel (from another thread, from a stage, before run) is prompt and
// leak-free, items move without copies, stages may replace or consume the
// item, option validation, run twice, a pipeline inside a task on one
// worker, concurrent pipelines, tiny max_pending, cancel racing the end,
// the pool destroyed (DRAIN / CANCEL) under a running pipeline; both
// disciplines, 1 and 2 workers, the input on the calling thread and in
// pool tasks (KNIT_PIPELINE_INPUT_IN_TASKS): one call at a time either way.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "knit/knit.h"
#include "pool_util.h"

namespace {

#ifdef KNIT_SANITIZER
constexpr uint64_t kScale = 4; // sanitizers run ~10-20x slower
#else
constexpr uint64_t kScale = 1;
#endif

using Clock = std::chrono::steady_clock;

// The options.flags every pipeline of the running test gets (the fixture
// sets it from its parameter; tests run one at a time).
unsigned g_flags = 0;

using knit_test::Pool;

// Sleeps a random 0..max_us microseconds (per-thread generator).
void random_sleep(unsigned max_us) {
    if (max_us == 0) return;
    thread_local std::mt19937 rng(
        static_cast<unsigned>(std::hash<std::thread::id>()(std::this_thread::get_id())));
    std::uniform_int_distribution<unsigned> d(0, max_us);
    std::this_thread::sleep_for(std::chrono::microseconds(d(rng)));
}

void atomic_max(std::atomic<int64_t> &m, int64_t v) {
    int64_t cur = m.load();
    while (v > cur && !m.compare_exchange_weak(cur, v)) {
    }
}

// What an item carries: its input order and a check word.
struct Item {
    uint64_t id;
    uint64_t magic;
    unsigned char pad[48];
};
constexpr uint64_t kMagic = 0x6b6e69745f697465ull;
constexpr uint64_t kReplaced = 0x7265706c61636564ull;

// The input function and the bookkeeping of every buffer: each buffer's
// free_ctx is its own record, so a double free is counted (and not
// repeated) without touching freed memory.
struct Harness {
    struct Rec {
        Harness *h = nullptr;
        bool replacement = false;
        std::atomic<void *> data{nullptr};
        std::atomic<int> frees{0};
        // Input calls when the buffer was freed: a failed item's buffer is
        // freed after the pipeline stored `stopping`, so at most the input
        // call already under way can follow.
        std::atomic<uint64_t> input_calls_at_free{0};
    };

    explicit Harness(uint64_t limit_, size_t capacity = 0)
        : limit(limit_), recs(capacity ? capacity : limit_ + 1),
          repl(capacity ? capacity : limit_ + 1), current(capacity ? capacity : limit_ + 1) {
        for (auto &r : recs) r.h = this;
        for (auto &r : repl) {
            r.h = this;
            r.replacement = true;
        }
        for (auto &c : current) c.store(nullptr);
    }

    uint64_t limit;                    // items the input produces, then 0
    int64_t input_fail_at = -1;        // the input fails instead of producing this id
    int input_fail_code = 0;
    unsigned input_sleep_us = 0;       // random delay per input call
    int64_t slow_at = -1;              // the input sleeps 100 ms before making this id
    std::atomic<bool> slow_started{false};
    std::vector<Rec> recs;             // by id: the buffers the input made
    std::vector<Rec> repl;             // by id: buffers a stage put in their place
    std::vector<std::atomic<void *>> current; // by id: the buffer the item holds now

    std::atomic<uint64_t> input_calls{0};
    std::thread::id driver;                      // the thread in knit_pipeline_run
    bool driver_is_worker = false;               // ... is a worker of the pool
    std::atomic<uint64_t> driver_calls{0};       // input calls on that thread
    std::atomic<int> input_active{0}, input_overlaps{0}; // calls at once
    std::atomic<uint64_t> calls_after_end{0}; // calls after it returned 0 or < 0
    std::atomic<bool> ended{false};
    std::atomic<uint64_t> produced{0}, freed{0};
    std::atomic<uint64_t> repl_made{0}, repl_freed{0};
    std::atomic<int64_t> max_live{0}; // produced - freed, right after a produce
    std::atomic<int> double_frees{0}, wrong_frees{0};

    static void free_fn(void *ctx, void *data, size_t len) {
        auto *r = static_cast<Rec *>(ctx);
        Harness *h = r->h;
        if (data != r->data.load() || len != sizeof(Item)) h->wrong_frees++;
        // A read-modify-write, not a load: it reads the newest count and
        // is not reordered before the pipeline's earlier store of
        // `stopping` (a plain load may be, store-load reordering).
        r->input_calls_at_free = h->input_calls.fetch_add(0);
        if (r->frees.fetch_add(1) != 0) {
            h->double_frees++;
            return; // never free twice
        }
        std::free(data);
        (r->replacement ? h->repl_freed : h->freed)++;
    }

    static int input(void *ctx, knit_buf *item) {
        auto *h = static_cast<Harness *>(ctx);
        if (h->input_active.fetch_add(1) != 0) h->input_overlaps++;
        int rc = h->input_body(item);
        h->input_active--;
        return rc;
    }

    int input_body(knit_buf *item) {
        Harness *h = this;
        h->input_calls++;
        if (std::this_thread::get_id() == h->driver) h->driver_calls++;
        if (h->ended.load()) h->calls_after_end++;
        random_sleep(h->input_sleep_us);
        uint64_t id = h->produced.load();
        if (h->slow_at >= 0 && id == uint64_t(h->slow_at)) {
            h->slow_started = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        if (h->input_fail_at >= 0 && id == uint64_t(h->input_fail_at)) {
            h->ended = true;
            return knit_error(h->input_fail_code, "input broke before item %" PRIu64, id);
        }
        if (id >= h->limit) {
            h->ended = true;
            return 0;
        }
        if (id >= h->recs.size()) {
            h->ended = true;
            return knit_error(-999, "the test harness holds %zu items", h->recs.size());
        }
        auto *it = static_cast<Item *>(std::malloc(sizeof(Item)));
        it->id = id;
        it->magic = kMagic;
        std::memset(it->pad, int(id & 0xff), sizeof it->pad);
        h->recs[id].data = it;
        h->current[id] = it;
        *item = knit_buf{it, sizeof(Item), &Harness::free_fn, &h->recs[id]};
        uint64_t made = h->produced.fetch_add(1) + 1;
        atomic_max(h->max_live, int64_t(made) - int64_t(h->freed.load()));
        return 1;
    }

    // A stage puts a new buffer in the item's place (freeing the old one).
    void replace(uint64_t seq, knit_buf *item) {
        knit_buf_free(item);
        auto *it = static_cast<Item *>(std::malloc(sizeof(Item)));
        it->id = seq;
        it->magic = kReplaced;
        repl[seq].data = it;
        current[seq] = it;
        *item = knit_buf{it, sizeof(Item), &Harness::free_fn, &repl[seq]};
        repl_made++;
    }

    // Every buffer made was freed exactly once, and none twice.
    void expect_all_freed_once() const {
        EXPECT_EQ(0, double_frees.load()) << "a buffer was freed twice";
        EXPECT_EQ(0, wrong_frees.load()) << "a free function got the wrong pointer or length";
        EXPECT_EQ(produced.load(), freed.load()) << "input buffers leaked";
        EXPECT_EQ(repl_made.load(), repl_freed.load()) << "replacement buffers leaked";
        uint64_t bad = 0;
        for (uint64_t i = 0; i < produced.load(); i++) bad += recs[i].frees.load() != 1;
        EXPECT_EQ(0u, bad) << "input items not freed exactly once";
        EXPECT_EQ(0u, calls_after_end.load()) << "the input was called after it ended";
        EXPECT_EQ(0, input_overlaps.load()) << "two input calls ran at once";
        if (driver == std::thread::id() || driver_is_worker) return; // not known / not apart
        if (g_flags & KNIT_PIPELINE_INPUT_IN_TASKS)
            EXPECT_EQ(0u, driver_calls.load()) << "the input ran on the calling thread";
        else
            EXPECT_EQ(input_calls.load(), driver_calls.load())
                << "the input ran off the calling thread";
    }
};

// A stage that checks the item, records what it saw, sleeps, and can fail,
// cancel, or replace / consume the item at a given seq.
struct Stage {
    Harness *h;
    unsigned index;
    knit_stage_mode mode;
    unsigned sleep_us = 0;      // random 0..sleep_us per call
    int64_t fail_at = -1;       // seq that fails with fail_code
    int fail_code = 0;
    bool replace_all = false;   // every item gets a new buffer
    bool consume_all = false;   // every item's buffer is freed and emptied
    bool expect_empty = false;  // items arrive empty (a stage before consumed them)
    std::atomic<knit_pipeline *> cancel_pl{nullptr};
    int64_t cancel_at = -1;     // seq at which the stage cancels the pipeline

    std::atomic<int64_t> active{0}, max_active{0};
    std::atomic<uint64_t> calls{0};
    std::atomic<int> bad_items{0};    // wrong length, magic or id
    std::atomic<int> copied{0};       // not the buffer the item held
    std::atomic<uint64_t> input_calls_at_fail{0}; // input calls when it failed or cancelled
    std::vector<std::atomic<uint8_t>> seen; // by seq
    std::mutex mu;
    std::vector<uint64_t> order; // seqs in the order the stage ran them

    Stage(Harness *harness, unsigned idx, knit_stage_mode m)
        : h(harness), index(idx), mode(m), seen(harness->recs.size()) {
        for (auto &s : seen) s.store(0);
    }

    static int fn(void *ctx, uint64_t seq, knit_buf *item) {
        auto *s = static_cast<Stage *>(ctx);
        s->calls++;
        atomic_max(s->max_active, ++s->active);
        if (seq < s->seen.size()) s->seen[seq]++;
        {
            std::lock_guard<std::mutex> lock(s->mu);
            s->order.push_back(seq);
        }
        if (s->expect_empty) {
            if (item->data != nullptr || item->len != 0) s->bad_items++;
        } else if (item->data == nullptr || item->len != sizeof(Item)) {
            s->bad_items++;
        } else {
            auto *it = static_cast<Item *>(item->data);
            if (it->id != seq || (it->magic != kMagic && it->magic != kReplaced)) s->bad_items++;
            if (seq < s->h->current.size() && item->data != s->h->current[seq].load())
                s->copied++;
        }
        random_sleep(s->sleep_us);
        int rc = 0;
        if (s->replace_all) s->h->replace(seq, item);
        if (s->consume_all) knit_buf_free(item);
        if (s->cancel_at >= 0 && seq == uint64_t(s->cancel_at)) {
            // After the cancel returned: it stored `stopping`, so at most the
            // input call already under way follows.
            EXPECT_EQ(0, knit_pipeline_cancel(s->cancel_pl.load()));
            s->input_calls_at_fail = s->h->input_calls.fetch_add(0); // as in free_fn
        }
        if (s->fail_at >= 0 && seq == uint64_t(s->fail_at)) {
            s->input_calls_at_fail = s->h->input_calls.load();
            rc = knit_error(s->fail_code, "stage %u refused item %" PRIu64, s->index, seq);
        }
        s->active--;
        return rc;
    }

    std::vector<uint64_t> ran() {
        std::lock_guard<std::mutex> lock(mu);
        return order;
    }
};

struct Result {
    int rc = 0;
    std::string error; // knit_last_error() right after the run
    knit_pipeline_stats stats{};
    double seconds = 0;
};

knit_pipeline_options make_options(Harness &h, std::vector<knit_stage> &ks,
                                   const std::vector<Stage *> &stages, size_t max_in_flight) {
    ks.clear();
    for (Stage *s : stages) ks.push_back(knit_stage{s->mode, &Stage::fn, s});
    knit_pipeline_options o = KNIT_PIPELINE_OPTIONS_INIT;
    o.input = &Harness::input;
    o.input_ctx = &h;
    o.stages = ks.data();
    o.nstages = ks.size();
    o.max_in_flight = max_in_flight;
    o.flags = g_flags;
    return o;
}

// Creates, runs and destroys a pipeline. `started` is called with the
// pipeline before it runs (to arm cancels), `finished` after the run and
// before the destroy (to join the threads that use it).
Result run(knit_pool *pool, Harness &h, const std::vector<Stage *> &stages, size_t max_in_flight,
           const std::function<void(knit_pipeline *)> &started = nullptr,
           const std::function<void()> &finished = nullptr) {
    Result r;
    std::vector<knit_stage> ks;
    knit_pipeline_options o = make_options(h, ks, stages, max_in_flight);
    knit_pipeline *pl = nullptr;
    int rc = knit_pipeline_create(pool, &o, &pl);
    EXPECT_EQ(0, rc) << knit_last_error();
    if (rc != 0) {
        r.rc = rc;
        return r;
    }
    if (started) started(pl);
    h.driver = std::this_thread::get_id();
    auto t0 = Clock::now();
    r.rc = knit_pipeline_run(pl);
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.error = knit_last_error();
    if (finished) finished();
    EXPECT_EQ(0, knit_pipeline_stats_get(pl, &r.stats));
    knit_pipeline_destroy(pl);
    return r;
}

// When knit_pipeline_run returns nothing is still running: no stage call
// in progress, every buffer freed, and the stats add up.
void expect_quiescent(const Harness &h, const std::vector<Stage *> &stages, const Result &r) {
    for (Stage *s : stages) EXPECT_EQ(0, s->active.load()) << "stage " << s->index << " still running";
    h.expect_all_freed_once();
    EXPECT_EQ(h.produced.load(), r.stats.items);
    EXPECT_EQ(r.stats.items, r.stats.completed + r.stats.dropped);
    for (Stage *s : stages) {
        EXPECT_EQ(0, s->bad_items.load()) << "stage " << s->index << " got a wrong item";
        EXPECT_EQ(0, s->copied.load()) << "stage " << s->index << " got a copy, not the buffer";
    }
}

using Config = std::tuple<const char *, unsigned, unsigned>; // sched, workers, flags

class Pipeline : public ::testing::TestWithParam<Config> {
  protected:
    void SetUp() override { g_flags = std::get<2>(GetParam()); }
    void TearDown() override { g_flags = 0; }
    const char *sched() const { return std::get<0>(GetParam()); }
    unsigned workers() const { return std::get<1>(GetParam()); }
};

// Every item passes every stage once, in input order through the
// serial-in-order stages, also behind parallel and (reordering) serial
// stages with random delays.
TEST_P(Pipeline, SerialInOrderSeesInputOrderUnderRandomDelays) {
    Pool pool(workers(), sched());
    const uint64_t n = 300 / kScale;
    Harness h(n);
    Stage par(&h, 0, KNIT_STAGE_PARALLEL), ord1(&h, 1, KNIT_STAGE_SERIAL_IN_ORDER),
        ser(&h, 2, KNIT_STAGE_SERIAL), par2(&h, 3, KNIT_STAGE_PARALLEL),
        ord2(&h, 4, KNIT_STAGE_SERIAL_IN_ORDER);
    par.sleep_us = 2000;
    ser.sleep_us = 300;
    par2.sleep_us = 1000;
    std::vector<Stage *> stages{&par, &ord1, &ser, &par2, &ord2};
    Result r = run(pool, h, stages, 8);
    ASSERT_EQ(0, r.rc) << r.error;
    EXPECT_EQ(n, h.produced.load());
    EXPECT_EQ(n + 1, h.input_calls.load()) << "n items, then one call that returns 0";
    expect_quiescent(h, stages, r);
    EXPECT_EQ(n, r.stats.completed);
    EXPECT_EQ(0u, r.stats.dropped);
    for (Stage *s : stages) {
        EXPECT_EQ(n, s->calls.load()) << "stage " << s->index;
        uint64_t wrong = 0;
        for (uint64_t i = 0; i < n; i++) wrong += s->seen[i].load() != 1;
        EXPECT_EQ(0u, wrong) << "stage " << s->index << " did not see every item once";
    }
    for (Stage *s : {&ord1, &ord2}) {
        std::vector<uint64_t> order = s->ran();
        ASSERT_EQ(n, order.size());
        for (uint64_t i = 0; i < n; i++)
            ASSERT_EQ(i, order[i]) << "serial-in-order stage " << s->index << " out of order";
    }
    for (Stage *s : {&ord1, &ser, &ord2})
        EXPECT_EQ(1, s->max_active.load()) << "serial stage " << s->index << " overlapped itself";
}

// The serial-in-order stage first (right after the input), and alone.
TEST_P(Pipeline, SerialInOrderFirstAndAlone) {
    Pool pool(workers(), sched());
    const uint64_t n = 200 / kScale;
    for (int layout = 0; layout < 2; layout++) {
        Harness h(n);
        Stage ord(&h, 0, KNIT_STAGE_SERIAL_IN_ORDER), par(&h, 1, KNIT_STAGE_PARALLEL);
        ord.sleep_us = 200;
        par.sleep_us = 1000;
        std::vector<Stage *> stages{&ord};
        if (layout == 1) stages.push_back(&par);
        Result r = run(pool, h, stages, 4);
        ASSERT_EQ(0, r.rc) << r.error;
        expect_quiescent(h, stages, r);
        std::vector<uint64_t> order = ord.ran();
        ASSERT_EQ(n, order.size());
        for (uint64_t i = 0; i < n; i++) ASSERT_EQ(i, order[i]);
        EXPECT_EQ(1, ord.max_active.load());
    }
}

// A SERIAL stage between two parallel ones never runs two calls at once.
TEST_P(Pipeline, SerialStageNeverOverlapsItself) {
    Pool pool(workers(), sched());
    const uint64_t n = 400 / kScale;
    Harness h(n);
    Stage a(&h, 0, KNIT_STAGE_PARALLEL), s(&h, 1, KNIT_STAGE_SERIAL),
        b(&h, 2, KNIT_STAGE_PARALLEL), s2(&h, 3, KNIT_STAGE_SERIAL);
    a.sleep_us = 1000;
    s.sleep_us = 100;
    b.sleep_us = 1000;
    s2.sleep_us = 50;
    std::vector<Stage *> stages{&a, &s, &b, &s2};
    Result r = run(pool, h, stages, 16);
    ASSERT_EQ(0, r.rc) << r.error;
    expect_quiescent(h, stages, r);
    EXPECT_EQ(1, s.max_active.load());
    EXPECT_EQ(1, s2.max_active.load());
    EXPECT_EQ(n, s.calls.load());
    EXPECT_EQ(n, s2.calls.load());
}

// With two workers, a parallel stage does run calls at once.
TEST_P(Pipeline, ParallelStageOverlaps) {
    if (workers() < 2) GTEST_SKIP() << "needs 2 workers";
    Pool pool(workers(), sched());
    Harness h(60);
    Stage p(&h, 0, KNIT_STAGE_PARALLEL);
    p.sleep_us = 3000;
    std::vector<Stage *> stages{&p};
    Result r = run(pool, h, stages, 8);
    ASSERT_EQ(0, r.rc) << r.error;
    expect_quiescent(h, stages, r);
    EXPECT_GE(p.max_active.load(), 2) << "a parallel stage ran one item at a time";
}

// The number of items made and not yet freed never exceeds max_in_flight.
TEST_P(Pipeline, InFlightBoundHolds) {
    Pool pool(workers(), sched());
    for (size_t bound : {size_t(1), size_t(2), size_t(3), size_t(8)}) {
        SCOPED_TRACE("max_in_flight " + std::to_string(bound));
        const uint64_t n = 200 / kScale;
        Harness h(n);
        Stage a(&h, 0, KNIT_STAGE_PARALLEL), s(&h, 1, KNIT_STAGE_SERIAL_IN_ORDER),
            b(&h, 2, KNIT_STAGE_PARALLEL);
        a.sleep_us = 500;
        s.sleep_us = 100;
        b.sleep_us = 500;
        std::vector<Stage *> stages{&a, &s, &b};
        Result r = run(pool, h, stages, bound);
        ASSERT_EQ(0, r.rc) << r.error;
        expect_quiescent(h, stages, r);
        EXPECT_LE(h.max_live.load(), int64_t(bound)) << "items made and not freed";
        EXPECT_GE(h.max_live.load(), 1);
        EXPECT_LE(r.stats.max_in_flight, bound);
        EXPECT_GE(r.stats.max_in_flight, 1u);
        std::vector<uint64_t> order = s.ran();
        for (uint64_t i = 0; i < order.size(); i++) ASSERT_EQ(i, order[i]);
    }
}

// max_in_flight 0: 4 per worker.
TEST_P(Pipeline, DefaultInFlightIsFourPerWorker) {
    Pool pool(workers(), sched());
    Harness h(100 / kScale);
    Stage a(&h, 0, KNIT_STAGE_PARALLEL);
    a.sleep_us = 2000;
    std::vector<Stage *> stages{&a};
    Result r = run(pool, h, stages, 0);
    ASSERT_EQ(0, r.rc) << r.error;
    expect_quiescent(h, stages, r);
    EXPECT_LE(h.max_live.load(), int64_t(4 * workers()));
    EXPECT_LE(r.stats.max_in_flight, 4u * workers());
}

// Failures in every position and under every stage mode: the failing
// code comes back with "stage N (item I): <message>", the input stops
// within max_in_flight calls, the failed item runs no later stage, items
// behind the failure skip their stages, and every buffer is freed once.
TEST_P(Pipeline, FailureInEveryPosition) {
    Pool pool(workers(), sched());
    const size_t bound = 6;
    const uint64_t fail_seq = 17;
    const knit_stage_mode modes[] = {KNIT_STAGE_PARALLEL, KNIT_STAGE_SERIAL,
                                     KNIT_STAGE_SERIAL_IN_ORDER};
    // layout m: every stage in mode m (0-2), or mixed (3).
    for (int layout = 0; layout < 4; layout++)
        for (int where = -1; where < 3; where++) { // -1: the input
            SCOPED_TRACE("layout " + std::to_string(layout) + " fail at " +
                         (where < 0 ? std::string("input") : "stage " + std::to_string(where)));
            Harness h(1000);
            std::vector<std::unique_ptr<Stage>> own;
            std::vector<Stage *> stages;
            for (unsigned k = 0; k < 3; k++) {
                knit_stage_mode m = layout < 3 ? modes[layout] : modes[(k + 1) % 3];
                own.emplace_back(new Stage(&h, k, m));
                own.back()->sleep_us = 300;
                stages.push_back(own.back().get());
            }
            const int code = -40 - (where + 1);
            if (where < 0) {
                h.input_fail_at = int64_t(fail_seq);
                h.input_fail_code = code;
            } else {
                stages[where]->fail_at = int64_t(fail_seq);
                stages[where]->fail_code = code;
            }
            Result r = run(pool, h, stages, bound);
            EXPECT_EQ(code, r.rc) << r.error;
            expect_quiescent(h, stages, r);
            char want[128];
            if (where < 0) {
                std::snprintf(want, sizeof want, "input broke before item %" PRIu64, fail_seq);
                EXPECT_EQ(fail_seq, h.produced.load());
                EXPECT_EQ(fail_seq + 1, h.input_calls.load()) << "input called after it failed";
                EXPECT_NE(nullptr, std::strstr(r.error.c_str(), want)) << r.error;
            } else {
                std::snprintf(want, sizeof want, "stage %d (item %" PRIu64 "): stage %d refused item %" PRIu64,
                              where, fail_seq, where, fail_seq);
                EXPECT_NE(nullptr, std::strstr(r.error.c_str(), want))
                    << "knit_last_error() = \"" << r.error << "\", want \"" << want << "\"";
                uint64_t at_fail = stages[where]->input_calls_at_fail.load();
                EXPECT_GT(at_fail, 0u);
                // Exact whoever runs the items: once the failed item's buffer
                // is freed, only the input call under way may follow.
                uint64_t at_free = h.recs[fail_seq].input_calls_at_free.load();
                EXPECT_GE(at_free, at_fail);
                EXPECT_LE(h.input_calls.load(), at_free + 1)
                    << "the input went on after the failure";
                EXPECT_LT(h.produced.load(), 1000u) << "the input never stopped";
                for (unsigned k = unsigned(where) + 1; k < 3; k++)
                    EXPECT_EQ(0u, stages[k]->seen[fail_seq].load())
                        << "stage " << k << " ran the failed item";
            }
            // Serial-in-order stages still saw a gap-free prefix in order.
            for (Stage *s : stages)
                if (s->mode == KNIT_STAGE_SERIAL_IN_ORDER) {
                    std::vector<uint64_t> order = s->ran();
                    for (uint64_t i = 0; i < order.size(); i++) ASSERT_EQ(i, order[i]);
                }
            for (Stage *s : stages) {
                if (s->mode != KNIT_STAGE_PARALLEL) {
                    EXPECT_LE(s->max_active.load(), 1);
                }
            }
        }
}

// Failing at the very first item, in the only stage.
TEST_P(Pipeline, FailureAtFirstItem) {
    Pool pool(workers(), sched());
    for (knit_stage_mode m : {KNIT_STAGE_PARALLEL, KNIT_STAGE_SERIAL, KNIT_STAGE_SERIAL_IN_ORDER}) {
        Harness h(100);
        Stage s(&h, 0, m);
        s.fail_at = 0;
        s.fail_code = KNIT_ETASK;
        std::vector<Stage *> stages{&s};
        Result r = run(pool, h, stages, 4);
        EXPECT_EQ(KNIT_ETASK, r.rc);
        EXPECT_NE(std::string::npos, r.error.find("stage 0 (item 0): stage 0 refused item 0"))
            << r.error;
        expect_quiescent(h, stages, r);
        // Item 0's task may run after later items finished (tasks need not
        // run in submission order): the bound is on calls after item 0's
        // buffer was freed (after `stopping` was stored).
        EXPECT_LE(h.input_calls.load(), h.recs[0].input_calls_at_free.load() + 1);
        if (m == KNIT_STAGE_SERIAL_IN_ORDER) {
            EXPECT_LE(h.produced.load(), 5u) << "items 1.. wait for item 0";
        }
    }
}

// Two stages fail: the run returns one of the two codes with that one's
// message.
TEST_P(Pipeline, TwoFailuresReturnOneConsistently) {
    Pool pool(workers(), sched());
    for (int round = 0; round < 10; round++) {
        Harness h(200);
        Stage a(&h, 0, KNIT_STAGE_PARALLEL), b(&h, 1, KNIT_STAGE_PARALLEL);
        a.fail_at = 5;
        a.fail_code = -91;
        b.fail_at = 4;
        b.fail_code = -92;
        a.sleep_us = b.sleep_us = 200;
        std::vector<Stage *> stages{&a, &b};
        Result r = run(pool, h, stages, 8);
        ASSERT_TRUE(r.rc == -91 || r.rc == -92) << r.rc;
        const char *want = r.rc == -91 ? "stage 0 (item 5): stage 0 refused item 5"
                                       : "stage 1 (item 4): stage 1 refused item 4";
        EXPECT_NE(std::string::npos, r.error.find(want)) << r.rc << ": " << r.error;
        expect_quiescent(h, stages, r);
    }
}

// knit_pipeline_cancel from another thread while slow stages run: the run
// returns KNIT_ECANCELED promptly and frees every item once.
TEST_P(Pipeline, CancelFromAnotherThreadIsPromptAndLeakFree) {
    Pool pool(workers(), sched());
    const size_t bound = 8;
    Harness h(1000000, 5000);
    Stage a(&h, 0, KNIT_STAGE_PARALLEL), s(&h, 1, KNIT_STAGE_SERIAL_IN_ORDER),
        b(&h, 2, KNIT_STAGE_SERIAL);
    a.sleep_us = 5000;
    s.sleep_us = 2000;
    b.sleep_us = 2000;
    std::vector<Stage *> stages{&a, &s, &b};
    std::thread canceller;
    std::atomic<int64_t> cancelled_at_ns{0};
    std::atomic<uint64_t> calls_at_cancel{0};
    std::atomic<bool> done{false};
    Result r = run(pool, h, stages, bound, [&](knit_pipeline *pl) {
        canceller = std::thread([&, pl] {
            while (h.produced.load() < 20 && !done.load())
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            cancelled_at_ns = Clock::now().time_since_epoch().count();
            EXPECT_EQ(0, knit_pipeline_cancel(pl));
            // After the cancel returned (it stored `stopping`): at most the
            // input call under way follows. fetch_add(0) as in free_fn.
            calls_at_cancel = h.input_calls.fetch_add(0);
        });
    });
    auto returned = Clock::now().time_since_epoch().count();
    done = true;
    canceller.join();
    EXPECT_EQ(KNIT_ECANCELED, r.rc) << r.error;
    double after_ms = double(returned - cancelled_at_ns.load()) / 1e6;
    EXPECT_LT(after_ms, 1000.0) << "the run returned " << after_ms << " ms after the cancel";
    EXPECT_LE(h.input_calls.load(), calls_at_cancel.load() + 1)
        << "the input went on after the cancel";
    expect_quiescent(h, stages, r);
    EXPECT_GE(h.produced.load(), 20u);
    EXPECT_LT(h.produced.load(), 1000u);
    std::vector<uint64_t> order = s.ran();
    for (uint64_t i = 0; i < order.size(); i++) ASSERT_EQ(i, order[i]);
}

// A cancel at a random moment races with the normal end: the run returns
// 0 (everything completed) or KNIT_ECANCELED, and frees every item once;
// meanwhile another thread reads the stats.
TEST_P(Pipeline, CancelRacesWithTheEnd) {
    Pool pool(workers(), sched());
    const int rounds = int(60 / kScale);
    std::mt19937 rng(1234);
    int cancelled = 0, completed = 0;
    for (int round = 0; round < rounds; round++) {
        const uint64_t n = 100;
        Harness h(n);
        Stage a(&h, 0, KNIT_STAGE_PARALLEL), s(&h, 1, KNIT_STAGE_SERIAL_IN_ORDER);
        a.sleep_us = 20;
        std::vector<Stage *> stages{&a, &s};
        unsigned delay_us = std::uniform_int_distribution<unsigned>(0, 3000)(rng);
        std::thread canceller, reader;
        std::atomic<bool> stop_reading{false};
        Result r = run(
            pool, h, stages, 4,
            [&](knit_pipeline *pl) {
                canceller = std::thread([pl, delay_us] {
                    std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
                    EXPECT_EQ(0, knit_pipeline_cancel(pl));
                });
                reader = std::thread([pl, &stop_reading] {
                    uint64_t last_items = 0;
                    while (!stop_reading.load()) {
                        knit_pipeline_stats st;
                        EXPECT_EQ(0, knit_pipeline_stats_get(pl, &st));
                        EXPECT_GE(st.items, last_items);
                        EXPECT_LE(st.completed + st.dropped, st.items);
                        EXPECT_LE(st.max_in_flight, 4u);
                        last_items = st.items;
                        std::this_thread::yield();
                    }
                });
            },
            [&] {
                canceller.join();
                stop_reading = true;
                reader.join();
            });
        ASSERT_TRUE(r.rc == 0 || r.rc == KNIT_ECANCELED) << r.rc << ": " << r.error;
        expect_quiescent(h, stages, r);
        if (r.rc == 0) {
            completed++;
            EXPECT_EQ(n, r.stats.completed);
            EXPECT_EQ(n, s.calls.load());
        } else {
            cancelled++;
        }
        std::vector<uint64_t> order = s.ran();
        for (uint64_t i = 0; i < order.size(); i++) ASSERT_EQ(i, order[i]);
    }
    std::printf("cancel races: %d cancelled, %d completed first\n", cancelled, completed);
}

// The input fills the item and then fails: that buffer is freed too.
TEST_P(Pipeline, InputFailsAfterFillingItem) {
    Pool pool(workers(), sched());
    struct Ctx {
        int made = 0;
        std::atomic<int> frees{0};
        static void free_fn(void *ctx, void *data, size_t) {
            static_cast<Ctx *>(ctx)->frees++;
            std::free(data);
        }
        static int input(void *p, knit_buf *item) {
            auto *c = static_cast<Ctx *>(p);
            *item = knit_buf{std::malloc(16), 16, &Ctx::free_fn, c};
            c->made++;
            if (c->made == 5) return knit_error(-31, "input filled item 4 and failed");
            return 1;
        }
    } ctx;
    std::vector<knit_stage> ks{
        {KNIT_STAGE_SERIAL, [](void *, uint64_t, knit_buf *) -> int { return 0; }, nullptr}};
    knit_pipeline_options o = KNIT_PIPELINE_OPTIONS_INIT;
    o.input = &Ctx::input;
    o.input_ctx = &ctx;
    o.stages = ks.data();
    o.nstages = 1;
    o.max_in_flight = 2;
    o.flags = g_flags;
    knit_pipeline *pl = nullptr;
    ASSERT_EQ(0, knit_pipeline_create(pool, &o, &pl)) << knit_last_error();
    EXPECT_EQ(-31, knit_pipeline_run(pl));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "input filled item 4 and failed"))
        << knit_last_error();
    knit_pipeline_destroy(pl);
    EXPECT_EQ(5, ctx.made);
    EXPECT_EQ(5, ctx.frees.load()) << "every buffer the input filled is freed once";
}

// A stage cancels the pipeline (from a worker).
TEST_P(Pipeline, CancelFromInsideAStage) {
    Pool pool(workers(), sched());
    for (knit_stage_mode m : {KNIT_STAGE_PARALLEL, KNIT_STAGE_SERIAL, KNIT_STAGE_SERIAL_IN_ORDER}) {
        Harness h(100000, 1000);
        Stage a(&h, 0, KNIT_STAGE_PARALLEL), c(&h, 1, m), z(&h, 2, KNIT_STAGE_PARALLEL);
        a.sleep_us = 200;
        c.cancel_at = 30;
        std::vector<Stage *> stages{&a, &c, &z};
        Result r = run(pool, h, stages, 6, [&](knit_pipeline *pl) { c.cancel_pl = pl; });
        EXPECT_EQ(KNIT_ECANCELED, r.rc) << r.error;
        expect_quiescent(h, stages, r);
        EXPECT_EQ(0u, z.seen[30].load()) << "the cancelling item went on";
        // Items behind 30 may finish before it (tasks need not run in
        // submission order), so the bound is on calls after the cancel.
        EXPECT_LE(h.input_calls.load(), c.input_calls_at_fail.load() + 1)
            << "the input went on after the cancel";
        EXPECT_LT(h.produced.load(), 1000u);
    }
}

// Cancelled before it runs: the input is never called; after a finished
// run, a cancel is harmless and the result stands.
TEST_P(Pipeline, CancelBeforeRunAndAfterRun) {
    Pool pool(workers(), sched());
    {
        Harness h(10);
        Stage a(&h, 0, KNIT_STAGE_PARALLEL);
        std::vector<Stage *> stages{&a};
        Result r = run(pool, h, stages, 4, [](knit_pipeline *pl) {
            EXPECT_EQ(0, knit_pipeline_cancel(pl));
        });
        EXPECT_EQ(KNIT_ECANCELED, r.rc);
        EXPECT_EQ(0u, h.input_calls.load());
        expect_quiescent(h, stages, r);
    }
    {
        Harness h(10);
        Stage a(&h, 0, KNIT_STAGE_PARALLEL);
        std::vector<knit_stage> ks;
        knit_pipeline_options o = make_options(h, ks, {&a}, 4);
        knit_pipeline *pl = nullptr;
        ASSERT_EQ(0, knit_pipeline_create(pool, &o, &pl)) << knit_last_error();
        EXPECT_EQ(0, knit_pipeline_run(pl)) << knit_last_error();
        EXPECT_EQ(0, knit_pipeline_cancel(pl));
        knit_pipeline_stats st;
        EXPECT_EQ(0, knit_pipeline_stats_get(pl, &st));
        EXPECT_EQ(10u, st.completed);
        knit_pipeline_destroy(pl);
        h.expect_all_freed_once();
    }
}

// The last stage sees the very buffer the input made (the stages check
// every item against the buffer it holds: no copies anywhere).
TEST_P(Pipeline, ItemsMoveWithoutCopies) {
    Pool pool(workers(), sched());
    const uint64_t n = 200 / kScale;
    Harness h(n);
    Stage a(&h, 0, KNIT_STAGE_PARALLEL), b(&h, 1, KNIT_STAGE_SERIAL),
        c(&h, 2, KNIT_STAGE_SERIAL_IN_ORDER);
    a.sleep_us = 300;
    std::vector<Stage *> stages{&a, &b, &c};
    Result r = run(pool, h, stages, 8);
    ASSERT_EQ(0, r.rc) << r.error;
    expect_quiescent(h, stages, r);
    EXPECT_EQ(0u, h.repl_made.load());
    for (Stage *s : stages) EXPECT_EQ(n, s->calls.load());
}

// A stage frees the item and puts a new buffer there: later stages see the
// new one, and both the old and the new are freed exactly once.
TEST_P(Pipeline, StageReplacesItem) {
    Pool pool(workers(), sched());
    const uint64_t n = 200 / kScale;
    for (knit_stage_mode m : {KNIT_STAGE_PARALLEL, KNIT_STAGE_SERIAL, KNIT_STAGE_SERIAL_IN_ORDER}) {
        Harness h(n);
        Stage a(&h, 0, KNIT_STAGE_PARALLEL), rep(&h, 1, m), c(&h, 2, KNIT_STAGE_SERIAL_IN_ORDER);
        rep.replace_all = true;
        a.sleep_us = 300;
        std::vector<Stage *> stages{&a, &rep, &c};
        Result r = run(pool, h, stages, 8);
        ASSERT_EQ(0, r.rc) << r.error;
        expect_quiescent(h, stages, r); // c checks it got the replacement
        EXPECT_EQ(n, h.repl_made.load());
        EXPECT_EQ(n, h.repl_freed.load());
    }
}

// Replacement and a failure together: the replacement of the failed item
// (and of every item behind it) is freed once too.
TEST_P(Pipeline, StageReplacesItemThenLaterStageFails) {
    Pool pool(workers(), sched());
    Harness h(500);
    Stage rep(&h, 0, KNIT_STAGE_PARALLEL), f(&h, 1, KNIT_STAGE_SERIAL_IN_ORDER);
    rep.replace_all = true;
    rep.sleep_us = 200;
    f.fail_at = 20;
    f.fail_code = -64;
    std::vector<Stage *> stages{&rep, &f};
    Result r = run(pool, h, stages, 8);
    EXPECT_EQ(-64, r.rc);
    expect_quiescent(h, stages, r);
    EXPECT_GE(h.repl_made.load(), 21u);
}

// A stage frees the item and leaves it empty: later stages get an empty
// buffer and the pipeline frees nothing twice.
TEST_P(Pipeline, StageConsumesItem) {
    Pool pool(workers(), sched());
    const uint64_t n = 100 / kScale;
    Harness h(n);
    Stage eat(&h, 0, KNIT_STAGE_PARALLEL), after(&h, 1, KNIT_STAGE_SERIAL_IN_ORDER);
    eat.consume_all = true;
    after.expect_empty = true;
    std::vector<Stage *> stages{&eat, &after};
    Result r = run(pool, h, stages, 4);
    ASSERT_EQ(0, r.rc) << r.error;
    expect_quiescent(h, stages, r);
    EXPECT_EQ(n, after.calls.load());
}

// An input with nothing: the run returns 0 at once and runs no stage.
TEST_P(Pipeline, EmptyInput) {
    Pool pool(workers(), sched());
    Harness h(0);
    Stage a(&h, 0, KNIT_STAGE_SERIAL_IN_ORDER);
    std::vector<Stage *> stages{&a};
    Result r = run(pool, h, stages, 4);
    EXPECT_EQ(0, r.rc) << r.error;
    EXPECT_EQ(1u, h.input_calls.load());
    EXPECT_EQ(0u, a.calls.load());
    EXPECT_EQ(0u, r.stats.items);
    EXPECT_EQ(0u, r.stats.max_in_flight);
    EXPECT_LT(r.seconds, 1.0);
    expect_quiescent(h, stages, r);
}

// One item, max_in_flight 1, 64 stages (the most).
TEST_P(Pipeline, SixtyFourStages) {
    Pool pool(workers(), sched());
    Harness h(50);
    std::vector<std::unique_ptr<Stage>> own;
    std::vector<Stage *> stages;
    for (unsigned k = 0; k < 64; k++) {
        own.emplace_back(new Stage(&h, k, knit_stage_mode(k % 3)));
        stages.push_back(own.back().get());
    }
    Result r = run(pool, h, stages, 1);
    ASSERT_EQ(0, r.rc) << r.error;
    expect_quiescent(h, stages, r);
    EXPECT_EQ(1u, r.stats.max_in_flight);
    EXPECT_LE(h.max_live.load(), 1);
    for (Stage *s : stages) EXPECT_EQ(50u, s->calls.load());
}

TEST_P(Pipeline, OptionsValidation) {
    Pool pool(workers(), sched());
    Harness h(10);
    Stage a(&h, 0, KNIT_STAGE_PARALLEL);
    std::vector<knit_stage> ks;
    const knit_pipeline_options good = make_options(h, ks, {&a}, 4);
    knit_pipeline *pl = reinterpret_cast<knit_pipeline *>(0x1);

    auto expect_einval = [&](knit_pipeline_options o, const char *what) {
        pl = reinterpret_cast<knit_pipeline *>(0x1);
        EXPECT_EQ(KNIT_EINVAL, knit_pipeline_create(pool, &o, &pl)) << what;
        EXPECT_STRNE("", knit_last_error()) << what;
        EXPECT_EQ(nullptr, pl) << what << ": *out is cleared";
    };
    knit_pipeline_options o = good;
    o.stages = nullptr;
    expect_einval(o, "NULL stages");
    o = good;
    o.nstages = 0;
    expect_einval(o, "nstages 0");
    o = good;
    o.nstages = 65;
    expect_einval(o, "nstages 65");
    o = good;
    o.size = 0;
    expect_einval(o, "size 0");
    o = good;
    o.flags = 2;
    expect_einval(o, "unknown flag 2");
    o = good;
    o.flags = KNIT_PIPELINE_INPUT_IN_TASKS | (1u << 31);
    expect_einval(o, "unknown flag 1 << 31");
    o = good;
    o.size = sizeof(knit_pipeline_options) - 1;
    expect_einval(o, "size too small");
    o = good;
    o.size = sizeof(knit_pipeline_options) + 8;
    expect_einval(o, "size too large");
    o = good;
    o.input = nullptr;
    expect_einval(o, "NULL input");
    o = good;
    o.max_in_flight = size_t(1) << 40;
    expect_einval(o, "max_in_flight 2^40");
    {
        std::vector<knit_stage> bad = ks;
        bad[0].fn = nullptr;
        o = good;
        o.stages = bad.data();
        expect_einval(o, "NULL stage fn");
        bad = ks;
        bad[0].mode = knit_stage_mode(7);
        o.stages = bad.data();
        expect_einval(o, "mode 7");
    }
    EXPECT_EQ(KNIT_EINVAL, knit_pipeline_create(pool, nullptr, &pl));
    EXPECT_EQ(KNIT_EINVAL, knit_pipeline_create(nullptr, &good, &pl));
    EXPECT_EQ(KNIT_EINVAL, knit_pipeline_create(pool, &good, nullptr));
    EXPECT_EQ(KNIT_EINVAL, knit_pipeline_run(nullptr));
    EXPECT_EQ(KNIT_EINVAL, knit_pipeline_cancel(nullptr));
    knit_pipeline_stats st;
    EXPECT_EQ(KNIT_EINVAL, knit_pipeline_stats_get(nullptr, &st));
    knit_pipeline_destroy(nullptr); // fine
    EXPECT_EQ(0u, h.input_calls.load());
    // The good options still work.
    Result r = run(pool, h, {&a}, 4);
    EXPECT_EQ(0, r.rc) << r.error;
    expect_quiescent(h, {&a}, r);
}

// A program built before options.flags existed passes the shorter size:
// accepted, and its input runs on the calling thread (flags read as 0,
// whatever follows the struct in its memory).
TEST(PipelineOptions, SizeFromBeforeFlagsIsAccepted) {
    Pool pool(2, "ticket");
    Harness h(100);
    Stage a(&h, 0, KNIT_STAGE_PARALLEL);
    Stage b(&h, 1, KNIT_STAGE_SERIAL_IN_ORDER);
    std::vector<knit_stage> ks;
    knit_pipeline_options o = make_options(h, ks, {&a, &b}, 4);
    o.size = offsetof(knit_pipeline_options, flags);
    o.flags = 0xdead; // past the old struct: never read
    knit_pipeline *pl = nullptr;
    ASSERT_EQ(0, knit_pipeline_create(pool, &o, &pl)) << knit_last_error();
    h.driver = std::this_thread::get_id();
    EXPECT_EQ(0, knit_pipeline_run(pl)) << knit_last_error();
    knit_pipeline_destroy(pl);
    EXPECT_EQ(100u, h.input_calls.load() - 1); // 100 items, then the 0
    EXPECT_EQ(h.input_calls.load(), h.driver_calls.load()) << "the input ran off the calling thread";
    h.expect_all_freed_once();
    EXPECT_EQ(100u, b.calls.load());
}

// The default mode: once every worker has an item in flight, the calling
// thread runs the stages of the item it just read itself. One worker,
// held in item 0's stage until item 1's stage has run: item 1 can only
// have run on the calling thread (the worker is busy), and the sink still
// sees every item once, in order. With `fail`, item 1's stage (on the
// calling thread) fails: run returns its code and every buffer is freed
// exactly once.
struct DriverRuns {
    std::thread::id driver;
    uint64_t next = 0;
    std::atomic<uint64_t> made{0}, freed{0}, sunk{0};
    std::atomic<bool> one_ran{false}, out_of_order{false};
    std::atomic<bool> one_on_driver{false};
    bool fail = false;
    static void free_fn(void *ctx, void *data, size_t) {
        std::free(data);
        static_cast<DriverRuns *>(ctx)->freed++;
    }
    static int input(void *p, knit_buf *item) {
        auto *c = static_cast<DriverRuns *>(p);
        if (c->next == 32) return 0;
        c->next++;
        *item = knit_buf{std::malloc(16), 16, &DriverRuns::free_fn, c};
        c->made++;
        return 1;
    }
    static int work(void *p, uint64_t seq, knit_buf *) {
        auto *c = static_cast<DriverRuns *>(p);
        if (seq == 0) {
            // Bounded: a runtime that handed item 1 to the busy worker
            // fails the test below instead of hanging it.
            auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (!c->one_ran.load() && std::chrono::steady_clock::now() < until)
                std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        if (seq == 1) {
            c->one_on_driver = std::this_thread::get_id() == c->driver;
            c->one_ran = true;
            if (c->fail) return knit_error(-41, "item 1 failed on purpose");
        }
        return 0;
    }
    static int sink(void *p, uint64_t seq, knit_buf *) {
        auto *c = static_cast<DriverRuns *>(p);
        if (seq != c->sunk.load()) c->out_of_order = true;
        c->sunk++;
        return 0;
    }
};

void run_driver_runs(DriverRuns &c, int want_rc) {
    Pool pool(1, "ticket");
    knit_stage ks[2] = {{KNIT_STAGE_PARALLEL, &DriverRuns::work, &c},
                        {KNIT_STAGE_SERIAL_IN_ORDER, &DriverRuns::sink, &c}};
    knit_pipeline_options o = KNIT_PIPELINE_OPTIONS_INIT;
    o.input = &DriverRuns::input;
    o.input_ctx = &c;
    o.stages = ks;
    o.nstages = 2;
    o.max_in_flight = 4;
    knit_pipeline *pl = nullptr;
    ASSERT_EQ(0, knit_pipeline_create(pool, &o, &pl)) << knit_last_error();
    c.driver = std::this_thread::get_id();
    EXPECT_EQ(want_rc, knit_pipeline_run(pl)) << knit_last_error();
    knit_pipeline_destroy(pl);
    EXPECT_TRUE(c.one_ran.load());
    EXPECT_TRUE(c.one_on_driver.load()) << "item 1 did not run on the calling thread";
    EXPECT_FALSE(c.out_of_order.load());
    EXPECT_EQ(c.made.load(), c.freed.load());
}

TEST(PipelineDefault, CallerRunsAnItemWhenEveryWorkerIsBusy) {
    DriverRuns c;
    run_driver_runs(c, 0);
    EXPECT_EQ(32u, c.made.load());
    EXPECT_EQ(32u, c.sunk.load());
}

TEST(PipelineDefault, FailureInAnItemTheCallerRanStopsThePipeline) {
    DriverRuns c;
    c.fail = true;
    run_driver_runs(c, -41);
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "item 1 failed on purpose"))
        << knit_last_error();
    EXPECT_LT(c.made.load(), 32u); // the input stopped early
}

// With KNIT_PIPELINE_INPUT_IN_TASKS the input runs on the pool's workers,
// one call at a time, and the worker that read an item runs its parallel
// stage itself (nothing else is in flight to take it: max_in_flight 1).
TEST(PipelineOptions, InputInTasksRunsItemOnTheReadingWorker) {
    Pool pool(2, "ticket");
    struct Ctx {
        uint64_t next = 0;
        std::thread::id reader[64];
        std::atomic<int> mismatches{0};
        static int input(void *p, knit_buf *item) {
            auto *c = static_cast<Ctx *>(p);
            if (c->next == 64) return 0;
            c->reader[c->next++] = std::this_thread::get_id();
            *item = knit_buf{nullptr, 0, nullptr, nullptr};
            return 1;
        }
        static int stage(void *p, uint64_t seq, knit_buf *) {
            auto *c = static_cast<Ctx *>(p);
            if (c->reader[seq] != std::this_thread::get_id()) c->mismatches++;
            return 0;
        }
    } ctx;
    knit_stage ks[1] = {{KNIT_STAGE_PARALLEL, &Ctx::stage, &ctx}};
    knit_pipeline_options o = KNIT_PIPELINE_OPTIONS_INIT;
    o.input = &Ctx::input;
    o.input_ctx = &ctx;
    o.stages = ks;
    o.nstages = 1;
    o.max_in_flight = 1;
    o.flags = KNIT_PIPELINE_INPUT_IN_TASKS;
    knit_pipeline *pl = nullptr;
    ASSERT_EQ(0, knit_pipeline_create(pool, &o, &pl)) << knit_last_error();
    EXPECT_EQ(0, knit_pipeline_run(pl)) << knit_last_error();
    knit_pipeline_destroy(pl);
    EXPECT_EQ(64u, ctx.next); // the pipeline lock orders the input's state across workers
    EXPECT_EQ(0, ctx.mismatches.load());
    for (uint64_t i = 0; i < 64; i++) EXPECT_NE(std::this_thread::get_id(), ctx.reader[i]);
}

// knit_pool_destroy from the input (on the thread inside
// knit_pipeline_run) would wait for that very call to leave the pool:
// KNIT_EBUSY, and the pipeline and the pool go on.
TEST(PipelineShutdown, DestroyFromTheInputIsEbusy) {
    knit_pool_options po = KNIT_POOL_OPTIONS_INIT;
    po.threads = 2;
    knit_pool *pool = nullptr;
    ASSERT_EQ(0, knit_pool_create(&po, &pool)) << knit_last_error();
    struct Ctx {
        knit_pool *pool;
        int calls = 0;
        int rc = 0;
        std::string msg;
        static int input(void *p, knit_buf *item) {
            auto *c = static_cast<Ctx *>(p);
            if (c->calls++ == 3) {
                c->rc = knit_pool_destroy(c->pool, KNIT_DRAIN);
                c->msg = knit_last_error();
                return 0;
            }
            *item = knit_buf{nullptr, 0, nullptr, nullptr};
            return 1;
        }
    } ctx{pool, 0, 0, {}};
    knit_stage ks[1] = {{KNIT_STAGE_PARALLEL, [](void *, uint64_t, knit_buf *) -> int { return 0; },
                         nullptr}};
    knit_pipeline_options o = KNIT_PIPELINE_OPTIONS_INIT;
    o.input = &Ctx::input;
    o.input_ctx = &ctx;
    o.stages = ks;
    o.nstages = 1;
    knit_pipeline *pl = nullptr;
    ASSERT_EQ(0, knit_pipeline_create(pool, &o, &pl)) << knit_last_error();
    EXPECT_EQ(0, knit_pipeline_run(pl)) << knit_last_error();
    knit_pipeline_destroy(pl);
    EXPECT_EQ(KNIT_EBUSY, ctx.rc);
    EXPECT_NE(std::string::npos, ctx.msg.find("inside a call into the same pool")) << ctx.msg;
    EXPECT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN)) << knit_last_error();
}

TEST(PipelineShutdown, CreateOnDestroyedPoolIsEshutdown) {
    knit_pool_options po = KNIT_POOL_OPTIONS_INIT;
    po.threads = 1;
    knit_pool *pool = nullptr;
    ASSERT_EQ(0, knit_pool_create(&po, &pool)) << knit_last_error();
    ASSERT_EQ(0, knit_pool_destroy(pool, KNIT_DRAIN));
    Harness h(10);
    Stage a(&h, 0, KNIT_STAGE_PARALLEL);
    std::vector<knit_stage> ks;
    knit_pipeline_options o = make_options(h, ks, {&a}, 4);
    knit_pipeline *pl = nullptr;
    EXPECT_EQ(KNIT_ESHUTDOWN, knit_pipeline_create(pool, &o, &pl));
    EXPECT_EQ(nullptr, pl);
}

// knit_pool_destroy from another thread while a pipeline runs on the pool
// (the destroy happens while the driver is inside a slow input call, with
// up to 64 items in flight). DRAIN runs every item task, so the run
// finishes; CANCEL settles the unstarted item tasks as cancelled, and the
// pipeline must still end (with any code) and free every item once. Each
// runs in a child process (a death test), so a crash or a run that never
// returns fails this test alone. Returns the child's exit code: 0 when
// every check passed.
int destroy_pool_during_run(int how, unsigned flags) {
    g_flags = flags;
    const char *name = how == KNIT_DRAIN ? "KNIT_DRAIN" : "KNIT_CANCEL";
    knit_pool_options po = KNIT_POOL_OPTIONS_INIT;
    po.threads = 2;
    knit_pool *pool = nullptr;
    if (knit_pool_create(&po, &pool) != 0) {
        std::fprintf(stderr, "pool: %s\n", knit_last_error());
        return 10;
    }
    auto *h = new Harness(2000 / kScale); // leaked if the run never ends
    h->slow_at = 100;
    auto *a = new Stage(h, 0, KNIT_STAGE_PARALLEL);
    auto *s = new Stage(h, 1, KNIT_STAGE_SERIAL_IN_ORDER);
    a->sleep_us = 400;
    s->sleep_us = 200;
    std::vector<knit_stage> ks;
    knit_pipeline_options o = make_options(*h, ks, {a, s}, 64);
    knit_pipeline *pl = nullptr;
    if (knit_pipeline_create(pool, &o, &pl) != 0) {
        std::fprintf(stderr, "pipeline: %s\n", knit_last_error());
        return 11;
    }
    struct Run {
        std::mutex mu;
        std::condition_variable cv;
        bool done = false;
        int rc = 1;
    };
    auto run_state = std::make_shared<Run>();
    std::thread driver([pl, run_state, h] {
        h->driver = std::this_thread::get_id();
        int rc = knit_pipeline_run(pl);
        std::lock_guard<std::mutex> lock(run_state->mu);
        run_state->rc = rc;
        run_state->done = true;
        run_state->cv.notify_all();
    });
    while (!h->slow_started.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (int rc = knit_pool_destroy(pool, how); rc != 0) {
        std::fprintf(stderr, "knit_pool_destroy(%s) = %d: %s\n", name, rc, knit_last_error());
        return 12;
    }
    bool done;
    int rc;
    {
        std::unique_lock<std::mutex> lock(run_state->mu);
        done = run_state->cv.wait_for(lock, std::chrono::seconds(15),
                                      [&] { return run_state->done; });
        rc = run_state->rc;
    }
    if (!done) {
        std::fprintf(stderr,
                     "knit_pipeline_run never returned after knit_pool_destroy(%s): %" PRIu64
                     " items made, %" PRIu64 " freed; the rest were in item tasks the pool "
                     "cancelled\n",
                     name, h->produced.load(), h->freed.load());
        driver.detach(); // blocked for good; h, a, s and pl leak
        return 13;
    }
    driver.join();
    int bad = 0;
    if (how == KNIT_DRAIN ? rc != 0 : !(rc == 0 || rc == KNIT_ECANCELED || rc == KNIT_ESHUTDOWN)) {
        std::fprintf(stderr, "knit_pipeline_run returned %d after knit_pool_destroy(%s)\n", rc,
                     name);
        bad = 14;
    }
    knit_pipeline_stats st;
    knit_pipeline_stats_get(pl, &st);
    knit_pipeline_destroy(pl);
    if (h->produced.load() != h->freed.load() || h->double_frees.load() != 0 ||
        st.items != h->produced.load()) {
        std::fprintf(stderr, "%" PRIu64 " items made, %" PRIu64 " freed, %d double frees, stats.items %" PRIu64 "\n",
                     h->produced.load(), h->freed.load(), h->double_frees.load(), st.items);
        bad = 15;
    }
    delete a;
    delete s;
    delete h;
    return bad;
}

TEST(PipelineShutdown, PoolDestroyDrainDuringRun) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::_Exit(destroy_pool_during_run(KNIT_DRAIN, 0)), ::testing::ExitedWithCode(0), "");
}

TEST(PipelineShutdown, PoolDestroyDrainDuringRunInputInTasks) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::_Exit(destroy_pool_during_run(KNIT_DRAIN, KNIT_PIPELINE_INPUT_IN_TASKS)),
                ::testing::ExitedWithCode(0), "");
}

TEST(PipelineShutdown, PoolDestroyCancelDuringRun) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::_Exit(destroy_pool_during_run(KNIT_CANCEL, 0)), ::testing::ExitedWithCode(0), "");
}

TEST(PipelineShutdown, PoolDestroyCancelDuringRunInputInTasks) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::_Exit(destroy_pool_during_run(KNIT_CANCEL, KNIT_PIPELINE_INPUT_IN_TASKS)),
                ::testing::ExitedWithCode(0), "");
}

// Created, never run, destroyed: nothing leaks (LSan checks).
TEST_P(Pipeline, CreateAndDestroyWithoutRun) {
    Pool pool(workers(), sched());
    Harness h(10);
    Stage a(&h, 0, KNIT_STAGE_SERIAL_IN_ORDER);
    std::vector<knit_stage> ks;
    knit_pipeline_options o = make_options(h, ks, {&a}, 1000);
    knit_pipeline *pl = nullptr;
    ASSERT_EQ(0, knit_pipeline_create(pool, &o, &pl)) << knit_last_error();
    knit_pipeline_destroy(pl);
    EXPECT_EQ(0u, h.input_calls.load());
}

// A second run is an error, not a crash, and calls nothing.
TEST_P(Pipeline, RunTwiceIsAnError) {
    Pool pool(workers(), sched());
    Harness h(20);
    Stage a(&h, 0, KNIT_STAGE_SERIAL);
    std::vector<knit_stage> ks;
    knit_pipeline_options o = make_options(h, ks, {&a}, 4);
    knit_pipeline *pl = nullptr;
    ASSERT_EQ(0, knit_pipeline_create(pool, &o, &pl)) << knit_last_error();
    EXPECT_EQ(0, knit_pipeline_run(pl)) << knit_last_error();
    uint64_t calls = h.input_calls.load();
    int rc = knit_pipeline_run(pl);
    EXPECT_LT(rc, 0);
    EXPECT_STRNE("", knit_last_error());
    EXPECT_EQ(calls, h.input_calls.load());
    EXPECT_EQ(20u, a.calls.load());
    knit_pipeline_stats st;
    EXPECT_EQ(0, knit_pipeline_stats_get(pl, &st));
    EXPECT_EQ(20u, st.items);
    knit_pipeline_destroy(pl);
    h.expect_all_freed_once();
}

// knit_pipeline_run from inside a task on a 1-worker pool: the one worker
// is the driver, so it must run the item tasks itself while it waits.
TEST_P(Pipeline, RunInsideTaskOnOneWorker) {
    Pool pool(1, sched());
    const uint64_t n = 100 / kScale;
    Harness h(n);
    h.driver_is_worker = true; // the one worker runs the task that drives
    Stage a(&h, 0, KNIT_STAGE_PARALLEL), s(&h, 1, KNIT_STAGE_SERIAL_IN_ORDER),
        b(&h, 2, KNIT_STAGE_SERIAL);
    a.sleep_us = 200;
    std::vector<Stage *> stages{&a, &s, &b};
    struct Ctx {
        Harness *h;
        std::vector<Stage *> *stages;
        Result r;
    } ctx{&h, &stages, {}};
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(
                     pool,
                     [](knit_task *t, void *arg) -> void * {
                         auto *c = static_cast<Ctx *>(arg);
                         c->r = run(knit_task_pool(t), *c->h, *c->stages, 4);
                         return nullptr;
                     },
                     &ctx, &f));
    int rc = knit_await(f, 60'000'000'000, nullptr);
    if (rc == KNIT_ETIMEDOUT) {
        std::fprintf(stderr, "FATAL: a pipeline inside a task did not finish in 60 s\n");
        std::_Exit(1);
    }
    EXPECT_EQ(0, rc);
    knit_future_release(f);
    EXPECT_EQ(0, ctx.r.rc) << ctx.r.error;
    expect_quiescent(h, stages, ctx.r);
    std::vector<uint64_t> order = s.ran();
    ASSERT_EQ(n, order.size());
    for (uint64_t i = 0; i < n; i++) ASSERT_EQ(i, order[i]);
}

// A stage that runs a parallel_for on the same pool (nesting).
TEST_P(Pipeline, StageRunsParallelFor) {
    Pool pool(workers(), sched());
    const uint64_t n = 60;
    Harness h(n);
    struct Ctx {
        knit_pool *pool;
        std::atomic<uint64_t> total{0};
        std::atomic<int> failures{0};
    } ctx{pool.p};
    std::vector<knit_stage> ks{
        {KNIT_STAGE_PARALLEL,
         [](void *c, uint64_t, knit_buf *) -> int {
             auto *x = static_cast<Ctx *>(c);
             int rc = knit_parallel_for(
                 x->pool, 0, 1000, 10,
                 [](void *p, size_t b, size_t e) -> int {
                     static_cast<Ctx *>(p)->total += e - b;
                     return 0;
                 },
                 x);
             if (rc != 0) x->failures++;
             return rc;
         },
         &ctx},
        {KNIT_STAGE_SERIAL_IN_ORDER, [](void *, uint64_t, knit_buf *) -> int { return 0; },
         nullptr}};
    knit_pipeline_options o = KNIT_PIPELINE_OPTIONS_INIT;
    o.input = &Harness::input;
    o.input_ctx = &h;
    o.stages = ks.data();
    o.nstages = ks.size();
    o.max_in_flight = 4;
    o.flags = g_flags;
    knit_pipeline *pl = nullptr;
    ASSERT_EQ(0, knit_pipeline_create(pool, &o, &pl)) << knit_last_error();
    EXPECT_EQ(0, knit_pipeline_run(pl)) << knit_last_error();
    knit_pipeline_destroy(pl);
    EXPECT_EQ(0, ctx.failures.load());
    EXPECT_EQ(n * 1000, ctx.total.load());
    h.expect_all_freed_once();
}

// Two pipelines on the same pool at once, from two threads.
TEST_P(Pipeline, ConcurrentPipelines) {
    Pool pool(workers(), sched());
    const uint64_t n = 200 / kScale;
    Harness h1(n), h2(n);
    Stage a1(&h1, 0, KNIT_STAGE_PARALLEL), s1(&h1, 1, KNIT_STAGE_SERIAL_IN_ORDER);
    Stage a2(&h2, 0, KNIT_STAGE_PARALLEL), s2(&h2, 1, KNIT_STAGE_SERIAL_IN_ORDER);
    a1.sleep_us = a2.sleep_us = 500;
    Result r1, r2;
    std::thread t([&] { r1 = run(pool, h1, {&a1, &s1}, 4); });
    r2 = run(pool, h2, {&a2, &s2}, 4);
    t.join();
    EXPECT_EQ(0, r1.rc) << r1.error;
    EXPECT_EQ(0, r2.rc) << r2.error;
    expect_quiescent(h1, {&a1, &s1}, r1);
    expect_quiescent(h2, {&a2, &s2}, r2);
    for (Stage *s : {&s1, &s2}) {
        std::vector<uint64_t> order = s->ran();
        ASSERT_EQ(n, order.size());
        for (uint64_t i = 0; i < n; i++) ASSERT_EQ(i, order[i]);
    }
}

// A pool whose max_pending is 1, with either backpressure policy: item
// tasks that cannot be submitted still make progress.
TEST_P(Pipeline, TinyMaxPending) {
    for (int bp : {int(KNIT_BLOCK), int(KNIT_FAIL)}) {
        SCOPED_TRACE(bp == KNIT_BLOCK ? "KNIT_BLOCK" : "KNIT_FAIL");
        Pool pool(workers(), sched(), 1, bp);
        const uint64_t n = 200 / kScale;
        Harness h(n);
        Stage a(&h, 0, KNIT_STAGE_PARALLEL), s(&h, 1, KNIT_STAGE_SERIAL),
            o(&h, 2, KNIT_STAGE_SERIAL_IN_ORDER);
        a.sleep_us = 200;
        std::vector<Stage *> stages{&a, &s, &o};
        Result r = run(pool, h, stages, 8);
        ASSERT_EQ(0, r.rc) << r.error;
        expect_quiescent(h, stages, r);
        std::vector<uint64_t> order = o.ran();
        ASSERT_EQ(n, order.size());
        for (uint64_t i = 0; i < n; i++) ASSERT_EQ(i, order[i]);
        EXPECT_EQ(1, s.max_active.load());
        EXPECT_EQ(1, o.max_active.load());
    }
}

// Many short items, no sleeps: the bookkeeping under contention.
TEST_P(Pipeline, ManyFastItems) {
    Pool pool(workers(), sched());
    const uint64_t n = 100000 / (kScale * kScale);
    Harness h(n);
    Stage a(&h, 0, KNIT_STAGE_PARALLEL), s(&h, 1, KNIT_STAGE_SERIAL),
        o(&h, 2, KNIT_STAGE_SERIAL_IN_ORDER), b(&h, 3, KNIT_STAGE_PARALLEL);
    std::vector<Stage *> stages{&a, &s, &o, &b};
    Result r = run(pool, h, stages, 16);
    ASSERT_EQ(0, r.rc) << r.error;
    expect_quiescent(h, stages, r);
    EXPECT_EQ(n, r.stats.completed);
    EXPECT_LE(h.max_live.load(), 16);
    std::vector<uint64_t> order = o.ran();
    ASSERT_EQ(n, order.size());
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < n; i++) wrong += order[i] != i;
    EXPECT_EQ(0u, wrong);
    EXPECT_EQ(1, s.max_active.load());
    EXPECT_EQ(1, o.max_active.load());
}

INSTANTIATE_TEST_SUITE_P(Scheds, Pipeline,
                         ::testing::Combine(::testing::Values("ticket", "dekker"),
                                            ::testing::Values(1u, 2u),
                                            ::testing::Values(0u, KNIT_PIPELINE_INPUT_IN_TASKS)),
                         [](const ::testing::TestParamInfo<Config> &info) {
                             return std::string(std::get<0>(info.param)) + "_" +
                                    std::to_string(std::get<1>(info.param)) + "w" +
                                    (std::get<2>(info.param) ? "_input_in_tasks" : "");
                         });

} // namespace
