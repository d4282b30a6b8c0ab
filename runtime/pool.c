/* The pool: creation, workers, finding work, parking, stats, destroy.
 *
 * Workers claim from their own carpets first (where their subtasks go),
 * then from every carpet in the registry, starting at a rotating index,
 * through the pool's discipline. A claimed batch is copied out of the
 * lanes (the claim retires them) and then run, so no lane is held while a
 * task runs.
 *
 * Parking (no lost wake-up; the doorbell protocol of doorbell.h):
 *   worker:  arm its doorbell (A1), set its bit in `parked` (seq-cst RMW),
 *            re-check every carpet, the pool state and its wait condition
 *            with seq-cst loads (A2); sleep only if all are idle.
 *   submit:  publish, flush (B1: a seq-cst RMW on the carpet's host_bits,
 *            or, with the opt-in asymmetric fence, a compiler barrier, the
 *            worker then calling membarrier between setting its bit and
 *            its re-check), then load `parked` (seq-cst, B2); if a bit is
 *            set, clear it (the winner of the clear rings) and ring that
 *            worker.
 *   Either the worker's re-check sees the publication or the submitter
 *   sees the parked bit. A submit to an idle pool wakes one worker.
 *
 * Fewer wake-ups (the rule Go's scheduler uses): a worker that finds no
 * work counts itself in `spinning` while it looks, and a publication wakes
 * a parked worker only when nobody is spinning. A spinner parks only after
 * it leaves `spinning` (seq-cst) and then re-checks (seq-cst, after its
 * membarrier if the fence is on), so a publisher that saw it spinning (its
 * load after B1) is covered by that re-check. The last spinner to find
 * work wakes one more sleeper if work is left, so parallelism ramps up
 * one worker at a time. That look for work left has no membarrier: a lane
 * publisher whose B1 was the compiler barrier fences before it trusts a
 * spinner (knit__pool_notify_published).
 *
 * A spinner's grace (a scheduling choice; no protocol changes): a spinner
 * that has looked in vain a few times and then finds a carpet of another
 * thread with exactly one pending lane leaves it for about half a
 * microsecond, then claims what is still there. A thread that submits and
 * then awaits comes back for its task in less and runs it itself, with no
 * line crossing cores; a task nobody awaits starts that much later. Once
 * a grace ended with its lanes gone (an awaiter took them), the spinner
 * scans every 2 us instead of back to back until it finds work, so its
 * reads do not pull the awaiter's carpet lines away. It stays counted in
 * `spinning` all along, so the parking argument above is unchanged.
 *
 * Lifetime against destroy: every public entry point that touches the
 * pool enters it (runtime/entry.c: a per-thread slot, then a re-check of
 * the state); knit_pool_destroy moves the state on first and waits until
 * no thread is inside before it frees anything (seq-cst on both sides: a
 * Dekker pair).
 */
#define _GNU_SOURCE
#include "runtime/pool.h"

#include <assert.h>
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "payload/arena.h"
#include "base/alloc.h"
#include "base/asym_fence.h"
#include "base/cpu.h"
#include "runtime/cpus.h"
#include "base/error.h"

/* Handles of destroyed pools, kept so late calls get KNIT_ESHUTDOWN. */
static pthread_mutex_t knit__grave_lock = PTHREAD_MUTEX_INITIALIZER;
static knit_pool *knit__graveyard;
static _Atomic uint64_t knit__next_gen = 1;

_Thread_local struct knit__tls knit__tls_state;

int64_t knit__now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- finding work ---- */

/* One claimed lane: a future, or a group member that travelled in the
 * lane itself (f NULL: fn, arg and group from the slot; see
 * knit__member_lane in submit.c). */
struct knit__claimed {
    knit_future *f;
    void *fn, *arg;
    uint64_t group;
};

struct knit__claim_batch {
    knit_carpet *c;
    unsigned n;
    struct knit__claimed e[KNIT_LANES];
};

/* The pool's visit: copy the lane out; the claim retires it. Nothing else
 * happens inside the claim (no allocation: see knit__claim_into). */
static int knit__copy_lane(void *ctx, unsigned lane) {
    struct knit__claim_batch *fr = ctx;
    const knit__lane_task *t = &knit__carpet_slot(fr->c, lane)->task;
    struct knit__claimed *e = &fr->e[fr->n++];
    e->f = t->future;
    if (e->f == NULL) {
        e->fn = t->fn;
        e->arg = t->arg;
        e->group = t->user[0];
    }
    return 0;
}

/* A member that travelled in a lane gets its record here, from the
 * claiming thread's own cache: a record it freed itself, hot in its
 * cache, instead of one the submitter wrote on another core. NULL when
 * there is no memory for one (the claimer then runs it bare). The record
 * is looked up now, not taken from the caller: a helper's tasks may have
 * evicted it from the thread's map meanwhile, and an adopter may own it
 * (its cache is not atomic). */
static knit_future *knit__member_record(struct knit__pool *p,
                                        const struct knit__claimed *e) {
    struct knit__producer *rec = knit__producer_get(p->handle, p);
    /* A point of failure in the fault-injection build even when the
     * cache has a record (tests/alloc_fail_test.cc reaches the bare run
     * through it); nothing in the plain build. */
    if (knit__alloc_fails()) return NULL;
    knit_future *f = rec != NULL ? knit__future_alloc(p, rec, false) : NULL;
    if (f == NULL) return NULL;
    memcpy(&f->fn, &e->fn, sizeof f->fn);
    f->arg = e->arg;
    f->group = (struct knit_group *)(uintptr_t)e->group;
    return f;
}

/* After a claim took pending down to `pending`: wakes the submitters
 * blocked at the bound once pending is at the low-water mark
 * (space_low), not at every claim: a submitter woken for one slot fills
 * it and sleeps again, and the claimers paid a futex wake per claim for
 * that (throughput-1 in a group ran at a third of its speed in that
 * mode). Submitters waiting for a carpet lane (lane_waiters) are woken by
 * every claim, as every claim retires lanes. Both waits are bounded
 * (1 ms) and re-check, so a wake-up is never what progress rests on. */
static void knit__space_notify(struct knit__pool *p, int64_t pending) {
    /* seq-cst load after the seq-cst counts RMW: pairs with the
     * submitter's waiter RMW then counts load (knit__space_wait). */
    if (atomic_load_explicit(&p->space_waiters, memory_order_seq_cst) == 0)
        return;
    /* seq-cst: as above; a lane waiter counts itself here first. */
    if (pending > (int64_t)p->space_low &&
        atomic_load_explicit(&p->lane_waiters, memory_order_seq_cst) == 0)
        return;
    atomic_fetch_add_explicit(&p->space_seq, 1, memory_order_release);
    syscall(SYS_futex, (uint32_t *)&p->space_seq, FUTEX_WAKE_PRIVATE, INT32_MAX,
            NULL, NULL, 0);
}

static bool knit__any_parked(struct knit__pool *p) {
    unsigned words = (p->threads + 63) / 64;
    for (unsigned i = 0; i < words; i++)
        if (atomic_load_explicit(&p->parked[i], memory_order_seq_cst) != 0)
            return true;
    return false;
}

void knit__pool_wake_one(struct knit__pool *p) {
    unsigned words = (p->threads + 63) / 64;
    for (unsigned i = 0; i < words; i++) {
        /* B2 of the parking protocol (see the top of this file). */
        uint64_t m = atomic_load_explicit(&p->parked[i], memory_order_seq_cst);
        while (m != 0) {
            unsigned bit = (unsigned)__builtin_ctzll(m);
            uint64_t prev = atomic_fetch_and_explicit(
                &p->parked[i], ~(1ull << bit), memory_order_seq_cst);
            if (prev & (1ull << bit)) {
                knit__doorbell_ring(&p->workers[i * 64 + bit].bell);
                return;
            }
            m = prev & ~(1ull << bit);
        }
    }
}

void knit__pool_notify(struct knit__pool *p) {
    /* seq-cst, after the publication's seq-cst store or RMW (B1). */
    if (atomic_load_explicit(&p->spinning, memory_order_seq_cst) != 0) return;
    knit__pool_wake_one(p);
}

void knit__pool_notify_published(struct knit__pool *p) {
    /* seq-cst load after B1. With the asymmetric fence B1 was a compiler
     * barrier: a parker is covered by its membarrier, but the last
     * spinner to find work (knit__worker_main) decides whether work is
     * left without one, and our publication may still sit in this core's
     * store buffer. So skipping the wake for a spinner costs a seq-cst
     * fence and a second look: a spinner still counted after the fence
     * left `spinning` (seq-cst RMW) after it, and its seq-cst re-check
     * then sees the publication. With no spinner, no fence. */
    if (atomic_load_explicit(&p->spinning, memory_order_seq_cst) != 0) {
        if (!knit__asym_on()) return;
        atomic_thread_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&p->spinning, memory_order_seq_cst) != 0) return;
    }
    knit__pool_wake_one(p);
}

void knit__worker_flush(struct knit__pool *p, struct knit__worker *w) {
    if (w->unsettled == 0) return;
    /* release: the settled tasks' effects happen before destroy (acquire
     * load of counts) frees the pool. */
    atomic_fetch_sub_explicit(&p->counts, w->unsettled * KNIT__LIVE_ONE,
                              memory_order_release);
    w->unsettled = 0;
}

/* Claims a batch from c into the consumer's deque. Returns lanes claimed.
 * The batch's oldest task is handed to the caller in *first instead of
 * being pushed and stolen back at once (one cell, the bottom's seq-cst
 * store for a batch of one and the CAS on top saved per claim); *first is
 * NULL when none is handed over (nothing claimed, or bare members). */
static unsigned knit__claim_into(struct knit__pool *p, knit_carpet *c,
                                 unsigned consumer, struct knit__worker *w,
                                 struct knit__producer *rec,
                                 knit_future **first) {
    *first = NULL;
    struct knit__claim_batch fr;
    fr.c = c;
    fr.n = 0;
    int k = knit__carpet_claim(c, consumer, knit__copy_lane, &fr);
    if (fr.n == 0) {
        if (w != NULL && k == 0 &&
            (knit_carpet_host_bits(c) ^ knit_carpet_worker_bits(c)) != 0)
            knit__stat_add(&w->lost, 1);
        return 0;
    }
    /* Records for the members that came in lanes; without memory for one,
     * a member is run bare below, after the rest are pushed. */
    knit_future *fs[KNIT_LANES];
    unsigned nf = 0, bare[KNIT_LANES], nbare = 0;
    /* A future's line 0 was written by its submitter on another core:
     * ask for all of them now (for writing: the start CAS), so the misses
     * of a batch overlap rather than come one per task run. */
    for (unsigned i = 0; i < fr.n; i++)
        if (fr.e[i].f != NULL) __builtin_prefetch(fr.e[i].f, 1, 3);
    for (unsigned i = 0; i < fr.n; i++) {
        knit_future *f = fr.e[i].f;
        if (f == NULL && (f = knit__member_record(p, &fr.e[i])) == NULL) {
            bare[nbare++] = i;
            continue;
        }
        fs[nf++] = f;
    }
    /* Started, as far as max_pending goes. seq-cst RMW: see
     * knit__space_notify. */
    uint64_t was = atomic_fetch_sub_explicit(&p->counts, fr.n, memory_order_seq_cst);
    knit__space_notify(p, KNIT__PENDING(was) - (int64_t)fr.n);
    if (w != NULL) {
        knit__stat_add(&w->claims, 1);
        knit__stat_add(&w->lanes, fr.n);
    }
    if (KNIT__TL_ON(p)) knit__tl_claim(p, w, c, fr.n);
    /* The oldest goes to the caller, who runs it next: as if pushed and
     * stolen back from the top, but never visible to thieves. Not when
     * bare members run below first: it must not wait for them. */
    unsigned from = 0;
    if (nf > 0 && nbare == 0) {
        *first = fs[0];
        from = 1;
    }
    unsigned pushed =
        knit__deque_push_batch(&p->deques[consumer], fs + from, nf - from);
    /* Pushed in publication order from the top: thieves take them in
     * that order, and so does the claimer (knit__find steals its own top
     * after a claim when it was handed none). */
    /* This runs tasks itself (the deque is full, or members without a
     * record): members a worker kept back go to their group first, as the
     * loop hands them over before it runs anything (group.c). */
    if (w != NULL && (from + pushed < nf || nbare > 0)) knit__group_drop_flush(w);
    /* A full deque (deep nesting): run the rest right here. */
    for (unsigned i = from + pushed; i < nf; i++)
        knit__task_run(p, fs[i], w, rec);
    /* A task beside the one the claimer runs next: let a sleeping peer
     * steal (B1 was the deque's seq-cst bottom store). */
    /* Bare members run before this returns, maybe long, while the caller
     * may still count as spinning: whatever was pushed must not wait for
     * them. */
    if (pushed + from > 1 || (pushed > 0 && nbare > 0)) knit__pool_notify(p);
    for (unsigned i = 0; i < nbare; i++) {
        const struct knit__claimed *e = &fr.e[bare[i]];
        knit_fn fn;
        memcpy(&fn, &e->fn, sizeof fn);
        knit__member_run_bare(p, fn, e->arg,
                              (struct knit_group *)(uintptr_t)e->group, w, rec);
    }
    return fr.n;
}

static struct knit__frame *knit__find_frame(struct knit__pool *p,
                                            unsigned consumer);

/* Whether the idle spinner w leaves carpet c alone for its grace (see
 * knit__worker_main): c holds exactly one pending lane, as after a submit
 * that its thread is about to await; a carpet with more is a stream, and
 * is claimed at once. */
static bool knit__grace_wanted(const struct knit__worker *w, knit_carpet *c) {
    if (w == NULL || !w->idle_scan || w->graced) return false;
    uint32_t pending = knit_carpet_host_bits(c) ^ knit_carpet_worker_bits(c);
    return pending != 0 && (pending & (pending - 1)) == 0;
}

/* The next thing to run, in the order of DESIGN.md: this consumer's own
 * deque, then another consumer's shared frames (*fr; thieves look at
 * frames before carpets: a stolen frame is the oldest, largest piece of a
 * fork-join tree), then carpets (own first), then other deques. */
static knit_future *knit__find(struct knit__pool *p, unsigned consumer,
                               struct knit__worker *w,
                               struct knit__producer *rec,
                               struct knit__frame **fr) {
    knit__deque *mine = &p->deques[consumer];
    knit_future *f = knit__deque_pop(mine);
    *fr = NULL;
    if (f != NULL) return f;
    if ((*fr = knit__find_frame(p, consumer)) != NULL) return NULL;
    /* Own carpets first: a task's subtasks are there. */
    if (rec != NULL)
        /* Relaxed: rec is this thread's own record; a taker may shorten
         * its list meanwhile, and a stale entry is still a live carpet. */
        for (uint32_t i = 0;
             i < atomic_load_explicit(&rec->nmine, memory_order_relaxed); i++)
            if (knit__claim_into(p,
                                 atomic_load_explicit(&rec->mine[i],
                                                      memory_order_relaxed),
                                 consumer, w, rec, &f)) {
                if (f == NULL) f = knit__deque_steal(mine);
                if (f != NULL) return f;
            }
    /* acquire: pairs with the release store that registered the carpet. */
    uint32_t n_all = atomic_load_explicit(&p->nall, memory_order_acquire);
    unsigned start = w != NULL ? w->scan : consumer;
    for (uint32_t k = 0; k < n_all; k++) {
        uint32_t i = (start + k) % n_all;
        knit_carpet *c = atomic_load_explicit(&p->all[i], memory_order_acquire);
        if (knit__grace_wanted(w, c)) {
            w->grace_hit = true; /* see knit__worker_main */
            continue;
        }
        if (knit__claim_into(p, c, consumer, w, rec, &f)) {
            if (w != NULL) w->scan = i;
            if (f == NULL) f = knit__deque_steal(mine);
            if (f != NULL) return f;
        }
    }
    /* Steal from the other consumers' deques. */
    unsigned ids = p->threads + p->helpers;
    for (unsigned k = 1; k < ids; k++) {
        unsigned v = (consumer + k) % ids;
        f = knit__deque_steal(&p->deques[v]);
        if (f != NULL) {
            if (KNIT__TL_ON(p)) knit__tl_steal(p, w, v);
            return f;
        }
    }
    return NULL;
}

/* A shared frame from another consumer's fork deque (frame.c), or NULL. */
static struct knit__frame *knit__find_frame(struct knit__pool *p,
                                            unsigned consumer) {
    unsigned ids = p->threads + p->helpers;
    for (unsigned k = 1; k < ids; k++) {
        struct knit__frame *fr =
            knit__fdq_take(&p->fdqs[(consumer + k) % ids]);
        if (fr != NULL) return fr;
    }
    return NULL;
}

unsigned knit__pool_run_some(struct knit__pool *p, unsigned consumer,
                             struct knit__worker *w,
                             struct knit__producer *rec) {
    struct knit__frame *fr;
    knit_future *f = knit__find(p, consumer, w, rec, &fr);
    if (f == NULL) {
        if (fr != NULL) {
            knit__frame_run_stolen(p, fr, consumer, w);
            return 1;
        }
        if (w != NULL) knit__worker_flush(p, w);
        return 0;
    }
    knit__task_run(p, f, w, rec);
    if (w != NULL && w->unsettled >= 64) knit__worker_flush(p, w);
    return 1;
}

bool knit__pool_any_pending(struct knit__pool *p) {
    /* seq-cst: the re-check loads (A2) of the parking protocol. */
    uint32_t n_all = atomic_load_explicit(&p->nall, memory_order_seq_cst);
    for (uint32_t i = 0; i < n_all; i++) {
        knit_carpet *c = atomic_load_explicit(&p->all[i], memory_order_acquire);
        if (knit__carpet_pending(c)) return true;
    }
    for (unsigned i = 0; i < p->threads + p->helpers; i++)
        if (knit__deque_nonempty(&p->deques[i]) || knit__fdq_shared(&p->fdqs[i]))
            return true;
    return false;
}

/* The parking re-check (A2): seq-cst loads of the state and of every
 * place work can appear, then the caller's own condition. */
static bool knit__park_busy(struct knit__pool *p, bool (*ready)(void *),
                            void *ctx) {
    return atomic_load_explicit(&p->handle->state, memory_order_seq_cst) >=
               KNIT__POOL_STOPPING ||
           knit__pool_any_pending(p) || (ready != NULL && ready(ctx));
}

void knit__pool_park(struct knit__pool *p, struct knit__worker *w,
                     int64_t timeout_ns, bool (*ready)(void *), void *ctx) {
    unsigned word = w->id / 64;
    uint64_t bit = 1ull << (w->id % 64);
    knit__doorbell_arm(&w->bell); /* A1 */
    atomic_fetch_or_explicit(&p->parked[word], bit, memory_order_seq_cst);
    bool busy = knit__park_busy(p, ready, ctx);
    /* The heavy side of B1: a publisher whose flush was only a compiler
     * barrier (base/asym_fence.h) either sees our parked bit (and the
     * `spinning` we left) or made its publication visible to the
     * re-check after it. A syscall per park (tens of us on a VM, and an
     * interrupt for the other cores running our threads), so only when
     * the cheap re-check just above found nothing. */
    if (!busy && knit__asym_on()) {
        knit__asym_heavy();
        busy = knit__park_busy(p, ready, ctx);
    }
    if (busy) {
        atomic_fetch_and_explicit(&p->parked[word], ~bit, memory_order_seq_cst);
        knit__doorbell_disarm(&w->bell);
        return;
    }
    knit__stat_add(&w->parks, 1);
    int64_t t0 = KNIT__TL_ON(p) ? knit__now_ns() : 0;
    if (knit__doorbell_sleep(&w->bell, timeout_ns)) knit__stat_add(&w->wakes, 1);
    if (KNIT__TL_ON(p))
        knit__tl_put(&p->tl->rings[w->id], KNIT__TL_PARK, 0, t0, knit__now_ns(),
                     0, 0, 0, 0);
    atomic_fetch_and_explicit(&p->parked[word], ~bit, memory_order_seq_cst);
}

unsigned knit__pool_helper_acquire(struct knit__pool *p) {
    uint32_t m = atomic_load_explicit(&p->helper_mask, memory_order_relaxed);
    for (unsigned i = 0; i < p->helpers; i++) {
        uint32_t bit = 1u << i;
        while (!(m & bit)) {
            /* acquire: the previous helper's claims on this id happen
             * before ours (it released the bit). */
            if (atomic_compare_exchange_weak_explicit(&p->helper_mask, &m,
                                                      m | bit,
                                                      memory_order_acquire,
                                                      memory_order_relaxed))
                return p->threads + i;
        }
    }
    return UINT32_MAX;
}

void knit__pool_helper_release(struct knit__pool *p, unsigned id) {
    atomic_fetch_and_explicit(&p->helper_mask, ~(1u << (id - p->threads)),
                              memory_order_release);
}

/* ---- workers ---- */

static void *knit__worker_main(void *arg) {
    struct knit__worker *w = arg;
    struct knit__pool *p = w->pool;
    struct knit__tls *tls = knit__tls_get();
    tls->worker = w;
    tls->cpool = p;
    tls->consumer = w->id;
    unsigned idle = 0;
    bool spinning = false;
    for (;;) {
        struct knit__frame *fr;
        w->idle_scan = spinning && idle >= KNIT__GRACE_IDLE;
        knit_future *f = knit__find(p, w->id, w, w->rec, &fr);
        w->idle_scan = false;
        if (f == NULL && fr == NULL && w->grace_hit) {
            /* An idle spinner that finds a lone lane in another thread's
             * carpet (knit__grace_wanted) leaves it alone for about half
             * a microsecond before it claims it: a thread that submits and
             * then awaits comes back for its task in less, and runs it
             * itself with no line crossing cores (rtt: the awaiter and the
             * spinner raced for every lane, the spinner won about half,
             * and each of its claims cost line crossings both ways). Once
             * per idle spell; a worker that just woke, ran a task or is
             * between the lanes of a stream is not idle (KNIT__GRACE_IDLE),
             * and its own carpets and every deque get no grace (fork-join,
             * pipelines). */
            w->grace_hit = false;
            w->graced = true; /* the next find claims what is left */
            for (unsigned i = 0; i < KNIT__GRACE_PAUSES; i++) knit__cpu_relax();
            continue;
        }
        /* The grace's lanes were gone when it ended: another thread (an
         * awaiter, most likely) runs what is published now. Look less
         * often from here on, so this spinner's reads take the lines of
         * its carpet from that thread's cache less often; it is still
         * counted as spinning, so that thread's submits wake nobody.
         * Found work, or found none pending: a new spell. */
        if (w->graced && f == NULL && fr == NULL) w->pace = KNIT__PACE_PAUSES;
        w->grace_hit = false;
        w->graced = false;
        if (f != NULL || fr != NULL) {
            idle = 0;
            w->pace = 1;
            /* Members kept back go to their group before anything else
             * runs (see knit__group_drop_defer); f is ours now. */
            if (w->drop_n != 0 && (f == NULL || f->group != w->drop_group))
                knit__group_drop_flush(w);
            if (spinning) {
                spinning = false;
                /* The last spinner found work: if more is left, get a
                 * sleeper looking (see the top of this file). Before the
                 * task runs, so a long task does not hold the rest of its
                 * batch hostage. */
                if (atomic_fetch_sub_explicit(&p->spinning, 1,
                                              memory_order_seq_cst) == 1 &&
                    knit__any_parked(p) && knit__pool_any_pending(p))
                    knit__pool_wake_one(p);
            }
            if (f != NULL) {
                w->top_run = true; /* taken by knit__task_run */
                knit__task_run(p, f, w, w->rec);
            } else
                knit__frame_run_stolen(p, fr, w->id, w);
            if (w->unsettled >= 64) knit__worker_flush(p, w);
            continue;
        }
        knit__group_drop_flush(w); /* before this worker spins or parks */
        knit__worker_flush(p, w);
        if (atomic_load_explicit(&p->handle->state, memory_order_acquire) >=
            KNIT__POOL_STOPPING)
            break;
        if (!spinning) {
            /* At most half the workers (at least one) spin at a time: on
             * a machine with as many workers as cores more spinners only
             * take the CPU from the threads that submit. The others park
             * at once; the spinner wakes one when it finds work. */
            uint32_t now = atomic_fetch_add_explicit(&p->spinning, 1,
                                                     memory_order_seq_cst);
            spinning = true;
            if (now >= p->max_spinners) idle = p->spin + 4;
        }
        /* Spin briefly, then give the CPU away, then park: on a machine
         * with as many workers as cores, a spinning worker starves the
         * thread that submits. */
        idle++;
        if (idle < p->spin) {
            for (unsigned i = 0; i < w->pace; i++) knit__cpu_relax();
        } else if (idle < p->spin + 4) {
            sched_yield();
        } else {
            knit__worker_flush(p, w);
            spinning = false;
            /* Leave `spinning` before the park's re-check (seq-cst). */
            atomic_fetch_sub_explicit(&p->spinning, 1, memory_order_seq_cst);
            knit__pool_park(p, w, -1, NULL, NULL);
            idle = 0;
        }
    }
    if (spinning) atomic_fetch_sub_explicit(&p->spinning, 1, memory_order_seq_cst);
    knit__worker_flush(p, w);
    tls->worker = NULL;
    tls->cpool = NULL;
    return NULL;
}

/* ---- create ---- */

static bool knit__pow2(unsigned v) { return v && !(v & (v - 1)); }

static_assert(KNIT_MAX_THREADS <= KNIT_SCHED_MAX_CONSUMERS,
              "every worker is a consumer of every carpet");

static int knit__configure(struct knit__pool *p, const knit_pool_options *o) {
    /* threads = 0: the CPUs we may use (affinity mask, cgroup quota). */
    p->threads = o->threads ? o->threads : knit__usable_cpus();
    if (o->threads == 0 && p->threads > KNIT_MAX_THREADS)
        p->threads = KNIT_MAX_THREADS; /* the default fits any machine */
    if (p->threads > KNIT_MAX_THREADS)
        return knit__fail(KNIT_EINVAL, "threads=%u is over the limit of %u",
                          o->threads, KNIT_MAX_THREADS);
    if (o->backpressure != KNIT_BLOCK && o->backpressure != KNIT_FAIL &&
        o->backpressure != KNIT_CALLER_RUNS)
        return knit__fail(KNIT_EINVAL,
                          "backpressure=%d must be KNIT_BLOCK (0), "
                          "KNIT_FAIL (1) or KNIT_CALLER_RUNS (2)",
                          o->backpressure);
    p->max_pending = o->max_pending ? o->max_pending : KNIT__DEFAULT_MAX_PENDING;
    /* Blocked submitters are woken when pending is down by an eighth
     * (at least one) from the bound: see knit__space_notify. */
    p->space_low = p->max_pending - (p->max_pending / 8 ? p->max_pending / 8 : 1);
    p->credit_k = p->max_pending >= KNIT__CREDIT_MIN_BOUND ? KNIT__CREDITS_MAX : 1;
    if (p->max_pending > KNIT__MAX_PENDING_LIMIT)
        return knit__fail(KNIT_EINVAL, "max_pending=%zu is over the limit of %u",
                          o->max_pending, KNIT__MAX_PENDING_LIMIT);
    if (o->region_lanes != 0 &&
        (!knit__pow2(o->region_lanes) || o->region_lanes > KNIT_LANES))
        return knit__fail(KNIT_EINVAL,
                          "region_lanes=%u must be a power of two in 1..%u",
                          o->region_lanes, KNIT_LANES);
    int rc = knit_sched_resolve(o->sched, &p->ops);
    if (rc < 0) return rc;
    p->backpressure = o->backpressure;
    p->spin = o->spin ? o->spin : KNIT__DEFAULT_SPIN;
    p->max_spinners = p->threads / 2 ? p->threads / 2 : 1;
    p->await_spin_ns = o->await_spin_ns ? o->await_spin_ns
                                        : KNIT__DEFAULT_AWAIT_SPIN_NS;
    p->trace = o->trace;
    p->trace_ctx = o->trace_ctx;
    p->arena_bytes = o->arena_bytes ? o->arena_bytes : KNIT__DEFAULT_ARENA;
    if (p->arena_bytes < KNIT__ARENA_MIN_CAP || p->arena_bytes > KNIT__ARENA_MAX_CAP)
        return knit__fail(KNIT_EINVAL,
                          "arena_bytes=%zu must be between %zu (4 MiB) and "
                          "%zu (64 GiB)",
                          p->arena_bytes, KNIT__ARENA_MIN_CAP, KNIT__ARENA_MAX_CAP);
    p->max_payload = o->max_payload ? o->max_payload : p->arena_bytes / 4;
    if (p->max_payload > p->arena_bytes)
        return knit__fail(KNIT_EINVAL,
                          "max_payload=%zu is larger than arena_bytes=%zu",
                          p->max_payload, p->arena_bytes);

    /* Consumers: the workers, plus helper ids for threads that await, when
     * the discipline has room for them. */
    unsigned lanes = o->region_lanes;
    bool dekker = strcmp(p->ops->name, "dekker") == 0;
    bool single = strcmp(p->ops->name, "single") == 0;
    if (lanes == 0) {
        lanes = 8;
        if (dekker)
            while (lanes > 1 && KNIT_LANES / lanes < p->threads + KNIT__HELPERS)
                lanes /= 2;
    }
    unsigned helpers = KNIT__HELPERS;
    if (single) helpers = 0;
    if (dekker) {
        unsigned regions = KNIT_LANES / lanes;
        helpers = regions > p->threads ? regions - p->threads : 0;
        if (helpers > KNIT__HELPERS) helpers = KNIT__HELPERS;
    }
    if (p->threads + helpers > KNIT_SCHED_MAX_CONSUMERS)
        helpers = p->threads >= KNIT_SCHED_MAX_CONSUMERS
                      ? 0
                      : KNIT_SCHED_MAX_CONSUMERS - p->threads;
    if (p->threads > KNIT_SCHED_MAX_CONSUMERS)
        return knit__fail(KNIT_EINVAL,
                          "threads=%u: a carpet serves at most %u consumers",
                          p->threads, KNIT_SCHED_MAX_CONSUMERS);
    p->helpers = helpers;
    p->params.consumers = p->threads + helpers;
    p->params.region_lanes = lanes;
    if (p->ops->check != NULL) {
        rc = p->ops->check(&p->params);
        if (rc < 0) return rc;
    }
    return 0;
}

static void knit__pool_free(struct knit__pool *p) {
    if (p == NULL) return;
    /* Allocated minus freed, over every thread that did either (each
     * record's count wraps on its own; the sum is exact). */
    uint64_t out = 0 - p->futures_freed_bare;
    struct knit__producer *r = p->producers;
    while (r != NULL) {
        struct knit__producer *next = r->next;
        out += r->futures_out;
        knit__producer_free(r);
        r = next;
    }
    uint32_t n = atomic_load_explicit(&p->nall, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++)
        knit__carpet_destroy(atomic_load_explicit(&p->all[i],
                                                  memory_order_relaxed));
    free((void *)p->all);
    free(p->spare);
    knit__future_free_all(p, out != 0); /* frees buffers, some into the arena */
    knit__arena_destroy(p->arena);
    free(p->workers);
    free(p->deques);
    free(p->fdqs);
    knit__tl_destroy(p->tl);
    free(p);
}

static void knit__bury(knit_pool *h) {
    pthread_mutex_lock(&knit__grave_lock);
    h->grave_next = knit__graveyard;
    knit__graveyard = h;
    pthread_mutex_unlock(&knit__grave_lock);
}

/* A handle that create never gave out: nobody can hold it, so it is freed
 * rather than buried. */
static void knit__handle_free(knit_pool *h) {
    pthread_mutex_destroy(&h->lock);
    free(h);
}

static void knit__stop_workers(struct knit__pool *p, unsigned started) {
    atomic_store_explicit(&p->handle->state, KNIT__POOL_STOPPING,
                          memory_order_seq_cst);
    for (unsigned i = 0; i < started; i++)
        knit__doorbell_ring(&p->workers[i].bell);
    for (unsigned i = 0; i < started; i++)
        pthread_join(p->workers[i].thread, NULL);
}

int knit_pool_create(const knit_pool_options *opts, knit_pool **out) {
    if (out == NULL) return knit__fail(KNIT_EINVAL, "out is NULL");
    *out = NULL;
    if (opts == NULL) return knit__fail(KNIT_EINVAL, "options is NULL");
    if (opts->size != sizeof(knit_pool_options))
        return knit__fail(KNIT_EINVAL,
                          "options.size=%zu, expected %zu: initialise with "
                          "KNIT_POOL_OPTIONS_INIT",
                          opts->size, sizeof(knit_pool_options));
    knit__thread_exit_hook_install();
    struct knit__pool *p = knit__aligned_alloc(KNIT__LINE, sizeof *p);
    knit_pool *h = knit__aligned_alloc(KNIT__LINE, sizeof *h);
    if (h != NULL) memset(h, 0, sizeof *h);
    if (p == NULL || h == NULL) {
        free(p);
        free(h);
        return knit__fail(KNIT_ENOMEM, "cannot allocate the pool");
    }
    memset(p, 0, sizeof *p);
    int rc = knit__configure(p, opts);
    if (rc == 0) rc = knit__arena_create(p->arena_bytes, &p->arena);
    if (rc < 0) {
        free(p);
        free(h);
        return rc;
    }
    p->handle = h;
    atomic_init(&h->state, KNIT__POOL_LIVE);
    atomic_init(&h->users, 0);
    pthread_mutex_init(&h->lock, NULL);
    h->p = p;
    h->gen = atomic_fetch_add_explicit(&knit__next_gen, 1, memory_order_relaxed);
    atomic_init(&p->counts, 0);
    atomic_init(&p->shared_pushed, 0);
    atomic_init(&p->shared_child_settled, 0);
    atomic_init(&p->pending_high, 0);
    atomic_init(&p->space_seq, 0);
    atomic_init(&p->space_waiters, 0);
    atomic_init(&p->lane_waiters, 0);
    for (unsigned i = 0; i < KNIT__PARKED_WORDS; i++) atomic_init(&p->parked[i], 0);
    atomic_init(&p->helper_mask, 0);
    atomic_init(&p->spinning, 0);
    atomic_init(&p->help_depth_max, 0);
    atomic_init(&p->nall, 0);
    p->capall = (uint32_t)(p->max_pending / KNIT_LANES + p->threads + 64);
    p->all = knit__calloc(p->capall, sizeof *p->all);
    p->spare = knit__calloc(p->capall, sizeof *p->spare);
    p->nspare = 0;
    p->carpets_moved = 0;
    p->workers = knit__aligned_alloc(KNIT__LINE, sizeof *p->workers * p->threads);
    p->deques = knit__aligned_alloc(KNIT__LINE,
                              sizeof *p->deques * (p->threads + p->helpers));
    if (p->deques != NULL)
        for (unsigned i = 0; i < p->threads + p->helpers; i++)
            knit__deque_init(&p->deques[i]);
    p->fdqs = knit__aligned_alloc(KNIT__LINE,
                                  sizeof *p->fdqs * (p->threads + p->helpers));
    if (p->fdqs != NULL)
        for (unsigned i = 0; i < p->threads + p->helpers; i++)
            knit__fdq_init(&p->fdqs[i]);
    if (p->all == NULL || p->spare == NULL || p->workers == NULL ||
        p->deques == NULL || p->fdqs == NULL) {
        unsigned threads = p->threads; /* p is freed below */
        knit__pool_free(p);
        knit__handle_free(h);
        return knit__fail(KNIT_ENOMEM, "cannot allocate %u workers", threads);
    }
    /* The timeline (runtime/timeline.c), before any thread can record. */
    rc = knit__tl_create(p, opts->timeline, opts->timeline_events);
    if (rc < 0) {
        knit__pool_free(p);
        knit__handle_free(h);
        return rc;
    }
    memset(p->workers, 0, sizeof *p->workers * p->threads);
    for (unsigned i = 0; i < p->threads; i++) {
        struct knit__worker *w = &p->workers[i];
        atomic_init(&w->bell.word, KNIT__BELL_OFF);
        atomic_init(&w->pushed, 0);
        atomic_init(&w->child_settled, 0);
        atomic_init(&w->frames_stolen, 0);
        w->id = i;
        w->pool = p;
        w->scan = i;
        w->pace = 1;
        w->rec = knit__producer_add(p, false);
        if (w->rec == NULL) {
            knit__pool_free(p);
            knit__handle_free(h);
            return knit__fail(KNIT_ENOMEM, "cannot allocate worker %u", i);
        }
        w->rec->worker = (int)i;
    }
    for (unsigned i = 0; i < p->threads; i++) {
        /* A thread is an allocation too (its stack): a point of failure
         * in the fault-injection build (base/alloc.h). */
        int err = knit__alloc_fails()
                      ? ENOMEM
                      : pthread_create(&p->workers[i].thread, NULL,
                                       knit__worker_main, &p->workers[i]);
        if (err != 0) {
            unsigned threads = p->threads; /* p is freed below */
            knit__stop_workers(p, i);
            knit__pool_free(p);
            knit__handle_free(h);
            return knit__fail(err == EAGAIN ? KNIT_EAGAIN : KNIT_ENOMEM,
                              "cannot start worker thread %u of %u: %s", i,
                              threads, strerror(err));
        }
        char name[16];
        snprintf(name, sizeof name, "knit-w%u", i % 1000u);
        pthread_setname_np(p->workers[i].thread, name);
    }
    *out = h;
    return 0;
}

/* ---- destroy ---- */

/* Whether every task submitted to p has settled, for destroy (which has
 * already made outside submits fail). Subtasks pushed onto deques are
 * counted per worker (see knit__pool.counts): the settles are read first,
 * then `live`, then the pushes, each sum with acquire loads that pair with
 * the release stores of the settles. A settle seen implies its push is
 * seen (the push was counted before the deque released the task to its
 * settler), so pushed == settled means no subtask pushed before the last
 * read is unsettled; one pushed later needs a running parent, which the
 * earlier reads would have seen as live. counts is read seq-cst: with the
 * seq-cst store of the stopping state before it, it pairs with
 * knit__pending_acquire's seq-cst RMW and state re-check. */
static bool knit__pool_quiescent(struct knit__pool *p) {
    uint64_t settled =
        atomic_load_explicit(&p->shared_child_settled, memory_order_acquire);
    for (unsigned i = 0; i < p->threads; i++)
        settled += atomic_load_explicit(&p->workers[i].child_settled,
                                        memory_order_acquire);
    if (KNIT__LIVE(atomic_load_explicit(&p->counts, memory_order_seq_cst)) > 0)
        return false;
    uint64_t pushed = atomic_load_explicit(&p->shared_pushed, memory_order_acquire);
    for (unsigned i = 0; i < p->threads; i++)
        pushed += atomic_load_explicit(&p->workers[i].pushed, memory_order_acquire);
    return pushed == settled;
}

int knit_pool_destroy(knit_pool *h, int how) {
    if (h == NULL) return knit__fail(KNIT_EINVAL, "pool is NULL");
    if (how != KNIT_DRAIN && how != KNIT_CANCEL)
        return knit__fail(KNIT_EINVAL,
                          "how=%d must be KNIT_DRAIN (0) or KNIT_CANCEL (1)", how);
    struct knit__tls *tls = knit__tls_get();
    pthread_mutex_lock(&h->lock);
    uint32_t st = atomic_load_explicit(&h->state, memory_order_acquire);
    if (st != KNIT__POOL_LIVE) {
        pthread_mutex_unlock(&h->lock);
        return knit__fail(KNIT_ESHUTDOWN, "the pool is already %s",
                          st == KNIT__POOL_DEAD ? "destroyed" : "shutting down");
    }
    struct knit__pool *p = h->p;
    if ((tls->worker != NULL && tls->worker->pool == p) ||
        (tls->current != NULL && tls->current->pool == p)) {
        pthread_mutex_unlock(&h->lock);
        return knit__fail(KNIT_EBUSY,
                          "knit_pool_destroy called from inside the pool's "
                          "own task");
    }
    if (knit__entries_inside(h)) { /* it would wait for itself */
        pthread_mutex_unlock(&h->lock);
        return knit__fail(KNIT_EBUSY,
                          "knit_pool_destroy called from inside a call into "
                          "the same pool (a pipeline's input or stage, a "
                          "payload's free function)");
    }
    /* From here outside submits fail; the workers go on. seq-cst: pairs
     * with knit__pool_enter. */
    atomic_store_explicit(&h->state,
                          how == KNIT_DRAIN ? KNIT__POOL_DRAINING
                                            : KNIT__POOL_CANCELLING,
                          memory_order_seq_cst);
    pthread_mutex_unlock(&h->lock);
    /* No promise can be created any more (promise.c checks the state
     * under the lock): reject the unsettled ones before the drain, so no
     * task awaiting one holds it up. */
    knit__promises_reject_all(p);
    /* Submitters blocked at the bound see the new state and leave. */
    atomic_fetch_add_explicit(&p->space_seq, 1, memory_order_seq_cst);
    syscall(SYS_futex, (uint32_t *)&p->space_seq, FUTEX_WAKE_PRIVATE, INT32_MAX,
            NULL, NULL, 0);
    /* Wait for every submitted task to settle (run or cancelled). Wake
     * everyone each round: in CANCEL mode parked workers must come and
     * cancel what is left. */
    /* Each round first takes back the credits of threads outside the
     * pool (runtime/entry.c): a thread that never calls again would keep
     * them, and the units they are in, for ever. A thread inside gives
     * its credits back when it leaves (the state is not LIVE). */
    while (knit__entries_revoke(h), !knit__pool_quiescent(p)) {
        for (unsigned i = 0; i < p->threads; i++)
            if (knit__pool_any_pending(p)) knit__pool_wake_one(p);
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    knit__stop_workers(p, p->threads);
    /* Dead before we wait for users, so nobody new gets in (enter's
     * re-check), then wait for those inside to leave. */
    pthread_mutex_lock(&h->lock);
    atomic_store_explicit(&h->state, KNIT__POOL_DEAD, memory_order_seq_cst);
    pthread_mutex_unlock(&h->lock);
    knit__entries_wait_out(h);
    /* The final timeline: every worker has joined (their records happen
     * before the joins) and no call is inside; a failure here is not
     * reported (the path was checked by create; see knit.h). */
    if (KNIT__TL_ON(p)) (void)knit__tl_write(p, NULL);
    h->p = NULL;
    knit__pool_free(p);
    knit__bury(h);
    return 0;
}

/* ---- stats ---- */

int knit_pool_stats(knit_pool *h, knit_pool_stats_t *out) {
    if (out == NULL) return knit__fail(KNIT_EINVAL, "stats out is NULL");
    if (out->size != sizeof(knit_pool_stats_t))
        return knit__fail(KNIT_EINVAL, "stats.size=%zu, expected %zu", out->size,
                          sizeof(knit_pool_stats_t));
    int rc = knit__pool_enter(h, true);
    if (rc < 0) return rc;
    struct knit__pool *p = h->p;
    size_t size = out->size;
    memset(out, 0, sizeof *out);
    out->size = size;
    out->threads = p->threads;
    out->sched = p->ops->name;
#define KNIT__LD(x) atomic_load_explicit(&(x), memory_order_relaxed)
    for (unsigned i = 0; i < p->threads; i++) {
        struct knit__worker *w = &p->workers[i];
        knit_worker_stats s = {KNIT__LD(w->tasks_run), KNIT__LD(w->claims),
                               KNIT__LD(w->lanes),     KNIT__LD(w->lost),
                               KNIT__LD(w->parks),     KNIT__LD(w->wakes)};
        if (i < sizeof out->worker / sizeof out->worker[0]) out->worker[i] = s;
        out->total.tasks_run += s.tasks_run;
        out->total.claims += s.claims;
        out->total.lanes_claimed += s.lanes_claimed;
        out->total.polls_lost += s.polls_lost;
        out->total.parks += s.parks;
        out->total.wakes += s.wakes;
        out->cancelled += KNIT__LD(w->cancelled);
        out->skipped += KNIT__LD(w->skipped);
        out->failed += KNIT__LD(w->failed);
        out->frames_stolen += KNIT__LD(w->frames_stolen);
    }
    pthread_mutex_lock(&h->lock);
    for (struct knit__producer *r = p->producers; r != NULL; r = r->next) {
        out->submitted += KNIT__LD(r->submitted);
        out->helped += KNIT__LD(r->helped);
        out->cancelled += KNIT__LD(r->cancelled);
        out->skipped += KNIT__LD(r->skipped);
        out->inlined += KNIT__LD(r->inlined);
        out->failed += KNIT__LD(r->failed);
        out->frames_stolen += KNIT__LD(r->frames_stolen);
    }
    out->carpets_spare = p->nspare;
    out->carpets_moved = p->carpets_moved;
    pthread_mutex_unlock(&h->lock);
    out->tasks_run = out->total.tasks_run + out->helped;
    /* Credits are counted as pending but are not tasks. */
    int64_t pending = KNIT__PENDING(KNIT__LD(p->counts)) - (int64_t)knit__entries_credits(h);
    out->pending = pending > 0 ? (uint64_t)pending : 0;
    out->completed = out->tasks_run + out->cancelled;
    out->pending_high = KNIT__LD(p->pending_high);
    out->carpets = KNIT__LD(p->nall);
    out->help_depth_max = KNIT__LD(p->help_depth_max);
    knit__arena_stats as;
    knit__arena_stats_get(p->arena, &as);
    out->arena_bytes = as.in_use;
    out->arena_cap = as.cap_bytes;
    out->arena_high = as.high_water;
    out->arena_allocs = as.allocations;
    out->arena_failures = as.failures;
#undef KNIT__LD
    knit__pool_exit(h);
    return 0;
}

