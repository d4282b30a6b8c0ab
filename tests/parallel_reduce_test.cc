// knit_parallel_reduce: results, determinism across thread counts, failure,
// bad input, nesting inside a task.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "knit/knit.h"
#include "pool_util.h"

using knit_test::Pool;

namespace {

struct Doubles {
    std::vector<double> v;
};

int sum_body(void *ctx, size_t b, size_t e, void *out) {
    const auto *d = static_cast<const Doubles *>(ctx);
    double s = 0;
    for (size_t i = b; i < e; i++) s += d->v[i];
    std::memcpy(out, &s, sizeof s);
    return 0;
}

void sum_combine(void *, void *left, const void *right) {
    double l, r;
    std::memcpy(&l, left, sizeof l);
    std::memcpy(&r, right, sizeof r);
    l += r;
    std::memcpy(left, &l, sizeof l);
}

Doubles make_doubles(size_t n) {
    Doubles d;
    d.v.resize(n);
    uint64_t x = 88172645463325252ull;
    for (auto &e : d.v) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        e = static_cast<double>(x % 1000000) / 997.0 - 400.0;  // mixed signs: rounding shows
    }
    return d;
}

TEST(ParallelReduce, SameBitsOnAnyPool) {
    Doubles d = make_doubles(1 << 20);
    uint64_t bits[4] = {};
    unsigned threads[4] = {1, 2, 3, 4};
    for (int k = 0; k < 4; k++) {
        Pool pool(threads[k]);
        double r = 0;
        ASSERT_EQ(0, knit_parallel_reduce(pool, 0, d.v.size(), 1000, sizeof(double), sum_body,
                                          sum_combine, &d, &r))
            << knit_last_error();
        std::memcpy(&bits[k], &r, sizeof r);
        double want = 0;
        for (double e : d.v) want += e;
        EXPECT_NEAR(want, r, 1e-6 * std::fabs(want) + 1e-3);
    }
    for (int k = 1; k < 4; k++) EXPECT_EQ(bits[0], bits[k]) << threads[k] << " threads";
}

struct MinMax {
    int64_t lo, hi;
    size_t count;
};

int mm_body(void *ctx, size_t b, size_t e, void *out) {
    const auto *v = static_cast<const std::vector<int64_t> *>(ctx);
    MinMax m{INT64_MAX, INT64_MIN, 0};
    for (size_t i = b; i < e; i++) {
        m.lo = std::min(m.lo, (*v)[i]);
        m.hi = std::max(m.hi, (*v)[i]);
        m.count++;
    }
    std::memcpy(out, &m, sizeof m);
    return 0;
}

void mm_combine(void *, void *left, const void *right) {
    MinMax l, r;
    std::memcpy(&l, left, sizeof l);
    std::memcpy(&r, right, sizeof r);
    l.lo = std::min(l.lo, r.lo);
    l.hi = std::max(l.hi, r.hi);
    l.count += r.count;
    std::memcpy(left, &l, sizeof l);
}

TEST(ParallelReduce, StructValueEveryGrain) {
    Pool pool(2, "dekker");
    std::vector<int64_t> v(10007);
    for (size_t i = 0; i < v.size(); i++) v[i] = static_cast<int64_t>((i * 7919) % 10007) - 5000;
    for (size_t grain : {size_t{0}, size_t{1}, size_t{3}, size_t{64}, size_t{100000}}) {
        MinMax m{};
        ASSERT_EQ(0, knit_parallel_reduce(pool, 0, v.size(), grain, sizeof m, mm_body, mm_combine,
                                          &v, &m));
        EXPECT_EQ(-5000, m.lo) << grain;
        EXPECT_EQ(5006, m.hi) << grain;
        EXPECT_EQ(v.size(), m.count) << grain;
    }
    MinMax empty{};
    ASSERT_EQ(0, knit_parallel_reduce(pool, 5, 5, 0, sizeof empty, mm_body, mm_combine, &v, &empty));
    EXPECT_EQ(0u, empty.count) << "the identity";
}

int failing_body(void *, size_t b, size_t e, void *out) {
    if (b <= 5000 && 5000 < e) return knit_error(KNIT_ENOENT, "bad element at %zu", size_t{5000});
    double s = static_cast<double>(e - b);
    std::memcpy(out, &s, sizeof s);
    return 0;
}

TEST(ParallelReduce, FirstFailureWins) {
    Pool pool(2);
    double r = -1;
    EXPECT_EQ(KNIT_ENOENT,
              knit_parallel_reduce(pool, 0, 100000, 100, sizeof r, failing_body, sum_combine,
                                   nullptr, &r));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "bad element at 5000")) << knit_last_error();
    EXPECT_EQ(-1, r) << "no result on failure";
}

TEST(ParallelReduce, BadInput) {
    Pool pool(1);
    double r;
    EXPECT_EQ(KNIT_EINVAL, knit_parallel_reduce(nullptr, 0, 1, 0, 8, sum_body, sum_combine, nullptr, &r));
    EXPECT_EQ(KNIT_EINVAL, knit_parallel_reduce(pool, 0, 1, 0, 8, nullptr, sum_combine, nullptr, &r));
    EXPECT_EQ(KNIT_EINVAL, knit_parallel_reduce(pool, 0, 1, 0, 8, sum_body, nullptr, nullptr, &r));
    EXPECT_EQ(KNIT_EINVAL, knit_parallel_reduce(pool, 0, 1, 0, 8, sum_body, sum_combine, nullptr, nullptr));
    EXPECT_EQ(KNIT_EINVAL, knit_parallel_reduce(pool, 2, 1, 0, 8, sum_body, sum_combine, nullptr, &r));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "begin=2"));
    EXPECT_EQ(KNIT_EINVAL, knit_parallel_reduce(pool, 0, 1, 0, 0, sum_body, sum_combine, nullptr, &r));
    EXPECT_EQ(KNIT_EINVAL,
              knit_parallel_reduce(pool, 0, 1, 0, KNIT_REDUCE_MAX_VALUE + 1, sum_body, sum_combine,
                                   nullptr, &r));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "value_size"));
}

void *nested(knit_task *task, void *arg) {
    auto *d = static_cast<Doubles *>(arg);
    double r = 0;
    int rc = knit_parallel_reduce(knit_task_pool(task), 0, d->v.size(), 16, sizeof r, sum_body,
                                  sum_combine, d, &r);
    EXPECT_EQ(0, rc);
    return reinterpret_cast<void *>(static_cast<intptr_t>(r));
}

TEST(ParallelReduce, NestsInsideTasks) {
    Pool pool(2);
    Doubles d;
    d.v.assign(4096, 1.0);
    std::vector<knit_future *> fs(8);
    for (auto &f : fs) ASSERT_EQ(0, knit_submit(pool, nested, &d, &f));
    for (auto *f : fs) {
        void *r = nullptr;
        ASSERT_EQ(0, knit_await(f, -1, &r));
        EXPECT_EQ(4096, reinterpret_cast<intptr_t>(r));
        knit_future_release(f);
    }
}

}  // namespace
