/* Test and benchmark access to the "ticket" discipline's words. */
#ifndef KNIT_SCHED_TICKET_H
#define KNIT_SCHED_TICKET_H

#include <stdint.h>

#include "knit/sched.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The closed-queue head value. */
#define KNIT__TICKET_CLOSED (-1)

int64_t knit__ticket_head(const knit_carpet *c);
uint32_t knit__ticket_tail(const knit_carpet *c);
/* Moves an idle ticket carpet (nothing in flight, producer not running) to
 * head = tail = `head`, so tests can start next to a boundary. */
void knit__ticket_seed(knit_carpet *c, int64_t head);

#ifdef __cplusplus
}
#endif
#endif
