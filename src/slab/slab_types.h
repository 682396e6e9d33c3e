/*
 * slab_types.h — the slab cache's data structures (slab.h has its API,
 * slab_fast.h the fast paths, kmalloc.h kmalloc's tables).
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
 * Each mode keeps its own fields in a struct of its own inside the cache:
 * slub_debug's layout (dbg), allocator=slab's sizing and node lists
 * (classic, slab_classic.h), sheaves=0's per-CPU freelists (slots).
 */
#ifndef SK_SLAB_TYPES_H
#define SK_SLAB_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu/cpu.h"
#include "lock/lock.h"
#include "page/page.h"
#include "slab/slab_classic.h"

struct slub_slot;                 /* sheaves=0 (slub_cpu.h) */

#define SLAB_NAME_LEN 32
#define SLAB_MAX_ORDER 5          /* slabs up to 128 KiB */
#define SLAB_BATCH_MAX 32
#define SLAB_MIN_ALIGN 8
/* slab_cache_create's flag beyond the SK_CACHE_* ones: SLAB_TYPESAFE_BY_RCU
 * (rcu_keep below; no poisoning of freed objects, which readers may still
 * read, as the kernel's SLUB does not poison such caches). */
#define SLAB_CACHE_TYPESAFE_RCU 0x2u

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

/* Nodes a cache keeps state for.  Slab pages come from the slab zone of
 * the allocating CPU's node (the page allocator's nodes, src/page/node.c),
 * but a cache keeps one node's lists, barn and counters, which the slabs
 * of every node share (slab_node_of): three more were 650 bytes of every
 * cache struct, seven pages of a process's 41 kmalloc caches.  The loops
 * are written for SLAB_NR_NODES, to be raised when per-node lists pay. */
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
    unsigned partial_objects;     /* their pobjects summed (sheaves=0) */
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

/* slub_debug's layout of an object (slab_debug.c), offsets from the
 * object: red_left bytes of red zone before it; the right red zone from
 * object_size to inuse; the free pointer (offset), the free marker (kofs),
 * the two tracks (U) at track_off, the requested size at orig_off;
 * info_end the end of all that, then padding to the next object's red
 * zone.  All 0 for a cache without debugging. */
struct slab_debug_layout {
    uint32_t red_left, inuse, track_off, orig_off, info_end;
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
     * other CPUs write (false sharing: bench/pairs' cross pair). */
    struct slab_cpu *cpu;
    /* Slow paths. */
    uint32_t align;
    uint32_t batch;               /* objects per refill / flush */
    uint32_t array_cap;           /* a CPU array's capacity at first use */
    uint32_t array_max;           /* ... and as far as it may grow */
    uint32_t cpu_partial;         /* objects on a CPU partial list (0: off) */
    /* The same, in slabs: the limit the default mode enforces, as 5.16+
     * kernels convert it.  0 under sheaves=0, which counts free objects
     * against cpu_partial as 3.1 did (cpu_partial_push). */
    uint32_t cpu_partial_slabs;
    uint32_t min_partial;         /* empty slabs kept on a node list */
    unsigned flags;               /* SK_CACHE_*; SK_DEBUG_* for slub_debug */
    /* The kernel API's (src/kernel): kmem_cache_create's SLAB_* flags, and
     * failslab's budget of allocations that may not sleep, when armed
     * (sk_kmem_cache_set_nowait_budget; an atomic count down). */
    unsigned long kernel_flags;
    long nowait_budget;
    bool nowait_armed;
    /* The migratetype of its slabs' pages: MIGRATE_RECLAIMABLE for a
     * SLAB_RECLAIM_ACCOUNT cache (set by the kernel API before its first
     * allocation), MIGRATE_UNMOVABLE (0) otherwise. */
    uint8_t page_mt;
    /* SLAB_TYPESAFE_BY_RCU: an empty slab's pages never go straight back
     * to the page allocator.  Its frees keep empty slabs on the node list
     * for the cache's own reuse (min_partial unbounded), the automatic
     * shrinks (reaper, out of memory, malloc_trim) pass it by, and a slab
     * an explicit shrink discards waits on rcu_pending (a stack through
     * slab.next) until slab_rcu_release has seen a grace period. */
    bool rcu_keep;
    struct sk_page *rcu_pending;
    uint8_t mode;                 /* enum slab_mode: whose slow paths */
    /* Whether its slabs enter the page map (slab_internal.h,
     * slab_pmap_set): SLUB's layout only, no bytes before the first
     * object, at most SLAB_PMAP_PAGES pages a slab. */
    bool pmap;
    /* Each mode's own fields: slub_debug's layout, allocator=slab's
     * sizing, sheaves=0's per-CPU freelists. */
    struct slab_debug_layout dbg;
    struct slab_classic_cache classic;
    /* sheaves=0: per-CPU freelists, [cpu_nr_ids + 1] (slub_cpu.c); NULL
     * with sheaves, the per-CPU arrays and the barn. */
    struct slub_slot *slots;
    void (*ctor)(void *);
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

/*
 * The page map (vm.h: a 64-bit word a page, after a slice's descriptors):
 * the word of a page of a slab whose objects free may take from it, 0 for
 * every other page.  Bits 16-63 its cache's address (a user-space
 * address: below 2^47), 8-15 the page's index in its slab, 0-7 the slab's
 * home (a copy of counters.owner, kept as slab_mirror_owner keeps the tail
 * pages' copies: a hint).  The cache is the word itself, not an index
 * into a table: free's chain of loads is no longer than the descriptor's
 * was (slice, then the word, then the cache).  A page enters
 * the map once every object starting on it holds a marker (eagerly made
 * slabs at creation, a fresh range's pages as take_fresh initialises them:
 * never while PG_FRESH is set) and leaves it when its slab is discarded,
 * before its pages go back to the page allocator.
 */
#define SLAB_PMAP_PAGES 256u

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

#endif
