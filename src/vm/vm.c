/*
 * vm.c — slices, the arena they come from, and the page map.
 *
 * The arena reserves address space in regions (PROT_NONE, MAP_NORESERVE,
 * slice-aligned) and hands it out as runs of whole slices, each run of one
 * page size.  Per region it keeps one state byte per slice and three masks
 * (free, base-size, huge-size), the powerpc slice series' cached masks: a
 * request reads the masks, a slice change updates them, and nothing
 * recomputes them per request unless slice_mask_cache=0 asks for the old
 * way (on the request's stack, as the series' before did).  Regions grow geometrically (16 slices, then as many as the arena
 * already holds, up to VM_REGION_SLICES), and a reservation the OS refuses
 * is retried at exactly the size needed, so RLIMIT_AS still ends in ENOMEM
 * where it did before.  Runs longer than a region bypass the arena (one
 * mmap each, as before).
 *
 * Under an address-space limit (os_limit_bytes: RLIMIT_AS, RLIMIT_DATA) a
 * region holds at most a quarter of the limit, and none is tried for a run
 * of more than half of it: the zones then take partial slices (mapped
 * prefix only, outside the arena, grown in place) instead.  A wholly free
 * buddy slice can be given back (vm_slice_release): a partial one is
 * unmapped; an arena one is unmapped too and stays a *hole* in its region,
 * marked used with no owner, so that the address space returns to the OS;
 * malloc_trim makes holes of the arena's free slices too (vm_arena_trim).
 * Another mapping may take a hole's place, so the arena claims it again
 * only by reserving it anew at exactly that place (arena_reclaim_holes),
 * before it reserves a new region.  Every system call of these runs with
 * vm_lock dropped; slice states are read and changed under it.
 *
 * Invariants:
 *  - The map entry of slice i (vm_map_root/leaf) is non-NULL exactly while
 *    slice i is handed out by slabkit; it is published (release) only after
 *    the header is fully initialised, and cleared before the slice goes
 *    back.  Leaves are mapped zero, published once (release, under
 *    vm_lock) and never unmapped.
 *  - (vm_lock) Once vm_map_near_base is set (once, at the first region,
 *    after the window was filled), vm_map_near[n] equals the map entry
 *    of slice (vm_map_near_base >> SLICE_SHIFT) + n: map_set writes both.
 *  - Headers live in their own mmap (never in the slice).  A released
 *    header stays mapped (a racing lookup of a stale pointer may read it)
 *    and is reused for the next slice.
 *  - (vm_lock) For every region r and slice i < r->nr:
 *      free bit i     == !(state[i] & VS_USED)
 *      psize[p] bit i == (state[i] & VS_PSIZE) == VS_PSIZE_OF(p)
 *    and no bit at or past r->nr is set.  vm_check_masks() proves it.
 *  - A slice marked VS_USED belongs to exactly one run; the system calls
 *    that commit, advise or purge it run with vm_lock dropped, by the one
 *    thread that owns the run.
 * Lock order: vm_lock is a leaf (taken by the page allocator's zone code
 * with the zone lock dropped or held, never the other way round).  Nothing
 * here allocates with malloc: it runs inside malloc.
 */
#include <errno.h>
#include <string.h>

#include "lock/lock.h"
#include "vm/vm.h"

_Static_assert(__builtin_offsetof(struct vm_slice, pages) == 128, "descriptors start at 128");

struct vm_map_leaf vm_map_empty_leaf SK_BIG_BSS;
uintptr_t vm_map_root[VM_ROOT_ENTRIES] SK_BIG_BSS;   /* zero: every entry the empty leaf */
uintptr_t vm_map_near_base = VM_NEAR_UNSET;
struct vm_slice *vm_map_near[VM_NEAR_SLICES] SK_BIG_BSS;

/* Per-slice state byte. */
#define VS_USED        0x01u  /* handed out */
#define VS_PSIZE       0x06u  /* page size it serves (or last served): 0 never used */
#define VS_PSIZE_OF(p) ((unsigned)((p) + 1) << 1)
#define VS_COMMITTED   0x08u  /* read-write (was PROT_NONE while reserved) */
#define VS_ADV_HUGE    0x10u  /* MADV_HUGEPAGE applied */
#define VS_ADV_NOHUGE  0x20u  /* MADV_NOHUGEPAGE applied */
#define VS_HOLE        0x40u  /* (with VS_USED) given back to the OS: claimed again only
                                * once mapped again at its place (arena_reclaim_holes) */

struct vm_masks {
    uint64_t free[VM_MASK_WORDS];
    uint64_t psize[VM_PSIZE_NR][VM_MASK_WORDS];
};

struct vm_region {
    uintptr_t base;
    uintptr_t guard;               /* the canary page just below base, or 0 */
    uint32_t nr;                   /* slices in the region, <= VM_REGION_SLICES */
    uint32_t nr_free;
    struct vm_masks cached;        /* kept up to date on every change */
    uint8_t state[VM_REGION_SLICES];
};

#define VM_MAX_REGIONS 4096

static spinlock_t vm_lock = SPINLOCK_INIT;
static struct vm_slice *vm_all;
size_t vm_bytes SK_INTERNAL;       /* handed out (vm.h) */
static size_t vm_arena;            /* reserved by the arena */
static struct vm_region *vm_regions[VM_MAX_REGIONS] SK_BIG_BSS;
static uint32_t vm_nr_regions;
static uint32_t vm_arena_slices;
static struct vm_slice *vm_spare;  /* released headers, linked by next */

static void map_near_open(uintptr_t base);

/* ---- masks ---- */

static inline void bit_set(uint64_t *m, uint32_t i) { m[i >> 6] |= 1ull << (i & 63); }
static inline void bit_clear(uint64_t *m, uint32_t i) { m[i >> 6] &= ~(1ull << (i & 63)); }

/* Change slice i's state and its bits in the cached masks (vm_lock). */
static void slice_set_state(struct vm_region *r, uint32_t i, uint8_t st)
{
    uint8_t old = r->state[i];
    r->state[i] = st;
    if ((old ^ st) & VS_USED) {
        if (st & VS_USED) {
            bit_clear(r->cached.free, i);
            r->nr_free--;
        } else {
            bit_set(r->cached.free, i);
            r->nr_free++;
        }
    }
    if ((old ^ st) & VS_PSIZE)
        for (unsigned p = 0; p < VM_PSIZE_NR; p++) {
            if ((st & VS_PSIZE) == VS_PSIZE_OF(p))
                bit_set(r->cached.psize[p], i);
            else
                bit_clear(r->cached.psize[p], i);
        }
}

/* The masks from the state bytes alone, into m (the seed's per-request
 * computation, and the reference for vm_check_masks). */
static void masks_compute(const struct vm_region *r, struct vm_masks *m)
{
    memset(m, 0, sizeof *m);
    for (uint32_t i = 0; i < r->nr; i++) {
        uint8_t st = r->state[i];
        if (!(st & VS_USED))
            bit_set(m->free, i);
        for (unsigned p = 0; p < VM_PSIZE_NR; p++)
            if ((st & VS_PSIZE) == VS_PSIZE_OF(p))
                bit_set(m->psize[p], i);
    }
}

/* Word w of the candidate mask of `pass`: 0 free slices already of psize,
 * 1 free slices never used, 2 any free slice. */
static inline uint64_t candidates(const struct vm_masks *m, unsigned psize, int pass, uint32_t w)
{
    uint64_t c = m->free[w];
    if (pass == 0)
        c &= m->psize[psize][w];
    else if (pass == 1)
        c &= ~(m->psize[0][w] | m->psize[1][w]);
    return c;
}

/* First run of n candidate slices in m; -1 if none. */
static long run_find(const struct vm_masks *m, uint32_t nr, unsigned psize, int pass, uint32_t n)
{
    uint32_t words = (nr + 63) / 64;
    if (n == 1) {
        for (uint32_t w = 0; w < words; w++) {
            uint64_t c = candidates(m, psize, pass, w);
            if (c)
                return (long)(w * 64 + (uint32_t)__builtin_ctzll(c));
        }
        return -1;
    }
    uint32_t run = 0, start = 0;
    for (uint32_t w = 0; w < words; w++) {
        uint64_t c = candidates(m, psize, pass, w);
        if (c == ~0ull) {
            if (!run)
                start = w * 64;
            run += 64;
        } else if (!c) {
            run = 0;
        } else {
            for (uint32_t b = 0; b < 64; b++) {
                if (c >> b & 1) {
                    if (!run)
                        start = w * 64 + b;
                    run++;
                    if (run >= n)
                        return start;
                } else {
                    run = 0;
                }
            }
        }
        if (run >= n)
            return start;
    }
    return -1;
}

/*
 * slice_mask_cache=0, seed 002's before: no mask is kept, and every
 * request computes a region's free and page-size masks from its state
 * bytes into a struct vm_masks on its own stack (384 bytes: the frame the
 * seed's series cut from 656 to 320 bytes held four such masks), with no
 * cached count of free slices either.  Each region's masks are computed
 * once a request: one sweep keeps, per region, the lowest pass that fits,
 * which picks the same slices as arena_claim's pass-major order.
 * Not inlined: its frame is its own, for checkstack.
 */
static SK_NOINLINE long arena_claim_uncached(unsigned psize, uint32_t n, uint32_t *first)
{
    struct vm_masks m;
    long best = -1;
    int best_pass = 3;
    for (uint32_t ri = 0; ri < vm_nr_regions && best_pass > 0; ri++) {
        const struct vm_region *r = vm_regions[ri];
        masks_compute(r, &m);
        for (int pass = 0; pass < best_pass; pass++) {
            long i = run_find(&m, r->nr, psize, pass, n);
            if (i >= 0) {
                best = ri;
                best_pass = pass;
                *first = (uint32_t)i;
                break;
            }
        }
    }
    return best;
}

/* Find and claim n free slices of psize (vm_lock held).  Returns the
 * region index, with *first set, or -1 when no region has room.  Reads
 * the cached masks (the seed's after; slabkit caches the free mask and
 * count too, where the kernel's after cached the page-size masks only). */
static long arena_claim(unsigned psize, uint32_t n, uint32_t *first)
{
    if (!sk_opt.slice_mask_cache)
        return arena_claim_uncached(psize, n, first);
    for (int pass = 0; pass < 3; pass++)
        for (uint32_t ri = 0; ri < vm_nr_regions; ri++) {
            struct vm_region *r = vm_regions[ri];
            if (r->nr_free < n)
                continue;
            long i = run_find(&r->cached, r->nr, psize, pass, n);
            if (i >= 0) {
                *first = (uint32_t)i;
                return ri;
            }
        }
    return -1;
}

/* arena_claim under vm_lock: on success the lock is still held (the
 * caller sets the run's states, then drops it); on failure it is not. */
static long arena_claim_locked(unsigned psize, uint32_t n, uint32_t *first)
{
    spin_lock(&vm_lock);
    long got = arena_claim(psize, n, first);
    if (got < 0)
        spin_unlock(&vm_lock);
    return got;
}

/*
 * The page just below a region, mapped zero where it is free: a canary.
 * A slab's first object may start at the region's base, with no header
 * before it, so a program that writes just before an object it was given
 * (glibc's tst-malloc-backtrace writes the word before a freed block, where
 * glibc keeps its chunk size) would fault there in an unmapped page, with
 * no word of what happened.  Its write lands in the canary instead, and
 * vm_check_underrun (at exit, at malloc_trim) aborts naming it.  Untouched,
 * the page costs address space only: reading it maps the zero page.
 */
static uintptr_t region_guard(uintptr_t base)
{
    return (uintptr_t)os_map_fixed((void *)(base - SK_PAGE_SIZE), SK_PAGE_SIZE);
}

void vm_check_underrun(void)
{
    uint32_t n = __atomic_load_n(&vm_nr_regions, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; i++) {
        const struct vm_region *r = __atomic_load_n(&vm_regions[i], __ATOMIC_ACQUIRE);
        if (!r || !r->guard)
            continue;
        const uint64_t *w = (const uint64_t *)r->guard;
        for (size_t j = SK_PAGE_SIZE / sizeof *w; j-- > 0;)
            if (w[j])
                os_fatal("heap underrun: %zu bytes below the heap's base %p were written (at %p: a write before "
                         "the first object of a slab)", SK_PAGE_SIZE - j * sizeof *w, (void *)r->base,
                         (const void *)&w[j]);
    }
}

/* Reserve a new region with room for n slices; vm_lock NOT held.
 * Returns 0, or -1 with errno ENOMEM. */
static int arena_grow(uint32_t n)
{
    uint32_t want = __atomic_load_n(&vm_arena_slices, __ATOMIC_RELAXED);
    if (want < 16)
        want = 16;
    if (want > VM_REGION_SLICES)
        want = VM_REGION_SLICES;
    /* Within the limit: a region of at most a quarter of it, and no region
     * at all for a run of more than half (the zones then map partial
     * slices, which hold only what they use). */
    size_t limit = os_limit_bytes();
    if (limit != SIZE_MAX) {
        if (((size_t)n << SLICE_SHIFT) > limit / 2)
            goto nomem;
        if (((size_t)want << SLICE_SHIFT) > limit / 4)
            want = (uint32_t)((limit / 4) >> SLICE_SHIFT);
    }
    if (want < n)
        want = n;
    void *mem = os_reserve((size_t)want << SLICE_SHIFT, SLICE_SIZE);
    if (!mem && want > n) {
        want = n;
        mem = os_reserve((size_t)want << SLICE_SHIFT, SLICE_SIZE);
    }
    if (!mem)
        goto nomem;
    struct vm_region *r = os_map(SK_ALIGN_UP(sizeof *r, SK_PAGE_SIZE), SK_PAGE_SIZE);
    if (!r) {
        os_unmap(mem, (size_t)want << SLICE_SHIFT);
        goto nomem;
    }
    r->base = (uintptr_t)mem;
    r->guard = region_guard(r->base);
    r->nr = want;
    r->nr_free = want;
    for (uint32_t i = 0; i < want; i++)
        bit_set(r->cached.free, i);
    spin_lock(&vm_lock);
    if (vm_nr_regions == VM_MAX_REGIONS) {
        spin_unlock(&vm_lock);
        os_unmap(mem, (size_t)want << SLICE_SHIFT);
        os_unmap(r, SK_ALIGN_UP(sizeof *r, SK_PAGE_SIZE));
        goto nomem;
    }
    if (vm_nr_regions == 0)
        map_near_open(r->base);
    __atomic_store_n(&vm_regions[vm_nr_regions], r, __ATOMIC_RELEASE);
    /* Release: a reader without vm_lock (vm_check_underrun) that sees
     * the count sees the region. */
    __atomic_store_n(&vm_nr_regions, vm_nr_regions + 1, __ATOMIC_RELEASE);
    /* Read without vm_lock (sizing the next region, statistics). */
    __atomic_store_n(&vm_arena_slices, vm_arena_slices + want, __ATOMIC_RELAXED);
    __atomic_store_n(&vm_arena, vm_arena + ((size_t)want << SLICE_SHIFT), __ATOMIC_RELAXED);
    spin_unlock(&vm_lock);
    return 0;
nomem:
    errno = ENOMEM;
    return -1;
}

/*
 * Holes back into the arena.  A slice given back to the OS (malloc_trim,
 * or an allocation that failed) is unmapped, so the process's address
 * space shrinks; its place may since have been taken by another mapping.
 * When the arena has no run of n slices for a request, the first window
 * of n slices that are each free or a hole has its holes reserved again
 * at exactly their places (MAP_FIXED_NOREPLACE: a place taken meanwhile
 * stays a hole, and the window is given up) as free, never-used slices,
 * before any new region is reserved: a program that trimmed 1 GiB of
 * small objects and then asks for a 1 GiB block gets the same address
 * space back, and no more of it.  The reservations are made with vm_lock
 * dropped; a racing reclaimer of the same hole gets EEXIST.  Returns
 * whether a window was made whole.
 */
static bool hole_or_free(const struct vm_region *r, uint32_t i)
{
    return !(r->state[i] & VS_USED) || r->state[i] == (VS_USED | VS_HOLE);
}

/* The first slice of a window of n free-or-hole slices in r, or -1
 * (vm_lock held). */
static long hole_window(const struct vm_region *r, uint32_t n)
{
    uint32_t run = 0;
    for (uint32_t i = 0; i < r->nr; i++) {
        run = hole_or_free(r, i) ? run + 1 : 0;
        if (run >= n)
            return (long)(i + 1 - n);
    }
    return -1;
}

static bool arena_reclaim_holes(uint32_t n)
{
    uint32_t nr = __atomic_load_n(&vm_nr_regions, __ATOMIC_ACQUIRE);
    for (uint32_t ri = 0; ri < nr; ri++) {
        struct vm_region *r = __atomic_load_n(&vm_regions[ri], __ATOMIC_ACQUIRE);
        spin_lock(&vm_lock);
        long w = hole_window(r, n);
        spin_unlock(&vm_lock);
        if (w < 0)
            continue;
        bool whole = true;
        for (uint32_t k = (uint32_t)w; k < (uint32_t)w + n && whole; k++) {
            spin_lock(&vm_lock);
            bool hole = r->state[k] == (VS_USED | VS_HOLE);
            spin_unlock(&vm_lock);
            if (!hole)
                continue;          /* free already, or taken meanwhile: the claim decides */
            if (!os_reserve_at((void *)(r->base + ((uintptr_t)k << SLICE_SHIFT)), SLICE_SIZE)) {
                whole = false;     /* its place is another mapping's now */
                break;
            }
            spin_lock(&vm_lock);
            slice_set_state(r, k, 0);
            __atomic_store_n(&vm_arena, vm_arena + SLICE_SIZE, __ATOMIC_RELAXED);
            spin_unlock(&vm_lock);
        }
        if (whole)
            return true;
    }
    return false;
}

/* malloc_trim's share of the arena: every free slice's reservation goes
 * back to the OS too, a hole from then on (reclaimed as above when the
 * arena needs room again).  Marked first, under vm_lock, so that no claim
 * takes a slice being unmapped; one that cannot be unmapped (the process
 * is at vm.max_map_count) is free again.  Returns the bytes given back. */
size_t vm_arena_trim(void)
{
    size_t bytes = 0;
    uint32_t nr = __atomic_load_n(&vm_nr_regions, __ATOMIC_ACQUIRE);
    for (uint32_t ri = 0; ri < nr; ri++) {
        struct vm_region *r = __atomic_load_n(&vm_regions[ri], __ATOMIC_ACQUIRE);
        for (uint32_t i = 0; i < r->nr; i++) {
            spin_lock(&vm_lock);
            bool take = !(r->state[i] & VS_USED);
            if (take)
                slice_set_state(r, i, VS_USED | VS_HOLE);
            spin_unlock(&vm_lock);
            if (!take)
                continue;
            void *at = (void *)(r->base + ((uintptr_t)i << SLICE_SHIFT));
            bool gone = os_unmap(at, SLICE_SIZE) == 0;     /* no lock across it */
            spin_lock(&vm_lock);
            if (gone)
                __atomic_store_n(&vm_arena, vm_arena - SLICE_SIZE, __ATOMIC_RELAXED);
            else
                slice_set_state(r, i, 0);
            spin_unlock(&vm_lock);
            bytes += gone ? SLICE_SIZE : 0;
        }
    }
    return bytes;
}

/* ---- headers ---- */

_Static_assert(VM_PMAP_OFFSET >= sizeof(struct vm_slice) + SLICE_PAGES * VM_DESC_SIZE,
               "the page map follows the descriptors");
_Static_assert(VM_HEADER_BYTES <= VM_HEADER_ALIGN, "a slice header fits its alignment");

/*
 * Headers.  A slice's header holds a descriptor for every page of the
 * slice: 1 MiB.  A partial slice (under an address-space limit) maps a
 * prefix of its slice and grows it in place, and its descriptors past the
 * prefix are only ever read, as zeros (a buddy there never merges).  So
 * its header is mapped read-only and made read-write as far as the prefix
 * needs (header_commit, from vm_partial_new and vm_partial_grow), and
 * read-only zeros count in no RLIMIT_DATA.  `committed` says how far a header is read-write; a spare
 * header keeps it, and serves a whole slice only once made whole.
 */
static void header_put(struct vm_slice *s);

static size_t header_need(size_t bytes)
{
    size_t n = SK_ALIGN_UP(sizeof(struct vm_slice) + (bytes >> SK_PAGE_SHIFT) * VM_DESC_SIZE, SK_PAGE_SIZE);
    return n < VM_HEADER_BYTES ? n : VM_HEADER_BYTES;
}

/* Make s read-write as far as `need` bytes: 0, or -1 (the OS refused). */
static int header_commit(struct vm_slice *s, size_t need)
{
    size_t have = s->committed;
    if (need <= have)
        return 0;
    if (os_commit((char *)s + have, need - have) != 0)
        return -1;
    s->committed = need;
    return 0;
}

/* A header with zeroed descriptors, read-write for `need` bytes at least:
 * a released one, or a new mapping. */
static struct vm_slice *header_get_for(size_t desc_size, size_t need)
{
    if (desc_size > VM_DESC_SIZE)
        os_fatal("slice descriptors of %zu bytes exceed VM_DESC_SIZE", desc_size);
    spin_lock(&vm_lock);
    struct vm_slice *s = vm_spare;
    if (s)
        vm_spare = s->next;
    spin_unlock(&vm_lock);
    if (!s) {
        if (need == VM_HEADER_BYTES) {
            s = os_map(VM_HEADER_BYTES, VM_HEADER_ALIGN);
            if (s)
                s->committed = VM_HEADER_BYTES;
            return s;
        }
        s = os_map_ro(VM_HEADER_BYTES, VM_HEADER_ALIGN);
        if (!s)
            return NULL;
        if (os_commit(s, need) != 0) {
            os_unmap(s, VM_HEADER_BYTES);
            return NULL;
        }
        s->committed = need;
        return s;
    }
    /* Only pages[0] is ever written in a released header of a direct or
     * user run, and a released buddy slice's header was purged: the rest
     * of its descriptors are still zero. */
    size_t committed = s->committed;
    memset(s, 0, sizeof *s + VM_DESC_SIZE);
    s->committed = committed;
    if (header_commit(s, need) != 0) {
        header_put(s);
        return NULL;
    }
    return s;
}

static struct vm_slice *header_get(size_t desc_size)
{
    return header_get_for(desc_size, VM_HEADER_BYTES);
}

static void header_put(struct vm_slice *s)
{
    spin_lock(&vm_lock);
    s->next = vm_spare;
    vm_spare = s;
    spin_unlock(&vm_lock);
}

/* ---- the page map ---- */

static inline struct vm_slice **map_entry(uintptr_t i)
{
    return (struct vm_slice **)&vm_map_leaf_at(i >> VM_LEAF_BITS)->slice[i & (VM_LEAF_ENTRIES - 1)];
}

/* Set map entry i, and its mirror in the near window (vm_lock). */
static void map_set(uintptr_t i, struct vm_slice *s)
{
    __atomic_store_n(map_entry(i), s, __ATOMIC_RELEASE);
    uintptr_t n = i - (vm_map_near_base >> SLICE_SHIFT);
    if (n < VM_NEAR_SLICES)
        __atomic_store_n(&vm_map_near[n], s, __ATOMIC_RELEASE);
}

/* Open the near window at the first region's base (vm_lock): copy the
 * entries already in its range (a partial slice or a direct mapping made
 * before the arena), then publish the base. */
static void map_near_open(uintptr_t base)
{
    uintptr_t first = base >> SLICE_SHIFT;
    for (uintptr_t n = 0; n < VM_NEAR_SLICES && first + n < VM_MAP_ENTRIES; n++)
        __atomic_store_n(&vm_map_near[n], *map_entry(first + n), __ATOMIC_RELAXED);
    __atomic_store_n(&vm_map_near_base, base, __ATOMIC_RELEASE);
}

/* Map the leaves that slices [base, base + n slices) need; vm_lock not
 * held.  0, or -1 (ENOMEM). */
static int map_leaves(uintptr_t base, uint32_t n)
{
    uintptr_t first = base >> SLICE_SHIFT, last = first + n - 1;
    if (last >= VM_MAP_ENTRIES)
        return -1;
    for (uintptr_t r = first >> VM_LEAF_BITS; r <= last >> VM_LEAF_BITS; r++) {
        if (__atomic_load_n(&vm_map_root[r], __ATOMIC_ACQUIRE) != 0)
            continue;
        struct vm_map_leaf *leaf = os_map(sizeof *leaf, SK_PAGE_SIZE);
        if (!leaf)
            return -1;
        spin_lock(&vm_lock);
        bool lost = vm_map_root[r] != 0;
        if (!lost)
            __atomic_store_n(&vm_map_root[r], (uintptr_t)leaf - (uintptr_t)&vm_map_empty_leaf, __ATOMIC_RELEASE);
        spin_unlock(&vm_lock);
        if (lost)
            os_unmap(leaf, sizeof *leaf);
    }
    return 0;
}

/* ---- runs of slices ---- */

static void vm_say_no_thp(void)
{
    static int said;
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        os_warn("huge-page slices asked for, but transparent huge pages are off "
                "(THP \"never\"): they run on 4 KiB pages");
}

/* Commit and advise a claimed run for psize; vm_lock not held.  `need`
 * are the VS_* bits some slice of the run lacks. */
static int run_prepare(void *mem, size_t bytes, unsigned psize, uint8_t need)
{
    if ((need & VS_COMMITTED) && os_commit(mem, bytes) != 0)
        return -1;
    if (need & VS_ADV_HUGE)
        os_advise_huge(mem, bytes);
    if (need & VS_ADV_NOHUGE)
        os_advise_nohuge(mem, bytes);
    (void)psize;
    return 0;
}

/* The state bits a slice of psize should carry. */
static uint8_t state_for(unsigned psize)
{
    enum os_thp thp = os_thp_mode();
    uint8_t st = VS_USED | VS_COMMITTED | (uint8_t)VS_PSIZE_OF(psize);
    if (psize == VM_PSIZE_HUGE && thp != OS_THP_NEVER)
        st |= VS_ADV_HUGE;
    else if (psize == VM_PSIZE_BASE && thp == OS_THP_ALWAYS)
        st |= VS_ADV_NOHUGE;
    return st;
}

static void publish(struct vm_slice *s)
{
    spin_lock(&vm_lock);
    s->prev = NULL;
    s->next = vm_all;
    if (vm_all)
        vm_all->prev = s;
    __atomic_store_n(&vm_all, s, __ATOMIC_RELEASE);
    __atomic_store_n(&vm_bytes, vm_bytes + s->mapped, __ATOMIC_RELAXED);   /* read unlocked */
    for (uint32_t i = 0; i < s->nr_slices; i++)
        map_set((s->base >> SLICE_SHIFT) + i, s);
    spin_unlock(&vm_lock);
}

/* Unpublish s and unlink it from the list of slices. */
static void unpublish(struct vm_slice *s)
{
    spin_lock(&vm_lock);
    for (uint32_t i = 0; i < s->nr_slices; i++)
        map_set((s->base >> SLICE_SHIFT) + i, NULL);
    if (s->prev)
        s->prev->next = s->next;
    else
        __atomic_store_n(&vm_all, s->next, __ATOMIC_RELEASE);
    if (s->next)
        s->next->prev = s->prev;
    __atomic_store_n(&vm_bytes, vm_bytes - s->mapped, __ATOMIC_RELAXED);
    spin_unlock(&vm_lock);
}

/* A run of n slices of psize outside the arena (longer than a region). */
static void *run_map_outside(uint32_t n, unsigned psize)
{
    size_t bytes = (size_t)n << SLICE_SHIFT;
    void *mem = os_map(bytes, SLICE_SIZE);
    if (mem && psize == VM_PSIZE_HUGE && os_thp_mode() != OS_THP_NEVER)
        os_advise_huge(mem, bytes);
    return mem;
}

static void run_return(uint32_t region, uint32_t first, uint32_t n);

/* A published run of n slices of `kind` serving psize; NULL, errno ENOMEM. */
static struct vm_slice *run_new(enum vm_slice_kind kind, unsigned psize, uint32_t n, size_t desc_size)
{
    /* The header is taken once the run is had: taken before, a failed run
     * put a whole read-write header on the spare list, which the partial
     * slice that follows under a limit then took (header_get_for). */
    struct vm_slice *s;
    void *mem;
    uint32_t ri = VM_NO_REGION, first = 0;
    uint8_t st = state_for(psize);
    long got = -1;
    if (n <= VM_REGION_SLICES) {
        got = arena_claim_locked(psize, n, &first);
        if (got < 0 && arena_reclaim_holes(n))    /* the arena's own holes first */
            got = arena_claim_locked(psize, n, &first);
    }
    /* Longer than a region, or a direct block (kmalloc beyond 64 MiB) the
     * arena has no room for: a mapping of its own, unmapped when freed.
     * Growing the arena for it would keep its address space reserved
     * after the free, and under RLIMIT_AS that refuses later mappings. */
    if (got < 0 && (n > VM_REGION_SLICES || kind == VM_SLICE_DIRECT)) {
        mem = run_map_outside(n, psize);
        if (!mem)
            goto nomem;
    } else {
        uint8_t need = 0;
        while (got < 0) {
            if (arena_grow(n) != 0)
                goto nomem;
            got = arena_claim_locked(psize, n, &first);
        }
        ri = (uint32_t)got;
        struct vm_region *r = vm_regions[ri];
        for (uint32_t i = first; i < first + n; i++) {
            need |= (uint8_t)(st & ~r->state[i]);
            if ((r->state[i] & VS_ADV_HUGE) && !(st & VS_ADV_HUGE))
                need |= VS_ADV_NOHUGE;   /* leaving huge: undo the advice */
            slice_set_state(r, i, st);
        }
        spin_unlock(&vm_lock);
        mem = (void *)(r->base + ((uintptr_t)first << SLICE_SHIFT));
        if (run_prepare(mem, (size_t)n << SLICE_SHIFT, psize, need) != 0) {
            spin_lock(&vm_lock);
            for (uint32_t i = first; i < first + n; i++)
                slice_set_state(r, i, 0);   /* not committed, not advised: redo all next time */
            spin_unlock(&vm_lock);
            goto nomem;
        }
    }
    s = header_get(desc_size);
    if (!s || map_leaves((uintptr_t)mem, n) != 0) {
        /* No header, or no leaf for its map entries (the OS refused):
         * give the run back as it came. */
        if (ri == VM_NO_REGION)
            os_unmap(mem, (size_t)n << SLICE_SHIFT);
        else
            run_return(ri, first, n);
        if (s)
            header_put(s);
        goto nomem;
    }
    s->base = (uintptr_t)mem;
    s->size = (size_t)n << SLICE_SHIFT;
    s->mapped = s->size;
    s->kind = (uint8_t)kind;
    s->huge = (st & VS_ADV_HUGE) != 0;
    s->nr_slices = n;
    s->region = ri;
    s->first = first;
    publish(s);
    return s;
nomem:
    errno = ENOMEM;
    return NULL;
}

/* Give an unpublished arena run (n slices from `first`) back to its region. */
static void run_return(uint32_t region, uint32_t first, uint32_t n)
{
    struct vm_region *r = vm_regions[region];
    void *mem = (void *)(r->base + ((uintptr_t)first << SLICE_SHIFT));
    size_t bytes = (size_t)n << SLICE_SHIFT;
    /* Pages returned and the range made to fault again (a use after
     * sk_vm_unmap or after free of a direct block must not read zeros
     * silently); it stays reserved, keeps its page size, and is committed
     * and advised anew when reused. */
    uint8_t drop = VS_USED | VS_COMMITTED | VS_ADV_HUGE | VS_ADV_NOHUGE;
    if (os_decommit(mem, bytes) != 0) {
        /* The remap failed (vm.max_map_count, when it must split a
         * mapping): the range stays read-write.  Zero it and keep it
         * marked committed; if even that fails, keep the slices used
         * (address space lost) rather than hand out old data as new. */
        drop = os_purge(mem, bytes) == 0 ? (uint8_t)(drop & ~VS_COMMITTED) : 0;
    }
    spin_lock(&vm_lock);
    for (uint32_t i = first; drop && i < first + n; i++)
        slice_set_state(r, i, (uint8_t)(r->state[i] & ~drop));
    spin_unlock(&vm_lock);
}

/* Unpublish a run, return its memory and its slices, keep its header. */
static void run_free(struct vm_slice *s)
{
    unpublish(s);
    if (s->region == VM_NO_REGION)
        os_unmap((void *)s->base, s->size);
    else
        run_return(s->region, s->first, s->nr_slices);
    header_put(s);
}

/* ---- the slice API of the page allocator and kmalloc ---- */

struct vm_slice *vm_slice_new(enum vm_slice_kind kind, size_t desc_size)
{
    unsigned psize = kind == VM_SLICE_HUGE ? VM_PSIZE_HUGE : VM_PSIZE_BASE;
    if (psize == VM_PSIZE_HUGE && os_thp_mode() == OS_THP_NEVER && sk_opt.verbose)
        vm_say_no_thp();
    return run_new(kind, psize, 1, desc_size);
}

void vm_slice_advise_huge(struct vm_slice *s, size_t from, size_t end)
{
    if (from >= end || os_thp_mode() == OS_THP_NEVER)
        return;
    /* The advice goes with the mapping: vm_slice_release unmaps the slice,
     * or decommits it with a fresh mapping, and the header is zeroed. */
    if (os_advise_huge((void *)(s->base + (from << SK_PAGE_SHIFT)), (end - from) << SK_PAGE_SHIFT) != 0)
        return;
    if (!s->huge_from || from < s->huge_from)
        s->huge_from = (uint32_t)from;
}

struct vm_slice *vm_direct_new(size_t size, size_t desc_size)
{
    size_t span = SK_ALIGN_UP(size, SLICE_SIZE);
    if (span < size || (span >> SLICE_SHIFT) > UINT32_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    /* The unused tail of the last slice stays with the run, so no other
     * mapping can land in a slice the map points at. */
    return run_new(VM_SLICE_DIRECT, VM_PSIZE_BASE, (uint32_t)(span >> SLICE_SHIFT), desc_size);
}

void vm_direct_free(struct vm_slice *s)
{
    run_free(s);
}

/* ---- partial slices, and giving slices back ---- */

struct vm_slice *vm_partial_new(size_t bytes, size_t desc_size)
{
    struct vm_slice *s = header_get_for(desc_size, header_need(bytes));
    if (!s)
        goto nomem;
    void *mem = os_map(bytes, SLICE_SIZE);
    if (!mem)
        goto nomem_header;
    if (map_leaves((uintptr_t)mem, 1) != 0) {
        os_unmap(mem, bytes);
        goto nomem_header;
    }
    s->base = (uintptr_t)mem;
    s->size = SLICE_SIZE;
    s->mapped = bytes;
    s->partial = 1;
    s->kind = VM_SLICE_BASE;
    s->nr_slices = 1;
    s->region = VM_NO_REGION;
    publish(s);
    return s;
nomem_header:
    header_put(s);
nomem:
    errno = ENOMEM;
    return NULL;
}

int vm_partial_grow(struct vm_slice *s, size_t bytes)
{
    size_t old = s->mapped;
    if (bytes <= old)
        return 0;
    if (header_commit(s, header_need(bytes)) != 0) {   /* its descriptors first */
        errno = ENOMEM;
        return -1;
    }
    if (!os_map_fixed((void *)(s->base + old), bytes - old)) {
        if (errno != EEXIST)
            errno = ENOMEM;
        return -1;
    }
    spin_lock(&vm_lock);
    __atomic_store_n(&s->mapped, bytes, __ATOMIC_RELEASE);
    __atomic_store_n(&vm_bytes, vm_bytes + (bytes - old), __ATOMIC_RELAXED);
    spin_unlock(&vm_lock);
    return 0;
}

void vm_slice_release(struct vm_slice *s)
{
    unpublish(s);
    if (s->region == VM_NO_REGION) {
        os_unmap((void *)s->base, s->mapped);
    } else if (os_unmap((void *)s->base, s->size) == 0) {
        struct vm_region *r = vm_regions[s->region];
        spin_lock(&vm_lock);
        for (uint32_t i = s->first; i < s->first + s->nr_slices; i++)
            slice_set_state(r, i, VS_USED | VS_HOLE);
        __atomic_store_n(&vm_arena, vm_arena - s->size, __ATOMIC_RELAXED);
        spin_unlock(&vm_lock);
    } else {
        run_return(s->region, s->first, s->nr_slices);    /* cannot unmap (vm.max_map_count): back to the arena */
    }
    /* Its descriptors were all written: zero them without touching them,
     * so the header can serve again (a racing stale lookup reads zeros). */
    if (os_purge(s, VM_HEADER_BYTES) != 0) {
        os_unmap(s, VM_HEADER_BYTES);
        return;
    }
    header_put(s);
}

/* ---- sk_vm_map: huge-page-backed regions for programs ---- */

void *sk_vm_map(size_t size, size_t page_size)
{
    os_options_init();
    unsigned psize;
    if (page_size == 0)
        psize = size >= HUGE_PAGE_SIZE ? VM_PSIZE_HUGE : VM_PSIZE_BASE;
    else if (page_size == SK_PAGE_SIZE)
        psize = VM_PSIZE_BASE;
    else if (page_size == HUGE_PAGE_SIZE)
        psize = VM_PSIZE_HUGE;
    else
        goto inval;
    if (size == 0)
        goto inval;
    size_t span = SK_ALIGN_UP(size, SLICE_SIZE);
    if (span < size || (span >> SLICE_SHIFT) > UINT32_MAX || (span >> VM_ADDR_BITS)) {
        errno = ENOMEM;
        return NULL;
    }
    if (psize == VM_PSIZE_HUGE && page_size && os_thp_mode() == OS_THP_NEVER)
        vm_say_no_thp();
    int saved = errno;
    struct vm_slice *s = run_new(VM_SLICE_USER, psize, (uint32_t)(span >> SLICE_SHIFT), VM_DESC_SIZE);
    return os_errno_restore(s ? (void *)s->base : NULL, saved);
inval:
    errno = EINVAL;
    return NULL;
}

int sk_vm_unmap(void *p, size_t size)
{
    struct vm_slice *s = vm_slice_of(p);
    size_t span = SK_ALIGN_UP(size, SLICE_SIZE);
    if (!s || s->base != (uintptr_t)p || size == 0 || span < size || span != s->size)
        goto inval;
    /* One unmapper wins; a second (a double unmap racing) sees EINVAL. */
    uint8_t kind = VM_SLICE_USER;
    if (!__atomic_compare_exchange_n(&s->kind, &kind, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        goto inval;
    run_free(s);
    return 0;
inval:
    errno = EINVAL;
    return -1;
}

/* ---- statistics, tests, fork ---- */

struct vm_slice *vm_slices(void)
{
    return __atomic_load_n(&vm_all, __ATOMIC_ACQUIRE);
}

size_t vm_reserved_bytes(void)
{
    return __atomic_load_n(&vm_bytes, __ATOMIC_RELAXED);
}

size_t vm_arena_bytes(void)
{
    return __atomic_load_n(&vm_arena, __ATOMIC_RELAXED);
}

long vm_check_masks(void)
{
    long bad = 0;
    struct vm_masks fresh;
    spin_lock(&vm_lock);
    for (uint32_t ri = 0; ri < vm_nr_regions; ri++) {
        struct vm_region *r = vm_regions[ri];
        masks_compute(r, &fresh);
        const uint64_t *a = (const uint64_t *)&r->cached, *b = (const uint64_t *)&fresh;
        for (size_t w = 0; w < sizeof(struct vm_masks) / sizeof(uint64_t); w++)
            bad += a[w] != b[w];
        uint32_t nfree = 0;
        for (uint32_t i = 0; i < r->nr; i++)
            nfree += !(r->state[i] & VS_USED);
        bad += nfree != r->nr_free;
    }
    spin_unlock(&vm_lock);
    return bad;
}

/* The fork child, alone.  A parent thread caught holding vm_lock may have
 * been between a slice's state byte and its masks: rebuild every region's
 * masks and free count from the state bytes (a slice it was claiming stays
 * used: leaked in the child, never handed out twice), and drop the spare
 * headers (a list caught mid-push). */
void vm_atfork_child(void)
{
    if (spin_is_locked(&vm_lock)) {
        for (uint32_t ri = 0; ri < vm_nr_regions; ri++) {
            struct vm_region *r = vm_regions[ri];
            masks_compute(r, &r->cached);
            uint32_t nfree = 0;
            for (uint32_t i = 0; i < r->nr; i++)
                nfree += !(r->state[i] & VS_USED);
            r->nr_free = nfree;
        }
        vm_spare = NULL;
        spin_unlock(&vm_lock);
    }
}
