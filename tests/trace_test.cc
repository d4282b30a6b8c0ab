// The claim trace (runtime/trace.c): the line it reports for the claims a test
// arranges, for ticket and dekker; lost polls; and that an untraced carpet
// calls the discipline's claim directly.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "sched/dekker.h"
#include "sched/ticket.h"
#include "runtime/trace.h"
#include "test_util.h"

using knit_test::Barrier;
using knit_test::Carpet;
using knit_test::Collector;
using knit_test::pending;

namespace {

struct Lines {
    std::vector<std::string> v;
    static void sink(void *ctx, const char *line) {
        static_cast<Lines *>(ctx)->v.emplace_back(line);
    }
};

void publish_burst(Carpet &c, uint64_t first, unsigned n) {
    for (unsigned i = 0; i < n; i++) ASSERT_GE(c.publish(first + i), 0) << i;
    knit__carpet_flush(c);
}

} // namespace

// ---- the line ------------------------------------------------------------

// Ticket: five tickets (lanes 31..27), batch 8, one claim: one line with
// the lanes in run order, the head before and after, no peers in between,
// no lost polls.
TEST(TraceLine, TicketClaim) {
    Lines lines;
    Carpet c("ticket", 2, 8, &Lines::sink, &lines);
    ASSERT_NE(nullptr, c.c);
    publish_burst(c, 0, 5);
    Collector col(c);
    ASSERT_EQ(5, col.claim(0));
    ASSERT_EQ(1u, lines.v.size());
    EXPECT_EQ("claim count=5 lanes=31,30,29,28,27 head=0->5 peers=0 lost=0",
              lines.v[0]);
    EXPECT_EQ((std::vector<uint64_t>{0, 1, 2, 3, 4}), col.ids)
        << "the wrapper passes the visits through";

    // A second claim continues from the head; a batch of 8 out of 10.
    publish_burst(c, 5, 10);
    ASSERT_EQ(8, col.claim(1));
    ASSERT_EQ(2u, lines.v.size());
    EXPECT_EQ("claim count=8 lanes=26,25,24,23,22,21,20,19 head=5->13 peers=0 "
              "lost=0",
              lines.v[1]);
}

// Idle and closed claims write no line; a failing claim writes its line
// with the error appended, and the head shows the close (-> -1).
TEST(TraceLine, TicketFailureAndIdle) {
    Lines lines;
    Carpet c("ticket", 1, 8, &Lines::sink, &lines);
    ASSERT_NE(nullptr, c.c);
    Collector col(c);
    EXPECT_EQ(0, col.claim());
    EXPECT_TRUE(lines.v.empty()) << "no line for an empty claim";
    publish_burst(c, 0, 3);
    col.fail_at = 1;
    EXPECT_EQ(KNIT_ETASK, col.claim());
    ASSERT_EQ(1u, lines.v.size());
    EXPECT_EQ("claim count=2 lanes=31,30 head=0->-1 peers=0 lost=0 error=-6",
              lines.v[0]);
    EXPECT_EQ(KNIT_ECLOSED, col.claim());
    EXPECT_EQ(1u, lines.v.size()) << "no line for a closed queue";
}

// Dekker: the line carries region= and home=, and " steal" when the region
// is not the consumer's home. 2 consumers, 4 regions of 8: consumer 1's
// home is region 2. Five tasks land in lanes 31..27 (region 3): a steal.
// Then eight more fill lanes 26..19 (the producer's shadow still shows
// 31..27 busy): consumer 1 claims its home region 2 (lanes 23..19).
TEST(TraceLine, DekkerClaim) {
    Lines lines;
    Carpet c("dekker", 2, 8, &Lines::sink, &lines);
    ASSERT_NE(nullptr, c.c);
    publish_burst(c, 0, 5);
    Collector col(c);
    ASSERT_EQ(5, col.claim(1));
    ASSERT_EQ(1u, lines.v.size());
    EXPECT_EQ("claim count=5 lanes=31,30,29,28,27 region=3 home=2 steal lost=0",
              lines.v[0]);

    publish_burst(c, 5, 8);
    ASSERT_EQ(5, col.claim(1));
    ASSERT_EQ(2u, lines.v.size());
    EXPECT_EQ("claim count=5 lanes=23,22,21,20,19 region=2 home=2 lost=0",
              lines.v[1]);
    ASSERT_EQ(3, col.claim(0));
    ASSERT_EQ(3u, lines.v.size());
    EXPECT_EQ("claim count=3 lanes=26,25,24 region=3 home=0 steal lost=0",
              lines.v[2]);
}

// ---- lost polls ----------------------------------------------------------

// A lost poll saw claimable work and came back empty. Arranged without
// racing: consumer 0's intent (forced) holds region 3, the only region with
// work, so consumer 1's two polls see 8 pending lanes and claim none. Once
// the intent clears, consumer 1's claim reports lost=2, and the count
// restarts after a line.
TEST(TraceLost, VisibleButEmptyPollsAreCounted) {
    Lines lines;
    Carpet c("dekker", 2, 8, &Lines::sink, &lines);
    ASSERT_NE(nullptr, c.c);
    publish_burst(c, 0, 8); // lanes 31..24: region 3
    knit__dekker_force_intent(c, 0, 1u << 3);
    Collector col(c);
    EXPECT_EQ(0, col.claim(1));
    EXPECT_EQ(0, col.claim(1));
    EXPECT_TRUE(lines.v.empty());
    EXPECT_EQ(2u, *knit__carpet_trace_lost(c, 1));
    EXPECT_EQ(0u, *knit__carpet_trace_lost(c, 0)) << "per consumer";

    knit__dekker_force_intent(c, 0, 0);
    ASSERT_EQ(8, col.claim(1));
    ASSERT_EQ(1u, lines.v.size());
    EXPECT_EQ(
        "claim count=8 lanes=31,30,29,28,27,26,25,24 region=3 home=2 steal lost=2",
        lines.v[0]);
    EXPECT_EQ(0u, *knit__carpet_trace_lost(c, 1)) << "reset by the line";

    publish_burst(c, 8, 1);
    ASSERT_EQ(1, col.claim(1));
    ASSERT_EQ(2u, lines.v.size());
    EXPECT_EQ("claim count=1 lanes=23 region=2 home=2 lost=0", lines.v[1]);
}

// An idle poll is not a lost poll: nothing was visible. Ticket consumers
// polling an empty queue 100 times still report lost=0 on their next claim.
TEST(TraceLost, IdlePollsAreNotLost) {
    Lines lines;
    Carpet c("ticket", 2, 8, &Lines::sink, &lines);
    ASSERT_NE(nullptr, c.c);
    Collector col(c);
    for (int i = 0; i < 100; i++) ASSERT_EQ(0, col.claim(i % 2));
    EXPECT_EQ(0u, *knit__carpet_trace_lost(c, 0));
    EXPECT_EQ(0u, *knit__carpet_trace_lost(c, 1));
    publish_burst(c, 0, 2);
    ASSERT_EQ(2, col.claim(1));
    ASSERT_EQ(1u, lines.v.size());
    EXPECT_EQ("claim count=2 lanes=31,30 head=0->2 peers=0 lost=0", lines.v[0]);
}

// ---- no overhead when untraced ---------------------------------------------

// The wrapper is chosen once, at creation: an untraced carpet's claim
// function is the discipline's own claim (no flag test on the hot path); a
// traced carpet's is the wrapper. For every built-in discipline.
TEST(TraceOverhead, UntracedCarpetCallsTheDisciplineDirectly) {
    Lines lines;
    for (const char *sched : {"ticket", "dekker", "single"}) {
        SCOPED_TRACE(sched);
        const knit_sched_ops *ops = knit_sched_find(sched);
        ASSERT_NE(nullptr, ops);
        Carpet plain(sched, 1, 8);
        ASSERT_NE(nullptr, plain.c);
        EXPECT_EQ(ops->claim, knit__carpet_claim_fn(plain));
        Carpet traced(sched, 1, 8, &Lines::sink, &lines);
        ASSERT_NE(nullptr, traced.c);
        EXPECT_NE(ops->claim, knit__carpet_claim_fn(traced));
        EXPECT_EQ(&knit__trace_claim, knit__carpet_claim_fn(traced));

        // Both claim the same; only the traced one reports.
        const size_t before = lines.v.size();
        publish_burst(plain, 0, 3);
        publish_burst(traced, 0, 3);
        Collector a(plain), b(traced);
        EXPECT_EQ(3, a.claim());
        EXPECT_EQ(3, b.claim());
        EXPECT_EQ(a.ids, b.ids);
        EXPECT_EQ(before + 1, lines.v.size());
    }
}

// ---- under threads ---------------------------------------------------------

namespace {

struct LockedLines {
    std::mutex mu;
    std::vector<std::string> v;
    static void sink(void *ctx, const char *line) {
        auto *self = static_cast<LockedLines *>(ctx);
        std::lock_guard<std::mutex> lock(self->mu);
        self->v.emplace_back(line);
    }
};

// The number after `key` in `line` ("count=" -> 5), or -1.
long long field(const std::string &line, const std::string &key) {
    size_t at = line.find(key);
    if (at == std::string::npos) return -1;
    return std::strtoll(line.c_str() + at + key.size(), nullptr, 10);
}

} // namespace

// One producer and three consumers on a traced carpet: one line per
// successful claim, each line's count equals its number of lanes and the
// counts add up to the tasks; ticket lines show head=a->b with b - a =
// count + peers and peers >= 0. (Also runs the wrapper under TSan.)
TEST(TraceThreads, LinesAccountForEveryTask) {
    for (const char *sched : {"ticket", "dekker"}) {
        SCOPED_TRACE(sched);
        constexpr uint64_t kTasks = 3000;
        constexpr unsigned kConsumers = 3;
        LockedLines lines;
        Carpet c(sched, kConsumers, 8, &LockedLines::sink, &lines);
        ASSERT_NE(nullptr, c.c);
        std::atomic<uint64_t> claimed{0};
        std::atomic<int> error{0};
        Barrier start(kConsumers + 1);
        std::vector<std::thread> threads;
        for (unsigned id = 0; id < kConsumers; id++) {
            threads.emplace_back([&, id] {
                Collector col(c);
                start.wait();
                while (claimed.load() < kTasks && error.load() == 0) {
                    int n = col.claim(id);
                    if (n > 0)
                        claimed += static_cast<uint64_t>(n);
                    else if (n < 0)
                        error = n;
                    else
                        std::this_thread::yield();
                }
            });
        }
        threads.emplace_back([&] {
            start.wait();
            uint64_t id = 0;
            while (id < kTasks && error.load() == 0) {
                int lane = c.publish(id);
                if (lane >= 0) {
                    if (++id % 5 == 0) knit__carpet_flush(c);
                    continue;
                }
                knit__carpet_flush(c);
                std::this_thread::yield();
            }
            knit__carpet_flush(c);
        });
        for (auto &t : threads) t.join();
        ASSERT_EQ(0, error.load());

        long long total = 0;
        for (const std::string &line : lines.v) {
            SCOPED_TRACE(line);
            const long long count = field(line, "count=");
            ASSERT_GT(count, 0);
            total += count;
            const std::string lanes = line.substr(line.find("lanes=") + 6);
            long long commas = 0;
            for (char ch : lanes.substr(0, lanes.find(' ')))
                commas += ch == ',';
            EXPECT_EQ(count, commas + 1);
            EXPECT_GE(field(line, "lost="), 0);
            if (std::string(sched) == "ticket") {
                const long long a = field(line, "head=");
                const size_t arrow = line.find("->");
                ASSERT_NE(std::string::npos, arrow);
                const long long b = std::strtoll(line.c_str() + arrow + 2, nullptr, 10);
                const long long peers = field(line, "peers=");
                EXPECT_GE(peers, 0);
                EXPECT_EQ(b - a, count + peers);
            } else {
                EXPECT_GE(field(line, "region="), 0);
                EXPECT_GE(field(line, "home="), 0);
            }
        }
        EXPECT_EQ(static_cast<long long>(kTasks), total);
    }
}
