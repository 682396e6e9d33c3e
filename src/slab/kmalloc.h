/*
 * kmalloc.h — kmalloc's size classes: the tables malloc's fast path
 * indexes (class by size, each class's per-CPU arrays), large blocks, and
 * kmalloc.c's slow paths.
 */
#ifndef SK_KMALLOC_H
#define SK_KMALLOC_H

#include "slab/slab_fast.h"

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
