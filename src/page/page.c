/*
 * page.c — the page allocator's shared state and its public face: the
 * zones and per-CPU lists (page_zones, page_pcp), the statistics, and
 * sk_alloc_pages/sk_free_pages.  The allocator itself is split along its
 * seams (page_internal.h has what they share):
 *   buddy.c    zones, free lists per order, splitting and merging, growth
 *              (slices, partial slices, the frontier), exact blocks and
 *              runs, giving whole free slices back;
 *   pcp.c      the per-CPU page lists in front of zone 0, their tuning
 *              and draining, the exact-block cache, page_alloc/page_free;
 *   reclaim.c  aging, purging and the trim threshold, the purger's hooks;
 *   purge.c    the purger thread's policy;
 *   fork.c     the forked child's rebuild of the free lists.
 *
 * Zones: page_zones[0] holds slab pages and sk_alloc_pages blocks (with
 * the per-CPU lists in front); page_zones[1] holds large kmalloc blocks
 * (exact page counts, resized in place), but for those it could serve
 * only with memory not resident, which borrow zone 0's (zone_borrow).
 * Each block records its zone in pg->node, so every free goes back where
 * it came from.
 *
 * Lock order (every file of src/page):
 *   1. zone->grow_lock (an sk_mutex: one thread maps memory for a zone at
 *                    a time; held across the system calls that grow or
 *                    release the zone's slices)
 *   2. zone->lock   (an sk_mutex: held for list surgery, never across a
 *                    system call: slices are made and memory purged with
 *                    the lock dropped)
 *   3. vm_lock      (leaf, inside src/vm)
 * The per-CPU page lists are per-CPU arrays (src/cpu): no lock in rseq
 * mode, the array's own spinlock in the fallback; never taken with the
 * zone lock held except by page_drain_pcp's remote drain (array lock is a
 * leaf).
 * Invariants: buddy.c's and pcp.c's heads state them for their parts;
 * the statistics here are read with the zone locks, one zone at a time.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "page/page_internal.h"

struct zone page_zones[PAGE_NR_ZONES];
/* Until page_init, always-empty lists (like kmalloc's tables): anything
 * that walks them early (the fork child) finds nothing. */
struct pcp_set page_pcp = { .lists = { [0 ... PCP_NR_LISTS - 1] = cpu_empty_arrays } };
bool page_ready;
bool pcp_enabled;
unsigned long page_pcp_fresh_drains;   /* statistics (relaxed) */
unsigned long page_pcp_local_empties, page_pcp_local_blocks;

/* ---- seed 001's series ---- */

uint32_t page_before;
const char *const page_patch_names[PAGE_NR_PATCHES] = {
    [PATCH_ZLC_ACTIVE] = "zlc",
    [PATCH_DIRTY_FULL] = "dirty_full",
    [PATCH_BUDDY_ZONE_ID] = "buddy_zone_id",
    [PATCH_DIRTY_ONCE] = "dirty_once",
    [PATCH_NO_WATERMARKS] = "no_watermarks",
    [PATCH_PAGEBLOCK_WORD] = "pageblock_word",
    [PATCH_PFN_ONCE] = "pfn_once",
    [PATCH_FREE_MT_UNLOCKED] = "free_mt_unlocked",
    [PATCH_SHMEM_GETPAGE] = "shmem_getpage",
    [PATCH_RELEASE_PAGES] = "release_pages",
    [PATCH_LRU_ADD] = "lru_add",
    [PATCH_ACCESSED] = "accessed",
    [PATCH_PREFETCH_FLAGS] = "prefetch_flags",
};
const uint8_t page_patch_numbers[PAGE_NR_PATCHES] = {
    [PATCH_ZLC_ACTIVE] = 1, [PATCH_DIRTY_FULL] = 2, [PATCH_BUDDY_ZONE_ID] = 5, [PATCH_DIRTY_ONCE] = 6,
    [PATCH_NO_WATERMARKS] = 7, [PATCH_PAGEBLOCK_WORD] = 8,
    [PATCH_PFN_ONCE] = 9, [PATCH_FREE_MT_UNLOCKED] = 10, [PATCH_SHMEM_GETPAGE] = 12, [PATCH_RELEASE_PAGES] = 13,
    [PATCH_LRU_ADD] = 14, [PATCH_ACCESSED] = 15, [PATCH_PREFETCH_FLAGS] = 16,
};

/* page_before from page_microopt and the page_before names (page_init);
 * an unknown name is warned about and ignored. */
void page_series_init(void)
{
    uint32_t mask = sk_opt.page_microopt ? 0 : (1u << PAGE_NR_PATCHES) - 1;
    for (const char *p = sk_opt.page_before; *p;) {
        size_t len = strcspn(p, ":");
        unsigned i = 0;
        while (i < PAGE_NR_PATCHES && !(strlen(page_patch_names[i]) == len && !strncmp(p, page_patch_names[i], len)))
            i++;
        if (i < PAGE_NR_PATCHES)
            mask |= 1u << i;
        else
            os_warn("SLABKIT_OPTIONS: page_before: no patch '%.*s' (see docs/shmem.md): ignored", (int)len, p);
        p += len + (p[len] == ':');
    }
    page_before = mask;
}

void page_stats(struct page_stats *st)
{
    memset(st, 0, sizeof *st);
    for (int n = 0; n < PAGE_NR_ZONES; n++) {
        struct zone *z = &page_zones[n];
        lock_acquire(&z->lock);
        st->managed_pages += z->managed_pages;
        st->free_pages += z->free_pages;
        st->dirty_pages += z->dirty_pages;
        st->purged_pages += z->purged_pages;
        for (unsigned mt = 0; mt < MIGRATE_TYPES; mt++) {
            for (unsigned o = 0; o <= SK_MAX_ORDER; o++) {
                unsigned long nr = z->dirty[mt][o].nr + z->clean[mt][o].nr;
                st->free_blocks[o] += nr;
                st->mt_free_pages[mt] += nr << o;
            }
            if (mt != pageblock_default_mt())
                st->mt_pageblocks[mt] += z->mt_pageblocks[mt];
        }
        st->mt_pageblocks[pageblock_default_mt()] += z->managed_pages / PAGEBLOCK_PAGES;
        st->mt_fallbacks += z->mt_fallbacks;
        st->mt_claims += z->mt_claims;
        lock_release(&z->lock);
    }
    /* The default type has the pageblocks no request claimed. */
    unsigned long claimed = 0;
    for (unsigned mt = 0; mt < MIGRATE_TYPES; mt++)
        if (mt != pageblock_default_mt())
            claimed += st->mt_pageblocks[mt];
    unsigned long *def = &st->mt_pageblocks[pageblock_default_mt()];
    *def = *def > claimed ? *def - claimed : 0;
    st->purger_wakeups = __atomic_load_n(&page_purger.wakeups, __ATOMIC_RELAXED);
    st->purger_ticks = __atomic_load_n(&page_purger.ticks, __ATOMIC_RELAXED);
    st->purger_pages = __atomic_load_n(&page_purger.pages, __ATOMIC_RELAXED);
    st->purger_drained = __atomic_load_n(&page_purger.drained, __ATOMIC_RELAXED);
    st->pcp_fresh_drains = __atomic_load_n(&page_pcp_fresh_drains, __ATOMIC_RELAXED);
    st->pcp_local_empties = __atomic_load_n(&page_pcp_local_empties, __ATOMIC_RELAXED);
    st->pcp_local_blocks = __atomic_load_n(&page_pcp_local_blocks, __ATOMIC_RELAXED);
    st->pcp_grows = __atomic_load_n(&page_pcp_grows, __ATOMIC_RELAXED);
    unsigned long cb, cp;
    exact_cached(&cb, &cp);   /* free blocks on a per-CPU list too */
    st->pcp_pages = pcp_enabled ? pcp_pages() + cp : 0;
}

/* ---- the public page API ---- */

void *sk_alloc_pages(unsigned order)
{
    int saved = errno;
    if (page_init() != 0)
        return NULL;
    /* Its migratetype from the kernel API's gfp (__GFP_MOVABLE,
     * __GFP_RECLAIMABLE), unmovable otherwise. */
    unsigned mt = page_alloc_ctx & PAGE_ALLOC_MOVABLE       ? MIGRATE_MOVABLE
                  : page_alloc_ctx & PAGE_ALLOC_RECLAIMABLE ? MIGRATE_RECLAIMABLE
                                                            : MIGRATE_UNMOVABLE;
    struct sk_page *pg = page_alloc_mt(order, mt);
    if (!pg && order <= SK_MAX_ORDER && page_release_free(true))
        pg = page_alloc_mt(order, mt);   /* the other zone's free slices, given back */
    page_purger_poll();
    return os_errno_restore(pg ? page_address(pg) : NULL, saved);
}

void sk_free_pages(void *block, unsigned order)
{
    if (!block)
        return;
    struct sk_page *pg = page_of(block);
    if (!pg || page_address(pg) != block || (pg->flags & (PG_HEAD | PG_SLAB | PG_LARGE)) != PG_HEAD)
        os_fatal("invalid pointer: sk_free_pages(%p, %u) is not a block from sk_alloc_pages", block, order);
    if (pg->order != order)
        os_fatal("bad order: sk_free_pages(%p, %u) of a block of order %u", block, order, pg->order);
    page_free(pg, order);
}

int sk_page_order(const void *p)
{
    struct sk_page *pg = page_of(p);
    if (!pg || page_address(pg) != p)
        return -1;
    uint32_t f = __atomic_load_n(&pg->flags, __ATOMIC_RELAXED);
    return (f & PG_HEAD) ? pg->order : -1;
}

