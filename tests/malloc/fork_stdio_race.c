/*
 * fork_stdio_race.c — the race from DESIGN.md ("Deadlocks after fork"):
 * fork while other threads are inside malloc and inside stdio at the same
 * moment.  An allocator that takes its locks in a pthread_atfork prepare
 * handler deadlocks here: the handler runs before glibc's fork takes the
 * stdio list lock, a thread in fflush(NULL) holds that list lock and waits
 * for a FILE's lock, and the thread holding the FILE lock (in getline) waits
 * in malloc for the allocator lock the forking thread holds.
 *
 * Threads: two in malloc/free; one in getline on a FILE with lines from a
 * few bytes to 200 KiB (getline mallocs and reallocs under the FILE lock,
 * through every class into the page allocator); one in fprintf +
 * fflush(NULL); one opening and closing FILEs (malloc under the list lock).
 * The main thread forks over and over; each child uses malloc and stdio
 * (fopen, getline, fflush(NULL), exit's flush) and exits 0.
 *
 * A hang is a failure, never a stuck suite: each child has an alarm, and
 * the parent's own alarm turns a deadlock in fork into a Bail out!.
 *
 * Run twice: with rseq, then re-executed with glibc's rseq registration
 * off (GLIBC_TUNABLES=glibc.pthread.rseq=0), where the per-CPU arrays sit
 * behind per-CPU locks that a fork can catch held.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/rseq.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

#define FORKS 150
#define LINES 60

static volatile int stop;
static char path[64];
static FILE *sinks[4];          /* written to by the flusher */

static void *mallocer(void *arg)
{
    unsigned r = (unsigned)(long)arg * 7 + 1;
    void *keep[32] = { 0 };
    while (!stop) {
        r = r * 1103515245u + 12345u;
        unsigned k = (r >> 8) % 32;
        free(keep[k]);
        size_t n = (r >> 16) % 8 == 0 ? 4096 + (r >> 4) % (256 * 1024) : 16 + (r >> 12) % 2000;
        keep[k] = malloc(n);
        if (keep[k])
            memset(keep[k], 1, n < 64 ? n : 64);
    }
    for (int k = 0; k < 32; k++)
        free(keep[k]);
    return NULL;
}

static void *liner(void *arg)
{
    (void)arg;
    FILE *f = fopen(path, "r");
    if (!f)
        return (void *)1;
    while (!stop) {
        char *line = NULL;
        size_t cap = 0;
        /* A fresh buffer each line: getline mallocs and grows it while it
         * holds the FILE's lock. */
        if (getline(&line, &cap, f) < 0)
            rewind(f);
        free(line);
    }
    fclose(f);
    return NULL;
}

static void *flusher(void *arg)
{
    (void)arg;
    unsigned i = 0;
    while (!stop) {
        fprintf(sinks[i % 4], "line %u of some text to keep a buffer dirty\n", i);
        i++;
        fflush(NULL);
    }
    return NULL;
}

static void *opener(void *arg)
{
    (void)arg;
    while (!stop) {
        FILE *f = fopen("/dev/null", "w");
        if (f) {
            fputs("x", f);
            fclose(f);
        }
    }
    return NULL;
}

static int child(void)
{
    alarm(10);
    void *p = malloc(100), *q = malloc(300 * 1024);
    if (!p || !q)
        return 3;
    memset(q, 7, 300 * 1024);
    free(p);
    free(q);
    FILE *f = fopen(path, "r");
    if (!f)
        return 4;
    char *line = NULL;
    size_t cap = 0;
    for (int i = 0; i < 3; i++)
        if (getline(&line, &cap, f) < 0)
            return 5;
    free(line);
    fclose(f);
    fprintf(sinks[0], "from the child\n");
    /* fflush(NULL) must return, not hang; its status is not ours to judge:
     * a FILE another parent thread was opening or closing at the fork can
     * sit in the child's list with a closed descriptor (EBADF; glibc's race,
     * seen under mimalloc too).  The child's own stream must flush. */
    fflush(NULL);
    if (fflush(sinks[0]) != 0)
        return 6;
    exit(0);    /* exit flushes every FILE again, under the list lock */
}

int main(int argc, char **argv)
{
    int rseq_off = tap_rseq_off_run(argc, argv);
    const char *mode = rseq_off ? "rseq off" : "rseq";
    if (rseq_off)
        ok(__rseq_size == 0, "re-executed with glibc's rseq registration off");
    int forks = rseq_off ? FORKS / 2 : FORKS;
    snprintf(path, sizeof path, "/tmp/slabkit-fork-stdio-%d", (int)getpid());
    FILE *w = fopen(path, "w");
    if (!w)
        BAIL("cannot create %s", path);
    for (int i = 0; i < LINES; i++) {
        int len = i % 3 == 0 ? 200 * 1024 / (1 + i % 7) : 5 + i * 97;
        for (int j = 0; j < len; j++)
            fputc('a' + (i + j) % 26, w);
        fputc('\n', w);
    }
    fclose(w);
    for (int i = 0; i < 4; i++)
        if (!(sinks[i] = fopen("/dev/null", "w")))
            BAIL("cannot open /dev/null");

    bail_out_after(60, "the parent hung: fork deadlocked against stdio and malloc");

    pthread_t t[5];
    void *(*fn[5])(void *) = { mallocer, mallocer, liner, flusher, opener };
    for (long i = 0; i < 5; i++)
        if (pthread_create(&t[i], NULL, fn[i], (void *)i))
            BAIL("pthread_create failed");
    usleep(20000);

    int fork_fail = 0, hung = 0, bad = 0;
    for (int f = 0; f < forks; f++) {
        int status = tap_fork_wait(child);
        if (status < 0) {
            fork_fail++;
            continue;
        }
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
            hung++;
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            if (bad++ < 3)
                diag("child %d: %s %d", f, WIFEXITED(status) ? "exit" : "signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        }
        if (f % 8 == 0)
            usleep(500);  /* let the threads get back inside malloc/stdio */
    }
    stop = 1;
    void *res = NULL;
    int thread_bad = 0;
    for (int i = 0; i < 5; i++) {
        pthread_join(t[i], &res);
        thread_bad |= res != NULL;
    }
    unlink(path);

    ok(fork_fail == 0 && !thread_bad, "%s: the parent forked %d times while threads were in malloc, getline and fflush(NULL)", mode, forks);
    ok(hung == 0, "%s: no child deadlocked (%d hung)", mode, hung);
    ok(bad == 0, "%s: every child used malloc, fopen, getline, fflush(NULL) and exit, and exited 0 (%d did not)", mode, bad);
    if (rseq_off)
        return done_testing();
    for (int i = 0; i < 4; i++)
        fclose(sinks[i]);
    tap_rerun_rseq_off(argv);
}
