/*
 * bulk.c — many objects of one cache at a time, on the per-CPU arrays
 * (the kernel's kmem_cache_alloc_bulk and kmem_cache_free_bulk).
 *
 * Allocation pops a run of objects off this CPU's array in one rseq
 * sequence (cpu_pop_batch), and when the array runs dry takes the slow
 * path once, which refills the array with a batch and hands out one, then
 * pops again.  Freeing checks and marks each object as a single free
 * does, then pushes whole runs in one sequence (cpu_push_batch); what the
 * array has no room for takes the single free's slow path (a flush).
 * Every mode works: a mode whose arrays are the empty set (slub_debug,
 * caches watched by ASan or memcheck) takes the slow path for each
 * object, as its single calls do.  The runs are booked as batch moves
 * (batch_out, batch_in), so the statistics' derived counts stay exact.
 *
 * Lock order: slab.c's; the sequences take no lock, the slow paths
 * theirs.  Invariant: an object in an array carries the free marker
 * (slab_fast.h), set before the push that publishes it.
 */
#include <limits.h>

#include "debug/kfence.h"
#include "slab/slab_internal.h"

/* How many objects one sequence moves at most (a stack buffer's worth on
 * the free side; the alloc side pops straight into the caller's array). */
#define BULK_RUN 64

size_t slab_alloc_bulk(struct slab_cache *c, void **objs, size_t n)
{
    size_t got = 0;
    while (got < n) {
        unsigned k = cpu_pop_batch(slab_arrays(c), objs + got, n - got < UINT_MAX ? (unsigned)(n - got) : UINT_MAX);
        if (k) {
            book(c, batch_out, k);
            for (unsigned i = 0; i < k; i++)
                slab_mark_live(c, objs[got + i]);
            got += k;
            continue;
        }
        void *obj = slab_alloc_slow(c);   /* refills the array; marks obj live */
        if (!obj)
            break;
        objs[got++] = obj;
    }
    return got;
}

/* Push run[0..m) on this CPU's array; the rest through the slow path. */
static void push_run(struct slab_cache *c, void **run, unsigned m)
{
    unsigned pushed = cpu_push_batch(slab_arrays(c), run, m);
    if (pushed)
        book(c, batch_in, pushed);
    for (unsigned i = pushed; i < m; i++)
        slab_free_slow(c, run[i]);
}

void slab_free_bulk(struct slab_cache *c, void **objs, size_t n, const char *call)
{
    void *run[BULK_RUN];
    unsigned m = 0;
    for (size_t i = 0; i < n; i++) {
        void *obj = objs[i];
        if (unlikely(kfence_addr(obj))) {
            kfence_free(obj, call);     /* a sampled single allocation */
            continue;
        }
        struct slab_cache *owner = NULL;
        struct sk_page *pg = obj ? slab_of_object(obj, &owner) : NULL;
        if (unlikely(!pg || owner != c)) {
            if (!obj)
                continue;                 /* the kernel skips NULL too */
            push_run(c, run, m);          /* what came before is freed */
            m = 0;
            slab_free_foreign(c, pg, owner, obj, call);
            continue;
        }
        if (unlikely(slab_marked_free(c, obj))) {
            /* Freed already, perhaps earlier in this very call: the run
             * goes first, so the check finds that free where it went. */
            push_run(c, run, m);
            m = 0;
            slab_free_marked(c, obj, call);
            continue;
        }
        *slab_marker(c, obj) = slab_free_key;
        run[m++] = obj;
        if (m == BULK_RUN) {
            push_run(c, run, m);
            m = 0;
        }
    }
    push_run(c, run, m);
}
