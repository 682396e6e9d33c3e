/*
 * pcp.c — the per-CPU page lists in front of the slab zones (unmovable
 * blocks of orders 0..3, order 0 of the other two migratetypes) and the
 * exact-block cache, their tuning and draining, and the block API the
 * slab layer and kmalloc call (page_alloc, page_free, page_alloc_exact).
 *
 * Lock order: a list is a per-CPU array (src/cpu): no lock in rseq mode,
 * its own spinlock (a leaf) in the fallback; refills and drains take
 * zone->lock around the zone's part only.
 * Invariants: blocks on per-CPU lists are outside the zone (PG_PCP): they
 * never merge until drained back, and they count in no zone total.  They
 * are drained back before a request would take never-used memory while
 * they hold enough (zone_drain_before_fresh).  A list holds at most its
 * capacity: high, grown up to high_max by refills that follow an
 * overflow, put back to high by any drain.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "page/page_internal.h"

/* ---- the lists ---- */

/*
 * Lists 0..PCP_MAX_ORDER hold unmovable blocks of those orders (slabs,
 * kblocks, metadata), PCP_RECLAIMABLE and PCP_MOVABLE order-0 blocks of
 * those types (slabs of SLAB_RECLAIM_ACCOUNT caches, sk_file pages): the
 * kernel keeps a list per type, so that a request gets a block of its own
 * pageblocks back.  Larger blocks of those two types go to the zone, as
 * the kernel's larger orders did (its per-CPU lists held order 0 only).
 */
/* The list of blocks of `order` (at most PCP_MAX_ORDER) and migratetype
 * mt, or PCP_NR_LISTS: none. */
static inline unsigned pcp_list(unsigned order, unsigned mt)
{
    if (likely(mt == MIGRATE_UNMOVABLE))
        return order;
    if (order)
        return PCP_NR_LISTS;
    return mt == MIGRATE_RECLAIMABLE ? PCP_RECLAIMABLE : PCP_MOVABLE;
}

/* ---- draining before fresh memory ---- */

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
unsigned long pcp_pages(void)
{
    unsigned long pages = 0;
    for (unsigned l = 0; l < PCP_NR_LISTS; l++)
        for (int cpu = 0; pcp_block_list(l) && cpu < cpu_nr_slots(); cpu++)
            pages += (unsigned long)cpu_array_count(page_pcp.lists[l], cpu) << pcp_order(l);
    return pages;
}

/* Whether a free resident block of `order` or above is there (zone->lock
 * held). */
bool zone_has_dirty(const struct zone *z, unsigned order)
{
    for (unsigned mt = zone_mt_first(z); mt < zone_mt_end(z); mt++)
        for (unsigned o = order; o <= SK_MAX_ORDER; o++)
            if (z->dirty[mt][o].head)
                return true;
    return false;
}

/* ---- per-CPU list tuning ---- */

#define PCP_BATCH_MAX 32      /* blocks moved at most per refill or drain */

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
 * classes took fresh memory for their order-3 slabs, and its peak RSS
 * rose by a quarter (docs/design.md).
 *
 * Bit o of pcp_overflowed[slot]: list o of that CPU slot sent a batch to
 * the zone since its last refill.  A hint, set and cleared with relaxed
 * atomics by whichever thread runs there: a race loses or repeats one
 * doubling, never a block.
 */
#define PCP_GROW_BYTES ((size_t)1 << 20)
static uint8_t pcp_overflowed[CPU_MAX_IDS + 1];
_Static_assert(PCP_NR_LISTS <= 8, "pcp_overflowed holds a bit per list");

static inline void pcp_overflow_note(int cpu, unsigned o)
{
    if (!(__atomic_load_n(&pcp_overflowed[cpu], __ATOMIC_RELAXED) & (1u << o)))
        __atomic_fetch_or(&pcp_overflowed[cpu], (uint8_t)(1u << o), __ATOMIC_RELAXED);
}
unsigned long page_pcp_grows;           /* statistics (relaxed) */
static uint64_t page_init_at;                  /* ms: no drain before fresh memory within FRESH_DRAIN_MS */

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
/* Up to max blocks off this thread's list o, to the zone; returns the
 * blocks moved.  No lock held. */
static unsigned long pcp_pop_to_zone(unsigned o, unsigned long max)
{
    struct sk_page *buf[PCP_BATCH_MAX];
    unsigned long moved = 0;
    unsigned n;
    while (moved < max && (n = cpu_pop_batch(page_pcp.lists[o], (void **)buf,
                                             max - moved < PCP_BATCH_MAX ? (unsigned)(max - moved) : PCP_BATCH_MAX))) {
        zone_free_pages(buf, n, pcp_order(o));
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

/* Slot cpu's block lists other than keep: whether one is grown; all of
 * them back to high. */
static bool pcp_others_grown(int cpu, unsigned keep)
{
    for (unsigned o = 0; o < PCP_NR_LISTS; o++)
        if (o != keep && pcp_block_list(o) && pcp_grown(o, cpu))
            return true;
    return false;
}

/* Whether slot cpu's block lists other than keep hold any block. */
static bool pcp_others_hold(int cpu, unsigned keep)
{
    for (unsigned o = 0; o < PCP_NR_LISTS; o++)
        if (o != keep && pcp_block_list(o) && cpu_array_count(page_pcp.lists[o], cpu))
            return true;
    return false;
}

static void pcp_ungrow_others(int cpu, unsigned keep)
{
    for (unsigned o = 0; o < PCP_NR_LISTS; o++)
        if (o != keep && pcp_block_list(o))
            pcp_ungrow(o, cpu);
}

/* This CPU's block lists other than keep, emptied into the zone (popped
 * here, as pcp_ungrow does); returns the blocks moved. */
static unsigned long pcp_empty_others(unsigned keep)
{
    unsigned long moved = 0;
    for (unsigned o = 0; o < PCP_NR_LISTS; o++)
        if (o != keep && pcp_block_list(o))
            moved += pcp_pop_to_zone(o, ULONG_MAX);
    return moved;
}

/* A refill of this CPU's list `order` (a list index): grow it if it
 * overflowed since the last one, and put the others back. */
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

/* Called with z->lock held by a request of `order` and migratetype mt:
 * true when it dropped the lock and drained the per-CPU lists (the caller
 * starts over).  Only for the zone they feed (a node's slab zone; large
 * blocks have a zone of their own), at most once a request (the caller
 * passes `first`). */
bool zone_drain_before_fresh(struct zone *z, unsigned order, unsigned mt, bool first)
{
    if (!first || zone_kind(z) != ZONE_NORMAL || !pcp_enabled || zone_has_dirty(z, order))
        return false;
    /* The request's own list (empty: it came here): not drained. */
    unsigned keep = order <= PCP_MAX_ORDER ? pcp_list(order, mt) : PCP_NR_LISTS;
    /* First this CPU's lists that tuning grew (other than the request's
     * own, empty): what they hold beyond high goes back, here, with no
     * other CPU to interrupt and so no rate limit. */
    int cpu = cpu_current();
    if (pcp_others_grown(cpu, keep)) {
        lock_release(&z->lock);
        pcp_ungrow_others(cpu, keep);
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
    if (now - page_init_at < FRESH_DRAIN_MS || !pcp_others_hold(cpu, keep))
        return false;
    lock_release(&z->lock);
    __atomic_fetch_add(&page_pcp_local_empties, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&page_pcp_local_blocks, pcp_empty_others(keep), __ATOMIC_RELAXED);
    return true;
}

/* ---- the block API (page.h) ---- */

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
    for (int n = 0; n < PAGE_NR_ZONES; n++) {
        lock_reset(&page_zones[n].lock);
        lock_reset(&page_zones[n].grow_lock);
        page_zones[n].node = n;
        page_zones[n].fresh_drain_at = now;
    }
    pcp_enabled = sk_opt.pcp != 0;
    page_grouping = sk_opt.page_grouping != 0;
    page_series_init();
    node_init();
    budget_init();
    /* High watermark and batch per order, as the kernel sizes pcp lists:
     * the batch amortises one zone-lock round trip; high bounds what a CPU
     * keeps (464 KiB of order-0 pages, 256 KiB of each larger order:
     * measured with bench/pagestream and bench/peers' sizeclass; order 0's
     * lists of the other two migratetypes as order 0's). */
    static const unsigned high[PCP_NR_LISTS] = { 116, 16, 8, 8, EXACT_CACHE_BLOCKS, 116, 116 };
    for (unsigned o = 0; o < PCP_NR_LISTS; o++) {
        size_t most = pcp_block_list(o) ? (PCP_GROW_BYTES >> SK_PAGE_SHIFT) >> pcp_order(o) : 0;
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

spinlock_t page_init_lock = SPINLOCK_INIT;

int page_init(void)
{
    if (likely(__atomic_load_n(&page_ready, __ATOMIC_ACQUIRE)))
        return 0;
    int r = 0;
    spin_lock(&page_init_lock);
    if (!page_ready) {
        os_options_init();
        cpu_init();
        r = page_init_locked();
    }
    spin_unlock(&page_init_lock);
    return r;
}

struct sk_page *page_alloc_mt(unsigned order, unsigned mt)
{
    if (order > SK_MAX_ORDER) {
        errno = ENOMEM;
        return NULL;
    }
    mt = page_request_mt(mt);
    unsigned l = order <= PCP_MAX_ORDER ? pcp_list(order, mt) : PCP_NR_LISTS;
    if (l < PCP_NR_LISTS) {
        struct sk_page *pg = cpu_pop(page_pcp.lists[l]);
        if (likely(pg)) {
            pg_set_flags(pg, PG_HEAD | (pg_flags(pg) & PG_ZEROED));
            return pg;
        }
        if (pcp_enabled) {
            pcp_tune(l);
            /* Refill: one zone-lock round trip for a batch. */
            struct sk_page *batch[PCP_BATCH_MAX];
            struct zone *z;
            unsigned n = zonelist_alloc_bulk(order, mt, batch, page_pcp.batch[l], &z);
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
            cpu_array_ready(page_pcp.lists[l], page_pcp.high[l]);
            unsigned pushed = cpu_push_batch(page_pcp.lists[l], (void **)batch + 1, n);
            if (pushed < n)
                zone_free_bulk(z, batch + 1 + pushed, n - pushed, order);
            pg_set_flags(pg, PG_HEAD | (pg_flags(pg) & PG_ZEROED));
            return pg;
        }
    }
    return zonelist_alloc(ZONE_NORMAL, order, mt, 0, 0, EXACT_FIT_MIN_ORDER);
}

struct sk_page *page_alloc(unsigned order)
{
    return page_alloc_mt(order, MIGRATE_UNMOVABLE);
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

/* page_free's rest: per-CPU list l full or not ready yet, or none
 * (PCP_NR_LISTS).  Out of line, so that the push above needs no stack
 * frame (its batch array made every free of a slab or a kblock save six
 * registers). */
static SK_NOINLINE void page_free_slow(struct sk_page *pg, unsigned order, unsigned l, unsigned mt)
{
    struct zone *z = &page_zones[pg->node];
    if (l < PCP_NR_LISTS) {
        if (pcp_push_slow(l, pg))
            return;
        /* Full: drain a batch to the zone, with this block. */
        pcp_overflow_note(cpu_current(), l);
        struct sk_page *batch[PCP_BATCH_MAX + 1];
        unsigned n = cpu_pop_batch(page_pcp.lists[l], (void **)batch, page_pcp.batch[l]);
        batch[n++] = pg;
        zone_free_pages(batch, n, order);   /* blocks of other nodes too */
        return;
    }
    /* Seed 001's patch 10: the block's migratetype looked up before the
     * zone lock, or taken from page_free's look (3.15-rc1's
     * __free_pages_ok looked it up with interrupts off, here under the
     * lock: MIGRATE_TYPES). */
    if (page_patch_before(PATCH_FREE_MT_UNLOCKED))
        mt = MIGRATE_TYPES;
    else if (mt == MIGRATE_TYPES)
        mt = pageblock_mt(pg);
    uint64_t now = os_now_ms_coarse();
    lock_acquire(&z->lock);
    zone_free_block_mt(z, pg, order, 1ul << order, now, mt);
    zone_note_freed(z, 1ul << order);
    zone_maybe_reclaim(z, now);
    zone_release_dirtied(z, now);
}

/* To the per-CPU list of its order and its pageblock's migratetype (the
 * kernel's free_hot_cold_page), or to its zone.  The type is looked up
 * once, here, and kept in the block's descriptor while it waits on a
 * list: a drain frees it to that type's lists without looking again
 * (the kernel's set_freepage_migratetype; a pageblock claimed meanwhile
 * gets it back on the old type's lists, as there). */
void page_free(struct sk_page *pg, unsigned order)
{
    unsigned l = PCP_NR_LISTS, mt = MIGRATE_TYPES;
    if (likely(order <= PCP_MAX_ORDER && pcp_enabled)) {
        mt = page_grouping ? pageblock_mt(pg) : MIGRATE_UNMOVABLE;
        l = pcp_list(order, mt);
        if (likely(l < PCP_NR_LISTS)) {
            pg_set_flags(pg, PG_PCP);
            pg->order = (uint8_t)order;
            pg->buddy.mt = (uint8_t)mt;
            if (likely(cpu_push_fast(page_pcp.lists[l], pg)))
                return;
        }
    }
    page_free_slow(pg, order, l, mt);
}

/*
 * The exact-block cache: the last exact block of at most
 * EXACT_CACHE_PAGES (256 KiB) freed on a CPU stays on that CPU's PCP_EXACT list
 * (EXACT_CACHE_BLOCKS deep), and a request of the same page count there
 * takes it back with no zone lock; a request of another count gives it to
 * the zone first.  A program that allocates and frees one buffer of
 * 32-256 KiB in a loop paid two zone-lock round trips and the buddy's
 * split and merge each time, several times glibc's cost of the pair:
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
    /* The block and its tail's return in one lock hold. */
    struct sk_page *pg = zonelist_alloc(ZONE_LARGE, order, MIGRATE_MOVABLE, nr_pages, align_order, fit_order);
    if (!pg)
        return NULL;
    pg->large.nr_pages = nr_pages;    /* before the flag: a fork child's rebuild counts it */
    __atomic_store_n(&pg->flags, pg_flags(pg) | PG_LARGE, __ATOMIC_RELEASE);
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
void exact_cached(unsigned long *blocks, unsigned long *pages)
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
    for (int n = 0; n < PAGE_NR_ZONES; n++) {
        b += __atomic_load_n(&page_zones[n].exact_blocks, __ATOMIC_RELAXED);
        p += __atomic_load_n(&page_zones[n].exact_pages, __ATOMIC_RELAXED);
    }
    /* Cached blocks are free: counted in use from their malloc until the
     * zone has them back, they are taken off here. */
    exact_cached(&cb, &cp);
    *blocks = b > cb ? b - cb : 0;
    *pages = p > cp ? p - cp : 0;
}

/* ---- draining ---- */

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
            zone_free_pages(buf, n, pcp_order(o));   /* each to its own zone */
        }
        total += n;
    }
    /* Drained: back to the high watermark it started with. */
    if (pcp_block_list(o)) {
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

