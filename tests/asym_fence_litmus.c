/* The store-buffering litmus test for base/asym_fence.h, in C (the header
 * uses <stdatomic.h>); tests/asym_fence_test.cc drives it. */
#include "tests/asym_fence_litmus.h"

#include <pthread.h>
#include <stdatomic.h>

#include "base/asym_fence.h"
#include "base/cpu.h"

struct sb {
    _Alignas(64) _Atomic unsigned go;    /* iteration the threads may run */
    _Alignas(64) _Atomic unsigned done;  /* threads done with it */
    _Alignas(64) _Atomic int x;          /* the light side's store */
    _Alignas(64) _Atomic int y;          /* the heavy side's store */
    int mode;
    unsigned iters;
    unsigned both_zero;
    int r_light;
};

static void wait_go(struct sb *s, unsigned i) {
    while (atomic_load_explicit(&s->go, memory_order_acquire) != i)
        knit__cpu_relax();
}

/* The light side: store x, barrier, load y (relaxed: the fence alone
 * orders them). */
static void *light(void *arg) {
    struct sb *s = arg;
    for (unsigned i = 1; i <= s->iters; i++) {
        wait_go(s, i);
        atomic_store_explicit(&s->x, 1, memory_order_relaxed);
        if (s->mode == KNIT_TEST_SB_ASYM) {
            if (knit__asym_on())
                knit__asym_light();
            else /* off: the symmetric protocol, a full fence each side */
                atomic_thread_fence(memory_order_seq_cst);
        }
        s->r_light = atomic_load_explicit(&s->y, memory_order_relaxed);
        /* release: r_light is written before the driver reads it. */
        atomic_fetch_add_explicit(&s->done, 1, memory_order_release);
    }
    return NULL;
}

unsigned knit_test_sb_litmus(unsigned iters, int mode) {
    struct sb s;
    atomic_init(&s.go, 0);
    atomic_init(&s.done, 0);
    atomic_init(&s.x, 0);
    atomic_init(&s.y, 0);
    s.mode = mode;
    s.iters = iters;
    s.both_zero = 0;
    pthread_t t;
    if (pthread_create(&t, NULL, light, &s) != 0) return ~0u;
    /* This thread is the heavy side and the driver. */
    for (unsigned i = 1; i <= iters; i++) {
        atomic_store_explicit(&s.x, 0, memory_order_relaxed);
        atomic_store_explicit(&s.y, 0, memory_order_relaxed);
        atomic_store_explicit(&s.done, 0, memory_order_relaxed);
        /* release: the resets above happen before the light side runs. */
        atomic_store_explicit(&s.go, i, memory_order_release);
        atomic_store_explicit(&s.y, 1, memory_order_relaxed);
        if (mode == KNIT_TEST_SB_ASYM) {
            if (knit__asym_on())
                knit__asym_heavy();
            else
                atomic_thread_fence(memory_order_seq_cst);
        }
        int r_heavy = atomic_load_explicit(&s.x, memory_order_relaxed);
        /* acquire: pairs with the light side's release increment. */
        while (atomic_load_explicit(&s.done, memory_order_acquire) != 1)
            knit__cpu_relax();
        if (r_heavy == 0 && s.r_light == 0) s.both_zero++;
    }
    pthread_join(t, NULL);
    return s.both_zero;
}

int knit_test_asym_on(void) { return knit__asym_on() ? 1 : 0; }

void knit_test_asym_heavy(void) { knit__asym_heavy(); }
