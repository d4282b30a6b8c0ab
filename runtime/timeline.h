/* The timeline: what every thread of a pool did, as a flight recorder.
 *
 * Switched on per pool (options.timeline or $KNIT_TIMELINE); off, the pool
 * has no timeline (p->tl == NULL) and every hook is one test of that
 * pointer, which is constant for the pool's life. On, each thread that
 * runs knit code for the pool writes into its own ring:
 *   - a worker into rings[worker id], preallocated at create;
 *   - any other thread (one that awaits, helps, drives a pipeline) into a
 *     ring made the first time it records something, kept in `extra`
 *     (under `mu`) until the pool is destroyed.
 * A ring has exactly one writer, its thread. It holds one record per
 * finished span (a task, a park, an await, a pipeline stage, ...), written
 * when the span ends, so no record is half of a pair, and spans on one
 * thread nest because they are lexical scopes on its stack. When the ring
 * is full the oldest record is overwritten (and counted as dropped).
 *
 * Reading a ring while its thread writes (knit_pool_timeline_write on a
 * live pool) is a sequence-lock: the writer announces the slot it is about
 * to overwrite (`claim`) before it writes it and publishes the finished
 * record (`head`) after; the reader copies what `head` shows and then
 * discards whatever `claim` says may have been overwritten during the
 * copy. Every field of a record is an atomic word (stored with release,
 * loaded with acquire), so a torn copy is discarded, never a data race. See
 * knit__tl_put below and knit__tl_ring_copy in timeline.c for the orders.
 */
#ifndef KNIT_RUNTIME_TIMELINE_H
#define KNIT_RUNTIME_TIMELINE_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether pool p records a timeline: every hook tests this, a pointer
 * that is constant for the pool's life (a predictable branch). Built with
 * -DKNIT_NO_TIMELINE the hooks compile away and no pool ever has a
 * timeline (to measure what the hooks cost when off). */
#ifdef KNIT_NO_TIMELINE
#define KNIT__TL_ON(p) ((void)(p), 0)
#else
#define KNIT__TL_ON(p) ((p)->tl != NULL)
#endif

#define KNIT__TL_DEFAULT_EVENTS 65536u
#define KNIT__TL_MIN_EVENTS 16u
#define KNIT__TL_MAX_EVENTS (1u << 22)

/* Kinds of record. A span has t0 and dur; an instant has dur 0. */
enum knit__tl_kind {
    KNIT__TL_TASK = 1,    /* a task ran: label, a = depth on this stack */
    KNIT__TL_PARK = 2,    /* a worker slept on its doorbell */
    KNIT__TL_AWAIT = 3,   /* knit_await & co. waited: a = tasks it ran */
    KNIT__TL_CLAIM = 4,   /* instant: a = lanes, b = the carpet (pointer) */
    KNIT__TL_STEAL = 5,   /* instant: a task taken from consumer a's deque */
    KNIT__TL_STAGE = 6,   /* pipeline stage: a = item, b = pipeline, c = stage */
    KNIT__TL_INFLIGHT = 7, /* instant: a = items in flight, b = pipeline */
    KNIT__TL_STALL = 8,   /* pipeline input blocked (full): b = pipeline */
    KNIT__TL_PIECE = 9,   /* parallel_for piece: a = begin, b = end */
};

/* Flags (record word 5, bits 8..15). */
#define KNIT__TL_F_STR 1u  /* label is a C string (else a function) */
#define KNIT__TL_F_HELP 2u /* a task run inside an await (helping) */
#define KNIT__TL_F_FRAME 4u /* TASK: a stolen fork-join frame's child;
                               STEAL: taken from a fork deque */

#define KNIT__TL_WORDS 6
/* One record: t0 (ns, CLOCK_MONOTONIC), dur (ns), label, a, b and
 * kind | flags << 8 | c << 32. Atomic words: see the top of the file. */
struct knit__tl_rec {
    _Atomic uint64_t w[KNIT__TL_WORDS];
};

struct knit__tl_ring {
    /* Written by the owner thread only. */
    alignas(64) _Atomic uint64_t claim; /* records begun (incl. the one being
                                           written) */
    _Atomic uint64_t head;              /* records finished */
    /* Set before the ring is published (create, or under `mu`). */
    alignas(64) struct knit__tl_rec *recs;
    uint64_t mask;      /* capacity - 1 (capacity a power of two) */
    int worker;         /* worker id, or -1 */
    int ostid;          /* not a worker: the OS thread id of its owner */
    unsigned tid;       /* track id in the file */
    char name[64];      /* thread_name in the file */
    struct knit__tl_ring *next; /* in `extra` (mu) */
};

struct knit__timeline {
    char path[4096];    /* where destroy writes (path or path.N) */
    uint64_t cap;       /* events per ring */
    int64_t epoch;      /* knit__now_ns() at create: ts 0 in the file */
    uint64_t gen;       /* the pool handle's gen: keys the TLS cache */
    unsigned nworkers;
    struct knit__tl_ring *rings;      /* nworkers of them */
    pthread_mutex_t mu;               /* guards extra, next_tid, writes */
    struct knit__tl_ring *extra;      /* other threads' rings (mu) */
    unsigned next_tid;                /* (mu) */
    _Atomic uint64_t lost;            /* records no ring could take (a
                                         ring allocation failed) */
    _Atomic uint32_t next_pipeline;   /* pipeline ids, from 1 */
};

struct knit__pool;
struct knit__worker;

/* Reads options/env, allocates and sets p->tl (NULL when off). KNIT_EINVAL
 * (bad capacity, empty path), KNIT_EIO (path not writable), KNIT_ENOMEM. */
int knit__tl_create(struct knit__pool *p, const char *opt_path,
                    size_t opt_events);
/* Writes the file (path NULL: tl->path). */
int knit__tl_write(struct knit__pool *p, const char *path);
void knit__tl_destroy(struct knit__timeline *tl);

/* Hooks (timeline on only: the caller tests p->tl). `w`: the calling
 * worker of p, or NULL for any other thread. The end of a span is now. */
/* Returns the end time it recorded. */
int64_t knit__tl_task(struct knit__pool *p, const struct knit__worker *w,
                      uintptr_t fn, const char *label, int64_t t0,
                      unsigned depth, bool help);
/* A stolen fork-join frame's child ran (frame.c): a span and a steal
 * from consumer `victim`'s fork deque. */
void knit__tl_frame(struct knit__pool *p, const struct knit__worker *w,
                    uintptr_t fn, const char *label, int64_t t0, unsigned depth,
                    bool help, unsigned victim);
void knit__tl_claim(struct knit__pool *p, const struct knit__worker *w,
                    const void *carpet, unsigned lanes);
void knit__tl_steal(struct knit__pool *p, const struct knit__worker *w,
                    unsigned victim);
void knit__tl_await(struct knit__pool *p, const struct knit__worker *w,
                    int64_t t0, int64_t t1, unsigned ran);
/* For code that does not know whether it runs on a worker (pipelines,
 * parallel_for): a span from t0 to now, or an instant (t0 < 0: now). */
void knit__tl_self(struct knit__pool *p, unsigned kind, int64_t t0, uint64_t a,
                   uint64_t b, uint32_t c);

/* The calling thread's ring: the worker's, or this thread's own (made on
 * first use); NULL if none could be made (the record is counted lost). */
struct knit__tl_ring *knit__tl_ring_other(struct knit__timeline *tl);

static inline struct knit__tl_ring *
knit__tl_ring_of(struct knit__timeline *tl, const struct knit__worker *w,
                 unsigned wid) {
    return w != NULL ? &tl->rings[wid] : knit__tl_ring_other(tl);
}

/* Appends one record. Owner thread only. */
static inline void knit__tl_put(struct knit__tl_ring *r, unsigned kind,
                                unsigned flags, int64_t t0, int64_t t1,
                                uintptr_t label, uint64_t a, uint64_t b,
                                uint32_t c) {
    uint64_t h = atomic_load_explicit(&r->claim, memory_order_relaxed);
    /* Announce the overwrite of slot h & mask (record h - capacity) before
     * any word of it changes. Each word is then stored with release (no
     * standalone fence: TSan does not model those): a reader whose acquire
     * load of a word reads a new value also sees this claim in its later
     * load of `claim` (knit__tl_ring_copy), and drops the record. On x86
     * release stores are plain stores. */
    atomic_store_explicit(&r->claim, h + 1, memory_order_relaxed);
    struct knit__tl_rec *s = &r->recs[h & r->mask];
    atomic_store_explicit(&s->w[0], (uint64_t)t0, memory_order_release);
    atomic_store_explicit(&s->w[1], (uint64_t)(t1 - t0), memory_order_release);
    atomic_store_explicit(&s->w[2], (uint64_t)label, memory_order_release);
    atomic_store_explicit(&s->w[3], a, memory_order_release);
    atomic_store_explicit(&s->w[4], b, memory_order_release);
    atomic_store_explicit(&s->w[5], kind | flags << 8 | (uint64_t)c << 32,
                          memory_order_release);
    /* release: the record's words happen before a reader that acquires
     * this head value (knit__tl_ring_copy's first load). */
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

#endif
