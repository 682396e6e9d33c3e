/*
 * fork.c — the forked child's page allocator.
 *
 * Lock order: none taken across fork; the child is the only thread and
 * resets every zone lock before rebuilding.
 * Invariants: after page_atfork_child every free block of the child is on
 * exactly one list again (buddy.c's invariants), and no block is on a
 * list twice: one caught between two lists is leaked, never handed out.
 */
#include <errno.h>
#include <string.h>

#include "page/page_internal.h"

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

/* The list a free block goes back on: the one it was on (a block off the
 * lists being purged keeps its field), or its pageblock's type if that
 * field is not a type (torn by the fork). */
static unsigned fork_list_mt(const struct sk_page *pg)
{
    return pg->buddy.mt < MIGRATE_TYPES ? pg->buddy.mt : pageblock_mt(pg);
}

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
                zone_insert(z, pg, o, span, pg->buddy.freed_at, fork_list_mt(pg));
                idx += (size_t)1 << o;
            } else if ((pg->flags & PG_PURGING) && o <= SK_MAX_ORDER && (idx & (((size_t)1 << o) - 1)) == 0) {
                /* Purged or not, it may be resident: dirty, and old. */
                zone_insert(z, pg, o, 1ul << o, 0, fork_list_mt(pg));
                idx += (size_t)1 << o;
            } else {
                /* Anything else is stepped over a page at a time, never by
                 * its head's order: a block being handed out has its head
                 * written after the zone lock is dropped (zone_took, then
                 * alloc_exact's PG_LARGE), so a parent thread caught in
                 * between leaves a head whose order is not yet, or not
                 * at all, the block's extent (an exact block of 11 pages
                 * said PG_HEAD, order 4).  Skipping 2^order pages from it
                 * stepped over the free blocks of the block's tail, which
                 * kept PG_BUDDY off every list; a later run placement
                 * (zone_free_back/fwd read the flags) took them and
                 * list_del wrote through their stale links into live
                 * descriptors (the getline buffer whose nr_pages held a
                 * descriptor pointer; docs/design.md).  A PG_BUDDY or
                 * PG_PURGING flag is only ever on a free block's head
                 * (buddy.c clears it as the block leaves the lists), so
                 * the pages of live blocks hold none. */
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
    spin_reset_child(&page_init_lock);
    for (int n = 0; n < PAGE_NR_ZONES; n++) {
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

