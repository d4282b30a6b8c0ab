/* knit_parallel_for: binary splitting over submit/await.
 *
 * A piece larger than `grain` splits off its upper half as a task (the
 * range travels inline in the task, no allocation) and keeps splitting its
 * lower half, then runs the leaf and awaits the halves it split off. An
 * await inside a task runs other tasks, so this nests and never blocks a
 * worker; called from outside, the caller helps run pieces while it waits.
 * The first failure wins a CAS and keeps its code and message; pieces that
 * start after it skip their work.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "runtime/error.h"
#include "runtime/pool.h"

struct knit__pfor {
    knit_pool *pool;
    knit_range_fn fn;
    void *ctx;
    size_t grain;
    _Atomic int failed; /* 0, then 1 for the failure that keeps its text */
    int code;           /* written by the CAS winner, read after the awaits */
    char msg[512];
};

struct knit__piece {
    struct knit__pfor *pf;
    size_t begin, end;
};

static void knit__pfor_failed(struct knit__pfor *pf, int code) {
    int expect = 0;
    if (atomic_compare_exchange_strong_explicit(&pf->failed, &expect, 1,
                                                memory_order_acq_rel,
                                                memory_order_relaxed)) {
        pf->code = code;
        snprintf(pf->msg, sizeof pf->msg, "%s", knit_last_error());
    }
}

static void knit__pfor_run(struct knit__pfor *pf, size_t begin, size_t end);

static void *knit__pfor_task(knit_task *task, void *arg) {
    knit_task_label(task, "parallel_for");
    struct knit__piece piece;
    memcpy(&piece, arg, sizeof piece); /* inline bytes: may be unaligned */
    knit__pfor_run(piece.pf, piece.begin, piece.end);
    return NULL;
}

static void knit__pfor_run(struct knit__pfor *pf, size_t begin, size_t end) {
    knit_future *halves[64];
    unsigned n = 0;
    while (end - begin > pf->grain && n < 64) {
        size_t mid = begin + (end - begin) / 2;
        struct knit__piece upper = {pf, mid, end};
        if (knit_submit_copy(pf->pool, knit__pfor_task, &upper, sizeof upper,
                             &halves[n]) != 0) {
            /* Cannot split (bound reached with KNIT_FAIL): run it here. */
            knit__pfor_run(pf, mid, end);
        } else {
            n++;
        }
        end = mid;
    }
    /* acquire: pairs with the winner's acq_rel CAS; a later piece skips. */
    if (!atomic_load_explicit(&pf->failed, memory_order_acquire)) {
        struct knit__pool *p = pf->pool->p;
        int64_t t0 = KNIT__TL_ON(p) ? knit__now_ns() : 0;
        int rc = pf->fn(pf->ctx, begin, end);
        if (KNIT__TL_ON(p)) knit__tl_self(p, KNIT__TL_PIECE, t0, begin, end, 0);
        if (rc < 0) knit__pfor_failed(pf, rc);
    }
    while (n > 0) {
        knit_future *f = halves[--n];
        int rc = knit_await(f, -1, NULL);
        if (rc < 0) knit__pfor_failed(pf, rc);
        knit_future_release(f);
    }
}

int knit_parallel_for(knit_pool *h, size_t begin, size_t end, size_t grain,
                      knit_range_fn fn, void *ctx) {
    if (h == NULL || fn == NULL)
        return knit__fail(KNIT_EINVAL, "knit_parallel_for: NULL %s",
                          h == NULL ? "pool" : "fn");
    if (begin > end)
        return knit__fail(KNIT_EINVAL,
                          "knit_parallel_for: begin=%zu is after end=%zu", begin,
                          end);
    /* Held for the whole call: the pieces' futures belong to the pool, and
     * destroy waits for threads inside a call before it frees them. */
    int rc = knit__pool_enter(h, false);
    if (rc < 0) return rc;
    unsigned threads = h->p->threads;
    if (begin == end) {
        knit__pool_exit(h);
        return 0;
    }
    if (grain == 0) {
        grain = (end - begin) / ((size_t)threads * 8);
        if (grain == 0) grain = 1;
    }
    struct knit__pfor pf;
    memset(&pf, 0, sizeof pf);
    pf.pool = h;
    pf.fn = fn;
    pf.ctx = ctx;
    pf.grain = grain;
    atomic_init(&pf.failed, 0);
    knit__pfor_run(&pf, begin, end);
    knit__pool_exit(h);
    if (atomic_load_explicit(&pf.failed, memory_order_acquire))
        return knit__fail(pf.code, "%s", pf.msg);
    return 0;
}
