/*
 * poison.c — the hooks that tell memcheck or ASan which bytes of a
 * poisoned cache's slabs are the user's (poison.h has the scheme and says
 * which caches).
 *
 * Invariants: an object of a poisoned cache is unpoisoned exactly while a
 * user holds it, from slab_alloc_slow's hand-out to slab_free_slow's first
 * step; the two words after it (free pointer, free marker: c->offset and
 * c->kofs, both outside the object for these caches) are never poisoned
 * while the slab exists, so the allocator's own accesses need no opening.
 * The tool hears of a free before the object can reach another thread, and
 * of an allocation after the allocator's last access to it.
 * Locks: none; each hook touches only its own object or a slab no other
 * thread can reach yet (new) or any more (discarded).
 */
#include "debug/poison.h"
#include "slab/slab.h"

bool slab_poison_on;

void slab_poison_init(void)
{
#if SK_ASAN
    slab_poison_on = true;
#elif SK_VALGRIND
    slab_poison_on = RUNNING_ON_VALGRIND != 0;
#endif
}

#if SK_VALGRIND || SK_ASAN
static void poison_range(const void *p, size_t len)
{
#if SK_ASAN
    __asan_poison_memory_region(p, len);
#endif
#if SK_VALGRIND
    VALGRIND_MAKE_MEM_NOACCESS(p, len);
#endif
}

/* Accessible again, and defined for memcheck (the allocator wrote it, or
 * it is memory for anyone). */
static void unpoison_range(const void *p, size_t len)
{
#if SK_ASAN
    __asan_unpoison_memory_region(p, len);
#endif
#if SK_VALGRIND
    VALGRIND_MAKE_MEM_DEFINED(p, len);
#endif
}
#endif

void slab_poison_new_slab(const struct slab_cache *c, void *s_mem)
{
#if SK_VALGRIND || SK_ASAN
    poison_range(s_mem, (size_t)c->objects * c->size);
    for (unsigned i = 0; i < c->objects; i++)
        unpoison_range((char *)s_mem + (size_t)i * c->size + c->offset, 2 * sizeof(void *));
#else
    (void)c, (void)s_mem;
#endif
}

void slab_poison_discard_slab(const struct slab_cache *c, void *s_mem)
{
#if SK_VALGRIND || SK_ASAN
    unpoison_range(s_mem, (size_t)c->objects * c->size);
#else
    (void)c, (void)s_mem;
#endif
}

/* memcheck records the stack of each (its reports say "alloc'd at" and
 * "free'd at"); a cache with a constructor hands out its objects
 * constructed, hence defined. */
void slab_poison_alloc(const struct slab_cache *c, void *obj)
{
#if SK_VALGRIND
    VALGRIND_MALLOCLIKE_BLOCK(obj, c->object_size, 0, c->ctor != NULL);
#endif
#if SK_ASAN
    __asan_unpoison_memory_region(obj, c->object_size);
#endif
    (void)c, (void)obj;
}

void slab_poison_free(const struct slab_cache *c, void *obj)
{
#if SK_VALGRIND
    VALGRIND_FREELIKE_BLOCK(obj, 0);
#endif
#if SK_ASAN
    __asan_poison_memory_region(obj, c->offset);   /* up to the free pointer */
#endif
    (void)c, (void)obj;
}
