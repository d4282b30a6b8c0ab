/* The claim trace wrapper (see trace.h). Everything it reports is read
 * before and after the claim, outside it, so it cannot change the protocol. */
#include "runtime/trace.h"

#include <stdio.h>

#include "runtime/carpet.h"

struct knit__trace_visit {
    knit_lane_visit_fn visit;
    void *ctx;
    unsigned count;
    unsigned char lanes[KNIT_LANES];
};

static int knit__trace_visit_one(void *p, unsigned lane) {
    struct knit__trace_visit *t = p;
    if (t->count < KNIT_LANES) t->lanes[t->count++] = (unsigned char)lane;
    return t->visit(t->ctx, lane);
}

int knit__trace_claim(knit_carpet *c, void *state, unsigned consumer,
                      knit_lane_visit_fn visit, void *ctx) {
    const knit_sched_ops *ops = knit__carpet_ops(c);
    uint64_t note[4] = {0, 0, 0, 0};
    long visible;
    if (ops->trace_note != NULL)
        visible = ops->trace_note(c, state, consumer, 0, note, NULL, 0);
    else
        visible = __builtin_popcount(knit_carpet_host_bits(c) ^
                                     knit_carpet_worker_bits(c));
    struct knit__trace_visit tv = {visit, ctx, 0, {0}};
    int rc = ops->claim(c, state, consumer, knit__trace_visit_one, &tv);
    uint64_t *lost = knit__carpet_trace_lost(c, consumer);
    if (tv.count == 0) {
        if (rc == 0 && visible > 0) (*lost)++;
        return rc;
    }
    char line[512];
    int at = snprintf(line, sizeof line, "claim count=%u lanes=", tv.count);
    for (unsigned i = 0; i < tv.count && at < (int)sizeof line; i++)
        at += snprintf(line + at, sizeof line - (size_t)at, "%s%u", i ? "," : "",
                       tv.lanes[i]);
    if (ops->trace_note != NULL && at < (int)sizeof line - 1) {
        line[at++] = ' ';
        line[at] = '\0';
        note[3] = tv.count;
        ops->trace_note(c, state, consumer, 1, note, line + at,
                        sizeof line - (size_t)at);
        while (at < (int)sizeof line && line[at] != '\0') at++;
    }
    if (at < (int)sizeof line)
        at += snprintf(line + at, sizeof line - (size_t)at, " lost=%llu",
                       (unsigned long long)*lost);
    if (rc < 0 && at < (int)sizeof line)
        snprintf(line + at, sizeof line - (size_t)at, " error=%d", rc);
    *lost = 0;
    knit_claim_trace_fn fn;
    void *fn_ctx;
    knit__carpet_trace_sink(c, &fn, &fn_ctx);
    fn(fn_ctx, line);
    return rc;
}
