/*
 * exact_fit — exact blocks of more than 1 MiB are placed best-fit over runs
 * of free blocks (zone_take_fit), not in a buddy block of their rounded-up
 * order.
 *
 * The layout: six 300-page blocks, every page written.  Fresh from a new
 * zone, each starts where the one before ends (a buddy placement would
 * round each up to 512 pages).  Then:
 *  - B1 freed (a 300-page resident hole) and B3, B4 freed (600 pages):
 *    a 290-page block goes into B1's hole, the tightest, every page of it
 *    resident already; a 590-page block into the B3-B4 hole; a 700-page
 *    block, which neither holds, past B5;
 *  - fewest faults before tightest: B1's hole purged (clean) and B3's
 *    refilled then freed again (resident, 600 pages): a 290-page block
 *    goes into the resident 600-page hole, not the tighter purged one;
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
#include "threaded.h"

#define NBLK 6
#define PAGES 300

static char *addr(struct sk_page *pg)
{
    return page_address(pg);
}

static struct sk_page *take(size_t pages)
{
    struct sk_page *r = page_alloc_exact(pages, 0);
    if (!r)
        BAIL("page_alloc_exact(%zu) failed", pages);
    return r;
}

int main(void)
{
    zones_keep_freed();   /* placement, not trimming (threaded.h) */
    acct_no_purger();
    page_init();

    struct sk_page *blk[NBLK];
    side_by_side(blk, NBLK, PAGES);
    ok(side_by_side_packed(blk, NBLK, PAGES), "%d blocks of %d pages lie side by side, not 512 pages apart", NBLK,
       PAGES);

    /* ---- the tightest hole ---- */
    char *h1 = addr(blk[1]), *h3 = addr(blk[3]);
    struct sk_page *r, *s;
    side_by_side_tightest(blk, PAGES, 10, side_by_side_exact, &r, &s);
    struct sk_page *t = take(700);
    ok(addr(t) >= addr(blk[5]) + PAGES * SK_PAGE_SIZE || addr(t) + 700 * SK_PAGE_SIZE <= addr(blk[0]),
       "700 pages: in neither hole");
    memset(addr(t), 0x3c, 700 * SK_PAGE_SIZE);
    free_to_zone(t);
    free_to_zone(s);
    free_to_zone(r);

    /* ---- resident before tight ---- */
    /* Purge every free block, B1's hole and B3-B4's among them; then
     * make B3-B4's resident again and free it. */
    page_reclaim(0, true);
    is(resident_pages(h1, PAGES), 0, "B1's hole purged");
    s = take(600);
    is((uintptr_t)addr(s), (uintptr_t)h3, "600 pages: B3-B4's hole again");
    memset(addr(s), 0x4d, 600 * SK_PAGE_SIZE);
    free_to_zone(s);
    r = take(290);
    is((uintptr_t)addr(r), (uintptr_t)h3, "290 pages: the resident 600-page hole, not the purged 300-page one");
    is(resident_pages(addr(r), 290), 290, "nothing to fault in");
    free_to_zone(r);

    /* ---- the books ---- */
    side_by_side_tightest_end(blk);
    acct_end();
    return done_testing();
}
