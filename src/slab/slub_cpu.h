/*
 * slub_cpu.h — caches without sheaves (sheaves=0): per-CPU freelists with
 * rseq, SLUB's fast path of 2011.  slab.c's slow paths, shrink, search and
 * statistics dispatch here when c->slots is set (slub_cpu.c).
 */
#ifndef SK_SLUB_CPU_H
#define SK_SLUB_CPU_H

#include "cpu/freelist.h"
#include "slab/slab_internal.h"

/* One per CPU id and the shared slot: the freelist the sequences reach,
 * and the lock of the slot's slow path (and of its owner slab). */
struct slub_slot {
    struct cpu_freelist fl;
    lock_t lock;
} __attribute__((aligned(CPU_FL_STRIDE)));

size_t slub_cpu_bytes(void);
void *slub_cpu_alloc(struct slab_cache *c);
void slub_cpu_free(struct slab_cache *c, void *obj);
int slub_cpu_shrink(struct slab_cache *c);
const char *slub_cpu_find_free(struct slab_cache *c, const void *obj);
/* Adjust info (slab.c's snapshot) for the freelists: free objects there,
 * fast-path counts from the tids. */
void slub_cpu_info(struct slab_cache *c, struct sk_cache_info *info);
void slub_cpu_atfork_child(struct slab_cache *c);

#endif
