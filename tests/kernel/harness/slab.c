/*
 * slab.c — slabkit's replacement for the kernel's tools/lib/slab.c (Linux
 * 6.1), as used by the radix-tree test harness: kmalloc and kfree on
 * slabkit's kmalloc (include/slabkit/kernel.h), with the harness's
 * counter kmalloc_nr_allocated kept exact.  As on the stand-in, a kmalloc
 * that may not sleep fails: slabkit's failslab budget for kmalloc, set to
 * 0 before the first allocation.  tests/kernel/harness/run copies it over
 * the extracted harness at test time.
 * Invariants: the counter moves with liburcu's atomics; kfree(NULL) is
 * not counted.
 */
#include <stdio.h>
#include <string.h>

#include <linux/gfp.h>
#include <linux/slab.h>
#include <urcu/uatomic.h>

#include <slabkit/kernel.h>

int kmalloc_nr_allocated;
int kmalloc_verbose;

__attribute__((constructor)) static void kmalloc_nowait_fails(void)
{
    sk_kmalloc_set_nowait_budget(0);
}

void *kmalloc(size_t size, gfp_t gfp)
{
    void *ret = sk_kmalloc(size, gfp | SK_GFP_NOWARN);
    if (!ret)
        return NULL;
    uatomic_inc(&kmalloc_nr_allocated);
    if (kmalloc_verbose)
        printf("Allocating %p from malloc\n", ret);
    return ret;
}

void kfree(void *p)
{
    if (!p)
        return;
    uatomic_dec(&kmalloc_nr_allocated);
    if (kmalloc_verbose)
        printf("Freeing %p to malloc\n", p);
    sk_kfree(p);
}
