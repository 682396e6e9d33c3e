/*
 * tap.h — a minimal TAP producer for slabkit's tests (run under prove).
 * plan(n) first (or done_testing() last), then ok()/is() per check.
 * A failed check prints a diagnostic with file and line; the exit status
 * is non-zero if any check failed.
 */
#ifndef SK_TAP_H
#define SK_TAP_H
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static int tap_n, tap_failed, tap_planned;

static inline void plan(int n) { tap_planned = n; printf("1..%d\n", n); fflush(stdout); }

static inline int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    tap_n++;
    printf("%sok %d - ", cond ? "" : "not ", tap_n);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!cond) {
        tap_failed++;
        printf("#   Failed test at %s line %d.\n", file, line);
    }
    fflush(stdout);
    return cond;
}
#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is(got, want, ...) do { long long g_ = (long long)(got), w_ = (long long)(want); \
        if (!ok(g_ == w_, __VA_ARGS__)) printf("#          got: %lld\n#     expected: %lld\n", g_, w_); } while (0)
#define diag(...) do { printf("# "); printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)
#define skip_all(...) do { printf("1..0 # SKIP "); printf(__VA_ARGS__); printf("\n"); exit(0); } while (0)
/* One test that does not apply here: counted, passing, and saying why. */
#define skip(...) do { printf("ok %d # SKIP ", ++tap_n); printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)

static inline int done_testing(void)
{
    if (!tap_planned) printf("1..%d\n", tap_n);
    fflush(stdout);
    return tap_failed ? 1 : 0;
}
/* A watchdog: a process still running `seconds` from now prints
 * "Bail out! <what>" and exits 2, so a hang fails the test instead of
 * stalling the suite.  (A forked child inherits it until it resets
 * SIGALRM.) */
static const char *tap_hung_what;
static inline void tap_hung(int sig)
{
    (void)sig;
    const char *w = tap_hung_what ? tap_hung_what : "hung";
    if (write(1, "Bail out! ", 10) < 0 || write(1, w, strlen(w)) < 0 || write(1, "\n", 1) < 0)
        _exit(3);
    _exit(2);
}
static inline void bail_out_after(unsigned seconds, const char *what)
{
    tap_hung_what = what;
    signal(SIGALRM, tap_hung);
    alarm(seconds);
}

/* Fork, run fn in the child (its return is the exit status; SIGALRM goes
 * back to its default so the child's own alarm kills it), and wait: the
 * child's wait status, or -1 when fork failed. */
static inline int tap_fork_wait(int (*fn)(void))
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        signal(SIGALRM, SIG_DFL);
        _exit(fn());
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return status;
}

/* A test run twice in one TAP stream: as itself, then re-executed with
 * glibc's rseq registration off (the per-CPU arrays' lock fallback).
 * tap_rseq_off_run() at the start: true in the second run, whose count
 * carries on from the first.  tap_rerun_rseq_off() at the end of the
 * first run: never returns. */
static inline int tap_rseq_off_run(int argc, char **argv)
{
    if (argc <= 3 || strcmp(argv[1], "--rseq-off") != 0)
        return 0;
    tap_n = atoi(argv[2]);
    tap_failed = atoi(argv[3]);
    return 1;
}
static inline void tap_rerun_rseq_off(char **argv)
{
    char n[16], failed[16];
    snprintf(n, sizeof n, "%d", tap_n);
    snprintf(failed, sizeof failed, "%d", tap_failed);
    fflush(stdout);
    setenv("GLIBC_TUNABLES", "glibc.pthread.rseq=0", 1);
    execl("/proc/self/exe", argv[0], "--rseq-off", n, failed, (char *)NULL);
    printf("Bail out! exec /proc/self/exe failed\n");
    exit(255);
}

/* A forked child's stderr, from the read end `fd` of its pipe, into buf
 * (NUL-terminated, at most len - 1 bytes), then the child's wait status. */
static inline int tap_child_stderr(pid_t pid, int fd, char *buf, size_t len)
{
    size_t n = 0;
    ssize_t r;
    while (n < len - 1 && (r = read(fd, buf + n, len - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = 0;
    close(fd);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return st;
}

/* Abort the test with a message (a bail-out, counted as a failure). */
/* Read fd to its end (or len - 1 bytes) into buf, NUL-terminated,
 * retrying on EINTR: the child's stdout or stderr.  Returns the length. */
static inline size_t tap_read_all(int fd, char *buf, size_t len)
{
    size_t n = 0;
    ssize_t r;
    while (n < len - 1 && ((r = read(fd, buf + n, len - 1 - n)) > 0 || (r < 0 && errno == EINTR)))
        if (r > 0)
            n += (size_t)r;
    buf[n] = 0;
    return n;
}

#define BAIL(...) do { printf("Bail out! "); printf(__VA_ARGS__); printf("\n"); fflush(stdout); exit(255); } while (0)

/* Fork a child whose stderr goes into a pipe: 0 in the child (stderr
 * redirected, SIGALRM back to its default), the child's pid in the parent
 * with *fd the pipe's read end, for tap_child_stderr. */
static inline pid_t tap_fork_stderr(int *fd)
{
    int p[2];
    if (pipe(p))
        BAIL("pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        BAIL("fork");
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 2);
        close(p[1]);
        signal(SIGALRM, SIG_DFL);
        return 0;
    }
    close(p[1]);
    *fd = p[0];
    return pid;
}
/* Run fn in a forked child (then _exit(0)) with its stderr into buf
 * (NUL-terminated, its first line only when first_line): the wait
 * status.  For bad input: the message and the signal. */
static inline int tap_child_report(void (*fn)(void), char *buf, size_t len, int first_line)
{
    int fd;
    pid_t pid = tap_fork_stderr(&fd);
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int st = tap_child_stderr(pid, fd, buf, len);
    if (first_line)
        buf[strcspn(buf, "\n")] = 0;
    return st;
}

/* A test whose checks run once per mode, each in a fresh process with
 * SLABKIT_OPTIONS set to the mode ("default": unset): options are read
 * once, at start-up.  main(argc, argv) returns tap_modes(...): the parent
 * plans the sum of per[], re-executes this program per mode and numbers on
 * after each child's per[m] checks; a child (argv[1] "--mode") runs
 * child(mode) with the numbering carried over and returns its status. */
static inline int tap_modes(int argc, char **argv, const char *const *modes, const int *per, int n,
                            int (*child)(const char *mode))
{
    if (argc > 3 && !strcmp(argv[1], "--mode")) {
        tap_n = atoi(argv[3]);
        tap_planned = 1;      /* the parent printed the plan */
        return child(argv[2]);
    }
    int total = 0;
    for (int m = 0; m < n; m++)
        total += per[m];
    plan(total);
    for (int m = 0; m < n; m++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            char nbuf[16];
            snprintf(nbuf, sizeof nbuf, "%d", tap_n);
            if (strcmp(modes[m], "default"))
                setenv("SLABKIT_OPTIONS", modes[m], 1);
            else
                unsetenv("SLABKIT_OPTIONS");
            execl("/proc/self/exe", argv[0], "--mode", modes[m], nbuf, (char *)NULL);
            _exit(127);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) == 127)
            BAIL("mode %s: child status %#x", modes[m], st);
        if (WEXITSTATUS(st))
            tap_failed++;
        tap_n += per[m];
    }
    return tap_failed ? 1 : 0;
}
#endif
