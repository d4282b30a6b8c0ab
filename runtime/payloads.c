/* The pool's side of payloads: copies (inline or arena), arena binaries
 * and moved buffers, and every hand-off of their ownership. (payload/ has
 * the arena and knit_buf itself, and calls nothing here.)
 *
 * Who owns a buffer, at each point (see also <knit/knit.h>):
 *   before submit            the caller
 *   submit succeeded         the future's `in` (the caller's handle is
 *                            emptied); submit failed: still the caller
 *   knit_task_take_buf       the task (the future's `in` is emptied)
 *   the future settles       the runtime frees `in` if still there
 *                            (knit__payload_settle): ran, failed, cancelled
 *                            before start, cancelled by pool destroy
 *   knit_task_return_buf     the future's `out` (out_state SET)
 *   knit_future_take_buf     the taker; out_state SET -> TAKEN is one
 *                            exchange, so two takers never both get it
 *   the future is freed      the runtime frees `out` if still SET
 *                            (knit__payload_drop): released without a
 *                            take, timed out and abandoned, pool destroy
 * `in` is only touched by the submitter before publication, then by the
 * one thread running (or cancelling) the task; `out` is written by the
 * task before the future's DONE store (release) and read after an acquire
 * load of DONE, so neither needs atomics beyond out_state.
 */
#define _GNU_SOURCE
#include "base/alloc.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "payload/arena.h"
#include "payload/payload.h"
#include "runtime/pool.h"

void knit__payload_settle(knit_future *f) {
    if (f->in_kind == KNIT__PAY_NONE) return;
    knit_buf_free(&knit__fin(f)->in);
    f->in_kind = KNIT__PAY_NONE;
}

void knit__payload_drop(knit_future *f) {
    /* Only the future's last holder gets here (its free, or the pool's
     * destroy): no one else can touch out_state, and the holders' release
     * RMWs on refs, acquired by the last one, order their writes before
     * this. So a relaxed load and store, not an exchange (which costs a
     * locked instruction on every future). */
    uint32_t was = atomic_load_explicit(&f->out_state, memory_order_relaxed);
    if (was == KNIT__OUT_NONE) return;
    if (was == KNIT__OUT_SET) knit_buf_free(&f->out);
    atomic_store_explicit(&f->out_state, KNIT__OUT_TAKEN, memory_order_relaxed);
    memset(&f->out, 0, sizeof f->out);
}

/* ---- the arena, with backpressure ---- */

/* Allocates len bytes in p's arena into *mem: KNIT_BLOCK waits for room
 * (a task runs other tasks meanwhile), KNIT_FAIL fails at once. */
static int knit__arena_take(knit_pool *h, struct knit__pool *p, size_t len,
                            void **mem) {
    *mem = NULL;
    if (len > p->max_payload)
        return knit__fail(KNIT_E2BIG,
                          "payload of %zu bytes is over max_payload=%zu", len,
                          p->max_payload);
    for (unsigned round = 0;; round++) {
        *mem = knit__arena_alloc(p->arena, len);
        if (*mem != NULL) return 0;
        if (p->backpressure == KNIT_FAIL) {
            knit__arena_stats st;
            knit__arena_stats_get(p->arena, &st);
            return knit__fail(KNIT_ENOMEM,
                              "payload arena full: cap %llu bytes, %llu in use, "
                              "asked %zu (backpressure KNIT_FAIL)",
                              (unsigned long long)st.cap_bytes,
                              (unsigned long long)st.in_use, len);
        }
        if (atomic_load_explicit(&h->state, memory_order_acquire) >=
            KNIT__POOL_CANCELLING)
            return knit__fail(KNIT_ESHUTDOWN, "the pool is shutting down");
        /* Wait for tasks to free payloads: help if we are a consumer. */
        struct knit__tls *tls = knit__tls_get();
        struct knit__producer *rec =
            tls->cpool == p ? knit__producer_get(h, p) : NULL;
        if (rec != NULL && knit__pool_run_some(p, tls->consumer, tls->worker, rec))
            continue;
        if (round < 16) {
            sched_yield();
        } else {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
}

void *knit_payload_alloc(knit_pool *h, size_t len) {
    if (knit__pool_enter(h, false) < 0) return NULL;
    void *mem;
    knit__arena_take(h, h->p, len, &mem);
    knit__pool_exit(h);
    return mem;
}

void knit_payload_free(knit_pool *h, void *data) {
    if (data == NULL || knit__pool_enter(h, true) < 0) return;
    if (knit__arena_owns(h->p->arena, data)) knit__arena_free(h->p->arena, data);
    knit__pool_exit(h);
}

knit_buf knit_payload_buf(knit_pool *h, void *data, size_t len) {
    knit_buf b = {NULL, 0, NULL, NULL};
    if (knit__pool_enter(h, true) < 0) return b;
    struct knit__pool *p = h->p;
    if (data != NULL && knit__arena_owns(p->arena, data) &&
        len <= knit__arena_usable(p->arena, data)) {
        b.data = data;
        b.len = len;
        b.free_fn = knit__payload_arena_free;
        b.free_ctx = p->arena;
    } else {
        knit__fail(KNIT_EINVAL,
                   "knit_payload_buf: %p (%zu bytes) is not memory from this "
                   "pool's arena",
                   data, len);
    }
    knit__pool_exit(h);
    return b;
}

/* ---- submitting payloads ---- */

int knit_submit_copy(knit_pool *h, knit_fn fn, const void *bytes, size_t len,
                     knit_future **out) {
    if (out != NULL) *out = NULL;
    if (bytes == NULL && len > 0)
        return knit__fail(KNIT_EINVAL, "knit_submit_copy: bytes is NULL");
    if (len <= KNIT_INLINE_BYTES) {
        struct knit__submit_payload pl = {bytes, len, NULL, KNIT__PAY_INLINE, false};
        return knit__submit(h, fn, NULL, &pl, out);
    }
    if (fn == NULL) return knit__fail(KNIT_EINVAL, "task function is NULL");
    int rc = knit__pool_enter(h, false);
    if (rc < 0) return rc;
    struct knit__pool *p = h->p;
    void *mem;
    rc = knit__arena_take(h, p, len, &mem);
    if (rc < 0) {
        knit__pool_exit(h);
        return rc;
    }
    memcpy(mem, bytes, len);
    knit_buf b = {mem, len, knit__payload_arena_free, p->arena};
    struct knit__submit_payload pl = {NULL, len, &b, KNIT__PAY_ARENA, false};
    rc = knit__submit(h, fn, NULL, &pl, out);
    if (rc < 0) knit__arena_free(p->arena, mem);
    knit__pool_exit(h);
    return rc;
}

int knit_submit_buf(knit_pool *h, knit_fn fn, knit_buf *buf, knit_future **out) {
    if (out != NULL) *out = NULL;
    if (buf == NULL) return knit__fail(KNIT_EINVAL, "knit_submit_buf: buf is NULL");
    if (buf->data == NULL && buf->len > 0)
        return knit__fail(KNIT_EINVAL,
                          "knit_submit_buf: data is NULL with len=%zu", buf->len);
    if (h == NULL) return knit__fail(KNIT_EINVAL, "pool is NULL");
    int rc = knit__pool_enter(h, true);
    if (rc < 0) return rc;
    size_t max = h->p->max_payload;
    bool binary = buf->free_fn == knit__payload_arena_free;
    if (binary && buf->free_ctx != h->p->arena) {
        knit__pool_exit(h);
        return knit__fail(KNIT_EINVAL,
                          "knit_submit_buf: arena buffer of another pool");
    }
    knit__pool_exit(h);
    if (buf->len > max)
        return knit__fail(KNIT_E2BIG, "payload of %zu bytes is over max_payload=%zu",
                          buf->len, max);
    struct knit__submit_payload pl = {NULL, buf->len, buf,
                                      binary ? KNIT__PAY_BINARY : KNIT__PAY_MOVED,
                                      false};
    rc = knit__submit(h, fn, NULL, &pl, out);
    if (rc == 0) memset(buf, 0, sizeof *buf); /* moved */
    return rc;
}

/* ---- inside a task ---- */

/* A frame child (knit_fork) carries no payload of its own: its future
 * field is its root task's. */
static bool knit__frame_child(const knit_task *task, const char *fn) {
    if (!knit__task_is_frame_child(task)) return false;
    knit__fail(KNIT_EINVAL, "%s: not in a forked (knit_fork) child: it has "
                            "no payload; pass data through its arg",
               fn);
    return true;
}

const void *knit_task_bytes(const knit_task *task, size_t *len) {
    if (task == NULL || knit__frame_child(task, "knit_task_bytes") ||
        task->future->in_kind == KNIT__PAY_NONE) {
        if (len != NULL) *len = 0;
        return NULL;
    }
    struct knit__future_in *fi = knit__fin(task->future);
    if (len != NULL) *len = fi->in.len;
    return fi->in.data;
}

knit_buf knit_task_take_buf(knit_task *task) {
    knit_buf b = {NULL, 0, NULL, NULL};
    if (task == NULL || knit__frame_child(task, "knit_task_take_buf")) return b;
    knit_future *f = task->future;
    if (f->in_kind == KNIT__PAY_NONE) return b;
    knit_buf *in = &knit__fin(f)->in;
    if (f->in_kind == KNIT__PAY_INLINE) {
        /* The inline area dies with the future: hand out a copy. */
        void *copy = knit__malloc(in->len ? in->len : 1);
        if (copy == NULL) {
            knit__fail(KNIT_ENOMEM, "knit_task_take_buf: no memory for %zu bytes",
                       in->len);
            return b;
        }
        memcpy(copy, in->data, in->len);
        b = knit_buf_malloced(copy, in->len);
    } else {
        b = *in;
    }
    memset(in, 0, sizeof *in);
    f->in_kind = KNIT__PAY_NONE;
    return b;
}

int knit_task_return_buf(knit_task *task, knit_buf *buf) {
    if (task == NULL || buf == NULL)
        return knit__fail(KNIT_EINVAL, "knit_task_return_buf: NULL argument");
    if (knit__frame_child(task, "knit_task_return_buf")) return KNIT_EINVAL;
    knit_future *f = task->future;
    if (atomic_load_explicit(&f->out_state, memory_order_relaxed) != KNIT__OUT_NONE)
        return knit__fail(KNIT_EALREADY,
                          "knit_task_return_buf: the task already returned a buffer");
    f->out = *buf;
    /* Relaxed: the future's DONE store (release) publishes out to takers. */
    atomic_store_explicit(&f->out_state, KNIT__OUT_SET, memory_order_relaxed);
    memset(buf, 0, sizeof *buf);
    return 0;
}

static int knit__take_out(knit_future *f, knit_buf *out) {
    uint8_t expect = KNIT__OUT_SET;
    /* One exchange decides the single taker. */
    if (!atomic_compare_exchange_strong_explicit(&f->out_state, &expect,
                                                 KNIT__OUT_TAKEN,
                                                 memory_order_acq_rel,
                                                 memory_order_acquire)) {
        if (expect == KNIT__OUT_TAKEN)
            return knit__fail(KNIT_EALREADY, "the returned buffer was already taken");
        return knit__fail(KNIT_ENOENT, "the task returned no buffer");
    }
    *out = f->out;
    memset(&f->out, 0, sizeof f->out);
    return 0;
}

int knit_future_take_buf(knit_future *f, knit_buf *out) {
    if (f == NULL || out == NULL)
        return knit__fail(KNIT_EINVAL, "knit_future_take_buf: NULL argument");
    if (!knit_future_done(f))
        return knit__fail(KNIT_EBUSY, "knit_future_take_buf: not settled yet");
    return knit__take_out(f, out);
}

int knit_task_antecedent_buf(knit_task *task, knit_buf *out) {
    if (task == NULL || out == NULL || knit__task_is_frame_child(task) ||
        !task->future->chained)
        return knit__fail(KNIT_EINVAL, "knit_task_antecedent_buf: not in a continuation");
    return knit__take_out(task->future->antecedent, out);
}
