/*
 * slab.c — SLUB slab caches: refill and flush of the per-CPU object arrays,
 * the node's barn of full batches, per-CPU partial lists in front of the
 * node partial lists, slab creation and destruction, shrinking.
 *
 * Refill order: the node's barn (a batch another CPU flushed), then this
 * CPU's slab (its private freelist, remote frees, then its fresh range:
 * objects never handed out, written only as they are, below), its partial
 * list, the node partial list, a new slab (made lazily).  Flush:
 * into the barn while another CPU is refilling, else back to the slabs.
 * With sheaves=0 (c->slots set) there are no arrays to refill: the slow
 * paths, shrink, the double-free search and statistics hand over to
 * slub_cpu.c, which shares the slab-level steps below (slab_internal.h).
 *
 * Lock order:
 *   1. slab_cpu->lock     (per cache per CPU; an sk_mutex: its holder may
 *                          be preempted between refill steps)
 *   2. slab_node->list_lock (an sk_mutex)
 *   3. zone->lock         (page allocator, below)
 * slab_node->barn.lock (an sk_mutex) is a leaf, held only to copy a batch
 * of pointers in or out, never with another slab lock.
 * No lock is held across a per-CPU array operation that could block.
 *
 * Slab states and who may change what (the SLUB protocol):
 *  - frozen: the slab belongs to one CPU (its CPU slab, or on its CPU
 *    partial list).  It is exempt from list management: only that CPU,
 *    under its slab_cpu lock, takes objects from it; anyone may give objects
 *    back to slab->freelist with cmpxchg16b on (freelist, counters).
 *  - not frozen, freelist != NULL: on its node's partial list.  Changing
 *    list membership of such a slab needs list_lock.
 *  - not frozen, freelist == NULL: full, on no list.  The first free into a
 *    full slab freezes it in the same cmpxchg and puts it on the freeing
 *    CPU's partial list, if the slab is at home there or has no home
 *    (counters.owner, which outlives the freeze in caches whose frees go
 *    home); else (a free that went home), or with cpu_partial=0, it goes
 *    on the node list under list_lock, where its home's next refill looks
 *    first.  Unless that one free empties it (a chain of all its objects)
 *    while the node keeps min_partial empty slabs: then no one else can
 *    reach it and it is discarded at once.
 *  - counters.owner, the home: set by each freeze (a new slab, one taken
 *    from the node list), kept by the unfreezes; SLAB_NO_OWNER where
 *    frees do not go home, and once a CPU slab is deactivated.
 *  - counters.inuse counts objects not on slab->freelist: handed to users,
 *    in per-CPU arrays, or on a CPU's private freelist.
 * A CPU's private freelist (slab_cpu->freelist) holds objects of its CPU
 * slab that only that CPU hands out; it needs no atomics.  So does its
 * fresh range (slab_cpu->fresh_left): while it is not empty the slab is the
 * CPU slab, on no list, and its pages where range objects start carry
 * PG_FRESH.
 * The page map (slab_types.h), what free reads instead of descriptors: a
 * slab page has its word there from the moment every object starting on it
 * holds a marker (slab_new_slab for an eager slab, take_fresh page by page
 * for a fresh range) until its slab is discarded (discard_now, before the
 * page allocator has the pages); a home change rewrites the words that
 * are there (slab_mirror_owner), never adds one.
 * Free pointers are stored obfuscated (cache random ^ slot address), the
 * kernel's SLAB_FREELIST_HARDENED, behind get_fp/set_fp.
 * A cache watched by memcheck or ASan (c->poison) has its objects poisoned
 * from creation to hand-out and from free on; it runs with empty per-CPU
 * arrays so that every alloc and free comes here (poison.h).
 */
#include <errno.h>
#include <string.h>

#include "slab/slub_cpu.h"

uintptr_t slab_free_key;     /* set by slab_init before the first slab */

/* ---- node partial lists (list_lock held) ---- */

void slab_add_partial(struct slab_node *n, struct sk_page *pg)
{
    pg->slab.prev = NULL;
    pg->slab.next = n->partial;
    if (n->partial)
        n->partial->slab.prev = pg;
    __atomic_store_n(&n->partial, pg, __ATOMIC_RELAXED);   /* peeked unlocked */
    pg->list_gen = n->gen;
    __atomic_store_n(&n->nr_partial, n->nr_partial + 1, __ATOMIC_RELAXED);   /* read unlocked (slab_free_chain) */
}

void slab_remove_partial(struct slab_node *n, struct sk_page *pg)
{
    if (pg->list_gen != n->gen)
        return;   /* on a list abandoned by a forked child: leave it */
    if (pg->slab.prev)
        pg->slab.prev->slab.next = pg->slab.next;
    else
        __atomic_store_n(&n->partial, pg->slab.next, __ATOMIC_RELAXED);
    if (pg->slab.next)
        pg->slab.next->slab.prev = pg->slab.prev;
    pg->list_gen = 0;
    __atomic_store_n(&n->nr_partial, n->nr_partial - 1, __ATOMIC_RELAXED);
}

/* ---- slabs ---- */

struct sk_page *slab_new_slab(struct slab_cache *c, void **freelist, bool lazy, bool *zero)
{
    struct sk_page *pg = slab_pages_alloc(c);
    if (!pg)
        return NULL;
    /* Pages known zero: objects are zero but for what is written below,
     * which their marker says (calloc).  Only without a constructor and
     * with the marker at word 1, next to the free pointer. */
    uintptr_t fresh = (pg_flags(pg) & PG_ZEROED) && !c->ctor && c->kofs == sizeof(void *) &&
                      c->offset == 0 ? SLAB_FRESH_ZERO_KEY : SLAB_FRESH_KEY;
    char *base = page_address(pg);
    char *s_mem = base + c->reserved;
    slab_claim_pages(c, pg, s_mem, lazy);
    pg->slab.next = pg->slab.prev = NULL;
    pg->list_gen = 0;
    if (lazy) {
        /* The whole slab is the fresh range: nothing written in it. */
        *zero = fresh == SLAB_FRESH_ZERO_KEY;
        s_mem = NULL;
    } else {
        /* Chain every object in address order; construct each once, now.
         * Each carries the fresh marker (never handed out) until a
         * hand-out clears it; below 16 bytes the free pointer takes its
         * place. */
        if (c->ctor) {
            slab_in_ctor++;
            for (unsigned i = 0; i < c->objects; i++)
                c->ctor(s_mem + (size_t)i * c->size);
            slab_in_ctor--;
        }
        char *obj = s_mem, *last = s_mem + (size_t)(c->objects - 1) * c->size;
        for (; obj < last; obj += c->size) {
            *slab_marker(c, obj) = fresh;
            set_fp(c, obj, obj + c->size);
        }
        *slab_marker(c, last) = fresh;
        set_fp(c, last, NULL);
    }
    if (slab_poisons(c))
        slab_poison_new_slab(c, s_mem);
    union slab_counters cnt = { .v = 0 };
    cnt.inuse = c->objects;
    cnt.objects = c->objects;
    cnt.frozen = 1;
    cnt.owner = slab_owner_here(c);
    pg->slab.freelist = NULL;
    pg->slab.counters = cnt.v;
    slab_mirror_owner(c, pg, cnt.owner);
    struct slab_node *n = &c->node[slab_node_of(pg)];
    __atomic_fetch_add(&n->nr_slabs, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&pg->flags, PG_HEAD | PG_SLAB | (lazy ? PG_FRESH : 0), __ATOMIC_RELEASE);
    if (!lazy)
        slab_pmap_set(c, pg, 0, ((size_t)1 << c->order) - 1, cnt.owner);
    *freelist = s_mem;
    stat(c, SK_NEW_SLAB);
    return pg;
}

/*
 * The fresh range.  A new CPU slab is created lazily: nothing is written
 * into it, and its last sc->fresh_left objects are handed out from the
 * range in address order as refills ask for them.  A page is initialised
 * when the range first hands out an object that starts on it: every object
 * starting there gets the fresh marker, as all the objects of an eagerly
 * made slab have from the start.  So a size class a program uses for a few
 * objects touches their pages only, not its whole slab (up to 8 pages for
 * one 4 KiB stdio buffer), and a new slab costs no chain walk.  The range
 * is the CPU's, like its private freelist: its objects count in the slab's
 * inuse.
 *
 * A free of an object never handed out must still be caught.  On an
 * initialised page its fresh marker says so (and find_free finds it in the
 * range); the pages not yet initialised carry PG_FRESH, and no object
 * starting on one was ever handed out: slab_of_object rejects them on the
 * flag it reads anyway, and a sized free, which skips that look-up, reads
 * the flag (slab_on_fresh_page).  A page loses the flag before any of its
 * objects is handed out.  The range ends when it is used up, or when its
 * slab, entirely free, goes back at a shrink; a slab with objects in use
 * keeps it and stays this CPU's (a shrink frees nothing of it either
 * way).  Caches whose objects need work at creation (a constructor,
 * memcheck or ASan poisoning) and the other modes (sheaves=0, slub_debug,
 * SLAB) make their slabs eagerly, as do caches of one-page slabs (their
 * page is touched by the first object anyway; a sized free of such a class
 * then reads no descriptor) and a refill that takes a whole new slab.
 */
static inline size_t obj_page(const struct slab_cache *c, unsigned i)
{
    return ((size_t)i * c->size + c->reserved) >> SK_PAGE_SHIFT;
}

static __attribute__((noreturn)) void never_handed_out(const void *p, const char *call,
                                                       const struct slab_cache *c)
{
    os_fatal("invalid free: %s(%p) in %s, an object never handed out", call, p, c->name);
}

/* slab.h: for the reports of a bad free. */
void slab_check_fresh(const void *p, const char *call)
{
    struct slab_cache *c;
    if (slab_lookup(p, PG_SLAB | PG_FRESH, &c))
        never_handed_out(p, call, c);
}

/* Up to `want` objects of the CPU slab's fresh range into buf (slab_cpu
 * lock held).  A page an object taken starts on is initialised whole the
 * first time: every object starting there gets the fresh marker and the
 * page loses PG_FRESH (the slab's tail pages too once the range ends),
 * before any of them is handed out. */
static unsigned take_fresh(struct slab_cache *c, struct slab_cpu *sc, void **buf, unsigned want)
{
    struct sk_page *pg = sc->slab;
    unsigned from = c->objects - sc->fresh_left;
    unsigned to = want < sc->fresh_left ? from + want : c->objects;
    uintptr_t key = sc->fresh_zero ? SLAB_FRESH_ZERO_KEY : SLAB_FRESH_KEY;
    size_t last = obj_page(c, to - 1);
    unsigned i = from;
    if (from)                     /* the page of object from - 1 is done */
        for (size_t done = obj_page(c, from - 1); i < c->objects && obj_page(c, i) == done; i++)
            ;
    for (; i < c->objects && obj_page(c, i) <= last; i++)
        *slab_marker(c, pg->slab.s_mem + (size_t)i * c->size) = key;
    if (to == c->objects)
        last = ((size_t)1 << c->order) - 1;
    for (size_t p = obj_page(c, from); p <= last; p++)
        if (pg_flags(pg + p) & PG_FRESH)
            __atomic_store_n(&pg[p].flags, pg_flags(pg + p) & ~PG_FRESH, __ATOMIC_RELEASE);
    union slab_counters cnt = { .v = slab_counters(pg) };
    slab_pmap_set(c, pg, obj_page(c, from), last, cnt.owner);
    for (i = from; i < to; i++)
        buf[i - from] = pg->slab.s_mem + (size_t)i * c->size;
    sc->fresh_left = (uint16_t)(c->objects - to);
    return to - from;
}

static void discard_now(struct slab_cache *c, struct sk_page *pg);

void slab_discard(struct slab_cache *c, struct sk_page *pg)
{
    struct slab_node *n = &c->node[slab_node_of(pg)];
    __atomic_fetch_sub(&n->nr_slabs, 1, __ATOMIC_RELAXED);
    if (unlikely(c->rcu_keep)) {
        /* Readers may still look at its objects: after a grace period
         * (slab_rcu_release).  Off every list and empty: no one else
         * reaches it, and the stack is only pushed here. */
        struct sk_page *head = __atomic_load_n(&c->rcu_pending, __ATOMIC_RELAXED);
        do
            pg->slab.next = head;
        while (!__atomic_compare_exchange_n(&c->rcu_pending, &head, pg, true, __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED));
        return;
    }
    discard_now(c, pg);
}

static void slab_rcu_release(struct slab_cache *c, void (*grace)(void))
{
    struct sk_page *list = __atomic_exchange_n(&c->rcu_pending, NULL, __ATOMIC_ACQUIRE);
    if (!list)
        return;
    grace();
    for (struct sk_page *pg = list, *next; pg; pg = next) {
        next = pg->slab.next;
        discard_now(c, pg);
    }
}

static void discard_now(struct slab_cache *c, struct sk_page *pg)
{
    size_t pages = (size_t)1 << c->order;
    slab_pmap_clear(c, pg);
    for (size_t i = 1; i < pages; i++)
        __atomic_store_n(&pg[i].flags, 0, __ATOMIC_RELAXED);
    pg_set_flags(pg, PG_HEAD);
    if (slab_poisons(c))
        slab_poison_discard_slab(c, pg->slab.s_mem);
    stat(c, SK_FREE_SLAB);
    page_free(pg, c->order);
}

/* Discard a list of empty slabs chained by slab.next; returns how many. */
static int discard_slabs(struct slab_cache *c, struct sk_page *list)
{
    int n = 0;
    while (list) {
        struct sk_page *pg = list;
        list = pg->slab.next;
        slab_discard(c, pg);
        n++;
    }
    return n;
}

/* Take the whole freelist of a frozen slab (remote frees since we last
 * looked).  An empty frozen slab is unfrozen instead: it is full and goes
 * on no list, and the next free into it will freeze it again. */
void *slab_take_freelist(struct slab_cache *c, struct sk_page *pg, bool *retired)
{
    for (;;) {
        void *fl = slab_freelist(pg);
        union slab_counters old = { .v = slab_counters(pg) }, new = old;
        if (fl) {
            new.inuse = new.objects;
            if (slab_cmpxchg(c, pg, fl, old.v, NULL, new.v)) {
                *retired = false;
                return fl;
            }
        } else {
            new.frozen = 0;   /* the owner stays: its home */
            if (slab_cmpxchg(c, pg, NULL, old.v, NULL, new.v)) {
                *retired = true;
                return NULL;
            }
        }
    }
}

/* Freeze a node-list slab for this CPU (list_lock held), optionally taking
 * its freelist. */
static void *freeze_slab(struct slab_cache *c, struct sk_page *pg, bool take)
{
    for (;;) {
        void *fl = slab_freelist(pg);
        union slab_counters old = { .v = slab_counters(pg) }, new = old;
        new.frozen = 1;
        new.owner = slab_owner_here(c);
        if (take)
            new.inuse = new.objects;
        if (slab_cmpxchg(c, pg, fl, old.v, take ? NULL : fl, new.v)) {
            if (new.owner != old.owner)
                slab_mirror_owner(c, pg, new.owner);
            return fl;
        }
    }
}

/* Slabs of the node list a refill looks at for one at home here. */
#define NODE_HOME_SCAN 64

/* The first of the node list's first NODE_HOME_SCAN slabs at home `here`
 * or of no home, else NULL (list_lock held).  A slab taken by another CPU
 * changes home with objects of its old home still live in it, and those
 * then go home to the new one one by one: the two CPUs' objects
 * interleave again.  mimalloc never gives a page away while its thread
 * lives; this only prefers. */
static struct sk_page *node_partial_home(struct sk_page *pg, uint8_t here)
{
    for (unsigned i = 0; pg && i < NODE_HOME_SCAN; i++, pg = pg->slab.next) {
        union slab_counters cnt = { .v = slab_counters(pg) };
        if (cnt.owner == here || cnt.owner == SLAB_NO_OWNER)
            return pg;
    }
    return NULL;
}

/* Get a slab from the node partial list, and (cpu partial on) stock this
 * CPU's partial list with a few more under the same lock acquisition. */
struct sk_page *slab_get_node_partial(struct slab_cache *c, struct slab_cpu *sc, void **fl)
{
    struct slab_node *n = &c->node[0];
    if (!__atomic_load_n(&n->partial, __ATOMIC_RELAXED))
        return NULL;
    struct sk_page *got = NULL;
    unsigned first = 0;
    uint8_t here = slab_owner_here(c);
    lock_acquire(&n->list_lock);
    while (n->partial) {
        struct sk_page *pg = n->partial;
        if (here != SLAB_NO_OWNER) {
            struct sk_page *home = node_partial_home(pg, here);
            if (home)
                pg = home;
            else if (got)
                break;   /* stock no other CPU's slab: it would change home for a spare */
        }
        slab_remove_partial(n, pg);
        union slab_counters cnt = { .v = slab_counters(pg) };
        unsigned avail = cnt.objects - cnt.inuse;   /* a snapshot, as 3.1's */
        if (!got) {
            *fl = freeze_slab(c, pg, true);
            got = pg;
            first = avail;
            if (!c->cpu_partial)
                break;
        } else {
            freeze_slab(c, pg, false);
            cpu_partial_push(sc, pg, avail);
        }
        if (cpu_partial_stocked(c, sc, first))
            break;
    }
    lock_release(&n->list_lock);
    if (got)
        stat(c, SK_NODE_PARTIAL_ALLOC);
    return got;
}

/* Move a CPU partial list to the node list: one list_lock acquisition.
 * Returns the number of empty slabs given back. */
static int unfreeze_partials(struct slab_cache *c, struct sk_page *list)
{
    if (!list)
        return 0;
    struct slab_node *n = &c->node[0];
    struct sk_page *discard = NULL;
    lock_acquire(&n->list_lock);
    while (list) {
        struct sk_page *pg = list;
        list = pg->slab.next;
        union slab_counters old, new;
        void *fl;
        do {
            fl = slab_freelist(pg);
            old.v = slab_counters(pg);
            new = old;
            new.frozen = 0;
        } while (!slab_cmpxchg(c, pg, fl, old.v, fl, new.v));
        if (new.inuse == 0 && n->nr_partial >= c->min_partial) {
            pg->slab.next = discard;
            discard = pg;
        } else {
            slab_add_partial(n, pg);
            stat(c, SK_NODE_PARTIAL_FREE);
        }
    }
    lock_release(&n->list_lock);
    stat(c, SK_CPU_PARTIAL_DRAIN);
    return discard_slabs(c, discard);
}

/* A slab that just became partial, with free_objects free, joins this
 * CPU's partial list.  Returns the number of empty slabs given back when
 * the list overflowed: in the default mode the list with it, when it
 * makes one slab too many; under sheaves=0 the list before it, when that
 * already held more than cpu_partial free objects (3.1's drain). */
static int put_cpu_partial(struct slab_cache *c, struct sk_page *pg, unsigned free_objects)
{
    struct slab_cpu *sc = slab_cpu_mark(c, slab_cpu_id());
    struct sk_page *drain = NULL;
    lock_acquire(&sc->lock);
    if (!c->cpu_partial_slabs && cpu_partial_full(c, sc))
        drain = cpu_partial_take(sc);
    cpu_partial_push(sc, pg, free_objects);
    sc->stat[SK_CPU_PARTIAL_FREE]++;
    if (c->cpu_partial_slabs && sc->partial_slabs > c->cpu_partial_slabs)
        drain = cpu_partial_take(sc);
    lock_release(&sc->lock);
    return unfreeze_partials(c, drain);
}

/*
 * Give a chain head..tail of cnt objects back to slab pg (SLUB's
 * __slab_free): lock-free unless the slab's list membership changes.
 */
int slab_free_chain(struct slab_cache *c, struct sk_page *pg, void *head, void *tail, unsigned cnt)
{
    struct slab_node *n = &c->node[slab_node_of(pg)];
    bool locked = false, was_frozen, whole;
    void *prior;
    union slab_counters old, new;
    for (;;) {
        prior = slab_freelist(pg);
        old.v = slab_counters(pg);
        if (unlikely(prior == head))
            slab_bad_free("double free", "free", head, c, NULL);
        if (unlikely(old.inuse < cnt))
            slab_bad_free("double free", "free", head, c, NULL);
        set_fp(c, tail, prior);
        new = old;
        new.inuse -= cnt;
        was_frozen = old.frozen;
        /* A full slab on no list emptied by this one chain (a one-object
         * slab, or a batch flush that held all its objects): nobody else
         * can reach it, so with enough empty slabs kept on the node it
         * goes straight back to the page allocator, without the freeze,
         * the CPU partial list and the list_lock SLUB would pass it
         * through (the node count is a hint, read unlocked). */
        whole = !was_frozen && !locked && !prior && new.inuse == 0 &&
                __atomic_load_n(&n->nr_partial, __ATOMIC_RELAXED) >= c->min_partial;
        if (!was_frozen && !locked && !whole) {
            uint8_t here = slab_owner_here(c);
            if (!prior && c->cpu_partial && (old.owner == SLAB_NO_OWNER || old.owner == here)) {
                new.frozen = 1;               /* full -> this CPU's partial list */
                new.owner = here;
            } else if (!prior || new.inuse == 0) {
                /* Full and at home on another CPU (a free that went
                 * home): the node list, where its home's next refill
                 * looks first (node_partial_home), rather than that
                 * CPU's partial list under its lock, which its own
                 * refills hold. */
                lock_acquire(&n->list_lock);  /* list membership changes */
                locked = true;
                continue;
            }
        }
        if (slab_cmpxchg(c, pg, prior, old.v, head, new.v))
            break;
    }
    if (whole) {
        slab_discard(c, pg);
        return 1;
    }
    if (new.owner != old.owner)
        slab_mirror_owner(c, pg, new.owner);
    if (!locked)
        return new.frozen && !was_frozen ? put_cpu_partial(c, pg, new.objects - new.inuse) : 0;
    if (was_frozen) {
        lock_release(&n->list_lock);
        return 0;
    }
    if (new.inuse == 0 && n->nr_partial >= c->min_partial) {
        if (prior)
            slab_remove_partial(n, pg);
        lock_release(&n->list_lock);
        slab_discard(c, pg);
        return 1;
    }
    if (!prior) {
        slab_add_partial(n, pg);
        stat(c, SK_NODE_PARTIAL_FREE);
    }
    lock_release(&n->list_lock);
    return 0;
}

/* Return objects to their slabs, one cmpxchg per run of the same slab.
 * Returns the number of slabs that went back to the page allocator. */
static int flush_to_slabs(struct slab_cache *c, void **objs, unsigned n)
{
    int freed = 0;
    unsigned i = 0;
    while (i < n) {
        void *head = objs[i];
        struct sk_page *pg = slab_head(page_of(head));
        /* The objects came through the array checked: one inside this
         * slab's object area is this slab's, no descriptor look-up. */
        uintptr_t base = (uintptr_t)pg->slab.s_mem, span = (uintptr_t)c->objects * c->size;
        void *tail = head;
        unsigned cnt = 1;
        for (i++; i < n; i++) {
            void *o = objs[i];
            if ((uintptr_t)o - base >= span)
                break;
            if (o == tail)
                slab_bad_free("double free", "free", o, c, NULL);
            set_fp(c, tail, o);
            tail = o;
            cnt++;
        }
        freed += slab_free_chain(c, pg, head, tail, cnt);
    }
    return freed;
}

/* ---- the barn ---- */

/* Leave n objects flushed on `cpu` in the barn, if another CPU has asked
 * for objects since the barn was last found full, and all n fit: whether
 * it took them.  A full barn means nobody is taking: it stops accepting
 * until the next refill elsewhere, so an idle consumer strands at most
 * one barn of objects (freed by shrink, trim, or its next refill). */
static bool barn_put(struct slab_cache *c, int cpu, void **objs, unsigned n)
{
    struct slab_barn *b = &c->node[0].barn;
    int by = __atomic_load_n(&b->wanted_by, __ATOMIC_RELAXED);
    if (by < 0 || by == cpu)
        return false;
    if (__atomic_load_n(&b->count, __ATOMIC_RELAXED) + n > b->cap) {
        __atomic_store_n(&b->wanted_by, -1, __ATOMIC_RELAXED);
        return false;
    }
    lock_acquire(&b->lock);
    bool ok = b->count + n <= b->cap;
    if (ok) {
        memcpy(b->objs + b->count, objs, n * sizeof *objs);
        __atomic_store_n(&b->count, b->count + n, __ATOMIC_RELAXED);
    }
    lock_release(&b->lock);
    if (ok)
        stat(c, SK_BARN_PUT);
    return ok;
}

/* Up to `want` objects for a refill on `cpu`, the last left first. */
static unsigned barn_get(struct slab_cache *c, int cpu, void **objs, unsigned want)
{
    struct slab_barn *b = &c->node[0].barn;
    if (!b->cap)
        return 0;
    /* This CPU asks: flushes on the others may fill the barn for it. */
    if (__atomic_load_n(&b->wanted_by, __ATOMIC_RELAXED) != cpu)
        __atomic_store_n(&b->wanted_by, cpu, __ATOMIC_RELAXED);
    if (!__atomic_load_n(&b->count, __ATOMIC_RELAXED))
        return 0;
    lock_acquire(&b->lock);
    unsigned n = b->count < want ? b->count : want;
    memcpy(objs, b->objs + b->count - n, n * sizeof *objs);
    __atomic_store_n(&b->count, b->count - n, __ATOMIC_RELAXED);
    lock_release(&b->lock);
    if (n)
        stat(c, SK_BARN_GET);
    return n;
}

/* ---- refill (alloc slow path) ---- */

/* Objects a refill or a flush moves with an array of `cap` slots: half of
 * them, at least 1, at most SLAB_BATCH_MAX (c->batch for its first
 * capacity, cache.c). */
static inline unsigned array_batch(unsigned cap)
{
    unsigned b = cap / 2 ? cap / 2 : 1;
    return b < SLAB_BATCH_MAX ? b : SLAB_BATCH_MAX;
}

static void *slab_alloc_refill(struct slab_cache *c);

/* errno is the caller's again when the slow path finds an object. */
void *slab_alloc_slow(struct slab_cache *c)
{
    int saved = errno;
    return os_errno_restore(slab_alloc_refill(c), saved);
}

/* Up to `want` objects of c for this CPU into buf, from its CPU slab, its
 * CPU partial list, the node's partial list or a new slab, in that
 * order; sc->lock held.  Returns how many (0: out of memory). */
static unsigned refill_from_slabs(struct slab_cache *c, struct slab_cpu *sc, void **buf, unsigned want)
{
    unsigned n = 0;
    /* Slow start: the first refills on this CPU take 1, 2, 4 ... objects,
     * so a class a program uses for a few objects touches no more of a
     * new slab than it uses (fresh range), and a busy one soon takes
     * whole batches. */
    unsigned long refills = sc->stat[SK_ARRAY_REFILL];
    if (unlikely(refills < 8) && want > (1u << refills))
        want = 1u << refills;
    while (n < want) {
        if (sc->freelist) {
            struct sk_page *pg = sc->slab;
            void *obj = sc->freelist;
            while (obj && n < want) {
                buf[n++] = obj;
                obj = get_fp_checked(c, pg, obj);
            }
            sc->freelist = obj;
            sc->stat[SK_ALLOC_CPU_SLAB]++;
            continue;
        }
        /* Objects freed back into the slab (resident) before its fresh
         * range; a slab with a range is never retired here. */
        if (sc->fresh_left && !slab_freelist(sc->slab)) {
            n += take_fresh(c, sc, buf + n, want - n);
            sc->stat[SK_ALLOC_CPU_SLAB]++;
            continue;
        }
        if (sc->slab) {
            bool retired;
            sc->freelist = slab_take_freelist(c, sc->slab, &retired);
            if (retired)
                sc->slab = NULL;
            continue;
        }
        if (sc->partial) {
            sc->slab = cpu_partial_pop(sc);
            continue;
        }
        /* Lazily, unless this refill takes the whole slab anyway (a
         * slab of one 32 KiB sk_cache object: no flags to set and clear), or the
         * slab is one page (touched by its first object anyway; and a
         * sized free of its class then needs no look at the page). */
        void *fl = NULL;
        bool lazy = !c->ctor && !slab_poisons(c) && c->order && c->objects > want - n, zero = false;
        struct sk_page *pg = slab_get_node_partial(c, sc, &fl);
        if (!pg)
            pg = slab_new_slab(c, &fl, lazy, &zero);
        else
            lazy = false;
        if (!pg)
            break;
        sc->slab = pg;
        sc->freelist = fl;
        sc->fresh_left = lazy ? c->objects : 0;
        sc->fresh_zero = zero;
    }
    if (n)
        sc->stat[SK_ARRAY_REFILL]++;
    return n;
}

/* Hand out buf[0] of the n refilled; push the rest so the next pops
 * return buf[1], buf[2] ... in address order (what does not fit goes
 * back to the slabs). */
static void *hand_out(struct slab_cache *c, void **buf, unsigned n)
{
    void *obj = buf[0];
    slab_mark_live(c, obj);
    if (n > 1) {
        unsigned m = n - 1;
        for (unsigned i = 0; i < m / 2; i++) {
            void *t = buf[1 + i];
            buf[1 + i] = buf[n - 1 - i];
            buf[n - 1 - i] = t;
        }
        unsigned pushed = cpu_push_batch(slab_arrays(c), buf + 1, m);
        book(c, batch_in, pushed);
        if (pushed < m)
            flush_to_slabs(c, buf + 1 + pushed, m - pushed);
    }
    if (slab_poisons(c))
        slab_poison_alloc(c, obj);
    return obj;
}

static void *slab_alloc_refill(struct slab_cache *c)
{
    slab_mark_used(c);              /* every mode's slow path: the first
                                     * allocation of a cache comes here */
    if (unlikely(c->mode != SLAB_MODE_SLUB))
        return c->mode == SLAB_MODE_CLASSIC ? slab_classic_alloc_slow(c) : slab_debug_alloc(c, 0);
    if (c->slots)
        return slub_cpu_alloc(c);   /* sheaves=0: SLUB's own fast path */
    stat(c, SK_ALLOC_SLOWPATH);
    unsigned cap = cpu_array_ready(slab_arrays(c), c->array_cap);
    /* The fast path may have failed only for want of a fallback slot. */
    void *first = cpu_pop_locked(slab_arrays(c));
    if (first) {
        book(c, slow_pops, 1);
        slab_mark_live(c, first);
        if (slab_poisons(c))
            slab_poison_alloc(c, first);
        return first;
    }
    void *buf[SLAB_BATCH_MAX];
    int cpu = slab_cpu_id();
    struct slab_cpu *sc = slab_cpu_mark(c, cpu);
    if (__atomic_load_n(&sc->allocating, __ATOMIC_RELAXED) != SLAB_ALLOCATING)
        __atomic_store_n(&sc->allocating, SLAB_ALLOCATING, __ATOMIC_RELAXED);
    unsigned want = array_batch(cap), n = barn_get(c, cpu, buf, want);
    if (!n) {
        lock_acquire(&sc->lock);
        n = refill_from_slabs(c, sc, buf, want);
        lock_release(&sc->lock);
        if (unlikely(n == 0)) {
            errno = ENOMEM;
            return NULL;
        }
    }
    return hand_out(c, buf, n);
}

/* ---- flush (free slow path) ---- */

void slab_free_slow(struct slab_cache *c, void *obj)
{
    slab_mark_used(c);              /* a free on a CPU that never allocated */
    if (unlikely(c->mode != SLAB_MODE_SLUB)) {
        if (c->mode == SLAB_MODE_CLASSIC)
            slab_classic_free_slow(c, obj);
        else
            slab_debug_free(c, obj, false, "free");
        return;
    }
    if (c->slots) {
        slub_cpu_free(c, obj);      /* sheaves=0 */
        return;
    }
    if (slab_poisons(c))
        slab_poison_free(c, obj);
    stat(c, SK_FREE_SLOWPATH);
    unsigned cap = cpu_array_ready(slab_arrays(c), c->array_cap);
    int r = cpu_push_locked(slab_arrays(c), obj);
    if (r > 0) {
        book(c, slow_pushes, 1);
        return;
    }
    if (r < 0)
        slab_bad_free("double free", "free", obj, c, NULL);
    /* Full.  If this CPU refilled since it last flushed, the array went
     * from empty to full and back: the program's working set on this CPU
     * is larger than the array, and every object of it would pass through
     * the slabs twice a round (sizeclass's batches, a server's request
     * burst).  Grow, doubling up to array_max, tcmalloc's slow start; a
     * burst of frees alone (teardown) or frees of objects allocated on
     * another CPU never grow it.  slab_shrink trims it back when idle. */
    struct slab_cpu *sc = slab_cpu_mark(c, slab_cpu_id());
    uint32_t alloc = __atomic_load_n(&sc->allocating, __ATOMIC_RELAXED);
    if (alloc)
        __atomic_store_n(&sc->allocating, alloc - 1, __ATOMIC_RELAXED);
    if (alloc == SLAB_ALLOCATING) {
        if (cap < c->array_max) {
            cap = cap * 2 < c->array_max ? cap * 2 : c->array_max;
            cpu_array_grow(slab_arrays(c), cap);
            r = cpu_push_locked(slab_arrays(c), obj);
            if (r > 0) {
                book(c, slow_pushes, 1);
                return;
            }
        }
    }
    void *buf[SLAB_BATCH_MAX + 1];
    unsigned n = cpu_pop_batch(slab_arrays(c), buf, array_batch(cap));
    book(c, batch_out, n);
    for (unsigned i = 0; i < n; i++)
        if (unlikely(buf[i] == obj))
            slab_bad_free("double free", "free", obj, c, NULL);
    if (cpu_push_batch(slab_arrays(c), &obj, 1) == 1)
        book(c, batch_in, 1);
    else
        buf[n++] = obj;
    if (n && !barn_put(c, slab_cpu_id(), buf, n)) {
        stat(c, SK_ARRAY_FLUSH);
        flush_to_slabs(c, buf, n);
    }
}

/* slab.h: a free on the wrong CPU (marker already set) goes home. */
void slab_free_remote(struct slab_cache *c, struct sk_page *pg, void *obj)
{
    stat(c, SK_FREE_SLOWPATH);   /* SLUB's __slab_free: a slow-path free */
    stat(c, SK_FREE_REMOTE);
    slab_free_chain(c, pg->slab.head, obj, obj, 1);
}

/* slab.h: an object its program outgrew goes back to its slab. */
void slab_free_cold(struct slab_cache *c, struct sk_page *head, void *obj)
{
    *slab_marker(c, obj) = slab_free_key;
    slab_free_chain(c, head, obj, obj, 1);
}

/* ---- the double-free search (slab_free_suspect) ---- */

/* Is obj one of the first `max` links of the freelist at fl?  A racing
 * update can leave a link pointing anywhere: decode with a range check
 * and stop at the first link that is not an object of the slab. */
static bool freelist_has(struct slab_cache *c, struct sk_page *pg, void *fl, const void *obj)
{
    char *lo = pg->slab.s_mem, *hi = lo + (size_t)c->objects * c->size;
    for (unsigned i = 0; fl && i < c->objects; i++) {
        if ((char *)fl < lo || (char *)fl >= hi || slab_obj_exact(c, pg, fl) >= c->objects)
            return false;
        if (fl == obj)
            return true;
        fl = get_fp(c, fl);
    }
    return false;
}

static bool array_has(cpu_arrays_t tab, int slot, const void *obj)
{
    struct cpu_array *a = cpu_array_at(tab, slot);
    uint64_t w = __atomic_load_n(&a->word, __ATOMIC_RELAXED);
    if (w & CPU_ARRAY_LOCKED)
        return false;     /* a drain owns it: its objects are in flight */
    /* The count may exceed cap (an array trimmed while it held more, see
     * slab_shrink), never the stride. */
    unsigned n = (unsigned)w & CPU_ARRAY_COUNT;
    if (n > CPU_ARRAY_MAX)
        n = CPU_ARRAY_MAX;
    for (unsigned i = 0; i < n; i++)
        if (__atomic_load_n(&a->objs[i], __ATOMIC_RELAXED) == obj)
            return true;
    return false;
}

/* Where is a free obj (a name for diagnostics, NULL: not free)?  Every place a free object can be, in the order a
 * flush moves it: the arrays of every CPU and the shared slot, the barn,
 * the CPUs' private freelists, its slab's freelist.  A snapshot: an object
 * moving between them concurrently can be missed (never falsely found). */
static const char *find_free(struct slab_cache *c, void *obj)
{
    if (c->slots) {
        const char *where = slub_cpu_find_free(c, obj);
        if (where)
            return where;
    }
    for (int slot = 0; slot < cpu_nr_slots(); slot++)
        if (array_has(slab_arrays(c), slot, obj))
            return "a per-CPU array";
    struct sk_page *pg = slab_head(page_of(obj));
    struct slab_barn *b = &c->node[slab_node_of(pg)].barn;
    /* SLAB's shared array is under list_lock, as the kernel kept it. */
    lock_t *bl = c->mode == SLAB_MODE_CLASSIC ? &c->node[slab_node_of(pg)].list_lock : &b->lock;
    bool found = false;
    if (__atomic_load_n(&b->count, __ATOMIC_RELAXED)) {
        lock_acquire(bl);
        for (unsigned i = 0; i < b->count && !found; i++)
            found = b->objs[i] == obj;
        lock_release(bl);
        if (found)
            return "the barn";
    }
    if (c->mode == SLAB_MODE_CLASSIC)
        return slab_classic_slab_has_free(c, obj) ? "its slab's index freelist" : NULL;
    for (int cpu = 0; cpu < cpu_nr_ids && !found; cpu++) {
        struct slab_cpu *sc = slab_cpu_of(c, cpu);
        if (__atomic_load_n(&sc->slab, __ATOMIC_RELAXED) != pg)
            continue;
        lock_acquire(&sc->lock);
        found = sc->slab == pg && (freelist_has(c, pg, sc->freelist, obj) ||     /* or its fresh range */
                                   slab_obj_index(c, pg, obj) >= (unsigned)c->objects - sc->fresh_left);
        lock_release(&sc->lock);
        if (found)
            return "a CPU freelist";
    }
    if (freelist_has(c, pg, slab_freelist(pg), obj))
        return "its slab's freelist";
    return NULL;
}

SK_NOINLINE void slab_free_suspect(struct slab_cache *c, void *obj, const char *call)
{
    bool fresh = (*slab_marker(c, obj) ^ slab_free_key) & 1;   /* either fresh key */
    const char *where = find_free(c, obj);
    if (!where)
        return;       /* the user's data matched the key: free it */
    if (fresh)
        never_handed_out(obj, call, c);
    slab_bad_free("double free", call, obj, c, NULL);
}

SK_NOINLINE void slab_free_marked(struct slab_cache *c, void *obj, const char *call)
{
    if (c->mode == SLAB_MODE_DEBUG) {
        slab_debug_free(c, obj, true, call);
        return;
    }
    slab_free_suspect(c, obj, call);
    *slab_marker(c, obj) = slab_free_key;
    if (!cpu_push_fast(slab_arrays(c), obj))
        slab_free_slow(c, obj);
}

/* ---- shrink ---- */

/* Unfreeze CPU slab pg, giving back the chain `head` of its objects that
 * its CPU held privately.  Returns 1 when the slab was empty and went back
 * to the page allocator. */
int slab_deactivate(struct slab_cache *c, struct sk_page *pg, void *head)
{
    void *tail = NULL;
    unsigned cnt = 0;
    for (void *o = head; o; o = get_fp_checked(c, pg, o)) {
        tail = o;
        cnt++;
    }
    struct slab_node *n = &c->node[slab_node_of(pg)];
    lock_acquire(&n->list_lock);
    union slab_counters old, new;
    void *prior;
    do {
        prior = slab_freelist(pg);
        old.v = slab_counters(pg);
        new = old;
        new.frozen = 0;
        new.owner = SLAB_NO_OWNER;
        new.inuse -= cnt;
        if (cnt)
            set_fp(c, tail, prior);
    } while (!slab_cmpxchg(c, pg, prior, old.v, cnt ? head : prior, new.v));
    if (old.owner != SLAB_NO_OWNER)
        slab_mirror_owner(c, pg, SLAB_NO_OWNER);
    void *fl = cnt ? head : prior;
    bool discard = false;
    if (new.inuse == 0 && n->nr_partial >= c->min_partial)
        discard = true;
    else if (fl)
        slab_add_partial(n, pg);
    lock_release(&n->list_lock);
    if (discard)
        slab_discard(c, pg);
    return discard;
}

/* Give a CPU slab and its private freelist back (slab_cpu lock held).
 * A slab with a fresh range goes back only when it is entirely free, to
 * the page allocator, its range never written; with objects in use it
 * stays this CPU's (writing the range into a freelist would only make its
 * pages resident). */
static int deactivate_cpu_slab(struct slab_cache *c, struct slab_cpu *sc)
{
    struct sk_page *pg = sc->slab;
    if (!pg)
        return 0;
    if (sc->fresh_left) {
        unsigned priv = sc->fresh_left;
        for (void *o = sc->freelist; o; o = get_fp_checked(c, pg, o))
            priv++;
        union slab_counters old, new;
        void *fl;
        do {
            fl = slab_freelist(pg);
            old.v = slab_counters(pg);
            if (old.inuse != priv)
                return 0;             /* objects in use (or a free racing in) */
            new = old;
            new.inuse = 0;
            new.frozen = 0;
            new.owner = SLAB_NO_OWNER;
        } while (!slab_cmpxchg(c, pg, fl, old.v, NULL, new.v));
        /* Nobody holds an object of it: nobody can reach it (the discard
         * clears every flag, PG_FRESH too). */
        sc->slab = NULL;
        sc->freelist = NULL;
        sc->fresh_left = 0;
        slab_discard(c, pg);
        return 1;
    }
    void *head = sc->freelist;
    sc->slab = NULL;
    sc->freelist = NULL;
    return slab_deactivate(c, pg, head);
}

/* Objects drained from arrays are freed to their slabs; slabs this frees
 * are counted by free_slab, not by the return value (other threads free
 * too): shrink reports the slabs it gave back itself. */
static int shrink_all(struct slab_cache *c);

int slab_shrink(struct slab_cache *c)
{
    /* SLAB_TYPESAFE_BY_RCU: its slabs go back only through
     * slab_shrink_rcu, after a grace period (the reaper, out of memory,
     * malloc_trim and sk_cache_shrink pass it by). */
    return c->rcu_keep ? 0 : shrink_all(c);
}

int slab_shrink_rcu(struct slab_cache *c, void (*grace)(void))
{
    int n = shrink_all(c);     /* its discards wait on rcu_pending */
    slab_rcu_release(c, grace);
    return n;
}

static int shrink_all(struct slab_cache *c)
{
    if (!slab_used(c))
        return 0;         /* never allocated from: nothing anywhere */
    if (c->mode == SLAB_MODE_CLASSIC)
        return slab_classic_shrink(c);
    void *buf[SLAB_BATCH_MAX];
    int freed = c->slots ? slub_cpu_shrink(c) : 0;
    for (int cpu = 0; cpu < cpu_nr_slots(); cpu++) {
        unsigned n;
        if (!slab_cpu_used(c, cpu))
            continue;               /* never written: nothing to drain */
        while ((n = cpu_drain_remote(slab_arrays(c), cpu, buf, SLAB_BATCH_MAX))) {
            stat(c, SK_REMOTE_DRAIN);
            book(c, batch_out, n);
            freed += flush_to_slabs(c, buf, n);
        }
        /* An array grown while busy starts small again. */
        cpu_array_trim(slab_arrays(c), cpu, c->array_cap);
    }
    for (int nid = 0; nid < SLAB_NR_NODES; nid++) {
        struct slab_barn *b = &c->node[nid].barn;
        unsigned n;
        do {
            lock_acquire(&b->lock);
            n = b->count < SLAB_BATCH_MAX ? b->count : SLAB_BATCH_MAX;
            if (n)                /* a barn of capacity 0 has no storage */
                memcpy(buf, b->objs + b->count - n, n * sizeof *buf);
            __atomic_store_n(&b->count, b->count - n, __ATOMIC_RELAXED);
            lock_release(&b->lock);
            if (n)
                freed += flush_to_slabs(c, buf, n);
        } while (n);
    }
    for (int cpu = 0; cpu < cpu_nr_ids; cpu++) {
        if (!slab_cpu_used(c, cpu))
            continue;
        struct slab_cpu *sc = slab_cpu_of(c, cpu);
        lock_acquire(&sc->lock);
        freed += deactivate_cpu_slab(c, sc);
        struct sk_page *list = cpu_partial_take(sc);
        lock_release(&sc->lock);
        freed += unfreeze_partials(c, list);
    }
    /* Empty slabs kept for min_partial go too. */
    for (int nid = 0; nid < SLAB_NR_NODES; nid++) {
        struct slab_node *n = &c->node[nid];
        struct sk_page *discard = NULL;
        lock_acquire(&n->list_lock);
        for (struct sk_page *pg = n->partial, *next; pg; pg = next) {
            next = pg->slab.next;
            union slab_counters cnt = { .v = slab_counters(pg) };
            if (cnt.inuse == 0) {
                slab_remove_partial(n, pg);
                pg->slab.next = discard;
                discard = pg;
            }
        }
        lock_release(&n->list_lock);
        freed += discard_slabs(c, discard);
    }
    return freed;
}

/* ---- statistics snapshot ---- */

/* What the per-CPU state of a used cache holds (slab_cache_info). */
static void percpu_info(struct slab_cache *c, struct sk_cache_info *info, struct slab_info_counts *k)
{
    for (int cpu = 0; cpu < cpu_nr_ids; cpu++) {
        /* A CPU that never used the cache holds nothing of it, and its
         * pages are left unread (slab_mark_used). */
        if (!slab_cpu_used(c, cpu))
            continue;
        struct slab_cpu *sc = slab_cpu_of(c, cpu);
        info->array_objs += cpu_array_count(slab_arrays(c), cpu);
        k->ops += cpu_array_ops(slab_arrays(c), cpu);
        k->batch_in += __atomic_load_n(&sc->batch_in, __ATOMIC_RELAXED);
        k->batch_out += __atomic_load_n(&sc->batch_out, __ATOMIC_RELAXED);
        k->slow_pops += __atomic_load_n(&sc->slow_pops, __ATOMIC_RELAXED);
        k->slow_pushes += __atomic_load_n(&sc->slow_pushes, __ATOMIC_RELAXED);
        lock_acquire(&sc->lock);
        if (sc->slab) {
            /* Its private freelist and fresh range, and what others freed
             * into it since. */
            union slab_counters cnt = { .v = slab_counters(sc->slab) };
            k->free_objs += (unsigned long)cnt.objects - cnt.inuse;
            for (void *o = sc->freelist; o; o = get_fp(c, o))
                k->free_objs++;
            k->free_objs += sc->fresh_left;
        }
        for (struct sk_page *pg = sc->partial; pg; pg = pg->slab.next) {
            union slab_counters cnt = { .v = slab_counters(pg) };
            k->free_objs += (unsigned long)cnt.objects - cnt.inuse;
            info->cpu_partial_slabs++;
        }
        for (int i = 0; i < SK_STAT_NR; i++)
            info->stat[i] += __atomic_load_n(&sc->stat[i], __ATOMIC_RELAXED);
        lock_release(&sc->lock);
    }
    /* The shared slot of threads without rseq (no slab_cpu of its own). */
    if (slab_cpu_used(c, cpu_nr_ids)) {
        info->array_objs += cpu_array_count(slab_arrays(c), cpu_nr_ids);
        k->ops += cpu_array_ops(slab_arrays(c), cpu_nr_ids);
    }
}

void slab_cache_info(struct slab_cache *c, struct sk_cache_info *info)
{
    slab_info_fixed(c, info);
    struct slab_info_counts k = { 0 };
    /* A cache never allocated from has its per-CPU state untouched: not
     * read (slab_mark_used), all of it zero. */
    bool used = slab_used(c);
    if (used)
        percpu_info(c, info, &k);
    for (int nid = 0; nid < SLAB_NR_NODES; nid++) {
        struct slab_node *n = &c->node[nid];
        if (c->mode == SLAB_MODE_CLASSIC)
            slab_classic_node_info(c, n, info, &k.free_objs, &k.empty_slabs);
        lock_acquire(&n->list_lock);
        for (struct sk_page *pg = n->partial; pg; pg = pg->slab.next) {
            union slab_counters cnt = { .v = slab_counters(pg) };
            k.free_objs += (unsigned long)cnt.objects - cnt.inuse;
            if (cnt.inuse == 0)
                k.empty_slabs++;
        }
        info->partial_slabs += n->nr_partial;
        info->num_slabs += __atomic_load_n(&n->nr_slabs, __ATOMIC_RELAXED);
        lock_release(&n->list_lock);
        info->barn_objs += __atomic_load_n(&n->barn.count, __ATOMIC_RELAXED);
        info->barn_capacity += n->barn.cap;   /* only node 0 has a barn */
    }
    slab_info_derive(info, &k);
    if (used && c->slots)
        slub_cpu_info(c, info);   /* sheaves=0: its own free and fast-path counts */
}
