/* The work-stealing deque: one per consumer id (worker or helper).
 *
 * A claim moves a batch of lanes out of a carpet into the claimer's deque;
 * the owner pops from the bottom, idle peers steal from the top, so a batch
 * claimed by one consumer is never serialised behind its first long task.
 * Elements are future pointers (the future carries fn and arg).
 *
 * The Chase-Lev deque (Chase & Lev 2005; the C11 form of Lê et al. 2013),
 * fixed capacity, with seq-cst operations in place of its standalone
 * fences (ThreadSanitizer does not model fences):
 *   push   owner: store the cells (relaxed), then bottom (seq-cst: it also
 *          pairs with a parking worker's re-check, see pool.c).
 *   pop    owner: returns at once when a relaxed load of top is at or
 *          past bottom (empty: top never goes back); else bottom--
 *          (seq-cst store), then load top (seq-cst): the StoreLoad pair
 *          against a thief's top load then bottom load. The last element
 *          goes to whoever wins the CAS on top.
 *   steal  thief: load top, then bottom (seq-cst); read the cell; CAS top.
 *          A lost CAS means another thief or the owner took it.
 * Cells are atomic pointers (relaxed): a thief may read a cell the owner
 * is rewriting, and then always loses the CAS and discards the value.
 */
#ifndef KNIT_RUNTIME_DEQUE_H
#define KNIT_RUNTIME_DEQUE_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define KNIT__DEQUE_CAP 1024 /* a power of two */

struct knit_future;

typedef struct knit__deque {
    alignas(64) _Atomic int64_t top;    /* thieves CAS it */
    alignas(64) _Atomic int64_t bottom; /* the owner writes it */
    alignas(64) struct knit_future *_Atomic cell[KNIT__DEQUE_CAP];
} knit__deque;

void knit__deque_init(knit__deque *d);
/* Owner. Pushes fs[0] first: thieves (and the owner, stealing its own
 * top) take them in order fs[0], fs[1], ...; knit__deque_pop takes the
 * newest. Returns how many it pushed (fewer when full). */
unsigned knit__deque_push_batch(knit__deque *d, struct knit_future *const *fs,
                                unsigned n);
/* Owner. NULL when empty. */
struct knit_future *knit__deque_pop(knit__deque *d);
/* Owner. Pops the bottom (newest) element only if it is f: f, or NULL
 * when the bottom is something else or a thief took f first. */
struct knit_future *knit__deque_pop_if(knit__deque *d, struct knit_future *f);
/* Any thread. NULL when empty or when it lost a race (try elsewhere). */
struct knit_future *knit__deque_steal(knit__deque *d);
/* Any thread; seq-cst loads (the parking re-check). */
bool knit__deque_nonempty(knit__deque *d);

#endif
