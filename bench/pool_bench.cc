// The pool from a user's side: round trip of one task, throughput of 1M
// empty tasks from one thread, fib(30) by nested submit/await, and the CPU
// an idle pool burns. Workers: 2 (this machine's cores) unless
// KNIT_BENCH_THREADS says otherwise; discipline from KNIT_SCHED.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "knit/knit.h"

namespace {

unsigned bench_threads() {
    const char *t = std::getenv("KNIT_BENCH_THREADS");
    return t ? static_cast<unsigned>(std::atoi(t)) : 2u;
}

knit_pool *make_pool() {
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = bench_threads();
    knit_pool *p = nullptr;
    if (knit_pool_create(&o, &p) != 0) std::abort();
    return p;
}

void *empty(knit_task *, void *arg) { return arg; }

// One empty task submitted from outside the pool and awaited.
void BM_RoundTrip(benchmark::State &state) {
    knit_pool *p = make_pool();
    for (auto _ : state) {
        knit_future *f;
        knit_submit(p, empty, nullptr, &f);
        knit_await(f, -1, nullptr);
        knit_future_release(f);
    }
    knit_pool_destroy(p, KNIT_DRAIN);
}
BENCHMARK(BM_RoundTrip)->Unit(benchmark::kNanosecond)->UseRealTime();

// 1M empty tasks from one thread, then await them all.
void BM_Throughput1(benchmark::State &state) {
    const size_t n = 1000000;
    knit_pool *p = make_pool();
    std::vector<knit_future *> fs(n);
    for (auto _ : state) {
        for (size_t i = 0; i < n; i++) knit_submit(p, empty, nullptr, &fs[i]);
        knit_await_all(fs.data(), n, -1);
        for (auto *f : fs) knit_future_release(f);
    }
    state.SetItemsProcessed(state.iterations() * n);
    knit_pool_destroy(p, KNIT_DRAIN);
}
BENCHMARK(BM_Throughput1)->Unit(benchmark::kMillisecond)->UseRealTime();

// Same, detached (no futures kept): the submit path alone.
void BM_Throughput1Detached(benchmark::State &state) {
    const size_t n = 1000000;
    knit_pool *p = make_pool();
    for (auto _ : state) {
        for (size_t i = 0; i < n; i++) knit_submit(p, empty, nullptr, nullptr);
        knit_future *last;
        knit_submit(p, empty, nullptr, &last);
        knit_await(last, -1, nullptr);
        knit_future_release(last);
    }
    state.SetItemsProcessed(state.iterations() * n);
    knit_pool_destroy(p, KNIT_DRAIN);
}
BENCHMARK(BM_Throughput1Detached)->Unit(benchmark::kMillisecond)->UseRealTime();

void *fib(knit_task *t, void *arg) {
    intptr_t n = reinterpret_cast<intptr_t>(arg);
    if (n < 2) return arg;
    knit_future *a;
    knit_submit(knit_task_pool(t), fib, reinterpret_cast<void *>(n - 1), &a);
    void *b = fib(t, reinterpret_cast<void *>(n - 2));
    void *ra;
    knit_await(a, -1, &ra);
    knit_future_release(a);
    return reinterpret_cast<void *>(reinterpret_cast<intptr_t>(ra) +
                                    reinterpret_cast<intptr_t>(b));
}

intptr_t fib_serial(intptr_t n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

// fib(30) by nested submit/await, no cutoff (1,664,079 tasks).
void BM_Fib30(benchmark::State &state) {
    knit_pool *p = make_pool();
    for (auto _ : state) {
        knit_future *f;
        knit_submit(p, fib, reinterpret_cast<void *>(30), &f);
        void *r;
        knit_await(f, -1, &r);
        knit_future_release(f);
        if (reinterpret_cast<intptr_t>(r) != 832040) state.SkipWithError("wrong fib");
    }
    state.counters["ns_per_task"] = benchmark::Counter(
        1664079.0 * state.iterations(), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    knit_pool_destroy(p, KNIT_DRAIN);
}
BENCHMARK(BM_Fib30)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Fib30Serial(benchmark::State &state) {
    for (auto _ : state) benchmark::DoNotOptimize(fib_serial(30));
}
BENCHMARK(BM_Fib30Serial)->Unit(benchmark::kMillisecond);

double cpu_seconds() {
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// CPU used by an idle pool over 2 s, starting 100 ms after a burst.
void BM_IdleCpu(benchmark::State &state) {
    for (auto _ : state) {
        knit_pool *p = make_pool();
        for (int i = 0; i < 10000; i++) knit_submit(p, empty, nullptr, nullptr);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        double c0 = cpu_seconds();
        std::this_thread::sleep_for(std::chrono::seconds(2));
        double c1 = cpu_seconds();
        state.counters["idle_cpu_ms_per_2s"] = (c1 - c0) * 1e3;
        knit_pool_destroy(p, KNIT_DRAIN);
    }
}
BENCHMARK(BM_IdleCpu)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
