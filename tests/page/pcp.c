/*
 * pcp — per-CPU page lists refill and drain in batches, for every order
 * that has them (0..PCP_MAX_ORDER), on a thread pinned to one CPU:
 *  - an allocation from an empty list takes one batch from the zone and
 *    leaves batch-1 blocks on this CPU's list;
 *  - frees stay on the list up to the high watermark, without touching
 *    the zone; the next free sends a batch (and itself) back to the zone;
 *  - a block freed and allocated again comes back hot (LIFO);
 *  - blocks on a list carry PG_PCP and count in no zone total;
 *  - page_drain_pcp() empties every CPU's lists into the zone.
 * The books (accounting.h) balance at the end.
 */
#define _GNU_SOURCE
#include <sched.h>

#include "accounting.h"

#define NBLK 600
static struct acct_block blk[NBLK];

int main(void)
{
    acct_pcp_start();
    int cpu = cpu_use_rseq ? cpu_current() : cpu_slot();
    diag("CPU %d, per-CPU arrays via %s", cpu, cpu_use_rseq ? "rseq" : "the lock fallback");
    is(acct_pcp_pages(), 0, "fresh process: every per-CPU list is empty");

    for (unsigned o = 0; o <= PCP_MAX_ORDER; o++) {
        cpu_arrays_t list = page_pcp.lists[o];
        unsigned high = page_pcp.high[o], batch = page_pcp.batch[o];
        ok(batch >= 1 && batch <= high && high <= NBLK - 2 && NBLK > high + batch,
           "order %u: batch %u, high watermark %u", o, batch, high);

        /* Refill: one allocation from an empty list brings a batch. */
        page_drain_pcp();
        is(cpu_array_count(list, cpu), 0, "order %u: list empty after page_drain_pcp", o);
        blk[0].p = sk_alloc_pages(o);
        blk[0].order = o;
        is(cpu_array_count(list, cpu), batch - 1, "order %u: one allocation leaves batch-1 = %u on the list", o,
           batch - 1);
        is(acct_pcp_pages(), (unsigned long)(batch - 1) << o, "order %u: page_stats counts them", o);
        struct sk_page *top = cpu_array_at(list, cpu)->objs[batch - 2];
        ok((top->flags & PG_PCP) && top->order == o, "order %u: a listed block carries PG_PCP and its order", o);
        ok((page_of(blk[0].p)->flags & (PG_HEAD | PG_PCP)) == PG_HEAD, "order %u: the block handed out is a head",
           o);

        /* Hot: freed then allocated, the same block comes back. */
        char *p = blk[0].p;
        sk_free_pages(p, o);
        is(cpu_array_count(list, cpu), batch, "order %u: a free goes on the list", o);
        blk[0].p = sk_alloc_pages(o);
        ok(blk[0].p == p, "order %u: the block freed last is allocated first", o);

        /* Allocate enough that later frees can fill the list. */
        int n = (int)(high + batch + 2);
        for (int i = 1; i < n; i++) {
            blk[i].p = sk_alloc_pages(o);
            blk[i].order = o;
        }
        page_drain_pcp();
        unsigned long zf = acct_zone_free();
        int stayed = 1;
        for (unsigned i = 0; i < high; i++) {
            sk_free_pages(blk[n - 1 - (int)i].p, o);
            if (cpu_array_count(list, cpu) != i + 1)
                stayed = 0;
        }
        ok(stayed, "order %u: %u frees all stay on the list", o, high);
        is(acct_zone_free(), zf, "order %u: up to the high watermark the zone gets nothing", o);
        is(acct_pcp_pages(), (unsigned long)high << o, "order %u: the list holds high = %u blocks", o, high);

        /* One more: a batch and this block go back to the zone. */
        sk_free_pages(blk[n - 1 - (int)high].p, o);
        is(cpu_array_count(list, cpu), high - batch, "order %u: the free past high drains a batch (%u left)", o,
           high - batch);
        is(acct_zone_free(), zf + ((unsigned long)(batch + 1) << o), "order %u: the zone got batch + 1 blocks", o);

        /* Everything back, then the books and an empty drain. */
        int left = n - 1 - (int)high;
        struct acct_result r;
        acct_check(blk, (size_t)left, &r);
        ok(r.overlaps == 0 && r.unaccounted == 0 && r.misaligned == 0 && r.bad_state == 0 &&
           r.stats_mismatch == 0 && r.unmerged == 0,
           "order %u: books balance with blocks live, listed and free", o);
        for (int i = 0; i < left; i++)
            sk_free_pages(blk[i].p, o);
        page_drain_pcp();
        unsigned long listed = 0;
        for (unsigned oo = 0; oo <= PCP_MAX_ORDER; oo++)
            for (int c = 0; c < cpu_nr_ids; c++)
                listed += cpu_array_count(page_pcp.lists[oo], c);
        ok(listed == 0 && acct_pcp_pages() == 0, "order %u: page_drain_pcp empties every CPU's lists", o);
    }

    struct acct_result r;
    acct_check(NULL, 0, &r);
    acct_report(&r, "all freed and drained");
    struct page_stats st;
    page_stats(&st);
    is(st.free_blocks[SK_MAX_ORDER], st.managed_pages >> SK_MAX_ORDER, "all freed: every slice one free block");
    return done_testing();
}
