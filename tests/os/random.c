/*
 * random — os_random64() hands out getrandom's bytes from a pool: every
 * value odd and distinct, one system call for 32 values (this test's own
 * getrandom, which the static link binds os.c's calls to, counts them and
 * passes them on), a pool shared by threads without handing a value out
 * twice, and a forked child that draws values the parent never does.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "os/os.h"
#include "tap.h"

static int calls;

ssize_t getrandom(void *buf, size_t len, unsigned flags)
{
    __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED);
    return syscall(SYS_getrandom, buf, len, flags);
}

#define N 256
#define THREADS 4
#define PER 500

static uint64_t vals[THREADS * PER];

static void *draw(void *arg)
{
    uint64_t *out = arg;
    for (int i = 0; i < PER; i++)
        out[i] = os_random64();
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int dups(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp);
    int d = 0;
    for (size_t i = 1; i < n; i++)
        d += v[i] == v[i - 1];
    return d;
}

int main(void)
{
    uint64_t v[N];
    int even = 0, before = calls;
    for (int i = 0; i < N; i++) {
        v[i] = os_random64();
        even += !(v[i] & 1);
    }
    is(even, 0, "%d values, all odd", N);
    ok(calls - before >= 1 && calls - before <= N / 32 + 1, "%d getrandom calls for %d values (a pool of 32)",
       calls - before, N);
    is(dups(v, N), 0, "no value twice");

    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, draw, vals + i * PER);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    is(dups(vals, THREADS * PER), 0, "%d threads drawing %d values each: none handed out twice", THREADS, PER);

    /* Parent and child draw after the fork: their values must differ. */
    int fd[2];
    if (pipe(fd))
        BAIL("pipe");
    os_random64();          /* a pool with values left in it at the fork */
    pid_t pid = fork();
    if (pid == 0) {
        os_random_atfork_child();     /* what the library's fork handler calls */
        uint64_t c[8];
        for (int i = 0; i < 8; i++)
            c[i] = os_random64();
        write(fd[1], c, sizeof c);
        _exit(0);
    }
    uint64_t p[8], c[8];
    for (int i = 0; i < 8; i++)
        p[i] = os_random64();
    if (read(fd[0], c, sizeof c) != (ssize_t)sizeof c)
        BAIL("read from the child");
    waitpid(pid, NULL, 0);
    int same = 0;
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            same += p[i] == c[j];
    is(same, 0, "a forked child draws none of the values its parent does");
    return done_testing();
}
