/*
 * slabkit/kernel.h — the kernel's slab API on slabkit, under sk_ names.
 *
 * The Linux kernel's kmem_cache_*, kmalloc family, page allocation and
 * failslab, with the kernel's gfp and SLAB_* flag values (Linux 6.1), on
 * slabkit's caches (the same SLUB, per-CPU arrays, slub_debug, KFENCE and
 * leak scan as the sk_* API).  The names carry an sk_ prefix so that this
 * header can sit beside another definition of the kernel's (a user-space
 * test harness's own linux/slab.h); <slabkit/linux/slab.h> and
 * <slabkit/linux/gfp.h> give them their kernel names.  docs/kernel.md
 * says what maps to what, and what is a no-op in user space.
 *
 * gfp flags, as in the kernel:
 *   __GFP_DIRECT_RECLAIM  the caller may sleep: an allocation that finds no
 *                         memory shrinks every cache, gives free memory
 *                         back, and tries again (the kernel's direct
 *                         reclaim); failslab spares it by default
 *   (without it)          GFP_NOWAIT, GFP_ATOMIC: never waits for reclaim;
 *                         fails at once when memory is short
 *   __GFP_ZERO            the memory is zeroed
 *   __GFP_NOWARN          a failure prints nothing (else one line on stderr)
 *   __GFP_NOFAIL          never fails: retries until memory comes back
 * Zone, node, accounting and mobility flags are accepted and change nothing.
 */
#ifndef SLABKIT_KERNEL_H
#define SLABKIT_KERNEL_H

#include <stdbool.h>
#include <stddef.h>

#include <slabkit.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef unsigned int sk_gfp_t;

/* The kernel's gfp bits (include/linux/gfp_types.h, 6.1). */
#define SK_GFP_DMA            0x01u
#define SK_GFP_HIGHMEM        0x02u
#define SK_GFP_DMA32          0x04u
#define SK_GFP_MOVABLE        0x08u
#define SK_GFP_RECLAIMABLE    0x10u
#define SK_GFP_HIGH           0x20u
#define SK_GFP_IO             0x40u
#define SK_GFP_FS             0x80u
#define SK_GFP_ZERO           0x100u
#define SK_GFP_ATOMIC_BIT     0x200u
#define SK_GFP_DIRECT_RECLAIM 0x400u
#define SK_GFP_KSWAPD_RECLAIM 0x800u
#define SK_GFP_WRITE          0x1000u
#define SK_GFP_NOWARN         0x2000u
#define SK_GFP_RETRY_MAYFAIL  0x4000u
#define SK_GFP_NOFAIL         0x8000u
#define SK_GFP_NORETRY        0x10000u
#define SK_GFP_MEMALLOC       0x20000u
#define SK_GFP_COMP           0x40000u
#define SK_GFP_NOMEMALLOC     0x80000u
#define SK_GFP_HARDWALL       0x100000u
#define SK_GFP_THISNODE       0x200000u
#define SK_GFP_ACCOUNT        0x400000u
#define SK_GFP_RECLAIM        (SK_GFP_DIRECT_RECLAIM | SK_GFP_KSWAPD_RECLAIM)

#define SK_GFP_KERNEL  (SK_GFP_RECLAIM | SK_GFP_IO | SK_GFP_FS)
#define SK_GFP_NOWAIT  (SK_GFP_KSWAPD_RECLAIM)
#define SK_GFP_ATOMIC  (SK_GFP_HIGH | SK_GFP_ATOMIC_BIT | SK_GFP_KSWAPD_RECLAIM)
#define SK_GFP_NOIO    (SK_GFP_RECLAIM)
#define SK_GFP_NOFS    (SK_GFP_RECLAIM | SK_GFP_IO)

/* kmem_cache_create's flags, the kernel's values (include/linux/slab.h,
 * 6.1).  The debug flags are slub_debug's, as sk_cache_create's
 * SK_CACHE_* of the same values. */
#define SK_SLAB_CONSISTENCY_CHECKS 0x00000100ul
#define SK_SLAB_RED_ZONE           0x00000400ul
#define SK_SLAB_POISON             0x00000800ul
#define SK_SLAB_HWCACHE_ALIGN      0x00002000ul
#define SK_SLAB_CACHE_DMA          0x00004000ul
#define SK_SLAB_CACHE_DMA32        0x00008000ul
#define SK_SLAB_STORE_USER         0x00010000ul
#define SK_SLAB_PANIC              0x00040000ul
#define SK_SLAB_TYPESAFE_BY_RCU    0x00080000ul
#define SK_SLAB_MEM_SPREAD         0x00100000ul
#define SK_SLAB_TRACE              0x00200000ul
#define SK_SLAB_DEBUG_OBJECTS      0x00400000ul
#define SK_SLAB_NOLEAKTRACE        0x00800000ul
#define SK_SLAB_FAILSLAB           0x02000000ul
#define SK_SLAB_ACCOUNT            0x04000000ul
#define SK_SLAB_RECLAIM_ACCOUNT    0x00020000ul

/* ---- caches ---- */

/*
 * A cache, as the kernel's kmem_cache_create: the name need not be unique
 * (a second cache of a name shows in slabinfo as NAME#2, NAME#3 ...), at
 * most 31 bytes.  SLAB_PANIC: abort with a message instead of NULL.
 * SLAB_FAILSLAB: the cache is one failslab's cache filter picks.
 * SLAB_TYPESAFE_BY_RCU: a freed object may be reused by the same cache at
 * once (readers recheck it, as in the kernel), but its memory goes to no
 * other use before an RCU grace period: empty slabs stay with the cache,
 * and kmem_cache_shrink and kmem_cache_destroy give them back only after
 * the program's synchronize_rcu (sk_kernel_set_rcu; refused, EINVAL,
 * until one is set, and under allocator=slab).
 */
SK_API sk_cache_t *sk_kmem_cache_create(const char *name, unsigned int size, unsigned int align,
                                        unsigned long flags, void (*ctor)(void *));
/* Refuses (one line on stderr, the cache kept) while objects are out. */
SK_API void sk_kmem_cache_destroy(sk_cache_t *cache);
SK_API int sk_kmem_cache_shrink(sk_cache_t *cache);
SK_API void *sk_kmem_cache_alloc(sk_cache_t *cache, sk_gfp_t gfp);
SK_API void sk_kmem_cache_free(sk_cache_t *cache, void *obj);
/*
 * Bulk: up to `n` objects popped from this CPU's array in one sequence, a
 * refill of the array when it runs dry, and on; freed by pushes of whole
 * runs.  Returns n, or 0 with nothing allocated (the kernel's
 * all-or-nothing).  Every object of a free_bulk must be of `cache`.
 */
SK_API int sk_kmem_cache_alloc_bulk(sk_cache_t *cache, sk_gfp_t gfp, size_t n, void **objs);
SK_API void sk_kmem_cache_free_bulk(sk_cache_t *cache, size_t n, void **objs);
/* The object's cache, or NULL when p is no slab object of slabkit's. */
SK_API sk_cache_t *sk_kmem_cache_of(const void *p);

/* ---- kmalloc ---- */

SK_API void *sk_kmalloc(size_t size, sk_gfp_t gfp);
SK_API void *sk_krealloc(const void *p, size_t size, sk_gfp_t gfp);
SK_API void sk_kfree(const void *p);
/* Zeroes the whole usable size (explicit_bzero), then frees. */
SK_API void sk_kfree_sensitive(const void *p);
/* Usable size of a kmalloc'ed object (kmalloc's size class). */
SK_API size_t sk_ksize(const void *p);
SK_API void *sk_kmemdup(const void *src, size_t len, sk_gfp_t gfp);
SK_API char *sk_kstrdup(const char *s, sk_gfp_t gfp);
SK_API char *sk_kstrndup(const char *s, size_t max, sk_gfp_t gfp);
/* kmalloc_array and kcalloc: NULL when n * size overflows. */
SK_API void *sk_kmalloc_array(size_t n, size_t size, sk_gfp_t gfp);
/* Free p, the start of an object, or any address inside one (kfree_rcu's
 * callback gets the rcu_head's address). */
SK_API void sk_kfree_inner(void *p);

/* ---- RCU ---- */

/*
 * slabkit has no RCU of its own: the program's (liburcu's, or a kernel
 * harness's) synchronize_rcu and rcu_barrier, for SLAB_TYPESAFE_BY_RCU
 * caches.  sk_kmem_cache_shrink and sk_kmem_cache_destroy call them (from
 * the caller's thread, which must not be inside a read-side section, as
 * in the kernel); destroy runs rcu_barrier first, so that callbacks still
 * freeing into the cache have run.  <slabkit/linux/slab.h> sets liburcu's
 * when <urcu.h> (or a flavour's header) came first.  barrier may be NULL.
 */
SK_API void sk_kernel_set_rcu(void (*synchronize_rcu)(void), void (*rcu_barrier)(void));

/* ---- pages ---- */

/* A naturally aligned block of 2^order pages, its address; NULL on
 * failure.  __GFP_ZERO zeroes it. */
SK_API void *sk_kernel_alloc_pages(sk_gfp_t gfp, unsigned int order);
SK_API void sk_kernel_free_pages(void *block, unsigned int order);

/* ---- failslab: fault injection for slab allocations ---- */

/*
 * The kernel's failslab (Documentation/fault-injection): an allocation
 * through this API fails when all of these say so:
 *   times        failures left (-1: no limit; 0: off)
 *   interval     only every interval-th candidate (1: each)
 *   probability  percent of the candidates left (100: all)
 *   ignore_wait  allocations that may sleep (__GFP_DIRECT_RECLAIM) are
 *                spared (the kernel's ignore-gfp-wait, on by default)
 *   cache_filter only caches with SK_SLAB_FAILSLAB (failslab_caches
 *                names them; kmalloc's caches too when named)
 * __GFP_NOFAIL allocations never fail.  SLABKIT_OPTIONS failslab=,
 * failslab_interval=, failslab_times=, failslab_ignore_wait= and
 * failslab_caches= set it at start-up; sk_failslab_set at any time.
 * Injected failures are counted (sk_failslab_get) and print nothing
 * unless verbose.
 */
struct sk_failslab {
    unsigned int probability;   /* 0..100 */
    unsigned long interval;     /* >= 1 */
    long times;                 /* -1: no limit */
    bool ignore_wait;
    bool cache_filter;
    bool verbose;               /* one line on stderr per injected failure */
    unsigned long injected;     /* sk_failslab_get: failures injected so far */
};
/* 0, or -1 with errno EINVAL for a probability over 100 or interval 0. */
SK_API int sk_failslab_set(const struct sk_failslab *f);
SK_API void sk_failslab_get(struct sk_failslab *f);
/* Mark a cache for failslab's cache filter (SLAB_FAILSLAB). */
SK_API void sk_kmem_cache_set_failslab(sk_cache_t *cache, bool on);
/*
 * The next n allocations of `cache` that may not sleep succeed; after
 * them, every one fails, whatever failslab says (the kernel's radix-tree
 * test harness's kmem_cache_set_non_kernel).  n < 0: back to failslab's
 * rule.  Allocations that may sleep are not counted.
 */
SK_API void sk_kmem_cache_set_nowait_budget(sk_cache_t *cache, long n);
/* For kmalloc (all its caches together): the same. */
SK_API void sk_kmalloc_set_nowait_budget(long n);

#ifdef __cplusplus
}
#endif

#endif /* SLABKIT_KERNEL_H */
