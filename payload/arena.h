/* Internal API of the payload arena: a dedicated jemalloc arena whose
 * memory comes only from one address range reserved up front, so its size
 * is a hard cap. C and C++ may include this header: the struct (with its
 * atomic counters and the jemalloc hooks) stays inside arena.c, which also
 * describes how the extent hooks keep every byte inside the region.
 *
 * All functions are thread-safe except create/destroy, which the owner
 * calls once each, with no allocation or free in flight on that arena.
 */
#ifndef KNIT_PAYLOAD_ARENA_H
#define KNIT_PAYLOAD_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The limits of cap_bytes in knit__arena_create. */
#define KNIT__ARENA_MIN_CAP ((size_t)4 << 20)  /* 4 MiB */
#define KNIT__ARENA_MAX_CAP ((size_t)64 << 30) /* 64 GiB */

typedef struct knit__arena knit__arena;

typedef struct knit__arena_stats {
    uint64_t cap_bytes;   /* the hard cap (the region's size) */
    uint64_t in_use;      /* bytes currently allocated (usable sizes) */
    uint64_t high_water;  /* max of in_use */
    uint64_t allocations; /* successful allocations */
    uint64_t failures;    /* allocations refused (cap or size) */
    uint64_t reserved;    /* bytes of the region jemalloc holds as extents,
                           * its own metadata included */
} knit__arena_stats;

/* Reserves cap_bytes of address space (mmap PROT_READ|PROT_WRITE,
 * MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE; no physical memory until
 * touched) and creates a jemalloc arena (mallctl "arenas.create") whose
 * extents, and the arena's own metadata, come only from that region.
 * cap_bytes must lie in [KNIT__ARENA_MIN_CAP, KNIT__ARENA_MAX_CAP], else
 * KNIT_EINVAL; it is rounded down to a whole number of pages. jemalloc's
 * metadata for the arena takes the first 2 MiB block of the region, so a
 * 4 MiB arena holds about 2 MiB of payload. KNIT_ENOMEM if the mmap or the
 * mallctl fails. On failure *out is NULL. */
int knit__arena_create(size_t cap_bytes, knit__arena **out);

/* Allocates len bytes (len 0: one byte, a unique pointer) from the arena,
 * bypassing the thread caches. NULL, and knit_last_error() naming the cap,
 * the bytes in use and len, when it does not fit: never memory outside the
 * region. */
void *knit__arena_alloc(knit__arena *a, size_t len);

/* Frees p, which must come from knit__arena_alloc on this arena. NULL is a
 * no-op. A pointer outside the region is not freed (knit_last_error() says
 * so). */
void knit__arena_free(knit__arena *a, void *p);

/* True iff p lies inside the arena's reserved region. */
bool knit__arena_owns(const knit__arena *a, const void *p);

/* The usable size of an allocation from this arena (>= the length asked). */
size_t knit__arena_usable(const knit__arena *a, const void *p);

/* A snapshot of the counters; each is read atomically, not all at once. */
void knit__arena_stats_get(const knit__arena *a, knit__arena_stats *out);

/* Destroys the jemalloc arena (mallctl "arena.<i>.destroy", which discards
 * any allocation not yet freed) and unmaps the region: all of its memory
 * goes back to the system. NULL is a no-op. If jemalloc refuses, the arena
 * is leaked rather than unmapped under jemalloc's feet, and
 * knit_last_error() says why. */
void knit__arena_destroy(knit__arena *a);

#ifdef __cplusplus
}
#endif
#endif
