/*
 * slab.h — SLUB slab caches behind per-CPU object arrays, and kmalloc.
 *
 * Data structures, fast path first:
 *   cache->arrays     per-CPU object arrays (src/cpu): alloc pops, free pushes
 *   slab_cpu_of(cache, c)  per-CPU slow-path state under its lock: the CPU slab
 *                     (frozen) with its private freelist, and the CPU
 *                     partial list (frozen slabs with free objects)
 *   cache->node[n]    the node partial list under list_lock
 *   slab state        in the head page descriptor (struct sk_page, src/page):
 *                     freelist + counters {inuse, objects, frozen}, changed
 *                     together by one cmpxchg16b
 * allocator=slab runs the kernel's SLAB on the same arrays and barn: its
 * slow paths, node lists and slab layouts are slab_classic.c's.
 */
#ifndef SK_SLAB_H
#define SK_SLAB_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cpu/cpu.h"
#include "lock/lock.h"
#include "page/page.h"
#include "slab/slab_classic.h"

struct slub_slot;                 /* sheaves=0 (slub_cpu.h) */

#define SLAB_NAME_LEN 32
#define SLAB_MAX_ORDER 5          /* slabs up to 128 KiB */
#define SLAB_BATCH_MAX 32
#define SLAB_MIN_ALIGN 8

/* The counters word of a slab (descriptor slab.counters). */
union slab_counters {
    uint64_t v;
    struct {
        uint32_t inuse;           /* objects not on the slab freelist */
        uint16_t objects;         /* objects in the slab */
        uint8_t frozen;           /* on a CPU: exempt from list management */
        uint8_t owner;            /* home: the CPU that last froze it, kept
                                   * when it leaves that CPU (caches whose
                                   * frees go home), else SLAB_NO_OWNER */
    };
};

#define SLAB_NO_OWNER 0xff

/* Nodes a cache keeps state for.  Slabs come from the page allocator's
 * node-0 zone only (zone_here; zone slot 1 holds large blocks, never
 * slabs), so every slab page says node 0 and a cache needs one node's
 * lists, barn and counters: three more were 650 bytes of every cache
 * struct, seven pages of a process's 41 kmalloc caches.  The loops are
 * written for SLAB_NR_NODES, to be raised with the zones. */
#define SLAB_NR_NODES 1

struct slab_cpu {                 /* one per cache per CPU, own cache line */
    lock_t lock;                  /* the per-CPU slow-path lock */
    struct sk_page *slab;         /* CPU slab (frozen), or NULL */
    void *freelist;               /* objects of `slab` only this CPU takes */
    /* The fresh range of `slab`: its last fresh_left objects were never
     * handed out (slab.c; 0: none, as whenever `slab` changes but to a
     * slab made lazily); fresh_zero: they lie on pages known zero. */
    uint16_t fresh_left;
    bool fresh_zero;
    struct sk_page *partial;      /* frozen partial slabs, via slab.next */
    unsigned partial_slabs;
    unsigned long stat[SK_STAT_NR];
    /* For the fast-path counters (derived, see slab_cache_info): objects
     * moved into / out of arrays in batches, and single pops / pushes
     * made by the slow paths. */
    unsigned long batch_in, batch_out, slow_pops, slow_pushes;
    /* Flushes since this CPU's last refill, counted down from
     * SLAB_ALLOCATING (atomic, a hint): a refill sets it, each flush takes
     * one off.  Still SLAB_ALLOCATING at a flush: a refill ran since the
     * last flush, so the array went from empty to full and back, and its
     * capacity grows (slab_free_slow).  Not 0: this CPU allocates from the
     * cache too, so a free of an object at home on another CPU goes home;
     * 0, a CPU that only frees (a consumer) keeps it on its array, for the
     * barn (slab_free_keeps). */
    uint32_t allocating;
} __attribute__((aligned(CACHE_LINE)));

/*
 * The barn (the kernel's name, from its per-CPU sheaves): full batches of
 * free objects that one CPU flushed for another CPU of the node to refill
 * from, so objects freed on one CPU and wanted on another move as a batch
 * of pointers instead of each going back to its slab and out again.  A
 * bounded LIFO stack of objects.  A flush puts its batch there only while
 * another CPU is asking (it refilled since the barn was last found full):
 * on one CPU the barn would only park memory the slabs could give back.
 */
struct slab_barn {
    lock_t lock;                  /* count and objs[] */
    unsigned count;               /* objects in objs[] (peeked unlocked) */
    unsigned cap;                 /* whole batches; 0: off */
    void **objs;                  /* [SLAB_BARN_MAX], from cache metadata */
    int wanted_by;                /* CPU that last refilled; -1 once found full
                                   * (an unlocked hint) */
};
#define SLAB_BARN_MAX 512         /* objects: 16 batches of 32 */
#define SLAB_BARN_BYTES (32 << 10) /* of objects, at most */
#define SLAB_ALLOCATING 8          /* flushes a refill keeps slab_cpu.allocating non-zero */

struct slab_node {
    lock_t list_lock;             /* partial list and nr_partial */
    struct sk_page *partial;      /* non-frozen slabs with free objects */
    unsigned long nr_partial;
    uint16_t gen;                 /* list generation (fork repair) */
    unsigned long nr_slabs;       /* atomic; objects: nr_slabs * c->objects */
    struct slab_barn barn;
    struct slab_classic_node classic;  /* allocator=slab: its node lists */
    struct sk_page *full;         /* slub_debug: full slabs (list_lock), via
                                   * slab.next/prev, so every slab is on a list */
};

struct slab_cache {
    /* Read by the fast paths, together (arrays[], last, too). */
    uint32_t size;                /* object stride in the slab */
    uint32_t offset;              /* free pointer offset in a free object */
    uint32_t inv;                 /* inverse of size's odd part, mod 2^32 */
    uint8_t shift;                /* size = odd part << shift */
    uint8_t poison;               /* watched by memcheck / ASan (poison.h) */
    uint8_t remote_free;          /* 0xff: slabs record their home CPU, a
                                   * free on another CPU goes home
                                   * (slab_free_at); 0: off.  A mask, so
                                   * that the free path needs no branch on
                                   * it */
    /* The per-CPU arrays (src/cpu: cpu_nr_ids + 1 of CPU_ARRAY_STRIDE
     * bytes), apart from the struct so that the structs pack densely and
     * an unused cache's arrays stay untouched; on the same line as the
     * fields the fast paths read anyway. */
    unsigned char *arrays;
    uintptr_t random;             /* free pointer obfuscation */
    uint16_t objects;             /* per slab */
    uint16_t order;               /* slab = 2^order pages */
    uint32_t reserved;            /* management bytes at a slab's head: 0
                                   * under SLUB; SLAB's on-slab struct slab
                                   * and index array */
    uint32_t kofs;                /* free marker's offset in an object (see
                                   * slab_free): 8; after the free pointer
                                   * with a constructor; 0 below 16 bytes */
    uint32_t object_size;         /* what the user asked for */
    /* [cpu_nr_ids]: read by a consumer's every free (slab_free_keeps), so
     * on this line, not beside node[], whose list lock and barn the
     * other CPUs write (the cross pair: 74 against 57 ns there). */
    struct slab_cpu *cpu;
    /* Slow paths. */
    uint32_t align;
    uint32_t batch;               /* objects per refill / flush */
    uint32_t array_cap;           /* a CPU array's capacity at first use */
    uint32_t array_max;           /* ... and as far as it may grow */
    uint32_t cpu_partial;         /* objects on a CPU partial list (0: off) */
    uint32_t cpu_partial_slabs;   /* the same, in slabs */
    uint32_t min_partial;         /* empty slabs kept on a node list */
    unsigned flags;               /* SK_CACHE_*; SK_DEBUG_* for slub_debug */
    uint8_t mode;                 /* enum slab_mode: whose slow paths */
    /* slub_debug layout (slab_debug.c), offsets from the object: red_left
     * bytes of red zone before it; the right red zone from object_size to
     * inuse; the free pointer (offset), the free marker (kofs), the two
     * tracks (U) at track_off, the requested size at orig_off; info_end
     * the end of all that, then padding to the next object's red zone. */
    uint32_t red_left, inuse, track_off, orig_off, info_end;
    struct slab_classic_cache classic;  /* allocator=slab sizing */
    void (*ctor)(void *);
    /* sheaves=0: per-CPU freelists, [cpu_nr_ids + 1] (slub_cpu.c); NULL
     * with sheaves, the per-CPU arrays and the barn. */
    struct slub_slot *slots;
    struct slab_node node[SLAB_NR_NODES];
    struct slab_cache *next;      /* all caches, creation order */
    /* slab_reap (cache_lock): the arrays' operation count at the last
     * pass, and whether the cache was shrunk since it last moved. */
    uint64_t reap_ops;
    /* The per-CPU indices whose state (arrays, slab_cpu, the slots of
     * sheaves=0) a slow path may have written: each set before its first
     * write (slab_mark_used), so that the reaper, statistics, shrink and a
     * fork child read the state of used caches only, and the reaper,
     * shrink and a fork child only that of the CPUs that used them (a
     * read of an untouched page can cost a resident page, as a write
     * does).  Bit i for index i < 63, bit 63 for all the others. */
    uint64_t cpus_used;
    bool reaped;
    bool kmalloc;
    char name[SLAB_NAME_LEN];
};

static inline cpu_arrays_t slab_arrays(const struct slab_cache *c)
{
    return (cpu_arrays_t)c->arrays;
}

/* CPU cpu's slow-path state of c: c->cpu is a column of a CPU-major pool
 * (cpu_pool_alloc), so one CPU's slab_cpu of successive caches share its
 * row's page, as its arrays do. */
static inline struct slab_cpu *slab_cpu_of(const struct slab_cache *c, int cpu)
{
    return (struct slab_cpu *)((char *)c->cpu + (size_t)cpu * CPU_ARRAY_STRIDE);
}
_Static_assert(sizeof(struct slab_cpu) <= CPU_ARRAY_STRIDE, "a slab_cpu fits a row");

/* 0, or -1 with errno ENOMEM; a later call tries again, keeping what the
 * failed one built. */
int slab_init(void);
bool slab_ready(void);
/* After an allocation failed: shrink every cache (per-CPU arrays, barns,
 * CPU partial lists, empty slabs) and give every wholly free slice back
 * to the OS (page_release_free); the caller then retries once.  Returns
 * bytes of address space given back. */
size_t slab_release_all(void);

/* The idle-cache reaper (SLAB's cache_reap, run when it pays): when the
 * slab zone has taken memory that was not resident since the last look,
 * shrink every cache whose per-CPU arrays saw no operation since the
 * previous pass, at most one pass per SLAB_REAP_MS; so what a size class
 * used in an earlier phase keeps (array objects, CPU and partial slabs,
 * empty slabs) is reused before the heap grows.  Called with no slabkit
 * lock held (kmalloc's slow path).  The purger runs the same pass at each
 * of its ticks (page_set_idle_pass), so a program that stops allocating
 * gets it back too. */
#define SLAB_REAP_MS 5
extern unsigned long slab_reap_seen SK_INTERNAL;
extern unsigned long slab_reaped SK_INTERNAL;   /* caches it shrank */
/* Non-zero while this thread runs a cache constructor (slab_cpu lock
 * held): no reaping from a malloc inside it. */
extern __thread int slab_in_ctor __attribute__((tls_model("initial-exec"))) SK_INTERNAL;
void slab_reap(unsigned long takes);
static inline void slab_reap_poll(void)
{
    unsigned long t = page_clean_takes();
    if (unlikely(t != __atomic_load_n(&slab_reap_seen, __ATOMIC_RELAXED)))
        slab_reap(t);
}

/* cpus_used's bit of per-CPU index i (a CPU id, or an array slot of the
 * lock fallback): its own below 63; one bit for all the others. */
static inline uint64_t slab_cpu_bit(int i)
{
    return i >= 0 && i < 63 ? 1ull << i : 1ull << 63;
}
/* Per-CPU index i of c is about to be written, perhaps for the first time
 * (slab_mark_used, slab_internal.h). */
static inline void slab_mark_cpu(struct slab_cache *c, int i)
{
    uint64_t bit = slab_cpu_bit(i);
    if (unlikely(!(__atomic_load_n(&c->cpus_used, __ATOMIC_RELAXED) & bit)))
        __atomic_fetch_or(&c->cpus_used, bit, __ATOMIC_RELEASE);
}
/* Whether any CPU's state of c may have been written. */
static inline bool slab_used(const struct slab_cache *c)
{
    return __atomic_load_n(&c->cpus_used, __ATOMIC_ACQUIRE) != 0;
}
/* Whether index i's state of c may have been written. */
static inline bool slab_cpu_used(const struct slab_cache *c, int i)
{
    return __atomic_load_n(&c->cpus_used, __ATOMIC_ACQUIRE) & slab_cpu_bit(i);
}

/* NULL (ENOMEM) when the OS refuses the cache's metadata. */
struct slab_cache *slab_cache_create(const char *name, size_t size, size_t align,
                                     unsigned flags, void (*ctor)(void *), bool kmalloc);
void *slab_alloc_slow(struct slab_cache *c);
void slab_free_slow(struct slab_cache *c, void *obj);
int slab_shrink(struct slab_cache *c);
/* Free objects in the cache's slabs and arrays, and allocated ones. */
void slab_cache_info(struct slab_cache *c, struct sk_cache_info *info);

/* slab_cache_info's two ends, shared with tools/inspect (which reads the
 * same structs out of another process): the cache's fixed fields, then
 * what follows from the counts gathered in between.  The fast paths count
 * nothing themselves: every pop or push bumps its array's ops in the same
 * commit that moves count (src/cpu), so with pushes - pops = objects in
 * arrays - batch in + batch out and pushes + pops = ops, both follow
 * (exact when quiescent). */
static inline void slab_info_fixed(const struct slab_cache *c, struct sk_cache_info *info)
{
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%.*s", (int)sizeof c->name, c->name);
    info->object_size = c->object_size;
    info->size = c->size;
    info->align = c->align;
    info->objs_per_slab = c->objects;
    info->order = c->order;
    info->reserved = c->reserved;
    info->cpu_partial = c->cpu_partial;
    info->array_capacity = c->array_cap;
    info->batch = c->batch;
}

struct slab_info_counts {
    unsigned long free_objs, empty_slabs;   /* on slabs, freelists: not arrays or barn */
    uint64_t ops, batch_in, batch_out, slow_pops, slow_pushes;
};

static inline void slab_info_derive(struct sk_cache_info *info, const struct slab_info_counts *k)
{
    info->num_objs = info->num_slabs * info->objs_per_slab;
    unsigned long free_objs = k->free_objs + info->array_objs + info->barn_objs;
    info->active_objs = free_objs < info->num_objs ? info->num_objs - free_objs : 0;
    uint64_t pushes = (k->ops + info->array_objs + k->batch_out - k->batch_in) / 2, pops = k->ops - pushes;
    info->stat[SK_ALLOC_FASTPATH] = pops - k->slow_pops;
    info->stat[SK_FREE_FASTPATH] = pushes - k->slow_pushes;
    info->active_slabs = k->empty_slabs < info->num_slabs ? info->num_slabs - k->empty_slabs : 0;
}
/* The list of caches, unlocked: only for a single-threaded walk (the fork
 * child); everyone else uses slab_for_each_cache, which holds cache_lock
 * (sk_cache_destroy unlinks and recycles caches under it). */
struct slab_cache *slab_caches(void);
/* The list's head (cache.c); extern for sk_inspect_root (inspect.c). */
extern struct slab_cache *slab_cache_list SK_INTERNAL;
/* Call fn for each cache with the list held still (a destroyed cache's
 * metadata is reused by the next create). */
void slab_for_each_cache(void (*fn)(struct slab_cache *, void *), void *arg);
void slab_atfork_child(void);

/* Bad input: one line naming the call, the pointer and the cache; abort. */
__attribute__((noreturn)) void slab_bad_free(const char *what, const char *call,
                                             const void *p, const struct slab_cache *c,
                                             const void *object);

/* leak_check (leak.c): scan for unreferenced objects, report them to fd
 * (kmemleak's format), return their number; -1 when the scan cannot run.
 * No allocation. */
long slab_leak_check_fd(int fd);
/* slub_debug reports made so far (with debug_continue: the program went on). */
unsigned long slab_debug_reports(void);
/* At exit: a warning on fd for each debug_caches name that matched no cache. */
void slab_debug_check_names(int fd);

/* sk_slabinfo's text to a file descriptor: no stdio, no allocation. */
void slabinfo_write(int fd);

/* ---- slub_debug (slab_debug.c, docs/slub_debug.md) ---- */

/* U's record of an object's last alloc (TRACK_ALLOC) and free (TRACK_FREE),
 * the two at c->track_off; here because tools/inspect reads them too. */
#define TRACK_FRAMES 16           /* return addresses kept, slabkit's too */
struct debug_track {
    uint64_t ms;                  /* CLOCK_MONOTONIC ms; 0: never */
    int32_t cpu, tid;
    uint32_t nframes, unused;
    void *frames[TRACK_FRAMES];
};
enum { TRACK_ALLOC, TRACK_FREE };

/*
 * A cache with SK_DEBUG_* flags (debug= option, or sk_cache_create flags)
 * runs in SLAB_MODE_DEBUG: its per-CPU arrays keep capacity 0, so every
 * fast path falls through to the slow paths, which dispatch here on the
 * mode they already test. */
/* The SK_DEBUG_* flags the debug= and debug_caches= options give cache
 * `name`. */
unsigned slab_debug_flags_for(const char *name);
/* Lay the cache out for its debug flags (red zones, tracks, requested
 * size); returns the object stride.  Sets mode, offset, kofs, reserved. */
size_t slab_debug_layout(struct slab_cache *c, size_t size, size_t align);
/* An object of c for a request of `size` bytes (0: the object size). */
void *slab_debug_alloc(struct slab_cache *c, size_t size);
/* Free obj to c: checks, then its slab; `suspect`: its free marker was
 * set (a double free or never handed out). */
void slab_debug_free(struct slab_cache *c, void *obj, bool suspect, const char *call);
/* A pointer no cache's fast check accepted: when it lies in a debug
 * cache's slab, report it ("Invalid object pointer") and return true
 * under debug_continue (abort otherwise); false: not a debug slab. */
bool slab_debug_bad_pointer(const void *p, const char *call);
/* What the user may use of obj: the size it was asked for. */
size_t slab_debug_usable(struct slab_cache *c, const void *obj);
/* With U: alloc_calls and free_calls of c as the kernel's sysfs files,
 * to fd (no allocation); nothing for a cache without U. */
void slab_debug_calls_write(struct slab_cache *c, int fd);
/* The allocation stack user tracking (U) kept for a live object of c: sets
 * *frames to its frames past slabkit's own and *ms to its time (CLOCK_
 * MONOTONIC ms); returns how many, 0 without U or when never recorded.
 * leak_check's reports and sites come from here. */
int slab_debug_alloc_stack(const struct slab_cache *c, void *obj, void *const **frames, uint64_t *ms);

/* The malloc family's slow paths (kmalloc.c). */
void *kmalloc_slow(size_t size);
void sk_free_slow(void *p, const char *call);


/*
 * Exact division by the object size in three instructions: for an offset
 * that is a multiple of size = d << k (d odd), off * inv(d) mod 2^32 is
 * off / d exactly, and rotating right by k gives off / size.  For any
 * other offset the result is larger than 2^32 / size, hence than the
 * number of objects: one unsigned compare tells "start of an object of
 * this slab" from interior pointers, the slab's tail, and what lies
 * before s_mem (Granlund and Montgomery's divisibility test).
 */
static inline uint32_t slab_obj_exact(const struct slab_cache *c, const struct sk_page *pg, const void *p)
{
    uint32_t off = (uint32_t)((uintptr_t)p - (uintptr_t)pg->slab.s_mem);
    uint32_t q = off * c->inv;
    return (q >> c->shift) | (q << (-c->shift & 31));
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

/* The pages of a new slab of c (order c->order), NULL with errno ENOMEM.
 * From the page allocator's node-0 zone: a page of a node c keeps no
 * state for (c->node[SLAB_NR_NODES]) is a fatal error, not an index past
 * the array. */
static inline struct sk_page *slab_pages_alloc(const struct slab_cache *c)
{
    struct sk_page *pg = page_alloc(c->order);
    if (unlikely(pg && pg->node >= SLAB_NR_NODES))
        os_fatal("slab page of node %u from the page allocator (%u nodes)", pg->node, SLAB_NR_NODES);
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
 * has: an object of a slab frozen to another CPU goes home. */
static inline void slab_free_at(struct slab_cache *c, struct sk_page *pg, void *obj,
                                const char *call)
{
    if (unlikely(slab_marked_free(c, obj))) {
        slab_free_marked(c, obj, call);
        return;
    }
    *slab_marker(c, obj) = slab_free_key;
    /* Home when the slab's home (owner not SLAB_NO_OWNER) is another CPU
     * than this one.  One branch, almost never taken: a test of
     * c->remote_free first was a branch on the object's class, which
     * mixed sizes take at random (larson with 8-64 byte objects on one
     * CPU: 0.30 s against 0.23 s without it).  The owner is read from
     * pg, whose flags were just read on the same line: a tail page
     * carries a copy of the head's (slab_mirror_owner); any cache that
     * does not send frees home masks the word out (classic SLAB keeps an
     * address there).  Reading it through pg->slab.head instead cost
     * every free about 1 ns (a pair loop of 64 B-8 KiB objects).  A racy
     * look: a slab whose home changed meanwhile only makes the choice of
     * path stale, and both paths are right for any slab state.  A thread
     * without rseq reads an id that is no CPU's (-1, or -2 when its
     * registration failed) and never goes home: slab_free_keeps turns it
     * away (a third factor here, for the id, cost the cross pair 15 ns in
     * one phase of the machine even with remote_free=0). */
    union slab_counters cnt = { .v = __atomic_load_n(&pg->slab.counters, __ATOMIC_RELAXED) };
    uint8_t cpu = (uint8_t)cpu_rseq_area()->cpu_id;
    unsigned other = (uint8_t)(cnt.owner ^ cpu);
    unsigned owned = (uint8_t)(cnt.owner + 1) & c->remote_free;    /* 0: SLAB_NO_OWNER, or off */
    if (unlikely(other * owned != 0) && !slab_free_keeps(c, pg, cpu)) {
        slab_free_remote(c, pg, obj);
        return;
    }
    if (likely(cpu_push_fast(slab_arrays(c), obj)))
        return;
    slab_free_slow(c, obj);
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
        struct sk_page *pg = page_of_slice(s, p);
        uint32_t f = __atomic_load_n(&pg->flags, __ATOMIC_ACQUIRE);
        if (likely((f & (PG_SLAB | PG_FRESH)) == PG_SLAB)) {
            struct slab_cache *c = pg->slab.cache;
            if (likely(slab_obj_exact(c, pg, p) < c->objects)) {
                slab_free_at(c, pg, p, call);
                return;
            }
        } else if ((f & (PG_HEAD | PG_LARGE)) == (PG_HEAD | PG_LARGE) && !((uintptr_t)p & (SK_PAGE_SIZE - 1)) &&
                   s->kind != VM_SLICE_DIRECT) {
            page_free_exact(pg);   /* a kblock or an exact block: its head page */
            return;
        }
    }
    sk_free_slow(p, call);
}

static inline void kfree_inline(void *p) { kfree_call(p, "free"); }

/* ---- kmalloc ---- */

/* Larger: the page allocator (kmalloc_large); 16-32 KiB a 32 KiB block
 * of the per-CPU page lists (PG_KBLOCK), above that exact page runs. */
#define KMALLOC_MAX_CACHE_SIZE 16384u
#define KMALLOC_KBLOCK_SIZE ((size_t)SK_PAGE_SIZE << PCP_MAX_ORDER)
_Static_assert(KMALLOC_KBLOCK_SIZE == 2 * KMALLOC_MAX_CACHE_SIZE, "a kblock: every size whose pages round to its order");
#define KMALLOC_SMALL_MAX 1024u         /* table-indexed by (size+7)/8 */
#define KMALLOC_NR_CLASSES 48

extern struct slab_cache *kmalloc_caches[KMALLOC_NR_CLASSES] SK_INTERNAL;
/* sk_malloc's table: the per-CPU arrays of each class (empty before init). */
extern cpu_arrays_t kmalloc_arrays[KMALLOC_NR_CLASSES] SK_INTERNAL;
/* malloc's table: the per-CPU arrays of the 16-byte-aligned class for
 * (size + 15) / 16, size <= KMALLOC_SMALL_MAX: one load from size to array. */
extern cpu_arrays_t kmalloc_arrays16[KMALLOC_SMALL_MAX / 16 + 1] SK_INTERNAL;
extern uint8_t kmalloc_small_index[KMALLOC_SMALL_MAX / 8 + 1] SK_INTERNAL;
/* Sizes KMALLOC_SMALL_MAX+1 .. KMALLOC_MAX_CACHE_SIZE: the class of size is
 * kmalloc_mid_index[(size - 1) >> KMALLOC_MID_SHIFT]. */
#define KMALLOC_MID_SHIFT 8
extern uint8_t kmalloc_mid_index[KMALLOC_MAX_CACHE_SIZE >> KMALLOC_MID_SHIFT] SK_INTERNAL;

/* The fast path of KMALLOC_SMALL_MAX < size <= KMALLOC_MAX_CACHE_SIZE, for
 * malloc and sk_malloc alike (every class here is 256-aligned): an object
 * from this CPU's array with its free marker cleared, or NULL. */
/* sk_malloc's class of 1 <= size <= KMALLOC_MAX_CACHE_SIZE, one table load
 * either side of KMALLOC_SMALL_MAX (a slot past the classes, whose arrays
 * stay empty, until kmalloc_init). */
static inline unsigned kmalloc_fast_index(size_t size)
{
    return size <= KMALLOC_SMALL_MAX ? __atomic_load_n(&kmalloc_small_index[(size + 7) >> 3], __ATOMIC_RELAXED)
                                     : __atomic_load_n(&kmalloc_mid_index[(size - 1) >> KMALLOC_MID_SHIFT],
                                                       __ATOMIC_RELAXED);
}

static SK_ALWAYS_INLINE void *kmalloc_mid_fast(size_t size)
{
    void *obj;
    unsigned i = kmalloc_fast_index(size);
    /* Acquire: kmalloc_init publishes the entry after its cache. */
    if (!cpu_pop_fast(__atomic_load_n(&kmalloc_arrays[i], __ATOMIC_ACQUIRE), &obj))
        return NULL;
    ((uintptr_t *)obj)[1] = 0;
    return obj;
}
extern uint32_t kmalloc_class_size[KMALLOC_NR_CLASSES] SK_INTERNAL;
extern unsigned kmalloc_nr_classes SK_INTERNAL;

/* 0, or -1 (ENOMEM) with the caches built so far kept for the next call. */
int kmalloc_init(void);
/* Size class index for size (<= KMALLOC_MAX_CACHE_SIZE). */
static inline unsigned kmalloc_index(size_t size)
{
    if (likely(size <= KMALLOC_SMALL_MAX))
        return kmalloc_small_index[(size + 7) >> 3];
    return kmalloc_mid_index[(size - 1) >> KMALLOC_MID_SHIFT];
}
/* Large blocks handed out now (malloc's > 32 KiB): count, pages, and the
 * pages of those that are direct mappings.  The page allocator counts its
 * exact blocks under the zone lock it takes anyway (page_exact_stats);
 * kmalloc counts the direct mappings (relaxed atomics: a system call each
 * anyway); kmalloc_large_totals adds them up. */
struct kmalloc_large_stats {
    long blocks, pages, direct_pages;
    long direct_max_blocks, direct_max_pages;   /* the most direct mappings at once */
};
void kmalloc_large_totals(struct kmalloc_large_stats *st);
/* Blocks of at least this many bytes are direct mappings, unmapped at
 * free (mallopt M_MMAP_THRESHOLD); by default only those no buddy order
 * holds. */
#define KMALLOC_DIRECT_DEFAULT (((size_t)SK_PAGE_SIZE << SK_MAX_ORDER) + 1)
extern size_t kmalloc_direct_min SK_INTERNAL;
/* A size past the classes that a kblock serves: 16-32 KiB, unless
 * mallopt(M_MMAP_THRESHOLD) made it a direct mapping. */
static inline bool kblock_size(size_t size)
{
    return size - (KMALLOC_MAX_CACHE_SIZE + 1) < KMALLOC_KBLOCK_SIZE - KMALLOC_MAX_CACHE_SIZE &&
           size < __atomic_load_n(&kmalloc_direct_min, __ATOMIC_RELAXED);
}
/* The fast path above the classes, as a class's object comes off its
 * array: 16-32 KiB a kblock off this CPU's page list, 32-256 KiB this
 * CPU's cached exact block when it has the page count asked for.  NULL
 * otherwise (or before init): kmalloc_slow refills, or cuts a block. */
static inline void *kmalloc_large_fast(size_t size)
{
    struct sk_page *pg;
    if (kblock_size(size)) {
        pg = page_kblock_cached();
    } else {
        if (size - (KMALLOC_KBLOCK_SIZE + 1) >= ((size_t)EXACT_CACHE_PAGES << SK_PAGE_SHIFT) - KMALLOC_KBLOCK_SIZE ||
            size >= __atomic_load_n(&kmalloc_direct_min, __ATOMIC_RELAXED))
            return NULL;
        pg = page_exact_cached((size + SK_PAGE_SIZE - 1) >> SK_PAGE_SHIFT);
    }
    return pg ? page_address(pg) : NULL;
}
/* The usable size malloc(size) would get (malloc_good_size; size >= 16);
 * initialises slabkit if need be. */
size_t kmalloc_good_size(size_t size);
/* The class of aligned_alloc(align, size) for align > 16, or NULL for a
 * large block (after init). */
struct slab_cache *kmalloc_aligned_cache(size_t align, size_t size);
void *kmalloc_large(size_t size, size_t align);
/* KFENCE's "static key" (kfence.c): divert the malloc tables of every class
 * up to a page to the always-empty arrays (true), so the next small malloc
 * takes the slow path, or point them back at the caches (false).  After
 * init only; one caller at a time (kfence.c's arm state orders them). */
void kmalloc_tables_divert(bool divert);
void kmalloc_free_nonslab(void *p, const char *call);
size_t kmalloc_usable_nonslab(const void *p, const char *call);

#endif
