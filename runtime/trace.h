/* The claim trace: a wrapper chosen once, at carpet creation, when a trace
 * callback is given. Untraced carpets call the discipline's claim directly. */
#ifndef KNIT_RUNTIME_TRACE_H
#define KNIT_RUNTIME_TRACE_H

#include "knit/sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs the carpet's discipline claim and reports one line per successful
 * claim: "claim count=N lanes=a,b,... <discipline fields> lost=L", lanes in
 * run order; L counts this consumer's polls since its last claim that saw
 * claimable work and came back empty (a peer got there first). */
int knit__trace_claim(knit_carpet *c, void *state, unsigned consumer,
                      knit_lane_visit_fn visit, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
