/*
 * kslab.c — the kernel's slab API (include/slabkit/kernel.h) on slabkit's
 * caches: kmem_cache_*, the bulk calls, the kmalloc family and page
 * allocation, with the kernel's gfp flags and failslab (failslab.c).
 *
 * A layer above slab/ and page/ (and debug/'s KFENCE check), calling them
 * through slab.h, kmalloc.h and page.h as the malloc layer does; it keeps
 * no state of its own but what a cache carries (kernel_flags, the budget)
 * and failslab's settings.
 * Invariants: an allocation that fails returns NULL with nothing held and
 * errno ENOMEM, having printed one line unless __GFP_NOWARN (an injected
 * failure prints only with failslab verbose); a successful call leaves
 * errno as it found it.  kmalloc(0) and krealloc(p, 0) give the kernel's
 * ZERO_SIZE_PTR, which kfree and ksize accept.
 * Lock order: the layers below's; none is taken here.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "debug/kfence.h"
#include "kernel/kernel.h"
#include "page/page.h"
#include "slab/kmalloc.h"

/* include/slabkit/linux/slab.h's ZERO_SIZE_PTR: the kernel's value. */
#define ZERO_SIZE ((void *)16)
#define KERNEL_DEBUG_FLAGS (SK_SLAB_CONSISTENCY_CHECKS | SK_SLAB_RED_ZONE | SK_SLAB_POISON | \
                            SK_SLAB_STORE_USER | SK_SLAB_TRACE)
#define NOFAIL_WAIT_MS 1

/* The program's RCU (sk_kernel_set_rcu), for SLAB_TYPESAFE_BY_RCU. */
static void (*rcu_sync)(void);
static void (*rcu_barrier_fn)(void);

static void *failed(const char *call, const char *name, sk_gfp_t gfp, size_t size)
{
    if (!(gfp & SK_GFP_NOWARN))
        os_warn("%s(%s, %zu bytes, gfp %#x): out of memory", call, name, size, gfp);
    errno = ENOMEM;
    return NULL;
}

/* The kernel's gfp_to_alloc_flags: the page allocator's context
 * (page_alloc_ctx) for an allocation with gfp.  A reclaimer's own
 * allocations keep its ALLOC_NO_WATERMARKS. */
static inline unsigned gfp_alloc_ctx(sk_gfp_t gfp)
{
    unsigned f = page_alloc_ctx & PAGE_ALLOC_NO_WATERMARKS;
    if (gfp & SK_GFP_HIGH)
        f |= PAGE_ALLOC_HIGH;
    if ((gfp & SK_GFP_ATOMIC_BIT) && !(gfp & SK_GFP_NOMEMALLOC))
        f |= PAGE_ALLOC_HARDER;
    if ((gfp & SK_GFP_MEMALLOC) && !(gfp & SK_GFP_NOMEMALLOC))
        f |= PAGE_ALLOC_NO_WATERMARKS;
    if (!(gfp & SK_GFP_DIRECT_RECLAIM))
        f |= PAGE_ALLOC_NORECLAIM;
    if (gfp & SK_GFP_MOVABLE)   /* the kernel's gfp_migratetype */
        f |= PAGE_ALLOC_MOVABLE;
    else if (gfp & SK_GFP_RECLAIMABLE)
        f |= PAGE_ALLOC_RECLAIMABLE;
    return f;
}

/* `call` (of type `type`) run with the page allocator's context set from
 * gfp, restored after: each entry point that takes gfp is one. */
#define GFP_SCOPE(gfp, type, call)                                  \
    ({                                                              \
        unsigned ctx_ = page_ctx_enter(gfp_alloc_ctx(gfp));         \
        type r_ = (call);                                           \
        page_ctx_exit(ctx_);                                        \
        r_;                                                         \
    })

/* ---- caches ---- */

sk_cache_t *sk_kmem_cache_create(const char *name, unsigned int size, unsigned int align,
                                 unsigned long flags, void (*ctor)(void *))
{
    int saved = errno;
    struct slab_cache *c = NULL;
    const char *why = NULL;
    size_t len = name ? strlen(name) : 0;
    if ((flags & SK_SLAB_TYPESAFE_BY_RCU) && !__atomic_load_n(&rcu_sync, __ATOMIC_ACQUIRE))
        why = "SLAB_TYPESAFE_BY_RCU needs the program's RCU: sk_kernel_set_rcu, or <urcu.h> before <linux/slab.h>";
    else if ((flags & SK_SLAB_TYPESAFE_BY_RCU) && slab_init() == 0 && sk_opt.allocator == SK_ALLOC_SLAB)
        why = "SLAB_TYPESAFE_BY_RCU is not supported under allocator=slab";
    else if (len == 0 || len >= SLAB_NAME_LEN)
        why = "a name of 1 to 31 bytes is needed";
    else if (size == 0 || size > (SK_PAGE_SIZE << SLAB_MAX_ORDER) / 2 || (align & (align - 1)) ||
             align > SK_PAGE_SIZE)
        why = "bad size or alignment";
    else if (slab_init() != 0)
        why = "out of memory";
    if (!why) {
        unsigned skflags = (unsigned)(flags & KERNEL_DEBUG_FLAGS) |
                           (flags & SK_SLAB_HWCACHE_ALIGN ? SK_CACHE_HWALIGN : 0) |
                           (flags & SK_SLAB_TYPESAFE_BY_RCU ? SLAB_CACHE_TYPESAFE_RCU : 0);
        /* The kernel lets names repeat; slabkit's caches are found by
         * name (slabinfo, debug_caches), so a repeat is NAME#2, #3 ... */
        char unique[SLAB_NAME_LEN];
        snprintf(unique, sizeof unique, "%s", name);
        for (int n = 2; n < 1000; n++) {
            c = slab_cache_create(unique, size, align, skflags, ctor, false);
            if (c || errno != EEXIST)
                break;
            int tail = snprintf(NULL, 0, "#%d", n);
            snprintf(unique, sizeof unique, "%.*s#%d", (int)(len < SLAB_NAME_LEN - 1 - (size_t)tail ? len :
                                                            SLAB_NAME_LEN - 1 - (size_t)tail), name, n);
        }
        if (!c)
            why = errno == EEXIST ? "999 caches of that name exist" : "out of memory";
    }
    if (!c) {
        if (flags & SK_SLAB_PANIC)
            os_fatal("kmem_cache_create(%s): %s (SLAB_PANIC)", name ? name : "(null)", why);
        os_warn("kmem_cache_create(%s): %s", name ? name : "(null)", why);
        errno = errno == ENOMEM ? ENOMEM : EINVAL;
        return NULL;
    }
    c->kernel_flags = flags & ~(unsigned long)KERNEL_DEBUG_FLAGS;
    if (flags & SK_SLAB_RECLAIM_ACCOUNT)
        c->page_mt = MIGRATE_RECLAIMABLE;   /* the kernel's __GFP_RECLAIMABLE slabs */
    c->nowait_budget = -1;
    return os_errno_restore((sk_cache_t *)c, saved);
}

void sk_kernel_set_rcu(void (*synchronize_rcu)(void), void (*rcu_barrier)(void))
{
    __atomic_store_n(&rcu_barrier_fn, rcu_barrier, __ATOMIC_RELAXED);
    __atomic_store_n(&rcu_sync, synchronize_rcu, __ATOMIC_RELEASE);
}

/* A SLAB_TYPESAFE_BY_RCU cache's empty slabs, back after a grace period. */
static int shrink_rcu(struct slab_cache *c)
{
    return slab_shrink_rcu(c, __atomic_load_n(&rcu_sync, __ATOMIC_ACQUIRE));
}

void sk_kmem_cache_destroy(sk_cache_t *cache)
{
    struct slab_cache *c = (struct slab_cache *)cache;
    if (!c)
        return;
    if (c->rcu_keep) {
        /* Callbacks still freeing into it run first, as in the kernel. */
        void (*barrier)(void) = __atomic_load_n(&rcu_barrier_fn, __ATOMIC_ACQUIRE);
        if (barrier)
            barrier();
        shrink_rcu(c);
    }
    sk_cache_destroy(cache);    /* refuses, with a line, while objects are out */
}

int sk_kmem_cache_shrink(sk_cache_t *cache)
{
    struct slab_cache *c = (struct slab_cache *)cache;
    return c->rcu_keep ? shrink_rcu(c) : sk_cache_shrink(cache);
}

/* Whether failslab fails this allocation of n objects of c. */
static inline bool cache_fails(struct slab_cache *c, sk_gfp_t gfp, unsigned long n, const char *call)
{
    bool armed = __atomic_load_n(&c->nowait_armed, __ATOMIC_ACQUIRE);
    return failslab_maybe(armed) &&
           failslab_check(call, c->name, __atomic_load_n(&c->kernel_flags, __ATOMIC_RELAXED), armed,
                          &c->nowait_budget, gfp, n);
}

/*
 * After `tries` failed tries of an allocation: whether to try again.  One
 * that may sleep (__GFP_DIRECT_RECLAIM) gets one more, after every cache
 * is shrunk and free memory given back (the kernel's direct reclaim); one
 * with __GFP_NOFAIL as many as it takes, waiting between them.
 */
static bool retry(sk_gfp_t gfp, unsigned tries)
{
    if (!(gfp & SK_GFP_NOFAIL) && (tries > 1 || !(gfp & SK_GFP_DIRECT_RECLAIM)))
        return false;
    if (tries > 1)
        os_sleep_ms(NOFAIL_WAIT_MS);
    slab_release_all();
    return true;
}

static void *cache_alloc(struct slab_cache *c, sk_gfp_t gfp)
{
    void *obj;
    for (unsigned tries = 1; !(obj = slab_alloc(c)); tries++)
        if (!retry(gfp, tries))
            return NULL;
    return obj;
}

static void *kmem_cache_alloc_gfp(sk_cache_t *cache, sk_gfp_t gfp)
{
    struct slab_cache *c = (struct slab_cache *)cache;
    if (unlikely(cache_fails(c, gfp, 1, "kmem_cache_alloc"))) {
        errno = ENOMEM;
        return NULL;
    }
    int saved = errno;
    void *obj = NULL;
    if (unlikely(sk_opt.kfence)) {
        /* A sample goes to KFENCE's guarded pool, constructed as a slab's
         * object would be (the kernel's kfence_alloc in slab_alloc_node). */
        obj = kfence_poll_cache(c->name, c->object_size, c->align);
        if (obj && c->ctor)
            c->ctor(obj);
    }
    if (likely(!obj))
        obj = cache_alloc(c, gfp);
    if (unlikely(!obj))
        return failed("kmem_cache_alloc", c->name, gfp, c->object_size);
    if (gfp & SK_GFP_ZERO)
        memset(obj, 0, c->object_size);
    errno = saved;
    return obj;
}

void *sk_kmem_cache_alloc(sk_cache_t *cache, sk_gfp_t gfp)
{
    return GFP_SCOPE(gfp, void *, kmem_cache_alloc_gfp(cache, gfp));
}

void sk_kmem_cache_free(sk_cache_t *cache, void *obj)
{
    if (unlikely(kfence_addr(obj))) {
        kfence_free(obj, "kmem_cache_free");
        return;
    }
    slab_cache_free_call((struct slab_cache *)cache, obj, "kmem_cache_free");
    __asm__ volatile("");   /* this frame stays in memcheck's stacks */
}

static int kmem_cache_alloc_bulk_gfp(sk_cache_t *cache, sk_gfp_t gfp, size_t n, void **objs)
{
    struct slab_cache *c = (struct slab_cache *)cache;
    if (n == 0)
        return 0;
    if (unlikely(cache_fails(c, gfp, n, "kmem_cache_alloc_bulk"))) {
        errno = ENOMEM;
        return 0;
    }
    int saved = errno;
    size_t got = slab_alloc_bulk(c, objs, n);
    for (unsigned tries = 1; got < n && retry(gfp, tries); tries++)
        got += slab_alloc_bulk(c, objs + got, n - got);
    if (got < n) {
        /* All or nothing, as the kernel's. */
        slab_free_bulk(c, objs, got, "kmem_cache_alloc_bulk");
        failed("kmem_cache_alloc_bulk", c->name, gfp, c->object_size * n);
        return 0;
    }
    if (gfp & SK_GFP_ZERO)
        for (size_t i = 0; i < n; i++)
            memset(objs[i], 0, c->object_size);
    errno = saved;
    return (int)n;
}

int sk_kmem_cache_alloc_bulk(sk_cache_t *cache, sk_gfp_t gfp, size_t n, void **objs)
{
    return GFP_SCOPE(gfp, int, kmem_cache_alloc_bulk_gfp(cache, gfp, n, objs));
}

void sk_kmem_cache_free_bulk(sk_cache_t *cache, size_t n, void **objs)
{
    slab_free_bulk((struct slab_cache *)cache, objs, n, "kmem_cache_free_bulk");
}

sk_cache_t *sk_kmem_cache_of(const void *p)
{
    struct slab_cache *c = NULL;
    if (!p || !slab_ready())
        return NULL;
    return slab_of_object(p, &c) ? (sk_cache_t *)c : NULL;
}

/* ---- kmalloc ---- */

/* The kmalloc cache a request of size uses (failslab's filter names it),
 * or NULL for a large block. */
static const char *kmalloc_name(size_t size)
{
    if (size > KMALLOC_MAX_CACHE_SIZE || !slab_ready())
        return "kmalloc-large";
    struct slab_cache *c = kmalloc_caches[kmalloc_index(size)];
    return c ? c->name : "kmalloc";
}

static inline bool kmalloc_fails(size_t size, sk_gfp_t gfp, const char *call)
{
    bool armed = __atomic_load_n(&failslab_kmalloc_armed, __ATOMIC_ACQUIRE);
    return failslab_maybe(armed) &&
           failslab_check(call, kmalloc_name(size), 0, armed, failslab_kmalloc_budget(), gfp, 1);
}

static void *kmalloc_gfp_ctx(size_t size, sk_gfp_t gfp, const char *call)
{
    if (unlikely(size == 0))
        return ZERO_SIZE;
    if (unlikely(kmalloc_fails(size, gfp, call))) {
        errno = ENOMEM;
        return NULL;
    }
    int saved = errno;
    void *p;
    /* sk_malloc shrinks the caches and tries again itself: its failure
     * counts as two tries. */
    for (unsigned tries = 2; !(p = gfp & SK_GFP_ZERO ? sk_calloc(1, size) : sk_malloc(size)); tries++)
        if (!retry(gfp, tries))
            return failed(call, kmalloc_name(size), gfp, size);
    errno = saved;
    return p;
}

static void *kmalloc_gfp(size_t size, sk_gfp_t gfp, const char *call)
{
    return GFP_SCOPE(gfp, void *, kmalloc_gfp_ctx(size, gfp, call));
}

void *sk_kmalloc(size_t size, sk_gfp_t gfp)
{
    return kmalloc_gfp(size, gfp, "kmalloc");
}

void *sk_kmalloc_array(size_t n, size_t size, sk_gfp_t gfp)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return kmalloc_gfp(total, gfp, "kmalloc_array");
}

void sk_kfree(const void *p)
{
    if ((uintptr_t)p <= (uintptr_t)ZERO_SIZE)
        return;    /* NULL and ZERO_SIZE_PTR */
    sk_free((void *)p);
}

size_t sk_ksize(const void *p)
{
    if ((uintptr_t)p <= (uintptr_t)ZERO_SIZE)
        return 0;
    return sk_usable_size(p);
}

void sk_kfree_sensitive(const void *p)
{
    if ((uintptr_t)p <= (uintptr_t)ZERO_SIZE)
        return;
    explicit_bzero((void *)p, sk_usable_size(p));
    sk_free((void *)p);
}

static void *krealloc_gfp(const void *p, size_t size, sk_gfp_t gfp)
{
    if ((uintptr_t)p <= (uintptr_t)ZERO_SIZE)
        return kmalloc_gfp(size, gfp, "krealloc");
    if (size == 0) {
        sk_free((void *)p);
        return ZERO_SIZE;
    }
    if (unlikely(kmalloc_fails(size, gfp, "krealloc"))) {
        errno = ENOMEM;
        return NULL;
    }
    int saved = errno;
    size_t old = sk_usable_size(p);
    void *q;
    for (unsigned tries = 2; !(q = sk_realloc((void *)p, size)); tries++)   /* as kmalloc_gfp */
        if (!retry(gfp, tries))
            return failed("krealloc", kmalloc_name(size), gfp, size);
    if (gfp & SK_GFP_ZERO) {
        size_t now = sk_usable_size(q);
        if (now > old)
            memset((char *)q + old, 0, now - old);
    }
    errno = saved;
    return q;
}

void *sk_krealloc(const void *p, size_t size, sk_gfp_t gfp)
{
    return GFP_SCOPE(gfp, void *, krealloc_gfp(p, size, gfp));
}

void *sk_kmemdup(const void *src, size_t len, sk_gfp_t gfp)
{
    void *p = kmalloc_gfp(len, gfp & ~SK_GFP_ZERO, "kmemdup");
    if (p && len)
        memcpy(p, src, len);
    return p;
}

char *sk_kstrndup(const char *s, size_t max, sk_gfp_t gfp)
{
    if (!s)
        return NULL;
    size_t len = strnlen(s, max);
    char *p = kmalloc_gfp(len + 1, gfp & ~SK_GFP_ZERO, "kstrdup");
    if (p) {
        memcpy(p, s, len);
        p[len] = 0;
    }
    return p;
}

char *sk_kstrdup(const char *s, sk_gfp_t gfp)
{
    return sk_kstrndup(s, (size_t)-1, gfp);
}

struct kfence_find {
    uintptr_t p, start;
};

static void kfence_find_cb(uintptr_t addr, size_t size, void *arg)
{
    struct kfence_find *f = arg;
    if (f->p - addr < (size ? size : 1))
        f->start = addr;
}

void sk_kfree_inner(void *p)
{
    if ((uintptr_t)p <= (uintptr_t)ZERO_SIZE)
        return;
    struct slab_cache *c = NULL;
    struct sk_page *pg = slab_of_object(p, &c);
    if (pg) {
        sk_free(pg->slab.s_mem + (size_t)slab_obj_index(c, pg, p) * c->size);
        return;
    }
    if (kfence_addr(p)) {
        struct kfence_find f = { (uintptr_t)p, 0 };
        kfence_for_each_live(kfence_find_cb, &f);
        sk_free(f.start ? (void *)f.start : p);    /* no object: sk_free reports p */
        return;
    }
    pg = page_find_head(p);
    sk_free(pg ? page_address(pg) : p);    /* a large block, or a report */
}

/* ---- pages ---- */

static void *kernel_alloc_pages_gfp(sk_gfp_t gfp, unsigned int order)
{
    int saved = errno;
    void *p;
    for (unsigned tries = 1; !(p = sk_alloc_pages(order)); tries++)
        if (order > SK_MAX_ORDER || !retry(gfp, tries)) {
            char what[32];
            snprintf(what, sizeof what, "order %u", order);
            return failed("alloc_pages", what, gfp, SK_PAGE_SIZE << (order > SK_MAX_ORDER ? 0 : order));
        }
    if (gfp & SK_GFP_ZERO)
        memset(p, 0, SK_PAGE_SIZE << order);
    errno = saved;
    return p;
}

void *sk_kernel_alloc_pages(sk_gfp_t gfp, unsigned int order)
{
    return GFP_SCOPE(gfp, void *, kernel_alloc_pages_gfp(gfp, order));
}

void sk_kernel_free_pages(void *block, unsigned int order)
{
    if (block)
        sk_free_pages(block, order);
}
