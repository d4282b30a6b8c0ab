// Payloads: the arena's allocate+free against malloc/free, and a buffer
// passed through 3 stages as a moved buffer against copying it each time.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "knit/knit.h"

namespace {

knit_pool *make_pool(size_t arena) {
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 2;
    o.arena_bytes = arena;
    o.max_payload = arena / 2;
    knit_pool *p = nullptr;
    if (knit_pool_create(&o, &p) != 0) std::abort();
    return p;
}

void BM_ArenaAllocFree(benchmark::State &state) {
    knit_pool *p = make_pool(64 << 20);
    size_t n = static_cast<size_t>(state.range(0));
    for (auto _ : state) {
        void *m = knit_payload_alloc(p, n);
        benchmark::DoNotOptimize(m);
        knit_payload_free(p, m);
    }
    knit_pool_destroy(p, KNIT_DRAIN);
}
BENCHMARK(BM_ArenaAllocFree)->Arg(64)->Arg(4096)->Arg(65536)->Arg(1 << 20);

void BM_MallocFree(benchmark::State &state) {
    size_t n = static_cast<size_t>(state.range(0));
    for (auto _ : state) {
        void *m = std::malloc(n);
        benchmark::DoNotOptimize(m);
        std::free(m);
    }
}
BENCHMARK(BM_MallocFree)->Arg(64)->Arg(4096)->Arg(65536)->Arg(1 << 20);

// A stage touches its bytes (one read pass, as a real stage would).
void *stage(knit_task *t, void *) {
    size_t n = 0;
    const unsigned char *b = static_cast<const unsigned char *>(knit_task_bytes(t, &n));
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i += 64) sum += b[i];
    knit_buf mine = knit_task_take_buf(t);
    knit_task_return_buf(t, &mine);
    return reinterpret_cast<void *>(sum);
}

// Three stages, the buffer moved from one to the next: no copies. The
// bytes are the caller's (a borrowed knit_buf: free_fn NULL), as in the
// copy variant, so both measure the passing and not the allocation.
void BM_ThreeStagesMoved(benchmark::State &state) {
    size_t n = static_cast<size_t>(state.range(0));
    knit_pool *p = make_pool(64 << 20);
    std::vector<unsigned char> bytes(n);
    for (auto _ : state) {
        knit_buf b = {bytes.data(), n, nullptr, nullptr};
        for (int s = 0; s < 3; s++) {
            knit_future *f;
            knit_submit_buf(p, stage, &b, &f);
            knit_await(f, -1, nullptr);
            knit_future_take_buf(f, &b);
            knit_future_release(f);
        }
        knit_buf_free(&b);
    }
    knit_pool_destroy(p, KNIT_DRAIN);
}
BENCHMARK(BM_ThreeStagesMoved)->Arg(4096)->Arg(65536)->Arg(1 << 20)->Arg(16 << 20)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The same three stages, each handed a copy (knit_submit_copy).
void BM_ThreeStagesCopied(benchmark::State &state) {
    size_t n = static_cast<size_t>(state.range(0));
    knit_pool *p = make_pool(64 << 20);
    std::vector<unsigned char> bytes(n);
    for (auto _ : state) {
        for (int s = 0; s < 3; s++) {
            knit_future *f;
            knit_submit_copy(p, stage, bytes.data(), n, &f);
            knit_await(f, -1, nullptr);
            knit_buf out;
            knit_future_take_buf(f, &out);
            std::memcpy(bytes.data(), out.data, n);  // the stage's result, copied back
            knit_buf_free(&out);
            knit_future_release(f);
        }
    }
    knit_pool_destroy(p, KNIT_DRAIN);
}
BENCHMARK(BM_ThreeStagesCopied)->Arg(4096)->Arg(65536)->Arg(1 << 20)->Arg(16 << 20)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
