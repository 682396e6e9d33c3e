/*
 * leak_every — the leak scan (sk_leak_check, leak_check=1) finds every
 * unreferenced object, without debug=U, where slabkit's own state once
 * hid some: its data held the heap's first address (so the first object
 * was never reported), and a per-CPU array's slots above its top keep the
 * pointers they handed out.  The child (this program again) leaks:
 *  - the first malloc of the process, before anything else allocates;
 *  - on each CPU in turn, pinned, the last object that CPU's array of
 *    kmalloc-96 handed out;
 *  - one object of each of 24, 200, 1000, 5000 and 20000 bytes, and two
 *    objects of an sk_cache;
 * and keeps referenced, which must not be reported: an object a global
 * points to, one reached only through it, and one only a live thread's
 * stack holds.  sk_leak_check's count is exactly the leaks, each leaked
 * address has its "unreferenced object" entry, no kept one has; and the
 * exit report of leak_check=1 says the same.  Linked with libslabkit.a
 * (the Makefile), where slabkit's own data lies inside the program's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slabkit.h"
#include "tap.h"

#define MAX_LEAKS 64

/* ---- the child ---- */

static uintptr_t leaked[MAX_LEAKS];   /* addresses as numbers, xored: no pointer to them here */
static int nleaked;
#define HIDE(p) ((uintptr_t)(p) ^ (uintptr_t)0x5a5a5a5a5a5a5a5aull)

static void *global_keep;      /* -> 64 bytes -> 48 bytes */
static int pipefd[2];
static uintptr_t thread_obj;   /* hidden too */

__attribute__((noinline)) static void leak(size_t size, char fill)
{
    void *volatile p = malloc(size);
    memset(p, fill, size);
    leaked[nleaked++] = HIDE(p);
    p = NULL;
}

__attribute__((noinline)) static void leak_cache(sk_cache_t *c)
{
    void *volatile p = sk_cache_alloc(c);
    memset(p, 'K', sk_cache_object_size(c));
    leaked[nleaked++] = HIDE(p);
    p = NULL;
}

__attribute__((noinline)) static void scrub_stack(void)
{
    volatile char junk[32768];
    memset((char *)junk, 0, sizeof junk);
}

/* This CPU's array of kmalloc-96 refilled and partly used. */
__attribute__((noinline)) static void warm_array(void)
{
    void *volatile warm[8];
    for (int i = 0; i < 8; i++)
        warm[i] = malloc(96);
    for (int i = 0; i < 8; i++)
        free(warm[i]);
}

static void *sleeper(void *arg)
{
    (void)arg;
    void *volatile mine = malloc(152);
    memset(mine, 'T', 152);
    thread_obj = HIDE(mine);
    char c;
    while (read(pipefd[0], &c, 1) < 0 && errno == EINTR)
        ;
    free(mine);
    return NULL;
}

static int child(void)
{
    /* The process's very first malloc, leaked. */
    void *volatile first = malloc(40);
    memset(first, 'F', 40);
    leaked[nleaked++] = HIDE(first);
    first = NULL;

    /* Each CPU's array: the last object it handed out. */
    cpu_set_t all, one;
    if (sched_getaffinity(0, sizeof all, &all) != 0)
        return 3;
    for (int cpu = 0; cpu < CPU_SETSIZE && nleaked < MAX_LEAKS / 2; cpu++) {
        if (!CPU_ISSET(cpu, &all))
            continue;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0)
            continue;
        warm_array();
        scrub_stack();                     /* warm's pointers, out of dead frames */
        leak(96, 'C');                     /* the last one handed out here */
    }
    sched_setaffinity(0, sizeof all, &all);

    static const size_t sizes[] = { 24, 200, 1000, 5000, 20000 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        leak(sizes[i], 'S');
    sk_cache_t *c = sk_cache_create("leak-every", 120, 0, 0, NULL);
    if (!c)
        return 4;
    leak_cache(c);
    leak_cache(c);

    /* Kept: from a global, through a heap object, from a thread's stack. */
    void **holder = malloc(64);
    memset(holder, 0, 64);
    holder[0] = malloc(48);
    memset(holder[0], 'R', 48);
    global_keep = holder;
    if (pipe(pipefd) != 0)
        return 5;
    pthread_t t;
    if (pthread_create(&t, NULL, sleeper, NULL) != 0)
        return 6;
    while (!__atomic_load_n(&thread_obj, __ATOMIC_ACQUIRE))
        usleep(1000);
    usleep(50000);         /* asleep in read() */
    holder = NULL;
    scrub_stack();

    long n = sk_leak_check();
    /* Addresses out only now (stdio allocates its buffer). */
    for (int i = 0; i < nleaked; i++)
        printf("leak %#lx\n", (unsigned long)HIDE(leaked[i]));
    printf("keep %#lx\nkeep %#lx\nkeep %#lx\ncount %ld\nexpect %d\n", (unsigned long)(uintptr_t)global_keep,
           (unsigned long)(uintptr_t)((void **)global_keep)[0], (unsigned long)HIDE(thread_obj), n, nleaked);
    fflush(stdout);
    if (write(pipefd[1], "x", 1) != 1)
        return 7;
    pthread_join(t, NULL);
    return 0;
}

/* ---- the parent ---- */

static int run(const char *options, char *out, size_t outlen, char *err, size_t errlen)
{
    int o[2], e[2];
    if (pipe(o) || pipe(e))
        BAIL("pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(o[1], 1);
        dup2(e[1], 2);
        close(o[0]);
        close(e[0]);
        if (options)
            setenv("SLABKIT_OPTIONS", options, 1);
        else
            unsetenv("SLABKIT_OPTIONS");
        execl("/proc/self/exe", "leak_every", "--child", (char *)NULL);
        _exit(127);
    }
    close(o[1]);
    close(e[1]);
    /* Both pipes stay small enough (a few KiB) not to block the child. */
    tap_read_all(o[0], out, outlen);
    tap_read_all(e[0], err, errlen);
    close(o[0]);
    close(e[0]);
    int st;
    waitpid(pid, &st, 0);
    return st;
}

static bool reported(const char *err, unsigned long a)
{
    char want[64];
    snprintf(want, sizeof want, "unreferenced object %#lx ", a);
    return strstr(err, want) != NULL;
}

static void check(const char *how, const char *out, const char *err, bool at_exit)
{
    long count = -1, expect = -1;
    const char *p = strstr(out, "count ");
    if (p)
        count = atol(p + 6);
    p = strstr(out, "expect ");
    if (p)
        expect = atol(p + 7);
    int leaks = 0, found = 0, kept = 0, kept_reported = 0;
    for (p = out; (p = strstr(p, "leak 0x")); p += 5) {
        leaks++;
        unsigned long a = strtoul(p + 5, NULL, 16);
        if (reported(err, a))
            found++;
        else
            diag("%s: leak %#lx not reported", how, a);
    }
    for (p = out; (p = strstr(p, "keep 0x")); p += 5) {
        kept++;
        unsigned long a = strtoul(p + 5, NULL, 16);
        if (reported(err, a)) {
            kept_reported++;
            diag("%s: kept object %#lx reported", how, a);
        }
    }
    ok(expect >= 10 && leaks == expect, "%s: the child leaked %d objects (the first malloc, one per CPU, 7 more)",
       how, leaks);
    if (!at_exit)
        is(count, expect, "%s: sk_leak_check counts exactly the leaks", how);
    ok(found == leaks && leaks > 0, "%s: every leak has its entry (%d of %d), without debug=U", how, found, leaks);
    ok(kept == 3 && kept_reported == 0, "%s: none of the 3 referenced objects is (%d)", how, kept_reported);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--child"))
        return child();
    plan(9);
    static char out[1 << 14], err[1 << 20];
    int st = run(NULL, out, sizeof out, err, sizeof err);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "on demand: the child exits 0 (status %#x)", st);
    check("on demand", out, err, false);
    st = run("leak_check=1", out, sizeof out, err, sizeof err);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "leak_check=1: the child exits 0 (status %#x)", st);
    /* At exit the on-demand scan's entries are printed once more: the
     * same leaks, and the exit report must show them too. */
    check("leak_check=1 at exit", out, err, true);
    return done_testing();
}
