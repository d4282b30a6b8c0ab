/* The Chase-Lev deque; the protocol is described in deque.h. */
#include "runtime/deque.h"

#include <stddef.h>

void knit__deque_init(knit__deque *d) {
    atomic_init(&d->top, 0);
    atomic_init(&d->bottom, 0);
    for (size_t i = 0; i < KNIT__DEQUE_CAP; i++) atomic_init(&d->cell[i], NULL);
}

unsigned knit__deque_push_batch(knit__deque *d, struct knit_future *const *fs,
                                unsigned n) {
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    int64_t t = atomic_load_explicit(&d->top, memory_order_acquire);
    int64_t room = KNIT__DEQUE_CAP - (b - t);
    unsigned k = n < room ? n : (unsigned)(room > 0 ? room : 0);
    for (unsigned i = 0; i < k; i++)
        atomic_store_explicit(&d->cell[(b + i) & (KNIT__DEQUE_CAP - 1)], fs[i],
                              memory_order_relaxed);
    if (k)
        /* Publishes the cells to thieves (release, part of seq-cst), and is
         * the store a parking worker's seq-cst re-check pairs with. */
        atomic_store_explicit(&d->bottom, b + k, memory_order_seq_cst);
    return k;
}

struct knit_future *knit__deque_pop(knit__deque *d) {
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    /* Empty for sure, without the StoreLoad below: only the owner adds
     * elements, and top never goes back, so a top (even a stale one, which
     * is smaller) at or past our bottom means no element is left. Relaxed:
     * no cell is read on this path. The common case of an idle look. */
    if (atomic_load_explicit(&d->top, memory_order_relaxed) >= b) return NULL;
    b--;
    /* StoreLoad with the load of top below: pairs with a thief's seq-cst
     * load of top then bottom in knit__deque_steal. */
    atomic_store_explicit(&d->bottom, b, memory_order_seq_cst);
    int64_t t = atomic_load_explicit(&d->top, memory_order_seq_cst);
    if (t > b) { /* empty */
        atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
        return NULL;
    }
    struct knit_future *f =
        atomic_load_explicit(&d->cell[b & (KNIT__DEQUE_CAP - 1)],
                             memory_order_relaxed);
    if (t == b) {
        /* The last one: race the thieves for it on top. */
        if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1,
                                                     memory_order_seq_cst,
                                                     memory_order_relaxed))
            f = NULL;
        atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
    }
    return f;
}

struct knit_future *knit__deque_pop_if(knit__deque *d, struct knit_future *f) {
    /* Only the owner writes bottom and the cells, so this peek is exact
     * for them; a stale cell of an empty deque, or an element a thief is
     * taking, is sorted out by the pop's own protocol (NULL). */
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed) - 1;
    if (atomic_load_explicit(&d->cell[b & (KNIT__DEQUE_CAP - 1)],
                             memory_order_relaxed) != f)
        return NULL;
    return knit__deque_pop(d);
}

struct knit_future *knit__deque_steal(knit__deque *d) {
    int64_t t = atomic_load_explicit(&d->top, memory_order_seq_cst);
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_seq_cst);
    if (t >= b) return NULL;
    struct knit_future *f =
        atomic_load_explicit(&d->cell[t & (KNIT__DEQUE_CAP - 1)],
                             memory_order_relaxed);
    /* seq-cst: orders against the owner's pop (see above); winning it
     * makes f ours. The acquire half pairs with the owner's release of
     * bottom at push, so the cell we read was fully written. */
    if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1,
                                                 memory_order_seq_cst,
                                                 memory_order_relaxed))
        return NULL;
    return f;
}

bool knit__deque_nonempty(knit__deque *d) {
    int64_t t = atomic_load_explicit(&d->top, memory_order_seq_cst);
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_seq_cst);
    return b > t;
}
