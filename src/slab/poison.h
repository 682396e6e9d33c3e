/*
 * poison.h — telling memcheck (valgrind) and ASan which bytes of a cache's
 * slabs a program may touch, as the kernel's KASAN hooks do for SLUB.
 *
 * Memory slabkit maps is plain mmap memory to both tools: without these
 * hooks they see neither the objects handed out nor the free ones, so a
 * use after free of an sk_cache object goes unseen.  With them, for a cache
 * whose c->poison is set:
 *   new slab        every object poisoned (memcheck: no access)
 *   sk_cache_alloc  the object's object_size bytes unpoisoned (memcheck:
 *                   VALGRIND_MALLOCLIKE_BLOCK, undefined, or defined for a
 *                   cache with a constructor: its objects come constructed)
 *   sk_cache_free   the whole stride poisoned (memcheck: FREELIKE_BLOCK)
 *   slab discarded  unpoisoned (memcheck: defined), the pages go back to
 *                   the page allocator for anyone
 * The allocator's own reads and writes of a free object's words (the free
 * pointer, the free marker) open that word just for the access and close
 * it again (slab_meta_open/close), the kernel's metadata_access_enable.
 * So every access to a free object from outside the allocator is an error
 * to the tool, and none from inside is.
 *
 * Which caches (slab_poison_init, cache_setup): the sk_cache_* caches in
 * the default mode (SLUB with sheaves) when running under valgrind
 * (RUNNING_ON_VALGRIND, seen once at init) or in the `make asan` build.
 * Not the kmalloc caches: malloc is the tool's own there (memcheck replaces
 * it, ASan owns it), and sk_malloc is not announced.  Not allocator=slab or
 * sheaves=0 caches: their fast paths read free objects unbracketed.
 *
 * Cost natively: the hooks compile to nothing without <valgrind/memcheck.h>
 * (or with -DSK_VALGRIND=0) outside the ASan build; with it, each is one
 * test of c->poison, a byte on the cache's first line, on the slow paths.
 * sk_cache_alloc and sk_cache_free test it once and leave for the
 * out-of-line slab_alloc_poisoned/slab_free_poisoned (poison.c); the
 * per-CPU fast paths themselves are unchanged.
 */
#ifndef SK_SLAB_POISON_H
#define SK_SLAB_POISON_H

#include "slab/slab.h"

#if defined(__SANITIZE_ADDRESS__)
#define SK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SK_ASAN 1
#endif
#endif
#ifndef SK_ASAN
#define SK_ASAN 0
#endif

#ifndef SK_VALGRIND
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#define SK_VALGRIND 1
#endif
#endif
#endif
#ifndef SK_VALGRIND
#define SK_VALGRIND 0
#endif

#if SK_VALGRIND
#include <valgrind/memcheck.h>
#endif
#if SK_ASAN
#include <sanitizer/asan_interface.h>
#endif

/* Decided by slab_poison_init (slab_init), before the first cache. */
extern bool slab_poison_on SK_INTERNAL;
void slab_poison_init(void);

/* The sk_cache_* paths of a poisoned cache (poison.c). */
void *slab_alloc_poisoned(struct slab_cache *c);
void slab_free_poisoned(struct slab_cache *c, void *obj, const char *call);

#define SLAB_POISON_ANY (SK_VALGRIND || SK_ASAN)
/* After a call to slab_alloc_poisoned / slab_free_poisoned: keeps the
 * caller's frame, so that the stacks the tools record ("alloc'd at",
 * "free'd at") go through sk_cache_alloc / sk_cache_free. */
#define SLAB_NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

static inline bool slab_poisons(const struct slab_cache *c)
{
    return SLAB_POISON_ANY && unlikely(c->poison);
}

/* No access to len bytes at p / access again (defined, for memcheck). */
static inline void slab_poison_range(const void *p, size_t len)
{
#if SK_ASAN
    __asan_poison_memory_region(p, len);
#endif
#if SK_VALGRIND
    VALGRIND_MAKE_MEM_NOACCESS(p, len);
#endif
    (void)p, (void)len;
}

static inline void slab_unpoison_range(const void *p, size_t len)
{
#if SK_ASAN
    __asan_unpoison_memory_region(p, len);
#endif
#if SK_VALGRIND
    VALGRIND_MAKE_MEM_DEFINED(p, len);
#endif
    (void)p, (void)len;
}

/* Around the allocator's own access to one word of a free object. */
static inline void slab_meta_open(const struct slab_cache *c, const void *word)
{
    if (slab_poisons(c))
        slab_unpoison_range(word, sizeof(uintptr_t));
}

static inline void slab_meta_close(const struct slab_cache *c, const void *word)
{
    if (slab_poisons(c))
        slab_poison_range(word, sizeof(uintptr_t));
}

/* A new slab's objects, all free (after their construction). */
static inline void slab_poison_slab(const struct slab_cache *c, const void *s_mem)
{
    if (slab_poisons(c))
        slab_poison_range(s_mem, (size_t)c->objects * c->size);
}

/* A slab going back to the page allocator. */
static inline void slab_unpoison_slab(const struct slab_cache *c, const void *s_mem)
{
    if (slab_poisons(c))
        slab_unpoison_range(s_mem, (size_t)c->objects * c->size);
}

/* The slow paths' hand-out: clear the marker of a free object. */
static inline void slab_mark_live_meta(const struct slab_cache *c, void *obj)
{
    slab_meta_open(c, slab_marker(c, obj));
    slab_mark_live(c, obj);
    slab_meta_close(c, slab_marker(c, obj));
}

#endif
