/*
 * slab.h — the slab caches' API: init, creating caches, the slow paths,
 * statistics, and the debugging hooks the slab layer calls.  The types
 * are slab_types.h's; the fast paths, inline, slab_fast.h's; kmalloc's
 * tables kmalloc.h's.  A file includes the smallest of these it needs.
 *
 * allocator=slab runs the kernel's SLAB on the same arrays and barn: its
 * slow paths, node lists and slab layouts are slab_classic.c's.
 */
#ifndef SK_SLAB_H
#define SK_SLAB_H

#include <stdio.h>
#include <string.h>

#include "slab/slab_types.h"
#include "debug/debug.h"


/* 0, or -1 with errno ENOMEM; a later call tries again, keeping what the
 * failed one built. */
int slab_init(void);
bool slab_ready(void);
/* slab_shrink of every cache (a SLAB_TYPESAFE_BY_RCU one keeps what
 * waits for a grace period); nothing before slab_init. */
void slab_shrink_all(void);
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
/* The published cache named `name`, or NULL (cache_lock taken). */
struct slab_cache *slab_cache_find(const char *name);
struct slab_cache *slab_cache_create(const char *name, size_t size, size_t align,
                                     unsigned flags, void (*ctor)(void *), bool kmalloc);
void *slab_alloc_slow(struct slab_cache *c);
void slab_free_slow(struct slab_cache *c, void *obj);
/* Up to n objects of c into objs (bulk.c): fewer only when memory ran
 * out.  Returns how many. */
size_t slab_alloc_bulk(struct slab_cache *c, void **objs, size_t n);
/* Free n objects of c (NULLs skipped), each checked as a single free is;
 * `call` names the entry point in reports. */
void slab_free_bulk(struct slab_cache *c, void **objs, size_t n, const char *call);
int slab_shrink(struct slab_cache *c);
/* A SLAB_TYPESAFE_BY_RCU cache (rcu_keep), which slab_shrink passes by:
 * shrunk, and the slabs that took off given back to the page allocator
 * once grace() returned (an RCU grace period: no reader still sees their
 * objects).  Returns the slabs. */
int slab_shrink_rcu(struct slab_cache *c, void (*grace)(void));
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
    info->cpu_partial_slabs_max = c->cpu_partial_slabs;
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


/* The malloc family's slow paths (kmalloc.c). */
void *kmalloc_slow(size_t size);
void sk_free_slow(void *p, const char *call);

#endif
