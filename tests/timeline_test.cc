// The timeline (runtime/timeline.c): the file parses and passes the format
// checks of tools/timeline.py (fields Perfetto needs, spans nest per
// thread), its counts equal knit_pool_stats, a tiny ring keeps the newest
// records and counts the rest as dropped, path.N for further pools, bad
// paths and bad options, labels, pipelines and parallel_for, and writing
// on demand while the pool runs (under TSan: no data race between a ring's
// writer and the reader).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "knit/knit.h"

namespace {

class ScopedEnv {
  public:
    ScopedEnv(const char *name, const char *value) : name_(name) {
        const char *old = std::getenv(name);
        had_ = old != nullptr;
        if (had_) old_ = old;
        if (value != nullptr)
            setenv(name, value, 1);
        else
            unsetenv(name);
    }
    ~ScopedEnv() {
        if (had_)
            setenv(name_.c_str(), old_.c_str(), 1);
        else
            unsetenv(name_.c_str());
    }
    ScopedEnv(const ScopedEnv &) = delete;
    ScopedEnv &operator=(const ScopedEnv &) = delete;

  private:
    std::string name_;
    bool had_ = false;
    std::string old_;
};

std::string TmpPath(const std::string &name) {
    const char *dir = std::getenv("TEST_TMPDIR");
    std::string d = dir != nullptr ? dir : "/tmp";
    const ::testing::TestInfo *t = ::testing::UnitTest::GetInstance()->current_test_info();
    return d + "/" + t->name() + "." + name;
}

bool Exists(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

std::string Script() {
    const char *src = std::getenv("TEST_SRCDIR");
    std::string s = src != nullptr ? std::string(src) + "/knit/tools/timeline.py"
                                   : "tools/timeline.py";
    return s;
}

// What tools/timeline.py --counts says about a file.
struct Trace {
    bool ok = false;
    std::string out;                                  // everything it printed
    std::map<int, std::string> names;                 // tid -> thread name
    std::map<int, std::map<std::string, long>> track; // tid -> kind -> count
    std::map<std::pair<int, std::string>, long> labels;
    std::map<std::string, std::string> other;
    long pieces = 0, piece_len = 0, counters = 0;

    long Get(int tid, const std::string &k) const {
        auto t = track.find(tid);
        if (t == track.end()) return 0;
        auto v = t->second.find(k);
        return v == t->second.end() ? 0 : v->second;
    }
    // Sum of kind k over the tracks whose name starts (or does not) with
    // "knit w".
    long Sum(const std::string &k, bool workers) const {
        long n = 0;
        for (auto &kv : names)
            if ((kv.second.rfind("knit w", 0) == 0) == workers) n += Get(kv.first, k);
        return n;
    }
    int WorkerTid(unsigned w) const {
        std::string prefix = "knit w" + std::to_string(w) + " (";
        for (auto &kv : names)
            if (kv.second.rfind(prefix, 0) == 0) return kv.first;
        return -1;
    }
    long Other(const std::string &k) const {
        auto it = other.find(k);
        return it == other.end() ? -1 : std::atol(it->second.c_str());
    }
};

Trace Check(const std::string &path) {
    Trace t;
    std::string cmd = "python3 '" + Script() + "' '" + path + "' --counts 2>&1";
    FILE *f = popen(cmd.c_str(), "r");
    if (f == nullptr) {
        t.out = "popen failed";
        return t;
    }
    char buf[4096];
    while (fgets(buf, sizeof buf, f) != nullptr) t.out += buf;
    int st = pclose(f);
    t.ok = st == 0;
    std::istringstream in(t.out);
    std::string line;
    while (std::getline(in, line)) {
        std::vector<std::string> col;
        std::string c;
        std::istringstream ls(line);
        while (std::getline(ls, c, '\t')) col.push_back(c);
        if (col.empty()) continue;
        if (col[0] == "thread" && col.size() == 3) t.names[std::stoi(col[1])] = col[2];
        if (col[0] == "track" && col.size() == 4)
            t.track[std::stoi(col[1])][col[2]] = std::stol(col[3]);
        if (col[0] == "label" && col.size() == 4)
            t.labels[{std::stoi(col[1]), col[2]}] = std::stol(col[3]);
        if (col[0] == "other" && col.size() == 3) t.other[col[1]] = col[2];
        if (col[0] == "pieces" && col.size() == 3) {
            t.pieces = std::stol(col[1]);
            t.piece_len = std::stol(col[2]);
        }
        if (col[0] == "counters" && col.size() == 2) t.counters = std::stol(col[1]);
    }
    return t;
}

knit_pool *MakePool(unsigned threads, const char *timeline, size_t events = 0,
                    int64_t await_spin_ns = 0) {
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = threads;
    o.timeline = timeline;
    o.timeline_events = events;
    o.await_spin_ns = await_spin_ns;
    knit_pool *p = nullptr;
    EXPECT_EQ(0, knit_pool_create(&o, &p)) << knit_last_error();
    return p;
}

void *Nothing(knit_task *, void *arg) { return arg; }

// Sum of fib through nested submit/await: awaits inside tasks help.
void *Fib(knit_task *t, void *arg) {
    intptr_t n = reinterpret_cast<intptr_t>(arg);
    if (n < 2) return arg;
    knit_future *a = nullptr;
    if (knit_submit(knit_task_pool(t), Fib, reinterpret_cast<void *>(n - 1), &a) != 0)
        return nullptr;
    intptr_t b = reinterpret_cast<intptr_t>(Fib(t, reinterpret_cast<void *>(n - 2)));
    void *ra = nullptr;
    knit_await(a, -1, &ra);
    knit_future_release(a);
    return reinterpret_cast<void *>(reinterpret_cast<intptr_t>(ra) + b);
}

void RunTasks(knit_pool *p, unsigned n, knit_fn fn = Nothing) {
    std::vector<knit_future *> fs(n);
    for (unsigned i = 0; i < n; i++) ASSERT_EQ(0, knit_submit(p, fn, nullptr, &fs[i]));
    for (unsigned i = 0; i < n; i++) {
        ASSERT_EQ(0, knit_await(fs[i], -1, nullptr)) << knit_last_error();
        knit_future_release(fs[i]);
    }
}

// Stats once every worker has gone to sleep: no park starts after them
// (a worker without work spins for microseconds, then parks until
// destroy rings it), so destroy's final file has exactly these parks.
knit_pool_stats_t SettledStats(knit_pool *p) {
    knit_pool_stats_t a{}, b{};
    a.size = b.size = sizeof a;
    EXPECT_EQ(0, knit_pool_stats(p, &a));
    for (int i = 0; i < 200; i++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        EXPECT_EQ(0, knit_pool_stats(p, &b));
        bool same = a.total.parks == b.total.parks && b.total.parks >= a.threads;
        a = b;
        if (same) break;
    }
    return a;
}

TEST(Timeline, OffByDefault) {
    ScopedEnv env("KNIT_TIMELINE", nullptr);
    knit_pool *p = MakePool(2, nullptr, 64); // a capacity alone does not switch it on
    RunTasks(p, 100);
    EXPECT_EQ(KNIT_ENOENT, knit_pool_timeline_write(p, TmpPath("x.json").c_str()));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "no timeline")) << knit_last_error();
    EXPECT_FALSE(Exists(TmpPath("x.json")));
    EXPECT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
    // Set but empty: off as well.
    ScopedEnv empty("KNIT_TIMELINE", "");
    p = MakePool(1, nullptr);
    EXPECT_EQ(KNIT_ENOENT, knit_pool_timeline_write(p, nullptr));
    EXPECT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
}

TEST(Timeline, EnvironmentCountsEqualStats) {
    std::string path = TmpPath("t.json");
    ScopedEnv env("KNIT_TIMELINE", path.c_str());
    knit_pool *p = MakePool(2, nullptr);
    RunTasks(p, 3000);
    knit_future *f = nullptr; // fork-join from outside: the caller helps
    ASSERT_EQ(0, knit_submit(p, Fib, reinterpret_cast<void *>(static_cast<intptr_t>(16)), &f));
    void *r = nullptr;
    ASSERT_EQ(0, knit_await(f, -1, &r)) << knit_last_error();
    EXPECT_EQ(987, reinterpret_cast<intptr_t>(r));
    knit_future_release(f);
    knit_pool_stats_t st = SettledStats(p);
    ASSERT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));

    Trace t = Check(path);
    ASSERT_TRUE(t.ok) << t.out;
    EXPECT_EQ(0, t.Other("dropped")) << t.out;
    EXPECT_EQ(2, t.Other("threads"));
    EXPECT_EQ("ticket", t.other["sched"]);
    EXPECT_EQ(65536, t.Other("capacity"));
    EXPECT_FALSE(t.other["knit_version"].empty());
    for (unsigned w = 0; w < 2; w++) {
        int tid = t.WorkerTid(w);
        ASSERT_GE(tid, 0) << t.out;
        EXPECT_EQ("knit w" + std::to_string(w) + " (ticket)", t.names[tid]);
        EXPECT_EQ(static_cast<long>(st.worker[w].tasks_run), t.Get(tid, "task")) << w;
        EXPECT_EQ(static_cast<long>(st.worker[w].claims), t.Get(tid, "claim")) << w;
        EXPECT_EQ(static_cast<long>(st.worker[w].lanes_claimed), t.Get(tid, "lanes")) << w;
        EXPECT_EQ(static_cast<long>(st.worker[w].parks), t.Get(tid, "idle")) << w;
    }
    // Tasks that threads outside the pool ran while awaiting.
    EXPECT_EQ(static_cast<long>(st.helped), t.Sum("task", false)) << t.out;
    EXPECT_EQ(static_cast<long>(st.tasks_run), t.Sum("task", true) + t.Sum("task", false));
    // Every task of the outside track is a helped one, inside an await.
    EXPECT_EQ(t.Sum("task", false), t.Sum("task_help", false));
    if (st.helped > 0) {
        EXPECT_GT(t.Sum("await", false), 0);
    }
    // Fib's awaits inside tasks ran their children: helping on workers.
    EXPECT_GT(t.Sum("task_help", true) + t.Sum("task_help", false), 0) << t.out;
}

TEST(Timeline, TinyRingKeepsTheNewest) {
    std::string path = TmpPath("t.json");
    // One worker, an awaiter that never helps: the worker's ring has all
    // the tasks. 64 records; 5000 "old" tasks, then 500 "new" ones.
    knit_pool *p = MakePool(1, path.c_str(), 50 /* rounded up to 64 */, -1);
    struct L {
        static void *Old(knit_task *t, void *) {
            knit_task_label(t, "old");
            return nullptr;
        }
        static void *New(knit_task *t, void *) {
            knit_task_label(t, "new");
            return nullptr;
        }
    };
    RunTasks(p, 5000, L::Old);
    RunTasks(p, 500, L::New);
    knit_pool_stats_t st = SettledStats(p);
    ASSERT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
    Trace t = Check(path);
    ASSERT_TRUE(t.ok) << t.out;
    EXPECT_EQ(64, t.Other("capacity"));
    int w0 = t.WorkerTid(0);
    ASSERT_GE(w0, 0);
    long kept = 0;
    for (auto &kv : t.track[w0])
        if (kv.first != "lanes" && kv.first != "task_help") kept += kv.second;
    EXPECT_LE(kept, 64) << t.out;
    EXPECT_GT(t.Get(w0, "task"), 0);
    EXPECT_EQ(0, (t.labels[{w0, "old"}])) << t.out;
    EXPECT_EQ(t.Get(w0, "task"), (t.labels[{w0, "new"}]));
    // At least every task but the kept ones was dropped.
    EXPECT_GE(t.Other("dropped"), static_cast<long>(st.worker[0].tasks_run) - 64) << t.out;
}

TEST(Timeline, SecondPoolWritesPathN) {
    std::string path = TmpPath("t.json");
    knit_pool *a = MakePool(1, path.c_str());
    knit_pool *b = MakePool(1, path.c_str());
    RunTasks(a, 10);
    RunTasks(b, 20);
    ASSERT_EQ(0, knit_pool_destroy(b, KNIT_DRAIN));
    ASSERT_EQ(0, knit_pool_destroy(a, KNIT_DRAIN));
    knit_pool *c = MakePool(1, path.c_str());
    ASSERT_EQ(0, knit_pool_destroy(c, KNIT_DRAIN));
    Trace ta = Check(path), tb = Check(path + ".1"), tc = Check(path + ".2");
    ASSERT_TRUE(ta.ok) << ta.out;
    ASSERT_TRUE(tb.ok) << tb.out;
    ASSERT_TRUE(tc.ok) << tc.out;
    EXPECT_EQ(10, ta.Sum("task", true) + ta.Sum("task", false));
    EXPECT_EQ(20, tb.Sum("task", true) + tb.Sum("task", false));
    EXPECT_EQ(0, tc.Sum("task", true));
    EXPECT_FALSE(Exists(path + ".3"));
}

TEST(Timeline, BadPathIsAnError) {
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 1;
    o.timeline = "/nonexistent-knit-dir/sub/t.json";
    knit_pool *p = nullptr;
    EXPECT_EQ(KNIT_EIO, knit_pool_create(&o, &p));
    EXPECT_EQ(nullptr, p);
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "/nonexistent-knit-dir/sub/t.json"))
        << knit_last_error();
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "No such file")) << knit_last_error();
    {
        ScopedEnv env("KNIT_TIMELINE", "/nonexistent-knit-dir/env.json");
        o.timeline = nullptr;
        EXPECT_EQ(KNIT_EIO, knit_pool_create(&o, &p));
        EXPECT_NE(nullptr, std::strstr(knit_last_error(), "KNIT_TIMELINE")) << knit_last_error();
    }
    // On demand, to a bad path: KNIT_EIO; the pool goes on.
    std::string path = TmpPath("t.json");
    p = MakePool(1, path.c_str());
    EXPECT_EQ(KNIT_EIO, knit_pool_timeline_write(p, "/nonexistent-knit-dir/x.json"));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "x.json")) << knit_last_error();
    EXPECT_EQ(KNIT_EINVAL, knit_pool_timeline_write(p, ""));
    EXPECT_EQ(KNIT_EINVAL, knit_pool_timeline_write(nullptr, path.c_str()));
    RunTasks(p, 5);
    ASSERT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
    EXPECT_EQ(KNIT_ESHUTDOWN, knit_pool_timeline_write(p, nullptr));
    EXPECT_TRUE(Check(path).ok);
}

TEST(Timeline, OptionValidation) {
    ScopedEnv off("KNIT_TIMELINE", nullptr);
    std::string path = TmpPath("t.json");
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    o.threads = 1;
    o.timeline = path.c_str();
    knit_pool *p = nullptr;
    for (size_t bad : {size_t{1}, size_t{15}, size_t{(1u << 22) + 1}}) {
        o.timeline_events = bad;
        EXPECT_EQ(KNIT_EINVAL, knit_pool_create(&o, &p)) << bad;
        EXPECT_NE(nullptr, std::strstr(knit_last_error(), "timeline_events")) << knit_last_error();
        EXPECT_NE(nullptr, std::strstr(knit_last_error(), std::to_string(bad).c_str()));
    }
    o.timeline_events = 0;
    o.timeline = "";
    EXPECT_EQ(KNIT_EINVAL, knit_pool_create(&o, &p));
    EXPECT_NE(nullptr, std::strstr(knit_last_error(), "options.timeline")) << knit_last_error();
    o.timeline = path.c_str();
    for (const char *bad : {"abc", "12x", "-5", "8", "99999999999"}) {
        ScopedEnv env("KNIT_TIMELINE_EVENTS", bad);
        EXPECT_EQ(KNIT_EINVAL, knit_pool_create(&o, &p)) << bad;
        EXPECT_NE(nullptr, std::strstr(knit_last_error(), "KNIT_TIMELINE_EVENTS"))
            << knit_last_error();
    }
    {
        ScopedEnv env("KNIT_TIMELINE_EVENTS", "100"); // rounded up to 128
        ASSERT_EQ(0, knit_pool_create(&o, &p)) << knit_last_error();
        ASSERT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
        Trace t = Check(path);
        ASSERT_TRUE(t.ok) << t.out;
        EXPECT_EQ(128, t.Other("capacity"));
    }
}

extern "C" void *knit_timeline_test_exported(knit_task *, void *arg) { return arg; }
static void *UnexportedTask(knit_task *, void *arg) { return arg; }

TEST(Timeline, Labels) {
    std::string path = TmpPath("t.json");
    knit_pool *p = MakePool(1, path.c_str(), 0, -1);
    struct L {
        static void *Labelled(knit_task *t, void *) {
            knit_task_label(t, "my \"label\"");
            return nullptr;
        }
    };
    RunTasks(p, 3, L::Labelled);
    RunTasks(p, 2, knit_timeline_test_exported);
    RunTasks(p, 1, UnexportedTask);
    EXPECT_EQ(KNIT_EINVAL, knit_task_label(nullptr, "x"));
    ASSERT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
    Trace t = Check(path);
    ASSERT_TRUE(t.ok) << t.out;
    int w0 = t.WorkerTid(0);
    EXPECT_EQ(3, (t.labels[{w0, "my \"label\""}])) << t.out;
    // A symbol the dynamic linker knows (the test links with -rdynamic).
    EXPECT_EQ(2, (t.labels[{w0, "knit_timeline_test_exported"}])) << t.out;
    // A static function: its address, and where it is.
    long addr = 0;
    for (auto &kv : t.labels)
        if (kv.first.first == w0 && kv.first.second.rfind("fn@0x", 0) == 0) addr += kv.second;
    EXPECT_EQ(1, addr) << t.out;
}

int Sum(void *ctx, size_t b, size_t e) {
    auto *s = static_cast<std::atomic<size_t> *>(ctx);
    for (size_t i = b; i < e; i++) s->fetch_add(i, std::memory_order_relaxed);
    return 0;
}

TEST(Timeline, PipelineAndParallelFor) {
    std::string path = TmpPath("t.json");
    knit_pool *p = MakePool(2, path.c_str());
    std::atomic<size_t> sum{0};
    ASSERT_EQ(0, knit_parallel_for(p, 0, 10000, 100, Sum, &sum));
    EXPECT_EQ(size_t{10000} * 9999 / 2, sum.load());

    struct Ctx {
        unsigned next = 0;
    } ctx;
    auto input = [](void *c, knit_buf *item) -> int {
        auto *x = static_cast<Ctx *>(c);
        if (x->next == 200) return 0;
        x->next++;
        *item = knit_buf_malloced(std::malloc(64), 64);
        return 1;
    };
    auto stage = [](void *, uint64_t, knit_buf *) -> int { return 0; };
    knit_stage stages[3] = {{KNIT_STAGE_PARALLEL, stage, nullptr},
                            {KNIT_STAGE_SERIAL, stage, nullptr},
                            {KNIT_STAGE_SERIAL_IN_ORDER, stage, nullptr}};
    knit_pipeline_options po = KNIT_PIPELINE_OPTIONS_INIT;
    po.input = input;
    po.input_ctx = &ctx;
    po.stages = stages;
    po.nstages = 3;
    po.max_in_flight = 4;
    knit_pipeline *pl = nullptr;
    ASSERT_EQ(0, knit_pipeline_create(p, &po, &pl));
    ASSERT_EQ(0, knit_pipeline_run(pl)) << knit_last_error();
    knit_pipeline_stats ps;
    ASSERT_EQ(0, knit_pipeline_stats_get(pl, &ps));
    knit_pipeline_destroy(pl);
    knit_pool_stats_t st{};
    st.size = sizeof st;
    ASSERT_EQ(0, knit_pool_stats(p, &st));
    ASSERT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));

    Trace t = Check(path);
    ASSERT_TRUE(t.ok) << t.out;
    EXPECT_EQ(0, t.Other("dropped"));
    // Every piece once: 10000 indexes in pieces of at most 100.
    EXPECT_EQ(10000, t.piece_len);
    EXPECT_GE(t.pieces, 100);
    // parallel_for runs on fork-join frames: one span per frame a thief
    // stole (a worker, or the thread that helps while it awaits, on its
    // own track), as many as the stats count.
    EXPECT_EQ(static_cast<long>(st.frames_stolen), t.Sum("frame", true) + t.Sum("frame", false))
        << t.out;
    // Stage spans = items x stages; an in-flight sample per change.
    EXPECT_EQ(200, static_cast<long>(ps.completed));
    EXPECT_EQ(200 * 3, t.Sum("stage", true) + t.Sum("stage", false)) << t.out;
    EXPECT_EQ(2 * 200, t.counters);
    // The input blocks at 4 in flight: some stall spans on the driver.
    EXPECT_GT(t.Sum("stall", false), 0) << t.out;
}

// Writes on demand while other threads submit and run tasks into rings
// small enough to wrap during the copy. Each file passes the checks; under
// TSan this is the race test of the ring's sequence-lock.
TEST(Timeline, WriteWhileRunning) {
    std::string path = TmpPath("t.json");
    knit_pool *p = MakePool(2, path.c_str(), 16);
    std::atomic<bool> stop{false};
    std::vector<std::thread> subs;
    for (int s = 0; s < 2; s++)
        subs.emplace_back([&] {
            while (!stop.load(std::memory_order_relaxed)) RunTasks(p, 50);
        });
    std::vector<std::string> files;
    for (int i = 0; i < 20; i++) {
        std::string f = path + ".now" + std::to_string(i);
        ASSERT_EQ(0, knit_pool_timeline_write(p, f.c_str())) << knit_last_error();
        files.push_back(f);
    }
    // From inside a task, too.
    struct W {
        static void *Write(knit_task *t, void *arg) {
            return reinterpret_cast<void *>(static_cast<intptr_t>(knit_pool_timeline_write(
                knit_task_pool(t), static_cast<const char *>(arg))));
        }
    };
    std::string inside = path + ".inside";
    knit_future *f = nullptr;
    ASSERT_EQ(0, knit_submit(p, W::Write, const_cast<char *>(inside.c_str()), &f));
    void *r = nullptr;
    ASSERT_EQ(0, knit_await(f, -1, &r));
    knit_future_release(f);
    EXPECT_EQ(0, reinterpret_cast<intptr_t>(r));
    files.push_back(inside);
    stop.store(true, std::memory_order_relaxed);
    for (auto &th : subs) th.join();
    ASSERT_EQ(0, knit_pool_destroy(p, KNIT_DRAIN));
    files.push_back(path);
    for (auto &file : files) {
        Trace t = Check(file);
        EXPECT_TRUE(t.ok) << file << ": " << t.out;
        EXPECT_EQ(16, t.Other("capacity")) << file;
    }
}

}  // namespace
