/*
 * meta_pack — what the caches' metadata costs a process that uses few of
 * them (cache.c, meta_zalloc):
 *  - the cache structs are packed: the 37 kmalloc caches' structs span no
 *    more pages than their bytes need (they sat on a page each when the
 *    per-CPU arrays were inline);
 *  - the per-CPU arrays, slab_cpu arrays and barns of classes never used
 *    are never touched: the pages that hold only those of kmalloc-10240 to
 *    kmalloc-16384 are not resident (mincore), in the per-CPU area and in
 *    the barns' area;
 *  - using one of those classes touches its own;
 *  - slabkit's big zero arrays (SK_BIG_BSS: section .bss.sk_big) lie after the
 *    small variables it writes at start-up, so those share a few pages
 *    instead of sitting one to a page between the arrays, and the 1 MiB
 *    empty per-CPU set stays untouched.
 */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <unistd.h>

#include "page/page.h"
#include "slab/slab.h"
#include "vm/vm.h"
#include "statm.h"
#include "tap.h"

static struct slab_cache *by_name(const char *name)
{
    for (struct slab_cache *c = slab_caches(); c; c = c->next)
        if (!strcmp(c->name, name))
            return c;
    return NULL;
}

/* Resident pages among the whole pages inside [lo, hi). */
static long resident_inside(uintptr_t lo, uintptr_t hi, long *pages)
{
    uintptr_t a = SK_ALIGN_UP(lo, SK_PAGE_SIZE), b = SK_ALIGN_DOWN(hi, SK_PAGE_SIZE);
    *pages = b > a ? (long)((b - a) / SK_PAGE_SIZE) : 0;
    return *pages ? resident_pages((void *)a, (size_t)*pages) : 0;
}

/* The span of a cache's per-CPU metadata (slab_cpu, arrays; barn: its
 * barn, which lies in an area of its own). */
static void percpu_span(const struct slab_cache *c, bool barn, uintptr_t *lo, uintptr_t *hi)
{
    uintptr_t p[2] = { (uintptr_t)c->arrays, (uintptr_t)c->cpu };
    uintptr_t e[2] = { p[0] + cpu_arrays_bytes(), p[1] + sizeof(struct slab_cpu) * (size_t)cpu_nr_ids };
    if (barn) {
        p[0] = (uintptr_t)c->node[0].barn.objs;
        e[0] = p[0] + SLAB_BARN_MAX * sizeof(void *);
        p[1] = e[1] = 0;
    }
    *lo = UINTPTR_MAX;
    *hi = 0;
    for (int i = 0; i < 2; i++) {
        if (!p[i])
            continue;
        if (p[i] < *lo)
            *lo = p[i];
        if (e[i] > *hi)
            *hi = e[i];
    }
}

int main(void)
{
    if (sk_opt.allocator != SK_ALLOC_SLUB || !sk_opt.sheaves)
        skip_all("the layout under test is SLUB's with sheaves");
    void *volatile first = malloc(16);
    free(first);
    if (slab_init() != 0)
        BAIL("slab_init failed");

    /* Structs: packed. */
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    unsigned n = 0;
    for (struct slab_cache *c = slab_caches(); c; c = c->next) {
        if (!c->kmalloc)
            continue;
        n++;
        if ((uintptr_t)c < lo)
            lo = (uintptr_t)c;
        if ((uintptr_t)c + sizeof *c > hi)
            hi = (uintptr_t)c + sizeof *c;
    }
    size_t need = (n * SK_ALIGN_UP(sizeof(struct slab_cache), (size_t)CACHE_LINE) + SK_PAGE_SIZE - 1) / SK_PAGE_SIZE;
    size_t spans = (SK_ALIGN_UP(hi, SK_PAGE_SIZE) - SK_ALIGN_DOWN(lo, SK_PAGE_SIZE)) / SK_PAGE_SIZE;
    ok(n >= 36 && spans <= need + 1, "%u kmalloc cache structs span %zu pages (their bytes need %zu)", n, spans,
       need);

    /* Classes from 10 KiB up: never used here, their per-CPU metadata
     * untouched. */
    static const char *const big[] = { "kmalloc-10240", "kmalloc-12288", "kmalloc-14336", "kmalloc-16384" };
    for (int barn = 0; barn < 2; barn++) {
        uintptr_t blo = UINTPTR_MAX, bhi = 0;
        int found = 0;
        for (unsigned i = 0; i < sizeof big / sizeof big[0]; i++) {
            struct slab_cache *c = by_name(big[i]);
            if (!c)
                continue;
            found++;
            uintptr_t a, b;
            percpu_span(c, barn, &a, &b);
            if (a < blo)
                blo = a;
            if (b > bhi)
                bhi = b;
        }
        if (found != 4)
            BAIL("kmalloc-10240..16384 not all there (%d)", found);
        long pages, res = resident_inside(blo, bhi, &pages);
        ok(bhi - blo < (64u << 10) && pages >= 3 && res == 0,
           "the %s of 4 classes never used are not resident (%ld of %ld whole pages)",
           barn ? "barns" : "slab_cpu and per-CPU arrays", res, pages);
    }

    /* Using one touches its own. */
    struct slab_cache *c = by_name("kmalloc-12288");
    void *volatile p = malloc(12000);   /* volatile: the pair stays */
    memset(p, 1, 64);
    free(p);
    long apages, ares = resident_inside(SK_ALIGN_DOWN((uintptr_t)c->arrays, SK_PAGE_SIZE),
                                        SK_ALIGN_UP((uintptr_t)c->arrays + cpu_arrays_bytes(), SK_PAGE_SIZE),
                                        &apages);
    ok(ares >= 1, "a malloc(12000) and free touch kmalloc-12288's arrays (%ld of %ld pages resident)", ares, apages);

    /* The big arrays after the small variables. */
    uintptr_t bigs[] = { (uintptr_t)cpu_empty_mem, (uintptr_t)vm_map_root, (uintptr_t)&vm_map_empty_leaf };
    uintptr_t smalls[] = { (uintptr_t)page_zones, (uintptr_t)kmalloc_caches };
    uintptr_t lowest = UINTPTR_MAX;
    for (unsigned i = 0; i < sizeof bigs / sizeof bigs[0]; i++)
        if (bigs[i] < lowest)
            lowest = bigs[i];
    bool below = true;
    for (unsigned i = 0; i < sizeof smalls / sizeof smalls[0]; i++)
        below &= smalls[i] < lowest;
    ok(below, "page_zones and kmalloc_caches lie below the big zero arrays (SK_BIG_BSS)");
    long epages, eres = resident_inside((uintptr_t)cpu_empty_mem,
                                        (uintptr_t)cpu_empty_mem + (size_t)(CPU_MAX_IDS + 1) * CPU_ARRAY_STRIDE,
                                        &epages);
    ok(eres == 0, "the empty per-CPU set is not resident (%ld of %ld whole pages)", eres, epages);
    return done_testing();
}
