/*
 * overshoot_span — a block that grows in place (page_resize_exact) takes
 * the free block after it only as far as it needs; the rest of that block
 * goes back dirty only as far as its resident span went, clean past it
 * (zone_take_until's overshoot).  Freed as dirty whole, the part past the
 * span counted as resident: the zone's dirty_pages, dirty_max_mb's
 * measure, grew with memory never written, and a dirty-first take chose
 * those pages over resident ones and faulted them in (realloc_grow).
 *
 * The layout: three 16-page exact blocks side by side, A B C, every page
 * written.  B is freed and purged (clean); A grows by 2 pages into it and
 * writes them, then shrinks back: B's place is one free 16-page block
 * whose first 2 pages are resident (span 2), the rest clean.
 *  - A grows by one page: the zone's dirty pages drop by exactly one (the
 *    page taken; the other resident page stays dirty), where the whole
 *    15-page remainder used to count as resident;
 *  - its resident pages stay as they were: 1 (mincore);
 *  - A grows over all of B's place: the books balance (dirty_pages back
 *    to its start less B's two pages), and once all is freed every slice
 *    coalesces again (accounting.h).
 * The purger is off (background=0) so that nothing is purged meanwhile.
 */
#define _GNU_SOURCE   /* accounting.h: cpus.h wants sched.h's CPU sets */
#include "accounting.h"
#include "side_by_side.h"
#include "statm.h"

/* Enough fresh 16-page blocks that three of them lie side by side with
 * the middle one at an odd multiple of 16 pages. */
#define NBLK 8

int main(void)
{
    struct sk_page *blk[NBLK];
    acct_no_purger();
    page_init();
    side_by_side(blk, NBLK, 16);
    /* A, B, C side by side, B at an odd multiple of 16 pages (its buddy,
     * A, stays allocated, so B never merges away). */
    int a = -1;
    for (int i = 0; i + 2 < NBLK && a < 0; i++) {
        char *p = page_address(blk[i]);
        if ((char *)page_address(blk[i + 1]) == p + 16 * SK_PAGE_SIZE &&
            (char *)page_address(blk[i + 2]) == p + 32 * SK_PAGE_SIZE && page_index(blk[i + 1]) % 32 == 16)
            a = i;
    }
    if (a < 0)
        BAIL("no three neighbouring blocks among %d fresh 16-page blocks", NBLK);
    struct sk_page *A = blk[a];
    char *B = (char *)page_address(A) + 16 * SK_PAGE_SIZE;
    diag("A at slice page %zu", page_index(A));

    /* B's place: free, purged, then its first two pages written by A. */
    free_to_zone(blk[a + 1]);
    page_reclaim(0, false);
    is(resident_pages(B, 16), 0, "B freed and purged: none of its 16 pages resident");
    ok(page_resize_exact(A, 18), "A grows by 2 pages into B's place");
    memset(B, 0x6b, 2 * SK_PAGE_SIZE);
    ok(page_resize_exact(A, 16), "and shrinks back");
    is(resident_pages(B, 16), 2, "B's place: 2 resident pages, 14 clean");
    unsigned long dirty0 = zone_dirty_pages();

    ok(page_resize_exact(A, 17), "A grows by 1 page");
    long d = (long)zone_dirty_pages() - (long)dirty0;
    is(d, -1, "the zone's dirty pages drop by the one taken (%+ld; +13 when the rest went back dirty whole)", d);
    is(resident_pages(B, 16), 2, "the resident pages are the same 2");

    ok(page_resize_exact(A, 32), "A grows over all of B's place");
    is((long)zone_dirty_pages() - (long)dirty0, -2, "dirty pages: B's two taken, nothing else");
    memset(page_address(A), 0x7c, 32 * SK_PAGE_SIZE);

    for (int i = 0; i < NBLK; i++)
        if (i != a + 1)
            free_to_zone(blk[i]);
    struct page_stats st;
    unsigned long smaller = acct_all_freed(&st);
    is(smaller, 0, "all freed: every slice one block of order %d again", SK_MAX_ORDER);
    return done_testing();
}
