/* The doorbell's futex calls; the protocol is in doorbell.h. */
#define _GNU_SOURCE
#include "runtime/doorbell.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long knit__futex(_Atomic uint32_t *word, int op, uint32_t val,
                        const struct timespec *ts) {
    return syscall(SYS_futex, (uint32_t *)word, op, val, ts, NULL, 0);
}

bool knit__doorbell_sleep(knit__doorbell *b, int64_t timeout_ns) {
    struct timespec ts, *tsp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000);
        ts.tv_nsec = (long)(timeout_ns % 1000000000);
        tsp = &ts;
    }
    /* Sleeps only while the word still reads ARMED: a SIGNALLED that
     * landed after our re-check makes the kernel return EAGAIN at once. */
    while (atomic_load_explicit(&b->word, memory_order_acquire) ==
           KNIT__BELL_ARMED) {
        long r = knit__futex(&b->word, FUTEX_WAIT_PRIVATE, KNIT__BELL_ARMED,
                             tsp);
        if (r == -1 && errno == EINTR) continue;
        break; /* woken, timed out, or the word changed */
    }
    /* Drain. acquire on the exchange pairs with the waker's CAS (acq_rel),
     * so what the waker published before ringing is visible to us. */
    uint32_t was = atomic_exchange_explicit(&b->word, KNIT__BELL_OFF,
                                            memory_order_acquire);
    return was == KNIT__BELL_SIGNALLED;
}

bool knit__doorbell_ring(knit__doorbell *b) {
    /* B2. Cheap test first: an OFF doorbell (nobody parked) costs one
     * load. seq-cst: ordered after the caller's B1 (see doorbell.h). */
    if (atomic_load_explicit(&b->word, memory_order_seq_cst) !=
        KNIT__BELL_ARMED)
        return false;
    uint32_t expected = KNIT__BELL_ARMED;
    /* Only the winner of ARMED -> SIGNALLED calls into the kernel. */
    if (!atomic_compare_exchange_strong_explicit(
            &b->word, &expected, KNIT__BELL_SIGNALLED, memory_order_acq_rel,
            memory_order_relaxed))
        return false;
    knit__futex(&b->word, FUTEX_WAKE_PRIVATE, 1, NULL);
    return true;
}
