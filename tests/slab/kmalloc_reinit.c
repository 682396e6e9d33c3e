/*
 * kmalloc_reinit — kmalloc_init run again after an attempt that
 * published a class's cache but did not get to record it in
 * kmalloc_caches: what a fork child inherits from a thread forked
 * between the two (tests/malloc/fork_mid_init hit it about one run in
 * twenty: the child's every allocation then failed with ENOMEM).  The
 * second run adopts the published cache, by its name, and allocation
 * goes on through it.
 */
#include <errno.h>
#include <stdlib.h>

#include "slab/kmalloc.h"
#include "tap.h"

int main(void)
{
    plan(3);
    void *p = malloc(40);      /* start-up */
    free(p);
    unsigned i = kmalloc_index(64);
    struct slab_cache *c = kmalloc_caches[i];
    __atomic_store_n(&kmalloc_caches[i], NULL, __ATOMIC_RELEASE);   /* the lost store */
    errno = 0;
    int r = kmalloc_init();
    ok(r == 0, "kmalloc_init again with kmalloc-64 published but unrecorded: %d (errno %d)", r, errno);
    ok(kmalloc_caches[i] == c, "it adopted the published cache (%p, was %p)", (void *)kmalloc_caches[i], (void *)c);
    void *q = malloc(64);
    ok(q != NULL, "and malloc(64) is served");
    free(q);
    return 0;
}
