/* Internal: payload kinds and out states, and the arena's knit_free_fn.
 * The ownership rules are in <knit/knit.h> ("payloads") and
 * runtime/payloads.c, which makes the hand-offs. */
#ifndef KNIT_PAYLOAD_PAYLOAD_H
#define KNIT_PAYLOAD_PAYLOAD_H

#include "knit/knit.h"

enum {
    KNIT__PAY_NONE = 0,
    KNIT__PAY_INLINE = 1, /* bytes in the future's inline area */
    KNIT__PAY_ARENA = 2,  /* copied into the pool's arena by the runtime */
    KNIT__PAY_BINARY = 3, /* the user's arena memory, moved in */
    KNIT__PAY_MOVED = 4,  /* any knit_buf, moved in */
};

enum {
    KNIT__OUT_NONE = 0,  /* the task returned no buffer */
    KNIT__OUT_SET = 1,   /* returned, not taken: the future owns it */
    KNIT__OUT_TAKEN = 2, /* taken (or freed with the future) */
};

/* The arena's knit_free_fn (ctx is the arena). */
void knit__payload_arena_free(void *ctx, void *data, size_t len);

#endif
