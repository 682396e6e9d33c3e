/*
 * large_cache — malloc of 32-256 KiB and the per-CPU exact-block cache
 * (pcp.c, page_alloc_exact), on a thread pinned to one CPU:
 *
 *  - a block freed and asked for again with the same page count is the
 *    same block, its bytes as they were (no purge, no fault), for every
 *    size from 32 KiB + 1 to 256 KiB;
 *  - calloc of such a block, written before its free, is zero throughout;
 *  - realloc within the block's pages stays in place;
 *  - another page count gets another block; the cached one is freed to
 *    its zone first (mallinfo2 and malloc_trim find nothing left over);
 *  - mallinfo2: a cached block is free, not a large block in use (hblks
 *    and hblkhd go back down at its free, as glibc's do at munmap);
 *  - threads that malloc and free such blocks on every CPU, crossing
 *    sizes, keep every byte (each block checked end to end);
 *  - bad input, each in a child: a double free of a cached block and a
 *    free inside one abort with their message.
 * The same binary runs with pcp=0 (tests/modes/pcp_off.t): there is no
 * cache then, and what says "the same block" is skipped.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "os/os.h"
#include "cpus.h"
#include "tap.h"
#include "blocks.h"

static void same_block(bool cached)
{
    static const size_t sizes[] = { 32769, 40000, 65536, 100000, 131072, 200000, 262144 };
    int bad = 0, same = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = malloc(sizes[i]);
        if (!p)
            BAIL("malloc(%zu) failed", sizes[i]);
        block_fill(p, sizes[i], (unsigned)i);
        uintptr_t was = (uintptr_t)p;
        release(p);
        unsigned char *q = malloc(sizes[i]);
        if (!q)
            BAIL("malloc(%zu) failed", sizes[i]);
        if ((uintptr_t)q == was) {
            same++;
            if (block_first_wrong(q, sizes[i], (unsigned)i) != sizes[i]) {
                bad++;
                diag("malloc(%zu): the cached block lost its bytes", sizes[i]);
            }
        }
        free(q);
    }
    if (cached)
        is(same, 7, "32-256 KiB: freed and asked for again, the same block every time");
    else
        skip("pcp=0: no exact-block cache");
    is(bad, 0, "with its bytes as they were");

    unsigned char *a = malloc(100000);
    block_fill(a, 100000, 9);
    release(a);
    unsigned char *z = calloc(1, 100000);
    size_t nz = 0;
    for (size_t i = 0; z && i < 100000; i++)
        nz += z[i] != 0;
    ok(z && nz == 0, "calloc of a block written before its free is zero (%zu bytes not)", nz);
    unsigned char *r = realloc(z, 100200);   /* the same 25 pages */
    ok(r == z, "realloc within its pages stays in place");
    free(r);
}

static void accounting(void)
{
    malloc_trim(0);
    struct mallinfo2 a = mallinfo2();
    void *volatile p = malloc(200000);
    struct mallinfo2 b = mallinfo2();
    ok(b.hblks == a.hblks + 1 && b.hblkhd >= a.hblkhd + 200000, "mallinfo2: a 200000-byte block in use (hblks %zu -> %zu)",
       a.hblks, b.hblks);
    free(p);
    struct mallinfo2 c = mallinfo2();
    ok(c.hblks == a.hblks && c.hblkhd == a.hblkhd, "freed (onto the cache): not in use any more (hblks %zu, hblkhd %zu)",
       c.hblks, c.hblkhd);
    ok(c.fordblks >= a.fordblks + 200000 - 4096 || c.fordblks >= b.fordblks + 200000 - 4096,
       "but free (fordblks %zu -> %zu)", b.fordblks, c.fordblks);
    void *volatile q = malloc(50000);    /* another count: the cached one goes to its zone */
    free(q);
    malloc_trim(0);
    struct mallinfo2 d = mallinfo2();
    ok(d.hblks == a.hblks && d.hblkhd == a.hblkhd, "after another size and malloc_trim: nothing left in use");
}

#define NTHR 6
#define ROUNDS 3000

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    unsigned char *held[4] = { 0 };
    size_t len[4] = { 0 };
    long bad = 0;
    for (int i = 0; i < ROUNDS; i++) {
        unsigned k = (seed = seed * 1103515245 + 12345) >> 16;
        int slot = (int)(k % 4);
        if (held[slot]) {
            if (block_first_wrong(held[slot], len[slot], (unsigned)slot) != len[slot])
                bad++;
            free(held[slot]);
        }
        /* Four page counts: hits, misses and evictions. */
        len[slot] = 32769 + (k % 4) * 40000;
        held[slot] = malloc(len[slot]);
        if (!held[slot])
            return (void *)-1l;
        block_fill(held[slot], len[slot], (unsigned)slot);
    }
    for (int s = 0; s < 4; s++) {
        if (held[s] && block_first_wrong(held[s], len[s], (unsigned)s) != len[s])
            bad++;
        free(held[s]);
    }
    return (void *)bad;
}

static void threads(void)
{
    pthread_t t[NTHR];
    for (int i = 0; i < NTHR; i++)
        if (pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i * 7919 + 1)) != 0)
            BAIL("pthread_create failed");
    long bad = 0;
    for (int i = 0; i < NTHR; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad += (long)r;
    }
    is(bad, 0, "%d threads, four sizes of 32-160 KiB crossing: every byte kept", NTHR);
}

int main(void)
{
    pin_first_cpu();
    os_options_init();
    bool cached = sk_opt.pcp != 0;
    same_block(cached);
    accounting();
    threads();
    bad_block_case("double free of a cached block", 100000, 0, "double free: free(", "of a free block");
    bad_block_case("free inside a block", 100000, 8192, "interior pointer: free(", "in a 25-page block");
    return done_testing();
}
