/*
 * page.h — page descriptors and the buddy page allocator.
 *
 * struct sk_page is slabkit's struct page: 64 bytes per 4 KiB page, kept in
 * the slice header (src/vm), never in the page itself.  A descriptor is in
 * one of these states, told by flags:
 *   PG_BUDDY   head of a free block on a zone free list (order, list,
 *              migratetype, age)
 *   PG_PCP     head of a free block cached on a CPU's page list
 *   PG_HEAD    head of an allocated block (order; PG_LARGE: nr_pages)
 *   PG_SLAB    with PG_HEAD: the block is a slab (slab fields valid)
 *   PG_TAIL    another page of a slab: `head` points at the slab's head, and
 *              cache/s_mem are copied from it so the free fast path needs
 *              no second descriptor
 *   PG_FRESH   with PG_SLAB, a page of a CPU slab's fresh range not
 *              initialised yet: no object starting on it was ever handed
 *              out (src/slab/slab.c, "the fresh range")
 *   PG_PURGING head of a free block off the lists while it is purged (the
 *              zone lock is dropped around madvise): a forked child puts it
 *              back on a list instead of leaking it
 *   PG_FILE    with PG_HEAD: an order-0 page of an in-memory file
 *              (src/shmem): the file fields are valid, and PG_LRU,
 *              PG_ACTIVE, PG_REFERENCED, PG_SWAPBACKED are its LRU state
 *   0          anything else (inside a block; its content is stale)
 * Only block heads carry PG_BUDDY/PG_PCP/PG_HEAD; a descriptor loses them
 * when its block is merged, split or handed out, so a stale flag never
 * survives inside another block.
 */
#ifndef SK_PAGE_H
#define SK_PAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu/cpu.h"
#include "lock/lock.h"
#include "os/os.h"
#include "vm/vm.h"

#define PG_BUDDY  0x01u
#define PG_PCP    0x02u
#define PG_HEAD   0x04u
#define PG_TAIL   0x08u
#define PG_SLAB   0x10u
#define PG_LARGE  0x20u   /* kmalloc large block: nr_pages exact */
#define PG_CLEAN  0x40u   /* free block whose pages are known zero (purged or fresh) */
#define PG_ZEROED 0x80u   /* allocated block handed out clean (calloc may skip memset) */
#define PG_PURGING 0x100u /* free block being purged, off the lists (order valid) */
/* File pages (src/shmem), the kernel's page-cache flags.  Once a page is
 * in its file, other threads change these with atomic read-modify-writes
 * (mark_page_accessed runs without a lock); before that, and once its last
 * reference is gone, its owner may use plain stores. */
#define PG_FILE       0x200u  /* a page of an sk_file */
#define PG_LRU        0x400u  /* on an LRU list (not in a per-CPU batch) */
#define PG_ACTIVE     0x800u  /* on, or bound for, the active list */
#define PG_REFERENCED 0x1000u /* accessed once since it was last aged */
#define PG_SWAPBACKED 0x2000u /* its data goes to swap, not to a backing file */
/* A slab page no object of which was initialised yet (slab.c). */
#define PG_FRESH      0x4000u
/* A PG_LARGE block of a whole 2^PCP_MAX_ORDER pages from the per-CPU page
 * lists (page_alloc_kblock: kmalloc's 16-32 KiB), not an exact one. */
#define PG_KBLOCK     0x8000u

/* Migratetypes (buddy.c, "Grouping by mobility"): what a block's pages
 * hold, so that pages of one kind share 2 MiB pageblocks and a pageblock
 * empties whole.  The kernel's first three, in its order. */
enum { MIGRATE_UNMOVABLE, MIGRATE_RECLAIMABLE, MIGRATE_MOVABLE, MIGRATE_TYPES };
/* A pageblock is a huge page's worth of pages. */
#define PAGEBLOCK_ORDER (HUGE_PAGE_SHIFT - SK_PAGE_SHIFT)
#define PAGEBLOCK_PAGES ((size_t)1 << PAGEBLOCK_ORDER)
#define PAGEBLOCK_BITS 4u   /* per pageblock in its slice's pageblock_bits */
_Static_assert((SLICE_PAGES / PAGEBLOCK_PAGES) * PAGEBLOCK_BITS <= 64 * 2, "pageblock_bits holds a slice's");

#define PCP_MAX_ORDER 3   /* orders with per-CPU page lists */
/* One more per-CPU list: the exact-block cache (pcp.c, page_alloc_exact). */
#define PCP_EXACT (PCP_MAX_ORDER + 1)
/* And order 0's lists of the other two migratetypes (lists 0..3 are
 * unmovable blocks of orders 0..3): the kernel's pcp lists per type. */
#define PCP_RECLAIMABLE (PCP_EXACT + 1)
#define PCP_MOVABLE (PCP_EXACT + 2)
#define PCP_NR_LISTS (PCP_MOVABLE + 1)
/* Whether list l holds blocks of one order (all but the exact-block
 * cache), and that order. */
static inline bool pcp_block_list(unsigned l)
{
    return l != PCP_EXACT;
}
static inline unsigned pcp_order(unsigned l)
{
    return l <= PCP_MAX_ORDER ? l : 0;
}
/* Nodes and zones (node.c): each node has two zones, its slab zone
 * (ZONE_NORMAL: slab pages, sk_alloc_pages blocks, sk_file pages, the
 * per-CPU lists in front) and its large blocks' zone (ZONE_LARGE); a
 * zone's id, 2 x node + kind, is what pg->node records. */
#define PAGE_MAX_NODES 4
#define PAGE_NR_ZONES (2 * PAGE_MAX_NODES)
enum { ZONE_NORMAL, ZONE_LARGE };
#define ZONE_ID(nid, kind) (2 * (nid) + (kind))

struct slab_cache;

struct sk_page {
    uint32_t flags;                    /* PG_* */
    uint8_t order;                     /* block order (heads) */
    uint8_t node;
    uint16_t list_gen;                 /* slab on a node list: that list's generation */
    union {
        struct {                       /* PG_BUDDY: zone free list */
            struct sk_page *next, *prev;
            uint64_t freed_at;         /* ms, coarse clock: aging */
            /* Pages from the block's start that may be resident: 0 for a
             * clean block (PG_CLEAN), else 1..2^order.  Past it the pages
             * are known zero (calloc trusts that), so it only ever errs
             * high.  A prefix, because splitting hands out the low half. */
            uint32_t span;
            uint8_t mt;                /* the migratetype of its list */
        } buddy;
        struct {                       /* PG_HEAD|PG_LARGE */
            size_t nr_pages;           /* pages handed out (<= 2^order) */
        } large;
        struct {                       /* PG_FILE (src/shmem) */
            struct sk_page *next, *prev; /* LRU list (PG_LRU; lru_lock) */
            void *mapping;             /* the file; NULL once truncated away */
            uint64_t index;            /* page index in the file */
            uint32_t refcount;         /* references: the file's, a per-CPU
                                        * batch's, each reader's; freed at 0 */
        } file;
        struct {                       /* PG_SLAB (and PG_TAIL copies) */
            struct slab_cache *cache;  /* offset 8 */
            struct sk_page *next;      /* offset 16: CPU or node partial list */
            union {
                struct sk_page *prev;  /* offset 24: node partial list */
                /* On a CPU partial list of sheaves=0 (3.1's pobjects):
                 * the free objects the slab had when it was put there. */
                uint32_t pobjects;
            };
            char *s_mem;               /* offset 32: first object */
            struct sk_page *head;      /* offset 40: the slab's head page */
            /* offset 48: the pair changed by one cmpxchg16b */
            void *freelist;            /* 16-byte aligned: see assert */
            uint64_t counters;         /* union slab_counters */
        } slab;
    };
};
_Static_assert(sizeof(struct sk_page) == 64, "sk_page is one cache line");
_Static_assert(__builtin_offsetof(struct sk_page, slab.freelist) % 16 == 0,
               "cmpxchg16b needs (freelist, counters) 16-byte aligned");

/* Flags are read without the zone lock (the free fast path, page_find_head,
 * a buddy's test while its owner hands it out): relaxed atomics, so each
 * read sees one whole value. */
static inline uint32_t pg_flags(const struct sk_page *pg)
{
    return __atomic_load_n(&pg->flags, __ATOMIC_RELAXED);
}
static inline void pg_set_flags(struct sk_page *pg, uint32_t f)
{
    __atomic_store_n(&pg->flags, f, __ATOMIC_RELAXED);
}

/* A free list of blocks of one order, newest first. */
struct page_list {
    struct sk_page *head, *tail;
    unsigned long nr;
};

/* The per-CPU lists go back to their zone before a request takes fresh
 * memory (pcp.c, zone_drain_before_fresh) at most once in this many ms,
 * the first time this long after page_init. */
#define FRESH_DRAIN_MS 10

struct zone {
    lock_t lock;                       /* protects everything below but the
                                        * grow_lock fields */
    int node;
    struct page_list dirty[MIGRATE_TYPES][SK_MAX_ORDER + 1];  /* resident free blocks */
    struct page_list clean[MIGRATE_TYPES][SK_MAX_ORDER + 1];  /* purged / fresh free blocks */
    unsigned long free_pages;          /* in free lists (not pcp) */
    unsigned long dirty_pages;         /* of which resident */
    unsigned long managed_pages;       /* joined to the zone: whole slices,
                                        * partial slices' mapped prefixes,
                                        * the frontier's part */
    unsigned long purged_pages;        /* total returned to the OS */
    unsigned long purging;             /* blocks off the lists being purged (PG_PURGING) */
    uint64_t last_decay;               /* ms */
    unsigned long trim_pages;          /* without the purger: dirty pages kept
                                        * beyond decay, twice the largest
                                        * block freed here, at least TRIM_FLOOR
                                        * (reclaim.c, zone_keep_pages) */
    uint64_t trimmed_at;               /* ms of the last trim */
    unsigned long takes;               /* blocks and ranges taken (allocations) */
    unsigned long takes_at_trim;       /* takes at the last trim */
    unsigned long trim_purged;         /* pages the last trim gave back */
    unsigned long grow_gen;            /* bumped whenever memory is added */
    struct vm_slice *partials;         /* partial slices, via zone_next */
    /* Growth: one thread at a time maps memory for the zone (taken
     * without the zone lock, before it). */
    lock_t grow_lock;
    struct vm_slice *partial;          /* (grow_lock) the partial slice that
                                        * grows in place next, or NULL */
    struct vm_slice *frontier;         /* (grow_lock; read unlocked as a hint)
                                        * the arena slice whose pages from
                                        * frontier_next on are not yet the
                                        * zone's (buddy.c, zone_grow_frontier) */
    size_t frontier_next;              /* (grow_lock, written under lock too) */
    uint8_t grow_mt;                   /* (grow_lock) the migratetype of the
                                        * request a growth is for */
    /* The purger's view (purge.c): every dirty block was freed at or before
     * dirtied_at (splits keep the parent's age, merges the oldest part's),
     * so once dirtied_at is decay_ms old, all of them are. */
    uint64_t dirtied_at;               /* ms of the last free that made dirty blocks */
    uint64_t fresh_drain_at;           /* ms of the last drain of the per-CPU lists before fresh memory (pcp.c),
                                        * or of page_init: at most one a FRESH_DRAIN_MS */
    unsigned long dirty_seq;           /* frees that made dirty blocks */
    unsigned long exact_blocks;        /* exact (large kmalloc) blocks in use, */
    unsigned long exact_pages;         /* and their pages; atomic stores */
    /* Blocks taken from the clean lists (not resident: RSS grows); an
     * atomic store, read unlocked by every malloc slow path
     * (page_clean_takes): on a line of its own, away from the fields each
     * free writes. */
    unsigned long clean_takes __attribute__((aligned(CACHE_LINE)));
    uint64_t zlc_full_until;           /* ms: the zonelist cache's "full" (node.c) */
    /* Grouping by mobility (atomic stores under the lock): requests served
     * from another migratetype's lists, and pageblocks they claimed. */
    unsigned long mt_fallbacks, mt_claims;
    /* Pageblocks of each type but the default (whose count is the rest
     * of the zone's): changed only by zone_set_pageblock. */
    unsigned long mt_pageblocks[MIGRATE_TYPES];
    /* sk_file pages of the zone (atomic; page_file_account): what its
     * dirty limit weighs (node.c, zone_dirty_ok). */
    unsigned long file_pages;
};

/* Per-CPU page lists: one per-CPU array per order 0..PCP_MAX_ORDER. */
struct pcp_set {
    cpu_arrays_t lists[PCP_NR_LISTS];  /* orders 0..PCP_MAX_ORDER, then PCP_EXACT */
    unsigned high[PCP_NR_LISTS];       /* array capacity: the high watermark */
    unsigned high_max[PCP_NR_LISTS];   /* ... and as far as tuning raises it */
    unsigned batch[PCP_NR_LISTS];      /* blocks moved per refill/drain */
};

extern struct zone page_zones[PAGE_NR_ZONES] SK_INTERNAL;

/* The node of a zone id (pg->node), and of a page. */
static inline unsigned zone_nid(unsigned zid)
{
    return zid >> 1;
}
static inline unsigned page_nid(const struct sk_page *pg)
{
    return zone_nid(pg->node);
}
/* Nodes in use (node.c): the system's (/sys/devices/system/node), or
 * numa_nodes=N's split of the CPU ids into N; CPU id -> node (the shared
 * slot of threads without an id: node 0). */
extern unsigned page_nr_nodes SK_INTERNAL;
extern bool page_nodes_real SK_INTERNAL;
extern uint8_t page_cpu_node[] SK_INTERNAL;
/* The node of the CPU this thread runs on (a hint: it may move). */
unsigned page_node_here(void);
/* The zone of `kind` of node nid. */
struct zone *zone_of_node(unsigned nid, unsigned kind);
/* Bind `bytes` of slice s to node nid's memory (real nodes only). */
struct vm_slice;
void page_node_bind(struct vm_slice *s, size_t bytes, unsigned nid);
/* Read the topology (page_init). */
void node_init(void);
/* Requests that went to another node than the caller's (relaxed). */
extern unsigned long page_node_fallbacks SK_INTERNAL;
/* CPU ids of each node (node_init). */
extern unsigned page_node_ncpus[PAGE_MAX_NODES] SK_INTERNAL;
/* Node nid's share of `amount` (pages of a budget, a mark, a limit): by
 * its CPU ids, as the kernel splits memory-wide figures over zones. */
unsigned long page_node_share(unsigned nid, unsigned long amount);
struct page_node_stats {
    unsigned long cpus;                /* CPU ids of the node */
    unsigned long managed_pages, free_pages, dirty_pages, used_pages;
    unsigned long charged_pages;       /* against the budget (zone_charged) */
    unsigned long file_pages, dirty_limit;   /* sk_file pages, and their limit (0: none) */
    bool full;                         /* in the zonelist cache now */
};
/* An sk_file page comes (+1) or goes (-1): counted in its zone. */
static inline void page_file_account(const struct sk_page *pg, long delta)
{
    __atomic_fetch_add(&page_zones[pg->node].file_pages, (unsigned long)delta, __ATOMIC_RELAXED);
}
/* Write requests that passed a node by for its dirty limit (relaxed). */
extern unsigned long page_dirty_skips SK_INTERNAL;
/* The nodes the calling thread's allocations may come from first (the
 * cpuset's role; node.c): its memory policy's nodes (MPOL_BIND,
 * MPOL_INTERLEAVE, MPOL_PREFERRED_MANY, with the system's nodes), else the
 * nodes of the CPUs its affinity allows.  Recomputed once a second at
 * most; *hard: a bind, which no fallback passes. */
struct page_allowed {
    uint8_t nodes;                     /* bit n: node n (0: not computed) */
    bool hard;
    uint64_t at;                       /* ms it was computed */
};
extern __thread struct page_allowed page_allowed __attribute__((tls_model("initial-exec"))) SK_INTERNAL;
unsigned page_allowed_nodes(bool *hard);
/* One node's figures (racy reads); zero for a node not in use. */
void page_node_stats(unsigned nid, struct page_node_stats *st);
extern struct pcp_set page_pcp SK_INTERNAL;

/* 0, or -1 with errno ENOMEM (the per-CPU page lists could not be
 * mapped); a later call tries again. */
int page_init(void);

/* Descriptor of the page containing p, or NULL when p is not slabkit's. */
static inline struct sk_page *page_of(const void *p)
{
    struct vm_slice *s = vm_slice_of(p);
    if (!s)
        return NULL;
    return (struct sk_page *)s->pages + (((uintptr_t)p >> SK_PAGE_SHIFT) & (SLICE_PAGES - 1));
}
/* Descriptor and slice in one step (the fast free path needs both). */
static inline struct sk_page *page_of_slice(struct vm_slice *s, const void *p)
{
    return (struct sk_page *)s->pages + (((uintptr_t)p >> SK_PAGE_SHIFT) & (SLICE_PAGES - 1));
}
/* The slice whose header holds descriptor pg. */
static inline struct vm_slice *page_slice(const struct sk_page *pg)
{
    return vm_header_of(pg);
}
static inline size_t page_index(const struct sk_page *pg)
{
    return (size_t)(pg - (const struct sk_page *)page_slice(pg)->pages);
}
static inline void *page_address(const struct sk_page *pg)
{
    return (void *)(page_slice(pg)->base + (page_index(pg) << SK_PAGE_SHIFT));
}

/* ---- seed 001's series, patch by patch (page.c, docs/shmem.md) ---- */

/* Each patch of the series' v1 posting (issue 36's list) whose code path
 * slabkit has: its bit in page_before restores the 3.15-rc1 form of that
 * path (page_microopt=0: all of them; page_before=NAME:NAME: these). */
enum page_patch {
    PATCH_ZLC_ACTIVE,        /*  1 zonelist cache updated only when active */
    PATCH_DIRTY_FULL,        /*  2 a zone over its dirty limit is not full */
    PATCH_BUDDY_ZONE_ID,     /*  5 zone id checked only for buddies */
    PATCH_DIRTY_ONCE,        /*  6 the dirty flags checked once a request */
    PATCH_NO_WATERMARKS,     /*  7 ALLOC_NO_WATERMARKS out of the fast path */
    PATCH_PAGEBLOCK_WORD,    /*  8 word-based pageblock bitmap access */
    PATCH_PFN_ONCE,          /*  9 page_to_pfn called fewer times */
    PATCH_FREE_MT_UNLOCKED,  /* 10 migratetype looked up before the lock on free */
    PATCH_SHMEM_GETPAGE,     /* 12 no atomic op in shmem_getpage_gfp */
    PATCH_RELEASE_PAGES,     /* 13 no atomic op releasing pages */
    PATCH_LRU_ADD,           /* 14 no needless atomic op adding to the LRU */
    PATCH_ACCESSED,          /* 15 mark accessed non-atomically in write_begin */
    PATCH_PREFETCH_FLAGS,    /* 16 prefetch page->flags in the page-cache lookup */
    PAGE_NR_PATCHES
};
/* Bit p set: patch p's before (read once at page_init). */
extern uint32_t page_before SK_INTERNAL;
static inline bool page_patch_before(enum page_patch p)
{
    return page_before & (1u << p);
}
/* The patches' names, as page_before takes them, and their numbers in
 * the v1 posting. */
extern const char *const page_patch_names[PAGE_NR_PATCHES] SK_INTERNAL;
extern const uint8_t page_patch_numbers[PAGE_NR_PATCHES] SK_INTERNAL;

/* ---- pageblock migratetypes (buddy.c, "Grouping by mobility") ---- */

/* page_grouping=1: requests keep to pageblocks of their migratetype.
 * Read once at page_init. */
extern bool page_grouping SK_INTERNAL;
/* A pageblock's type until a request of another claims it: movable with
 * grouping (the kernel's for memory as it joins a zone), else the one
 * type every request has. */
static inline unsigned pageblock_default_mt(void)
{
    return page_grouping ? MIGRATE_MOVABLE : MIGRATE_UNMOVABLE;
}
/* A request's type: its own with grouping, else unmovable (the kernel's
 * page_group_by_mobility_disabled). */
static inline unsigned page_request_mt(unsigned mt)
{
    return page_grouping ? mt : MIGRATE_UNMOVABLE;
}
/* The migratetype of pg's pageblock: one word read, a shift and a mask
 * (read unlocked: a type changing under the reader sends a block to the
 * other type's list, as in the kernel, never anywhere wrong). */
static inline unsigned pageblock_mt_at(const struct vm_slice *s, size_t idx)
{
    size_t pb = idx >> PAGEBLOCK_ORDER;
    if (unlikely(page_patch_before(PATCH_PAGEBLOCK_WORD))) {
        /* 3.15-rc1's get_pageblock_flags_group: a bit at a time. */
        const unsigned long *bits = (const unsigned long *)s->pageblock_bits;
        size_t bit = pb * PAGEBLOCK_BITS;
        unsigned flags = 0, value = 1;
        for (unsigned i = 0; i < 3; i++, value <<= 1)
            if (__atomic_load_n(&bits[(bit + i) / 64], __ATOMIC_RELAXED) & (1ul << ((bit + i) % 64)))
                flags |= value;
        return flags ^ pageblock_default_mt();
    }
    uint64_t w = __atomic_load_n(&s->pageblock_bits[pb / 16], __ATOMIC_RELAXED);
    return ((unsigned)(w >> (pb % 16 * PAGEBLOCK_BITS)) & 7u) ^ pageblock_default_mt();
}
/* The same from pg (its page index computed here). */
static inline unsigned pageblock_mt(const struct sk_page *pg)
{
    return pageblock_mt_at(page_slice(pg), page_index(pg));
}
/* Set it (the zone's lock held: a slice's pageblocks are one zone's). */
static inline void pageblock_set_mt(struct sk_page *pg, unsigned mt)
{
    struct vm_slice *s = page_slice(pg);
    size_t pb = page_index(pg) >> PAGEBLOCK_ORDER;
    unsigned shift = (unsigned)(pb % 16) * PAGEBLOCK_BITS, stored = mt ^ pageblock_default_mt();
    if (unlikely(page_patch_before(PATCH_PAGEBLOCK_WORD))) {
        /* 3.15-rc1's set_pageblock_flags_group: __set_bit or __clear_bit
         * a bit at a time. */
        unsigned long *bits = (unsigned long *)s->pageblock_bits;
        size_t bit = pb * PAGEBLOCK_BITS;
        for (unsigned i = 0, value = 1; i < 3; i++, value <<= 1) {
            unsigned long *w = &bits[(bit + i) / 64], m = 1ul << ((bit + i) % 64);
            unsigned long old = __atomic_load_n(w, __ATOMIC_RELAXED);
            __atomic_store_n(w, (stored & value) ? old | m : old & ~m, __ATOMIC_RELAXED);
        }
        return;
    }
    uint64_t w = __atomic_load_n(&s->pageblock_bits[pb / 16], __ATOMIC_RELAXED);
    w = (w & ~((uint64_t)0xf << shift)) | ((uint64_t)stored << shift);
    __atomic_store_n(&s->pageblock_bits[pb / 16], w, __ATOMIC_RELAXED);
}

/* Allocate a block of 2^order pages; NULL with errno ENOMEM.  page_alloc
 * is page_alloc_mt of MIGRATE_UNMOVABLE (slabs, metadata). */
struct sk_page *page_alloc(unsigned order);
struct sk_page *page_alloc_mt(unsigned order, unsigned mt);
void page_free(struct sk_page *pg, unsigned order);
/* Exactly nr_pages pages (the tail of the power-of-two block is freed);
 * the head gets PG_LARGE and nr_pages.  Aligned to 2^align_order pages. */
struct sk_page *page_alloc_exact(size_t nr_pages, unsigned align_order);
/* The same for a block a realloc grows into: placed best-fit from 64 KiB
 * up (buddy.c, EXACT_FIT_GROW_MIN_ORDER), as every block above 1 MiB is. */
struct sk_page *page_alloc_exact_grow(size_t nr_pages);
/* A large block of 2^PCP_MAX_ORDER pages through the per-CPU page lists,
 * as the kernel's kmalloc_large takes an order from the pcp lists: the
 * head gets PG_LARGE | PG_KBLOCK, nr_pages the whole block. */
struct sk_page *page_alloc_kblock(void);
/* A block off the order-PCP_MAX_ORDER list as a kblock (its order is
 * set: the list holds nothing else). */
static inline struct sk_page *kblock_head(struct sk_page *pg)
{
    pg_set_flags(pg, PG_HEAD | PG_LARGE | PG_KBLOCK | (pg_flags(pg) & PG_ZEROED));
    pg->large.nr_pages = (size_t)1 << PCP_MAX_ORDER;
    return pg;
}
/* The same from this CPU's list only: NULL when it is empty (or before
 * page_init), where page_alloc_kblock would refill it.  Inline: kmalloc's
 * 16-32 KiB take it as a class's object takes its array. */
static inline struct sk_page *page_kblock_cached(void)
{
    struct sk_page *pg = cpu_pop(page_pcp.lists[PCP_MAX_ORDER]);
    return pg ? kblock_head(pg) : NULL;
}
/* Free a block of page_alloc_exact or page_alloc_kblock. */
void page_free_exact(struct sk_page *pg);
/* An exact block (or one off the exact-block cache) back to its zone,
 * past the cache. */
void page_free_run(struct sk_page *pg);
/* The exact-block cache (pcp.c, page_alloc_exact): the largest block it
 * keeps, and this CPU's cached block when it has nr_pages, else NULL; a
 * block of another count goes to its zone, so the cut that follows may
 * reuse its pages. */
#define EXACT_CACHE_PAGES 64
static inline struct sk_page *page_exact_cached(size_t nr_pages)
{
    struct sk_page *pg = cpu_pop(page_pcp.lists[PCP_EXACT]);
    if (!pg)
        return NULL;
    if (likely(pg->large.nr_pages == nr_pages)) {
        pg_set_flags(pg, PG_HEAD | PG_LARGE);
        return pg;
    }
    page_free_run(pg);
    return NULL;
}
/* Grow or shrink an exact block in place; false when it cannot grow (a
 * kblock: true while nr_pages fits in it). */
bool page_resize_exact(struct sk_page *pg, size_t nr_pages);
/* Exact blocks in use and their pages, counted under the zone lock the
 * calls above take anyway (read unlocked: a snapshot); those freed onto
 * the per-CPU exact-block cache are not in use. */
void page_exact_stats(unsigned long *blocks, unsigned long *pages);
/* The allocated block head containing p (PG_HEAD), or NULL. */
struct sk_page *page_find_head(const void *p);

/* Return memory: blocks free for longer than age_ms go back to the OS
 * (age 0: everything); pcp lists are drained first when `drain`.
 * Returns bytes returned. */
size_t page_reclaim(uint64_t age_ms, bool drain);
/* Give back what a CPU's page lists hold. */
void page_drain_pcp(void);
/* Give wholly free slices back to the OS (vm_slice_release): partial
 * slices whose mapped part is all free, and, when `arena`, arena slices
 * that are one free block (they become holes in the arena).  The per-CPU
 * page lists are drained first.  Returns bytes of address space released.
 * After an allocation failed: memory one zone holds free may then serve
 * the other. */
size_t page_release_free(bool arena);

struct page_stats {
    unsigned long managed_pages, free_pages, dirty_pages, pcp_pages, purged_pages;
    unsigned long free_blocks[SK_MAX_ORDER + 1];
    /* The purger: wake-ups by a free (nothing -> something), ticks run,
     * pages it purged (also in purged_pages), blocks drained from idle
     * per-CPU lists. */
    unsigned long purger_wakeups, purger_ticks, purger_pages, purger_drained;
    /* Times the per-CPU lists went back to the zone before a request
     * would have taken never-used memory (pcp.c, zone_drain_before_fresh). */
    unsigned long pcp_fresh_drains;
    /* Times a request that would have taken never-used memory emptied
     * this CPU's lists of the other orders instead (within
     * FRESH_DRAIN_MS of the last drain of every CPU's), and the blocks. */
    unsigned long pcp_local_empties, pcp_local_blocks;
    /* Times a per-CPU list's high watermark doubled (pcp.c, pcp_tune). */
    unsigned long pcp_grows;
    /* Grouping by mobility: free pages on each migratetype's lists,
     * pageblocks of each type (the kernel's /proc/pagetypeinfo), requests
     * served from another type's lists, and pageblocks they claimed. */
    unsigned long mt_free_pages[MIGRATE_TYPES], mt_pageblocks[MIGRATE_TYPES];
    unsigned long mt_fallbacks, mt_claims;
};
void page_stats(struct page_stats *st);
/* Blocks the zones have taken that were not resident (fresh or purged
 * memory): a hint, read unlocked, that the slab layer polls to give back
 * what idle caches keep before the heap grows further (slab_reap_poll).
 * The large blocks' zone counts too: what idle caches give back, it can
 * borrow (buddy.c, zone_borrow). */
/* Free pages in the zones (racy reads: a hint). */
static inline unsigned long page_free_hint(void)
{
    unsigned long n = 0;
    for (int z = 0; z < PAGE_NR_ZONES; z++)
        n += __atomic_load_n(&page_zones[z].free_pages, __ATOMIC_RELAXED);
    return n;
}

static inline unsigned long page_clean_takes(void)
{
    return __atomic_load_n(&page_zones[0].clean_takes, __ATOMIC_RELAXED) +
           __atomic_load_n(&page_zones[1].clean_takes, __ATOMIC_RELAXED);
}
/* Walk every free block (tests): fn(address, order, clean). */
void page_for_each_free(void (*fn)(void *addr, unsigned order, bool clean, void *arg), void *arg);

void page_atfork_child(void);

/*
 * The purger (purge.c): a background thread that returns free memory
 * idle for decay_ms even when the program never calls the allocator
 * again.  It is started lazily from a *malloc* slow path that holds no
 * slabkit lock (pthread_create may call malloc): page_purger_poll() marks
 * those places, and starts it once a zone has dirty free blocks or the
 * zones have PURGER_EAGER_PAGES in use (a heap big enough for idle memory to
 * matter; the thread then sleeps until there is work).  Never from free:
 * glibc frees a dead thread's TLS while holding its stack-cache lock
 * (pthread_join -> __nptl_free_stacks -> free), and pthread_create takes
 * that lock, so a free that started the thread deadlocked (bench/aim7
 * with 2000 threads hung about one run in two).  `state` is PURGER_NONE
 * until then (and again in a forked child), PURGER_STARTING while
 * pthread_create runs (a malloc inside it must not start another),
 * PURGER_RUNNING after, PURGER_OFF with background=0 or when the thread
 * could not be made.  `work` is the futex word the thread sleeps on:
 * 0 nothing to purge, 1 something (set by the free that finds it 0).
 */
enum { PURGER_NONE, PURGER_STARTING, PURGER_RUNNING, PURGER_OFF };
struct page_purger {
    uint32_t state;
    uint32_t work;
    unsigned long wakeups, ticks, pages, drained;   /* statistics (relaxed) */
};
extern struct page_purger page_purger SK_INTERNAL;
void page_purger_start(void);
#define PURGER_EAGER_PAGES ((16ul << 20) >> SK_PAGE_SHIFT)
/* Whether the purger should start now (state NONE). */
bool page_purger_wanted(void);
/* An upper layer's pass over what it keeps idle (the kernel's shrinkers,
 * one of them: the slab layer's idle-cache reaper), run by the purger at
 * the start of each tick with no page-allocator lock held; it returns
 * whether it may have more to give back later, which keeps the purger
 * ticking.  Set once, at the upper layer's init. */
void page_set_idle_pass(bool (*fn)(void));
/* Call from malloc paths where no slabkit lock is held (never from free):
 * starts the thread if it is wanted, and only in a process that has
 * threads of its own (os_threaded): a single-threaded program stays so,
 * and its free memory goes back from the slow paths (reclaim.c, "Returning
 * memory without a thread"). */
void page_purger_poll_slow(void);
static inline void page_purger_poll(void)
{
    if (unlikely(__atomic_load_n(&page_purger.state, __ATOMIC_RELAXED) == PURGER_NONE))
        page_purger_poll_slow();
}
/* Whether the purger thread runs in this process. */
static inline bool page_purger_running(void)
{
    return __atomic_load_n(&page_purger.state, __ATOMIC_RELAXED) == PURGER_RUNNING;
}

/* ---- the memory budget and its watermarks (budget.c) ---- */

enum { PAGE_WMARK_MIN, PAGE_WMARK_LOW, PAGE_WMARK_HIGH, PAGE_NR_WMARKS };
/* A thread's allocation context (page_alloc_ctx): the kernel's alloc
 * flags, as gfp sets them (the kernel API's gfp_to_alloc_flags). */
#define PAGE_ALLOC_HIGH          0x1u   /* __GFP_HIGH: half the min reserve */
#define PAGE_ALLOC_HARDER        0x2u   /* GFP_ATOMIC: a quarter of the rest too */
#define PAGE_ALLOC_NO_WATERMARKS 0x4u   /* the reclaimer, __GFP_MEMALLOC: up to the limit */
#define PAGE_ALLOC_NORECLAIM     0x8u   /* no __GFP_DIRECT_RECLAIM: fail rather than reclaim */
#define PAGE_ALLOC_MOVABLE       0x10u  /* __GFP_MOVABLE: sk_alloc_pages' migratetype */
#define PAGE_ALLOC_RECLAIMABLE   0x20u  /* __GFP_RECLAIMABLE */
#define PAGE_ALLOC_WRITE         0x40u  /* __GFP_WRITE: an sk_file page for a write (dirty limits) */
extern __thread unsigned page_alloc_ctx __attribute__((tls_model("initial-exec"))) SK_INTERNAL;
/* Set the context for an allocation; returns the one to restore. */
static inline unsigned page_ctx_enter(unsigned flags)
{
    unsigned old = page_alloc_ctx;
    page_alloc_ctx = flags;
    return old;
}
static inline void page_ctx_exit(unsigned old)
{
    page_alloc_ctx = old;
}

struct page_budget {
    unsigned long limit;                /* pages; 0: no budget (the one word tested) */
    unsigned long wmark[PAGE_NR_WMARKS];   /* headroom marks, pages */
    unsigned long direct_pages;         /* kmalloc's direct mappings, charged */
    uint32_t kswapd_wanted;             /* the purger is asked to reclaim to high */
    bool hard;                          /* refuse past the mark (mem_limit_mb); else the cgroup's: overrun */
    /* statistics (relaxed) */
    unsigned long kswapd_wakes, kswapd_runs, kswapd_pages;
    unsigned long direct_reclaims, direct_pages_reclaimed, below_min, refused, overruns;
};
extern struct page_budget page_budget SK_INTERNAL;
/* From mem_limit_mb, or the cgroup's limit (page_init). */
void budget_init(void);
/* Set the budget to `bytes` (0: none) and its watermarks; hard: refuse
 * past the mark, else only reclaim (the cgroup's limit). */
void page_budget_set(unsigned long long bytes, bool hard);
/* Pages charged against the budget (racy reads: a snapshot). */
unsigned long page_charged(void);
/* Whether a request of `pages` that may grow the resident memory may go
 * on (budget.c has the rules: wakes the purger below low, reclaims
 * directly below the context's mark).  No page-allocator lock held. */
bool page_budget_admit(unsigned long pages);
/* With a budget: whether `pages` more would leave the headroom below
 * watermark `wmark`. */
bool page_budget_below(unsigned wmark, unsigned long pages);
/* Whether node nid is below its low mark after `pages` more: under a
 * budget, its headroom against its share of it (by CPUs); false without
 * a budget. */
bool page_node_below_low(unsigned nid, unsigned long pages);
/* kmalloc's direct mappings: pages mapped (+) or unmapped (-); returns
 * the pages of all of them now (the one count: kmalloc's statistics read
 * it too). */
long page_budget_direct(long pages);
/* How many of n blocks of `order` a per-CPU refill may take under a
 * budget: n while the batch leaves headroom at or above low, else one if
 * page_budget_admit grants it, else none. */
unsigned page_budget_blocks(unsigned n, unsigned order);
static inline long page_direct_pages(void)
{
    return (long)__atomic_load_n(&page_budget.direct_pages, __ATOMIC_RELAXED);
}
static inline bool page_budget_on(void)
{
    return __atomic_load_n(&page_budget.limit, __ATOMIC_RELAXED) != 0;
}
/* An upper layer's reclaim under budget pressure (the kernel's
 * shrinkers): fn(nr) gives back what it can, about nr pages, and returns
 * the pages it freed (an estimate).  Run by the purger, with no lock
 * held, when the headroom is below low. */
void page_register_shrinker(unsigned long (*fn)(unsigned long nr));
/* Run every shrinker for about nr pages (the caller holds no lock);
 * returns the pages they freed.  Allocations they make may use the
 * reserve (PAGE_ALLOC_NO_WATERMARKS) and never reclaim. */
unsigned long page_run_shrinkers(unsigned long nr);
/* The purger's kswapd pass: if asked, reclaim until headroom is back at
 * high. */
void budget_background(void);

#endif
