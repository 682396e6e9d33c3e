/*
 * pcp_fresh — free pages parked on a per-CPU list of one order serve a
 * request of another order before the zone hands out never-used memory
 * (pcp.c, zone_drain_before_fresh), on a thread pinned to one CPU:
 *  - within FRESH_DRAIN_MS of page_init nothing drains: at start-up the
 *    lists hold only never-touched pages their first refills left, and a
 *    drain would interrupt every CPU and start the purger for nothing;
 *  - order-0 pages written and freed stay on this CPU's order-0 list, the
 *    zone holds no free resident memory;
 *  - order-2 requests then drain the lists into the zone (once), where
 *    the pages merge with their buddies, and are served from them: the
 *    blocks lie among the freed pages and are not fresh (PG_ZEROED clear);
 *  - within FRESH_DRAIN_MS of that drain, order-2 requests take this
 *    CPU's order-0 list back to the zone (no other CPU's) and are served
 *    from those pages;
 *  - lists holding less than twice the request's batch are not drained
 *    (no interrupt of every CPU for a few stray pages);
 *  - the books balance (accounting.h).
 */
#define _GNU_SOURCE
#include <sched.h>

#include "accounting.h"

#define NSMALL 96   /* order-0 pages: under the order-0 high watermark */
#define NBIG 16     /* order-2 blocks: 64 pages, fewer than NSMALL */

static char *small[NSMALL], *big[NBIG], *early;

static struct page_stats stats(void)
{
    struct page_stats st;
    page_stats(&st);
    return st;
}

/* NSMALL order-0 pages written (resident) and freed onto this CPU's
 * order-0 list; [*lo, *hi) spans them. */
static void park_small(int fill, char **lo, char **hi)
{
    *lo = *hi = NULL;
    for (int i = 0; i < NSMALL; i++) {
        if (!(small[i] = sk_alloc_pages(0)))
            BAIL("sk_alloc_pages(0) failed");
        memset(small[i], fill, SK_PAGE_SIZE);
        if (!*lo || small[i] < *lo)
            *lo = small[i];
        if (!*hi || small[i] + SK_PAGE_SIZE > *hi)
            *hi = small[i] + SK_PAGE_SIZE;
    }
    for (int i = 0; i < NSMALL; i++)
        sk_free_pages(small[i], 0);
}

/* NBIG order-2 blocks into big[]: how many lie in [lo, hi), and how many
 * are fresh memory (PG_ZEROED). */
static void take_big(const char *lo, const char *hi, int *inside, int *fresh)
{
    *inside = *fresh = 0;
    for (int i = 0; i < NBIG; i++) {
        if (!(big[i] = sk_alloc_pages(2)))
            BAIL("sk_alloc_pages(2) failed");
        *inside += big[i] >= lo && big[i] < hi;
        struct sk_page *pg = page_find_head(big[i]);
        *fresh += pg && (pg_flags(pg) & PG_ZEROED);
    }
}

int main(void)
{
    uint64_t t0 = os_now_ms_coarse();   /* page_init is at or after this */
    acct_pcp_start();
    if (page_pcp.high[0] < NSMALL + 1)
        skip_all("order-0 high watermark %u is under %d", page_pcp.high[0], NSMALL + 1);

    /* Start-up: pages on the order-0 list, then an order-2 request that
     * finds no free resident block, within FRESH_DRAIN_MS of page_init. */
    for (int i = 0; i < NSMALL; i++)
        if (!(small[i] = sk_alloc_pages(0)))
            BAIL("sk_alloc_pages(0) failed");
    for (int i = 0; i < NSMALL; i++)
        sk_free_pages(small[i], 0);
    unsigned long before = stats().pcp_fresh_drains;
    if (!(early = sk_alloc_pages(2)))
        BAIL("sk_alloc_pages(2) failed");
    unsigned long age = (unsigned long)(os_now_ms_coarse() - t0);
    if (age < FRESH_DRAIN_MS)
        is(stats().pcp_fresh_drains, before, "%lu ms after page_init an order-2 request drains nothing", age);
    else
        skip("%lu ms between page_init and the request: past the start-up window", age);
    struct timespec ts = { 0, (FRESH_DRAIN_MS + 5) * 1000000L };
    nanosleep(&ts, NULL);

    /* Pages written (resident), freed onto this CPU's order-0 list. */
    page_drain_pcp();
    char *lo, *hi;
    park_small(0x5a, &lo, &hi);
    struct page_stats st = stats();
    ok(st.pcp_pages >= NSMALL, "%d order-0 pages freed stay on the per-CPU list (%lu pages there)", NSMALL,
       st.pcp_pages);
    unsigned long dirty0 = st.dirty_pages, drains0 = st.pcp_fresh_drains;

    /* Order-2 requests: no free resident block of order 2 in the zone. */
    int inside, fresh;
    take_big(lo, hi, &inside, &fresh);
    st = stats();
    is(st.pcp_fresh_drains - drains0, 1, "the first order-2 request drained the lists, once");
    ok(inside >= NBIG * 3 / 4, "order-2 blocks come from the freed order-0 pages (%d of %d inside them)", inside,
       NBIG);
    ok(fresh <= NBIG / 4, "and are not fresh memory (%d of %d fresh)", fresh, NBIG);
    diag("free resident pages in the zone: %lu before, %lu after", dirty0, st.dirty_pages);
    for (int i = 0; i < NBIG; i++)
        sk_free_pages(big[i], 2);

    /* Within FRESH_DRAIN_MS of that drain, no other CPU's list is
     * touched, but this CPU's lists of other orders still go back before
     * fresh memory: order-0 pages written and freed, every free block of
     * the zone purged (not resident), then order-2 requests. */
    page_drain_pcp();
    park_small(0x5b, &lo, &hi);
    page_reclaim(0, false);          /* the zone's free blocks purged; the lists kept */
    st = stats();
    drains0 = st.pcp_fresh_drains;
    unsigned long empties0 = st.pcp_local_empties, eblocks0 = st.pcp_local_blocks;
    uint64_t t1 = os_now_ms_coarse();
    page_zones[0].fresh_drain_at = t1;   /* as if every CPU's lists were just drained */
    take_big(lo, hi, &inside, &fresh);
    st = stats();
    if (os_now_ms_coarse() - t1 < FRESH_DRAIN_MS) {
        is(st.pcp_fresh_drains, drains0, "within FRESH_DRAIN_MS of a drain, no drain of every CPU's lists");
        ok(st.pcp_local_empties - empties0 >= 1 && st.pcp_local_blocks - eblocks0 >= NSMALL / 2,
           "but this CPU's order-0 list went back to the zone (%lu times, %lu blocks)",
           st.pcp_local_empties - empties0, st.pcp_local_blocks - eblocks0);
        ok(inside >= NBIG * 3 / 4 && fresh <= NBIG / 4,
           "order-2 blocks come from those pages (%d of %d inside them, %d fresh)", inside, NBIG, fresh);
    } else {
        skip("the order-2 requests took %lu ms: past the window", (unsigned long)(os_now_ms_coarse() - t1));
        skip("(the same)");
        skip("(the same)");
    }
    for (int i = 0; i < NBIG; i++)
        sk_free_pages(big[i], 2);

    /* A few stray pages on a list are not worth a drain of every CPU's
     * lists (this CPU's go back: no other CPU is interrupted). */
    page_drain_pcp();
    page_release_free(true);
    small[0] = sk_alloc_pages(0);
    small[1] = sk_alloc_pages(0);
    page_drain_pcp();      /* the batch the refill left */
    sk_free_pages(small[0], 0);
    sk_free_pages(small[1], 0);
    drains0 = stats().pcp_fresh_drains;
    big[0] = sk_alloc_pages(3);
    is(stats().pcp_fresh_drains, drains0, "two pages on a list: an order-3 request drains no other CPU's list");
    sk_free_pages(big[0], 3);
    sk_free_pages(early, 2);

    page_drain_pcp();
    struct acct_result r;
    acct_check(NULL, 0, &r);
    is(r.overlaps + r.unaccounted + r.misaligned + r.bad_state + r.unmerged + r.stats_mismatch + r.stale, 0,
       "the books balance");
    return done_testing();
}
