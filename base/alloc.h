/* Every allocation knit makes goes through here.
 *
 * In the library users link these are malloc, calloc, aligned_alloc and
 * realloc themselves (inline, no cost). The fault-injection build
 * (//:knit_faults, compiled with KNIT_FAULT_INJECTION) counts them per
 * thread and makes a chosen one fail, so that tests/alloc_fail_test.cc can
 * walk every allocation an operation makes and check that each failure
 * comes back as KNIT_ENOMEM with nothing taken and nothing leaked.
 * Resources that are not malloc'd (the arena's mappings, jemalloc's arena,
 * a payload's mallocx) ask knit__alloc_fails() first, so they are points
 * of failure too. Memory is returned with plain free().
 */
#ifndef KNIT_BASE_ALLOC_H
#define KNIT_BASE_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef KNIT_FAULT_INJECTION

/* true: the allocation about to be made must fail (the armed one). */
bool knit__alloc_fails(void);

/* On the calling thread only: the n-th allocation point reached from now
 * fails (n >= 1), and the rest succeed; n = 0 disarms. Resets the count. */
void knit__fault_arm(uint64_t n);
/* Whether the armed failure has happened (and is now disarmed). */
bool knit__fault_fired(void);

#else

static inline bool knit__alloc_fails(void) { return false; }

#endif

static inline void *knit__malloc(size_t n) {
    return knit__alloc_fails() ? NULL : malloc(n);
}

static inline void *knit__calloc(size_t n, size_t size) {
    return knit__alloc_fails() ? NULL : calloc(n, size);
}

/* aligned_alloc with the size rounded up to a multiple of align (C11 asks
 * for one); align is a power of two. */
static inline void *knit__aligned_alloc(size_t align, size_t n) {
    if (knit__alloc_fails()) return NULL;
    return aligned_alloc(align, (n + align - 1) & ~(align - 1));
}

static inline void *knit__realloc(void *p, size_t n) {
    return knit__alloc_fails() ? NULL : realloc(p, n);
}

#ifdef __cplusplus
}
#endif
#endif
