/*
 * realloc_headroom — a realloc that moves a buffer past 32 KiB gives it a
 * quarter more pages than asked (sk_realloc, kmalloc_large_grow), so that
 * growth a few bytes at a time moves it once per quarter:
 *  - malloc(40000) is exactly 10 pages (no headroom without a realloc);
 *  - realloc of a 20000-byte buffer to 40000 moves it into a block of at
 *    least 50000 usable bytes, every byte kept;
 *  - growing it to 50000 then stays in place; shrinking it to 30000 too;
 *  - a buffer grown byte range by byte range from 33 KiB to 256 KiB moves
 *    at most 10 times (every page, at worst, without the headroom);
 *  - mallinfo2 counts the block's pages (hblkhd) while it lives and none
 *    after the free.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slabkit.h"
#include "tap.h"

static void *(*volatile re)(void *, size_t) = realloc;

static int intact(const unsigned char *p, size_t n, unsigned char seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(seed + i * 7))
            return 0;
    return 1;
}

static void fill(unsigned char *p, size_t from, size_t to, unsigned char seed)
{
    for (size_t i = from; i < to; i++)
        p[i] = (unsigned char)(seed + i * 7);
}

int main(void)
{
    unsigned char *m = malloc(40000);
    ok(m && malloc_usable_size(m) == 40960, "malloc(40000): 10 pages, %zu bytes", m ? malloc_usable_size(m) : 0);
    free(m);

    unsigned char *p = malloc(20000);
    if (!p)
        BAIL("malloc(20000) failed");
    fill(p, 0, 20000, 3);
    unsigned char *q = re(p, 40000);
    if (!q)
        BAIL("realloc(40000) failed");
    ok(malloc_usable_size(q) >= 50000, "realloc to 40000 moves into %zu usable bytes (>= 50000)",
       malloc_usable_size(q));
    ok(intact(q, 20000, 3), "every byte of the 20000 kept");
    struct mallinfo2 mi = mallinfo2();
    ok(mi.hblkhd >= 50000, "mallinfo2 counts the block (hblkhd %zu)", mi.hblkhd);
    fill(q, 0, 40000, 3);
    unsigned char *r = re(q, 50000);
    is((uintptr_t)r, (uintptr_t)q, "growing to 50000 stays in place");
    ok(r && intact(r, 40000, 3), "every byte kept");
    r = re(r, 30000);
    is((uintptr_t)r, (uintptr_t)q, "shrinking to 30000 stays in place");
    free(r);
    mi = mallinfo2();
    is(mi.hblkhd, (size_t)0, "freed: no large block counted");

    /* Growth a few bytes at a time. */
    size_t len = 33 * 1024;
    unsigned char *g = malloc(len);
    if (!g)
        BAIL("malloc failed");
    fill(g, 0, len, 9);
    int moves = 0, kept = 1;
    while (len < 256 * 1024) {
        size_t next = len + 1000;
        unsigned char *n = re(g, next);
        if (!n)
            BAIL("realloc(%zu) failed", next);
        if (n != g)
            moves++;
        fill(n, len, next, 9);
        g = n;
        len = next;
    }
    kept = intact(g, len, 9);
    ok(moves <= 10, "33 -> 256 KiB by 1000 bytes: %d moves (at most 10)", moves);
    ok(kept, "every byte kept");
    free(g);
    return done_testing();
}
