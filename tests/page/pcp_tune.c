/*
 * pcp_tune — the per-CPU page lists' high watermark follows what a CPU
 * cycles (pcp.c, PCP_GROW_BYTES), on a thread pinned to one CPU, for
 * every order with lists:
 *  - frees alone (a teardown) never raise it: past high they go to the
 *    zone in batches and the list stays at high;
 *  - a list that overflowed into the zone and then ran dry doubles at
 *    each such refill, up to high_max (1 MiB of blocks, CPU_ARRAY_MAX at
 *    most), and never past it;
 *  - page_stats counts each doubling (pcp_grows);
 *  - grown, the list keeps more than high blocks of a round, and those
 *    are allocated and freed again with the zone's free count unmoved;
 *  - page_drain_pcp() puts the list back to high (and forgets the
 *    overflow: the next refill does not grow it);
 *  - one order grows at a time: another order's growth puts a grown list
 *    back to high, its excess to the zone;
 *  - a request that finds no free resident block of its order first puts
 *    this CPU's grown lists back, and is served from their blocks;
 *  - the books balance (accounting.h).
 */
#define _GNU_SOURCE
#include <sched.h>

#include "accounting.h"

#define NBLK 256
static struct acct_block blk[NBLK];

static unsigned long acct_zone_dirty(void)
{
    struct page_stats st;
    page_stats(&st);
    return st.dirty_pages;
}

static unsigned long grows(void)
{
    struct page_stats st;
    page_stats(&st);
    return st.pcp_grows;
}

static unsigned cap_of(cpu_arrays_t list, int cpu)
{
    return __atomic_load_n(&cpu_array_at(list, cpu)->cap, __ATOMIC_RELAXED);
}

static void take(unsigned o, int n)
{
    for (int i = 0; i < n; i++) {
        if (!(blk[i].p = sk_alloc_pages(o)))
            BAIL("sk_alloc_pages(%u) failed", o);
        blk[i].order = o;
        blk[i].p[0] = 1;
    }
}

static void give(unsigned o, int n)
{
    for (int i = n - 1; i >= 0; i--)
        sk_free_pages(blk[i].p, o);
}

int main(void)
{
    acct_pcp_start();
    int cpu = cpu_use_rseq ? cpu_current() : cpu_slot();
    diag("CPU %d, per-CPU arrays via %s", cpu, cpu_use_rseq ? "rseq" : "the lock fallback");

    for (unsigned o = 0; o <= PCP_MAX_ORDER; o++) {
        cpu_arrays_t list = page_pcp.lists[o];
        unsigned high = page_pcp.high[o], most = page_pcp.high_max[o];
        size_t bytes = (size_t)most << (o + SK_PAGE_SHIFT);
        ok(most >= high && most <= CPU_ARRAY_MAX && most + high < NBLK &&
           (most == high || most == CPU_ARRAY_MAX || bytes == ((size_t)1 << 20)),
           "order %u: high %u, grows to at most %u (%zu KiB)", o, high, most, bytes >> 10);
        page_drain_pcp();

        /* A burst of frees alone. */
        int n = (int)(most + high);
        take(o, n);
        give(o, n);
        is(cap_of(list, cpu), high, "order %u: %d frees in a row leave the list at high", o, n);
        ok(cpu_array_count(list, cpu) <= high, "order %u: the list holds at most high blocks", o);
        page_drain_pcp();

        /* Cycles: overflow, run dry, refill. */
        unsigned prev = high;
        int grew_ok = 1, rounds = 0;
        unsigned long steps = 0, grows0 = grows();
        while (cap_of(list, cpu) < most && rounds < 12) {
            take(o, n);
            give(o, n);
            unsigned now = cap_of(list, cpu);
            if (now != prev && now != (prev * 2 < most ? prev * 2 : most))
                grew_ok = 0;
            steps += now != prev;
            prev = now;
            rounds++;
        }
        is(grows() - grows0, steps, "order %u: page_stats counts the %lu doublings", o, steps);
        if (most == high) {
            is(cap_of(list, cpu), high, "order %u: high is already the most, it stays", o);
        } else {
            is(cap_of(list, cpu), most, "order %u: cycling %d blocks grows the list to %u in %d rounds", o, n, most,
               rounds);
            ok(grew_ok, "order %u: each step doubles (or stops at high_max)", o);
        }
        take(o, n);
        give(o, n);
        ok(cap_of(list, cpu) <= most, "order %u: never past high_max", o);

        /* Grown: after a round of `most` blocks, what the list holds (more
         * than high could) is allocated and freed with no zone trip. */
        take(o, (int)most);
        give(o, (int)most);
        unsigned k = cpu_array_count(list, cpu);
        if (most >= 2 * high)
            ok(k > high, "order %u: after a round of %u blocks the list holds %u, more than high %u", o, most, k,
               high);
        unsigned long zf = acct_zone_free();
        take(o, (int)k);
        give(o, (int)k);
        is(acct_zone_free(), zf, "order %u: %u blocks allocated and freed leave the zone alone", o, k);
        is(cpu_array_count(list, cpu), k, "order %u: all %u are back on the list", o, k);

        /* A drain puts it back, and forgets the overflow. */
        page_drain_pcp();
        is(cap_of(list, cpu), high, "order %u: page_drain_pcp puts the list back to high %u", o, high);
        take(o, 1);
        give(o, 1);
        is(cap_of(list, cpu), high, "order %u: the next refill does not grow it", o);
        page_drain_pcp();
    }

    /* One grown order at a time: order 3 growing puts a grown order-2
     * list back to high, its excess to the zone. */
    unsigned h2 = page_pcp.high[2], h3 = page_pcp.high[3];
    int n2 = (int)(page_pcp.high_max[2] + h2), n3 = (int)(page_pcp.high_max[3] + h3);
    for (int i = 0; i < 8 && cap_of(page_pcp.lists[2], cpu) <= h2; i++) {
        take(2, n2);
        give(2, n2);
    }
    unsigned grown2 = cap_of(page_pcp.lists[2], cpu), held2 = cpu_array_count(page_pcp.lists[2], cpu);
    ok(grown2 > h2 && held2 > h2, "order 2 grown to %u, holding %u blocks", grown2, held2);
    for (int i = 0; i < 8 && cap_of(page_pcp.lists[3], cpu) <= h3; i++) {
        take(3, n3);
        give(3, n3);
    }
    ok(cap_of(page_pcp.lists[3], cpu) > h3, "then order 3 grows too (%u)", cap_of(page_pcp.lists[3], cpu));
    is(cap_of(page_pcp.lists[2], cpu), h2, "and order 2 is back to high %u", h2);
    ok(cpu_array_count(page_pcp.lists[2], cpu) <= h2, "holding %u blocks, at most high",
       cpu_array_count(page_pcp.lists[2], cpu));
    page_drain_pcp();

    /* A request that would take fresh memory first puts this CPU's grown
     * lists back (no rate limit, no other CPU involved): an order-1 list
     * grown, the zone's free memory all purged, then an order-3 request. */
    unsigned h1 = page_pcp.high[1];
    int n1 = (int)(page_pcp.high_max[1] + h1);
    for (int i = 0; i < 8 && cap_of(page_pcp.lists[1], cpu) <= h1; i++) {
        take(1, n1);
        give(1, n1);
    }
    unsigned held1 = cpu_array_count(page_pcp.lists[1], cpu);
    ok(cap_of(page_pcp.lists[1], cpu) > h1 && held1 > h1, "order 1 grown to %u, holding %u blocks",
       cap_of(page_pcp.lists[1], cpu), held1);
    page_reclaim(0, false);          /* every dirty zone block purged; lists kept */
    is(acct_zone_dirty(), 0ul, "the zone holds no free resident block");
    blk[0].p = sk_alloc_pages(3);
    blk[0].order = 3;
    if (!blk[0].p)
        BAIL("sk_alloc_pages(3) failed");
    is(cap_of(page_pcp.lists[1], cpu), h1, "an order-3 request that found none put order 1 back to high %u", h1);
    ok(cpu_array_count(page_pcp.lists[1], cpu) <= h1, "its %u blocks beyond high went to the zone",
       held1 - cpu_array_count(page_pcp.lists[1], cpu));
    ok(!(page_of(blk[0].p)->flags & PG_ZEROED), "and the order-3 block is made of them (resident, not fresh)");
    sk_free_pages(blk[0].p, 3);
    page_drain_pcp();

    struct acct_result r;
    acct_check(NULL, 0, &r);
    acct_report(&r, "all freed and drained");
    return done_testing();
}
