/* A user's program built against @knit//:knit from another workspace:
 * submits, awaits, and runs a pipeline, checking each result. Prints
 * "consumer: ok ..." and exits 0, or says what failed and exits 1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <knit/knit.h>

static void *twice(knit_task *task, void *arg) {
    (void)task;
    return (void *)((uintptr_t)arg * 2);
}

struct source {
    unsigned next, n;
};

/* Items: malloc'ed buffers holding their index. */
static int input(void *ctx, knit_buf *item) {
    struct source *s = ctx;
    if (s->next == s->n) return 0;
    unsigned *v = malloc(sizeof *v);
    if (v == NULL) return knit_error(KNIT_ENOMEM, "input: out of memory");
    *v = s->next++;
    *item = knit_buf_malloced(v, sizeof *v);
    return 1;
}

static int square(void *ctx, uint64_t seq, knit_buf *item) {
    (void)ctx, (void)seq;
    unsigned *v = item->data;
    *v = *v * *v;
    return 0;
}

struct sink {
    uint64_t sum, next_seq;
    int out_of_order;
};

static int collect(void *ctx, uint64_t seq, knit_buf *item) {
    struct sink *k = ctx;
    if (seq != k->next_seq++) k->out_of_order++;
    k->sum += *(unsigned *)item->data;
    return 0;
}

int main(void) {
    knit_pool_options opts = KNIT_POOL_OPTIONS_INIT;
    opts.threads = 2;
    knit_pool *pool;
    if (knit_pool_create(&opts, &pool) != 0) {
        fprintf(stderr, "consumer: pool: %s\n", knit_last_error());
        return 1;
    }
    int bad = 0;

    enum { N = 1000 };
    static knit_future *fs[N];
    uint64_t sum = 0;
    for (uintptr_t i = 0; i < N; i++) {
        if (knit_submit(pool, twice, (void *)i, &fs[i]) != 0) {
            fprintf(stderr, "consumer: submit: %s\n", knit_last_error());
            return 1;
        }
    }
    for (size_t i = 0; i < N; i++) {
        void *r;
        if (knit_await(fs[i], -1, &r) != 0) bad++;
        sum += (uintptr_t)r;
        knit_future_release(fs[i]);
    }
    if (sum != (uint64_t)N * (N - 1)) {
        fprintf(stderr, "consumer: submit/await sum %llu\n", (unsigned long long)sum);
        bad++;
    }

    struct source src = {0, 500};
    struct sink snk = {0, 0, 0};
    knit_stage stages[] = {
        {KNIT_STAGE_PARALLEL, square, NULL},
        {KNIT_STAGE_SERIAL_IN_ORDER, collect, &snk},
    };
    knit_pipeline_options po = KNIT_PIPELINE_OPTIONS_INIT;
    po.input = input;
    po.input_ctx = &src;
    po.stages = stages;
    po.nstages = 2;
    knit_pipeline *pl;
    if (knit_pipeline_create(pool, &po, &pl) != 0 || knit_pipeline_run(pl) != 0) {
        fprintf(stderr, "consumer: pipeline: %s\n", knit_last_error());
        return 1;
    }
    knit_pipeline_destroy(pl);
    uint64_t want = 0;
    for (uint64_t i = 0; i < src.n; i++) want += i * i;
    if (snk.sum != want || snk.out_of_order != 0 || snk.next_seq != src.n) {
        fprintf(stderr, "consumer: pipeline sum %llu (want %llu), %d out of order\n",
                (unsigned long long)snk.sum, (unsigned long long)want,
                snk.out_of_order);
        bad++;
    }
    knit_pool_destroy(pool, KNIT_DRAIN);
    if (bad) return 1;
    printf("consumer: ok knit %s: %d tasks, pipeline of %u items\n",
           knit_version(), N, src.n);
    return 0;
}
