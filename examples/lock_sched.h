/* "lock": a claim discipline written against knit's public plugin ABI
 * (<knit/sched.h>) and registered at run time, the way a user adds one.
 * One spinlock per carpet: the holder takes up to region_lanes pending
 * lanes, oldest first, retires them, and lets go. Simple and obviously
 * correct; slower than ticket under contention. */
#ifndef KNIT_EXAMPLES_LOCK_SCHED_H
#define KNIT_EXAMPLES_LOCK_SCHED_H

#include <knit/sched.h>

#ifdef __cplusplus
extern "C" {
#endif

extern const knit_sched_ops lock_sched_ops;

/* Registers "lock" once (later calls return 0 too). */
int lock_sched_register(void);

#ifdef __cplusplus
}
#endif
#endif
