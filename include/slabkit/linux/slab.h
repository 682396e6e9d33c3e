/*
 * <linux/slab.h> for kernel code built on slabkit (-I<includedir>/slabkit):
 * the kernel's slab API under its own names, each a call of
 * include/slabkit/kernel.h's sk_ function.  Link with -lslabkit.
 * docs/kernel.md says what maps to what, and what is a no-op here.
 */
#ifndef SLABKIT_LINUX_SLAB_H
#define SLABKIT_LINUX_SLAB_H

#include <stddef.h>
#include <string.h>

#include <slabkit/linux/gfp.h>

/* struct kmem_cache is slabkit's cache. */
#define kmem_cache sk_cache

#define SLAB_CONSISTENCY_CHECKS SK_SLAB_CONSISTENCY_CHECKS
#define SLAB_RED_ZONE           SK_SLAB_RED_ZONE
#define SLAB_POISON             SK_SLAB_POISON
#define SLAB_HWCACHE_ALIGN      SK_SLAB_HWCACHE_ALIGN
#define SLAB_CACHE_DMA          SK_SLAB_CACHE_DMA
#define SLAB_CACHE_DMA32        SK_SLAB_CACHE_DMA32
#define SLAB_STORE_USER         SK_SLAB_STORE_USER
#define SLAB_PANIC              SK_SLAB_PANIC
#define SLAB_TYPESAFE_BY_RCU    SK_SLAB_TYPESAFE_BY_RCU
#define SLAB_MEM_SPREAD         SK_SLAB_MEM_SPREAD
#define SLAB_TRACE              SK_SLAB_TRACE
#define SLAB_DEBUG_OBJECTS      SK_SLAB_DEBUG_OBJECTS
#define SLAB_NOLEAKTRACE        SK_SLAB_NOLEAKTRACE
#define SLAB_FAILSLAB           SK_SLAB_FAILSLAB
#define SLAB_ACCOUNT            SK_SLAB_ACCOUNT
#define SLAB_RECLAIM_ACCOUNT    SK_SLAB_RECLAIM_ACCOUNT

/* The kernel's: what kmalloc(0) returns; kfree and ksize take it. */
#define ZERO_SIZE_PTR ((void *)16)
#define ZERO_OR_NULL_PTR(x) ((unsigned long)(x) <= (unsigned long)ZERO_SIZE_PTR)

#if defined(_URCU_CALL_RCU_H)
/* liburcu's grace periods, for SLAB_TYPESAFE_BY_RCU (sk_kernel_set_rcu). */
static void sk__synchronize_rcu(void)
{
    synchronize_rcu();
}
static void sk__rcu_barrier(void)
{
    rcu_barrier();
}
#endif

static inline struct kmem_cache *kmem_cache_create(const char *name, unsigned int size, unsigned int align,
                                                   unsigned long flags, void (*ctor)(void *))
{
#if defined(_URCU_CALL_RCU_H)
    if (flags & SLAB_TYPESAFE_BY_RCU)
        sk_kernel_set_rcu(sk__synchronize_rcu, sk__rcu_barrier);
#endif
    return sk_kmem_cache_create(name, size, align, flags, ctor);
}

static inline void kmem_cache_destroy(struct kmem_cache *s)
{
    sk_kmem_cache_destroy(s);
}

static inline int kmem_cache_shrink(struct kmem_cache *s)
{
    return sk_kmem_cache_shrink(s);
}

static inline void *kmem_cache_alloc(struct kmem_cache *s, gfp_t gfp)
{
    return sk_kmem_cache_alloc(s, gfp);
}

static inline void *kmem_cache_zalloc(struct kmem_cache *s, gfp_t gfp)
{
    return sk_kmem_cache_alloc(s, gfp | __GFP_ZERO);
}

/* One node here: node is accepted and changes nothing. */
static inline void *kmem_cache_alloc_node(struct kmem_cache *s, gfp_t gfp, int node)
{
    (void)node;
    return sk_kmem_cache_alloc(s, gfp);
}

static inline void kmem_cache_free(struct kmem_cache *s, void *obj)
{
    sk_kmem_cache_free(s, obj);
}

static inline int kmem_cache_alloc_bulk(struct kmem_cache *s, gfp_t gfp, size_t n, void **p)
{
    return sk_kmem_cache_alloc_bulk(s, gfp, n, p);
}

static inline void kmem_cache_free_bulk(struct kmem_cache *s, size_t n, void **p)
{
    sk_kmem_cache_free_bulk(s, n, p);
}

static inline void *kmalloc(size_t size, gfp_t gfp)
{
    return sk_kmalloc(size, gfp);
}

static inline void *kzalloc(size_t size, gfp_t gfp)
{
    return sk_kmalloc(size, gfp | __GFP_ZERO);
}

static inline void *kmalloc_node(size_t size, gfp_t gfp, int node)
{
    (void)node;
    return sk_kmalloc(size, gfp);
}

static inline void *kzalloc_node(size_t size, gfp_t gfp, int node)
{
    (void)node;
    return sk_kmalloc(size, gfp | __GFP_ZERO);
}

static inline void *kmalloc_array(size_t n, size_t size, gfp_t gfp)
{
    return sk_kmalloc_array(n, size, gfp);
}

static inline void *kcalloc(size_t n, size_t size, gfp_t gfp)
{
    return sk_kmalloc_array(n, size, gfp | __GFP_ZERO);
}

static inline void *krealloc(const void *p, size_t size, gfp_t gfp)
{
    return sk_krealloc(p, size, gfp);
}

static inline void kfree(const void *p)
{
    sk_kfree(p);
}

static inline void kfree_sensitive(const void *p)
{
    sk_kfree_sensitive(p);
}

static inline size_t ksize(const void *p)
{
    return sk_ksize(p);
}

static inline void *kmemdup(const void *src, size_t len, gfp_t gfp)
{
    return sk_kmemdup(src, len, gfp);
}

static inline char *kstrdup(const char *s, gfp_t gfp)
{
    return sk_kstrdup(s, gfp);
}

static inline char *kstrndup(const char *s, size_t max, gfp_t gfp)
{
    return sk_kstrndup(s, max, gfp);
}

/* kvmalloc: kmalloc serves every size here (large blocks come from the
 * page allocator, as vmalloc's would), so there is no vmalloc fallback. */
static inline void *kvmalloc(size_t size, gfp_t gfp)
{
    return sk_kmalloc(size, gfp);
}

static inline void *kvzalloc(size_t size, gfp_t gfp)
{
    return sk_kmalloc(size, gfp | __GFP_ZERO);
}

static inline void *kvmalloc_array(size_t n, size_t size, gfp_t gfp)
{
    return sk_kmalloc_array(n, size, gfp);
}

static inline void *kvcalloc(size_t n, size_t size, gfp_t gfp)
{
    return sk_kmalloc_array(n, size, gfp | __GFP_ZERO);
}

static inline void kvfree(const void *p)
{
    sk_kfree(p);
}

/*
 * kfree_rcu(ptr, field): free ptr after an RCU grace period, through the
 * program's own call_rcu (liburcu's: include <urcu.h> or a flavour's
 * header first).  The callback frees the object that holds the rcu_head,
 * wherever in it the field lies.
 */
#if defined(_URCU_CALL_RCU_H)
static inline void sk__kfree_rcu_cb(struct rcu_head *head)
{
    sk_kfree_inner(head);
}
#define kfree_rcu(ptr, field) call_rcu(&(ptr)->field, sk__kfree_rcu_cb)
#endif

#endif
