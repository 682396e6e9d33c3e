/*
 * frontier — a base-page arena slice joins its zone a step at a time
 * (buddy.c, zone_grow_frontier), so a zone's descriptors are touched where
 * its pages are used:
 *  - the first page taken leaves the zone holding 64 pages of its slice,
 *    and at most 2 of the slice's 257 header pages resident (the whole
 *    slice split at once wrote a head at pages 1, 2, 4 ... 8192: 9);
 *  - the zone then grows by doubling as blocks are taken, and its header
 *    pages stay within what its pages need;
 *  - large blocks (their own zone) take whole slices, so that they can
 *    grow in place;
 *  - a block that does not fit in the rest of the slice closes the
 *    frontier: the rest joins, and serves the next smaller request;
 *  - every page is handed out once (tags), and once all is freed the
 *    books balance (accounting.h) and every whole slice is one block.
 */
#define _GNU_SOURCE
#include <sys/mman.h>

#include "accounting.h"
#include "statm.h"

#define NPAGES 600

static char *pages[NPAGES];

/* Resident pages of slice s's header mapping (the vm_slice and its
 * descriptors). */
static long header_resident(const struct vm_slice *s)
{
    uintptr_t lo = SK_ALIGN_DOWN((uintptr_t)s, SK_PAGE_SIZE);
    uintptr_t hi = SK_ALIGN_UP((uintptr_t)s->pages + SLICE_PAGES * sizeof(struct sk_page), SK_PAGE_SIZE);
    return resident_pages((void *)lo, (hi - lo) / SK_PAGE_SIZE);
}

int main(void)
{
    acct_no_purger();
    os_options_parse("huge_slices=0");    /* every slice a base-page one: each has a frontier */
    page_init();
    struct zone *z = &page_zones[0];

    /* ---- the first page ---- */
    pages[0] = sk_alloc_pages(0);
    if (!pages[0])
        BAIL("sk_alloc_pages(0) failed");
    struct vm_slice *s = vm_slice_of(pages[0]);
    ok(z->frontier == s, "the first slice is the zone's frontier");
    is(z->frontier_next, 64, "the zone holds its first 64 pages");
    is(z->managed_pages, 64, "and manages no more");
    long res = header_resident(s);
    ok(res >= 1 && res <= 2, "%ld header pages resident (at most 2; 9 when the slice joined whole)", res);

    /* ---- doubling ---- */
    bool doubling = true;
    for (int i = 1; i < NPAGES; i++) {
        pages[i] = sk_alloc_pages(0);
        if (!pages[i])
            BAIL("sk_alloc_pages(0) failed");
        *(uintptr_t *)pages[i] = (uintptr_t)pages[i];
        size_t m = z->frontier_next;
        if (vm_slice_of(pages[i]) != s || (m & (m - 1)) || m > 4 * (size_t)(i + 1) + 64)
            doubling = false;
    }
    ok(doubling, "%d pages: the zone grew by doubling, to %zu pages, within the first slice", NPAGES,
       z->frontier_next);
    res = header_resident(s);
    long want = (long)(z->frontier_next * sizeof(struct sk_page) / SK_PAGE_SIZE) + 2;
    ok(res <= want, "%ld header pages resident for %zu joined pages (at most %ld)", res, z->frontier_next, want);

    /* ---- large blocks: their zone takes whole slices ---- */
    struct sk_page *big = page_alloc_exact(9, 0);
    ok(big != NULL, "page_alloc_exact(9)");
    struct zone *zl = &page_zones[big->node];
    ok(zl != z && zl->frontier == NULL && zl->managed_pages == SLICE_PAGES,
       "a large block's zone takes a whole slice (%lu pages): such a block grows in place", zl->managed_pages);
    page_free_exact(big);

    /* ---- a block larger than the rest: the frontier closes ---- */
    size_t before = z->frontier_next;
    char *huge = sk_alloc_pages(SK_MAX_ORDER);
    ok(huge != NULL, "an order-%d block", SK_MAX_ORDER);
    ok(vm_slice_of(huge) != s, "comes from a new slice");
    ok(z->frontier != s, "the first slice's frontier is closed (it was at %zu)", before);
    ok(z->frontier == NULL, "the new slice, taken whole by the block, has no frontier");
    char *half = sk_alloc_pages(SK_MAX_ORDER - 1);
    ok(half != NULL && vm_slice_of(half) == s, "an order-%d block comes from the rest of the first slice",
       SK_MAX_ORDER - 1);
    size_t half_idx = half ? ((uintptr_t)half - s->base) >> SK_PAGE_SHIFT : 0;
    is(half_idx, SLICE_PAGES / 2, "from its upper half");

    /* ---- tags, then the books ---- */
    int bad = 0;
    for (int i = 1; i < NPAGES; i++)
        bad += *(uintptr_t *)pages[i] != (uintptr_t)pages[i];
    is(bad, 0, "no page handed out twice (tags intact)");
    for (int i = 0; i < NPAGES; i++)
        sk_free_pages(pages[i], 0);
    sk_free_pages(huge, SK_MAX_ORDER);
    if (half)
        sk_free_pages(half, SK_MAX_ORDER - 1);
    struct page_stats st;
    unsigned long smaller = acct_all_freed(&st);
    is(smaller, 0, "all freed: every whole slice one block of order %d, the frontier's parts merged", SK_MAX_ORDER);
    return done_testing();
}
