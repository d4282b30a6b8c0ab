/* CPU hints for spin loops (concurrencykit's portable pause). C only. */
#ifndef KNIT_BASE_CPU_H
#define KNIT_BASE_CPU_H

#include <ck_pr.h>

/* One spin-wait hint: eases the sibling hyperthread and the memory bus. */
static inline void knit__cpu_relax(void) { ck_pr_stall(); }

#endif
