/* The error table and the thread-local detailed message. */
#define _GNU_SOURCE
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Long enough for a message that lists every registered discipline. */
#define KNIT__LAST_ERROR_MAX 512

static _Thread_local char knit__last_error[KNIT__LAST_ERROR_MAX];

const char *knit_strerror(int code) {
    switch (code) {
#define KNIT__ERRNO_CASE(name, value, text) \
    case (value):                           \
        return "KNIT_" #name ": " text;
        KNIT_ERRNO_MAP(KNIT__ERRNO_CASE)
#undef KNIT__ERRNO_CASE
    case 0:
        return "success";
    default:
        return "unknown error";
    }
}

const char *knit_last_error(void) { return knit__last_error; }

void knit__set_last_error(const char *msg) {
    size_t n = strlen(msg);
    if (n >= sizeof knit__last_error) n = sizeof knit__last_error - 1;
    memmove(knit__last_error, msg, n);
    knit__last_error[n] = '\0';
}

int knit__fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(knit__last_error, sizeof knit__last_error, fmt, ap);
    va_end(ap);
    return code;
}

int knit_error(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(knit__last_error, sizeof knit__last_error, fmt, ap);
    va_end(ap);
    return code;
}

char *knit__vformat(const char *fmt, va_list ap) {
    char *msg = NULL;
    if (fmt != NULL && vasprintf(&msg, fmt, ap) < 0) msg = NULL;
    return msg;
}
