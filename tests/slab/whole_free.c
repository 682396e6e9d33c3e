/*
 * whole_free — a full slab emptied by one free (a cache of one object per
 * slab: every free of a 32 KiB object) goes straight back to the page
 * allocator once the node keeps its empty slabs (min_partial), instead of
 * being frozen onto the CPU partial list and moved to the node list under
 * list_lock first (slab_free_chain's `whole` case):
 *
 *  - 64 objects allocated and freed on one CPU: no slab joins a CPU
 *    partial list but the first ones, until its first drain gives the
 *    node its empty slab (cpu_partial_free grows by at most 2, or 4 under
 *    sheaves=0's count of objects; 61 before the change), at least 56 slabs are
 *    given back (free_slab), and what stays is bounded by the per-CPU
 *    array, the CPU slab and the node's empty slabs (num_slabs <= 8);
 *  - the next 64 allocations come back intact (each object carries a
 *    pattern of its own, checked before it is freed again);
 *  - sk_cache_shrink then leaves no slab.
 * The same binary runs under sheaves=0, cpu_partial=0 and rseq off
 * (tests/modes/slab_options.t); allocator=slab has a free path of its
 * own (SLAB's free_block) and is not run.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slabkit.h"
#include "cpus.h"
#include "tap.h"
#include "cache_info.h"

#define OBJ 32768
#define N 64

static void fill(unsigned char *p, unsigned k)
{
    for (size_t j = 0; j < OBJ; j += 512)
        p[j] = (unsigned char)(k * 7 + j / 512);
}

static int intact(const unsigned char *p, unsigned k)
{
    for (size_t j = 0; j < OBJ; j += 512)
        if (p[j] != (unsigned char)(k * 7 + j / 512))
            return 0;
    return 1;
}

int main(void)
{
    plan(7);
    if (pin_first_cpu() < 0)
        BAIL("cannot pin to a CPU");
    sk_cache_t *c = sk_cache_create("whole-test", OBJ, 0, 0, NULL);
    if (!c)
        BAIL("sk_cache_create failed");
    struct sk_cache_info i0 = cache_info("whole-test");
    is(i0.objs_per_slab, 1, "a 32 KiB object is alone in its slab (order %u)", i0.order);

    void *objs[N];
    for (unsigned k = 0; k < N; k++) {
        objs[k] = sk_cache_alloc(c);
        if (!objs[k])
            BAIL("sk_cache_alloc failed");
        fill(objs[k], k);
    }
    struct sk_cache_info i1 = cache_info("whole-test");
    for (unsigned k = 0; k < N; k++)
        sk_cache_free(c, objs[k]);
    struct sk_cache_info i2 = cache_info("whole-test");
    /* Until the node keeps min_partial empty slabs, an emptied slab is
     * kept the SLUB way (CPU partial list, then the node list). */
    unsigned long via_cpu = i2.stat[SK_CPU_PARTIAL_FREE] - i1.stat[SK_CPU_PARTIAL_FREE];
    /* Those first ones: until the CPU list first drains to the node, at
     * one slab over its limit in slabs, or (sheaves=0, 3.1's count of
     * free objects, one a slab here) once it holds cpu_partial + 1 and
     * the next one comes. */
    unsigned long first = i2.cpu_partial_slabs_max ? i2.cpu_partial_slabs_max + 1 : i2.cpu_partial + 2u;
    ok(via_cpu <= first, "emptied slabs skip the CPU partial list (%lu of %d went through it, at most %lu)",
       via_cpu, N, first);
    unsigned long given = i2.stat[SK_FREE_SLAB] - i1.stat[SK_FREE_SLAB];
    ok(given >= N - 8, "emptied slabs went back to the page allocator (%lu of %d)", given, N);
    ok(i2.num_slabs <= 8, "what stays is bounded: %lu slabs (array %u, node keeps its empty ones)",
       i2.num_slabs, i2.array_capacity);

    int bad = 0;
    for (unsigned k = 0; k < N; k++) {
        objs[k] = sk_cache_alloc(c);
        if (!objs[k])
            BAIL("sk_cache_alloc failed");
        fill(objs[k], k + 1000);
    }
    for (unsigned k = 0; k < N; k++)
        bad += !intact(objs[k], k + 1000);
    is(bad, 0, "objects handed out again are distinct and intact");
    for (unsigned k = 0; k < N; k++)
        sk_cache_free(c, objs[k]);
    sk_cache_shrink(c);
    struct sk_cache_info i3 = cache_info("whole-test");
    is(i3.num_slabs, 0, "sk_cache_shrink leaves no slab");
    is(sk_cache_destroy(c), 0, "the cache is destroyed");
    return done_testing();
}
