/*
 * page_internal.h — what the files of src/page share (page.c says which
 * holds what): the purger's hooks, the functions one file calls in
 * another, and the small helpers they all inline; nothing outside
 * src/page.
 */
#ifndef SK_PAGE_INTERNAL_H
#define SK_PAGE_INTERNAL_H

#include "page/page.h"

/* ---- zone hooks for the purger (reclaim.c, pcp.c) ---- */

/* One purger pass over zone z: purge dirty blocks free for at least
 * decay_ms (and any beyond dirty_max_mb), taking the zone lock only with a
 * try-lock.  *seq gets the zone's dirty_seq as the pass left it.  Returns
 * whether the zone may still have work for a later pass: it was busy,
 * the pass stopped at its bound, or a free dirtied it within decay_ms. */
bool zone_purge(struct zone *z, uint64_t now, uint64_t decay_ms, unsigned long *seq);
/* Has z gained dirty blocks since the pass that saw `seq`?  Also true
 * when the zone is busy (the caller stays awake rather than wait). */
bool zone_dirtied_since(struct zone *z, unsigned long seq);
/* Drain into the zone every per-CPU page list that holds blocks and has
 * not been touched since the previous call (seen[] keeps each list's
 * operation count, PCP_NR_LISTS x cpu_nr_slots()).  Returns whether
 * any list still holds blocks. */
bool pcp_drain_idle(uint32_t *seen, unsigned long *drained);

/* ---- purger hooks for the zones (purge.c) ---- */

void purge_init(void);
/* The free path found page_purger.work 0 (under a zone lock, after it
 * gained dirty blocks) and has dropped the lock: wake the purger. */
void purge_kick(void);
void purge_atfork_child(void);

/* ---- what the files of src/page share ---- */

/* The order of a whole huge page. */
#define HUGE_ORDER (HUGE_PAGE_SHIFT - SK_PAGE_SHIFT)
/* Exact blocks from this order up are placed by best fit (zone_take_fit,
 * buddy.c says why), and from EXACT_FIT_GROW_MIN_ORDER up when they are
 * to grow in place. */
#define EXACT_FIT_MIN_ORDER 9
#define EXACT_FIT_GROW_MIN_ORDER 4
/* page_init's lock (pcp.c), reset in a forked child (fork.c). */
extern spinlock_t page_init_lock SK_INTERNAL;
extern bool page_ready SK_INTERNAL;
extern bool pcp_enabled SK_INTERNAL;
extern unsigned long page_pcp_fresh_drains SK_INTERNAL, page_pcp_local_empties SK_INTERNAL,
    page_pcp_local_blocks SK_INTERNAL, page_pcp_grows SK_INTERNAL;

/* buddy.c */
void zone_insert(struct zone *z, struct sk_page *pg, unsigned order, unsigned long span, uint64_t now,
                 unsigned mt);
unsigned long zone_remove(struct zone *z, struct sk_page *pg);
void zone_free_block(struct zone *z, struct sk_page *pg, unsigned order, unsigned long span, uint64_t now);
/* The same with the migratetype of pg's pageblock looked up by the caller
 * before it took the lock (MIGRATE_TYPES: look it up here). */
void zone_free_block_mt(struct zone *z, struct sk_page *pg, unsigned order, unsigned long span, uint64_t now,
                        unsigned mt);
/* ZONE_NORMAL or ZONE_LARGE. */
static inline unsigned zone_kind(const struct zone *z)
{
    return (unsigned)z->node & 1;
}
/* The migratetypes whose lists hold z's free blocks, [first, end): a
 * large blocks' zone has the default type's only (its requests are
 * movable, and its pageblocks are never claimed), so the walks over
 * every list need not look at the others there. */
static inline unsigned zone_mt_first(const struct zone *z)
{
    return zone_kind(z) == ZONE_LARGE ? pageblock_default_mt() : 0;
}
static inline unsigned zone_mt_end(const struct zone *z)
{
    return zone_kind(z) == ZONE_LARGE ? pageblock_default_mt() + 1 : MIGRATE_TYPES;
}
/* What z holds against the memory budget: pages in use and free pages
 * still resident (racy reads of counters stored atomically under its
 * lock: a snapshot mid-update is off by a block, for one look). */
static inline unsigned long zone_charged(const struct zone *z)
{
    return __atomic_load_n(&z->managed_pages, __ATOMIC_RELAXED) - __atomic_load_n(&z->free_pages, __ATOMIC_RELAXED) +
           __atomic_load_n(&z->dirty_pages, __ATOMIC_RELAXED);
}

/* node.c: the zone of `kind` a request of `pages` goes to: the calling
 * CPU's node's, or the first along its zonelist that is not full. */
struct zone *zonelist_pick(unsigned kind, unsigned long pages);
/* Remember z as full (its growth failed) in the zonelist cache. */
void zlc_mark_full(struct zone *z);
/* zone_alloc_bulk of the slab zone the zonelist picks (*zp gets it), and
 * zone_alloc of a zone of `kind`: when the zone's growth failed, the
 * next zone along the zonelist (node.c).  mt: the migratetype. */
unsigned zonelist_alloc_bulk(unsigned order, unsigned mt, struct sk_page **out, unsigned n, struct zone **zp);
struct sk_page *zonelist_alloc(unsigned kind, unsigned order, unsigned mt, size_t exact, unsigned align_order,
                               unsigned fit_order);

struct sk_page *zone_alloc(struct zone *z, unsigned order, unsigned mt, size_t exact, unsigned align_order,
                           unsigned fit_order);
unsigned zone_alloc_bulk(struct zone *z, unsigned order, unsigned mt, struct sk_page **out, unsigned n);
/* Per-CPU list blocks back to z: each to the lists of the type its
 * descriptor keeps (buddy.mt, set by page_free or zone_alloc_bulk). */
void zone_free_bulk(struct zone *z, struct sk_page **pgs, unsigned n, unsigned order);
/* zone_free_bulk for blocks of any zones (a per-CPU list's: a block freed
 * on a CPU of another node joins that CPU's list), each to its own;
 * reorders pgs. */
void zone_free_pages(struct sk_page **pgs, unsigned n, unsigned order);
unsigned order_for(size_t nr_pages);
void zone_free_range(struct zone *z, struct sk_page *first, size_t idx, size_t end, size_t dirty_end, uint64_t now);

/* page.c: page_before from the options. */
void page_series_init(void);

/* pcp.c */
unsigned long pcp_pages(void);
bool zone_has_dirty(const struct zone *z, unsigned order);
bool zone_drain_before_fresh(struct zone *z, unsigned order, unsigned mt, bool first);
void exact_cached(unsigned long *blocks, unsigned long *pages);

/* reclaim.c */
unsigned long dirty_keep_pages(const struct zone *z);
void zone_maybe_reclaim(struct zone *z, uint64_t now);

/* ---- small helpers, inline where they were ---- */




/* The first descriptor of pg's slice. */
static inline struct sk_page *page_first(const struct sk_page *pg)
{
    return (struct sk_page *)page_slice(pg)->pages;
}

/* Exact blocks in use and their pages (zone->lock held; read unlocked by
 * page_exact_stats). */
static inline void zone_count_exact(struct zone *z, long blocks, long pages)
{
    __atomic_store_n(&z->exact_blocks, z->exact_blocks + (unsigned long)blocks, __ATOMIC_RELAXED);
    __atomic_store_n(&z->exact_pages, z->exact_pages + (unsigned long)pages, __ATOMIC_RELAXED);
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




#endif
