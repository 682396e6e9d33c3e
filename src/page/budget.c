/*
 * budget.c — the memory budget and its watermarks: the kernel's zone
 * watermarks, kswapd and direct reclaim, against a limit on the memory
 * slabkit holds (mem_limit_mb, or the cgroup's memory limit).
 *
 * Charged: what the allocator holds resident or will touch: each zone's
 * pages in use (managed - free: slabs, blocks, the per-CPU page lists,
 * sk_file pages) and its free dirty pages, plus kmalloc's direct mappings
 * (page_budget_direct).  Clean free pages (purged, or never touched) are
 * not charged; neither is metadata (descriptors, cache structs).
 * headroom = limit - charged.  The watermarks are on headroom as the
 * kernel's are on a zone's free pages (3.15's __setup_per_zone_wmarks):
 * min = sqrt(16 x limit in KiB) KiB (min_free_kbytes' rule), at least
 * 128 KiB and at most 64 MiB or an eighth of the limit; low = min +
 * min/4, high = min + min/2.
 *
 * Admission (page_budget_admit), before a zone serves a request (a
 * refill of the per-CPU page lists, a large block) or a direct mapping is
 * made; the request is weighed as if it grew the resident memory (free
 * dirty pages are charged, as the kernel's page cache is not free
 * memory: reclaim is what frees them), by the headroom it would leave:
 *  - at or above low: granted;
 *  - below low: the background reclaimer is asked to bring headroom back
 *    to high (the purger thread in kswapd's role; a program without one
 *    relies on direct reclaim alone);
 *  - at or above the caller's mark: granted.  The mark is min;
 *    ALLOC_HIGH (__GFP_HIGH) halves it, ALLOC_HARDER (GFP_ATOMIC) takes a
 *    quarter off what is left, ALLOC_NO_WATERMARKS (the reclaimer itself,
 *    __GFP_MEMALLOC) makes it 0: never past the limit itself;
 *  - below it: direct reclaim, unless the context forbids it
 *    (PAGE_ALLOC_NORECLAIM: GFP_NOWAIT, GFP_ATOMIC): every free dirty
 *    page is purged (this layer's own reclaim), then the mark is weighed
 *    again; refused (ENOMEM) if still below, under a hard budget
 *    (mem_limit_mb=N, sk_mem_budget_set).  A soft one (the cgroup's
 *    limit, by default) lets it go on and counts an overrun: the kernel's
 *    memory controller enforces that limit on touched pages, and a block
 *    mapped but never touched, which glibc's malloc would give, must not
 *    fail here.  What upper layers keep
 *    (empty slabs in caches, sk_file pages that can be swapped) they give
 *    back in their own retry, where no lock is held (slab_release_all,
 *    the kernel API's retry, shmem_reclaim), and to the purger through
 *    the shrinkers (page_register_shrinker).
 * Nodes (node.c): each node's share of the budget is limit x its CPUs /
 * all CPUs, and so are its marks; a node below its low mark is full, and
 * requests go along the zonelist to the next node that is not (the
 * kernel's per-zone watermarks, with zone_reclaim_mode off).  Admission
 * stays the process's: the budget is one.
 * With no limit (mem_limit_mb=0 and no cgroup limit), page_budget.limit
 * is 0 and the allocation paths test that one word.
 *
 * Context: page_alloc_ctx, per thread, holds the PAGE_ALLOC_* flags of
 * the allocation under way; 0 (malloc) is the min mark with direct
 * reclaim.  The kernel API sets it from gfp around an allocation.
 *
 * Lock order: admission runs with no page-allocator lock held (upper
 * layers' locks may be held: the slab layer's, around a new slab); it
 * reads the zones' counters without their locks (atomic stores), and
 * direct reclaim takes them one at a time as page_reclaim does.  The shrinkers run only where no lock
 * is held (the purger; page_run_shrinkers' other callers say so).
 */
#include <errno.h>
#include <string.h>

#include "page/page_internal.h"

struct page_budget page_budget;
__thread unsigned page_alloc_ctx __attribute__((tls_model("initial-exec")));

#define BUDGET_MIN_FLOOR_PAGES ((128ul << 10) >> SK_PAGE_SHIFT)
#define BUDGET_MIN_CEIL_PAGES ((64ul << 20) >> SK_PAGE_SHIFT)
#define BUDGET_MAX_SHRINKERS 4

static unsigned long (*shrinkers[BUDGET_MAX_SHRINKERS])(unsigned long nr);

static unsigned long isqrt(unsigned long x)
{
    unsigned long r = 0, bit = 1ul << (sizeof(long) * 8 - 2);
    while (bit > x)
        bit >>= 2;
    while (bit) {
        if (x >= r + bit) {
            x -= r + bit;
            r = (r >> 1) + bit;
        } else {
            r >>= 1;
        }
        bit >>= 2;
    }
    return r;
}

void page_budget_set(unsigned long long bytes, bool hard)
{
    __atomic_store_n(&page_budget.hard, hard, __ATOMIC_RELAXED);
    unsigned long limit = (unsigned long)(bytes >> SK_PAGE_SHIFT);
    unsigned long min = 0;
    if (limit) {
        unsigned long kib = limit << (SK_PAGE_SHIFT - 10);
        min = (isqrt(kib * 16) << 10) >> SK_PAGE_SHIFT;
        if (min < BUDGET_MIN_FLOOR_PAGES)
            min = BUDGET_MIN_FLOOR_PAGES;
        if (min > BUDGET_MIN_CEIL_PAGES)
            min = BUDGET_MIN_CEIL_PAGES;
        if (min > limit / 8)
            min = limit / 8;
    }
    __atomic_store_n(&page_budget.wmark[PAGE_WMARK_MIN], min, __ATOMIC_RELAXED);
    __atomic_store_n(&page_budget.wmark[PAGE_WMARK_LOW], min + min / 4, __ATOMIC_RELAXED);
    __atomic_store_n(&page_budget.wmark[PAGE_WMARK_HIGH], min + min / 2, __ATOMIC_RELAXED);
    __atomic_store_n(&page_budget.limit, limit, __ATOMIC_RELEASE);
}

void budget_init(void)
{
    long mb = sk_opt.mem_limit_mb;
    if (mb > 0)
        page_budget_set((unsigned long long)mb << 20, true);
    else if (mb < 0)
        page_budget_set(os_cgroup_memory_limit(), false);   /* the kernel enforces it: soft here */
    else
        page_budget_set(0, false);
}

unsigned long page_charged(void)
{
    unsigned long charged = __atomic_load_n(&page_budget.direct_pages, __ATOMIC_RELAXED);
    for (unsigned n = 0; n < ZONE_ID(page_nr_nodes, 0); n++)
        charged += zone_charged(&page_zones[n]);
    return charged;
}

/* The headroom a request of `pages` would leave (negative: past the
 * limit). */
static long headroom_after(unsigned long pages)
{
    unsigned long limit = __atomic_load_n(&page_budget.limit, __ATOMIC_ACQUIRE);
    return (long)limit - (long)page_charged() - (long)pages;
}

/* The headroom a request with alloc flags `ctx` may leave. */
static long budget_mark(unsigned ctx)
{
    if (ctx & PAGE_ALLOC_NO_WATERMARKS)
        return 0;
    long mark = (long)__atomic_load_n(&page_budget.wmark[PAGE_WMARK_MIN], __ATOMIC_RELAXED);
    if (ctx & PAGE_ALLOC_HIGH)
        mark -= mark / 2;
    if (ctx & PAGE_ALLOC_HARDER)
        mark -= mark / 4;
    return mark;
}

static void stat_inc(unsigned long *c)
{
    __atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

/* Ask the purger to reclaim up to high: once per crossing (kswapd_wanted
 * stays set until it has run). */
static void wake_kswapd(void)
{
    if (__atomic_exchange_n(&page_budget.kswapd_wanted, 1, __ATOMIC_SEQ_CST))
        return;
    stat_inc(&page_budget.kswapd_wakes);
    purge_kick();
}

/* This layer's reclaim: purge every free dirty page.  Returns pages. */
static unsigned long reclaim_pages(void)
{
    return page_reclaim(0, false) >> SK_PAGE_SHIFT;
}

/* Whether headroom `after` is at or above `mark`; a grant below min (a
 * context allowed into the reserve) is counted. */
static bool granted(long after, long mark)
{
    if (after < mark)
        return false;
    if (after < (long)__atomic_load_n(&page_budget.wmark[PAGE_WMARK_MIN], __ATOMIC_RELAXED))
        stat_inc(&page_budget.below_min);   /* ALLOC_HIGH / HARDER dipped into the reserve */
    return true;
}

bool page_budget_admit(unsigned long pages)
{
    long after = headroom_after(pages);
    /* 3.15-rc1 tested ALLOC_NO_WATERMARKS before every watermark check;
     * seed 001's patch 7 tests it only once the check failed. */
    if (unlikely(page_patch_before(PATCH_NO_WATERMARKS)) && (page_alloc_ctx & PAGE_ALLOC_NO_WATERMARKS))
        return granted(after, budget_mark(page_alloc_ctx));
    if (likely(after >= (long)__atomic_load_n(&page_budget.wmark[PAGE_WMARK_LOW], __ATOMIC_RELAXED)))
        return true;
    unsigned ctx = page_alloc_ctx;
    if (!(ctx & PAGE_ALLOC_NO_WATERMARKS))
        wake_kswapd();
    long mark = budget_mark(ctx);
    if (granted(after, mark))
        return true;
    if (!(ctx & PAGE_ALLOC_NORECLAIM)) {
        stat_inc(&page_budget.direct_reclaims);
        __atomic_fetch_add(&page_budget.direct_pages_reclaimed, reclaim_pages(), __ATOMIC_RELAXED);
        if (granted(headroom_after(pages), mark))
            return true;
    }
    if (!__atomic_load_n(&page_budget.hard, __ATOMIC_RELAXED)) {
        /* The cgroup's limit: reclaim was done or asked for, but the
         * kernel's memory controller decides, counting only the pages
         * touched (a block mapped and never touched costs it nothing), as
         * it does for glibc's malloc: refusing here would fail programs
         * glibc runs. */
        stat_inc(&page_budget.overruns);
        return true;
    }
    stat_inc(&page_budget.refused);
    return false;
}

unsigned page_budget_blocks(unsigned n, unsigned order)
{
    if (headroom_after((unsigned long)n << order) >=
        (long)__atomic_load_n(&page_budget.wmark[PAGE_WMARK_LOW], __ATOMIC_RELAXED))
        return n;
    return page_budget_admit(1ul << order) ? 1 : 0;
}

bool page_node_below_low(unsigned nid, unsigned long pages)
{
    unsigned long limit = __atomic_load_n(&page_budget.limit, __ATOMIC_RELAXED);
    if (likely(!limit) || page_nr_nodes == 1)
        return false;
    /* The node's share of the budget and of its marks, by its CPUs. */
    unsigned long share = page_node_share(nid, limit);
    unsigned long low = page_node_share(nid, __atomic_load_n(&page_budget.wmark[PAGE_WMARK_LOW], __ATOMIC_RELAXED));
    unsigned long charged = zone_charged(zone_of_node(nid, ZONE_NORMAL)) + zone_charged(zone_of_node(nid, ZONE_LARGE));
    return (long)share - (long)charged - (long)pages < (long)low;
}

bool page_budget_below(unsigned wmark, unsigned long pages)
{
    if (likely(!__atomic_load_n(&page_budget.limit, __ATOMIC_RELAXED)))
        return false;
    return headroom_after(pages) < (long)__atomic_load_n(&page_budget.wmark[wmark], __ATOMIC_RELAXED);
}

long page_budget_direct(long pages)
{
    return (long)__atomic_add_fetch(&page_budget.direct_pages, (unsigned long)pages, __ATOMIC_RELAXED);
}

void page_register_shrinker(unsigned long (*fn)(unsigned long nr))
{
    for (int i = 0; i < BUDGET_MAX_SHRINKERS; i++) {
        unsigned long (*none)(unsigned long) = NULL;
        if (__atomic_load_n(&shrinkers[i], __ATOMIC_ACQUIRE) == fn ||
            __atomic_compare_exchange_n(&shrinkers[i], &none, fn, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return;
    }
    os_fatal("page_register_shrinker: more than %d shrinkers", BUDGET_MAX_SHRINKERS);
}

unsigned long page_run_shrinkers(unsigned long nr)
{
    unsigned long got = 0;
    unsigned saved = page_alloc_ctx;
    page_alloc_ctx = saved | PAGE_ALLOC_NO_WATERMARKS | PAGE_ALLOC_NORECLAIM;   /* PF_MEMALLOC */
    for (int i = 0; i < BUDGET_MAX_SHRINKERS; i++) {
        unsigned long (*fn)(unsigned long) = __atomic_load_n(&shrinkers[i], __ATOMIC_ACQUIRE);
        if (fn)
            got += fn(nr > got ? nr - got : 0);
    }
    page_alloc_ctx = saved;
    return got;
}

void budget_background(void)
{
    if (!__atomic_load_n(&page_budget.kswapd_wanted, __ATOMIC_ACQUIRE))
        return;
    long high = (long)__atomic_load_n(&page_budget.wmark[PAGE_WMARK_HIGH], __ATOMIC_RELAXED);
    stat_inc(&page_budget.kswapd_runs);
    /* Cheapest first: purge what is free; then the upper layers'
     * shrinkers (empty slabs, swappable file pages), each round's pages
     * purged in turn, until high or a round that frees nothing. */
    for (int round = 0; round < 8; round++) {
        unsigned long got = reclaim_pages();
        long after = headroom_after(0);
        if (after < high) {
            page_drain_pcp();
            got += page_run_shrinkers((unsigned long)(high - after));
            got += reclaim_pages();
        }
        __atomic_fetch_add(&page_budget.kswapd_pages, got, __ATOMIC_RELAXED);
        if (!got || headroom_after(0) >= high)
            break;
    }
    __atomic_store_n(&page_budget.kswapd_wanted, 0, __ATOMIC_RELEASE);
}

/* ---- the API (slabkit.h) ---- */

static size_t bytes_of(const unsigned long *pages)
{
    return __atomic_load_n(pages, __ATOMIC_RELAXED) << SK_PAGE_SHIFT;
}

static unsigned long count_of(const unsigned long *c)
{
    return __atomic_load_n(c, __ATOMIC_RELAXED);
}

void sk_mem_budget(struct sk_mem_budget *out)
{
    memset(out, 0, sizeof *out);
    if (page_init() != 0)
        return;
    const struct page_budget *b = &page_budget;
    out->limit = (size_t)__atomic_load_n(&b->limit, __ATOMIC_ACQUIRE) << SK_PAGE_SHIFT;
    out->min = bytes_of(&b->wmark[PAGE_WMARK_MIN]);
    out->low = bytes_of(&b->wmark[PAGE_WMARK_LOW]);
    out->high = bytes_of(&b->wmark[PAGE_WMARK_HIGH]);
    out->charged = page_charged() << SK_PAGE_SHIFT;
    out->direct = bytes_of(&b->direct_pages);
    out->kswapd_wakes = count_of(&b->kswapd_wakes);
    out->kswapd_runs = count_of(&b->kswapd_runs);
    out->kswapd_reclaimed = bytes_of(&b->kswapd_pages);
    out->direct_reclaims = count_of(&b->direct_reclaims);
    out->direct_reclaimed = bytes_of(&b->direct_pages_reclaimed);
    out->below_min = count_of(&b->below_min);
    out->refused = count_of(&b->refused);
    out->overruns = count_of(&b->overruns);
    out->hard = __atomic_load_n(&b->hard, __ATOMIC_RELAXED);
}

void sk_mem_budget_set(size_t bytes)
{
    if (page_init() == 0)
        page_budget_set(bytes, true);
}
