// The default thread count (runtime/cpus.c): the affinity mask capped by the
// cgroup v2 cpu.max quota, read from fake /proc and cgroupfs files here.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "knit/knit.h"
#include "runtime/cpus.h"

namespace {

struct TempTree {
    std::string root;
    TempTree() {
        const char *t = getenv("TEST_TMPDIR");
        std::string tmpl = std::string(t ? t : "/tmp") + "/cpus.XXXXXX";
        root = mkdtemp(&tmpl[0]);
    }
    ~TempTree() {
        if (std::system(("rm -rf '" + root + "'").c_str()) != 0) ADD_FAILURE() << root;
    }
    std::string mkdir(const std::string &rel) {
        std::string p = root;
        size_t i = 0;
        while (i != std::string::npos) {
            i = rel.find('/', i + 1);
            p = root + "/" + rel.substr(0, i);
            ::mkdir(p.c_str(), 0755);
        }
        return root + "/" + rel;
    }
    std::string write(const std::string &rel, const std::string &text) {
        std::string p = root + "/" + rel;
        FILE *f = fopen(p.c_str(), "w");
        EXPECT_NE(nullptr, f) << p;
        if (f) {
            fputs(text.c_str(), f);
            fclose(f);
        }
        return p;
    }
};

TEST(Cpus, CpuMaxParse) {
    EXPECT_EQ(0u, knit__cpu_max_parse("max 100000\n"));
    EXPECT_EQ(2u, knit__cpu_max_parse("200000 100000\n"));
    EXPECT_EQ(2u, knit__cpu_max_parse("150000 100000"));  // rounded up
    EXPECT_EQ(1u, knit__cpu_max_parse("1000 100000"));     // at least one
    EXPECT_EQ(0u, knit__cpu_max_parse("0 100000"));
    EXPECT_EQ(0u, knit__cpu_max_parse("-5 100000"));
    EXPECT_EQ(0u, knit__cpu_max_parse("100000 0"));
    EXPECT_EQ(0u, knit__cpu_max_parse("garbage"));
    EXPECT_EQ(0u, knit__cpu_max_parse(""));
}

TEST(Cpus, CgroupLimitIsTheTightestAncestor) {
    TempTree t;
    std::string mount = t.mkdir("cg");
    std::string leaf = t.mkdir("cg/a/b/c");
    EXPECT_EQ(0u, knit__cgroup_limit(mount.c_str(), leaf.c_str()));  // no files
    t.write("cg/a/b/c/cpu.max", "max 100000\n");
    EXPECT_EQ(0u, knit__cgroup_limit(mount.c_str(), leaf.c_str()));
    t.write("cg/a/cpu.max", "300000 100000\n");
    EXPECT_EQ(3u, knit__cgroup_limit(mount.c_str(), leaf.c_str()));
    t.write("cg/a/b/cpu.max", "50000 50000\n");
    EXPECT_EQ(1u, knit__cgroup_limit(mount.c_str(), leaf.c_str()));
    t.write("cg/cpu.max", "100000 200000\n");  // the mount itself counts
    t.write("cg/a/b/cpu.max", "max 100000\n");
    EXPECT_EQ(1u, knit__cgroup_limit(mount.c_str(), leaf.c_str()));
    // A directory outside the mount is refused.
    EXPECT_EQ(0u, knit__cgroup_limit(leaf.c_str(), mount.c_str()));
}

TEST(Cpus, CgroupDirFromProcFiles) {
    TempTree t;
    char mount[4096], dir[4096];
    std::string mi = t.write(
        "mountinfo",
        "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
        "30 22 0:26 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw\n");
    std::string cg = t.write("cgroup", "0::/system.slice/app.service\n");
    ASSERT_EQ(0, knit__cgroup_dir(mi.c_str(), cg.c_str(), mount, sizeof mount,
                                  dir, sizeof dir));
    EXPECT_STREQ("/sys/fs/cgroup", mount);
    EXPECT_STREQ("/sys/fs/cgroup/system.slice/app.service", dir);

    // A container without a cgroup namespace: the mount shows the
    // hierarchy from /docker/x down, and /proc/self/cgroup the full path.
    mi = t.write("mountinfo2",
                 "40 30 0:26 /docker/x /sys/fs/cgroup ro - cgroup2 cgroup rw\n");
    cg = t.write("cgroup2", "0::/docker/x/inner\n");
    ASSERT_EQ(0, knit__cgroup_dir(mi.c_str(), cg.c_str(), mount, sizeof mount,
                                  dir, sizeof dir));
    EXPECT_STREQ("/sys/fs/cgroup/inner", dir);

    // With a namespace: "0::/" is the mount itself.
    cg = t.write("cgroup3", "0::/\n");
    ASSERT_EQ(0, knit__cgroup_dir(mi.c_str(), cg.c_str(), mount, sizeof mount,
                                  dir, sizeof dir));
    EXPECT_STREQ("/sys/fs/cgroup", dir);

    // cgroup v1 only: no v2 line, no cgroup2 mount.
    cg = t.write("cgroup4", "4:cpu,cpuacct:/\n");
    EXPECT_EQ(-1, knit__cgroup_dir(mi.c_str(), cg.c_str(), mount, sizeof mount,
                                   dir, sizeof dir));
    mi = t.write("mountinfo5", "22 1 0:21 / /proc rw - proc proc rw\n");
    cg = t.write("cgroup5", "0::/\n");
    EXPECT_EQ(-1, knit__cgroup_dir(mi.c_str(), cg.c_str(), mount, sizeof mount,
                                   dir, sizeof dir));
}

TEST(Cpus, DefaultThreadsFollowTheAffinityMask) {
    cpu_set_t saved;
    ASSERT_EQ(0, sched_getaffinity(0, sizeof saved, &saved));
    unsigned all = knit__affinity_cpus();
    EXPECT_EQ(static_cast<unsigned>(CPU_COUNT(&saved)), all);
    EXPECT_LE(knit__usable_cpus(), all);
    EXPECT_GE(knit__usable_cpus(), 1u);

    // Pin this thread to one CPU: a pool created here gets one worker.
    int first = 0;
    while (!CPU_ISSET(first, &saved)) first++;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ASSERT_EQ(0, sched_setaffinity(0, sizeof one, &one));
    EXPECT_EQ(1u, knit__affinity_cpus());
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    knit_pool *pool = nullptr;
    ASSERT_EQ(0, knit_pool_create(&o, &pool)) << knit_last_error();
    knit_pool_stats_t st{};
    st.size = sizeof st;
    ASSERT_EQ(0, knit_pool_stats(pool, &st));
    EXPECT_EQ(1u, st.threads);
    knit_pool_destroy(pool, KNIT_DRAIN);
    ASSERT_EQ(0, sched_setaffinity(0, sizeof saved, &saved));
}

}  // namespace
