/* libuv's side of //bench:compare (Debian's libuv1-dev).
 *
 *   uv_work --row NAME --threads N [--reps R] [--quick]
 *
 * N threads: UV_THREADPOOL_SIZE=N, set before the first uv_queue_work (the
 * libuv docs: the pool is global, sized from that variable at first use).
 * Usage per row, as libuv's docs show uv_queue_work: the loop thread
 * queues uv_work_t requests; work_cb runs on the pool, after_work_cb back
 * on the loop thread; uv_run(UV_RUN_DEFAULT) returns when no request is
 * left.
 *   rtt           queue one request, uv_run, 100k times
 *   throughput-1  queue n requests (one uv_work_t each), uv_run once
 * Output: see work_util.h. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

#include "work_util.h"

static wu_opts O;
static uint64_t after_count; /* loop thread only */

static void work_cb(uv_work_t *req) {
    (void)req;
    wu_count();
}

static void after_cb(uv_work_t *req, int status) {
    (void)req;
    if (status != 0) wu_die("after_work_cb status %d (%s)", status, uv_strerror(status));
    after_count++;
}

static void queue(uv_loop_t *loop, uv_work_t *req) {
    int rc = uv_queue_work(loop, req, work_cb, after_cb);
    if (rc != 0) wu_die("uv_queue_work: %s", uv_strerror(rc));
}

static void run(uv_loop_t *loop) {
    int rc = uv_run(loop, UV_RUN_DEFAULT);
    if (rc != 0) wu_die("uv_run returned %d with requests left", rc);
}

static void row_rtt(uv_loop_t *loop) {
    unsigned n = WU_RTT_N(O.quick);
    uv_work_t req;
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        wu_reset();
        after_count = 0;
        int64_t t0 = wu_now_ns();
        for (unsigned i = 0; i < n; i++) {
            queue(loop, &req);
            run(loop);
        }
        int64_t t1 = wu_now_ns();
        wu_check_count("rtt", n);
        if (after_count != n) wu_die("rtt: %llu after_work callbacks, expected %u",
                                     (unsigned long long)after_count, n);
        if (rep > 0) wu_result(&O, "rtt", rep, (double)(t1 - t0) / n, "ns", "lower");
    }
}

static void row_tp1(uv_loop_t *loop) {
    unsigned n = WU_TP1_N(O.quick);
    uv_work_t *reqs = calloc(n, sizeof *reqs);
    if (reqs == NULL) wu_die("out of memory");
    for (unsigned rep = 0; rep <= O.reps; rep++) {
        wu_reset();
        after_count = 0;
        int64_t t0 = wu_now_ns();
        for (unsigned i = 0; i < n; i++) queue(loop, &reqs[i]);
        run(loop);
        int64_t t1 = wu_now_ns();
        wu_check_count("throughput-1", n);
        if (after_count != n) wu_die("throughput-1: %llu after_work callbacks, expected %u",
                                     (unsigned long long)after_count, n);
        if (rep > 0)
            wu_result(&O, "throughput-1", rep, n / ((double)(t1 - t0) * 1e-9) / 1e6, "Mtasks/s",
                      "higher");
    }
    free(reqs);
}

int main(int argc, char **argv) {
    O = wu_parse(argc, argv, "uv");
    char n[16];
    snprintf(n, sizeof n, "%u", O.threads);
    setenv("UV_THREADPOOL_SIZE", n, 1);
    uv_loop_t loop;
    int rc = uv_loop_init(&loop);
    if (rc != 0) wu_die("uv_loop_init: %s", uv_strerror(rc));
    if (wu_is(&O, "rtt")) row_rtt(&loop);
    else if (wu_is(&O, "throughput-1")) row_tp1(&loop);
    else wu_unknown_row(&O);
    uv_loop_close(&loop);
    return 0;
}
