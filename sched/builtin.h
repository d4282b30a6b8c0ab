/* The built-in disciplines' ops, registered by the registry on first use
 * through knit_sched_register(), the same call users make. */
#ifndef KNIT_SCHED_BUILTIN_H
#define KNIT_SCHED_BUILTIN_H

#include "knit/sched.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const knit_sched_ops knit__sched_ticket;
extern const knit_sched_ops knit__sched_dekker;
extern const knit_sched_ops knit__sched_single;

#ifdef __cplusplus
}
#endif
#endif
