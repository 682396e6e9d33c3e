/*
 * page_map — any pointer value finds its page descriptor, or NULL, without
 * a fault: NULL, small integers, stack, globals, libc's heap, a foreign
 * mapping, kernel-half and non-canonical values; the bytes just before and
 * after a slice; the first and last byte of a slabkit block.
 * sk_page_order answers the order for the start of an allocated block and
 * -1 for everything else: interior pages, bytes inside the first page, a
 * freed block, foreign pointers.  page_find_head maps every byte of an
 * allocated block to its head.  The map holds an entry exactly for the
 * slices slabkit made.  The map is a small radix table (not a 16 MiB flat
 * one): unused leaves read as one static empty leaf.  A partial slice maps
 * to its header over all its 64 MiB, but only its mapped prefix is
 * slabkit's (vm_slice_maps), and a released slice leaves the map.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "page/page.h"
#include "tap.h"

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

static int global_var;

/* A pointer that is not slabkit's: no slice, no descriptor, no order. */
static void foreign(uintptr_t a, const char *what)
{
    const void *p = (const void *)a;
    ok(vm_slice_of(p) == NULL && page_of(p) == NULL && sk_page_order(p) == -1 && page_find_head(p) == NULL,
       "%s (%#lx): not slabkit's", what, (unsigned long)a);
}

/* The radix map's answer for p, bypassing the near window. */
static struct vm_slice *radix_of(uintptr_t p)
{
    uintptr_t i = p >> SLICE_SHIFT;
    return i < VM_MAP_ENTRIES ? vm_map_leaf_at(i >> VM_LEAF_BITS)->slice[i & (VM_LEAF_ENTRIES - 1)] : NULL;
}

/* Entries of the near window that differ from the radix map's. */
static size_t near_mismatches(void)
{
    size_t bad = 0;
    for (uintptr_t n = 0; n < VM_NEAR_SLICES; n++)
        bad += vm_map_near[n] != radix_of(vm_map_near_base + (n << SLICE_SHIFT));
    return bad;
}

struct blk { char *p; unsigned order; };

/* Every page of a live block: the start has the order, every other page
 * start and byte -1, page_find_head of any byte is the head.  Returns the
 * number of wrong answers (and prints the first few). */
static long check_block(const struct blk *b, int *printed)
{
    long bad = 0;
    size_t size = SK_PAGE_SIZE << b->order;
    struct sk_page *head = page_of(b->p);
    if (sk_page_order(b->p) != (int)b->order)
        bad++;
    if (sk_page_order(b->p + 1) != -1 || sk_page_order(b->p + size - 1) != -1)
        bad++;
    for (size_t off = 0; off < size; off += SK_PAGE_SIZE) {
        int o = off ? sk_page_order(b->p + off) : (int)b->order;
        struct sk_page *h1 = page_find_head(b->p + off);
        struct sk_page *h2 = page_find_head(b->p + off + SK_PAGE_SIZE - 1);
        if (o != (off ? -1 : (int)b->order) || h1 != head || h2 != head) {
            if ((*printed)++ < 5)
                diag("block %p order %u: page +%zu: sk_page_order %d, page_find_head %s (flags %#x order %u)",
                     (void *)b->p, b->order, off / SK_PAGE_SIZE, o, h1 == head ? "ok" : "WRONG",
                     page_of(b->p + off)->flags, page_of(b->p + off)->order);
            bad++;
        }
    }
    return bad;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

int main(void)
{
    /* ---- before anything is allocated: the map is all zero ---- */
    foreign(0, "NULL before init");
    int stack_var = 0;
    foreign((uintptr_t)&stack_var, "stack before init");

    void *first = sk_alloc_pages(0);
    ok(first != NULL, "first block allocated");

    /* ---- foreign and wild values ---- */
    foreign(0, "NULL");
    foreign(1, "1");
    foreign(0xfff, "0xfff");
    foreign(4096, "4096");
    foreign(0x10000, "64 KiB");
    foreign((uintptr_t)&stack_var, "stack variable");
    foreign((uintptr_t)&global_var, "global variable");
    foreign((uintptr_t)&main, "program text");
    foreign((uintptr_t)&strlen, "libc text");
    void *heap = __libc_malloc(100);
    foreign((uintptr_t)heap, "libc heap object");
    void *big = __libc_malloc(1 << 20);
    foreign((uintptr_t)big, "libc mmapped chunk");
    foreign((uintptr_t)sbrk(0) - 1, "last byte below the program break");
    void *map = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    foreign((uintptr_t)map, "foreign mmap");
    foreign((uintptr_t)map + (1 << 20) - 1, "last byte of a foreign mmap");
    foreign(0x00007fffffffffffull, "last user address");
    foreign(0x0000800000000000ull, "first address past user space");
    foreign(0x0000ffffffffffffull, "non-canonical 0x0000ffffffffffff");
    foreign(0x0001000000000000ull, "non-canonical 0x0001000000000000");
    foreign(0x8000000000000000ull, "non-canonical 0x8000000000000000");
    foreign(0xffff800000000000ull, "kernel half start");
    foreign(0xffffffff81000000ull, "kernel text");
    foreign(UINTPTR_MAX, "UINTPTR_MAX");
    foreign(UINTPTR_MAX - 4095, "UINTPTR_MAX - 4095");
    foreign((uintptr_t)first ^ (1ull << 47), "a slabkit address with bit 47 set");
    foreign((uintptr_t)first | (0xffffull << 48), "a slabkit address sign-extended to the kernel half");

    /* ---- a slice: its bounds, its descriptors ---- */
    struct vm_slice *s = vm_slice_of(first);
    ok(s != NULL && s->kind == VM_SLICE_BASE && s->size == SLICE_SIZE, "a block's slice is a base slice");
    uintptr_t base = s->base;
    ok(base % SLICE_SIZE == 0 && (uintptr_t)first - base < SLICE_SIZE, "the slice is aligned and holds the block");
    ok(vm_slice_of((void *)base) == s && vm_slice_of((void *)(base + SLICE_SIZE - 1)) == s,
       "first and last byte of the slice map to it");
    struct vm_slice *before = vm_slice_of((void *)(base - 1)), *after = vm_slice_of((void *)(base + SLICE_SIZE));
    ok(before != s && (!before || before->base == base - SLICE_SIZE), "the byte before the slice is not in it");
    ok(after != s && (!after || after->base == base + SLICE_SIZE), "the byte after the slice is not in it");
    ok(page_of((void *)base) == (struct sk_page *)s->pages, "first byte: descriptor 0");
    ok(page_of((void *)(base + SLICE_SIZE - 1)) == (struct sk_page *)s->pages + SLICE_PAGES - 1,
       "last byte: the last descriptor");
    ok(page_slice(page_of(first)) == s && page_address(page_of((char *)first + 123)) == first,
       "descriptor -> slice -> address round trip");
    foreign((uintptr_t)s, "the slice header itself");
    foreign((uintptr_t)s->pages + 4096, "descriptor memory");

    /* ---- blocks of every order: first and last byte, interior pages ---- */
    int printed = 0;
    long bad = 0;
    struct blk blks[SK_MAX_ORDER + 1];
    for (unsigned o = 0; o <= SK_MAX_ORDER; o++) {
        blks[o].p = sk_alloc_pages(o);
        blks[o].order = o;
        if (!blks[o].p)
            BAIL("sk_alloc_pages(%u) failed", o);
        bad += check_block(&blks[o], &printed);
        size_t size = SK_PAGE_SIZE << o;
        if (vm_slice_of(blks[o].p) != vm_slice_of(blks[o].p + size - 1))
            bad++;
    }
    is(bad, 0, "orders 0..%d: start has the order, interior pages and bytes -1, every byte finds its head",
       SK_MAX_ORDER);
    int freed_bad = 0;
    for (unsigned o = 0; o <= SK_MAX_ORDER; o++) {
        sk_free_pages(blks[o].p, o);
        if (sk_page_order(blks[o].p) != -1) {
            if (freed_bad++ < 3)
                diag("freed block %p of order %u still reports order %d", (void *)blks[o].p, o,
                     sk_page_order(blks[o].p));
        }
    }
    is(freed_bad, 0, "a freed block's start reports -1");

    /* ---- minimal case: free the lower buddy, then the upper one ----
     * The upper block merges into the lower one; its old head descriptor
     * must not keep PG_HEAD, or it reads as an allocated block inside the
     * merged free block (and later inside whatever is allocated there). */
    {
        char *pair = sk_alloc_pages(6);     /* above the per-CPU list orders */
        sk_free_pages(pair, 6);
        char *lo = sk_alloc_pages(5), *hi = sk_alloc_pages(5);
        if (hi == lo + (SK_PAGE_SIZE << 5) && ((uintptr_t)lo & ((SK_PAGE_SIZE << 6) - 1)) == 0) {
            sk_free_pages(lo, 5);
            sk_free_pages(hi, 5);
            is(sk_page_order(hi), -1, "upper buddy freed after the lower: its start reports -1");
            char *again = sk_alloc_pages(6);
            if (again == lo) {
                is(sk_page_order(hi), -1, "the merged block allocated again: the old upper head is interior (-1)");
                ok(page_find_head(hi) == page_of(lo), "page_find_head of the old upper head finds the new head");
            } else {
                diag("order-6 block came from elsewhere (%p, not %p): merge case not reached", (void *)again,
                     (void *)lo);
            }
            sk_free_pages(again, 6);
        } else {
            diag("order-5 blocks %p, %p are not buddies: merge case not reached", (void *)lo, (void *)hi);
            sk_free_pages(lo, 5);
            sk_free_pages(hi, 5);
        }
    }

    /* ---- random history, then every live block checked page by page ---- */
    enum { NLIVE = 512 };
    static struct blk live[NLIVE];
    uint64_t seed = 12345;
    int nlive = 0;
    for (int i = 0; i < 20000; i++) {
        uint64_t r = rnd(&seed);
        if (nlive < NLIVE && (nlive == 0 || r % 3 != 0)) {
            unsigned o = (unsigned)((r >> 8) % 9);
            char *p = sk_alloc_pages(o);
            if (!p)
                BAIL("sk_alloc_pages(%u) failed", o);
            live[nlive++] = (struct blk){ p, o };
        } else {
            unsigned k = (unsigned)((r >> 8) % (unsigned)nlive);
            sk_free_pages(live[k].p, live[k].order);
            live[k] = live[--nlive];
        }
    }
    bad = 0;
    printed = 0;
    for (int i = 0; i < nlive; i++)
        bad += check_block(&live[i], &printed);
    is(bad, 0, "after 20000 random allocs and frees: all %d live blocks answer right on every page", nlive);
    for (int i = 0; i < nlive; i++)
        sk_free_pages(live[i].p, live[i].order);

    /* ---- the map has entries for slabkit's slices, and only them ---- */
    size_t expect = 0, mismatched = 0;
    for (struct vm_slice *v = vm_slices(); v; v = v->next) {
        expect += v->nr_slices;
        for (uint32_t k = 0; k < v->nr_slices; k++)
            if (vm_slice_of((void *)(v->base + ((uintptr_t)k << SLICE_SHIFT))) != v)
                mismatched++;
    }
    size_t entries = 0;
    for (uintptr_t a = 0; a < ((uintptr_t)1 << VM_ADDR_BITS); a += SLICE_SIZE)
        entries += vm_slice_of((void *)(a + 12345)) != NULL;
    is(mismatched, 0, "every slice's map entries point at its header");
    is(entries, expect, "the map holds exactly the %zu entries of slabkit's slices", expect);

    /* ---- the radix map: small root, empty leaf shared ---- */
    ok(sizeof vm_map_root <= (16 << 10) && sizeof vm_map_empty_leaf <= (8 << 10) && sizeof vm_map_near <= (8 << 10),
       "the map's static part is a 16 KiB root, an 8 KiB empty leaf and an 8 KiB near window (%zu + %zu + %zu bytes)",
       sizeof vm_map_root, sizeof vm_map_empty_leaf, sizeof vm_map_near);

    /* ---- the near window mirrors the radix map ---- */
    ok(vm_map_near_base != VM_NEAR_UNSET && vm_map_near_base % SLICE_SIZE == 0 &&
       radix_of((uintptr_t)first) == s && (uintptr_t)first - vm_map_near_base < ((uintptr_t)VM_NEAR_SLICES << SLICE_SHIFT),
       "the near window is open at a slice boundary and covers the first block (base %#lx)",
       (unsigned long)vm_map_near_base);
    is(near_mismatches(), 0, "each of the window's %u entries equals the radix map's", VM_NEAR_SLICES);
    ok(vm_slice_of((void *)(VM_NEAR_UNSET + 4096)) == NULL && vm_slice_of((void *)~(uintptr_t)0) == NULL,
       "pointers at and above 2^63 are not slabkit's");
    size_t used_leaves = 0;
    for (size_t r = 0; r < VM_ROOT_ENTRIES; r++)
        used_leaves += vm_map_root[r] != 0;
    ok(used_leaves >= 1 && used_leaves <= 4, "only the leaves slabkit's slices need are mapped (%zu)", used_leaves);

    /* ---- a partial slice: its prefix is slabkit's, the rest is not ---- */
    struct vm_slice *ps = vm_partial_new(256 << 10, sizeof(struct sk_page));
    ok(ps && ps->partial && ps->base % SLICE_SIZE == 0 && ps->mapped == (256 << 10),
       "a partial slice: 64 MiB-aligned, 256 KiB mapped");
    if (ps) {
        char *b = (char *)ps->base;
        ok(vm_slice_of(b) == ps && vm_slice_of(b + SLICE_SIZE - 1) == ps, "its whole 64 MiB maps to its header");
        ok(vm_slice_maps(ps, b) && vm_slice_maps(ps, b + (256 << 10) - 1) && !vm_slice_maps(ps, b + (256 << 10)) &&
           !vm_slice_maps(ps, b - 1), "only its mapped prefix is slabkit's");
        memset(b, 0x5a, 256 << 10);
        int g = vm_partial_grow(ps, 1 << 20);
        if (g == 0) {
            ok(ps->mapped == (1 << 20) && vm_slice_maps(ps, b + (1 << 20) - 1), "grown in place to 1 MiB");
            memset(b + (256 << 10), 0x5b, (1 << 20) - (256 << 10));
        } else {
            ok(errno == EEXIST, "grown in place, or refused because the space above is taken (errno %d)", errno);
        }
        is(near_mismatches(), 0, "with a partial slice published: the window still equals the radix map");
        uintptr_t pb = ps->base;
        vm_slice_release(ps);
        ok(vm_slice_of((void *)pb) == NULL, "a released slice leaves the map");
        is(near_mismatches(), 0, "with it released: the window still equals the radix map");
    }

    munmap(map, 1 << 20);
    __libc_free(heap);
    __libc_free(big);
    return done_testing();
}
