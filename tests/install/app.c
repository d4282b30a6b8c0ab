/* install_app: a program built outside Bazel against an installed knit
 * (tools/install_test.sh builds it with cc + pkg-config, shared and static,
 * with CMake's knit::knit and knit::knit_static, and with ASan).
 *
 *   install_app            run every check; last line "install_app: ok ..."
 *   install_app --threads  print the worker count of a pool with threads = 0
 *   install_app --malloc   print which object malloc comes from
 *
 * It crosses every ownership path where memory could pass between the two
 * allocators of a process whose malloc is not jemalloc (an app that links
 * only libknit.so gets glibc's): arena payloads (jemalloc's mallocx), moved
 * malloc'ed buffers, knit_task_take_buf of inline bytes (knit mallocs a
 * copy), returned buffers taken or dropped with the future, a pipeline of
 * arena and malloc'ed items, and a discipline registered through
 * <knit/sched.h> (examples/lock_sched.c). Each result is checked.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <knit/knit.h>

#include "examples/lock_sched.h"

static int failures;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            failures++;                                                    \
            fprintf(stderr, "install_app: FAILED %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, " (%s)\n", knit_last_error());                 \
        }                                                                  \
    } while (0)

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 31u + seed);
}

/* ---- tasks ---- */

static void *square(knit_task *task, void *arg) {
    (void)task;
    uintptr_t v = (uintptr_t)arg;
    return (void *)(v * v % 1000003u);
}

/* Hashes its input bytes (inline, arena or moved). */
static void *hash_bytes(knit_task *task, void *arg) {
    (void)arg;
    size_t n;
    const void *p = knit_task_bytes(task, &n);
    return (void *)(uintptr_t)fnv(p, n);
}

/* Takes its input and returns it: the caller takes it from the future. */
static void *take_and_return(knit_task *task, void *arg) {
    (void)arg;
    knit_buf b = knit_task_take_buf(task);
    if (b.data == NULL) knit_task_fail(task, 1, "nothing to take");
    else knit_task_return_buf(task, &b);
    return NULL;
}

/* Takes its input and frees it inside the task. */
static void *take_and_free(knit_task *task, void *arg) {
    (void)arg;
    knit_buf b = knit_task_take_buf(task);
    uintptr_t h = (uintptr_t)fnv(b.data, b.len);
    knit_buf_free(&b);
    return (void *)h;
}

/* Returns a fresh malloc'ed buffer nobody will take: freed with the future. */
static void *return_malloced(knit_task *task, void *arg) {
    (void)arg;
    void *m = malloc(1000);
    if (m == NULL) return NULL;
    memset(m, 7, 1000);
    knit_buf b = knit_buf_malloced(m, 1000);
    knit_task_return_buf(task, &b);
    return NULL;
}

/* ---- the pipeline: input -> parallel hash -> in-order sum ---- */

struct pipe {
    knit_pool *pool;
    unsigned next, n;
    uint64_t expect_seq, sum;
    int order_errors;
};

enum { PIPE_ITEM = 40000 };

static int pipe_input(void *ctx, knit_buf *item) {
    struct pipe *pp = ctx;
    if (pp->next == pp->n) return 0;
    unsigned i = pp->next++;
    unsigned char *mem;
    if (i % 2 == 0) { /* arena memory, moved */
        mem = knit_payload_alloc(pp->pool, PIPE_ITEM);
        if (mem == NULL) return -1;
        fill(mem, PIPE_ITEM, i);
        *item = knit_payload_buf(pp->pool, mem, PIPE_ITEM);
    } else { /* malloc'ed memory, moved */
        mem = malloc(PIPE_ITEM);
        if (mem == NULL) return -1;
        fill(mem, PIPE_ITEM, i);
        *item = knit_buf_malloced(mem, PIPE_ITEM);
    }
    return item->data != NULL ? 1 : -1;
}

/* Replaces each item by an 8-byte malloc'ed hash (frees the input). */
static int pipe_hash(void *ctx, uint64_t seq, knit_buf *item) {
    (void)ctx, (void)seq;
    uint64_t *h = malloc(sizeof *h);
    if (h == NULL) return -1;
    *h = fnv(item->data, item->len);
    knit_buf_free(item);
    *item = knit_buf_malloced(h, sizeof *h);
    return 0;
}

static int pipe_sum(void *ctx, uint64_t seq, knit_buf *item) {
    struct pipe *pp = ctx;
    if (seq != pp->expect_seq++) pp->order_errors++;
    pp->sum += *(const uint64_t *)item->data * (seq + 1);
    return 0; /* the pipeline frees the item */
}

/* ---- the checks ---- */

static uint64_t run_checks(knit_pool *pool) {
    uint64_t checksum = 0;

    /* Submit and await through the registered discipline. */
    enum { N = 20000 };
    static knit_future *fs[N];
    uint64_t want = 0, got = 0;
    for (uintptr_t i = 0; i < N; i++) {
        want += i * i % 1000003u;
        CHECK(knit_submit(pool, square, (void *)i, &fs[i]) == 0, "submit %u",
              (unsigned)i);
    }
    for (size_t i = 0; i < N; i++) {
        void *r = NULL;
        CHECK(knit_await(fs[i], -1, &r) == 0, "await %zu", i);
        got += (uintptr_t)r;
        knit_future_release(fs[i]);
    }
    CHECK(got == want, "sum %" PRIu64 " != %" PRIu64, got, want);
    checksum ^= got;

    /* Inline, arena and moved payloads, hashed by the task. */
    static unsigned char big[200000];
    fill(big, sizeof big, 3);
    size_t sizes[] = {0, 16, KNIT_INLINE_BYTES, KNIT_INLINE_BYTES + 1, 4096,
                      sizeof big};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        knit_future *f;
        void *r = NULL;
        CHECK(knit_submit_copy(pool, hash_bytes, big, sizes[k], &f) == 0,
              "submit_copy %zu", sizes[k]);
        CHECK(knit_await(f, -1, &r) == 0, "await copy %zu", sizes[k]);
        CHECK((uint64_t)(uintptr_t)r == (uint64_t)(uintptr_t)fnv(big, sizes[k]),
              "copy hash %zu", sizes[k]);
        checksum += (uintptr_t)r;
        knit_future_release(f);
    }

    /* take_buf of inline bytes (a malloc'ed copy), of arena bytes, of an
     * arena binary and of a malloc'ed buffer; each returned, taken by the
     * caller and freed through knit_buf_free. */
    for (int kind = 0; kind < 4; kind++) {
        size_t n = kind == 0 ? 40 : 50000;
        knit_future *f;
        int rc;
        if (kind <= 1) {
            rc = knit_submit_copy(pool, take_and_return, big, n, &f);
        } else if (kind == 2) {
            void *mem = knit_payload_alloc(pool, n);
            CHECK(mem != NULL, "payload_alloc");
            if (mem == NULL) continue;
            memcpy(mem, big, n);
            knit_buf b = knit_payload_buf(pool, mem, n);
            rc = knit_submit_buf(pool, take_and_return, &b, &f);
            CHECK(b.data == NULL, "submit_buf did not empty the handle");
        } else {
            void *mem = malloc(n);
            memcpy(mem, big, n);
            knit_buf b = knit_buf_malloced(mem, n);
            rc = knit_submit_buf(pool, take_and_return, &b, &f);
        }
        CHECK(rc == 0, "submit kind %d", kind);
        if (rc != 0) continue;
        CHECK(knit_await(f, -1, NULL) == 0, "await take kind %d", kind);
        knit_buf out = {0};
        CHECK(knit_future_take_buf(f, &out) == 0, "take_buf kind %d", kind);
        CHECK(out.len == n && out.data != NULL &&
                  memcmp(out.data, big, n) == 0,
              "taken bytes kind %d", kind);
        checksum += fnv(out.data, out.len);
        knit_buf_free(&out);
        knit_future_release(f);
    }

    /* The task frees what it took: arena and malloc'ed. */
    for (int kind = 0; kind < 2; kind++) {
        knit_future *f;
        void *r = NULL;
        int rc;
        if (kind == 0) {
            rc = knit_submit_copy(pool, take_and_free, big, 30000, &f);
        } else {
            void *mem = malloc(30000);
            memcpy(mem, big, 30000);
            knit_buf b = knit_buf_malloced(mem, 30000);
            rc = knit_submit_buf(pool, take_and_free, &b, &f);
        }
        CHECK(rc == 0, "submit free kind %d", kind);
        if (rc != 0) continue;
        CHECK(knit_await(f, -1, &r) == 0, "await free kind %d", kind);
        CHECK((uint64_t)(uintptr_t)r == (uint64_t)(uintptr_t)fnv(big, 30000),
              "free hash kind %d", kind);
        knit_future_release(f);
    }

    /* Returned buffers nobody takes, and inputs nobody takes: freed by the
     * runtime (with the future, when the task settles). */
    for (int i = 0; i < 100; i++) {
        knit_future *f;
        CHECK(knit_submit(pool, return_malloced, NULL, &f) == 0, "submit drop");
        knit_await(f, -1, NULL);
        knit_future_release(f);
        void *mem = malloc(100);
        knit_buf b = knit_buf_malloced(mem, 100);
        CHECK(knit_submit_buf(pool, hash_bytes, &b, NULL) == 0, "detached");
    }

    /* The pipeline. */
    struct pipe pp = {.pool = pool, .n = 64};
    knit_stage stages[] = {
        {KNIT_STAGE_PARALLEL, pipe_hash, NULL},
        {KNIT_STAGE_SERIAL_IN_ORDER, pipe_sum, &pp},
    };
    knit_pipeline_options po = KNIT_PIPELINE_OPTIONS_INIT;
    po.input = pipe_input;
    po.input_ctx = &pp;
    po.stages = stages;
    po.nstages = 2;
    po.max_in_flight = 8;
    knit_pipeline *pl;
    CHECK(knit_pipeline_create(pool, &po, &pl) == 0, "pipeline_create");
    CHECK(knit_pipeline_run(pl) == 0, "pipeline_run");
    knit_pipeline_destroy(pl);
    uint64_t pwant = 0;
    static unsigned char item[PIPE_ITEM];
    for (unsigned i = 0; i < pp.n; i++) {
        fill(item, PIPE_ITEM, i);
        pwant += fnv(item, PIPE_ITEM) * (i + 1);
    }
    CHECK(pp.order_errors == 0 && pp.expect_seq == pp.n, "pipeline order");
    CHECK(pp.sum == pwant, "pipeline sum");
    checksum ^= pp.sum;

    knit_pool_stats_t st = {.size = sizeof st};
    CHECK(knit_pool_stats(pool, &st) == 0, "stats");
    CHECK(strcmp(st.sched, "lock") == 0, "sched is %s", st.sched);
    CHECK(st.arena_allocs > 0, "the arena was used");
    return checksum;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--malloc") == 0) {
        Dl_info info;
        void *(*m)(size_t) = malloc;
        if (dladdr(*(void **)&m, &info) != 0 && info.dli_fname != NULL) {
            const char *slash = strrchr(info.dli_fname, '/');
            printf("%s\n", slash ? slash + 1 : info.dli_fname);
        } else {
            printf("unknown\n");
        }
        return 0;
    }
    knit_pool_options opts = KNIT_POOL_OPTIONS_INIT;
    if (argc == 2 && strcmp(argv[1], "--threads") == 0) {
        knit_pool *pool;
        if (knit_pool_create(&opts, &pool) != 0) {
            fprintf(stderr, "install_app: %s\n", knit_last_error());
            return 1;
        }
        knit_pool_stats_t st = {.size = sizeof st};
        knit_pool_stats(pool, &st);
        printf("%u\n", st.threads);
        knit_pool_destroy(pool, KNIT_DRAIN);
        return 0;
    }

    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", KNIT_VERSION_MAJOR,
             KNIT_VERSION_MINOR, KNIT_VERSION_PATCH);
    CHECK(strcmp(knit_version(), want) == 0, "knit_version() %s != %s",
          knit_version(), want);

    CHECK(lock_sched_register() == 0, "lock_sched_register");
    opts.threads = 2;
    opts.sched = "lock";
    opts.arena_bytes = 16u << 20;
    knit_pool *pool;
    if (knit_pool_create(&opts, &pool) != 0) {
        fprintf(stderr, "install_app: %s\n", knit_last_error());
        return 1;
    }
    uint64_t checksum = run_checks(pool);
    CHECK(knit_pool_destroy(pool, KNIT_DRAIN) == 0, "destroy");
    if (failures != 0) {
        fprintf(stderr, "install_app: %d checks failed\n", failures);
        return 1;
    }
    printf("install_app: ok knit %s checksum %016" PRIx64 "\n", knit_version(),
           checksum);
    return 0;
}
