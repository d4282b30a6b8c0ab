/* knit_buf: a buffer with its own free function, and the arena's free
 * function for buffers allocated in a pool's payload arena. A leaf: the
 * pool's side of payloads (submitting them, a task's and a future's hand-
 * offs) is runtime/payloads.c. */
#include "payload/payload.h"

#include <stdlib.h>
#include <string.h>

#include "payload/arena.h"

static void knit__free_malloced(void *ctx, void *data, size_t len) {
    (void)ctx;
    (void)len;
    free(data);
}

knit_buf knit_buf_malloced(void *data, size_t len) {
    knit_buf b = {data, len, data ? knit__free_malloced : NULL, NULL};
    return b;
}

void knit_buf_free(knit_buf *buf) {
    if (buf == NULL) return;
    knit_buf b = *buf;
    memset(buf, 0, sizeof *buf); /* empty first: a free_fn may look */
    if (b.data != NULL && b.free_fn != NULL) b.free_fn(b.free_ctx, b.data, b.len);
}

void knit__payload_arena_free(void *ctx, void *data, size_t len) {
    (void)len;
    knit__arena_free(ctx, data);
}
