/*
 * dirty_nodes — the zonelist's dirty limits and allowed nodes
 * (src/page/node.c), under numa_nodes=2 with a 64 MiB budget:
 *  - a node's sk_file pages are limited to file_dirty_ratio (20%) of its
 *    share of the budget: a writer on node 0's CPU fills it up to that, and
 *    its next pages come from node 1 (zone_dirty_ok); destroyed (and the
 *    LRU's per-CPU batches drained), the file's pages leave both counts;
 *  - a node passed by for its dirty limit is not full: the next page
 *    block from CPU 0 comes from node 0 (seed 001's patch 2), where the
 *    3.15-rc1 before (page_before=dirty_full) marked it full and sent the
 *    block to node 1; page_before=dirty_once runs the flags' test per
 *    zone, with the same outcome as after;
 *  - the allowed nodes follow the thread's affinity (one CPU's node,
 *    both); an allowed set without the home node sends a request to the
 *    allowed one first.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "page/page.h"
#include "shmem/shmem.h"
#include "slabkit.h"
#include "tap.h"

#define MiB ((size_t)1 << 20)

/* The first CPU id of node nid (numa_nodes=2 splits the ids in halves). */
static int cpu_of(unsigned nid)
{
    for (int c = 0; c < cpu_nr_ids; c++)
        if (page_cpu_node[c] == nid)
            return c;
    BAIL("no CPU on node %u", nid);
}

/* Pin to the first CPU of each node in nodes (bit n: node n). */
static void pin_cpus(unsigned nodes)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (unsigned n = 0; n < 2; n++)
        if (nodes & (1u << n))
            CPU_SET(cpu_of(n), &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        BAIL("sched_setaffinity(nodes %#x)", nodes);
    sched_yield();
}

/* The node of a fresh order-4 block (past the per-CPU lists: a zonelist
 * walk of its own). */
static unsigned block_node(void)
{
    void *p = sk_alloc_pages(4);
    if (!p)
        BAIL("sk_alloc_pages(4)");
    unsigned nid = page_nid(page_of(p));
    sk_free_pages(p, 4);
    return nid;
}

static int child(const char *mode)
{
    if (page_init() != 0)
        BAIL("page_init");
    if (page_nr_nodes != 2) {
        for (int i = 0; i < 7; i++)
            skip("one CPU: numa_nodes=2 has one node here");
        return done_testing();
    }
    bool full_before = strstr(mode, "dirty_full") != NULL;
    sk_mem_budget_set(64 * MiB);
    pin_cpus(1);
    struct page_node_stats n0, n1;
    page_node_stats(0, &n0);
    unsigned long share = (64 * MiB / SK_PAGE_SIZE) / 100 * 20 * page_node_ncpus[0] /
                          (page_node_ncpus[0] + page_node_ncpus[1]);
    ok(n0.dirty_limit == share, "node 0's dirty limit: 20%% of its share of the budget (by CPUs), %lu pages",
       n0.dirty_limit);
    unsigned long skips0 = page_dirty_skips;
    sk_file_t *f = sk_file_create("dirty");
    static char buf[MiB];
    memset(buf, 0x6b, sizeof buf);
    for (int i = 0; i < 12; i++)
        if (!f || sk_file_pwrite(f, buf, MiB, (off_t)i * (off_t)MiB) != (ssize_t)MiB)
            BAIL("sk_file_pwrite");
    page_node_stats(0, &n0);
    page_node_stats(1, &n1);
    /* Node 0 may go past its limit by what this CPU's movable per-CPU
     * list held and the refill that crossed it. */
    ok(n0.file_pages <= n0.dirty_limit + 116 + 29 && n0.file_pages + n1.file_pages >= 12 * MiB / SK_PAGE_SIZE &&
           n1.file_pages > 0 && page_dirty_skips > skips0,
       "a 12 MiB file written on node 0's CPU: %lu pages on node 0 (limit %lu), %lu on node 1, %lu passes", n0.file_pages,
       n0.dirty_limit, n1.file_pages, page_dirty_skips - skips0);
    unsigned nid = block_node();
    if (full_before)
        ok(nid == 1, "page_before=dirty_full: node 0 marked full, the next block from node %u", nid);
    else
        ok(nid == 0, "node 0 over its dirty limit is not full: the next block from node %u", nid);
    sk_file_destroy(f);
    lru_add_drain_all();   /* pages still in a per-CPU LRU batch hold a reference */
    page_node_stats(0, &n0);
    page_node_stats(1, &n1);
    ok(n0.file_pages == 0 && n1.file_pages == 0, "destroyed: no file pages left on either node (%lu, %lu)",
       n0.file_pages, n1.file_pages);

    /* The allowed nodes, from the affinity (recomputed: the cache is
     * dropped). */
    bool hard;
    unsigned m[3];
    static const unsigned pins[3] = { 1, 2, 3 };
    for (int i = 0; i < 3; i++) {
        pin_cpus(pins[i]);
        page_allowed.nodes = 0;
        m[i] = page_allowed_nodes(&hard);
    }
    ok(m[0] == 1 && m[1] == 2 && m[2] == 3 && !hard,
       "allowed nodes from the affinity: a CPU of node 0 -> %#x, of node 1 -> %#x, both -> %#x", m[0], m[1], m[2]);
    /* On CPU 0 with only node 1 allowed (as a policy would have it), and
     * the zonelist cache clear again. */
    pin_cpus(1);
    for (unsigned z = 0; z < PAGE_NR_ZONES; z++)
        page_zones[z].zlc_full_until = 0;
    page_allowed = (struct page_allowed){ .nodes = 2, .hard = false, .at = os_now_ms_coarse() };
    unsigned soft = block_node();
    page_allowed = (struct page_allowed){ .nodes = 2, .hard = true, .at = os_now_ms_coarse() };
    unsigned bound = block_node();
    page_allowed.nodes = 0;
    unsigned home = block_node();
    ok(soft == 1 && bound == 1 && home == 0,
       "on CPU 0, only node 1 allowed: blocks from node %u (softwall) and %u (bound); all allowed: node %u", soft,
       bound, home);
    sk_mem_budget_set(0);
    ok(page_node_fallbacks > 0, "those count as zonelist fallbacks (%lu)", page_node_fallbacks);
    return done_testing();
}

int main(int argc, char **argv)
{
    static const char *const modes[] = { "numa_nodes=2", "numa_nodes=2,page_before=dirty_full",
                                         "numa_nodes=2,page_before=dirty_once" };
    static const int per[] = { 7, 7, 7 };
    return tap_modes(argc, argv, modes, per, 3, child);
}
