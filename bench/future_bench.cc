// Futures: allocate + settle + release of an empty task's future, per
// discipline, submitted and awaited from outside the pool and from inside
// a task (where await runs other work instead of blocking). Part of
// //bench:micro (pool_bench's BM_RoundTrip is the same from outside under
// $KNIT_SCHED).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>

#include "knit/knit.h"

namespace {

knit_pool *make_pool(const char *sched) {
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 2;
    o.sched = sched;
    knit_pool *p = nullptr;
    if (knit_pool_create(&o, &p) != 0) std::abort();
    return p;
}

void *empty(knit_task *, void *arg) { return arg; }

// From outside: submit one empty task, await it, release the future.
void BM_FutureOutside(benchmark::State &state, const char *sched) {
    knit_pool *p = make_pool(sched);
    for (auto _ : state) {
        knit_future *f;
        if (knit_submit(p, empty, nullptr, &f) != 0) state.SkipWithError("submit");
        knit_await(f, -1, nullptr);
        knit_future_release(f);
    }
    knit_pool_destroy(p, KNIT_DRAIN);
}
BENCHMARK_CAPTURE(BM_FutureOutside, ticket, "ticket")->UseRealTime();
BENCHMARK_CAPTURE(BM_FutureOutside, dekker, "dekker")->UseRealTime();

constexpr int kInner = 1000;

// Inside a task: kInner submit + await + release of empty children.
void *inner_loop(knit_task *t, void *) {
    knit_pool *p = knit_task_pool(t);
    uintptr_t sum = 0;
    for (int i = 0; i < kInner; i++) {
        knit_future *f;
        if (knit_submit(p, empty, reinterpret_cast<void *>(uintptr_t{1}), &f) != 0) return nullptr;
        void *r = nullptr;
        knit_await(f, -1, &r);
        knit_future_release(f);
        sum += reinterpret_cast<uintptr_t>(r);
    }
    return reinterpret_cast<void *>(sum);
}

void BM_FutureInside(benchmark::State &state, const char *sched) {
    knit_pool *p = make_pool(sched);
    for (auto _ : state) {
        knit_future *f;
        knit_submit(p, inner_loop, nullptr, &f);
        void *r = nullptr;
        knit_await(f, -1, &r);
        knit_future_release(f);
        if (reinterpret_cast<uintptr_t>(r) != kInner) state.SkipWithError("lost a child");
    }
    state.SetItemsProcessed(state.iterations() * kInner);
    state.counters["ns_per_future"] = benchmark::Counter(
        double(kInner) * state.iterations(),
        benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    knit_pool_destroy(p, KNIT_DRAIN);
}
BENCHMARK_CAPTURE(BM_FutureInside, ticket, "ticket")->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_FutureInside, dekker, "dekker")->UseRealTime()->Unit(benchmark::kMicrosecond);

// Detached (no future kept): what the future itself costs, by difference.
void BM_SubmitDetached(benchmark::State &state, const char *sched) {
    knit_pool *p = make_pool(sched);
    for (auto _ : state) knit_submit(p, empty, nullptr, nullptr);
    knit_future *last;
    knit_submit(p, empty, nullptr, &last);
    knit_await(last, -1, nullptr);
    knit_future_release(last);
    knit_pool_destroy(p, KNIT_DRAIN);
}
BENCHMARK_CAPTURE(BM_SubmitDetached, ticket, "ticket")->UseRealTime();
BENCHMARK_CAPTURE(BM_SubmitDetached, dekker, "dekker")->UseRealTime();

}  // namespace
