// oneTBB's side of //bench:compare (Debian's libtbb-dev, oneTBB 2021).
//
//   tbb_work --row NAME --threads N [--reps R] [--quick]
//
// N threads: tbb::global_control::max_allowed_parallelism = N, oneTBB's
// documented way to cap the threads it uses (the calling thread counts
// among them and works while it waits in task_group::wait; N - 1 workers).
// Usage per row (each the documented idiom):
//   rtt       task_arena::enqueue(task_group::defer(f)), then the caller
//             joins the arena to wait: arena.execute([&] { tg.wait(); })
//   throughput-1, idle burst  task_group::run x n, task_group::wait
//   throughput-4  4 threads, each its own task_group (run x n, wait)
//   fib, skynet   recursive task_group (run children, wait)
//   pipeline  tbb::parallel_pipeline: serial_in_order -> parallel ->
//             serial_in_order filters, 4 * N live tokens
//   wake      task_arena::enqueue(f) (fire and forget); the sampler naps
//             until the task sets a flag (work_util.h)
//   reduce    tbb::parallel_reduce, the functional form: blocked_range,
//             identity 0.0, a body that adds the range into its init
//             (wu_sum_range), std::plus<double>(), the default
//             auto_partitioner (the threads: global_control, as above);
//             and, as variant "det", tbb::parallel_deterministic_reduce
//             with the same body and combine. It uses simple_partitioner,
//             which splits down to the range's grain (default 1), so the
//             range gets grain n / 256, knit's default: both then fold
//             the same 256 pieces in a fixed shape.
// Output: see work_util.h.
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/parallel_reduce.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "work_util.h"

namespace {

wu_opts O;

// ---- rtt ----

void row_rtt() {
    unsigned n = WU_RTT_N(O.quick);
    tbb::task_arena arena(static_cast<int>(O.threads));
    tbb::task_group tg;  // reusable once wait() returned
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        wu_reset();
        int64_t t0 = wu_now_ns();
        for (unsigned i = 0; i < n; i++) {
            arena.enqueue(tg.defer([] { wu_count(); }));
            arena.execute([&] { tg.wait(); });
        }
        int64_t t1 = wu_now_ns();
        wu_check_count("rtt", n);
        if (rep > 0) wu_result(&O, "rtt", rep, double(t1 - t0) / n, "ns", "lower");
    }
}

// ---- throughput ----

void run_n(unsigned n) {
    tbb::task_group tg;
    for (unsigned i = 0; i < n; i++) tg.run([] { wu_count(); });
    tg.wait();
}

void row_tp1() {
    unsigned n = WU_TP1_N(O.quick);
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        wu_reset();
        int64_t t0 = wu_now_ns();
        run_n(n);
        int64_t t1 = wu_now_ns();
        wu_check_count("throughput-1", n);
        if (rep > 0)
            wu_result(&O, "throughput-1", rep, n / (double(t1 - t0) * 1e-9) / 1e6, "Mtasks/s",
                      "higher");
    }
}

// A one-shot start line for the submitters (std::barrier is C++20).
class StartLine {
  public:
    explicit StartLine(unsigned parties) : left_(parties) {}
    void arrive_and_wait() {
        std::unique_lock<std::mutex> lk(mu_);
        if (--left_ == 0) {
            cv_.notify_all();
        } else {
            cv_.wait(lk, [this] { return left_ == 0; });
        }
    }

  private:
    std::mutex mu_;
    std::condition_variable cv_;
    unsigned left_;
};

void row_tp4() {
    unsigned per = WU_TP4_PER(O.quick);
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        wu_reset();
        StartLine start(WU_TP4_THREADS + 1);
        std::vector<std::thread> th;
        for (unsigned i = 0; i < WU_TP4_THREADS; i++)
            th.emplace_back([&] {
                start.arrive_and_wait();
                run_n(per);
            });
        start.arrive_and_wait();
        int64_t t0 = wu_now_ns();
        for (auto &t : th) t.join();
        int64_t t1 = wu_now_ns();
        wu_check_count("throughput-4", uint64_t(per) * WU_TP4_THREADS);
        if (rep > 0)
            wu_result(&O, "throughput-4", rep,
                      double(per) * WU_TP4_THREADS / (double(t1 - t0) * 1e-9) / 1e6, "Mtasks/s",
                      "higher");
    }
}

// ---- fib, skynet ----

int64_t fib(int n) {
    if (n < 2) return n;
    int64_t a = 0;
    tbb::task_group tg;
    tg.run([&] { a = fib(n - 1); });
    int64_t b = fib(n - 2);
    tg.wait();
    return a + b;
}

void row_fib() {
    int n = WU_FIB_N(O.quick);
    int64_t want = wu_fib_serial(n);
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        int64_t t0 = wu_now_ns();
        int64_t r = fib(n);
        int64_t t1 = wu_now_ns();
        if (r != want) wu_die("fib(%d) = %lld, expected %lld", n, (long long)r, (long long)want);
        wu_fib_results(&O, rep, n, (double)(t1 - t0));
    }
}

uint64_t skynet(uint64_t num, uint64_t size) {
    if (size == 1) return num;
    uint64_t sub = size / 10, part[10];
    tbb::task_group tg;
    for (unsigned i = 0; i < 10; i++) tg.run([&part, i, num, sub] { part[i] = skynet(num + i * sub, sub); });
    tg.wait();
    uint64_t sum = 0;
    for (uint64_t p : part) sum += p;
    return sum;
}

void row_skynet() {
    int depth = WU_SKYNET_DEPTH(O.quick);
    uint64_t want = wu_skynet_sum(depth);
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        int64_t t0 = wu_now_ns();
        uint64_t r = skynet(0, wu_pow10(depth));
        int64_t t1 = wu_now_ns();
        if (r != want)
            wu_die("skynet sum %llu, expected %llu", (unsigned long long)r, (unsigned long long)want);
        if (rep > 0) wu_result(&O, "skynet", rep, double(t1 - t0) / 1e6, "ms", "lower");
    }
}

// ---- pipeline ----

struct PipeSlot {
    uint64_t *buf = nullptr;
    std::atomic<uint64_t> seq{0};   // written by fill, read by the sink
    std::atomic<int> busy{0};       // set by fill, cleared by sink
    std::atomic<uint64_t> hash{0};  // written by the hash filter, read by the sink
};

void row_pipeline() {
    unsigned nbufs = WU_PIPE_BUFS(O.quick), nring = 4 * O.threads;
    uint64_t want = wu_pipe_expected(nbufs);
    std::vector<PipeSlot> ring(nring);
    for (auto &s : ring) {
        void *p = nullptr;
        if (posix_memalign(&p, 64, WU_PIPE_BYTES) != 0) wu_die("out of memory");
        std::memset(p, 0, WU_PIPE_BYTES);  // fault the pages in
        s.buf = static_cast<uint64_t *>(p);
    }
    const size_t nw = WU_PIPE_BYTES / 8;
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        uint64_t next_in = 0, next_sink = 0, total = 0;
        // Set by the fill or the sink filter (which may run at the same
        // time); relaxed: read after parallel_pipeline returns, which
        // orders it.
        std::atomic<bool> bad{false};
        int64_t t0 = wu_now_ns();
        tbb::parallel_pipeline(
            nring,
            tbb::make_filter<void, PipeSlot *>(
                tbb::filter_mode::serial_in_order,
                [&](tbb::flow_control &fc) -> PipeSlot * {
                    if (next_in == nbufs) {
                        fc.stop();
                        return nullptr;
                    }
                    uint64_t seq = next_in++;
                    PipeSlot *s = &ring[seq % nring];
                    // acquire: pairs with the sink's release store of 0.
                    if (s->busy.exchange(1, std::memory_order_acquire) != 0)
                        bad.store(true, std::memory_order_relaxed);
                    // relaxed: the pipeline's hand-off to the sink orders it.
                    s->seq.store(seq, std::memory_order_relaxed);
                    wu_fill(s->buf, nw, seq);
                    return s;
                }) &
                tbb::make_filter<PipeSlot *, PipeSlot *>(
                    tbb::filter_mode::parallel,
                    [=](PipeSlot *s) {
                        // relaxed: the pipeline's hand-off to the sink orders it.
                        s->hash.store(wu_fnv1a64(s->buf, nw), std::memory_order_relaxed);
                        return s;
                    }) &
                tbb::make_filter<PipeSlot *, void>(
                    tbb::filter_mode::serial_in_order, [&](PipeSlot *s) {
                        // relaxed: ordered by the pipeline's hand-off (see above).
                        uint64_t seq = s->seq.load(std::memory_order_relaxed);
                        if (seq != next_sink) bad.store(true, std::memory_order_relaxed);
                        next_sink++;
                        total = wu_fold(total, seq, s->hash.load(std::memory_order_relaxed));
                        // release: pairs with the fill's acquire exchange.
                        s->busy.store(0, std::memory_order_release);
                    }));
        int64_t t1 = wu_now_ns();
        bool broken = bad.load(std::memory_order_relaxed);
        if (broken || next_sink != nbufs || total != want)
            wu_die("pipeline: %llu items reached the sink (want %u), order %s, total %016llx "
                   "(want %016llx)",
                   (unsigned long long)next_sink, nbufs, broken ? "BROKEN" : "ok",
                   (unsigned long long)total, (unsigned long long)want);
        if (rep > 0) wu_result(&O, "pipeline", rep, wu_pipe_gibs(nbufs, t1 - t0), "GiB/s", "higher");
    }
    for (auto &s : ring) free(s.buf);
}

// ---- idle ----

void row_idle() {
    int delay = WU_IDLE_DELAY_MS(O.quick), window = WU_IDLE_WINDOW_MS(O.quick);
    for (unsigned rep = 1; rep <= O.reps; rep++) {
        wu_reset();
        run_n(WU_IDLE_BURST);
        wu_check_count("idle burst", WU_IDLE_BURST);
        wu_sleep_ms(delay);
        int64_t c0 = wu_cpu_ns();
        wu_sleep_ms(window);
        int64_t c1 = wu_cpu_ns();
        wu_result(&O, "idle", rep, double(c1 - c0) / 1e6 * (2000.0 / window), "cpu-ms/2s", "lower");
    }
}

// ---- wake ----

void row_wake() {
    unsigned ns = WU_WAKE_SAMPLES(O.quick);
    tbb::task_arena arena(static_cast<int>(O.threads));
    arena.execute([] {});  // create it (and its workers) before sampling
    std::vector<double> lat(ns);
    for (unsigned rep = 1; rep <= O.reps; rep++) {
        for (unsigned i = 0; i < ns; i++) {
            wu_wake_probe p;
            wu_probe_init(&p);
            wu_sleep_ms(WU_WAKE_GAP_MS);
            int64_t t0 = wu_now_ns();
            arena.enqueue([&p] { wu_probe_hit(&p); });
            lat[i] = wu_probe_wait(&p, t0);
        }
        wu_result(&O, "wake", rep, wu_median(lat.data(), ns), "us", "lower");
    }
}

// ---- reduce ----

template <typename Reduce>
void reduce_reps(const wu_opts &o, const double *a, size_t n, Reduce reduce) {
    for (unsigned rep = 0; rep <= o.reps; rep++) {  // rep 0: warm-up
        wu_clobber(a);
        int64_t t0 = wu_now_ns();
        double sum = reduce();
        int64_t t1 = wu_now_ns();
        wu_reduce_check(strcmp(o.variant, "-") ? "tbb det" : "tbb", sum, n);
        if (rep > 0) wu_result(&o, "reduce", rep, wu_reduce_gibs(n, t1 - t0), "GiB/s", "higher");
    }
}

void row_reduce() {
    size_t n = WU_REDUCE_N(O.quick);
    double *a = wu_reduce_array(n);
    auto body = [a](const tbb::blocked_range<size_t> &r, double init) {
        return wu_sum_range(a, r.begin(), r.end(), init);
    };
    reduce_reps(O, a, n, [&] {
        return tbb::parallel_reduce(tbb::blocked_range<size_t>(0, n), 0.0, body,
                                    std::plus<double>());
    });
    wu_opts det = O;
    det.variant = "det";
    size_t grain = n / 256;
    reduce_reps(det, a, n, [&] {
        return tbb::parallel_deterministic_reduce(tbb::blocked_range<size_t>(0, n, grain), 0.0,
                                                  body, std::plus<double>());
    });
    free(a);
}

}  // namespace

int main(int argc, char **argv) {
    O = wu_parse(argc, argv, "tbb");
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, O.threads);
    if (wu_is(&O, "rtt")) row_rtt();
    else if (wu_is(&O, "throughput-1")) row_tp1();
    else if (wu_is(&O, "throughput-4")) row_tp4();
    else if (wu_is(&O, "fib")) row_fib();
    else if (wu_is(&O, "skynet")) row_skynet();
    else if (wu_is(&O, "pipeline")) row_pipeline();
    else if (wu_is(&O, "idle")) row_idle();
    else if (wu_is(&O, "wake")) row_wake();
    else if (wu_is(&O, "reduce")) row_reduce();
    else wu_unknown_row(&O);
    return 0;
}
