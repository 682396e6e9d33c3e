/*
 * exact_run — an exact (large) block that no free resident block of its
 * rounded-up order can hold comes from a run of free resident blocks that
 * no buddy merge joins (zone_take_run), not from memory that was never
 * touched or was purged.
 *
 * The layout: eight 16-page exact blocks side by side, every page written;
 * then two neighbours that are not buddies (X at an odd multiple of 16
 * pages, Y = X + 16) are freed.  That leaves 32 resident free pages as two
 * order-4 blocks that cannot merge, and no free resident block of order 5.
 *  - a 20-page block (order 5) starts at X, every page of it already
 *    resident (mincore), and the zone's resident free pages drop by 20;
 *  - the same with 16 KiB alignment (no reach back: from an aligned
 *    candidate on);
 *  - a 40-page block, which no run of resident pages holds, comes from
 *    elsewhere, and nothing of the run is taken;
 *  - once all is freed the books balance and every slice coalesces again
 *    (accounting.h).
 * The purger is off (background=0) so that nothing is purged meanwhile.
 */
#define _GNU_SOURCE   /* accounting.h: cpus.h wants sched.h's CPU sets */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "accounting.h"
#include "side_by_side.h"
#include "statm.h"

#define NBLK 8

int main(void)
{
    acct_no_purger();
    page_init();

    struct sk_page *blk[NBLK];
    side_by_side(blk, NBLK, 16);
    /* X: a block at an odd multiple of 16 pages whose lower and upper
     * neighbours (X - 16, Y + 16) are blocks of ours too. */
    int x = -1;
    for (int i = 1; i + 2 < NBLK && x < 0; i++) {
        char *a = page_address(blk[i]);
        bool adjacent = (char *)page_address(blk[i - 1]) + 16 * SK_PAGE_SIZE == a &&
                            a + 16 * SK_PAGE_SIZE == (char *)page_address(blk[i + 1]) &&
                            a + 32 * SK_PAGE_SIZE == (char *)page_address(blk[i + 2]);
        if (adjacent && page_index(blk[i]) % 32 == 16)
            x = i;
    }
    if (x < 0)
        BAIL("no two neighbouring non-buddy blocks among %d fresh 16-page blocks", NBLK);
    char *X = page_address(blk[x]);
    diag("X at slice page %zu", page_index(blk[x]));
    unsigned long dirty0 = zone_dirty_pages();
    free_to_zone(blk[x]);
    free_to_zone(blk[x + 1]);
    is(zone_dirty_pages() - dirty0, 32, "the two freed blocks are 32 resident free pages");
    is(resident_pages(X, 32), 32, "and all 32 are resident");

    /* ---- 20 pages: from the run ---- */
    struct sk_page *r = page_alloc_exact(20, 0);
    ok(r != NULL, "page_alloc_exact(20)");
    is((uintptr_t)page_address(r), (uintptr_t)X, "20 pages: the run at X, not memory never touched");
    is(r->large.nr_pages, 20, "the block has exactly 20 pages");
    is(resident_pages(page_address(r), 20), 20, "every page of it was resident already");
    is(zone_dirty_pages() - dirty0, 12, "the 12 pages past it stay free and resident");
    memset(page_address(r), 0x6b, 20 * SK_PAGE_SIZE);
    free_to_zone(r);
    is(zone_dirty_pages() - dirty0, 32, "freed: 32 resident free pages again");

    /* ---- aligned: from the candidate on ---- */
    r = page_alloc_exact(20, 2);
    ok(r != NULL, "page_alloc_exact(20, align 4 pages)");
    ok(page_index(r) % 4 == 0, "aligned to 4 pages");
    is((uintptr_t)page_address(r), (uintptr_t)X, "aligned: the run at X as well");
    is(resident_pages(page_address(r), 20), 20, "every page of it resident");
    free_to_zone(r);

    /* ---- too long for the run ---- */
    r = page_alloc_exact(40, 0);
    ok(r != NULL, "page_alloc_exact(40)");
    char *p = page_address(r);
    ok(p + 40 * SK_PAGE_SIZE <= X || p >= X + 32 * SK_PAGE_SIZE, "40 pages: not over the 32-page run");
    is(zone_dirty_pages() - dirty0, 32, "and the run is left whole");
    memset(p, 0x7c, 40 * SK_PAGE_SIZE);
    free_to_zone(r);

    /* ---- the books ---- */
    for (int i = 0; i < NBLK; i++)
        if (i != x && i != x + 1)
            free_to_zone(blk[i]);
    acct_end();
    return done_testing();
}
