/*
 * malloc.h — what the malloc layer's files (override.c, sized.c, cxx.c,
 * info.c) share: malloc's fast path, and the routes of the sized frees.
 *
 * A sized free (free_sized, free_aligned_sized, sized operator delete)
 * skips free's page-map walk by trusting the size to name the class, as
 * jemalloc's sdallocx and tcmalloc's sized delete do.  It may do so only
 * where the matching unsized free is slabkit's own: a program that
 * replaces operator delete(void*) but not the sized one, or a preloaded
 * allocator ahead of slabkit for free, must get its own free called
 * (the C++ rule: the default sized delete calls the unsized one).  So each
 * sized entry point has a route, resolved at its first call by comparing
 * the unsized function's address, as the program links it, with
 * slabkit's own:
 *   SIZED_TRUST    slabkit's; the size picks the class (no lookup)
 *   SIZED_CHECK    slabkit's, with sized_check=1: look the object up, and
 *                  abort naming the call when the size is not its class
 *   SIZED_FORWARD  not slabkit's: call the program's unsized function
 *   SIZED_LOOKUP   slabkit's, with kfence on: look the object up (a
 *                  KFENCE object is in no class), do not check the size
 * The route is written once per entry point (relaxed: any thread that
 * resolves it finds the same answer).
 */
#ifndef SK_MALLOC_H
#define SK_MALLOC_H

#include "slab/kmalloc.h"

/* The malloc family hands out 16-byte aligned memory: kmalloc-8, which the
 * kernel-style sk_malloc uses for 1..8 bytes, is never theirs.  malloc's
 * own fast path gets this from its table (kmalloc_arrays16). */
static inline size_t malloc_size(size_t n)
{
    return n < 16 ? 16 : n;
}

void *malloc_slow(size_t size);
/* Above the classes: this CPU's page lists, else malloc_slow.  Out of line,
 * so that malloc itself holds nothing across a call: gcc otherwise kept
 * the size in a callee-saved register, saved and restored on every
 * malloc, whenever the fast paths above changed shape. */
void *malloc_large(size_t size);
/* malloc_stats' lines in glibc's format, on fd (info.c). */
void malloc_stats_glibc(int fd);

static SK_ALWAYS_INLINE void *malloc_inline(size_t size)
{
    if (likely(size <= KMALLOC_SMALL_MAX)) {
        void *obj;
        /* Acquire: kmalloc_init publishes the entry after its cache. */
        if (likely(cpu_pop_fast(__atomic_load_n(&kmalloc_arrays16[(size + 15) >> 4], __ATOMIC_ACQUIRE), &obj))) {
            ((uintptr_t *)obj)[1] = 0;   /* no free marker (slab_fast.h): classes >= 16 */
            return obj;
        }
    } else if (likely(size <= KMALLOC_MAX_CACHE_SIZE)) {
        void *obj = kmalloc_mid_fast(size);   /* 1-16 KiB: one table load too */
        if (likely(obj))
            return obj;
    } else {
        return malloc_large(size);   /* 16-256 KiB: this CPU's page lists */
    }
    return malloc_slow(size);
}

/* aligned_alloc's body for a valid (power of two) alignment. */
static inline void *malloc_aligned(size_t align, size_t size)
{
    if (align <= 16)
        return malloc_inline(size);
    return sk_aligned_alloc(align, malloc_size(size));
}

enum sized_route { SIZED_UNKNOWN, SIZED_TRUST, SIZED_CHECK, SIZED_FORWARD, SIZED_LOOKUP };

struct sized_entry {
    int route;                 /* enum sized_route; written once */
    bool forward_align;        /* forward as fn(p, align), not fn(p) */
    const char *call;          /* the sized entry point, for reports */
    void *forward;             /* the unsized function, as the program links it */
    bool (*ours)(void);        /* is that function (and what it stands on) slabkit's? */
};

/* The sized free of p when the inline case below does not take it: size
 * is malloc_size'd. */
void sized_free_slow(struct sized_entry *e, void *p, size_t size, size_t align);

/* A sized free of p, got for `size` bytes aligned to `align` (at most 16
 * for malloc's own): a small object with the route TRUST here, inline;
 * everything else out of line.  Always inlined: GCC stopped inlining it
 * into free_sized once the unit grew (a jump and an argument shuffle more
 * per call). */
static SK_ALWAYS_INLINE void sized_free(struct sized_entry *e, void *p, size_t size, size_t align)
{
    size = malloc_size(size);
    if (likely(size <= KMALLOC_SMALL_MAX && align <= 16 && p &&
               __atomic_load_n(&e->route, __ATOMIC_RELAXED) == SIZED_TRUST)) {
        slab_free_sized(kmalloc_caches[kmalloc_small_index[(size + 7) >> 3]], p, e->call);
        return;
    }
    sized_free_slow(e, p, size, align);
}

#endif
