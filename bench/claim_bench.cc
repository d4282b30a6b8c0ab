// Claim cost per discipline: an idle poll, an uncontended claim of a batch,
// and two consumers contending for one producer's lanes.
#include <benchmark/benchmark.h>

#include <atomic>
#include <thread>
#include <vector>

#include "knit/sched.h"
#include "runtime/carpet.h"
#include "carpet_util.h"

namespace {

using knit_bench::make_carpet;
using knit_bench::produce;

int count_visit(void *ctx, unsigned) {
    ++*static_cast<uint64_t *>(ctx);
    return 0;
}

// A poll of an empty carpet (consumer 1 of 2): what an idle worker pays.
void BM_IdlePoll(benchmark::State &state, const char *sched) {
    knit_carpet *c = make_carpet(sched, 2, 8);
    uint64_t n = 0;
    for (auto _ : state) benchmark::DoNotOptimize(knit__carpet_claim(c, 1, count_visit, &n));
    knit__carpet_destroy(c);
}
BENCHMARK_CAPTURE(BM_IdlePoll, ticket, "ticket");
BENCHMARK_CAPTURE(BM_IdlePoll, dekker, "dekker");

// Publish 8 lanes (one region / one batch), claim them in one call; the
// time is per task and includes the publish.
void BM_ClaimBatch(benchmark::State &state, const char *sched) {
    knit_carpet *c = make_carpet(sched, 2, 8);
    knit__lane_task t{};
    uint64_t n = 0;
    for (auto _ : state) {
        for (int i = 0; i < 8; i++) knit__carpet_publish(c, &t, nullptr, 0);
        knit__carpet_flush(c);
        while (knit__carpet_claim(c, 0, count_visit, &n) > 0) {
        }
    }
    state.SetItemsProcessed(state.iterations() * 8);
    knit__carpet_destroy(c);
}
BENCHMARK_CAPTURE(BM_ClaimBatch, ticket, "ticket");
BENCHMARK_CAPTURE(BM_ClaimBatch, dekker, "dekker");

// One producer (this thread) and two consumer threads contending; the
// time is per task. On a 2-core machine three threads share two cores:
// consumers yield when they find nothing so the producer keeps running.
void BM_TwoConsumers(benchmark::State &state, const char *sched) {
    const uint64_t total = 1 << 20;
    for (auto _ : state) {
        knit_carpet *c = make_carpet(sched, 2, 8);
        std::atomic<uint64_t> seen{0};
        std::vector<std::thread> consumers;
        for (unsigned id = 0; id < 2; id++)
            consumers.emplace_back([=, &seen] {
                uint64_t mine = 0;
                while (seen.load(std::memory_order_relaxed) < total) {
                    uint64_t before = mine;
                    int k = knit__carpet_claim(c, id, count_visit, &mine);
                    if (k > 0)
                        seen.fetch_add(mine - before, std::memory_order_relaxed);
                    else
                        std::this_thread::yield();
                }
            });
        produce(c, total);
        for (auto &th : consumers) th.join();
        knit__carpet_destroy(c);
    }
    state.SetItemsProcessed(state.iterations() * total);
}
BENCHMARK_CAPTURE(BM_TwoConsumers, ticket, "ticket")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TwoConsumers, dekker, "dekker")->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
