/*
 * slub_cpu.c — caches without sheaves (SLABKIT_OPTIONS=sheaves=0): SLUB's
 * fast path as of Linux 3.1, on per-CPU freelists reached with rseq
 * (src/cpu/freelist.h).  docs/slub2011.md explains the mode.
 *
 * Every cache gets one slot per CPU id plus the shared slot (threads
 * without rseq), 64 bytes apart: the freelist (head, tid, owner) and the
 * slot's slow-path lock.  The per-CPU arrays and the barn are gone (the
 * arrays keep capacity 0: always empty, always full), so slab_alloc and
 * slab_free always miss and enter slab.c's slow paths, which call here.
 *
 *  - alloc: pop this CPU's freelist (one sequence).  Empty: under the slot
 *    lock, refill from the owner slab's remote frees, then the CPU partial
 *    list, the node partial list, a new slab (slab.c's steps); hand out the
 *    first object, install the rest as this CPU's freelist.
 *  - free: push on this CPU's freelist when the object's slab is this
 *    CPU's owner slab (one sequence); else slab_free_chain (cmpxchg16b on
 *    the slab, freezing a full slab onto a CPU partial list as slab.c does).
 *
 * Invariants:
 *  - A slot's owner is a frozen slab or NULL, set under the slot lock; the
 *    slot lock holder unfreezes it (retire when full, or shrink).
 *  - Objects on a freelist count as in use in their slab (inuse), like
 *    objects in a per-CPU array.  A freelist may hold objects of slabs
 *    other than its owner (a refill installed on the CPU the thread
 *    migrated to, a push racing with a change of owner): harmless, since
 *    they stay in use until popped or drained by shrink.
 *  - An object on a freelist is in a slab that stays mapped (not freed
 *    while any object counts in use), so a pop may read its link.
 * Lock order: slot lock -> slab_cpu->lock -> list_lock -> zone (slab.c's
 * order with the slot lock first); a freelist's spinlock is a leaf.
 */
#include <errno.h>
#include <string.h>

#include "cpu/freelist.h"
#include "slab/slub_cpu.h"

_Static_assert(sizeof(struct slub_slot) == CPU_FL_STRIDE, "a slot is one freelist stride");

size_t slub_cpu_bytes(void)
{
    return (size_t)cpu_nr_slots() * sizeof(struct slub_slot);
}

static inline struct slub_slot *slot_at(struct slab_cache *c, int slot)
{
    return &c->slots[slot];
}

/* The slot this thread refills: its CPU's, or (no rseq of its own, or a
 * fallback process) its fallback slot, which the locked bodies use too. */
static int this_slot(void)
{
    return cpu_use_rseq ? cpu_current() : cpu_slot();
}

/* A chain of free objects from the slabs, and the slab it came from, which
 * becomes the slot's owner (slot lock held). */
static void *refill_chain(struct slab_cache *c, int slot, struct sk_page **out)
{
    struct slab_cpu *sc = slab_cpu_mark(c, slab_cpu_id());
    struct sk_page *pg = cpu_fl_owner(c->slots, slot);
    void *fl = NULL;
    if (pg) {
        bool retired;
        fl = slab_take_freelist(c, pg, &retired);   /* its remote frees */
        if (fl) {
            stat(c, SK_ALLOC_CPU_SLAB);
            *out = pg;
            return fl;
        }
        cpu_fl_set_owner(c->slots, slot, NULL);     /* full: unfrozen, on no list */
    }
    lock_acquire(&sc->lock);
    for (;;) {
        if (sc->partial) {
            pg = cpu_partial_pop(sc);
            bool retired;
            fl = slab_take_freelist(c, pg, &retired);
            if (fl)
                break;
            continue;
        }
        pg = slab_get_node_partial(c, sc, &fl);
        if (!pg)
            pg = slab_new_slab(c, &fl, false, NULL);
        break;
    }
    lock_release(&sc->lock);
    if (pg)
        cpu_fl_set_owner(c->slots, slot, pg);
    *out = pg;
    return fl;
}

static SK_NOINLINE void *alloc_slow(struct slab_cache *c)
{
    stat(c, SK_ALLOC_SLOWPATH);
    int slot = this_slot();
    struct slub_slot *s = slot_at(c, slot);
    void *obj;
    lock_acquire(&s->lock);
    /* Frees may have refilled it; a fallback thread pops here. */
    if (cpu_fl_pop(c->slots, c->offset, c->random, &obj))
        goto out;
    struct sk_page *pg;
    obj = refill_chain(c, slot, &pg);
    if (!obj) {
        lock_release(&s->lock);
        errno = ENOMEM;
        return NULL;
    }
    void *rest = get_fp_checked(c, pg, obj);
    if (rest && !cpu_fl_install(c->slots, c->offset, c->random, rest, NULL)) {
        /* Not empty (frees since, or the CPU we migrated to has a list):
         * splice the chain in front. */
        void *tail = rest;
        unsigned cnt = 1;
        for (void *o; (o = get_fp_checked(c, pg, tail)); cnt++)
            tail = o;
        if (!cpu_fl_install(c->slots, c->offset, c->random, rest, tail))
            slab_free_chain(c, pg, rest, tail, cnt);   /* a drain owns it */
    }
out:
    lock_release(&s->lock);
    slab_mark_live(c, obj);
    return obj;
}

void *slub_cpu_alloc(struct slab_cache *c)
{
    void *obj;
    if (likely(cpu_fl_pop(c->slots, c->offset, c->random, &obj))) {
        slab_mark_live(c, obj);
        return obj;
    }
    return alloc_slow(c);
}

void slub_cpu_free(struct slab_cache *c, void *obj)
{
    struct sk_page *pg = slab_head(page_of(obj));
    if (likely(cpu_fl_push(c->slots, c->offset, c->random, obj, pg)))
        return;
    stat(c, SK_FREE_SLOWPATH);
    slab_free_chain(c, pg, obj, obj, 1);
}

/* The next link of a drained or walked list, which may mix slabs: NULL
 * when obj's link is not an object of c (a racing walk) or when strict
 * and corrupted. */
static void *next_of(struct slab_cache *c, void *obj, bool strict)
{
    void *next = get_fp(c, obj);
    struct slab_cache *owner = NULL;
    if (next && (!slab_of_object(next, &owner) || owner != c)) {
        if (strict)
            os_fatal("freelist corrupted in %s: object %p links to %p (use after free?)", c->name, obj, next);
        return NULL;
    }
    return next;
}

/* Return a drained list to its slabs, one slab_free_chain per run. */
static int flush_list(struct slab_cache *c, void *o)
{
    int freed = 0;
    while (o) {
        struct sk_page *pg = slab_head(page_of(o));
        void *head = o, *tail = o, *next;
        unsigned cnt = 1;
        while ((next = next_of(c, tail, true)) && slab_head(page_of(next)) == pg) {
            tail = next;
            cnt++;
        }
        freed += slab_free_chain(c, pg, head, tail, cnt);
        o = next;
    }
    return freed;
}

int slub_cpu_shrink(struct slab_cache *c)
{
    int freed = 0;
    for (int slot = 0; slot < cpu_nr_slots(); slot++) {
        struct slub_slot *s = slot_at(c, slot);
        lock_acquire(&s->lock);
        struct sk_page *pg = cpu_fl_owner(c->slots, slot);
        /* No owner first: a push that still saw it commits before the
         * drain's fence, and the drain takes it. */
        cpu_fl_set_owner(c->slots, slot, NULL);
        void *list = cpu_fl_drain(c->slots, slot);
        if (list)
            stat(c, SK_REMOTE_DRAIN);
        freed += flush_list(c, list);
        if (pg)
            freed += slab_deactivate(c, pg, NULL);
        lock_release(&s->lock);
    }
    return freed;
}

/* Is obj on a list of slot `slot`?  Bounded walk, each link checked to be
 * an object of c: a racing pop can hand the next object to a user who
 * overwrites its link. */
static bool list_has(struct slab_cache *c, int slot, const void *obj, unsigned long *count)
{
    void *o = __atomic_load_n(&cpu_fl_at(c->slots, slot)->head, __ATOMIC_ACQUIRE);
    unsigned long n = 0;
    for (unsigned long max = 4ul * c->objects + 64; o && n < max; n++) {
        if (o == obj)
            return true;
        o = next_of(c, o, false);
    }
    if (count)
        *count += n;
    return false;
}

const char *slub_cpu_find_free(struct slab_cache *c, const void *obj)
{
    for (int slot = 0; slot < cpu_nr_slots(); slot++)
        if (list_has(c, slot, obj, NULL))
            return "a CPU freelist";
    return NULL;
}

void slub_cpu_info(struct slab_cache *c, struct sk_cache_info *info)
{
    unsigned long free_objs = 0;
    uint64_t pops = 0, pushes = 0;
    for (int slot = 0; slot < cpu_nr_slots(); slot++) {
        list_has(c, slot, NULL, &free_objs);
        struct sk_page *pg = cpu_fl_owner(c->slots, slot);
        if (pg) {
            union slab_counters cnt = { .v = slab_counters(pg) };
            free_objs += (unsigned long)cnt.objects - cnt.inuse;   /* remote frees */
        }
        pops += cpu_fl_pops(c->slots, slot);
        pushes += cpu_fl_pushes(c->slots, slot);
    }
    info->active_objs = info->active_objs > free_objs ? info->active_objs - free_objs : 0;
    info->stat[SK_ALLOC_FASTPATH] = pops;
    info->stat[SK_FREE_FASTPATH] = pushes;
}

void slub_cpu_atfork_child(struct slab_cache *c)
{
    for (int slot = 0; slot < cpu_nr_slots(); slot++) {
        struct slub_slot *s = slot_at(c, slot);
        if (__atomic_load_n(&s->lock.state, __ATOMIC_RELAXED)) {
            /* Caught mid-refill or mid-shrink: leak this slot's slab. */
            s->fl.head = NULL;
            s->fl.owner = NULL;
        }
        lock_reset(&s->lock);
        s->fl.lock.v = 0;
        s->fl.tid_pops &= ~CPU_FL_LOCKED;
    }
}
