/* The timeline: rings, the Chrome Trace Event JSON writer, and the public
 * calls knit_task_label and knit_pool_timeline_write. The recording side
 * (knit__tl_put) and the invariants are in timeline.h.
 *
 * Lock rules: the timeline lock (tl->mu) guards the list of other
 * threads' rings and serialises writers of the file. It is innermost: a
 * hook may take it (a thread's first record makes its ring) while holding
 * a pipeline lock, and nothing else is taken while it is held. The writer
 * takes the pool lock (to map carpets to their owners) and releases it
 * before it takes the timeline lock.
 */
#define _GNU_SOURCE
#include "runtime/timeline.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"
#include "runtime/pool.h"

/* The knit version in the file's metadata. No version macro exists yet
 * (KNIT_VERSION_* is being added elsewhere); until then a local string. */
#define KNIT__TL_STR2(x) #x
#define KNIT__TL_STR(x) KNIT__TL_STR2(x)
#if defined(KNIT_VERSION_MAJOR) && defined(KNIT_VERSION_MINOR) && \
    defined(KNIT_VERSION_PATCH)
#define KNIT__TL_VERSION                                              \
    KNIT__TL_STR(KNIT_VERSION_MAJOR)                                  \
    "." KNIT__TL_STR(KNIT_VERSION_MINOR) "." KNIT__TL_STR(KNIT_VERSION_PATCH)
#else
#define KNIT__TL_VERSION "0.0.0-dev"
#endif

/* ---- path.N: how many pools of this process used each path ---- */

struct knit__tl_path_use {
    struct knit__tl_path_use *next;
    unsigned uses;
    char path[];
};
static pthread_mutex_t knit__tl_paths_lock = PTHREAD_MUTEX_INITIALIZER;
static struct knit__tl_path_use *knit__tl_paths;

/* The n-th pool (from 0) that asks for `path` gets path, then path.1,
 * path.2, ... Returns -1 without memory. */
static int knit__tl_path_take(const char *path, char *out, size_t cap) {
    pthread_mutex_lock(&knit__tl_paths_lock);
    struct knit__tl_path_use *u = knit__tl_paths;
    while (u != NULL && strcmp(u->path, path) != 0) u = u->next;
    if (u == NULL) {
        size_t n = strlen(path) + 1;
        u = knit__malloc(sizeof *u + n);
        if (u == NULL) {
            pthread_mutex_unlock(&knit__tl_paths_lock);
            return -1;
        }
        memcpy(u->path, path, n);
        u->uses = 0;
        u->next = knit__tl_paths;
        knit__tl_paths = u;
    }
    unsigned k = u->uses++;
    pthread_mutex_unlock(&knit__tl_paths_lock);
    if (k == 0)
        snprintf(out, cap, "%s", path);
    else
        snprintf(out, cap, "%s.%u", path, k);
    return 0;
}

/* ---- create / destroy ---- */

static int knit__tl_ring_init(struct knit__tl_ring *r, uint64_t cap) {
    atomic_init(&r->claim, 0);
    atomic_init(&r->head, 0);
    r->mask = cap - 1;
    r->next = NULL;
    r->recs = knit__aligned_alloc(64, cap * sizeof *r->recs);
    if (r->recs == NULL) return -1;
    /* Not shared yet: plain zeroes are fine (the reader never looks past
     * head). memset on atomics of integer type is what atomic_init of 0
     * does on this ABI; spelled out per word to stay within the rules. */
    for (uint64_t i = 0; i < cap; i++)
        for (int k = 0; k < KNIT__TL_WORDS; k++) atomic_init(&r->recs[i].w[k], 0);
    return 0;
}

static int knit__tl_parse_events(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-') return -1;
    *out = v;
    return 0;
}

int knit__tl_create(struct knit__pool *p, const char *opt_path,
                    size_t opt_events) {
    p->tl = NULL;
    const char *path = opt_path;
    bool from_env = false;
    if (path == NULL) {
        path = getenv("KNIT_TIMELINE");
        if (path != NULL && path[0] == '\0') path = NULL; /* set but empty: off */
        from_env = true;
    }
    uint64_t cap = opt_events;
    if (cap != 0 && (cap < KNIT__TL_MIN_EVENTS || cap > KNIT__TL_MAX_EVENTS))
        return knit__fail(KNIT_EINVAL,
                          "timeline_events=%zu must be between %u and %u "
                          "(0: $KNIT_TIMELINE_EVENTS, else %u)",
                          opt_events, KNIT__TL_MIN_EVENTS, KNIT__TL_MAX_EVENTS,
                          KNIT__TL_DEFAULT_EVENTS);
    if (cap == 0) {
        const char *env = getenv("KNIT_TIMELINE_EVENTS");
        if (env != NULL && env[0] != '\0') {
            if (knit__tl_parse_events(env, &cap) != 0 ||
                cap < KNIT__TL_MIN_EVENTS || cap > KNIT__TL_MAX_EVENTS)
                return knit__fail(KNIT_EINVAL,
                                  "KNIT_TIMELINE_EVENTS='%s' must be a number "
                                  "between %u and %u",
                                  env, KNIT__TL_MIN_EVENTS, KNIT__TL_MAX_EVENTS);
        } else {
            cap = KNIT__TL_DEFAULT_EVENTS;
        }
    }
    if (path == NULL) return 0; /* off: nothing allocated */
#ifdef KNIT_NO_TIMELINE
    return 0; /* built without the hooks: always off */
#endif
    if (path[0] == '\0')
        return knit__fail(KNIT_EINVAL,
                          "options.timeline is \"\": give a file name, or NULL "
                          "for $KNIT_TIMELINE");
    if (strlen(path) > 4000)
        return knit__fail(KNIT_EINVAL, "%s: the timeline path is longer than "
                          "4000 bytes", from_env ? "KNIT_TIMELINE" : "options.timeline");
    while (cap & (cap - 1)) cap += cap & -cap; /* round up to a power of two */

    struct knit__timeline *tl = knit__calloc(1, sizeof *tl);
    if (tl == NULL) return knit__fail(KNIT_ENOMEM, "timeline: no memory");
    if (knit__tl_path_take(path, tl->path, sizeof tl->path) != 0) {
        free(tl);
        return knit__fail(KNIT_ENOMEM, "timeline: no memory");
    }
    /* Checked now, so a bad path fails the create rather than the final
     * write in destroy (which cannot report it). */
    FILE *f = fopen(tl->path, "w");
    if (f == NULL) {
        int e = errno;
        free(tl);
        return knit__fail(KNIT_EIO, "timeline (%s): cannot open '%s' for "
                          "writing: %s",
                          from_env ? "KNIT_TIMELINE" : "options.timeline",
                          path, strerror(e));
    }
    fclose(f);
    tl->cap = cap;
    tl->epoch = knit__now_ns();
    tl->gen = p->handle->gen;
    tl->nworkers = p->threads;
    tl->next_tid = p->threads + 1;
    atomic_init(&tl->lost, 0);
    atomic_init(&tl->next_pipeline, 1);
    pthread_mutex_init(&tl->mu, NULL);
    tl->rings = knit__calloc(p->threads, sizeof *tl->rings);
    bool ok = tl->rings != NULL;
    for (unsigned i = 0; ok && i < p->threads; i++) {
        struct knit__tl_ring *r = &tl->rings[i];
        if (knit__tl_ring_init(r, cap) != 0) {
            ok = false;
            break;
        }
        r->worker = (int)i;
        r->ostid = 0;
        r->tid = i + 1;
        snprintf(r->name, sizeof r->name, "knit w%u (%s)", i, p->ops->name);
    }
    if (!ok) {
        knit__tl_destroy(tl);
        return knit__fail(KNIT_ENOMEM, "timeline: no memory for %u rings of "
                          "%" PRIu64 " events", p->threads, cap);
    }
    p->tl = tl;
    return 0;
}

void knit__tl_destroy(struct knit__timeline *tl) {
    if (tl == NULL) return;
    if (tl->rings != NULL)
        for (unsigned i = 0; i < tl->nworkers; i++) free(tl->rings[i].recs);
    free(tl->rings);
    struct knit__tl_ring *r = tl->extra;
    while (r != NULL) {
        struct knit__tl_ring *next = r->next;
        free(r->recs);
        free(r);
        r = next;
    }
    pthread_mutex_destroy(&tl->mu);
    free(tl);
}

/* ---- other threads' rings ---- */

/* This thread's ring of the pool it used last (one-entry cache, keyed by
 * the pool's gen, which is never reused). */
static _Thread_local struct {
    uint64_t gen;
    struct knit__tl_ring *ring;
} knit__tl_cache;

static _Thread_local pid_t knit__tl_tid;

static pid_t knit__tl_gettid(void) {
    if (knit__tl_tid == 0) knit__tl_tid = (pid_t)syscall(SYS_gettid);
    return knit__tl_tid;
}

struct knit__tl_ring *knit__tl_ring_other(struct knit__timeline *tl) {
    if (knit__tl_cache.gen == tl->gen) return knit__tl_cache.ring;
    pid_t me = knit__tl_gettid();
    pthread_mutex_lock(&tl->mu);
    struct knit__tl_ring *r = tl->extra;
    while (r != NULL && r->ostid != (int)me) r = r->next;
    if (r == NULL) {
        r = knit__malloc(sizeof *r);
        if (r != NULL && knit__tl_ring_init(r, tl->cap) != 0) {
            free(r);
            r = NULL;
        }
        if (r != NULL) {
            r->worker = -1;
            r->ostid = (int)me;
            r->tid = tl->next_tid++;
            char tname[16] = "";
            pthread_getname_np(pthread_self(), tname, sizeof tname);
            snprintf(r->name, sizeof r->name, "knit %s (tid %d)",
                     tname[0] ? tname : "thread", (int)me);
            /* Published to the writer of the file by the timeline lock. */
            r->next = tl->extra;
            tl->extra = r;
        }
    }
    pthread_mutex_unlock(&tl->mu);
    if (r == NULL) {
        /* relaxed: a statistic, read by the file writer. */
        atomic_fetch_add_explicit(&tl->lost, 1, memory_order_relaxed);
        return NULL;
    }
    knit__tl_cache.gen = tl->gen;
    knit__tl_cache.ring = r;
    return r;
}

/* ---- hooks ---- */

int64_t knit__tl_task(struct knit__pool *p, const struct knit__worker *w,
                      uintptr_t fn, const char *label, int64_t t0,
                      unsigned depth, bool help) {
    int64_t t1 = knit__now_ns();
    struct knit__tl_ring *r = knit__tl_ring_of(p->tl, w, w ? w->id : 0);
    if (r == NULL) return t1;
    unsigned flags = (label != NULL ? KNIT__TL_F_STR : 0) | (help ? KNIT__TL_F_HELP : 0);
    knit__tl_put(r, KNIT__TL_TASK, flags, t0, t1,
                 label != NULL ? (uintptr_t)label : fn, depth, 0, 0);
    return t1;
}

void knit__tl_frame(struct knit__pool *p, const struct knit__worker *w,
                    uintptr_t fn, const char *label, int64_t t0, unsigned depth,
                    bool help, unsigned victim) {
    int64_t t1 = knit__now_ns();
    struct knit__tl_ring *r = knit__tl_ring_of(p->tl, w, w ? w->id : 0);
    if (r == NULL) return;
    knit__tl_put(r, KNIT__TL_STEAL, KNIT__TL_F_FRAME, t0, t0, 0, victim, 0, 0);
    unsigned flags = KNIT__TL_F_FRAME | (label != NULL ? KNIT__TL_F_STR : 0) |
                     (help ? KNIT__TL_F_HELP : 0);
    knit__tl_put(r, KNIT__TL_TASK, flags, t0, t1,
                 label != NULL ? (uintptr_t)label : fn, depth, 0, 0);
}

void knit__tl_claim(struct knit__pool *p, const struct knit__worker *w,
                    const void *carpet, unsigned lanes) {
    struct knit__tl_ring *r = knit__tl_ring_of(p->tl, w, w ? w->id : 0);
    if (r == NULL) return;
    int64_t t = knit__now_ns();
    knit__tl_put(r, KNIT__TL_CLAIM, 0, t, t, 0, lanes, (uintptr_t)carpet, 0);
}

void knit__tl_steal(struct knit__pool *p, const struct knit__worker *w,
                    unsigned victim) {
    struct knit__tl_ring *r = knit__tl_ring_of(p->tl, w, w ? w->id : 0);
    if (r == NULL) return;
    int64_t t = knit__now_ns();
    knit__tl_put(r, KNIT__TL_STEAL, 0, t, t, 0, victim, 0, 0);
}

void knit__tl_await(struct knit__pool *p, const struct knit__worker *w,
                    int64_t t0, int64_t t1, unsigned ran) {
    struct knit__tl_ring *r = knit__tl_ring_of(p->tl, w, w ? w->id : 0);
    if (r == NULL) return;
    knit__tl_put(r, KNIT__TL_AWAIT, 0, t0, t1, 0, ran, 0, 0);
}

void knit__tl_self(struct knit__pool *p, unsigned kind, int64_t t0, uint64_t a,
                   uint64_t b, uint32_t c) {
    const struct knit__tls *tls = knit__tls_get();
    const struct knit__worker *w =
        tls->worker != NULL && tls->worker->pool == p ? tls->worker : NULL;
    struct knit__tl_ring *r = knit__tl_ring_of(p->tl, w, w ? w->id : 0);
    if (r == NULL) return;
    int64_t t1 = knit__now_ns();
    knit__tl_put(r, kind, 0, t0 < 0 ? t1 : t0, t1, 0, a, b, c);
}

/* ---- the file ---- */

/* A copy of the records a ring kept: [first, first + n) by index. */
struct knit__tl_copy {
    uint64_t first, n;
    uint64_t (*w)[KNIT__TL_WORDS];
};

/* Copies a ring that its owner may be writing (the reader side of the
 * sequence-lock in timeline.h). */
static int knit__tl_ring_copy(const struct knit__tl_ring *r,
                              struct knit__tl_copy *out) {
    uint64_t cap = r->mask + 1;
    /* acquire: pairs with the owner's release store of head; records
     * below hd are complete (unless overwritten since: checked below). */
    uint64_t hd = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t lo = hd > cap ? hd - cap : 0;
    out->w = knit__malloc((size_t)(hd - lo + 1) * sizeof *out->w);
    if (out->w == NULL) return -1;
    /* acquire per word: pairs with the owner's release store of that
     * word. If a word copied here came from an overwrite of record i
     * (which began with claim = i + cap + 1, sequenced before the word's
     * store), the load of claim below sees that claim or a later one, so
     * record i is dropped. The acquire loads also keep the claim load
     * from moving above them. */
    for (uint64_t i = lo; i < hd; i++)
        for (int k = 0; k < KNIT__TL_WORDS; k++)
            out->w[i - lo][k] = atomic_load_explicit(
                &r->recs[i & r->mask].w[k], memory_order_acquire);
    uint64_t cl = atomic_load_explicit(&r->claim, memory_order_relaxed);
    uint64_t valid = cl > cap ? cl - cap : 0; /* records >= valid are intact */
    uint64_t first = lo > valid ? lo : valid;
    if (first > hd) first = hd;
    out->first = first;
    out->n = hd - first;
    if (first > lo) memmove(out->w, out->w + (first - lo), (size_t)out->n * sizeof *out->w);
    return 0;
}

/* JSON string body (no quotes). */
static void knit__tl_json_str(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

/* Microseconds with three decimals (ns precision) from ns. */
static void knit__tl_us(FILE *f, int64_t ns) {
    if (ns < 0) ns = 0;
    fprintf(f, "%" PRId64 ".%03d", ns / 1000, (int)(ns % 1000));
}

/* Function names, looked up once per function. */
struct knit__tl_names {
    uintptr_t fn[128];
    char name[128][96];
};

static const char *knit__tl_fn_name(struct knit__tl_names *c, uintptr_t fn) {
    unsigned i = (unsigned)((fn >> 4) * 0x9E3779B1u) % 128;
    if (c->fn[i] == fn && fn != 0) return c->name[i];
    c->fn[i] = fn;
    Dl_info info;
    memset(&info, 0, sizeof info);
    if (fn != 0 && dladdr((void *)fn, &info) != 0 && info.dli_sname != NULL &&
        (uintptr_t)info.dli_saddr == fn) {
        snprintf(c->name[i], sizeof c->name[i], "%s", info.dli_sname);
    } else if (fn != 0 && info.dli_fname != NULL) {
        /* No symbol (a static function, or no -rdynamic): the address,
         * and where it is in its object for addr2line. */
        const char *base = strrchr(info.dli_fname, '/');
        snprintf(c->name[i], sizeof c->name[i], "fn@0x%" PRIxPTR " (%s+0x%" PRIxPTR ")",
                 fn, base ? base + 1 : info.dli_fname,
                 fn - (uintptr_t)info.dli_fbase);
    } else {
        snprintf(c->name[i], sizeof c->name[i], "fn@0x%" PRIxPTR, fn);
    }
    return c->name[i];
}

/* Carpets by address: their index in the registry and owner. */
struct knit__tl_carpet {
    uintptr_t c;
    unsigned index;
    int owner; /* worker id; -1: a thread outside the pool; -2: unknown */
};

static int knit__tl_carpet_cmp(const void *a, const void *b) {
    uintptr_t x = ((const struct knit__tl_carpet *)a)->c;
    uintptr_t y = ((const struct knit__tl_carpet *)b)->c;
    return x < y ? -1 : x > y;
}

static const struct knit__tl_carpet *
knit__tl_carpet_find(const struct knit__tl_carpet *m, size_t n, uintptr_t c) {
    struct knit__tl_carpet key = {c, 0, 0};
    return bsearch(&key, m, n, sizeof *m, knit__tl_carpet_cmp);
}

static void knit__tl_consumer(FILE *f, const struct knit__pool *p, uint64_t v) {
    if (v < p->threads)
        fprintf(f, "w%" PRIu64, v);
    else
        fprintf(f, "helper %" PRIu64, v - p->threads);
}

struct knit__tl_out {
    FILE *f;
    const struct knit__pool *p;
    int pid;
    bool first;
    struct knit__tl_names *names;
    const struct knit__tl_carpet *carpets;
    size_t ncarpets;
};

static void knit__tl_head(struct knit__tl_out *o, const char *ph,
                          const struct knit__tl_ring *r, int64_t t0) {
    fprintf(o->f, "%s\n{\"ph\":\"%s\",\"pid\":%d,\"tid\":%u,\"ts\":",
            o->first ? "" : ",", ph, o->pid, r->tid);
    o->first = false;
    knit__tl_us(o->f, t0);
}

static void knit__tl_emit(struct knit__tl_out *o, const struct knit__tl_ring *r,
                          const uint64_t *w, int64_t epoch) {
    FILE *f = o->f;
    int64_t t0 = (int64_t)w[0] - epoch, dur = (int64_t)w[1];
    uintptr_t label = (uintptr_t)w[2];
    uint64_t a = w[3], b = w[4];
    unsigned kind = (unsigned)(w[5] & 0xff), flags = (unsigned)(w[5] >> 8 & 0xff);
    uint32_t c = (uint32_t)(w[5] >> 32);
    switch (kind) {
    case KNIT__TL_TASK:
        knit__tl_head(o, "X", r, t0);
        fputs(",\"dur\":", f);
        knit__tl_us(f, dur);
        /* A stolen frame's child: "frame" (tasks_run does not count it). */
        fprintf(f, ",\"cat\":\"%s\",\"name\":\"",
                (flags & KNIT__TL_F_FRAME) ? "frame" : "task");
        if (flags & KNIT__TL_F_STR)
            knit__tl_json_str(f, (const char *)label);
        else
            knit__tl_json_str(f, knit__tl_fn_name(o->names, label));
        fprintf(f, "\",\"args\":{\"depth\":%" PRIu64 ",\"help\":%d}}", a,
                (flags & KNIT__TL_F_HELP) ? 1 : 0);
        break;
    case KNIT__TL_PARK:
    case KNIT__TL_AWAIT:
    case KNIT__TL_STALL:
    case KNIT__TL_STAGE:
    case KNIT__TL_PIECE:
        knit__tl_head(o, "X", r, t0);
        fputs(",\"dur\":", f);
        knit__tl_us(f, dur);
        if (kind == KNIT__TL_PARK)
            fputs(",\"cat\":\"idle\",\"name\":\"parked\"}", f);
        else if (kind == KNIT__TL_AWAIT)
            fprintf(f, ",\"cat\":\"await\",\"name\":\"await\",\"args\":{\"ran\":%" PRIu64 "}}", a);
        else if (kind == KNIT__TL_STALL)
            fprintf(f, ",\"cat\":\"stall\",\"name\":\"pipeline %" PRIu64
                    " full\",\"args\":{\"pipeline\":%" PRIu64 "}}", b, b);
        else if (kind == KNIT__TL_STAGE)
            fprintf(f, ",\"cat\":\"stage\",\"name\":\"stage %u\",\"args\":{\"pipeline\":%"
                    PRIu64 ",\"item\":%" PRIu64 ",\"stage\":%u}}", c, b, a, c);
        else
            fprintf(f, ",\"cat\":\"piece\",\"name\":\"parallel_for piece\",\"args\":{"
                    "\"begin\":%" PRIu64 ",\"end\":%" PRIu64 "}}", a, b);
        break;
    case KNIT__TL_CLAIM: {
        const struct knit__tl_carpet *cp =
            knit__tl_carpet_find(o->carpets, o->ncarpets, (uintptr_t)b);
        knit__tl_head(o, "i", r, t0);
        fprintf(f, ",\"s\":\"t\",\"cat\":\"claim\",\"name\":\"claim\",\"args\":{"
                "\"lanes\":%" PRIu64 ",\"carpet\":%d,\"owner\":\"", a,
                cp ? (int)cp->index : -1);
        if (cp == NULL || cp->owner == -2)
            fputs("?", f);
        else if (cp->owner == -1)
            fputs("outside", f);
        else
            fprintf(f, "w%d", cp->owner);
        fputs("\"}}", f);
        /* Taking a batch another worker's tasks published is a steal. */
        if (cp != NULL && cp->owner >= 0 && cp->owner != r->worker) {
            knit__tl_head(o, "i", r, t0);
            fprintf(f, ",\"s\":\"t\",\"cat\":\"steal\",\"name\":\"steal\",\"args\":{"
                    "\"from\":\"carpet %u of w%d\",\"lanes\":%" PRIu64 "}}",
                    cp->index, cp->owner, a);
        }
        break;
    }
    case KNIT__TL_STEAL:
        knit__tl_head(o, "i", r, t0);
        fprintf(f, ",\"s\":\"t\",\"cat\":\"steal\",\"name\":\"steal\",\"args\":{"
                "\"from\":\"%s of ", (flags & KNIT__TL_F_FRAME) ? "fork deque" : "deque");
        knit__tl_consumer(f, o->p, a);
        fputs("\",\"lanes\":1}}", f);
        break;
    case KNIT__TL_INFLIGHT:
        knit__tl_head(o, "C", r, t0);
        fprintf(f, ",\"name\":\"pipeline %" PRIu64 " in flight\",\"args\":{"
                "\"items\":%" PRIu64 "}}", b, a);
        break;
    default:
        break; /* unknown kinds are not written */
    }
}

struct knit__tl_sum {
    uint64_t kept, dropped;
    unsigned rings;
    bool nomem;
};

/* One track: its names, then the records the ring kept. */
static void knit__tl_emit_ring(struct knit__tl_out *o, const struct knit__tl_ring *r,
                               int64_t epoch, struct knit__tl_sum *sum) {
    struct knit__tl_copy cp;
    if (knit__tl_ring_copy(r, &cp) != 0) {
        sum->nomem = true;
        return;
    }
    sum->rings++;
    knit__tl_head(o, "M", r, 0);
    fputs(",\"name\":\"thread_name\",\"args\":{\"name\":\"", o->f);
    knit__tl_json_str(o->f, r->name);
    fputs("\"}}", o->f);
    knit__tl_head(o, "M", r, 0);
    fprintf(o->f, ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%u}}",
            r->tid);
    for (uint64_t k = 0; k < cp.n; k++) knit__tl_emit(o, r, cp.w[k], epoch);
    sum->dropped += cp.first;
    sum->kept += cp.n;
    free(cp.w);
}

int knit__tl_write(struct knit__pool *p, const char *path) {
    struct knit__timeline *tl = p->tl;
    if (path == NULL) path = tl->path;
    /* Carpets and their owners, under the pool lock (which guards the
     * producer list and every producer's `mine`). */
    struct knit__tl_carpet *carpets = NULL;
    size_t ncarpets = 0;
    pthread_mutex_lock(&p->handle->lock);
    /* acquire: pairs with the release that registered each carpet. */
    uint32_t nall = atomic_load_explicit(&p->nall, memory_order_acquire);
    carpets = knit__malloc((nall + 1) * sizeof *carpets);
    if (carpets != NULL) {
        for (uint32_t i = 0; i < nall; i++) {
            carpets[i].c =
                (uintptr_t)atomic_load_explicit(&p->all[i], memory_order_acquire);
            carpets[i].index = i;
            carpets[i].owner = -2;
        }
        ncarpets = nall;
        qsort(carpets, ncarpets, sizeof *carpets, knit__tl_carpet_cmp);
        for (struct knit__producer *rec = p->producers; rec != NULL; rec = rec->next)
            for (unsigned k = 0; k < rec->nmine; k++) {
                struct knit__tl_carpet *cp = (struct knit__tl_carpet *)
                    knit__tl_carpet_find(carpets, ncarpets, (uintptr_t)rec->mine[k]);
                if (cp != NULL) cp->owner = rec->worker >= 0 ? rec->worker : -1;
            }
    }
    pthread_mutex_unlock(&p->handle->lock);
    struct knit__tl_names *names = knit__calloc(1, sizeof *names);
    if (carpets == NULL || names == NULL) {
        free(carpets);
        free(names);
        return knit__fail(KNIT_ENOMEM, "timeline: no memory to write '%s'", path);
    }
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        int e = errno;
        free(carpets);
        free(names);
        return knit__fail(KNIT_EIO, "timeline: cannot open '%s' for writing: %s",
                          path, strerror(e));
    }
    struct knit__tl_out o = {f, p, (int)getpid(), true, names, carpets, ncarpets};
    struct knit__tl_sum sum = {0, 0, 0, false};
    pthread_mutex_lock(&tl->mu);
    fputs("{\"traceEvents\":[", f);
    knit__tl_head(&o, "M", &tl->rings[0], 0);
    fprintf(f, ",\"name\":\"process_name\",\"args\":{\"name\":\"knit pool (%s, %u "
            "threads)\"}}", p->ops->name, p->threads);
    for (unsigned i = 0; i < tl->nworkers; i++)
        knit__tl_emit_ring(&o, &tl->rings[i], tl->epoch, &sum);
    for (const struct knit__tl_ring *r = tl->extra; r != NULL; r = r->next)
        knit__tl_emit_ring(&o, r, tl->epoch, &sum);
    pthread_mutex_unlock(&tl->mu);
    /* relaxed: a statistic (see knit__tl_ring_other). */
    uint64_t lost = atomic_load_explicit(&tl->lost, memory_order_relaxed);
    fprintf(f, "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"knit_version\":\"%s\","
            "\"sched\":\"", KNIT__TL_VERSION);
    knit__tl_json_str(f, p->ops->name);
    fprintf(f, "\",\"threads\":%u,\"capacity\":%" PRIu64 ",\"events\":%" PRIu64
            ",\"dropped\":%" PRIu64 ",\"tracks\":%u,\"clock\":\"CLOCK_MONOTONIC\"}}\n",
            p->threads, tl->cap, sum.kept, sum.dropped + lost, sum.rings);
    int werr = ferror(f);
    int cerr = fclose(f);
    free(carpets);
    free(names);
    if (sum.nomem) return knit__fail(KNIT_ENOMEM, "timeline: no memory to copy a ring");
    if (werr || cerr != 0)
        return knit__fail(KNIT_EIO, "timeline: writing '%s' failed: %s", path,
                          strerror(errno));
    return 0;
}

/* ---- public ---- */

int knit_task_label(knit_task *task, const char *label) {
    if (task == NULL) return knit__fail(KNIT_EINVAL, "knit_task_label: task is NULL");
    task->label = label;
    return 0;
}

int knit_pool_timeline_write(knit_pool *h, const char *path) {
    int rc = knit__pool_enter(h, true);
    if (rc < 0) return rc;
    struct knit__pool *p = h->p;
    if (p->tl == NULL) {
        knit__pool_exit(h);
        return knit__fail(KNIT_ENOENT, "knit_pool_timeline_write: the pool has no "
                          "timeline (set options.timeline or $KNIT_TIMELINE)");
    }
    if (path != NULL && path[0] == '\0') {
        knit__pool_exit(h);
        return knit__fail(KNIT_EINVAL, "knit_pool_timeline_write: empty path");
    }
    rc = knit__tl_write(p, path);
    knit__pool_exit(h);
    return rc;
}
