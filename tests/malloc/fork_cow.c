/*
 * fork_cow — a fork costs the child a few pages, not a copy of slabkit's
 * metadata.  The child's fork handler (override.c: fork_child, and each
 * layer's atfork_child) walks every lock of every cache; it writes a lock
 * only when a parent thread held or waited on it, and does not read the
 * per-CPU state of caches never allocated from (slab_mark_used: a read of
 * a page never written faults it in).  Before, each fork copied about 110
 * pages of it (every per-CPU array's lock word, every slab_cpu lock, the
 * spin-queue node pool, the purger's per-CPU list counters).
 *
 * Measured as minor faults of children that exit at once: fork() (the
 * atfork handlers run) against a raw clone (none run), with every size
 * class allocated from in the parent, and again after the purger ran
 * (its per-CPU list counters written); the difference must stay under 48
 * pages (114 before; 16-28 now, glibc's own fork work included).  Children of a process whose lock is held at the fork are
 * fork_stress's and fork_repair's business.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"

#define N 40

static double child_faults(int raw)
{
    struct rusage a, b;
    getrusage(RUSAGE_CHILDREN, &a);
    for (int i = 0; i < N; i++) {
        pid_t pid = raw ? (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0) : fork();
        if (pid < 0)
            BAIL("fork: %s", strerror(errno));
        if (pid == 0)
            syscall(SYS_exit_group, 0);
        int st;
        waitpid(pid, &st, 0);
    }
    getrusage(RUSAGE_CHILDREN, &b);
    return (double)(b.ru_minflt - a.ru_minflt) / N;
}

static void check(const char *when)
{
    double raw = child_faults(1), forked = child_faults(0);
    diag("%s: %.1f minor faults a fork() child, %.1f a raw clone child", when, forked, raw);
    ok(forked - raw < 48, "%s: the fork handlers cost the child %.1f pages (< 48)", when, forked - raw);
}

int main(void)
{
    /* Every size class, on this CPU and its arrays. */
    static void *keep[400];
    int n = 0;
    for (size_t s = 8; s <= 32768 && n < 400; s += s < 1024 ? 8 : 256)
        keep[n++] = malloc(s);
    check("every class allocated from");
    /* Free memory and wait for the purger's ticks. */
    for (int i = 0; i < n; i++)
        free(keep[i]);
    void *big[64];
    for (int i = 0; i < 64; i++)
        big[i] = malloc(100000);
    for (int i = 0; i < 64; i++)
        free(big[i]);
    struct timespec ts = { 0, 700 * 1000000L };
    nanosleep(&ts, NULL);
    check("after the purger ran");
    return done_testing();
}
