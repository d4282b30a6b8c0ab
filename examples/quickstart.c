/* quickstart: submit, await, a failing task, a cancelled one, release.
 *
 *   ./bazelw run //examples:quickstart
 */
#include <stdio.h>
#include <string.h>

#include <knit/knit.h>

static void *shout(knit_task *task, void *arg) {
    const char *word = arg;
    if (word == NULL || *word == '\0') {
        knit_task_fail(task, 42, "nothing to shout");
        return NULL;
    }
    static char out[64];
    size_t n = strlen(word) < sizeof out - 2 ? strlen(word) : sizeof out - 2;
    for (size_t i = 0; i < n; i++)
        out[i] = (char)(word[i] >= 'a' && word[i] <= 'z' ? word[i] - 32 : word[i]);
    out[n] = '!';
    out[n + 1] = '\0';
    return out;
}

int main(void) {
    knit_pool_options opts = KNIT_POOL_OPTIONS_INIT; /* one worker per CPU */
    knit_pool *pool;
    if (knit_pool_create(&opts, &pool) != 0) {
        fprintf(stderr, "quickstart: %s\n", knit_last_error());
        return 1;
    }
    int ok = 1;

    /* 1. Submit and await. */
    knit_future *f;
    knit_submit(pool, shout, "hello", &f);
    void *result;
    if (knit_await(f, -1, &result) == 0) {
        printf("quickstart: task returned \"%s\"\n", (char *)result);
        ok &= strcmp(result, "HELLO!") == 0;
    } else {
        ok = 0;
    }
    knit_future_release(f);

    /* 2. A task that fails: the awaiter gets KNIT_ETASK and the message. */
    knit_submit(pool, shout, "", &f);
    int rc = knit_await(f, -1, NULL);
    printf("quickstart: failing task: %s / %s\n", knit_strerror(rc),
           knit_last_error());
    ok &= rc == KNIT_ETASK && strstr(knit_last_error(), "nothing to shout");
    knit_future_release(f);

    /* 3. Bad input is an error code, never a crash. */
    rc = knit_submit(pool, NULL, NULL, &f);
    printf("quickstart: submit(NULL fn): %s\n", knit_last_error());
    ok &= rc == KNIT_EINVAL;

    knit_pool_destroy(pool, KNIT_DRAIN);
    rc = knit_submit(pool, shout, "late", &f);
    printf("quickstart: submit after destroy: %s\n", knit_strerror(rc));
    ok &= rc == KNIT_ESHUTDOWN;

    printf("quickstart: %s\n", ok ? "verified" : "FAILED");
    return ok ? 0 : 1;
}
