/*
 * alignment — every object slabkit hands out is aligned as promised:
 *
 *  - every kmalloc class: objects of kmalloc-N are aligned to the largest
 *    power of two dividing N (up to a page), 16 bytes from kmalloc-16 on;
 *    sk_malloc(n) for every n up to 4096 and samples up to 16 KiB lands in
 *    the smallest class that fits (sk_usable_size = class size); from
 *    there to 32 KiB, in a 32 KiB block of the page allocator, aligned to
 *    its size (the per-CPU page lists' order 3);
 *  - caches created with align 8 .. 4096, and with SK_CACHE_HWALIGN, for
 *    sizes from 1 byte to 3000: every object, over several slabs, on its
 *    boundary, and the stride a multiple of the alignment;
 *  - sk_aligned_alloc with alignments 1 .. 1 MiB and sizes around the
 *    alignment: aligned, usable for the whole size; bad alignments (0, 3,
 *    24, 48) give NULL with EINVAL.
 * Objects are written over their whole usable size before they are freed,
 * so a misplaced object shows up as corruption as well.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slabkit.h"
#include "tap.h"

static size_t natural_align(size_t n)
{
    size_t a = n & -n;
    return a > 4096 ? 4096 : a;
}

/* ---- kmalloc classes ---- */

#define MAXC 64
static size_t classes[MAXC];
static unsigned objs_per_slab[MAXC];
static int nclasses;

static void collect(const struct sk_cache_info *i, void *arg)
{
    (void)arg;
    unsigned long n;
    char tail;
    if (sscanf(i->name, "kmalloc-%lu%c", &n, &tail) == 1 && nclasses < MAXC) {
        objs_per_slab[nclasses] = i->objs_per_slab;
        classes[nclasses++] = n;
    }
}

static size_t class_for(size_t n)
{
    for (int i = 0; i < nclasses; i++)
        if (classes[i] >= n)
            return classes[i];
    return 0;
}

#define HOLD 600
static void *held[HOLD];

static void kmalloc_classes(void)
{
    sk_cache_foreach(collect, NULL);
    ok(nclasses > 30, "%d kmalloc classes", nclasses);
    for (int c = 0; c < nclasses; c++) {
        size_t size = classes[c], a = natural_align(size);
        if (size >= 16 && a < 16)
            a = 16;
        /* Enough objects for three slabs (bounded for the big classes). */
        int n = (int)objs_per_slab[c] * 3 + 1;
        if (n > HOLD)
            n = HOLD;
        if ((size_t)n * size > ((size_t)32 << 20))
            n = (int)(((size_t)32 << 20) / size);
        int bad_align = 0, bad_usable = 0;
        for (int i = 0; i < n; i++) {
            held[i] = sk_malloc(size);
            if (!held[i])
                BAIL("sk_malloc(%zu) failed", size);
            if ((uintptr_t)held[i] % a)
                bad_align++;
            if (sk_usable_size(held[i]) != size)
                bad_usable++;
            memset(held[i], 0xa5, size);
        }
        for (int i = 0; i < n; i++)
            sk_free(held[i]);
        ok(!bad_align && !bad_usable, "kmalloc-%zu: %d objects aligned to %zu, usable size %zu%s", size, n, a,
           size, bad_align ? " (MISALIGNED)" : bad_usable ? " (WRONG USABLE SIZE)" : "");
    }

    /* The smallest fitting class, for every size up to 4096 and samples above. */
    int wrong = 0, shown = 0;
    size_t cmax = nclasses ? classes[nclasses - 1] : 0;   /* the largest class */
    for (size_t n = 0; n <= 32768; n += n < 4096 ? 1 : 97) {
        void *p = sk_malloc(n);
        /* size 0: the smallest malloc-aligned class; above the classes, a
         * 32 KiB block aligned to its size. */
        size_t want = !n ? 16 : n <= cmax ? class_for(n) : 32768;
        size_t got = p ? sk_usable_size(p) : 0;
        int fine = p && got == want;
        if (fine && (uintptr_t)p % (n <= cmax ? natural_align(got) : 32768))
            fine = 0;
        if (!fine && shown++ < 5)
            diag("sk_malloc(%zu) = %p, usable %zu, expected class %zu", n, p, got, want);
        wrong += !fine;
        if (p)
            memset(p, 0x3c, got);
        sk_free(p);
    }
    is(wrong, 0, "sk_malloc(n), n = 0..4096 and samples to 32768: smallest fitting class, naturally aligned; "
                 "a 32 KiB block above 16 KiB");
}

/* ---- caches with an alignment ---- */

static void aligned_caches(void)
{
    static const size_t sizes[] = { 1, 7, 8, 24, 100, 513, 3000 };
    char name[32];
    for (size_t align = 8; align <= 4096; align *= 2) {
        int bad = 0, made = 0;
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            size_t size = sizes[s];
            snprintf(name, sizeof name, "align-%zu-%zu", align, size);
            sk_cache_t *c = sk_cache_create(name, size, align, 0, NULL);
            if (!c) {
                bad++;
                diag("%s: create failed (errno %d)", name, errno);
                continue;
            }
            made++;
            struct sk_cache_info info;
            sk_cache_info(name, &info);
            if (info.align != align || info.size % align || info.size < size) {
                bad++;
                diag("%s: align %zu stride %zu", name, info.align, info.size);
            }
            int n = (int)info.objs_per_slab * 2 + 3;
            if (n > HOLD)
                n = HOLD;
            for (int i = 0; i < n; i++) {
                held[i] = sk_cache_alloc(c);
                if (!held[i] || (uintptr_t)held[i] % align) {
                    if (bad++ < 3)
                        diag("%s: object %p", name, held[i]);
                    n = i + (held[i] != NULL);
                    break;
                }
                memset(held[i], 0x77, size);
            }
            for (int i = 0; i < n; i++)
                sk_cache_free(c, held[i]);
            if (sk_cache_destroy(c) != 0)
                bad++;
        }
        ok(made == 7 && bad == 0, "caches with align %zu (sizes 1..3000): every object aligned, stride a multiple",
           align);
    }

    /* SK_CACHE_HWALIGN: at least a cache line (64 bytes on x86-64). */
    int bad = 0;
    for (size_t size = 1; size <= 300; size += 37) {
        snprintf(name, sizeof name, "hwalign-%zu", size);
        sk_cache_t *c = sk_cache_create(name, size, 0, SK_CACHE_HWALIGN, NULL);
        struct sk_cache_info info;
        if (!c || sk_cache_info(name, &info) || info.align < 64 || info.size % 64) {
            bad++;
            continue;
        }
        int n = (int)info.objs_per_slab * 2 + 1;
        if (n > HOLD)
            n = HOLD;
        for (int i = 0; i < n; i++) {
            held[i] = sk_cache_alloc(c);
            if ((uintptr_t)held[i] % 64)
                bad++;
            memset(held[i], 1, size);
        }
        for (int i = 0; i < n; i++)
            sk_cache_free(c, held[i]);
        sk_cache_destroy(c);
    }
    is(bad, 0, "SK_CACHE_HWALIGN caches, sizes 1..300: objects on cache lines");
    /* HWALIGN with a larger explicit alignment keeps the larger one. */
    sk_cache_t *c = sk_cache_create("hwalign-256", 100, 256, SK_CACHE_HWALIGN, NULL);
    struct sk_cache_info info;
    ok(c && sk_cache_info("hwalign-256", &info) == 0 && info.align == 256,
       "SK_CACHE_HWALIGN with align 256 keeps 256");
    void *p = c ? sk_cache_alloc(c) : NULL;
    ok(p && (uintptr_t)p % 256 == 0, "and its objects are 256-aligned");
    if (p)
        sk_cache_free(c, p);
    sk_cache_destroy(c);
}

/* ---- sk_aligned_alloc ---- */

static void aligned_alloc_all(void)
{
    for (size_t align = 1; align <= ((size_t)1 << 20); align *= 2) {
        const size_t sizes[] = { 1, align / 2 + 1, align - 1, align, align + 1, 3 * align, 100, 5000, 40000 };
        int bad = 0, n = 0;
        for (int rep = 0; rep < 3; rep++)
            for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
                size_t size = sizes[s] ? sizes[s] : 1;
                void *q = sk_aligned_alloc(align, size);
                if (!q || (uintptr_t)q % align || sk_usable_size(q) < size) {
                    if (bad++ < 3)
                        diag("sk_aligned_alloc(%zu, %zu) = %p (usable %zu)", align, size, q,
                             q ? sk_usable_size(q) : 0);
                } else {
                    memset(q, 0xee, sk_usable_size(q));
                }
                held[n++] = q;
            }
        for (int i = 0; i < n; i++)
            sk_free(held[i]);
        ok(bad == 0, "sk_aligned_alloc(%zu, sizes 1..3x align and 100, 5000, 40000): aligned, usable", align);
    }
    static const size_t bad_align[] = { 0, 3, 24, 48, 4097 };
    for (size_t i = 0; i < sizeof bad_align / sizeof bad_align[0]; i++) {
        errno = 0;
        void *q = sk_aligned_alloc(bad_align[i], 64);
        ok(!q && errno == EINVAL, "sk_aligned_alloc(%zu, 64): NULL, EINVAL (errno %d)", bad_align[i], errno);
        sk_free(q);
    }
}

int main(void)
{
    printf("# alignment\n");
    kmalloc_classes();
    aligned_caches();
    aligned_alloc_all();
    return done_testing();
}
