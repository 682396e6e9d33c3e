/*
 * slab_classic.c — allocator=slab: the kernel's SLAB (mm/slab.c as of
 * 3.12, and 3.13 after "use struct page for slab management") behind the
 * same per-CPU arrays and barn as SLUB.  What is SLAB's here: the slow
 * paths (refill from the shared array, then from partial and free slabs;
 * flush into the shared array, else back to the slabs), the node lists of
 * full, partial and free slabs, cache colouring, the per-slab index
 * freelist, on-slab or off-slab management, and SLAB's sizing
 * (cache_estimate, calculate_slab_order, enable_cpucache).
 *
 * Lock order:
 *   1. classic_scratch.lock  (per CPU id: the refill's and flush's room for
 *                             a whole array of pointers, below)
 *   2. slab_node->list_lock   (an sk_mutex): the three lists, free_objects,
 *                             colour_next, every slab's struct slab and
 *                             index array, and the shared array (the
 *                             node's barn: count and objs), as in SLAB
 *   3. zone->lock             (page allocator, below)
 * A slab is grown, and destroyed, with no lock held: an off-slab cache's
 * management comes from (and goes back to) a smaller kmalloc cache, whose
 * own slow paths then run, and that cache is always on-slab, so it never
 * recurses.
 *
 * Invariants (list_lock held):
 *  - every slab of the cache is on exactly one list of its node: full
 *    (active == num), partial (0 < active < num), free (active == 0), and
 *    its head page's list_gen is the node's gen (a forked child abandons a
 *    list caught mid-change by bumping gen: such slabs are never touched
 *    again, their objects leak);
 *  - free_objects = sum of (num - active) over partial and free slabs;
 *  - onslab: the index chain from `free` holds exactly num - active
 *    indices; page: idx[active..num) are the free objects' indices.
 * The SLAB paths never write into an object (an object's whole state is
 * the index array), so the free marker (slab_fast.h) survives everywhere, as do
 * a constructor's results.  The marker is where 3.12's SLAB debugging kept
 * its double-free check, a word in the object: its red zone, which
 * cache_init_objs stamped RED_INACTIVE in every object of a new slab and
 * cache_alloc_debugcheck_after / cache_free_debugcheck checked and
 * flipped.  It lies in the object under both slab_mgmt layouts, so it
 * touches the same lines in both (docs/slab.md).  Beyond it the alloc
 * and free paths do what 3.12's did: refill from the shared array, else
 * the slabs, under one list_lock hold; flush the oldest batchcount.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "slab/kmalloc.h"
#include "slab/slab_internal.h"   /* slab_cpu_id */

/* ---- struct slab and the index array ----
 *
 * SLAB's struct slab (3.12): the list, s_mem, the head page (the kernel
 * kept colouroff there, to find the pages; the head page serves the same
 * purpose), `active` (inuse), `free` (the first free index) and the
 * nodeid: 42 bytes of fields, padded to 48 (the cover letter's "40 bytes"
 * leaves out the padding).  slab_mgmt=page lays the same fields but the
 * nodeid over the page descriptor from offset 16 (the 3.13 layout:
 * page->lru, page->s_mem, page->active; the node is the page's own;
 * `page` then is the descriptor's own head pointer, `free` the unused
 * SLUB freelist word) and keeps the index array's address in the
 * descriptor's counters word (page->freelist).  may_alias: the overlay is
 * read and written through this type and through struct sk_page.
 */
struct slab_desc {
    struct classic_list list;     /* on one node list */
    char *s_mem;                  /* first object (after colour and mgmt) */
    struct sk_page *page;         /* head page descriptor */
    uint32_t active;              /* objects not free on this slab */
    uint32_t free;                /* onslab: first free index, or END */
    uint16_t nodeid;              /* onslab only: past the overlay's end */
} __attribute__((may_alias));
typedef uint32_t bufctl_t;       /* kmem_bufctl_t: one per object */
#define BUFCTL_END 0xffffffffu

_Static_assert(sizeof(struct slab_desc) == 48, "3.12's struct slab is 48 bytes");
#define DESC_IN_PAGE offsetof(struct sk_page, slab.next)
_Static_assert(DESC_IN_PAGE + offsetof(struct slab_desc, s_mem) == offsetof(struct sk_page, slab.s_mem),
               "the overlay keeps s_mem where the free fast path reads it");
_Static_assert(DESC_IN_PAGE + offsetof(struct slab_desc, page) == offsetof(struct sk_page, slab.head),
               "the overlay keeps the head pointer");
_Static_assert(DESC_IN_PAGE + offsetof(struct slab_desc, nodeid) <= offsetof(struct sk_page, slab.counters),
               "the overlay leaves the counters word for the index array's address");

static inline struct slab_desc *desc_of(const struct slab_cache *c, struct sk_page *pg)
{
    if (c->classic.onslab)
        return (struct slab_desc *)pg->slab.freelist;    /* the kernel's page->lru.prev */
    return (struct slab_desc *)((char *)pg + DESC_IN_PAGE);
}

static inline bufctl_t *index_of(const struct slab_cache *c, struct slab_desc *d)
{
    if (c->classic.onslab)
        return (bufctl_t *)(d + 1);                       /* slab_bufctl() */
    return (bufctl_t *)(uintptr_t)d->page->slab.counters; /* page->freelist */
}

static inline struct slab_desc *desc_of_list(struct classic_list *l)
{
    return (struct slab_desc *)((char *)l - offsetof(struct slab_desc, list));
}

/* The slab an object belongs to (its head page's descriptor). */
static inline struct sk_page *slab_page(const void *obj)
{
    return page_of(obj)->slab.head;
}

static inline uint32_t obj_index(const struct slab_cache *c, const struct slab_desc *d, const void *obj)
{
    uint32_t q = (uint32_t)((const char *)obj - d->s_mem) * c->inv;
    return (q >> c->shift) | (q << (-c->shift & 31));
}

/* slab_get_obj: one free object off the slab (active < num). */
static inline void *get_obj(const struct slab_cache *c, struct slab_desc *d)
{
    bufctl_t *idx = index_of(c, d), i;
    if (c->classic.onslab) {
        i = d->free;
        d->free = idx[i];
    } else {
        i = idx[d->active];
    }
    d->active++;
    return d->s_mem + (size_t)i * c->size;
}

/* slab_put_obj: obj back on its slab. */
static inline void put_obj(const struct slab_cache *c, struct slab_desc *d, void *obj)
{
    uint32_t i = obj_index(c, d, obj);
    if (unlikely(d->active == 0 || i >= c->objects))
        slab_bad_free("double free", "free", obj, c, NULL);
    bufctl_t *idx = index_of(c, d);
    d->active--;
    if (c->classic.onslab) {
        idx[i] = d->free;
        d->free = i;
    } else {
        idx[d->active] = i;
    }
}

/* ---- lists (list_lock held) ---- */

static inline void list_init(struct classic_list *h)
{
    h->next = h->prev = h;
}

static inline void list_insert(struct classic_list *e, struct classic_list *prev, struct classic_list *next)
{
    next->prev = e;
    e->next = next;
    e->prev = prev;
    prev->next = e;
}

static inline void list_unlink(struct classic_list *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
}

static inline bool list_is_empty(const struct classic_list *h)
{
    return h->next == h;
}

/* Which list a slab of `active` objects belongs on, and its counter. */
static void slab_list_add(struct slab_cache *c, struct slab_classic_node *cn, struct slab_desc *d)
{
    if (d->active == c->objects) {
        list_insert(&d->list, cn->full.prev, &cn->full);
    } else if (d->active) {
        list_insert(&d->list, cn->partial.prev, &cn->partial);   /* tail */
        cn->nr_partial_slabs++;
    } else {
        list_insert(&d->list, &cn->free, cn->free.next);         /* head */
        cn->nr_free_slabs++;
    }
}

static void slab_list_del(struct slab_cache *c, struct slab_classic_node *cn, struct slab_desc *d)
{
    list_unlink(&d->list);
    if (d->active == c->objects)
        return;
    if (d->active)
        cn->nr_partial_slabs--;
    else
        cn->nr_free_slabs--;
}

/* ---- statistics (per CPU, relaxed, as slab.c) ---- */

#define cstat(c, item) \
    __atomic_fetch_add(&slab_cpu_mark(c, slab_cpu_id())->stat[item], 1ul, __ATOMIC_RELAXED)
#define cbook(c, field, v) \
    __atomic_fetch_add(&slab_cpu_mark(c, slab_cpu_id())->field, (unsigned long)(v), __ATOMIC_RELAXED)

/* ---- growing and destroying slabs (no lock held) ---- */

static void *mgmt_alloc(struct slab_cache *c)
{
    return slab_alloc(c->classic.mgmt_cache);
}

static void mgmt_free(struct slab_cache *c, void *m)
{
    slab_free(c->classic.mgmt_cache, m, "free");
}

/* cache_grow: a new slab, coloured, with its management set up, on the
 * node's free list.  false when memory ran out. */
static bool cache_grow(struct slab_cache *c)
{
    struct slab_node *n = &c->node[0];
    struct slab_classic_cache *k = &c->classic;
    lock_acquire(&n->list_lock);
    unsigned colour = n->classic.colour_next;
    if (++n->classic.colour_next >= k->colour)
        n->classic.colour_next = 0;
    lock_release(&n->list_lock);
    size_t offset = (size_t)colour * k->colour_off;

    void *mgmt = NULL;
    if (k->off_slab) {
        mgmt = mgmt_alloc(c);
        if (!mgmt)
            return false;
    }
    struct sk_page *pg = slab_pages_alloc(c);
    if (!pg) {
        if (mgmt)
            mgmt_free(c, mgmt);
        return false;
    }
    char *base = page_address(pg);
    if (!k->off_slab) {
        mgmt = base + offset;
        offset += k->mgmt_size;
    }
    char *s_mem = base + offset;
    slab_claim_pages(c, pg, s_mem, false);
    struct slab_desc *d;
    bufctl_t *idx;
    if (k->onslab) {
        d = mgmt;                           /* struct slab, then the index array */
        pg->slab.freelist = d;
        d->s_mem = s_mem;
        d->page = pg;
        d->nodeid = slab_node_of(pg);
        idx = (bufctl_t *)(d + 1);
    } else {
        d = desc_of(c, pg);                 /* the fields in the descriptor */
        idx = mgmt;                         /* the index array alone */
        pg->slab.counters = (uintptr_t)idx;
    }
    d->active = 0;
    d->free = 0;
    for (unsigned i = 0; i < c->objects; i++) {
        char *obj = s_mem + (size_t)i * c->size;
        if (c->ctor)
            c->ctor(obj);
        *slab_marker(c, obj) = SLAB_FRESH_KEY;   /* never handed out */
        idx[i] = k->onslab ? (i + 1 < c->objects ? i + 1 : BUFCTL_END) : i;
    }
    __atomic_store_n(&pg->flags, PG_HEAD | PG_SLAB, __ATOMIC_RELEASE);

    lock_acquire(&n->list_lock);
    pg->list_gen = n->gen;
    slab_list_add(c, &n->classic, d);
    n->classic.free_objects += c->objects;
    __atomic_fetch_add(&n->nr_slabs, 1, __ATOMIC_RELAXED);
    lock_release(&n->list_lock);
    cstat(c, SK_NEW_SLAB);
    return true;
}

/* slab_destroy: the slab's pages and off-slab management go back (no lock
 * held; the slab is on no list and counted out already). */
static void slab_destroy(struct slab_cache *c, struct slab_desc *d)
{
    struct sk_page *pg = d->page;
    void *mgmt = NULL;
    if (c->classic.off_slab)
        mgmt = c->classic.onslab ? (void *)d : (void *)index_of(c, d);
    size_t pages = (size_t)1 << c->order;
    for (size_t i = 1; i < pages; i++)
        __atomic_store_n(&pg[i].flags, 0, __ATOMIC_RELAXED);
    pg_set_flags(pg, PG_HEAD);
    cstat(c, SK_FREE_SLAB);
    page_free(pg, c->order);
    if (mgmt)
        mgmt_free(c, mgmt);
}

/* Destroy a chain of slabs linked through list.next (taken off their
 * lists); returns how many. */
static int destroy_chain(struct slab_cache *c, struct classic_list *chain)
{
    int n = 0;
    while (chain) {
        struct classic_list *next = chain->next;
        slab_destroy(c, desc_of_list(chain));
        chain = next;
        n++;
    }
    return n;
}

/* ---- objects to and from the slabs (list_lock held) ---- */

/* Up to `want` objects off the node's partial, then free slabs, into buf
 * in the order taken (the slab loop of cache_alloc_refill). */
static unsigned take_from_slabs(struct slab_cache *c, struct slab_classic_node *cn, void **buf, unsigned want)
{
    unsigned got = 0;
    while (got < want) {
        struct classic_list *l = cn->partial.next;
        if (l == &cn->partial) {
            l = cn->free.next;
            if (l == &cn->free)
                break;
        }
        struct slab_desc *d = desc_of_list(l);
        slab_list_del(c, cn, d);
        while (d->active < c->objects && got < want)
            buf[got++] = get_obj(c, d);
        slab_list_add(c, cn, d);
    }
    cn->free_objects -= got;
    return got;
}

/* free_block: objects back to their slabs (list_lock of node n held).
 * Slabs left empty beyond free_limit leave their lists and are chained
 * onto *chain through list.next, for destroy_chain once no lock is held
 * (the kernel destroyed them under list_lock; here an off-slab slab's
 * management goes back to a kmalloc cache, whose own flush would then
 * run under this one's locks). */
static void free_block(struct slab_cache *c, struct slab_node *n, void **objs, unsigned nr,
                       struct classic_list **chain)
{
    struct slab_classic_node *cn = &n->classic;
    for (unsigned i = 0; i < nr; i++) {
        struct sk_page *pg = slab_page(objs[i]);
        struct slab_desc *d = desc_of(c, pg);
        if (unlikely(pg->list_gen != n->gen)) {
            put_obj(c, d, objs[i]);   /* on a list a forked child abandoned */
            continue;
        }
        slab_list_del(c, cn, d);
        put_obj(c, d, objs[i]);
        cn->free_objects++;
        if (d->active == 0 && cn->free_objects > cn->free_limit) {
            cn->free_objects -= c->objects;
            __atomic_fetch_sub(&n->nr_slabs, 1, __ATOMIC_RELAXED);
            pg->list_gen = 0;
            d->list.next = *chain;
            *chain = &d->list;
        } else {
            slab_list_add(c, cn, d);
        }
    }
}

/* free_block with its own list_lock hold (the slabs to destroy onto
 * *chain, as free_block). */
static void free_block_unlocked(struct slab_cache *c, void **objs, unsigned nr, struct classic_list **chain)
{
    if (!nr)
        return;
    struct slab_node *n = &c->node[slab_node_of(slab_page(objs[0]))];
    lock_acquire(&n->list_lock);
    free_block(c, n, objs, nr, chain);
    lock_release(&n->list_lock);
}

/* ---- the shared array (the node's barn), under list_lock as in SLAB ---- */

/* transfer_objects from the shared array: its newest `want` at most. */
static unsigned shared_take(struct slab_node *n, void **buf, unsigned want)
{
    struct slab_barn *b = &n->barn;
    unsigned k = b->count < want ? b->count : want;
    memcpy(buf, b->objs + b->count - k, k * sizeof *buf);
    __atomic_store_n(&b->count, b->count - k, __ATOMIC_RELAXED);
    return k;
}

/* As many of objs as the shared array has room for; how many it took. */
static unsigned shared_give(struct slab_node *n, void **objs, unsigned nr)
{
    struct slab_barn *b = &n->barn;
    unsigned room = b->cap - b->count, k = nr < room ? nr : room;
    memcpy(b->objs + b->count, objs, k * sizeof *objs);
    __atomic_store_n(&b->count, b->count + k, __ATOMIC_RELAXED);
    return k;
}

/* ---- room for a whole array of pointers ----
 *
 * SLAB's refill moved batchcount objects (60 for small objects) into the
 * array under one list_lock hold, and its flush handed the array's oldest
 * batchcount to the shared array or the slabs and memmoved the rest down.
 * Neither fits a stack frame of the malloc paths' budget (512 bytes,
 * tools/checkstack), and no rseq sequence can memmove (a restart after
 * part of it finds the array half moved).  So both go through a scratch
 * array of CPU_ARRAY_MAX pointers: one per CPU id (hashed past
 * CLASSIC_SCRATCH), each behind a lock, taken before list_lock and never
 * held across a slab's growth or destruction (which reach a kmalloc
 * cache's slow paths, and their scratch).  Only allocator=slab touches
 * them. */
#define CLASSIC_SCRATCH 16
static struct classic_scratch {
    lock_t lock;
    void *buf[CPU_ARRAY_MAX + 1];     /* a full array, and the object freed */
} __attribute__((aligned(CACHE_LINE))) scratch[CLASSIC_SCRATCH] = {
    [0 ... CLASSIC_SCRATCH - 1] = { .lock = LOCK_INIT },
};

static struct classic_scratch *scratch_get(void)
{
    struct classic_scratch *s = &scratch[(unsigned)slab_cpu_id() % CLASSIC_SCRATCH];
    lock_acquire(&s->lock);
    return s;
}

void slab_classic_atfork_child(void)
{
    if (sk_opt.allocator != SK_ALLOC_SLAB)
        return;                        /* never touched: not even read */
    for (unsigned i = 0; i < CLASSIC_SCRATCH; i++)
        lock_reset_child(&scratch[i].lock);   /* what a held one carried leaks */
}

/* ---- refill (cache_alloc_refill) ---- */

/* Under one list_lock hold: the shared array's newest objects if it has
 * any, else objects off the partial and free slabs; a slab grows (with no
 * lock held) only when both are empty.  The objects go on the array in
 * the order taken and the last taken is handed out, as ac_put_obj and
 * ac_get_obj did. */
void *slab_classic_alloc_slow(struct slab_cache *c)
{
    cstat(c, SK_ALLOC_SLOWPATH);
    cpu_array_ready(slab_arrays(c), c->array_cap);
    void *obj = cpu_pop_locked(slab_arrays(c));
    if (obj) {
        cbook(c, slow_pops, 1);
        slab_mark_live(c, obj);
        return obj;
    }
    struct slab_node *n = &c->node[0];
    for (;;) {
        struct classic_scratch *s = scratch_get();
        unsigned want = c->batch < CPU_ARRAY_MAX ? c->batch : CPU_ARRAY_MAX;
        lock_acquire(&n->list_lock);
        unsigned got = shared_take(n, s->buf, want);
        if (got)
            cstat(c, SK_BARN_GET);
        else
            got = take_from_slabs(c, &n->classic, s->buf, want);
        lock_release(&n->list_lock);
        if (got) {
            obj = s->buf[got - 1];
            unsigned pushed = cpu_push_batch(slab_arrays(c), s->buf, got - 1);
            cbook(c, batch_in, pushed);
            struct classic_list *chain = NULL;
            if (pushed < got - 1)      /* others filled the array meanwhile */
                free_block_unlocked(c, s->buf + pushed, got - 1 - pushed, &chain);
            lock_release(&s->lock);
            destroy_chain(c, chain);
            cstat(c, SK_ARRAY_REFILL);
            slab_mark_live(c, obj);
            return obj;
        }
        lock_release(&s->lock);
        if (!cache_grow(c)) {
            errno = ENOMEM;
            return NULL;
        }
    }
}

/* ---- flush (cache_flusharray) ---- */

/* The array is full: its oldest batchcount objects go to the shared array
 * while it has room (only as many as fit, and then no more leave), else
 * back to their slabs, under one list_lock hold; the newer ones stay, and
 * obj joins them. */
void slab_classic_free_slow(struct slab_cache *c, void *obj)
{
    cstat(c, SK_FREE_SLOWPATH);
    cpu_array_ready(slab_arrays(c), c->array_cap);
    int r = cpu_push_locked(slab_arrays(c), obj);
    if (r > 0) {
        cbook(c, slow_pushes, 1);
        return;
    }
    if (r < 0)
        slab_bad_free("double free", "free", obj, c, NULL);
    struct classic_scratch *s = scratch_get();
    /* The whole array, oldest first (objs[0] is its bottom). */
    unsigned all = cpu_pop_batch(slab_arrays(c), s->buf, CPU_ARRAY_MAX);
    cbook(c, batch_out, all);
    for (unsigned i = 0; i < all; i++)
        if (unlikely(s->buf[i] == obj)) {
            lock_release(&s->lock);
            slab_bad_free("double free", "free", obj, c, NULL);
        }
    unsigned out = c->batch < all ? c->batch : all;
    struct classic_list *chain = NULL;
    struct slab_node *n = &c->node[0];
    if (out) {
        lock_acquire(&n->list_lock);
        if (n->barn.count < n->barn.cap) {
            out = shared_give(n, s->buf, out);
            cstat(c, SK_BARN_PUT);
        } else {
            free_block(c, n, s->buf, out, &chain);
            cstat(c, SK_ARRAY_FLUSH);
        }
        lock_release(&n->list_lock);
    }
    /* The newer ones back, then obj on top. */
    unsigned keep = all - out, back = cpu_push_batch(slab_arrays(c), s->buf + out, keep);
    cbook(c, batch_in, back);
    if (cpu_push_batch(slab_arrays(c), &obj, 1) == 1) {
        cbook(c, batch_in, 1);
    } else {
        s->buf[out + keep] = obj;   /* others filled the array meanwhile */
        keep++;
    }
    if (back < keep)                /* others filled the array meanwhile */
        free_block_unlocked(c, s->buf + out + back, keep - back, &chain);
    lock_release(&s->lock);
    destroy_chain(c, chain);
}

/* ---- shrink ---- */

int slab_classic_shrink(struct slab_cache *c)
{
    void *buf[SLAB_BATCH_MAX];
    int freed = 0;
    for (int cpu = 0; cpu < cpu_nr_slots(); cpu++) {
        unsigned n;
        while ((n = cpu_drain_remote(slab_arrays(c), cpu, buf, SLAB_BATCH_MAX))) {
            cstat(c, SK_REMOTE_DRAIN);
            cbook(c, batch_out, n);
            struct classic_list *chain = NULL;
            free_block_unlocked(c, buf, n, &chain);
            freed += destroy_chain(c, chain);
        }
    }
    for (int nid = 0; nid < SLAB_NR_NODES; nid++) {
        struct slab_node *n = &c->node[nid];
        struct classic_list *chain = NULL;
        lock_acquire(&n->list_lock);
        while (n->barn.count) {
            unsigned k = shared_take(n, buf, SLAB_BATCH_MAX);
            free_block(c, n, buf, k, &chain);
        }
        lock_release(&n->list_lock);
        freed += destroy_chain(c, chain);
    }
    /* drain_freelist: every empty slab goes. */
    for (int nid = 0; nid < SLAB_NR_NODES; nid++) {
        struct slab_node *n = &c->node[nid];
        struct slab_classic_node *cn = &n->classic;
        struct classic_list *chain = NULL;
        lock_acquire(&n->list_lock);
        while (cn->free.next && !list_is_empty(&cn->free)) {
            struct slab_desc *d = desc_of_list(cn->free.next);
            slab_list_del(c, cn, d);
            cn->free_objects -= c->objects;
            __atomic_fetch_sub(&n->nr_slabs, 1, __ATOMIC_RELAXED);
            d->page->list_gen = 0;
            d->list.next = chain;
            chain = &d->list;
        }
        lock_release(&n->list_lock);
        freed += destroy_chain(c, chain);
    }
    return freed;
}

/* ---- the double-free search and statistics ---- */

bool slab_classic_slab_has_free(struct slab_cache *c, void *obj)
{
    struct sk_page *pg = slab_page(obj);
    struct slab_node *n = &c->node[slab_node_of(pg)];
    bool found = false;
    lock_acquire(&n->list_lock);
    struct slab_desc *d = desc_of(c, pg);
    uint32_t want = obj_index(c, d, obj);
    bufctl_t *idx = index_of(c, d);
    if (c->classic.onslab) {
        uint32_t i = d->free;
        for (unsigned steps = 0; i < c->objects && steps < c->objects && !found; steps++) {
            found = i == want;
            i = idx[i];
        }
    } else {
        for (uint32_t a = d->active; a < c->objects && !found; a++)
            found = idx[a] == want;
    }
    lock_release(&n->list_lock);
    return found;
}

void slab_classic_node_info(struct slab_cache *c, struct slab_node *n, struct sk_cache_info *info,
                            unsigned long *free_objs, unsigned long *empty_slabs)
{
    (void)c;
    lock_acquire(&n->list_lock);
    *free_objs += n->classic.free_objects;
    *empty_slabs += n->classic.nr_free_slabs;
    info->partial_slabs += n->classic.nr_partial_slabs;
    lock_release(&n->list_lock);
}

void slab_classic_abandon_node(struct slab_node *n)
{
    struct slab_classic_node *cn = &n->classic;
    list_init(&cn->full);
    list_init(&cn->partial);
    list_init(&cn->free);
    cn->free_objects = 0;
    cn->nr_free_slabs = 0;
    cn->nr_partial_slabs = 0;
}

/* ---- sizing: cache_estimate, calculate_slab_order, enable_cpucache ---- */

const uint32_t slab_classic_kmalloc_sizes[] = {
    8, 16, 32, 64, 96, 128, 192, 256, 512, 1024, 2048, 4096, 8192, 16384,
};
const unsigned slab_classic_kmalloc_nr = SK_ARRAY_SIZE(slab_classic_kmalloc_sizes);

size_t slab_classic_kmalloc_align(size_t size)
{
    size_t a = CACHE_LINE;
    while (size <= a / 2 && a > 8)
        a /= 2;
    return a;
}

/* Objects per slab of 2^order pages and the bytes left over, with
 * management of `head` bytes plus one index per object on the slab
 * (aligned to align), or off it. */
static unsigned cache_estimate(unsigned order, size_t size, size_t align, size_t head, bool off_slab,
                               size_t *left_over)
{
    size_t slab = SK_PAGE_SIZE << order, n, mgmt = 0;
    if (off_slab) {
        n = slab / size;
    } else {
        n = (slab - head) / (size + sizeof(bufctl_t));
        while (n && SK_ALIGN_UP(head + n * sizeof(bufctl_t), align) + n * size > slab)
            n--;
        mgmt = n ? SK_ALIGN_UP(head + n * sizeof(bufctl_t), align) : 0;
    }
    if (n > 0xffff)
        n = 0xffff;
    *left_over = slab - n * size - mgmt;
    return (unsigned)n;
}

/* The kernel's slab_max_order with more than 32 MiB of memory. */
#define CLASSIC_MAX_ORDER_HI 1

static size_t calculate_slab_order(struct slab_cache *c, size_t head, bool off_slab)
{
    size_t left_over = 0;
    for (unsigned order = 0; order <= SLAB_MAX_ORDER; order++) {
        size_t rem;
        unsigned num = cache_estimate(order, c->size, c->align, head, off_slab, &rem);
        if (!num)
            continue;
        /* Off-slab management must stay smaller than an object, so that
         * its own cache is never off-slab itself. */
        if (off_slab && head + num * sizeof(bufctl_t) >= c->size && c->objects)
            break;
        c->objects = (uint16_t)num;
        c->order = (uint16_t)order;
        left_over = rem;
        if (order >= CLASSIC_MAX_ORDER_HI)
            break;
        if (rem * 8 <= (SK_PAGE_SIZE << order))
            break;                      /* acceptable internal fragmentation */
    }
    return left_over;
}

/* enable_cpucache: the per-CPU array limit by object size. */
static unsigned classic_limit(size_t size)
{
    if (size > 131072)
        return 1;
    if (size > SK_PAGE_SIZE)
        return 8;
    if (size > 1024)
        return 24;
    if (size > 256)
        return 54;
    return 120;
}

void slab_classic_setup(struct slab_cache *c)
{
    struct slab_classic_cache *k = &c->classic;
    c->mode = SLAB_MODE_CLASSIC;
    k->onslab = sk_opt.slab_mgmt == SK_SLAB_MGMT_ONSLAB;
    size_t head = k->onslab ? sizeof(struct slab_desc) : 0;
    bool off_slab = c->size >= SK_PAGE_SIZE / 8;
    c->objects = 0;
    size_t left_over = calculate_slab_order(c, head, off_slab);
    size_t mgmt = SK_ALIGN_UP(head + (size_t)c->objects * sizeof(bufctl_t), c->align);
    if (off_slab && left_over >= mgmt) {
        off_slab = false;               /* it fits in what would be wasted */
        left_over -= mgmt;
    }
    k->off_slab = off_slab;
    if (off_slab) {
        mgmt = head + (size_t)c->objects * sizeof(bufctl_t);
        /* The smallest kmalloc class that fits, by a scan: kmalloc_init
         * fills its size table only after creating every class. */
        k->mgmt_cache = NULL;
        for (unsigned i = 0; i < kmalloc_nr_classes && !k->mgmt_cache; i++)
            if (kmalloc_caches[i] && kmalloc_class_size[i] >= mgmt)
                k->mgmt_cache = kmalloc_caches[i];
        if (!k->mgmt_cache || k->mgmt_cache->classic.off_slab)
            os_fatal("%s: no on-slab kmalloc cache for %zu bytes of slab management", c->name, mgmt);
    }
    k->mgmt_size = (uint32_t)mgmt;
    c->reserved = off_slab ? 0 : (uint32_t)mgmt;
    k->colour_off = c->align > CACHE_LINE ? c->align : CACHE_LINE;
    k->colour = (uint16_t)(left_over / k->colour_off);
    if (!k->colour)
        k->colour = 1;
    unsigned limit = sk_opt.array_size ? (unsigned)sk_opt.array_size : classic_limit(c->size);
    /* batchcount from SLAB's limit (60 of 120); the array holds at most
     * CPU_ARRAY_MAX (117) of the 120, and says so. */
    c->batch = (limit + 1) / 2;
    c->array_cap = limit < CPU_ARRAY_MAX ? limit : CPU_ARRAY_MAX;
    c->array_max = c->array_cap;  /* SLAB's limit is fixed */
    k->shared = sk_opt.barn && c->size <= SK_PAGE_SIZE && cpu_nr_ids > 1 ? 8 : 0;
    if (k->shared * c->batch > SLAB_BARN_MAX)
        k->shared = SLAB_BARN_MAX / c->batch;
    c->cpu_partial = c->cpu_partial_slabs = 0;
    c->min_partial = 0;
    for (int nid = 0; nid < SLAB_NR_NODES; nid++) {
        struct slab_node *n = &c->node[nid];
        slab_classic_abandon_node(n);
        n->classic.colour_next = 0;
        n->classic.free_limit = (1ul + (unsigned long)cpu_nr_ids) * c->batch + c->objects;
        n->barn.cap = k->shared * c->batch;
    }
}
