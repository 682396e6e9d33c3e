/*
 * kmalloc.c — size classes, the sk_malloc family, and large blocks.
 *
 * Classes: kmalloc-8, then multiples of 16 up to 128 (every class from 16
 * up is 16-byte aligned, as malloc must be), then four classes per
 * doubling up to 16 KiB, so internal waste above 128 bytes stays under
 * 25%.  Sizes up to 1024 find their class with one table load, larger ones
 * with one more (kmalloc_mid_index).  Above 16 KiB the page allocator
 * serves, as the kernel's kmalloc_large does above two pages: 16-32 KiB is
 * a 32 KiB block from the per-CPU page lists (a class of one object a slab
 * kept its own slabs, arrays and partial lists, memory no other size could
 * use, while the per-CPU page lists serve every order-3 request and drain
 * to the zone before it takes fresh memory); beyond 32 KiB, exactly the
 * pages needed (the tail of its power-of-two block goes back at once), or
 * a quarter more, placed best-fit, for a block realloc moves a growing
 * buffer into (kmalloc_large_grow);
 * beyond the largest buddy order (64 MiB), a direct mapping of whole
 * slices, still known to the page map.
 *
 * Invariants: before slab_init() every fast-path table entry points at
 * per-CPU arrays that are always empty, so the first allocation takes the
 * slow path, which initialises slabkit and starts over.  An initialisation
 * the OS refuses memory for fails (NULL, ENOMEM) and the next slow path
 * tries again, keeping the caches already built; the tables are filled
 * only once every class has its cache.
 *
 * Large blocks above 32 KiB are counted for mallinfo2's hblks/hblkhd (as
 * glibc counts its mmapped chunks; a 16-32 KiB block is arena memory in
 * use, uordblks): exact blocks by
 * the page allocator under the zone lock it takes anyway, direct mappings
 * here (relaxed atomics); kmalloc_large_totals adds them.  A block of at least kmalloc_direct_min bytes (mallopt
 * M_MMAP_THRESHOLD; by default only what no buddy order holds) is a direct
 * mapping, unmapped when freed.
 *
 * Sized frees (free_sized, sized operator delete) trust the size to name
 * the class, so realloc keeps an object in place only while its new size
 * still maps to the object's class: every object of a kmalloc cache was
 * asked for with a size of that cache's class, as the size names it.
 *
 * Out of memory is never fatal: a failed allocation shrinks every cache
 * and gives wholly free slices back to the OS (slab_release_all), so that
 * memory freed in one zone (slabs) can serve the other (large blocks) and
 * the reverse, then retries once before returning NULL with ENOMEM.
 */
#include <errno.h>
#include <string.h>

#include "slab/kmalloc.h"

static const uint32_t class_sizes[] = {
    8, 16, 32, 48, 64, 80, 96, 112, 128,
    160, 192, 224, 256, 320, 384, 448, 512,
    640, 768, 896, 1024, 1280, 1536, 1792, 2048,
    2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192,
    10240, 12288, 14336, 16384,
};
_Static_assert(KMALLOC_MAX_CACHE_SIZE == 16384, "the last class is KMALLOC_MAX_CACHE_SIZE");
_Static_assert(SK_ARRAY_SIZE(class_sizes) < KMALLOC_NR_CLASSES, "too many classes (the last slot stays empty)");

struct slab_cache *kmalloc_caches[KMALLOC_NR_CLASSES];
cpu_arrays_t kmalloc_arrays[KMALLOC_NR_CLASSES] = { [0 ... KMALLOC_NR_CLASSES - 1] = cpu_empty_arrays };
/* Until kmalloc_init fills it, every entry names a slot past the last class,
 * whose arrays stay empty: a thread that reads an entry while another
 * thread initialises takes the slow path, which waits for the init. */
uint8_t kmalloc_small_index[KMALLOC_SMALL_MAX / 8 + 1] = {
    [0 ... KMALLOC_SMALL_MAX / 8] = KMALLOC_NR_CLASSES - 1
};
/* Above KMALLOC_SMALL_MAX every class is a multiple of 256 (SLUB's four
 * per doubling, SLAB's powers of two): (size - 1) >> 8 picks the class in
 * one load, as the small table does, instead of a search. */
uint8_t kmalloc_mid_index[KMALLOC_MAX_CACHE_SIZE >> KMALLOC_MID_SHIFT] = {
    [0 ... (KMALLOC_MAX_CACHE_SIZE >> KMALLOC_MID_SHIFT) - 1] = KMALLOC_NR_CLASSES - 1
};
cpu_arrays_t kmalloc_arrays16[KMALLOC_SMALL_MAX / 16 + 1] = {
    [0 ... KMALLOC_SMALL_MAX / 16] = cpu_empty_arrays
};
uint32_t kmalloc_class_size[KMALLOC_NR_CLASSES];
unsigned kmalloc_nr_classes;
/* Direct mappings in use (a relaxed atomic); their pages are counted by
 * the page layer, whose memory budget charges them (page_budget_direct). */
static long direct_blocks;
static long direct_max_blocks, direct_max_pages;   /* their peaks (malloc_stats' "max mmap") */
size_t kmalloc_direct_min = KMALLOC_DIRECT_DEFAULT;

static void peak_note(long *peak, long now)
{
    long p = __atomic_load_n(peak, __ATOMIC_RELAXED);
    while (now > p && !__atomic_compare_exchange_n(peak, &p, now, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

static void direct_count(long blocks, long pages)
{
    long b = __atomic_add_fetch(&direct_blocks, blocks, __ATOMIC_RELAXED);
    long p = page_budget_direct(pages);
    if (blocks > 0) {
        peak_note(&direct_max_blocks, b);
        peak_note(&direct_max_pages, p);
    }
}

void kmalloc_large_totals(struct kmalloc_large_stats *st)
{
    unsigned long blocks, pages;
    page_exact_stats(&blocks, &pages);
    st->direct_pages = page_direct_pages();
    st->blocks = (long)blocks + __atomic_load_n(&direct_blocks, __ATOMIC_RELAXED);
    st->pages = (long)pages + st->direct_pages;
    st->direct_max_blocks = __atomic_load_n(&direct_max_blocks, __ATOMIC_RELAXED);
    st->direct_max_pages = __atomic_load_n(&direct_max_pages, __ATOMIC_RELAXED);
}

/* What the fast-path tables point at: the cache's arrays, or with
 * sheaves=0 the always-empty set, so malloc goes straight to the slow path,
 * which runs the cache's own freelist fast path (slub_cpu.c); a slub_debug
 * cache's too (its own arrays stay at capacity 0 as well). */
static cpu_arrays_t table_arrays(struct slab_cache *c)
{
    return c->slots || c->mode == SLAB_MODE_DEBUG ? cpu_empty_arrays : slab_arrays(c);
}

/* malloc's table (kmalloc_arrays16): each entry at its 16-byte-aligned
 * class's arrays, or all at the always-empty set (KFENCE's diversion). */
static void tables16_point(bool empty)
{
    for (unsigned i = 0; i <= KMALLOC_SMALL_MAX / 16; i++) {
        size_t size = i ? (size_t)i * 16 : 16;
        __atomic_store_n(&kmalloc_arrays16[i],
                         empty ? cpu_empty_arrays : table_arrays(kmalloc_caches[kmalloc_small_index[size >> 3]]),
                         __ATOMIC_RELEASE);
    }
}

int kmalloc_init(void)
{
    /* allocator=slab has SLAB's classes (powers of two, 96, 192) and the
     * kernel's alignment for them (slab_classic.c). */
    bool slab = sk_opt.allocator == SK_ALLOC_SLAB;
    const uint32_t *sizes = slab ? slab_classic_kmalloc_sizes : class_sizes;
    kmalloc_nr_classes = slab ? slab_classic_kmalloc_nr : SK_ARRAY_SIZE(class_sizes);
    for (unsigned i = 0; i < kmalloc_nr_classes; i++) {
        if (kmalloc_caches[i])
            continue;     /* built by an earlier attempt */
        char name[SLAB_NAME_LEN];
        uint32_t size = sizes[i];
        /* Natural alignment: the largest power of two dividing the size,
         * up to a page, so aligned_alloc can use ordinary classes. */
        size_t align = (size_t)1 << __builtin_ctz(size);
        if (align > SK_PAGE_SIZE)
            align = SK_PAGE_SIZE;
        if (slab)
            align = slab_classic_kmalloc_align(size);
        os_name(name, sizeof name, "kmalloc-", (long)size);
        kmalloc_class_size[i] = size;
        struct slab_cache *c = slab_cache_create(name, size, align, 0, NULL, true);
        /* Published by an earlier attempt that did not get to store it
         * here: a fork child of a thread caught between the two (a cache
         * is published whole, last, under cache_lock).  Without this the
         * child's every allocation failed with ENOMEM, for good
         * (tests/malloc/fork_mid_init, about one run in twenty). */
        if (!c && errno == EEXIST)
            c = slab_cache_find(name);
        if (!c)
            return -1;
        __atomic_store_n(&kmalloc_caches[i], c, __ATOMIC_RELEASE);
        __atomic_store_n(&kmalloc_arrays[i], table_arrays(c), __ATOMIC_RELEASE);
    }
    unsigned cls = 0;
    for (unsigned i = 0; i <= KMALLOC_SMALL_MAX / 8; i++) {
        size_t size = (size_t)i * 8;
        while (sizes[cls] < size)
            cls++;
        __atomic_store_n(&kmalloc_small_index[i], (uint8_t)cls, __ATOMIC_RELAXED);
    }
    for (unsigned i = KMALLOC_SMALL_MAX >> KMALLOC_MID_SHIFT; i < (KMALLOC_MAX_CACHE_SIZE >> KMALLOC_MID_SHIFT); i++) {
        size_t size = ((size_t)i + 1) << KMALLOC_MID_SHIFT;   /* the bucket's largest size */
        while (sizes[cls] < size)
            cls++;
        __atomic_store_n(&kmalloc_mid_index[i], (uint8_t)cls, __ATOMIC_RELAXED);
    }
    /* Size 0 gets the smallest malloc-aligned class, like glibc. */
    __atomic_store_n(&kmalloc_small_index[0], 1, __ATOMIC_RELAXED);
    tables16_point(false);
    return 0;
}

void kmalloc_tables_divert(bool divert)
{
    for (unsigned i = 0; i < kmalloc_nr_classes; i++)
        if (kmalloc_class_size[i] <= KFENCE_MAX_SIZE)
            __atomic_store_n(&kmalloc_arrays[i], divert ? cpu_empty_arrays : table_arrays(kmalloc_caches[i]),
                             __ATOMIC_RELEASE);
    tables16_point(divert);
}

/* ---- large blocks ---- */

/* Whether a block of `size` bytes, `pages` pages, is one of the page
 * allocator's exact blocks rather than a direct mapping. */
static inline bool exact_block_size(size_t size, size_t pages)
{
    return pages <= ((size_t)1 << SK_MAX_ORDER) && size < __atomic_load_n(&kmalloc_direct_min, __ATOMIC_RELAXED);
}

void *kmalloc_large(size_t size, size_t align)
{
    size_t pages = (size + SK_PAGE_SIZE - 1) >> SK_PAGE_SHIFT;
    if (size > PTRDIFF_MAX || pages == 0) {
        errno = ENOMEM;
        return NULL;
    }
    unsigned align_order = 0;
    while ((SK_PAGE_SIZE << align_order) < align)
        align_order++;
    if (align_order <= PCP_MAX_ORDER && kblock_size(size)) {
        struct sk_page *pg = page_alloc_kblock();
        return pg ? page_address(pg) : NULL;
    }
    if (exact_block_size(size, pages) && align_order <= SK_MAX_ORDER) {
        struct sk_page *pg = page_alloc_exact(pages, align_order);   /* counted there */
        if (!pg)
            return NULL;
        return page_address(pg);
    }
    if (align > SLICE_SIZE) {
        /* A valid alignment slabkit cannot give (direct runs are aligned
         * to a 64 MiB slice): POSIX says EINVAL only for a bad one. */
        errno = ENOMEM;
        return NULL;
    }
    /* Slices the zones hold wholly free go back to the arena first, where
     * the block can take them, rather than new address space beside them
     * (a program that freed 1 GiB of small objects asks for 1 GiB). */
    if (page_free_hint() >= pages)
        page_release_free(true);
    if (unlikely(page_budget_on()) && !page_budget_admit(pages)) {
        errno = ENOMEM;
        return NULL;
    }
    struct vm_slice *s = vm_direct_new(pages << SK_PAGE_SHIFT, sizeof(struct sk_page));
    if (!s)
        return NULL;
    struct sk_page *pg = (struct sk_page *)s->pages;
    pg->large.nr_pages = pages;
    __atomic_store_n(&pg->flags, PG_HEAD | PG_LARGE | PG_ZEROED, __ATOMIC_RELEASE);
    direct_count(1, (long)pages);
    return (void *)s->base;
}

/* Why p cannot be freed: never returns. */
static __attribute__((noreturn)) void bad_pointer(const void *p, const char *call)
{
    struct vm_slice *s = vm_slice_of(p);
    /* Past a partial slice's mapped prefix the address space is anyone's. */
    if (!s || !vm_slice_maps(s, p))
        os_fatal("invalid pointer: %s(%p) is not slabkit's", call, p);
    if (s->kind == VM_SLICE_DIRECT)
        os_fatal("interior pointer: %s(%p) in a %zu-byte mapping at %p", call, p, s->size, (void *)s->base);
    struct sk_page *pg = page_of_slice(s, p);
    if (pg->flags & PG_SLAB) {
        struct slab_cache *c = pg->slab.cache;
        uint32_t idx = slab_obj_index(c, pg, p);
        if ((const char *)p < pg->slab.s_mem || idx >= c->objects)
            os_fatal("invalid pointer: %s(%p) in %s, outside any object", call, p, c->name);
        slab_check_fresh(p, call);
        slab_bad_free("interior pointer", call, p, c, pg->slab.s_mem + (size_t)idx * c->size);
    }
    struct sk_page *head = page_find_head(p);
    if (head && (head->flags & PG_LARGE))
        os_fatal("interior pointer: %s(%p) in a %zu-page block at %p", call, p,
                 (size_t)head->large.nr_pages, page_address(head));
    if (head)
        os_fatal("invalid pointer: %s(%p) is a page block, not from malloc", call, p);
    if (page_address(pg) == p && (pg->flags & (PG_BUDDY | PG_PCP)))
        os_fatal("double free: %s(%p) of a free block", call, p);
    os_fatal("invalid pointer: %s(%p) points into free memory (double free?)", call, p);
}

void kmalloc_free_nonslab(void *p, const char *call)
{
    if (unlikely(kfence_addr(p))) {
        kfence_free(p, call);
        return;
    }
    struct vm_slice *s = vm_slice_of(p);
    if (s && s->kind == VM_SLICE_DIRECT) {
        struct sk_page *pg = (struct sk_page *)s->pages;
        if ((uintptr_t)p != s->base || !(pg->flags & PG_LARGE))
            bad_pointer(p, call);
        direct_count(-1, -(long)pg->large.nr_pages);
        pg_set_flags(pg, 0);
        vm_direct_free(s);
        return;
    }
    if (s) {
        struct sk_page *pg = page_of_slice(s, p);
        if ((pg->flags & (PG_HEAD | PG_LARGE)) == (PG_HEAD | PG_LARGE) && page_address(pg) == p) {
            page_free_exact(pg);
            return;
        }
    }
    if (slab_debug_bad_pointer(p, call))
        return;           /* debug_continue: reported, not freed */
    bad_pointer(p, call);
}

size_t kmalloc_usable_nonslab(const void *p, const char *call)
{
    if (unlikely(kfence_addr(p)))
        return kfence_size(p, call);
    struct vm_slice *s = vm_slice_of(p);
    if (s && s->kind == VM_SLICE_DIRECT) {
        struct sk_page *pg = (struct sk_page *)s->pages;
        if ((uintptr_t)p == s->base && (pg->flags & PG_LARGE))
            return pg->large.nr_pages << SK_PAGE_SHIFT;
    } else if (s) {
        struct sk_page *pg = page_of_slice(s, p);
        if ((pg->flags & (PG_HEAD | PG_LARGE)) == (PG_HEAD | PG_LARGE) && page_address(pg) == p)
            return pg->large.nr_pages << SK_PAGE_SHIFT;
    }
    if (slab_debug_bad_pointer(p, call))
        return 0;
    bad_pointer(p, call);
}

/* ---- the sk_malloc family ---- */

static void *kmalloc_any(size_t size)
{
    if (size <= KMALLOC_MAX_CACHE_SIZE) {
        struct slab_cache *c = kmalloc_caches[kmalloc_index(size)];
        if (unlikely(c->mode == SLAB_MODE_DEBUG))
            return slab_debug_alloc(c, size);   /* keeps the requested size */
        return slab_alloc(c);
    }
    return kmalloc_large(size, 0);
}

SK_NOINLINE void *kmalloc_slow(size_t size)
{
    /* Above the classes, sk_malloc and malloc_inline have tried this CPU's
     * page lists already (kmalloc_large_fast), as they try a class's
     * array: what follows (the polls, a refill or a cut) runs when those
     * had nothing.  Before init the lists are always-empty ones.  errno
     * is the caller's again when this succeeds (os_errno_restore). */
    int saved = errno;
    if (unlikely(slab_init() != 0))
        return NULL;
    page_purger_poll();   /* no lock held here: the purger may start, */
    slab_reap_poll();     /* and idle caches give back what they keep */
    if (unlikely(sk_opt.kfence)) {
        void *k = kfence_poll(size);   /* armed: this one is sampled */
        if (k)
            return os_errno_restore(k, saved);
    }
    void *p = kmalloc_any(size);
    /* Out of memory: every cache gives back what it keeps, and one more
     * try (the kernel's direct reclaim), unless the caller's context
     * forbids reclaim (the kernel API's GFP_NOWAIT, GFP_ATOMIC). */
    if (unlikely(!p) && size < ((size_t)1 << VM_ADDR_BITS) && !(page_alloc_ctx & PAGE_ALLOC_NORECLAIM)) {
        slab_release_all();
        p = kmalloc_any(size);
    }
    return os_errno_restore(p, saved);
}

void *sk_malloc(size_t size)
{
    if (likely(size <= KMALLOC_SMALL_MAX)) {
        void *obj;
        unsigned i = __atomic_load_n(&kmalloc_small_index[(size + 7) >> 3], __ATOMIC_RELAXED);
        if (likely(cpu_pop_fast(__atomic_load_n(&kmalloc_arrays[i], __ATOMIC_ACQUIRE), &obj))) {
            /* The free marker (slab_fast.h): word 1, or word 0 of kmalloc-8. */
            ((uintptr_t *)obj)[size - 1 >= 8] = 0;
            return obj;
        }
    } else if (likely(size <= KMALLOC_MAX_CACHE_SIZE)) {
        void *obj = kmalloc_mid_fast(size);   /* 1-16 KiB: one table load too */
        if (likely(obj))
            return obj;
    } else {
        void *obj = kmalloc_large_fast(size);   /* 16-256 KiB: this CPU's page lists */
        if (likely(obj))
            return obj;
    }
    return kmalloc_slow(size);
}

SK_NOINLINE void sk_free_slow(void *p, const char *call)
{
    if (p)
        kmalloc_free_nonslab(p, call);
}

SK_NOINLINE void slab_free_checked(void *p, const char *call)
{
    kfree_call(p, call);
}

void sk_free(void *p)
{
    kfree_inline(p);
}

/* What a user may use of an object of c: the stride, unless a
 * constructor's free pointer follows the object; with slub_debug, the
 * size it was asked for (the rest is red zone). */
static inline size_t slab_usable(const struct slab_cache *c)
{
    return c->offset ? c->object_size : c->size;
}

static inline size_t slab_usable_of(struct slab_cache *c, const void *obj)
{
    if (unlikely(c->mode == SLAB_MODE_DEBUG))
        return slab_debug_usable(c, obj);
    return slab_usable(c);
}

size_t kmalloc_good_size(size_t size)
{
    /* The class's usable size, from the caches themselves: allocator=slab
     * has other classes, and strides wider than the class (kmalloc-96 of
     * 128-byte objects). */
    if (size <= KMALLOC_MAX_CACHE_SIZE) {
        if (slab_init() != 0)
            return size;
        struct slab_cache *c = kmalloc_caches[kmalloc_index(size)];
        return c->mode == SLAB_MODE_DEBUG ? size : slab_usable(c);
    }
    if (kblock_size(size))
        return KMALLOC_KBLOCK_SIZE;
    size_t r = SK_ALIGN_UP(size, SK_PAGE_SIZE);
    return r < size ? size : r;
}

size_t sk_usable_size(const void *p)
{
    struct slab_cache *c;
    if (!p)
        return 0;
    if (slab_of_object(p, &c))
        return slab_usable_of(c, p);
    return kmalloc_usable_nonslab(p, "malloc_usable_size");
}

static bool known_zero(const void *p)
{
    struct vm_slice *s = vm_slice_of(p);
    if (!s)
        return false;
    if (s->kind == VM_SLICE_DIRECT)
        return true;
    struct sk_page *pg = page_of_slice(s, p);
    return (pg->flags & (PG_LARGE | PG_ZEROED)) == (PG_LARGE | PG_ZEROED);
}

void *sk_calloc(size_t nmemb, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    /* An object from this CPU's array: one from a slab made on zero pages
     * and never handed out (its marker says so) is zero but for its free
     * pointer and marker, words 0 and 1; anything else is cleared whole. */
    if (likely(total - 16 <= KMALLOC_MAX_CACHE_SIZE - 16)) {
        unsigned i = kmalloc_fast_index(total);
        uintptr_t *obj;
        if (likely(cpu_pop_fast(__atomic_load_n(&kmalloc_arrays[i], __ATOMIC_ACQUIRE), (void **)&obj))) {
            if (obj[1] == SLAB_FRESH_ZERO_KEY)
                obj[0] = obj[1] = 0;
            else
                memset(obj, 0, slab_usable(kmalloc_caches[i]));   /* the marker with the rest */
            return obj;
        }
    }
    void *p = sk_malloc(total);
    if (!p)
        return NULL;
    /* The whole usable size, as glibc: a program may use all of what
     * malloc_usable_size reports.  Large blocks fresh from the OS are
     * zero already. */
    struct slab_cache *c;
    if (slab_of_object(p, &c))
        memset(p, 0, slab_usable_of(c, p));
    else if (!known_zero(p))
        memset(p, 0, kmalloc_usable_nonslab(p, "calloc"));
    return p;
}

#define REALLOC_COLD_MIN 1024

/*
 * The block a realloc moves a buffer into when it outgrows 32 KiB: a
 * quarter more pages than asked, placed best-fit (page_alloc_exact_grow).
 * A buffer grown a few bytes at a time then moves once per quarter of
 * growth, not whenever the pages after it are taken, and its block sits
 * in the tightest hole, not at the head of a buddy block whose tail the
 * next request of any size takes (bench/peers realloc_grow's peak;
 * best fit without the headroom moved every buffer at every page and
 * took longer: docs/design.md).  NULL when the size is not
 * an exact block's, or on failure: the caller's sk_malloc then decides.
 */
static void *kmalloc_large_grow(size_t size)
{
    size_t want = size + size / 4;
    size_t pages = (want + SK_PAGE_SIZE - 1) >> SK_PAGE_SHIFT;
    if (want < size || !exact_block_size(want, pages))
        return NULL;
    struct sk_page *pg = page_alloc_exact_grow(pages);
    return pg ? page_address(pg) : NULL;
}

static void *realloc_any(void *p, size_t size)
{
    if (!p)
        return sk_malloc(size);
    if (size == 0) {
        sk_free(p);
        return NULL;
    }
    struct slab_cache *c = NULL;
    struct sk_page *pg = slab_of_object(p, &c);   /* NULL: not a slab object */
    size_t old;
    if (pg) {
        if (unlikely(slab_marked_free(c, p)))
            slab_free_suspect(c, p, "realloc");
        old = slab_usable_of(c, p);
        /* In place while the size still maps to this class (a smaller
         * class is worth the copy, and a sized free of the new size must
         * find the object's class); the two smallest classes stay.  A
         * slub_debug object always moves: its red zone follows its size. */
        if (size <= old && (old <= 16 || kmalloc_caches[kmalloc_index(size)] == c) && c->mode != SLAB_MODE_DEBUG)
            return p;
    } else if (unlikely(kfence_addr(p))) {
        old = kfence_size(p, "realloc");   /* a KFENCE object always moves */
    } else {
        old = kmalloc_usable_nonslab(p, "realloc");
        if (size <= old && size > KMALLOC_MAX_CACHE_SIZE && size > old / 2)
            return p;
        /* A large block grows (or shrinks) in place when the pages after
         * it are free: no copy, and no second copy resident meanwhile. */
        struct vm_slice *s = vm_slice_of(p);
        if (size > KMALLOC_MAX_CACHE_SIZE && s->kind != VM_SLICE_DIRECT) {
            if (page_resize_exact(page_of_slice(s, p), (size + SK_PAGE_SIZE - 1) >> SK_PAGE_SHIFT))
                return p;
        }
    }
    void *q = size > old && size > KMALLOC_KBLOCK_SIZE ? kmalloc_large_grow(size) : NULL;
    if (!q && !(q = sk_malloc(size)))
        return NULL;
    memcpy(q, p, size < old ? size : old);
    /* Outgrown: an object of 1 KiB or more that the program made larger
     * goes back to its slab, not onto this CPU's array, when that array
     * holds an object of the class already (for the next malloc of it).
     * Buffers grown side by side by realloc leave one object of every
     * class on their way; on the arrays they waited for mallocs of their
     * classes, and the arrays of the 1-16 KiB classes pinned their slabs
     * (bench/peers realloc_grow: slabs ten times the objects they held).
     * In the slab an object is taken
     * again as soon as any, and a slab that empties goes back to the page
     * allocator.  An empty array still takes it: one buffer grown again
     * and again reuses the same objects at the array's speed (always to
     * the slab, such a loop was a fifth slower). */
    if (pg && size > old && old >= REALLOC_COLD_MIN && c->mode == SLAB_MODE_SLUB &&
        cpu_array_count(slab_arrays(c), cpu_current()) > 0)
        slab_free_cold(c, pg->slab.head, p);
    else
        sk_free(p);
    return q;
}

void *sk_realloc(void *p, size_t size)
{
    int saved = errno;    /* a block resized in place may map, and retry */
    return os_errno_restore(realloc_any(p, size), saved);
}

static void *aligned_any(size_t align, size_t size);

static void *aligned_alloc_any(size_t align, size_t size)
{
    if (align == 0 || (align & (align - 1))) {
        errno = EINVAL;
        return NULL;
    }
    if (align <= 16)      /* every class from 16 up is 16-aligned */
        return sk_malloc(align > 8 && size < 16 ? 16 : size);
    if (slab_init() != 0)
        return NULL;
    void *p = aligned_any(align, size);
    if (unlikely(!p) && size < ((size_t)1 << VM_ADDR_BITS) && align <= SLICE_SIZE &&
        !(page_alloc_ctx & PAGE_ALLOC_NORECLAIM)) {
        slab_release_all();
        p = aligned_any(align, size);
    }
    return p;
}

void *sk_aligned_alloc(size_t align, size_t size)
{
    int saved = errno;
    return os_errno_restore(aligned_alloc_any(align, size), saved);
}

/* The class aligned_alloc(align > 16, size) uses (after init): one whose
 * stride is a multiple of align, so that every object of it is aligned
 * (slabs and s_mem are aligned to the class alignment); NULL: a large block. */
struct slab_cache *kmalloc_aligned_cache(size_t align, size_t size)
{
    if (size <= KMALLOC_MAX_CACHE_SIZE && align <= SK_PAGE_SIZE) {
        for (unsigned i = kmalloc_index(size < align ? align : size); i < kmalloc_nr_classes; i++) {
            struct slab_cache *c = kmalloc_caches[i];
            /* SLAB colours its slabs by cache lines: objects are aligned
             * to the cache's alignment, not beyond. */
            if (c->size % align == 0 && (c->mode == SLAB_MODE_SLUB || align <= c->align))
                return c;
        }
    }
    return NULL;
}

static void *aligned_any(size_t align, size_t size)
{
    struct slab_cache *c = kmalloc_aligned_cache(align, size);
    if (c)
        return c->mode == SLAB_MODE_DEBUG ? slab_debug_alloc(c, size < align ? align : size) : slab_alloc(c);
    return kmalloc_large(size < align ? align : size, align);
}

size_t sk_trim(void)
{
    vm_check_underrun();
    slab_shrink_all();
    size_t bytes = page_reclaim(0, true);    /* pages from sk_alloc_pages too */
    /* Wholly free slices go back whole, address space too (glibc's trim
     * shrinks the heap; a program's VmSize falls again).  An arena slice
     * leaves a hole, which the arena maps again at its place before it
     * reserves anything new (vm.c, arena_reclaim_holes). */
    bytes += page_release_free(true);
    vm_arena_trim();          /* address space only: not counted as memory */
    return bytes;
}

