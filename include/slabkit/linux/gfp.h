/*
 * <linux/gfp.h> for kernel code built on slabkit (-I<includedir>/slabkit):
 * gfp_t and the kernel's GFP_* and __GFP_* flags, with the kernel's values
 * (6.1), as include/slabkit/kernel.h gives them.  docs/kernel.md says what
 * each means in user space.
 */
#ifndef SLABKIT_LINUX_GFP_H
#define SLABKIT_LINUX_GFP_H

#include <slabkit/kernel.h>

typedef sk_gfp_t gfp_t;

#define __GFP_DMA            SK_GFP_DMA
#define __GFP_HIGHMEM        SK_GFP_HIGHMEM
#define __GFP_DMA32          SK_GFP_DMA32
#define __GFP_MOVABLE        SK_GFP_MOVABLE
#define __GFP_RECLAIMABLE    SK_GFP_RECLAIMABLE
#define __GFP_HIGH           SK_GFP_HIGH
#define __GFP_IO             SK_GFP_IO
#define __GFP_FS             SK_GFP_FS
#define __GFP_ZERO           SK_GFP_ZERO
#define __GFP_ATOMIC         SK_GFP_ATOMIC_BIT
#define __GFP_DIRECT_RECLAIM SK_GFP_DIRECT_RECLAIM
#define __GFP_KSWAPD_RECLAIM SK_GFP_KSWAPD_RECLAIM
#define __GFP_RECLAIM        SK_GFP_RECLAIM
#define __GFP_WRITE          SK_GFP_WRITE
#define __GFP_NOWARN         SK_GFP_NOWARN
#define __GFP_RETRY_MAYFAIL  SK_GFP_RETRY_MAYFAIL
#define __GFP_NOFAIL         SK_GFP_NOFAIL
#define __GFP_NORETRY        SK_GFP_NORETRY
#define __GFP_MEMALLOC       SK_GFP_MEMALLOC
#define __GFP_COMP           SK_GFP_COMP
#define __GFP_NOMEMALLOC     SK_GFP_NOMEMALLOC
#define __GFP_HARDWALL       SK_GFP_HARDWALL
#define __GFP_THISNODE       SK_GFP_THISNODE
#define __GFP_ACCOUNT        SK_GFP_ACCOUNT

#define GFP_KERNEL         SK_GFP_KERNEL
#define GFP_KERNEL_ACCOUNT (SK_GFP_KERNEL | SK_GFP_ACCOUNT)
#define GFP_NOWAIT         SK_GFP_NOWAIT
#define GFP_ATOMIC         SK_GFP_ATOMIC
#define GFP_NOIO           SK_GFP_NOIO
#define GFP_NOFS           SK_GFP_NOFS
#define GFP_USER           (SK_GFP_KERNEL | SK_GFP_HARDWALL)
#define GFP_DMA            SK_GFP_DMA
#define GFP_DMA32          SK_GFP_DMA32
#define GFP_HIGHUSER       (GFP_USER | SK_GFP_HIGHMEM)

static inline bool gfpflags_allow_blocking(const gfp_t gfp)
{
    return !!(gfp & __GFP_DIRECT_RECLAIM);
}

/* Pages: struct page * is the first page's address here (page_address and
 * virt_to_page convert for free); alloc_pages's block is 2^order pages,
 * naturally aligned. */
struct page;

static inline void *page_address(const struct page *page)
{
    return (void *)page;
}

static inline struct page *virt_to_page(const void *addr)
{
    return (struct page *)((unsigned long)addr & ~(SK_PAGE_SIZE - 1));
}

static inline struct page *alloc_pages(gfp_t gfp, unsigned int order)
{
    return (struct page *)sk_kernel_alloc_pages(gfp, order);
}

static inline struct page *alloc_page(gfp_t gfp)
{
    return alloc_pages(gfp, 0);
}

static inline void __free_pages(struct page *page, unsigned int order)
{
    sk_kernel_free_pages(page, order);
}

#define __free_page(page) __free_pages((page), 0)

static inline unsigned long __get_free_pages(gfp_t gfp, unsigned int order)
{
    return (unsigned long)sk_kernel_alloc_pages(gfp, order);
}

#define __get_free_page(gfp) __get_free_pages((gfp), 0)

static inline unsigned long get_zeroed_page(gfp_t gfp)
{
    return __get_free_pages(gfp | __GFP_ZERO, 0);
}

static inline void free_pages(unsigned long addr, unsigned int order)
{
    sk_kernel_free_pages((void *)addr, order);
}

#define free_page(addr) free_pages((addr), 0)

#endif
