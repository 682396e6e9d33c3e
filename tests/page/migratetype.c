/*
 * migratetype — pageblock migratetypes (grouping by mobility, buddy.c):
 *  - on a zone of its own (node 3's slab zone, which nothing else uses on a
 *    one-node run): new memory is movable; an unmovable and a reclaimable
 *    request each claim a whole pageblock of their own (the smallest
 *    block of whole pageblocks), and their next requests stay in it; with
 *    no whole pageblock left, a request takes a smaller block of another
 *    type and claims its pageblock when over half of it is free, moving
 *    its free blocks to its own lists; a pageblock freed whole goes back
 *    to movable; the statistics count the fallbacks, claims and
 *    pageblocks;
 *  - through the entry points: slab pages are unmovable, a
 *    SLAB_RECLAIM_ACCOUNT cache's reclaimable, sk_file pages movable, and
 *    the kernel API's alloc_pages takes its type from __GFP_MOVABLE and
 *    __GFP_RECLAIMABLE; order-0 blocks of each type go back to that
 *    type's per-CPU list;
 *  - page_grouping=0: one type, no fallback, no claim;
 *  - page_microopt=0: the first two again through seed 001's befores.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "page/page_internal.h"
#include "shmem/shmem.h"
#include "slab/slabinfo_format.h"
#include "slabkit.h"
#include "slabkit/kernel.h"
#include "tap.h"

/* The pageblock a page lies in, as an address. */
static uintptr_t pageblock_of(const struct sk_page *pg)
{
    return (uintptr_t)page_address(pg) & ~(HUGE_PAGE_SIZE - 1);
}

/* Free pages on a type's lists of zone z (its lock taken). */
static unsigned long zone_mt_free(struct zone *z, unsigned mt)
{
    unsigned long n = 0;
    lock_acquire(&z->lock);
    for (unsigned o = 0; o <= SK_MAX_ORDER; o++)
        n += (z->dirty[mt][o].nr + z->clean[mt][o].nr) << o;
    lock_release(&z->lock);
    return n;
}

static struct sk_page *zalloc(struct zone *z, unsigned order, unsigned mt)
{
    struct sk_page *pg = zone_alloc(z, order, mt, 0, 0, EXACT_FIT_MIN_ORDER);
    if (!pg)
        BAIL("zone_alloc(order %u, type %u) failed", order, mt);
    return pg;
}

#define MAXP 2048
static struct sk_page *held[MAXP];
static unsigned nheld;

static void zone_checks(void)
{
    struct zone *z = &page_zones[ZONE_ID(3, ZONE_NORMAL)];
    if (page_nr_nodes > 3 || z->managed_pages) {
        for (int i = 0; i < 14; i++)
            skip("node 3's zone is in use on this machine");
        return;
    }
    /* The zone's first 8 MiB, joined whole (a frontier slice joins what a
     * request needs). */
    page_free(zalloc(z, 11, MIGRATE_MOVABLE), 11);
    struct sk_page *m = zalloc(z, 0, MIGRATE_MOVABLE);
    ok(pageblock_mt(m) == MIGRATE_MOVABLE && z->mt_fallbacks == 0 && z->managed_pages >= 2048,
       "new memory is movable: a movable request takes it with no fallback (%lu pages joined)", z->managed_pages);
    struct sk_page *u = zalloc(z, 0, MIGRATE_UNMOVABLE);
    ok(pageblock_mt(u) == MIGRATE_UNMOVABLE && pageblock_of(u) != pageblock_of(m) && z->mt_fallbacks == 1 &&
           z->mt_claims == 1 && z->mt_pageblocks[MIGRATE_UNMOVABLE] == 1,
       "an unmovable request claims a whole pageblock of its own (fallbacks %lu, claims %lu)", z->mt_fallbacks,
       z->mt_claims);
    ok(pageblock_of(u) - pageblock_of(m) == HUGE_PAGE_SIZE,
       "the smallest block of whole pageblocks: the one next to the first (%+ld MiB)",
       (long)(pageblock_of(u) - pageblock_of(m)) >> 20);
    struct sk_page *r = zalloc(z, 0, MIGRATE_RECLAIMABLE);
    ok(pageblock_mt(r) == MIGRATE_RECLAIMABLE && pageblock_of(r) != pageblock_of(u) &&
           pageblock_of(r) != pageblock_of(m) && z->mt_claims == 2,
       "a reclaimable request claims another");
    /* Unmovable requests stay in u's pageblock until it is used up. */
    bool same = true;
    nheld = 0;
    held[nheld++] = u;
    while (z->mt_fallbacks == 2 && nheld < MAXP) {
        struct sk_page *pg = zalloc(z, 0, MIGRATE_UNMOVABLE);
        held[nheld++] = pg;
        if (z->mt_fallbacks == 2 && pageblock_of(pg) != pageblock_of(u))
            same = false;
    }
    ok(same && nheld == PAGEBLOCK_PAGES + 1,
       "the next %u unmovable pages come from its pageblock, then one falls back", nheld - 2);
    /* Take every block of whole pageblocks, then let an unmovable request
     * find only pieces: r's pageblock, 511 of its 512 pages free. */
    struct sk_page *whole[256];
    unsigned nwhole = 0;
    unsigned long before_free = z->free_pages;
    while (nwhole < 256 && z->free_pages >= PAGEBLOCK_PAGES) {
        lock_acquire(&z->lock);
        bool any = false;
        for (unsigned o = PAGEBLOCK_ORDER; o <= SK_MAX_ORDER && !any; o++)
            for (unsigned t = 0; t < MIGRATE_TYPES; t++)
                any |= z->dirty[t][o].head || z->clean[t][o].head;
        lock_release(&z->lock);
        if (!any)
            break;
        whole[nwhole++] = zalloc(z, PAGEBLOCK_ORDER, MIGRATE_MOVABLE);
    }
    diag("%u whole pageblocks taken, %lu of %lu free pages left", nwhole, z->free_pages, before_free);
    unsigned long claims = z->mt_claims, fallbacks = z->mt_fallbacks;
    unsigned long r_free = zone_mt_free(z, MIGRATE_RECLAIMABLE);
    /* Use up the unmovable pageblock claimed by the last fallback. */
    struct sk_page *last = held[nheld - 1];
    while (z->mt_fallbacks == fallbacks && nheld < MAXP)
        held[nheld++] = zalloc(z, 0, MIGRATE_UNMOVABLE);
    struct sk_page *stolen = held[nheld - 1];
    ok(pageblock_of(stolen) == pageblock_of(r) && pageblock_mt(r) == MIGRATE_UNMOVABLE && z->mt_claims == claims + 1,
       "with no whole pageblock free, an unmovable request claims the reclaimable pageblock over half free");
    ok(r_free >= PAGEBLOCK_PAGES / 2 && zone_mt_free(z, MIGRATE_RECLAIMABLE) == 0,
       "its free blocks moved to the unmovable lists (%lu pages)", r_free);
    (void)last;
    /* Free every unmovable page of the first claimed pageblock: it goes
     * back to movable. */
    unsigned long unmovable_blocks = z->mt_pageblocks[MIGRATE_UNMOVABLE];
    for (unsigned i = 0; i < nheld; i++)
        if (pageblock_of(held[i]) == pageblock_of(u))
            page_free(held[i], 0);
    page_drain_pcp();   /* the per-CPU lists back to the zone */
    ok(pageblock_mt(u) == MIGRATE_MOVABLE && z->mt_pageblocks[MIGRATE_UNMOVABLE] == unmovable_blocks - 1,
       "a pageblock freed whole goes back to movable (unmovable pageblocks %lu -> %lu)", unmovable_blocks,
       z->mt_pageblocks[MIGRATE_UNMOVABLE]);
    struct page_stats st;
    page_stats(&st);
    ok(st.mt_fallbacks >= z->mt_fallbacks && st.mt_claims >= z->mt_claims &&
           st.mt_pageblocks[MIGRATE_UNMOVABLE] >= z->mt_pageblocks[MIGRATE_UNMOVABLE] &&
           st.mt_pageblocks[MIGRATE_MOVABLE] > 0,
       "page_stats counts them: %lu fallbacks, %lu claims, pageblocks %lu/%lu/%lu", st.mt_fallbacks, st.mt_claims,
       st.mt_pageblocks[0], st.mt_pageblocks[1], st.mt_pageblocks[2]);
    /* Give everything back: the zone's free memory merges whole again. */
    for (unsigned i = 0; i < nheld; i++)
        if (pageblock_of(held[i]) != pageblock_of(u))
            page_free(held[i], 0);
    for (unsigned i = 0; i < nwhole; i++)
        page_free(whole[i], PAGEBLOCK_ORDER);
    page_free(m, 0);
    page_free(r, 0);
    page_drain_pcp();
    ok(z->free_pages == z->managed_pages && z->mt_pageblocks[MIGRATE_UNMOVABLE] == 0 &&
           z->mt_pageblocks[MIGRATE_RECLAIMABLE] == 0,
       "all freed: %lu of %lu pages free, every pageblock movable again", z->free_pages, z->managed_pages);
    ok(zone_mt_free(z, MIGRATE_MOVABLE) == z->managed_pages, "and on the movable lists");
    ok(page_release_free(true) > 0 && z->managed_pages == 0, "its slices go back to the OS");
    claims = z->mt_claims;
    /* A zone that joins memory in steps: the first pageblock takes the
     * type of the request that joined its first page. */
    struct sk_page *first = zalloc(z, 0, MIGRATE_UNMOVABLE);
    ok(z->managed_pages < PAGEBLOCK_PAGES && pageblock_mt(first) == MIGRATE_UNMOVABLE &&
           z->mt_pageblocks[MIGRATE_UNMOVABLE] == 1 && z->mt_claims == claims,
       "a pageblock joined in steps (%lu pages so far) is its first grower's: unmovable", z->managed_pages);
    struct sk_page *mv = zalloc(z, 0, MIGRATE_MOVABLE);
    ok(pageblock_of(mv) == pageblock_of(first) && pageblock_mt(first) == MIGRATE_UNMOVABLE,
       "a movable request falls back into it, and does not claim it (under half of it free)");
    page_free(mv, 0);
    page_free(first, 0);
}

static int child_default(void)
{
    if (page_init() != 0)
        BAIL("page_init");
    zone_checks();
    /* The entry points, with the zone's first pageblocks joined. */
    void *big = sk_kernel_alloc_pages(SK_GFP_KERNEL | SK_GFP_MOVABLE, 11);
    sk_kernel_free_pages(big, 11);
    sk_cache_t *plain = sk_kmem_cache_create("mt_plain", 200, 0, 0, NULL);
    sk_cache_t *recl = sk_kmem_cache_create("mt_reclaim", 200, 0, SK_SLAB_RECLAIM_ACCOUNT, NULL);
    if (!plain || !recl)
        BAIL("kmem_cache_create");
    void *a = sk_kmem_cache_alloc(plain, SK_GFP_KERNEL), *b = sk_kmem_cache_alloc(recl, SK_GFP_KERNEL);
    ok(a && b && pageblock_mt(page_of(a)) == MIGRATE_UNMOVABLE && pageblock_mt(page_of(b)) == MIGRATE_RECLAIMABLE,
       "slab pages are unmovable, a SLAB_RECLAIM_ACCOUNT cache's reclaimable");
    void *k = sk_kernel_alloc_pages(SK_GFP_KERNEL, 0);
    void *km = sk_kernel_alloc_pages(SK_GFP_KERNEL | SK_GFP_MOVABLE, 0);
    void *kr = sk_kernel_alloc_pages(SK_GFP_KERNEL | SK_GFP_RECLAIMABLE, 0);
    ok(k && km && kr && pageblock_mt(page_of(k)) == MIGRATE_UNMOVABLE &&
           pageblock_mt(page_of(km)) == MIGRATE_MOVABLE && pageblock_mt(page_of(kr)) == MIGRATE_RECLAIMABLE,
       "alloc_pages: GFP_KERNEL unmovable, __GFP_MOVABLE movable, __GFP_RECLAIMABLE reclaimable");
    sk_file_t *f = sk_file_create("mt");
    static char buf[1 << 20];
    memset(buf, 0x5a, sizeof buf);
    bool movable = f && sk_file_pwrite(f, buf, sizeof buf, 0) == (ssize_t)sizeof buf;
    for (uint64_t i = 0; movable && i < sizeof buf / SK_PAGE_SIZE; i++) {
        struct sk_page *pg = shmem_find_page(f, i);
        movable = pg && pageblock_mt(pg) == MIGRATE_MOVABLE && pageblock_of(pg) != pageblock_of(page_of(a)) &&
                  pageblock_of(pg) != pageblock_of(page_of(b));
    }
    ok(movable, "sk_file pages are movable, in none of the slabs' pageblocks");
    /* Order-0 blocks go back to their type's per-CPU list. */
    int cpu = cpu_current();
    unsigned nm = cpu_array_count(page_pcp.lists[PCP_MOVABLE], cpu);
    unsigned nr = cpu_array_count(page_pcp.lists[PCP_RECLAIMABLE], cpu);
    unsigned nu = cpu_array_count(page_pcp.lists[0], cpu);
    sk_kernel_free_pages(km, 0);
    sk_kernel_free_pages(kr, 0);
    sk_kernel_free_pages(k, 0);
    bool moved = cpu_current() != cpu;
    ok(moved || (cpu_array_count(page_pcp.lists[PCP_MOVABLE], cpu) == nm + 1 &&
                 cpu_array_count(page_pcp.lists[PCP_RECLAIMABLE], cpu) == nr + 1 &&
                 cpu_array_count(page_pcp.lists[0], cpu) == nu + 1),
       "a freed page goes to its type's per-CPU list%s", moved ? " (the thread moved CPU: not checked)" : "");
    sk_file_destroy(f);
    sk_kmem_cache_free(plain, a);
    sk_kmem_cache_free(recl, b);
    /* malloc_stats (and the exit report) has a line of them. */
    char out[1 << 16];
    int st = tap_child_report(malloc_stats, out, sizeof out, 0);
    const char *line = st == 0 ? strstr(out, "slabkit: pageblocks unmovable ") : NULL;
    unsigned long pb[3] = { 0 }, fp[3] = { 0 }, fb = 0, cl = 0;
    int got = line ? sscanf(line, SLABINFO_PAGETYPES_LINE, &pb[0], &pb[1], &pb[2], &fp[0], &fp[1], &fp[2], &fb, &cl) : 0;
    ok(got == 8 && pb[1] >= 1 && fb >= 2 && cl >= 2,
       "malloc_stats: pageblocks %lu unmovable, %lu reclaimable, %lu movable; %lu fallbacks, %lu claims", pb[0],
       pb[1], pb[2], fb, cl);
    return done_testing();
}

static int child_off(void)
{
    if (page_init() != 0)
        BAIL("page_init");
    struct zone *z = &page_zones[ZONE_ID(3, ZONE_NORMAL)];
    if (page_nr_nodes > 3 || z->managed_pages) {
        skip("node 3's zone is in use on this machine");
        skip("node 3's zone is in use on this machine");
        return done_testing();
    }
    struct sk_page *m = zalloc(z, 0, MIGRATE_MOVABLE), *u = zalloc(z, 0, MIGRATE_UNMOVABLE),
                   *r = zalloc(z, 0, MIGRATE_RECLAIMABLE);
    ok(pageblock_of(m) == pageblock_of(u) && pageblock_of(u) == pageblock_of(r) && z->mt_fallbacks == 0 &&
           pageblock_mt(m) == MIGRATE_UNMOVABLE,
       "page_grouping=0: every request one type, side by side in one pageblock, no fallback");
    page_free(m, 0);
    page_free(u, 0);
    page_free(r, 0);
    sk_file_t *f = sk_file_create("mt");
    char page[SK_PAGE_SIZE] = { 1 };
    ok(f && sk_file_pwrite(f, page, sizeof page, 0) == (ssize_t)sizeof page &&
           cpu_array_count(page_pcp.lists[PCP_MOVABLE], cpu_current()) == 0,
       "and no per-CPU list of the movable type in use");
    sk_file_destroy(f);
    return done_testing();
}

static int child(const char *mode)
{
    return strcmp(mode, "page_grouping=0") ? child_default() : child_off();
}

int main(int argc, char **argv)
{
    /* page_microopt=0: the same rules through seed 001's befores (the
     * pageblock bitmap a bit at a time, the zone id checked first, the
     * page index computed again, the type looked up under the lock). */
    static const char *const modes[] = { "default", "page_grouping=0", "page_microopt=0" };
    static const int per[] = { 19, 2, 19 };
    return tap_modes(argc, argv, modes, per, 3, child);
}
