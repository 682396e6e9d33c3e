/*
 * vm.h — address space in slices, and the page map.
 *
 * A slice is a 64 MiB aligned piece of address space serving one page
 * size: base 4 KiB pages, or 2 MiB huge pages (MADV_HUGEPAGE), or one
 * direct mapping of a block larger than the buddy allocator's largest.
 * Each slice has a header (struct vm_slice) outside the slice, holding the
 * page descriptors of all its pages, so a slice is usable in full and its
 * buddy blocks are naturally aligned.
 *
 * Slices come from an arena (vm.c, docs/slices.md): address space reserved
 * PROT_NONE in regions of up to VM_REGION_SLICES slices, committed a slice
 * at a time.  Each slice serves one page size (enum vm_psize).  Per region
 * the arena keeps three masks, updated on every slice change: free slices,
 * and slices of each page size (the size a slice last served, free or not).
 * Finding room for a run of slices of a page size reads only these masks:
 * first free slices already of that size (no system call to reuse them),
 * then never-used ones, then free ones of the other size.
 * SLABKIT_OPTIONS=slice_mask_cache=0 recomputes the masks from the
 * per-slice state bytes on every request instead (the powerpc "before").
 *
 * The page map answers, for ANY pointer value, which slice covers it:
 * vm_slice_map[addr >> 26] for user addresses (below 2^47), in a static
 * zero-filled table (2^21 entries, 16 MiB of address space of which only
 * touched pages cost memory).  One load, no lock, no fault: a foreign or
 * wild pointer reads NULL, a non-canonical one is rejected by its top bits.
 */
#ifndef SK_VM_H
#define SK_VM_H

#include <stdint.h>

#include "os/os.h"

#define SLICE_SHIFT 26
#define SLICE_SIZE ((size_t)1 << SLICE_SHIFT)
#define SLICE_PAGES (SLICE_SIZE >> SK_PAGE_SHIFT)
#define VM_ADDR_BITS 47
#define VM_MAP_ENTRIES ((size_t)1 << (VM_ADDR_BITS - SLICE_SHIFT))
#define HUGE_PAGE_SHIFT 21
#define HUGE_PAGE_SIZE ((size_t)1 << HUGE_PAGE_SHIFT)

/* The arena: a region's masks are VM_MASK_WORDS words of 64 slices. */
#define VM_REGION_SLICES 1024u       /* 64 GiB of address space */
#define VM_MASK_WORDS (VM_REGION_SLICES / 64)
#define VM_NO_REGION UINT32_MAX      /* a run outside the arena (> 64 GiB) */

enum vm_psize {
    VM_PSIZE_BASE = 0,    /* 4 KiB pages */
    VM_PSIZE_HUGE = 1,    /* 2 MiB transparent huge pages */
    VM_PSIZE_NR
};

enum vm_slice_kind {
    VM_SLICE_BASE = 1,    /* buddy memory on 4 KiB pages */
    VM_SLICE_HUGE = 2,    /* buddy memory on 2 MiB pages where THP allows */
    VM_SLICE_DIRECT = 3,  /* one mapping larger than a slice */
    VM_SLICE_USER = 4,    /* sk_vm_map regions */
};

struct sk_page;           /* the page descriptor, defined by src/page */
struct zone;

/* Header of a slice.  For a direct mapping spanning several slices, every
 * map entry points at the one header; its pages[0] describes the block. */
struct vm_slice {
    uintptr_t base;               /* first byte of the (first) slice */
    size_t size;                  /* bytes mapped: SLICE_SIZE, or more when direct */
    uint8_t kind;                 /* enum vm_slice_kind */
    uint8_t huge;                 /* MADV_HUGEPAGE was applied */
    uint16_t node;
    uint32_t nr_slices;
    struct zone *zone;            /* buddy slices: the zone they feed */
    struct vm_slice *next;        /* all slices, for statistics and tests */
    struct vm_slice *prev;        /* (vm_lock) O(1) unlink when released */
    uint32_t region;              /* arena region index, or VM_NO_REGION */
    uint32_t first;               /* first slice of the run in its region */
    uint64_t pad;
    /* Descriptors, one per 4 KiB page, 64-byte aligned (pages[] is at 64). */
    unsigned char pages[];
};

/* Slice headers are aligned to this, so a descriptor finds its header. */
#define VM_HEADER_ALIGN ((size_t)2 << 20)
static inline struct vm_slice *vm_header_of(const void *desc)
{
    return (struct vm_slice *)((uintptr_t)desc & ~(VM_HEADER_ALIGN - 1));
}

extern struct vm_slice *vm_slice_map[VM_MAP_ENTRIES] SK_INTERNAL;

static inline struct vm_slice *vm_slice_of(const void *p)
{
    uintptr_t i = (uintptr_t)p >> SLICE_SHIFT;   /* one shift serves both */
    if (unlikely(i >= VM_MAP_ENTRIES))
        return NULL;
    return __atomic_load_n(&vm_slice_map[i], __ATOMIC_RELAXED);
}

/* Descriptor bytes per page that headers are sized for (struct sk_page). */
#define VM_DESC_SIZE 64

/* A new slice of `kind` (BASE or HUGE) with zeroed descriptors; NULL with
 * errno ENOMEM when the OS refuses.  A HUGE slice gets MADV_HUGEPAGE unless
 * THP is "never" (then it runs on base pages: s->huge stays 0). */
struct vm_slice *vm_slice_new(enum vm_slice_kind kind, size_t desc_size);
/* A direct mapping of `size` bytes (a multiple of 4 KiB) as a slice run:
 * its header has one descriptor (pages[0]). */
struct vm_slice *vm_direct_new(size_t size, size_t desc_size);
void vm_direct_free(struct vm_slice *s);
/* Every slice made so far (newest first), unlocked: only for walks that no
 * other thread can race (the fork child, single-threaded tests); slices
 * given back are unlinked and their headers reused under vm_lock. */
struct vm_slice *vm_slices(void);
/* Bytes of address space reserved, and slices by kind. */
size_t vm_reserved_bytes(void);
/* Bytes of address space the arena holds (reserved, used or not). */
size_t vm_arena_bytes(void);
/* Tests: recompute every region's masks from its slice states and compare
 * them with the cached ones; returns the number of differing mask words
 * (0: the cache is exact).  Takes vm_lock. */
long vm_check_masks(void);
/* In a forked child: the vm lock may have been held by a thread now gone. */
void vm_atfork_child(void);

#endif
