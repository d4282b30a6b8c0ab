/* handoff: a producer thread passes a million tasks to a consumer thread
 * through one carpet (knit's lane core) and prints the throughput.
 *
 *   ./bazelw run //examples:handoff -- [tasks] [sched]
 *
 * Each task carries its number and a small inline payload; the consumer
 * checks every task arrives exactly once, in order, with its payload
 * intact, and exits non-zero if not.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "knit/sched.h"
#include "runtime/carpet.h"

struct run {
    knit_carpet *carpet;
    uint64_t tasks;
    uint64_t next;     /* consumer: the id it expects next */
    uint64_t checksum; /* consumer: sum of payload bytes */
    uint64_t errors;
};

static void fill(uint64_t id, unsigned char out[16]) {
    for (int i = 0; i < 16; i++) out[i] = (unsigned char)(id >> (i % 8 * 8)) ^ (unsigned char)i;
}

static int visit(void *ctx, unsigned lane) {
    struct run *r = ctx;
    const knit__slot *s = knit__carpet_slot(r->carpet, lane);
    uint64_t id = (uint64_t)(uintptr_t)s->task.arg;
    unsigned char want[16];
    fill(id, want);
    if (id != r->next || s->task.len != 16 || memcmp(want, s->data, 16) != 0)
        r->errors++;
    for (int i = 0; i < 16; i++) r->checksum += s->data[i];
    r->next = id + 1;
    return 0;
}

static void *consume(void *arg) {
    struct run *r = arg;
    unsigned idle = 0;
    while (r->next < r->tasks) {
        int n = knit__carpet_claim(r->carpet, 0, visit, r);
        if (n < 0) {
            fprintf(stderr, "handoff: claim failed: %s\n", knit_strerror(n));
            r->errors++;
            break;
        }
        if (n > 0) {
            idle = 0;
        } else if (++idle > 128) {
            knit__carpet_park(r->carpet, 1000000); /* 1 ms at most */
            idle = 0;
        }
    }
    return NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    uint64_t tasks = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    const char *sched = argc > 2 ? argv[2] : NULL;
    if (tasks == 0) {
        fprintf(stderr, "usage: handoff [tasks > 0] [sched]\n");
        return 2;
    }
    const knit_sched_ops *ops;
    if (knit_sched_resolve(sched, &ops) != 0) {
        fprintf(stderr, "handoff: %s\n", knit_last_error());
        return 2;
    }
    knit_sched_params params = {.consumers = 1, .region_lanes = 8};
    struct run r = {.tasks = tasks};
    if (knit__carpet_create(ops, &params, NULL, NULL, &r.carpet) != 0) {
        fprintf(stderr, "handoff: %s\n", knit_last_error());
        return 1;
    }
    double t0 = now_s();
    pthread_t consumer;
    if (pthread_create(&consumer, NULL, consume, &r) != 0) {
        fprintf(stderr, "handoff: cannot start the consumer thread\n");
        return 1;
    }
    knit__lane_task t = {0};
    unsigned char bytes[16];
    uint64_t expect_sum = 0;
    for (uint64_t id = 0; id < tasks;) {
        t.arg = (void *)(uintptr_t)id;
        fill(id, bytes);
        int lane = knit__carpet_publish(r.carpet, &t, bytes, sizeof bytes);
        if (lane >= 0) {
            for (int i = 0; i < 16; i++) expect_sum += bytes[i];
            if ((++id & 7) == 0) knit__carpet_flush(r.carpet);
        } else {
            knit__carpet_flush(r.carpet); /* full: let the consumer catch up */
            sched_yield();
        }
    }
    knit__carpet_flush(r.carpet);
    pthread_join(consumer, NULL);
    double secs = now_s() - t0;
    knit__carpet_stats st;
    knit__carpet_stats_get(r.carpet, &st);
    printf("handoff: %llu tasks via \"%s\" in %.3f s: %.2f M tasks/s\n",
           (unsigned long long)tasks, ops->name, secs, (double)tasks / secs / 1e6);
    printf("handoff: %llu bursts, %llu doorbell wakes, %llu shadow reloads, "
           "%llu full\n",
           (unsigned long long)st.flushes, (unsigned long long)st.rings,
           (unsigned long long)st.shadow_reloads, (unsigned long long)st.full);
    int ok = r.errors == 0 && r.next == tasks && r.checksum == expect_sum;
    printf("handoff: %s (every task once, in order, payload intact)\n",
           ok ? "verified" : "FAILED");
    knit__carpet_destroy(r.carpet);
    return ok ? 0 : 1;
}
