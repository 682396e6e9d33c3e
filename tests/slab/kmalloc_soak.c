/*
 * kmalloc_soak — a long randomized run of the kmalloc layer against a
 * shadow model: sk_malloc, sk_calloc, sk_realloc, sk_aligned_alloc,
 * sk_usable_size and sk_free, 1.5 million operations on up to 4096
 * live blocks of 0 bytes to 1 MiB (mostly small), with a fixed seed.
 *
 * The model keeps, per live block, its size, its alignment and the seed of
 * the pattern written over its whole usable size.  Every free and every
 * realloc checks the block's bytes first (a block that overlaps another, is
 * handed out twice or scribbled on by the allocator shows up here); realloc
 * must keep the first min(old, new) bytes; calloc memory is zero over the
 * whole requested size; sk_usable_size is at least the size asked for, at
 * most the next class (or page) up, and stable while the block lives;
 * every block is 16-byte aligned from 16 bytes on and aligned as asked.
 * Every 64k operations sk_trim() runs, and the block table is swept.
 * At the end every block is freed, sk_trim runs, and every kmalloc class
 * is back to its active count from the start.
 * Usage: kmalloc_soak [operations [seed]]
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slabkit.h"
#include "kmalloc_counts.h"
#include "tap.h"

#define SLOTS 4096

struct block {
    unsigned char *p;
    size_t size;        /* requested */
    size_t usable;      /* sk_usable_size at allocation */
    size_t align;
    uint64_t seed;      /* pattern seed; bytes [0, usable) carry it */
};
static struct block blocks[SLOTS];

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The pattern: 8-byte words from the seed and the word index, so a block
 * moved by realloc is checked against its old seed. */
static inline uint64_t pat_word(uint64_t seed, size_t i)
{
    uint64_t x = seed ^ (i * 0x9E3779B97F4A7C15ull);
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return x ^ (x >> 32);
}

static void fill(unsigned char *p, size_t from, size_t to, uint64_t seed)
{
    for (size_t i = from; i < to;) {
        if ((i & 7) == 0 && i + 8 <= to) {
            uint64_t w = pat_word(seed, i >> 3);
            memcpy(p + i, &w, 8);
            i += 8;
        } else {
            uint64_t w = pat_word(seed, i >> 3);
            p[i] = (unsigned char)(w >> ((i & 7) * 8));
            i++;
        }
    }
}

/* Index of the first wrong byte in [from, to), or (size_t)-1. */
static size_t check(const unsigned char *p, size_t from, size_t to, uint64_t seed)
{
    for (size_t i = from; i < to;) {
        if ((i & 7) == 0 && i + 8 <= to) {
            uint64_t w = pat_word(seed, i >> 3), g;
            memcpy(&g, p + i, 8);
            if (g != w)
                for (size_t k = 0; k < 8; k++)
                    if (p[i + k] != (unsigned char)(w >> (k * 8)))
                        return i + k;
            i += 8;
        } else {
            if (p[i] != (unsigned char)(pat_word(seed, i >> 3) >> ((i & 7) * 8)))
                return i;
            i++;
        }
    }
    return (size_t)-1;
}

static long errors;

static void fail(const char *what, const struct block *b, size_t extra)
{
    if (errors++ < 12)
        diag("error: %s: block %p size %zu usable %zu align %zu (%zu)", what, (void *)b->p, b->size, b->usable,
             b->align, extra);
}

/* Sizes: mostly small, a fair share up to 32 KiB, now and then page blocks. */
static size_t random_size(void)
{
    uint64_t r = rnd();
    switch (r & 15) {
    case 0:
        return (size_t)(r >> 8) % 17;                    /* 0 .. 16 */
    case 1: case 2: case 3: case 4: case 5: case 6:
        return (size_t)(r >> 8) % 256;
    case 7: case 8: case 9: case 10:
        return (size_t)(r >> 8) % 2048;
    case 11: case 12:
        return (size_t)(r >> 8) % 8192;
    case 13: case 14:
        return (size_t)(r >> 8) % 32769;
    default:
        return (r >> 8) % 16 ? (size_t)(r >> 12) % 131072 : (size_t)(r >> 12) % (1u << 20);
    }
}

/* The bytes we fill and check: everything usable, except that big blocks
 * get their first and last 4 KiB and one word per page (keeps it fast). */
static void fill_block(struct block *b)
{
    if (b->usable <= 16384) {
        fill(b->p, 0, b->usable, b->seed);
        return;
    }
    fill(b->p, 0, 4096, b->seed);
    fill(b->p, b->usable - 4096, b->usable, b->seed);
    for (size_t off = 4096; off + 8 <= b->usable - 4096; off += 4096)
        fill(b->p, off, off + 8, b->seed);
}

/* Check what fill_block wrote into b, within its first `upto` bytes. */
static size_t check_block(const struct block *b, size_t upto)
{
    if (upto > b->usable)
        upto = b->usable;
    if (b->usable <= 16384)
        return check(b->p, 0, upto, b->seed);
    size_t r = check(b->p, 0, upto < 4096 ? upto : 4096, b->seed);
    size_t tail = b->usable - 4096;
    if (r == (size_t)-1 && upto > tail)
        r = check(b->p, tail, upto, b->seed);
    for (size_t off = 4096; r == (size_t)-1 && off + 8 <= upto && off + 8 <= tail; off += 4096)
        r = check(b->p, off, off + 8, b->seed);
    return r;
}

/* The largest a block of `size` may be rounded to: the next class, a
 * 32 KiB block above the classes (16 KiB), or whole pages for large
 * blocks. */
static int usable_plausible(size_t size, size_t usable)
{
    if (usable < size)
        return 0;
    if (size <= 16)
        return usable <= 32;
    if (size <= 16384)
        return usable <= size + size / 4 + 16;
    if (size <= 32768)
        return usable <= 32768;
    return usable < size + 4096 + size / 4;  /* page granularity (or the aligned class) */
}

/* sk_malloc, or (aligned) sk_aligned_alloc with 32 .. 4096 and now and
 * then 8 KiB .. 1 MiB (alignment 16 and below: tests/slab/alignment). */
static void new_block(struct block *b, int aligned)
{
    size_t size = random_size(), align = 0;
    void *p;
    if (aligned) {
        align = (size_t)1 << (5 + rnd() % 8);
        if (rnd() % 64 == 0)
            align = (size_t)1 << (13 + rnd() % 8);
        p = sk_aligned_alloc(align, size);
    } else {
        p = sk_malloc(size);
    }
    if (!p) {
        struct block t = { NULL, size, 0, align, 0 };
        fail("allocation returned NULL", &t, size);
        return;
    }
    b->p = p;
    b->size = size;
    b->align = align;
    b->usable = sk_usable_size(p);
    b->seed = rnd();
}

static void do_calloc(struct block *b)
{
    size_t nmemb = 1 + rnd() % 4, each = random_size() / 4 + 1, total = nmemb * each;
    unsigned char *p = sk_calloc(nmemb, each);
    if (!p) {
        fail("sk_calloc returned NULL", b, total);
        return;
    }
    size_t nonzero = 0;
    for (size_t i = 0; i < total; i++)
        nonzero += p[i] != 0;
    b->p = p;
    b->size = total;
    b->align = 0;
    b->usable = sk_usable_size(p);
    b->seed = rnd();
    if (nonzero)
        fail("sk_calloc memory not zero", b, nonzero);
}

static void do_alloc(struct block *b)
{
    uint64_t r = rnd() % 16;
    if (r == 0) {
        do_calloc(b);
    } else {
        new_block(b, r == 1);
    }
    if (!b->p)
        return;
    if (!usable_plausible(b->size, b->usable) && !(b->align && b->usable >= b->size))
        fail("implausible usable size", b, 0);
    if (b->size >= 16 && (uintptr_t)b->p % 16)
        fail("block of 16 bytes or more not 16-byte aligned", b, 0);
    if (b->align && (uintptr_t)b->p % b->align)
        fail("sk_aligned_alloc block misaligned", b, 0);
    fill_block(b);
}

static void do_free(struct block *b)
{
    size_t bad = check_block(b, b->usable);
    if (bad != (size_t)-1)
        fail("block contents changed before free", b, bad);
    if (sk_usable_size(b->p) != b->usable)
        fail("usable size changed while the block lived", b, sk_usable_size(b->p));
    sk_free(b->p);
    b->p = NULL;
}

static long reallocs_moved, reallocs_in_place;

static void do_realloc(struct block *b)
{
    size_t bad = check_block(b, b->usable);
    if (bad != (size_t)-1)
        fail("block contents changed before realloc", b, bad);
    size_t nsize = rnd() % 4 ? random_size() : b->size + (size_t)(rnd() % 64);   /* often a small growth */
    if (nsize == 0)
        nsize = 1;                 /* realloc(p, 0) is tested on its own */
    unsigned char *q = sk_realloc(b->p, nsize);
    if (!q) {
        fail("sk_realloc returned NULL", b, nsize);
        return;                    /* the old block stays valid */
    }
    struct block old = *b;
    size_t keep = old.usable < nsize ? old.usable : nsize;
    if (q == old.p)
        reallocs_in_place++;
    else
        reallocs_moved++;
    b->p = q;
    b->size = nsize;
    b->align = 0;
    b->usable = sk_usable_size(q);
    if (!usable_plausible(nsize, b->usable) && !(q == old.p && b->usable >= nsize))
        fail("implausible usable size after realloc", b, old.usable);
    if (nsize >= 16 && (uintptr_t)q % 16)
        fail("realloc'd block not 16-byte aligned", b, 0);
    /* The first min(old usable, new size) bytes survive: what was written
     * there before, checked against the old seed. */
    old.p = q;
    bad = check_block(&old, keep);
    if (bad != (size_t)-1)
        fail("realloc lost contents", b, bad);
    b->seed = rnd();
    fill_block(b);
}

static void sweep(void)
{
    for (int i = 0; i < SLOTS; i++)
        if (blocks[i].p) {
            size_t bad = check_block(&blocks[i], blocks[i].usable);
            if (bad != (size_t)-1)
                fail("block contents changed (sweep)", &blocks[i], bad);
        }
}

static struct kmalloc_counts kbase, kend;

int main(int argc, char **argv)
{
    long ops = argc > 1 ? atol(argv[1]) : 1500000;
    if (argc > 2)
        rng = strtoull(argv[2], NULL, 0) | 1;
    printf("# kmalloc_soak: %ld operations, seed %#llx\n", ops, (unsigned long long)rng);
    fflush(stdout);
    sk_trim();
    kmalloc_counts_take(&kbase);

    long n_alloc = 0, n_free = 0, n_realloc = 0, n_usable = 0, live = 0, peak = 0;
    for (long op = 0; op < ops; op++) {
        struct block *b = &blocks[rnd() % SLOTS];
        uint64_t r = rnd() % 100;
        if (!b->p) {
            do_alloc(b);
            n_alloc++;
            live += b->p != NULL;
        } else if (r < 45) {
            do_free(b);
            n_free++;
            live--;
        } else if (r < 85) {
            do_realloc(b);
            n_realloc++;
        } else {
            if (sk_usable_size(b->p) != b->usable)
                fail("usable size changed while the block lived", b, sk_usable_size(b->p));
            n_usable++;
        }
        if (live > peak)
            peak = live;
        if ((op & 65535) == 65535) {
            sk_trim();
            sweep();
        }
        if (errors > 100)
            BAIL("too many errors");
    }
    diag("%ld allocations, %ld frees, %ld reallocs (%ld in place, %ld moved), %ld usable_size checks; peak %ld live",
         n_alloc, n_free, n_realloc, reallocs_in_place, reallocs_moved, n_usable, peak);
    is(errors, 0, "%ld operations agree with the shadow model", ops);

    /* Edge cases of the API, checked once. */
    void *p = sk_realloc(NULL, 100);
    ok(p && sk_usable_size(p) >= 100, "sk_realloc(NULL, 100) allocates");
    errno = 0;
    ok(sk_realloc(p, 0) == NULL, "sk_realloc(p, 0) frees and returns NULL");
    errno = 0;
    ok(sk_calloc(SIZE_MAX / 2, 3) == NULL && errno == ENOMEM, "sk_calloc overflow: NULL, ENOMEM");
    errno = 0;
    ok(sk_malloc(SIZE_MAX - 4096) == NULL && errno == ENOMEM, "sk_malloc(SIZE_MAX - 4096): NULL, ENOMEM");
    p = sk_malloc(64);
    errno = 0;
    void *q = sk_realloc(p, SIZE_MAX - 4096);
    ok(q == NULL && errno == ENOMEM, "sk_realloc to SIZE_MAX - 4096: NULL, ENOMEM, the block kept");
    sk_free(q ? q : p);
    is(sk_usable_size(NULL), 0, "sk_usable_size(NULL) = 0");
    sk_free(NULL);

    sweep();
    for (int i = 0; i < SLOTS; i++)
        if (blocks[i].p)
            do_free(&blocks[i]);
    is(errors, 0, "every block intact when freed at the end");
    sk_trim();
    kmalloc_counts_take(&kend);
    is(kmalloc_counts_differ(&kbase, &kend), 0, "every kmalloc class back to its active count from the start");
    return done_testing();
}
