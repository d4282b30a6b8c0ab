/* The discipline registry: register, find by name, list, validate.
 *
 * Lock rule: every access to the table holds knit__reg_lock; registration
 * is rare and lookups happen at pool creation, never on a claim path. The
 * built-ins are registered once, on first use, through knit_sched_register.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "knit/sched.h"
#include "base/error.h"
#include "sched/builtin.h"

static pthread_mutex_t knit__reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t knit__reg_once = PTHREAD_ONCE_INIT;
static const knit_sched_ops *knit__reg[KNIT_SCHED_MAX];
static size_t knit__reg_count; /* guarded by knit__reg_lock */

/* Names that once existed: a stale configuration gets told what to use. */
static const struct {
    const char *name;
    const char *hint;
} knit__removed[] = {
    {"cas-mask", "cas-mask was removed; use ticket"},
};

/* The smallest ops struct this ABI version accepts: up to `claim`. */
#define KNIT__OPS_MIN_SIZE \
    (offsetof(knit_sched_ops, claim) + sizeof(((knit_sched_ops *)0)->claim))

static void knit__register_builtins(void) {
    /* Same call users make. The only possible failure is EEXIST (someone
     * registered a built-in's own ops first), which leaves it registered. */
    (void)knit_sched_register(&knit__sched_ticket);
    (void)knit_sched_register(&knit__sched_dekker);
    (void)knit_sched_register(&knit__sched_single);
}

static void knit__reg_init(void) {
    pthread_once(&knit__reg_once, knit__register_builtins);
}

static int knit__valid_name(const char *n) {
    size_t len = strlen(n);
    if (len == 0 || len > 32) return 0;
    for (size_t i = 0; i < len; i++) {
        char ch = n[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_'))
            return 0;
    }
    return 1;
}

static const knit_sched_ops *knit__find_locked(const char *name) {
    for (size_t i = 0; i < knit__reg_count; i++)
        if (strcmp(knit__reg[i]->name, name) == 0) return knit__reg[i];
    return NULL;
}

int knit_sched_register(const knit_sched_ops *ops) {
    if (ops == NULL) return knit__fail(KNIT_EINVAL, "sched ops is NULL");
    if (ops->abi_version != KNIT_SCHED_ABI_VERSION)
        return knit__fail(KNIT_EABI,
                          "sched plugin abi_version=%u, this knit speaks %u",
                          ops->abi_version, KNIT_SCHED_ABI_VERSION);
    if (ops->size < KNIT__OPS_MIN_SIZE)
        return knit__fail(KNIT_EABI, "sched ops size=%u, at least %zu",
                          ops->size, (size_t)KNIT__OPS_MIN_SIZE);
    if (ops->name == NULL || !knit__valid_name(ops->name))
        return knit__fail(KNIT_EINVAL,
                          "sched name \"%s\" must be 1-32 of [a-z0-9_-]",
                          ops->name ? ops->name : "(null)");
    if (ops->claim == NULL)
        return knit__fail(KNIT_EINVAL, "sched \"%s\" has no claim op",
                          ops->name);
    for (size_t i = 0; i < sizeof knit__removed / sizeof knit__removed[0]; i++)
        if (strcmp(ops->name, knit__removed[i].name) == 0)
            return knit__fail(KNIT_EEXIST, "sched name \"%s\" is reserved (%s)",
                              ops->name, knit__removed[i].hint);
    /* Built-ins first, so a user cannot take their names. The once-routine
     * itself calls us: knit__reg_once is then already running, not waited. */
    if (ops != &knit__sched_ticket && ops != &knit__sched_dekker &&
        ops != &knit__sched_single)
        knit__reg_init();
    int rc = 0;
    pthread_mutex_lock(&knit__reg_lock);
    if (knit__find_locked(ops->name) != NULL)
        rc = knit__fail(KNIT_EEXIST, "sched \"%s\" is already registered",
                        ops->name);
    else if (knit__reg_count == KNIT_SCHED_MAX)
        rc = knit__fail(KNIT_ENOMEM, "sched registry full (%u disciplines)",
                        KNIT_SCHED_MAX);
    else
        knit__reg[knit__reg_count++] = ops;
    pthread_mutex_unlock(&knit__reg_lock);
    return rc;
}

const knit_sched_ops *knit_sched_find(const char *name) {
    if (name == NULL) return NULL;
    knit__reg_init();
    pthread_mutex_lock(&knit__reg_lock);
    const knit_sched_ops *ops = knit__find_locked(name);
    pthread_mutex_unlock(&knit__reg_lock);
    return ops;
}

size_t knit_sched_list(const knit_sched_ops **out, size_t cap) {
    knit__reg_init();
    pthread_mutex_lock(&knit__reg_lock);
    size_t n = knit__reg_count;
    for (size_t i = 0; i < n && i < cap; i++) out[i] = knit__reg[i];
    pthread_mutex_unlock(&knit__reg_lock);
    return n;
}

const char *knit_sched_default_name(void) { return "ticket"; }

int knit_sched_lookup(const char *name, const char *source,
                      const knit_sched_ops **out) {
    if (source == NULL) source = "sched";
    const knit_sched_ops *ops = knit_sched_find(name);
    if (ops != NULL) {
        if (out) *out = ops;
        return 0;
    }
    /* Never fall back: a typo that silently ran another discipline would
     * report that discipline's behaviour and numbers under this name. */
    char names[256] = "";
    const knit_sched_ops *all[KNIT_SCHED_MAX];
    size_t n = knit_sched_list(all, KNIT_SCHED_MAX);
    size_t at = 0;
    for (size_t i = 0; i < n && at < sizeof names; i++)
        at += (size_t)snprintf(names + at, sizeof names - at, "%s%s",
                               i ? ", " : "", all[i]->name);
    const char *hint = NULL;
    for (size_t i = 0; name && i < sizeof knit__removed / sizeof knit__removed[0];
         i++)
        if (strcmp(name, knit__removed[i].name) == 0) hint = knit__removed[i].hint;
    if (name == NULL)
        return knit__fail(KNIT_EINVAL, "%s must be one of %s; got NULL", source,
                          names);
    return knit__fail(KNIT_EINVAL, "%s must be one of %s; got \"%s\"%s%s%s",
                      source, names, name, hint ? " (" : "", hint ? hint : "",
                      hint ? ")" : "");
}

int knit_sched_resolve(const char *requested, const knit_sched_ops **out) {
    if (requested != NULL) return knit_sched_lookup(requested, "sched", out);
    const char *env = getenv("KNIT_SCHED");
    if (env != NULL) return knit_sched_lookup(env, "KNIT_SCHED", out);
    return knit_sched_lookup(knit_sched_default_name(), "sched", out);
}

int knit_sched_fail(int code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    knit__set_last_error(msg);
    return code;
}
