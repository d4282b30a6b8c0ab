// The asymmetric fence (base/asym_fence.h): the store-buffering outcome
// it forbids never shows, and the process-wide decision follows
// KNIT_MEMBARRIER (this test runs with it set to 1, see tests/BUILD) and
// is taken again in a forked child.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/asym_fence_litmus.h"

namespace {

// Where the kernel has it (and not under TSan), the fence is on; where it
// is off, the test checks the symmetric fallback the same way.
TEST(AsymFence, StoreBufferingNeverShowsBothZero) {
    ::testing::Test::RecordProperty("asym_on", knit_test_asym_on());
    unsigned bad = knit_test_sb_litmus(100000, KNIT_TEST_SB_ASYM);
    ASSERT_NE(~0u, bad);
    EXPECT_EQ(0u, bad) << "asym fence on: " << knit_test_asym_on();
}

#if !defined(KNIT_SANITIZER)
// The harness sees the reordering the fence forbids when there is no
// fence (x86 and ARM both buffer stores), so the test above could fail.
// Not under sanitizers: their atomics calls leave no window.
TEST(AsymFence, WithoutAFenceTheHarnessSeesBothZero) {
    unsigned bad = 0;
    for (int round = 0; round < 5 && bad == 0; round++)
        bad = knit_test_sb_litmus(200000, KNIT_TEST_SB_NONE);
    EXPECT_GT(bad, 0u);
}
#endif

// Runs fn in a forked child with KNIT_MEMBARRIER set to `env` (nullptr:
// unset); returns its exit status.
int in_child(const char *env, int (*fn)()) {
    pid_t pid = fork();
    if (pid == 0) {
        if (env) setenv("KNIT_MEMBARRIER", env, 1); else unsetenv("KNIT_MEMBARRIER");
        _exit(fn());
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

TEST(AsymFence, OnlyKnitMembarrierOneTurnsItOn) {
    knit_test_asym_heavy();  // the parent decides first; the child again
    EXPECT_EQ(0, in_child("0", [] { return knit_test_asym_on(); }));
    EXPECT_EQ(0, in_child(nullptr, [] { return knit_test_asym_on(); })) << "off by default";
    EXPECT_EQ(0, in_child("yes", [] { return knit_test_asym_on(); }));
#if !defined(KNIT_TSAN)
    // On where the kernel has it: the machines knit is built and tested
    // on (Debian 12, Linux 6.1) do, unless a seccomp filter refuses it.
    const char *env = getenv("KNIT_MEMBARRIER");
    if (env != nullptr && std::string(env) == "1") {
        EXPECT_EQ(knit_test_asym_on(), in_child("1", [] { return knit_test_asym_on(); }));
    }
#else
    EXPECT_EQ(0, in_child("1", [] { return knit_test_asym_on(); })) << "never under TSan";
#endif
}

TEST(AsymFence, ForkedChildRegistersAgain) {
    knit_test_asym_heavy();
    // The child is a new process to the kernel: its heavy side must work
    // (an unregistered private expedited membarrier would fail).
    EXPECT_EQ(0, in_child("1", [] {
        knit_test_asym_heavy();
#if defined(KNIT_TSAN)
        return 0;  // TSan: a forked child may not start threads
#else
        return knit_test_sb_litmus(2000, KNIT_TEST_SB_ASYM) == 0 ? 0 : 1;
#endif
    }));
#if !defined(KNIT_TSAN)
    EXPECT_EQ(knit_test_asym_on(), in_child("1", [] { return knit_test_asym_on(); }));
#endif
}

}  // namespace
