/*
 * semantics.c — the malloc family keeps the exact promises glibc makes on
 * this machine (glibc 2.36, x86-64), so slabkit can replace it unnoticed:
 *
 *   - malloc aligns every object to 16 bytes, malloc(0) is a unique pointer;
 *   - a size that cannot be had gives NULL with errno ENOMEM, never a crash
 *     and never a short block (huge sizes, nmemb*size overflow, align-up
 *     overflow, realloc and reallocarray keep the old block);
 *   - calloc memory is zero, also when it reuses a dirty object;
 *   - realloc(NULL, n) is malloc(n); realloc(p, 0) frees p and returns NULL
 *     (glibc's REALLOC_ZERO_BYTES_FREES); growing and shrinking keep the
 *     contents across every size class;
 *   - aligned_alloc, posix_memalign and memalign honour every power-of-two
 *     alignment up to 1 MiB, valloc and pvalloc give whole pages; a bad
 *     alignment is EINVAL;
 *   - malloc_usable_size of every class is at least the request, and all of
 *     it can be written without touching a neighbour.
 *
 * Linked with libslabkit.a, so every call here is slabkit's.  The RLIMIT_AS
 * case lives in rlimit_as.c (it needs a fresh process).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "statm.h"
#include "tap.h"

/* These tests call the allocator with sizes gcc knows are absurd and read a
 * block after a realloc that failed (which leaves it alive): both on
 * purpose. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wuse-after-free"
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="
#endif

#define MiB ((size_t)1 << 20)
#define SK_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The next size in a sweep that hits every class: every byte up to 4 KiB,
 * then steps of 1/16 plus the sizes either side of each power of two. */
static size_t next_size(size_t n)
{
    if (n < 4096)
        return n + 1;
    size_t step = n / 16;
    size_t pow = (size_t)1 << (63 - __builtin_clzl(n));
    if (n == 2 * pow - 1 || n == pow)
        return n + 1;
    if (n + step >= 2 * pow - 1)
        return 2 * pow - 1;
    return n + step;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(seed + i * 131u);
}

static size_t first_bad(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(seed + i * 131u))
            return i;
    return (size_t)-1;
}

static long rss_bytes(void)
{
    return statm_bytes(STATM_RESIDENT);
}

/* ---- malloc ----------------------------------------------------------- */

static void test_malloc_alignment_and_usable_size(void)
{
    size_t bad_align = 0, bad_usable = 0, bad_neighbour = 0, null = 0, sizes = 0;
    for (size_t n = 1; n <= 8 * MiB; n = next_size(n)) {
        unsigned char *a = malloc(n), *b = malloc(n);
        sizes++;
        if (!a || !b) {
            if (null++ < 3)
                diag("malloc(%zu) returned NULL", n);
            free(a);
            free(b);
            continue;
        }
        if (((uintptr_t)a | (uintptr_t)b) & 15) {
            if (bad_align++ < 3)
                diag("malloc(%zu) = %p, %p: not 16-byte aligned", n, (void *)a, (void *)b);
        }
        size_t ua = malloc_usable_size(a), ub = malloc_usable_size(b);
        if (ua < n || ub < n) {
            if (bad_usable++ < 3)
                diag("malloc_usable_size(malloc(%zu)) = %zu, %zu", n, ua, ub);
            ua = ub = n;
        }
        /* Write every usable byte of both, then check neither was touched
         * by the other: usable means usable, not "overlaps the next one". */
        fill(a, ua, 1);
        fill(b, ub, 2);
        if (first_bad(a, ua, 1) != (size_t)-1 || first_bad(b, ub, 2) != (size_t)-1) {
            if (bad_neighbour++ < 3)
                diag("malloc(%zu): writing the usable size of one object changed the other", n);
        }
        free(a);
        free(b);
    }
    diag("swept %zu sizes from 1 byte to 8 MiB", sizes);
    ok(null == 0, "malloc of every size up to 8 MiB succeeds");
    ok(bad_align == 0, "malloc aligns every size to 16 bytes");
    ok(bad_usable == 0, "malloc_usable_size of every class is at least the request");
    ok(bad_neighbour == 0, "writing all of malloc_usable_size of every class is safe");
}

static void test_malloc_zero(void)
{
    void *a = malloc(0), *b = malloc(0);
    ok(a && b && a != b, "malloc(0) returns a unique non-NULL pointer (as glibc)");
    ok(((uintptr_t)a & 15) == 0, "malloc(0) is 16-byte aligned");
    free(a);
    free(b);
    free(NULL);
    ok(1, "free(NULL) does nothing");
}

static int null_enomem(void *p)
{
    int e = errno;
    if (p) {
        free(p);
        return 0;
    }
    return e == ENOMEM;
}

static void test_enomem(void)
{
    static const size_t huge[] = {
        SIZE_MAX, SIZE_MAX - 15, SIZE_MAX - 4095, SIZE_MAX / 2,
        (size_t)PTRDIFF_MAX + 1, (size_t)1 << 62, (size_t)1 << 56,
    };
    int all = 1;
    for (size_t i = 0; i < SK_ARRAY_LEN(huge); i++) {
        errno = 0;
        void *p = malloc(huge[i]);
        if (!null_enomem(p)) {
            diag("malloc(%#zx) = %p errno %d", huge[i], p, errno);
            all = 0;
        }
    }
    ok(all, "malloc of a huge size returns NULL with errno ENOMEM");

    errno = 0;
    ok(null_enomem(calloc(SIZE_MAX, 1)), "calloc(SIZE_MAX, 1) is NULL/ENOMEM");
    errno = 0;
    ok(null_enomem(memalign(64, SIZE_MAX)), "memalign(64, SIZE_MAX) is NULL/ENOMEM");
    errno = 0;
    /* The align-up of size must not wrap to a small block. */
    ok(null_enomem(memalign(MiB, SIZE_MAX - MiB / 2)), "memalign(1 MiB, SIZE_MAX - 512 KiB) is NULL/ENOMEM");
    errno = 0;
    ok(null_enomem(aligned_alloc(4096, SIZE_MAX - 4095)), "aligned_alloc(4096, SIZE_MAX - 4095) is NULL/ENOMEM");
    void *p = (void *)1;
    /* Through a pointer: gcc assumes posix_memalign leaves errno alone
     * and would fold the checks below to errno's old value. */
    int (*volatile pm)(void **, size_t, size_t) = posix_memalign;
    errno = 0;
    ok(pm(&p, 4096, SIZE_MAX - 100) == ENOMEM && errno == ENOMEM,
       "posix_memalign of a huge size returns ENOMEM and sets errno ENOMEM (as glibc)");
    errno = 0;
    ok(pm(&p, 24, 64) == EINVAL && errno == 0,
       "posix_memalign with a bad alignment returns EINVAL and leaves errno alone");
    /* Alignments past 2^63 have no power of two to round up to. */
    const size_t huge_align[] = { SIZE_MAX, ((size_t)1 << 63) + 1, ((size_t)1 << 63) + 4096 };
    int einval = 1;
    for (size_t i = 0; i < sizeof huge_align / sizeof huge_align[0]; i++) {
        errno = 0;
        void *m = memalign(huge_align[i], 16);
        if (m || errno != EINVAL) {
            diag("memalign(%#zx, 16) = %p, errno %d", huge_align[i], m, errno);
            einval = 0;
            free(m);
        }
    }
    ok(einval, "memalign with an alignment above 2^63 returns NULL with errno EINVAL");
    errno = 0;
    ok(null_enomem(valloc(SIZE_MAX - 10)), "valloc(SIZE_MAX - 10) is NULL/ENOMEM");
    errno = 0;
    ok(null_enomem(pvalloc(SIZE_MAX - 10)), "pvalloc(SIZE_MAX - 10) (page round-up wraps) is NULL/ENOMEM");

    unsigned char *q = malloc(100);
    fill(q, 100, 7);
    errno = 0;
    void *r = realloc(q, SIZE_MAX - 8);
    ok(!r && errno == ENOMEM, "realloc(p, SIZE_MAX - 8) is NULL/ENOMEM");
    ok(first_bad(q, 100, 7) == (size_t)-1, "a failed realloc leaves the old block intact");
    errno = 0;
    r = reallocarray(q, SIZE_MAX / 4, 8);
    ok(!r && errno == ENOMEM, "reallocarray overflowing nmemb*size is NULL/ENOMEM");
    ok(first_bad(q, 100, 7) == (size_t)-1, "a failed reallocarray leaves the old block intact");
    r = reallocarray(q, 50, 4);
    ok(r && first_bad(r, 100, 7) == (size_t)-1 && malloc_usable_size(r) >= 200,
       "reallocarray(p, 50, 4) grows to 200 bytes and keeps the contents");
    free(r ? r : q);
    r = reallocarray(NULL, 16, 16);
    ok(r && malloc_usable_size(r) >= 256, "reallocarray(NULL, 16, 16) allocates 256 bytes");
    free(r);
}

/* ---- calloc ------------------------------------------------------------ */

static void test_calloc(void)
{
    static const size_t over[][2] = {
        { SIZE_MAX / 2 + 1, 2 }, { 2, SIZE_MAX / 2 + 1 }, { (size_t)1 << 32, (size_t)1 << 32 },
        { SIZE_MAX, SIZE_MAX }, { 65537, (size_t)1 << 48 }, { SIZE_MAX / 3 + 1, 3 },
    };
    int all = 1;
    for (size_t i = 0; i < SK_ARRAY_LEN(over); i++) {
        errno = 0;
        void *p = calloc(over[i][0], over[i][1]);
        if (!null_enomem(p)) {
            diag("calloc(%#zx, %#zx) = %p errno %d", over[i][0], over[i][1], p, errno);
            all = 0;
        }
    }
    ok(all, "calloc whose nmemb*size overflows returns NULL with errno ENOMEM");

    void *z = calloc(0, 16), *z2 = calloc(16, 0);
    ok(z && z2, "calloc(0, 16) and calloc(16, 0) return non-NULL (as glibc)");
    free(z);
    free(z2);

    /* Dirty objects of each size, free them, then calloc the same sizes:
     * whatever calloc reuses must read as zero in full. */
    size_t nonzero = 0, nulls = 0, sizes = 0;
    for (size_t n = 1; n <= 4 * MiB; n = next_size(n) + (n > 4096 ? n / 4 : n / 8)) {
        void *dirty[4];
        for (int i = 0; i < 4; i++) {
            dirty[i] = malloc(n);
            if (dirty[i])
                memset(dirty[i], 0xff, malloc_usable_size(dirty[i]));
        }
        for (int i = 0; i < 4; i++)
            free(dirty[i]);
        for (int i = 0; i < 4; i++) {
            unsigned char *c = calloc(1, n);
            sizes++;
            if (!c) {
                nulls++;
                continue;
            }
            for (size_t j = 0; j < n; j++)
                if (c[j]) {
                    if (nonzero++ < 3)
                        diag("calloc(1, %zu): byte %zu is %#x", n, j, c[j]);
                    break;
                }
            dirty[i] = c;
        }
        for (int i = 0; i < 4; i++)
            free(dirty[i]);
    }
    ok(nulls == 0 && nonzero == 0, "calloc memory is zero for every size, also when it reuses dirty memory (%zu calls)", sizes);

    /* calloc as nmemb*size, not just nmemb. */
    unsigned char *c = calloc(1000, 33);
    int zero = c != NULL;
    for (size_t j = 0; c && j < 33000; j++)
        zero &= c[j] == 0;
    ok(zero && malloc_usable_size(c) >= 33000, "calloc(1000, 33) gives 33000 zero bytes");
    free(c);

    /* The whole usable size is zero, not just what was asked for (glibc,
     * jemalloc, tcmalloc and mimalloc all do this): dirty each size in
     * full, free, then calloc fewer bytes of the same class. */
    int whole = 1;
    for (size_t n = 1; n <= 40000; n = n < 64 ? n + 1 : n * 5 / 4) {
        unsigned char *d = malloc(n);
        size_t u = d ? malloc_usable_size(d) : 0;
        if (d)
            memset(d, 0xa5, u);
        free(d);
        unsigned char *z = calloc(1, n);
        size_t uz = z ? malloc_usable_size(z) : 0;
        for (size_t j = 0; z && j < uz; j++)
            if (z[j]) {
                diag("calloc(1, %zu): byte %zu of %zu usable is %#x", n, j, uz, z[j]);
                whole = 0;
                break;
            }
        free(z);
    }
    ok(whole, "calloc zeroes the whole usable size (calloc(1, 17): bytes 17..31 too)");

    /* calloc skips the memset for objects of slabs made on pages known
     * zero: slabs made on pages that held dirty objects must not pass for
     * zero.  Fill 4 MiB of one size, free it (its empty slabs go back to
     * the page allocator, dirty), then calloc 4 MiB of another size, whose
     * new slabs are made on those pages. */
    static const size_t recyc[] = { 16, 48, 96, 256, 1024, 4096, 16384, 64, 32 };
    const size_t nrecyc = sizeof recyc / sizeof recyc[0];
    int recycled = 1;
    for (size_t k = 0; k + 1 < nrecyc; k++) {
        size_t n = recyc[k], m = recyc[k + 1], cnt = (4u << 20) / n, cnt2 = (4u << 20) / m;
        unsigned char **v = malloc((cnt > cnt2 ? cnt : cnt2) * sizeof *v);
        if (!v)
            BAIL("malloc failed");
        for (size_t i = 0; i < cnt; i++)
            if ((v[i] = malloc(n)))
                memset(v[i], 0x5a, malloc_usable_size(v[i]));
        for (size_t i = 0; i < cnt; i++)
            free(v[i]);
        for (size_t i = 0; i < cnt2; i++) {
            v[i] = calloc(1, m);
            size_t u = v[i] ? malloc_usable_size(v[i]) : 0;
            for (size_t j = 0; recycled && j < u; j++)
                if (v[i][j]) {
                    diag("calloc(1, %zu) #%zu after 4 MiB of %zu-byte objects: byte %zu is %#x", m, i, n, j, v[i][j]);
                    recycled = 0;
                }
        }
        for (size_t i = 0; i < cnt2; i++)
            free(v[i]);
        free(v);
    }
    ok(recycled, "calloc is zero in slabs made on pages freed dirty (4 MiB of one size, then calloc of the next, 8 pairs)");
}

/* ---- realloc ----------------------------------------------------------- */

static void test_realloc(void)
{
    unsigned char *p = realloc(NULL, 100);
    ok(p && ((uintptr_t)p & 15) == 0 && malloc_usable_size(p) >= 100, "realloc(NULL, 100) is malloc(100)");
    errno = 0;
    void *r = realloc(p, 0);
    ok(r == NULL, "realloc(p, 0) returns NULL (glibc frees p)");
    if (r)
        free(r);

    /* If realloc(p, 0) did not free p, this would leak 100,000 KiB. */
    long before = rss_bytes();
    for (int i = 0; i < 100000; i++) {
        void *q = malloc(1000 + (i & 7) * 8);
        memset(q, i, 16);
        q = realloc(q, 0);
        if (q)
            free(q);
    }
    long grew = rss_bytes() - before;
    ok(grew < 8 * (long)MiB, "realloc(p, 0) frees p: 100,000 times 1 KiB grew RSS by %ld KiB", grew / 1024);

    void *z = realloc(NULL, 0);
    ok(z != NULL, "realloc(NULL, 0) is malloc(0): non-NULL (as glibc)");
    free(z);

    /* Grow one byte at a time at first, then by steps, through every class
     * into page-allocator sizes; the old contents must survive each move. */
    size_t n = 1, bad = 0, steps = 0;
    p = malloc(1);
    fill(p, 1, 3);
    while (n < 6 * MiB) {
        size_t m = next_size(n);
        if (m > 4096)
            m += m / 3;
        unsigned char *q = realloc(p, m);
        steps++;
        if (!q) {
            diag("realloc(%zu -> %zu) returned NULL", n, m);
            bad++;
            break;
        }
        if (first_bad(q, n, 3) != (size_t)-1) {
            if (bad++ < 3)
                diag("realloc growing %zu -> %zu lost byte %zu", n, m, first_bad(q, n, 3));
        }
        fill(q, m, 3);
        p = q;
        n = m;
    }
    ok(bad == 0, "realloc growing from 1 byte to 6 MiB keeps the contents (%zu steps)", steps);

    /* And back down. */
    bad = 0;
    while (n > 1) {
        size_t m = n > 8192 ? n / 2 - 5 : n - (n > 64 ? 37 : 1);
        unsigned char *q = realloc(p, m);
        if (!q) {
            bad++;
            break;
        }
        if (first_bad(q, m, 3) != (size_t)-1) {
            if (bad++ < 3)
                diag("realloc shrinking %zu -> %zu lost byte %zu", n, m, first_bad(q, m, 3));
        }
        if (malloc_usable_size(q) < m)
            bad++;
        p = q;
        n = m;
    }
    ok(bad == 0, "realloc shrinking from 6 MiB to 1 byte keeps the contents");
    free(p);

    /* Shrinking a large block must not keep it large for good: the usable
     * size after shrinking far is bounded (the memory is not stranded). */
    p = malloc(4 * MiB);
    fill(p, 4 * MiB, 9);
    unsigned char *q = realloc(p, 100);
    ok(q && first_bad(q, 100, 9) == (size_t)-1, "realloc(4 MiB -> 100 bytes) keeps the first 100 bytes");
    diag("usable size after shrinking 4 MiB to 100: %zu", q ? malloc_usable_size(q) : 0);
    free(q);
}

/* ---- aligned allocation ------------------------------------------------ */

static void test_aligned(void)
{
    size_t bad_aa = 0, bad_pm = 0, bad_ma = 0, calls = 0;
    for (size_t align = 1; align <= 4 * MiB; align *= 2) {
        const size_t sizes[] = { 1, 8, align > 1 ? align - 1 : 1, align, align + 1, 3 * align, 100 };
        for (size_t k = 0; k < SK_ARRAY_LEN(sizes); k++) {
            size_t n = sizes[k];
            calls++;
            unsigned char *a = aligned_alloc(align, n);
            if (!a || ((uintptr_t)a & (align - 1)) || malloc_usable_size(a) < n) {
                if (bad_aa++ < 3)
                    diag("aligned_alloc(%zu, %zu) = %p", align, n, (void *)a);
            } else {
                memset(a, 0x5a, malloc_usable_size(a));
            }
            free(a);

            unsigned char *m = memalign(align, n);
            if (!m || ((uintptr_t)m & (align - 1)) || malloc_usable_size(m) < n) {
                if (bad_ma++ < 3)
                    diag("memalign(%zu, %zu) = %p", align, n, (void *)m);
            } else {
                memset(m, 0x5b, malloc_usable_size(m));
            }
            free(m);

            if (align >= sizeof(void *)) {
                void *pp = NULL;
                int rc = posix_memalign(&pp, align, n);
                if (rc || !pp || ((uintptr_t)pp & (align - 1)) || malloc_usable_size(pp) < n) {
                    if (bad_pm++ < 3)
                        diag("posix_memalign(%zu, %zu) = %d, %p", align, n, rc, pp);
                } else {
                    memset(pp, 0x5c, malloc_usable_size(pp));
                }
                free(pp);
            }
        }
    }
    ok(bad_aa == 0, "aligned_alloc honours every power-of-two alignment from 1 byte to 4 MiB");
    ok(bad_pm == 0, "posix_memalign honours every power-of-two alignment from 8 bytes to 4 MiB");
    ok(bad_ma == 0, "memalign honours every power-of-two alignment from 1 byte to 4 MiB");
    diag("%zu sizes per call", calls);

    /* Many aligned blocks alive at once: they do not overlap. */
    enum { N = 64 };
    unsigned char *live[N];
    int overlap = 0;
    for (int i = 0; i < N; i++) {
        size_t align = (size_t)16 << (i % 17); /* 16 B .. 1 MiB */
        live[i] = aligned_alloc(align, 200 + i);
        if (live[i])
            fill(live[i], 200 + i, (unsigned)i);
    }
    for (int i = 0; i < N; i++)
        if (!live[i] || first_bad(live[i], 200 + i, (unsigned)i) != (size_t)-1)
            overlap++;
    for (int i = 0; i < N; i++)
        free(live[i]);
    ok(overlap == 0, "64 live blocks with alignments 16 B..1 MiB keep their contents");

    /* Bad alignments. */
    static const size_t bad[] = { 0, 1, 2, 4, 12, 24, 48, 100, 4095, 3 * 4096, ((size_t)1 << 20) + 8 };
    int einval = 1;
    for (size_t i = 0; i < SK_ARRAY_LEN(bad); i++) {
        void *pp = (void *)&einval;
        int rc = posix_memalign(&pp, bad[i], 64);
        if (rc != EINVAL) {
            diag("posix_memalign(align %zu) = %d, want EINVAL", bad[i], rc);
            einval = 0;
            if (rc == 0)
                free(pp);
        }
    }
    ok(einval, "posix_memalign with an alignment that is not a power of two times sizeof(void *) returns EINVAL");

    static const size_t npow2[] = { 3, 12, 24, 48, 100, 4095, 3 * 4096, ((size_t)1 << 20) + 8 };
    einval = 1;
    for (size_t i = 0; i < SK_ARRAY_LEN(npow2); i++) {
        errno = 0;
        void *a = aligned_alloc(npow2[i], npow2[i] * 2);
        if (a || errno != EINVAL) {
            diag("aligned_alloc(%zu, %zu) = %p errno %d, want NULL/EINVAL", npow2[i], npow2[i] * 2, a, errno);
            einval = 0;
            free(a);
        }
    }
    ok(einval, "aligned_alloc with a non-power-of-two alignment returns NULL with errno EINVAL");

    /* C17 (DR 460) and glibc accept a size that is not a multiple. */
    void *a = aligned_alloc(256, 10);
    ok(a && ((uintptr_t)a & 255) == 0, "aligned_alloc(256, 10) works (size need not be a multiple)");
    free(a);
}

static void test_page_aligned(void)
{
    long page = sysconf(_SC_PAGESIZE);
    int bad = 0;
    for (size_t n = 1; n < 5 * MiB; n = n * 3 + 7) {
        unsigned char *v = valloc(n);
        if (!v || ((uintptr_t)v & (page - 1)) || malloc_usable_size(v) < n) {
            diag("valloc(%zu) = %p", n, (void *)v);
            bad++;
        } else {
            memset(v, 1, malloc_usable_size(v));
        }
        free(v);
    }
    ok(bad == 0, "valloc returns page-aligned blocks of at least the size");

    bad = 0;
    for (size_t n = 0; n < 5 * MiB; n = n * 3 + 7) {
        size_t want = (n + page - 1) & ~(size_t)(page - 1);
        unsigned char *v = pvalloc(n);
        if (!v || ((uintptr_t)v & (page - 1)) || malloc_usable_size(v) < want) {
            diag("pvalloc(%zu) = %p usable %zu, want %zu", n, (void *)v, v ? malloc_usable_size(v) : 0, want);
            bad++;
        } else {
            memset(v, 2, want);
        }
        free(v);
    }
    ok(bad == 0, "pvalloc returns page-aligned blocks rounded up to whole pages");
}

int main(void)
{
    test_malloc_zero();
    test_malloc_alignment_and_usable_size();
    test_enomem();
    test_calloc();
    test_realloc();
    test_aligned();
    test_page_aligned();
    return done_testing();
}
