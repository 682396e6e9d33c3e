/*
 * array_grow — a CPU's object array grows while the program keeps
 * emptying and filling it, and starts small again once shrunk
 * (src/slab/slab.c, slab_free_slow; cache.c, array_max).
 *
 * A cache of 512-byte objects starts with arrays of 32 (16 KiB) and may
 * grow to CPU_ARRAY_MAX (125, under the 64 KiB bound).  On one CPU:
 *  - one round (400 allocations, then 400 frees): at most one doubling,
 *    so at most 64 objects stay in the array;
 *  - rounds after it: the array doubles up to its bound and holds more
 *    than 64 objects after a round, never more than 125;
 *  - sk_cache_shrink drains it; the round after holds at most 64 again
 *    (trimmed back to 32, one doubling);
 *  - frees alone (a teardown: 400 frees with no allocation between) never
 *    grow it beyond the one doubling that the allocations before allow;
 *  - with SLABKIT_OPTIONS=array_size=8 (a child) it never holds more
 *    than 8;
 *  - 8 threads doing rounds with half their frees on another thread,
 *    against a thread that shrinks without pause (trims racing with
 *    growth and with pushes): every object comes back with its pattern,
 *    no object is handed out twice, and the cache is empty at the end.
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
#include <sys/wait.h>
#include <unistd.h>

#include "slabkit.h"
#include "tap.h"
#include "cache_info.h"

#define SIZE 512
#define BASE 32                   /* 16384 / 512 */
#define N 400

static void stamp(void *p, uintptr_t tag)
{
    uintptr_t *w = p;
    w[0] = tag;
    w[SIZE / sizeof *w - 1] = ~tag;
}

static int intact(const void *p, uintptr_t tag)
{
    const uintptr_t *w = p;
    return w[0] == tag && w[SIZE / sizeof *w - 1] == ~tag;
}

/* One round: N allocations, then N frees; the number of objects whose
 * pattern did not survive. */
static int round_trip(sk_cache_t *c)
{
    static void *objs[N];
    int bad = 0;
    for (int i = 0; i < N; i++) {
        objs[i] = sk_cache_alloc(c);
        if (!objs[i])
            BAIL("sk_cache_alloc failed");
        stamp(objs[i], (uintptr_t)objs[i] ^ 0x5a5a);
    }
    for (int i = 0; i < N; i++) {
        bad += !intact(objs[i], (uintptr_t)objs[i] ^ 0x5a5a);
        sk_cache_free(c, objs[i]);
    }
    return bad;
}

static unsigned long in_arrays(const char *name)
{
    return cache_info(name).array_objs;
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

static sk_cache_t *shared;
static void *handoff[THREADS][PER];
static int handoff_n[THREADS];
static pthread_mutex_t handoff_lock = PTHREAD_MUTEX_INITIALIZER;
static int stop_shrinker, corrupt;

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg, next = (me + 1) % THREADS;
    void *mine[PER];
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < PER; i++) {
            mine[i] = sk_cache_alloc(shared);
            if (!mine[i])
                BAIL("sk_cache_alloc failed");
            stamp(mine[i], (uintptr_t)mine[i] + 1);
        }
        /* Half go to the next thread's hand-off, which it frees. */
        pthread_mutex_lock(&handoff_lock);
        void *theirs[PER];
        int nt = handoff_n[me];
        memcpy(theirs, handoff[me], (size_t)nt * sizeof *theirs);
        handoff_n[me] = 0;
        int room = PER - handoff_n[next], give = PER / 2 < room ? PER / 2 : room;
        memcpy(&handoff[next][handoff_n[next]], mine, (size_t)give * sizeof *mine);
        handoff_n[next] += give;
        pthread_mutex_unlock(&handoff_lock);
        for (int i = give; i < PER; i++) {
            if (!intact(mine[i], (uintptr_t)mine[i] + 1))
                __atomic_fetch_add(&corrupt, 1, __ATOMIC_RELAXED);
            sk_cache_free(shared, mine[i]);
        }
        for (int i = 0; i < nt; i++) {
            if (!intact(theirs[i], (uintptr_t)theirs[i] + 1))
                __atomic_fetch_add(&corrupt, 1, __ATOMIC_RELAXED);
            sk_cache_free(shared, theirs[i]);
        }
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
    unsigned long most = 0;
    for (int r = 0; r < 8; r++) {
        if (round_trip(c))
            return 3;
        unsigned long n = in_arrays("grow-fixed");
        if (n > most)
            most = n;
    }
    if (most > 8) {
        fprintf(stderr, "array_size=8: %lu objects in the arrays\n", most);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--fixed") == 0)
        return fixed_child();
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
    unsigned long most = 0;
    for (int r = 0; r < 6; r++) {
        bad += round_trip(c);
        unsigned long n = in_arrays(name);
        if (n > most)
            most = n;
    }
    ok(most > 2 * BASE && most <= 125, "%s: rounds grow it to its bound (%lu objects, 125 at most)", mode, most);

    sk_cache_shrink(c);
    is(in_arrays(name), 0, "%s: shrink drains it", mode);
    bad += round_trip(c);
    unsigned long after = in_arrays(name);
    ok(after <= 2 * BASE, "%s: shrink trims it back (%lu objects after a round)", mode, after);

    /* A teardown: allocations first (they refill), then frees alone. */
    sk_cache_shrink(c);
    static void *many[4 * N];
    for (int i = 0; i < 4 * N; i++)
        if (!(many[i] = sk_cache_alloc(c)))
            BAIL("sk_cache_alloc failed");
    for (int i = 0; i < 4 * N; i++)
        sk_cache_free(c, many[i]);
    unsigned long down = in_arrays(name);
    ok(down <= 2 * BASE, "%s: frees alone grow it once at most (%lu objects)", mode, down);
    is(bad, 0, "%s: every object kept its pattern", mode);
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
        for (int k = 0; k < handoff_n[i]; k++) {
            if (!intact(handoff[i][k], (uintptr_t)handoff[i][k] + 1))
                corrupt++;
            sk_cache_free(shared, handoff[i][k]);
        }
    is(corrupt, 0, "%s: threads, cross-thread frees and a shrinker: no object damaged", mode);
    struct sk_cache_info in = cache_info(name);
    is(in.active_objs, 0, "%s: every object came back (%lu in arrays)", mode, in.array_objs);
    sk_cache_shrink(shared);
    is(cache_info(name).active_objs, 0, "%s: shrink leaves the cache empty", mode);
    is(sk_cache_destroy(shared), 0, "%s: and it can be destroyed", mode);

    if (!rerun)
        tap_rerun_rseq_off(argv);
    return done_testing();
}
