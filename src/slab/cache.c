/*
 * cache.c — creating and destroying slab caches, sizing them (order,
 * array capacity, partial limits), and the sk_cache_* API.
 *
 * Lock order: cache_lock (the list of caches) -> the locks of slab.c
 * and slab_classic.c.  The idle-cache reaper (slab_reap) takes cache_lock
 * only with a try-lock, and not at all inside a constructor.
 * Invariants: a cache is fully initialised before it joins the list; the
 * list only grows except by sk_cache_destroy of an empty cache.  A cache's
 * metadata (the struct with its inline per-CPU arrays, the slab_cpu array)
 * is carved from chunks mapped straight from the OS (meta_zalloc, under
 * meta_lock, a leaf), so a cache can be created before and inside malloc.
 * Nothing here is fatal when the OS refuses memory: a cache that cannot
 * get its metadata is not created (NULL, ENOMEM), and slab_init can be
 * called again after a failure, keeping what was built.
 */
#include <errno.h>
#include <string.h>

#include "slab/inspect.h"
#include "slab/kmalloc.h"
#include "slab/slub_cpu.h"

_Static_assert(SK_DEBUG_F == SK_CACHE_CONSISTENCY_CHECKS && SK_DEBUG_Z == SK_CACHE_RED_ZONE &&
               SK_DEBUG_P == SK_CACHE_POISON && SK_DEBUG_U == SK_CACHE_STORE_USER && SK_DEBUG_T == SK_CACHE_TRACE,
               "debug= letters are the sk_cache_create flags");

static lock_t cache_lock = LOCK_INIT;
struct slab_cache *slab_cache_list SK_INTERNAL;   /* all caches, creation order (sk_inspect_root reads it) */
static struct slab_cache *cache_tail;
static bool slab_is_ready;

bool slab_ready(void)
{
    return __atomic_load_n(&slab_is_ready, __ATOMIC_ACQUIRE);
}

struct slab_cache *slab_caches(void)
{
    return __atomic_load_n(&slab_cache_list, __ATOMIC_ACQUIRE);
}

void slab_for_each_cache(void (*fn)(struct slab_cache *, void *), void *arg)
{
    lock_acquire(&cache_lock);
    for (struct slab_cache *c = slab_cache_list; c; c = c->next)
        fn(c, arg);
    lock_release(&cache_lock);
}

static unsigned fls_u(unsigned x)
{
    return x ? 32 - (unsigned)__builtin_clz(x) : 0;
}

/* The smallest order whose slab fits min_objects with leftover at most
 * slab/fract (the kernel's calc_slab_order). */
static unsigned calc_slab_order(size_t size, size_t reserved, unsigned min_objects,
                                unsigned max_order, unsigned fract)
{
    unsigned order = 0;
    while (((SK_PAGE_SIZE << order) - reserved) < size * min_objects && order <= max_order)
        order++;
    for (; order <= max_order; order++) {
        size_t slab = SK_PAGE_SIZE << order;
        if (slab <= reserved || slab - reserved < size)
            continue;
        size_t rem = (slab - reserved) % size + reserved;
        if (rem <= slab / fract)
            break;
    }
    return order;
}

/* The kernel's calculate_order: enough objects per slab for a few CPUs'
 * worth of batches, waste at most 1/16, then 1/8, 1/4 of the slab, fewer
 * objects before a larger order. */
static unsigned calculate_order(size_t size, size_t reserved)
{
    unsigned min_objects = 4 * (fls_u((unsigned)cpu_nr_ids) + 1);
    size_t max_objects = ((SK_PAGE_SIZE << 3) - reserved) / size;
    if (min_objects > max_objects)
        min_objects = (unsigned)max_objects;
    while (min_objects > 1) {
        for (unsigned fract = 16; fract >= 4; fract /= 2) {
            unsigned o = calc_slab_order(size, reserved, min_objects, 3, fract);
            if (o <= 3)
                return o;
        }
        min_objects--;
    }
    unsigned o = calc_slab_order(size, reserved, 1, 3, 1);
    if (o <= 3)
        return o;
    return calc_slab_order(size, reserved, 1, SLAB_MAX_ORDER, 1);
}

/* Per-CPU partial objects by object size, as SLUB sets them. */
static unsigned default_cpu_partial(size_t size)
{
    if (size >= SK_PAGE_SIZE)
        return 2;
    if (size >= 1024)
        return 6;
    if (size >= 256)
        return 13;
    return 30;
}

/* Per-CPU array capacity: 16 KiB of objects per CPU per cache, but at
 * least 8 objects up to 64 KiB (a batch of 4 per refill: with 2 objects a
 * batch, 4-8 KiB objects took a slow path every other call; bench
 * sizeclass) and never under 2; measured in bench/ (docs/design.md,
 * "array sizes"). */
static unsigned default_array_cap(size_t size)
{
    size_t cap = 16384 / size;
    if (cap > CPU_ARRAY_MAX)
        cap = CPU_ARRAY_MAX;
    if (cap < 8) {
        cap = 65536 / size;
        if (cap > 8)
            cap = 8;
        if (cap < 2)
            cap = 2;
    }
    return (unsigned)cap;
}

/* How far a CPU's array may grow while the program keeps emptying and
 * filling it (slab_free_slow): 64 KiB of objects, but 8 objects of the
 * big classes (16 KiB: 128 KiB; their slabs hold 2 objects, so every
 * object that misses the array is a slab made and given back; an
 * sk_cache of 32 KiB objects, one a slab: 256 KiB), CPU_ARRAY_MAX at
 * most, never below the capacity it starts
 * with.  tcmalloc's per-CPU caches grow the same way from a small start,
 * capped in bytes; the reaper trims an idle cache's arrays back
 * (slab_shrink). */
#define SLAB_ARRAY_GROW_BYTES ((size_t)64 << 10)
#define SLAB_ARRAY_GROW_MIN 8

static unsigned array_max(size_t size, unsigned cap)
{
    size_t most = SLAB_ARRAY_GROW_BYTES / size;
    if (most < SLAB_ARRAY_GROW_MIN)
        most = SLAB_ARRAY_GROW_MIN;
    if (most > CPU_ARRAY_MAX)
        most = CPU_ARRAY_MAX;
    return most > cap ? (unsigned)most : cap;
}

/*
 * Cache metadata is carved from chunks fresh from the OS, cache-line
 * aligned, in areas of their own: the cache structs, written when a cache
 * is made, packed together (41 kmalloc caches fill five pages); the barns
 * (4 KiB each), which fill only when objects move between CPUs; and
 * sheaves=0's per-CPU slots.  Interleaved, every cache struct sat on a
 * page of its own: some 200 KiB before the first object.  What a cache
 * touches only as CPUs use it, its slab_cpu and its per-CPU arrays, comes
 * from CPU-major pools (src/cpu, cpu_pool_alloc): a CPU's part of each
 * lies on that CPU's row, so a program on one CPU touches a page for
 * every twelve caches' slab_cpu and every four caches' arrays it uses,
 * and none for the classes it never uses.  Never freed (a destroyed
 * cache's metadata stays: a racing reader may hold it).
 */
#define META_CHUNK ((size_t)256 << 10)
static spinlock_t meta_lock = SPINLOCK_INIT;
struct meta_area {
    char *next, *end;
};
static struct meta_area meta_structs, meta_percpu, meta_barns;
static struct cpu_pool slab_cpu_pool;   /* the caches' slab_cpu (slab_cpu_of) */

/* Zeroed metadata from area a, or NULL (ENOMEM) when the OS refuses a
 * chunk. */
static void *meta_zalloc(struct meta_area *a, size_t bytes)
{
    bytes = SK_ALIGN_UP(bytes, (size_t)CACHE_LINE);
    if (bytes >= META_CHUNK / 4)
        return os_map(SK_ALIGN_UP(bytes, SK_PAGE_SIZE), SK_PAGE_SIZE);
    spin_lock(&meta_lock);
    if ((size_t)(a->end - a->next) < bytes) {
        /* Under an address-space limit, chunks of 1/256 of it, so that
         * the caches' structs and barns take their share of what
         * `ulimit -v` allows, not a fixed 256 KiB each; and a whole chunk
         * may be refused where what is asked for would fit: try that. */
        size_t size = META_CHUNK, limit = os_limit_bytes();
        if (limit / 256 < size)
            size = SK_ALIGN_UP(limit / 256 > bytes ? limit / 256 : bytes, SK_PAGE_SIZE);
        char *chunk = os_map(size, SK_PAGE_SIZE);
        if (!chunk) {
            size = SK_ALIGN_UP(bytes, SK_PAGE_SIZE);
            chunk = os_map(size, SK_PAGE_SIZE);
        }
        if (!chunk) {
            spin_unlock(&meta_lock);
            errno = ENOMEM;
            return NULL;
        }
        a->next = chunk;
        a->end = chunk + size;
    }
    void *p = a->next;
    a->next += bytes;
    spin_unlock(&meta_lock);
    return p;
}

static void cache_setup(struct slab_cache *c, const char *name, size_t size, size_t align,
                        unsigned flags, void (*ctor)(void *), bool kmalloc)
{
    os_name(c->name, sizeof c->name, name, -1);
    c->object_size = (uint32_t)size;
    bool typesafe = flags & SLAB_CACHE_TYPESAFE_RCU;
    flags &= ~SLAB_CACHE_TYPESAFE_RCU;
    c->flags = flags;
    c->ctor = ctor;
    c->kmalloc = kmalloc;
    if (flags & SK_CACHE_HWALIGN && align < CACHE_LINE)
        align = CACHE_LINE;
    if (align < SLAB_MIN_ALIGN)
        align = SLAB_MIN_ALIGN;
    c->align = (uint32_t)align;
    /* Watched by memcheck / ASan (poison.h): the sk_cache caches of the
     * default mode, when a tool is there. */
    /* Not a SLAB_TYPESAFE_BY_RCU cache: its readers may look at a freed
     * object, which memcheck or ASan would call a use after free. */
    c->poison = slab_poison_on && !kmalloc && !typesafe && !c->slots && sk_opt.allocator != SK_ALLOC_SLAB &&
                !(flags & SK_DEBUG_ALL);     /* slub_debug checks those itself */
    size_t stride = SK_ALIGN_UP(size < sizeof(void *) ? sizeof(void *) : size, align);
    /* Objects are freed in their constructed state: with a constructor,
     * the free pointer and the free marker (slab_fast.h) live after the object,
     * never inside it.  Without one, the marker is word 1 of the object
     * (word 0 holds the free pointer on a slab freelist); an object of one
     * word has no room for it.  A watched cache lays its objects out the
     * same way as one with a constructor: its words stay out of the bytes
     * poisoned while the object is free. */
    c->offset = 0;
    c->kofs = stride >= 2 * sizeof(void *) ? sizeof(void *) : 0;
    if (ctor || c->poison) {
        c->offset = (uint32_t)SK_ALIGN_UP(size, sizeof(void *));
        c->kofs = c->offset + (uint32_t)sizeof(void *);
        stride = SK_ALIGN_UP(c->kofs + sizeof(void *), align);
    }
    /* slub_debug: red zones, tracks and the requested size around each
     * object, the first left red zone at the slab's head (slab_debug.c). */
    if (flags & SK_DEBUG_ALL)
        stride = slab_debug_layout(c, size, align);
    c->size = (uint32_t)stride;
    c->reserved = c->dbg.red_left;    /* SLUB: nothing but objects in a slab */
    c->order = (uint16_t)calculate_order(stride, c->reserved);
    c->objects = (uint16_t)(((SK_PAGE_SIZE << c->order) - c->reserved) / stride);
    c->shift = (uint8_t)__builtin_ctz((unsigned)stride);
    uint32_t d = (uint32_t)stride >> c->shift, inv = d;
    for (int i = 0; i < 5; i++)           /* Newton: doubles correct bits */
        inv *= 2 - d * inv;
    c->inv = inv;
    c->random = (uintptr_t)os_random64();
    c->array_cap = sk_opt.array_size ? (unsigned)sk_opt.array_size : default_array_cap(stride);
    c->batch = c->array_cap / 2 ? c->array_cap / 2 : 1;
    if (c->slots || c->mode == SLAB_MODE_DEBUG)
        c->array_cap = c->batch = 0;   /* sheaves=0, slub_debug: the arrays stay empty */
    if (c->poison) {
        c->array_cap = 0;              /* every alloc and free to the hooks */
        c->batch = 1;
    }
    if (c->batch > SLAB_BATCH_MAX)
        c->batch = SLAB_BATCH_MAX;
    /* An array_size option fixes the capacity; no array, nothing to grow. */
    c->array_max = sk_opt.array_size || !c->array_cap ? c->array_cap : array_max(stride, c->array_cap);
    if (sk_opt.cpu_partial < 0)
        c->cpu_partial = default_cpu_partial(stride);
    else
        c->cpu_partial = (uint32_t)sk_opt.cpu_partial;
    /* The kernel's conversion (5.16+): about half of the slabs are full
     * enough.  sheaves=0 is 3.1's SLUB, which counted objects instead. */
    c->cpu_partial_slabs = c->cpu_partial ? (c->cpu_partial * 2 + c->objects - 1) / c->objects : 0;
    if (c->cpu_partial && c->cpu_partial_slabs < 1)
        c->cpu_partial_slabs = 1;
    /* Idle memory a cache keeps, bounded in bytes rather than slabs: the
     * page allocator's per-CPU lists make a new slab cheap.  Empty slabs on
     * the node list: 4 of one page down to 1 of 8 pages; CPU partial slabs:
     * at most 32 KiB of slabs per CPU. */
    unsigned mp = c->order < 3 ? 4 - c->order : 1;
    c->min_partial = mp;
    if (typesafe) {
        /* SLAB_TYPESAFE_BY_RCU: empty slabs stay with the cache (no bound
         * on the node list), and those a shrink takes wait on rcu_pending
         * for a grace period (slab_discard, slab_rcu_release). */
        c->min_partial = UINT32_MAX;
        c->rcu_keep = true;
    }
    if (c->cpu_partial_slabs > (8u >> c->order))
        c->cpu_partial_slabs = 8u >> c->order;
    if (c->slots)
        c->cpu_partial_slabs = 0;
    /* The barn: whole batches, at most SLAB_BARN_BYTES of objects (the
     * memory it may keep from the slabs), none where not one batch fits. */
    unsigned barn = 0;
    if (sk_opt.barn && c->batch) {
        unsigned most = SLAB_BARN_MAX / c->batch * c->batch;
        barn = SLAB_BARN_BYTES / c->size / c->batch * c->batch;
        if (barn > most)
            barn = most;
    }
    for (int n = 0; n < SLAB_NR_NODES; n++) {
        lock_reset(&c->node[n].list_lock);
        c->node[n].gen = 1;
        lock_reset(&c->node[n].barn.lock);
        c->node[n].barn.cap = n == 0 ? barn : 0;
        c->node[n].barn.wanted_by = -1;
    }
    /* allocator=slab: SLAB sizes the cache its own way (and runs its slow
     * paths, slab_classic.c). */
    if (sk_opt.allocator == SK_ALLOC_SLAB && c->mode != SLAB_MODE_DEBUG)
        slab_classic_setup(c);
    /* A slab has a home: the CPU that last froze it, kept when it leaves
     * that CPU full or drained.  A free on another CPU goes home (to the
     * slab) rather than into this CPU's array, so that no CPU hands out
     * objects interleaved with the other CPU's live ones: for objects
     * smaller than a line, passive false sharing; for any size, lanes of
     * work that move between CPUs (larson's rounds) would otherwise leave
     * each CPU's objects scattered among the other's for good, and their
     * lines and their neighbours' going back and forth.  A CPU that only
     * frees keeps them on its array, for the barn (slab_free_keeps).
     * Only where frees take SLUB's array path at all: caches whose every
     * free must reach the slow path (sheaves=0, slub_debug, memcheck or
     * ASan watching) have arrays of capacity 0. */
    bool remote = sk_opt.remote_free && c->mode == SLAB_MODE_SLUB && c->array_cap && cpu_use_rseq;
    c->remote_free = remote ? 0xff : 0;
    /* The page map: its slabs enter it where free could read them from
     * it, SLUB's layout with objects from the slab's first byte. */
    c->pmap = c->reserved == 0 && ((size_t)1 << c->order) <= SLAB_PMAP_PAGES &&
              sk_opt.allocator != SK_ALLOC_SLAB && ((uintptr_t)c >> 48) == 0;
    cpu_arrays_init(c->arrays, 0);    /* each CPU's cap is set on first use */
}

/* Destroyed caches, kept for the next create (under cache_lock): their
 * metadata is never unmapped, so a program that creates and destroys
 * caches in a loop reuses the same few. */
static struct slab_cache *cache_free_list;

/* Put c on the list of caches: false, with c on the free list instead,
 * when a cache of that name is there already (names are how slabinfo,
 * debug_caches and sk_cache_info find a cache). */
static bool cache_publish(struct slab_cache *c)
{
    lock_acquire(&cache_lock);
    for (struct slab_cache *o = slab_cache_list; o; o = o->next)
        if (!strcmp(o->name, c->name)) {
            c->next = cache_free_list;
            cache_free_list = c;
            lock_release(&cache_lock);
            return false;
        }
    c->next = NULL;
    if (cache_tail)
        cache_tail->next = c;
    else
        __atomic_store_n(&slab_cache_list, c, __ATOMIC_RELEASE);
    cache_tail = c;
    lock_release(&cache_lock);
    return true;
}

struct slab_cache *slab_cache_find(const char *name)
{
    struct slab_cache *found = NULL;
    lock_acquire(&cache_lock);
    for (struct slab_cache *o = slab_cache_list; o && !found; o = o->next)
        if (!strcmp(o->name, name))
            found = o;
    lock_release(&cache_lock);
    return found;
}

struct slab_cache *slab_cache_create(const char *name, size_t size, size_t align,
                                     unsigned flags, void (*ctor)(void *), bool kmalloc)
{
    lock_acquire(&cache_lock);
    struct slab_cache *c = cache_free_list;
    if (c)
        cache_free_list = c->next;
    lock_release(&cache_lock);
    struct slab_cpu *cpu;
    unsigned char *arrays;
    struct slub_slot *slots;
    void **barn[SLAB_NR_NODES];
    if (c) {
        cpu = c->cpu;
        slots = c->slots;
        if (slots)
            memset(slots, 0, slub_cpu_bytes());
        for (int n = 0; n < SLAB_NR_NODES; n++)
            barn[n] = c->node[n].barn.objs;
        arrays = c->arrays;
        cpu_pool_clear(cpu, sizeof(struct slab_cpu), cpu_nr_ids);
        memset(c, 0, sizeof *c);
        cpu_arrays_clear((cpu_arrays_t)arrays);
    } else {
        /* Metadata carved before a refusal stays carved (a few KiB, and
         * the carving has no free).  The arrays and the slab_cpu come
         * from CPU-major pools (src/cpu): one CPU's arrays of four caches
         * share a page, its slab_cpu of twelve. */
        c = meta_zalloc(&meta_structs, sizeof *c);
        cpu = c ? cpu_pool_alloc(&slab_cpu_pool, sizeof(struct slab_cpu), cpu_nr_ids) : NULL;
        arrays = cpu ? (unsigned char *)cpu_arrays_alloc() : NULL;
        if (!arrays)
            return NULL;
        /* sheaves=0 (SLUB only: SLAB's array caches are its design): the
         * per-CPU freelist slots of slub_cpu.c. */
        slots = NULL;
        if (!sk_opt.sheaves && sk_opt.allocator != SK_ALLOC_SLAB &&
            !(slots = meta_zalloc(&meta_percpu, slub_cpu_bytes())))
            return NULL;
        /* Touched only as far as a barn fills: untouched pages cost no
         * RSS.  Only node 0's barn is used (one node here): the others get
         * no storage and capacity 0 (4 KiB each of address space per
         * cache, which counts under RLIMIT_AS). */
        memset(barn, 0, sizeof barn);
        if (!(barn[0] = meta_zalloc(&meta_barns, SLAB_BARN_MAX * sizeof(void *))))
            return NULL;
    }
    c->cpu = cpu;
    c->arrays = arrays;
    c->slots = slots;
    for (int n = 0; n < SLAB_NR_NODES; n++)
        c->node[n].barn.objs = barn[n];
    flags |= slab_debug_flags_for(name);
    if (flags & SLAB_CACHE_TYPESAFE_RCU)
        flags &= ~(unsigned)SK_DEBUG_P;    /* readers may read a freed object */
    cache_setup(c, name, size, align, flags, ctor, kmalloc);
    if (!cache_publish(c)) {
        errno = EEXIST;
        return NULL;
    }
    return c;
}

static spinlock_t init_lock = SPINLOCK_INIT;
static bool reap_pass(void);

/* The memory budget's shrinker (page_register_shrinker): every cache
 * gives back its empty slabs and what its arrays hold; the pages reach
 * the zones as free dirty memory, which the caller then purges. */
static unsigned long slab_shrinker(unsigned long nr)
{
    (void)nr;
    slab_shrink_all();
    return 0;
}

int slab_init(void)
{
    if (likely(slab_ready()))
        return 0;
    int r = 0;
    spin_lock(&init_lock);
    /* Name the inspection root, so a static link keeps inspect.o: nothing
     * in the process reads it, tools read it from outside. */
    __asm__ volatile("" : : "r"(&sk_inspect_root));
    if (!slab_is_ready) {
        if (!slab_free_key)
            slab_free_key = (uintptr_t)os_random64() & ~(uintptr_t)3;
        slab_poison_init();
        r = page_init() == 0 && kmalloc_init() == 0 ? 0 : -1;
        if (r == 0) {
            page_set_idle_pass(reap_pass);   /* the purger's tick reaps too */
            page_register_shrinker(slab_shrinker);   /* and shrinks every cache below low */
            __atomic_store_n(&slab_is_ready, true, __ATOMIC_RELEASE);
        } else {
            errno = ENOMEM;
        }
    }
    spin_unlock(&init_lock);
    return r;
}

static void shrink_one(struct slab_cache *c, void *arg)
{
    (void)arg;
    slab_shrink(c);
}

/* ---- the idle-cache reaper ---- */

unsigned long slab_reap_seen;
unsigned long slab_reaped;        /* caches shrunk by the reaper (relaxed) */
static uint64_t reap_at;          /* ms of the last pass (reap_busy held) */
static int reap_busy;             /* one reaper at a time: the others go on */
__thread int slab_in_ctor __attribute__((tls_model("initial-exec")));

struct reap_count {
    unsigned long shrunk;         /* caches shrunk this pass */
    unsigned long pending;        /* used caches not shrunk: may go idle */
};

static void reap_one(struct slab_cache *c, struct reap_count *k)
{
    /* Only the arrays' mode: their operation count moves with every alloc
     * and free (sheaves=0, slub_debug, poisoned and SLAB caches keep no
     * count and are left alone). */
    if (c->mode != SLAB_MODE_SLUB || c->slots || !c->array_cap || !slab_used(c))
        return;
    uint64_t ops = 0;
    for (int cpu = 0; cpu < cpu_nr_slots(); cpu++)
        if (slab_cpu_used(c, cpu))
            ops += cpu_array_ops(slab_arrays(c), cpu);
    if (ops != c->reap_ops) {
        c->reap_ops = ops;        /* in use since the last pass */
        c->reaped = false;
        k->pending++;
        return;
    }
    if (c->reaped || !ops)
        return;                   /* idle and already shrunk, or nothing
                                   * ever went through its arrays */
    c->reaped = true;
    slab_shrink(c);
    k->shrunk++;
}

/* One pass, from kmalloc's slow path (slab_reap) or the purger's tick
 * (page_set_idle_pass: a program that stops allocating gets back what its
 * caches keep, as SLAB's cache_reap did every 2 s).  True while some used
 * cache has not been shrunk since it last moved, or the pass could not
 * run: the purger keeps ticking.  Never waits for cache_lock: its holder
 * may be this very thread (a malloc in an sk_cache_foreach callback, or
 * in sk_slabinfo's stdio), and a constructor that calls malloc runs under
 * its cache's slab_cpu lock, which slab_shrink would take again: both
 * skip the pass. */
static bool reap_pass(void)
{
    if (!slab_ready() || slab_in_ctor || __atomic_exchange_n(&reap_busy, 1, __ATOMIC_ACQUIRE))
        return true;              /* not now: maybe at the next tick */
    struct reap_count k = { 0, 1 };
    uint64_t now = os_now_ms_coarse();
    if (now - reap_at >= SLAB_REAP_MS && lock_try(&cache_lock)) {
        reap_at = now;
        k.pending = 0;
        for (struct slab_cache *c = slab_cache_list; c; c = c->next)
            reap_one(c, &k);
        lock_release(&cache_lock);
        __atomic_fetch_add(&slab_reaped, k.shrunk, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&reap_busy, 0, __ATOMIC_RELEASE);
    return k.pending != 0;
}

void slab_reap(unsigned long takes)
{
    __atomic_store_n(&slab_reap_seen, takes, __ATOMIC_RELAXED);
    reap_pass();
}

void slab_shrink_all(void)
{
    if (slab_ready())
        slab_for_each_cache(shrink_one, NULL);
}

size_t slab_release_all(void)
{
    slab_shrink_all();
    return page_release_free(true);
}

/* ---- bad input ---- */

void slab_bad_free(const char *what, const char *call, const void *p, const struct slab_cache *c,
                   const void *object)
{
    if (object)
        os_fatal("%s: %s(%p) in %s, object at %p", what, call, p, c ? c->name : "?", object);
    if (c)
        os_fatal("%s: %s(%p) in %s", what, call, p, c->name);
    os_fatal("%s: %s(%p)", what, call, p);
}

/* ---- the sk_cache API ---- */

sk_cache_t *sk_cache_create(const char *name, size_t size, size_t align, unsigned flags, void (*ctor)(void *))
{
    int saved = errno;
    if (slab_init() != 0)
        return NULL;
    if (!name || size == 0 || size > (SK_PAGE_SIZE << SLAB_MAX_ORDER) / 2 ||
        (align & (align - 1)) || align > SK_PAGE_SIZE) {
        errno = EINVAL;
        return NULL;
    }
    size_t len = strlen(name);
    if (len == 0 || len >= SLAB_NAME_LEN) {
        os_warn("sk_cache_create: a cache name of %zu bytes ('%.*s%s'): names are 1 to %d bytes", len,
                SLAB_NAME_LEN, name, len > SLAB_NAME_LEN ? "..." : "", SLAB_NAME_LEN - 1);
        errno = EINVAL;
        return NULL;
    }
    sk_cache_t *c = (sk_cache_t *)slab_cache_create(name, size, align, flags, ctor, false);
    if (!c && errno == EEXIST)
        os_warn("sk_cache_create: a cache named '%s' exists already (EEXIST)", name);
    return os_errno_restore(c, saved);
}

void *sk_cache_alloc(sk_cache_t *cache)
{
    void *obj = slab_alloc((struct slab_cache *)cache);
    if (unlikely(!obj)) {
        slab_release_all();
        obj = slab_alloc((struct slab_cache *)cache);
    }
    return obj;
}

SK_NOINLINE void slab_free_foreign(struct slab_cache *c, struct sk_page *pg, struct slab_cache *owner, void *obj,
                                   const char *call)
{
    if (c->mode == SLAB_MODE_DEBUG) {
        slab_debug_free(c, obj, false, call);   /* reports it */
        return;
    }
    if (pg)
        os_fatal("wrong cache: %s(%s, %p) of an object of %s", call, c->name, obj, owner->name);
    slab_check_fresh(obj, call);
    os_fatal("invalid pointer: %s(%s, %p) is not an object of this cache", call, c->name, obj);
}

void sk_cache_free(sk_cache_t *cache, void *obj)
{
    slab_cache_free_call((struct slab_cache *)cache, obj, "sk_cache_free");
    /* No tail call into slab_free_slow: memcheck's "free'd at" stack then
     * names sk_cache_free (the fast path is the same instructions). */
    __asm__ volatile("");
}

int sk_cache_shrink(sk_cache_t *cache)
{
    return slab_shrink((struct slab_cache *)cache);
}

int sk_cache_destroy(sk_cache_t *cache)
{
    struct slab_cache *c = (struct slab_cache *)cache;
    if (!c)
        return 0;
    slab_shrink(c);
    struct sk_cache_info info;
    slab_cache_info(c, &info);
    if (c->rcu_keep && (info.num_slabs || __atomic_load_n(&c->rcu_pending, __ATOMIC_RELAXED))) {
        /* Its slabs wait for a grace period that only the kernel API's
         * destroy waits for: recycling it now would leave them behind. */
        os_warn("sk_cache_destroy(%s): a SLAB_TYPESAFE_BY_RCU cache goes with kmem_cache_destroy; cache kept",
                c->name);
        errno = EBUSY;
        return -1;
    }
    if (info.active_objs) {
        os_warn("sk_cache_destroy(%s): %lu objects still allocated; cache kept", c->name, info.active_objs);
        errno = EBUSY;
        return -1;
    }
    lock_acquire(&cache_lock);
    struct slab_cache **pp = &slab_cache_list, *prev = NULL;
    while (*pp && *pp != c) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp)
        *pp = c->next;
    if (cache_tail == c)
        cache_tail = prev;
    /* Its slabs are all gone (shrink freed every empty one, and none holds
     * an object): the metadata waits for the next create. */
    c->next = cache_free_list;
    cache_free_list = c;
    lock_release(&cache_lock);
    return 0;
}

const char *sk_cache_name(const sk_cache_t *cache)
{
    return ((const struct slab_cache *)cache)->name;
}

size_t sk_cache_object_size(const sk_cache_t *cache)
{
    return ((const struct slab_cache *)cache)->object_size;
}

void slab_atfork_child(void)
{
    /* A thread caught carving metadata: abandon its chunk (the next
     * create maps a new one). */
    if (spin_is_locked(&meta_lock)) {
        meta_structs.next = meta_structs.end = meta_percpu.next = meta_percpu.end = NULL;
        meta_barns.next = meta_barns.end = NULL;
        spin_unlock(&meta_lock);
    }
    cpu_pool_atfork_child(&slab_cpu_pool);
    slab_classic_atfork_child();
    lock_reset_child(&cache_lock);
    SK_CHILD_CLEAR(reap_busy);    /* a reaper caught mid-pass */
    /* A thread caught initialising left nothing published: start over. */
    spin_reset_child(&init_lock);
}
