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
 * Sleeper:  knit__doorbell_arm()          store ARMED; full fence (A)
 *           re-check the condition        (cancel with _disarm if true)
 *           knit__doorbell_sleep()        futex-wait while ARMED; store OFF
 * Waker:    make the condition true       (its publishing store)
 *           full fence (B)                (by knit__doorbell_ring's caller,
 *                                           or knit__doorbell_publish_ring)
 *           knit__doorbell_ring()         if ARMED: CAS -> SIGNALLED, wake
 *
 * Fences A and B order each side's store before its load (StoreLoad), so
 * at least one side sees the other's store: either the sleeper's re-check
 * sees the publication and does not sleep, or the waker sees ARMED and
 * wakes it. A wake that arrives between the CAS and the futex wait finds
 * the word no longer ARMED and the futex returns at once.
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
    atomic_store_explicit(&b->word, KNIT__BELL_ARMED, memory_order_seq_cst);
    /* Fence A: the ARMED store before the caller's re-check loads. Pairs
     * with fence B on the waker's side (see the header comment). */
    atomic_thread_fence(memory_order_seq_cst);
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

/* Waker side, after the caller's publishing store and fence B. Returns true
 * when this call rang (won ARMED -> SIGNALLED and woke the sleeper). */
bool knit__doorbell_ring(knit__doorbell *b);

static inline uint32_t knit__doorbell_state(const knit__doorbell *b) {
    return atomic_load_explicit(&b->word, memory_order_relaxed);
}

#endif
