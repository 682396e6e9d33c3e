/*
 * leader_exit — a process whose main thread calls pthread_exit ends when
 * its last thread does, as under glibc, though slabkit's own threads run
 * (os.h, os_leader_watch): they count as threads and block every signal,
 * and before the fix such a process never ended, unkillable by SIGTERM.
 * Each case runs in a child (this program again, with its options) that
 * must exit 0 within 10 s, having printed what its last thread printed:
 *  - the purger running (its state checked), main pthread_exits while a
 *    worker sleeps;
 *  - KFENCE's timer running and no purger (background=0);
 *  - a worker thread forks, and in the child (which it leads) starts a
 *    thread, so that the child may have a purger, starts the purger, a
 *    thread, and pthread_exits: CPython's test_threading case.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "page/page.h"
#include "tap.h"
#include "threaded.h"

static void *late(void *arg)
{
    (void)arg;
    usleep(200000);
    printf("last thread done\n");
    fflush(stdout);
    return NULL;
}

/* Enough freed memory that the purger is wanted, then a slow path. */
static void churn(void)
{
    enum { N = 40 };
    void *volatile big[N];
    for (int i = 0; i < N; i++) {
        big[i] = malloc(512 << 10);
        memset(big[i], 1, 512 << 10);
    }
    for (int i = 0; i < N; i++)
        free(big[i]);
    for (int i = 0; i < 8; i++) {
        void *volatile p = malloc(1000 + i * 700);
        free(p);
    }
}

static int leave(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, late, NULL) != 0)
        return 3;
    pthread_exit(NULL);
}

static void *nap(void *arg)
{
    (void)arg;
    usleep(500000);
    return NULL;
}

static void *forker(void *arg)
{
    (void)arg;
    pid_t pid = fork();
    if (pid == 0) {
        /* The child has one thread: it gets a purger only once it has a
         * thread of its own running, which slabkit notices within 100 ms
         * (os_threaded_recheck). */
        pthread_t t;
        if (pthread_create(&t, NULL, nap, NULL) != 0)
            _exit(3);
        pthread_detach(t);
        usleep(150000);
        churn();
        if (__atomic_load_n(&page_purger.state, __ATOMIC_ACQUIRE) != PURGER_RUNNING)
            _exit(4);
        leave();
    }
    int st = 0;
    waitpid(pid, &st, 0);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

static int child(const char *mode)
{
    if (!strcmp(mode, "purger")) {
        churn();
        if (__atomic_load_n(&page_purger.state, __ATOMIC_ACQUIRE) != PURGER_RUNNING)
            return 4;
        return leave();
    }
    if (!strcmp(mode, "kfence")) {
        churn();
        uintptr_t tcb[OS_OWN_THREADS];
        if (os_own_threads(tcb) < 1)
            return 5;       /* no KFENCE timer: the case proves nothing */
        return leave();
    }
    if (!strcmp(mode, "fork")) {
        pthread_t t;
        if (pthread_create(&t, NULL, forker, NULL) != 0)
            return 3;
        pthread_join(t, NULL);
        return 6;           /* forker _exits */
    }
    return 2;
}

/* Run a case; 0 and its stdout, or the status (124: still running after
 * 10 s, then killed). */
static int run(const char *mode, const char *opts, char *out, size_t len)
{
    int fd[2];
    if (pipe(fd) != 0)
        BAIL("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        setenv("SLABKIT_OPTIONS", opts, 1);
        execl("/proc/self/exe", "leader_exit", "--child", mode, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    int st = 0, rc = 124;
    for (int i = 0; i < 1000; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid) {
            rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        usleep(10000);
    }
    if (rc == 124) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    ssize_t n = read(fd[0], out, len - 1);
    out[n > 0 ? n : 0] = 0;
    close(fd[0]);
    return rc;
}

int main(int argc, char **argv)
{
    become_threaded();    /* the purger's conditions (threaded.h) */
    if (argc > 2 && !strcmp(argv[1], "--child"))
        return child(argv[2]);
    static const struct { const char *mode, *opts, *what; } cases[] = {
        { "purger", "background=1", "the purger running" },
        { "kfence", "background=0,kfence=20", "KFENCE's timer running, no purger" },
        { "fork", "background=1", "a worker thread forked; in the child it started the purger" },
    };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[256];
        int rc = run(cases[i].mode, cases[i].opts, out, sizeof out);
        ok(rc == 0 && strstr(out, "last thread done"),
           "%s, main thread pthread_exits: the process ends with its last thread (exit %d%s)", cases[i].what, rc,
           rc == 124 ? ": still running after 10 s" : "");
    }
    return done_testing();
}
