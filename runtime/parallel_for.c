/* knit_parallel_for: binary splitting over fork-join frames.
 *
 * One root task (the caller's own task when it runs one of the pool's,
 * else a submitted task the caller awaits, helping) splits the range: a
 * piece larger than `grain` forks its upper half as a frame and keeps
 * splitting its lower half, runs the leaf, then joins the halves it forked
 * (newest first). Unstolen halves run at their join as plain calls; idle
 * workers steal the oldest, i.e. the largest, halves. The first failure
 * wins a CAS and keeps its code and message; pieces that start after it
 * skip their work.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "runtime/first_failure.h"
#include "runtime/pool.h"

struct knit__pfor {
    struct knit__pool *tlp; /* the pool, if it keeps a timeline; else NULL */
    knit_range_fn fn;
    void *ctx;
    size_t grain;
    struct knit__first_failure ff;
};

struct knit__piece {
    struct knit__pfor *pf;
    size_t begin, end;
};

static void *knit__pfor_piece(knit_task *task, void *arg) {
    if (task != NULL && !knit__task_is_frame_child(task)) knit_task_label(task, "parallel_for");
    const struct knit__piece *pc = arg;
    struct knit__pfor *pf = pc->pf;
    size_t begin = pc->begin, end = pc->end;
    struct knit__piece upper[64];
    knit_frame frames[64];
    unsigned n = 0;
    while (end - begin > pf->grain && n < 64) {
        size_t mid = begin + (end - begin) / 2;
        upper[n] = (struct knit__piece){pf, mid, end};
        knit_fork(task, &frames[n], knit__pfor_piece, &upper[n]);
        n++;
        end = mid;
    }
    if (!knit__first_failure_seen(&pf->ff)) { /* a later piece skips */
        int64_t t0 = pf->tlp != NULL ? knit__now_ns() : 0;
        int rc = pf->fn(pf->ctx, begin, end);
        if (pf->tlp != NULL) knit__tl_self(pf->tlp, KNIT__TL_PIECE, t0, begin, end, 0);
        if (rc < 0) knit__first_failure_set(&pf->ff, rc);
    }
    while (n > 0) {
        n--;
        int rc = knit_join(task, &frames[n], NULL);
        if (rc < 0) knit__first_failure_set(&pf->ff, rc); /* cannot fail: a bug */
    }
    return NULL;
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
    pf.fn = fn;
    pf.ctx = ctx;
    pf.grain = grain;
    pf.tlp = KNIT__TL_ON(h->p) ? h->p : NULL;
    knit__first_failure_init(&pf.ff);
    struct knit__piece all = {&pf, begin, end};
    rc = knit__frames_root(h, knit__pfor_piece, &all);
    knit__pool_exit(h);
    if (rc < 0) return rc; /* message set */
    return knit__first_failure_report(&pf.ff);
}
