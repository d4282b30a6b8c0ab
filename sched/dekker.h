/* Test access to the "dekker" discipline's words. */
#ifndef KNIT_SCHED_DEKKER_H
#define KNIT_SCHED_DEKKER_H

#include <stdint.h>

#include "knit/sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Consumer `consumer`'s intent word (a mask of regions; 0 when idle). */
uint32_t knit__dekker_intent(const knit_carpet *c, unsigned consumer);
/* The liveness mask (bit i: consumer i may still claim). */
uint32_t knit__dekker_live(const knit_carpet *c);
/* Raises consumer's intent as if it were mid-claim (a frozen or crashed
 * consumer), for tests of priority and liveness. */
void knit__dekker_force_intent(knit_carpet *c, unsigned consumer,
                               uint32_t regions);

#ifdef __cplusplus
}
#endif
#endif
