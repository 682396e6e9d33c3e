/*
 * page.c — the buddy allocator: zones, free lists per order, splitting and
 * coalescing, per-CPU page lists, aging and returning memory to the OS.
 *
 * Zones: page_zones[0] holds slab pages and sk_alloc_pages blocks (with
 * the per-CPU lists in front); page_zones[1] holds large kmalloc blocks
 * (exact page counts, resized in place), but for those it could serve
 * only with memory not resident, which borrow zone 0's (zone_borrow).
 * Each block records its zone in pg->node, so every free goes back where
 * it came from.
 *
 * Growth: a zone gets memory from the arena a slice at a time, or, when
 * the arena cannot grow (an address-space limit, a full address space),
 * as a partial slice that grows in place (doubling, from 256 KiB) while
 * the address space above it is free.  Zone 0's base-page arena slices
 * join it the same way, 256 KiB doubling (the frontier slice,
 * zone_grow_frontier).  After a failed allocation, page_release_free
 * gives wholly free slices back to the OS (a whole block of the largest
 * order, a partial slice's mapped prefix, the frontier's joined part), so
 * that what one zone freed can serve the other under a tight limit.
 *
 * Lock order:
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
 *
 * Invariants (zone->lock held):
 *  - Every free block is on exactly one list: dirty[order] (resident,
 *    newest first, so the tail is the oldest) or clean[order] (known zero:
 *    purged, or fresh from the OS).  Its head descriptor has PG_BUDDY,
 *    PG_CLEAN iff on a clean list, order, span (0 iff clean: the pages
 *    from its start that may be resident) and freed_at (dirty only).
 *  - Two free buddies of the same order are never both on lists: freeing
 *    merges until the buddy is not free (or is of another order).
 *  - free_pages = sum of free block sizes; dirty_pages = sum of the dirty
 *    blocks' spans (an upper bound of what is resident: a block merged
 *    from a clean lower and a dirty upper half counts as dirty whole).
 *    Spans keep a merge of resident and clean memory from losing track
 *    of the clean part: split again, the clean half goes back clean
 *    instead of being purged later as if it were resident.
 *  - A partial slice's blocks lie in its mapped prefix: its descriptors
 *    past `mapped` stay zero, so no buddy there ever merges.  Every
 *    partial slice of the zone is on z->partials.  Likewise the frontier
 *    slice's blocks lie below frontier_next, its descriptors past it zero.
 * Blocks on per-CPU lists are outside the zone (PG_PCP): they never merge
 * until drained back, and they count in no zone total.  They are drained
 * back before a request would take never-used memory while they hold
 * enough (zone_drain_before_fresh).
 *
 * Aging: recently freed blocks are reused first (dirty lists are LIFO and
 * searched before clean ones).  Blocks free for longer than decay_ms, and
 * the oldest beyond dirty_max_mb, are purged (MADV_DONTNEED) and become
 * clean; reclaim runs from the slow paths at most every decay_ms/4, and
 * from the purger thread (purge.c) while the program is idle.  The hooks
 * for the purger are here (zone_purge, zone_dirtied_since, pcp_drain_idle):
 * it takes a zone lock only with a try-lock.  A free that gives a zone
 * dirty blocks records it (dirtied_at, dirty_seq) and, if it finds the
 * purger asleep (page_purger.work read under the zone lock), wakes it
 * after the unlock (zone_release_dirtied).
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "page/page_internal.h"

struct zone page_zones[MAX_NUMNODES];
/* Until page_init, always-empty lists (like kmalloc's tables): anything
 * that walks them early (the fork child) finds nothing. */
struct pcp_set page_pcp = { .lists = { [0 ... PCP_EXACT] = cpu_empty_arrays } };
static bool page_ready;
static bool pcp_enabled;
static unsigned long page_pcp_fresh_drains;   /* statistics (relaxed) */
static unsigned long page_pcp_local_empties, page_pcp_local_blocks;

/* ---- lists ---- */

static inline struct page_list *list_of(struct zone *z, unsigned order, bool clean)
{
    return clean ? &z->clean[order] : &z->dirty[order];
}

static inline void list_add_head(struct page_list *l, struct sk_page *pg)
{
    pg->buddy.prev = NULL;
    pg->buddy.next = l->head;
    if (l->head)
        l->head->buddy.prev = pg;
    else
        l->tail = pg;
    l->head = pg;
    l->nr++;
}

static inline void list_del(struct page_list *l, struct sk_page *pg)
{
    if (pg->buddy.prev)
        pg->buddy.prev->buddy.next = pg->buddy.next;
    else
        l->head = pg->buddy.next;
    if (pg->buddy.next)
        pg->buddy.next->buddy.prev = pg->buddy.prev;
    else
        l->tail = pg->buddy.prev;
    l->nr--;
}

/* Put a free block on its list (no merging); span 0: clean. */
static void zone_insert(struct zone *z, struct sk_page *pg, unsigned order, unsigned long span, uint64_t now)
{
    bool clean = span == 0;
    /* Order first, then the flag that makes the descriptor a free block's
     * head (release): a fork caught in between must not see PG_BUDDY with
     * a stale order, which zone_rebuild would trust. */
    pg->order = (uint8_t)order;
    pg->buddy.freed_at = now;
    pg->buddy.span = (uint32_t)span;
    __atomic_store_n(&pg->flags, PG_BUDDY | (clean ? PG_CLEAN : 0), __ATOMIC_RELEASE);
    list_add_head(list_of(z, order, clean), pg);
    /* Atomic: page_purger_wanted reads it without the lock. */
    __atomic_store_n(&z->free_pages, z->free_pages + (1ul << order), __ATOMIC_RELAXED);
    z->dirty_pages += span;
}

/* Take a free block off its list; returns its span (0: it was clean). */
static unsigned long zone_remove(struct zone *z, struct sk_page *pg)
{
    bool clean = pg_flags(pg) & PG_CLEAN;
    unsigned order = pg->order;
    unsigned long span = clean ? 0 : pg->buddy.span;
    list_del(list_of(z, order, clean), pg);
    pg_set_flags(pg, 0);
    __atomic_store_n(&z->free_pages, z->free_pages - (1ul << order), __ATOMIC_RELAXED);
    z->dirty_pages -= span;
    return span;
}

/* The first descriptor of pg's slice. */
static inline struct sk_page *page_first(const struct sk_page *pg)
{
    return (struct sk_page *)page_slice(pg)->pages;
}

/* Free a block whose first `span` pages may be resident (0: clean, all of
 * it: 1 << order), merging with free buddies (the kernel's
 * __free_one_page). */
static void zone_free_block(struct zone *z, struct sk_page *pg, unsigned order, unsigned long span, uint64_t now)
{
    struct sk_page *first = page_first(pg);
    size_t idx = (size_t)(pg - first);
    uint64_t freed_at = now;
    pg_set_flags(pg, 0);    /* it may end up inside a merged block: no stale head */
    while (order < SK_MAX_ORDER) {
        size_t half = (size_t)1 << order, bidx = idx ^ half;
        struct sk_page *buddy = first + bidx;
        if (!(pg_flags(buddy) & PG_BUDDY) || buddy->order != order)
            break;
        /* The merged block's age is its resident parts' ages weighted by
         * their spans: steady small frees do not renew memory that sits
         * unused (a 4 KiB free barely moves an old 1 MiB span), and a
         * large block just freed is not purged at once for an old, free
         * tail it merges with (which the oldest part's age did: a loop of
         * large blocks then purged and faulted nearly every block). */
        unsigned long bs = (pg_flags(buddy) & PG_CLEAN) ? 0 : buddy->buddy.span;
        if (bs)
            freed_at = span ? (freed_at * span + buddy->buddy.freed_at * bs) / (span + bs) : buddy->buddy.freed_at;
        unsigned long bspan = zone_remove(z, buddy);
        /* The merged span covers the lower half's, and the upper half's
         * past a whole lower half. */
        unsigned long lo = bidx < idx ? bspan : span, hi = bidx < idx ? span : bspan;
        span = hi ? half + hi : lo;
        idx &= bidx;
        order++;
    }
    zone_insert(z, first + idx, order, span, span ? freed_at : now);
}

/* Split a block of order `high` with `span` down to `low`; the upper
 * halves go back on the lists with their part of the span (clean past
 * it) and the parent's age.  Returns the span left to the low block. */
static unsigned long zone_expand(struct zone *z, struct sk_page *pg, unsigned low, unsigned high,
                                 unsigned long span, uint64_t freed_at)
{
    while (high > low) {
        high--;
        unsigned long half = 1ul << high;
        zone_insert(z, pg + half, high, span > half ? span - half : 0, freed_at);
        if (span > half)
            span = half;
    }
    return span;
}

/* Take a block of `order` off the lists: dirty (resident) memory first,
 * smallest fitting order first.  *span_out: the pages from its start that
 * may be resident (0: clean). */
static struct sk_page *zone_take(struct zone *z, unsigned order, unsigned long *span_out)
{
    for (int pass = 0; pass < 2; pass++) {
        bool clean = pass == 1;
        for (unsigned o = order; o <= SK_MAX_ORDER; o++) {
            struct page_list *l = list_of(z, o, clean);
            struct sk_page *pg = l->head;
            if (!pg)
                continue;
            uint64_t freed_at = pg->buddy.freed_at;
            if (clean)
                __atomic_store_n(&z->clean_takes, z->clean_takes + 1, __ATOMIC_RELAXED);
            z->takes++;
            unsigned long span = zone_remove(z, pg);
            *span_out = zone_expand(z, pg, order, o, span, freed_at);
            return pg;
        }
    }
    return NULL;
}

static void zone_free_range(struct zone *z, struct sk_page *first, size_t idx, size_t end, size_t dirty_end,
                            uint64_t now);

/* Hand [idx, end) of slice s to the zone as free blocks (zone->lock held). */
static void zone_add_range(struct zone *z, struct vm_slice *s, size_t idx, size_t end, bool clean)
{
    /* Atomic: zone_grow reads it unlocked to choose the page size. */
    __atomic_store_n(&z->managed_pages, z->managed_pages + (end - idx), __ATOMIC_RELAXED);
    zone_free_range(z, (struct sk_page *)s->pages, idx, end, clean ? idx : end, 0);
    z->grow_gen++;
}

/* A partial slice starts with this much mapped (or what the request
 * needs), and doubles each time it grows. */
#define PARTIAL_START_PAGES ((size_t)(256 << 10) >> SK_PAGE_SHIFT)
/* Address space a partial slice's step leaves to the program under a
 * limit (zone_grow_partial). */
#define PARTIAL_KEEP_ROOM ((size_t)2 << 20)

/*
 * A slice that joins its zone a step at a time (a partial slice's mapped
 * prefix, the frontier slice's joined part) starts with PARTIAL_START_PAGES
 * or the request's block, and then at least doubles: a step from m pages
 * ends at `least` or 2m, within the slice.  A block of `order` needs
 * least = its aligned place past m, and its size.
 */
static size_t step_first(unsigned order)
{
    size_t need = (size_t)1 << order;
    return need > PARTIAL_START_PAGES ? need : PARTIAL_START_PAGES;
}

static size_t step_least(size_t m, unsigned order)
{
    size_t need = (size_t)1 << order;
    return SK_ALIGN_UP(m, need) + need;
}

static size_t step_end(size_t m, size_t least)
{
    size_t end = 2 * m < least ? least : 2 * m;
    return end > SLICE_PAGES ? SLICE_PAGES : end;
}

/* Grow the zone's open partial slice in place to hold a block of `order`:
 * 0, or -1 with errno EEXIST (no room above: the slice is closed) or
 * ENOMEM.  grow_lock held. */
static int zone_grow_partial(struct zone *z, unsigned order)
{
    struct vm_slice *s = z->partial;
    size_t m = s->mapped >> SK_PAGE_SHIFT, least = step_least(m, order);
    if (least > SLICE_PAGES) {
        z->partial = NULL;        /* full enough: the next growth starts another */
        errno = EEXIST;
        return -1;
    }
    /* Under an address-space limit, steps of at most 1/64 of it: doubling
     * would take address space the program's own mappings need later
     * (python3's arenas under `ulimit -v`). */
    size_t end = step_end(m, least), limit = os_limit_bytes();
    if (limit != SIZE_MAX) {
        size_t most = m + ((limit / 64) >> SK_PAGE_SHIFT);
        if (end > most)
            end = most > least ? most : least;
        /* Near the limit, only what the request needs: a step's unused
         * tail took what the program's own next mapping needed (python3's
         * 1 MiB arenas), and python3 failed at some limits and ran at
         * lower ones.  PARTIAL_KEEP_ROOM is left to the program where a
         * step would eat into it. */
        size_t room = os_limit_room();
        if (((end - m) << SK_PAGE_SHIFT) + PARTIAL_KEEP_ROOM > room)
            end = least;
    }
    int r = vm_partial_grow(s, end << SK_PAGE_SHIFT);
    if (r != 0 && errno == ENOMEM && end > least) {
        end = least;              /* refused: exactly what the request needs */
        r = vm_partial_grow(s, end << SK_PAGE_SHIFT);
    }
    if (r != 0) {
        if (errno == EEXIST)
            z->partial = NULL;    /* someone's mapping lies above: closed */
        return -1;
    }
    lock_acquire(&z->lock);
    zone_add_range(z, s, m, end, true);
    lock_release(&z->lock);
    if (end == SLICE_PAGES)
        z->partial = NULL;
    return 0;
}

/* A new partial slice holding at least a block of `order`; grow_lock held. */
static int zone_new_partial(struct zone *z, unsigned order)
{
    size_t need = (size_t)1 << order, pages = step_first(order);
    struct vm_slice *s = vm_partial_new(pages << SK_PAGE_SHIFT, sizeof(struct sk_page));
    if (!s && pages > need) {
        pages = need;
        s = vm_partial_new(pages << SK_PAGE_SHIFT, sizeof(struct sk_page));
    }
    if (!s)
        return -1;
    s->zone = z;
    s->node = (uint16_t)z->node;
    lock_acquire(&z->lock);
    s->zone_next = z->partials;
    z->partials = s;
    zone_add_range(z, s, 0, pages, true);
    lock_release(&z->lock);
    z->partial = pages < SLICE_PAGES ? s : NULL;
    return 0;
}

/*
 * Exact (large kmalloc) blocks come from a zone of their own: slab pages
 * scattered among them would keep their free neighbours from merging, and
 * a request for tens of pages would then fault fresh memory while freed
 * memory sits resident in pieces (the kernel keeps movable pages apart in
 * ZONE_MOVABLE for the same reason).  It is node slot 1, so page_free finds
 * it through pg->node like any other zone.  A large block that only clean
 * memory of its zone could serve borrows resident memory of zone 0
 * instead (zone_borrow), and lives there.
 */
#define ZONE_LARGE 1
static struct zone *zone_large(void)
{
    return &page_zones[ZONE_LARGE];
}

static struct zone *zone_here(void)
{
    return &page_zones[0];   /* one node here; the structures allow more */
}

/*
 * A new base-page arena slice joins the slab zone a step at a time, as a
 * partial slice is mapped (step_first, step_end): the buddy split of a
 * whole slice for the first small request wrote a free block's head every
 * power of two pages, 0, 1, 2, 4 ... 8192 pages in: nine of the slice
 * header's 257 pages touched for one slab page (28 KiB of RSS more than
 * needed in every process).  Now the zone's descriptors are touched where
 * its pages are used (tests/page/frontier).  The pages past frontier_next
 * have zero descriptors, so nothing merges with them or grows into them,
 * as past a partial slice's mapped prefix.  Huge-page slices join whole:
 * the first touch faults in 2 MiB anyway; so do the large blocks' zone's:
 * a block at the frontier could not grow in place (realloc), and a program
 * with large blocks has them in its RSS anyway.  All three below run with
 * grow_lock held.
 */

/* Past its first 4 MiB the frontier slice is advised onto huge pages
 * (huge_slices=1): a program that has used that much is not small, and
 * its slabs and their descriptors then cost one TLB entry per 2 MiB, not
 * per 4 KiB (larson, 4 threads: 7% less time).  The steps that join are
 * powers of two, so from 4 MiB on each is whole huge pages. */
#define FRONTIER_HUGE_FROM ((size_t)(4 << 20) >> SK_PAGE_SHIFT)
/* The order of a whole huge page. */
#define HUGE_ORDER (HUGE_PAGE_SHIFT - SK_PAGE_SHIFT)

/* The frontier slice's pages up to `end` join the zone (advised first:
 * no page of the step is touched before). */
static void zone_frontier_join(struct zone *z, size_t end)
{
    size_t from = z->frontier_next > FRONTIER_HUGE_FROM ? z->frontier_next : FRONTIER_HUGE_FROM;
    if (sk_opt.huge_slices && end > from)
        vm_slice_advise_huge(z->frontier, SK_ALIGN_DOWN(from, (size_t)1 << HUGE_ORDER), end);
    lock_acquire(&z->lock);
    zone_add_range(z, z->frontier, z->frontier_next, end, true);
    z->frontier_next = end;
    lock_release(&z->lock);
    if (end == SLICE_PAGES)
        __atomic_store_n(&z->frontier, NULL, __ATOMIC_RELAXED);
}

/* Room for a block of `order`: 0, or -1 when it does not fit in what is
 * left of the slice (which then joins, and the frontier closes). */
static int zone_grow_frontier(struct zone *z, unsigned order)
{
    size_t m = z->frontier_next, least = step_least(m, order);
    zone_frontier_join(z, least > SLICE_PAGES ? SLICE_PAGES : step_end(m, least));
    return least <= SLICE_PAGES ? 0 : -1;
}

/* A block of slice s that grows in place to page `end` (page_resize_exact:
 * a large block borrowed from this zone) needs the pages up to there
 * joined.  Called without any lock: takes grow_lock if s is the frontier. */
static void zone_frontier_reach(struct zone *z, const struct vm_slice *s, size_t end)
{
    if (__atomic_load_n(&z->frontier, __ATOMIC_RELAXED) != s)
        return;
    lock_acquire(&z->grow_lock);
    if (z->frontier == s && z->frontier_next < end)
        zone_frontier_join(z, step_end(z->frontier_next, end));
    lock_release(&z->grow_lock);
}

/*
 * Add memory to the zone for a block of `order`: called without the zone
 * lock, with `gen` the zone's grow_gen when the caller found no block (if
 * another thread has grown the zone since, there is nothing to do: retry).
 * In turn: grow the open partial slice in place; a new arena slice; a new
 * partial slice (when the arena cannot grow: RLIMIT_AS, RLIMIT_DATA, or the
 * address space is full).  0, or -1 with errno ENOMEM.
 *
 * Which page size: a zone's first slice is on base pages, so a small
 * program never pays 2 MiB of RSS for a few pages; once a zone outgrows
 * one slice its memory is dense (busy slab caches, large blocks), and its
 * further slices are huge-page slices (huge_slices=1, THP not "never"),
 * for TLB reach.  Their free memory goes back only a whole huge page at a
 * time (zone_reclaim_batch), so huge pages are never broken up.  Partial
 * slices are always on base pages.
 */
static int zone_grow(struct zone *z, unsigned order, unsigned long gen)
{
    int r = 0;
    lock_acquire(&z->grow_lock);
    if (__atomic_load_n(&z->grow_gen, __ATOMIC_RELAXED) != gen)
        goto out;
    if (z->frontier && zone_grow_frontier(z, order) == 0)
        goto out;
    if (z->partial) {
        if (zone_grow_partial(z, order) == 0)
            goto out;
        if (errno != EEXIST)
            goto nomem;
    }
    enum vm_slice_kind kind = VM_SLICE_BASE;
    if (sk_opt.huge_slices && __atomic_load_n(&z->managed_pages, __ATOMIC_RELAXED) >= SLICE_PAGES)
        kind = VM_SLICE_HUGE;   /* vm says once (verbose) when THP is off */
    struct vm_slice *s = vm_slice_new(kind, sizeof(struct sk_page));
    if (s) {
        s->zone = z;
        s->node = (uint16_t)z->node;
        size_t end = SLICE_PAGES;
        if (kind == VM_SLICE_BASE && z == zone_here())
            end = step_first(order);
        lock_acquire(&z->lock);
        zone_add_range(z, s, 0, end, true);
        z->frontier_next = end;
        lock_release(&z->lock);
        __atomic_store_n(&z->frontier, end < SLICE_PAGES ? s : NULL, __ATOMIC_RELAXED);
        goto out;
    }
    if (zone_new_partial(z, order) == 0)
        goto out;
nomem:
    errno = ENOMEM;
    r = -1;
out:
    lock_release(&z->grow_lock);
    return r;
}

/* ---- reclaim: aging and returning memory ---- */

static unsigned long dirty_keep_pages(void)
{
    return (unsigned long)sk_opt.dirty_max_mb << (20 - SK_PAGE_SHIFT);
}

#define RECLAIM_BATCH 32
/* Blocks of a huge slice smaller than HUGE_ORDER are not purged (they
 * would split a huge page); how many such blocks one list walk steps
 * over. */
#define RECLAIM_SKIP 64

/* Whether pg's memory is advised onto huge pages: a huge slice, or the
 * upper part of a grown frontier slice. */
static bool page_huge(const struct sk_page *pg)
{
    const struct vm_slice *s = page_slice(pg);
    return s->huge || (s->huge_from && page_index(pg) >= s->huge_from);
}

/* Purge up to RECLAIM_BATCH of the oldest dirty blocks that are older than
 * `age_ms` (or any, while dirty pages exceed `keep`).  In a huge-page slice
 * only blocks of a whole huge page or more go (MADV_DONTNEED of part of a
 * huge page would split it); smaller ones wait until their buddies free up
 * and they merge.  Called with the lock held; drops it around the madvise
 * calls.  The victims are chained through their own descriptors (off the
 * lists, buddy.next is theirs), not held in a stack array: this runs on
 * the free path, whose stack use is bounded (docs/slices.md).  Returns
 * pages purged. */
/* The oldest dirty block of order o that may be purged (in a huge-page
 * slice only whole huge pages: smaller blocks there are stepped over, up
 * to RECLAIM_SKIP of them, unless `split`), or NULL. */
static struct sk_page *reclaim_candidate(struct zone *z, int o, bool split)
{
    unsigned skipped = 0;
    for (struct sk_page *pg = z->dirty[o].tail; pg; pg = pg->buddy.prev) {
        if (split || !(o < HUGE_ORDER && page_huge(pg)))
            return pg;
        if (++skipped > RECLAIM_SKIP)
            break;
    }
    return NULL;
}

/* Take candidate pg (of order o) off its list onto the victims chain,
 * through its own descriptor (off the lists, buddy.next is its). */
static void reclaim_take(struct zone *z, struct sk_page *pg, unsigned o, struct sk_page **victims)
{
    zone_remove(z, pg);
    pg->order = (uint8_t)o;
    pg->buddy.next = *victims;
    /* Release: a fork child that sees the flag sees the order. */
    __atomic_store_n(&pg->flags, PG_PURGING, __ATOMIC_RELEASE);
    *victims = pg;
}

static unsigned long zone_reclaim_batch(struct zone *z, uint64_t now, uint64_t age_ms, unsigned long keep)
{
    struct sk_page *victims = NULL;
    unsigned n = 0;
    /* Memory free for age_ms: largest blocks first (one madvise returns
     * the most, and whole huge pages go back whole). */
    for (int o = SK_MAX_ORDER; o >= 0 && n < RECLAIM_BATCH; o--) {
        struct sk_page *pg;
        while (n < RECLAIM_BATCH && (pg = reclaim_candidate(z, o, false)) && now - pg->buddy.freed_at >= age_ms) {
            reclaim_take(z, pg, (unsigned)o, &victims);
            n++;
        }
    }
    /* Over the limit: the oldest blocks first, whatever their order.  The
     * block just freed is the likeliest to be reused next (a loop of large
     * blocks frees one and allocates the next); purging it at once, as a
     * largest-first walk did, cost a fault for every page of it.  Over a
     * trim threshold (no purger: zone_keep_pages), pieces of huge pages go
     * too: nothing would come back for them while the program sleeps, and
     * a few live pages would keep whole huge pages resident. */
    bool split = keep < dirty_keep_pages();
    while (n < RECLAIM_BATCH && z->dirty_pages > keep) {
        struct sk_page *pg = NULL;
        int po = -1;
        for (int o = SK_MAX_ORDER; o >= 0; o--) {
            struct sk_page *c = reclaim_candidate(z, o, split);
            if (c && (!pg || c->buddy.freed_at < pg->buddy.freed_at)) {
                pg = c;
                po = o;
            }
        }
        if (!pg)
            break;
        reclaim_take(z, pg, (unsigned)po, &victims);
        n++;
    }
    if (!n)
        return 0;
    z->purging += n;
    lock_release(&z->lock);
    /* Only the span goes (in a huge-page slice, whole huge pages of it).
     * A purge can fail (MADV_DONTNEED refuses mlocked memory): such a
     * block is still resident and goes back dirty, never clean (calloc
     * trusts clean blocks to be zero).  buddy.freed_at, unused off the
     * lists, carries the outcome. */
    unsigned long pages = 0;
    for (struct sk_page *pg = victims; pg; pg = pg->buddy.next) {
        unsigned long span = pg->buddy.span;
        if (page_huge(pg))
            span = SK_ALIGN_UP(span, 1ul << HUGE_ORDER);
        if (span > 1ul << pg->order)
            span = 1ul << pg->order;
        bool purged = os_purge(page_address(pg), span << SK_PAGE_SHIFT) == 0;
        pg->buddy.freed_at = purged;
        if (purged)
            pages += span;
    }
    lock_acquire(&z->lock);
    for (struct sk_page *pg = victims, *next; pg; pg = next) {
        next = pg->buddy.next;
        zone_free_block(z, pg, pg->order, pg->buddy.freed_at ? 0 : pg->buddy.span, now);
    }
    z->purging -= n;
    z->purged_pages += pages;
    return pages;
}

/*
 * Returning memory without a thread.  A program with one thread never
 * gets the purger (page_purger_poll), so nothing runs while it sleeps:
 * what it freed last stays resident until its next slow path.  So then a
 * zone keeps less, as glibc trims its heap at free time above a threshold
 * that follows the largest block freed (M_TRIM_THRESHOLD, twice the
 * dynamic mmap threshold): dirty memory beyond twice the largest block
 * freed into the zone, and at least TRIM_FLOOR, goes back at the free
 * that passes it, oldest first (zone_reclaim_batch); dirty_max_mb still
 * caps it.  A loop of large blocks keeps the blocks it reuses (two of
 * the largest); a heap freed whole and left idle keeps about TRIM_FLOOR.
 * A working set freed and allocated again in turns would be given back
 * and faulted in every turn: so a zone that trims again within decay_ms
 * of its last trim, having served allocations in between, keeps from then
 * on what that trim gave back too, at least twice as much as before, up to
 * dirty_max_mb (zone_trim_grow); such a program keeps its working set, as
 * glibc's heap does once its threshold has risen.  A burst of frees with
 * no allocation between them (a program freeing its heap to go idle) does
 * not raise it.
 * And as jemalloc does with its background thread off, age is checked on
 * the slow paths: blocks free for decay_ms go at the next one.
 */
#define TRIM_FLOOR_PAGES ((1ul << 20) >> SK_PAGE_SHIFT)

/* The trim threshold, not yet capped by dirty_max_mb. */
static inline unsigned long zone_trim_limit(const struct zone *z)
{
    return z->trim_pages > TRIM_FLOOR_PAGES ? z->trim_pages : TRIM_FLOOR_PAGES;
}

static inline unsigned long zone_keep_pages(const struct zone *z)
{
    unsigned long keep = dirty_keep_pages(), trim = zone_trim_limit(z);
    /* The thread runs, or will: a slow path starts it (page_purger_poll). */
    if (page_purger_running() || (sk_opt.background && os_threaded()))
        return keep;
    return trim < keep ? trim : keep;
}

/* The last trim gave back what the program came back for (zone lock
 * held): keep that much more from now on, and at least twice as much. */
static void zone_trim_grow(struct zone *z)
{
    unsigned long trim = zone_trim_limit(z);
    z->trim_pages = trim + (z->trim_purged > trim ? z->trim_purged : trim);
}

/* A block of nr pages freed into z (locked): the trim threshold follows. */
static inline void zone_note_freed(struct zone *z, unsigned long nr)
{
    if (unlikely(2 * nr > z->trim_pages))
        z->trim_pages = 2 * nr;
}

/* The free paths' unlock, once they have put dirty blocks on z's lists:
 * record it for the purger and wake the purger if it sleeps.  Only the
 * free that finds it asleep makes the system call (after the unlock: no
 * zone lock is held across one); steady-state frees read one word. */
static inline void zone_release_dirtied(struct zone *z, uint64_t now)
{
    z->dirtied_at = now;
    z->dirty_seq++;
    bool kick = !__atomic_load_n(&page_purger.work, __ATOMIC_RELAXED);
    lock_release(&z->lock);
    if (unlikely(kick))
        purge_kick();
}

/* Unlock z after an operation that may have put dirty blocks on its
 * lists (dirtied): through zone_release_dirtied then, else plainly. */
static inline void zone_unlock(struct zone *z, uint64_t now, bool dirtied)
{
    if (dirtied)
        zone_release_dirtied(z, now);
    else
        lock_release(&z->lock);
}

/* Called with the zone lock held, after a slow-path operation; now: the
 * caller's reading of the coarse clock (one per operation). */
static void zone_maybe_reclaim(struct zone *z, uint64_t now)
{
    unsigned long keep = zone_keep_pages(z);
    uint64_t decay = (uint64_t)sk_opt.decay_ms;
    if (z->dirty_pages <= keep && now - z->last_decay < decay / 4 + 1)
        return;
    z->last_decay = now;
    /* Without the purger, over the threshold: a trim (page.c, "Returning
     * memory without a thread"). */
    bool trim = z->dirty_pages > keep && keep < dirty_keep_pages();
    if (trim && now - z->trimmed_at < decay && z->takes != z->takes_at_trim) {
        zone_trim_grow(z);
        keep = zone_keep_pages(z);
    }
    /* Bounded work per call: a few batches. */
    unsigned long purged = 0, got;
    for (int i = 0; i < 4 && (got = zone_reclaim_batch(z, now, decay, keep)); i++)
        purged += got;
    if (trim) {
        z->trimmed_at = now;
        z->takes_at_trim = z->takes;
        z->trim_purged = purged;
    }
}

/* ---- block allocation (zone) ---- */


/*
 * Free pages parked on per-CPU lists serve only their own order on their
 * own CPU.  A program that moves from one size to another (slabs of one
 * order freed, slabs of another wanted) or from one CPU to another would
 * otherwise touch fresh memory, a new resident page for each, while up to
 * a megabyte per CPU of its own free pages sits on the lists.  So when a
 * request of the lists' zone finds no free resident block of its order or
 * above, and the lists hold enough to matter (twice the request's batch),
 * they go back to the zone first, where their blocks merge with their
 * buddies and serve it: the kernel drains the pcp lists (drain_all_pages)
 * before it reclaims, for the same reason.
 */
/* Pages on every CPU's lists, all orders (a snapshot). */
static unsigned long pcp_pages(void)
{
    unsigned long pages = 0;
    for (unsigned o = 0; o <= PCP_MAX_ORDER; o++)
        for (int cpu = 0; cpu < cpu_nr_slots(); cpu++)
            pages += (unsigned long)cpu_array_count(page_pcp.lists[o], cpu) << o;
    return pages;
}

/* Whether a free resident block of `order` or above is there (zone->lock
 * held). */
static bool zone_has_dirty(const struct zone *z, unsigned order)
{
    for (unsigned o = order; o <= SK_MAX_ORDER; o++)
        if (z->dirty[o].head)
            return true;
    return false;
}

/* ---- per-CPU list tuning ---- */

#define PCP_BATCH_MAX 32      /* blocks moved at most per refill or drain */
static void zone_free_bulk(struct zone *z, struct sk_page **pgs, unsigned n, unsigned order);

/*
 * High-watermark tuning, after the kernel's (6.7, "mm: tune PCP high
 * automatically"): a CPU whose list of an order overflowed into the zone
 * and then ran dry cycles more blocks than the list holds, and every one
 * of them pays a zone round trip (the lock, the buddy's split and merge)
 * twice a cycle.  Its list grows, doubling at each such refill, up to
 * PCP_GROW_BYTES of blocks (high_max); a drain of the list (idle, before
 * fresh memory, page_drain_pcp) puts it back to high.  The blocks a grown
 * list keeps are the ones the zone would hold dirty for the same program,
 * resident either way; the idle drain still hands them back within a
 * purger tick of the program going quiet.  sizeclass's 8-32 KiB batches
 * (1 MiB of order-3 blocks a round) took the zone path for three blocks
 * in four.  One order grows at a time (pcp_tune), and a request bound for
 * fresh memory first takes back this CPU's grown lists
 * (zone_drain_before_fresh): without both, sizeclass's 1 KiB class grew
 * the order-2 list, whose blocks then sat there while the 2-16 KiB
 * classes took 1 MiB of fresh memory for their order-3 slabs (peak RSS
 * 3.5 -> 4.4 MiB).
 *
 * Bit o of pcp_overflowed[slot]: list o of that CPU slot sent a batch to
 * the zone since its last refill.  A hint, set and cleared with relaxed
 * atomics by whichever thread runs there: a race loses or repeats one
 * doubling, never a block.
 */
#define PCP_GROW_BYTES ((size_t)1 << 20)
static uint8_t pcp_overflowed[CPU_MAX_IDS + 1];
_Static_assert(PCP_MAX_ORDER < 8, "pcp_overflowed holds a bit per order");
static unsigned long page_pcp_grows;           /* statistics (relaxed) */
static uint64_t page_init_at;                  /* ms: no drain before fresh memory within FRESH_DRAIN_MS */

static inline void pcp_overflow_note(int cpu, unsigned o)
{
    if (!(__atomic_load_n(&pcp_overflowed[cpu], __ATOMIC_RELAXED) & (1u << o)))
        __atomic_fetch_or(&pcp_overflowed[cpu], (uint8_t)(1u << o), __ATOMIC_RELAXED);
}

/* Whether list o of slot cpu overflowed since; forgets it. */
static inline bool pcp_overflow_take(int cpu, unsigned o)
{
    if (likely(!(__atomic_load_n(&pcp_overflowed[cpu], __ATOMIC_RELAXED) & (1u << o))))
        return false;
    __atomic_fetch_and(&pcp_overflowed[cpu], (uint8_t)~(1u << o), __ATOMIC_RELAXED);
    return true;
}

static inline bool pcp_grown(unsigned o, int cpu)
{
    cpu_arrays_t tab = page_pcp.lists[o];
    return cpu_set_has(tab, cpu) && __atomic_load_n(&cpu_array_at(tab, cpu)->cap, __ATOMIC_RELAXED) > page_pcp.high[o];
}

/* Slot cpu's list of order o back to its high watermark, what it holds
 * beyond that to the zone (popped here: if this thread moved to another
 * CPU since, that one's list gives its top blocks instead, as harmless).
 * No lock held. */
/* Up to max blocks off this thread's list of order o, to the zone;
 * returns the blocks moved.  No lock held. */
static unsigned long pcp_pop_to_zone(unsigned o, unsigned long max)
{
    struct sk_page *buf[PCP_BATCH_MAX];
    unsigned long moved = 0;
    unsigned n;
    while (moved < max && (n = cpu_pop_batch(page_pcp.lists[o], (void **)buf,
                                             max - moved < PCP_BATCH_MAX ? (unsigned)(max - moved) : PCP_BATCH_MAX))) {
        zone_free_bulk(zone_here(), buf, n, o);
        moved += n;
    }
    return moved;
}

static void pcp_ungrow(unsigned o, int cpu)
{
    unsigned high = page_pcp.high[o];
    if (!pcp_grown(o, cpu))
        return;
    cpu_array_trim(page_pcp.lists[o], cpu, high);
    unsigned count = cpu_array_count(page_pcp.lists[o], cpu);
    if (count > high)
        pcp_pop_to_zone(o, count - high);
}

/* Slot cpu's lists other than order keep's: whether one is grown; all of
 * them back to high. */
static bool pcp_others_grown(int cpu, unsigned keep)
{
    for (unsigned o = 0; o <= PCP_MAX_ORDER; o++)
        if (o != keep && pcp_grown(o, cpu))
            return true;
    return false;
}

/* Whether slot cpu's lists other than keep's hold any block. */
static bool pcp_others_hold(int cpu, unsigned keep)
{
    for (unsigned o = 0; o <= PCP_MAX_ORDER; o++)
        if (o != keep && cpu_array_count(page_pcp.lists[o], cpu))
            return true;
    return false;
}

static void pcp_ungrow_others(int cpu, unsigned keep)
{
    for (unsigned o = 0; o <= PCP_MAX_ORDER; o++)
        if (o != keep)
            pcp_ungrow(o, cpu);
}

/* This CPU's lists other than order keep's, emptied into the zone (popped
 * here, as pcp_ungrow does); returns the blocks moved. */
static unsigned long pcp_empty_others(unsigned keep)
{
    unsigned long moved = 0;
    for (unsigned o = 0; o <= PCP_MAX_ORDER; o++)
        if (o != keep)
            moved += pcp_pop_to_zone(o, ULONG_MAX);
    return moved;
}

/* A refill of this CPU's list of `order`: grow it if it overflowed since
 * the last one, and put the others back. */
static void pcp_tune(unsigned order)
{
    int cpu = cpu_current();
    if (!pcp_overflow_take(cpu, order))
        return;
    unsigned cap = cpu_array_ready(page_pcp.lists[order], page_pcp.high[order]), most = page_pcp.high_max[order];
    if (cap >= most)
        return;
    cpu_array_grow(page_pcp.lists[order], cap * 2 < most ? cap * 2 : most);
    __atomic_fetch_add(&page_pcp_grows, 1, __ATOMIC_RELAXED);
    pcp_ungrow_others(cpu, order);
}

/* Called with z->lock held by a request of `order`: true when it dropped
 * the lock and drained the per-CPU lists (the caller starts over).  Only
 * for the zone they feed (zone_here; large blocks have a zone of their
 * own), at most once a request (the caller passes `first`). */
static bool zone_drain_before_fresh(struct zone *z, unsigned order, bool first)
{
    if (!first || z != zone_here() || !pcp_enabled || zone_has_dirty(z, order))
        return false;
    /* First this CPU's lists that tuning grew (other than the request's
     * own, empty): what they hold beyond high goes back, here, with no
     * other CPU to interrupt and so no rate limit. */
    int cpu = cpu_current();
    if (pcp_others_grown(cpu, order)) {
        lock_release(&z->lock);
        pcp_ungrow_others(cpu, order);
        return true;
    }
    /* Every CPU's lists at most once per FRESH_DRAIN_MS: that interrupts
     * every CPU (membarrier), and a program that grows while it frees
     * would find its lists refilled at every refill.  Between those, this
     * CPU's own other lists (the ones it can pop with no other CPU
     * involved): sizeclass's 256-1536 byte classes left 165-295 pages of
     * orders 0-2 on them while each next class took fresh memory for its
     * slabs (peak RSS 3.67 MiB, 3.41 with them emptied first; glibc
     * 2.46).  Every CPU's lists only when they hold twice the request's
     * batch; this CPU's whatever they hold: a page they give back saves
     * the fault of a fresh one, and no other CPU is interrupted.  Neither
     * within FRESH_DRAIN_MS of page_init, when the lists hold the untouched
     * pages their first refills left, which the zone would count dirty and
     * start the purger thread for. */
    unsigned long want = order <= PCP_MAX_ORDER ? (unsigned long)page_pcp.batch[order] << order : 1ul << order;
    uint64_t now = os_now_ms_coarse();
    if (now - z->fresh_drain_at >= FRESH_DRAIN_MS && pcp_pages() >= 2 * want) {
        z->fresh_drain_at = now;
        lock_release(&z->lock);
        __atomic_fetch_add(&page_pcp_fresh_drains, 1, __ATOMIC_RELAXED);
        page_drain_pcp();
        return true;
    }
    if (now - page_init_at < FRESH_DRAIN_MS || !pcp_others_hold(cpu, order))
        return false;
    lock_release(&z->lock);
    __atomic_fetch_add(&page_pcp_local_empties, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&page_pcp_local_blocks, pcp_empty_others(order), __ATOMIC_RELAXED);
    return true;
}

/* Exact blocks in use and their pages (zone->lock held; read unlocked by
 * page_exact_stats). */
static inline void zone_count_exact(struct zone *z, long blocks, long pages)
{
    __atomic_store_n(&z->exact_blocks, z->exact_blocks + (unsigned long)blocks, __ATOMIC_RELAXED);
    __atomic_store_n(&z->exact_pages, z->exact_pages + (unsigned long)pages, __ATOMIC_RELAXED);
}

/* Exact blocks from this order up may be served by a run (zone_take_run):
 * all of them (33 KiB and up round up to order 4). */
#define EXACT_RUN_MIN_ORDER 4
#define EXACT_RUN_TRIES 8      /* dirty blocks looked at per order */
#define EXACT_RUN_ORDERS 3     /* the orders below the request tried */

/* How far free blocks reach from q, one after another, stopping at end
 * (a partial slice's unmapped descriptors are zero: never free); q itself
 * when no free block starts there.  zone->lock held. */
static size_t zone_free_fwd(struct sk_page *first, size_t q, size_t end)
{
    while (q < end && (pg_flags(first + q) & PG_BUDDY))
        q += (size_t)1 << first[q].order;
    return q;
}

/* Whether the pages [q, end) of a slice are all free blocks. */
static bool zone_free_until(struct sk_page *first, size_t q, size_t end)
{
    return zone_free_fwd(first, q, end) >= end;
}

/* The lowest page p >= idx - limit such that [p, idx) is whole free
 * blocks: a free block that ends at pos starts at pos - 2^o for an o with
 * pos aligned to 2^o, and its head says so (PG_BUDDY, order o); one head
 * per page, so at most one o matches.  zone->lock held. */
static size_t zone_free_back(struct sk_page *first, size_t idx, size_t limit)
{
    size_t pos = idx;
    while (pos) {
        unsigned top = (unsigned)__builtin_ctzl(pos), o;
        for (o = 0; o <= top && o <= SK_MAX_ORDER; o++) {
            struct sk_page *b = first + pos - ((size_t)1 << o);
            if ((pg_flags(b) & PG_BUDDY) && b->order == o)
                break;
        }
        if (o > top || o > SK_MAX_ORDER || idx - (pos - ((size_t)1 << o)) > limit)
            break;
        pos -= (size_t)1 << o;
    }
    return pos;
}

/* Take the free blocks that zone_free_until found at [q, end) off the
 * lists; the last one's part past end goes back.  Returns whether that
 * part went back dirty.  zone->lock held. */
static bool zone_take_until(struct zone *z, struct sk_page *first, size_t q, size_t end, uint64_t now)
{
    bool dirtied = false;
    z->takes++;
    while (q < end) {
        struct sk_page *b = first + q;
        size_t span = (size_t)1 << b->order;
        size_t resident = zone_remove(z, b);
        if (q + span > end) {
            /* The overshoot, dirty only as far as the block's span went.
             * Freed dirty whole, its part past the span counted as
             * resident: a buffer grown in place a page at a time left
             * each next block "resident" to its end, and dirty-first
             * takes chose it over memory that was, faulting it in
             * (realloc_grow: 12.8 -> 11.5 MiB). */
            zone_free_range(z, first, end, q + span, q + resident, now);
            dirtied |= q + resident > end;
        }
        q += span;
    }
    return dirtied;
}

/*
 * A run: nr_pages of free blocks around a dirty one, taken off the lists;
 * the last block's overshoot goes back.  For an exact (large) block when
 * no dirty block of its rounded-up order is free, before clean memory.
 *
 * Why: a large block rounded up to a power of two needs a free, aligned
 * block of twice its size at worst.  Under a loop of large blocks of
 * varying sizes, or buffers that grow by realloc side by side, the memory
 * just freed (resident) is then mostly one order short of the next
 * request, in runs of free blocks of decreasing orders that no buddy
 * merge joins.  Such a request took clean memory and faulted it in, while
 * the resident blocks piled up until the dirty limit purged them: a purge
 * and a fault per block, and a peak RSS above the live data by the blocks
 * waiting to be purged.  Serving it from the run that holds a resident
 * block reuses that memory instead (the jemalloc and glibc way: any page
 * alignment, not only the buddy's).
 *
 * Candidates: the first EXACT_RUN_TRIES dirty blocks of each of the
 * EXACT_RUN_ORDERS orders below the request's, largest first.  From each,
 * the run reaches back over the free blocks that end where it starts (at
 * most what the request needs beyond the block: a run that starts at the
 * lowest free page leaves the room above it for a realloc to grow into),
 * then on over the free blocks that follow.  An aligned request (align >
 * a page) starts at the candidate, which is aligned to its order.
 * zone->lock held.
 */
static struct sk_page *zone_take_run(struct zone *z, unsigned order, size_t nr_pages, unsigned align_order,
                                     uint64_t now, bool *dirtied)
{
    for (unsigned lo = order; lo-- > 0 && lo + EXACT_RUN_ORDERS >= order && lo >= align_order;) {
        struct sk_page *pg = z->dirty[lo].head;
        for (int tries = 0; pg && tries < EXACT_RUN_TRIES; tries++, pg = pg->buddy.next) {
            struct sk_page *first = page_first(pg);
            size_t idx = (size_t)(pg - first), span = (size_t)1 << lo;
            size_t start = align_order ? idx : zone_free_back(first, idx, nr_pages - span);
            size_t end = start + nr_pages;
            if (end > SLICE_PAGES || (end > idx + span && !zone_free_until(first, idx + span, end)))
                continue;
            *dirtied |= zone_take_until(z, first, start, end, now);
            return first + start;
        }
    }
    return NULL;
}

/*
 * Huge exact blocks (more than EXACT_FIT_MIN_ORDER's half: above 1 MiB)
 * are placed best-fit over runs of free blocks, not in a buddy block of
 * their rounded-up order.
 *
 * Why: a loop of blocks of 5-25 MiB (largeblocks) each took a free block
 * of twice its size at worst, aligned to it, and gave the tail back.  The
 * holes left between live blocks were then mostly one order short of the
 * next request, so requests went to other free blocks further up, and the
 * touched memory spread over every slice of the zone: with no purging at
 * all the peak reached 524 MiB for 300 MiB live, and with the 64 MiB dirty
 * limit some 1.4 GB were purged and faulted back over 130 cycles.
 * tcmalloc and glibc place such blocks in the smallest hole they fit
 * (address order breaks ties) and stay within about 350 MiB.
 *
 * How: every maximal run of free blocks (dirty or clean) that holds a free
 * block of at least order - 3 (a run of n pages has one of at least n / 4)
 * is a candidate, at most EXACT_FIT_SCAN of them, each placed at its lowest
 * page.  Fewest pages to fault in first (the spans say which may be
 * resident), then the tightest run, then the lowest address.  With it, the
 * same loop purged 724 MiB instead of 1372 and took 0.69 s instead of 1.29
 * (tcmalloc 1.42); without purging it peaks at 415 MiB.  The peak with the
 * dirty limit stays at 380-390 MiB (glibc 352): the zone's 64 MiB slices
 * are bins no block crosses.  zone->lock held.
 */
#define EXACT_FIT_MIN_ORDER 9
#define EXACT_FIT_SCAN 64
/* Blocks a realloc grows into (page_alloc_exact_grow) are placed best-fit
 * from 64 KiB up: there the buddy placement's room after a block is what
 * the next growth in place takes, and the asker leaves that room itself
 * (kmalloc's headroom), while the buddy's split left 4.7 MiB of resident
 * pieces behind realloc_grow's 64 buffers (peak 12.1 -> 10.3 MiB). */
#define EXACT_FIT_GROW_MIN_ORDER 4

/* The pages of [q, end) that may be resident: free blocks from q, each
 * resident to its span.  zone->lock held. */
static size_t zone_run_resident(struct sk_page *first, size_t q, size_t end)
{
    size_t resident = 0;
    while (q < end) {
        struct sk_page *b = first + q;
        size_t len = (size_t)1 << b->order;
        size_t span = (pg_flags(b) & PG_CLEAN) ? 0 : b->buddy.span;
        if (span > end - q)
            span = end - q;
        resident += span;
        q += len;
    }
    return resident;
}

/* A candidate placement of zone_take_fit: the run [start, start + len)
 * of slice `first`, with `resident` pages of the block's first nr_pages
 * maybe resident. */
struct fit {
    struct sk_page *first;
    size_t start, len, resident;
};

/* Whether a is the better placement: more resident pages (fewer to fault
 * in), then the tighter run, then the lower address. */
static bool fit_better(const struct fit *a, const struct fit *b)
{
    if (a->resident != b->resident)
        return a->resident > b->resident;
    if (a->len != b->len)
        return a->len < b->len;
    return page_address(a->first + a->start) < page_address(b->first + b->start);
}

static struct sk_page *zone_take_fit(struct zone *z, unsigned order, size_t nr_pages, bool resident_only,
                                     uint64_t now, bool *clean, bool *dirtied)
{
    struct fit best = { NULL, 0, 0, 0 };
    unsigned scanned = 0;
    for (unsigned l = 2 * (order - 3); l < 2 * (SK_MAX_ORDER + 1); l++) {   /* each order: dirty, clean */
        for (struct sk_page *pg = list_of(z, l / 2, l % 2)->head; pg; pg = pg->buddy.next) {
            if (scanned++ == EXACT_FIT_SCAN)
                goto done;
            struct fit f = { page_first(pg), 0, 0, 0 };
            size_t idx = (size_t)(pg - f.first);
            f.start = zone_free_back(f.first, idx, SLICE_PAGES);
            f.len = zone_free_fwd(f.first, idx, SLICE_PAGES) - f.start;
            if (f.len < nr_pages)
                continue;
            f.resident = zone_run_resident(f.first, f.start, f.start + nr_pages);
            if (!best.first || fit_better(&f, &best))
                best = f;
        }
    }
done:
    if (!best.first || (resident_only && !best.resident))
        return NULL;
    *dirtied |= zone_take_until(z, best.first, best.start, best.start + nr_pages, now);
    *clean = best.resident == 0;
    return best.first + best.start;
}

/* With z->lock held: a block of `order` off z's lists, or NULL; with
 * exact, only its first `exact` pages, the tail going back at once (a
 * block that came clean leaves a clean tail: freeing it as dirty would
 * have it purged for nothing).  An exact block comes from a run of
 * resident blocks (zone_take_run, aligned to 2^align_order) where no
 * resident block of `order` is free.  resident_only: NULL rather than
 * clean memory. */
static struct sk_page *zone_take_block(struct zone *z, unsigned order, size_t exact, unsigned align_order,
                                       unsigned fit_order, bool resident_only, uint64_t now, bool *clean,
                                       bool *dirtied)
{
    struct sk_page *pg = NULL;
    if (exact && order >= fit_order && !align_order) {
        pg = zone_take_fit(z, order, exact, resident_only, now, clean, dirtied);
        if (pg)
            return pg;
    }
    bool has_dirty = zone_has_dirty(z, order);
    if (exact && order >= EXACT_RUN_MIN_ORDER && !has_dirty)
        pg = zone_take_run(z, order, exact, align_order, now, dirtied);   /* partly resident */
    if (pg || (resident_only && !has_dirty))
        return pg;
    unsigned long span;
    pg = zone_take(z, order, &span);
    if (!pg)
        return NULL;
    *clean = span == 0;
    if (exact && exact < ((size_t)1 << order)) {
        size_t idx = page_index(pg);
        /* The tail goes back dirty whole if any of the block was.  Made
         * as precise as zone_take_until's overshoot, it counted less
         * towards dirty_max_mb: largeblocks purged less and peaked 20 MiB
         * higher (381 -> 403 MiB), for no gain elsewhere. */
        zone_free_range(z, page_first(pg), idx + exact, idx + ((size_t)1 << order),
                        span ? idx + ((size_t)1 << order) : idx + exact, now);
        *dirtied = span != 0;
    }
    return pg;
}

/* A block taken from z (locked): counted, z unlocked, its head set up. */
static struct sk_page *zone_took(struct zone *z, struct sk_page *pg, unsigned order, size_t exact, uint64_t now,
                                 bool clean, bool dirtied)
{
    if (exact)
        zone_count_exact(z, 1, (long)exact);
    zone_maybe_reclaim(z, now);
    zone_unlock(z, now, dirtied);
    pg_set_flags(pg, PG_HEAD | (clean ? PG_ZEROED : 0));
    pg->order = (uint8_t)order;
    pg->node = (uint8_t)z->node;
    return pg;
}

/*
 * A large block that its zone could serve only from memory not resident
 * borrows the slab zone's resident free memory first.  A program whose
 * small objects grow into large ones (buffers grown by realloc, growing
 * arrays) frees slab pages just as it wants large blocks: kept apart, the
 * slab zone sat on the pages its idle caches gave back while the large
 * zone faulted in as much again.  The block keeps the slab zone as its
 * node: it goes back there, grows in place there, merges there.  Only this
 * way round: slab pages travel through the per-CPU lists, which give back
 * to the slab zone, and slab pages among the large blocks would keep them
 * from merging (the reason they have a zone of their own).
 */
static struct sk_page *zone_borrow(unsigned order, size_t exact, unsigned align_order, unsigned fit_order)
{
    struct zone *z = zone_here();
    bool clean = false, dirtied = false;
    lock_acquire(&z->lock);
    uint64_t now = os_now_ms_coarse();
    struct sk_page *pg = zone_take_block(z, order, exact, align_order, fit_order, true, now, &clean, &dirtied);
    if (!pg) {
        lock_release(&z->lock);
        return NULL;
    }
    return zone_took(z, pg, order, exact, now, clean, dirtied);
}

/* A block of `order`; with exact (large blocks: 0 < exact <= 2^order) only
 * its first `exact` pages, the tail going back in the same lock hold, and
 * the block counted in the zone's exact totals. */
static struct sk_page *zone_alloc(struct zone *z, unsigned order, size_t exact, unsigned align_order,
                                  unsigned fit_order)
{
    bool borrow = exact && z != zone_here() && sk_opt.zone_borrow;
    for (bool first = true;; first = false) {
        lock_acquire(&z->lock);
        if (zone_drain_before_fresh(z, order, first))
            continue;
        unsigned long gen = z->grow_gen;
        uint64_t now = os_now_ms_coarse();
        bool clean = false, dirtied = false;
        struct sk_page *pg = zone_take_block(z, order, exact, align_order, fit_order, borrow, now, &clean,
                                             &dirtied);
        if (!pg && borrow) {
            /* Nothing resident here: the slab zone's, then our clean
             * memory (the lock was dropped: look again). */
            lock_release(&z->lock);
            if ((pg = zone_borrow(order, exact, align_order, fit_order)))
                return pg;
            borrow = false;
            continue;
        }
        if (pg)
            return zone_took(z, pg, order, exact, now, clean, dirtied);
        lock_release(&z->lock);
        if (zone_grow(z, order, gen) != 0) {
            errno = ENOMEM;
            return NULL;
        }
    }
}

/* Take up to n blocks of `order` for a per-CPU list.  A zone whose
 * frontier slice has more to join grows for a whole batch, as it had it
 * when slices joined whole; otherwise a part of a batch is enough. */
static unsigned zone_alloc_bulk(struct zone *z, unsigned order, struct sk_page **out, unsigned n)
{
    unsigned got = 0;
    for (bool first = true; got < n; first = false) {
        unsigned long span;
        lock_acquire(&z->lock);
        if (got == 0 && zone_drain_before_fresh(z, order, first))
            continue;
        unsigned long gen = z->grow_gen;
        while (got < n) {
            struct sk_page *pg = zone_take(z, order, &span);
            if (!pg)
                break;
            pg_set_flags(pg, PG_PCP | (span ? 0 : PG_ZEROED));
            pg->order = (uint8_t)order;
            out[got++] = pg;
        }
        if (got)
            zone_maybe_reclaim(z, os_now_ms_coarse());
        lock_release(&z->lock);
        if (got == n || (got && !__atomic_load_n(&z->frontier, __ATOMIC_RELAXED)))
            break;
        if (zone_grow(z, order, gen) != 0)
            break;
    }
    return got;
}

static void zone_free_bulk(struct zone *z, struct sk_page **pgs, unsigned n, unsigned order)
{
    uint64_t now = os_now_ms_coarse();
    lock_acquire(&z->lock);
    for (unsigned i = 0; i < n; i++)
        zone_free_block(z, pgs[i], order, 1ul << order, now);
    zone_note_freed(z, 1ul << order);
    zone_maybe_reclaim(z, now);
    zone_release_dirtied(z, now);
}

/* ---- public block API ---- */

/* The exact-block cache (page_alloc_exact): blocks per CPU (the largest
 * it keeps: EXACT_CACHE_PAGES, page.h). */
#define EXACT_CACHE_BLOCKS 1

static int page_init_locked(void)
{
    /* The first drain before fresh memory waits FRESH_DRAIN_MS from now:
     * at start-up the lists hold only what their first refills left,
     * never-touched pages, and a drain then cost a short program an
     * interrupt of every CPU (membarrier) and, with the dirty blocks it
     * made, the purger thread (0.3-0.5 ms of a 4 ms process spawn). */
    uint64_t now = os_now_ms_coarse();
    page_init_at = now;
    for (int n = 0; n < MAX_NUMNODES; n++) {
        lock_reset(&page_zones[n].lock);
        lock_reset(&page_zones[n].grow_lock);
        page_zones[n].node = n;
        page_zones[n].fresh_drain_at = now;
    }
    pcp_enabled = sk_opt.pcp != 0;
    /* High watermark and batch per order, as the kernel sizes pcp lists:
     * the batch amortises one zone-lock round trip; high bounds what a CPU
     * keeps (464 KiB of order-0 pages, 256 KiB of each larger order:
     * measured with bench/pagestream and bench/peers' sizeclass). */
    static const unsigned high[PCP_NR_LISTS] = { 116, 16, 8, 8, EXACT_CACHE_BLOCKS };
    for (unsigned o = 0; o < PCP_NR_LISTS; o++) {
        size_t most = o <= PCP_MAX_ORDER ? (PCP_GROW_BYTES >> SK_PAGE_SHIFT) >> o : 0;
        page_pcp.high[o] = high[o];
        page_pcp.high_max[o] = most > CPU_ARRAY_MAX ? CPU_ARRAY_MAX : most > high[o] ? (unsigned)most : high[o];
        page_pcp.batch[o] = high[o] / 4 < PCP_BATCH_MAX ? high[o] / 4 : PCP_BATCH_MAX;
    }
    /* Each order's lists a set of the CPU layer's pools (a CPU's lists of
     * four orders on one page), each CPU's list given its capacity when
     * that CPU first uses it (cpu_array_ready, in the refill and the
     * overflow paths): a page for each order, all written at init, made
     * four resident pages on two CPUs; now a CPU's lists are written only
     * where it uses them.  Lists set up by an earlier, failed, attempt
     * are kept. */
    for (unsigned o = 0; pcp_enabled && o < PCP_NR_LISTS; o++) {
        if (page_pcp.lists[o] != cpu_empty_arrays)
            continue;
        cpu_arrays_t tab = cpu_arrays_alloc();
        if (!tab)
            return -1;    /* errno ENOMEM; the lists still empty stay always-empty */
        page_pcp.lists[o] = cpu_arrays_init(tab, 0);
    }
    purge_init();
    __atomic_store_n(&page_ready, true, __ATOMIC_RELEASE);
    return 0;
}

static spinlock_t init_lock = SPINLOCK_INIT;

int page_init(void)
{
    if (likely(__atomic_load_n(&page_ready, __ATOMIC_ACQUIRE)))
        return 0;
    int r = 0;
    spin_lock(&init_lock);
    if (!page_ready) {
        os_options_init();
        cpu_init();
        r = page_init_locked();
    }
    spin_unlock(&init_lock);
    return r;
}

struct sk_page *page_alloc(unsigned order)
{
    if (order > SK_MAX_ORDER) {
        errno = ENOMEM;
        return NULL;
    }
    if (order <= PCP_MAX_ORDER) {
        struct sk_page *pg = cpu_pop(page_pcp.lists[order]);
        if (likely(pg)) {
            pg_set_flags(pg, PG_HEAD | (pg_flags(pg) & PG_ZEROED));
            return pg;
        }
        if (pcp_enabled) {
            pcp_tune(order);
            /* Refill: one zone-lock round trip for a batch. */
            struct sk_page *batch[PCP_BATCH_MAX];
            unsigned n = zone_alloc_bulk(zone_here(), order, batch, page_pcp.batch[order]);
            if (n == 0) {
                errno = ENOMEM;
                return NULL;
            }
            /* Hand out the first block and stack the rest so that the
             * next pops go up in address order, as the kernel's
             * rmqueue_bulk does: streaming writers touch ascending pages. */
            pg = batch[0];
            n--;
            for (unsigned i = 0; i < n / 2; i++) {
                struct sk_page *t = batch[1 + i];
                batch[1 + i] = batch[n - i];
                batch[n - i] = t;
            }
            cpu_array_ready(page_pcp.lists[order], page_pcp.high[order]);
            unsigned pushed = cpu_push_batch(page_pcp.lists[order], (void **)batch + 1, n);
            if (pushed < n)
                zone_free_bulk(zone_here(), batch + 1 + pushed, n - pushed, order);
            pg_set_flags(pg, PG_HEAD | (pg_flags(pg) & PG_ZEROED));
            return pg;
        }
    }
    return zone_alloc(zone_here(), order, 0, 0, EXACT_FIT_MIN_ORDER);
}

/* A push onto per-CPU list `l` after the fast push failed: the locked
 * fallback (a thread without rseq), or this CPU's first use of the list,
 * which gives it its capacity.  False: the list is full (or there are no
 * lists, pcp=0). */
static bool pcp_push_slow(unsigned l, struct sk_page *pg)
{
    if (!pcp_enabled)
        return false;
    if (cpu_push_locked(page_pcp.lists[l], pg) > 0)
        return true;
    return cpu_array_ready(page_pcp.lists[l], page_pcp.high[l]) && cpu_push(page_pcp.lists[l], pg) > 0;
}

/* page_free's rest: a per-CPU list full or not ready yet, or none.  Out
 * of line, so that the push above needs no stack frame (its batch array
 * made every free of a slab or a kblock save six registers). */
static SK_NOINLINE void page_free_slow(struct sk_page *pg, unsigned order)
{
    struct zone *z = &page_zones[pg->node];
    if (order <= PCP_MAX_ORDER && pcp_enabled) {
        if (pcp_push_slow(order, pg))
            return;
        /* Full: drain a batch to the zone, with this block. */
        pcp_overflow_note(cpu_current(), order);
        struct sk_page *batch[PCP_BATCH_MAX + 1];
        unsigned n = cpu_pop_batch(page_pcp.lists[order], (void **)batch, page_pcp.batch[order]);
        batch[n++] = pg;
        zone_free_bulk(z, batch, n, order);
        return;
    }
    uint64_t now = os_now_ms_coarse();
    lock_acquire(&z->lock);
    zone_free_block(z, pg, order, 1ul << order, now);
    zone_note_freed(z, 1ul << order);
    zone_maybe_reclaim(z, now);
    zone_release_dirtied(z, now);
}

void page_free(struct sk_page *pg, unsigned order)
{
    if (likely(order <= PCP_MAX_ORDER && pcp_enabled)) {
        pg_set_flags(pg, PG_PCP);
        pg->order = (uint8_t)order;
        if (likely(cpu_push_fast(page_pcp.lists[order], pg)))
            return;
    }
    page_free_slow(pg, order);
}

static unsigned order_for(size_t nr_pages)
{
    unsigned o = 0;
    while (((size_t)1 << o) < nr_pages)
        o++;
    return o;
}

/* Free [idx, end) of a slice as the largest aligned blocks that fit.
 * The pages from dirty_end on are known zero: a block past it goes back
 * clean, a block across it dirty with its span ending there. */
static void zone_free_range(struct zone *z, struct sk_page *first, size_t idx, size_t end, size_t dirty_end,
                            uint64_t now)
{
    while (idx < end) {
        unsigned o = idx ? (unsigned)__builtin_ctzl(idx) : SK_MAX_ORDER;
        if (o > SK_MAX_ORDER)
            o = SK_MAX_ORDER;
        while (idx + ((size_t)1 << o) > end)
            o--;
        size_t span = dirty_end > idx ? dirty_end - idx : 0;
        zone_free_block(z, first + idx, o, span < (1ul << o) ? span : 1ul << o, now);
        idx += (size_t)1 << o;
    }
}

/*
 * The exact-block cache: the last exact block of at most
 * EXACT_CACHE_PAGES (256 KiB) freed on a CPU stays on that CPU's PCP_EXACT list
 * (EXACT_CACHE_BLOCKS deep), and a request of the same page count there
 * takes it back with no zone lock; a request of another count gives it to
 * the zone first.  A program that allocates and frees one buffer of
 * 32-256 KiB in a loop paid two zone-lock round trips and the buddy's
 * split and merge each time (97-136 ns a pair; glibc 16, tcmalloc 6):
 * tcmalloc and mimalloc keep such sizes in per-thread or per-CPU caches.
 * One block, not a list per size: sizes that vary keep no memory from
 * the zone but the one block, which the purger drains with the other
 * lists when idle.  A cached block is PG_PCP, not PG_HEAD: a second free
 * or a use of it (malloc_usable_size, realloc) is reported as for a free
 * block.  It stays counted as an exact block in use (mallinfo2's hblkhd),
 * as glibc counts its tcache chunks as in use.
 */
static struct sk_page *alloc_exact(size_t nr_pages, unsigned align_order, unsigned fit_order)
{
    if (align_order == 0 && nr_pages <= EXACT_CACHE_PAGES) {
        struct sk_page *pg = page_exact_cached(nr_pages);
        if (pg)
            return pg;
    }
    unsigned order = order_for(nr_pages);
    if (order < align_order)
        order = align_order;
    if (order > SK_MAX_ORDER) {
        errno = ENOMEM;
        return NULL;
    }
    struct zone *z = zone_large();
    /* The block and its tail's return in one lock hold. */
    struct sk_page *pg = zone_alloc(z, order, nr_pages, align_order, fit_order);
    if (!pg)
        return NULL;
    pg_set_flags(pg, pg_flags(pg) | PG_LARGE);
    pg->large.nr_pages = nr_pages;
    page_purger_poll();   /* called from kmalloc with no lock held */
    return pg;
}

struct sk_page *page_alloc_exact(size_t nr_pages, unsigned align_order)
{
    return alloc_exact(nr_pages, align_order, EXACT_FIT_MIN_ORDER);
}

struct sk_page *page_alloc_exact_grow(size_t nr_pages)
{
    return alloc_exact(nr_pages, 0, EXACT_FIT_GROW_MIN_ORDER);
}

struct sk_page *page_alloc_kblock(void)
{
    struct sk_page *pg = page_alloc(PCP_MAX_ORDER);
    return pg ? kblock_head(pg) : NULL;   /* kmalloc_slow polls the purger */
}

/* page_free_exact's run back to its zone: out of line, so that a
 * kblock's free needs no stack frame. */
SK_NOINLINE void page_free_run(struct sk_page *pg)
{
    struct zone *z = &page_zones[pg->node];
    struct sk_page *first = page_first(pg);
    size_t idx = (size_t)(pg - first);
    size_t nr = pg->large.nr_pages;
    uint64_t now = os_now_ms_coarse();
    pg_set_flags(pg, 0);
    lock_acquire(&z->lock);
    zone_free_range(z, first, idx, idx + nr, idx + nr, now);
    zone_count_exact(z, -1, -(long)nr);
    zone_note_freed(z, nr);
    zone_maybe_reclaim(z, now);
    zone_release_dirtied(z, now);
}

/* An exact block into this CPU's cache after the fast push failed; full,
 * or no lists (pcp=0), the block goes to its zone. */
static SK_NOINLINE void page_free_cache_slow(struct sk_page *pg)
{
    if (!pcp_push_slow(PCP_EXACT, pg))
        page_free_run(pg);
}

void page_free_exact(struct sk_page *pg)
{
    if (pg_flags(pg) & PG_KBLOCK) {
        page_free(pg, PCP_MAX_ORDER);
    } else if (pg->large.nr_pages <= EXACT_CACHE_PAGES) {
        pg_set_flags(pg, PG_PCP);
        if (likely(cpu_push_fast(page_pcp.lists[PCP_EXACT], pg)))
            return;
        page_free_cache_slow(pg);
    } else {
        page_free_run(pg);
    }
}

/* The blocks on the exact-block caches and their pages: a snapshot, read
 * with no lock but the fallback path's (the one a ThreadSanitizer build
 * takes for every push and pop), for the statistics. */
static void exact_cached(unsigned long *blocks, unsigned long *pages)
{
    *blocks = *pages = 0;
    if (!pcp_enabled)
        return;
    cpu_arrays_t tab = page_pcp.lists[PCP_EXACT];
    for (int cpu = 0; cpu_set_has(tab, cpu); cpu++) {
        struct cpu_array *a = cpu_array_at(tab, cpu);
#ifdef SK_TSAN
        spin_lock(&a->lock);
#endif
        unsigned n = cpu_array_len(a);
        for (unsigned i = 0; i < n && i < EXACT_CACHE_BLOCKS; i++) {
            struct sk_page *pg = __atomic_load_n((struct sk_page **)&a->objs[i], __ATOMIC_RELAXED);
            if (pg) {
                (*blocks)++;
                *pages += pg->large.nr_pages;
            }
        }
#ifdef SK_TSAN
        spin_unlock(&a->lock);
#endif
    }
}

void page_exact_stats(unsigned long *blocks, unsigned long *pages)
{
    unsigned long b = 0, p = 0, cb, cp;
    for (int n = 0; n < MAX_NUMNODES; n++) {
        b += __atomic_load_n(&page_zones[n].exact_blocks, __ATOMIC_RELAXED);
        p += __atomic_load_n(&page_zones[n].exact_pages, __ATOMIC_RELAXED);
    }
    /* Cached blocks are free: counted in use from their malloc until the
     * zone has them back, they are taken off here. */
    exact_cached(&cb, &cp);
    *blocks = b > cb ? b - cb : 0;
    *pages = p > cp ? p - cp : 0;
}

/*
 * Resize an exact block in place to nr_pages (krealloc without a copy):
 * shrinking frees the tail; growing claims the free blocks that follow it
 * in its slice, if every page up to the new end is free (a free block that
 * starts right after ours is a buddy head: the pages before it are ours).
 * Returns whether the block now has nr_pages.
 */
bool page_resize_exact(struct sk_page *pg, size_t nr_pages)
{
    struct zone *z = &page_zones[pg->node];
    struct sk_page *first = page_first(pg);
    size_t idx = (size_t)(pg - first), nr = pg->large.nr_pages, end = idx + nr_pages;
    if (pg_flags(pg) & PG_KBLOCK)
        return nr_pages && nr_pages <= nr;
    uint64_t now = os_now_ms_coarse();
    if (nr_pages == 0 || end > SLICE_PAGES)
        return false;
    if (nr_pages <= nr) {
        if (nr_pages < nr) {
            lock_acquire(&z->lock);
            zone_free_range(z, first, end, idx + nr, idx + nr, now);
            zone_count_exact(z, 0, (long)nr_pages - (long)nr);
            zone_release_dirtied(z, now);
            pg->large.nr_pages = nr_pages;
        }
        return true;
    }
    zone_frontier_reach(z, page_slice(pg), end);
    lock_acquire(&z->lock);
    if (!zone_free_until(first, idx + nr, end)) {
        lock_release(&z->lock);
        return false;
    }
    zone_count_exact(z, 0, (long)nr_pages - (long)nr);
    zone_unlock(z, now, zone_take_until(z, first, idx + nr, end, now));
    pg->large.nr_pages = nr_pages;
    pg_set_flags(pg, pg_flags(pg) & ~PG_ZEROED);
    return true;
}

struct sk_page *page_find_head(const void *p)
{
    struct vm_slice *s = vm_slice_of(p);
    if (!s || s->kind == VM_SLICE_DIRECT || s->kind == VM_SLICE_USER)
        return NULL;
    struct sk_page *first = (struct sk_page *)s->pages;
    size_t idx = ((uintptr_t)p - s->base) >> SK_PAGE_SHIFT;
    for (unsigned o = 0; o <= SK_MAX_ORDER; o++) {
        size_t h = idx & ~(((size_t)1 << o) - 1);
        struct sk_page *pg = first + h;
        uint32_t f = __atomic_load_n(&pg->flags, __ATOMIC_RELAXED);
        if (f & PG_HEAD) {
            size_t span = (f & PG_LARGE) ? pg->large.nr_pages : (size_t)1 << pg->order;
            if (idx < h + span)
                return pg;
            break;
        }
        if (f & (PG_BUDDY | PG_PCP | PG_PURGING))
            break;
    }
    /* A large block grown in place (page_resize_exact) can reach past its
     * order's alignment: its head lies below, across descriptors that
     * carry no flags (the pages it took over).  Diagnostics only: walk
     * down to the first descriptor with flags. */
    for (size_t h = idx; h-- > 0;) {
        struct sk_page *pg = first + h;
        uint32_t f = __atomic_load_n(&pg->flags, __ATOMIC_RELAXED);
        if (!f)
            continue;
        if ((f & (PG_HEAD | PG_LARGE)) == (PG_HEAD | PG_LARGE) && idx < h + pg->large.nr_pages)
            return pg;
        break;
    }
    return NULL;
}

/* ---- draining and reclaim ---- */

/* Give one CPU's list of one order back to the zone; returns blocks. */
static unsigned long pcp_drain_one(unsigned o, int cpu)
{
    struct sk_page *buf[PCP_BATCH_MAX];
    unsigned long total = 0;
    unsigned n;
    while ((n = cpu_drain_remote(page_pcp.lists[o], cpu, (void **)buf, PCP_BATCH_MAX))) {
        if (o == PCP_EXACT) {
            for (unsigned i = 0; i < n; i++)
                page_free_run(buf[i]);   /* each to its own zone */
        } else {
            zone_free_bulk(zone_here(), buf, n, o);
        }
        total += n;
    }
    /* Drained: back to the high watermark it started with. */
    if (o <= PCP_MAX_ORDER) {
        cpu_array_trim(page_pcp.lists[o], cpu, page_pcp.high[o]);
        pcp_overflow_take(cpu, o);
    }
    return total;
}

void page_drain_pcp(void)
{
    if (!pcp_enabled)
        return;
    for (unsigned o = 0; o < PCP_NR_LISTS; o++)
        for (int cpu = 0; cpu < cpu_nr_slots(); cpu++)
            pcp_drain_one(o, cpu);
}

/* ---- hooks for the purger (purge.c) ---- */

/* Batches one purger pass may purge per zone (each drops the lock around
 * its madvise calls); what is left waits for the next tick. */
#define PURGE_PASS_BATCHES 64

bool zone_purge(struct zone *z, uint64_t now, uint64_t decay_ms, unsigned long *seq)
{
    if (!__atomic_load_n(&z->managed_pages, __ATOMIC_RELAXED))
        return false;
    if (!lock_try(&z->lock))
        return true;             /* busy: a malloc is in there; next tick */
    bool more = false;
    unsigned long keep = dirty_keep_pages(), got;
    for (int i = 0; (got = zone_reclaim_batch(z, now, decay_ms, keep)); i++) {
        __atomic_fetch_add(&page_purger.pages, got, __ATOMIC_RELAXED);
        if (i + 1 == PURGE_PASS_BATCHES) {
            more = true;
            break;
        }
    }
    /* Dirtied within decay_ms: young dirty blocks will age, and a program
     * that frees this often will free again soon.  Staying awake that
     * long keeps its frees from waking the purger (a system call) every
     * time its free memory runs out. */
    if (now - z->dirtied_at < decay_ms)
        more = true;
    *seq = z->dirty_seq;
    lock_release(&z->lock);
    return more;
}

bool zone_dirtied_since(struct zone *z, unsigned long seq)
{
    if (!__atomic_load_n(&z->managed_pages, __ATOMIC_RELAXED))
        return false;
    if (!lock_try(&z->lock))
        return true;
    bool dirtied = z->dirty_seq != seq;
    lock_release(&z->lock);
    return dirtied;
}

bool pcp_drain_idle(uint32_t *seen, unsigned long *drained)
{
    if (!pcp_enabled)
        return false;
    bool left = false;
    for (unsigned o = 0; o < PCP_NR_LISTS; o++)
        for (int cpu = 0; cpu < cpu_nr_slots(); cpu++) {
            /* The operation count moves with every push and pop (and not
             * with a drain): unchanged since the last tick means no one
             * used this list for a whole tick. */
            uint32_t ops = (uint32_t)cpu_array_ops(page_pcp.lists[o], cpu);
            uint32_t *last = &seen[o * (unsigned)cpu_nr_slots() + (unsigned)cpu];
            bool idle = ops == *last;
            *last = ops;
            if (!cpu_array_count(page_pcp.lists[o], cpu))
                continue;
            if (idle)
                *drained += pcp_drain_one(o, cpu);
            if (cpu_array_count(page_pcp.lists[o], cpu))
                left = true;
        }
    return left;
}

size_t page_reclaim(uint64_t age_ms, bool drain)
{
    if (!__atomic_load_n(&page_ready, __ATOMIC_ACQUIRE))
        return 0;
    if (drain)
        page_drain_pcp();
    size_t pages = 0;
    for (int n = 0; n < MAX_NUMNODES; n++) {
        struct zone *z = &page_zones[n];
        lock_acquire(&z->lock);
        uint64_t now = os_now_ms_coarse();
        unsigned long got;
        while ((got = zone_reclaim_batch(z, now, age_ms, age_ms ? dirty_keep_pages() : 0)))
            pages += got;
        lock_release(&z->lock);
    }
    return pages << SK_PAGE_SHIFT;
}

/* The pages of slice s that are zone z's: a partial slice's mapped
 * prefix, the frontier slice's joined part, or all of it. */
static size_t zone_slice_joined(const struct zone *z, const struct vm_slice *s)
{
    return s == z->frontier ? z->frontier_next : s->mapped >> SK_PAGE_SHIFT;
}

/* Whether all of slice s's joined pages are in free blocks (zone->lock). */
static bool zone_slice_free(const struct zone *z, struct vm_slice *s)
{
    return zone_free_until((struct sk_page *)s->pages, 0, zone_slice_joined(z, s));
}

/* Take every free block of slice s off the zone's lists (all its joined
 * pages are free), and the slice off the partial list or the frontier;
 * grow_lock and zone->lock held. */
static void zone_take_slice(struct zone *z, struct vm_slice *s)
{
    struct sk_page *first = (struct sk_page *)s->pages;
    size_t end = zone_slice_joined(z, s);
    for (size_t idx = 0; idx < end;) {
        unsigned o = first[idx].order;
        zone_remove(z, first + idx);
        idx += (size_t)1 << o;
    }
    __atomic_store_n(&z->managed_pages, z->managed_pages - end, __ATOMIC_RELAXED);
    if (s->partial)
        for (struct vm_slice **pp = &z->partials; *pp; pp = &(*pp)->zone_next)
            if (*pp == s) {
                *pp = s->zone_next;
                break;
            }
    if (z->partial == s)
        z->partial = NULL;
    if (z->frontier == s)
        __atomic_store_n(&z->frontier, NULL, __ATOMIC_RELAXED);
}

/* Wholly free slices of zone z, off its lists and chained through
 * zone_next (grow_lock and zone->lock held). */
static struct vm_slice *zone_free_slices(struct zone *z, bool arena)
{
    struct vm_slice *out = NULL;
    for (int c = 0; c < 2; c++) {
        struct sk_page *pg = list_of(z, SK_MAX_ORDER, c)->head, *next;
        for (; pg; pg = next) {
            next = pg->buddy.next;
            struct vm_slice *s = page_slice(pg);
            if (!arena && !s->partial)
                continue;
            zone_take_slice(z, s);
            s->zone_next = out;
            out = s;
        }
    }
    for (struct vm_slice *s = z->partials, *next; s; s = next) {
        next = s->zone_next;
        if (!zone_slice_free(z, s))
            continue;
        zone_take_slice(z, s);
        s->zone_next = out;
        out = s;
    }
    /* An open frontier slice never holds a block of the largest order:
     * wholly free when its joined pages are. */
    struct vm_slice *f = z->frontier;
    if (arena && f && zone_slice_free(z, f)) {
        zone_take_slice(z, f);
        f->zone_next = out;
        out = f;
    }
    return out;
}

size_t page_release_free(bool arena)
{
    if (!__atomic_load_n(&page_ready, __ATOMIC_ACQUIRE))
        return 0;
    page_drain_pcp();
    size_t bytes = 0;
    for (int n = 0; n < MAX_NUMNODES; n++) {
        struct zone *z = &page_zones[n];
        lock_acquire(&z->grow_lock);
        lock_acquire(&z->lock);
        struct vm_slice *s = zone_free_slices(z, arena), *next;
        if (s)
            z->grow_gen++;
        lock_release(&z->lock);
        /* Unmapped with the zone lock dropped, but before anyone can grow
         * the zone again: a partial slice's next growth must not race its
         * unmapping. */
        for (; s; s = next) {
            next = s->zone_next;
            bytes += s->mapped;
            vm_slice_release(s);
        }
        lock_release(&z->grow_lock);
    }
    return bytes;
}

void page_stats(struct page_stats *st)
{
    memset(st, 0, sizeof *st);
    for (int n = 0; n < MAX_NUMNODES; n++) {
        struct zone *z = &page_zones[n];
        lock_acquire(&z->lock);
        st->managed_pages += z->managed_pages;
        st->free_pages += z->free_pages;
        st->dirty_pages += z->dirty_pages;
        st->purged_pages += z->purged_pages;
        for (unsigned o = 0; o <= SK_MAX_ORDER; o++)
            st->free_blocks[o] += z->dirty[o].nr + z->clean[o].nr;
        lock_release(&z->lock);
    }
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

void page_for_each_free(void (*fn)(void *addr, unsigned order, bool clean, void *arg), void *arg)
{
    for (int n = 0; n < MAX_NUMNODES; n++) {
        struct zone *z = &page_zones[n];
        lock_acquire(&z->lock);
        for (unsigned o = 0; o <= SK_MAX_ORDER; o++)
            for (int c = 0; c < 2; c++)
                for (struct sk_page *pg = list_of(z, o, c)->head; pg; pg = pg->buddy.next)
                    fn(page_address(pg), o, c, arg);
        lock_release(&z->lock);
    }
}

/* ---- fork ---- */

/*
 * No lock is taken across fork (see docs/design.md, "fork"): a prepare
 * handler that took the zone locks would deadlock against stdio.  The
 * child is the only thread left; a zone whose lock was held at the fork
 * may be mid-surgery, so the child rebuilds its free lists from the
 * descriptors, which every operation keeps valid block by block.  A block
 * caught between two lists is leaked in the child, never handed out twice;
 * blocks off the lists being purged (PG_PURGING: the lock is dropped around
 * madvise, by a slow path or the purger) go back on them, dirty.  The
 * child has no purger thread: it starts its own when it needs one.
 */

static void zone_rebuild(struct zone *z)
{
    memset(z->dirty, 0, sizeof z->dirty);
    memset(z->clean, 0, sizeof z->clean);
    __atomic_store_n(&z->free_pages, 0, __ATOMIC_RELAXED);
    z->dirty_pages = 0;
    z->partials = NULL;
    unsigned long exact_blocks = 0, exact_pages = 0;   /* recounted from the heads */
    for (struct vm_slice *s = vm_slices(); s; s = s->next) {
        if (s->zone != z)
            continue;
        if (s->partial) {
            s->zone_next = z->partials;
            z->partials = s;
        }
        struct sk_page *first = (struct sk_page *)s->pages;
        for (size_t idx = 0; idx < SLICE_PAGES;) {
            struct sk_page *pg = first + idx;
            unsigned o = pg->order;
            if ((pg->flags & PG_BUDDY) && o <= SK_MAX_ORDER && (idx & (((size_t)1 << o) - 1)) == 0) {
                unsigned long span = pg->flags & PG_CLEAN ? 0 : pg->buddy.span;
                if (!(pg->flags & PG_CLEAN) && (span == 0 || span > (1ul << o)))
                    span = 1ul << o;    /* never trust a dirty block clean: err high */
                zone_insert(z, pg, o, span, pg->buddy.freed_at);
                idx += (size_t)1 << o;
            } else if ((pg->flags & PG_PURGING) && o <= SK_MAX_ORDER && (idx & (((size_t)1 << o) - 1)) == 0) {
                /* Purged or not, it may be resident: dirty, and old. */
                zone_insert(z, pg, o, 1ul << o, 0);
                idx += (size_t)1 << o;
            } else if ((pg->flags & PG_HEAD) && !(pg->flags & PG_LARGE) && o <= SK_MAX_ORDER) {
                idx += (size_t)1 << o;
            } else {
                if ((pg->flags & (PG_HEAD | PG_LARGE)) == (PG_HEAD | PG_LARGE)) {
                    exact_blocks++;
                    exact_pages += pg->large.nr_pages;
                }
                idx++;
            }
        }
    }
    z->exact_blocks = exact_blocks;
    z->exact_pages = exact_pages;
}

void page_atfork_child(void)
{
    /* A parent thread caught initialising is gone; page_ready still false
     * makes the child's first call do it again (each step is idempotent). */
    spin_reset_child(&init_lock);
    for (int n = 0; n < MAX_NUMNODES; n++) {
        struct zone *z = &page_zones[n];
        bool held = __atomic_load_n(&z->lock.state, __ATOMIC_RELAXED) != 0;
        lock_reset_child(&z->lock);
        if (held || z->purging) {
            zone_rebuild(z);
            z->purging = 0;
        }
        /* A growth caught mid-way: the part of the partial slice it mapped
         * but had not handed to the zone is leaked; the slice is closed. */
        if (__atomic_load_n(&z->grow_lock.state, __ATOMIC_RELAXED) != 0) {
            z->partial = NULL;
            /* And the frontier: a range caught joining is partly on the
             * rebuilt lists while frontier_next still points before it,
             * so joining from there again would free its blocks twice.
             * The rest of that slice is leaked (address space only), as
             * is the rest of a new slice whose frontier was not yet set. */
            z->frontier = NULL;
        }
        lock_reset_child(&z->grow_lock);
    }
    purge_atfork_child();
}

/* ---- the public page API ---- */

void *sk_alloc_pages(unsigned order)
{
    int saved = errno;
    if (page_init() != 0)
        return NULL;
    struct sk_page *pg = page_alloc(order);
    if (!pg && order <= SK_MAX_ORDER && page_release_free(true))
        pg = page_alloc(order);   /* the other zone's free slices, given back */
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
