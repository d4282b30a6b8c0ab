/* C helpers for tests/future_cache_test.cc (runtime/pool.h is C only). */
#ifndef KNIT_TESTS_FUTURE_CACHE_CHECK_H
#define KNIT_TESTS_FUTURE_CACHE_CHECK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct knit_test_cache_result {
    int rc;                /* 0, or the step that went wrong (see the .c) */
    uint64_t moves_edge;   /* magazines given or taken over the alternations */
    uint64_t moves_drain;  /* given while `many` futures were freed */
    unsigned kept;         /* futures the thread kept in its two magazines */
    unsigned cache_max;    /* KNIT__FUTURE_CACHE */
    unsigned other_kept;   /* futures of the other size class the thread holds */
    unsigned wrong_class;  /* futures allocated that were not of the class asked */
    unsigned size_plain;   /* sizeof a future without an input */
    unsigned size_in;      /* sizeof one with an input */
} knit_test_cache_result;

/* On a new pool, this thread (an outside producer) allocates `many`
 * futures of one size class (with_in: those that carry an input) and
 * recycles them all, then alternates one alloc and one recycle `rounds`
 * times: the pattern of a worker that makes and recycles group members'
 * records, at whatever point of a magazine it stands. */
knit_test_cache_result knit_test_future_cache(unsigned many, unsigned rounds, int with_in);

#ifdef __cplusplus
}
#endif
#endif
