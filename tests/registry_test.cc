// The discipline registry (sched/registry.c): the default, the list, name
// validation (from the API and from KNIT_SCHED), and registering plugins.
#include <cstdlib>
#include <string>

#include "test_util.h"

namespace {

using knit_test::ScopedSchedEnv;
using knit_test::noop_claim;
using knit_test::valid_ops;

bool contains(const std::string &s, const std::string &part) {
    return s.find(part) != std::string::npos;
}


void expect_lists_valid_names(const std::string &msg) {
    EXPECT_TRUE(contains(msg, "ticket")) << msg;
    EXPECT_TRUE(contains(msg, "dekker")) << msg;
    EXPECT_TRUE(contains(msg, "single")) << msg;
}

} // namespace

// ---- default and list ------------------------------------------------------

// With KNIT_SCHED unset, the default is ticket, by name and by resolve(NULL).
TEST(Registry, DefaultIsTicket) {
    ScopedSchedEnv env(nullptr);
    EXPECT_STREQ("ticket", knit_sched_default_name());
    const knit_sched_ops *ops = nullptr;
    ASSERT_EQ(0, knit_sched_resolve(nullptr, &ops)) << knit_last_error();
    ASSERT_NE(nullptr, ops);
    EXPECT_STREQ("ticket", ops->name);
    EXPECT_EQ(knit_sched_find("ticket"), ops);
}

// The built-ins are registered (in this order) and findable by name.
TEST(Registry, ListHasTheBuiltIns) {
    const knit_sched_ops *all[KNIT_SCHED_MAX] = {};
    const size_t n = knit_sched_list(all, KNIT_SCHED_MAX);
    ASSERT_GE(n, 3u);
    ASSERT_LE(n, KNIT_SCHED_MAX);
    EXPECT_STREQ("ticket", all[0]->name);
    EXPECT_STREQ("dekker", all[1]->name);
    EXPECT_STREQ("single", all[2]->name);
    for (const char *name : {"ticket", "dekker", "single"}) {
        const knit_sched_ops *ops = knit_sched_find(name);
        ASSERT_NE(nullptr, ops) << name;
        EXPECT_STREQ(name, ops->name);
        EXPECT_EQ(KNIT_SCHED_ABI_VERSION, ops->abi_version);
        EXPECT_NE(nullptr, ops->claim);
    }
    EXPECT_EQ(nullptr, knit_sched_find("cas-mask"));
    EXPECT_EQ(nullptr, knit_sched_find(nullptr));
    // A short buffer gets a prefix; the count is still the total.
    const knit_sched_ops *one[1] = {};
    EXPECT_EQ(n, knit_sched_list(one, 1));
    EXPECT_EQ(all[0], one[0]);
}

// ---- validation ------------------------------------------------------------

// An unknown name and a misspelled one fail with KNIT_EINVAL and a message
// naming the source, the bad value and every valid name. No fallback: *out
// is left alone.
TEST(RegistryLookup, UnknownAndMisspelledNamesFail) {
    for (const char *bad : {"fifo", "tickett", "Ticket", ""}) {
        SCOPED_TRACE(bad);
        const knit_sched_ops *ops = nullptr;
        EXPECT_EQ(KNIT_EINVAL, knit_sched_lookup(bad, "sched", &ops));
        EXPECT_EQ(nullptr, ops);
        const std::string msg = knit_last_error();
        expect_lists_valid_names(msg);
        EXPECT_TRUE(contains(msg, "sched must be one of")) << msg;
        EXPECT_TRUE(contains(msg, std::string("\"") + bad + "\"")) << msg;
        EXPECT_EQ(KNIT_EINVAL, knit_sched_resolve(bad, &ops));
        EXPECT_EQ(nullptr, ops);
    }
    const knit_sched_ops *ops = nullptr;
    EXPECT_EQ(KNIT_EINVAL, knit_sched_lookup(nullptr, "sched", &ops));
    EXPECT_TRUE(contains(knit_last_error(), "NULL")) << knit_last_error();
}

// A removed name says so and says what to use instead.
TEST(RegistryLookup, CasMaskSaysRemovedUseTicket) {
    const knit_sched_ops *ops = nullptr;
    EXPECT_EQ(KNIT_EINVAL, knit_sched_resolve("cas-mask", &ops));
    EXPECT_EQ(nullptr, ops);
    const std::string msg = knit_last_error();
    EXPECT_TRUE(contains(msg, "cas-mask was removed")) << msg;
    EXPECT_TRUE(contains(msg, "use ticket")) << msg;
    expect_lists_valid_names(msg);
}

// The same validation for KNIT_SCHED, with the message naming KNIT_SCHED.
TEST(RegistryLookup, EnvironmentVariableIsValidatedToo) {
    {
        ScopedSchedEnv env("dekker");
        const knit_sched_ops *ops = nullptr;
        ASSERT_EQ(0, knit_sched_resolve(nullptr, &ops)) << knit_last_error();
        EXPECT_STREQ("dekker", ops->name);
    }
    for (const char *bad : {"tickett", "nope", ""}) {
        SCOPED_TRACE(bad);
        ScopedSchedEnv env(bad);
        const knit_sched_ops *ops = nullptr;
        EXPECT_EQ(KNIT_EINVAL, knit_sched_resolve(nullptr, &ops));
        EXPECT_EQ(nullptr, ops);
        const std::string msg = knit_last_error();
        EXPECT_TRUE(contains(msg, "KNIT_SCHED")) << msg;
        EXPECT_TRUE(contains(msg, std::string("\"") + bad + "\"")) << msg;
        expect_lists_valid_names(msg);
    }
    {
        ScopedSchedEnv env("cas-mask");
        const knit_sched_ops *ops = nullptr;
        EXPECT_EQ(KNIT_EINVAL, knit_sched_resolve(nullptr, &ops));
        const std::string msg = knit_last_error();
        EXPECT_TRUE(contains(msg, "KNIT_SCHED")) << msg;
        EXPECT_TRUE(contains(msg, "use ticket")) << msg;
    }
}

// An explicit name beats KNIT_SCHED, even a KNIT_SCHED that is invalid.
TEST(RegistryLookup, ExplicitNameBeatsEnvironment) {
    const knit_sched_ops *ops = nullptr;
    {
        ScopedSchedEnv env("dekker");
        ASSERT_EQ(0, knit_sched_resolve("single", &ops)) << knit_last_error();
        EXPECT_STREQ("single", ops->name);
        ASSERT_EQ(0, knit_sched_resolve("ticket", &ops));
        EXPECT_STREQ("ticket", ops->name);
    }
    {
        ScopedSchedEnv env("tickett");
        ASSERT_EQ(0, knit_sched_resolve("dekker", &ops)) << knit_last_error();
        EXPECT_STREQ("dekker", ops->name);
        // ...and an invalid explicit name is reported as "sched", not env.
        EXPECT_EQ(KNIT_EINVAL, knit_sched_resolve("bogus", &ops));
        const std::string msg = knit_last_error();
        EXPECT_TRUE(contains(msg, "\"bogus\"")) << msg;
        EXPECT_FALSE(contains(msg, "KNIT_SCHED")) << msg;
    }
}

// ---- registering -----------------------------------------------------------

TEST(RegistryRegister, BadAbiVersionIsEabi) {
    knit_sched_ops ops = valid_ops("test-abi");
    ops.abi_version = KNIT_SCHED_ABI_VERSION + 1;
    EXPECT_EQ(KNIT_EABI, knit_sched_register(&ops));
    EXPECT_TRUE(contains(knit_last_error(), "abi_version")) << knit_last_error();
    ops.abi_version = 0;
    EXPECT_EQ(KNIT_EABI, knit_sched_register(&ops));
    ops = valid_ops("test-abi");
    ops.size = 8; // smaller than version 1's struct
    EXPECT_EQ(KNIT_EABI, knit_sched_register(&ops));
    EXPECT_EQ(nullptr, knit_sched_find("test-abi"));
}

TEST(RegistryRegister, MissingClaimOrBadInputIsEinval) {
    knit_sched_ops ops = valid_ops("test-noclaim");
    ops.claim = nullptr;
    EXPECT_EQ(KNIT_EINVAL, knit_sched_register(&ops));
    EXPECT_TRUE(contains(knit_last_error(), "claim")) << knit_last_error();
    EXPECT_EQ(nullptr, knit_sched_find("test-noclaim"));
    EXPECT_EQ(KNIT_EINVAL, knit_sched_register(nullptr));
    for (const char *bad : {"", "Upper", "has space", "dot.ted",
                            "a-name-that-is-far-longer-than-32-chars"}) {
        knit_sched_ops named = valid_ops(bad);
        EXPECT_EQ(KNIT_EINVAL, knit_sched_register(&named)) << bad;
    }
    knit_sched_ops unnamed = valid_ops(nullptr);
    EXPECT_EQ(KNIT_EINVAL, knit_sched_register(&unnamed));
}

TEST(RegistryRegister, TakenOrReservedNameIsEexist) {
    for (const char *taken : {"ticket", "dekker", "single"}) {
        knit_sched_ops ops = valid_ops(taken);
        EXPECT_EQ(KNIT_EEXIST, knit_sched_register(&ops)) << taken;
        EXPECT_NE(&ops, knit_sched_find(taken)) << "the built-in stays";
    }
    knit_sched_ops removed = valid_ops("cas-mask");
    EXPECT_EQ(KNIT_EEXIST, knit_sched_register(&removed));
    const std::string msg = knit_last_error();
    EXPECT_TRUE(contains(msg, "reserved")) << msg;
    EXPECT_TRUE(contains(msg, "use ticket")) << msg;
    EXPECT_EQ(nullptr, knit_sched_find("cas-mask"));
}

// A new, valid discipline registers (0), is found by name, listed, resolved
// by name (also through KNIT_SCHED), usable for a carpet, and cannot be
// registered twice.
TEST(RegistryRegister, NewDisciplineIsFindable) {
    static const knit_sched_ops ops = valid_ops("test-noop");
    static bool registered = false; // the registry is per process
    const int rc = knit_sched_register(&ops);
    if (!registered) {
        ASSERT_EQ(0, rc) << knit_last_error();
        registered = true;
    } else {
        EXPECT_EQ(KNIT_EEXIST, rc) << "--gtest_repeat: already registered";
    }
    EXPECT_EQ(&ops, knit_sched_find("test-noop"));
    const knit_sched_ops *all[KNIT_SCHED_MAX] = {};
    const size_t n = knit_sched_list(all, KNIT_SCHED_MAX);
    bool listed = false;
    for (size_t i = 0; i < n && i < KNIT_SCHED_MAX; i++)
        listed = listed || all[i] == &ops;
    EXPECT_TRUE(listed);
    const knit_sched_ops *found = nullptr;
    EXPECT_EQ(0, knit_sched_resolve("test-noop", &found));
    EXPECT_EQ(&ops, found);
    {
        ScopedSchedEnv env("test-noop");
        found = nullptr;
        EXPECT_EQ(0, knit_sched_resolve(nullptr, &found));
        EXPECT_EQ(&ops, found);
    }
    // The error message for a bad name now lists it as valid too.
    EXPECT_EQ(KNIT_EINVAL, knit_sched_lookup("nope", "sched", nullptr));
    EXPECT_TRUE(contains(knit_last_error(), "test-noop")) << knit_last_error();

    knit_carpet *c = nullptr;
    knit_sched_params p{2, 8};
    ASSERT_EQ(0, knit__carpet_create(&ops, &p, nullptr, nullptr, &c));
    EXPECT_EQ(&noop_claim, knit__carpet_claim_fn(c));
    knit__carpet_destroy(c);

    knit_sched_ops again = valid_ops("test-noop");
    EXPECT_EQ(KNIT_EEXIST, knit_sched_register(&again));
    EXPECT_EQ(KNIT_EEXIST, knit_sched_register(&ops));
}
