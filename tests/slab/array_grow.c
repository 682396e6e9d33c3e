/*
 * array_grow — a CPU's object array grows while the program keeps
 * emptying and filling it, and starts small again once shrunk
 * (src/slab/slab.c, slab_free_slow; cache.c, array_max).
 *
 * A cache of 512-byte objects starts with arrays of 32 (16 KiB) and may
 * grow to CPU_ARRAY_MAX (117, under the 64 KiB bound).  On one CPU:
 *  - one round (400 allocations, then 400 frees): at most one doubling,
 *    so at most 64 objects stay in the array;
 *  - rounds after it: the array doubles up to its bound and holds more
 *    than 64 objects after a round, never more than 117;
 *  - sk_cache_shrink drains it; the round after holds at most 64 again
 *    (trimmed back to 32, one doubling);
 *  - frees alone (a teardown: 400 frees with no allocation between) never
 *    grow it beyond the one doubling that the allocations before allow;
 *  - a class of 32 KiB objects (arrays of 2) grows to 8 objects, not to
 *    64 KiB's 2;
 *  - with SLABKIT_OPTIONS=array_size=8 (a child) it never holds more
 *    than 8;
 *  - 8 threads doing rounds with half their frees on another thread,
 *    against a thread that shrinks without pause (trims racing with
 *    growth and with pushes): every object comes back with its pattern,
 *    no object is handed out twice (each holder stamps a serial number
 *    and finds it again before the free), and the cache is empty at the
 *    end;
 *  - an array trimmed while it holds more than its new capacity (a
 *    shrink from a thread that cannot reach that CPU: membarrier denied
 *    and the thread's affinity elsewhere, so the drain cannot visit):
 *    a second free of an object in it still dies with "double free"
 *    (a child; skipped on one CPU).
 * All of it runs again with rseq off (the fallback's per-slot arrays).
 * TSAN: yes
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_MAX 117u    /* src/cpu/cpu.h: CPU_ARRAY_MAX */
#include <sys/wait.h>
#include <unistd.h>

#include "slabkit.h"
#include "tap.h"
#include "cpus.h"
#include "cache_info.h"

#define SIZE 512
#define BASE 32                   /* 16384 / 512 */
#define N 400

/* A tag at both ends of an object of `size` bytes. */
static void stamp_at(void *p, size_t size, uintptr_t tag)
{
    uintptr_t *w = p;
    w[0] = tag;
    w[size / sizeof *w - 1] = ~tag;
}

static int intact_at(const void *p, size_t size, uintptr_t tag)
{
    const uintptr_t *w = p;
    return w[0] == tag && w[size / sizeof *w - 1] == ~tag;
}

static void stamp(void *p, uintptr_t tag) { stamp_at(p, SIZE, tag); }
static int intact(const void *p, uintptr_t tag) { return intact_at(p, SIZE, tag); }

/* One round: n allocations of c's `size`-byte objects, then n frees (a
 * teardown, for the frees); the number of objects whose tags did not
 * survive. */
#define ROUND_MAX (4 * N)
static int round_of(sk_cache_t *c, size_t size, int n)
{
    static void *objs[ROUND_MAX];
    int bad = 0;
    for (int i = 0; i < n; i++) {
        if (!(objs[i] = sk_cache_alloc(c)))
            BAIL("sk_cache_alloc failed");
        stamp_at(objs[i], size, (uintptr_t)objs[i] ^ 0x5a5a);
    }
    for (int i = 0; i < n; i++) {
        bad += !intact_at(objs[i], size, (uintptr_t)objs[i] ^ 0x5a5a);
        sk_cache_free(c, objs[i]);
    }
    return bad;
}

static int round_trip(sk_cache_t *c) { return round_of(c, SIZE, N); }

static unsigned long in_arrays(const char *name)
{
    return cache_info(name).array_objs;
}

/* `rounds` rounds of n objects of cache `name`; the most objects its
 * arrays held after one, and *bad the damaged objects. */
static unsigned long most_held(sk_cache_t *c, const char *name, size_t size, int n, int rounds, int *bad)
{
    unsigned long most = 0;
    for (int r = 0; r < rounds; r++) {
        *bad += round_of(c, size, n);
        unsigned long held = in_arrays(name);
        if (held > most)
            most = held;
    }
    return most;
}

static void pin_here(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &set);
    sched_setaffinity(0, sizeof set, &set);
}

static void unpin(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < CPU_SETSIZE; i++)
        CPU_SET(i, &set);
    sched_setaffinity(0, sizeof set, &set);
}

/* ---- the threads ---- */

#define THREADS 8
#define ROUNDS 300
#define PER 160

/* An object held with the serial number stamped into it when it was
 * handed out: a second holder of the same object would overwrite it. */
struct held {
    void *p;
    uintptr_t serial;
};

static sk_cache_t *shared;
static struct held handoff[THREADS][PER];
static int handoff_n[THREADS];
static pthread_mutex_t handoff_lock = PTHREAD_MUTEX_INITIALIZER;
static int stop_shrinker, corrupt;
static uintptr_t serials;

static void drop(struct held h)
{
    if (!intact(h.p, h.serial))
        __atomic_fetch_add(&corrupt, 1, __ATOMIC_RELAXED);
    sk_cache_free(shared, h.p);
}

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg, next = (me + 1) % THREADS;
    struct held mine[PER];
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < PER; i++) {
            mine[i].p = sk_cache_alloc(shared);
            if (!mine[i].p)
                BAIL("sk_cache_alloc failed");
            mine[i].serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
            stamp(mine[i].p, mine[i].serial);
        }
        /* Half go to the next thread's hand-off, which it frees. */
        pthread_mutex_lock(&handoff_lock);
        struct held theirs[PER];
        int nt = handoff_n[me];
        memcpy(theirs, handoff[me], (size_t)nt * sizeof *theirs);
        handoff_n[me] = 0;
        int room = PER - handoff_n[next], give = PER / 2 < room ? PER / 2 : room;
        memcpy(&handoff[next][handoff_n[next]], mine, (size_t)give * sizeof *mine);
        handoff_n[next] += give;
        pthread_mutex_unlock(&handoff_lock);
        for (int i = give; i < PER; i++)
            drop(mine[i]);
        for (int i = 0; i < nt; i++)
            drop(theirs[i]);
    }
    return NULL;
}

static void *shrinker(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&stop_shrinker, __ATOMIC_RELAXED))
        sk_cache_shrink(shared);
    return NULL;
}

static int fixed_child(void)
{
    /* SLABKIT_OPTIONS=array_size=8: the capacity is fixed. */
    sk_cache_t *c = sk_cache_create("grow-fixed", SIZE, 0, 0, NULL);
    if (!c)
        return 2;
    pin_here();
    int bad = 0;
    unsigned long most = most_held(c, "grow-fixed", SIZE, N, 8, &bad);
    if (bad)
        return 3;
    if (most > 8) {
        fprintf(stderr, "array_size=8: %lu objects in the arrays\n", most);
        return 1;
    }
    return 0;
}

/* Two CPUs of this thread's affinity, or -1. */
static int two_cpus(int *a, int *b)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    *a = *b = -1;
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &set)) {
            if (*a < 0)
                *a = i;
            else if (*b < 0)
                *b = i;
        }
    return *b < 0 ? -1 : 0;
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        _exit(3);
}

static sk_cache_t *visit_cache;
static int visit_cpu;

static void *shrink_from(void *arg)
{
    (void)arg;
    pin(visit_cpu);
    sk_cache_shrink(visit_cache);
    return NULL;
}

/* SK_TEST_DENY_MEMBARRIER=1 (cpus.h): grow the array on CPU a, have a
 * thread on CPU b shrink (it can neither fence nor visit CPU a: the
 * array keeps its objects, its capacity goes back to 32), then free an
 * object in it a second time: must die with "double free".  77: could not
 * set it up. */
static int visit_child(void)
{
    int a, b;
    if (!membarrier_denied() || two_cpus(&a, &b) != 0)
        return 77;
    visit_cache = sk_cache_create("grow-visit", SIZE, 0, 0, NULL);
    if (!visit_cache)
        return 2;
    pin(a);
    for (int r = 0; r < 8; r++)
        round_trip(visit_cache);
    /* x goes in deeper than a flush reaches: its check of the batch it
     * pops would catch the second free without the array search. */
    void *x = sk_cache_alloc(visit_cache), *more[40];
    for (int i = 0; i < 40; i++)
        more[i] = sk_cache_alloc(visit_cache);
    sk_cache_free(visit_cache, x);
    for (int i = 0; i < 40; i++)
        sk_cache_free(visit_cache, more[i]);
    if (in_arrays("grow-visit") <= 2 * BASE)
        return 78;
    visit_cpu = b;
    pthread_t t;
    pthread_create(&t, NULL, shrink_from, NULL);
    pthread_join(t, NULL);
    if (sched_getcpu() != a || in_arrays("grow-visit") <= BASE)
        return 77;                          /* the drain reached it after all
                                             * (no rseq: arrays under locks) */
    sk_cache_free(visit_cache, x);          /* the double free */
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--fixed") == 0)
        return fixed_child();
    if (argc > 1 && strcmp(argv[1], "--visit") == 0)
        return visit_child();
    int rerun = tap_rseq_off_run(argc, argv);
    const char *mode = rerun ? "rseq off" : "rseq";
    bail_out_after(120, "array_grow");

    char name[32];
    snprintf(name, sizeof name, "grow-%d", rerun);
    sk_cache_t *c = sk_cache_create(name, SIZE, 0, 0, NULL);
    if (!c)
        BAIL("sk_cache_create failed");
    is(cache_info(name).array_capacity, BASE, "%s: a 512-byte cache's arrays start at 32", mode);
    pin_here();

    int bad = round_trip(c);
    unsigned long first = in_arrays(name);
    ok(first <= 2 * BASE, "%s: one round grows the array once at most (%lu objects in it)", mode, first);
    unsigned long most = most_held(c, name, SIZE, N, 6, &bad);
    ok(most > 2 * BASE && most <= ARRAY_MAX, "%s: rounds grow it to its bound (%lu objects, %u at most)", mode, most, ARRAY_MAX);

    sk_cache_shrink(c);
    is(in_arrays(name), 0, "%s: shrink drains it", mode);
    bad += round_trip(c);
    unsigned long after = in_arrays(name);
    ok(after <= 2 * BASE, "%s: shrink trims it back (%lu objects after a round)", mode, after);

    /* A teardown: allocations first (they refill), then frees alone. */
    sk_cache_shrink(c);
    bad += round_of(c, SIZE, ROUND_MAX);
    unsigned long down = in_arrays(name);
    ok(down <= 2 * BASE, "%s: frees alone grow it once at most (%lu objects)", mode, down);
    is(bad, 0, "%s: every object kept its pattern", mode);

    /* A big class (32 KiB: one object a slab, arrays of 2) grows to 8. */
    char big[32];
    snprintf(big, sizeof big, "grow-big-%d", rerun);
    sk_cache_t *b = sk_cache_create(big, 32768, 0, 0, NULL);
    if (!b)
        BAIL("sk_cache_create failed");
    int bbad = 0;
    unsigned long bmost = most_held(b, big, 32768, 16, 8, &bbad);
    ok(cache_info(big).array_capacity == 2 && bmost > 2 && bmost <= 8 && !bbad,
       "%s: a 32 KiB class's arrays grow from 2 to 8 objects at most (%lu held, %d damaged)", mode, bmost, bbad);
    sk_cache_shrink(b);
    unpin();

    /* The option fixes the capacity. */
    pid_t pid = fork();
    if (pid == 0) {
        setenv("SLABKIT_OPTIONS", "array_size=8", 1);
        execl("/proc/self/exe", argv[0], "--fixed", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: array_size=8 fixes the capacity (status %d)", mode, st);

    /* A double free in an array trimmed below its count. */
    if (!rerun) {
        int fd;
        pid = tap_fork_stderr(&fd);
        if (pid == 0) {
            setenv("SK_TEST_DENY_MEMBARRIER", "1", 1);
            execl("/proc/self/exe", argv[0], "--visit", (char *)NULL);
            _exit(127);
        }
        char err[4096];
        st = tap_child_stderr(pid, fd, err, sizeof err);
        err[strcspn(err, "\n")] = 0;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
            skip("one CPU, no rseq, or membarrier could not be denied");
        else
            ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(err, "double free"),
               "%s: a double free in an array trimmed below its count dies (status %#x: %.120s)", mode, st, err);
    }

    /* Threads against a shrinker. */
    snprintf(name, sizeof name, "grow-mt-%d", rerun);
    shared = sk_cache_create(name, SIZE, 0, 0, NULL);
    if (!shared)
        BAIL("sk_cache_create failed");
    memset(handoff_n, 0, sizeof handoff_n);
    stop_shrinker = 0;
    corrupt = 0;
    pthread_t t[THREADS], s;
    pthread_create(&s, NULL, shrinker, NULL);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    __atomic_store_n(&stop_shrinker, 1, __ATOMIC_RELAXED);
    pthread_join(s, NULL);
    for (int i = 0; i < THREADS; i++)
        for (int k = 0; k < handoff_n[i]; k++)
            drop(handoff[i][k]);
    is(corrupt, 0, "%s: threads, cross-thread frees and a shrinker: no object damaged or held twice", mode);
    struct sk_cache_info in = cache_info(name);
    is(in.active_objs, 0, "%s: every object came back (%lu in arrays)", mode, in.array_objs);
    sk_cache_shrink(shared);
    is(cache_info(name).active_objs, 0, "%s: shrink leaves the cache empty", mode);
    is(sk_cache_destroy(shared), 0, "%s: and it can be destroyed", mode);

    if (!rerun)
        tap_rerun_rseq_off(argv);
    return done_testing();
}
