// The lane core: single-threaded publish+claim cost, and the hand-off rate
// between one producer thread and one consumer thread.
#include <benchmark/benchmark.h>

#include <atomic>
#include <thread>

#include "knit/sched.h"
#include "runtime/carpet.h"
#include "carpet_util.h"

namespace {

using knit_bench::make_carpet;
using knit_bench::produce;

struct Sum {
    knit_carpet *c;
    uint64_t sum = 0;
    explicit Sum(knit_carpet *carpet) : c(carpet) {}
    static int visit(void *ctx, unsigned lane) {
        auto *s = static_cast<Sum *>(ctx);
        s->sum += reinterpret_cast<uintptr_t>(knit__carpet_slot(s->c, lane)->task.arg);
        return 0;
    }
};

// One publish, one flush, one claim of one lane, on one thread.
void BM_PublishClaimOne(benchmark::State &state, const char *sched) {
    knit_carpet *c = make_carpet(sched, 1, 8);
    Sum sum(c);
    knit__lane_task t{};
    uint64_t i = 0;
    for (auto _ : state) {
        t.arg = reinterpret_cast<void *>(++i);
        knit__carpet_publish(c, &t, nullptr, 0);
        knit__carpet_flush(c);
        knit__carpet_claim(c, 0, &Sum::visit, &sum);
    }
    benchmark::DoNotOptimize(sum.sum);
    state.SetItemsProcessed(state.iterations());
    knit__carpet_destroy(c);
}
BENCHMARK_CAPTURE(BM_PublishClaimOne, single, "single");
BENCHMARK_CAPTURE(BM_PublishClaimOne, ticket, "ticket");
BENCHMARK_CAPTURE(BM_PublishClaimOne, dekker, "dekker");

// One producer thread, one consumer thread, `range(0)` tasks per iteration
// through one carpet; reports tasks/s.
void BM_Handoff(benchmark::State &state, const char *sched) {
    const uint64_t n = static_cast<uint64_t>(state.range(0));
    for (auto _ : state) {
        knit_carpet *c = make_carpet(sched, 1, 8);
        std::thread consumer([c, n] {
            Sum sum(c);
            uint64_t seen = 0;
            unsigned idle = 0;
            while (seen < n) {
                int k = knit__carpet_claim(c, 0, &Sum::visit, &sum);
                if (k > 0) {
                    seen += k;
                    idle = 0;
                } else if (++idle > 256) {
                    knit__carpet_park(c, 1'000'000);
                    idle = 0;
                }
            }
            benchmark::DoNotOptimize(sum.sum);
        });
        produce(c, n);
        consumer.join();
        knit__carpet_destroy(c);
    }
    state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK_CAPTURE(BM_Handoff, single, "single")->Arg(1 << 20)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Handoff, ticket, "ticket")->Arg(1 << 20)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Handoff, dekker, "dekker")->Arg(1 << 20)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
