/* //bench:compare — knit side by side with oneTBB, OpenMP, GThreadPool,
 * libuv and pigz, in one run on one machine.
 *
 *   ./bazelw run //bench:compare -- [--quick] [--out DIR] [--threads N]
 *                                   [--reps R] [--rounds K]
 *                                   [--rows a,b] [--runtimes a,b]
 *
 * Every row runs for knit under each registered discipline that accepts N
 * workers, and for each peer; every (row, runtime) pair runs in its own
 * child process (one workload binary per runtime, see work_util.h for the
 * protocol), so runtimes never share a process. The whole list runs K
 * times over (3 by default, 1 with --quick), each job for R/K reps a
 * round: the VM's speed drifts 2-3x over minutes, and interleaving gives
 * every runtime the same share of fast and slow spells. The driver prints a table
 * (median, min, max per row and runtime, and knit's median over the best
 * peer's), the targets of issues 7, 12, 13 and 19, and writes
 * bench-results.csv, the table and a gnuplot chart (bench-chart.png) into
 * --out.
 *
 * Issue 13: OpenMP's throughput-1 result is the variant "inline" (libgomp
 * runs most of those tasks as calls on the creating thread; omp_work
 * prints the share, shown in the table), so it is never the best peer of
 * a row: knit is compared with the best peer that hands tasks over.
 * "limit" (threads x the serial pipeline) is a baseline like serial.
 *
 * The timeline (issue 15): knit also runs under "ticket+tl", the ticket
 * discipline with KNIT_TIMELINE on (the file goes to /dev/null; the
 * workload binaries write it at pool destroy, after their timed part,
 * pgzip within its time). The other variants run with KNIT_TIMELINE
 * unset, so "ticket" against "ticket+tl" is the cost of recording.
 *
 * pgzip's engines (issue 19): the "pgzip" row runs pgzip with zlib, pigz's
 * own engine, under every discipline, against pigz -6; "pgzip-libdeflate"
 * (--level 6, pgzip's default there) and "pgzip-isal" (--fast) run under
 * the first discipline only and are compared with the same pigz run. Each
 * pgzip row prints the compression ratio (input / output) beside the
 * MiB/s, and a target line says whether the output is no larger than
 * pigz's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SERIES 128
#define MAX_VALUES 1000
#define MAX_VARIANTS 16

/* snprintf that truncates silently (paths and notes here are bounded by
 * the buffers on purpose; gcc's -Wformat-truncation would flag each). */
static int sfmt(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sfmt(char *out, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, cap, fmt, ap);
    va_end(ap);
    return n;
}

/* ------------------------------------------------------------------ */
/* What runs                                                           */

typedef struct workload {
    const char *row;
    const char *runtimes[6];
    const char *shows[2]; /* result rows it prints (NULL: just `row`) */
    int first_variant;    /* knit runs under its first discipline only */
} workload;

static const workload WORKLOADS[] = {
    {"rtt", {"knit", "tbb", "glib", "uv"}, {NULL}, 0},
    {"throughput-1", {"knit", "tbb", "omp", "glib", "uv"}, {NULL}, 0},
    {"throughput-1-caller-runs", {"knit", "omp"}, {NULL}, 0},
    {"throughput-4", {"knit", "tbb", "glib"}, {NULL}, 0},
    {"fib", {"knit", "tbb", "omp", "serial"}, {"fib", "fib-task"}, 0},
    {"skynet", {"knit", "tbb", "omp", "serial"}, {NULL}, 0},
    {"pipeline", {"knit", "tbb", "serial"}, {NULL}, 0},
    {"reduce", {"knit", "tbb", "omp", "serial"}, {NULL}, 0},
    {"pgzip", {"knit", "pigz"}, {NULL}, 0},
    {"pgzip-libdeflate", {"knit"}, {NULL}, 1},
    {"pgzip-isal", {"knit"}, {NULL}, 1},
    {"idle", {"knit", "tbb", "glib"}, {NULL}, 0},
    {"wake", {"knit", "tbb", "glib"}, {NULL}, 0},
    {"floor", {"machine"}, {"floor-line", "floor-futex"}, 0},
};
#define NWORKLOADS (sizeof WORKLOADS / sizeof WORKLOADS[0])

/* Display order of the result rows. */
static const char *const ROW_ORDER[] = {
    "rtt",      "throughput-1", "throughput-1-caller-runs", "throughput-4", "fib",
    "fib-task", "skynet",       "pipeline",     "reduce",       "pgzip",
    "pgzip-libdeflate", "pgzip-isal", "idle", "wake",       "floor-line",
    "floor-futex",
};
#define NROW_ORDER (sizeof ROW_ORDER / sizeof ROW_ORDER[0])

static const char *const RUNTIME_ORDER[] = {"knit", "tbb", "omp", "glib", "uv", "pigz",
                                            "serial", "limit", "machine"};
#define NRUNTIME_ORDER (sizeof RUNTIME_ORDER / sizeof RUNTIME_ORDER[0])

enum kind { K_KNIT, K_PEER, K_BASE };

static enum kind kind_of(const char *runtime) {
    if (strcmp(runtime, "knit") == 0) return K_KNIT;
    if (strcmp(runtime, "serial") == 0 || strcmp(runtime, "machine") == 0 ||
        strcmp(runtime, "limit") == 0)
        return K_BASE;
    return K_PEER;
}

/* A peer's result that is not a hand-off (OpenMP's throughput-1, see the
 * top of this file): shown, never the best peer. */
static int inline_variant(const char *variant) { return strcmp(variant, "inline") == 0; }

static const char *binary_of(const char *runtime) {
    if (strcmp(runtime, "serial") == 0 || strcmp(runtime, "machine") == 0) return "machine_work";
    static char name[32];
    sfmt(name, sizeof name, "%s_work", runtime);
    return name;
}

/* The row whose peers a row's knit results are compared with: the pgzip
 * engine rows share the "pgzip" row's pigz run. */
static const char *peer_row(const char *row) {
    return strncmp(row, "pgzip-", 6) == 0 ? "pgzip" : row;
}

/* ------------------------------------------------------------------ */
/* Results                                                             */

typedef struct series {
    char row[32], runtime[16], variant[48], unit[16], better[8];
    double v[MAX_VALUES];
    unsigned n;
    int failed;
    char note[200];
    double cratio;    /* pgzip rows: compression ratio (input / output), 0: none */
    uint64_t out_len; /* pgzip rows: bytes of output */
    double share_sum; /* INFO creator-ran: fractions of tasks run on the */
    unsigned share_n; /* creating thread, summed over reps */
    /* computed */
    double med, min, max;
    int has_ratio;
    double ratio; /* knit median / best peer median */
    char best[16];
} series;

static series S[MAX_SERIES];
static unsigned NS;

static series *find_series(const char *row, const char *runtime, const char *variant) {
    for (unsigned i = 0; i < NS; i++)
        if (!strcmp(S[i].row, row) && !strcmp(S[i].runtime, runtime) &&
            !strcmp(S[i].variant, variant))
            return &S[i];
    return NULL;
}

static series *get_series(const char *row, const char *runtime, const char *variant) {
    series *s = find_series(row, runtime, variant);
    if (s != NULL) return s;
    if (NS == MAX_SERIES) {
        fprintf(stderr, "compare: too many result series\n");
        exit(1);
    }
    s = &S[NS++];
    memset(s, 0, sizeof *s);
    sfmt(s->row, sizeof s->row, "%s", row);
    sfmt(s->runtime, sizeof s->runtime, "%s", runtime);
    sfmt(s->variant, sizeof s->variant, "%s", variant);
    return s;
}

static void add_value(series *s, double v, const char *unit, const char *better) {
    if (s->n < MAX_VALUES) s->v[s->n++] = v;
    sfmt(s->unit, sizeof s->unit, "%s", unit);
    sfmt(s->better, sizeof s->better, "%s", better);
}

static void fail_series(series *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_series(series *s, const char *fmt, ...) {
    if (s->failed) return; /* keep the first reason */
    s->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->note, sizeof s->note, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------ */
/* Options and environment                                             */

static struct {
    int quick, verbose, no_timeline;
    unsigned threads, reps, rounds;
    unsigned per_round; /* reps of each job in one round: reps / rounds, rounded up */
    char out[PATH_MAX];
    char rows[256], runtimes[256]; /* comma lists; empty: all */
} opt;

static char variants[MAX_VARIANTS][24]; /* knit's disciplines that run */
static unsigned nvariants;
static char self_dir[PATH_MAX];   /* directory of this binary (resolved) */
static char self_path[PATH_MAX];
static char tmp_dir[PATH_MAX];    /* scratch for pgzip; removed at exit */
/* Shared with the signal handler: lock-free atomics are safe there (C11
 * 7.14.1.1). relaxed everywhere: the handler runs on the same (only)
 * thread, so there is nothing to order, just tearing to avoid. */
static atomic_int interrupted;   /* the signal that stopped us, 0: none */
static atomic_int current_child; /* the child running now, 0: none */

static void on_signal(int sig) {
    atomic_store_explicit(&interrupted, sig, memory_order_relaxed);
    pid_t c = atomic_load_explicit(&current_child, memory_order_relaxed);
    if (c > 0) kill(c, SIGKILL);
}

static int stop_requested(void) {
    return atomic_load_explicit(&interrupted, memory_order_relaxed) != 0;
}

static int in_list(const char *list, const char *name) {
    if (list[0] == '\0') return 1;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: compare [--quick] [--out DIR] [--threads N] [--reps R]\n"
            "               [--rows LIST] [--runtimes LIST] [--verbose]\n"
            "Runs every row for knit (under each discipline that accepts N workers)\n"
            "and for each peer, each in its own process, and prints medians, min, max\n"
            "and knit's median over the best peer's. Writes bench-results.csv,\n"
            "bench-table.txt and bench-chart.png into DIR.\n"
            "\n"
            "  --quick          a smoke run: 3 reps, small sizes (seconds)\n"
            "  --out DIR        default: $BUILD_WORKSPACE_DIRECTORY/bench-out under\n"
            "                   bazel run, else ./bench-out\n"
            "  --threads N      worker threads for every runtime (default 2)\n"
            "  --reps R         repetitions per row and runtime (default 6; quick 3)\n"
            "  --rounds K       run the whole job list K times over, each job for\n"
            "                   R/K reps (rounded up) in its own process each time\n"
            "                   (default 3; quick 1), so every runtime meets the\n"
            "                   machine's fast and slow spells alike\n"
            "  --rows LIST      only these rows (comma-separated): rtt,throughput-1,\n"
            "                   throughput-1-caller-runs,\n"
            "                   throughput-4,fib,skynet,pipeline,reduce,pgzip,\n"
            "                   pgzip-libdeflate,pgzip-isal,idle,wake,floor\n"
            "  --runtimes LIST  only these runtimes: knit,tbb,omp,glib,uv,pigz,serial,machine\n"
            "  --verbose        show the workloads' INFO lines\n"
            "  --no-timeline    skip the ticket+tl variant (ticket with the timeline\n"
            "                   on: KNIT_TIMELINE=/dev/null); the other variants\n"
            "                   always run with KNIT_TIMELINE unset\n");
}

static unsigned parse_uint(const char *opt_name, const char *s, unsigned lo, unsigned hi) {
    char *end;
    errno = 0;
    unsigned long v = strtoul(s ? s : "", &end, 10);
    if (s == NULL || errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "compare: %s needs a number in %u..%u\n", opt_name, lo, hi);
        exit(2);
    }
    return (unsigned)v;
}

static void parse_args(int argc, char **argv) {
    int reps_given = 0, rounds_given = 0;
    opt.threads = 2;
    opt.reps = 6;
    opt.rounds = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            opt.quick = 1;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            opt.verbose = 1;
        } else if (!strcmp(a, "--no-timeline")) {
            opt.no_timeline = 1;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--threads")) {
            opt.threads = parse_uint("--threads", v, 1, 256), i++;
        } else if (!strcmp(a, "--reps")) {
            opt.reps = parse_uint("--reps", v, 1, MAX_VALUES), i++, reps_given = 1;
        } else if (!strcmp(a, "--rounds")) {
            opt.rounds = parse_uint("--rounds", v, 1, MAX_VALUES), i++, rounds_given = 1;
        } else if (!strcmp(a, "--out") && v) {
            sfmt(opt.out, sizeof opt.out, "%s", v), i++;
        } else if (!strcmp(a, "--rows") && v) {
            sfmt(opt.rows, sizeof opt.rows, "%s", v), i++;
        } else if (!strcmp(a, "--runtimes") && v) {
            sfmt(opt.runtimes, sizeof opt.runtimes, "%s", v), i++;
        } else {
            fprintf(stderr, "compare: unknown or incomplete argument '%s'\n", a);
            usage(stderr);
            exit(2);
        }
    }
    if (opt.quick && !reps_given) opt.reps = 3;
    if (opt.quick && !rounds_given) opt.rounds = 1;
    if (opt.rounds > opt.reps) opt.rounds = opt.reps; /* at least one rep a round */
    opt.per_round = (opt.reps + opt.rounds - 1) / opt.rounds;
    if (opt.out[0] == '\0') {
        const char *ws = getenv("BUILD_WORKSPACE_DIRECTORY");
        sfmt(opt.out, sizeof opt.out, "%s/bench-out", ws && *ws ? ws : ".");
    }
}

static void locate_self(const char *argv0) {
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (n <= 0) {
        if (realpath(argv0, self_path) == NULL) sfmt(self_path, sizeof self_path, "%s", argv0);
    } else {
        self_path[n] = '\0';
    }
    sfmt(self_dir, sizeof self_dir, "%s", self_path);
    char *slash = strrchr(self_dir, '/');
    if (slash) *slash = '\0';
    else sfmt(self_dir, sizeof self_dir, ".");
}

/* A data dependency: <pkg>/<name> in the runfiles tree, else next to this
 * binary in bazel-bin (bin/bench/compare -> bin/<pkg>/<name>). */
static int find_tool(const char *pkg, const char *name, char *out, size_t cap) {
    char cand[4][PATH_MAX + 64];
    const char *rd = getenv("RUNFILES_DIR");
    sfmt(cand[0], sizeof cand[0], "%s/knit/%s/%s", rd ? rd : "/nonexistent", pkg, name);
    sfmt(cand[1], sizeof cand[1], "%s.runfiles/knit/%s/%s", self_path, pkg, name);
    sfmt(cand[2], sizeof cand[2], "%s/../%s/%s", self_dir, pkg, name);
    sfmt(cand[3], sizeof cand[3], "%s/%s", self_dir, name);
    for (int i = 0; i < 4; i++) {
        if (access(cand[i], X_OK) == 0) {
            sfmt(out, cap, "%s", cand[i]);
            return 0;
        }
    }
    return -1;
}

static int in_path(const char *prog) {
    const char *path = getenv("PATH");
    if (path == NULL) path = "/usr/bin:/bin";
    char buf[PATH_MAX];
    for (const char *p = path; *p;) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        sfmt(buf, sizeof buf, "%.*s/%s", (int)len, p, prog);
        if (access(buf, X_OK) == 0) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void loadavg(char *out, size_t cap) {
    FILE *f = fopen("/proc/loadavg", "r");
    double a = 0, b = 0, c = 0;
    if (f == NULL || fscanf(f, "%lf %lf %lf", &a, &b, &c) != 3)
        sfmt(out, cap, "?");
    else
        sfmt(out, cap, "%.2f %.2f %.2f", a, b, c);
    if (f) fclose(f);
}

static void cpu_model(char *out, size_t cap) {
    sfmt(out, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                c++;
                while (*c == ' ' || *c == '\t') c++;
                c[strcspn(c, "\n")] = '\0';
                sfmt(out, cap, "%s", c);
            }
            break;
        }
    }
    fclose(f);
}

/* ------------------------------------------------------------------ */
/* Children                                                            */

/* Receives a child's stdout: bytes as they come. Nonzero: a mismatch
 * (reading continues, so the child never blocks on a full pipe). */
typedef int (*chunk_fn)(void *ctx, const char *buf, size_t n);

typedef struct run_result {
    int status;    /* exit code; 128 + signal; -1: could not start */
    int timed_out;
    int cb_failed; /* the chunk callback reported a mismatch */
    double secs;
} run_result;

/* Runs argv[0] (a path, or a name looked up in PATH) with stdout sent to
 * out_fd (>= 0), or to `cb` (if set), else inherited. Kills it after
 * timeout seconds. */
static run_result run_child(char *const argv[], int out_fd, chunk_fn cb, void *ctx,
                            double timeout) {
    run_result r = {.status = -1};
    int pfd[2] = {-1, -1};
    if (cb != NULL && pipe2(pfd, O_CLOEXEC) != 0) return r;
    fflush(stdout);
    fflush(stderr);
    double t0 = now_s();
    pid_t pid = fork();
    if (pid < 0) {
        if (pfd[0] >= 0) close(pfd[0]), close(pfd[1]);
        return r;
    }
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        if (cb != NULL) dup2(pfd[1], 1);
        else if (out_fd >= 0) dup2(out_fd, 1);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        execvp(argv[0], argv);
        fprintf(stderr, "compare: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    atomic_store_explicit(&current_child, pid, memory_order_relaxed);
    if (cb != NULL) {
        close(pfd[1]);
        char buf[1 << 16];
        for (;;) {
            double left = timeout - (now_s() - t0);
            if (left <= 0 || stop_requested()) {
                kill(pid, SIGKILL);
                r.timed_out = !stop_requested();
                break;
            }
            struct pollfd p = {.fd = pfd[0], .events = POLLIN};
            int pr = poll(&p, 1, left > 1 ? 1000 : (int)(left * 1000) + 1);
            if (pr < 0 && errno != EINTR) break;
            if (pr <= 0) continue;
            ssize_t n = read(pfd[0], buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break; /* EOF: the child closed stdout (exited) */
            if (cb(ctx, buf, (size_t)n) != 0) r.cb_failed = 1;
        }
        close(pfd[0]);
    }
    int st = 0;
    for (;;) {
        pid_t w = waitpid(pid, &st, cb != NULL ? 0 : WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) break;
        if (w == 0) {
            if (now_s() - t0 > timeout || stop_requested()) {
                r.timed_out = !stop_requested();
                kill(pid, SIGKILL);
                waitpid(pid, &st, 0);
                break;
            }
            struct timespec nap = {0, 2000000};
            nanosleep(&nap, NULL);
        }
    }
    atomic_store_explicit(&current_child, 0, memory_order_relaxed);
    r.secs = now_s() - t0;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    return r;
}

static const char *describe(const run_result *r, char *buf, size_t cap) {
    if (r->timed_out) sfmt(buf, cap, "timed out after %.0f s", r->secs);
    else if (r->status == -1) sfmt(buf, cap, "could not start");
    else if (r->status > 128) sfmt(buf, cap, "killed by signal %d", r->status - 128);
    else sfmt(buf, cap, "exit status %d", r->status);
    return buf;
}

/* Line splitting for the workload protocol. */
typedef struct lines {
    char buf[4096];
    size_t len;
    int (*line)(void *ctx, char *line);
    void *ctx;
} lines;

static int lines_chunk(void *ctx, const char *buf, size_t n) {
    lines *l = ctx;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == '\n' || l->len == sizeof l->buf - 1) {
            l->buf[l->len] = '\0';
            if (l->line(l->ctx, l->buf) != 0) bad = 1;
            l->len = 0;
        } else {
            l->buf[l->len++] = buf[i];
        }
    }
    return bad;
}

/* A knit variant "<sched>+tl" is <sched> with the timeline on. Returns
 * whether it is one; *sched is the discipline to pass. */
#define TL_SUFFIX "+tl"
static int is_timeline(const char *variant) {
    size_t n = strlen(variant), k = strlen(TL_SUFFIX);
    return n > k && strcmp(variant + n - k, TL_SUFFIX) == 0;
}

static int timeline_variant(const char *variant, char *sched, size_t cap) {
    int tl = is_timeline(variant);
    sfmt(sched, cap, "%.*s", (int)(strlen(variant) - (tl ? strlen(TL_SUFFIX) : 0)), variant);
    return tl;
}

/* Sets (or clears) KNIT_TIMELINE for the next child. */
static void timeline_env(int on) {
    if (on)
        setenv("KNIT_TIMELINE", "/dev/null", 1);
    else
        unsetenv("KNIT_TIMELINE");
}

/* One job: a workload binary for one row, runtime, variant. */
typedef struct job {
    const char *row, *runtime, *variant;
    series *touched[8];
    unsigned before[8]; /* each touched series' count before this job */
    unsigned ntouched;
} job;

static int job_line(void *ctx, char *line) {
    job *j = ctx;
    if (strncmp(line, "INFO", 4) == 0) {
        if (opt.verbose) printf("    %s\n", line);
        char srow[32], svar[48];
        double share;
        /* The workload names the variant its result carries. */
        if (sscanf(line, "INFO creator-ran %31s %47s %lf", srow, svar, &share) == 3 &&
            share >= 0 && share <= 1) {
            series *s = get_series(srow, j->runtime, svar);
            s->share_sum += share;
            s->share_n++;
        }
        return 0;
    }
    char row[32], rt[16], var[48], unit[16], better[8];
    unsigned rep;
    double v;
    if (sscanf(line, "RESULT %31s %15s %47s %u %lf %15s %7s", row, rt, var, &rep, &v, unit,
               better) != 7) {
        fprintf(stderr, "    (%s/%s) %s\n", j->runtime, j->variant, line);
        return 0;
    }
    /* The knit binary names its discipline (and "<sched>+frames" for its
     * frames rows); others print "-". A timeline job ("ticket+tl") ran as
     * its discipline: its results get the suffix back ("ticket+tl",
     * "ticket+frames+tl"). */
    char tlvar[64], base[32];
    if (strcmp(rt, "knit") == 0 && timeline_variant(j->variant, base, sizeof base)) {
        sfmt(tlvar, sizeof tlvar, "%s%s", var, TL_SUFFIX);
        sfmt(var, sizeof var, "%s", tlvar);
    }
    series *s = get_series(row, rt, var);
    unsigned k;
    for (k = 0; k < j->ntouched && j->touched[k] != s; k++) {
    }
    if (k == j->ntouched && j->ntouched < 8) {
        j->before[j->ntouched] = s->n;
        j->touched[j->ntouched++] = s;
    }
    add_value(s, v, unit, better);
    return 0;
}

static double child_timeout(void) { return opt.quick ? 60 : 300; }

static void run_workload(const workload *w, const char *runtime, const char *variant,
                         int index, int total) {
    char bin[PATH_MAX + 64], threads[16], reps[16];
    job j = {.row = w->row, .runtime = runtime, .variant = variant};
    printf("[%2d/%d] %-16s %-7s %-7s ", index, total, w->row, runtime, variant);
    fflush(stdout);
    if (find_tool("bench", binary_of(runtime), bin, sizeof bin) != 0) {
        printf("FAILED: %s not found next to %s\n", binary_of(runtime), self_path);
        const char *rows[2] = {w->shows[0] ? w->shows[0] : w->row, w->shows[1]};
        for (int i = 0; i < 2 && rows[i]; i++)
            fail_series(get_series(rows[i], runtime, variant), "%s not found", binary_of(runtime));
        return;
    }
    sfmt(threads, sizeof threads, "%u", opt.threads);
    sfmt(reps, sizeof reps, "%u", opt.per_round);
    char *argv[12];
    int a = 0;
    argv[a++] = bin;
    argv[a++] = "--row";
    argv[a++] = (char *)w->row;
    argv[a++] = "--threads";
    argv[a++] = threads;
    argv[a++] = "--reps";
    argv[a++] = reps;
    if (opt.quick) argv[a++] = "--quick";
    char sched[32];
    int tl = timeline_variant(variant, sched, sizeof sched);
    if (strcmp(variant, "-") != 0) {
        argv[a++] = "--sched";
        argv[a++] = sched;
    }
    argv[a] = NULL;
    lines l = {.line = job_line, .ctx = &j};
    timeline_env(tl);
    run_result r = run_child(argv, -1, lines_chunk, &l, child_timeout());
    timeline_env(0);
    char why[96];
    if (r.status != 0 || r.timed_out) {
        describe(&r, why, sizeof why);
        printf("FAILED (%s, %.1f s)\n", why, r.secs);
        const char *rows[2] = {w->shows[0] ? w->shows[0] : w->row, w->shows[1]};
        for (int i = 0; i < 2 && rows[i]; i++)
            fail_series(get_series(rows[i], runtime, strcmp(runtime, "knit") ? "-" : variant),
                        "%s", why);
        for (unsigned k = 0; k < j.ntouched; k++) fail_series(j.touched[k], "%s", why);
        return;
    }
    if (j.ntouched == 0) {
        printf("FAILED (no results, %.1f s)\n", r.secs);
        fail_series(get_series(w->row, runtime, variant), "no results");
        return;
    }
    for (unsigned k = 0; k < j.ntouched; k++)
        if (j.touched[k]->n - j.before[k] < opt.per_round)
            fail_series(j.touched[k], "%u of %u reps", j.touched[k]->n - j.before[k],
                        opt.per_round);
    series *s0 = j.touched[0];
    printf("%u reps in %5.1f s, last %.4g %s\n", s0->n - j.before[0], r.secs,
           s0->v[s0->n - 1], s0->unit);
}

/* ------------------------------------------------------------------ */
/* pgzip vs pigz                                                       */

static char corpus_path[PATH_MAX + 32];
static unsigned corpus_mib;
static int corpus_state; /* 0: not made, 1: ready, -1: failed */
static char corpus_err[160];

static void cleanup_tmp(void) {
    if (tmp_dir[0] == '\0') return;
    char p[PATH_MAX + 64];
    const char *names[] = {"corpus", "out.gz"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        sfmt(p, sizeof p, "%s/%s", tmp_dir, names[i]);
        unlink(p);
    }
    rmdir(tmp_dir);
    tmp_dir[0] = '\0';
}

static int make_corpus(const char *pgzip) {
    if (corpus_state != 0) return corpus_state;
    corpus_state = -1;
    const char *t = getenv("TMPDIR");
    sfmt(tmp_dir, sizeof tmp_dir, "%s/knit-compare-XXXXXX", t && *t ? t : "/tmp");
    if (mkdtemp(tmp_dir) == NULL) {
        sfmt(corpus_err, sizeof corpus_err, "mkdtemp: %s", strerror(errno));
        tmp_dir[0] = '\0';
        return -1;
    }
    corpus_mib = opt.quick ? 16 : 256;
    sfmt(corpus_path, sizeof corpus_path, "%s/corpus", tmp_dir);
    char mib[16];
    sfmt(mib, sizeof mib, "%u", corpus_mib);
    char *argv[] = {(char *)pgzip, "--corpus-out", corpus_path, "--corpus-mib", mib, NULL};
    run_result r = run_child(argv, -1, NULL, NULL, 120);
    struct stat st;
    if (r.status != 0 || stat(corpus_path, &st) != 0 ||
        (uint64_t)st.st_size != (uint64_t)corpus_mib << 20) {
        char why[96];
        sfmt(corpus_err, sizeof corpus_err, "pgzip --corpus-out failed (%s)",
                 describe(&r, why, sizeof why));
        return -1;
    }
    corpus_state = 1;
    return 1;
}

/* Compares gzip -dc's output with the corpus file. */
typedef struct cmp_ctx {
    FILE *f;
    uint64_t pos;
    int bad;
} cmp_ctx;

static int cmp_chunk(void *ctx, const char *buf, size_t n) {
    cmp_ctx *c = ctx;
    char want[1 << 16];
    while (n > 0 && !c->bad) {
        size_t k = n < sizeof want ? n : sizeof want;
        if (fread(want, 1, k, c->f) != k || memcmp(want, buf, k) != 0) c->bad = 1;
        buf += k, n -= k, c->pos += k;
    }
    return c->bad;
}

/* gzip -t, and (full) the round trip compared with the corpus. */
static int check_gzip(const char *out, int full, char *why, size_t cap) {
    char *t_argv[] = {"gzip", "-t", (char *)out, NULL};
    run_result r = run_child(t_argv, -1, NULL, NULL, 120);
    if (r.status != 0) {
        char d[96];
        sfmt(why, cap, "gzip -t rejects the output (%s)", describe(&r, d, sizeof d));
        return -1;
    }
    if (!full) return 0;
    cmp_ctx c = {.f = fopen(corpus_path, "rb")};
    if (c.f == NULL) {
        sfmt(why, cap, "cannot reopen the corpus");
        return -1;
    }
    char *d_argv[] = {"gzip", "-dc", (char *)out, NULL};
    r = run_child(d_argv, -1, cmp_chunk, &c, 120);
    int extra = fgetc(c.f) != EOF;
    fclose(c.f);
    if (r.status != 0 || c.bad || extra || c.pos != (uint64_t)corpus_mib << 20) {
        sfmt(why, cap, "gunzip output differs from the corpus (at byte %llu)",
                 (unsigned long long)c.pos);
        return -1;
    }
    return 0;
}

/* pgzip's options in a pgzip row: the engine, at pigz's -6 (or --fast). */
static int pgzip_engine_args(const char *row, char **argv) {
    if (strcmp(row, "pgzip-isal") == 0) {
        argv[0] = "--fast";
        return 1;
    }
    argv[0] = "--engine";
    argv[1] = strcmp(row, "pgzip-libdeflate") == 0 ? "libdeflate" : "zlib";
    argv[2] = "--level";
    argv[3] = "6";
    return 4;
}

static void run_pgzip(const char *row, const char *runtime, const char *variant, int index,
                      int total) {
    printf("[%2d/%d] %-16s %-7s %-7s ", index, total, row, runtime, variant);
    fflush(stdout);
    series *s = get_series(row, runtime, variant);
    char pgzip[PATH_MAX + 64];
    if (find_tool("examples", "pgzip", pgzip, sizeof pgzip) != 0) {
        printf("FAILED: pgzip not found in the runfiles (a data dependency)\n");
        fail_series(s, "no pgzip binary in the runfiles");
        return;
    }
    if (make_corpus(pgzip) < 0) {
        printf("FAILED: %s\n", corpus_err);
        fail_series(s, "%s", corpus_err);
        return;
    }
    int is_knit = strcmp(runtime, "knit") == 0;
    if (!is_knit && !in_path("pigz")) {
        printf("SKIPPED: pigz is not installed\n");
        fail_series(s, "pigz not installed");
        return;
    }
    char out[PATH_MAX + 32], threads[16];
    sfmt(out, sizeof out, "%s/out.gz", tmp_dir);
    sfmt(threads, sizeof threads, "%u", opt.threads);
    double t_all = now_s();
    unsigned before = s->n;
    for (unsigned rep = 1; rep <= opt.per_round && !stop_requested(); rep++) {
        unlink(out);
        run_result r;
        if (is_knit) {
            char sched[32];
            int tl = timeline_variant(variant, sched, sizeof sched);
            char *argv[16] = {pgzip, "--threads", threads, "--sched", sched, "--quiet"};
            int a = 6;
            a += pgzip_engine_args(row, argv + a);
            argv[a++] = corpus_path;
            argv[a++] = out;
            argv[a] = NULL;
            timeline_env(tl);
            r = run_child(argv, -1, NULL, NULL, child_timeout());
            timeline_env(0);
        } else {
            int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd < 0) {
                fail_series(s, "cannot create %s", out);
                break;
            }
            char *argv[] = {"pigz", "-p", threads, "-6", "-c", corpus_path, NULL};
            r = run_child(argv, fd, NULL, NULL, child_timeout());
            close(fd);
        }
        char why[160];
        if (r.status != 0 || r.timed_out) {
            describe(&r, why, sizeof why);
            fail_series(s, "%s", why);
            break;
        }
        if (check_gzip(out, rep == 1 && before == 0, why, sizeof why) != 0) {
            fail_series(s, "%s", why);
            break;
        }
        struct stat st;
        if (stat(out, &st) != 0 || st.st_size <= 0) {
            fail_series(s, "cannot stat %s", out);
            break;
        }
        s->out_len = (uint64_t)st.st_size;
        s->cratio = (double)((uint64_t)corpus_mib << 20) / (double)s->out_len;
        add_value(s, (double)corpus_mib / r.secs, "MiB/s", "higher");
    }
    unlink(out);
    sfmt(s->unit, sizeof s->unit, "MiB/s");
    sfmt(s->better, sizeof s->better, "higher");
    if (s->failed)
        printf("FAILED (%s)\n", s->note);
    else
        printf("%u reps in %5.1f s, last %.4g MiB/s, ratio %.3f (gzip -t ok, round trip ok)\n",
               s->n - before, now_s() - t_all, s->n ? s->v[s->n - 1] : 0.0, s->cratio);
}

/* ------------------------------------------------------------------ */
/* knit's disciplines                                                  */

static char skipped[MAX_VARIANTS][200];
static unsigned nskipped;

static int sched_line(void *ctx, char *line) {
    (void)ctx;
    char name[24];
    int off = 0;
    if (sscanf(line, "SCHED %23s ok%n", name, &off) == 1 && off > 0 && line[off] == '\0') {
        if (nvariants < MAX_VARIANTS) sfmt(variants[nvariants++], sizeof variants[0], "%s", name);
    } else if (sscanf(line, "SCHED %23s no %n", name, &off) == 1 && off > 0) {
        if (nskipped < MAX_VARIANTS)
            sfmt(skipped[nskipped++], sizeof skipped[0], "%s (%s)", name, line + off);
    }
    return 0;
}

static int list_disciplines(void) {
    char bin[PATH_MAX + 64], threads[16];
    if (find_tool("bench", "knit_work", bin, sizeof bin) != 0) return -1;
    sfmt(threads, sizeof threads, "%u", opt.threads);
    char *argv[] = {bin, "--list-sched", "--threads", threads, NULL};
    lines l = {.line = sched_line};
    run_result r = run_child(argv, -1, lines_chunk, &l, 30);
    return r.status == 0 && nvariants > 0 ? 0 : -1;
}

/* ------------------------------------------------------------------ */
/* Aggregation and reports                                             */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void aggregate(void) {
    for (unsigned i = 0; i < NS; i++) {
        series *s = &S[i];
        if (s->n == 0) continue;
        double v[MAX_VALUES];
        memcpy(v, s->v, s->n * sizeof v[0]);
        qsort(v, s->n, sizeof v[0], cmp_double);
        s->min = v[0];
        s->max = v[s->n - 1];
        s->med = s->n % 2 ? v[s->n / 2] : (v[s->n / 2 - 1] + v[s->n / 2]) / 2;
    }
    for (unsigned i = 0; i < NS; i++) {
        series *k = &S[i];
        if (kind_of(k->runtime) != K_KNIT || k->failed || k->n == 0) continue;
        int higher = strcmp(k->better, "higher") == 0;
        series *best = NULL;
        for (unsigned j = 0; j < NS; j++) {
            series *p = &S[j];
            if (kind_of(p->runtime) != K_PEER || inline_variant(p->variant) || p->failed ||
                p->n == 0 ||
                strcmp(p->row, peer_row(k->row)) || strcmp(p->unit, k->unit))
                continue;
            if (best == NULL || (higher ? p->med > best->med : p->med < best->med)) best = p;
        }
        if (best != NULL && best->med > 0) {
            k->has_ratio = 1;
            k->ratio = k->med / best->med;
            sfmt(k->best, sizeof k->best, "%s", best->runtime);
        }
    }
}

static int row_rank(const char *row) {
    for (unsigned i = 0; i < NROW_ORDER; i++)
        if (!strcmp(ROW_ORDER[i], row)) return (int)i;
    return (int)NROW_ORDER;
}

static int runtime_rank(const char *rt) {
    for (unsigned i = 0; i < NRUNTIME_ORDER; i++)
        if (!strcmp(RUNTIME_ORDER[i], rt)) return (int)i;
    return (int)NRUNTIME_ORDER;
}

static int variant_rank(const char *v) {
    for (unsigned i = 0; i < nvariants; i++)
        if (!strcmp(variants[i], v)) return (int)i;
    return (int)nvariants;
}

static int cmp_series(const void *a, const void *b) {
    const series *x = a, *y = b;
    int d = row_rank(x->row) - row_rank(y->row);
    if (d) return d;
    d = strcmp(x->row, y->row);
    if (d) return d;
    d = runtime_rank(x->runtime) - runtime_rank(y->runtime);
    if (d) return d;
    return variant_rank(x->variant) - variant_rank(y->variant);
}

static void fmt_num(char *out, size_t cap, double v) {
    double a = v < 0 ? -v : v;
    if (a >= 1000) sfmt(out, cap, "%.0f", v);
    else if (a >= 100) sfmt(out, cap, "%.1f", v);
    else if (a >= 10) sfmt(out, cap, "%.2f", v);
    else sfmt(out, cap, "%.3f", v);
}

/* Prints to both stdout and the table file. */
static FILE *table_file;
static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (table_file) {
        va_start(ap, fmt);
        vfprintf(table_file, fmt, ap);
        va_end(ap);
    }
}

static void print_table(void) {
    out("\n%-16s %-7s %-7s %10s %10s %10s %-10s %-6s %4s  %s\n", "row", "runtime", "variant",
        "median", "min", "max", "unit", "better", "reps", "knit/best-peer");
    const char *last_row = "";
    for (unsigned i = 0; i < NS; i++) {
        series *s = &S[i];
        if (strcmp(last_row, s->row) && i > 0) out("\n");
        last_row = s->row;
        if (s->failed || s->n == 0) {
            out("%-16s %-7s %-7s %10s %10s %10s %-10s %-6s %4u  FAILED: %s\n", s->row, s->runtime,
                s->variant, "-", "-", "-", s->unit[0] ? s->unit : "-", s->better[0] ? s->better : "-",
                s->n, s->note);
            continue;
        }
        char med[24], mn[24], mx[24], ratio[96] = "";
        fmt_num(med, sizeof med, s->med);
        fmt_num(mn, sizeof mn, s->min);
        fmt_num(mx, sizeof mx, s->max);
        if (s->has_ratio) {
            int higher = !strcmp(s->better, "higher");
            int ahead = higher ? s->ratio > 1 : s->ratio < 1;
            sfmt(ratio, sizeof ratio, "%.2fx %s (%s)", s->ratio, s->best,
                     ahead ? "knit ahead" : "knit behind");
        } else if (kind_of(s->runtime) == K_KNIT) {
            sfmt(ratio, sizeof ratio, "(no peer result)");
        } else if (s->share_n > 0) {
            sfmt(ratio, sizeof ratio, "%.0f%% ran on the creating thread%s",
                 100 * s->share_sum / s->share_n,
                 inline_variant(s->variant) ? " (inline: not a hand-off peer)" : "");
        }
        char cr[32] = "";
        if (s->cratio > 0) sfmt(cr, sizeof cr, "%scompression ratio %.3f", ratio[0] ? "; " : "",
                                s->cratio);
        out("%-16s %-7s %-7s %10s %10s %10s %-10s %-6s %4u  %s%s\n", s->row, s->runtime,
            s->variant, med, mn, mx, s->unit, s->better, s->n, ratio, cr);
    }
    out("\nknit/best-peer = knit's median / the best peer's median in that row (the\n"
        "best peer: the highest median for rates, the lowest for times). For\n"
        "\"better: lower\" rows (times) below 1 means knit is ahead; for \"better:\n"
        "higher\" rows (rates) above 1 means knit is ahead. serial, limit and\n"
        "machine are baselines and floors, never peers; a peer's \"inline\" result\n"
        "(OpenMP's throughput-1: tasks run as calls on the creating thread) is\n"
        "shown but is not a hand-off peer.\n");
}

/* The targets, for each knit discipline. `of`: which of the discipline's
 * results is held to the bound: its plain variant (the futures API), or
 * the best of its variants ("<sched>+group", "+input-in-tasks", ...; the
 * timeline variants are the cost of recording and never count). */
enum target_of { OF_PLAIN, OF_BEST };

typedef struct target {
    const char *row;
    const char *ref_runtime; /* NULL: the best peer; "": an absolute bound */
    const char *ref_row;
    double bound;
    int le; /* 1: knit/ref <= bound; 0: knit/ref >= bound */
    enum target_of of;
    const char *what;
} target;

static const target TARGETS[] = {
    {"rtt", NULL, NULL, 0.75, 1, OF_PLAIN, "<= 0.75x the best peer (7)"},
    {"rtt", "machine", "floor-line", 1.3, 1, OF_PLAIN,
     "<= 1.3x the cache-line round trip (13)"},
    {"throughput-1", NULL, NULL, 2, 0, OF_BEST, "best variant >= 2x the best hand-off peer (13)"},
    {"throughput-1", NULL, NULL, 1.5, 0, OF_PLAIN, "futures >= 1.5x the best hand-off peer (13)"},
    {"throughput-4", NULL, NULL, 2, 0, OF_BEST, "best variant >= 2x the best hand-off peer (13)"},
    {"throughput-4", NULL, NULL, 1.5, 0, OF_PLAIN, "futures >= 1.5x the best hand-off peer (13)"},
    {"throughput-1-caller-runs", "omp", "throughput-1-caller-runs", 1, 0, OF_BEST,
     "best variant >= OpenMP (KNIT_CALLER_RUNS, 64 x threads) (13)"},
    {"fib", "tbb", "fib", 0.5, 1, OF_PLAIN, "<= 0.5x TBB's time (7)"},
    {"skynet", "tbb", "skynet", 0.5, 1, OF_PLAIN, "<= 0.5x TBB's time (7)"},
    {"pipeline", "tbb", "pipeline", 1.2, 0, OF_BEST, "best variant >= 1.2x TBB's GiB/s (13)"},
    {"pipeline", "limit", "pipeline", 0.85, 0, OF_BEST, "best variant >= 0.85x the limit (13)"},
    {"reduce", "tbb", "reduce", 1, 0, OF_PLAIN, ">= TBB's GiB/s (12)"},
    {"pgzip", "pigz", "pgzip", 1, 0, OF_PLAIN, ">= pigz's MiB/s (7)"},
    {"pgzip-libdeflate", "pigz", "pgzip", 3, 0, OF_PLAIN, ">= 3x pigz's MiB/s (19)"},
    {"pgzip-isal", "pigz", "pgzip", 6, 0, OF_PLAIN, ">= 6x pigz's MiB/s (19)"},
    {"idle", "", NULL, 1, 1, OF_PLAIN, "<= 1 ms of CPU per 2 s (7)"},
    {"wake", "machine", "floor-futex", 1.5, 1, OF_PLAIN, "<= 1.5x the futex round trip (7)"},
};

/* The result a target holds discipline `disc` to (see enum target_of), or
 * NULL when the discipline has none in that row. */
static series *target_series(const target *g, const char *disc) {
    series *k = find_series(g->row, "knit", disc);
    if (g->of == OF_PLAIN) return k;
    int higher = k != NULL ? strcmp(k->better, "higher") == 0 : 1;
    size_t n = strlen(disc);
    for (unsigned i = 0; i < NS; i++) {
        series *s = &S[i];
        if (strcmp(s->row, g->row) || kind_of(s->runtime) != K_KNIT || s->failed || !s->n ||
            strncmp(s->variant, disc, n) || s->variant[n] != '+' || is_timeline(s->variant))
            continue;
        if (k == NULL || k->failed || !k->n || (higher ? s->med > k->med : s->med < k->med))
            k = s;
    }
    return k;
}

static void print_targets(void) {
    out("\nTargets (the issue in brackets), per knit discipline:\n");
    for (size_t t = 0; t < sizeof TARGETS / sizeof TARGETS[0]; t++) {
        const target *g = &TARGETS[t];
        for (unsigned v = 0; v < nvariants; v++) {
            /* A timeline variant is the cost of recording, not a target. */
            if (is_timeline(variants[v])) continue;
            series *k = target_series(g, variants[v]);
            if (k == NULL) continue;
            char line[256];
            if (k->failed || k->n == 0) {
                sfmt(line, sizeof line, "knit failed");
            } else {
                double ref = 0;
                char refname[48] = "";
                if (g->ref_runtime == NULL) {
                    if (k->has_ratio) {
                        series *b = find_series(g->row, k->best, "-");
                        ref = b ? b->med : 0;
                        sfmt(refname, sizeof refname, "%s", k->best);
                    }
                } else if (g->ref_runtime[0] == '\0') {
                    ref = 1;
                } else {
                    series *b = find_series(g->ref_row, g->ref_runtime, "-");
                    if (b && !b->failed && b->n) ref = b->med;
                    sfmt(refname, sizeof refname, "%s",
                         strcmp(g->ref_row, peer_row(g->row)) ? g->ref_row : g->ref_runtime);
                }
                if (ref <= 0) {
                    sfmt(line, sizeof line, "no reference result");
                } else {
                    double x = k->med / ref;
                    int met = g->le ? x <= g->bound : x >= g->bound;
                    char med[24];
                    fmt_num(med, sizeof med, k->med);
                    if (g->ref_runtime && g->ref_runtime[0] == '\0')
                        sfmt(line, sizeof line, "%s %s: %s", med, k->unit,
                                 met ? "met" : "NOT met");
                    else
                        sfmt(line, sizeof line, "%s %s = %.2fx %s: %s", med, k->unit, x,
                                 refname, met ? "met" : "NOT met");
                }
            }
            out("  %-16s %-20s %-46s %s\n", g->row, k->variant, g->what, line);
        }
    }
    /* Issue 19: the output beside pigz -6's (the engine rows' level map
     * promises no larger; --fast promises nothing). */
    series *pz = find_series("pgzip", "pigz", "-");
    for (unsigned i = 0; pz && !pz->failed && pz->out_len && i < NS; i++) {
        series *k = &S[i];
        if (kind_of(k->runtime) != K_KNIT || strncmp(k->row, "pgzip", 5) || k->failed ||
            !k->out_len)
            continue;
        int fast = strcmp(k->row, "pgzip-isal") == 0;
        char line[160];
        sfmt(line, sizeof line, "%llu bytes = %.4fx pigz -6's%s",
             (unsigned long long)k->out_len, (double)k->out_len / (double)pz->out_len,
             fast ? " (--fast: no promise)" : k->out_len <= pz->out_len ? ": met" : ": NOT met");
        out("  %-16s %-20s %-46s %s\n", k->row, k->variant, "output <= pigz -6's (19)",
            line);
    }
}

static void csv_clean(char *s) {
    for (; *s; s++)
        if (*s == ',' || *s == '"' || *s == '\n') *s = ' ';
}

static int write_csv(const char *path) {
    FILE *f = fopen(path, "w");
    if (f == NULL) return -1;
    fprintf(f, "row,runtime,variant,unit,better,reps,median,min,max,knit_over_best_peer,"
               "best_peer,status,values,compression_ratio\n");
    for (unsigned i = 0; i < NS; i++) {
        series *s = &S[i];
        char note[sizeof s->note];
        sfmt(note, sizeof note, "%s", s->note);
        csv_clean(note);
        fprintf(f, "%s,%s,%s,%s,%s,%u,", s->row, s->runtime, s->variant, s->unit, s->better, s->n);
        if (s->n)
            fprintf(f, "%.6g,%.6g,%.6g,", s->med, s->min, s->max);
        else
            fprintf(f, ",,,");
        if (s->has_ratio)
            fprintf(f, "%.4f,%s,", s->ratio, s->best);
        else
            fprintf(f, ",,");
        fprintf(f, "%s%s,", s->failed ? "failed: " : "ok", s->failed ? note : "");
        for (unsigned k = 0; k < s->n; k++) fprintf(f, "%s%.6g", k ? ";" : "", s->v[k]);
        if (s->cratio > 0)
            fprintf(f, ",%.4f\n", s->cratio);
        else
            fprintf(f, ",\n");
    }
    return fclose(f);
}

/* The chart: per row, knit's advantage over the best peer (> 1: knit
 * ahead, whatever the row's direction), one bar per discipline. */
static int write_chart(const char *dir, const char *title) {
    char dat[PATH_MAX + 32], gp[PATH_MAX + 32], png[PATH_MAX + 32];
    sfmt(dat, sizeof dat, "%s/bench-chart.dat", dir);
    sfmt(gp, sizeof gp, "%s/bench-chart.gp", dir);
    sfmt(png, sizeof png, "%s/bench-chart.png", dir);
    FILE *f = fopen(dat, "w");
    if (f == NULL) return -1;
    fprintf(f, "# row");
    for (unsigned v = 0; v < nvariants; v++) fprintf(f, " knit-%s", variants[v]);
    fprintf(f, "\n# knit's advantage over the best peer: best/knit for times, knit/best for rates\n");
    int nrows = 0;
    for (unsigned r = 0; r < NROW_ORDER; r++) {
        int any = 0;
        char line[512];
        int len = sfmt(line, sizeof line, "%s", ROW_ORDER[r]);
        for (unsigned v = 0; v < nvariants; v++) {
            series *k = find_series(ROW_ORDER[r], "knit", variants[v]);
            if (k && k->has_ratio && k->ratio > 0) {
                double adv = !strcmp(k->better, "higher") ? k->ratio : 1 / k->ratio;
                len += sfmt(line + len, sizeof line - (size_t)len, " %.4f", adv);
                any = 1;
            } else {
                len += sfmt(line + len, sizeof line - (size_t)len, " ?");
            }
        }
        if (any) {
            fprintf(f, "%s\n", line);
            nrows++;
        }
    }
    fclose(f);
    if (nrows == 0 || nvariants == 0) return 1;
    f = fopen(gp, "w");
    if (f == NULL) return -1;
    fprintf(f,
            "# Generated by //bench:compare; gnuplot bench-chart.gp (in this folder)\n"
            "set terminal pngcairo size 1200,650 noenhanced font \"sans,10\"\n"
            "set output 'bench-chart.png'\n"
            "set title \"%s\"\n"
            "set datafile missing '?'\n"
            "set style data histograms\n"
            "set style histogram clustered gap 1\n"
            "set style fill solid 0.85 border -1\n"
            "set boxwidth 0.9\n"
            "set logscale y 2\n"
            "set yrange [*:*]\n"
            "set ylabel \"knit's advantage over the best peer (x, log scale; > 1: knit ahead)\"\n"
            "set grid ytics\n"
            "set key top right\n"
            "set xtics rotate by -25\n"
            "set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lw 2 dt 2 lc rgb 'black'\n"
            "plot ",
            title);
    unsigned nc = nvariants;
    for (unsigned v = 0; v < nc; v++)
        fprintf(f, "%s'bench-chart.dat' using %u%s title 'knit %s', \\\n", v ? "     " : "", v + 2,
                v == 0 ? ":xtic(1)" : "", variants[v]);
    for (unsigned v = 0; v < nc; v++) {
        /* bar v of nc in a cluster of width 1 with a gap of 1 bar */
        double off = ((double)v - (nc - 1) / 2.0) / (nc + 1);
        fprintf(f, "     'bench-chart.dat' using ($0%+.3f):%u:(sprintf('%%.2f', $%u)) with labels offset 0,0.7 notitle%s\n",
                off, v + 2, v + 2, v + 1 < nc ? ", \\" : "");
    }
    fclose(f);
    /* gnuplot runs in the folder so the script's relative names work. */
    char *argv[] = {"sh", "-c", "cd \"$1\" && exec gnuplot bench-chart.gp", "sh", (char *)dir, NULL};
    if (!in_path("gnuplot")) return 2;
    run_result r = run_child(argv, -1, NULL, NULL, 60);
    return r.status == 0 && access(png, R_OK) == 0 ? 0 : -1;
}

static int mkdir_p(const char *path) {
    char p[PATH_MAX];
    sfmt(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) return -1;
            *s = '/';
        }
    }
    return mkdir(p, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

/* ------------------------------------------------------------------ */

int main(int argc, char **argv) {
    parse_args(argc, argv);
    locate_self(argv[0]);
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    atexit(cleanup_tmp);

    if (mkdir_p(opt.out) != 0) {
        fprintf(stderr, "compare: cannot create %s: %s\n", opt.out, strerror(errno));
        return 1;
    }
    char cpu[160], load0[64], load1[64], date[64];
    cpu_model(cpu, sizeof cpu);
    loadavg(load0, sizeof load0);
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M %Z", localtime(&now));
    struct utsname un;
    uname(&un);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

    timeline_env(0); /* only the +tl variant records a timeline */
    if (list_disciplines() != 0) {
        fprintf(stderr, "compare: cannot list knit's disciplines (knit_work missing or failing)\n");
        return 1;
    }
    /* The timeline's cost: ticket again with it on. */
    for (unsigned v = 0; v < nvariants && !opt.no_timeline; v++)
        if (strcmp(variants[v], "ticket") == 0 && nvariants < MAX_VARIANTS) {
            sfmt(variants[nvariants++], sizeof variants[0], "ticket" TL_SUFFIX);
            break;
        }
    printf("knit compare: %s run, %u thread%s per runtime, %u round%s of %u rep%s\n",
           opt.quick ? "quick" : "full", opt.threads, opt.threads == 1 ? "" : "s", opt.rounds,
           opt.rounds == 1 ? "" : "s", opt.per_round, opt.per_round == 1 ? "" : "s");
    printf("machine: %s, %ld CPUs, %s %s; load average at start %s\n", cpu, ncpu, un.sysname,
           un.release, load0);
    printf("knit disciplines run:");
    for (unsigned v = 0; v < nvariants; v++) printf(" %s", variants[v]);
    printf("\n");
    for (unsigned v = 0; v < nskipped; v++)
        printf("knit discipline skipped (it does not take %u workers): %s\n", opt.threads,
               skipped[v]);

    /* The job list. */
    int total = 0;
    for (size_t w = 0; w < NWORKLOADS; w++) {
        if (!in_list(opt.rows, WORKLOADS[w].row)) continue;
        for (int r = 0; r < 6 && WORKLOADS[w].runtimes[r]; r++) {
            const char *rt = WORKLOADS[w].runtimes[r];
            if (!in_list(opt.runtimes, rt)) continue;
            total += kind_of(rt) == K_KNIT && !WORKLOADS[w].first_variant ? (int)nvariants : 1;
        }
    }
    total *= (int)opt.rounds;
    double t0 = now_s();
    int index = 0;
    /* Round after round of the whole list: this VM's speed swings 2-3x
     * between spells of minutes, and a row whose runtimes all ran in one
     * stretch compared whichever spell each one met. Interleaved, each
     * runtime's median is taken over every spell the run went through. */
    for (unsigned round = 1; round <= opt.rounds && !stop_requested(); round++) {
        if (opt.rounds > 1) printf("round %u of %u\n", round, opt.rounds);
        for (size_t w = 0; w < NWORKLOADS && !stop_requested(); w++) {
            const workload *wl = &WORKLOADS[w];
            if (!in_list(opt.rows, wl->row)) continue;
            for (int r = 0; r < 6 && wl->runtimes[r] && !stop_requested(); r++) {
                const char *rt = wl->runtimes[r];
                if (!in_list(opt.runtimes, rt)) continue;
                unsigned nv = kind_of(rt) == K_KNIT && !wl->first_variant ? nvariants : 1;
                for (unsigned v = 0; v < nv && !stop_requested(); v++) {
                    const char *var = kind_of(rt) == K_KNIT ? variants[v] : "-";
                    if (!strncmp(wl->row, "pgzip", 5))
                        run_pgzip(wl->row, rt, var, ++index, total);
                    else
                        run_workload(wl, rt, var, ++index, total);
                }
            }
        }
    }
    cleanup_tmp();
    if (stop_requested()) {
        fprintf(stderr, "compare: interrupted\n");
        return 130;
    }
    double elapsed = now_s() - t0;
    loadavg(load1, sizeof load1);

    aggregate();
    qsort(S, NS, sizeof S[0], cmp_series);

    char path[PATH_MAX + 32];
    sfmt(path, sizeof path, "%s/bench-table.txt", opt.out);
    table_file = fopen(path, "w");
    out("\nknit vs peers, %s, %s (%ld CPUs), %u worker thread%s, %u round%s of %u rep%s\n"
        "(interleaved; %s run, %.0f s; load average %s at start, %s at end)\n",
        date, cpu, ncpu, opt.threads, opt.threads == 1 ? "" : "s", opt.rounds,
        opt.rounds == 1 ? "" : "s", opt.per_round, opt.per_round == 1 ? "" : "s",
        opt.quick ? "quick" : "full", elapsed, load0, load1);
    print_table();
    print_targets();
    if (table_file) fclose(table_file);
    table_file = NULL;

    int failures = 0;
    for (unsigned i = 0; i < NS; i++) failures += S[i].failed;

    sfmt(path, sizeof path, "%s/bench-results.csv", opt.out);
    if (write_csv(path) != 0) {
        fprintf(stderr, "compare: cannot write %s\n", path);
        failures++;
    } else {
        printf("\nwrote %s\n", path);
    }
    printf("wrote %s/bench-table.txt\n", opt.out);
    char title[256];
    sfmt(title, sizeof title, "knit vs the best peer per row: %u threads, %s, %s%s", opt.threads,
             date, cpu, opt.quick ? " (quick run)" : "");
    int c = write_chart(opt.out, title);
    if (c == 0)
        printf("wrote %s/bench-chart.png\n", opt.out);
    else if (c == 1)
        printf("no chart: no row has both a knit and a peer result\n");
    else if (c == 2)
        printf("no chart: gnuplot is not installed (bench-chart.gp and .dat are in %s)\n", opt.out);
    else
        printf("chart FAILED: gnuplot could not run %s/bench-chart.gp\n", opt.out), failures++;
    printf("took %.0f s%s\n", elapsed, failures ? "; some rows FAILED (see the table)" : "");
    return failures ? 1 : 0;
}
