/*
 * rusage — run a command and report what it cost: elapsed seconds, user and
 * system CPU seconds, and peak resident set size in KiB, from wait4(2).
 *
 *     rusage [-o FILE] cmd args...
 *
 * Prints one line "ELAPSED USER SYS MAXRSS_KB" to FILE (or stderr) and
 * exits with the command's status (128+signal if it was killed).  bench/lib.sh
 * uses it for measure and peak_rss_kb when /usr/bin/time is not the tool.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double tv_s(struct timeval tv) { return (double)tv.tv_sec + (double)tv.tv_usec / 1e6; }

int main(int argc, char **argv)
{
    const char *out = NULL;
    int i = 1;
    if (i + 1 < argc && !strcmp(argv[i], "-o")) {
        out = argv[i + 1];
        i += 2;
    }
    if (i >= argc) {
        fprintf(stderr, "usage: rusage [-o FILE] cmd args...\n");
        return 2;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0) {
        perror("rusage: fork");
        return 2;
    }
    if (pid == 0) {
        execvp(argv[i], argv + i);
        fprintf(stderr, "rusage: %s: %s\n", argv[i], strerror(errno));
        _exit(127);
    }
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("rusage: wait4");
            return 2;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double el = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    FILE *f = out ? fopen(out, "w") : stderr;
    if (!f) {
        perror(out);
        f = stderr;
    }
    fprintf(f, "%.3f %.3f %.3f %ld\n", el, tv_s(ru.ru_utime), tv_s(ru.ru_stime), ru.ru_maxrss);
    if (f != stderr)
        fclose(f);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
