/* moved_buffers: a buffer moved into a task, transformed in place, and
 * returned to the awaiter without a copy; then arena memory through a
 * three-stage chain of continuations.
 *
 *   ./bazelw run //examples:moved_buffers
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <knit/knit.h>

/* Upper-cases its input in place and hands the same buffer back. */
static void *upcase(knit_task *task, void *arg) {
    (void)arg;
    knit_buf b = knit_task_take_buf(task); /* the task owns it now */
    char *s = b.data;
    for (size_t i = 0; i < b.len; i++)
        if (s[i] >= 'a' && s[i] <= 'z') s[i] = (char)(s[i] - 32);
    knit_task_return_buf(task, &b); /* moved on to whoever awaits */
    return NULL;
}

/* A continuation: takes what the previous stage returned, adds 1 to every
 * byte, and passes it on. */
static void *add_one(knit_task *task, void *arg) {
    (void)arg;
    knit_buf b;
    if (knit_task_antecedent_buf(task, &b) != 0) {
        knit_task_fail(task, 1, "no buffer from the previous stage");
        return NULL;
    }
    unsigned char *p = b.data;
    for (size_t i = 0; i < b.len; i++) p[i]++;
    knit_task_return_buf(task, &b);
    return NULL;
}

static void *start(knit_task *task, void *arg) {
    (void)arg;
    knit_buf b = knit_task_take_buf(task);
    knit_task_return_buf(task, &b);
    return NULL;
}

int main(void) {
    knit_pool_options opts = KNIT_POOL_OPTIONS_INIT;
    opts.threads = 2;
    knit_pool *pool;
    if (knit_pool_create(&opts, &pool) != 0) {
        fprintf(stderr, "moved_buffers: %s\n", knit_last_error());
        return 1;
    }
    int ok = 1;

    /* 1. A malloc'ed buffer: moved in, changed, moved back. */
    char *text = strdup("moved, not copied");
    knit_buf b = knit_buf_malloced(text, strlen(text) + 1);
    knit_future *f;
    if (knit_submit_buf(pool, upcase, &b, &f) != 0) {
        fprintf(stderr, "moved_buffers: %s\n", knit_last_error());
        return 1;
    }
    ok &= b.data == NULL; /* the move emptied our handle */
    knit_await(f, -1, NULL);
    knit_buf back;
    ok &= knit_future_take_buf(f, &back) == 0;
    printf("moved_buffers: \"%s\" (%s pointer as sent)\n", (char *)back.data,
           back.data == text ? "same" : "a different");
    ok &= back.data == text && strcmp(back.data, "MOVED, NOT COPIED") == 0;
    ok &= knit_future_take_buf(f, &back) == KNIT_EALREADY; /* not twice */
    knit_future_release(f);
    knit_buf_free(&back); /* frees `text`, once */

    /* 2. Arena memory through three stages: start -> add_one -> add_one. */
    size_t n = 1 << 20;
    unsigned char *mem = knit_payload_alloc(pool, n);
    if (mem == NULL) {
        fprintf(stderr, "moved_buffers: %s\n", knit_last_error());
        return 1;
    }
    memset(mem, 40, n);
    knit_buf a = knit_payload_buf(pool, mem, n);
    knit_future *s1, *s2, *s3;
    knit_submit_buf(pool, start, &a, &s1);
    knit_future_then(s1, add_one, NULL, &s2);
    knit_future_then(s2, add_one, NULL, &s3);
    ok &= knit_await(s3, -1, NULL) == 0;
    knit_buf out;
    ok &= knit_future_take_buf(s3, &out) == 0;
    ok &= out.data == mem && out.len == n && mem[0] == 42 && mem[n - 1] == 42;
    knit_pool_stats_t st = {.size = sizeof st};
    knit_pool_stats(pool, &st);
    printf("moved_buffers: 1 MiB through 3 stages, %s pointer, arena %llu bytes "
           "in use\n",
           out.data == mem ? "same" : "a different",
           (unsigned long long)st.arena_bytes);
    knit_buf_free(&out); /* back into the arena */
    knit_future_release(s1);
    knit_future_release(s2);
    knit_future_release(s3);
    knit_pool_stats(pool, &st);
    ok &= st.arena_bytes == 0;

    knit_pool_destroy(pool, KNIT_DRAIN);
    printf("moved_buffers: %s\n", ok ? "verified" : "FAILED");
    return ok ? 0 : 1;
}
