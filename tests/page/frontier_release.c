/*
 * frontier_release — the slab zone's frontier slice (buddy.c,
 * zone_grow_frontier) where only part of it has joined the zone:
 *  - a large block borrowed from the zone (zone_borrow) that grows in
 *    place past the frontier gets the pages it needs joined first
 *    (zone_frontier_reach), instead of being copied;
 *  - once everything is freed, the slice goes back to the OS
 *    (page_release_free, as after a failed allocation or malloc_trim),
 *    though its pages never merged into one block of the largest order.
 * Both were found in review of the frontier.  Nothing here may allocate
 * from the slab zone (a slab page would keep the slice from being free):
 * stdout's buffer is static, and slabkit's malloc is never called.
 */
#define _GNU_SOURCE
#include "accounting.h"
#include "threaded.h"

#define N 3000

static char *pages[N];

int main(void)
{
    zones_keep_freed();   /* placement, not trimming (threaded.h) */
    struct zone *z = acct_frontier_start();
    page_init();
    if (!sk_opt.zone_borrow)
        skip_all("zone_borrow=0");

    for (int i = 0; i < N; i++)
        if (!(pages[i] = sk_alloc_pages(0)))
            BAIL("sk_alloc_pages(0) failed");
    struct vm_slice *s = vm_slice_of(pages[0]);
    for (int i = 0; i < N; i++)
        sk_free_pages(pages[i], 0);
    page_drain_pcp();
    size_t joined = z->frontier_next;
    ok(z->frontier == s && joined < SLICE_PAGES && z->free_pages == joined,
       "%d pages freed: the slice is the frontier, %zu pages joined, all free", N, joined);

    /* ---- a borrowed block grows past the frontier ---- */
    size_t n = joined * 3 / 4;
    struct sk_page *b = page_alloc_exact(n, 0);
    ok(b && b->node == z->node && page_slice(b) == s, "a large block of %zu pages borrows the joined part", n);
    size_t idx = b ? page_index(b) : 0, want = joined + 100 - idx;
    ok(b && page_resize_exact(b, want), "it grows in place to %zu pages, 100 past the frontier", want);
    ok(z->frontier_next >= idx + want, "the pages it needs joined first (the frontier now at %zu)",
       z->frontier_next);
    memset(page_address(b), 0x42, want * SK_PAGE_SIZE);
    page_free_exact(b);

    /* ---- all free: the slice goes back ---- */
    page_drain_pcp();
    ok(z->free_pages == z->managed_pages, "all freed: %lu of %lu pages free", z->free_pages, z->managed_pages);
    size_t bytes = page_release_free(true);
    ok(bytes >= SLICE_SIZE, "page_release_free gives the frontier slice back (%zu bytes)", bytes);
    ok(z->frontier == NULL && z->managed_pages == 0, "the zone has no frontier and no pages left (%lu)",
       z->managed_pages);
    ok(vm_slice_of(pages[0]) != s, "its address space is no slice of slabkit's any more");

    /* ---- and the zone starts again ---- */
    char *p = sk_alloc_pages(0);
    ok(p && z->frontier == vm_slice_of(p) && z->frontier_next == 64,
       "the next page: a new frontier slice, 64 pages joined");
    memset(p, 1, SK_PAGE_SIZE);
    sk_free_pages(p, 0);
    struct page_stats st;
    unsigned long smaller = acct_all_freed(&st);
    is(smaller, 0, "all freed: the frontier's parts merged");
    return done_testing();
}
