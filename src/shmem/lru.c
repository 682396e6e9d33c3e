/*
 * lru.c — the LRU of file pages: per-node active and inactive lists,
 * per-CPU add batches, mark_page_accessed and aging, as mm/swap.c and
 * mm/vmscan.c had them in 2014.
 *
 * A new page reaches the lists through its CPU's batch (a per-CPU array of
 * LRU_BATCH pointers, src/cpu: the kernel's lru_add pagevec): the push holds
 * a reference; a full batch goes to the lists under the node's lru lock in
 * one round trip, and the batch's references are dropped after the unlock.
 *
 * Lock order: a file's lock (file.c), then lruvec->lock, then the zone
 * locks (page_free of a page released under it); the per-CPU arrays' locks
 * are leaves.
 *
 * Invariants (lruvec->lock held):
 *  - a page is on a list iff PG_LRU; on `active` iff also PG_ACTIVE;
 *    PG_LRU changes only under the lock (flags change with atomic
 *    read-modify-writes while the page is visible: mark_page_accessed sets
 *    PG_REFERENCED and PG_ACTIVE without the lock);
 *  - a page on a list or in a batch has a reference (the file's or the
 *    batch's), so a page whose count reaches 0 is in neither, except that
 *    the release path finds it still on its list and takes it off;
 *  - nr of each list is its length.
 *  - PG_ACTIVE changes only under the lock while the page is visible
 *    (mark_page_accessed takes it to promote), so it always names the
 *    list a PG_LRU page is on.
 * mark_page_accessed of a page not on a list (in a batch, or isolated by
 * reclaim) sets PG_ACTIVE: it lands on the active list when added back.
 */
#include <errno.h>
#include <string.h>

#include "shmem/shmem.h"

struct lruvec shmem_lru[PAGE_NR_ZONES];
static cpu_arrays_t lru_batches = cpu_empty_arrays;

int lru_init(void)
{
    for (int n = 0; n < PAGE_NR_ZONES; n++)
        lock_reset(&shmem_lru[n].lock);
    cpu_arrays_t tab = cpu_arrays_alloc();
    if (!tab)
        return -1;     /* errno ENOMEM */
    lru_batches = cpu_arrays_init(tab, LRU_BATCH);
    return 0;
}

static inline struct lruvec *lruvec_of(const struct sk_page *pg)
{
    return &shmem_lru[pg->node];
}

static void list_add(struct lru_list *l, struct sk_page *pg)
{
    pg->file.prev = NULL;
    pg->file.next = l->head;
    if (l->head)
        l->head->file.prev = pg;
    else
        l->tail = pg;
    l->head = pg;
    l->nr++;
}

static void list_del(struct lru_list *l, struct sk_page *pg)
{
    SK_ASSERT(l->nr > 0 && (pg_flags(pg) & PG_FILE));
    if (pg->file.prev)
        pg->file.prev->file.next = pg->file.next;
    else
        l->head = pg->file.next;
    if (pg->file.next)
        pg->file.next->file.prev = pg->file.prev;
    else
        l->tail = pg->file.prev;
    l->nr--;
}

static inline struct lru_list *list_for(struct lruvec *v, uint32_t flags)
{
    return (flags & PG_ACTIVE) ? &v->active : &v->inactive;
}

/* ---- adding: per-CPU batches ---- */

/* Pages of one batch onto their lists (the kernel's __pagevec_lru_add),
 * then the batch's references dropped (release_pages). */
static void lru_add_batch(struct sk_page **pgs, unsigned n)
{
    struct lruvec *held = NULL;
    for (unsigned i = 0; i < n; i++) {
        struct lruvec *v = lruvec_of(pgs[i]);
        if (v != held) {
            if (held)
                lock_release(&held->lock);
            lock_acquire(&v->lock);
            held = v;
        }
        /* The page is visible (in its file): mark_page_accessed may set
         * PG_ACTIVE concurrently, so this stays atomic in both modes. */
        SK_ASSERT(!(pg_flags(pgs[i]) & PG_LRU));
        pg_flag_set(pgs[i], PG_LRU);
        list_add(list_for(v, pg_flags(pgs[i])), pgs[i]);
        v->added++;
    }
    if (held)
        lock_release(&held->lock);
    for (unsigned i = 0; i < n; i++)
        shmem_put_page(pgs[i]);
}

void lru_cache_add(struct sk_page *pg)
{
    /* lru_cache_add_anon: a page enters the LRU inactive.  The series
     * tests the bit before the atomic clear: a new page never has it. */
    if (page_patch_before(PATCH_LRU_ADD) || (pg_flags(pg) & PG_ACTIVE))
        pg_flag_clear(pg, PG_ACTIVE);
    shmem_get_page(pg);
    if (likely(cpu_push(lru_batches, pg) > 0))
        return;
    struct sk_page *batch[LRU_BATCH + 1];
    unsigned n = cpu_pop_batch(lru_batches, (void **)batch, LRU_BATCH);
    batch[n++] = pg;
    lru_add_batch(batch, n);
}

void lru_add_drain(void)
{
    struct sk_page *batch[LRU_BATCH];
    unsigned n;
    while ((n = cpu_pop_batch(lru_batches, (void **)batch, LRU_BATCH)))
        lru_add_batch(batch, n);
}

void lru_add_drain_all(void)
{
    struct sk_page *batch[LRU_BATCH];
    for (int cpu = 0; cpu < cpu_nr_slots(); cpu++) {
        unsigned n;
        while ((n = cpu_drain_remote(lru_batches, cpu, (void **)batch, LRU_BATCH)))
            lru_add_batch(batch, n);
    }
}

unsigned long lru_batched(void)
{
    if (lru_batches == cpu_empty_arrays)
        return 0;
    unsigned long n = 0;
    for (int cpu = 0; cpu < cpu_nr_slots(); cpu++)
        n += cpu_array_count(lru_batches, cpu);
    return n;
}

/* ---- accesses ---- */

/* activate_page: an inactive page on its list moves to the active list;
 * one off the lists (in a batch, or isolated) gets PG_ACTIVE and lands on
 * the active list when it is added.  Under the lock either way: PG_ACTIVE
 * says which list a page is on, so it changes only with the lists. */
static void activate_page(struct sk_page *pg)
{
    struct lruvec *v = lruvec_of(pg);
    lock_acquire(&v->lock);
    uint32_t f = pg_flags(pg);
    if (!(f & PG_ACTIVE)) {
        if (f & PG_LRU) {
            list_del(&v->inactive, pg);
            pg_flag_set(pg, PG_ACTIVE);
            list_add(&v->active, pg);
        } else {
            pg_flag_set(pg, PG_ACTIVE);
        }
        v->activated++;
    }
    lock_release(&v->lock);
}

void mark_page_accessed(struct sk_page *pg)
{
    uint32_t f = pg_flags(pg);
    if (!(f & PG_ACTIVE) && (f & PG_REFERENCED)) {
        activate_page(pg);
        pg_flag_clear(pg, PG_REFERENCED);
    } else if (!(f & PG_REFERENCED)) {
        pg_flag_set(pg, PG_REFERENCED);
    }
}

void init_page_accessed(struct sk_page *pg)
{
    /* As mark_page_accessed's first call on a fresh page, which no other
     * thread can see yet (the series' init_page_accessed). */
    if (!(pg_flags(pg) & PG_REFERENCED))
        pg_flag_set_plain(pg, PG_REFERENCED);
}

void lru_del_released(struct sk_page *pg)
{
    /* No reference is left, so nothing can isolate or add the page:
     * PG_LRU is stable outside the lock. */
    if (!(pg_flags(pg) & PG_LRU))
        return;
    struct lruvec *v = lruvec_of(pg);
    lock_acquire(&v->lock);
    list_del(list_for(v, pg_flags(pg)), pg);
    lock_release(&v->lock);
    /* Series: the page is unreachable now, so a plain store will do
     * (release_pages' __ClearPageLRU); before it, PG_LRU was cleared
     * atomically.  PG_ACTIVE was a plain clear already (page_off_lru). */
    if (!page_patch_before(PATCH_RELEASE_PAGES)) {
        pg_flag_clear_plain(pg, PG_LRU | PG_ACTIVE);
    } else {
        pg_flag_clear(pg, PG_LRU);
        pg_flag_clear_plain(pg, PG_ACTIVE);
    }
}

/* ---- aging and reclaim ---- */

unsigned long lru_shrink_active(int node, unsigned long nr)
{
    struct lruvec *v = &shmem_lru[node];
    unsigned long done = 0;
    lock_acquire(&v->lock);
    while (done < nr && v->active.tail) {
        struct sk_page *pg = v->active.tail;
        list_del(&v->active, pg);
        /* Unmapped file pages have no young ptes to keep them active:
         * the kernel's shrink_active_list deactivates them all. */
        pg_flag_clear(pg, PG_ACTIVE);
        list_add(&v->inactive, pg);
        v->deactivated++;
        done++;
    }
    lock_release(&v->lock);
    return done;
}

struct sk_page *lru_isolate_inactive(int node)
{
    struct lruvec *v = &shmem_lru[node];
    lock_acquire(&v->lock);
    for (struct sk_page *pg = v->inactive.tail; pg; pg = pg->file.prev) {
        /* get_page_unless_zero: a page whose count reached 0 is being
         * released; its releaser takes it off the list. */
        uint32_t c = __atomic_load_n(&pg->file.refcount, __ATOMIC_RELAXED);
        bool got = false;
        while (c && !(got = __atomic_compare_exchange_n(&pg->file.refcount, &c, c + 1, false,
                                                         __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)))
            ;
        if (!got)
            continue;
        list_del(&v->inactive, pg);
        pg_flag_clear(pg, PG_LRU);
        v->isolated++;
        lock_release(&v->lock);
        return pg;
    }
    lock_release(&v->lock);
    return NULL;
}

void lru_putback(struct sk_page *pg)
{
    struct lruvec *v = lruvec_of(pg);
    lock_acquire(&v->lock);
    pg_flag_set(pg, PG_LRU);
    list_add(list_for(v, pg_flags(pg)), pg);
    v->putback++;
    lock_release(&v->lock);
}
