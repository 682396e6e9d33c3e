/*
 * slab_classic.h — SLAB, the kernel's slab allocator before SLUB replaced it
 * (mm/slab.c of 3.12/3.13), as a mode of a slab cache (allocator=slab).
 *
 * It shares the per-CPU object arrays (src/cpu: SLAB's array_cache) and the
 * node's barn (SLAB's shared array) with SLUB, and so the fast paths; it
 * differs in the slow paths, which slab.c hands over here once per call on
 * cache->mode.  Data structures (docs/slab.md):
 *   node lists   full, partial and free slabs, under list_lock, with
 *                free_objects and free_limit (struct slab_classic_node)
 *   struct slab  SLAB's slab descriptor (3.12: 48 bytes with its padding): list,
 *                s_mem, the head page, active objects, first free index, node.  slab_mgmt=onslab: at the
 *                head of the slab (after the colour), followed by the index
 *                array; slab_mgmt=page: the same fields laid over the page
 *                descriptor (struct sk_page), the index array alone at the
 *                slab head.  Objects of 512 B and more keep both off the slab.
 *   index array  one 32-bit object index per object (kmem_bufctl_t):
 *                onslab, a chain (free: first free, idx[i]: next free);
 *                page, a stack (idx[active..num) are the free objects).
 */
#ifndef SK_SLAB_CLASSIC_H
#define SK_SLAB_CLASSIC_H

#include <stdint.h>

/* Whose slow paths run a cache: SLUB's (slab.c, slub_cpu.c), SLAB's
 * (slab_classic.c), or slub_debug's (slab_debug.c: every operation, its
 * per-CPU arrays left at capacity 0). */
enum slab_mode { SLAB_MODE_SLUB, SLAB_MODE_CLASSIC, SLAB_MODE_DEBUG };

/* A circular list with a sentinel, the kernel's list_head. */
struct classic_list {
    struct classic_list *next, *prev;
};

struct slab_classic_node {         /* per cache per node, under list_lock */
    struct classic_list full, partial, free;
    unsigned long free_objects;   /* on the slabs of partial and free */
    unsigned long free_limit;     /* empty slabs beyond it go back */
    unsigned long nr_free_slabs;
    unsigned long nr_partial_slabs;
    unsigned colour_next;         /* the next slab's colour */
};

struct slab_classic_cache {        /* per cache, set at creation */
    uint8_t onslab;               /* slab_mgmt=onslab: struct slab in the slab */
    uint8_t off_slab;             /* struct slab / index array kmalloc'd */
    uint16_t colour;              /* colours: leftover / colour_off */
    uint32_t colour_off;          /* a cache line, or the alignment */
    uint32_t mgmt_size;           /* bytes of struct slab + index array */
    uint32_t shared;              /* shared array: batches (sharedfactor) */
    struct slab_cache *mgmt_cache; /* off-slab: where mgmt comes from */
};

struct slab_cache;
struct slab_node;
struct sk_cache_info;

/* Size a new cache as SLAB did (order, objects, colours, management,
 * array limit and batchcount, shared factor, free_limit). */
void slab_classic_setup(struct slab_cache *c);
/* The kmalloc classes of SLAB: powers of two, 96 and 192. */
extern const uint32_t slab_classic_kmalloc_sizes[];
extern const unsigned slab_classic_kmalloc_nr;
/* The alignment the kernel gave its kmalloc caches (SLAB_HWCACHE_ALIGN,
 * halved while the object fits in half of it; at least 8). */
size_t slab_classic_kmalloc_align(size_t size);

void *slab_classic_alloc_slow(struct slab_cache *c);
void slab_classic_free_slow(struct slab_cache *c, void *obj);
int slab_classic_shrink(struct slab_cache *c);
/* Is obj free on its slab (double-free search)? */
bool slab_classic_slab_has_free(struct slab_cache *c, void *obj);
/* slab_cache_info's per-node part: free objects on slabs, empty slabs. */
void slab_classic_node_info(struct slab_cache *c, struct slab_node *n, struct sk_cache_info *info,
                            unsigned long *free_objs, unsigned long *empty_slabs);
/* Fork child: the refill and flush scratch arrays' locks (what a held one
 * carried leaks). */
void slab_classic_atfork_child(void);
/* Fork child: a node whose list_lock was held loses its lists (leaked). */
void slab_classic_abandon_node(struct slab_node *n);

#endif
