/* Internal: the pool, its workers, producers and futures. C only.
 *
 * Who owns what
 * -------------
 *   knit_pool        the user's handle: a small tombstone that outlives the
 *                    pool (state + lock + pointer to the pool), so a call on
 *                    a destroyed pool answers KNIT_ESHUTDOWN instead of
 *                    touching freed memory. Kept on a global list.
 *   knit__pool       everything else; freed by knit_pool_destroy.
 *   knit__producer   one per (thread, pool): the carpets the thread publishes
 *                    into and its cache of free futures. Only its thread
 *                    touches it, except knit_pool_destroy (after the thread
 *                    left every knit call, see `busy`) and adoption of an
 *                    exited thread's record (under the pool lock).
 *   knit__worker     one per worker thread: its doorbell, its stats.
 *   knit_future      refcounted: one reference held by the lane that carries
 *                    the task (dropped by whoever claims the lane), one by
 *                    the user's handle (knit_future_release), one by each
 *                    continuation that follows it.
 *
 * Lock rules: the pool lock (knit_pool.lock) guards the producer list, the
 * carpet registry's growth, the futures' slab list and the global free
 * list of futures. A future's own spinlock guards its waiter and
 * continuation lists; it is never held while taking the pool lock.
 */
#ifndef KNIT_RUNTIME_POOL_H
#define KNIT_RUNTIME_POOL_H

#include <pthread.h>
#include <assert.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "knit/knit.h"
#include "runtime/carpet.h"
#include "runtime/deque.h"
#include "runtime/doorbell.h"
#include "runtime/timeline.h"
#include "runtime/frame.h"

#define KNIT__LINE 64
/* Consumer ids reserved for threads that help while they await. */
#define KNIT__HELPERS 2u
#define KNIT__MAX_PENDING_LIMIT (1u << 20)
#define KNIT__DEFAULT_MAX_PENDING 65536u
/* Submit credits (runtime/entry.c): at most KNIT__CREDITS_MAX per entry
 * slot (the slot word's 5 low bits), and only with max_pending >=
 * KNIT__CREDIT_MIN_BOUND. */
#define KNIT__CREDITS_MAX 32u
#define KNIT__CREDIT_MIN_BOUND 2048u
#define KNIT__DEFAULT_SPIN 64u
/* An idle spinner's grace for another thread's publication, in cpu
 * relaxes: about 0.5 us here (a pause is 20 ns on this EPYC;
 * 50 gave the same rtt, and a task nobody awaits starts 0.5 us later). */
#define KNIT__GRACE_PAUSES 25u
/* Empty scans before a spinner gives a grace: a worker between the
 * lanes of a stream finds the next one within a scan or two. */
#define KNIT__GRACE_IDLE 4u
/* An idle spinner's relaxes between scans once another thread took the
 * lanes of its grace: about 2 us. */
#define KNIT__PACE_PAUSES 100u
#define KNIT__DEFAULT_AWAIT_SPIN_NS 50000
#define KNIT__DEFAULT_ARENA ((size_t)64 << 20)
#define KNIT__PARKED_WORDS (KNIT_MAX_THREADS / 64)
/* Futures in a thread's loaded magazine of a size class
 * (knit__producer.fc[].cache); it keeps
 * one more full magazine (spare) before it gives one back to the pool. */
#define KNIT__FUTURE_CACHE 512u
/* Futures come from slabs, mappings of fresh zero pages (so a free
 * future's line 1 is at its defaults without a memset): the first is
 * KNIT__SLAB_FIRST bytes, each next one twice the last, up to
 * KNIT__SLAB_MAX (runtime/future.c: knit__slab_map). */
#define KNIT__SLAB_FIRST ((size_t)64 << 10)
#define KNIT__SLAB_MAX ((size_t)2 << 20)
/* Tasks nested on one stack by helping (await, join) before a wait stops
 * running other tasks and only waits. */
#define KNIT__MAX_DEPTH 1000u

/* Handle states. */
enum {
    KNIT__POOL_LIVE = 1,
    KNIT__POOL_DRAINING = 2,   /* outside submits refused; tasks still run */
    KNIT__POOL_CANCELLING = 3, /* unstarted tasks settle as cancelled */
    KNIT__POOL_STOPPING = 4,   /* workers exit */
    KNIT__POOL_DEAD = 5,       /* freed; the handle is a tombstone */
};

/* In a future's refs while the user holds its handle (with the handle's
 * own reference in the count). */
#define KNIT__REFS_USER (1u << 31)

/* Future states. */
enum {
    KNIT__F_PENDING = 0, /* in a lane or waiting for its antecedent */
    KNIT__F_RUNNING = 1, /* taken: running, or being cancelled */
    KNIT__F_DONE = 2,    /* settled: code/result are final */
};

struct knit__pool;

/* A thread waiting for a future: lives on that thread's stack. */
struct knit__waiter {
    knit__doorbell *bell;       /* rung when the future settles */
    bool linked;                /* the waiter put it in the list */
    bool bell_in_pool;          /* a worker's bell: outlives the record */
    struct knit__waiter *next;  /* in the future's list (future lock) */
    _Atomic uint32_t released;  /* the settler is done with this record */
};

/* Laid out by use: a future is written by its submitter and read by the
 * worker that runs it and the thread that awaits it, each of them on
 * another core, so every line it touches is a miss. Line 0 holds all that
 * a submit, a run, a settle, an await and a release of a task that
 * succeeded read or write (with 1M futures in flight, the await loop of
 * throughput-1 took two misses per future when code and pool were on
 * line 1). Line 1 holds what only a failure, a waiter, a continuation, a
 * chain or a promise reads, each behind a flag on line 0: message and
 * task_code (code != 0), waiters and conts (watched), antecedent
 * (chained), the promise list (promise). A free future keeps line 1 at its
 * defaults (NULL message, waiters, conts and antecedent, promise_linked
 * false; a slab's pages are zero when mapped, and the free and the settle
 * put back what they used), so an allocation writes line 0 only. Line 2
 * holds the buffer a task returned (behind out_state). A future that
 * carries an input (knit_submit_copy, knit_submit_buf) is a
 * struct knit__future_in, the same three lines and the input after them:
 * futures come in two sizes (192 and 320 bytes), from caches of their
 * own, so a plain future does not carry 128 bytes it never uses (a
 * million futures in flight took 320 MiB). */
struct knit_future {
    /* ---- line 0: state, the task, the outcome of a success ---- */
    alignas(KNIT__LINE) _Atomic uint32_t state; /* PENDING -> RUNNING -> DONE */
    /* See "Who owns what"; the user's handle is one reference and
     * KNIT__REFS_USER besides, so a release is one RMW. */
    _Atomic uint32_t refs;
    int code;                /* 0, KNIT_ETASK, KNIT_ECANCELED, KNIT_ECLOSED, ... */
    _Atomic uint8_t lock;    /* spinlock: waiters, conts */
    _Atomic uint8_t cancel;  /* a cancel was requested while running */
    _Atomic uint8_t watched; /* a waiter or continuation was registered */
    _Atomic uint8_t out_state;     /* KNIT__OUT_NONE / SET / TAKEN */
    uint8_t in_kind;               /* KNIT__PAY_*: `in` is valid unless NONE */
    bool always_run;               /* see knit__submit_payload */
    /* Pushed onto a consumer's deque from inside a task and counted in
     * the pusher's `pushed` rather than in `live` (see knit__pool.counts);
     * its settle is counted in the settler's `child_settled`. */
    bool counted_local;
    /* A promise (runtime/promise.c): settled by knit_promise_resolve /
     * reject, never by a task. While unsettled it is on the pool's
     * `promises` list (pool lock) and holds one reference of its own. */
    bool promise;
    bool chained; /* a continuation: `antecedent` is set (knit_future_then) */
    /* A struct knit__future_in (its size class; set when the slab is
     * carved, never changed). */
    bool with_in;
    knit_fn fn;   /* the task (a continuation's: until scheduled) */
    void *arg;
    /* A group member's record (runtime/group.c), not a future: no user
     * handle, no waiters, no settle; the task runs and is counted in
     * this group. NULL for a future. Written before the publication. */
    struct knit_group *group;
    union {
        /* Written by the settler before state becomes DONE (release),
         * with code; read after an acquire load sees DONE. */
        void *result;
        knit_future *free_next; /* while in a free list */
    };
    struct knit__pool *pool;
    /* ---- line 1: failures, waiters, chains, promises (see above) ---- */
    alignas(KNIT__LINE) int task_code; /* the code given to knit_task_fail */
    bool promise_linked;          /* on the promise list (pool lock) */
    char *message;     /* knit_task_fail's text (malloc), or NULL */
    struct knit__waiter *waiters; /* future lock */
    knit_future *conts;           /* continuations to schedule (lock) */
    knit_future *cont_next;       /* link in the antecedent's conts */
    knit_future *antecedent;      /* holds a reference (chained) */
    union {
        /* An unsettled promise: the list (pool lock), while linked. */
        struct {
            knit_future *promise_prev, *promise_next;
        };
        /* The first future of a free magazine (never a promise). */
        struct {
            knit_future *mag_next; /* the next magazine */
            unsigned mag_count;    /* its length */
        };
    };
    /* ---- line 2: the buffer the task returned ---- */
    /* The payload (payload/payload.h): the buffer the task returned,
     * owned by the future until taken (valid while out_state is SET). */
    alignas(KNIT__LINE) knit_buf out;
};

static_assert(offsetof(struct knit_future, out) == 2 * KNIT__LINE &&
                  sizeof(struct knit_future) == 3 * KNIT__LINE,
              "a future without an input is three lines: line 1 holds the failure, "
              "waiter, chain and promise fields");

/* A future with an input (with_in): `in` is the task's input, owned by
 * the runtime until the task takes it or the future settles (valid while
 * in_kind is not NONE). */
struct knit__future_in {
    knit_future f;
    knit_buf in;
    /* Aligned like malloc's memory: a task may read a struct it was
     * given as inline bytes in place. */
    alignas(max_align_t) unsigned char inline_data[KNIT_INLINE_BYTES];
};

/* f's input part; f->with_in. */
static inline struct knit__future_in *knit__fin(knit_future *f) {
    assert(f->with_in);
    return (struct knit__future_in *)(void *)f;
}

/* The futures' two size classes (knit__future_alloc). */
enum { KNIT__FC_PLAIN = 0, KNIT__FC_IN = 1, KNIT__FCLASSES = 2 };

/* The size class of a future with (or without) an input. */
static inline unsigned knit__fclass(bool with_in) { return with_in ? KNIT__FC_IN : KNIT__FC_PLAIN; }

static_assert(offsetof(struct knit_future, pool) + sizeof(void *) <= KNIT__LINE,
              "a future's line 0 holds state, refs, code, flags, fn, arg, group, "
              "result and pool");
static_assert(offsetof(struct knit_future, task_code) == KNIT__LINE &&
                  offsetof(struct knit_future, antecedent) + sizeof(void *) <=
                      2 * KNIT__LINE,
              "a future's line 1 holds the failure, the lists and the chain");


/* A thread's carpets can change hands without the thread's help: when
 * the pool has no carpet left for a submit, the submitter takes carpets
 * with free lanes from records whose owner is not publishing (idle
 * threads, exited ones). `hold` decides who may touch the list:
 *   0  free: nobody is using the record's carpets as their producer;
 *   1  the owner is publishing (knit__publish, CAS 0 -> 1);
 *   2  another thread, under the pool lock, takes carpets from it (CAS
 *      0 -> 2; it never waits for the owner, it skips a held record).
 * Whoever holds it sees everything the previous holder wrote (acquire
 * CAS, release store of 0), so a carpet's producer-private state passes
 * from one producer to the next and every carpet keeps one producer at a
 * time. */
#define KNIT__HOLD_FREE 0u
#define KNIT__HOLD_OWNER 1u
#define KNIT__HOLD_TAKER 2u
/* Carpets an idle thread keeps when another thread needs one (its next
 * burst starts without the pool lock); beyond these, its empty carpets go
 * back to the pool. */
#define KNIT__CARPET_RESERVE 2u
/* Carpets of its own a thread tries before it takes a spare or a new one
 * (knit__publish_held). */
#define KNIT__PROBES 4u

struct knit__producer {
    struct knit__pool *pool;
    alignas(KNIT__LINE) _Atomic uint32_t hold; /* see above */
    /* Carpets this thread publishes into. The array is allocated and
     * grown by the owner only (under hold and the pool lock); entries and
     * nmine change under hold. The owner's own claim loop (knit__find)
     * reads them without hold, relaxed: a stale entry is still a live
     * carpet, and consumers may claim from any carpet. */
    knit_carpet *_Atomic *mine;
    _Atomic uint32_t nmine;
    unsigned capmine, cur; /* under hold */
    /* Free futures (this thread only), in two magazines as Bonwick's
     * allocator keeps them: `cache` (allocated from, freed to) and a full
     * `spare`, so a thread whose allocs and frees alternate at a magazine's
     * edge (a worker making and recycling group members' records) never
     * takes the pool lock for either (see knit__future_free). */
    struct knit__fcache {
        knit_future *cache, *spare;
        unsigned ncache, nspare;
    } fc[KNIT__FCLASSES]; /* per size class */
    /* Futures this thread allocated minus those it freed (wraps: only the
     * sum over every record, taken when the pool is freed, means
     * anything). */
    uint64_t futures_out;
    int worker;           /* worker index, or -1 */
    bool orphaned;        /* its thread exited; adoptable (pool lock) */
    struct knit__producer *next; /* pool's list (pool lock) */
    /* Stats, written by the owner only. */
    _Atomic uint64_t submitted, helped, cancelled, skipped, failed;
    _Atomic uint64_t frames_stolen; /* by this thread while it helped */
    _Atomic uint64_t inlined; /* own futures' tasks run while awaiting */
};

/* A task group (knit_group_*, runtime/group.c): members are counted in
 * `live` (one RMW when submitted, one when finished); waiting is for
 * live == 0, through the same waiter records and doorbells as futures
 * (future.c: knit__wait). */
struct knit_group {
    knit_pool *pool; /* the handle: it outlives the pool */
    /* Members submitted and not finished. The finisher that brings it to
     * 0 rings the waiters (seq-cst RMW, then a seq-cst load of watched;
     * see future.c). */
    alignas(KNIT__LINE) _Atomic uint64_t live;
    /* knit_group_cancel was called. Read by every member before it runs:
     * on a line of its own, not on live's, which every submit and finish
     * writes (sharing it took 8-10% of throughput-1 in a group). */
    alignas(KNIT__LINE) _Atomic uint32_t cancelled;
    /* The first failure or cancel: 0 none, 1 being written, 2 written
     * (code, task_code, message final; release store). */
    _Atomic uint32_t outcome;
    int code;          /* KNIT_ETASK or KNIT_ECANCELED */
    int task_code;     /* the failing member's knit_task_fail code */
    char *message;     /* its text (malloc), or NULL */
    const char *reason; /* KNIT_ECANCELED: who cancelled (static text) */
    /* Waiters, as a future's: `lock` guards the list, `watched` (sticky)
     * says a waiter ever registered. */
    _Atomic uint8_t lock;
    _Atomic uint8_t watched;
    struct knit__waiter *waiters;
    /* Threads inside knit_group_wait or knit_group_cancel: destroy is
     * KNIT_EBUSY while any is. */
    _Atomic uint32_t users;
};

struct knit__worker {
    alignas(KNIT__LINE) knit__doorbell bell; /* its one sleeping place */
    alignas(KNIT__LINE) _Atomic uint64_t tasks_run, claims, lanes, lost,
        parks, wakes, cancelled, skipped, failed; /* owner-written */
    /* Subtasks this worker pushed onto its deque, and subtasks it settled
     * (from any deque): owner-written, monotonic; see knit__pool.counts. */
    alignas(KNIT__LINE) _Atomic uint64_t pushed, child_settled;
    _Atomic uint64_t frames_stolen; /* owner-written */
    pthread_t thread;
    unsigned id;
    unsigned scan; /* where the next scan of all carpets starts */
    uint64_t unsettled; /* settled here, not yet taken off `live` */
    /* Members of one group this worker finished and has not yet taken off
     * the group's `live` (owner only; see knit__group_drop_defer). */
    struct knit_group *drop_group;
    uint32_t drop_n;
    bool top_run; /* the loop is starting a task (knit__task_run takes it) */
    /* The grace an idle spinner gives a publication it finds (owner only;
     * see knit__worker_main): `idle_scan` while the loop's find follows
     * KNIT__GRACE_IDLE or more empty ones, `grace_hit` when that find
     * passed over a carpet with one pending lane (knit__grace_wanted),
     * `graced` once this idle spell's grace was given. */
    bool idle_scan, grace_hit, graced;
    unsigned pace; /* relaxes between idle scans: 1, or KNIT__PACE_PAUSES */
    struct knit__pool *pool;
    struct knit__producer *rec;
};

/* A mapping of `bytes` holding `count` futures; the first `carved` of
 * them were handed out (in magazines) and may be in use, the rest were
 * never touched. Pool lock. */
struct knit__slab {
    struct knit__slab *next;
    size_t bytes;
    size_t stride; /* a future's size in this slab (its class) */
    unsigned count, carved;
    alignas(KNIT__LINE) unsigned char f[]; /* count futures, stride apart */
};

struct knit__arena;

struct knit__pool {
    knit_pool *handle;
    struct knit__arena *arena; /* the payload arena (payload/arena.c) */
    size_t arena_bytes, max_payload;
    const knit_sched_ops *ops;
    knit_sched_params params; /* consumers = threads + helpers */
    unsigned threads, helpers;
    size_t max_pending;
    /* Units a submit takes from counts at a time when it has no credit
     * left (runtime/entry.c): 32 with max_pending >= 2048, else 1 (small
     * bounds stay exact). */
    unsigned credit_k;
    int backpressure;
    unsigned spin;
    unsigned max_spinners; /* idle workers that spin rather than park */
    int64_t await_spin_ns;
    knit_claim_trace_fn trace;
    void *trace_ctx;
    /* The timeline (runtime/timeline.h), or NULL when off: set at create,
     * constant until destroy, so every hook's test of it is predictable. */
    struct knit__timeline *tl;

    /* Two counters in one word, so a submit pays one RMW for both:
     * low 32 bits: pending, submitted and not started (<= max_pending);
     * high 32 bits: live, submitted and not settled (DRAIN waits for 0).
     * Workers subtract started tasks per claim and settled tasks in
     * batches (knit__worker.unsettled).
     *
     * Subtasks a worker pushes onto its own deque from inside a task are
     * not counted here (a shared RMW per push would bounce this line
     * between the workers on every fork): the worker counts them in its
     * own `pushed` and whoever settles one counts it in its own
     * `child_settled` (a thread that is not a worker uses the shared_
     * pair below, with RMWs). destroy decides the pool is idle with
     * knit__pool_quiescent, which reads every `child_settled`, then
     * `counts`, then every `pushed`. */
    alignas(KNIT__LINE) _Atomic uint64_t counts;
    alignas(KNIT__LINE) _Atomic uint64_t shared_pushed, shared_child_settled;
    alignas(KNIT__LINE) _Atomic uint64_t pending_high;
    /* Submitters blocked at the bound sleep on space_seq. */
    alignas(KNIT__LINE) _Atomic uint32_t space_seq;
    _Atomic uint32_t space_waiters; /* all of them */
    _Atomic uint32_t lane_waiters;  /* those waiting for a carpet lane */
    size_t space_low; /* pending at which they are woken (knit__space_notify) */
    /* Parked workers, one bit each (see knit__pool_park). */
    alignas(KNIT__LINE) _Atomic uint64_t parked[KNIT__PARKED_WORDS];
    /* Workers looking for work (idle, not parked): while one is, a
     * publication needs no wake-up (see knit__pool_notify). */
    alignas(KNIT__LINE) _Atomic uint32_t spinning;
    /* Consumer ids threads + i for awaiting helpers. */
    alignas(KNIT__LINE) _Atomic uint32_t helper_mask;
    _Atomic uint64_t help_depth_max;

    /* The carpet registry: workers scan all[0 .. nall). Entries are
     * written before nall is raised (release); never removed until
     * destroy. */
    alignas(KNIT__LINE) _Atomic uint32_t nall;
    uint32_t capall;
    knit_carpet *_Atomic *all;
    /* Carpets no thread publishes into (pool lock): given back by exited
     * threads and by idle threads when space ran short; some may still
     * carry lanes in flight, which workers claim as from any carpet. */
    knit_carpet **spare;
    uint32_t nspare;
    uint64_t carpets_moved; /* carpets taken from another record (lock) */

    /* Pool lock (handle->lock) guards these. */
    struct knit__producer *producers;
    struct knit__slab *slabs; /* every slab, newest first */
    /* Per size class: the slab being carved, the size of its next one. */
    struct knit__slab *carving[KNIT__FCLASSES];
    size_t slab_next_bytes[KNIT__FCLASSES];
    /* Futures freed by a thread with no record (knit__future_free): with
     * each record's `futures_out`, whether any future is still in use
     * when the pool is freed. */
    uint64_t futures_freed_bare;
    /* Free futures as whole chains ("magazines"): a thread hands over or
     * takes a chain of up to KNIT__FUTURE_CACHE in O(1), never walking
     * futures that another core touched last. */
    knit_future *magazines[KNIT__FCLASSES]; /* per size class */
    uint64_t magazine_moves; /* magazines given and taken (tests) */
    /* Unsettled promises (runtime/promise.c), doubly linked. */
    knit_future *promises;

    struct knit__worker *workers;
    knit__deque *deques; /* one per consumer id: workers, then helpers */
    knit__fdq *fdqs;     /* fork deques, one per consumer id (frame.c) */
};

#define KNIT__LIVE_ONE (1ull << 32)
/* One submitted task in counts: pending and live (also one credit,
 * runtime/entry.c). */
#define KNIT__TASK_UNIT (1 + KNIT__LIVE_ONE)
#define KNIT__PENDING(c) ((int64_t)(uint32_t)(c))
#define KNIT__LIVE(c) ((int64_t)((c) >> 32))

/* The handle (tombstone). */
struct knit_pool {
    /* Read by every task run (the CANCELLING check): kept apart from
     * `users`, which every submit writes. */
    alignas(KNIT__LINE) _Atomic uint32_t state; /* KNIT__POOL_* */
    /* Calls inside beyond a thread's entry slots (runtime/entry.c). */
    alignas(KNIT__LINE) _Atomic uint32_t users;
    pthread_mutex_t lock;   /* the pool lock */
    struct knit__pool *p;   /* NULL once dead */
    alignas(KNIT__LINE) uint64_t gen; /* unique per pool (TLS lookups) */
    struct knit_pool *grave_next;
};

/* The calling thread's knit state. */
struct knit__tls {
    struct knit__worker *worker; /* set in worker threads */
    struct knit__pool *cpool;    /* the pool `consumer` belongs to, or NULL */
    unsigned consumer;           /* this thread's consumer id (worker id, or
                                    a helper id while it helps) */
    knit_task *current;          /* the task running on this thread */
    unsigned depth;              /* tasks nested on this stack */
    knit__doorbell bell;         /* where a non-worker thread sleeps */
    /* The timeline: how many tasks this thread recorded, and the start
     * and end of the last one; knit__wait takes its await span's times
     * from them instead of reading the clock again. */
    uint64_t tl_tasks;
    int64_t tl_t0, tl_t1;
};

/* struct knit_task: in <knit/fork.h> (its private layout section). */

/* A frame child (light, or full when stolen or run at its fork). */
static inline bool knit__task_is_frame_child(const knit_task *t) {
    return t->full != t || t->full->frame_child;
}

/* Adds to a counter only its owner thread writes (worker or producer
 * stats): a relaxed load and store, no RMW; readers (knit_pool_stats) load
 * it relaxed and may see a slightly old value. */
static inline void knit__stat_add(_Atomic uint64_t *s, uint64_t v) {
    atomic_store_explicit(s, atomic_load_explicit(s, memory_order_relaxed) + v,
                          memory_order_relaxed);
}

/* ---- runtime/pool.c ---- */
/* The calling thread's state: one TLS variable, hidden in the library, so
 * reading it is inline (not a call per use: submit, await and release
 * each ask several times). */
extern _Thread_local struct knit__tls knit__tls_state
    __attribute__((visibility("hidden")));
static inline struct knit__tls *knit__tls_get(void) { return &knit__tls_state; }
/* Claims and runs one batch from any carpet (own first). `consumer` is a
 * worker id or a helper id. Returns tasks handled. */
unsigned knit__pool_run_some(struct knit__pool *p, unsigned consumer,
                             struct knit__worker *w, struct knit__producer *rec);
bool knit__pool_any_pending(struct knit__pool *p);
/* After a publication (its seq-cst flush): wake one parked worker if any. */
void knit__pool_wake_one(struct knit__pool *p);
/* After a publication: wake a parked worker unless one is already looking
 * for work. */
void knit__pool_notify(struct knit__pool *p);
/* knit__pool_notify after a carpet flush, whose B1 may be the asymmetric
 * fence's compiler barrier (runtime/carpet.c). */
void knit__pool_notify_published(struct knit__pool *p);
/* The worker's doorbell sleep, registered as parked so submits wake it. */
void knit__pool_park(struct knit__pool *p, struct knit__worker *w,
                     int64_t timeout_ns, bool (*ready)(void *), void *ctx);

/* ---- runtime/entry.c ---- */
/* Marks the calling thread as inside h and checks the state: LIVE,
 * DRAINING or CANCELLING; with `any`, every state but DEAD. KNIT_EINVAL,
 * KNIT_ESHUTDOWN. Every success is paired with one knit__pool_exit. */
int knit__pool_enter(knit_pool *h, bool any);
void knit__pool_exit(knit_pool *h);
/* destroy, after its seq-cst store of DEAD: waits until no thread is
 * inside h. */
void knit__entries_wait_out(knit_pool *h);
/* Thread exit: takes this thread's entry record off the registry. */
void knit__entries_unlink(void);
/* Whether the calling thread is inside h through one of its slots (a
 * call into h is under way on its stack). */
bool knit__entries_inside(const knit_pool *h);
/* Credits (runtime/entry.c, used by runtime/submit.c's
 * knit__pending_acquire): units of h's counts this thread took and has not
 * used, kept in its slot of h while it is inside h.
 * knit__credit_use: uses one (true), or there is none (false).
 * knit__credit_units: how many units to take now, at most k (1: no slot,
 * or the last refill saw no room for more).
 * knit__credit_keep: keeps n more (the thread has none) and whether the
 * next refill may take k.
 * knit__entries_revoke: takes back (and returns to counts) the credits of
 * every slot of h whose thread is not inside h; returns how many.
 * knit__entries_credits: credits of h held in all slots (statistics). */
bool knit__credit_use(const knit_pool *h);
unsigned knit__credit_units(const knit_pool *h, unsigned k);
void knit__credit_keep(const knit_pool *h, unsigned n, bool room);
unsigned knit__entries_revoke(const knit_pool *h);
uint64_t knit__entries_credits(const knit_pool *h);
/* Tests: slots of this thread inside a pool; slots of this thread that
 * keep credits while it is outside; records on the registry (threads that
 * entered a pool and have not exited). */
unsigned knit__entries_held(void);
unsigned knit__entries_sticky(void);
unsigned knit__entries_registered(void);

/* ---- runtime/pool.c ---- */
unsigned knit__pool_helper_acquire(struct knit__pool *p);
void knit__pool_helper_release(struct knit__pool *p, unsigned id);
int64_t knit__now_ns(void);

/* ---- runtime/submit.c ---- */
/* What a submit carries besides fn and arg: inline bytes to copy, or a
 * buffer the runtime takes over on success (the caller's is untouched on
 * failure). */
struct knit__submit_payload {
    const void *bytes; /* inline: copied into the future */
    size_t len;
    const knit_buf *buf; /* else: moved in */
    unsigned kind;       /* KNIT__PAY_* */
    bool always_run;     /* runs even when the pool cancels (the task
                            copes with the pool's cancel itself) */
};
int knit__submit(knit_pool *h, knit_fn fn, void *arg,
                 const struct knit__submit_payload *pl, knit_future **out);
/* knit__submit of a member of group g (runtime/group.c): no future. */
int knit__submit_member(struct knit_group *g, knit_fn fn, void *arg);
/* The calling thread's record for p (registers it on first use). */
struct knit__producer *knit__producer_get(knit_pool *h, struct knit__pool *p);
/* A new record linked into p (or an orphan, if adopt). Pool lock inside. */
struct knit__producer *knit__producer_add(struct knit__pool *p, bool adopt);
void knit__producer_free(struct knit__producer *rec);
/* Publishes lane t (a future's task, or a group member's: see submit.c)
 * through rec's carpets. The caller has already counted it in
 * pending/live. Never blocks: 0,
 * KNIT_EAGAIN (every carpet full, none spare, none to take from an idle
 * thread and no new one allowed: wait for lanes), KNIT_ENOMEM (a new
 * carpet was needed and could not be allocated). */
int knit__publish(struct knit__pool *p, struct knit__producer *rec,
                  const knit__lane_task *t);
void knit__thread_exit_hook_install(void);
/* Makes sure this thread's exit runs knit__thread_exit (entry records,
 * producer records): 0, or pthread_setspecific's error. */
int knit__thread_exit_arm(void);

/* ---- runtime/future.c ---- */
/* A free future from rec's cache of its class (with_in: a struct
 * knit__future_in, for a task with an input); NULL if out of memory. */
knit_future *knit__future_alloc(struct knit__pool *p, struct knit__producer *rec, bool with_in);
void knit__future_unref(knit_future *f);
/* Returns a future that was never shared to rec's cache. */
void knit__future_free_unused(knit_future *f, struct knit__producer *rec);
/* Settles f (state DONE), wakes its waiters and schedules its
 * continuations. `message` is owned by the future afterwards. */
void knit__future_settle(knit_future *f, int code, void *result, int task_code,
                         char *message);
/* Unmaps the futures' slabs; in_use: some future was not freed (its
 * buffers and message are freed first). */
void knit__future_free_all(struct knit__pool *p, bool in_use);
void knit__continuation_schedule(knit_future *g);
/* What knit_await returns for a settled future (sets the last error). */
int knit__future_outcome(const knit_future *f, void **result);
/* Gives a record that was published but is no longer shared (a group
 * member's, after its run) back to this thread's cache. */
void knit__future_recycle(knit_future *f);
/* Waits until g has no live member, helping like knit_await (0 or
 * KNIT_ETIMEDOUT; KNIT_ENOMEM never: one waiter record on the stack). */
int knit__wait_group(struct knit_group *g, struct knit__pool *p,
                     int64_t timeout_ns);
/* Rings every record of a waiter list taken off its future or group and
 * marks each released (the settle's half of the waiting protocol). */
void knit__waiters_ring_list(struct knit__waiter *w);
/* The spinlock of a future's or a group's waiter list. */
void knit__spin_lock(_Atomic uint8_t *lock);
void knit__spin_unlock(_Atomic uint8_t *lock);

/* ---- runtime/group.c ---- */
/* A member finished: records a failure (code KNIT_ETASK with task_code and
 * message, owned afterwards by the group; or KNIT_ECANCELED) if it is the
 * group's first, then takes it off g->live: at once with w NULL, else (a
 * member worker w's loop started) kept back until knit__group_drop_flush. */
void knit__group_member_done(struct knit_group *g, struct knit__worker *w,
                             int code, int task_code, char *message);
/* Takes the members worker w finished, and kept back, off their group's
 * `live` (see group.c); nothing if it keeps none. */
void knit__group_drop_flush(struct knit__worker *w);
/* knit_group_cancel was called (acquire). */
bool knit__group_cancelled(const struct knit_group *g);
/* No member is live (seq-cst: the waiter's load, see group.c). */
bool knit__group_idle(struct knit_group *g);

/* ---- runtime/promise.c ---- */
/* After whoever won a promise (PENDING -> RUNNING: a settle, a cancel)
 * settled it, continuations scheduled: takes it off the pool's list and
 * drops its own reference. */
void knit__promise_settled(knit_future *f);
/* knit_pool_destroy: rejects every unsettled promise with KNIT_ECANCELED
 * (after the state left LIVE, so no new one appears). */
void knit__promises_reject_all(struct knit__pool *p);

/* ---- runtime/payloads.c ---- */
/* When a future settles: frees the input the task did not take. */
void knit__payload_settle(knit_future *f);
/* When a future is freed (by its last holder): frees the returned buffer
 * nobody took. */
void knit__payload_drop(knit_future *f);

/* ---- runtime/task.c ---- */
/* Runs (or skips, if cancelled) a claimed task, settles its future and
 * drops the lane's reference. Counts the settle in w->unsettled, or takes
 * it off `live` at once when w is NULL. True when the task's function
 * ran (a group member: true; knit__task_inline never passes one). */
bool knit__task_run(struct knit__pool *p, knit_future *f,
                    struct knit__worker *w, struct knit__producer *rec);
/* An await that runs its own future's task on this thread when nobody
 * has started it and it is the newest entry of this consumer's deque
 * (popped, then run as claimed). rec is this thread's record,
 * tls->consumer a consumer id of p. False otherwise. */
bool knit__task_inline(struct knit__pool *p, knit_future *f,
                       struct knit__worker *w, struct knit__producer *rec);
/* A group member that came in a lane and got no record (no memory): run
 * with a record on this stack, counted as knit__task_run counts it. */
void knit__member_run_bare(struct knit__pool *p, knit_fn fn, void *arg,
                           struct knit_group *g, struct knit__worker *w,
                           struct knit__producer *rec);
/* Takes a worker's settled tasks off `live`. */
void knit__worker_flush(struct knit__pool *p, struct knit__worker *w);

#endif
