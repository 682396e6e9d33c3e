/*
 * kernel.h — what the kernel API's files share (src/kernel): failslab's
 * check.  The API itself is include/slabkit/kernel.h.
 */
#ifndef SK_KERNEL_INTERNAL_H
#define SK_KERNEL_INTERNAL_H

#include <slabkit/kernel.h>

#include "slab/slab.h"

/* failslab's state: 0 not read from the options yet, 1 off, 2 on. */
extern unsigned char failslab_mode SK_INTERNAL;
/* kmalloc's budget of allocations that may not sleep (all its caches). */
extern bool failslab_kmalloc_armed SK_INTERNAL;

/*
 * Whether an allocation of n objects of the cache `name` (kernel_flags
 * its SLAB_* flags; armed/budget its budget of allocations that may not
 * sleep, or NULL) fails by injection.  `call` names the entry point for
 * failslab's verbose line.
 */
bool failslab_check(const char *call, const char *name, unsigned long kernel_flags, bool armed,
                    long *budget, sk_gfp_t gfp, unsigned long n);

/* Whether to ask failslab_check at all: cheap, inline. */
static inline bool failslab_maybe(bool armed)
{
    return __builtin_expect(__atomic_load_n(&failslab_mode, __ATOMIC_RELAXED) != 1 || armed, 0);
}

/* The budget kmalloc's allocations count down. */
long *failslab_kmalloc_budget(void);

#endif
