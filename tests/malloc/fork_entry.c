/*
 * fork_entry — fork repair does not depend on how a program allocates.
 *
 *  - calloc only: three threads allocate with calloc and free (arrays of
 *    one object, array_size=1, so they are always in a slow path), never
 *    calling malloc, while the main thread forks 100 times; each child
 *    allocates 64,000 blocks with calloc and exits 0 (the repair handler is
 *    registered when the library loads, not from malloc's first slow path:
 *    before, such a child inherited a held per-CPU slab lock and hung);
 *  - caches being created: a thread creates and destroys sk_cache caches
 *    in a loop, keeping one in eight (its metadata carving, and the
 *    per-CPU pools', hold a spinlock around an mmap)
 *    while the main thread forks 100 times; each child creates a cache
 *    and allocates from it (before, a child caught inside the carving
 *    spun forever on its lock).
 * Each scenario runs in a fresh process (the test re-executes itself) in
 * which nothing calls malloc first, stdio included; every child has a
 * watchdog, and a child that hangs or fails fails the test.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slabkit.h"
#include "tap.h"

#define FORKS 100

static volatile int stop;

static void *calloc_churn(void *arg)
{
    (void)arg;
    void *p[64];
    while (!stop) {
        for (int i = 0; i < 64; i++)
            p[i] = calloc(1, 64 + (size_t)(i & 3) * 64);
        for (int i = 0; i < 64; i++)
            free(p[i]);
    }
    return NULL;
}

/* Creates and destroys caches; one in eight stays (up to KEEP), so that
 * creation keeps carving new metadata, struct and per-CPU pool columns,
 * while the forks come: a destroyed cache's metadata is reused as is. */
#define KEEP 512
static void *cache_churn(void *arg)
{
    (void)arg;
    unsigned n = 0, kept = 0;
    while (!stop) {
        char name[32];
        snprintf(name, sizeof name, "fork-entry-%u", n++ % 64);
        sk_cache_t *c = sk_cache_create(name, 40 + (n % 50) * 8, 0, 0, NULL);
        if (!c)
            continue;
        void *o = sk_cache_alloc(c);
        sk_cache_free(c, o);
        if (n % 8 == 0 && kept < KEEP)
            kept++;
        else
            sk_cache_destroy(c);
    }
    return NULL;
}

/* One scenario; returns the number of children that hung or failed. */
static int scenario(int which)
{
    pthread_t t[3];
    int nt = which == 0 ? 3 : 1;
    for (int i = 0; i < nt; i++)
        pthread_create(&t[i], NULL, which == 0 ? calloc_churn : cache_churn, NULL);
    int failed = 0;
    for (int f = 0; f < FORKS; f++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(10);
            if (which == 0) {
                for (int k = 0; k < 1000; k++) {
                    void *q[64];
                    for (int i = 0; i < 64; i++)
                        if (!(q[i] = calloc(1, 64 + (size_t)(i & 3) * 64)))
                            _exit(2);
                    for (int i = 0; i < 64; i++)
                        free(q[i]);
                }
            } else {
                sk_cache_t *c = sk_cache_create("fork-entry-child", 200, 0, 0, NULL);
                if (!c)
                    _exit(2);
                for (int i = 0; i < 1000; i++) {
                    void *o = sk_cache_alloc(c);
                    if (!o)
                        _exit(2);
                    sk_cache_free(c, o);
                }
            }
            _exit(0);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed++;
    }
    stop = 1;
    for (int i = 0; i < nt; i++)
        pthread_join(t[i], NULL);
    return failed;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "child"))
        return scenario(atoi(argv[2])) ? 1 : 0;
    static const char *const what[2] = {
        "calloc-only threads, 100 forks: every child allocates and exits 0",
        "a thread creating caches, 100 forks: every child creates a cache and allocates",
    };
    plan(2);
    for (int s = 0; s < 2; s++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            char arg[8];
            snprintf(arg, sizeof arg, "%d", s);
            /* Arrays of one object: every calloc and free takes a slow
             * path, so forks often catch a per-CPU slab lock held. */
            if (s == 0 && !getenv("SLABKIT_OPTIONS"))
                setenv("SLABKIT_OPTIONS", "array_size=1", 1);
            execl("/proc/self/exe", argv[0], "child", arg, (char *)NULL);
            _exit(127);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid)
            st = -1;
        ok(st == 0, "%s", what[s]);
        if (st != 0)
            diag("scenario status 0x%x: some child hung (watchdog) or failed", st);
    }
    return done_testing();
}
