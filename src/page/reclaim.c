/*
 * reclaim.c — aging and returning memory to the OS.
 *
 * Aging: recently freed blocks are reused first (dirty lists are LIFO and
 * searched before clean ones).  Blocks free for longer than decay_ms, and
 * the oldest beyond dirty_max_mb, are purged (MADV_DONTNEED) and become
 * clean; reclaim runs from the slow paths at most every decay_ms/4, and
 * from the purger thread (purge.c) while the program is idle.  The hooks
 * for the purger are here (zone_purge, zone_dirtied_since; pcp.c has
 * pcp_drain_idle): it takes a zone lock only with a try-lock.  A free that
 * gives a zone dirty blocks records it (dirtied_at, dirty_seq) and, if it
 * finds the purger asleep (page_purger.work read under the zone lock),
 * wakes it after the unlock (zone_release_dirtied).
 *
 * Lock order: zone->lock (page.c has the whole order); it is dropped around each madvise,
 * the batch's blocks held off the lists meanwhile (PG_PURGING).
 * Invariants: a purged block is clean (span 0) and on a clean list; the
 * trim threshold (zone_trim_limit) is never below TRIM_FLOOR_PAGES.
 */
#include <errno.h>
#include <string.h>

#include "page/page_internal.h"

/* ---- aging: purging the oldest blocks ---- */

/* The free resident pages z keeps at most (zone lock held): dirty_max_mb,
 * or by default (-1) DIRTY_AUTO_MB or as many pages as z has in use,
 * whichever is more.
 * A fixed cap is too small for a large heap: a loop of 5-25 MiB blocks
 * with 300 MiB live (mimalloc-bench's malloc-large) leaves up to about
 * 250 MiB of holes between them, and with 64 MiB kept, or half the heap,
 * the blocks it allocates were purged and are faulted in again; glibc
 * keeps such holes for good (docs/design.md has the figures).  The heap's
 * own size bounds the free memory kept to half of the resident memory,
 * and decay_ms still returns it when it stays free. */
#define DIRTY_AUTO_MB 64

unsigned long dirty_keep_pages(const struct zone *z)
{
    long mb = __atomic_load_n(&sk_opt.dirty_max_mb, __ATOMIC_RELAXED);
    if (mb >= 0)
        return (unsigned long)mb << (20 - SK_PAGE_SHIFT);
    unsigned long floor = (unsigned long)DIRTY_AUTO_MB << (20 - SK_PAGE_SHIFT);
    unsigned long managed = __atomic_load_n(&z->managed_pages, __ATOMIC_RELAXED);
    unsigned long used = managed > z->free_pages ? managed - z->free_pages : 0;
    return used > floor ? used : floor;
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
 * to RECLAIM_SKIP of them, unless `split`), or NULL: the oldest of each
 * migratetype's list's. */
static struct sk_page *reclaim_candidate(struct zone *z, int o, bool split)
{
    struct sk_page *best = NULL;
    for (unsigned mt = zone_mt_first(z); mt < zone_mt_end(z); mt++) {
        unsigned skipped = 0;
        for (struct sk_page *pg = z->dirty[mt][o].tail; pg; pg = pg->buddy.prev) {
            if (split || !(o < HUGE_ORDER && page_huge(pg))) {
                if (!best || pg->buddy.freed_at < best->buddy.freed_at)
                    best = pg;
                break;
            }
            if (++skipped > RECLAIM_SKIP)
                break;
        }
    }
    return best;
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
    bool split = keep < dirty_keep_pages(z);
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
    unsigned long keep = dirty_keep_pages(z), trim = zone_trim_limit(z);
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

/* Called with the zone lock held, after a slow-path operation; now: the
 * caller's reading of the coarse clock (one per operation). */
void zone_maybe_reclaim(struct zone *z, uint64_t now)
{
    unsigned long keep = zone_keep_pages(z);
    uint64_t decay = (uint64_t)sk_opt.decay_ms;
    if (z->dirty_pages <= keep && now - z->last_decay < decay / 4 + 1)
        return;
    z->last_decay = now;
    /* Without the purger, over the threshold: a trim (reclaim.c, "Returning
     * memory without a thread"). */
    bool trim = z->dirty_pages > keep && keep < dirty_keep_pages(z);
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
    unsigned long keep = dirty_keep_pages(z), got;
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

size_t page_reclaim(uint64_t age_ms, bool drain)
{
    if (!__atomic_load_n(&page_ready, __ATOMIC_ACQUIRE))
        return 0;
    if (drain)
        page_drain_pcp();
    size_t pages = 0;
    for (int n = 0; n < PAGE_NR_ZONES; n++) {
        struct zone *z = &page_zones[n];
        lock_acquire(&z->lock);
        uint64_t now = os_now_ms_coarse();
        unsigned long got;
        while ((got = zone_reclaim_batch(z, now, age_ms, age_ms ? dirty_keep_pages(z) : 0)))
            pages += got;
        lock_release(&z->lock);
    }
    return pages << SK_PAGE_SHIFT;
}

