/* The default thread count: see runtime/cpus.h. */
#define _GNU_SOURCE
#include "runtime/cpus.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

unsigned knit__affinity_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return (unsigned)n;
    } else if (errno == EINVAL) {
        /* More CPUs than a cpu_set_t holds (1024): grow the mask. */
        for (int ncpu = 2048; ncpu <= (1 << 20); ncpu *= 2) {
            cpu_set_t *big = CPU_ALLOC(ncpu);
            if (big == NULL) break;
            size_t sz = CPU_ALLOC_SIZE(ncpu);
            int rc = sched_getaffinity(0, sz, big);
            int n = rc == 0 ? CPU_COUNT_S(sz, big) : 0;
            int e = errno;
            CPU_FREE(big);
            if (rc == 0 && n > 0) return (unsigned)n;
            if (rc != 0 && e != EINVAL) break;
        }
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (unsigned)online : 1u;
}

unsigned knit__cpu_max_parse(const char *text) {
    char quota[32];
    unsigned long long period;
    if (text == NULL || sscanf(text, "%31s %llu", quota, &period) != 2 ||
        period == 0)
        return 0;
    if (strcmp(quota, "max") == 0) return 0;
    char *end;
    errno = 0;
    unsigned long long q = strtoull(quota, &end, 10);
    if (errno != 0 || *end != '\0' || quota[0] == '-' || q == 0) return 0;
    unsigned long long cpus = q / period + (q % period != 0);
    return cpus > UINT_MAX ? UINT_MAX : (unsigned)cpus;
}

/* Reads the first line of path into buf; false if it cannot. */
static bool knit__read_line(const char *path, char *buf, size_t len) {
    FILE *f = fopen(path, "re");
    if (f == NULL) return false;
    bool ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    return ok;
}

unsigned knit__cgroup_limit(const char *mount, const char *dir) {
    size_t mlen = strlen(mount);
    char path[PATH_MAX];
    if (strncmp(dir, mount, mlen) != 0 || strlen(dir) >= sizeof path) return 0;
    strcpy(path, dir);
    unsigned best = 0;
    for (;;) {
        char file[PATH_MAX + 16], line[128];
        const char *sep = strcmp(path, "/") == 0 ? "" : "/";
        if (snprintf(file, sizeof file, "%s%scpu.max", path, sep) <
                (int)sizeof file &&
            knit__read_line(file, line, sizeof line)) {
            unsigned n = knit__cpu_max_parse(line);
            if (n != 0 && (best == 0 || n < best)) best = n;
        }
        if (strlen(path) <= mlen) break; /* the mount itself was the last */
        char *slash = strrchr(path, '/');
        if (slash == NULL || (size_t)(slash - path) < mlen)
            path[mlen] = '\0'; /* the parent is the mount */
        else
            *slash = '\0';
    }
    return best;
}

int knit__cgroup_dir(const char *mountinfo, const char *cgroup, char *mount,
                     size_t mount_len, char *dir, size_t dir_len) {
    /* mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS... - FSTYPE SRC ..." */
    char line[4096], root[PATH_MAX] = "", point[PATH_MAX] = "";
    bool found = false;
    FILE *f = fopen(mountinfo, "re");
    if (f == NULL) return -1;
    while (!found && fgets(line, sizeof line, f) != NULL) {
        const char *sep = strstr(line, " - ");
        if (sep == NULL || strncmp(sep, " - cgroup2 ", 11) != 0) continue;
        if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, point) == 2)
            found = true;
    }
    fclose(f);
    if (!found) return -1;
    /* cgroup: the v2 line is "0::/path". */
    char cg[PATH_MAX] = "";
    found = false;
    f = fopen(cgroup, "re");
    if (f == NULL) return -1;
    while (!found && fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "0::", 3) != 0) continue;
        size_t n = strcspn(line + 3, "\n");
        if (n >= sizeof cg) break;
        memcpy(cg, line + 3, n);
        cg[n] = '\0';
        found = true;
    }
    fclose(f);
    if (!found) return -1;
    /* The mount shows the hierarchy from `root` down: strip it. A cgroup
     * outside the mounted part (cgroup namespaces) is the mount's root. */
    const char *rel = cg;
    size_t rlen = strlen(root);
    if (strcmp(root, "/") != 0) {
        if (strncmp(cg, root, rlen) == 0 && (cg[rlen] == '/' || cg[rlen] == '\0'))
            rel = cg + rlen;
        else
            rel = "";
    }
    if (strncmp(rel, "/..", 3) == 0) rel = ""; /* outside our namespace */
    if (strcmp(rel, "/") == 0) rel = "";
    if (strlen(point) >= mount_len) return -1;
    strcpy(mount, point);
    if (strcmp(point, "/") == 0) {
        /* Mounted at "/": keep "/" + rel without a double slash. */
        if (snprintf(dir, dir_len, "%s", rel[0] ? rel : "/") >= (int)dir_len)
            return -1;
        return 0;
    }
    if (snprintf(dir, dir_len, "%s%s", point, rel) >= (int)dir_len) return -1;
    return 0;
}

unsigned knit__usable_cpus(void) {
    unsigned n = knit__affinity_cpus();
    char mount[PATH_MAX], dir[PATH_MAX];
    if (knit__cgroup_dir("/proc/self/mountinfo", "/proc/self/cgroup", mount,
                         sizeof mount, dir, sizeof dir) == 0) {
        unsigned q = knit__cgroup_limit(mount, dir);
        if (q != 0 && q < n) n = q;
    }
    return n ? n : 1;
}
