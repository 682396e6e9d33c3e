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
 * Under an address-space limit (RLIMIT_AS, RLIMIT_DATA) regions are sized
 * within it, and when the arena cannot grow a zone takes a *partial slice*
 * instead: a 64 MiB-aligned slice outside the arena of which only a prefix
 * (`mapped` bytes) is mapped, grown in place while the address space above
 * it is free.  The rest of its 64 MiB is not slabkit's: other mappings may
 * sit there, and its descriptors stay zero (no block, no slab).
 *
 * The page map answers, for ANY pointer value, which slice covers it: a
 * two-level radix table over user addresses (below 2^47) indexed by
 * addr >> 26: a root of VM_ROOT_ENTRIES leaf offsets in bss, and leaves of
 * VM_LEAF_ENTRIES slice pointers mapped on demand (one leaf covers 64 GiB).
 * A root entry holds its leaf's address as an offset from
 * vm_map_empty_leaf, a static all-NULL leaf, so the zero-filled root sends
 * every unused entry there: a lookup is two dependent loads and an add, no
 * branch beyond the range check, no lock, no fault.  (Pointers to the empty
 * leaf in an initialised root cost 2048 load-time relocations: 16 KiB of
 * dirty data and 48 KiB of relocation records read at every start, where
 * the zero root costs nothing until a leaf is published.)
 * The map's entries for the 1024 slices (64 GiB) from the first arena
 * region's base, where nearly every slice of a process lies, are mirrored
 * in a flat window (vm_map_near, 8 KiB of bss): a pointer there costs one
 * load that depends on it, the window's base being a load of its own, off
 * the pointer's chain (the radix walk's second load is on free's critical
 * path: docs/design.md has the pair's figures).  Any other
 * pointer takes the radix walk.
 * A foreign or wild pointer reads NULL, a non-canonical one is rejected by
 * its top bits.  (A flat table was 16 MiB of bss, all of it counted by
 * RLIMIT_AS though untouched.)
 */
#ifndef SK_VM_H
#define SK_VM_H

#include <stdbool.h>
#include <stdint.h>

#include "os/os.h"

#define SLICE_SHIFT 26
#define SLICE_SIZE ((size_t)1 << SLICE_SHIFT)
#define SLICE_PAGES (SLICE_SIZE >> SK_PAGE_SHIFT)
#define VM_ADDR_BITS 47
#define VM_MAP_ENTRIES ((size_t)1 << (VM_ADDR_BITS - SLICE_SHIFT))
#define VM_LEAF_BITS 10
#define VM_LEAF_ENTRIES ((size_t)1 << VM_LEAF_BITS)       /* 8 KiB leaves */
#define VM_ROOT_ENTRIES (VM_MAP_ENTRIES >> VM_LEAF_BITS)  /* 2048: 16 KiB root */
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
 * map entry points at the one header; its pages[0] describes the block.
 * 128 bytes, so the descriptors that follow stay 64-byte aligned. */
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
    size_t mapped;                /* bytes mapped from base: size, or less
                                   * for a partial slice (grows; read unlocked) */
    uint8_t partial;              /* a partial slice (outside the arena) */
    uint8_t pad[3];
    uint32_t huge_from;           /* a base slice: MADV_HUGEPAGE applied from
                                   * this page on (0: nowhere; grow_lock) */
    struct vm_slice *zone_next;   /* (zone lock) the zone's partial slices */
    size_t committed;             /* header bytes read-write from its start; the
                                   * rest read-only zeros (a partial slice's
                                   * descriptors past its mapped prefix) */
    /* (the page layer's, under its zone's lock) PAGEBLOCK_BITS per 2 MiB
     * pageblock: its migratetype, stored xor the default so that a new
     * slice's zeros read as the default (page.h, pageblock_mt). */
    uint64_t pageblock_bits[2];
    uint64_t unused[3];
    /* Descriptors, one per 4 KiB page, 64-byte aligned (pages[] is at 128). */
    unsigned char pages[];
};

/*
 * The page map: after the descriptors, a 64-bit word for every page of the
 * slice, which the slab layer fills (slab_types.h) so that free finds an
 * object's cache, slab and home in one dense word instead of the page's
 * 64-byte descriptor: 8 bytes a page, one cache line for 32 KiB of
 * memory, where the descriptors take one line for each 4 KiB page, and a
 * program whose heap outgrows the caches missed on them at every free
 * (larson16 and its 40 MiB heap).  The vm layer only provides the room:
 * zero in a new or purged header, and written only where the header is
 * read-write to its end (vm_pmap_of: a whole slice's; a partial slice's
 * map stays read-only zeros, and its frees read descriptors).
 */
#define VM_PMAP_OFFSET SK_ALIGN_UP(128 + SLICE_PAGES * 64, SK_PAGE_SIZE)
#define VM_HEADER_BYTES (VM_PMAP_OFFSET + SLICE_PAGES * sizeof(uint64_t))
/* The page map of s (reads zeros where nothing was written). */
static inline uint64_t *vm_pmap(struct vm_slice *s)
{
    return (uint64_t *)((char *)s + VM_PMAP_OFFSET);
}
/* The page map of s when it may be written: NULL for a slice whose header
 * is read-write only as far as its descriptors (a partial slice). */
static inline uint64_t *vm_pmap_of(struct vm_slice *s)
{
    return __atomic_load_n(&s->committed, __ATOMIC_RELAXED) >= VM_HEADER_BYTES ? vm_pmap(s) : NULL;
}

/* Slice headers are aligned to this, so a descriptor finds its header. */
#define VM_HEADER_ALIGN ((size_t)2 << 20)
static inline struct vm_slice *vm_header_of(const void *desc)
{
    return (struct vm_slice *)((uintptr_t)desc & ~(VM_HEADER_ALIGN - 1));
}

struct vm_map_leaf {
    struct vm_slice *slice[VM_LEAF_ENTRIES];
};
extern struct vm_map_leaf vm_map_empty_leaf SK_INTERNAL;   /* all NULL, never written */
/* Every entry locates a leaf, as its offset from vm_map_empty_leaf (0:
 * the empty leaf itself); modular arithmetic, so a leaf mapped below the
 * library works too. */
extern uintptr_t vm_map_root[VM_ROOT_ENTRIES] SK_INTERNAL;

static inline const struct vm_map_leaf *vm_map_leaf_at(uintptr_t r)
{
    return (const struct vm_map_leaf *)((uintptr_t)&vm_map_empty_leaf +
                                        __atomic_load_n(&vm_map_root[r], __ATOMIC_ACQUIRE));
}

/* The near window: the slice index of its first entry times SLICE_SIZE,
 * i.e. the first region's base (VM_NEAR_UNSET until that region exists, so
 * that no user pointer falls in the window), and its VM_NEAR_SLICES
 * entries, each written with the radix entry it mirrors (vm_lock).  The
 * base is set once, after the window holds the radix map's entries. */
#define VM_NEAR_SLICES 1024u
#define VM_NEAR_UNSET ((uintptr_t)1 << 63)
extern uintptr_t vm_map_near_base SK_INTERNAL;
extern struct vm_slice *vm_map_near[VM_NEAR_SLICES] SK_INTERNAL;

static inline struct vm_slice *vm_slice_of(const void *p)
{
    /* Acquire (a plain load on x86): the window is filled before its base
     * is published.  A pointer at or above 2^63 lands in the unset
     * window's all-NULL entries, as the radix map would answer. */
    uintptr_t n = ((uintptr_t)p - __atomic_load_n(&vm_map_near_base, __ATOMIC_ACQUIRE)) >> SLICE_SHIFT;
    if (likely(n < VM_NEAR_SLICES))
        return __atomic_load_n(&vm_map_near[n], __ATOMIC_ACQUIRE);
    uintptr_t i = (uintptr_t)p >> SLICE_SHIFT;   /* one shift serves both */
    if (unlikely(i >= VM_MAP_ENTRIES))
        return NULL;
    /* Acquire (a plain load on x86): a leaf is zero-filled before it is
     * published. */
    const struct vm_map_leaf *leaf = vm_map_leaf_at(i >> VM_LEAF_BITS);
    return __atomic_load_n(&leaf->slice[i & (VM_LEAF_ENTRIES - 1)], __ATOMIC_RELAXED);
}

/* Whether p lies in the mapped part of slice s (a partial slice maps only
 * a prefix of its 64 MiB; the rest may be anybody's). */
static inline bool vm_slice_maps(const struct vm_slice *s, const void *p)
{
    return (uintptr_t)p - s->base < __atomic_load_n(&s->mapped, __ATOMIC_ACQUIRE);
}

/* Descriptor bytes per page that headers are sized for (struct sk_page). */
#define VM_DESC_SIZE 64

/* A new slice of `kind` (BASE or HUGE) with zeroed descriptors; NULL with
 * errno ENOMEM when the OS refuses.  A HUGE slice gets MADV_HUGEPAGE unless
 * THP is "never" (then it runs on base pages: s->huge stays 0). */
struct vm_slice *vm_slice_new(enum vm_slice_kind kind, size_t desc_size);
/* Advise pages [from, end) of base slice s onto huge pages, unless THP is
 * "never", and record from where on (s->huge_from, the lowest so far) the
 * slice is huge-advised.  For a slice that grows a step at a time
 * (src/page's frontier): one caller at a time per slice. */
void vm_slice_advise_huge(struct vm_slice *s, size_t from, size_t end);
/* A direct mapping of `size` bytes (a multiple of 4 KiB) as a slice run:
 * its header has one descriptor (pages[0]). */
struct vm_slice *vm_direct_new(size_t size, size_t desc_size);
void vm_direct_free(struct vm_slice *s);
/* A partial slice: 64 MiB-aligned, base pages, of which only the first
 * `bytes` (a multiple of 4 KiB, <= SLICE_SIZE) are mapped read-write, fresh
 * (zero); outside the arena.  NULL with errno ENOMEM. */
struct vm_slice *vm_partial_new(size_t bytes, size_t desc_size);
/* Map more of a partial slice in place, up to `bytes` from its base:
 * 0, or -1 with errno EEXIST (the address space above is taken: the slice
 * cannot grow) or ENOMEM (refused).  One caller at a time per slice. */
int vm_partial_grow(struct vm_slice *s, size_t bytes);
/* Give a wholly free buddy slice back to the OS: unpublish it, unmap its
 * memory (a partial slice its mapped prefix; an arena slice becomes a hole
 * in its region, never claimed again, so that the address space is the
 * OS's once more), and keep its header, purged, for the next slice. */
void vm_slice_release(struct vm_slice *s);
/* Every slice made so far (newest first), unlocked: only for walks that no
 * other thread can race (the fork child, single-threaded tests); slices
 * given back are unlinked and their headers reused under vm_lock. */
struct vm_slice *vm_slices(void);
/* Bytes of address space reserved, and slices by kind. */
size_t vm_reserved_bytes(void);
/* Abort, naming it, if a program wrote into the canary page below a
 * region of the arena (a write before the heap's first object). */
void vm_check_underrun(void);
/* malloc_trim: the arena's free slices unmapped (holes, reclaimed when the
 * arena needs room).  Returns the bytes of address space given back. */
size_t vm_arena_trim(void);
/* What vm_reserved_bytes reads (relaxed); extern for sk_inspect_root. */
extern size_t vm_bytes SK_INTERNAL;
/* Bytes of address space the arena holds (reserved, used or not). */
size_t vm_arena_bytes(void);
/* Tests: recompute every region's masks from its slice states and compare
 * them with the cached ones; returns the number of differing mask words
 * (0: the cache is exact).  Takes vm_lock. */
long vm_check_masks(void);
/* In a forked child: the vm lock may have been held by a thread now gone. */
void vm_atfork_child(void);

#endif
