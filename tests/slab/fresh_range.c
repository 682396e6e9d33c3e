/*
 * fresh_range — a new CPU slab is made lazily (src/slab/slab.c, "the fresh
 * range"): only the objects handed out are ever written, and an object
 * never handed out is still told from an object.
 *
 *  - one object of a cache of 4 KiB objects (8 to an 8-page slab): its
 *    slab has 1 page resident (mincore), not 8; the next allocations
 *    touch one more page each;
 *  - a free of an object of that slab never handed out dies by SIGABRT
 *    with "an object never handed out", as it did when the whole slab was
 *    written at creation; so does sk_cache_free of one, and of one on the
 *    same page as handed-out objects (a cache of 64-byte objects);
 *  - the pages below the range lose PG_FRESH, so their objects' frees take
 *    the fast path: after 8 objects of the 4 KiB cache none of its slab's
 *    pages keeps the flag;
 *  - statistics count the range as free objects (active_objs);
 *  - sk_cache_shrink gives back a slab whose handed-out objects are all
 *    free, and keeps one with an object in use, its range unwritten;
 *  - objects come back intact through it all (each carries a pattern).
 * The same binary runs with rseq off (tests/modes/rseq_off.t);
 * sheaves=0 and allocator=slab make slabs eagerly (not run there).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slabkit.h"
#include "cpus.h"
#include "tap.h"
#include "cache_info.h"
#include "page/page.h"
#include "statm.h"

#define BIG 4096
#define SLAB_BYTES (8 * 4096)

static size_t fresh_pages(const char *slab)
{
    size_t n = 0;
    for (int i = 0; i < 8; i++)
        n += (page_of(slab + (size_t)i * 4096)->flags & PG_FRESH) != 0;
    return n;
}

/* In a child: run fn, which must die by SIGABRT saying `want`. */
static void dies(void (*fn)(void), const char *want, const char *what)
{
    int fd;
    pid_t pid = tap_fork_stderr(&fd);
    if (pid == 0) {
        fn();
        _exit(0);
    }
    char buf[512];
    int st = tap_child_stderr(pid, fd, buf, sizeof buf);
    if (!ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(buf, want), "%s", what))
        diag("status %#x, stderr: %s", st, buf);
}

static sk_cache_t *big, *small;
static char *big0;

static void free_last_of_slab(void) { sk_cache_free(big, big0 + 7 * BIG); }
static void free_next(void)
{
    char *p = sk_cache_alloc(small), *q = sk_cache_alloc(small);
    sk_cache_free(small, q + (q - p));   /* same page, never handed out */
}
static void free_above_first(void) { sk_cache_free(big, big0 + 1 * BIG); }

int main(void)
{
    pin_first_cpu();
    big = sk_cache_create("fresh_big", BIG, 0, 0, NULL);
    small = sk_cache_create("fresh_small", 64, 0, 0, NULL);
    if (!big || !small)
        BAIL("sk_cache_create");
    struct sk_cache_info i = cache_info("fresh_big");
    if (i.objs_per_slab != 8 || i.order != 3)
        BAIL("fresh_big: %u objects in order-%u slabs, want 8 in order 3", i.objs_per_slab, i.order);

    /* ---- one object: one page ---- */
    big0 = sk_cache_alloc(big);
    ok(big0 && ((uintptr_t)big0 & (SLAB_BYTES - 1)) == 0, "the first object starts its slab");
    memset(big0, 0xa5, BIG);
    is(resident_pages(big0, 8), 1, "one object handed out: 1 page of its 8-page slab resident");
    is(fresh_pages(big0), 7, "the 7 pages above it carry PG_FRESH");
    i = cache_info("fresh_big");
    is(i.active_objs, 1, "statistics: 1 object active (the range counts free)");
    is(i.num_objs, 8, "of 8");

    /* ---- frees of objects never handed out ---- */
    dies(free_last_of_slab, "an object never handed out", "sk_cache_free of the slab's last object (never handed out) is caught");
    dies(free_above_first, "an object never handed out", "and of the object right above the one handed out");
    dies(free_next, "an object never handed out", "and of one on a page with handed-out objects (64-byte cache)");

    /* ---- the rest of the slab ---- */
    char *obj[8] = { big0 };
    for (int k = 1; k < 8; k++) {
        obj[k] = sk_cache_alloc(big);
        memset(obj[k], 0x10 + k, BIG);
    }
    int in_slab = 0;
    for (int k = 1; k < 8; k++)
        in_slab += obj[k] >= big0 && obj[k] < big0 + SLAB_BYTES;
    is(in_slab, 7, "the next 7 objects come from the same slab");
    is(fresh_pages(big0), 0, "all handed out: no page keeps PG_FRESH");
    int bad = 0;
    for (int k = 0; k < 8; k++)
        for (int j = 0; j < BIG; j += 256)
            bad += (unsigned char)obj[k][j] != (k ? 0x10 + k : 0xa5);
    is(bad, 0, "every object intact");
    for (int k = 0; k < 8; k++)
        sk_cache_free(big, obj[k]);
    sk_cache_shrink(big);
    is(cache_info("fresh_big").num_slabs, 0, "freed and shrunk: no slab left");

    /* ---- shrink with a range: entirely free goes, in use stays ---- */
    char *a = sk_cache_alloc(big);
    char *slab = (char *)((uintptr_t)a & ~(uintptr_t)(SLAB_BYTES - 1));
    size_t before = fresh_pages(slab);
    ok(before > 0, "a new slab with a fresh range (%zu pages)", before);
    sk_cache_shrink(big);
    is(cache_info("fresh_big").num_slabs, 1, "shrink keeps a slab with an object in use");
    is(fresh_pages(slab), before, "with its range unwritten (%zu pages still fresh)", before);
    sk_cache_free(big, a);
    sk_cache_shrink(big);
    is(cache_info("fresh_big").num_slabs, 0, "entirely free: shrink gives it back");
    is(cache_info("fresh_big").active_objs, 0, "and nothing is counted active");

    /* ---- small objects on one page ---- */
    char *s[100];
    for (int k = 0; k < 100; k++) {
        s[k] = sk_cache_alloc(small);
        memset(s[k], k, 64);
    }
    bad = 0;
    for (int k = 0; k < 100; k++)
        bad += s[k][0] != k || s[k][63] != k;
    is(bad, 0, "100 objects of 64 bytes intact");
    for (int k = 0; k < 100; k++)
        sk_cache_free(small, s[k]);
    sk_cache_shrink(small);
    is(cache_info("fresh_small").active_objs, 0, "freed: none active");
    sk_cache_destroy(big);
    sk_cache_destroy(small);
    return done_testing();
}
