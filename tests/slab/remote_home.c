/*
 * remote_home — a slab keeps its home CPU after it leaves that CPU (full,
 * or drained), and an object of a line or more goes home when freed on a
 * CPU that allocates from its cache too (remote_free=1, rseq, SLUB), so
 * that lanes of work that move between CPUs do not leave each CPU's
 * objects interleaved with the other's (bench/workloads/larson); on a CPU
 * that only frees (a consumer) it stays on the array path and moves on in
 * a batch.  1 KiB objects, so slabs of several pages: the free path reads
 * the home from a tail page too.
 *
 *  - on CPU a, two slabs' worth of objects (full slabs, off CPU a);
 *  - a thread on CPU b that has allocated nothing of the cache frees a
 *    quarter of them: no remote free, they stay on b's array;
 *  - a thread on CPU b that allocates first (past what b's array holds:
 *    a refill) frees another quarter: every one goes home (counted), and
 *    none of its next allocations is one;
 *  - back on CPU a, those come back within a few slabs of allocations.
 * Without rseq, with remote_free=0 or allocator=slab
 * (tests/modes/slab_options.t) nothing goes home.  Needs two CPUs.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/rseq.h>

#include "remote.h"

#define OBJ 1024
#define MAXN 1024

static int cpu_a = -1, cpu_b = -1;
static sk_cache_t *cache;
static void *row[MAXN], *got[MAXN], *mine[MAXN];
static int n, quarter;

static unsigned long remote_frees(void) { return cache_stat("home-test", SK_FREE_REMOTE); }

static void *consumer(void *arg)
{
    (void)arg;
    pin_or_bail(cpu_b);
    for (int i = 0; i < quarter; i++)
        sk_cache_free(cache, row[i]);
    return NULL;
}

static void *allocating(void *arg)
{
    (void)arg;
    pin_or_bail(cpu_b);
    /* Past what the consumer left on this CPU's array: a refill. */
    alloc_or_bail(cache, mine, quarter + 1);
    for (int i = quarter; i < 2 * quarter; i++)
        sk_cache_free(cache, row[i]);
    alloc_or_bail(cache, got, quarter);
    return NULL;
}

int main(void)
{
    if (!first_two_cpus(&cpu_a, &cpu_b))
        skip_all("needs two CPUs");
    plan(5);
    bool home = frees_go_home(cpu_b);

    cache = cache_or_bail("home-test", OBJ);
    struct sk_cache_info ci;
    sk_cache_info("home-test", &ci);
    n = 2 * (int)ci.objs_per_slab;
    if (n < 8)
        n = 8;
    if (n > MAXN)
        n = MAXN;
    quarter = n / 4;
    diag("%u objects a slab of %u pages: %d allocated on CPU %d", ci.objs_per_slab, 1u << ci.order, n, cpu_a);
    pin_or_bail(cpu_a);
    alloc_or_bail(cache, row, n);

    pthread_t t;
    unsigned long r0 = remote_frees();
    pthread_create(&t, NULL, consumer, NULL);
    pthread_join(t, NULL);
    unsigned long r1 = remote_frees();
    is(r1 - r0, 0, "a CPU that allocates nothing of the cache keeps the %d it freed on its array", quarter);

    pthread_create(&t, NULL, allocating, NULL);
    pthread_join(t, NULL);
    unsigned long r2 = remote_frees();
    int reused = 0;
    for (int i = 0; i < quarter; i++)
        for (int k = quarter; k < 2 * quarter; k++)
            reused += got[i] == row[k];
    if (home) {
        is(r2 - r1, (unsigned long)quarter, "a CPU that allocates too sent all %d home", quarter);
        is(reused, 0, "and handed none of them out again");
    } else {
        is(r2 - r1, 0, "no remote free counted");
        ok(reused > 0, "CPU %d handed %d of them out again (the array path)", cpu_b, reused);
    }

    /* CPU a gets them back from its slabs: none stranded. */
    int limit = 8 * (int)ci.objs_per_slab, back = 0, m = 0;
    void **more = calloc((size_t)limit, sizeof *more);
    for (; m < limit && back < quarter; m++) {
        more[m] = sk_cache_alloc(cache);
        for (int k = quarter; k < 2 * quarter; k++)
            back += more[m] == row[k];
    }
    if (home)
        is(back, quarter, "CPU %d got all %d back within %d allocations", cpu_a, quarter, m);
    else
        ok(back < quarter, "CPU %d got %d back (the rest are CPU %d's)", cpu_a, back, cpu_b);

    for (int i = 0; i < m; i++)
        sk_cache_free(cache, more[i]);
    for (int i = 0; i < quarter; i++)
        sk_cache_free(cache, got[i]);
    for (int i = 0; i <= quarter; i++)
        sk_cache_free(cache, mine[i]);
    for (int i = 2 * quarter; i < n; i++)
        sk_cache_free(cache, row[i]);
    free(more);
    sk_cache_shrink(cache);
    sk_cache_info("home-test", &ci);
    is(ci.active_objs, 0, "everything freed: no object left in the cache");
    return done_testing();
}
