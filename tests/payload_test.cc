// Payloads: inline and arena copies, arena binaries, moved buffers, and
// the rule that every buffer is freed exactly once or handed to exactly
// one owner on every path.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "knit/knit.h"

namespace {

struct Pool {
    knit_pool *p = nullptr;
    explicit Pool(unsigned threads = 2, size_t arena = 0, int backpressure = KNIT_BLOCK,
                  size_t max_payload = 0) {
        knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
        o.threads = threads;
        o.arena_bytes = arena;
        o.backpressure = backpressure;
        o.max_payload = max_payload;
        EXPECT_EQ(0, knit_pool_create(&o, &p)) << knit_last_error();
    }
    ~Pool() {
        if (p != nullptr) {
            EXPECT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
        }
    }
    operator knit_pool *() const { return p; }
    knit_pool_stats_t stats() const {
        knit_pool_stats_t st;
        st.size = sizeof st;
        EXPECT_EQ(0, knit_pool_stats(p, &st));
        return st;
    }
};

// A buffer whose free function counts its calls.
struct Tracked {
    std::atomic<int> frees{0};
    std::vector<unsigned char> *bytes = nullptr;
    static void free_fn(void *ctx, void *data, size_t len) {
        auto *t = static_cast<Tracked *>(ctx);
        EXPECT_EQ(t->bytes->data(), data);
        EXPECT_EQ(t->bytes->size(), len);
        t->frees++;
    }
    knit_buf buf(std::vector<unsigned char> &v) {
        bytes = &v;
        return knit_buf{v.data(), v.size(), &Tracked::free_fn, this};
    }
};

uint64_t checksum(const void *p, size_t n) {
    const unsigned char *b = static_cast<const unsigned char *>(p);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

std::vector<unsigned char> pattern(size_t n, unsigned seed) {
    std::vector<unsigned char> v(n);
    for (size_t i = 0; i < n; i++) v[i] = static_cast<unsigned char>(i * 31 + seed);
    return v;
}

// Returns the checksum of its input bytes (and checks arg == bytes).
void *sum_bytes(knit_task *t, void *arg) {
    size_t len = 0;
    const void *b = knit_task_bytes(t, &len);
    if (b != arg) knit_task_fail(t, 1, "arg is not the payload");
    return reinterpret_cast<void *>(static_cast<uintptr_t>(checksum(b, len)));
}

TEST(Payload, CopiesInlineAndArenaSizes) {
    Pool pool;
    for (size_t n : {0ul, 1ul, 64ul, 65ul, 1000ul, 100000ul, 1ul << 20}) {
        auto v = pattern(n, 7);
        knit_future *f = nullptr;
        ASSERT_EQ(0, knit_submit_copy(pool, sum_bytes, v.data(), n, &f)) << knit_last_error();
        std::fill(v.begin(), v.end(), 0);  // it was a copy
        void *r = nullptr;
        ASSERT_EQ(0, knit_await(f, -1, &r)) << knit_last_error();
        auto want = pattern(n, 7);
        EXPECT_EQ(static_cast<uintptr_t>(checksum(want.data(), n)), reinterpret_cast<uintptr_t>(r))
            << n << " bytes";
        knit_future_release(f);
    }
    auto st = pool.stats();
    EXPECT_EQ(4u, st.arena_allocs) << "only payloads over 64 bytes use the arena";
    EXPECT_EQ(0u, st.arena_bytes) << "every arena copy was freed";
    EXPECT_GE(st.arena_high, 1u << 20);
}

TEST(Payload, OverMaxPayloadIsE2big) {
    Pool pool(1, 8 << 20, KNIT_BLOCK, 100000);
    auto v = pattern(100001, 1);
    knit_future *f = nullptr;
    EXPECT_EQ(KNIT_E2BIG, knit_submit_copy(pool, sum_bytes, v.data(), v.size(), &f));
    std::string msg = knit_last_error();
    EXPECT_NE(std::string::npos, msg.find("100001")) << msg;
    EXPECT_NE(std::string::npos, msg.find("100000")) << msg;
    Tracked t;
    knit_buf b = t.buf(v);
    EXPECT_EQ(KNIT_E2BIG, knit_submit_buf(pool, sum_bytes, &b, &f));
    EXPECT_EQ(v.data(), b.data) << "a failed move leaves the handle untouched";
    knit_buf_free(&b);
    EXPECT_EQ(1, t.frees.load());
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.arena_bytes = 8 << 20;
    o.max_payload = 16 << 20;
    knit_pool *bad = nullptr;
    EXPECT_EQ(KNIT_EINVAL, knit_pool_create(&o, &bad));
}

TEST(Payload, FullArenaFailsWithCapNamed) {
    Pool pool(1, 4 << 20, KNIT_FAIL);
    std::vector<void *> held;
    void *m;
    while ((m = knit_payload_alloc(pool, 256 << 10)) != nullptr) held.push_back(m);
    std::string msg = knit_last_error();
    EXPECT_NE(std::string::npos, msg.find(std::to_string(4 << 20))) << msg;
    EXPECT_NE(std::string::npos, msg.find(std::to_string(256 << 10))) << msg;
    EXPECT_LE(held.size() * (256 << 10), static_cast<size_t>(4 << 20)) << "the cap is hard";
    EXPECT_GE(held.size(), 4u);
    auto v = pattern(256 << 10, 3);
    knit_future *f = nullptr;
    EXPECT_EQ(KNIT_ENOMEM, knit_submit_copy(pool, sum_bytes, v.data(), v.size(), &f));
    EXPECT_GE(pool.stats().arena_failures, 2u);
    for (void *h : held) knit_payload_free(pool, h);
    EXPECT_EQ(0, knit_submit_copy(pool, sum_bytes, v.data(), v.size(), &f)) << knit_last_error();
    EXPECT_EQ(0, knit_await(f, -1, nullptr));
    knit_future_release(f);
}

TEST(Payload, FullArenaBlocksUntilRoom) {
    Pool pool(1, 8 << 20, KNIT_BLOCK);
    // A filler thread takes 256 KiB blocks until the arena is full and its
    // next knit_payload_alloc blocks (no progress for 200 ms).
    std::mutex mu;
    std::vector<void *> held;
    std::atomic<int> count{0};
    std::atomic<bool> stop{false};
    std::thread filler([&] {
        while (!stop.load()) {
            void *m = knit_payload_alloc(pool, 256 << 10);
            if (m == nullptr) break;
            std::lock_guard<std::mutex> g(mu);
            if (stop.load()) {
                knit_payload_free(pool, m);
                break;
            }
            held.push_back(m);
            count++;
        }
    });
    for (int last = -1; last != count.load();) {
        last = count.load();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    EXPECT_GE(count.load(), 4);
    std::atomic<bool> done{false};
    auto v = pattern(900000, 9);
    std::thread submitter([&] {
        knit_future *f = nullptr;
        EXPECT_EQ(0, knit_submit_copy(pool, sum_bytes, v.data(), v.size(), &f)) << knit_last_error();
        EXPECT_EQ(0, knit_await(f, -1, nullptr));
        knit_future_release(f);
        done = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(done.load()) << "blocked while the arena is full";
    {
        std::lock_guard<std::mutex> g(mu);
        stop = true;
        for (void *h : held) knit_payload_free(pool, h);
        held.clear();
    }
    submitter.join();
    filler.join();
    EXPECT_TRUE(done.load());
}

void *keep_input(knit_task *, void *) { return nullptr; }

void *take_and_free(knit_task *t, void *) {
    knit_buf b = knit_task_take_buf(t);
    knit_buf_free(&b);
    return nullptr;
}

void *fail_task(knit_task *t, void *) {
    knit_task_fail(t, 5, "no");
    return nullptr;
}

void *echo_buf(knit_task *t, void *) {
    knit_buf b = knit_task_take_buf(t);
    knit_task_return_buf(t, &b);
    return nullptr;
}

void *sleep_50(knit_task *, void *) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return nullptr;
}

TEST(Payload, MovedBufferFreedExactlyOnceOnEveryPath) {
    Pool pool(1);
    auto run = [&](knit_fn fn, bool release_first) {
        auto v = pattern(1000, 2);
        Tracked t;
        knit_buf b = t.buf(v);
        knit_future *f = nullptr;
        EXPECT_EQ(0, knit_submit_buf(pool, fn, &b, &f));
        EXPECT_EQ(nullptr, b.data) << "moved: the handle is empty";
        if (!release_first) knit_await(f, -1, nullptr);
        knit_future_release(f);
        for (int i = 0; i < 2000 && t.frees.load() == 0; i++)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return t.frees.load();
    };
    EXPECT_EQ(1, run(keep_input, false)) << "the task left it: the runtime frees it";
    EXPECT_EQ(1, run(take_and_free, false)) << "the task took and freed it";
    EXPECT_EQ(1, run(fail_task, false)) << "the task failed";
    EXPECT_EQ(1, run(echo_buf, false)) << "returned, released without a take";
    EXPECT_EQ(1, run(echo_buf, true)) << "released before it even ran";
}

TEST(Payload, CancelBeforeStartFreesOnce) {
    Pool pool(1);
    knit_future *blocker = nullptr;
    ASSERT_EQ(0, knit_submit(pool, sleep_50, nullptr, &blocker));
    auto v = pattern(500, 4);
    Tracked t;
    knit_buf b = t.buf(v);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit_buf(pool, keep_input, &b, &f));
    EXPECT_EQ(0, knit_future_cancel(f));
    EXPECT_EQ(1, t.frees.load()) << "freed when it settled as cancelled";
    knit_await(blocker, -1, nullptr);
    knit_future *after = nullptr;
    ASSERT_EQ(0, knit_submit(pool, keep_input, nullptr, &after));
    knit_await(after, -1, nullptr);
    EXPECT_EQ(1, t.frees.load()) << "the skipped lane does not free it again";
    for (auto *x : {blocker, f, after}) knit_future_release(x);
}

TEST(Payload, TakeTwiceIsAnErrorNotADoubleFree) {
    Pool pool(1);
    auto v = pattern(300, 5);
    Tracked t;
    knit_buf b = t.buf(v);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit_buf(pool, echo_buf, &b, &f));
    knit_buf out{};
    EXPECT_EQ(0, knit_await(f, -1, nullptr));
    ASSERT_EQ(0, knit_future_take_buf(f, &out));
    EXPECT_EQ(v.data(), out.data) << "the same bytes came back: no copy";
    knit_buf again{};
    EXPECT_EQ(KNIT_EALREADY, knit_future_take_buf(f, &again));
    EXPECT_EQ(nullptr, again.data);
    knit_future_release(f);
    EXPECT_EQ(0, t.frees.load()) << "the taker owns it now";
    knit_buf_free(&out);
    knit_buf_free(&out);  // empty now: a no-op
    EXPECT_EQ(1, t.frees.load());
    knit_future *g = nullptr;
    ASSERT_EQ(0, knit_submit(pool, keep_input, nullptr, &g));
    knit_await(g, -1, nullptr);
    EXPECT_EQ(KNIT_ENOENT, knit_future_take_buf(g, &out));
    knit_future_release(g);
}

TEST(Payload, TimeoutThenAbandonFreesReturnedBuffer) {
    Pool pool(1);
    auto v = pattern(100, 6);
    Tracked t;
    knit_buf b = t.buf(v);
    knit_future *blocker = nullptr, *f = nullptr;
    ASSERT_EQ(0, knit_submit(pool, sleep_50, nullptr, &blocker));
    ASSERT_EQ(0, knit_submit_buf(pool, echo_buf, &b, &f));
    knit_buf out{};
    EXPECT_EQ(KNIT_ETIMEDOUT, knit_await(f, 1000000, nullptr));
    EXPECT_EQ(KNIT_EBUSY, knit_future_take_buf(f, &out));
    knit_future_release(f);  // abandoned
    knit_await(blocker, -1, nullptr);
    knit_future_release(blocker);
    for (int i = 0; i < 2000 && t.frees.load() == 0; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(1, t.frees.load());
}

// stage 1 takes its input and returns it; stage 2 (a continuation) takes
// stage 1's result and returns it: one buffer moves without a copy.
void *stage2(knit_task *t, void *) {
    knit_buf b{};
    if (knit_task_antecedent_buf(t, &b) != 0) {
        knit_task_fail(t, 2, "no buffer from stage 1");
        return nullptr;
    }
    static_cast<unsigned char *>(b.data)[0] ^= 0xff;
    knit_task_return_buf(t, &b);
    return nullptr;
}

TEST(Payload, ContinuationChainMovesOneBuffer) {
    Pool pool(2);
    auto v = pattern(4096, 8);
    unsigned char first = v[0];
    Tracked t;
    knit_buf b = t.buf(v);
    knit_future *f1 = nullptr, *f2 = nullptr;
    ASSERT_EQ(0, knit_submit_buf(pool, echo_buf, &b, &f1));
    ASSERT_EQ(0, knit_future_then(f1, stage2, nullptr, &f2));
    EXPECT_EQ(0, knit_await(f2, -1, nullptr)) << knit_last_error();
    knit_buf out{};
    ASSERT_EQ(0, knit_future_take_buf(f2, &out));
    EXPECT_EQ(v.data(), out.data);
    EXPECT_EQ(static_cast<unsigned char>(first ^ 0xff), v[0]);
    knit_future_release(f1);
    knit_future_release(f2);
    EXPECT_EQ(0, t.frees.load());
    knit_buf_free(&out);
    EXPECT_EQ(1, t.frees.load());
}

struct Forward {
    std::atomic<const void *> seen{nullptr};
};

void *leaf(knit_task *t, void *) {
    size_t n = 0;
    const void *p = knit_task_bytes(t, &n);
    return const_cast<void *>(p);
}

void *forward(knit_task *t, void *) {
    knit_buf b = knit_task_take_buf(t);
    knit_future *sub = nullptr;
    if (knit_submit_buf(knit_task_pool(t), leaf, &b, &sub) != 0) return nullptr;
    void *r = nullptr;
    knit_await(sub, -1, &r);
    knit_future_release(sub);
    return r;
}

TEST(Payload, TaskMovesItsInputIntoASubtask) {
    Pool pool(2);
    auto v = pattern(2000, 9);
    Tracked t;
    knit_buf b = t.buf(v);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit_buf(pool, forward, &b, &f));
    void *r = nullptr;
    ASSERT_EQ(0, knit_await(f, -1, &r));
    EXPECT_EQ(v.data(), r) << "the subtask saw the very same bytes";
    knit_future_release(f);
    for (int i = 0; i < 2000 && t.frees.load() == 0; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(1, t.frees.load());
}

TEST(Payload, ArenaBinaryTravelsWithoutCopy) {
    Pool pool(2);
    const size_t n = 300000;
    auto *mem = static_cast<unsigned char *>(knit_payload_alloc(pool, n));
    ASSERT_NE(nullptr, mem) << knit_last_error();
    for (size_t i = 0; i < n; i++) mem[i] = static_cast<unsigned char>(i);
    knit_buf b = knit_payload_buf(pool, mem, n);
    ASSERT_EQ(mem, b.data);
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit_buf(pool, leaf, &b, &f));
    void *r = nullptr;
    ASSERT_EQ(0, knit_await(f, -1, &r));
    EXPECT_EQ(mem, r);
    knit_future_release(f);
    for (int i = 0; i < 2000 && pool.stats().arena_bytes != 0; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(0u, pool.stats().arena_bytes) << "freed back into the arena";
    int local = 0;
    knit_buf bad = knit_payload_buf(pool, &local, sizeof local);
    EXPECT_EQ(nullptr, bad.data);
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "arena"));
}

TEST(Payload, DestroyWithPendingTasksFreesEveryBuffer) {
    std::vector<std::vector<unsigned char>> bytes(200, pattern(256, 1));
    std::vector<Tracked> tracked(200);
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 1;
    knit_pool *p = nullptr;
    ASSERT_EQ(0, knit_pool_create(&o, &p));
    knit_future *blocker = nullptr;
    ASSERT_EQ(0, knit_submit(p, sleep_50, nullptr, &blocker));
    std::vector<knit_future *> kept;
    for (size_t i = 0; i < bytes.size(); i++) {
        knit_buf b = tracked[i].buf(bytes[i]);
        knit_future *f = nullptr;
        ASSERT_EQ(0, knit_submit_buf(p, i % 2 ? echo_buf : keep_input, &b, i % 3 ? &f : nullptr));
        if (f != nullptr) kept.push_back(f);  // never released: destroy frees them
    }
    knit_future_release(blocker);
    EXPECT_EQ(0, knit_pool_destroy(p, KNIT_CANCEL));
    for (size_t i = 0; i < tracked.size(); i++) EXPECT_EQ(1, tracked[i].frees.load()) << i;
    auto v = pattern(10, 1);
    Tracked t;
    knit_buf b = t.buf(v);
    EXPECT_EQ(KNIT_ESHUTDOWN, knit_submit_buf(p, keep_input, &b, nullptr));
    EXPECT_EQ(v.data(), b.data) << "untouched on failure";
    knit_buf_free(&b);
}

void *ident(knit_task *, void *arg) { return arg; }

// Destroy frees what the futures the user never released still hold, and
// skips the walk over the futures' memory only when every future was
// freed: the count is kept per thread (a future made on one thread is
// often freed on another: a worker frees a detached task's, a thread
// releases another's), so here the futures of each submitter are
// released by the next one, thousands of them detached, across several
// of the growing slabs, and one future holding a returned buffer is
// kept. Its buffer must be freed exactly once, by the destroy.
TEST(Payload, DestroyFreesTheBufferOfTheOneFutureKeptAmongThousands) {
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 2;
    knit_pool *p = nullptr;
    ASSERT_EQ(0, knit_pool_create(&o, &p));
    auto v = pattern(4096, 9);
    Tracked t;
    knit_buf b = t.buf(v);
    knit_future *kept = nullptr;
    ASSERT_EQ(0, knit_submit_buf(p, echo_buf, &b, &kept));
    const unsigned threads = 3, per = 8000;
    std::vector<std::vector<knit_future *>> made(threads);
    std::atomic<int> bad{0};
    auto submitter = [&](unsigned s) {
        for (unsigned i = 0; i < per; i++) {
            knit_future *f = nullptr;
            uintptr_t want = 1 + s * per + i;
            if (knit_submit(p, ident, reinterpret_cast<void *>(want), i % 4 ? &f : nullptr) != 0)
                bad++;
            if (f != nullptr) made[s].push_back(f);
        }
    };
    std::vector<std::thread> ts;
    for (unsigned s = 0; s < threads; s++) ts.emplace_back(submitter, s);
    for (auto &th : ts) th.join();
    ts.clear();
    // Each thread releases the futures another one made.
    for (unsigned s = 0; s < threads; s++)
        ts.emplace_back([&, s] {
            for (knit_future *f : made[(s + 1) % threads]) {
                void *r = nullptr;
                if (knit_await(f, -1, &r) != 0 || r == nullptr) bad++;
                if (knit_future_release(f) != 0) bad++;
            }
        });
    for (auto &th : ts) th.join();
    EXPECT_EQ(0, bad.load());
    EXPECT_EQ(0, knit_await(kept, -1, nullptr));
    EXPECT_EQ(0, t.frees.load()) << "the kept future owns the returned buffer";
    EXPECT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
    EXPECT_EQ(1, t.frees.load()) << "the destroy frees the buffer of the one future kept";
}

TEST(Payload, ManyThreadsMixedPayloads) {
    Pool pool(2, 32 << 20);
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int s = 0; s < 4; s++)
        threads.emplace_back([&, s] {
            std::vector<knit_future *> fs;
            std::vector<uint64_t> want;
            for (int i = 0; i < 300; i++) {
                size_t n = (static_cast<size_t>(i) * 7919 + s * 31) % 70000;
                auto v = pattern(n, static_cast<unsigned>(i + s));
                knit_future *f = nullptr;
                int rc;
                if (i % 2) {
                    rc = knit_submit_copy(pool, sum_bytes, v.data(), n, &f);
                } else {
                    void *copy = std::malloc(n ? n : 1);
                    if (n) std::memcpy(copy, v.data(), n);
                    knit_buf b = knit_buf_malloced(copy, n);
                    rc = knit_submit_buf(pool, sum_bytes, &b, &f);
                }
                if (rc != 0) {
                    bad++;
                    continue;
                }
                fs.push_back(f);
                want.push_back(checksum(v.data(), n));
            }
            for (size_t i = 0; i < fs.size(); i++) {
                void *r = nullptr;
                if (knit_await(fs[i], -1, &r) != 0 || reinterpret_cast<uintptr_t>(r) != static_cast<uintptr_t>(want[i]))
                    bad++;
                knit_future_release(fs[i]);
            }
        });
    for (auto &t : threads) t.join();
    EXPECT_EQ(0, bad.load());
    EXPECT_EQ(0u, pool.stats().arena_bytes);
}

}  // namespace
