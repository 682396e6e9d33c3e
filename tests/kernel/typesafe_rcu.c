/*
 * typesafe_rcu — SLAB_TYPESAFE_BY_RCU on the kernel API: a freed object
 * may come back from the same cache at once, but its memory goes to no
 * other use before a grace period.  The program's RCU is stood in for by
 * counting callbacks (sk_kernel_set_rcu), which also check, at the moment
 * of the grace period, that the slabs to be released are still the
 * cache's: nothing went back to the page allocator before it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <string.h>

#include <slabkit/linux/slab.h>

#include "tap.h"

enum { N = 4000 };
static void *objs[N];
static struct kmem_cache *c;
static int graces, barriers, still_ours;

static void grace(void)
{
    graces++;
    /* Every object's memory is still a slab of c while we wait. */
    still_ours = 1;
    for (int i = 0; i < N; i++)
        if (sk_kmem_cache_of(objs[i]) != c)
            still_ours = 0;
}

static void barrier(void)
{
    barriers++;
}

static unsigned long slabs(const char *name)
{
    struct sk_cache_info info;
    return sk_cache_info(name, &info) == 0 ? info.num_slabs : (unsigned long)-1;
}

int main(void)
{
    errno = 0;
    ok(kmem_cache_create("ts_early", 64, 0, SLAB_TYPESAFE_BY_RCU, NULL) == NULL && errno == EINVAL,
       "without the program's RCU, SLAB_TYPESAFE_BY_RCU is refused (EINVAL)");
    sk_kernel_set_rcu(grace, barrier);
    c = kmem_cache_create("ts_cache", 128, 0, SLAB_TYPESAFE_BY_RCU, NULL);
    ok(c != NULL, "with it, the cache is made");
    for (int i = 0; i < N; i++)
        objs[i] = kmem_cache_alloc(c, GFP_KERNEL);
    unsigned long full = slabs("ts_cache");
    ok(full > 10, "%d objects on %lu slabs", N, full);
    for (int i = 0; i < N; i++) {
        memset(objs[i], 0x33, 128);
        kmem_cache_free(c, objs[i]);
    }
    /* A reader's look at a freed object still sees an object of the type. */
    ok(((unsigned char *)objs[N / 2])[64] == 0x33 && sk_kmem_cache_of(objs[N / 2]) == c,
       "a freed object keeps its memory and its cache");
    is(slabs("ts_cache"), full, "every free left its slab with the cache (no empty slab given back)");
    malloc_trim(0);
    is(slabs("ts_cache"), full, "malloc_trim and the caches' automatic shrinks pass it by");
    void *again = kmem_cache_alloc(c, GFP_KERNEL);
    int reused = 0;
    for (int i = 0; i < N && !reused; i++)
        reused = again == objs[i];
    ok(reused, "a new object of the cache reuses a freed one (same type: allowed)");
    kmem_cache_free(c, again);

    graces = 0;
    int freed = kmem_cache_shrink(c);
    ok(graces == 1 && still_ours, "kmem_cache_shrink waits for one grace period, the slabs still the cache's");
    ok(freed > 0 && slabs("ts_cache") == 0, "then gives every empty slab back (%d)", freed);

    for (int i = 0; i < N; i++)
        objs[i] = kmem_cache_alloc(c, GFP_KERNEL);
    for (int i = 0; i < N; i++)
        kmem_cache_free(c, objs[i]);
    graces = barriers = 0;
    kmem_cache_destroy(c);
    ok(barriers == 1 && graces == 1 && still_ours,
       "kmem_cache_destroy runs rcu_barrier, then a grace period, then frees");
    ok(sk_cache_info("ts_cache", &(struct sk_cache_info){ 0 }) != 0, "and the cache is gone");

    /* A plain cache is not held back. */
    struct kmem_cache *p = kmem_cache_create("ts_plain", 128, 0, 0, NULL);
    for (int i = 0; i < N; i++)
        objs[i] = kmem_cache_alloc(p, GFP_KERNEL);
    for (int i = 0; i < N; i++)
        kmem_cache_free(p, objs[i]);
    graces = 0;
    kmem_cache_shrink(p);
    ok(graces == 0 && slabs("ts_plain") == 0, "a cache without the flag shrinks with no grace period");
    kmem_cache_destroy(p);
    return done_testing();
}
