/*
 * exit_output.c — slabinfo_at_exit's table is never lost or misplaced.
 * Each case is this program re-executed with SLABKIT_OPTIONS set (options
 * are read when slabkit loads), its stderr a pipe the parent reads:
 *
 *  - it closes stderr in an atexit handler, as coreutils' close_stdout
 *    does: the whole table still arrives (both header lines, one line per
 *    cache, the totals line last);
 *  - it closes fd 2 and opens a file of its own, which gets fd 2: the
 *    table still arrives on the original stderr, and the file holds only
 *    what the program wrote;
 *  - it closes every descriptor above 2 (a daemon's habit) and opens a
 *    file on every number from 3 to 15, so on the one slabkit's copy had:
 *    nothing of slabkit's goes into that file;
 *  - without the option, slabkit takes no descriptor at all.
 * (A program that ends in _exit runs no exit handlers: nothing is
 * written, and this does not test that.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slabkit.h"
#include "tap.h"

static void *volatile sink;

static void allocate_some(void)
{
    for (int i = 0; i < 1000; i++)
        sink = malloc((size_t)(i % 700) + 1);
}

static void close_stderr_at_exit(void)
{
    fclose(stderr);
}

/* The child's side: does what `mode` says, then exits through exit(). */
static int child(const char *mode, const char *file)
{
    allocate_some();
    if (!strcmp(mode, "atexit-close")) {
        atexit(close_stderr_at_exit);
    } else if (!strcmp(mode, "reopen-2")) {
        close(2);
        int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || (fd != 2 && (dup2(fd, 2) != 2 || close(fd))))    /* fd 0 may be closed too */
            return 10;
        if (write(2, "program data\n", 13) != 13)
            return 11;
    } else if (!strcmp(mode, "close-all")) {
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        /* Whatever number slabkit's copy had, it is now this file. */
        int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            return 12;
        for (int k = 3; k < 16; k++)
            if (k != fd && dup2(fd, k) != k)
                return 13;
        if (write(fd, "program data\n", 13) != 13)
            return 13;
    } else if (!strcmp(mode, "no-option")) {
        /* fd 3 is the first slabkit would take. */
        if (fcntl(3, F_GETFD) != -1 || errno != EBADF)
            return 14;
    }
    exit(0);
}

static int caches;

static void count_cache(const struct sk_cache_info *i, void *arg)
{
    (void)i;
    (void)arg;
    caches++;
}

/* Run a case; its stderr in `err` (NUL-terminated), its exit status back. */
static int run(const char *mode, const char *options, const char *file, char *err, size_t errlen)
{
    int fds[2];
    if (pipe(fds))
        BAIL("pipe: %s", strerror(errno));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        if (options)
            setenv("SLABKIT_OPTIONS", options, 1);
        else
            unsetenv("SLABKIT_OPTIONS");
        execl("/proc/self/exe", "exit_output", "--child", mode, file, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    int st = tap_child_stderr(pid, fds[0], err, errlen);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The text is the whole table: the two header lines, `caches` cache
 * lines, the totals line last. */
static int whole(const char *text, char *why, size_t whylen)
{
    const char *t = strstr(text, "slabinfo - version: 2.1\n# name ");
    if (!t) {
        snprintf(why, whylen, "no header");
        return 0;
    }
    int lines = 0;
    const char *last = NULL;
    for (const char *p = strchr(t, '\n') + 1; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (!strncmp(p, "kmalloc-", 8))
            lines++;
        last = p;
    }
    if (lines != caches || !last || strncmp(last, "slabkit: pages managed ", 23) ||
        text[strlen(text) - 1] != '\n') {
        snprintf(why, whylen, "%d cache lines of %d, last line %.30s", lines, caches, last ? last : "(none)");
        return 0;
    }
    return 1;
}

static int file_is(const char *path, const char *want)
{
    char buf[4096];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0)
        return 0;
    buf[n] = 0;
    return !strcmp(buf, want);
}

int main(int argc, char **argv)
{
    if (argc > 3 && !strcmp(argv[1], "--child"))
        return child(argv[2], argv[3]);
    bail_out_after(60, "exit_output hung");
    sk_cache_foreach(count_cache, NULL);
    static char err[1 << 16];
    char why[120] = "", file[] = "/tmp/slabkit-exitout.XXXXXX";
    int fd = mkstemp(file);
    if (fd < 0)
        BAIL("mkstemp: %s", strerror(errno));
    close(fd);

    int rc = run("atexit-close", "slabinfo_at_exit=1", file, err, sizeof err);
    ok(rc == 0 && whole(err, why, sizeof why),
       "stderr closed by an atexit handler (as coreutils do): the whole table arrives (%s)", why);

    rc = run("reopen-2", "slabinfo_at_exit=1", file, err, sizeof err);
    ok(rc == 0 && whole(err, why, sizeof why), "fd 2 reopened on a file: the whole table reaches the original stderr (%s)",
       why);
    ok(file_is(file, "program data\n"), "and the program's file holds only its own data");

    rc = run("close-all", "slabinfo_at_exit=1", file, err, sizeof err);
    ok(rc == 0 && file_is(file, "program data\n"),
       "every fd above 2 closed, a file opened on slabkit's old number: nothing of slabkit's goes into it (%d)", rc);

    rc = run("no-option", NULL, file, err, sizeof err);
    is(rc, 0, "without slabinfo_at_exit slabkit takes no descriptor");
    ok(!strstr(err, "slabinfo"), "and prints nothing");

    unlink(file);
    return done_testing();
}
