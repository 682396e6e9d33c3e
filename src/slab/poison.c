/*
 * poison.c — sk_cache_alloc and sk_cache_free for a cache announced to
 * memcheck or ASan (poison.h has the scheme and says which caches).
 *
 * Invariants: an object of a poisoned cache is unpoisoned exactly while a
 * user holds it (from slab_alloc_poisoned's return to the start of
 * slab_free_poisoned's hand-back); any other time only the allocator
 * touches it, one word at a time between slab_meta_open and
 * slab_meta_close.  The tool is told of a free before the object can
 * reach another thread (before the push), and of an allocation after the
 * allocator's last access, so a thread switch in between (valgrind
 * serialises threads but may switch anywhere) cannot mislabel it.
 * Locks: none of its own; those of the paths it calls (slab.c's order).
 */
#include <errno.h>

#include "slab/slab_internal.h"

bool slab_poison_on;

void slab_poison_init(void)
{
#if SK_ASAN
    slab_poison_on = true;
#elif SK_VALGRIND
    slab_poison_on = RUNNING_ON_VALGRIND != 0;
#endif
}

/* Tell the tool the object is the user's: memcheck records the stack (its
 * reports say "alloc'd at"); a cache with a constructor hands out its
 * objects constructed, hence defined. */
static void announce_alloc(struct slab_cache *c, void *obj)
{
#if SK_VALGRIND
    VALGRIND_MALLOCLIKE_BLOCK(obj, c->object_size, 0, c->ctor != NULL);
#endif
#if SK_ASAN
    __asan_unpoison_memory_region(obj, c->object_size);
#endif
    (void)c, (void)obj;
}

static void announce_free(struct slab_cache *c, void *obj)
{
#if SK_VALGRIND
    VALGRIND_FREELIKE_BLOCK(obj, 0);
    VALGRIND_MAKE_MEM_NOACCESS(obj, c->size);   /* the stride's tail too */
#endif
#if SK_ASAN
    __asan_poison_memory_region(obj, c->size);
#endif
    (void)c, (void)obj;
}

static void *alloc_once(struct slab_cache *c)
{
    void *obj;
    if (cpu_pop_fast(slab_arrays(c), &obj)) {
        slab_mark_live_meta(c, obj);
        return obj;
    }
    return slab_alloc_slow(c);    /* marks its object live itself */
}

SK_NOINLINE void *slab_alloc_poisoned(struct slab_cache *c)
{
    void *obj = alloc_once(c);
    if (unlikely(!obj)) {
        slab_release_all();
        if (!(obj = alloc_once(c)))
            return NULL;
    }
    announce_alloc(c, obj);
    return obj;
}

/* slab_free's steps, with the marker opened for its check and write. */
SK_NOINLINE void slab_free_poisoned(struct slab_cache *c, void *obj, const char *call)
{
    uintptr_t *marker = slab_marker(c, obj);
    slab_meta_open(c, marker);    /* a double free finds the object poisoned */
    if (unlikely(slab_marked_free(c, obj))) {
        slab_free_suspect(c, obj, call);   /* returns when the mark was chance */
        slab_meta_open(c, marker);         /* the search may have closed it */
    }
    *marker = slab_free_key;
    announce_free(c, obj);
    if (!cpu_push_fast(slab_arrays(c), obj))
        slab_free_slow(c, obj);
}
