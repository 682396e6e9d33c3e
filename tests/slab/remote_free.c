/*
 * remote_free — objects smaller than a cache line go home when freed on
 * another CPU (remote_free=1, the default with rseq): the freeing CPU
 * never hands them out again, so a thread cannot be given an object on a
 * line that still holds another thread's live object (Hoard's passive
 * false sharing, bench/workloads/cache_scratch).
 *
 *  - the main thread, pinned to CPU a, allocates 64 16-byte objects in a
 *    row (neighbours, on lines of four) and keeps the even ones;
 *  - a thread pinned to CPU b frees the odd ones and then allocates 64:
 *    with remote_free none of them is a freed odd object and none shares a
 *    line with a live even one; the cache counts 32 remote frees;
 *  - back on CPU a, the owner gets the odd objects back from its slab
 *    within a slab's worth of allocations: nothing is stranded;
 *  - with remote_free=0 (tests/modes/slab_options.t) the old path is
 *    taken: CPU b hands the freed objects out again and counts no remote
 *    free; so it is without rseq (the lock fallback has no CPU to compare)
 *    and with allocator=slab (SLAB's array caches, whose descriptors keep
 *    an address where SLUB keeps the owner: the free path must mask it
 *    out, or those frees would take SLUB's remote path).
 * Needs two CPUs; skips otherwise.
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

#define OBJ 16
#define ROW 64
#define LINE 64

static int cpu_a = -1, cpu_b = -1;
static sk_cache_t *cache;
static void *row[ROW], *got[ROW];

static unsigned long remote_frees(void) { return cache_stat("remote-test", SK_FREE_REMOTE); }

static void *other_cpu(void *arg)
{
    (void)arg;
    pin_or_bail(cpu_b);
    for (int i = 1; i < ROW; i += 2)
        sk_cache_free(cache, row[i]);
    alloc_or_bail(cache, got, ROW);
    return NULL;
}

int main(void)
{
    if (!first_two_cpus(&cpu_a, &cpu_b))
        skip_all("needs two CPUs");
    plan(5);
    /* Home-going frees need rseq (the CPU id to compare) and the option. */
    bool home = frees_go_home(cpu_b);

    cache = cache_or_bail("remote-test", OBJ);
    pin_or_bail(cpu_a);
    alloc_or_bail(cache, row, ROW);
    unsigned long r0 = remote_frees();

    pthread_t t;
    pthread_create(&t, NULL, other_cpu, NULL);
    pthread_join(t, NULL);

    int reused = 0, shared = 0;
    for (int i = 0; i < ROW; i++) {
        for (int k = 1; k < ROW; k += 2)
            reused += got[i] == row[k];
        for (int k = 0; k < ROW; k += 2)
            shared += (uintptr_t)got[i] / LINE == (uintptr_t)row[k] / LINE;
    }
    unsigned long r1 = remote_frees();
    if (home) {
        is(reused, 0, "CPU %d handed out none of the %d objects it freed for CPU %d", cpu_b, ROW / 2, cpu_a);
        is(shared, 0, "none of its %d objects shares a line with CPU %d's live ones", ROW, cpu_a);
        is(r1 - r0, ROW / 2, "the cache counted %d remote frees", ROW / 2);
    } else {
        ok(reused > 0, "CPU %d handed %d of the freed objects out again (the array path)", cpu_b, reused);
        ok(shared > 0, "so %d of its objects share a line with live ones", shared);
        is(r1 - r0, 0, "no remote free counted");
    }

    /* The owner takes its objects back from the slab: none stranded. */
    struct sk_cache_info ci;
    sk_cache_info("remote-test", &ci);
    int back = 0, limit = 4 * (int)ci.objs_per_slab;
    void **more = calloc((size_t)limit, sizeof *more);
    int n = 0;
    for (; n < limit && back < ROW / 2; n++) {
        more[n] = sk_cache_alloc(cache);
        for (int k = 1; k < ROW; k += 2)
            back += more[n] == row[k];
    }
    if (home)
        is(back, ROW / 2, "CPU %d got all %d back within %d allocations", cpu_a, ROW / 2, n);
    else
        ok(back < ROW / 2, "CPU %d got %d back (the rest are CPU %d's)", cpu_a, back, cpu_b);

    for (int i = 0; i < n; i++)
        sk_cache_free(cache, more[i]);
    for (int i = 0; i < ROW; i++)
        sk_cache_free(cache, got[i]);
    for (int i = 0; i < ROW; i += 2)
        sk_cache_free(cache, row[i]);
    free(more);
    sk_cache_shrink(cache);
    sk_cache_info("remote-test", &ci);
    is(ci.active_objs, 0, "everything freed: no object left in the cache");
    return done_testing();
}
