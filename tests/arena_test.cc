// The payload arena: caps, round trips, the hard cap, stats, independence of
// arenas, returning memory on destroy, concurrency, create/destroy cycles.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "knit/error.h"
#include "payload/arena.h"

#if defined(__SANITIZE_ADDRESS__)
#define KNIT_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KNIT_TEST_ASAN 1
#endif
#endif
#ifdef KNIT_TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Owns an arena for the life of a test.
struct Arena {
    knit__arena *a = nullptr;
    explicit Arena(size_t cap) {
        int rc = knit__arena_create(cap, &a);
        EXPECT_EQ(0, rc) << knit_last_error();
    }
    ~Arena() { knit__arena_destroy(a); }
    Arena(const Arena &) = delete;
    Arena &operator=(const Arena &) = delete;
    operator knit__arena *() const { return a; }
    knit__arena_stats stats() const {
        knit__arena_stats s;
        knit__arena_stats_get(a, &s);
        return s;
    }
};

unsigned char pattern(uintptr_t seed, size_t i) {
    return static_cast<unsigned char>((seed * 131u + i * 7u) ^ (i >> 8));
}

void fill(void *p, size_t len, uintptr_t seed) {
    auto *b = static_cast<unsigned char *>(p);
    for (size_t i = 0; i < len; i++) b[i] = pattern(seed, i);
}

// Index of the first wrong byte, or len.
size_t check(const void *p, size_t len, uintptr_t seed) {
    auto *b = static_cast<const unsigned char *>(p);
    for (size_t i = 0; i < len; i++)
        if (b[i] != pattern(seed, i)) return i;
    return len;
}

// VmSize of this process, in bytes (-1 if unreadable).
long long vm_size() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line)) {
        long long kb;
        if (std::sscanf(line.c_str(), "VmSize: %lld kB", &kb) == 1)
            return kb * 1024;
    }
    return -1;
}

// True iff some line of /proc/self/maps covers address p.
bool mapped(const void *p) {
    std::ifstream f("/proc/self/maps");
    std::string line;
    auto x = reinterpret_cast<uintptr_t>(p);
    while (std::getline(f, line)) {
        unsigned long lo, hi;
        if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && x >= lo &&
            x < hi)
            return true;
    }
    return false;
}

TEST(Arena, BadCapsAreRejected) {
    const size_t bad[] = {0, 1, KNIT__ARENA_MIN_CAP - 1,
                          KNIT__ARENA_MAX_CAP + 1, SIZE_MAX};
    for (size_t cap : bad) {
        knit__arena *a = reinterpret_cast<knit__arena *>(0x1);
        EXPECT_EQ(KNIT_EINVAL, knit__arena_create(cap, &a)) << cap;
        EXPECT_EQ(nullptr, a);
        std::string msg = knit_last_error();
        EXPECT_NE(std::string::npos, msg.find(std::to_string(cap))) << msg;
        EXPECT_NE(std::string::npos, msg.find("4194304")) << msg;
        EXPECT_NE(std::string::npos, msg.find("68719476736")) << msg;
    }
    EXPECT_EQ(KNIT_EINVAL, knit__arena_create(8 * kMiB, nullptr));
    knit__arena_destroy(nullptr); // a no-op
}

TEST(Arena, LimitsAreAccepted) {
    {
        Arena a(KNIT__ARENA_MIN_CAP);
        ASSERT_NE(nullptr, a.a);
        EXPECT_EQ(KNIT__ARENA_MIN_CAP, a.stats().cap_bytes);
        void *p = knit__arena_alloc(a, 1000);
        ASSERT_NE(nullptr, p) << knit_last_error();
        EXPECT_TRUE(knit__arena_owns(a, p));
        knit__arena_free(a, p);
    }
    {
        // Not a whole number of pages: rounded down, never up.
        Arena a(KNIT__ARENA_MIN_CAP + 1);
        ASSERT_NE(nullptr, a.a);
        EXPECT_EQ(KNIT__ARENA_MIN_CAP, a.stats().cap_bytes);
    }
    {
        // 64 GiB of address space, none of it touched.
        knit__arena *a = nullptr;
        int rc = knit__arena_create(KNIT__ARENA_MAX_CAP, &a);
        if (rc == KNIT_ENOMEM) GTEST_SKIP() << knit_last_error();
        ASSERT_EQ(0, rc) << knit_last_error();
        void *p = knit__arena_alloc(a, 3 * kMiB);
        ASSERT_NE(nullptr, p) << knit_last_error();
        fill(p, 3 * kMiB, 5);
        EXPECT_EQ(3 * kMiB, check(p, 3 * kMiB, 5));
        knit__arena_free(a, p);
        knit__arena_destroy(a);
    }
}

TEST(Arena, RoundTripKeepsTheBytes) {
    Arena a(16 * kMiB);
    ASSERT_NE(nullptr, a.a);
    const size_t sizes[] = {1, 8, 100, 4096, 70000, 2 * kMiB};
    std::vector<std::pair<void *, size_t>> live;
    for (size_t len : sizes) {
        void *p = knit__arena_alloc(a, len);
        ASSERT_NE(nullptr, p) << len << ": " << knit_last_error();
        EXPECT_TRUE(knit__arena_owns(a, p));
        EXPECT_TRUE(knit__arena_owns(a, static_cast<char *>(p) + len - 1));
        EXPECT_GE(knit__arena_usable(a, p), len);
        fill(p, len, reinterpret_cast<uintptr_t>(p));
        live.emplace_back(p, len);
    }
    for (auto &[p, len] : live)
        EXPECT_EQ(len, check(p, len, reinterpret_cast<uintptr_t>(p))) << len;
    for (auto &[p, len] : live) knit__arena_free(a, p);
    knit__arena_free(a, nullptr); // a no-op
    EXPECT_EQ(0u, a.stats().in_use);
    int local = 0;
    EXPECT_FALSE(knit__arena_owns(a, &local));
    EXPECT_FALSE(knit__arena_owns(a, nullptr));
}

TEST(Arena, ManySizesFromZeroToOneMiB) {
    Arena a(64 * kMiB);
    ASSERT_NE(nullptr, a.a);
    std::vector<size_t> sizes = {0, 0, 1, 2, 3, 7, 15, 17, 31, 33};
    for (size_t s = 64; s <= kMiB; s *= 2) {
        sizes.push_back(s - 1);
        sizes.push_back(s);
        sizes.push_back(s + s / 3);
    }
    sizes.push_back(kMiB);
    struct Block {
        void *p;
        size_t len, usable;
    };
    std::vector<Block> live;
    for (size_t len : sizes) {
        void *p = knit__arena_alloc(a, len);
        ASSERT_NE(nullptr, p) << len << ": " << knit_last_error();
        ASSERT_TRUE(knit__arena_owns(a, p));
        size_t u = knit__arena_usable(a, p);
        EXPECT_GE(u, std::max<size_t>(len, 1));
        fill(p, len, len + 1);
        live.push_back({p, len, u});
    }
    // All distinct and disjoint, the zero-length ones included.
    std::vector<Block> sorted = live;
    std::sort(sorted.begin(), sorted.end(),
              [](const Block &x, const Block &y) { return x.p < y.p; });
    for (size_t i = 1; i < sorted.size(); i++)
        EXPECT_LE(static_cast<char *>(sorted[i - 1].p) + sorted[i - 1].usable,
                  static_cast<char *>(sorted[i].p));
    uint64_t sum = 0;
    for (const Block &b : live) {
        EXPECT_EQ(b.len, check(b.p, b.len, b.len + 1)) << b.len;
        sum += b.usable;
    }
    EXPECT_EQ(sum, a.stats().in_use);
    for (const Block &b : live) knit__arena_free(a, b.p);
    EXPECT_EQ(0u, a.stats().in_use);
}

// Allocates `len`-byte blocks until the arena refuses one (at most `max`).
std::vector<void *> fill_up(knit__arena *a, size_t len, size_t max = 1000) {
    std::vector<void *> got;
    while (got.size() < max) {
        void *p = knit__arena_alloc(a, len);
        if (p == nullptr) break;
        got.push_back(p);
    }
    return got;
}

TEST(Arena, HardCapHoldsAndMemoryIsReused) {
    Arena a(8 * kMiB);
    ASSERT_NE(nullptr, a.a);
    std::vector<void *> got = fill_up(a, kMiB);
    ASSERT_GE(got.size(), 1u);
    EXPECT_LE(got.size() * kMiB, 8 * kMiB);
    std::string msg = knit_last_error();
    EXPECT_NE(std::string::npos, msg.find("8388608")) << msg;  // the cap
    EXPECT_NE(std::string::npos, msg.find("1048576")) << msg;  // the ask
    for (void *p : got) {
        EXPECT_TRUE(knit__arena_owns(a, p));
        EXPECT_TRUE(knit__arena_owns(a, static_cast<char *>(p) + kMiB - 1));
        fill(p, kMiB, reinterpret_cast<uintptr_t>(p));
    }
    for (void *p : got)
        EXPECT_EQ(kMiB, check(p, kMiB, reinterpret_cast<uintptr_t>(p)));
    knit__arena_stats s = a.stats();
    EXPECT_LE(s.reserved, s.cap_bytes);
    EXPECT_EQ(1u, s.failures);

    // Still full for a second ask, and anything bigger than the cap fails
    // with a message naming the cap and the size.
    EXPECT_EQ(nullptr, knit__arena_alloc(a, kMiB));
    EXPECT_EQ(nullptr, knit__arena_alloc(a, 9 * kMiB));
    msg = knit_last_error();
    EXPECT_NE(std::string::npos, msg.find("8388608")) << msg;
    EXPECT_NE(std::string::npos, msg.find("9437184")) << msg;
    EXPECT_EQ(nullptr, knit__arena_alloc(a, SIZE_MAX));

    for (void *p : got) knit__arena_free(a, p);
    EXPECT_EQ(0u, a.stats().in_use);
    std::vector<void *> again = fill_up(a, kMiB);
    EXPECT_GE(again.size(), got.size());
    for (void *p : again) EXPECT_TRUE(knit__arena_owns(a, p));
    for (void *p : again) knit__arena_free(a, p);

    // Small blocks can fill it too, and never escape it.
    std::vector<void *> small = fill_up(a, 1000, 100000);
    EXPECT_GT(small.size(), 1000u);
    EXPECT_LT(small.size() * 1000, 8 * kMiB);
    for (void *p : small) ASSERT_TRUE(knit__arena_owns(a, p));
    for (void *p : small) knit__arena_free(a, p);
    EXPECT_EQ(0u, a.stats().in_use);
    EXPECT_NE(nullptr, knit__arena_alloc(a, kMiB)) << knit_last_error();
}

TEST(Arena, StatsAddUp) {
    Arena a(8 * kMiB);
    ASSERT_NE(nullptr, a.a);
    knit__arena_stats s = a.stats();
    EXPECT_EQ(8 * kMiB, s.cap_bytes);
    EXPECT_EQ(0u, s.in_use);
    EXPECT_EQ(0u, s.high_water);
    EXPECT_EQ(0u, s.allocations);
    EXPECT_EQ(0u, s.failures);
    EXPECT_LE(s.reserved, s.cap_bytes);

    std::vector<void *> live;
    uint64_t sum = 0, peak = 0, ok = 0, failed = 0;
    for (int round = 0; round < 3; round++) {
        for (size_t len = 16; len <= 512 * 1024; len *= 4) {
            void *p = knit__arena_alloc(a, len);
            ASSERT_NE(nullptr, p) << knit_last_error();
            ok++;
            sum += knit__arena_usable(a, p);
            peak = std::max(peak, sum);
            live.push_back(p);
        }
        EXPECT_EQ(sum, a.stats().in_use);
        // Free half.
        for (size_t i = 0; i < live.size(); i += 2) {
            sum -= knit__arena_usable(a, live[i]);
            knit__arena_free(a, live[i]);
        }
        std::vector<void *> keep;
        for (size_t i = 1; i < live.size(); i += 2) keep.push_back(live[i]);
        live.swap(keep);
        EXPECT_EQ(sum, a.stats().in_use);
        EXPECT_EQ(nullptr, knit__arena_alloc(a, 100 * kMiB));
        failed++;
    }
    s = a.stats();
    EXPECT_EQ(ok, s.allocations);
    EXPECT_EQ(failed, s.failures);
    EXPECT_GE(s.high_water, peak);
    EXPECT_GE(s.reserved, s.in_use);
    EXPECT_LE(s.reserved, s.cap_bytes);
    for (void *p : live) knit__arena_free(a, p);
    s = a.stats();
    EXPECT_EQ(0u, s.in_use);
    EXPECT_GE(s.high_water, peak);
    EXPECT_EQ(ok, s.allocations);
}

TEST(Arena, FreeingAForeignPointerIsRefused) {
    Arena a(8 * kMiB);
    Arena b(8 * kMiB);
    void *p = knit__arena_alloc(b, 64);
    ASSERT_NE(nullptr, p);
    knit__arena_free(a, p); // not a's: refused, not freed
    std::string msg = knit_last_error();
    EXPECT_NE(std::string::npos, msg.find("outside")) << msg;
    EXPECT_EQ(0u, a.stats().in_use);
    EXPECT_EQ(knit__arena_usable(b, p), b.stats().in_use);
    fill(p, 64, 9);
    EXPECT_EQ(64u, check(p, 64, 9));
    knit__arena_free(b, p);
    EXPECT_EQ(0u, b.stats().in_use);
}

TEST(Arena, TwoArenasAreIndependent) {
    Arena a(8 * kMiB);
    Arena b(8 * kMiB);
    ASSERT_NE(nullptr, a.a);
    ASSERT_NE(nullptr, b.a);
    std::vector<void *> in_a = fill_up(a, 256 * 1024);
    ASSERT_GE(in_a.size(), 1u);
    // a is full; b is untouched by that.
    EXPECT_EQ(0u, b.stats().in_use);
    EXPECT_EQ(0u, b.stats().allocations);
    std::vector<void *> in_b = fill_up(b, 256 * 1024);
    EXPECT_EQ(in_a.size(), in_b.size());
    for (void *p : in_a) {
        EXPECT_TRUE(knit__arena_owns(a, p));
        EXPECT_FALSE(knit__arena_owns(b, p));
        fill(p, 256 * 1024, 1);
    }
    for (void *p : in_b) {
        EXPECT_TRUE(knit__arena_owns(b, p));
        EXPECT_FALSE(knit__arena_owns(a, p));
        fill(p, 256 * 1024, 2);
    }
    // Freeing in a makes room in a only.
    knit__arena_free(a, in_a.back());
    in_a.pop_back();
    EXPECT_EQ(nullptr, knit__arena_alloc(b, 256 * 1024));
    void *p = knit__arena_alloc(a, 256 * 1024);
    ASSERT_NE(nullptr, p) << knit_last_error();
    in_a.push_back(p);
    fill(p, 256 * 1024, 1);
    for (void *q : in_a) EXPECT_EQ(256u * 1024, check(q, 256 * 1024, 1));
    // Destroying a (with its blocks still allocated: discarded) leaves b.
    knit__arena_destroy(a.a);
    a.a = nullptr;
    for (void *q : in_b) EXPECT_EQ(256u * 1024, check(q, 256 * 1024, 2));
    for (void *q : in_b) knit__arena_free(b, q);
    EXPECT_EQ(0u, b.stats().in_use);
    EXPECT_NE(nullptr, knit__arena_alloc(b, kMiB)) << knit_last_error();
}

TEST(Arena, DestroyUnmapsTheRegion) {
    knit__arena *a = nullptr;
    ASSERT_EQ(0, knit__arena_create(32 * kMiB, &a)) << knit_last_error();
    void *small = knit__arena_alloc(a, 100);
    void *big = knit__arena_alloc(a, 8 * kMiB);
    ASSERT_NE(nullptr, small);
    ASSERT_NE(nullptr, big);
    fill(big, 8 * kMiB, 3);
    EXPECT_TRUE(mapped(small));
    EXPECT_TRUE(mapped(big));
    long page = sysconf(_SC_PAGESIZE);
    auto page_of = [page](void *p) {
        return reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(p) &
                                        ~static_cast<uintptr_t>(page - 1));
    };
    unsigned char vec[1];
    ASSERT_EQ(0, mincore(page_of(big), page, vec));
    knit__arena_free(a, small); // `big` stays allocated: destroy discards it
    long long before = vm_size();
    knit__arena_destroy(a);
    // First with no allocation in between that could map the range again.
    errno = 0;
    EXPECT_EQ(-1, mincore(page_of(big), page, vec));
    EXPECT_EQ(ENOMEM, errno);
    errno = 0;
    EXPECT_EQ(-1, mincore(page_of(small), page, vec));
    EXPECT_EQ(ENOMEM, errno);
    long long after = vm_size();
    EXPECT_FALSE(mapped(small));
    EXPECT_FALSE(mapped(big));
    if (before > 0 && after > 0) {
        EXPECT_GE(before - after, 32LL << 20);
    }
}

// One byte value per block, written and checked with memset/memcmp (fast
// under the sanitizers): memcmp(p, p + 1, len - 1) == 0 iff all bytes equal.
void fill_byte(void *p, size_t len, unsigned char v) { std::memset(p, v, len); }

bool check_byte(const void *p, size_t len, unsigned char v) {
    auto *b = static_cast<const unsigned char *>(p);
    return len == 0 || (b[0] == v && std::memcmp(b, b + 1, len - 1) == 0);
}

TEST(Arena, ThreadsAllocateAndFreeConcurrently) {
    Arena a(16 * kMiB);
    ASSERT_NE(nullptr, a.a);
    constexpr int kThreads = 4;
    constexpr long kMinOps = 3000; // per thread, however slow (TSan)
    std::atomic<long> outside{0}, corrupt{0}, nulls{0}, allocs{0}, ops{0};
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    auto work = [&](int t) {
        std::mt19937_64 rng(1234 + t);
        struct Block {
            void *p;
            size_t len;
            unsigned char v;
        };
        std::vector<Block> live;
        long n = 0;
        auto release = [&](const Block &b) {
            if (!check_byte(b.p, b.len, b.v)) corrupt++;
            knit__arena_free(a, b.p);
        };
        while (n < kMinOps || std::chrono::steady_clock::now() < deadline) {
            n++;
            bool alloc = live.size() < 8 || (live.size() < 200 && rng() % 2);
            if (alloc) {
                size_t r = rng() % 100;
                size_t len = r < 70   ? rng() % 4096
                             : r < 95 ? rng() % (128 * 1024)
                                      : rng() % (2 * kMiB);
                void *p = knit__arena_alloc(a, len);
                if (p == nullptr) {
                    nulls++;
                    while (live.size() > 4) { // full: make room
                        release(live.back());
                        live.pop_back();
                    }
                    continue;
                }
                if (!knit__arena_owns(a, p) ||
                    (len > 0 &&
                     !knit__arena_owns(a, static_cast<char *>(p) + len - 1)))
                    outside++;
                // Distinct from the neighbours' values most of the time, so
                // two blocks sharing bytes show up as corruption.
                allocs++;
                auto v = static_cast<unsigned char>(1 + (t * 64 + n) % 255);
                fill_byte(p, len, v);
                live.push_back({p, len, v});
            } else {
                size_t i = rng() % live.size();
                Block b = live[i];
                live[i] = live.back();
                live.pop_back();
                release(b);
            }
        }
        for (const Block &b : live) release(b);
        ops += n;
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) threads.emplace_back(work, t);
    for (auto &th : threads) th.join();
    EXPECT_EQ(0, outside.load());
    EXPECT_EQ(0, corrupt.load());
    knit__arena_stats s = a.stats();
    EXPECT_EQ(0u, s.in_use);
    EXPECT_LE(s.high_water, s.cap_bytes);
    EXPECT_LE(s.reserved, s.cap_bytes);
    EXPECT_EQ(static_cast<uint64_t>(nulls.load()), s.failures);
    EXPECT_EQ(static_cast<uint64_t>(allocs.load()), s.allocations);
    EXPECT_GE(ops.load(), kThreads * kMinOps);
    std::printf("%ld operations, %ld allocations, %ld refused (full)\n",
                ops.load(), allocs.load(), nulls.load());
    // Still usable afterwards.
    void *p = knit__arena_alloc(a, kMiB);
    EXPECT_NE(nullptr, p) << knit_last_error();
    knit__arena_free(a, p);
}

TEST(Arena, CreateDestroyCyclesDoNotGrowTheMappings) {
    auto cycle = [] {
        knit__arena *a = nullptr;
        ASSERT_EQ(0, knit__arena_create(8 * kMiB, &a)) << knit_last_error();
        void *p = knit__arena_alloc(a, 100);
        void *q = knit__arena_alloc(a, kMiB);
        ASSERT_NE(nullptr, p);
        ASSERT_NE(nullptr, q);
        std::memset(q, 1, kMiB);
        knit__arena_free(a, p); // q is discarded by destroy
        knit__arena_destroy(a);
    };
    for (int i = 0; i < 5; i++) cycle(); // warm up jemalloc's own state
    long long before = vm_size();
    ASSERT_GT(before, 0);
    for (int i = 0; i < 200; i++) cycle();
    long long after = vm_size();
    // A leaked region would add 8 MiB per cycle (1.6 GiB in all).
    EXPECT_LT(after - before, 16LL << 20) << before << " -> " << after;
}

#ifdef KNIT_TEST_ASAN
// Under ASan the arena tells the sanitizer which of its bytes are live (see
// "Under AddressSanitizer" in payload/arena.c): exactly the bytes asked for,
// from alloc to free. Small, large and huge classes; the tail of the size
// class and the whole block after its free are poisoned, and so is the
// region nobody was given.
TEST(ArenaAsan, LiveBytesAreExactlyTheBytesAskedFor) {
    Arena a(16 * kMiB);
    for (size_t len : {size_t{1}, size_t{13}, size_t{64}, size_t{1000},
                       size_t{4097}, size_t{100000}, 3 * kMiB + 5}) {
        char *p = static_cast<char *>(knit__arena_alloc(a, len));
        ASSERT_NE(nullptr, p) << len << ": " << knit_last_error();
        size_t usable = knit__arena_usable(a, p);
        EXPECT_EQ(nullptr, __asan_region_is_poisoned(p, len)) << len;
        if (usable > len) {
            EXPECT_TRUE(__asan_address_is_poisoned(p + len)) << len;
        }
        std::memset(p, 0x5a, len);  // instrumented: every byte may be written
        knit__arena_free(a, p);
        EXPECT_TRUE(__asan_address_is_poisoned(p)) << len;
        EXPECT_TRUE(__asan_address_is_poisoned(p + len - 1)) << len;
    }
    // Zero bytes asked: nothing is live.
    char *z = static_cast<char *>(knit__arena_alloc(a, 0));
    ASSERT_NE(nullptr, z);
    EXPECT_TRUE(__asan_address_is_poisoned(z));
    knit__arena_free(a, z);
}

// The reports themselves: a read after free and a read past the end of an
// arena payload abort with ASan's use-after-poison.
TEST(ArenaAsanDeathTest, ReadAfterFreeAndPastTheEndAreReported) {
    ::testing::FLAGS_gtest_death_test_style = "threadsafe";
    auto after_free = [] {
        knit__arena *a = nullptr;
        if (knit__arena_create(8 * kMiB, &a) != 0) return;
        volatile char *p = static_cast<char *>(knit__arena_alloc(a, 256));
        knit__arena_free(a, const_cast<char *>(p));
        (void)p[10];
    };
    EXPECT_DEATH(after_free(), "use-after-poison");
    auto past_end = [] {
        knit__arena *a = nullptr;
        if (knit__arena_create(8 * kMiB, &a) != 0) return;
        volatile char *p = static_cast<char *>(knit__arena_alloc(a, 100));
        (void)p[100];
    };
    EXPECT_DEATH(past_end(), "use-after-poison");
}
#else
TEST(ArenaAsan, LiveBytesAreExactlyTheBytesAskedFor) {
    GTEST_SKIP() << "checked under --config=asan (.ci/run runs it)";
}
#endif

}  // namespace
