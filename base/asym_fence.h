/* An asymmetric fence: a Dekker pair (each side stores, then loads the
 * other side's word) where one side runs often and the other rarely.
 *
 *   light side (often):  store; knit__asym_light(); load
 *   heavy side (rarely): store; knit__asym_heavy(); load
 *
 * Either the light side's load sees the heavy side's store, or the heavy
 * side's load sees the light side's store: what a seq-cst RMW or fence on
 * both sides gives, with the whole cost moved to the heavy side. The light
 * side is a compiler barrier; the heavy side is membarrier(2) with
 * MEMBARRIER_CMD_PRIVATE_EXPEDITED, which makes every other thread of the
 * process that is running execute a full memory barrier before it
 * returns (a thread not running passed one when it was switched out). The
 * light side's barrier point then falls somewhere in its program order:
 * before its load (which then sees the heavy side's store, made before the
 * call), or after its store (which the heavy side's load, after the call,
 * then sees). This is the argument of the kernel's membarrier(2) page and
 * of userspace RCU; the C11 model does not cover it, so it holds only
 * where knit__asym_on() says the kernel provides it.
 *
 * knit__asym_on() is decided once per process (the first call, from any
 * thread, settles it; a forked child decides again) and never changes:
 * true only when KNIT_MEMBARRIER=1 is set in the environment (opt-in: a
 * membarrier costs tens of microseconds on a VM and interrupts the other
 * cores running the process, so where workers park thousands of times a
 * second it costs more than the publishes save), and never under
 * ThreadSanitizer (it models neither membarrier nor signal fences) or
 * when the kernel has no private expedited membarrier (older than 4.14,
 * or a seccomp filter refuses it). A caller whose light side is a compiler
 * barrier only when it is on keeps its seq-cst RMW when it is off, and the
 * heavy side then does nothing: the symmetric protocol stands.
 *
 * C only (<stdatomic.h>).
 */
#ifndef KNIT_BASE_ASYM_FENCE_H
#define KNIT_BASE_ASYM_FENCE_H

#include <stdatomic.h>
#include <stdbool.h>

enum { KNIT__ASYM_UNKNOWN = 0, KNIT__ASYM_ON = 1, KNIT__ASYM_OFF = 2 };

/* KNIT__ASYM_*: the process's decision (see knit__asym_on). */
extern _Atomic int knit__asym_state __attribute__((visibility("hidden")));

/* Decides (once) and returns whether the asymmetric fence is on. */
bool knit__asym_decide(void);

/* Whether the light side may be a compiler barrier. */
static inline bool knit__asym_on(void) {
    /* acquire: pairs with the release store that settles the decision,
     * so every thread that sees ON also sees the registration done. */
    int s = atomic_load_explicit(&knit__asym_state, memory_order_acquire);
    if (__builtin_expect(s != KNIT__ASYM_UNKNOWN, 1)) return s == KNIT__ASYM_ON;
    return knit__asym_decide();
}

/* The light side: a compiler barrier (the program order of the store
 * before it and the load after it is all the heavy side needs). Call only
 * when knit__asym_on(). */
static inline void knit__asym_light(void) {
    atomic_signal_fence(memory_order_seq_cst);
}

/* The heavy side: a full barrier on every running thread of the process.
 * Does nothing when knit__asym_on() is false. */
void knit__asym_heavy(void);

#endif
