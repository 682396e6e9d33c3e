/*
 * info.c — glibc's malloc statistics and tuning calls with slabkit's own
 * figures: mallinfo, mallinfo2, malloc_info (XML), mallopt, and
 * malloc_good_size (macOS, jemalloc).
 *
 * The figures keep glibc's algebra, so that programs that add them up
 * still get sums that mean something:
 *   arena     memory the page allocator manages, less large blocks
 *             (slabs, free pages, sk_alloc_pages blocks)
 *   uordblks  arena - fordblks: in use (objects at their class size, slab
 *             tails, page blocks)
 *   fordblks  free: free pages, on per-CPU page lists or not, and free
 *             objects in slabs, per-CPU arrays and barns
 *   smblks, fsmblks  free objects in per-CPU arrays and barns, and their
 *             bytes (glibc's fastbins are the nearest thing)
 *   ordblks   free buddy blocks
 *   hblks, hblkhd  large blocks (over 32 KiB) and their bytes, outside
 *             arena as glibc's mmapped chunks are
 *   keepcost  free memory still resident: what malloc_trim(0) returns
 *   usmblks   0 (as glibc since 2.24)
 * A snapshot taken while other threads allocate is consistent per figure,
 * not across figures (as /proc/slabinfo).
 *
 * mallopt writes decay settings that the page allocator reads on every
 * use (sk_opt.dirty_max_mb) and kmalloc's direct-mapping threshold:
 * relaxed atomic stores, no lock.
 * Lock order: none here; page_stats and sk_cache_foreach take theirs one
 * at a time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "malloc/malloc.h"

struct heap_totals {
    struct page_stats pages;
    size_t managed;         /* bytes the page allocator manages */
    size_t free_obj_bytes;  /* free objects in slabs, arrays, barns */
    size_t fast_count, fast_bytes;   /* free objects in arrays and barns */
    size_t large_blocks, large_bytes, large_buddy_bytes;
    size_t arena, free;     /* arena and fordblks (see above) */
};

static void add_cache(const struct sk_cache_info *i, void *arg)
{
    struct heap_totals *t = arg;
    unsigned long fast = i->array_objs + i->barn_objs;
    t->free_obj_bytes += (i->num_objs - i->active_objs) * i->size;
    t->fast_count += fast;
    t->fast_bytes += fast * i->size;
}

static void heap_totals(struct heap_totals *t)
{
    *t = (struct heap_totals){ 0 };
    sk_cache_foreach(add_cache, t);    /* initialises slabkit if need be */
    page_stats(&t->pages);
    struct kmalloc_large_stats large;
    kmalloc_large_totals(&large);
    long blocks = large.blocks, pages = large.pages, direct = large.direct_pages;
    t->large_blocks = blocks > 0 ? (size_t)blocks : 0;
    t->large_bytes = pages > 0 ? (size_t)pages << SK_PAGE_SHIFT : 0;
    t->large_buddy_bytes = pages > direct ? (size_t)(pages - direct) << SK_PAGE_SHIFT : 0;
    t->managed = t->pages.managed_pages << SK_PAGE_SHIFT;
    t->arena = t->managed > t->large_buddy_bytes ? t->managed - t->large_buddy_bytes : 0;
    t->free = ((t->pages.free_pages + t->pages.pcp_pages) << SK_PAGE_SHIFT) + t->free_obj_bytes;
    if (t->free > t->arena)    /* counters read at different moments */
        t->free = t->arena;
}

/*
 * malloc_stats' first part, in glibc's words (programs and glibc's own
 * tests read them): one arena, its system bytes (mallinfo2's arena) and
 * bytes in use (uordblks); the totals with the large blocks, as glibc's
 * include its mmapped chunks; and the most direct mappings there were at
 * once and their bytes.
 */
void malloc_stats_glibc(int fd)
{
    struct heap_totals t;
    heap_totals(&t);
    struct kmalloc_large_stats large;
    kmalloc_large_totals(&large);
    size_t in_use = t.arena - t.free;
    os_printf(fd, "Arena 0:\nsystem bytes     = %10zu\nin use bytes     = %10zu\n", t.arena, in_use);
    os_printf(fd, "Total (incl. mmap):\nsystem bytes     = %10zu\nin use bytes     = %10zu\n", t.arena + t.large_bytes,
              in_use + t.large_bytes);
    os_printf(fd, "max mmap regions = %10ld\nmax mmap bytes   = %10zu\n", large.direct_max_blocks,
              (size_t)large.direct_max_pages << SK_PAGE_SHIFT);
}

static unsigned long free_blocks(const struct page_stats *st)
{
    unsigned long n = 0;
    for (unsigned o = 0; o <= SK_MAX_ORDER; o++)
        n += st->free_blocks[o];
    return n;
}

SK_API struct mallinfo2 mallinfo2(void)
{
    struct heap_totals t;
    heap_totals(&t);
    return (struct mallinfo2){
        .arena = t.arena,
        .ordblks = free_blocks(&t.pages),
        .smblks = t.fast_count,
        .hblks = t.large_blocks,
        .hblkhd = t.large_bytes,
        .usmblks = 0,
        .fsmblks = t.fast_bytes,
        .uordblks = t.arena - t.free,
        .fordblks = t.free,
        .keepcost = t.pages.dirty_pages << SK_PAGE_SHIFT,
    };
}

/* glibc's mallinfo wraps its int fields; these saturate instead. */
static int clamp_int(size_t v)
{
    return v > INT_MAX ? INT_MAX : (int)v;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
SK_API struct mallinfo mallinfo(void)
{
    struct mallinfo2 m = mallinfo2();
    return (struct mallinfo){
        .arena = clamp_int(m.arena),
        .ordblks = clamp_int(m.ordblks),
        .smblks = clamp_int(m.smblks),
        .hblks = clamp_int(m.hblks),
        .hblkhd = clamp_int(m.hblkhd),
        .usmblks = clamp_int(m.usmblks),
        .fsmblks = clamp_int(m.fsmblks),
        .uordblks = clamp_int(m.uordblks),
        .fordblks = clamp_int(m.fordblks),
        .keepcost = clamp_int(m.keepcost),
    };
}
#pragma GCC diagnostic pop

/* ---- malloc_info ---- */

/* A cache name as an XML attribute value. */
static void put_escaped(FILE *fp, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", fp); break;
        case '>': fputs("&gt;", fp); break;
        case '&': fputs("&amp;", fp); break;
        case '"': fputs("&quot;", fp); break;
        default: fputc(*s, fp);
        }
    }
}

struct xml_state {
    FILE *fp;
    size_t prev_size;   /* the previous kmalloc class: a <size> range's start */
};

/* <size>: free objects of one cache, as glibc lists its free chunks by bin. */
static void xml_size(const struct sk_cache_info *i, void *arg)
{
    struct xml_state *x = arg;
    bool kmalloc = !strncmp(i->name, "kmalloc-", 8);
    size_t from = kmalloc ? x->prev_size + 1 : i->size;
    if (kmalloc)
        x->prev_size = i->size;
    unsigned long nfree = i->num_objs - i->active_objs;
    if (nfree)
        fprintf(x->fp, "  <size from=\"%zu\" to=\"%zu\" total=\"%lu\" count=\"%lu\"/>\n", from, i->size,
                nfree * i->size, nfree);
}

/* <cache>: slabkit's own, the /proc/slabinfo columns of one cache. */
static void xml_cache(const struct sk_cache_info *i, void *arg)
{
    struct xml_state *x = arg;
    fputs("  <cache name=\"", x->fp);
    put_escaped(x->fp, i->name);
    fprintf(x->fp, "\" objsize=\"%zu\" active_objs=\"%lu\" num_objs=\"%lu\" objperslab=\"%u\" "
                   "pagesperslab=\"%u\" active_slabs=\"%lu\" num_slabs=\"%lu\" array_objs=\"%lu\" "
                   "barn_objs=\"%lu\"/>\n",
            i->size, i->active_objs, i->num_objs, i->objs_per_slab, 1u << i->order, i->active_slabs,
            i->num_slabs, i->array_objs, i->barn_objs);
}

static void xml_totals(FILE *fp, const struct heap_totals *t, bool process)
{
    size_t system = t->managed + (t->large_bytes - t->large_buddy_bytes);
    fprintf(fp, "<total type=\"fast\" count=\"%zu\" size=\"%zu\"/>\n", t->fast_count, t->fast_bytes);
    fprintf(fp, "<total type=\"rest\" count=\"%lu\" size=\"%zu\"/>\n", free_blocks(&t->pages),
            t->free > t->fast_bytes ? t->free - t->fast_bytes : 0);
    if (process)
        fprintf(fp, "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n", t->large_blocks, t->large_bytes);
    /* slabkit keeps no high-water mark: "max" is the current size. */
    fprintf(fp, "<system type=\"current\" size=\"%zu\"/>\n", system);
    fprintf(fp, "<system type=\"max\" size=\"%zu\"/>\n", system);
    fprintf(fp, "<aspace type=\"total\" size=\"%zu\"/>\n", vm_reserved_bytes());
    fprintf(fp, "<aspace type=\"mprotect\" size=\"%zu\"/>\n", system);
}

/* glibc's shape: one <heap> (slabkit has one heap, reached per CPU), its
 * free sizes and totals, then the process totals; slabkit's caches in a
 * <caches> element of the heap, which readers of glibc's format skip. */
SK_API int malloc_info(int options, FILE *fp)
{
    if (options != 0) {
        errno = EINVAL;
        return -1;
    }
    struct heap_totals t;
    heap_totals(&t);
    struct xml_state x = { fp, 0 };
    fputs("<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n", fp);
    sk_cache_foreach(xml_size, &x);
    fputs("</sizes>\n", fp);
    xml_totals(fp, &t, false);
    fputs("<caches>\n", fp);
    sk_cache_foreach(xml_cache, &x);
    fputs("</caches>\n</heap>\n", fp);
    xml_totals(fp, &t, true);
    fputs("</malloc>\n", fp);
    return ferror(fp) ? -1 : 0;
}

/* ---- mallopt ---- */

/*
 * Each of glibc's parameters gets slabkit's nearest meaning:
 *   M_TRIM_THRESHOLD  free resident memory above this goes back to the
 *                     OS at once (dirty_max_mb, rounded up to MiB; < 0:
 *                     never at once, only after decay_ms)
 *   M_MMAP_THRESHOLD  blocks of at least this size are direct mappings,
 *                     unmapped when freed (at most 64 MiB, the largest
 *                     buddy block, else 0 returned as glibc does past its
 *                     maximum; below 16 KiB it means "every large block")
 *   M_MMAP_MAX        0: no direct mappings below 64 MiB (larger blocks
 *                     have no other home); other values change nothing
 * M_MXFAST, M_TOP_PAD, M_CHECK_ACTION, M_PERTURB, M_ARENA_TEST,
 * M_ARENA_MAX and unknown parameters are accepted and change nothing
 * (per-CPU arrays replace arenas and fastbins; bad frees always abort),
 * returning 1 as glibc does for parameters it does not know.
 */
SK_API int mallopt(int param, int value)
{
    os_options_init();   /* SLABKIT_OPTIONS first, so it does not undo this later */
    switch (param) {
    case M_TRIM_THRESHOLD: {
        long mb = value < 0 ? 1L << 20 : (long)(((unsigned long)value + (1ul << 20) - 1) >> 20);
        __atomic_store_n(&sk_opt.dirty_max_mb, mb, __ATOMIC_RELAXED);
        return 1;
    }
    case M_MMAP_THRESHOLD:
        if (value < 0 || (size_t)value > ((size_t)SK_PAGE_SIZE << SK_MAX_ORDER))
            return 0;
        __atomic_store_n(&kmalloc_direct_min,
                         (size_t)value <= KMALLOC_MAX_CACHE_SIZE ? KMALLOC_MAX_CACHE_SIZE + 1 : (size_t)value,
                         __ATOMIC_RELAXED);
        return 1;
    case M_MMAP_MAX:
        if (value == 0)
            __atomic_store_n(&kmalloc_direct_min, KMALLOC_DIRECT_DEFAULT, __ATOMIC_RELAXED);
        return 1;
    default:
        return 1;
    }
}

/* The usable size malloc(size) would get. */
SK_API size_t malloc_good_size(size_t size)
{
    return kmalloc_good_size(malloc_size(size));
}
