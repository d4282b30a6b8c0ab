/* fork_join: divide and conquer by nested submit/await.
 *
 *   ./bazelw run //examples:fork_join -- [fib_n] [sort_ints] [threads]
 *
 * fib(30) with no cutoff (every call but the leaves submits a task and
 * awaits it: 1.6M tasks), then a merge sort of 2M random ints that splits
 * until 4096 ints, qsorts the pieces and merges on the way back up. An
 * await inside a task runs other tasks while it waits, so the recursion
 * never blocks a worker. The program checks fib against the known value
 * (and a serial fib for other n) and the sort against a serial qsort of
 * the same data (sorted, same checksum, same ints), prints the times, and
 * prints "verified" only if every check passed.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <knit/knit.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- fib ---- */

/* fib(n): submits fib(n-1), computes fib(n-2) right here, awaits the first. */
static void *fib(knit_task *task, void *arg) {
    uintptr_t n = (uintptr_t)arg;
    if (n < 2) return arg;
    knit_future *f;
    int rc = knit_submit(knit_task_pool(task), fib, (void *)(n - 1), &f);
    if (rc != 0) {
        knit_task_fail(task, rc, "submit fib(%" PRIuPTR "): %s", n - 1, knit_last_error());
        return NULL;
    }
    uintptr_t b = (uintptr_t)fib(task, (void *)(n - 2));
    void *a;
    rc = knit_await(f, -1, &a);
    knit_future_release(f);
    if (rc != 0) {
        knit_task_fail(task, rc, "fib(%" PRIuPTR "): %s", n - 1, knit_last_error());
        return NULL;
    }
    return (void *)((uintptr_t)a + b);
}

static uint64_t fib_serial(unsigned n) {
    uint64_t a = 0, b = 1;
    for (unsigned i = 0; i < n; i++) {
        uint64_t t = a + b;
        a = b;
        b = t;
    }
    return a;
}

/* ---- merge sort ---- */

enum { SORT_CUTOFF = 4096 };

struct sort_job {
    int *a;   /* the ints to sort */
    int *tmp; /* scratch of the same length */
    size_t n;
};

static int cmp_int(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/* Sorts job->a: the upper half as a task, the lower half here, then merges
 * the two through tmp. */
static void *sort_task(knit_task *task, void *arg) {
    const struct sort_job *job = arg;
    if (job->n <= SORT_CUTOFF) {
        qsort(job->a, job->n, sizeof *job->a, cmp_int);
        return NULL;
    }
    size_t half = job->n / 2;
    /* The job lives on this stack frame, which outlives the await. */
    struct sort_job upper = {job->a + half, job->tmp + half, job->n - half};
    struct sort_job lower = {job->a, job->tmp, half};
    knit_future *f;
    int rc = knit_submit(knit_task_pool(task), sort_task, &upper, &f);
    if (rc != 0) {
        knit_task_fail(task, rc, "submit: %s", knit_last_error());
        return NULL;
    }
    sort_task(task, &lower);
    rc = knit_await(f, -1, NULL);
    knit_future_release(f);
    if (rc != 0) {
        knit_task_fail(task, rc, "upper half: %s", knit_last_error());
        return NULL;
    }
    /* Merge a[0, half) and a[half, n) into tmp, then copy back. */
    const int *l = job->a, *le = job->a + half, *r = job->a + half, *re = job->a + job->n;
    int *out = job->tmp;
    while (l < le && r < re) *out++ = *r < *l ? *r++ : *l++;
    while (l < le) *out++ = *l++;
    while (r < re) *out++ = *r++;
    memcpy(job->a, job->tmp, job->n * sizeof *job->a);
    return NULL;
}

/* Order-independent: the same multiset of ints gives the same value. */
static uint64_t checksum(const int *a, size_t n) {
    uint64_t sum = 0, mix = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = (uint32_t)a[i];
        sum += v;
        v *= 0x9e3779b97f4a7c15ull;
        mix += v ^ (v >> 29);
    }
    return sum ^ (mix * 31);
}

static int run_fib(knit_pool *pool, unsigned n) {
    const uint64_t want = n == 30 ? 832040u : fib_serial(n);
    double t0 = now_s();
    knit_future *f;
    if (knit_submit(pool, fib, (void *)(uintptr_t)n, &f) != 0) {
        fprintf(stderr, "fork_join: submit: %s\n", knit_last_error());
        return 1;
    }
    void *r;
    int rc = knit_await(f, -1, &r);
    knit_future_release(f);
    double t = now_s() - t0;
    if (rc != 0) {
        fprintf(stderr, "fork_join: fib(%u): %s\n", n, knit_last_error());
        return 1;
    }
    uint64_t got = (uint64_t)(uintptr_t)r;
    printf("fib(%u) = %" PRIu64 " in %.3f s (%s)\n", n, got, t,
           got == want ? "correct" : "WRONG");
    return got == want ? 0 : 1;
}

static int run_sort(knit_pool *pool, size_t n) {
    int *a = malloc(n * sizeof *a), *ref = malloc(n * sizeof *ref),
        *tmp = malloc(n * sizeof *tmp);
    if (a == NULL || ref == NULL || tmp == NULL) {
        fprintf(stderr, "fork_join: no memory for %zu ints\n", n);
        free(a);
        free(ref);
        free(tmp);
        return 1;
    }
    uint64_t x = 0x2545f4914f6cdd1dull; /* xorshift64 */
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        a[i] = (int)(uint32_t)(x >> 32);
    }
    memcpy(ref, a, n * sizeof *a);
    const uint64_t sum_before = checksum(a, n);

    double t0 = now_s();
    struct sort_job job = {a, tmp, n};
    knit_future *f;
    int rc = knit_submit(pool, sort_task, &job, &f);
    if (rc == 0) {
        rc = knit_await(f, -1, NULL);
        knit_future_release(f);
    }
    double t_par = now_s() - t0;
    if (rc != 0) {
        fprintf(stderr, "fork_join: sort: %s\n", knit_last_error());
        free(a);
        free(ref);
        free(tmp);
        return 1;
    }

    t0 = now_s();
    qsort(ref, n, sizeof *ref, cmp_int);
    double t_ser = now_s() - t0;

    size_t unsorted = 0;
    for (size_t i = 1; i < n; i++) unsorted += a[i - 1] > a[i];
    bool same_sum = checksum(a, n) == sum_before;
    bool same_ints = memcmp(a, ref, n * sizeof *a) == 0;
    bool ok = unsorted == 0 && same_sum && same_ints;
    printf("merge sort of %zu ints in %.3f s (serial qsort %.3f s, %.2fx): "
           "%s, %s, %s\n",
           n, t_par, t_ser, t_par > 0 ? t_ser / t_par : 0.0,
           unsorted == 0 ? "sorted" : "NOT SORTED", same_sum ? "same checksum" : "CHECKSUM DIFFERS",
           same_ints ? "same as qsort" : "DIFFERS FROM QSORT");
    free(a);
    free(ref);
    free(tmp);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    unsigned fib_n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 30;
    size_t sort_n = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : 2000000;
    unsigned threads = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 0;
    if (fib_n > 60 || sort_n == 0) {
        fprintf(stderr, "usage: fork_join [fib_n <= 60] [sort_ints > 0] [threads]\n");
        return 2;
    }
    knit_pool_options opts = KNIT_POOL_OPTIONS_INIT; /* threads 0: one per CPU */
    opts.threads = threads;
    knit_pool *pool;
    if (knit_pool_create(&opts, &pool) != 0) {
        fprintf(stderr, "fork_join: %s\n", knit_last_error());
        return 1;
    }
    knit_pool_stats_t st = {.size = sizeof st};
    knit_pool_stats(pool, &st);
    printf("pool: %u workers, sched %s\n", st.threads, st.sched);

    int failures = run_fib(pool, fib_n);
    failures += run_sort(pool, sort_n);

    knit_pool_stats(pool, &st);
    printf("tasks run %" PRIu64 " (%" PRIu64 " by awaiting threads), deepest help %" PRIu64
           ", workers parked %" PRIu64 " times\n",
           st.tasks_run, st.helped, st.help_depth_max, st.total.parks);
    if (knit_pool_destroy(pool, KNIT_DRAIN) != 0) {
        fprintf(stderr, "fork_join: destroy: %s\n", knit_last_error());
        failures++;
    }
    if (failures != 0) {
        printf("FAILED\n");
        return 1;
    }
    printf("verified\n");
    return 0;
}
