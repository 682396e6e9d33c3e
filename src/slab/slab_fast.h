/*
 * slab_fast.h — the slab layer's fast paths, inline: object lookup by
 * address, the free marker that catches every double free, and the
 * per-CPU array pop and push of slab_alloc and slab_free.
 */
#ifndef SK_SLAB_FAST_H
#define SK_SLAB_FAST_H

#include "slab/slab.h"

/*
 * Exact division by the object size in three instructions: for an offset
 * that is a multiple of size = d << k (d odd), off * inv(d) mod 2^32 is
 * off / d exactly, and rotating right by k gives off / size.  For any
 * other offset the result is larger than 2^32 / size, hence than the
 * number of objects: one unsigned compare tells "start of an object of
 * this slab" from interior pointers, the slab's tail, and what lies
 * before s_mem (Granlund and Montgomery's divisibility test).
 */
static inline uint32_t slab_index_exact(const struct slab_cache *c, uint32_t off)
{
    uint32_t q = off * c->inv;
    return (q >> c->shift) | (q << (-c->shift & 31));
}

/* The same for p on slab page pg. */
static inline uint32_t slab_obj_exact(const struct slab_cache *c, const struct sk_page *pg, const void *p)
{
    return slab_index_exact(c, (uint32_t)((uintptr_t)p - (uintptr_t)pg->slab.s_mem));
}

/* The object containing p (p inside the slab's objects area). */
static inline uint32_t slab_obj_index(const struct slab_cache *c, const struct sk_page *pg, const void *p)
{
    return (uint32_t)((uintptr_t)p - (uintptr_t)pg->slab.s_mem) / c->size;
}

/* A page of a CPU slab's fresh range not initialised yet (slab.c): no
 * object starting on it was handed out, and its memory holds no marker to
 * say so. */
static inline bool slab_page_fresh(const struct sk_page *pg)
{
    return __atomic_load_n(&pg->flags, __ATOMIC_ACQUIRE) & PG_FRESH;
}

/* The slab page of p when p starts an object there and the page's
 * PG_SLAB and PG_FRESH flags are `state` exactly; *cp gets the cache. */
static inline struct sk_page *slab_lookup(const void *p, uint32_t state, struct slab_cache **cp)
{
    struct vm_slice *s = vm_slice_of(p);
    if (unlikely(!s))
        return NULL;
    struct sk_page *pg = page_of_slice(s, p);
    if (unlikely((__atomic_load_n(&pg->flags, __ATOMIC_ACQUIRE) & (PG_SLAB | PG_FRESH)) != state))
        return NULL;
    struct slab_cache *c = pg->slab.cache;
    if (unlikely(slab_obj_exact(c, pg, p) >= c->objects))
        return NULL;
    *cp = c;
    return pg;
}

/*
 * The slab descriptor of an object pointer and validity in one pass:
 * NULL when p is not the start of an object in a slab (the caller's slow
 * path then says why).  A page of a fresh range not initialised yet is
 * rejected on the same test of the flags.
 */
static inline struct sk_page *slab_of_object(const void *p, struct slab_cache **cp)
{
    return slab_lookup(p, PG_SLAB, cp);
}

/* For the reports of a bad free: if p starts an object never handed out,
 * on a page of a fresh range (which slab_of_object rejects), die saying
 * so; else return. */
void slab_check_fresh(const void *p, const char *call);
/* Whether p lies on a page of a fresh range not initialised yet.  A sized
 * free trusts the size and skips slab_of_object, and the free marker it
 * still checks cannot tell an object there (its memory holds none): on
 * such a page it looks the object up after all (slab_free_checked), or a
 * bogus free of one would have it handed out twice.  Two loads of the
 * page map and the descriptor's flags, cheaper than the whole look-up;
 * only for classes of multi-page slabs (one-page slabs are made
 * eagerly). */
static inline bool slab_on_fresh_page(const void *p)
{
    struct vm_slice *s = vm_slice_of(p);
    return s && slab_page_fresh(page_of_slice(s, p));
}
/* free(p) reporting `call`: kfree_call out of line. */
void slab_free_checked(void *p, const char *call);

/* ---- the free marker: every double free is caught ----
 *
 * glibc's tcache key, for every place a free object can sit (a per-CPU
 * array, the barn, a CPU's private freelist, a slab freelist): free stores
 * slab_free_key in the object at c->kofs, and every hand-out clears it.  A
 * free that finds the key already there (or the fresh marker, key | 1, that
 * an object never handed out gets when it leaves a fresh range for an
 * array, or that an eagerly made slab writes into all its objects) takes
 * slab_free_suspect,
 * which searches for the object and aborts when it finds it free; a match
 * by chance (user data equal to a 64-bit random key) finds nothing and
 * frees normally.  The marker sits at word 1, which the free pointer
 * (word 0) never overwrites, so it survives a flush to the slab; with a
 * constructor it sits after the free pointer, outside the object, which
 * stays in its constructed state.  Objects under 16 bytes (kmalloc-8 of
 * sk_malloc, 8-byte caches) have one word: there the free pointer replaces
 * the marker once the object goes back to its slab.  An object still in a
 * fresh range has no marker at all: its page's PG_FRESH tells it
 * (slab_of_object, slab_on_fresh_page).
 */
extern uintptr_t slab_free_key SK_INTERNAL;    /* random, bits 0-1 clear */
#define SLAB_FRESH_KEY (slab_free_key | 1)
/* Never handed out, and zero but for words 0 and 1 (free pointer, this
 * marker): an object of a slab made on pages known zero.  calloc clears
 * the two words instead of the object. */
#define SLAB_FRESH_ZERO_KEY (slab_free_key | 3)

static inline uintptr_t *slab_marker(const struct slab_cache *c, void *obj)
{
    return (uintptr_t *)((char *)obj + c->kofs);
}
/* A handed-out object carries no marker. */
static inline void slab_mark_live(const struct slab_cache *c, void *obj)
{
    *slab_marker(c, obj) = 0;
}
/* Is the object's marker the free or a fresh one?  One xor, one compare. */
static inline bool slab_marked_free(const struct slab_cache *c, void *obj)
{
    return (*slab_marker(c, obj) ^ slab_free_key) <= 3;
}
/* The slow check of a marked object: aborts naming the call when the
 * object is free or was never handed out; returns when the mark was a
 * coincidence. */
void slab_free_suspect(struct slab_cache *c, void *obj, const char *call);
/* slab_free's out-of-line half for a marked object: the check, then the
 * free (so the fast path keeps nothing live across a call). */
void slab_free_marked(struct slab_cache *c, void *obj, const char *call);

/* The node lists of c a slab page belongs to: its page's node, folded
 * onto the SLAB_NR_NODES a cache keeps (one: every node's slabs share
 * node 0's lists). */
static inline unsigned slab_node_of(const struct sk_page *pg)
{
    return SLAB_NR_NODES == 1 ? 0 : page_nid(pg) % SLAB_NR_NODES;
}

/* The pages of a new slab of c (order c->order), NULL with errno ENOMEM.
 * From the slab zone of the calling CPU's node (page_alloc): a page of
 * another zone is a fatal error, not a slab among the large blocks. */
static inline struct sk_page *slab_pages_alloc(const struct slab_cache *c)
{
    struct sk_page *pg = page_alloc_mt(c->order, c->page_mt);
    if (unlikely(pg && (pg->node & 1) != ZONE_NORMAL))
        os_fatal("slab page from the page allocator's zone %u, not a node's slab zone", pg->node);
    return pg;
}

/* Claim the pages of a new slab of c at pg (order c->order) whose objects
 * start at s_mem: every tail page points at its head, the head last.
 * fresh: the tails get PG_FRESH (nothing on them initialised). */
static inline void slab_claim_pages(struct slab_cache *c, struct sk_page *pg, char *s_mem, bool fresh)
{
    size_t pages = (size_t)1 << c->order;
    for (size_t i = 1; i < pages; i++) {
        pg[i].slab.cache = c;
        pg[i].slab.s_mem = s_mem;
        pg[i].slab.head = pg;
        __atomic_store_n(&pg[i].flags, PG_SLAB | PG_TAIL | (fresh ? PG_FRESH : 0), __ATOMIC_RELEASE);
    }
    pg->slab.cache = c;
    pg->slab.s_mem = s_mem;
    pg->slab.head = pg;
}

/* ---- the fast paths ---- */

static inline void *slab_alloc(struct slab_cache *c)
{
    void *obj;
    if (likely(cpu_pop_fast(slab_arrays(c), &obj))) {
        slab_mark_live(c, obj);
        return obj;
    }
    return slab_alloc_slow(c);   /* marks its object live itself */
}

/* Free a checked object of c (slab_of_object said so): mark it free and
 * push it on this CPU's array.  `call` names the entry point in reports. */
static inline void slab_free(struct slab_cache *c, void *obj, const char *call)
{
    if (unlikely(slab_marked_free(c, obj))) {
        slab_free_marked(c, obj, call);
        return;
    }
    *slab_marker(c, obj) = slab_free_key;
    if (likely(cpu_push_fast(slab_arrays(c), obj)))
        return;
    slab_free_slow(c, obj);
}

/* A sized free (free_sized, sized operator delete) of p, trusted to be an
 * object of c, the class its size names: the page-map walk, the
 * descriptor and the division of kfree_inline are skipped, the free
 * marker is still checked.  The page is read only where a fresh range may
 * lie under p: slabs of one page are made eagerly, so only for a class of
 * bigger slabs. */
static inline void slab_free_sized(struct slab_cache *c, void *p, const char *call)
{
    if (unlikely(c->order) && slab_on_fresh_page(p))
        slab_free_checked(p, call);
    else
        slab_free(c, p, call);
}

/* A free on a CPU other than its slab's home: straight back to the slab's
 * freelist (SLUB's __slab_free), not into this CPU's array, so this CPU
 * does not hand the object out again (passive false sharing, and lines
 * last written by the other CPU); a full slab it makes partial goes on the
 * node list, where its home's refills look first.  pg is any page of the
 * slab.  A CPU that allocates nothing of c (slab_cpu.allocating) takes
 * the array path instead, but for an object smaller than a line of a slab
 * still frozen to its home. */
void slab_free_remote(struct slab_cache *c, struct sk_page *pg, void *obj);

/* A free that would go home stays on this CPU's array instead: this CPU
 * allocates nothing of c (a consumer: slab_cpu.allocating is 0), so its
 * array passes the object on in a batch (the barn), as a consumer's
 * should; but not an object smaller than a line of a slab still frozen
 * to its home, whose neighbours that CPU is handing out now (passive
 * false sharing, were this CPU to allocate).  Inline: every free of a
 * consumer asks. */
static inline bool slab_free_keeps(const struct slab_cache *c, const struct sk_page *pg, uint8_t cpu)
{
    if (unlikely(cpu >= cpu_nr_ids))
        return true;    /* no rseq here (registration failed: id -2): the fallback's array */
    if (__atomic_load_n(&slab_cpu_of(c, cpu)->allocating, __ATOMIC_RELAXED))
        return false;
    if (c->size >= CACHE_LINE)
        return true;
    union slab_counters head = { .v = __atomic_load_n(&pg->slab.head->slab.counters, __ATOMIC_RELAXED) };
    return !head.frozen;
}

/* A checked live object of c (SLUB mode), of the slab whose head page is
 * `head`, that realloc moved to a larger class: back to the slab's
 * freelist, not into this CPU's array, where it would wait for the next
 * malloc of its class with its slab pinned (sk_realloc says why). */
void slab_free_cold(struct slab_cache *c, struct sk_page *head, void *obj);

/* slab_free for an object whose slab page pg (head or tail) the caller
 * has, and its slab's home `owner` (a hint, from the page's counters or
 * the page map): an object of a slab frozen to another CPU goes home. */
static inline void slab_free_home(struct slab_cache *c, struct sk_page *pg, void *obj, const char *call,
                                  uint8_t owner)
{
    if (unlikely(slab_marked_free(c, obj))) {
        slab_free_marked(c, obj, call);
        return;
    }
    *slab_marker(c, obj) = slab_free_key;
    /* Home when the slab's home (owner not SLAB_NO_OWNER) is another CPU
     * than this one.  One branch, almost never taken: a test of
     * c->remote_free first was a branch on the object's class, which
     * mixed sizes take at random and mispredict (larson's 8-64 byte
     * objects).  The owner is read from
     * pg, whose flags were just read on the same line: a tail page
     * carries a copy of the head's (slab_mirror_owner); any cache that
     * does not send frees home masks the word out (classic SLAB keeps an
     * address there).  Reading it through pg->slab.head instead put a
     * dependent load on every free.  A racy
     * look: a slab whose home changed meanwhile only makes the choice of
     * path stale, and both paths are right for any slab state.  A thread
     * without rseq reads an id that is no CPU's (-1, or -2 when its
     * registration failed) and never goes home: slab_free_keeps turns it
     * away (a third factor here, for the id, cost the cross pair 15 ns in
     * one phase of the machine even with remote_free=0). */
    uint8_t cpu = (uint8_t)cpu_rseq_area()->cpu_id;
    unsigned other = (uint8_t)(owner ^ cpu);
    unsigned owned = (uint8_t)(owner + 1) & c->remote_free;    /* 0: SLAB_NO_OWNER, or off */
    if (unlikely(other * owned != 0) && !slab_free_keeps(c, pg, cpu)) {
        slab_free_remote(c, pg, obj);
        return;
    }
    if (likely(cpu_push_fast(slab_arrays(c), obj)))
        return;
    slab_free_slow(c, obj);
}

static inline void slab_free_at(struct slab_cache *c, struct sk_page *pg, void *obj, const char *call)
{
    union slab_counters cnt = { .v = __atomic_load_n(&pg->slab.counters, __ATOMIC_RELAXED) };
    slab_free_home(c, pg, obj, call, cnt.owner);
}

/* A free of obj through cache c when obj is no object of c (pg: its slab
 * page, owner its cache, or NULL): reported naming `call`, then abort;
 * under slub_debug with debug_continue the report returns. */
void slab_free_foreign(struct slab_cache *c, struct sk_page *pg, struct slab_cache *owner, void *obj,
                       const char *call);

/* sk_cache_free and kmem_cache_free: obj checked to be an object of c
 * (a report naming `call` if not), then freed.  Inline, so that each entry
 * point's frame is the one a memcheck stack names. */
static inline __attribute__((always_inline)) void slab_cache_free_call(struct slab_cache *c, void *obj,
                                                                       const char *call)
{
    struct slab_cache *owner = NULL;
    if (unlikely(!obj))
        return;
    struct sk_page *pg = slab_of_object(obj, &owner);
    if (unlikely(!pg || owner != c)) {
        slab_free_foreign(c, pg, owner, obj, call);
        return;
    }
    slab_free_at(c, pg, obj, call);
}

/* The free fast path, shared by sk_free and free: find and check the
 * object's slab, push it on this CPU's array; a large block of the page
 * allocator (a kblock, or an exact block: the per-CPU lists or its zone)
 * goes to page_free_exact from the same look-up.  Anything else (NULL,
 * direct mappings, bad pointers, a full array) leaves for a slow path.  A
 * large block's head page holds its first byte, so a page-aligned pointer
 * on it is the block's start; after its free the head is PG_PCP or free,
 * and a second free takes the slow path's report.  A direct mapping's one
 * descriptor answers for every page of it: the slice kind sends it on. */
static inline void kfree_call(void *p, const char *call)
{
    struct vm_slice *s = vm_slice_of(p);
    if (likely(s)) {
        /* The page map first: one dense word names the cache, the slab's
         * first page (its objects start there) and its home, and the
         * descriptor is not read.  A page out of the map (0: not a slab
         * page of a mapped cache, fresh, a large block, a partial slice)
         * reads its descriptor, as every page did before the map.  One
         * call of slab_free_home for both, so that it stays inline. */
        size_t idx = ((uintptr_t)p >> SK_PAGE_SHIFT) & (SLICE_PAGES - 1);
        struct sk_page *pg = (struct sk_page *)s->pages + idx;
        uint64_t w = __atomic_load_n(&vm_pmap(s)[idx], __ATOMIC_ACQUIRE);
        struct slab_cache *c;
        uint32_t off;            /* p's offset from its slab's first object */
        uint8_t owner;
        if (likely(w)) {
            c = (struct slab_cache *)(uintptr_t)(w >> 16);
            /* The page's index in its slab (bits 8-15) times the page
             * size, and p's offset in its page. */
            off = ((uint32_t)(uintptr_t)p & (SK_PAGE_SIZE - 1)) |
                  ((uint32_t)w << (SK_PAGE_SHIFT - 8) & (0xffu << SK_PAGE_SHIFT));
            owner = (uint8_t)w;
        } else {
            uint32_t f = __atomic_load_n(&pg->flags, __ATOMIC_ACQUIRE);
            if (unlikely((f & (PG_SLAB | PG_FRESH)) != PG_SLAB)) {
                if ((f & (PG_HEAD | PG_LARGE)) == (PG_HEAD | PG_LARGE) && !((uintptr_t)p & (SK_PAGE_SIZE - 1)) &&
                    s->kind != VM_SLICE_DIRECT) {
                    page_free_exact(pg);   /* a kblock or an exact block: its head page */
                    return;
                }
                goto slow;
            }
            c = pg->slab.cache;
            off = (uint32_t)((uintptr_t)p - (uintptr_t)pg->slab.s_mem);
            union slab_counters cnt = { .v = __atomic_load_n(&pg->slab.counters, __ATOMIC_RELAXED) };
            owner = cnt.owner;
        }
        if (likely(slab_index_exact(c, off) < c->objects)) {
            slab_free_home(c, pg, p, call, owner);
            return;
        }
    }
slow:
    sk_free_slow(p, call);
}

static inline void kfree_inline(void *p) { kfree_call(p, "free"); }


#endif
