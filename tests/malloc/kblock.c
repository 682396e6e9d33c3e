/*
 * kblock — malloc of 16-32 KiB: above the last class (kmalloc-16384) the
 * page allocator serves, as the kernel's kmalloc_large does above two
 * pages, with a 32 KiB block from the per-CPU page lists (PG_KBLOCK):
 *
 *  - every size from 16 KiB + 1 to 32 KiB gets a block of 32 KiB, aligned
 *    to its size, usable whole, flagged PG_HEAD | PG_LARGE | PG_KBLOCK;
 *  - a block freed by one size serves the next of another: malloc(20000)
 *    freed, malloc(30000) gets the same block back from this CPU's list
 *    (the memory a class of one object a slab kept to itself before);
 *  - realloc stays in place within the block, moves to an exact page run
 *    above 32 KiB and to a class below 16 KiB, the bytes with it;
 *  - calloc of a block that was written before is zero throughout;
 *  - mallinfo2 counts a block as arena memory in use (uordblks), not as a
 *    large mapped block (hblks), as glibc counts a 20 KiB chunk;
 *  - mallopt(M_MMAP_THRESHOLD, 0) makes such a request a direct mapping;
 *  - bad input, each in a child: a double free of a block and a free of
 *    a pointer inside one abort with their message.
 * The same binary runs with pcp=0 (tests/modes/pcp_off.t): the block
 * then comes from the zone under its lock.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "page/page.h"
#include "vm/vm.h"
#include "slabkit.h"
#include "cpus.h"
#include "tap.h"
#include "blocks.h"

#define KB 32768

static int is_kblock(const void *p)
{
    struct sk_page *pg = page_of(p);
    return pg && (pg_flags(pg) & (PG_HEAD | PG_LARGE | PG_KBLOCK)) == (PG_HEAD | PG_LARGE | PG_KBLOCK);
}

static void shapes(void)
{
    static const size_t sizes[] = { 16385, 17000, 20000, 24576, 28673, 30000, 32767, 32768 };
    int bad = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = malloc(sizes[i]);
        size_t u = p ? malloc_usable_size(p) : 0;
        if (!p || u != KB || (uintptr_t)p % KB || !is_kblock(p)) {
            bad++;
            diag("malloc(%zu) = %p, usable %zu, kblock %d", sizes[i], (void *)p, u, p ? is_kblock(p) : 0);
        }
        if (p)
            block_fill(p, u, (unsigned)i);
        if (p && block_first_wrong(p, u, (unsigned)i) != u)
            bad++;
        free(p);
    }
    is(bad, 0, "malloc(16 KiB + 1 .. 32 KiB): a 32 KiB block, aligned to it, usable whole, PG_KBLOCK");
    void *q = malloc(16384);
    ok(q && malloc_usable_size(q) == 16384 && !is_kblock(q), "malloc(16 KiB) is still kmalloc-16384's");
    free(q);
}

static void shared(void)
{
    if (sk_option("pcp") == 0) {
        skip("pcp=0: a freed block merges with its buddy in the zone");
        return;
    }
    void *p = malloc(20000);
    memset(p, 0x5a, 20000);
    uintptr_t was = (uintptr_t)p;
    release(p);
    void *q = malloc(30000);
    ok((uintptr_t)q == was, "a block malloc(20000) freed serves malloc(30000) next (%#lx, %p)", (unsigned long)was, q);
    free(q);
}

static void reallocs(void)
{
    unsigned char *p = malloc(20000);
    block_fill(p, 20000, 7);
    unsigned char *q = realloc(p, 32000);
    ok(q == p && block_first_wrong(q, 20000, 7) == 20000, "realloc(20000 -> 32000) stays in the block, bytes kept");
    block_fill(q, 32000, 8);
    unsigned char *r = realloc(q, 40000);
    ok(r && r != q && !is_kblock(r) && malloc_usable_size(r) >= 40000 && block_first_wrong(r, 32000, 8) == 32000,
       "realloc(32000 -> 40000) moves to an exact run, bytes kept");
    block_fill(r, 40000, 9);
    unsigned char *s = realloc(r, 100);
    ok(s && !is_kblock(s) && malloc_usable_size(s) < 200 && block_first_wrong(s, 100, 9) == 100,
       "realloc(40000 -> 100) moves to a class, bytes kept");
    block_fill(s, 100, 10);
    unsigned char *t = realloc(s, 25000);
    ok(t && is_kblock(t) && block_first_wrong(t, 100, 10) == 100, "realloc(100 -> 25000) moves to a block, bytes kept");
    free(t);
}

static void zeroed(void)
{
    int bad = 0;
    for (int round = 0; round < 8; round++) {
        unsigned char *p = malloc(24000);
        memset(p, 0xff, KB);
        free(p);
        unsigned char *z = calloc(1, 24000);
        for (size_t i = 0; z && i < KB; i++)
            if (z[i]) {
                bad++;
                break;
            }
        free(z);
    }
    is(bad, 0, "calloc(1, 24000) after a block was written: zero over its whole usable size");
}

static void accounting(void)
{
    struct mallinfo2 a = mallinfo2();
    void *volatile p = malloc(20000);   /* volatile: the pair stays */
    struct mallinfo2 b = mallinfo2();
    ok(b.uordblks >= a.uordblks + KB && b.hblks == a.hblks,
       "mallinfo2: a block is %zu more bytes in use, hblks %zu -> %zu", b.uordblks - a.uordblks, a.hblks, b.hblks);
    free(p);
}

static void direct(void)
{
    ok(mallopt(M_MMAP_THRESHOLD, 0) == 1, "mallopt(M_MMAP_THRESHOLD, 0)");
    void *p = malloc(20000);
    struct vm_slice *s = p ? vm_slice_of(p) : NULL;
    ok(p && !is_kblock(p) && s && s->kind == VM_SLICE_DIRECT, "then malloc(20000) is a direct mapping");
    memset(p, 1, 20000);
    free(p);
    mallopt(M_MMAP_MAX, 0);   /* back to the default */
    void *q = malloc(20000);
    ok(q && is_kblock(q), "M_MMAP_MAX = 0: a block again");
    free(q);
}

int main(void)
{
    pin_first_cpu();
    shapes();
    shared();
    reallocs();
    zeroed();
    accounting();
    bad_block_case("double free of a block", 20000, 0, "double free: free(", "of a free block");
    bad_block_case("free inside a block", 20000, 4096, "interior pointer: free(", "in a 8-page block");
    direct();
    return done_testing();
}
