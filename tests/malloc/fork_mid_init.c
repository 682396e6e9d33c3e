/*
 * fork_mid_init — a fork that catches a thread inside slabkit's
 * start-up (reading SLABKIT_OPTIONS, holding the page or slab init lock,
 * half-way through the per-CPU set-up) gives a child that initialises by
 * itself and allocates, instead of waiting forever on a lock or a "being
 * read" state whose owner did not survive the fork.
 *
 * 60 fresh processes (this program run again with "race ROUND"): in each,
 * a timer interrupts the process's first allocation after a delay that
 * grows with the round, and its handler forks 4 children right there.
 * Every child allocates each kind of memory under a 10-second alarm.  The
 * test counts the children forked while start-up was under way
 * (slab_ready() false in the child) to show the window was hit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/time.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slab/kmalloc.h"
#include "tap.h"

static void *(*volatile get)(size_t) = malloc;
static volatile int mid, bad, kids;

/* The timer caught the main thread somewhere in its first allocation
 * (maybe inside start-up, holding its locks): fork there. */
static void fork_here(int sig)
{
    (void)sig;
    for (int i = 0; i < 4; i++) {
        pid_t p = fork();
        if (p == 0) {
            signal(SIGALRM, SIG_DFL);
            alarm(10);
            int early = !slab_ready();
            void *a = get(100), *b = get(5000), *c = get(1 << 20);
            void *d = calloc(3, 333);
            int fine = a && b && c && d;
            free(a);
            free(b);
            free(c);
            free(d);
            _exit(fine ? (early ? 10 : 0) : 1);
        }
        if (p < 0) {
            bad++;
            continue;
        }
        kids++;
        int st;
        while (waitpid(p, &st, 0) < 0 && errno == EINTR)
            ;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 10)
            mid++;
        else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad++;
    }
}

/* One fresh process: its first allocation, with a timer set to go off
 * `us` microseconds into it.  Prints "mid kids"; exit 0 when every child
 * allocated. */
static int race(int us)
{
    signal(SIGALRM, fork_here);
    struct itimerval it = { .it_value = { .tv_sec = 0, .tv_usec = us > 0 ? us : 1 } };
    setitimer(ITIMER_REAL, &it, NULL);
    void *p = get(64);
    while (!kids && !bad)
        ;                       /* the timer may go off after start-up */
    free(p);
    char line[32];
    int n = snprintf(line, sizeof line, "%d %d\n", mid, kids);
    if (write(1, line, (size_t)n) != n)
        return 4;
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "race"))
        return race(atoi(argv[2]));
    plan(2);
    bail_out_after(240, "fork_mid_init hung (watchdog)");
    int failed = 0, mid = 0, kids = 0;
    for (int round = 0; round < 60; round++) {
        char arg[16];
        snprintf(arg, sizeof arg, "%d", 5 + round * 5);
        int out[2];
        if (pipe(out) != 0)
            BAIL("pipe");
        fflush(NULL);
        pid_t p = fork();
        if (p == 0) {
            dup2(out[1], 1);
            close(out[0]);
            execl("/proc/self/exe", argv[0], "race", arg, (char *)NULL);
            _exit(127);
        }
        close(out[1]);
        char buf[64] = { 0 };
        ssize_t got = read(out[0], buf, sizeof buf - 1);
        close(out[0]);
        int st;
        while (waitpid(p, &st, 0) < 0 && errno == EINTR)
            ;
        int m = 0, k = 0;
        if (got > 0)
            sscanf(buf, "%d %d", &m, &k);
        mid += m;
        kids += k;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            failed++;
            diag("round %d: exit status %#x", round, st);
        }
    }
    is(failed, 0, "60 processes forking during their first allocation: every child allocated (%d children)", kids);
    ok(mid > 0, "%d of the children were forked with start-up caught half-way", mid);
    return done_testing();
}
