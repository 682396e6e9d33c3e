/*
 * poison.h — telling memcheck (valgrind) and ASan which bytes of a cache's
 * slabs a program may touch, as the kernel's KASAN hooks do for SLUB.
 *
 * Memory slabkit maps is plain mmap memory to both tools: without these
 * hooks they see neither the objects handed out nor the free ones, so a
 * use after free of an sk_cache object goes unseen.  For a cache whose
 * c->poison is set (poison.c does the work):
 *   layout          the free pointer and the free marker after the object,
 *                   as for a cache with a constructor (cache_setup): the
 *                   allocator's own words are never inside a poisoned range
 *   new slab        every object poisoned, its two words after it not
 *   hand-out        object_size bytes unpoisoned (memcheck:
 *                   VALGRIND_MALLOCLIKE_BLOCK, undefined, or defined for a
 *                   cache with a constructor: its objects come constructed)
 *   free            the object poisoned again (memcheck: FREELIKE_BLOCK)
 *   slab discarded  unpoisoned (memcheck: defined): the pages go back to
 *                   the page allocator, for anyone
 *   per-CPU arrays  capacity 0 (as with sheaves=0): every alloc and free
 *                   misses the fast path and reaches slab_alloc_slow /
 *                   slab_free_slow, which call the hooks
 * So the per-CPU fast paths, sk_cache_alloc and sk_cache_free are the same
 * instructions as without the tools, and nothing tests c->poison there.
 *
 * Which caches (slab_poison_init, cache_setup): the sk_cache_* caches in
 * the default mode (SLUB with sheaves) when running under valgrind
 * (RUNNING_ON_VALGRIND, seen once at init) or in the `make asan` build.
 * Not the kmalloc caches: malloc is the tool's own there (memcheck replaces
 * it, ASan owns it), and sk_malloc is not announced.  Not allocator=slab or
 * sheaves=0 caches: their fast paths keep their own per-CPU freelists.
 *
 * Without <valgrind/memcheck.h> (or with -DSK_VALGRIND=0) outside the ASan
 * build, all of it compiles out.
 */
#ifndef SK_SLAB_POISON_H
#define SK_SLAB_POISON_H

#include <stdbool.h>

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

struct slab_cache;

/* Decided by slab_poison_init (slab_init), before the first cache: a tool
 * is watching. */
extern bool slab_poison_on __attribute__((visibility("hidden")));
void slab_poison_init(void);

/* c->poison, read only on slow paths; constant false when compiled out. */
#define slab_poisons(c) ((SK_VALGRIND || SK_ASAN) && __builtin_expect((c)->poison, 0))

/* A new slab (after its objects are constructed and chained). */
void slab_poison_new_slab(const struct slab_cache *c, void *s_mem);
/* A slab going back to the page allocator. */
void slab_poison_discard_slab(const struct slab_cache *c, void *s_mem);
/* An object handed to the user / given back by the user. */
void slab_poison_alloc(const struct slab_cache *c, void *obj);
void slab_poison_free(const struct slab_cache *c, void *obj);

#endif
