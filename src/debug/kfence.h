/*
 * kfence.h — KFENCE: sampled guarded allocations (docs/kfence.md).
 *
 * With SLABKIT_OPTIONS=kfence=MS, one malloc-family allocation of at most
 * a page every MS milliseconds is served from a pool of object pages, each
 * between inaccessible guard pages.  Out-of-bounds and use-after-free
 * accesses fault and are reported (kernel-shaped) by a SIGSEGV handler;
 * writes into the canary bytes around an object are reported at its free.
 *
 * The fast paths are untouched.  A timer thread "arms" sampling the way
 * the kernel flips its static key: it points the malloc tables of every
 * class up to a page at the always-empty per-CPU arrays, so the next small
 * malloc takes the slow path (kmalloc_slow), which serves it from the pool
 * and points the tables back.  Pool objects are not in the page map, so
 * their free, realloc and malloc_usable_size reach the non-slab slow
 * paths, which test the pool's range first.  With kfence=0 nothing of
 * this runs and the range test compares against an empty range.
 */
#ifndef SK_KFENCE_H
#define SK_KFENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "os/os.h"

#define KFENCE_MAX_SIZE SK_PAGE_SIZE     /* sampled sizes: 1..4096 */

/* The pool's address range; size 0 until a pool exists (never shrinks). */
extern uintptr_t kfence_pool_start SK_INTERNAL;
extern size_t kfence_pool_size SK_INTERNAL;

/* Is p inside the pool (an object, a guard page, a free slot)? */
static inline bool kfence_addr(const void *p)
{
    return (uintptr_t)p - __atomic_load_n(&kfence_pool_start, __ATOMIC_RELAXED) <
           __atomic_load_n(&kfence_pool_size, __ATOMIC_ACQUIRE);
}

/* From kmalloc_slow, with kfence on and slabkit initialised, no lock held:
 * sets the pool up on the first call (and starts the timer thread); when
 * sampling is armed and size fits, returns an object from the pool, else
 * NULL (allocate normally). */
void *kfence_poll(size_t size);
/* The same for an object of a kernel API cache (src/kernel): `cache` (its
 * name, kept for reports: the cache must outlive the object) with its
 * size and alignment; the caller runs the constructor. */
void *kfence_poll_cache(const char *cache, size_t size, size_t align);
/* Free of a pool pointer: checks the canaries, protects the page; reports
 * and aborts for a bad or double free, or corrupted canaries. */
void kfence_free(void *p, const char *call);
/* The size the object was asked for (its usable size); reports and
 * aborts when p is not a live pool object. */
size_t kfence_size(const void *p, const char *call);
/* In a forked child: reset the lock, and re-arm so that the child's next
 * small malloc starts its own timer thread. */
void kfence_atfork_child(void);
/* leak_check: call fn for each object in use (its address and the size it
 * was asked for).  The object may be freed meanwhile (its page then
 * faults): fn must read it without touching it directly. */
void kfence_for_each_live(void (*fn)(uintptr_t addr, size_t size, void *arg), void *arg);

#endif
