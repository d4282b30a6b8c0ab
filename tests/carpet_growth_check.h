/* C helper for tests/carpet_growth_test.cc (runtime/pool.h is C only). */
#ifndef KNIT_TESTS_CARPET_GROWTH_CHECK_H
#define KNIT_TESTS_CARPET_GROWTH_CHECK_H

#include <stdint.h>

#include "knit/knit.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct knit_test_carpet_totals {
    unsigned probes_max; /* KNIT__PROBES: carpets tried before a new one */
    uint64_t carpets;    /* carpets in the pool's registry */
    uint64_t full;       /* publishes that found a carpet full, so far */
    uint64_t published;  /* lanes published, so far */
} knit_test_carpet_totals;

/* The registry's size and its carpets' counters, summed. */
knit_test_carpet_totals knit_test_carpet_totals_get(knit_pool *pool);

#ifdef __cplusplus
}
#endif
#endif
