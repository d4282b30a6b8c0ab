/* The payload arena: a jemalloc arena confined to one reserved region.
 *
 * The region
 * ----------
 * knit__arena_create maps `cap` bytes of address space (no physical memory
 * until touched), starting on a KNIT__ARENA_ALIGN (2 MiB) boundary, and
 * creates a jemalloc arena with the extent hooks below. jemalloc obtains
 * memory for this arena, its extents (slabs, large allocations) and its
 * own metadata for it (the "base" blocks, which also go through the hooks
 * of an arena made by arenas.create), only by calling the alloc hook, and
 * the alloc hook hands out only pieces of the region. No other hook creates
 * memory: split and merge relabel ranges jemalloc already holds, and merge
 * refuses unless both halves are in the region. So every byte this arena
 * ever returns lies in [base, base + cap), and cap is a hard cap.
 *
 * The free ranges
 * ---------------
 * The hooks keep the parts of the region jemalloc does not hold as an array
 * of free ranges, under `lock`, sorted by address, each non-empty and
 * page-aligned, no two overlapping or touching (a returned range is
 * coalesced with its neighbours). Invariant: the free ranges and the ranges
 * jemalloc holds partition the region; `reserved` is the size of the
 * latter. alloc takes a range (first fit honouring alignment, or exactly
 * new_addr); dalloc and destroy give one back. The array never grows: n
 * disjoint, non-touching, page-aligned ranges need at least 2n - 1 pages,
 * so (pages + 1) / 2 entries always suffice. It is mapped (NORESERVE) at
 * create rather than malloc'd: the hooks run inside jemalloc, and malloc
 * may be jemalloc too (see "Two allocators" below).
 *
 * Every free byte reads as zero: the region starts as fresh anonymous
 * memory, and a range is given back only after MADV_DONTNEED (after which
 * private anonymous pages read as zero) or, when that fails (locked
 * pages), after memset. So alloc always reports *zero = true, and dalloc
 * also returns the physical pages to the system.
 *
 * The hooks
 * ---------
 *   alloc         first fit in the free ranges, aligned, or exactly
 *                 new_addr if that range is free; NULL when nothing fits
 *                 (jemalloc then falls back to an exact-size request, and
 *                 if that fails too, mallocx fails). *zero = *commit = true.
 *   dalloc        zero the range, give it back, return false (done). We
 *                 take ranges back rather than opt out (true) so that space
 *                 jemalloc has purged is free for any size class again and
 *                 `reserved` means what jemalloc really holds.
 *   destroy       the same, for retained extents at arena destruction.
 *   commit        memory is always committed (implicitly: the kernel
 *                 overcommits and NORESERVE), so committing only has to
 *                 make the pages zero: MADV_DONTNEED, return false. It is
 *                 not reached in practice, since nothing is decommitted.
 *   decommit      return true (opt out): pages stay committed. Giving back
 *                 physical memory is what purge and dalloc are for.
 *   purge_lazy    MADV_FREE (false on success).
 *   purge_forced  MADV_DONTNEED: the pages read as zero afterwards.
 *   split         return false (allowed): both pieces stay in the region.
 *   merge         return false only if both pieces lie in this region and
 *                 are adjacent, else true (kept apart).
 * jemalloc may call any hook from any thread, concurrently: alloc, dalloc
 * and destroy take `lock`; the others touch only the range they are given
 * and the immutable base/cap.
 *
 * jemalloc's own caches
 * ---------------------
 * Allocations and frees pass MALLOCX_TCACHE_NONE: no thread cache ever
 * holds this arena's memory, which arena.<i>.destroy requires (and which
 * keeps freed payload memory from lingering in a per-thread cache). The
 * arena's dirty pages (freed, not yet purged) stay jemalloc's until decay;
 * when mallocx fails we purge the arena once (arena.<i>.purge, which hands
 * them to dalloc) and retry, so NULL means the region really is full,
 * not that jemalloc is sitting on free pages.
 *
 * How full "full" is: jemalloc grows an arena geometrically (2 MiB, then
 * larger steps; opt.retain keeps the unused tail of each step for later
 * extents), and when a step does not fit it asks for the exact extent
 * instead, so the region's tail is used tightly. Its first 2 MiB hold the
 * arena's metadata. A large allocation's extent is one page bigger than
 * its size class (opt.cache_oblivious), and tails of steps too small for
 * the next extent stay with jemalloc until destroy: e.g. a 64 MiB arena
 * holds 52 blocks of 1 MiB, 929 of 64 KiB, 15670 of 4 KiB. (Capping the
 * growth step, arena.<i>.retain_grow_limit, measured worse: it leaves more
 * of those tails.)
 *
 * Under AddressSanitizer
 * ----------------------
 * jemalloc is not instrumented, so ASan cannot see into this arena by
 * itself. We tell it through its manual poisoning interface instead: the
 * whole region is poisoned at create (a free range is nobody's), the alloc
 * hook unpoisons what it hands to jemalloc (jemalloc memsets its own
 * metadata there, through the intercepted memset), knit__arena_alloc
 * unpoisons exactly the bytes asked for and poisons the size class's tail,
 * and knit__arena_free poisons the block's usable size before jemalloc gets
 * it back; give_back poisons a range again once it is free. So a payload
 * read after its free or past its length is reported as use-after-poison,
 * with the arena code itself being what runs. (Not caught: a wild access
 * into a part of a fresh slab that no allocation has used yet.) jemalloc
 * touches freed blocks only from its own uninstrumented code. destroy
 * unpoisons the region before unmapping it, so that a later mapping at the
 * same address starts clean.
 *
 * Two allocators
 * --------------
 * Whether malloc is jemalloc depends on the program, not on knit: a Bazel
 * binary or a static link (-ljemalloc before libc) gets jemalloc's malloc;
 * an application that links only libknit.so gets glibc's, and jemalloc
 * then serves only the *allocx/mallctl calls below. So nothing may cross:
 * this file alone calls mallocx/sallocx/sdallocx, only on this arena's
 * blocks (knit__arena_free refuses a pointer outside the region, and
 * knit_payload_buf wraps only pointers the arena owns); everything else in
 * knit, and every knit_buf_malloced buffer, is malloc/free (base/alloc.h)
 * whichever malloc that is; knit_task_take_buf of inline bytes hands out a
 * malloc'ed copy with free as its free_fn. tools/install_test.sh runs a
 * program over every such path with glibc's malloc, under ASan as well.
 *
 * Counters
 * --------
 * in_use, high_water, allocations and failures are statistics: relaxed
 * RMWs, read with relaxed loads. No other memory is published through
 * them, so no ordering pairs with them; a stats snapshot is consistent per
 * counter, not across counters. `reserved` is written only under `lock`
 * (relaxed: the mutex orders the writers) and read without it by
 * stats_get and the failure message (relaxed, a statistic too).
 */
#define _GNU_SOURCE
#include "payload/arena.h"

#include <assert.h>
#include <errno.h>
#include <jemalloc/jemalloc.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define KNIT__ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KNIT__ARENA_ASAN 1
#endif
#endif

#ifdef KNIT__ARENA_ASAN
#include <sanitizer/asan_interface.h>
/* See "Under AddressSanitizer" at the top. */
static void knit__poison(const void *p, size_t n) {
    if (n != 0) __asan_poison_memory_region(p, n);
}
static void knit__unpoison(const void *p, size_t n) {
    if (n != 0) __asan_unpoison_memory_region(p, n);
}
#else
static void knit__poison(const void *p, size_t n) { (void)p, (void)n; }
static void knit__unpoison(const void *p, size_t n) { (void)p, (void)n; }
#endif

#define KNIT__ARENA_LINE 64u
/* jemalloc's HUGEPAGE on x86-64 and arm64: it asks for its metadata blocks
 * at this alignment, so the region starts on it and loses nothing there. */
#define KNIT__ARENA_ALIGN ((size_t)2 << 20)

/* A free range [start, end) of the region. */
struct knit__range {
    uintptr_t start, end;
};

struct knit__arena {
    /* FIRST: jemalloc passes this pointer to every hook, which casts it
     * back to the arena (knit__arena_of). It must outlive the jemalloc
     * arena, so it lives here until knit__arena_destroy. */
    extent_hooks_t hooks;
    /* Immutable after create. */
    uintptr_t base;          /* the region: [base, base + cap) */
    size_t cap;
    size_t page;             /* jemalloc's page size */
    unsigned ind;            /* the jemalloc arena's index */
    int flags;               /* MALLOCX_ARENA(ind) | MALLOCX_TCACHE_NONE */
    size_t purge_mib[3];     /* arena.<ind>.purge */
    size_t destroy_mib[3];   /* arena.<ind>.destroy */
    struct knit__range *ranges; /* the free ranges, under lock */
    size_t ranges_max;       /* entries mapped; never exceeded */
    size_t ranges_bytes;     /* bytes mapped for them */
    /* The hooks' state. */
    alignas(KNIT__ARENA_LINE) pthread_mutex_t lock;
    size_t nranges;          /* under lock */
    _Atomic uint64_t reserved; /* written under lock; see the top */
    /* Statistics, written by every alloc and free: their own line. */
    alignas(KNIT__ARENA_LINE) _Atomic uint64_t in_use;
    _Atomic uint64_t high_water;
    _Atomic uint64_t allocations;
    _Atomic uint64_t failures;
};

static_assert(offsetof(struct knit__arena, hooks) == 0,
              "the hooks come first: the hooks cast back to the arena");

static knit__arena *knit__arena_of(extent_hooks_t *h) {
    return (knit__arena *)(void *)h;
}

/* True iff [p, p + len) lies inside the region (len may be 0). */
static bool knit__in_region(const knit__arena *a, const void *p, size_t len) {
    uintptr_t s = (uintptr_t)p;
    return s >= a->base && s - a->base <= a->cap && len <= a->cap - (s - a->base);
}

/* ---- the free ranges (caller holds a->lock) ---------------------------- */

static void knit__ranges_insert(knit__arena *a, size_t i, uintptr_t s,
                                uintptr_t e) {
    /* Cannot overflow: see "The free ranges" at the top. */
    memmove(&a->ranges[i + 1], &a->ranges[i],
            (a->nranges - i) * sizeof *a->ranges);
    a->ranges[i].start = s;
    a->ranges[i].end = e;
    a->nranges++;
}

static void knit__ranges_erase(knit__arena *a, size_t i) {
    memmove(&a->ranges[i], &a->ranges[i + 1],
            (a->nranges - i - 1) * sizeof *a->ranges);
    a->nranges--;
}

/* Removes [s, s + size) from range i, which contains it. */
static void knit__ranges_carve(knit__arena *a, size_t i, uintptr_t s,
                               size_t size) {
    struct knit__range *r = &a->ranges[i];
    uintptr_t e = s + size;
    bool left = s > r->start, right = e < r->end;
    if (left && right) {
        uintptr_t old_end = r->end;
        r->end = s;
        knit__ranges_insert(a, i + 1, e, old_end);
    } else if (left) {
        r->end = s;
    } else if (right) {
        r->start = e;
    } else {
        knit__ranges_erase(a, i);
    }
}

/* Takes `size` bytes at an `alignment` boundary (first fit), or exactly at
 * new_addr if it is not NULL. Returns 0 when nothing fits. */
static uintptr_t knit__ranges_take(knit__arena *a, void *new_addr,
                                   size_t size, size_t alignment) {
    if (new_addr != NULL) {
        uintptr_t s = (uintptr_t)new_addr;
        if ((s & (alignment - 1)) != 0) return 0;
        for (size_t i = 0; i < a->nranges; i++) {
            struct knit__range *r = &a->ranges[i];
            if (s < r->start) return 0; /* sorted: in no later range */
            if (s >= r->end) continue;
            if (r->end - s < size) return 0;
            knit__ranges_carve(a, i, s, size);
            return s;
        }
        return 0;
    }
    for (size_t i = 0; i < a->nranges; i++) {
        struct knit__range *r = &a->ranges[i];
        /* No overflow: addresses are below 2^57 and alignment <= cap. */
        uintptr_t s = (r->start + alignment - 1) & ~(uintptr_t)(alignment - 1);
        if (s >= r->end || r->end - s < size) continue;
        knit__ranges_carve(a, i, s, size);
        return s;
    }
    return 0;
}

/* Gives [s, s + size) back, coalescing. Returns false (and changes
 * nothing) if any of it is already free: that would be a double give. */
static bool knit__ranges_give(knit__arena *a, uintptr_t s, size_t size) {
    uintptr_t e = s + size;
    /* i: the first range starting after s. */
    size_t lo = 0, hi = a->nranges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->ranges[mid].start <= s) lo = mid + 1;
        else hi = mid;
    }
    size_t i = lo;
    struct knit__range *prev = i > 0 ? &a->ranges[i - 1] : NULL;
    struct knit__range *next = i < a->nranges ? &a->ranges[i] : NULL;
    if (prev != NULL && prev->end > s) return false;
    if (next != NULL && next->start < e) return false;
    bool join_prev = prev != NULL && prev->end == s;
    bool join_next = next != NULL && next->start == e;
    if (join_prev && join_next) {
        prev->end = next->end;
        knit__ranges_erase(a, i);
    } else if (join_prev) {
        prev->end = e;
    } else if (join_next) {
        next->start = s;
    } else {
        knit__ranges_insert(a, i, s, e);
    }
    return true;
}

/* ---- the hooks ------------------------------------------------------------ */

/* Makes [p, p + len) read as zero and drops its physical pages. */
static void knit__zero_range(void *p, size_t len) {
    if (len == 0) return;
    if (madvise(p, len, MADV_DONTNEED) != 0) memset(p, 0, len);
}

static uint64_t knit__reserved_add(knit__arena *a, int64_t delta) {
    /* Under a->lock: the mutex orders the writers; relaxed suffices. */
    uint64_t r = atomic_load_explicit(&a->reserved, memory_order_relaxed);
    r += (uint64_t)delta;
    atomic_store_explicit(&a->reserved, r, memory_order_relaxed);
    return r;
}

static void *knit__hook_alloc(extent_hooks_t *h, void *new_addr, size_t size,
                              size_t alignment, bool *zero, bool *commit,
                              unsigned ind) {
    (void)ind;
    knit__arena *a = knit__arena_of(h);
    /* The contract promises page multiples and a power-of-two alignment;
     * the bound on the free-range array relies on the former. */
    if (size == 0 || size > a->cap || (size & (a->page - 1)) != 0 ||
        alignment == 0 || (alignment & (alignment - 1)) != 0 ||
        alignment > a->cap)
        return NULL;
    if (alignment < a->page) alignment = a->page;
    pthread_mutex_lock(&a->lock);
    uintptr_t s = knit__ranges_take(a, new_addr, size, alignment);
    if (s != 0) knit__reserved_add(a, (int64_t)size);
    pthread_mutex_unlock(&a->lock);
    if (s == 0) return NULL; /* leaves *zero and *commit alone */
    knit__unpoison((void *)s, size); /* jemalloc's now: it writes there */
    *zero = true;   /* every free byte is zero (see the top) */
    *commit = true; /* and committed */
    return (void *)s;
}

/* dalloc and destroy: zero the range outside the lock (it is still
 * jemalloc's until given back), then give it back. */
static bool knit__give_back(knit__arena *a, void *addr, size_t size) {
    if (size == 0 || !knit__in_region(a, addr, size) ||
        (((uintptr_t)addr | size) & (a->page - 1)) != 0)
        return false;
    /* Our own zeroing may memset; the range is poisoned again before it is
     * free, so no later alloc hook can race with the poisoning. */
    knit__unpoison(addr, size);
    knit__zero_range(addr, size);
    knit__poison(addr, size);
    pthread_mutex_lock(&a->lock);
    bool ok = knit__ranges_give(a, (uintptr_t)addr, size);
    if (ok) knit__reserved_add(a, -(int64_t)size);
    pthread_mutex_unlock(&a->lock);
    return ok;
}

static bool knit__hook_dalloc(extent_hooks_t *h, void *addr, size_t size,
                              bool committed, unsigned ind) {
    (void)committed; /* always true: decommit opts out */
    (void)ind;
    /* false: deallocated. true (not ours, or already free, which would be
     * a bug) opts out, and jemalloc keeps the range: nothing is lost. */
    return !knit__give_back(knit__arena_of(h), addr, size);
}

static void knit__hook_destroy(extent_hooks_t *h, void *addr, size_t size,
                               bool committed, unsigned ind) {
    (void)committed;
    (void)ind;
    /* Unconditional by contract; a range we refuse is not ours to free,
     * and the region is unmapped as a whole at the end anyway. */
    (void)knit__give_back(knit__arena_of(h), addr, size);
}

static bool knit__hook_commit(extent_hooks_t *h, void *addr, size_t size,
                              size_t offset, size_t length, unsigned ind) {
    (void)ind;
    knit__arena *a = knit__arena_of(h);
    if (!knit__in_region(a, addr, size) || offset > size ||
        length > size - offset)
        return true;
    knit__zero_range((char *)addr + offset, length);
    return false;
}

static bool knit__hook_decommit(extent_hooks_t *h, void *addr, size_t size,
                                size_t offset, size_t length, unsigned ind) {
    (void)h, (void)addr, (void)size, (void)offset, (void)length, (void)ind;
    return true; /* opt out: the pages stay committed */
}

static bool knit__purge(extent_hooks_t *h, void *addr, size_t size,
                        size_t offset, size_t length, int advice) {
    knit__arena *a = knit__arena_of(h);
    if (!knit__in_region(a, addr, size) || offset > size ||
        length > size - offset)
        return true;
    if (length == 0) return false;
    return madvise((char *)addr + offset, length, advice) != 0;
}

static bool knit__hook_purge_lazy(extent_hooks_t *h, void *addr, size_t size,
                                  size_t offset, size_t length, unsigned ind) {
    (void)ind;
    return knit__purge(h, addr, size, offset, length, MADV_FREE);
}

static bool knit__hook_purge_forced(extent_hooks_t *h, void *addr,
                                    size_t size, size_t offset, size_t length,
                                    unsigned ind) {
    (void)ind;
    return knit__purge(h, addr, size, offset, length, MADV_DONTNEED);
}

static bool knit__hook_split(extent_hooks_t *h, void *addr, size_t size,
                             size_t size_a, size_t size_b, bool committed,
                             unsigned ind) {
    (void)committed, (void)ind;
    /* Both pieces are the same bytes, in the region: nothing to do. */
    return !(knit__in_region(knit__arena_of(h), addr, size) &&
             size_a <= size && size_b == size - size_a);
}

static bool knit__hook_merge(extent_hooks_t *h, void *addr_a, size_t size_a,
                             void *addr_b, size_t size_b, bool committed,
                             unsigned ind) {
    (void)committed, (void)ind;
    knit__arena *a = knit__arena_of(h);
    bool ok = knit__in_region(a, addr_a, size_a) &&
              knit__in_region(a, addr_b, size_b) &&
              (uintptr_t)addr_a + size_a == (uintptr_t)addr_b;
    return !ok; /* false: merged */
}

/* ---- the API -------------------------------------------------------------- */

/* Fresh anonymous address space; physical pages only when touched. A
 * point of failure in the fault-injection build (base/alloc.h). */
static void *knit__map(size_t len) {
    if (knit__alloc_fails()) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    return mmap(NULL, len, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

static size_t knit__round_up(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

/* mib for "arena.0.<leaf>", then pointed at arena `ind`. */
static int knit__arena_mib(const char *name, unsigned ind, size_t mib[3]) {
    size_t len = 3;
    int rc = mallctlnametomib(name, mib, &len);
    if (rc != 0) return rc;
    if (len != 3) return EINVAL;
    mib[1] = ind;
    return 0;
}

int knit__arena_create(size_t cap_bytes, knit__arena **out) {
    if (out == NULL) return knit__fail(KNIT_EINVAL, "payload arena: out is NULL");
    *out = NULL;
    if (cap_bytes < KNIT__ARENA_MIN_CAP || cap_bytes > KNIT__ARENA_MAX_CAP)
        return knit__fail(KNIT_EINVAL,
                          "payload arena: cap_bytes=%zu out of range: must be "
                          "between %zu (4 MiB) and %zu (64 GiB)",
                          cap_bytes, KNIT__ARENA_MIN_CAP, KNIT__ARENA_MAX_CAP);

    size_t page = 0, sz = sizeof page;
    if (mallctl("arenas.page", &page, &sz, NULL, 0) != 0 || page == 0 ||
        (page & (page - 1)) != 0)
        page = (size_t)sysconf(_SC_PAGESIZE);
    size_t cap = cap_bytes & ~(page - 1);

    knit__arena *a = knit__aligned_alloc(KNIT__ARENA_LINE, sizeof *a);
    if (a == NULL)
        return knit__fail(KNIT_ENOMEM, "payload arena: out of memory for the "
                                       "arena's %zu-byte header",
                          sizeof *a);
    memset(a, 0, sizeof *a);
    a->cap = cap;
    a->page = page;

    /* The region: over-reserve by KNIT__ARENA_ALIGN, keep the aligned
     * middle, unmap the ends. */
    size_t raw_len = cap + KNIT__ARENA_ALIGN;
    void *raw = knit__map(raw_len);
    if (raw == MAP_FAILED) {
        int e = errno;
        free(a);
        return knit__fail(KNIT_ENOMEM,
                          "payload arena: cannot reserve %zu bytes of address "
                          "space: mmap: %s",
                          raw_len, strerror(e));
    }
    uintptr_t r0 = (uintptr_t)raw;
    uintptr_t base = (r0 + KNIT__ARENA_ALIGN - 1) & ~(uintptr_t)(KNIT__ARENA_ALIGN - 1);
    if (base > r0) munmap(raw, base - r0);
    if (r0 + raw_len > base + cap)
        munmap((void *)(base + cap), r0 + raw_len - (base + cap));
    a->base = base;

    /* The free-range array: see "The free ranges" at the top. */
    a->ranges_max = (cap / page + 1) / 2 + 1;
    a->ranges_bytes = knit__round_up(a->ranges_max * sizeof *a->ranges, page);
    void *ranges = knit__map(a->ranges_bytes);
    if (ranges == MAP_FAILED) {
        int e = errno;
        size_t bytes = a->ranges_bytes;
        munmap((void *)base, cap);
        free(a);
        return knit__fail(KNIT_ENOMEM,
                          "payload arena: cannot map %zu bytes for the free "
                          "ranges: mmap: %s",
                          bytes, strerror(e));
    }
    a->ranges = ranges;
    knit__poison((void *)base, cap); /* see "Under AddressSanitizer" */
    a->ranges[0].start = base;
    a->ranges[0].end = base + cap;
    a->nranges = 1;
    pthread_mutex_init(&a->lock, NULL);
    atomic_init(&a->reserved, 0);
    atomic_init(&a->in_use, 0);
    atomic_init(&a->high_water, 0);
    atomic_init(&a->allocations, 0);
    atomic_init(&a->failures, 0);

    a->hooks = (extent_hooks_t){
        .alloc = knit__hook_alloc,
        .dalloc = knit__hook_dalloc,
        .destroy = knit__hook_destroy,
        .commit = knit__hook_commit,
        .decommit = knit__hook_decommit,
        .purge_lazy = knit__hook_purge_lazy,
        .purge_forced = knit__hook_purge_forced,
        .split = knit__hook_split,
        .merge = knit__hook_merge,
    };

    /* The mibs first: once the arena exists, every failure path must
     * destroy it. */
    int rc = knit__arena_mib("arena.0.purge", 0, a->purge_mib);
    if (rc == 0) rc = knit__arena_mib("arena.0.destroy", 0, a->destroy_mib);
    const char *what = "mallctlnametomib(\"arena.0.purge/destroy\")";
    if (rc == 0) {
        extent_hooks_t *hp = &a->hooks;
        unsigned ind = 0;
        sz = sizeof ind;
        rc = knit__alloc_fails() ? ENOMEM
                                 : mallctl("arenas.create", &ind, &sz, &hp,
                                           sizeof hp);
        what = "mallctl(\"arenas.create\")";
        a->ind = ind;
    }
    if (rc != 0) {
        pthread_mutex_destroy(&a->lock);
        munmap(a->ranges, a->ranges_bytes);
        knit__unpoison((void *)base, cap);
        munmap((void *)base, cap);
        free(a);
        return knit__fail(KNIT_ENOMEM, "payload arena: %s failed: %s", what,
                          strerror(rc));
    }
    a->purge_mib[1] = a->ind;
    a->destroy_mib[1] = a->ind;
    a->flags = MALLOCX_ARENA(a->ind) | MALLOCX_TCACHE_NONE;

    *out = a;
    return 0;
}

void *knit__arena_alloc(knit__arena *a, size_t len) {
    if (a == NULL) {
        (void)knit__fail(KNIT_EINVAL, "payload arena: alloc from a NULL arena");
        return NULL;
    }
    size_t n = len != 0 ? len : 1; /* mallocx(0) is undefined */
    void *p = NULL;
    if (n <= a->cap && !knit__alloc_fails()) {
        p = mallocx(n, a->flags);
        if (p == NULL) {
            /* Hand jemalloc's dirty pages back to the hooks (coalesced
             * there), then try once more. */
            (void)mallctlbymib(a->purge_mib, 3, NULL, NULL, NULL, 0);
            p = mallocx(n, a->flags);
        }
    }
    if (p == NULL) {
        /* Relaxed: statistics (see the top). */
        atomic_fetch_add_explicit(&a->failures, 1, memory_order_relaxed);
        unsigned long long used =
            atomic_load_explicit(&a->in_use, memory_order_relaxed);
        unsigned long long held =
            atomic_load_explicit(&a->reserved, memory_order_relaxed);
        if (n > a->cap)
            (void)knit__fail(KNIT_E2BIG,
                             "payload arena: asked %zu bytes, more than its "
                             "cap of %zu bytes",
                             len, a->cap);
        else
            (void)knit__fail(KNIT_ENOMEM,
                             "payload arena full: cap %zu bytes, %llu in use, "
                             "asked %zu (jemalloc holds %llu bytes of the "
                             "region, its metadata included)",
                             a->cap, used, len, held);
        return NULL;
    }
    uint64_t usable = sallocx(p, 0);
    /* The caller may touch exactly len bytes: the class's tail stays
     * poisoned (see "Under AddressSanitizer"). */
    knit__unpoison(p, len);
    knit__poison((char *)p + len, usable - len);
    /* Relaxed: statistics; nothing is published through them. */
    uint64_t now =
        atomic_fetch_add_explicit(&a->in_use, usable, memory_order_relaxed) +
        usable;
    uint64_t hw = atomic_load_explicit(&a->high_water, memory_order_relaxed);
    while (hw < now &&
           !atomic_compare_exchange_weak_explicit(&a->high_water, &hw, now,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
    atomic_fetch_add_explicit(&a->allocations, 1, memory_order_relaxed);
    return p;
}

void knit__arena_free(knit__arena *a, void *p) {
    if (p == NULL || a == NULL) return;
    if (!knit__in_region(a, p, 1)) {
        (void)knit__fail(KNIT_EINVAL,
                         "payload arena: free of %p, outside the arena's "
                         "region [%p, %p): not freed",
                         p, (void *)a->base, (void *)(a->base + a->cap));
        return;
    }
    size_t usable = sallocx(p, 0);
    /* Relaxed: a statistic (see the top). */
    atomic_fetch_sub_explicit(&a->in_use, usable, memory_order_relaxed);
    knit__poison(p, usable); /* a read after this free is reported */
    sdallocx(p, usable, MALLOCX_TCACHE_NONE);
}

bool knit__arena_owns(const knit__arena *a, const void *p) {
    return a != NULL && p != NULL && knit__in_region(a, p, 1);
}

size_t knit__arena_usable(const knit__arena *a, const void *p) {
    (void)a;
    return p != NULL ? sallocx(p, 0) : 0;
}

void knit__arena_stats_get(const knit__arena *a, knit__arena_stats *out) {
    if (out == NULL) return;
    memset(out, 0, sizeof *out);
    if (a == NULL) return;
    /* Relaxed loads of statistics (see the top); the casts drop const for
     * C11's atomic_load, which does not take a const pointer everywhere. */
    knit__arena *m = (knit__arena *)a;
    out->cap_bytes = a->cap;
    out->in_use = atomic_load_explicit(&m->in_use, memory_order_relaxed);
    out->high_water = atomic_load_explicit(&m->high_water, memory_order_relaxed);
    out->allocations =
        atomic_load_explicit(&m->allocations, memory_order_relaxed);
    out->failures = atomic_load_explicit(&m->failures, memory_order_relaxed);
    out->reserved = atomic_load_explicit(&m->reserved, memory_order_relaxed);
}

void knit__arena_destroy(knit__arena *a) {
    if (a == NULL) return;
    /* Discards what is still allocated, purges, destroys retained extents
     * and the arena's metadata: all through our hooks, which must stay
     * valid until this returns. */
    int rc = mallctlbymib(a->destroy_mib, 3, NULL, NULL, NULL, 0);
    if (rc != 0) {
        (void)knit__fail(KNIT_EBUSY,
                         "payload arena: mallctl(\"arena.%u.destroy\") failed: "
                         "%s; the arena and its %zu-byte region are leaked",
                         a->ind, strerror(rc), a->cap);
        return;
    }
    knit__unpoison((void *)a->base, a->cap); /* the next mapping starts clean */
    munmap((void *)a->base, a->cap);
    munmap(a->ranges, a->ranges_bytes);
    pthread_mutex_destroy(&a->lock);
    free(a);
}
