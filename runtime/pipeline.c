/* Pipelines: items (knit_bufs) flow from an input function through
 * serial-in-order, serial and parallel stages, on the pool.
 *
 * The driver (the thread in knit_pipeline_run) calls the input function,
 * one item at a time, while fewer than max_in_flight items are in flight,
 * and submits a task per item, or, when every worker already has an item
 * in flight, runs the item's stages itself. An item task runs them in
 * turn: a parallel stage right there; a serial stage through the stage's
 * queue. A serial stage has one drainer at a time (`busy`): an item that
 * arrives while another drains is left in the queue for the drainer, which
 * runs the stage on every item it can take (for serial-in-order only the
 * item whose seq is `next_seq`) and sends each on to the next stage as a
 * new task. A serial-in-order queue is a ring of max_in_flight slots
 * indexed by seq: every item from next_seq up to the newest waiting one is
 * still in flight, so their seqs span fewer than max_in_flight and never
 * share a slot.
 *
 * Stopping (a failure or knit_pipeline_cancel) sets `stopping`; the input
 * is not called again and items still in flight run no more stage
 * functions, but still pass through every stage's queue (so in-order
 * stages never wait for a seq that will not come), and the last step
 * frees whatever buffer the item holds: each item is freed exactly once.
 *
 * With KNIT_PIPELINE_INPUT_IN_TASKS the input runs in pool tasks instead
 * (oneTBB's way): one input task exists at a time (`in_state`, under the
 * pipeline lock). It calls the input once; with an item and room for
 * another it submits the next input task first, so another worker reads
 * the next item meanwhile, then runs the item's stages itself while the
 * item is still in its cache. Without room it leaves the input IDLE, and
 * the finish that makes room submits the next input task. When a submit
 * fails (the pool shutting down, no memory) the input becomes DRIVER: the
 * thread in knit_pipeline_run calls it, in its own loop (never recursing
 * through the finishes that would otherwise chain input after input).
 *
 * Returning: knit_pipeline_run waits until no item is in flight AND no
 * item or input task is still running (`active`) or queued (`in_state`
 * QUEUED): the task that finishes the last
 * item may still be inside a stage's drain loop, touching the queue, and
 * the caller may destroy the pipeline as soon as run returns. A task
 * counts itself in `active` before it can finish any item and leaves it
 * under the pipeline lock as the very last thing it does.
 *
 * Lock rules: the pipeline lock guards the item free list, in_flight, the
 * first failure and the driver's condition; a stage's lock guards its
 * queue. No thread holds both, and none holds either while running a
 * stage or the input function.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "payload/payload.h"
#include "base/error.h"
#include "runtime/pool.h"

#define KNIT__MAX_STAGES 64u
#define KNIT__MAX_IN_FLIGHT 65536u

struct knit__item {
    struct knit_pipeline *pl;
    uint64_t seq;
    unsigned stage;  /* the next stage to run */
    bool dropped;    /* stage functions skipped (the pipeline stopped) */
    knit_buf buf;
    struct knit__item *next; /* free list; serial queue */
};

struct knit__stage_q {
    pthread_mutex_t mu;
    bool busy;                  /* a drainer is at work */
    uint64_t next_seq;          /* serial-in-order: the seq to run next */
    struct knit__item **ring;   /* serial-in-order: by seq % cap */
    struct knit__item *head, *tail; /* serial: FIFO */
};

/* What the driver (the thread in knit_pipeline_run) sleeps on cv for. */
enum { KNIT__DRV_AWAKE, KNIT__DRV_ROOM, KNIT__DRV_END };

/* KNIT_PIPELINE_INPUT_IN_TASKS: where the input is (pipeline lock). */
enum knit__input_state {
    KNIT__IN_IDLE,   /* not queued: waits for room (or the pipeline ended) */
    KNIT__IN_QUEUED, /* one input task is submitted or running */
    KNIT__IN_DRIVER, /* a submit failed: knit_pipeline_run calls it next */
    KNIT__IN_DONE,   /* the input returned 0 or < 0, or the pipeline stopped */
};

struct knit_pipeline {
    knit_pool *pool;
    knit_input_fn input;
    void *input_ctx;
    unsigned flags; /* KNIT_PIPELINE_* */
    knit_stage stages[KNIT__MAX_STAGES];
    struct knit__stage_q q[KNIT__MAX_STAGES];
    size_t nstages, cap;
    struct knit__item *items; /* cap of them */
    bool ran;

    _Atomic int stopping;
    pthread_mutex_t mu; /* the pipeline lock */
    pthread_cond_t cv;  /* the driver sleeps here (see knit__pl_poke) */
    int driver_waits;   /* KNIT__DRV_*: what the driver sleeps for */
    struct knit__item *free_items;
    size_t in_flight;
    _Atomic size_t active; /* item and input tasks running ("Returning") */
    enum knit__input_state in_state; /* INPUT_IN_TASKS only */
    uint64_t next_seq;               /* INPUT_IN_TASKS: the next item's seq */
    int code;           /* the first failure */
    char msg[512];
    knit_pipeline_stats stats;
    struct knit__pool *tlp; /* the pool, if it keeps a timeline; else NULL */
    uint32_t tl_id;         /* this pipeline's number in the timeline */
};

/* What the driver waits for (pipeline lock held): room for another item
 * (`for_room`), else the end: nothing in flight, running or queued; with
 * INPUT_IN_TASKS also an input the driver must call (DRIVER). */
static bool knit__pl_ready(struct knit_pipeline *pl, bool for_room) {
    if (for_room)
        return pl->in_flight < pl->cap ||
               atomic_load_explicit(&pl->stopping, memory_order_acquire);
    return pl->in_state == KNIT__IN_DRIVER ||
           (pl->in_flight == 0 && pl->in_state != KNIT__IN_QUEUED &&
            /* relaxed: changed under the pipeline lock, which we hold */
            atomic_load_explicit(&pl->active, memory_order_relaxed) == 0);
}

/* Something the driver may wait for changed (pipeline lock held). It is
 * woken only when what it sleeps for holds now: a wake-up on every finish
 * cost two context switches per item onto a core the workers need. There
 * is one driver, so a signal is enough. */
static void knit__pl_poke(struct knit_pipeline *pl) {
    if (pl->driver_waits != KNIT__DRV_AWAKE &&
        knit__pl_ready(pl, pl->driver_waits == KNIT__DRV_ROOM))
        pthread_cond_signal(&pl->cv);
}

static void knit__pl_fail(struct knit_pipeline *pl, int code, const char *where,
                          uint64_t seq) {
    char text[400];
    snprintf(text, sizeof text, "%s", knit_last_error());
    pthread_mutex_lock(&pl->mu);
    if (pl->code == 0) {
        pl->code = code;
        snprintf(pl->msg, sizeof pl->msg, "%s (item %llu): %s", where,
                 (unsigned long long)seq, text);
    }
    pthread_mutex_unlock(&pl->mu);
    /* release: the failure is recorded before anyone acts on stopping. */
    atomic_store_explicit(&pl->stopping, 1, memory_order_release);
}

static void knit__input_schedule(struct knit_pipeline *pl);

static void knit__item_finish(struct knit__item *it) {
    struct knit_pipeline *pl = it->pl;
    knit_buf_free(&it->buf);
    pthread_mutex_lock(&pl->mu);
    if (it->dropped)
        pl->stats.dropped++;
    else
        pl->stats.completed++;
    it->next = pl->free_items;
    pl->free_items = it;
    pl->in_flight--;
    if (pl->tlp != NULL)
        knit__tl_self(pl->tlp, KNIT__TL_INFLIGHT, -1, pl->in_flight, pl->tl_id, 0);
    /* INPUT_IN_TASKS: the input waited for this room. */
    bool resume = pl->in_state == KNIT__IN_IDLE &&
                  (pl->flags & KNIT_PIPELINE_INPUT_IN_TASKS) &&
                  !atomic_load_explicit(&pl->stopping, memory_order_acquire);
    if (resume) pl->in_state = KNIT__IN_QUEUED;
    knit__pl_poke(pl);
    pthread_mutex_unlock(&pl->mu);
    if (resume) knit__input_schedule(pl);
}

static void knit__item_advance(struct knit__item *it);

/* What every pipeline task (an item's, the input's) does around its work:
 * it runs even when the pool cancels (always_run), so every item is still
 * freed, and a pool cancel stops the pipeline like knit_pipeline_cancel;
 * it counts itself in `active` until it is done with the pipeline. */
static void knit__pl_task(knit_task *task, struct knit_pipeline *pl,
                          const char *label, void (*work)(void *), void *arg) {
    knit_task_label(task, label);
    if (knit_task_cancelled(task)) knit_pipeline_cancel(pl);
    /* Relaxed: this task finishes no item before this increment, and the
     * driver reads `active` under the pipeline lock, which every finish
     * takes after it. */
    atomic_fetch_add_explicit(&pl->active, 1, memory_order_relaxed);
    work(arg);
    pthread_mutex_lock(&pl->mu);
    atomic_fetch_sub_explicit(&pl->active, 1, memory_order_relaxed);
    knit__pl_poke(pl);
    pthread_mutex_unlock(&pl->mu);
}

/* Submits one of the pipeline's tasks: always_run, no future. 0, or the
 * submit's failure (the caller then does the work another way). */
static int knit__pl_submit(struct knit_pipeline *pl, knit_fn fn, void *arg) {
    struct knit__submit_payload always = {NULL, 0, NULL, KNIT__PAY_NONE, true};
    return knit__submit(pl->pool, fn, arg, &always, NULL);
}

static void knit__item_work(void *it) { knit__item_advance(it); }

static void *knit__item_task(knit_task *task, void *arg) {
    struct knit__item *it = arg;
    /* it->pl read first: `it` may be reused once advanced. */
    knit__pl_task(task, it->pl, "pipeline item", knit__item_work, it);
    return NULL;
}

/* Sends the item on to its next stage as a task (inline if the pool will
 * not take one: progress never depends on the bound). */
static void knit__item_dispatch(struct knit__item *it) {
    if (it->stage == it->pl->nstages) {
        knit__item_finish(it);
        return;
    }
    if (knit__pl_submit(it->pl, knit__item_task, it) != 0) knit__item_advance(it);
}

static void knit__run_stage(struct knit__item *it, unsigned k) {
    struct knit_pipeline *pl = it->pl;
    if (!it->dropped &&
        atomic_load_explicit(&pl->stopping, memory_order_acquire))
        it->dropped = true;
    if (it->dropped) return;
    int64_t t0 = pl->tlp != NULL ? knit__now_ns() : 0;
    int rc = pl->stages[k].fn(pl->stages[k].ctx, it->seq, &it->buf);
    if (pl->tlp != NULL)
        knit__tl_self(pl->tlp, KNIT__TL_STAGE, t0, it->seq, pl->tl_id, k);
    if (rc < 0) {
        char where[32];
        snprintf(where, sizeof where, "stage %u", k);
        knit__pl_fail(pl, rc, where, it->seq);
        it->dropped = true;
    }
}

/* Takes the next item a serial stage may run, or NULL (stage lock held). */
static struct knit__item *knit__q_pick(struct knit_pipeline *pl, unsigned k) {
    struct knit__stage_q *q = &pl->q[k];
    if (pl->stages[k].mode == KNIT_STAGE_SERIAL_IN_ORDER) {
        struct knit__item **slot = &q->ring[q->next_seq % pl->cap];
        struct knit__item *it = *slot;
        if (it == NULL || it->seq != q->next_seq) return NULL;
        *slot = NULL;
        q->next_seq++;
        return it;
    }
    struct knit__item *it = q->head;
    if (it != NULL) {
        q->head = it->next;
        if (q->head == NULL) q->tail = NULL;
    }
    return it;
}

static void knit__item_advance(struct knit__item *it) {
    struct knit_pipeline *pl = it->pl;
    while (it->stage < pl->nstages) {
        unsigned k = it->stage;
        if (pl->stages[k].mode == KNIT_STAGE_PARALLEL) {
            knit__run_stage(it, k);
            it->stage++;
            continue;
        }
        struct knit__stage_q *q = &pl->q[k];
        pthread_mutex_lock(&q->mu);
        if (pl->stages[k].mode == KNIT_STAGE_SERIAL_IN_ORDER) {
            q->ring[it->seq % pl->cap] = it;
        } else {
            it->next = NULL;
            if (q->tail) q->tail->next = it; else q->head = it;
            q->tail = it;
        }
        if (q->busy) { /* the drainer will take it */
            pthread_mutex_unlock(&q->mu);
            return;
        }
        q->busy = true;
        for (;;) {
            struct knit__item *next = knit__q_pick(pl, k);
            if (next == NULL) break;
            pthread_mutex_unlock(&q->mu);
            knit__run_stage(next, k);
            next->stage = k + 1;
            knit__item_dispatch(next);
            pthread_mutex_lock(&q->mu);
        }
        q->busy = false;
        pthread_mutex_unlock(&q->mu);
        return;
    }
    knit__item_finish(it);
}

/* Takes a free item for the input to fill, its buffer empty (pipeline
 * lock held; there is room, so a free item exists). */
static struct knit__item *knit__item_take(struct knit_pipeline *pl) {
    struct knit__item *it = pl->free_items;
    pl->free_items = it->next;
    memset(&it->buf, 0, sizeof it->buf);
    return it;
}

/* The input produced `it` (pipeline lock held): it is in flight. */
static void knit__item_start(struct knit_pipeline *pl, struct knit__item *it,
                             uint64_t seq) {
    it->seq = seq;
    it->stage = 0;
    it->dropped = false;
    pl->in_flight++;
    if (pl->tlp != NULL)
        knit__tl_self(pl->tlp, KNIT__TL_INFLIGHT, -1, pl->in_flight, pl->tl_id, 0);
    pl->stats.items++;
    if (pl->in_flight > pl->stats.max_in_flight)
        pl->stats.max_in_flight = pl->in_flight;
}

/* The input returned rc <= 0 for `it` (pipeline lock held, released and
 * taken again): whatever it left in the buffer is freed, and a failure
 * recorded. */
static void knit__item_unused(struct knit_pipeline *pl, struct knit__item *it,
                              int rc, uint64_t seq) {
    knit_buf_free(&it->buf);
    it->next = pl->free_items;
    pl->free_items = it;
    if (rc < 0) {
        pthread_mutex_unlock(&pl->mu);
        knit__pl_fail(pl, rc, "input", seq);
        pthread_mutex_lock(&pl->mu);
    }
}

/* INPUT_IN_TASKS: one call of the input, by the one input task (or the
 * driver, in_state DRIVER), then the item's stages right here. */
static void knit__input_step(struct knit_pipeline *pl) {
    pthread_mutex_lock(&pl->mu);
    if (atomic_load_explicit(&pl->stopping, memory_order_acquire)) {
        pl->in_state = KNIT__IN_DONE;
        knit__pl_poke(pl);
        pthread_mutex_unlock(&pl->mu);
        return;
    }
    struct knit__item *it = knit__item_take(pl);
    uint64_t seq = pl->next_seq;
    pthread_mutex_unlock(&pl->mu);
    /* The pipeline lock's release (here) and acquire (by the next input
     * call, on whichever thread) order the input's own state from call to
     * call, as if one thread made them all. */
    int rc = pl->input(pl->input_ctx, &it->buf);
    pthread_mutex_lock(&pl->mu);
    if (rc <= 0) {
        knit__item_unused(pl, it, rc, seq);
        pl->in_state = KNIT__IN_DONE;
        knit__pl_poke(pl);
        pthread_mutex_unlock(&pl->mu);
        return;
    }
    pl->next_seq = seq + 1;
    knit__item_start(pl, it, seq);
    bool again = pl->in_flight < pl->cap &&
                 !atomic_load_explicit(&pl->stopping, memory_order_acquire);
    pl->in_state = again ? KNIT__IN_QUEUED : KNIT__IN_IDLE;
    pthread_mutex_unlock(&pl->mu);
    if (again) knit__input_schedule(pl);
    knit__item_advance(it);
}

static void knit__input_work(void *pl) { knit__input_step(pl); }

static void *knit__input_task(knit_task *task, void *arg) {
    knit__pl_task(task, arg, "pipeline input", knit__input_work, arg);
    return NULL;
}

/* Submits the input task (in_state is QUEUED, set by the caller under the
 * lock). If the pool takes no task, the driver calls the input instead. */
static void knit__input_schedule(struct knit_pipeline *pl) {
    if (knit__pl_submit(pl, knit__input_task, pl) == 0) return;
    pthread_mutex_lock(&pl->mu);
    pl->in_state = KNIT__IN_DRIVER;
    knit__pl_poke(pl);
    pthread_mutex_unlock(&pl->mu);
}

int knit_pipeline_create(knit_pool *pool, const knit_pipeline_options *o,
                         knit_pipeline **out) {
    if (out == NULL) return knit__fail(KNIT_EINVAL, "pipeline: out is NULL");
    *out = NULL;
    if (pool == NULL || o == NULL)
        return knit__fail(KNIT_EINVAL, "pipeline: NULL %s", pool ? "options" : "pool");
    /* A program built before `flags` existed passes the shorter size. */
    size_t before_flags = offsetof(knit_pipeline_options, flags);
    if (o->size != sizeof(knit_pipeline_options) && o->size != before_flags)
        return knit__fail(KNIT_EINVAL,
                          "pipeline options.size=%zu, expected %zu: initialise "
                          "with KNIT_PIPELINE_OPTIONS_INIT",
                          o->size, sizeof(knit_pipeline_options));
    unsigned flags = o->size > before_flags ? o->flags : 0;
    if (flags & ~KNIT_PIPELINE_INPUT_IN_TASKS)
        return knit__fail(KNIT_EINVAL, "pipeline: unknown flags 0x%x",
                          flags & ~KNIT_PIPELINE_INPUT_IN_TASKS);
    if (o->input == NULL) return knit__fail(KNIT_EINVAL, "pipeline: no input function");
    if (o->stages == NULL || o->nstages == 0 || o->nstages > KNIT__MAX_STAGES)
        return knit__fail(KNIT_EINVAL, "pipeline: nstages=%zu must be 1..%u%s",
                          o->nstages, KNIT__MAX_STAGES,
                          o->stages == NULL ? " (stages is NULL)" : "");
    for (size_t k = 0; k < o->nstages; k++) {
        if (o->stages[k].fn == NULL)
            return knit__fail(KNIT_EINVAL, "pipeline: stage %zu has no function", k);
        if (o->stages[k].mode != KNIT_STAGE_SERIAL_IN_ORDER &&
            o->stages[k].mode != KNIT_STAGE_SERIAL &&
            o->stages[k].mode != KNIT_STAGE_PARALLEL)
            return knit__fail(KNIT_EINVAL, "pipeline: stage %zu has mode %d", k,
                              (int)o->stages[k].mode);
    }
    int rc = knit__pool_enter(pool, false);
    if (rc < 0) return rc;
    size_t cap = o->max_in_flight ? o->max_in_flight : 4u * pool->p->threads;
    struct knit__pool *tlp = KNIT__TL_ON(pool->p) ? pool->p : NULL;
    /* relaxed: only a unique number is needed. */
    uint32_t tl_id = tlp != NULL ? atomic_fetch_add_explicit(
                                       &tlp->tl->next_pipeline, 1,
                                       memory_order_relaxed)
                                 : 0;
    knit__pool_exit(pool);
    if (cap > KNIT__MAX_IN_FLIGHT)
        return knit__fail(KNIT_EINVAL, "pipeline: max_in_flight=%zu is over %u",
                          cap, KNIT__MAX_IN_FLIGHT);
    struct knit_pipeline *pl = knit__calloc(1, sizeof *pl);
    struct knit__item *items = knit__calloc(cap, sizeof *items);
    if (pl == NULL || items == NULL) {
        free(pl);
        free(items);
        return knit__fail(KNIT_ENOMEM, "pipeline: no memory");
    }
    pl->pool = pool;
    pl->input = o->input;
    pl->input_ctx = o->input_ctx;
    pl->flags = flags;
    pl->in_state = KNIT__IN_IDLE;
    pl->nstages = o->nstages;
    pl->cap = cap;
    pl->items = items;
    pl->tlp = tlp;
    pl->tl_id = tl_id;
    memcpy(pl->stages, o->stages, o->nstages * sizeof *o->stages);
    for (size_t i = 0; i < cap; i++) {
        items[i].pl = pl;
        items[i].next = pl->free_items;
        pl->free_items = &items[i];
    }
    for (size_t k = 0; k < o->nstages; k++) {
        pthread_mutex_init(&pl->q[k].mu, NULL);
        if (o->stages[k].mode == KNIT_STAGE_SERIAL_IN_ORDER) {
            pl->q[k].ring = knit__calloc(cap, sizeof *pl->q[k].ring);
            if (pl->q[k].ring == NULL) {
                knit_pipeline_destroy(pl);
                return knit__fail(KNIT_ENOMEM, "pipeline: no memory");
            }
        }
    }
    atomic_init(&pl->stopping, 0);
    atomic_init(&pl->active, 0);
    pthread_mutex_init(&pl->mu, NULL);
    pthread_cond_init(&pl->cv, NULL);
    *out = pl;
    return 0;
}

/* Waits (lock held, and held on return) until knit__pl_ready. A consumer
 * of the pool (a task) runs other tasks instead of blocking. */
static void knit__pl_wait(struct knit_pipeline *pl, bool for_room) {
    struct knit__tls *tls = knit__tls_get();
    struct knit__pool *p = pl->pool->p;
    bool consumer = tls->cpool == p;
    /* The timeline: how long the input waited for room (pipeline full). */
    int64_t stall = -1;
    for (;;) {
        if (knit__pl_ready(pl, for_room)) {
            if (stall >= 0) knit__tl_self(p, KNIT__TL_STALL, stall, 0, pl->tl_id, 0);
            return;
        }
        if (for_room && stall < 0 && pl->tlp != NULL) stall = knit__now_ns();
        if (!consumer) {
            pl->driver_waits = for_room ? KNIT__DRV_ROOM : KNIT__DRV_END;
            pthread_cond_wait(&pl->cv, &pl->mu);
            pl->driver_waits = KNIT__DRV_AWAKE;
            continue;
        }
        pthread_mutex_unlock(&pl->mu);
        struct knit__producer *rec = knit__producer_get(pl->pool, p);
        if (rec == NULL || !knit__pool_run_some(p, tls->consumer, tls->worker, rec))
            sched_yield();
        pthread_mutex_lock(&pl->mu);
    }
}

int knit_pipeline_run(knit_pipeline *pl) {
    if (pl == NULL) return knit__fail(KNIT_EINVAL, "pipeline is NULL");
    /* Held for the whole run: destroy waits for threads inside a call. */
    int entered = knit__pool_enter(pl->pool, false);
    if (entered < 0) return entered;
    pthread_mutex_lock(&pl->mu);
    if (pl->ran) {
        pthread_mutex_unlock(&pl->mu);
        knit__pool_exit(pl->pool);
        return knit__fail(KNIT_EALREADY, "pipeline: already run");
    }
    pl->ran = true;
    if (pl->flags & KNIT_PIPELINE_INPUT_IN_TASKS) {
        pl->in_state = KNIT__IN_QUEUED;
        pthread_mutex_unlock(&pl->mu);
        knit__input_schedule(pl);
        pthread_mutex_lock(&pl->mu);
        for (;;) {
            knit__pl_wait(pl, false);
            if (pl->in_state != KNIT__IN_DRIVER) break;
            /* The pool took no input task: call the input here. */
            pl->in_state = KNIT__IN_QUEUED;
            pthread_mutex_unlock(&pl->mu);
            knit__input_step(pl);
            pthread_mutex_lock(&pl->mu);
        }
    } else {
        for (uint64_t seq = 0;; seq++) {
            knit__pl_wait(pl, true);
            if (atomic_load_explicit(&pl->stopping, memory_order_acquire)) break;
            struct knit__item *it = knit__item_take(pl);
            pthread_mutex_unlock(&pl->mu);
            int rc = pl->input(pl->input_ctx, &it->buf);
            pthread_mutex_lock(&pl->mu);
            if (rc <= 0) {
                knit__item_unused(pl, it, rc, seq);
                break;
            }
            knit__item_start(pl, it, seq);
            /* With an item in flight for every worker already, this thread
             * runs the new item's stages itself, while the input's writes
             * are still in its cache: handing it over made every buffer
             * cross cores (the input's next fill of a slot took 3x as long,
             * invalidating the lines the hashing worker had read: perf and
             * per-call clocks). On the pipeline row: about +6% (README). */
            bool here = pl->in_flight > pl->pool->p->threads;
            pthread_mutex_unlock(&pl->mu);
            if (here)
                knit__item_advance(it);
            else
                knit__item_dispatch(it);
            pthread_mutex_lock(&pl->mu);
        }
        knit__pl_wait(pl, false);
    }
    int code = pl->code;
    char msg[sizeof pl->msg];
    memcpy(msg, pl->msg, sizeof msg);
    pthread_mutex_unlock(&pl->mu);
    knit__pool_exit(pl->pool);
    if (code != 0) return knit__fail(code, "%s", msg);
    return 0;
}

int knit_pipeline_cancel(knit_pipeline *pl) {
    if (pl == NULL) return knit__fail(KNIT_EINVAL, "pipeline is NULL");
    pthread_mutex_lock(&pl->mu);
    if (pl->code == 0) {
        pl->code = KNIT_ECANCELED;
        snprintf(pl->msg, sizeof pl->msg, "pipeline cancelled");
    }
    atomic_store_explicit(&pl->stopping, 1, memory_order_release);
    pthread_cond_signal(&pl->cv); /* the driver, whatever it waits for */
    pthread_mutex_unlock(&pl->mu);
    return 0;
}

int knit_pipeline_stats_get(const knit_pipeline *pl, knit_pipeline_stats *out) {
    if (pl == NULL || out == NULL)
        return knit__fail(KNIT_EINVAL, "pipeline stats: NULL argument");
    pthread_mutex_lock((pthread_mutex_t *)&pl->mu);
    *out = pl->stats;
    pthread_mutex_unlock((pthread_mutex_t *)&pl->mu);
    return 0;
}

void knit_pipeline_destroy(knit_pipeline *pl) {
    if (pl == NULL) return;
    for (size_t k = 0; k < pl->nstages; k++) {
        free(pl->q[k].ring);
        pthread_mutex_destroy(&pl->q[k].mu);
    }
    pthread_mutex_destroy(&pl->mu);
    pthread_cond_destroy(&pl->cv);
    free(pl->items);
    free(pl);
}
