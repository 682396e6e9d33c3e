/*
 * node.c — nodes: which CPU belongs to which node, each node's zonelist
 * and the zonelist cache, and binding a node's memory to it.
 *
 * Topology, read once by page_init: numa_nodes=0 (the default) takes the
 * system's nodes from /sys/devices/system/node/nodeN/cpulist (one node
 * when there is no such directory); numa_nodes=N splits the CPU ids into
 * N runs of consecutive ids, so that one-node machines run the same zones,
 * lists and fallbacks (their memory is not bound: there is one node's).
 * At most PAGE_MAX_NODES; a system node beyond folds onto node % that.
 *
 * Zones: node n's are page_zones[2n] (ZONE_NORMAL: slab pages, page
 * blocks, sk_file pages; the per-CPU page lists in front) and [2n + 1]
 * (ZONE_LARGE: large blocks).  A request goes to the zone of its kind of
 * the calling CPU's node, unless that node is full, then along the
 * node's zonelist: n, n + 1, ..., n - 1 (by id: the kernel orders by
 * distance, which a machine of two sockets, or this split, does not
 * tell apart).  Full: under a memory budget, the node's headroom below
 * its low mark (its share of the budget by CPUs: the kernel's per-zone
 * watermarks); without one, a zone whose growth failed (no address
 * space left): the request then goes on to the next zone
 * (zonelist_alloc).  The zonelist cache (zlc, after the kernel's
 * zonelist_cache of 2.6.20-3.15) remembers a zone found full for
 * ZLC_MS, so the next requests skip it without a look.  When every node
 * is full the home zone takes the request, and the budget decides
 * (budget.c).
 *
 * Dirty limits and allowed nodes: a write's sk_file page passes by a node
 * whose file pages are over file_dirty_ratio of its share of memory
 * (zone_dirty_ok); the walk takes the thread's allowed nodes first (its
 * memory policy's, else its affinity's: the cpuset's role) and then any
 * node, unless a policy binds it.
 *
 * Binding: with the system's nodes (page_nodes_real), each slice a zone
 * maps is bound to its node (mbind MPOL_PREFERRED: the kernel may still
 * place pages elsewhere when the node is out of memory, as it would for
 * any preferred policy).  A failure is ignored: placement is a hint.
 *
 * A block freed on a CPU of another node joins that CPU's per-CPU list
 * (page_free stays a push) and serves it until the list drains, when it
 * goes back to its own zone (pcp.c, zone_free_pages): the kernel keeps
 * per-zone lists on every CPU instead.
 *
 * Invariants: page_nr_nodes and page_cpu_node are written once, by
 * page_init under page_init_lock, before page_ready; zone->zlc_full_until
 * and zone->file_pages are hints (relaxed); page_allowed is the thread's
 * own.  No lock.
 */
#define _GNU_SOURCE   /* sched_getaffinity, cpu_set_t */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "page/page_internal.h"

_Static_assert(PAGE_MAX_NODES == SK_NUMA_NODES_MAX, "numa_nodes' range is the zones'");

unsigned page_nr_nodes = 1;
bool page_nodes_real;
uint8_t page_cpu_node[CPU_MAX_IDS + 1];
unsigned page_node_ncpus[PAGE_MAX_NODES];
static unsigned node_ids = 1;       /* CPU ids over all nodes (node_init) */
unsigned long page_node_fallbacks;   /* statistics (relaxed) */
unsigned long page_dirty_skips;      /* statistics (relaxed) */
__thread struct page_allowed page_allowed __attribute__((tls_model("initial-exec")));
/* The machine's memory, pages (node_init): what a node's dirty limit is a
 * share of when there is no budget. */
static unsigned long phys_pages;

/* How long a zone found full is skipped (the kernel's zlc: a second). */
#define ZLC_MS 1000

static const char *parse_uint(const char *s, unsigned long *v)
{
    unsigned long x = 0;
    if (*s < '0' || *s > '9')
        return NULL;
    while (*s >= '0' && *s <= '9')
        x = x * 10 + (unsigned long)(*s++ - '0');
    *v = x;
    return s;
}

/* Mark the CPUs of a cpulist ("0-3,8-11") as node nid's; returns how
 * many were in range. */
static unsigned cpulist_mark(const char *s, unsigned nid)
{
    unsigned marked = 0;
    while (*s && *s != '\n') {
        unsigned long lo, hi;
        if (!(s = parse_uint(s, &lo)))
            break;
        hi = lo;
        if (*s == '-' && !(s = parse_uint(s + 1, &hi)))
            break;
        for (unsigned long c = lo; c <= hi && c < (unsigned long)cpu_nr_ids; c++, marked++)
            page_cpu_node[c] = (uint8_t)nid;
        if (*s == ',')
            s++;
    }
    return marked;
}

/* The system's nodes: how many (1 when sysfs has none). */
static unsigned system_nodes(void)
{
    unsigned nodes = 1;
    char path[64], buf[1024];
    for (unsigned n = 0; n < 1024; n++) {
        snprintf(path, sizeof path, "/sys/devices/system/node/node%u/cpulist", n);
        if (os_read_small(path, buf, sizeof buf) < 0) {
            if (n >= 64)
                break;      /* node ids may have holes; not that many */
            continue;
        }
        if (cpulist_mark(buf, n % PAGE_MAX_NODES) && n + 1 > nodes)
            nodes = n + 1;
    }
    return nodes > PAGE_MAX_NODES ? PAGE_MAX_NODES : nodes;
}

void node_init(void)
{
    memset(page_cpu_node, 0, sizeof page_cpu_node);
    long want = sk_opt.numa_nodes;
    unsigned ids = cpu_nr_ids > 0 ? (unsigned)cpu_nr_ids : 1;
    if (want > 0) {
        unsigned nodes = (unsigned)want < ids ? (unsigned)want : ids;
        for (unsigned c = 0; c < ids; c++)
            page_cpu_node[c] = (uint8_t)(c * nodes / ids);
        page_nr_nodes = nodes;
        page_nodes_real = false;
    } else {
        page_nr_nodes = system_nodes();
        page_nodes_real = page_nr_nodes > 1;
    }
    memset(page_node_ncpus, 0, sizeof page_node_ncpus);
    for (unsigned c = 0; c < ids; c++)
        page_node_ncpus[page_cpu_node[c]]++;
    node_ids = ids;
    long phys = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    phys_pages = phys > 0 && psize > 0 ? (unsigned long)phys * (unsigned long)psize / SK_PAGE_SIZE : 0;
    for (unsigned n = 0; n < PAGE_NR_ZONES; n++)
        page_zones[n].zlc_full_until = 0;
}

unsigned page_node_here(void)
{
    if (likely(page_nr_nodes == 1))
        return 0;
    return page_cpu_node[cpu_current()];
}

struct zone *zone_of_node(unsigned nid, unsigned kind)
{
    return &page_zones[ZONE_ID(nid, kind)];
}

static bool zlc_full(const struct zone *z, uint64_t now)
{
    return now < __atomic_load_n(&z->zlc_full_until, __ATOMIC_RELAXED);
}

void zlc_mark_full(struct zone *z)
{
    /* Seed 001's patch 1: only when the cache is in use (before it,
     * written whatever the nodes). */
    if (page_nr_nodes > 1 || page_patch_before(PATCH_ZLC_ACTIVE))
        __atomic_store_n(&z->zlc_full_until, os_now_ms_coarse() + ZLC_MS, __ATOMIC_RELAXED);
}

unsigned long page_node_share(unsigned nid, unsigned long amount)
{
    return amount / node_ids * page_node_ncpus[nid] + amount % node_ids * page_node_ncpus[nid] / node_ids;
}

/* ---- dirty limits (seed 001's patches 2 and 6: zone_dirty_ok) ---- */

/* Node nid's limit of sk_file pages: file_dirty_ratio % of its share (by
 * CPUs) of the budget, or of the machine's memory; 0: none. */
static unsigned long node_dirty_limit(unsigned nid)
{
    unsigned long ratio = (unsigned long)sk_opt.file_dirty_ratio;
    unsigned long mem = __atomic_load_n(&page_budget.limit, __ATOMIC_RELAXED);
    return page_node_share(nid, (mem ? mem : phys_pages) / 100 * ratio);
}

/* Whether z may take another sk_file page for a write (the kernel's
 * zone_dirty_ok): its file pages within its node's limit.  What the
 * limit spreads is the file pages of a writer over the nodes, so that no
 * node fills with them while the others have room. */
static bool zone_dirty_ok(const struct zone *z)
{
    unsigned long limit = node_dirty_limit(zone_nid(z->node));
    return !limit || __atomic_load_n(&z->file_pages, __ATOMIC_RELAXED) <= limit;
}

/* ---- allowed nodes (the cpuset's role) ---- */

/* get_mempolicy(2)'s modes (linux/mempolicy.h; glibc has no header). */
enum { SK_MPOL_BIND = 2, SK_MPOL_INTERLEAVE = 3, SK_MPOL_PREFERRED_MANY = 5 };
#define ALLOWED_RECHECK_MS 1000

static unsigned allowed_compute(bool *hard)
{
    unsigned all = (1u << page_nr_nodes) - 1, mask = 0;
    *hard = false;
    if (page_nodes_real) {
        int mode = 0;
        unsigned long nodes[16] = { 0 };
        if (syscall(SYS_get_mempolicy, &mode, nodes, sizeof nodes * 8, NULL, 0ul) == 0 &&
            (mode == SK_MPOL_BIND || mode == SK_MPOL_INTERLEAVE || mode == SK_MPOL_PREFERRED_MANY)) {
            for (unsigned k = 0; k < sizeof nodes * 8; k++)
                if (nodes[k / (8 * sizeof nodes[0])] & (1ul << (k % (8 * sizeof nodes[0]))))
                    mask |= 1u << (k % PAGE_MAX_NODES);   /* a system node folds as in node_init */
            *hard = mode == SK_MPOL_BIND;
        }
    }
    if (!(mask & all)) {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (sched_getaffinity(0, sizeof set, &set) == 0)
            for (unsigned c = 0; c < CPU_SETSIZE && c <= CPU_MAX_IDS; c++)
                if (CPU_ISSET(c, &set))
                    mask |= 1u << page_cpu_node[c];
        *hard = false;
    }
    mask &= all;
    return mask ? mask : all;
}

unsigned page_allowed_nodes(bool *hard)
{
    uint64_t now = os_now_ms_coarse();
    if (!page_allowed.nodes || now - page_allowed.at >= ALLOWED_RECHECK_MS) {
        page_allowed.nodes = (uint8_t)allowed_compute(&page_allowed.hard);
        page_allowed.at = now;
    }
    *hard = page_allowed.hard;
    return page_allowed.nodes;
}

/*
 * The zonelist walk (the kernel's get_page_from_freelist, one pass for
 * its fast path and one for its slow path's softwall check): first the
 * thread's allowed nodes, then, unless a memory policy binds it, any
 * node.  A node is passed by while the zonelist cache has it full; for a
 * write of an sk_file page, while it is over its dirty limit (passed by,
 * not marked full: patch 2); and when its headroom is below its low mark
 * under a budget (marked full).
 */
struct zone *zonelist_pick(unsigned kind, unsigned long pages)
{
    if (likely(page_nr_nodes == 1))
        return zone_of_node(0, kind);
    unsigned home = page_node_here();
    uint64_t now = os_now_ms_coarse();
    bool hard;
    unsigned own = page_allowed_nodes(&hard), allowed = own, all = (1u << page_nr_nodes) - 1;
    /* Patch 6: whether the dirty limits apply, decided once (before it,
     * every zone's look tested the flags again). */
    bool dirty_once = !page_patch_before(PATCH_DIRTY_ONCE);
    bool consider_dirty = kind == ZONE_NORMAL && (page_alloc_ctx & PAGE_ALLOC_WRITE);
    for (unsigned pass = 0; pass < 2; pass++) {
        for (unsigned i = 0; i < page_nr_nodes; i++) {
            unsigned nid = (home + i) % page_nr_nodes;
            struct zone *z = zone_of_node(nid, kind);
            if (!(allowed & (1u << nid)) || zlc_full(z, now))
                continue;
            bool dirty = dirty_once ? consider_dirty : kind == ZONE_NORMAL && (page_alloc_ctx & PAGE_ALLOC_WRITE);
            if (dirty && !zone_dirty_ok(z)) {
                /* Patch 2: passed by (before it, marked full, which sent
                 * every other request away from the node for a second). */
                if (page_patch_before(PATCH_DIRTY_FULL))
                    zlc_mark_full(z);
                __atomic_fetch_add(&page_dirty_skips, 1, __ATOMIC_RELAXED);
                continue;
            }
            if (!page_node_below_low(nid, pages)) {
                if (nid != home)
                    __atomic_fetch_add(&page_node_fallbacks, 1, __ATOMIC_RELAXED);
                return z;
            }
            zlc_mark_full(z);
        }
        if (hard || allowed == all)
            break;
        allowed = all;    /* the softwall pass */
    }
    /* Every node full or over its dirty limit: the home node (the budget
     * decides), or under a bind that excludes it the first bound one. */
    if (hard && !(own & (1u << home)))
        home = (unsigned)__builtin_ctz(own);
    return zone_of_node(home, kind);
}

/* Whether a request that failed on z with errno may go on along the
 * zonelist: z's growth failed (zone_grow marked it in the zlc, so the
 * next pick passes it by), not the budget's refusal, which is the
 * process's and would refuse it on any node. */
static bool zonelist_retry(const struct zone *z)
{
    return page_nr_nodes > 1 && errno == ENOMEM && zlc_full(z, os_now_ms_coarse());
}

unsigned zonelist_alloc_bulk(unsigned order, unsigned mt, struct sk_page **out, unsigned n, struct zone **zp)
{
    unsigned got = 0;
    for (unsigned tries = 0; tries < page_nr_nodes && !got; tries++) {
        struct zone *z = *zp = zonelist_pick(ZONE_NORMAL, (unsigned long)n << order);
        if (!(got = zone_alloc_bulk(z, order, mt, out, n)) && !zonelist_retry(z))
            break;
    }
    return got;
}

struct sk_page *zonelist_alloc(unsigned kind, unsigned order, unsigned mt, size_t exact, unsigned align_order,
                               unsigned fit_order)
{
    struct sk_page *pg = NULL;
    for (unsigned tries = 0; tries < page_nr_nodes && !pg; tries++) {
        struct zone *z = zonelist_pick(kind, exact ? exact : 1ul << order);
        if (!(pg = zone_alloc(z, order, mt, exact, align_order, fit_order)) && !zonelist_retry(z))
            break;
    }
    return pg;
}

/* mbind(2), through syscall: glibc has no wrapper (libnuma has). */
#define SK_MPOL_PREFERRED 1

void page_node_bind(struct vm_slice *s, size_t bytes, unsigned nid)
{
    if (!page_nodes_real)
        return;
    unsigned long mask = 1ul << nid;
    /* Best effort: placement is a hint, and a kernel without NUMA says
     * ENOSYS. */
    (void)syscall(SYS_mbind, (void *)s->base, bytes, SK_MPOL_PREFERRED, &mask, sizeof mask * 8, 0u);
}

void page_node_stats(unsigned nid, struct page_node_stats *st)
{
    memset(st, 0, sizeof *st);
    if (nid >= page_nr_nodes)
        return;
    st->cpus = page_node_ncpus[nid];
    for (unsigned kind = ZONE_NORMAL; kind <= ZONE_LARGE; kind++) {
        const struct zone *z = zone_of_node(nid, kind);
        unsigned long managed = __atomic_load_n(&z->managed_pages, __ATOMIC_RELAXED);
        unsigned long free = __atomic_load_n(&z->free_pages, __ATOMIC_RELAXED);
        st->managed_pages += managed;
        st->free_pages += free;
        st->dirty_pages += __atomic_load_n(&z->dirty_pages, __ATOMIC_RELAXED);
        st->used_pages += managed > free ? managed - free : 0;
        st->charged_pages += zone_charged(z);
        st->file_pages += __atomic_load_n(&z->file_pages, __ATOMIC_RELAXED);
    }
    st->dirty_limit = node_dirty_limit(nid);
    st->full = zlc_full(zone_of_node(nid, ZONE_NORMAL), os_now_ms_coarse());
}
