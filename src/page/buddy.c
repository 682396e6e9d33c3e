/*
 * buddy.c — the zones: free lists per order and migratetype, splitting
 * and coalescing, pageblock types and their fallbacks, growth, exact
 * (large-block) allocation, and giving free slices back.
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
 * Lock order: zone->grow_lock, then zone->lock, then vm_lock (page.c
 * says why).
 * Invariants (zone->lock held):
 *  - Every free block is on exactly one list: dirty[mt][order] (resident,
 *    newest first, so the tail is the oldest) or clean[mt][order] (known
 *    zero: purged, or fresh from the OS), mt its migratetype's list
 *    ("grouping by mobility" below).  Its head descriptor has PG_BUDDY,
 *    PG_CLEAN iff on a clean list, order, mt, span (0 iff clean: the
 *    pages from its start that may be resident) and freed_at (dirty
 *    only).
 *  - A pageblock's type (its slice's pageblock_bits) changes only under
 *    the zone lock; a free block of whole pageblocks has them all of the
 *    default type.
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
 */
#include <errno.h>
#include <string.h>

#include "page/page_internal.h"

/* ---- lists ---- */

static inline struct page_list *list_of(struct zone *z, unsigned order, bool clean, unsigned mt)
{
    return clean ? &z->clean[mt][order] : &z->dirty[mt][order];
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

/* Unlock z after an operation that may have put dirty blocks on its
 * lists (dirtied): through zone_release_dirtied then, else plainly. */
static inline void zone_unlock(struct zone *z, uint64_t now, bool dirtied)
{
    if (dirtied)
        zone_release_dirtied(z, now);
    else
        lock_release(&z->lock);
}

/* Put a free block on its list of migratetype mt (no merging); span 0:
 * clean. */
void zone_insert(struct zone *z, struct sk_page *pg, unsigned order, unsigned long span, uint64_t now,
                 unsigned mt)
{
    bool clean = span == 0;
    /* Order first, then the flag that makes the descriptor a free block's
     * head (release): a fork caught in between must not see PG_BUDDY with
     * a stale order, which zone_rebuild would trust. */
    pg->order = (uint8_t)order;
    pg->buddy.freed_at = now;
    pg->buddy.span = (uint32_t)span;
    pg->buddy.mt = (uint8_t)mt;
    __atomic_store_n(&pg->flags, PG_BUDDY | (clean ? PG_CLEAN : 0), __ATOMIC_RELEASE);
    list_add_head(list_of(z, order, clean, mt), pg);
    /* Atomic: page_purger_wanted reads it without the lock. */
    __atomic_store_n(&z->free_pages, z->free_pages + (1ul << order), __ATOMIC_RELAXED);
    __atomic_store_n(&z->dirty_pages, z->dirty_pages + span, __ATOMIC_RELAXED);
}

/* Take a free block off its list; returns its span (0: it was clean). */
unsigned long zone_remove(struct zone *z, struct sk_page *pg)
{
    bool clean = pg_flags(pg) & PG_CLEAN;
    unsigned order = pg->order;
    unsigned long span = clean ? 0 : pg->buddy.span;
    list_del(list_of(z, order, clean, pg->buddy.mt), pg);
    pg_set_flags(pg, 0);
    __atomic_store_n(&z->free_pages, z->free_pages - (1ul << order), __ATOMIC_RELAXED);
    __atomic_store_n(&z->dirty_pages, z->dirty_pages - span, __ATOMIC_RELAXED);
    return span;
}

/* ---- grouping by mobility ---- */

bool page_grouping = true;

/* Set the type of pg's pageblock, keeping the zone's count of pageblocks
 * of each type but the default (zone->lock held). */
static void zone_set_pageblock(struct zone *z, struct sk_page *pg, unsigned mt)
{
    unsigned old = pageblock_mt(pg), def = pageblock_default_mt();
    if (old == mt)
        return;
    if (old != def)
        __atomic_store_n(&z->mt_pageblocks[old], z->mt_pageblocks[old] - 1, __ATOMIC_RELAXED);
    if (mt != def)
        __atomic_store_n(&z->mt_pageblocks[mt], z->mt_pageblocks[mt] + 1, __ATOMIC_RELAXED);
    pageblock_set_mt(pg, mt);
}

/* Whether any pageblock of z has a type but the default (movable with
 * grouping; without it every pageblock has the one type), from the counts
 * zone_set_pageblock keeps: a zone of large blocks never has one. */
static bool zone_has_claims(const struct zone *z)
{
    return page_grouping && (z->mt_pageblocks[MIGRATE_UNMOVABLE] | z->mt_pageblocks[MIGRATE_RECLAIMABLE]);
}

/* The same for every pageblock of a block of `order` (at least
 * PAGEBLOCK_ORDER) at pg. */
static void zone_set_pageblocks(struct zone *z, struct sk_page *pg, unsigned order, unsigned mt)
{
    for (size_t i = 0; i < (size_t)1 << order; i += PAGEBLOCK_PAGES)
        zone_set_pageblock(z, pg + i, mt);
}

/* The list a free block of `order` at pg goes on: its pageblock's type;
 * a block of whole pageblocks holds nothing any more, and its pageblocks
 * go back to the default type, so that free pageblocks of different
 * types still merge into whole slices that can go back to the OS. */
static unsigned zone_free_mt(struct zone *z, struct vm_slice *s, size_t idx, unsigned order, unsigned mt)
{
    struct sk_page *pg = (struct sk_page *)s->pages + idx;
    if (order >= PAGEBLOCK_ORDER) {
        if (zone_has_claims(z))    /* else they all have it already */
            zone_set_pageblocks(z, pg, order, pageblock_default_mt());
        return pageblock_default_mt();
    }
    if (mt < MIGRATE_TYPES)
        return mt;                       /* looked up before the lock */
    /* Seed 001's patch 9: the page index the caller has (before it, the
     * lookup computed it again, as get_pageblock_migratetype called
     * page_to_pfn). */
    return page_patch_before(PATCH_PFN_ONCE) ? pageblock_mt(pg) : pageblock_mt_at(s, idx);
}

/* Free a block whose first `span` pages may be resident (0: clean, all of
 * it: 1 << order), merging with free buddies (the kernel's
 * __free_one_page), onto its pageblock's list. */
void zone_free_block_mt(struct zone *z, struct sk_page *pg, unsigned order, unsigned long span, uint64_t now,
                        unsigned mt)
{
    struct vm_slice *s = page_slice(pg);
    struct sk_page *first = (struct sk_page *)s->pages;
    size_t idx = (size_t)(pg - first);
    uint64_t freed_at = now;
    bool zone_id_first = page_patch_before(PATCH_BUDDY_ZONE_ID);
    pg_set_flags(pg, 0);    /* it may end up inside a merged block: no stale head */
    while (order < SK_MAX_ORDER) {
        size_t half = (size_t)1 << order, bidx = idx ^ half;
        struct sk_page *buddy = first + bidx;
        /* 3.15-rc1's page_is_buddy compared the zones first, for every
         * candidate; seed 001's patch 5 only once it is a free buddy of
         * the order.  A buddy lies in the same slice, a slice in one zone:
         * the comparison never fails here, it only costs. */
        if (zone_id_first && page_slice(buddy)->zone != page_slice(first + idx)->zone)
            break;
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
    zone_insert(z, first + idx, order, span, span ? freed_at : now, zone_free_mt(z, s, idx, order, mt));
}

void zone_free_block(struct zone *z, struct sk_page *pg, unsigned order, unsigned long span, uint64_t now)
{
    zone_free_block_mt(z, pg, order, span, now, MIGRATE_TYPES);
}

/* Split a block of order `high` with `span` down to `low`; the upper
 * halves go back on mt's lists with their part of the span (clean past
 * it) and the parent's age.  Returns the span left to the low block. */
static unsigned long zone_expand(struct zone *z, struct sk_page *pg, unsigned low, unsigned high,
                                 unsigned long span, uint64_t freed_at, unsigned mt)
{
    while (high > low) {
        high--;
        unsigned long half = 1ul << high;
        zone_insert(z, pg + half, high, span > half ? span - half : 0, freed_at, mt);
        if (span > half)
            span = half;
    }
    return span;
}

/* A block of `order` off mt's lists, smallest fitting order first:
 * clean (known zero) or dirty (resident) ones.  *span_out: the pages
 * from its start that may be resident (0: clean). */
static struct sk_page *zone_take_own(struct zone *z, unsigned order, unsigned mt, bool clean,
                                     unsigned long *span_out)
{
    for (unsigned o = order; o <= SK_MAX_ORDER; o++) {
        struct sk_page *pg = list_of(z, o, clean, mt)->head;
        if (!pg)
            continue;
        uint64_t freed_at = pg->buddy.freed_at;
        unsigned long span = zone_remove(z, pg);
        *span_out = zone_expand(z, pg, order, o, span, freed_at, mt);
        return pg;
    }
    return NULL;
}

/* The kernel's fallback order: where a request of each type looks when
 * its own lists are empty (3.15's fallbacks[], less the reserve). */
static const uint8_t mt_fallbacks[MIGRATE_TYPES][MIGRATE_TYPES - 1] = {
    [MIGRATE_UNMOVABLE] = { MIGRATE_RECLAIMABLE, MIGRATE_MOVABLE },
    [MIGRATE_RECLAIMABLE] = { MIGRATE_UNMOVABLE, MIGRATE_MOVABLE },
    [MIGRATE_MOVABLE] = { MIGRATE_RECLAIMABLE, MIGRATE_UNMOVABLE },
};

/* Move the free blocks of the pageblock of `taken` (a block of `order`
 * just taken off the lists, counted as free) to mt's lists (the kernel's
 * move_freepages_block); returns their pages.  zone->lock held. */
static size_t zone_move_pageblock(struct zone *z, struct sk_page *taken, unsigned order, unsigned mt)
{
    struct sk_page *first = page_first(taken);
    size_t idx = page_index(taken) & ~(PAGEBLOCK_PAGES - 1), end = idx + PAGEBLOCK_PAGES, moved = 0;
    while (idx < end) {
        struct sk_page *b = first + idx;
        if (b == taken) {               /* its pages are not read one by one */
            moved += (size_t)1 << order;
            idx += (size_t)1 << order;
            continue;
        }
        if (!(pg_flags(b) & PG_BUDDY)) {
            idx++;
            continue;
        }
        unsigned o = b->order;
        if (b->buddy.mt != mt) {
            uint64_t freed_at = b->buddy.freed_at;
            unsigned long span = zone_remove(z, b);
            zone_insert(z, b, o, span, freed_at, mt);
        }
        moved += (size_t)1 << o;
        idx += (size_t)1 << o;
    }
    return moved;
}

/*
 * A request of type mt whose own lists are empty takes from another
 * type's (the kernel's __rmqueue_fallback, 3.15), a block as large as it
 * can find, so that one fallback claims as much as it can: a whole
 * pageblock if there is one.  A block of whole pageblocks gives the
 * request one pageblock, or as many as it needs, and they become mt's;
 * the rest stays with its type.  A smaller block of at least half a
 * pageblock's order, or any block for a reclaimable request, moves the
 * pageblock's other free blocks to mt's lists, and the pageblock becomes
 * mt's when they make half of it.  The split-off rest goes to mt's lists.
 *
 * Where slabkit differs: its largest order is a 64 MiB slice, the
 * kernel's 4 MiB (two pageblocks).  Any block of whole pageblocks gives
 * one, so among those the smallest is taken (the kernel's largest-first
 * took the upper halves of slices one after another, which scattered
 * each type's pageblocks over every slice, and made the free memory's
 * resident spans, kept as prefixes, count whole clean halves as dirty);
 * below a pageblock, the largest, as the kernel does.
 */
static struct sk_page *zone_take_fallback(struct zone *z, unsigned order, unsigned mt, bool clean,
                                          unsigned long *span_out)
{
    unsigned need = order > PAGEBLOCK_ORDER ? order : PAGEBLOCK_ORDER;
    /* Orders need..SK_MAX_ORDER, then need - 1 down to order. */
    for (unsigned step = 0; step <= SK_MAX_ORDER - order; step++) {
        unsigned o = need + step <= SK_MAX_ORDER ? need + step : SK_MAX_ORDER - step;
        for (unsigned i = 0; i < MIGRATE_TYPES - 1; i++) {
            unsigned from = mt_fallbacks[mt][i];
            struct sk_page *pg = list_of(z, o, clean, from)->head;
            if (!pg)
                continue;
            uint64_t freed_at = pg->buddy.freed_at;
            unsigned long span = zone_remove(z, pg);
            unsigned high = o;
            if (high > need) {
                span = zone_expand(z, pg, need, high, span, freed_at, from);
                high = need;
            }
            bool claim = high >= PAGEBLOCK_ORDER;
            if (!claim && (high >= PAGEBLOCK_ORDER / 2 || mt == MIGRATE_RECLAIMABLE))
                claim = zone_move_pageblock(z, pg, high, mt) >= PAGEBLOCK_PAGES / 2;
            if (claim) {
                if (high >= PAGEBLOCK_ORDER)
                    zone_set_pageblocks(z, pg, high, mt);
                else
                    zone_set_pageblock(z, pg, mt);
                __atomic_store_n(&z->mt_claims, z->mt_claims + 1, __ATOMIC_RELAXED);
            }
            __atomic_store_n(&z->mt_fallbacks, z->mt_fallbacks + 1, __ATOMIC_RELAXED);
            *span_out = zone_expand(z, pg, order, high, span, freed_at, mt);
            return pg;
        }
    }
    return NULL;
}

/* Take a block of `order` for a request of type mt off the lists: its own
 * type's dirty (resident) memory, then its own clean memory, then the
 * other types' (dirty, then clean).  resident_only: dirty memory only.
 * *span_out: the pages from its start that may be resident (0: clean). */
static struct sk_page *zone_take(struct zone *z, unsigned order, unsigned mt, bool resident_only,
                                 unsigned long *span_out)
{
    struct sk_page *pg = zone_take_own(z, order, mt, false, span_out);
    if (!pg && !resident_only)
        pg = zone_take_own(z, order, mt, true, span_out);
    if (!pg && page_grouping) {
        pg = zone_take_fallback(z, order, mt, false, span_out);
        if (!pg && !resident_only)
            pg = zone_take_fallback(z, order, mt, true, span_out);
    }
    if (pg) {
        if (!*span_out)
            __atomic_store_n(&z->clean_takes, z->clean_takes + 1, __ATOMIC_RELAXED);
        z->takes++;
    }
    return pg;
}


/* Hand [idx, end) of slice s to the zone as free blocks (zone->lock held).
 *
 * A pageblock that joins in steps (a frontier or partial slice grows from
 * 256 KiB) takes the type of the request that joined its first page: the
 * kernel's memory comes up in whole pageblocks, and one that came up in
 * pieces as movable would have a malloc program's first slab pages in a
 * movable pageblock, none of them claimable until 2 MiB had joined, each
 * freed page on the movable per-CPU list.  Pageblocks that join whole
 * keep the default type. */
static void zone_add_range(struct zone *z, struct vm_slice *s, size_t idx, size_t end, bool clean)
{
    size_t pb = SK_ALIGN_UP(idx, PAGEBLOCK_PAGES);
    if (pb < end && end - pb < PAGEBLOCK_PAGES)
        zone_set_pageblock(z, (struct sk_page *)s->pages + pb, z->grow_mt);
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
    page_node_bind(s, pages << SK_PAGE_SHIFT, zone_nid(z->node));
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
 * ZONE_MOVABLE for the same reason).  Each node has one (ZONE_LARGE, beside
 * its ZONE_NORMAL: node.c), and page_free finds it through pg->node like
 * any other zone.  A large block that only clean memory of its zone could
 * serve borrows resident memory of its node's slab zone instead
 * (zone_borrow), and lives there.
 */

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
 * per 4 KiB (docs/design.md has larson's figure).  The steps that join are
 * powers of two, so from 4 MiB on each is whole huge pages. */
#define FRONTIER_HUGE_FROM ((size_t)(4 << 20) >> SK_PAGE_SHIFT)

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
    z->grow_mt = (uint8_t)page_request_mt(MIGRATE_MOVABLE);   /* for a large block */
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
static int zone_grow(struct zone *z, unsigned order, unsigned mt, unsigned long gen)
{
    int r = 0;
    lock_acquire(&z->grow_lock);
    z->grow_mt = (uint8_t)mt;
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
        if (kind == VM_SLICE_BASE && zone_kind(z) == ZONE_NORMAL)
            end = step_first(order);
        page_node_bind(s, SLICE_SIZE, zone_nid(z->node));
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
    zlc_mark_full(z);       /* the next requests try the other nodes first */
    errno = ENOMEM;
    r = -1;
out:
    lock_release(&z->grow_lock);
    return r;
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
             * (bench/peers realloc_grow's peak; docs/design.md). */
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
        /* Each type's list the zone has, movable first (large blocks
         * are). */
        for (unsigned mt = zone_mt_end(z); mt-- > zone_mt_first(z);) {
            struct sk_page *pg = z->dirty[mt][lo].head;
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
 * resident), then the tightest run, then the lowest address.  With it the
 * same loop purges about half as much and takes about half the time
 * (docs/design.md, "largeblocks"); its peak stays above glibc's because
 * the zone's 64 MiB slices are bins no block crosses.  zone->lock held.
 */
#define EXACT_FIT_SCAN 64
/* Blocks a realloc grows into (page_alloc_exact_grow) are placed best-fit
 * from 64 KiB up: there the buddy placement's room after a block is what
 * the next growth in place takes, and the asker leaves that room itself
 * (kmalloc's headroom), while the buddy's split left resident pieces
 * behind realloc_grow's buffers (docs/design.md). */

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
    /* Each type's lists the zone has, each order's: dirty, then clean. */
    for (unsigned mt = zone_mt_first(z); mt < zone_mt_end(z); mt++)
        for (unsigned o = order - 3; o <= SK_MAX_ORDER; o++)
            for (unsigned c = 0; c < 2; c++) {
                for (struct sk_page *pg = list_of(z, o, c, mt)->head; pg; pg = pg->buddy.next) {
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
 * clean memory.  mt: the request's migratetype. */
static struct sk_page *zone_take_block(struct zone *z, unsigned order, unsigned mt, size_t exact,
                                       unsigned align_order, unsigned fit_order, bool resident_only, uint64_t now,
                                       bool *clean, bool *dirtied)
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
    pg = zone_take(z, order, mt, resident_only, &span);
    if (!pg)
        return NULL;
    *clean = span == 0;
    if (exact && exact < ((size_t)1 << order)) {
        size_t idx = page_index(pg);
        /* The tail goes back dirty whole if any of the block was.  Made
         * as precise as zone_take_until's overshoot, it counted less
         * towards dirty_max_mb: largeblocks purged less and peaked
         * higher, for no gain elsewhere. */
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
    /* Order first, then the flag (release), as zone_insert does: what a
     * fork child's rebuild reads of a head is never older than its flag
     * (it steps over live blocks a page at a time all the same). */
    pg->order = (uint8_t)order;
    pg->node = (uint8_t)z->node;
    __atomic_store_n(&pg->flags, PG_HEAD | (clean ? PG_ZEROED : 0), __ATOMIC_RELEASE);
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
static struct sk_page *zone_borrow(struct zone *large, unsigned order, unsigned mt, size_t exact,
                                   unsigned align_order, unsigned fit_order)
{
    struct zone *z = zone_of_node(zone_nid(large->node), ZONE_NORMAL);
    bool clean = false, dirtied = false;
    lock_acquire(&z->lock);
    uint64_t now = os_now_ms_coarse();
    struct sk_page *pg = zone_take_block(z, order, mt, exact, align_order, fit_order, true, now, &clean,
                                         &dirtied);
    if (!pg) {
        lock_release(&z->lock);
        return NULL;
    }
    return zone_took(z, pg, order, exact, now, clean, dirtied);
}

/* A block of `order` for a request of migratetype mt; with exact (large
 * blocks: 0 < exact <= 2^order) only its first `exact` pages, the tail
 * going back in the same lock hold, and the block counted in the zone's
 * exact totals.  mt is made the request's type here, once for the zone
 * layer (page_request_mt: one type without grouping). */
struct sk_page *zone_alloc(struct zone *z, unsigned order, unsigned mt, size_t exact, unsigned align_order,
                           unsigned fit_order)
{
    mt = page_request_mt(mt);
    bool borrow = exact && zone_kind(z) == ZONE_LARGE && sk_opt.zone_borrow;
    /* Under a budget, the request is weighed as if it grew the resident
     * memory: free resident (dirty) pages count as charged, as the
     * kernel's page cache is not free memory, and direct reclaim purges
     * them when that is what it takes (budget.c). */
    if (unlikely(page_budget_on()) && !page_budget_admit(exact ? exact : (size_t)1 << order)) {
        errno = ENOMEM;
        return NULL;
    }
    for (bool first = true;; first = false) {
        lock_acquire(&z->lock);
        if (zone_drain_before_fresh(z, order, mt, first))
            continue;
        unsigned long gen = z->grow_gen;
        uint64_t now = os_now_ms_coarse();
        bool clean = false, dirtied = false;
        struct sk_page *pg = zone_take_block(z, order, mt, exact, align_order, fit_order, borrow, now, &clean,
                                             &dirtied);
        if (!pg && borrow) {
            /* Nothing resident here: the slab zone's, then our clean
             * memory (the lock was dropped: look again). */
            lock_release(&z->lock);
            if ((pg = zone_borrow(z, order, mt, exact, align_order, fit_order)))
                return pg;
            borrow = false;
            continue;
        }
        if (pg)
            return zone_took(z, pg, order, exact, now, clean, dirtied);
        lock_release(&z->lock);
        if (zone_grow(z, order, mt, gen) != 0) {
            errno = ENOMEM;
            return NULL;
        }
    }
}

/* Take up to n blocks of `order` and migratetype mt for a per-CPU list.
 * A zone whose frontier slice has more to join grows for a whole batch,
 * as it had it when slices joined whole; otherwise a part of a batch is
 * enough. */
unsigned zone_alloc_bulk(struct zone *z, unsigned order, unsigned mt, struct sk_page **out, unsigned n)
{
    mt = page_request_mt(mt);   /* as zone_alloc */
    unsigned got = 0;
    /* Under a budget, a refill takes no more than it needs when memory
     * is short: one block past low, none past the mark. */
    if (unlikely(page_budget_on()) && !(n = page_budget_blocks(n, order)))
        return 0;
    for (bool first = true; got < n; first = false) {
        unsigned long span;
        lock_acquire(&z->lock);
        if (got == 0 && zone_drain_before_fresh(z, order, mt, first))
            continue;
        unsigned long gen = z->grow_gen;
        while (got < n) {
            struct sk_page *pg = zone_take(z, order, mt, false, &span);
            if (!pg)
                break;
            pg_set_flags(pg, PG_PCP | (span ? 0 : PG_ZEROED));
            pg->order = (uint8_t)order;
            pg->buddy.mt = (uint8_t)mt;     /* the type it is for: zone_free_bulk's way back */
            pg->node = (uint8_t)z->node;    /* its zone: page_free's way back */
            out[got++] = pg;
        }
        if (got)
            zone_maybe_reclaim(z, os_now_ms_coarse());
        lock_release(&z->lock);
        if (got == n || (got && !__atomic_load_n(&z->frontier, __ATOMIC_RELAXED)))
            break;
        if (zone_grow(z, order, mt, gen) != 0)
            break;
    }
    return got;
}

void zone_free_bulk(struct zone *z, struct sk_page **pgs, unsigned n, unsigned order)
{
    uint64_t now = os_now_ms_coarse();
    lock_acquire(&z->lock);
    for (unsigned i = 0; i < n; i++)
        zone_free_block_mt(z, pgs[i], order, 1ul << order, now, pgs[i]->buddy.mt);
    zone_note_freed(z, 1ul << order);
    zone_maybe_reclaim(z, now);
    zone_release_dirtied(z, now);
}

void zone_free_pages(struct sk_page **pgs, unsigned n, unsigned order)
{
    while (n) {
        /* The blocks of the first one's zone to the front, then freed. */
        unsigned zid = pgs[0]->node, k = 0;
        for (unsigned i = 0; i < n; i++)
            if (pgs[i]->node == zid) {
                struct sk_page *t = pgs[k];
                pgs[k++] = pgs[i];
                pgs[i] = t;
            }
        zone_free_bulk(&page_zones[zid], pgs, k, order);
        pgs += k;
        n -= k;
    }
}

unsigned order_for(size_t nr_pages)
{
    unsigned o = 0;
    while (((size_t)1 << o) < nr_pages)
        o++;
    return o;
}

/* Free [idx, end) of a slice as the largest aligned blocks that fit.
 * The pages from dirty_end on are known zero: a block past it goes back
 * clean, a block across it dirty with its span ending there. */
void zone_free_range(struct zone *z, struct sk_page *first, size_t idx, size_t end, size_t dirty_end,
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
    /* Growth in place is a request for the pages it adds: weighed by the
     * budget as zone_alloc weighs one (a refusal makes realloc move the
     * block, which asks again, and fails there if it must). */
    if (unlikely(page_budget_on()) && !page_budget_admit(nr_pages - nr))
        return false;
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
    for (unsigned l = 0; l < 2 * MIGRATE_TYPES; l++) {   /* dirty, clean: each type's */
        struct sk_page *pg = list_of(z, SK_MAX_ORDER, l / MIGRATE_TYPES, l % MIGRATE_TYPES)->head, *next;
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
    for (int n = 0; n < PAGE_NR_ZONES; n++) {
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

void page_for_each_free(void (*fn)(void *addr, unsigned order, bool clean, void *arg), void *arg)
{
    for (int n = 0; n < PAGE_NR_ZONES; n++) {
        struct zone *z = &page_zones[n];
        lock_acquire(&z->lock);
        for (unsigned o = 0; o <= SK_MAX_ORDER; o++)
            for (unsigned l = 0; l < 2 * MIGRATE_TYPES; l++)
                for (struct sk_page *pg = list_of(z, o, l / MIGRATE_TYPES, l % MIGRATE_TYPES)->head; pg;
                     pg = pg->buddy.next)
                    fn(page_address(pg), o, l / MIGRATE_TYPES, arg);
        lock_release(&z->lock);
    }
}

