/* knit_parallel_reduce over fork-join frames.
 *
 * The range splits in halves down to pieces of at most `grain`, the same
 * tree whatever the pool: a node forks its right half as a frame, reduces
 * its left half into its own value, joins the right one into a value on
 * its stack and combines (left, right). The fold's shape is therefore
 * fixed by (begin, end, grain): an associative combine gives identical
 * bits at any thread count. Unstolen right halves run at their join as
 * plain calls; idle workers steal the oldest, i.e. the largest, halves.
 */
#define _GNU_SOURCE
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "runtime/first_failure.h"
#include "runtime/pool.h"

struct knit__reduce {
    knit_reduce_body body;
    knit_reduce_combine combine;
    void *ctx;
    size_t grain;
    struct knit__first_failure ff;
};

/* One node of the fold: reduces [begin, end) into out. */
struct knit__rnode {
    struct knit__reduce *r;
    size_t begin, end;
    void *out;
};

static void *knit__reduce_node(knit_task *task, void *arg) {
    const struct knit__rnode *nd = arg;
    struct knit__reduce *r = nd->r;
    if (knit__first_failure_seen(&r->ff)) return NULL; /* a later piece skips */
    if (nd->end - nd->begin <= r->grain) {
        int rc = r->body(r->ctx, nd->begin, nd->end, nd->out);
        if (rc < 0) knit__first_failure_set(&r->ff, rc);
        return NULL;
    }
    size_t mid = nd->begin + (nd->end - nd->begin) / 2;
    alignas(max_align_t) unsigned char right[KNIT_REDUCE_MAX_VALUE];
    struct knit__rnode hi = {r, mid, nd->end, right};
    struct knit__rnode lo = {r, nd->begin, mid, nd->out};
    knit_frame fr;
    knit_fork(task, &fr, knit__reduce_node, &hi);
    knit__reduce_node(task, &lo);
    knit_join(task, &fr, NULL); /* the node reports failures through r */
    if (!knit__first_failure_seen(&r->ff))
        r->combine(r->ctx, nd->out, right);
    return NULL;
}

int knit_parallel_reduce(knit_pool *h, size_t begin, size_t end, size_t grain,
                         size_t value_size, knit_reduce_body body,
                         knit_reduce_combine combine, void *ctx, void *result) {
    if (h == NULL || body == NULL || combine == NULL || result == NULL)
        return knit__fail(KNIT_EINVAL, "knit_parallel_reduce: NULL %s",
                          h == NULL      ? "pool"
                          : body == NULL ? "body"
                          : combine == NULL ? "combine"
                                            : "result");
    if (begin > end)
        return knit__fail(KNIT_EINVAL,
                          "knit_parallel_reduce: begin=%zu is after end=%zu",
                          begin, end);
    if (value_size == 0 || value_size > KNIT_REDUCE_MAX_VALUE)
        return knit__fail(KNIT_EINVAL,
                          "knit_parallel_reduce: value_size=%zu must be in "
                          "1..%d",
                          value_size, KNIT_REDUCE_MAX_VALUE);
    /* Held for the whole call, like knit_parallel_for. */
    int rc = knit__pool_enter(h, false);
    if (rc < 0) return rc;
    struct knit__reduce r;
    memset(&r, 0, sizeof r);
    r.body = body;
    r.combine = combine;
    r.ctx = ctx;
    r.grain = grain ? grain : (end - begin) / 256;
    if (r.grain == 0) r.grain = 1;
    knit__first_failure_init(&r.ff);
    alignas(max_align_t) unsigned char value[KNIT_REDUCE_MAX_VALUE];
    struct knit__rnode root = {&r, begin, end, value};
    if (begin == end) { /* the identity */
        int brc = body(ctx, begin, end, value);
        if (brc < 0) knit__first_failure_set(&r.ff, brc);
    } else {
        rc = knit__frames_root(h, knit__reduce_node, &root);
    }
    knit__pool_exit(h);
    if (rc < 0) return rc; /* message set */
    rc = knit__first_failure_report(&r.ff);
    if (rc == 0) memcpy(result, value, value_size);
    return rc;
}
