/*
 * exact_grow_fit — a block a realloc grows into (page_alloc_exact_grow) is
 * placed best-fit from 64 KiB up (buddy.c, EXACT_FIT_GROW_MIN_ORDER), where
 * page_alloc_exact still takes a buddy block of the rounded-up order:
 *  - six 20-page grow blocks, every page written, lie side by side (a
 *    buddy placement puts each at its own 32-page block);
 *  - B1 freed (a 20-page resident hole) and B3, B4 freed (40 pages): an
 *    18-page grow block goes into B1's hole, the tightest, and a 38-page
 *    one into B3-B4's, every page resident already;
 *  - a 20-page page_alloc_exact block starts on a 32-page boundary of its
 *    slice (the buddy's), so the fit is the grow path's alone;
 *  - once all is freed the books balance (accounting.h).
 * The purger is off (background=0) so that nothing is purged meanwhile.
 */
#define _GNU_SOURCE   /* accounting.h: cpus.h wants sched.h's CPU sets */
#include "accounting.h"
#include "side_by_side.h"

#define NBLK 6
#define PAGES 20

int main(void)
{
    acct_no_purger();
    page_init();

    struct sk_page *blk[NBLK];
    side_by_side_from(blk, NBLK, PAGES, page_alloc_exact_grow);
    ok(side_by_side_packed(blk, NBLK, PAGES), "%d grow blocks of %d pages lie side by side, not 32 pages apart",
       NBLK, PAGES);
    ok((blk[0]->flags & PG_LARGE) && blk[0]->large.nr_pages == PAGES, "each an exact block of %d pages", PAGES);

    /* ---- the tightest hole ---- */
    struct sk_page *r, *s;
    side_by_side_tightest(blk, PAGES, 2, page_alloc_exact_grow, &r, &s);

    /* ---- page_alloc_exact keeps the buddy's placement ---- */
    struct sk_page *b = page_alloc_exact(PAGES, 0);
    if (!b)
        BAIL("page_alloc_exact(%d) failed", PAGES);
    ok(page_index(b) % 32 == 0, "a 20-page page_alloc_exact block starts a 32-page buddy block (index %zu)",
       page_index(b));

    /* ---- the books ---- */
    free_to_zone(b);
    free_to_zone(s);
    free_to_zone(r);
    side_by_side_tightest_end(blk);
    acct_end();
    return done_testing();
}
