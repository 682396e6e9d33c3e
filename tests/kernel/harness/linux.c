/*
 * linux.c — slabkit's replacement for the kernel's radix-tree test
 * harness's tools/testing/radix-tree/linux.c (Linux 6.1), written for
 * slabkit: the harness's caches are slabkit caches, reached through the
 * kernel API (include/slabkit/kernel.h), with slub_debug, KFENCE and the
 * leak scan behind them.  tests/kernel/harness/run copies it over the
 * extracted harness at test time; nothing of the kernel is in slabkit.
 *
 * It keeps the harness's books exact, as its stand-in does: nr_allocated
 * (objects of every cache out), and per cache nr_allocated and
 * nr_tallocated (allocations since zeroed).  Allocations that may not
 * sleep fail unless the cache's budget allows them
 * (kmem_cache_set_non_kernel), as on the stand-in: slabkit's failslab
 * budget (sk_kmem_cache_set_nowait_budget) does it.
 * Invariants: a struct kmem_cache here wraps one slabkit cache, made and
 * never destroyed (the harness destroys none); the counters are updated
 * with liburcu's atomics, as the stand-in's.
 */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/gfp.h>
#include <linux/slab.h>
#include <linux/radix-tree.h>
#include <urcu/uatomic.h>

#include <slabkit/kernel.h>

int nr_allocated;
int preempt_count;
int test_verbose;

_Static_assert(__GFP_DIRECT_RECLAIM == SK_GFP_DIRECT_RECLAIM && __GFP_ZERO == SK_GFP_ZERO &&
               __GFP_NOWARN == SK_GFP_NOWARN && __GFP_NOFAIL == SK_GFP_NOFAIL,
               "the harness's gfp bits are the kernel's, as slabkit's");

struct kmem_cache {
    sk_cache_t *sk;
    unsigned int size;
    unsigned long nr_allocated;
    unsigned long nr_tallocated;
};

void kmem_cache_set_non_kernel(struct kmem_cache *cachep, unsigned int val)
{
    sk_kmem_cache_set_nowait_budget(cachep->sk, val);
}

unsigned long kmem_cache_get_alloc(struct kmem_cache *cachep)
{
    return cachep->size * cachep->nr_allocated;
}

unsigned long kmem_cache_nr_allocated(struct kmem_cache *cachep)
{
    return cachep->nr_allocated;
}

unsigned long kmem_cache_nr_tallocated(struct kmem_cache *cachep)
{
    return cachep->nr_tallocated;
}

void kmem_cache_zero_nr_tallocated(struct kmem_cache *cachep)
{
    cachep->nr_tallocated = 0;
}

static void count(struct kmem_cache *cachep, int n)
{
    uatomic_add(&cachep->nr_allocated, n);
    uatomic_add(&nr_allocated, n);
    if (n > 0)
        uatomic_add(&cachep->nr_tallocated, n);
}

void *kmem_cache_alloc_lru(struct kmem_cache *cachep, struct list_lru *lru, int gfp)
{
    (void)lru;
    void *p = sk_kmem_cache_alloc(cachep->sk, (sk_gfp_t)gfp | SK_GFP_NOWARN);
    if (!p)
        return NULL;
    count(cachep, 1);
    if (kmalloc_verbose)
        printf("Allocating %p from slab\n", p);
    return p;
}

void kmem_cache_free(struct kmem_cache *cachep, void *objp)
{
    assert(objp);
    count(cachep, -1);
    if (kmalloc_verbose)
        printf("Freeing %p to slab\n", objp);
    sk_kmem_cache_free(cachep->sk, objp);
}

void kmem_cache_free_bulk(struct kmem_cache *cachep, size_t size, void **list)
{
    if (kmalloc_verbose)
        pr_debug("Bulk free %p[0-%zu]\n", list, size - 1);
    count(cachep, -(int)size);
    sk_kmem_cache_free_bulk(cachep->sk, size, list);
}

void kmem_cache_shrink(struct kmem_cache *cachep)
{
    sk_kmem_cache_shrink(cachep->sk);
}

int kmem_cache_alloc_bulk(struct kmem_cache *cachep, gfp_t gfp, size_t size, void **p)
{
    if (kmalloc_verbose)
        pr_debug("Bulk alloc %zu\n", size);
    int n = sk_kmem_cache_alloc_bulk(cachep->sk, gfp | SK_GFP_NOWARN, size, p);
    if (n)
        count(cachep, n);
    return n;
}

struct kmem_cache *kmem_cache_create(const char *name, unsigned int size, unsigned int align,
                                     unsigned int flags, void (*ctor)(void *))
{
    /* The harness's SLAB_PANIC is 2 (tools/include/linux/slab.h), not
     * the kernel's; SLAB_RECLAIM_ACCOUNT is the kernel's. */
    unsigned long f = (flags & SLAB_PANIC ? SK_SLAB_PANIC : 0) | (flags & SLAB_RECLAIM_ACCOUNT);
    struct kmem_cache *ret = malloc(sizeof *ret);
    assert(ret);
    ret->sk = sk_kmem_cache_create(name, size, align, f, ctor);
    if (!ret->sk) {
        free(ret);
        return NULL;
    }
    ret->size = size;
    ret->nr_allocated = 0;
    ret->nr_tallocated = 0;
    /* The stand-in's rule: nothing that may not sleep, until allowed. */
    sk_kmem_cache_set_nowait_budget(ret->sk, 0);
    return ret;
}

/*
 * The harness's check of its own bulk calls, here of slabkit's: objects
 * from the per-CPU arrays in runs, all distinct, counted exactly, all or
 * nothing against the budget, and back again.
 */
void test_kmem_cache_bulk(void)
{
    void *list[64];
    struct kmem_cache *c = kmem_cache_create("test_cache", 256, 0, SLAB_PANIC, NULL);
    struct sk_cache_info info;

    for (int i = 0; i < 5; i++)
        list[i] = kmem_cache_alloc(c, __GFP_DIRECT_RECLAIM);
    for (int i = 0; i < 5; i++)
        kmem_cache_free(c, list[i]);
    assert(c->nr_allocated == 0 && c->nr_tallocated == 5);

    assert(kmem_cache_alloc_bulk(c, __GFP_DIRECT_RECLAIM, 64, list) == 64);
    for (int i = 0; i < 64; i++) {
        assert(sk_kmem_cache_of(list[i]) == c->sk);
        memset(list[i], i, 256);
    }
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 256; j++)
            assert(((unsigned char *)list[i])[j] == i);    /* no two overlap */
    assert(c->nr_allocated == 64);
    assert(sk_cache_info(sk_cache_name(c->sk), &info) == 0 && info.active_objs == 64);
    kmem_cache_free_bulk(c, 64, list);
    assert(c->nr_allocated == 0);
    assert(sk_cache_info(sk_cache_name(c->sk), &info) == 0 && info.active_objs == 0);

    /* May not sleep: all or nothing against the budget. */
    kmem_cache_set_non_kernel(c, 10);
    assert(kmem_cache_alloc_bulk(c, 0, 12, list) == 0);
    assert(kmem_cache_alloc_bulk(c, 0, 10, list) == 10);
    assert(kmem_cache_alloc(c, 0) == NULL);
    kmem_cache_free_bulk(c, 10, list);

    /* An aligned cache. */
    struct kmem_cache *c2 = kmem_cache_create("test_cache2", 128, 128, SLAB_PANIC, NULL);
    assert(kmem_cache_alloc_bulk(c2, __GFP_DIRECT_RECLAIM, 10, list) == 10);
    for (int i = 0; i < 10; i++)
        assert(((unsigned long)list[i] & 127) == 0);
    kmem_cache_free_bulk(c2, 10, list);
    assert(c2->nr_allocated == 0);
}
