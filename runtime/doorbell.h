/* The doorbell: parking a sleeper without lost wake-ups.
 *
 * One word, three states, one sleeper per doorbell:
 *
 *   OFF        nobody sleeps; a waker does nothing but one relaxed load.
 *   ARMED      the sleeper is about to sleep (or sleeps) on the word.
 *   SIGNALLED  a waker won the CAS ARMED -> SIGNALLED and called futex wake.
 *              It stays SIGNALLED until the sleeper drains, so a burst of
 *              publications costs one wake.
 *
 * Sleeper:  knit__doorbell_arm()          seq-cst store of ARMED      (A1)
 *           re-check the condition        seq-cst loads               (A2)
 *                                         (cancel with _disarm if true)
 *           knit__doorbell_sleep()        futex-wait while ARMED; store OFF
 * Waker:    make the condition true       ends with a seq-cst RMW on a
 *                                         word the re-check loads     (B1)
 *           knit__doorbell_ring()         seq-cst load; if ARMED:     (B2)
 *                                         CAS -> SIGNALLED, futex wake
 *
 * All four of A1, A2, B1, B2 are seq-cst, so they sit in one total order
 * and neither side's load can pass its own store (StoreLoad): if B2 does
 * not see ARMED, it precedes A1, so A2 follows B1 and sees the condition.
 * Either the sleeper's re-check sees the publication and does not sleep,
 * or the waker sees ARMED and wakes it. A wake between the CAS and the
 * futex wait finds the word no longer ARMED and the futex returns at once.
 * (Seq-cst operations rather than standalone fences: ThreadSanitizer does
 * not model atomic_thread_fence, and on x86 both cost one locked op.)
 *
 * The asymmetric form (base/asym_fence.h), used for the publications of
 * the lane core and the pool when KNIT_MEMBARRIER=1 and the kernel
 * provides it: B1 is a
 * compiler barrier after the store that makes the condition true, and the
 * sleeper calls knit__asym_heavy() between A1 and A2. The heavy barrier
 * puts a full barrier somewhere in the waker's program order: before B2
 * (which then sees ARMED) or after the store (which A2 then sees). The
 * waker, which runs on every publish, no longer waits for its store to
 * leave the store buffer; the sleeper, which is about to sleep anyway,
 * pays a syscall.
 *
 * Only C includes this header (it uses <stdatomic.h>).
 */
#ifndef KNIT_RUNTIME_DOORBELL_H
#define KNIT_RUNTIME_DOORBELL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum {
    KNIT__BELL_OFF = 0,
    KNIT__BELL_ARMED = 1,
    KNIT__BELL_SIGNALLED = 2,
};

typedef struct knit__doorbell {
    _Atomic uint32_t word; /* OFF / ARMED / SIGNALLED; see above */
} knit__doorbell;

static inline void knit__doorbell_arm(knit__doorbell *b) {
    /* A1: pairs with the waker's B1/B2 (see the header comment); the
     * caller's re-check loads (A2) must be seq-cst too. */
    atomic_store_explicit(&b->word, KNIT__BELL_ARMED, memory_order_seq_cst);
}

/* The re-check found work: stand down without sleeping. A waker that saw
 * ARMED in the meantime wakes nobody, which is harmless. */
static inline void knit__doorbell_disarm(knit__doorbell *b) {
    atomic_store_explicit(&b->word, KNIT__BELL_OFF, memory_order_relaxed);
}

/* Sleeps while the word is ARMED, at most timeout_ns (< 0: no limit), then
 * drains (stores OFF). Returns true if a waker signalled. The caller loops
 * on its condition: a return may also be a timeout or spurious. */
bool knit__doorbell_sleep(knit__doorbell *b, int64_t timeout_ns);

/* Waker side (B2), after the caller's B1 (a seq-cst RMW, or the light side
 * of the asymmetric fence when the sleeper takes the heavy one). Returns true
 * when this call rang (won ARMED -> SIGNALLED and woke the sleeper). */
bool knit__doorbell_ring(knit__doorbell *b);

static inline uint32_t knit__doorbell_state(const knit__doorbell *b) {
    return atomic_load_explicit(&b->word, memory_order_relaxed);
}

#endif
