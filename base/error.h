/* Internal: setting the thread's detailed error message. */
#ifndef KNIT_BASE_ERROR_H
#define KNIT_BASE_ERROR_H

#include <stdarg.h>

#include "knit/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Formats this thread's last-error message and returns `code`, so a failure
 * path reads `return knit__fail(KNIT_EINVAL, "threads=%u over %u", t, max);`. */
int knit__fail(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A malloc'ed copy of fmt formatted with ap (a task's failure, a
 * promise's rejection), or NULL for a NULL fmt or no memory. */
char *knit__vformat(const char *fmt, va_list ap);

/* Copies a message (already formatted) into this thread's last error. */
void knit__set_last_error(const char *msg);

#ifdef __cplusplus
}
#endif
#endif
