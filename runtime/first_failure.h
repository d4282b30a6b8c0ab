/* Internal: the first failure among pieces that run in parallel
 * (parallel_for, parallel_reduce): one CAS picks it, its code and this
 * thread's message are kept, and pieces that start later skip their work.
 * C only. */
#ifndef KNIT_RUNTIME_FIRST_FAILURE_H
#define KNIT_RUNTIME_FIRST_FAILURE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

#include "base/error.h"

struct knit__first_failure {
    _Atomic int failed; /* 0, then 1 for the failure that keeps its text */
    int code;           /* written by the CAS winner */
    char msg[512];
};

static inline void knit__first_failure_init(struct knit__first_failure *ff) {
    atomic_init(&ff->failed, 0);
    ff->code = 0;
    ff->msg[0] = '\0';
}

/* Records `code` with this thread's last-error message, if it is the
 * first. */
static inline void knit__first_failure_set(struct knit__first_failure *ff,
                                           int code) {
    int expect = 0;
    /* acq_rel: the winner's code and message are written after the CAS and
     * read after the joins that follow every piece; acquire pairs with
     * knit__first_failure_seen's loads in pieces that start later. */
    if (atomic_compare_exchange_strong_explicit(&ff->failed, &expect, 1,
                                                memory_order_acq_rel,
                                                memory_order_relaxed)) {
        ff->code = code;
        snprintf(ff->msg, sizeof ff->msg, "%s", knit_last_error());
    }
}

/* True once some piece failed (a piece that starts then skips). */
static inline bool knit__first_failure_seen(struct knit__first_failure *ff) {
    /* acquire: pairs with the winner's acq_rel CAS. */
    return atomic_load_explicit(&ff->failed, memory_order_acquire) != 0;
}

/* After every piece was joined: 0, or the failure's code with its message
 * as this thread's last error. */
static inline int knit__first_failure_report(struct knit__first_failure *ff) {
    if (!knit__first_failure_seen(ff)) return 0;
    return knit__fail(ff->code, "%s", ff->msg);
}

#endif
