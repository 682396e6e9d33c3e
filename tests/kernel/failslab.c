/*
 * failslab — the kernel's slab fault injection on the kernel API
 * (include/slabkit/kernel.h): probability, interval, times, sparing
 * allocations that may sleep, the cache filter, __GFP_NOFAIL, the budget
 * of allocations that may not sleep (the radix-tree harness's
 * kmem_cache_set_non_kernel), and the same settings from SLABKIT_OPTIONS
 * (re-executed with them).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slabkit/linux/slab.h>

#include "tap.h"

static struct sk_failslab base(void)
{
    return (struct sk_failslab){ .probability = 100, .interval = 1, .times = -1, .ignore_wait = true };
}

/* Allocations of c with gfp out of n that fail (each success freed). */
static int fails(struct kmem_cache *c, gfp_t gfp, int n)
{
    int f = 0;
    for (int i = 0; i < n; i++) {
        void *p = kmem_cache_alloc(c, gfp);
        if (p)
            kmem_cache_free(c, p);
        else
            f++;
    }
    return f;
}

static int from_options(void)
{
    /* failslab=100,failslab_caches=fs_named: only that cache, only
     * allocations that may not sleep. */
    struct kmem_cache *a = kmem_cache_create("fs_named", 64, 0, 0, NULL);
    struct kmem_cache *b = kmem_cache_create("fs_other", 64, 0, 0, NULL);
    is(fails(a, GFP_NOWAIT, 10), 10, "options: the named cache's GFP_NOWAIT allocations fail");
    is(fails(a, GFP_KERNEL, 10), 0, "options: its GFP_KERNEL ones do not (failslab_ignore_wait=1)");
    is(fails(b, GFP_NOWAIT, 10), 0, "options: another cache's do not (failslab_caches)");
    struct sk_failslab f;
    sk_failslab_get(&f);
    ok(f.probability == 100 && f.cache_filter && f.injected == 10, "options: sk_failslab_get says so (%lu injected)",
       f.injected);
    return done_testing();
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--options")) {
        tap_n = atoi(argv[2]);
        return from_options();
    }
    struct kmem_cache *c = kmem_cache_create("fs_cache", 128, 0, 0, NULL);
    struct sk_failslab off = { .interval = 1, .times = -1, .ignore_wait = true };
    struct sk_failslab f;
    sk_failslab_get(&f);
    ok(f.probability == 0 && f.injected == 0, "off by default");
    is(fails(c, GFP_NOWAIT, 100), 0, "off: nothing fails");

    f = base();
    ok(sk_failslab_set(&f) == 0, "probability 100, sparing allocations that may sleep");
    is(fails(c, GFP_NOWAIT, 50), 50, "every GFP_NOWAIT allocation fails");
    is(fails(c, GFP_ATOMIC, 50), 50, "every GFP_ATOMIC allocation fails");
    is(fails(c, GFP_KERNEL, 50), 0, "no GFP_KERNEL allocation fails");
    is(fails(c, GFP_NOWAIT | __GFP_NOFAIL, 50), 0, "__GFP_NOFAIL never fails");
    errno = 0;
    void *k = kmalloc(100, GFP_NOWAIT);
    ok(!k && errno == ENOMEM, "kmalloc(GFP_NOWAIT) fails with ENOMEM");
    void *objs[8];
    is(kmem_cache_alloc_bulk(c, GFP_NOWAIT, 8, objs), 0, "a bulk allocation fails whole");

    f.ignore_wait = false;
    sk_failslab_set(&f);
    is(fails(c, GFP_KERNEL, 20), 20, "ignore_wait off: GFP_KERNEL fails too");

    f = base();
    f.times = 3;
    sk_failslab_set(&f);
    is(fails(c, GFP_NOWAIT, 50), 3, "times 3: three failures, then none");

    f = base();
    f.interval = 4;
    sk_failslab_set(&f);
    is(fails(c, GFP_NOWAIT, 40), 10, "interval 4: every fourth fails");

    f = base();
    f.probability = 30;
    sk_failslab_set(&f);
    int n = fails(c, GFP_NOWAIT, 2000);
    ok(n > 450 && n < 750, "probability 30: %d of 2000 fail", n);

    struct kmem_cache *picked = kmem_cache_create("fs_picked", 64, 0, SLAB_FAILSLAB, NULL);
    f = base();
    f.cache_filter = true;
    sk_failslab_set(&f);
    is(fails(picked, GFP_NOWAIT, 20), 20, "cache filter: a SLAB_FAILSLAB cache fails");
    is(fails(c, GFP_NOWAIT, 20), 0, "cache filter: another does not");
    sk_kmem_cache_set_failslab(c, true);
    is(fails(c, GFP_NOWAIT, 20), 20, "sk_kmem_cache_set_failslab picks a cache");
    sk_kmem_cache_set_failslab(c, false);

    sk_failslab_set(&off);
    sk_failslab_get(&f);
    unsigned long injected = f.injected;
    ok(injected > 0, "injected failures are counted (%lu)", injected);

    /* The harness's knob: the next n that may not sleep, then none. */
    sk_kmem_cache_set_nowait_budget(c, 5);
    void *held[8];
    int got = 0;
    for (int i = 0; i < 8; i++)
        got += (held[i] = kmem_cache_alloc(c, GFP_NOWAIT)) != NULL;
    is(got, 5, "budget 5: five GFP_NOWAIT allocations succeed, then they fail");
    is(fails(c, GFP_KERNEL, 10), 0, "allocations that may sleep are not counted");
    for (int i = 0; i < 8; i++)
        kmem_cache_free(c, held[i]);
    sk_kmem_cache_set_nowait_budget(c, 4);
    is(kmem_cache_alloc_bulk(c, GFP_NOWAIT, 8, objs), 0, "a bulk of 8 against a budget of 4 fails");
    is(kmem_cache_alloc_bulk(c, GFP_NOWAIT, 4, objs), 4, "a bulk of 4 takes it");
    kmem_cache_free_bulk(c, 4, objs);
    sk_kmem_cache_set_nowait_budget(c, -1);
    is(fails(c, GFP_NOWAIT, 20), 0, "budget -1: back to failslab's rule (off)");
    sk_kmalloc_set_nowait_budget(0);
    ok(kmalloc(32, GFP_NOWAIT) == NULL && (k = kmalloc(32, GFP_KERNEL)) != NULL,
       "kmalloc's budget 0: GFP_NOWAIT fails, GFP_KERNEL does not");
    kfree(k);
    sk_kmalloc_set_nowait_budget(-1);
    f.probability = 101;
    errno = 0;
    ok(sk_failslab_set(&f) == -1 && errno == EINVAL, "a probability over 100 is refused (EINVAL)");

    /* The same from SLABKIT_OPTIONS, in a fresh process. */
    char nbuf[16];
    snprintf(nbuf, sizeof nbuf, "%d", tap_n);
    fflush(stdout);
    setenv("SLABKIT_OPTIONS", "failslab=100,failslab_caches=fs_named", 1);
    execl("/proc/self/exe", argv[0], "--options", nbuf, (char *)NULL);
    BAIL("exec failed");
}
