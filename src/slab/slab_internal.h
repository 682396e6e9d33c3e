/*
 * slab_internal.h — what slab.c shares with the files of the slab layer
 * that run caches in another mode (slub_cpu.c: sheaves=0; slab_debug.c:
 * slub_debug): the free
 * pointer accessors, statistics, the (freelist, counters) pair, and the
 * slab-level steps of the SLUB protocol.  Not for the layers above.
 * The protocol and lock order are slab.c's (comment at its top).
 */
#ifndef SK_SLAB_INTERNAL_H
#define SK_SLAB_INTERNAL_H

#include "slab/slab_fast.h"

/* ---- free pointers ---- */

static inline void *get_fp(const struct slab_cache *c, void *obj)
{
    uintptr_t *slot = (uintptr_t *)((char *)obj + c->offset);
    return (void *)(*slot ^ c->random ^ (uintptr_t)slot);
}

static inline void set_fp(const struct slab_cache *c, void *obj, void *next)
{
    uintptr_t *slot = (uintptr_t *)((char *)obj + c->offset);
    *slot = (uintptr_t)next ^ c->random ^ (uintptr_t)slot;
}

/* A decoded free pointer must be NULL or an object of the same slab. */
static inline void *get_fp_checked(const struct slab_cache *c, const struct sk_page *pg, void *obj)
{
    void *next = get_fp(c, obj);
    if (next && ((uintptr_t)next - (uintptr_t)pg->slab.s_mem >= (uintptr_t)c->objects * c->size ||
                 slab_obj_exact(c, pg, next) >= c->objects))
        os_fatal("freelist corrupted in %s: object %p links to %p (use after free?)", c->name, obj, next);
    return next;
}

/* This CPU's index for slab_cpu_of: cpu_current(), except for a thread with
 * no rseq of its own in an rseq process, which cpu_current() gives the
 * dummy array slot (cpu_nr_ids), one past the slab_cpu: it borrows the slow-
 * path state of the CPU it runs on (all of it is under its lock or
 * atomic, so any valid index is safe). */
static inline int slab_cpu_id(void)
{
    int id = cpu_current();
    return likely(id < cpu_nr_ids) ? id : os_getcpu() % cpu_nr_ids;
}

/* This thread's per-CPU state of c, its array (cpu_current()) and its
 * slab_cpu (slab_cpu_id()), is about to be written, perhaps for the first
 * time: say so (cpus_used) before any of its locks is taken.  What only
 * reads or resets that state (statistics, shrink, the reaper, a forked
 * child) leaves an unused cache's, or an unused CPU's, alone: a read of a
 * page never written costs a resident page here, and a fork child's
 * reset a copy of it.  A reaper pass that read every CPU's arrays of
 * every used cache made 8-14 array pages of a CPU a pinned program never
 * ran on resident (tests/slab/meta_pack, under load).  A held lock
 * implies the bit is visible (it is set first, and the lock's atomic
 * orders it on x86 and with release elsewhere).  Every slow path that
 * may write this CPU's state calls it: the first operation on a CPU's
 * array always takes one (capacity 0 until cpu_array_ready). */
static inline void slab_mark_used(struct slab_cache *c)
{
    int id = cpu_current();
    slab_mark_cpu(c, id);
    if (unlikely(id >= cpu_nr_ids))
        slab_mark_cpu(c, slab_cpu_id());
}

/* Slot cpu's slab_cpu of c, for this thread to lock and write: its index
 * marked first.  slab_mark_used marked the CPU the thread ran on when its
 * slow path began; a thread that has moved since locks another CPU's
 * state, which must be marked before its lock too. */
static inline struct slab_cpu *slab_cpu_mark(struct slab_cache *c, int cpu)
{
    slab_mark_cpu(c, cpu);
    return slab_cpu_of(c, cpu);
}

/* The owner a slab frozen here records: this CPU, where c sends frees home
 * (c->remote_free, rseq mode: the id the fast path compares with), else
 * SLAB_NO_OWNER, which no free takes for a remote one. */
static inline uint8_t slab_owner_here(const struct slab_cache *c)
{
    if (!c->remote_free)
        return SLAB_NO_OWNER;
    int id = slab_cpu_id();
    return id < SLAB_NO_OWNER ? (uint8_t)id : SLAB_NO_OWNER;
}

/* ---- the page map (slab_types.h) ---- */

static inline uint64_t slab_pmap_word(const struct slab_cache *c, size_t i, uint8_t owner)
{
    return (uint64_t)(uintptr_t)c << 16 | (uint64_t)i << 8 | owner;
}

/* The words of slab pg's pages in the page map, or NULL where its pages
 * stay out of it (a cache not mapped, a slice without a map). */
static inline uint64_t *slab_pmap_at(const struct slab_cache *c, struct sk_page *pg)
{
    if (!c->pmap)
        return NULL;
    struct vm_slice *s = page_slice(pg);
    uint64_t *map = vm_pmap_of(s);
    return map ? map + (pg - (struct sk_page *)s->pages) : NULL;
}

/* Pages from..to of slab pg enter the map, with home `owner`: every object
 * starting on them is initialised (holds its marker). */
static inline void slab_pmap_set(const struct slab_cache *c, struct sk_page *pg, size_t from, size_t to,
                                 uint8_t owner)
{
    uint64_t *map = slab_pmap_at(c, pg);
    if (!map)
        return;
    for (size_t i = from; i <= to; i++)
        __atomic_store_n(&map[i], slab_pmap_word(c, i, owner), __ATOMIC_RELEASE);
}

/* Slab pg leaves the map (its discard, before the pages go back). */
static inline void slab_pmap_clear(const struct slab_cache *c, struct sk_page *pg)
{
    uint64_t *map = slab_pmap_at(c, pg);
    if (!map)
        return;
    for (size_t i = 0; i < ((size_t)1 << c->order); i++)
        __atomic_store_n(&map[i], 0, __ATOMIC_RELEASE);
}

/* The slab's new home in the words of its pages in the map: a page not in
 * the map (fresh, or a discard racing in) is left out, by compare and swap,
 * so the map never gains a word here.  The race is real in one place: a
 * CPU slab deactivated full (slab_deactivate's mirror, after the cmpxchg
 * that unfroze it) can be emptied by one chain meanwhile and discarded
 * without a lock (slab_free_chain's `whole`); a plain store could then
 * write a word for pages back in the page allocator.  The other mirrors
 * run while their caller holds the slab (frozen to it, or list_lock). */
static inline void slab_pmap_owner(const struct slab_cache *c, struct sk_page *pg, uint8_t owner)
{
    uint64_t *map = slab_pmap_at(c, pg);
    if (!map)
        return;
    for (size_t i = 0; i < ((size_t)1 << c->order); i++) {
        uint64_t w = __atomic_load_n(&map[i], __ATOMIC_RELAXED);
        if (w && (uint8_t)w != owner)
            __atomic_compare_exchange_n(&map[i], &w, (w & ~(uint64_t)0xff) | owner, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED);
    }
}

/* The free path reads the owner at the object's page (slab_free_at), head
 * or tail: a slab of more pages carries it on each tail page too, in the
 * counters word that only the head uses, stored after the head's changed.
 * A hint like the head's own: a stale copy only picks the other of two
 * paths that are both right. */
static inline void slab_mirror_owner(const struct slab_cache *c, struct sk_page *pg, uint8_t owner)
{
    if (!c->remote_free)
        return;
    slab_pmap_owner(c, pg, owner);
    union slab_counters m = { .v = 0 };
    m.owner = owner;
    for (size_t i = 1; i < ((size_t)1 << c->order); i++)
        __atomic_store_n(&pg[i].slab.counters, m.v, __ATOMIC_RELAXED);
}

/* ---- statistics ---- */

/* Add to a counter of this CPU's slab_cpu, the kernel's this_cpu_add:
 * with rseq the index is the CPU the thread runs on, and one unlocked add
 * is not interrupted half-way, so only a thread that migrated between
 * reading its CPU id and the add can race with that CPU's own threads
 * (a count lost at worst, where a locked add cost 20-odd cycles on every
 * slow path: bench/peers sizeclass).  Readers load the words relaxed; an
 * aligned 8-byte store is single-copy atomic.  The lock fallback, where
 * a slot is shared by threads running on any CPU, and TSan builds keep
 * the atomic. */
static inline void slab_count(unsigned long *ctr, unsigned long v)
{
#if defined(__x86_64__) && !defined(SK_TSAN)
    if (likely(cpu_use_rseq)) {
        __asm__ volatile("addq %1, %0" : "+m"(*ctr) : "er"(v));
        return;
    }
#endif
    __atomic_fetch_add(ctr, v, __ATOMIC_RELAXED);
}

/* A count goes to this CPU's slab_cpu, which the statistics sum only for
 * the CPUs marked as having used the cache: so it marks first.  A thread
 * that only shrinks (a free_slab of sk_cache_shrink) on a CPU where no
 * thread had used the cache lost its counts, and free_slab came out one
 * below new_slab after a stress run (tests/slab/stress_cross_cpu). */
static inline void stat_add(struct slab_cache *c, enum sk_stat_item item, unsigned long v)
{
    slab_count(&slab_cpu_mark(c, slab_cpu_id())->stat[item], v);
}
#define stat(c, item) stat_add(c, item, 1)
/* The books the fast-path counters are derived from. */
#define book(c, field, v) slab_count(&slab_cpu_mark(c, slab_cpu_id())->field, (unsigned long)(v))

/* ---- the (freelist, counters) pair ---- */

static inline void *slab_freelist(struct sk_page *pg)
{
    return __atomic_load_n(&pg->slab.freelist, __ATOMIC_ACQUIRE);
}

static inline uint64_t slab_counters(struct sk_page *pg)
{
    return __atomic_load_n(&pg->slab.counters, __ATOMIC_ACQUIRE);
}

static inline bool slab_cmpxchg(struct slab_cache *c, struct sk_page *pg, void *old_fl, uint64_t old_c,
                                void *new_fl, uint64_t new_c)
{
    unsigned __int128 o = ((unsigned __int128)old_c << 64) | (uintptr_t)old_fl;
    unsigned __int128 n = ((unsigned __int128)new_c << 64) | (uintptr_t)new_fl;
    if (likely(__sync_bool_compare_and_swap((unsigned __int128 *)&pg->slab.freelist, o, n)))
        return true;
    stat(c, SK_CMPXCHG_FAIL);
    return false;
}

static inline struct sk_page *slab_head(struct sk_page *pg)
{
    return pg->slab.head;
}

/* ---- slab-level steps (slab.c) ---- */

/* The node partial list (list_lock held); a slab on a list a forked child
 * abandoned is left alone. */
void slab_add_partial(struct slab_node *n, struct sk_page *pg);
void slab_remove_partial(struct slab_node *n, struct sk_page *pg);
/* Give an empty slab, on no list, back to the page allocator. */
void slab_discard(struct slab_cache *c, struct sk_page *pg);

/* A new frozen slab, every object in use; *freelist gets its objects
 * chained, or with lazy NULL: none is written, the whole slab is a fresh
 * range for the CPU that takes it (slab.c; *zero: its pages are known
 * zero). */
struct sk_page *slab_new_slab(struct slab_cache *c, void **freelist, bool lazy, bool *zero);
/* Take the whole freelist of a frozen slab; an empty one is unfrozen
 * instead (*retired). */
void *slab_take_freelist(struct slab_cache *c, struct sk_page *pg, bool *retired);
/* A CPU's partial list (sc->lock held).  Its limit: in the default mode
 * cpu_partial_slabs slabs (the 5.16+ kernels' conversion); under sheaves=0
 * (cpu_partial_slabs 0) cpu_partial free objects, counted as 3.1's
 * put_cpu_partial did: each slab adds the objects it had free when it
 * came (its pobjects, a snapshot), and a list already over the limit is
 * drained to the node before the next slab joins it. */
static inline bool cpu_partial_full(const struct slab_cache *c, const struct slab_cpu *sc)
{
    if (c->cpu_partial_slabs)
        return sc->partial_slabs >= c->cpu_partial_slabs;
    return sc->partial_objects > c->cpu_partial;
}
/* Has a node-partial refill stocked enough (3.1: more than half the
 * limit available; the default mode: half the slabs)?  `first`: the free
 * objects of the slab the refill took for itself. */
static inline bool cpu_partial_stocked(const struct slab_cache *c, const struct slab_cpu *sc, unsigned first)
{
    if (c->cpu_partial_slabs)
        return sc->partial_slabs * 2 >= c->cpu_partial_slabs;
    return first + sc->partial_objects > c->cpu_partial / 2;
}
static inline void cpu_partial_push(struct slab_cpu *sc, struct sk_page *pg, unsigned free_objects)
{
    pg->slab.next = sc->partial;
    pg->slab.pobjects = free_objects;
    sc->partial = pg;
    sc->partial_slabs++;
    sc->partial_objects += free_objects;
}
static inline struct sk_page *cpu_partial_pop(struct slab_cpu *sc)
{
    struct sk_page *pg = sc->partial;
    sc->partial = pg->slab.next;
    sc->partial_slabs--;
    sc->partial_objects -= pg->slab.pobjects;
    sc->stat[SK_CPU_PARTIAL_ALLOC]++;
    return pg;
}
/* Detach the whole list, to unfreeze it. */
static inline struct sk_page *cpu_partial_take(struct slab_cpu *sc)
{
    struct sk_page *list = sc->partial;
    sc->partial = NULL;
    sc->partial_slabs = sc->partial_objects = 0;
    return list;
}

/* A slab from the node partial list, frozen, its freelist in *fl; with
 * cpu_partial on, a few more onto sc's partial list (sc->lock held). */
struct sk_page *slab_get_node_partial(struct slab_cache *c, struct slab_cpu *sc, void **fl);
/* Give the chain head..tail of cnt objects back to slab pg (SLUB's
 * __slab_free); returns the slabs given back to the page allocator. */
int slab_free_chain(struct slab_cache *c, struct sk_page *pg, void *head, void *tail, unsigned cnt);
/* Unfreeze a CPU slab, giving back the chain `head` of its objects (NULL:
 * none); 1 when it was empty and went back to the page allocator. */
int slab_deactivate(struct slab_cache *c, struct sk_page *pg, void *head);

#endif
