/* C helpers for tests/deque_test.cc (runtime/deque.h is C only). */
#ifndef KNIT_TESTS_DEQUE_CHECK_H
#define KNIT_TESTS_DEQUE_CHECK_H

#ifdef __cplusplus
extern "C" {
#endif

/* One owner and no thief, step by step: push, steal, pop, the empty
 * deque after thieves took everything, pop_if. Returns 0, or the number
 * of the first step that went wrong. */
int knit_test_deque_sequence(void);

/* One owner pushing batches of 1..8 and popping, `thieves` threads
 * stealing, n elements in all. Returns how many elements were taken
 * other than exactly once (0 when every element was taken exactly once);
 * *stolen gets how many the thieves took. -1 if a thread could not be
 * started or memory ran out. */
long knit_test_deque_race(unsigned n, unsigned thieves, unsigned long seed,
                          unsigned long *stolen);

#ifdef __cplusplus
}
#endif
#endif
