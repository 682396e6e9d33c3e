/*
 * borrow — a large block that its own zone could serve only with memory
 * not resident borrows the slab zone's resident free memory first
 * (buddy.c, zone_borrow; option zone_borrow):
 *  - slab-zone pages written and freed (resident, on the zone's lists);
 *    then a large block of 9 pages comes from among them: its node is the
 *    slab zone, every page of it is resident, and the large zone took no
 *    memory at all;
 *  - it grows in place there (page_resize_exact, the slab zone's lists)
 *    and is freed there;
 *  - with zone_borrow=0 the next one comes from the large zone, which then
 *    takes clean memory, and page_clean_takes counts that (the slab layer
 *    runs its idle-cache reaper on it);
 *  - a large zone with resident memory of its own uses it and borrows
 *    nothing;
 *  - the books balance (accounting.h).
 */
#define _GNU_SOURCE
#include <sys/mman.h>

#include "accounting.h"
#include "statm.h"

#define NSMALL 64   /* order-2 blocks: 1 MiB of the slab zone */

static char *small[NSMALL];

/* Whether [p, p + pages) lies within the range the freed blocks cover (a
 * run may span several of them). */
static bool among_small(const char *p, size_t pages)
{
    char *lo = small[0], *hi = small[0];
    for (int i = 1; i < NSMALL; i++) {
        if (small[i] < lo)
            lo = small[i];
        if (small[i] > hi)
            hi = small[i];
    }
    return p >= lo && p + pages * SK_PAGE_SIZE <= hi + 4 * SK_PAGE_SIZE;
}

int main(void)
{
    acct_no_purger();
    page_init();
    struct zone *z0 = &page_zones[0], *z1 = &page_zones[1];
    if (!sk_opt.zone_borrow)
        skip_all("zone_borrow=0");

    /* Resident free memory in the slab zone. */
    for (int i = 0; i < NSMALL; i++) {
        small[i] = sk_alloc_pages(2);
        if (!small[i])
            BAIL("sk_alloc_pages(2) failed");
        memset(small[i], 0x3c, 4 * SK_PAGE_SIZE);
    }
    for (int i = 0; i < NSMALL; i++)
        sk_free_pages(small[i], 2);
    page_drain_pcp();
    ok(z0->dirty_pages >= NSMALL * 4, "the slab zone holds %lu resident free pages", z0->dirty_pages);

    /* ---- borrowed ---- */
    unsigned long takes0 = page_clean_takes();
    struct sk_page *a = page_alloc_exact(9, 0);
    ok(a != NULL, "page_alloc_exact(9)");
    char *ap = page_address(a);
    is(a->node, z0->node, "it comes from the slab zone (node %u)", a->node);
    is(z1->managed_pages, 0, "the large zone took no memory");
    is(resident_pages(ap, 9), 9, "every page of it is resident (no fault)");
    ok(among_small(ap, 9), "it lies among the freed slab-zone pages");
    is(page_clean_takes(), takes0, "no clean memory taken");
    memset(ap, 0x5a, 9 * SK_PAGE_SIZE);

    ok(page_resize_exact(a, 12), "it grows in place to 12 pages, over the slab zone's free pages");
    memset(ap, 0x5b, 12 * SK_PAGE_SIZE);
    unsigned long blocks, pages;
    page_exact_stats(&blocks, &pages);
    ok(blocks == 1 && pages == 12, "counted: 1 large block, 12 pages (%lu, %lu)", blocks, pages);
    /* The zone's count: nothing on the per-CPU lists, before and after
     * (the exact-block cache would keep the block). */
    page_drain_pcp();
    unsigned long free0 = z0->free_pages;
    page_free_exact(a);
    page_drain_pcp();
    is(z0->free_pages, free0 + 12, "freed, its 12 pages go back to the slab zone");

    /* ---- zone_borrow=0: the large zone's own, clean ---- */
    sk_opt.zone_borrow = 0;
    struct sk_page *b = page_alloc_exact(9, 0);
    ok(b != NULL && b->node == z1->node, "with zone_borrow=0 it comes from the large zone");
    ok(z1->managed_pages > 0, "which took a slice (%lu pages)", z1->managed_pages);
    ok(page_clean_takes() > takes0, "clean memory taken: page_clean_takes counts it (%lu -> %lu)", takes0,
       page_clean_takes());
    memset(page_address(b), 0x6d, 9 * SK_PAGE_SIZE);
    page_free_exact(b);
    page_drain_pcp();
    sk_opt.zone_borrow = 1;

    /* ---- resident memory of its own: no borrowing ---- */
    struct sk_page *c = page_alloc_exact(9, 0);
    ok(c != NULL && c->node == z1->node, "the large zone, now holding resident free pages, uses its own");
    page_free_exact(c);
    page_drain_pcp();

    acct_end();
    return done_testing();
}
