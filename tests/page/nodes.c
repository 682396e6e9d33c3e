/*
 * nodes — the page allocator's nodes under numa_nodes=2 (src/page/node.c),
 * which splits this machine's CPU ids into two nodes:
 *  - each node has its two zones, and a CPU's pages, slab pages and large
 *    blocks come from its own node's zones;
 *  - a block freed on the other node's CPU goes back to its own zone when
 *    that CPU's list drains;
 *  - under a budget each node has its share (by CPUs): a node below its
 *    low mark is full, the next requests go along the zonelist to the
 *    other node, and the zonelist cache marks the full one;
 *  - the exit report has a line per node, which tools/slabinfo reads back.
 * The default mode (one node on this machine unless it has several) runs
 * the same look-ups: every zone id is its node's.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "page/page.h"
#include "slab/slab_fast.h"
#include "slab/slabinfo_format.h"
#include "slabkit.h"
#include "tap.h"

#define NPAGES 64

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        BAIL("sched_setaffinity(%d)", cpu);
    sched_yield();
}

/* Whether all of n pages of order 0 taken on this CPU are of node nid. */
#define NMAX 16384
static void *pages[NMAX];
static int take_pages(int n, unsigned nid, unsigned *bad_nid)
{
    int good = 0;
    for (int i = 0; i < n; i++) {
        pages[i] = sk_alloc_pages(0);
        if (!pages[i])
            BAIL("sk_alloc_pages");
        unsigned got = page_nid(page_of(pages[i]));
        if (got == nid)
            good++;
        else
            *bad_nid = got;
    }
    return good;
}

static void free_pages_n(int n)
{
    for (int i = 0; i < n; i++)
        sk_free_pages(pages[i], 0);
}

static int child_two(void)
{
    ok(page_nr_nodes == 2 && page_cpu_node[0] == 0 && page_cpu_node[1] == 1,
       "numa_nodes=2: two nodes, CPU 0 on node 0, CPU 1 on node 1 (%u nodes)", page_nr_nodes);
    unsigned bad = 0;
    for (int cpu = 0; cpu < 2; cpu++) {
        pin(cpu);
        int good = take_pages(NPAGES, (unsigned)cpu, &bad);
        /* A cache of its own: its first object is on a new slab. */
        char name[32];
        snprintf(name, sizeof name, "nodes-%d", cpu);
        sk_cache_t *cache = sk_cache_create(name, 64, 0, 0, NULL);
        void *obj = sk_cache_alloc(cache), *big = sk_malloc(1 << 20);
        unsigned slab_node = page_nid(page_of(obj)), big_zone = page_of(big)->node;
        ok(good == NPAGES && slab_node == (unsigned)cpu && big_zone == (unsigned)ZONE_ID(cpu, ZONE_LARGE),
           "on CPU %d: %d/%d pages of node %d, a slab page of node %u, a 1 MiB block in zone %u",
           cpu, good, NPAGES, cpu, slab_node, big_zone);
        sk_cache_free(cache, obj);
        sk_cache_destroy(cache);
        sk_free(big);
        free_pages_n(NPAGES);
    }

    /* Node 1's pages freed on CPU 0: they go back to zone 2, not zone 0. */
    pin(1);
    take_pages(NPAGES, 1, &bad);
    page_drain_pcp();
    struct page_node_stats n0, n1, m0, m1;
    page_node_stats(0, &n0);
    page_node_stats(1, &n1);
    pin(0);
    free_pages_n(NPAGES);
    page_drain_pcp();
    page_node_stats(0, &m0);
    page_node_stats(1, &m1);
    ok(n1.used_pages - m1.used_pages == NPAGES && m0.used_pages == n0.used_pages,
       "node 1's %d pages freed on CPU 0 went back to node 1 (in use there %lu -> %lu, node 0 %lu -> %lu)",
       NPAGES, n1.used_pages, m1.used_pages, n0.used_pages, m0.used_pages);

    /* A budget of 64 MiB: 32 MiB a node.  CPU 0 takes pages until its node
     * is full; then they come from node 1. */
    sk_trim();
    sk_mem_budget_set(64 << 20);
    unsigned long fb0 = page_node_fallbacks;
    int n = 0, first_other = -1;
    while (n < NMAX && (first_other < 0 || n < first_other + 64)) {
        pages[n] = sk_alloc_pages(0);
        if (!pages[n])
            break;
        memset(pages[n], 1, SK_PAGE_SIZE);
        if (first_other < 0 && page_nid(page_of(pages[n])) == 1)
            first_other = n;
        n++;
    }
    struct page_node_stats f0;
    page_node_stats(0, &f0);
    ok(first_other > 0 && page_node_fallbacks > fb0 && f0.full,
       "with 64 MiB, node 0 full after %d of CPU 0's pages (%lu in use): the next came from node 1 "
       "(%lu fallbacks; node 0 in the zonelist cache: %d)", first_other, f0.used_pages, page_node_fallbacks - fb0,
       f0.full);
    ok(f0.charged_pages <= (32ul << 20) / SK_PAGE_SIZE,
       "node 0 kept within its share: %lu pages charged of %lu", f0.charged_pages,
       (32ul << 20) / SK_PAGE_SIZE);
    free_pages_n(n);
    sk_mem_budget_set(0);

    /* The report's node lines (malloc_stats, in a child: its stderr). */
    static char buf[65536];
    tap_child_report(malloc_stats, buf, sizeof buf, 0);
    unsigned nd0 = 9, nd1 = 9;
    unsigned long c0 = 0, c1 = 0, mg, us, fr, rs;
    char *l0 = strstr(buf, "slabkit: node 0:"), *l1 = strstr(buf, "slabkit: node 1:");
    int got0 = l0 ? sscanf(l0, SLABINFO_NODE_LINE, &nd0, &c0, &mg, &us, &fr, &rs) : 0;
    int got1 = l1 ? sscanf(l1, SLABINFO_NODE_LINE, &nd1, &c1, &mg, &us, &fr, &rs) : 0;
    ok(got0 == 6 && got1 == 6 && nd0 == 0 && nd1 == 1 && c0 == 1 && c1 == 1,
       "malloc_stats has a line per node, before the totals (node 0: %lu CPU, node 1: %lu CPU)", c0, c1);
    return tap_failed ? 1 : 0;
}

static int child_default(void)
{
    void *p = sk_alloc_pages(0), *big = sk_malloc(1 << 20);
    unsigned nid = page_node_here();
    ok(page_of(p)->node == (unsigned)ZONE_ID(nid, ZONE_NORMAL) && page_of(big)->node == (unsigned)ZONE_ID(nid, ZONE_LARGE),
       "by default (%u node%s): a page in zone %u, a large block in zone %u, both of this CPU's node %u",
       page_nr_nodes, page_nr_nodes == 1 ? "" : "s", page_of(p)->node, page_of(big)->node, nid);
    sk_free_pages(p, 0);
    sk_free(big);
    return tap_failed ? 1 : 0;
}

static int child(const char *mode)
{
    if (!strcmp(mode, "default"))
        return child_default();
    if (page_init() != 0)
        BAIL("page_init");
    if (cpu_nr_ids < 2) {
        for (int i = 0; i < 7; i++)
            skip("one CPU: numa_nodes=2 has one node here");
        return 0;
    }
    return child_two();
}

int main(int argc, char **argv)
{
    static const char *const modes[] = { "default", "numa_nodes=2" };
    static const int per[] = { 1, 7 };
    return tap_modes(argc, argv, modes, per, 2, child);
}
