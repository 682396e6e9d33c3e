/*
 * exact_cache — the per-CPU exact-block cache (pcp.c, page_alloc_exact):
 * the last exact block of at most 64 pages freed on a CPU stays on that
 * CPU's PCP_EXACT list, on a thread pinned to one CPU:
 *  - freed, a 16-page block is neither in use (page_exact_stats) nor in
 *    the zone: it is PG_PCP, not a head, and page_stats counts it on the
 *    per-CPU lists;
 *  - a request of the same page count takes it back, the zone untouched;
 *  - a request of another count gives it to the zone first (the zone's
 *    free pages grow by its 16 pages before the new block is cut);
 *  - an aligned request never takes it, a block above 64 pages is never
 *    cached, and a second free goes to the zone (one block per CPU);
 *  - page_drain_pcp() gives it to its zone;
 *  - the books (accounting.h) balance with a block on the cache and
 *    after everything is freed.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "accounting.h"

static unsigned long exact_in_use(void)
{
    unsigned long blocks, pages;
    page_exact_stats(&blocks, &pages);
    return pages;
}

int main(void)
{
    /* stdout's buffer static: printing allocates nothing, and the books
     * below hold only this test's blocks. */
    static char outbuf[1 << 16];
    setvbuf(stdout, outbuf, _IOLBF, sizeof outbuf);
    acct_pcp_start();
    int cpu = cpu_use_rseq ? cpu_current() : cpu_slot();
    cpu_arrays_t cache = page_pcp.lists[PCP_EXACT];
    diag("CPU %d, per-CPU arrays via %s", cpu, cpu_use_rseq ? "rseq" : "the lock fallback");

    /* ---- freed: cached, neither in use nor in the zone ---- */
    struct sk_page *a = page_alloc_exact(16, 0);
    if (!a)
        BAIL("page_alloc_exact(16) failed");
    memset(page_address(a), 0x5a, 16 * SK_PAGE_SIZE);
    page_drain_pcp();
    unsigned long free0 = acct_zone_free(), lists0 = acct_pcp_pages();
    is(exact_in_use(), 16, "a 16-page block in use");
    page_free_exact(a);
    is(cpu_array_count(cache, cpu), 1, "freed, it is on this CPU's exact-block cache");
    ok((a->flags & (PG_PCP | PG_HEAD)) == PG_PCP, "a cached block is PG_PCP, not a head (flags %#x)", a->flags);
    is(acct_zone_free(), free0, "the zone did not get it");
    is(exact_in_use(), 0, "page_exact_stats: no block in use");
    is(acct_pcp_pages() - lists0, 16, "page_stats counts its 16 pages on the per-CPU lists");
    struct acct_result r;
    acct_check(NULL, 0, &r);
    acct_report(&r, "a block on the exact-block cache");

    /* ---- the same count: back from the cache ---- */
    struct sk_page *b = page_alloc_exact(16, 0);
    ok(b == a, "page_alloc_exact(16) takes the cached block back");
    ok((b->flags & (PG_HEAD | PG_LARGE | PG_PCP | PG_ZEROED)) == (PG_HEAD | PG_LARGE),
       "a head again, large, not known zero (flags %#x)", b->flags);
    is(b->large.nr_pages, 16, "with its 16 pages");
    is(cpu_array_count(cache, cpu), 0, "the cache is empty");
    is(acct_zone_free(), free0, "the zone untouched");
    is(exact_in_use(), 16, "in use again");
    is(((unsigned char *)page_address(b))[0], 0x5a, "its bytes are the ones freed (no purge, no fault)");

    /* ---- another count: the cached block goes to the zone first ---- */
    page_free_exact(b);
    unsigned long free1 = acct_zone_free();
    struct sk_page *c = page_alloc_exact(20, 0);
    ok(c != NULL, "page_alloc_exact(20)");
    is(cpu_array_count(cache, cpu), 0, "the 16-page block left the cache");
    unsigned long expect = free1 + 16 - 20;   /* unless the zone had to grow */
    ok(acct_zone_free() == expect || acct_zone_free() > free1, "the zone had its 16 pages back before the cut (%lu, %lu)",
       acct_zone_free(), free1);
    page_free_exact(c);
    is(cpu_array_count(cache, cpu), 1, "the 20-page block is cached now");

    /* ---- aligned requests, big blocks, a second free ---- */
    struct sk_page *d = page_alloc_exact(20, 2);
    ok(d != NULL && d != c, "an aligned request does not take the cached block");
    is(cpu_array_count(cache, cpu), 1, "which stays cached");
    unsigned long free2 = acct_zone_free();
    page_free_exact(d);
    is(cpu_array_count(cache, cpu), 1, "a second free: one block per CPU");
    ok(acct_zone_free() >= free2 + 20, "the second went to the zone");
    struct sk_page *big = page_alloc_exact(65, 0);
    ok(big != NULL, "page_alloc_exact(65)");
    unsigned long free3 = acct_zone_free();
    page_drain_pcp();
    ok(acct_zone_free() >= free3 + 20, "page_drain_pcp gives the cached block to the zone");
    is(cpu_array_count(cache, cpu), 0, "and empties the cache");
    free3 = acct_zone_free();
    page_free_exact(big);
    is(cpu_array_count(cache, cpu), 0, "a 65-page block is not cached");
    ok(acct_zone_free() >= free3 + 65, "it goes to the zone");

    struct page_stats st;
    unsigned long smaller = acct_all_freed(&st);
    is(smaller, 0, "all freed: every whole slice one block of order %d again", SK_MAX_ORDER);
    is(exact_in_use(), 0, "no large block counted in use");
    return done_testing();
}
