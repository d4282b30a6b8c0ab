/* The asymmetric fence (base/asym_fence.h): membarrier(2) on Linux. */
#define _GNU_SOURCE
#include "base/asym_fence.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* ThreadSanitizer, however the build turned it on (gcc defines
 * __SANITIZE_THREAD__, clang answers __has_feature). */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KNIT__HAS_TSAN 1
#endif
#endif
#ifndef KNIT__HAS_TSAN
#define KNIT__HAS_TSAN 0
#endif

_Atomic int knit__asym_state = KNIT__ASYM_UNKNOWN;

static pthread_mutex_t knit__asym_lock = PTHREAD_MUTEX_INITIALIZER;
static bool knit__asym_atfork_set; /* under the lock */

static int knit__membarrier(int cmd) {
    return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

/* A forked child is a new process to the kernel, not registered: it
 * decides again on its first use. Only the forking thread exists in the
 * child, so a plain reset is safe. */
static void knit__asym_child(void) {
    pthread_mutex_init(&knit__asym_lock, NULL);
    atomic_store_explicit(&knit__asym_state, KNIT__ASYM_UNKNOWN,
                          memory_order_relaxed);
}

static int knit__asym_probe(void) {
#if defined(KNIT_TSAN) || defined(__SANITIZE_THREAD__) || KNIT__HAS_TSAN
    return KNIT__ASYM_OFF;
#else
    /* Opt-in: each park then pays a membarrier and interrupts the cores
     * running the process's other threads, which costs more than the
     * publishes save where workers park often (see README, Performance). */
    const char *env = getenv("KNIT_MEMBARRIER");
    if (env == NULL || strcmp(env, "1") != 0) return KNIT__ASYM_OFF;
    int cmds = knit__membarrier(MEMBARRIER_CMD_QUERY);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) ||
        !(cmds & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED))
        return KNIT__ASYM_OFF;
    if (knit__membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0)
        return KNIT__ASYM_OFF;
    return KNIT__ASYM_ON;
#endif
}

bool knit__asym_decide(void) {
    pthread_mutex_lock(&knit__asym_lock);
    int s = atomic_load_explicit(&knit__asym_state, memory_order_relaxed);
    if (s == KNIT__ASYM_UNKNOWN) {
        if (!knit__asym_atfork_set) {
            knit__asym_atfork_set = pthread_atfork(NULL, NULL, knit__asym_child) == 0;
        }
        /* Without the fork handler a child could use an unregistered
         * process's decision: stay symmetric. */
        s = knit__asym_atfork_set ? knit__asym_probe() : KNIT__ASYM_OFF;
        /* release: pairs with knit__asym_on's acquire load; the
         * registration happens before any thread relies on it. */
        atomic_store_explicit(&knit__asym_state, s, memory_order_release);
    }
    pthread_mutex_unlock(&knit__asym_lock);
    return s == KNIT__ASYM_ON;
}

void knit__asym_heavy(void) {
    if (!knit__asym_on()) return;
    if (knit__membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
    /* Registered, so this cannot fail (membarrier(2): EPERM only when
     * unregistered). If it does, the global command gives the same
     * guarantee for every thread of every process, only slower; the light
     * sides rely on one of the two. */
    int err = errno;
    if (knit__membarrier(MEMBARRIER_CMD_GLOBAL) == 0) return;
    int err2 = errno;
    fprintf(stderr, "knit: membarrier failed (errno %d, then %d): the "
            "asymmetric fence cannot be kept\n", err, err2);
    abort();
}
