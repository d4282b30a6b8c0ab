/* The inline knit_fork / knit_join of <knit/fork.h> (C11 with NDEBUG; this
 * target defines NDEBUG in every configuration), against the library's
 * out-of-line calls: results, failures handed over from a light child,
 * children that submit and await, steals, misuse and the full deque.
 * frame_test.cc covers the out-of-line path (C++ never inlines). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "knit/knit.h"

#if !defined(knit_fork) || !defined(knit_join)
#error "the inline knit_fork / knit_join must be active in this test"
#endif

static int failures;

static void check(int ok, const char *what, ...) {
    if (ok) return;
    va_list ap;
    va_start(ap, what);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, what, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    failures++;
}

static long fib_serial(long n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

static void *fib(knit_task *t, void *arg) {
    intptr_t n = (intptr_t)arg;
    if (n < 2) return arg;
    knit_frame fr;
    if (knit_fork(t, &fr, fib, (void *)(n - 1)) != 0) abort();
    intptr_t b = (intptr_t)fib(t, (void *)(n - 2));
    void *a = NULL;
    if (knit_join(t, &fr, &a) != 0) abort();
    return (void *)((intptr_t)a + b);
}

/* A random tree: every node counts itself once; some nodes fail, some
 * submit a future and await it, and the parent checks each join. */
struct node {
    uint64_t seed;
    int depth;
    _Atomic long *count;
    _Atomic long *failed_seen;
};

static uint64_t next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *leaf_future(knit_task *t, void *arg) {
    (void)t;
    atomic_fetch_add_explicit((_Atomic long *)arg, 1, memory_order_relaxed);
    return (void *)(intptr_t)7;
}

static void *tree(knit_task *t, void *arg) {
    struct node *nd = arg;
    atomic_fetch_add_explicit(nd->count, 1, memory_order_relaxed);
    uint64_t s = nd->seed;
    if (next(&s) % 17 == 0) {
        knit_task_fail(t, 40 + nd->depth, "node at depth %d failed", nd->depth);
        return NULL;
    }
    if (next(&s) % 23 == 0) { /* a future from inside a frame child */
        knit_future *f = NULL;
        void *r = NULL;
        if (knit_submit(knit_task_pool(t), leaf_future, nd->count, &f) != 0 ||
            knit_await(f, -1, &r) != 0 || r != (void *)(intptr_t)7)
            abort();
        knit_future_release(f);
    }
    if (nd->depth == 0) return (void *)(intptr_t)1;
    unsigned width = (unsigned)(next(&s) % 4);
    struct node kids[4];
    knit_frame frs[4];
    for (unsigned i = 0; i < width; i++) {
        kids[i] = (struct node){next(&s), nd->depth - 1, nd->count, nd->failed_seen};
        if (knit_fork(t, &frs[i], tree, &kids[i]) != 0) abort();
    }
    for (unsigned i = width; i-- > 0;) {
        void *r = NULL;
        int rc = knit_join(t, &frs[i], &r);
        if (rc == KNIT_ETASK) {
            const char *msg = knit_last_error();
            if (strstr(msg, "failed") == NULL || strstr(msg, "code 4") == NULL) abort();
            atomic_fetch_add_explicit(nd->failed_seen, 1, memory_order_relaxed);
        } else if (rc != 0 || r != (void *)(intptr_t)1) {
            abort();
        }
    }
    return (void *)(intptr_t)1;
}

/* What the tree should count and fail, computed serially. */
static void tree_expect(uint64_t seed, int depth, long *count, long *failed) {
    (*count)++;
    uint64_t s = seed;
    if (next(&s) % 17 == 0) return;
    if (next(&s) % 23 == 0) (*count)++;
    if (depth == 0) return;
    unsigned width = (unsigned)(next(&s) % 4);
    for (unsigned i = 0; i < width; i++) {
        uint64_t k = next(&s);
        uint64_t ks = k;
        if (next(&ks) % 17 == 0) (*failed)++;
        tree_expect(k, depth - 1, count, failed);
    }
}

static void *tree_root(knit_task *t, void *arg) { return tree(t, arg); }

/* Misuse, from inside a task: the inline path must fall back and the
 * library must report it, changing nothing. */
static void *one(knit_task *t, void *arg) {
    (void)t;
    return arg;
}

static void *misuse_root(knit_task *t, void *arg) {
    (void)arg;
    knit_frame a, b;
    check(knit_fork(t, &a, one, (void *)(intptr_t)1) == 0, "fork a");
    check(knit_fork(t, &b, one, (void *)(intptr_t)2) == 0, "fork b");
    void *r = NULL;
    check(knit_join(t, &a, &r) == KNIT_EINVAL, "out-of-LIFO join must be EINVAL");
    check(strstr(knit_last_error(), "LIFO") != NULL, "LIFO message: %s",
          knit_last_error());
    check(knit_join(t, NULL, &r) == KNIT_EINVAL, "NULL frame must be EINVAL");
    check(knit_fork(t, &a, NULL, NULL) == KNIT_EINVAL, "NULL fn must be EINVAL");
    check(knit_join(t, &b, &r) == 0 && r == (void *)(intptr_t)2, "join b");
    check(knit_join(t, &a, &r) == 0 && r == (void *)(intptr_t)1, "join a");
    check(knit_join(t, &a, &r) == KNIT_EINVAL, "second join must be EINVAL");
    /* Past KNIT_FORK_DEPTH the children run at the fork. */
    enum { N = KNIT_FORK_DEPTH + 100 };
    knit_frame *frs = malloc(sizeof *frs * N);
    if (frs == NULL) abort();
    for (intptr_t i = 0; i < N; i++)
        check(knit_fork(t, &frs[i], one, (void *)i) == 0, "deep fork %ld", (long)i);
    for (intptr_t i = N; i-- > 0;) {
        r = NULL;
        check(knit_join(t, &frs[i], &r) == 0 && r == (void *)i, "deep join %ld",
              (long)i);
    }
    free(frs);
    return NULL;
}

static void *run(knit_pool *p, knit_fn fn, void *arg) {
    knit_future *f = NULL;
    void *r = NULL;
    if (knit_submit(p, fn, arg, &f) != 0) {
        fprintf(stderr, "submit: %s\n", knit_last_error());
        abort();
    }
    int rc = knit_await(f, -1, &r);
    check(rc == 0, "await: %d %s", rc, rc ? knit_last_error() : "");
    knit_future_release(f);
    return r;
}

int main(void) {
    const char *scheds[] = {"ticket", "dekker"};
    const unsigned threads[] = {1, 2, 4};
    for (unsigned si = 0; si < 2; si++)
        for (unsigned ti = 0; ti < 3; ti++) {
            knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
            o.threads = threads[ti];
            o.sched = scheds[si];
            knit_pool *p = NULL;
            if (knit_pool_create(&o, &p) != 0) {
                fprintf(stderr, "pool: %s\n", knit_last_error());
                return 1;
            }
            for (int n = 0; n <= 22; n += 11) {
                void *r = run(p, fib, (void *)(intptr_t)n);
                check((long)(intptr_t)r == fib_serial(n), "fib(%d) on %s/%u = %ld", n,
                      scheds[si], threads[ti], (long)(intptr_t)r);
            }
            for (uint64_t seed = 1; seed <= 12; seed++) {
                _Atomic long count = 0, failed_seen = 0;
                struct node root = {seed * 0x9e3779b97f4a7c15ull, 7, &count,
                                    &failed_seen};
                uint64_t rs = root.seed;
                if (next(&rs) % 17 == 0) continue; /* the root itself fails */
                long want = 0, want_failed = 0;
                tree_expect(root.seed, root.depth, &want, &want_failed);
                (void)run(p, tree_root, &root);
                check(atomic_load(&count) == want, "tree %lu: %ld nodes, want %ld",
                      (unsigned long)seed, (long)atomic_load(&count), want);
                check(atomic_load(&failed_seen) == want_failed,
                      "tree %lu: %ld failed joins, want %ld", (unsigned long)seed,
                      (long)atomic_load(&failed_seen), want_failed);
            }
            (void)run(p, misuse_root, NULL);
            check(knit_pool_destroy(p, KNIT_DRAIN) == 0, "destroy");
        }
    /* Outside a task the child runs at the fork. */
    knit_frame fr;
    void *r = NULL;
    check(knit_fork(NULL, &fr, fib, (void *)(intptr_t)10) == 0, "fork outside");
    check(knit_join(NULL, &fr, &r) == 0 && (intptr_t)r == 55, "join outside");
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("fork_inline_test: ok\n");
    return 0;
}
