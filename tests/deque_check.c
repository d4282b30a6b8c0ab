/* The work-stealing deque driven directly (see tests/deque_check.h).
 * Elements are fake future pointers, never dereferenced: 8 * (id + 1). */
#include "tests/deque_check.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "runtime/deque.h"

static struct knit_future *elem(uintptr_t id) {
    return (struct knit_future *)(8 * (id + 1));
}

static uintptr_t id_of(struct knit_future *f) { return (uintptr_t)f / 8 - 1; }

int knit_test_deque_sequence(void) {
    knit__deque *d = malloc(sizeof *d);
    if (d == NULL) return 100;
    knit__deque_init(d);
    int bad = 0;
    struct knit_future *fs[3] = {elem(0), elem(1), elem(2)};
    if (knit__deque_pop(d) != NULL) bad = 1; /* new: empty */
    else if (knit__deque_push_batch(d, fs, 3) != 3) bad = 2;
    else if (knit__deque_steal(d) != elem(0)) bad = 3; /* oldest on top */
    else if (knit__deque_pop(d) != elem(2)) bad = 4;   /* newest at bottom */
    else if (knit__deque_steal(d) != elem(1)) bad = 5;
    /* Emptied by a thief: top == bottom, the pop's early return. */
    else if (knit__deque_pop(d) != NULL) bad = 6;
    else if (knit__deque_steal(d) != NULL) bad = 7;
    else if (knit__deque_nonempty(d)) bad = 8;
    else if (knit__deque_push_batch(d, fs + 2, 1) != 1) bad = 9;
    else if (knit__deque_pop_if(d, elem(1)) != NULL) bad = 10; /* not it */
    else if (knit__deque_pop_if(d, elem(2)) != elem(2)) bad = 11;
    else if (knit__deque_pop(d) != NULL) bad = 12;
    else {
        /* Filled to capacity: a push of one more is refused. */
        for (unsigned i = 0; i < KNIT__DEQUE_CAP && !bad; i++) {
            struct knit_future *e = elem(i);
            if (knit__deque_push_batch(d, &e, 1) != 1) bad = 13;
        }
        struct knit_future *e = elem(KNIT__DEQUE_CAP);
        if (!bad && knit__deque_push_batch(d, &e, 1) != 0) bad = 14;
        for (unsigned i = KNIT__DEQUE_CAP; i-- > 0 && !bad;)
            if (knit__deque_pop(d) != elem(i)) bad = 15;
        if (!bad && knit__deque_pop(d) != NULL) bad = 16;
    }
    free(d);
    return bad;
}

struct race {
    knit__deque d;
    _Atomic unsigned char *seen; /* times each element was taken */
    _Atomic int done;            /* the owner pushed its last element */
    _Atomic unsigned long stolen;
};

static void take(struct race *r, struct knit_future *f) {
    /* relaxed: the counts are read after the threads are joined. */
    atomic_fetch_add_explicit(&r->seen[id_of(f)], 1, memory_order_relaxed);
}

static void *thief(void *arg) {
    struct race *r = arg;
    unsigned long n = 0;
    for (;;) {
        struct knit_future *f = knit__deque_steal(&r->d);
        if (f != NULL) {
            take(r, f);
            n++;
            continue;
        }
        /* acquire: pairs with the owner's release of done, after which it
         * pushes nothing more; an element still there is seen next. */
        if (atomic_load_explicit(&r->done, memory_order_acquire) &&
            !knit__deque_nonempty(&r->d))
            break;
        sched_yield(); /* 2 cores: let the owner run */
    }
    atomic_fetch_add_explicit(&r->stolen, n, memory_order_relaxed);
    return NULL;
}

long knit_test_deque_race(unsigned n, unsigned thieves, unsigned long seed,
                          unsigned long *stolen) {
    struct race *r = malloc(sizeof *r);
    if (r == NULL) return -1;
    knit__deque_init(&r->d);
    r->seen = calloc(n, sizeof *r->seen);
    atomic_init(&r->done, 0);
    atomic_init(&r->stolen, 0);
    pthread_t th[16];
    unsigned started = 0;
    if (r->seen == NULL || thieves > 16) thieves = 0;
    for (; started < thieves; started++)
        if (pthread_create(&th[started], NULL, thief, r) != 0) break;
    long rc = r->seen != NULL && started == thieves ? 0 : -1;
    uint64_t x = seed * 2654435761u + 1;
    unsigned next = 0;
    while (rc == 0 && next < n) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift */
        unsigned k = 1 + (unsigned)(x % 8);
        if (k > n - next) k = n - next;
        struct knit_future *fs[8];
        for (unsigned i = 0; i < k; i++) fs[i] = elem(next + i);
        unsigned pushed = knit__deque_push_batch(&r->d, fs, k);
        next += pushed;
        /* Pop between none and a few more than were pushed, so the owner
         * often finds the deque empty (the early return) or races the
         * thieves for the last element. */
        unsigned pops = (unsigned)((x >> 8) % (k + 3));
        for (unsigned i = 0; i < pops; i++) {
            struct knit_future *f = knit__deque_pop(&r->d);
            if (f != NULL) take(r, f);
        }
    }
    /* release: the pushes above happen before a thief's acquire of done. */
    atomic_store_explicit(&r->done, 1, memory_order_release);
    for (struct knit_future *f; (f = knit__deque_pop(&r->d)) != NULL;) take(r, f);
    for (unsigned i = 0; i < started; i++) pthread_join(th[i], NULL);
    if (rc == 0) {
        for (unsigned i = 0; i < n; i++)
            if (atomic_load_explicit(&r->seen[i], memory_order_relaxed) != 1) rc++;
        *stolen = atomic_load_explicit(&r->stolen, memory_order_relaxed);
    }
    free(r->seen);
    free(r);
    return rc;
}
