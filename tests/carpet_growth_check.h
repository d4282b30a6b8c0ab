/* C helpers for tests/carpet_growth_test.cc (runtime/pool.h is C only). */
#ifndef KNIT_TESTS_CARPET_GROWTH_CHECK_H
#define KNIT_TESTS_CARPET_GROWTH_CHECK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct knit_test_growth_result {
    int rc;               /* 0, or the step that went wrong (see the .c) */
    unsigned probes_max;  /* KNIT__PROBES: carpets tried before a new one */
    uint64_t carpets[2];  /* carpets in the registry after each burst */
    uint64_t full[2];     /* publishes that found a carpet full, per burst */
    uint64_t published;   /* lanes published over both bursts */
    uint64_t ran;         /* tasks that ran and returned their argument */
} knit_test_growth_result;

/* A pool of one worker, held by a task until every task of a burst is
 * submitted; this thread submits `tasks` tasks with futures (so lanes stay
 * in flight and carpets must grow), then the worker is let go and every
 * future awaited; then a second burst of the same size. */
knit_test_growth_result knit_test_carpet_growth(unsigned tasks);

#ifdef __cplusplus
}
#endif
#endif
