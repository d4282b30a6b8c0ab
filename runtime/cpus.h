/* Internal: how many CPUs this process may use (the default thread count).
 *
 * The CPUs in the affinity mask (sched_getaffinity: what taskset, cpusets
 * and MPI's core binding leave us), capped by the cgroup v2 CPU quota when
 * one is set (cpu.max "QUOTA PERIOD" in the process's cgroup or any
 * ancestor: ceil(QUOTA / PERIOD) CPUs' worth of time), as Go's GOMAXPROCS
 * and the JVM size themselves in containers. No allocation on the common
 * path; any file that cannot be read means "no limit from there". */
#ifndef KNIT_RUNTIME_CPUS_H
#define KNIT_RUNTIME_CPUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* min(affinity CPUs, cgroup quota CPUs), at least 1. */
unsigned knit__usable_cpus(void);

/* CPUs in the affinity mask (sysconf's online count if that fails). */
unsigned knit__affinity_cpus(void);

/* One cpu.max line: "max PERIOD" -> 0 (no limit); "QUOTA PERIOD" ->
 * ceil(QUOTA / PERIOD), at least 1; anything else -> 0. */
unsigned knit__cpu_max_parse(const char *text);

/* The tightest cpu.max limit from `dir` (the cgroup's directory, under
 * the cgroup2 mount) up to `mount` itself; 0 if none is set. `dir` must
 * start with `mount`. */
unsigned knit__cgroup_limit(const char *mount, const char *dir);

/* The cgroup2 mount point and this process's cgroup directory under it,
 * from `mountinfo` and `cgroup` (normally /proc/self/mountinfo and
 * /proc/self/cgroup). Returns 0, or -1 if there is no cgroup2 mount or no
 * v2 entry ("0::/path"). */
int knit__cgroup_dir(const char *mountinfo, const char *cgroup, char *mount,
                     size_t mount_len, char *dir, size_t dir_len);

#ifdef __cplusplus
}
#endif
#endif
