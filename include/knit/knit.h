/* knit — a work-stealing thread pool for C.
 *
 * The umbrella header: include <knit/knit.h>, link //:knit.
 *
 *   knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
 *   knit_pool *pool;
 *   if (knit_pool_create(&o, &pool) != 0) puts(knit_last_error());
 *   knit_future *f;
 *   knit_submit(pool, work, arg, &f);
 *   void *result;
 *   int rc = knit_await(f, -1, &result);   // 0, KNIT_ETASK, KNIT_ECANCELED, ...
 *   knit_future_release(f);
 *   knit_pool_destroy(pool, KNIT_DRAIN);
 *
 * Errors: every function returns 0 or a negative KNIT_E* code (error.h) and
 * leaves a detailed message in knit_last_error(). Nothing here prints,
 * exits or aborts on bad input.
 *
 * Threads: every function may be called from any thread, including from
 * inside a task, unless its comment says otherwise.
 */
#ifndef KNIT_KNIT_H
#define KNIT_KNIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "knit/error.h"
#include "knit/sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version: the only place it is written. The build names the shared
 * library libknit.so.MAJOR.MINOR.PATCH (SONAME libknit.so.MAJOR) from
 * these lines, and the installed knit.pc and knitConfigVersion.cmake
 * report it. MAJOR changes whenever the ABI does (knit_pool_options, the
 * stats structs, knit_sched_ops, a function's signature). */
#define KNIT_VERSION_MAJOR 0
#define KNIT_VERSION_MINOR 1
#define KNIT_VERSION_PATCH 0

/* The library's version as "MAJOR.MINOR.PATCH": of the library actually
 * loaded, which may differ from the KNIT_VERSION_* macros compiled in. */
const char *knit_version(void);

typedef struct knit_pool knit_pool;
typedef struct knit_future knit_future;
typedef struct knit_task knit_task; /* context of a running task */
typedef struct knit_group knit_group; /* a task group (see "groups") */

/* A task: returns its result (any pointer; NULL is fine). `task` is valid
 * only during the call. */
typedef void *(*knit_fn)(knit_task *task, void *arg);

/* knit_fork / knit_join: fork-join frames beside futures. */
#include "knit/fork.h"

enum knit_backpressure {
    KNIT_BLOCK = 0, /* a submit at the bound waits (a task helps instead) */
    KNIT_FAIL = 1,  /* a submit at the bound returns KNIT_EAGAIN */
    /* A submit at the bound (or with every carpet full) runs the task
     * itself, on the submitting thread, before it returns (Java's
     * CallerRunsPolicy, libgomp's undeferred tasks): its future settles
     * as usual and its continuations are scheduled; a group member counts
     * in its group. Running a task takes one of the pool's 2 helper ids
     * (a task's forks need one); an outside thread that finds both in use
     * waits as KNIT_BLOCK would, then tries again. Inside a task (whose
     * subtasks normally go to its deque) it runs nested on the task's
     * stack. A full payload arena (knit_submit_copy) waits as KNIT_BLOCK. */
    KNIT_CALLER_RUNS = 2,
};

enum knit_destroy_how {
    KNIT_DRAIN = 0,  /* run every submitted task, then stop */
    KNIT_CANCEL = 1, /* settle every unstarted task as KNIT_ECANCELED */
};

/* Most worker threads a pool accepts: a carpet serves at most
 * KNIT_SCHED_MAX_CONSUMERS (64) consumers. threads = 0 takes one per CPU
 * the process may use, at most this many: the CPUs in its affinity mask
 * (sched_getaffinity), capped by its cgroup v2 CPU quota (cpu.max, rounded
 * up) when one is set. */
#define KNIT_MAX_THREADS 64u

typedef struct knit_pool_options {
    size_t size;           /* sizeof(knit_pool_options), set by the INIT macro */
    unsigned threads;      /* workers; 0: one per usable CPU (<= 64) */
    const char *sched;     /* discipline; NULL: $KNIT_SCHED, else "ticket" */
    unsigned region_lanes; /* 0: default (8; dekker: as many as fit) */
    size_t max_pending;    /* tasks submitted and not yet started; 0: 65536.
                              From 2048 up, a thread takes room under the
                              bound 32 tasks at a time and keeps what it has
                              not used while it is inside a call into the
                              pool: a submit may then be held at the bound
                              with up to 31 fewer tasks pending per other
                              thread inside such a call. Below 2048 the
                              bound is exact. */
    int backpressure;      /* KNIT_BLOCK (default), KNIT_FAIL, KNIT_CALLER_RUNS */
    unsigned spin;         /* idle polls before a worker parks; 0: default */
    int64_t await_spin_ns; /* how long an outside await spins/helps before it
                              parks; 0: default (50 us); < 0: never spins */
    knit_claim_trace_fn trace; /* optional: one line per claim */
    void *trace_ctx;
    size_t arena_bytes;    /* payload arena: a hard cap; 0: 64 MiB */
    size_t max_payload;    /* largest single payload; 0: arena_bytes / 4 */
    /* The timeline (see "timeline" below): the file a Chrome Trace Event
     * JSON is written to; NULL: $KNIT_TIMELINE, else no timeline. */
    const char *timeline;
    size_t timeline_events; /* records kept per thread (16 .. 4194304, a
                               power of two is used); 0: $KNIT_TIMELINE_EVENTS,
                               else 65536. Does not switch the timeline on. */
} knit_pool_options;

/* In C++ (no designated initializers before C++20) the same value, zeroed
 * with the size set, so the header stays -pedantic clean there too. */
#ifdef __cplusplus
#define KNIT__OPTIONS_INIT_CXX(T) ([] { T o_{}; o_.size = sizeof o_; return o_; }())
#define KNIT_POOL_OPTIONS_INIT KNIT__OPTIONS_INIT_CXX(knit_pool_options)
#else
#define KNIT_POOL_OPTIONS_INIT { .size = sizeof(knit_pool_options) }
#endif

/* Creates a pool and starts its workers. KNIT_EINVAL (with the option, the
 * value and the limit in knit_last_error()), KNIT_ENOMEM. */
int knit_pool_create(const knit_pool_options *opts, knit_pool **out);

/* Stops the pool: KNIT_DRAIN runs every submitted task (also those tasks
 * submit while draining), KNIT_CANCEL settles every unstarted task as
 * KNIT_ECANCELED and tells running ones (knit_task_cancelled). Joins every
 * worker, settles every future and frees them: after it returns, the pool's
 * futures are invalid, and further calls on the pool return
 * KNIT_ESHUTDOWN (the handle itself stays valid: a few bytes are kept).
 * Must not be called from inside one of the pool's tasks (KNIT_EBUSY). */
int knit_pool_destroy(knit_pool *pool, int how);

/* Submits fn(task, arg). On success *out (if out is not NULL) is a future
 * the caller owns and must release; with out == NULL the task runs detached.
 * KNIT_EAGAIN (KNIT_FAIL policy: at max_pending, or every carpet in the
 * pool full or in use by a thread that is submitting at that moment),
 * KNIT_ESHUTDOWN, KNIT_EINVAL, KNIT_ENOMEM. No allocation in steady state.
 * Each submitting thread publishes into carpets of its own; when the pool
 * has none left, a submit takes spare carpets (those of exited threads)
 * or those of threads that are not submitting, so it never waits while
 * idle carpets exist, whoever grew them. */
int knit_submit(knit_pool *pool, knit_fn fn, void *arg, knit_future **out);

/* Waits for a future. timeout_ns < 0: no limit; 0: just test. Returns the
 * task's outcome: 0 (result in *result if result is not NULL), KNIT_ETASK
 * (the task failed: knit_last_error() holds its code and message),
 * KNIT_ECANCELED, KNIT_ECLOSED, KNIT_ESHUTDOWN; or KNIT_ETIMEDOUT (the
 * future is untouched and may be awaited again). Inside a task it runs
 * other tasks while it waits, so nested fork-join cannot deadlock: a task
 * submitted from inside a task and not started yet runs first, on the
 * awaiting thread, when it is the newest task of the thread's deque
 * (stats: `inlined`); else the newer ones above it run first. May be
 * called any number of times, from several threads, until released. */
int knit_await(knit_future *f, int64_t timeout_ns, void **result);

/* Waits until every future settled: 0 when all succeeded, else the first
 * failure's code (by index); KNIT_ETIMEDOUT if the time ran out. */
int knit_await_all(knit_future *const *fs, size_t n, int64_t timeout_ns);

/* Waits until one future settled and sets *which to its index; returns that
 * future's outcome like knit_await, or KNIT_ETIMEDOUT. */
int knit_await_any(knit_future *const *fs, size_t n, int64_t timeout_ns,
                   size_t *which);

/* Cancels: 0 if the task had not started (it never runs; the future settles
 * as KNIT_ECANCELED); KNIT_EBUSY if it is running (it is asked to stop:
 * knit_task_cancelled() turns true); KNIT_EALREADY if it has settled (for
 * a promise: also while a resolve, reject or pool destroy settles it). */
int knit_future_cancel(knit_future *f);

/* Runs fn(task, arg) once f settles (whatever the outcome); inside, the
 * task reads f's outcome with knit_task_antecedent(). *out is the
 * continuation's own future (the caller releases it). A continuation is
 * scheduled by the settle and is never held back by max_pending, so
 * stats.pending_high may pass max_pending by the continuations in flight. */
int knit_future_then(knit_future *f, knit_fn fn, void *arg, knit_future **out);

/* Gives up the caller's handle. The task still runs (detached) unless it
 * was cancelled. A second release of the same handle is KNIT_EALREADY as
 * long as the runtime still holds the future; after that it is undefined. */
int knit_future_release(knit_future *f);

/* True once the future has settled (never blocks). */
bool knit_future_done(const knit_future *f);

/* ---- promises ----
 *
 * A promise is a future that no task settles: the program settles it,
 * from any thread, when an outside event completes (an I/O completion, an
 * MPI request, another event loop's callback). knit_await, await_all,
 * await_any, then, cancel and release work on it as on any future.
 *
 * At knit_pool_destroy (either mode) every promise still unsettled is
 * rejected with KNIT_ECANCELED ("the pool was destroyed before the promise
 * was settled") right after outside submits start failing, before the
 * drain, so a task awaiting one cannot hold destroy up; continuations
 * chained on it are then treated like every other continuation at that
 * point: KNIT_DRAIN runs them (knit_task_antecedent reads
 * KNIT_ECANCELED), KNIT_CANCEL settles them as KNIT_ECANCELED unrun. A
 * settle that loses that race returns KNIT_EALREADY. */

/* A new unsettled promise in *out (the caller releases it as any future).
 * KNIT_EINVAL, KNIT_ENOMEM, KNIT_ESHUTDOWN (also while the pool is being
 * destroyed, even from inside a task). */
int knit_promise_create(knit_pool *pool, knit_future **out);
/* Settles the promise with a result: awaiters get 0 and `result`.
 * KNIT_EALREADY if it was settled (resolved, rejected, cancelled, or
 * rejected by pool destroy) or its handle released; KNIT_EINVAL for NULL
 * or a future that is not a promise. */
int knit_promise_resolve(knit_future *f, void *result);
/* Settles the promise as failed: awaiters get KNIT_ETASK with `code` and
 * the message, as for a task that called knit_task_fail (fmt may be
 * NULL). Same errors as knit_promise_resolve. */
int knit_promise_reject(knit_future *f, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- groups ----
 *
 * A task group (oneTBB's task_group, Go's errgroup): submit any number of
 * tasks without keeping a future each, then wait for all of them.
 *
 *   knit_group *g;
 *   knit_group_create(pool, &g);
 *   for (i = 0; i < n; i++) knit_group_submit(g, work, &items[i]);
 *   int rc = knit_group_wait(g, -1);   // 0, KNIT_ETASK, KNIT_ECANCELED
 *   knit_group_destroy(g);
 *
 * A member costs what a detached knit_submit costs plus one atomic add to
 * the group's count when submitted and one when it finishes. Any thread,
 * and any task (a member too: its group's), may submit at any time; the
 * group's outcome is the first failure among its members (or its cancel),
 * and it is kept: a failure does not stop the other members (call
 * knit_group_cancel for that), and every later wait returns it again.
 * Members submitted by another thread while a wait runs may or may not be
 * waited for: a wait returns at a moment when the group had no live
 * member. */

/* A new empty group on `pool`. KNIT_EINVAL, KNIT_ENOMEM, KNIT_ESHUTDOWN. */
int knit_group_create(knit_pool *pool, knit_group **out);
/* Submits fn(task, arg) as a member: no future. The pool's backpressure
 * applies (KNIT_EAGAIN under KNIT_FAIL; KNIT_CALLER_RUNS runs it here).
 * KNIT_ECANCELED once the group was cancelled (nothing submitted),
 * KNIT_EINVAL, KNIT_ESHUTDOWN, KNIT_ENOMEM. */
int knit_group_submit(knit_group *g, knit_fn fn, void *arg);
/* Waits until the group has no live member (timeout_ns < 0: no limit; 0:
 * just test) and returns its outcome: 0; KNIT_ETASK, the first failure
 * (knit_last_error() has "task failed (code N): message"); KNIT_ECANCELED
 * (cancelled by knit_group_cancel, or a member cancelled by
 * knit_pool_destroy(KNIT_CANCEL)); or KNIT_ETIMEDOUT. Runs the pool's
 * tasks while it waits, as knit_await does, so it nests inside tasks. May
 * be called again, from several threads, any number of times (each waits
 * for the members live then and returns the outcome so far); once the
 * pool is destroyed it still reports the outcome. A member waiting for
 * its own group would wait for itself: KNIT_EBUSY. */
int knit_group_wait(knit_group *g, int64_t timeout_ns);
/* Cancels: members that have not started never run (each counts as
 * finished), running ones see knit_task_cancelled() turn true, and later
 * knit_group_submit calls fail with KNIT_ECANCELED. The group's outcome
 * becomes KNIT_ECANCELED unless a failure came first. Returns at once
 * (knit_group_wait waits for the running members). 0, KNIT_EINVAL. */
int knit_group_cancel(knit_group *g);
/* Frees the group. KNIT_EBUSY (nothing freed) while a member is live or
 * another thread is inside knit_group_wait/cancel on it. KNIT_EINVAL. */
int knit_group_destroy(knit_group *g);

/* ---- inside a task ---- */

/* Marks the running task failed with a user code (any int) and a message;
 * the awaiter gets KNIT_ETASK and this text. Returns KNIT_ETASK, so a task
 * may `return (void *)(intptr_t)knit_task_fail(...)` or just return NULL. */
int knit_task_fail(knit_task *task, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* True when the task was asked to stop (knit_future_cancel, its group's
 * knit_group_cancel, pool cancel). */
bool knit_task_cancelled(const knit_task *task);
knit_pool *knit_task_pool(const knit_task *task);
/* Names the running task in the pool's timeline (until it returns);
 * `label` must stay valid for the pool's life (a string literal). Without
 * a label a task is named by its function's symbol (dladdr: link with
 * -rdynamic to see static programs' names), else its address. Costs one
 * store; KNIT_EINVAL if task is NULL. */
int knit_task_label(knit_task *task, const char *label);
/* In a continuation: the outcome of the future it follows (as knit_await
 * would return it) and its result. KNIT_EINVAL in a plain task. */
int knit_task_antecedent(const knit_task *task, void **result);

/* ---- payloads: bytes and moved buffers ----
 *
 * Four ways bytes travel with a task:
 *   inline        knit_submit_copy of up to KNIT_INLINE_BYTES: copied into
 *                 the task's own record; no allocation.
 *   arena         knit_submit_copy of more: copied into the pool's payload
 *                 arena (a jemalloc arena over memory the pool reserved up
 *                 front, so arena_bytes is a hard cap).
 *   arena binary  memory from knit_payload_alloc, wrapped by
 *                 knit_payload_buf and moved in: no copy.
 *   moved buffer  any knit_buf: pointer, length and how to free it.
 * Ownership: a successful move empties the caller's knit_buf; a failed one
 * leaves it untouched. From then on each buffer is freed exactly once or
 * handed to exactly one owner on every path: the task takes it
 * (knit_task_take_buf), else the runtime frees it when the task settles
 * (ran, failed, cancelled before start, pool destroyed); a buffer a task
 * returns (knit_task_return_buf) goes to whoever takes it from the future
 * (knit_future_take_buf, or a continuation with knit_task_antecedent_buf),
 * else it is freed with the future. */

#define KNIT_INLINE_BYTES 64u

typedef void (*knit_free_fn)(void *ctx, void *data, size_t len);

typedef struct knit_buf {
    void *data;
    size_t len;
    knit_free_fn free_fn; /* how the final owner releases it; NULL: borrowed */
    void *free_ctx;
} knit_buf;

/* A buffer that owns malloc'ed memory (free_fn calls free). */
knit_buf knit_buf_malloced(void *data, size_t len);
/* Calls free_fn once (if data is set) and empties *buf. NULL is fine. */
void knit_buf_free(knit_buf *buf);

/* Submits fn with a copy of len bytes (the task reads them with
 * knit_task_bytes; its arg is their address). KNIT_E2BIG over max_payload
 * (the message has both numbers); a full arena is backpressure: KNIT_BLOCK
 * waits, KNIT_FAIL returns KNIT_ENOMEM naming the cap and the size. */
int knit_submit_copy(knit_pool *pool, knit_fn fn, const void *bytes, size_t len,
                     knit_future **out);
/* Memory from the pool's arena, to fill and move in without a copy. NULL
 * with knit_last_error() on failure (same rules as knit_submit_copy). */
void *knit_payload_alloc(knit_pool *pool, size_t len);
/* Frees knit_payload_alloc memory the caller still owns. */
void knit_payload_free(knit_pool *pool, void *data);
/* Wraps arena memory as a movable buffer (freed back into the arena). An
 * empty buffer if data is not from this pool's arena. */
knit_buf knit_payload_buf(knit_pool *pool, void *data, size_t len);
/* Moves *buf into a task (its arg is buf->data): on success *buf is empty
 * and the runtime or the task owns the bytes; on failure *buf is
 * untouched. KNIT_EINVAL (NULL buf, data NULL with len > 0), KNIT_E2BIG. */
int knit_submit_buf(knit_pool *pool, knit_fn fn, knit_buf *buf, knit_future **out);

/* Inside a task: its input bytes (inline, arena or moved); NULL and 0 when
 * it has none or has taken them. */
const void *knit_task_bytes(const knit_task *task, size_t *len);
/* Inside a task: takes ownership of the input. Inline bytes are copied
 * into a malloc'ed buffer. Empty if there is none or it was taken. */
knit_buf knit_task_take_buf(knit_task *task);
/* Inside a task: moves *buf into the task's result (*buf emptied).
 * KNIT_EALREADY if the task already returned one (buf untouched). */
int knit_task_return_buf(knit_task *task, knit_buf *buf);
/* In a continuation: takes the buffer the antecedent returned. */
int knit_task_antecedent_buf(knit_task *task, knit_buf *out);
/* After the future settled: takes the buffer its task returned. KNIT_EBUSY
 * if it has not settled, KNIT_ENOENT if the task returned none,
 * KNIT_EALREADY if it was taken already (never a double free). */
int knit_future_take_buf(knit_future *f, knit_buf *out);

/* ---- parallel_for ---- */

/* Runs fn(ctx, b, e) over pieces [b, e) of [begin, end), each at most
 * `grain` long (0: about 8 pieces per worker), on the pool; returns when
 * all are done: 0, or the first failure (fn's negative return, in range
 * order of discovery) with its message in knit_last_error(). fn may set a
 * message with knit_error(). From inside a task it runs pieces itself
 * while it waits, so it nests. */
typedef int (*knit_range_fn)(void *ctx, size_t begin, size_t end);
int knit_parallel_for(knit_pool *pool, size_t begin, size_t end, size_t grain,
                      knit_range_fn fn, void *ctx);

/* ---- parallel_reduce ---- */

/* Reduces [begin, end): body(ctx, b, e, out) computes the value of a piece
 * [b, e) into out (value_size bytes, at most KNIT_REDUCE_MAX_VALUE,
 * aligned like malloc's memory); combine(ctx, left, right) folds the value
 * of the piece just right of `left` into `left`. The result (the fold of
 * every piece, left to right) lands in *result. The pieces and the shape
 * of the fold depend only on begin, end and grain (0: (end - begin) / 256,
 * at least 1), never on the thread count or on who ran what, so an
 * associative combine gives the same bits on any pool, even for floating
 * point. begin == end: body(ctx, begin, begin, result) gives the identity.
 * 0, KNIT_EINVAL, or the first failure (a negative return of body) with
 * its message in knit_last_error(); pieces that start after a failure are
 * skipped. Runs on fork-join frames; nests inside tasks. */
#define KNIT_REDUCE_MAX_VALUE 256
typedef int (*knit_reduce_body)(void *ctx, size_t begin, size_t end, void *out);
typedef void (*knit_reduce_combine)(void *ctx, void *left, const void *right);
int knit_parallel_reduce(knit_pool *pool, size_t begin, size_t end, size_t grain,
                         size_t value_size, knit_reduce_body body,
                         knit_reduce_combine combine, void *ctx, void *result);

/* ---- pipelines ----
 *
 * Items are knit_bufs that pass from stage to stage by move (no copies).
 * The input function runs on the thread that calls knit_pipeline_run, one
 * item at a time, in order; it is not called while max_in_flight items are
 * in flight. With KNIT_PIPELINE_INPUT_IN_TASKS it runs in pool tasks
 * instead, still one call at a time and in order, and the worker that read
 * an item runs its stages right after, while the item is in its cache (as
 * oneTBB's input filter does): faster for large items, but the input must
 * not rely on the calling thread (its signals, thread-locals, blocking
 * reads that the caller interrupts). Each stage is serial-in-order (items enter it in input order),
 * serial (one at a time, any order) or parallel. A stage function may
 * change the item in place (read it, rewrite it, or free it and put
 * another buffer there); after the last stage the pipeline frees what is
 * left. A failure (a stage or the input returning < 0), or
 * knit_pipeline_cancel from any thread, stops the input; items in flight
 * skip the remaining stage functions, every item is freed exactly once,
 * and knit_pipeline_run returns the first failure (or KNIT_ECANCELED) with
 * "stage N (item I): <message>" (N from 0, or "input") in knit_last_error().
 * When it returns, no pipeline code runs any more: destroy at once. */

typedef enum knit_stage_mode {
    KNIT_STAGE_SERIAL_IN_ORDER = 0,
    KNIT_STAGE_SERIAL = 1,
    KNIT_STAGE_PARALLEL = 2,
} knit_stage_mode;

/* Returns 1 and fills *item, 0 when there are no more, < 0 on failure. */
typedef int (*knit_input_fn)(void *ctx, knit_buf *item);
/* Returns 0, or < 0 on failure (message with knit_error()). `seq` is the
 * item's input order, from 0. */
typedef int (*knit_stage_fn)(void *ctx, uint64_t seq, knit_buf *item);

typedef struct knit_stage {
    knit_stage_mode mode;
    knit_stage_fn fn;
    void *ctx;
} knit_stage;

typedef struct knit_pipeline_options {
    size_t size;          /* sizeof(knit_pipeline_options) (INIT macro) */
    knit_input_fn input;
    void *input_ctx;
    const knit_stage *stages;
    size_t nstages;       /* 1 .. 64 */
    size_t max_in_flight; /* 0: 4 per worker */
    unsigned flags;       /* KNIT_PIPELINE_* below, or 0 */
} knit_pipeline_options;
/* options.flags: call the input in pool tasks, not on the calling thread. */
#define KNIT_PIPELINE_INPUT_IN_TASKS 1u
#ifdef __cplusplus
#define KNIT_PIPELINE_OPTIONS_INIT KNIT__OPTIONS_INIT_CXX(knit_pipeline_options)
#else
#define KNIT_PIPELINE_OPTIONS_INIT { .size = sizeof(knit_pipeline_options) }
#endif

typedef struct knit_pipeline knit_pipeline;

typedef struct knit_pipeline_stats {
    uint64_t items;           /* items the input produced */
    uint64_t completed;       /* items that ran every stage */
    uint64_t dropped;         /* items that skipped stages after a stop */
    uint64_t max_in_flight;   /* the most items in flight at once */
} knit_pipeline_stats;

int knit_pipeline_create(knit_pool *pool, const knit_pipeline_options *opts,
                         knit_pipeline **out);
/* Runs to the end (or the first failure, or a cancel). Once per pipeline. */
int knit_pipeline_run(knit_pipeline *pl);
/* From any thread, also while knit_pipeline_run runs. */
int knit_pipeline_cancel(knit_pipeline *pl);
int knit_pipeline_stats_get(const knit_pipeline *pl, knit_pipeline_stats *out);
void knit_pipeline_destroy(knit_pipeline *pl);

/* ---- timeline ----
 *
 * A record of what every thread did, for ui.perfetto.dev or
 * chrome://tracing (Chrome Trace Event JSON). Switched on per pool by
 * options.timeline or $KNIT_TIMELINE=path (read by knit_pool_create); the
 * n-th further pool of the process given the same path writes path.n
 * (path, path.1, path.2, ...). knit_pool_create opens the file (creating
 * it) to check it: KNIT_EIO if it cannot. Each worker and each other
 * thread that runs or awaits tasks records into its own ring of
 * timeline_events records, one per finished span: tasks (by label),
 * parked spans, awaits (and the tasks run while awaiting), claims and
 * steals (instants), pipeline stages, an items-in-flight counter per
 * pipeline and the time its input was blocked, parallel_for pieces. A full
 * ring overwrites its oldest records; the file says how many were dropped.
 * knit_pool_destroy writes the final file (after the workers stopped; a
 * failure to write it then is not reported: the path was checked at
 * create). Off, the pool allocates nothing for it and each hook is one
 * branch. ./bazelw run //tools:timeline -- file.json prints a summary and
 * draws a Gantt chart. */

/* Writes the timeline now, to `path` (NULL: the pool's own path); safe
 * while the pool runs, from any thread, also inside a task. KNIT_ENOENT if
 * the pool has no timeline, KNIT_EIO (the message names the file and the
 * reason), KNIT_EINVAL, KNIT_ENOMEM, KNIT_ESHUTDOWN. */
int knit_pool_timeline_write(knit_pool *pool, const char *path);

/* ---- stats ---- */

typedef struct knit_worker_stats {
    uint64_t tasks_run;     /* tasks this worker ran */
    uint64_t claims;        /* successful claims */
    uint64_t lanes_claimed; /* lanes over those claims */
    uint64_t polls_lost;    /* polls that saw work and came back empty */
    uint64_t parks;         /* times it went to sleep */
    uint64_t wakes;         /* times it was woken by a ring */
} knit_worker_stats;

typedef struct knit_pool_stats_t {
    size_t size;              /* sizeof(knit_pool_stats_t), set by the caller */
    unsigned threads;
    const char *sched;        /* the discipline's name */
    uint64_t submitted;       /* tasks accepted by knit_submit and then */
    uint64_t completed;       /* tasks settled (run, failed or cancelled) */
    uint64_t tasks_run;       /* tasks whose function ran, by any thread */
    uint64_t cancelled;       /* tasks settled as cancelled */
    uint64_t skipped;         /* lane or deque entries whose task was
                                 cancelled earlier */
    uint64_t inlined;         /* subtasks a task awaiting them took from
                                 its own deque and ran (in tasks_run) */
    uint64_t failed;          /* tasks that called knit_task_fail */
    uint64_t pending;         /* submitted, not yet started (now) */
    uint64_t pending_high;    /* high-water mark of pending (with
                                 max_pending >= 2048 it includes the room
                                 threads took and had not used yet) */
    uint64_t carpets;         /* carpets created */
    uint64_t carpets_spare;   /* of those, owned by no thread now */
    uint64_t carpets_moved;   /* taken from an idle thread that held them */
    uint64_t frames_stolen;   /* knit_fork children run by a thief */
    uint64_t helped;          /* tasks run by threads awaiting (not workers) */
    uint64_t help_depth_max;  /* deepest nesting of await-runs-a-task */
    uint64_t arena_bytes;     /* payload arena: bytes in use */
    uint64_t arena_cap;       /* its hard cap */
    uint64_t arena_high;      /* high-water mark of arena_bytes */
    uint64_t arena_allocs;    /* allocations */
    uint64_t arena_failures;  /* allocations refused (full or too big) */
    knit_worker_stats total;  /* sum over workers */
    knit_worker_stats worker[KNIT_MAX_THREADS];
} knit_pool_stats_t;

/* Snapshot of the counters (each read atomically; the set is not one
 * instant). out->size must be set. */
int knit_pool_stats(knit_pool *pool, knit_pool_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif /* KNIT_KNIT_H */
