/*
 * glibc_cases — two of glibc's own malloc tests, as their cases run here:
 *  - tst-malloc-backtrace: a block freed, then the word just before it
 *    written (where glibc keeps a chunk's size), then malloc again: glibc
 *    aborts.  In a fresh process the block is the heap's first object, at
 *    a region's base, and the write lands in the canary page below it
 *    (vm.c, region_guard): the process ends on SIGABRT with one line that
 *    says "heap underrun", not on SIGSEGV;
 *  - tst-malloc-stats-cancellation: a thread with a cancellation pending
 *    calls malloc_stats with fd 2 on a pipe: the output is whole (glibc's
 *    "Arena 0:", "Total (incl. mmap):" and "max mmap bytes" lines, then
 *    slabinfo and slabkit's totals), the cancellation takes effect at the
 *    thread's next cancellation point after it, and malloc still works.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

#define SIZE 4096

/* ---- tst-malloc-backtrace's case, in a fresh process ---- */

__attribute__((noinline)) static void call_free(void *ptr)
{
    char *volatile below = (char *)ptr - sizeof(size_t);   /* glibc's test writes it after the free */
    free(ptr);
    *(size_t *)below = 1;
}

static int backtrace_case(void)
{
    void *ptr1 = malloc(SIZE);
    void *ptr2 = malloc(SIZE);
    call_free(ptr1);
    ptr1 = malloc(SIZE);
    return ptr1 == ptr2;     /* not reached: exit aborts */
}

/* ---- tst-malloc-stats-cancellation's case ---- */

static pthread_barrier_t gate;

static void *stats_thread(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&gate);       /* not a cancellation point */
    malloc_stats();
    fputs("this call should trigger cancellation\n", stderr);
    return NULL;
}

static int pipe_rd;
static char stats_out[1 << 16];

static void *reader(void *arg)
{
    (void)arg;
    size_t n = 0;
    ssize_t r;
    while (n < sizeof stats_out - 1 &&
           ((r = read(pipe_rd, stats_out + n, sizeof stats_out - 1 - n)) > 0 || (r < 0 && errno == EINTR)))
        if (r > 0)
            n += (size_t)r;
    stats_out[n] = 0;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--backtrace"))
        return backtrace_case();
    plan(6);

    /* Fresh process: this program again, stderr to a file. */
    char errname[] = "/tmp/slabkit-glibc-cases.XXXXXX";
    int efd = mkstemp(errname);
    if (efd < 0)
        BAIL("mkstemp");
    unlink(errname);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(efd, 2);
        execl("/proc/self/exe", argv[0], "--backtrace", (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    char err[4096];
    ssize_t n = pread(efd, err, sizeof err - 1, 0);
    err[n > 0 ? n : 0] = 0;
    close(efd);
    ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "tst-malloc-backtrace's case ends on SIGABRT, not a crash (status %#x)",
       st);
    ok(strstr(err, "slabkit: heap underrun: 8 bytes below the heap's base") != NULL,
       "with one line that says what was written where");
    if (!strstr(err, "heap underrun"))
        diag("stderr: %s", err);

    /* malloc_stats with a cancellation pending. */
    int fds[2];
    if (pipe(fds) != 0)
        BAIL("pipe");
    pipe_rd = fds[0];
    int saved2 = dup(2);
    dup2(fds[1], 2);
    close(fds[1]);
    pthread_t rd, t;
    pthread_create(&rd, NULL, reader, NULL);
    void *volatile big = malloc(80 << 20);   /* a direct mapping: "max mmap" is 1 */
    pthread_barrier_init(&gate, NULL, 2);
    pthread_create(&t, NULL, stats_thread, NULL);
    pthread_cancel(t);
    pthread_barrier_wait(&gate);
    void *result;
    pthread_join(t, &result);
    fflush(stderr);
    dup2(saved2, 2);                       /* the pipe's last writer gone: EOF */
    close(saved2);
    pthread_join(rd, NULL);
    ok(result == PTHREAD_CANCELED, "the thread was cancelled after malloc_stats, at its next cancellation point");
    ok(strstr(stats_out, "Arena 0:\nsystem bytes     = ") && strstr(stats_out, "Total (incl. mmap):\n") &&
       strstr(stats_out, "max mmap regions =          1\n") && strstr(stats_out, "max mmap bytes   ="),
       "malloc_stats printed glibc's lines, whole");
    if (!strstr(stats_out, "max mmap regions =          1\n"))
        diag("%.400s", stats_out);
    ok(strstr(stats_out, "slabinfo - version: 2.1") && strstr(stats_out, "slabkit: pages managed") &&
       !strstr(stats_out, "this call should trigger cancellation"),
       "then slabinfo and slabkit's totals, and nothing after (%zu bytes)", strlen(stats_out));
    void *p = malloc(1000);
    free(big);
    ok(p != NULL, "malloc works after: no lock was left held");
    free(p);
    return done_testing();
}
