/*
 * frontier_race — the slab zone's frontier slice joined from two sides at
 * once: a large block borrowed from the zone grows in place past the
 * frontier (page_resize_exact -> zone_frontier_reach, which reads
 * z->frontier without a lock to decide whether to take grow_lock) while
 * another thread's page allocations run the zone out of joined pages
 * (zone_alloc -> zone_grow -> zone_grow_frontier).  Each round starts with
 * every joined page free, borrows three quarters of them, and lets both
 * threads ask for more than is joined; it ends when the frontier closes.
 *  - no page of the grown block is also one of the other thread's pages;
 *  - the block's bytes stay its own (each page it grew into is written
 *    and read back after the other thread is done);
 *  - once all is freed the books balance (accounting.h), every round.
 * TSAN: yes
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "accounting.h"

#define ROUNDS 12
#define MAXP 40000

static char *taken[MAXP];
static size_t ntaken;
static struct sk_page *blk;
static size_t grown, want_pages, other_pages;
static int go;

static void *grower(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
        ;
    size_t n = blk->large.nr_pages;
    while (n < want_pages && page_resize_exact(blk, n + 1)) {
        n++;
        memset((char *)page_address(blk) + (n - 1) * SK_PAGE_SIZE, (int)(n & 0xff), SK_PAGE_SIZE);
    }
    grown = n;
    return NULL;
}

static void *other(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
        ;
    for (ntaken = 0; ntaken < other_pages && ntaken < MAXP; ntaken++)
        if (!(taken[ntaken] = sk_alloc_pages(0)))
            break;
    return NULL;
}

int main(void)
{
    struct zone *z = acct_frontier_start();
    page_init();
    if (!sk_opt.zone_borrow)
        skip_all("zone_borrow=0");

    /* A first page makes the frontier slice. */
    char *first = sk_alloc_pages(0);
    if (!first || !z->frontier)
        skip_all("no frontier slice (huge pages or a partial slice)");
    sk_free_pages(first, 0);
    page_drain_pcp();

    int rounds = 0, overlap = 0, damaged = 0, books = 0, borrowed = 0, joins = 0;
    while (z->frontier && rounds < ROUNDS) {
        size_t joined = z->frontier_next;
        if (z->free_pages != joined)
            BAIL("round %d: %lu of %zu joined pages free", rounds, z->free_pages, joined);
        blk = page_alloc_exact(joined * 3 / 4, 0);
        if (!blk)
            BAIL("page_alloc_exact(%zu) failed", joined * 3 / 4);
        borrowed += blk->node == z->node && page_slice(blk) == z->frontier;
        memset(page_address(blk), 0x5a, blk->large.nr_pages * SK_PAGE_SIZE);
        size_t start = blk->large.nr_pages;
        want_pages = joined * 3 / 2;
        other_pages = joined / 2;
        pthread_t a, b;
        __atomic_store_n(&go, 0, __ATOMIC_RELAXED);
        if (pthread_create(&a, NULL, grower, NULL) || pthread_create(&b, NULL, other, NULL))
            BAIL("pthread_create");
        __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        joins += z->frontier_next != joined;

        char *lo = page_address(blk), *hi = lo + grown * SK_PAGE_SIZE;
        for (size_t i = 0; i < ntaken; i++)
            overlap += taken[i] >= lo && taken[i] < hi;
        for (size_t n = start + 1; n <= grown; n++)
            damaged += *(lo + (n - 1) * SK_PAGE_SIZE) != (char)(n & 0xff);
        for (size_t i = 0; i < ntaken; i++)
            sk_free_pages(taken[i], 0);
        page_free_exact(blk);
        page_drain_pcp();
        struct acct_result r;
        acct_check(NULL, 0, &r);
        books += r.overlaps || r.unaccounted || r.misaligned || r.bad_state || r.unmerged || r.stats_mismatch ||
                 r.stale;
        if (r.overlaps || r.unaccounted || r.bad_state)
            acct_report(&r, "round");
        rounds++;
    }
    diag("%d rounds, %d with a borrowed block, %d with the frontier moved", rounds, borrowed, joins);
    ok(rounds >= 4 && borrowed == rounds, "%d rounds, each with a block borrowed from the frontier slice", rounds);
    is(overlap, 0, "no page of the grown block is also the other thread's");
    is(damaged, 0, "every page the block grew into kept its bytes");
    is(books, 0, "after each round the books balance");
    struct page_stats st;
    unsigned long smaller = acct_all_freed(&st);
    is(smaller, 0, "all freed: the frontier's parts merged");
    return done_testing();
}
