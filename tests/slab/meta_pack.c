/*
 * meta_pack — what the caches' metadata costs a process that uses few of
 * them (cache.c, meta_zalloc):
 *  - the cache structs are packed: the 37 kmalloc caches' structs span no
 *    more pages than their bytes need (they sat on a page each when the
 *    per-CPU arrays were inline);
 *  - the barns of classes never used are never touched: the pages that
 *    hold only those of kmalloc-10240 to kmalloc-16384 are not resident
 *    (mincore);
 *  - using one of those classes touches its own;
 *  - the per-CPU arrays and the slab_cpu lie CPU-major (src/cpu,
 *    cpu_pool_alloc): on a thread pinned to one CPU, a malloc and free of
 *    every kmalloc class leave that CPU's arrays of all of them on one
 *    resident page per CPU_SETS_PER_ROW classes (they took a page each,
 *    or one per three, when a set's arrays lay side by side), its
 *    slab_cpu on the pages their bytes need, and no other CPU's resident,
 *    not even after a shrink of every class and two reaper passes, which
 *    visit only the CPUs that used a cache (slab_mark_cpu);
 *  - slabkit's big zero arrays (SK_BIG_BSS: section .bss.sk_big) lie after the
 *    small variables it writes at start-up, so those share a few pages
 *    instead of sitting one to a page between the arrays;
 *  - the always-empty per-CPU set is one array in a read-only mapping (it
 *    was CPU_MAX_IDS + 1 arrays, 4 MiB of bss, before each set carried its
 *    bounds: issue 32's start-up under ulimit -v/-d).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpus.h"
#include "page/page.h"
#include "slab/kmalloc.h"
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
/* addr lies in a mapping without write permission (/proc/self/maps). */
static bool mapped_readonly(uintptr_t addr)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return false;
    char line[512], perms[8];
    unsigned long lo, hi;
    bool ro = false;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && addr >= lo && addr < hi)
            ro = perms[0] == 'r' && perms[1] == '-';
    fclose(f);
    return ro;
}

static long resident_inside(uintptr_t lo, uintptr_t hi, long *pages)
{
    uintptr_t a = SK_ALIGN_UP(lo, SK_PAGE_SIZE), b = SK_ALIGN_DOWN(hi, SK_PAGE_SIZE);
    *pages = b > a ? (long)((b - a) / SK_PAGE_SIZE) : 0;
    return *pages ? resident_pages((void *)a, (size_t)*pages) : 0;
}

/* The span of a cache's barn, which lies in an area of its own. */
static void barn_span(const struct slab_cache *c, uintptr_t *lo, uintptr_t *hi)
{
    *lo = (uintptr_t)c->node[0].barn.objs;
    *hi = *lo + SLAB_BARN_MAX * sizeof(void *);
}

/* Add p's page to the set pages[0..n) if it is not there; the new n. */
static size_t add_page(uintptr_t *pages, size_t n, const void *p)
{
    uintptr_t pg = SK_ALIGN_DOWN((uintptr_t)p, SK_PAGE_SIZE);
    for (size_t j = 0; j < n; j++)
        if (pages[j] == pg)
            return n;
    pages[n] = pg;
    return n + 1;
}

static bool page_resident(const void *p)
{
    return resident_pages((void *)SK_ALIGN_DOWN((uintptr_t)p, SK_PAGE_SIZE), 1) == 1;
}

int main(void)
{
    os_options_init();
    if (sk_opt.allocator != SK_ALLOC_SLUB || !sk_opt.sheaves)
        skip_all("the layout under test is SLUB's with sheaves");
    os_options_parse("background=0");    /* no purger thread: nothing runs on another CPU */
    int me = pin_first_cpu();
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

    /* Classes from 10 KiB up: never used here, their barns untouched. */
    static const char *const big[] = { "kmalloc-10240", "kmalloc-12288", "kmalloc-14336", "kmalloc-16384" };
    {
        uintptr_t blo = UINTPTR_MAX, bhi = 0;
        int found = 0;
        for (unsigned i = 0; i < sizeof big / sizeof big[0]; i++) {
            struct slab_cache *c = by_name(big[i]);
            if (!c)
                continue;
            found++;
            uintptr_t a, b;
            barn_span(c, &a, &b);
            if (a < blo)
                blo = a;
            if (b > bhi)
                bhi = b;
        }
        if (found != 4)
            BAIL("kmalloc-10240..16384 not all there (%d)", found);
        long pages, res = resident_inside(blo, bhi, &pages);
        ok(bhi - blo < (64u << 10) && pages >= 3 && res == 0,
           "the barns of 4 classes never used are not resident (%ld of %ld whole pages)", res, pages);
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

    /* Every class on this CPU: its arrays CPU-major. */
    int cpu = cpu_use_rseq ? (int)cpu_rseq_area()->cpu_id : -1;
    if (me < 0 || cpu < 0 || cpu >= cpu_nr_ids) {
        skip("not pinned to one CPU with rseq (pinned %d, rseq id %d): no CPU's row to look at", me, cpu);
        skip("no CPU's slab_cpu row to look at");
        skip("no other CPU's rows to look at");
    } else {
        unsigned nc = kmalloc_nr_classes;
        uintptr_t pages[KMALLOC_NR_CLASSES], spages[KMALLOC_NR_CLASSES];
        size_t npages = 0, nspages = 0;
        long others = 0, other_pages = 0;
        bool all_res = true;
        /* Another CPU's rows that start-up code run before the pinning
         * (the C library's own mallocs) touched: not counted. */
        static bool before[KMALLOC_NR_CLASSES][2];
        for (unsigned i = 0; i < kmalloc_nr_classes; i++)
            for (int o = 0; o < cpu_nr_ids && o < 2; o++)
                before[i][o] = o != cpu && (page_resident(cpu_array_at(slab_arrays(kmalloc_caches[i]), o)) ||
                                            page_resident(slab_cpu_of(kmalloc_caches[i], o)));
        for (unsigned i = 0; i < kmalloc_nr_classes; i++) {
            void *volatile q = malloc(kmalloc_class_size[i]);
            free(q);
            const struct slab_cache *k = kmalloc_caches[i];
            npages = add_page(pages, npages, cpu_array_at(slab_arrays(k), cpu));
            all_res &= page_resident(cpu_array_at(slab_arrays(k), cpu));
            /* Its slab_cpu, on that CPU's row of the slab_cpu pools. */
            nspages = add_page(spages, nspages, slab_cpu_of(k, cpu));
        }
        /* What visits every CPU's state of a cache, shrink and the
         * reaper's idle test, reads only the CPUs that used it: a read of
         * an untouched page makes it resident too (a reaper pass between
         * two of the mallocs above did, on a loaded machine). */
        for (unsigned i = 0; i < kmalloc_nr_classes; i++)
            slab_shrink(kmalloc_caches[i]);
        for (int pass = 0; pass < 2; pass++) {
            usleep((SLAB_REAP_MS + 1) * 1000);
            slab_reap(slab_reap_seen + 1);
        }
        for (unsigned i = 0; i < kmalloc_nr_classes; i++) {
            const struct slab_cache *k = kmalloc_caches[i];
            for (int o = 0; o < cpu_nr_ids && o < 2; o++) {
                if (o == cpu || before[i][o])
                    continue;
                other_pages += 2;
                others += page_resident(cpu_array_at(slab_arrays(k), o)) + page_resident(slab_cpu_of(k, o));
            }
        }
        size_t most = (nc + CPU_SETS_PER_ROW - 1) / CPU_SETS_PER_ROW + 1;
        ok(all_res && npages <= most, "CPU %d's arrays of all %u kmalloc classes lie on %zu resident pages (at most %zu)",
           cpu, nc, npages, most);
        size_t smost = (nc * sizeof(struct slab_cpu) + CPU_ARRAY_STRIDE - 1) / CPU_ARRAY_STRIDE + 2;
        ok(nspages <= smost, "its slab_cpu of all of them lie on %zu pages (at most %zu)", nspages, smost);
        if (cpu_nr_ids > 1)
            ok(others == 0 && other_pages > 0,
               "and no other CPU's array or slab_cpu of them became resident, shrunk and reaped (%ld of %ld)",
               others, other_pages);
        else
            skip("one CPU id: no other CPU's rows");
    }

    /* The big arrays after the small variables. */
    uintptr_t bigs[] = { (uintptr_t)vm_map_root, (uintptr_t)&vm_map_empty_leaf };
    uintptr_t smalls[] = { (uintptr_t)page_zones, (uintptr_t)kmalloc_caches };
    uintptr_t lowest = UINTPTR_MAX;
    for (unsigned i = 0; i < sizeof bigs / sizeof bigs[0]; i++)
        if (bigs[i] < lowest)
            lowest = bigs[i];
    bool below = true;
    for (unsigned i = 0; i < sizeof smalls / sizeof smalls[0]; i++)
        below &= smalls[i] < lowest;
    ok(below, "page_zones and kmalloc_caches lie below the big zero arrays (SK_BIG_BSS)");
    ok(sizeof cpu_empty_mem == CPU_ARRAY_BYTES && mapped_readonly((uintptr_t)cpu_empty_mem),
       "the empty per-CPU set is one array (%zu bytes), in a read-only mapping", sizeof cpu_empty_mem);
    return done_testing();
}
