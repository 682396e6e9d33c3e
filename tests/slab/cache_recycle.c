/*
 * cache_recycle — a program that creates and destroys caches in a loop
 * must not grow: a destroyed cache's metadata is reused by the next
 * create.  20,000 rounds of create, allocate, free, destroy (with and
 * without a constructor); the address space slabkit holds and the RSS
 * stay flat after the first rounds, and every new cache starts clean
 * (its counters at zero, its name its own).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "slab/kmalloc.h"
#include "statm.h"
#include "tap.h"

static long rss_kb(void)
{
    return statm_bytes(STATM_RESIDENT) / 1024;
}

static int ctor_calls;
static void ctor(void *p) { memset(p, 0x5a, 48); ctor_calls++; }

static int round_trip(int i)
{
    char name[32];
    snprintf(name, sizeof name, "recycle-%d", i);
    sk_cache_t *c = sk_cache_create(name, 48 + (size_t)(i % 4) * 16, 0, 0, (i & 1) ? ctor : NULL);
    if (!c)
        return 0;
    struct sk_cache_info info;
    int clean = sk_cache_info(name, &info) == 0 && info.num_slabs == 0 && info.active_objs == 0 &&
                info.stat[SK_ALLOC_FASTPATH] == 0 && info.stat[SK_NEW_SLAB] == 0;
    void *o[100];
    for (int k = 0; k < 100; k++)
        o[k] = sk_cache_alloc(c);
    for (int k = 0; k < 100; k++)
        sk_cache_free(c, o[k]);
    return clean && sk_cache_destroy(c) == 0;
}

int main(void)
{
    int good = 1;
    for (int i = 0; i < 1000; i++)
        good &= round_trip(i);
    size_t vm0 = vm_reserved_bytes();
    long rss0 = rss_kb();
    for (int i = 1000; i < 20000; i++)
        good &= round_trip(i);
    size_t vm1 = vm_reserved_bytes();
    long rss1 = rss_kb();
    diag("address space %zu -> %zu MiB, RSS %ld -> %ld KiB", vm0 >> 20, vm1 >> 20, rss0, rss1);
    ok(good, "20,000 caches created clean, used, and destroyed");
    ok(vm1 == vm0, "slabkit's address space did not grow after the first 1,000");
    ok(rss1 - rss0 < 1024, "RSS grew by less than 1 MiB over 19,000 more rounds (%ld KiB)", rss1 - rss0);
    ok(ctor_calls > 0, "constructors ran in the caches that had one");
    struct sk_cache_info info;
    ok(sk_cache_info("recycle-5", &info) != 0, "a destroyed cache is gone from the list");
    return done_testing();
}
