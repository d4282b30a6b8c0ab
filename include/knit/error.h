/* knit — error codes.
 *
 * Every public function returns 0 or a negative KNIT_E* code. One X-macro
 * table lists them; it also generates knit_strerror(). knit_last_error()
 * returns this thread's last detailed message (which option, which value,
 * which limit); it is valid until the thread's next failing knit call.
 */
#ifndef KNIT_ERROR_H
#define KNIT_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, text) */
#define KNIT_ERRNO_MAP(X)                                                   \
    X(EINVAL, -1, "invalid argument")                                      \
    X(ENOMEM, -2, "out of memory")                                         \
    X(EAGAIN, -3, "resource temporarily unavailable (bound reached)")      \
    X(ETIMEDOUT, -4, "timed out")                                          \
    X(ECANCELED, -5, "canceled")                                           \
    X(ETASK, -6, "task failed")                                            \
    X(ESHUTDOWN, -7, "pool is shut down")                                  \
    X(ECLOSED, -8, "claim queue closed")                                   \
    X(ENOENT, -9, "no such entry")                                         \
    X(EEXIST, -10, "already exists")                                       \
    X(E2BIG, -11, "payload too large")                                     \
    X(EBUSY, -12, "busy")                                                  \
    X(EABI, -13, "incompatible plugin ABI")                                \
    X(EALREADY, -14, "already taken or released")                          \
    X(EIO, -15, "input/output error")

enum knit_errno {
#define KNIT__ERRNO_ENUM(name, value, text) KNIT_##name = (value),
    KNIT_ERRNO_MAP(KNIT__ERRNO_ENUM)
#undef KNIT__ERRNO_ENUM
};

/* Short fixed text for a code; "unknown error" for a value not in the table.
 * Thread-safe; the string is static. */
const char *knit_strerror(int code);

/* This thread's last detailed message, set by the knit call that failed last
 * on this thread (never cleared by a success). "" before any failure. */
const char *knit_last_error(void);

/* Sets this thread's knit_last_error() message and returns `code`: how a
 * range or stage function reports a failure with a message. */
int knit_error(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif /* KNIT_ERROR_H */
