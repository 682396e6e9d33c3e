/*
 * buddy — the buddy allocator's invariants hold through a long random
 * sequence of sk_alloc_pages/sk_free_pages (200,000 operations, orders
 * 0..10, fixed seed): every block is naturally aligned, no two blocks
 * overlap, and at checkpoints every page of every slice is accounted
 * exactly once (live, on a zone free list, or on a CPU's page list; see
 * accounting.h).  The first and last word of each block carry its address
 * and are checked when it is freed.  Once everything is freed and the
 * per-CPU lists drained, every slice coalesces back into one block of the
 * largest order, and those blocks can be allocated again without a new
 * slice.
 * tests/modes/pcp_off.t runs it again with SLABKIT_OPTIONS=pcp=0.
 * Usage: buddy [operations]
 */
#define _GNU_SOURCE   /* accounting.h: cpus.h wants sched.h's CPU sets */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "accounting.h"

#define MAXLIVE 4096
#define MAX_LIVE_PAGES (64ul * 1024)   /* 256 MiB of blocks alive at most */
#define CHECK_EVERY 10000

static struct acct_block live[MAXLIVE];
static int nlive;
static unsigned long live_pages;

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static inline uint64_t tag(const struct acct_block *b) { return (uintptr_t)b->p ^ 0xb1ddb1ddull ^ b->order; }

static long bad_align, bad_tag, null_allocs;

static void do_alloc(unsigned order)
{
    char *p = sk_alloc_pages(order);
    if (!p) {
        null_allocs++;
        return;
    }
    if ((uintptr_t)p % (SK_PAGE_SIZE << order))
        bad_align++;
    struct acct_block *b = &live[nlive++];
    b->p = p;
    b->order = order;
    live_pages += 1ul << order;
    size_t size = SK_PAGE_SIZE << order;
    *(uint64_t *)p = tag(b);
    *(uint64_t *)(p + size - 8) = tag(b);
}

static void do_free(int k)
{
    struct acct_block *b = &live[k];
    size_t size = SK_PAGE_SIZE << b->order;
    if (*(uint64_t *)b->p != tag(b) || *(uint64_t *)(b->p + size - 8) != tag(b)) {
        if (bad_tag++ < 5)
            diag("block %p order %u: its tag was overwritten (another block overlaps it)", (void *)b->p, b->order);
    }
    sk_free_pages(b->p, b->order);
    live_pages -= 1ul << b->order;
    *b = live[--nlive];
}

int main(int argc, char **argv)
{
    long ops = argc > 1 ? atol(argv[1]) : 200000;
    acct_no_purger();
    diag("pcp=%ld, %ld operations", sk_opt.pcp, ops);

    errno = 0;
    ok(sk_alloc_pages(SK_MAX_ORDER + 1) == NULL && errno == ENOMEM, "order past SK_MAX_ORDER: NULL, ENOMEM");

    /* Sums over all checkpoints: any non-zero count is a broken invariant. */
    struct acct_result sum = { 0 }, r;
    long checkpoints = 0, books_off = 0;
    uint64_t seed = 0x5eed0001;
    for (long i = 1; i <= ops; i++) {
        uint64_t x = rnd(&seed);
        bool alloc = nlive == 0 || (nlive < MAXLIVE && live_pages < MAX_LIVE_PAGES && x % 100 < 55);
        if (alloc)
            do_alloc((unsigned)((x >> 8) % 11));
        else
            do_free((int)((x >> 8) % (uint64_t)nlive));
        if (i % CHECK_EVERY == 0) {
            acct_check(live, (size_t)nlive, &r);
            checkpoints++;
            sum.overlaps += r.overlaps;
            sum.unaccounted += r.unaccounted;
            sum.misaligned += r.misaligned;
            sum.bad_state += r.bad_state;
            sum.unmerged += r.unmerged;
            sum.stats_mismatch += r.stats_mismatch;
            sum.stale += r.stale;
            books_off += r.live_pages + r.free_pages + r.pcp_pages != r.managed;
            if (r.live_pages != live_pages)
                books_off++;
        }
    }
    diag("%ld checkpoints; at the last: %d live blocks, %lu live, %lu free, %lu per-CPU of %lu managed pages",
         checkpoints, nlive, r.live_pages, r.free_pages, r.pcp_pages, r.managed);
    is(null_allocs, 0, "no allocation failed");
    is(bad_align, 0, "every block naturally aligned");
    is(bad_tag, 0, "no block's first or last word overwritten by another");
    ok(checkpoints > 0, "%ld checkpoints taken", checkpoints);
    is(sum.overlaps, 0, "checkpoints: no page in two blocks (live, free or per-CPU)");
    is(sum.unaccounted, 0, "checkpoints: no page lost");
    is(books_off, 0, "checkpoints: live + free + per-CPU pages = managed pages");
    is(sum.misaligned, 0, "checkpoints: every block naturally aligned inside a slice");
    is(sum.bad_state, 0, "checkpoints: every descriptor in the state its block's place implies");
    is(sum.unmerged, 0, "checkpoints: no two free buddies left unmerged");
    is(sum.stats_mismatch, 0, "checkpoints: page_stats agrees with the walk");
    is(sum.stale, 0, "checkpoints: no page inside a block keeps a head flag");

    /* ---- free everything: full coalescing ---- */
    while (nlive)
        do_free(nlive - 1);
    is(bad_tag, 0, "no tag overwritten when freeing the rest");
    struct page_stats st;
    unsigned long smaller = acct_all_freed(&st);
    is(st.pcp_pages, 0, "all freed: page_drain_pcp emptied every CPU's list");
    is(st.free_pages, st.managed_pages, "all freed: every managed page is free");
    is(st.free_blocks[SK_MAX_ORDER], (st.managed_pages - acct_frontier_pages()) >> SK_MAX_ORDER,
       "all freed: every whole slice is one block of order %d", SK_MAX_ORDER);
    is(smaller, 0, "all freed: no smaller free block left");
    if (smaller)
        for (unsigned o = 0; o < SK_MAX_ORDER; o++)
            if (st.free_blocks[o])
                diag("%lu free blocks of order %u", st.free_blocks[o], o);

    /* ---- the coalesced slices serve the largest order again ---- */
    unsigned long managed = st.managed_pages, n = (managed - acct_frontier_pages()) >> SK_MAX_ORDER;
    for (unsigned long i = 0; i < n && i < MAXLIVE; i++)
        do_alloc(SK_MAX_ORDER);
    page_stats(&st);
    is(st.managed_pages, managed, "%lu blocks of order %d allocated without a new slice", n, SK_MAX_ORDER);
    is(st.free_pages, 0, "and nothing is left free");
    while (nlive)
        do_free(nlive - 1);
    page_stats(&st);
    is(st.free_blocks[SK_MAX_ORDER], n, "freed again: %lu blocks of order %d", n, SK_MAX_ORDER);
    return done_testing();
}
