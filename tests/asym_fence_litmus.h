/* C helpers for tests/asym_fence_test.cc (base/asym_fence.h is C only). */
#ifndef KNIT_TESTS_ASYM_FENCE_LITMUS_H
#define KNIT_TESTS_ASYM_FENCE_LITMUS_H

#ifdef __cplusplus
extern "C" {
#endif

enum { KNIT_TEST_SB_NONE = 0, KNIT_TEST_SB_ASYM = 1 };

/* Runs the store-buffering litmus test `iters` times: one thread stores x
 * then loads y, the other stores y then loads x, with no barrier (NONE)
 * or the asymmetric fence (ASYM: light on the first, heavy on the
 * second; where it is off, a seq-cst fence on each side). Returns how many runs had both loads see 0, the outcome the
 * fence forbids; ~0u if no thread could be started. */
unsigned knit_test_sb_litmus(unsigned iters, int mode);
int knit_test_asym_on(void);
void knit_test_asym_heavy(void);

#ifdef __cplusplus
}
#endif
#endif
