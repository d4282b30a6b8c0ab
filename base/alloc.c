/* The fault-injection counter behind base/alloc.h (only in the
 * KNIT_FAULT_INJECTION build; an empty translation unit otherwise). The
 * state is per thread, so workers allocating at the same time neither
 * consume nor trigger the failure a test armed on its own thread. */
#include "base/alloc.h"

#ifdef KNIT_FAULT_INJECTION

static _Thread_local uint64_t knit__fault_at;   /* 0: disarmed */
static _Thread_local uint64_t knit__fault_seen;
static _Thread_local bool knit__fault_done;

bool knit__alloc_fails(void) {
    knit__fault_seen++;
    if (knit__fault_at == 0 || knit__fault_seen != knit__fault_at) return false;
    knit__fault_at = 0;
    knit__fault_done = true;
    return true;
}

void knit__fault_arm(uint64_t n) {
    knit__fault_at = n;
    knit__fault_seen = 0;
    knit__fault_done = false;
}

bool knit__fault_fired(void) { return knit__fault_done; }

#else

/* ISO C wants a translation unit to declare something. */
typedef int knit__alloc_unused;

#endif
