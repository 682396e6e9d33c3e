/*
 * side_by_side.h — exact blocks laid side by side, for the page tests
 * that build a layout of neighbours (exact_run, overshoot_span).
 *
 * side_by_side(blk, n, pages): n exact blocks of `pages` pages each, every
 * page written (resident), sorted by address; fresh from a new zone they
 * lie next to one another.  Bails out when one cannot be had.
 * side_by_side_from: the same from another allocator of exact blocks
 * (page_alloc_exact_grow); side_by_side_packed: whether they do lie so;
 * side_by_side_tightest: the tightest-hole case on six such blocks.
 * free_to_zone(pg): page_free_exact, past the per-CPU exact-block cache.
 * zone_dirty_pages(): the zones' free pages counted as resident
 * (page_stats), what dirty_max_mb measures.
 */
#ifndef SK_TEST_SIDE_BY_SIDE_H
#define SK_TEST_SIDE_BY_SIDE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "page/page.h"
#include "statm.h"
#include "tap.h"

static int side_by_side_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)page_address(*(struct sk_page *const *)a);
    uintptr_t y = (uintptr_t)page_address(*(struct sk_page *const *)b);
    return x < y ? -1 : x > y;
}

static inline void side_by_side_from(struct sk_page **blk, int n, size_t pages, struct sk_page *(*alloc)(size_t))
{
    for (int i = 0; i < n; i++) {
        blk[i] = alloc(pages);
        if (!blk[i])
            BAIL("allocating %zu pages failed", pages);
        memset(page_address(blk[i]), 0x5a, pages * SK_PAGE_SIZE);
    }
    qsort(blk, (size_t)n, sizeof blk[0], side_by_side_cmp);
}

static inline struct sk_page *side_by_side_exact(size_t pages)
{
    return page_alloc_exact(pages, 0);
}

static inline void side_by_side(struct sk_page **blk, int n, size_t pages)
{
    side_by_side_from(blk, n, pages, side_by_side_exact);
}

/* Whether blk[0..n), sorted, lie one right after another. */
static inline bool side_by_side_packed(struct sk_page *const *blk, int n, size_t pages)
{
    for (int i = 1; i < n; i++)
        if ((char *)page_address(blk[i]) != (char *)page_address(blk[i - 1]) + pages * SK_PAGE_SIZE)
            return false;
    return true;
}

/* Free an exact block to its zone at once: the exact-block cache
 * (page_alloc_exact) would keep the last one freed on this CPU, and these
 * tests look at what the zone does with it. */
static inline void free_to_zone(struct sk_page *pg)
{
    page_free_exact(pg);
    page_drain_pcp();
}

static inline unsigned long zone_dirty_pages(void)
{
    struct page_stats st;
    page_stats(&st);
    return st.dirty_pages;
}

/* The tightest hole, on six blocks laid side by side: B1 freed (a hole of
 * `pages`) and B3, B4 (one of 2 * pages); a block of pages - less pages
 * from `alloc` goes into B1's hole and one of 2 * pages - less into
 * B3-B4's, each resident page for page.  *small and *big get them. */
static inline void side_by_side_tightest(struct sk_page **blk, size_t pages, size_t less,
                                         struct sk_page *(*alloc)(size_t), struct sk_page **small,
                                         struct sk_page **big)
{
    char *h1 = page_address(blk[1]), *h3 = page_address(blk[3]);
    size_t a = pages - less, b = 2 * pages - less;
    free_to_zone(blk[1]);
    free_to_zone(blk[3]);
    free_to_zone(blk[4]);
    struct sk_page *r = alloc(a), *s = r ? alloc(b) : NULL;
    if (!s)
        BAIL("allocating %zu and %zu pages failed", a, b);
    is((uintptr_t)page_address(r), (uintptr_t)h1, "%zu pages: B1's %zu-page hole, the tightest", a, pages);
    is(resident_pages(page_address(r), a), a, "every page of it resident already");
    is((uintptr_t)page_address(s), (uintptr_t)h3, "%zu pages: the %zu-page hole of B3 and B4", b, 2 * pages);
    is(resident_pages(page_address(s), b), b, "every page of it resident already");
    *small = r;
    *big = s;
}

/* Free what side_by_side_tightest left in place: B0, B2 and B5. */
static inline void side_by_side_tightest_end(struct sk_page **blk)
{
    free_to_zone(blk[0]);
    free_to_zone(blk[2]);
    free_to_zone(blk[5]);
}

#endif
