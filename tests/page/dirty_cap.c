/*
 * dirty_cap — the free resident memory a zone keeps at most follows its
 * heap by default (dirty_max_mb=-1: 64 MiB, or as many pages as are in use if
 * that is more, reclaim.c dirty_keep_pages); a dirty_max_mb that is set
 * is a fixed cap.  A fixed 64 MiB made a heap of large blocks (a loop of
 * 5-25 MiB blocks, 300 MiB live: mimalloc-bench's malloc-large) purge the
 * holes between its blocks and fault them in again at every step.
 *
 * The layout: 40 blocks of 8 MiB, every page written (320 MiB in use);
 * every other one of the first 32 is freed: 128 MiB of holes between live
 * blocks, which cannot merge.
 *  - by default (-1) none of it is purged: the cap is the 192 MiB still
 *    in use (half of it would purge 32 MiB), and the resident set stays
 *    as it was;
 *  - with dirty_max_mb=64 the same frees purge at least 64 MiB, at once;
 *  - with the heap freed whole the default cap is its floor again: at
 *    most 64 MiB stays resident.
 * decay_ms is an hour and the trim threshold out of the way
 * (zones_keep_freed), so only the cap purges.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "page/page.h"
#include "statm.h"
#include "tap.h"
#include "threaded.h"

#define NBLK 40
#define HOLES 16
#define ORDER (23 - SK_PAGE_SHIFT)   /* 8 MiB */
#define MiB (1024.0 * 1024.0)
#define SLACK ((long)8 << 20)

static char *blk[NBLK];

static unsigned long purged_pages(void)
{
    unsigned long n = 0;
    for (int z = 0; z < PAGE_NR_ZONES; z++)
        n += __atomic_load_n(&page_zones[z].purged_pages, __ATOMIC_RELAXED);
    return n;
}

static void fill(void)
{
    for (int i = 0; i < NBLK; i++) {
        if (!(blk[i] = sk_alloc_pages(ORDER)))
            BAIL("sk_alloc_pages(%d) failed", ORDER);
        for (size_t off = 0; off < ((size_t)SK_PAGE_SIZE << ORDER); off += SK_PAGE_SIZE)
            blk[i][off] = 1;
    }
}

/* Free every other block of the first 2 * HOLES; returns MiB purged. */
static double holes(void)
{
    unsigned long before = purged_pages();
    for (int i = 0; i < 2 * HOLES; i += 2) {
        sk_free_pages(blk[i], ORDER);
        blk[i] = NULL;
    }
    return (double)((purged_pages() - before) << SK_PAGE_SHIFT) / MiB;
}

/* MiB of free resident memory in the zones. */
static double dirty_mib(void)
{
    unsigned long dirty = 0;
    for (int z = 0; z < PAGE_NR_ZONES; z++)
        dirty += page_zones[z].dirty_pages;
    return (double)(dirty << SK_PAGE_SHIFT) / MiB;
}

static void free_rest(void)
{
    for (int i = 0; i < NBLK; i++)
        if (blk[i])
            sk_free_pages(blk[i], ORDER);
}

int main(void)
{
    plan(6);
    page_init();
    zones_keep_freed();
    sk_opt.decay_ms = 3600000;
    ok(sk_opt.dirty_max_mb == -1, "dirty_max_mb is -1 by default (%ld)", sk_opt.dirty_max_mb);

    fill();
    long high = statm_bytes(STATM_RESIDENT);
    double gone = holes();
    long low = statm_bytes(STATM_RESIDENT);
    ok(gone == 0, "default cap: 128 MiB of holes in a 320 MiB heap stay resident (%.1f MiB purged)", gone);
    ok(high - low < SLACK, "and the resident set keeps them (RSS %.1f -> %.1f MiB)", high / MiB, low / MiB);

    free_rest();
    double dirty = dirty_mib();
    ok(dirty <= 64 + SLACK / MiB, "the heap freed whole: the default cap is 64 MiB again (%.1f MiB free resident)",
       dirty);
    page_reclaim(0, true);

    sk_opt.dirty_max_mb = 64;
    fill();
    gone = holes();
    ok(gone >= 64 - SLACK / MiB, "dirty_max_mb=64: the same holes purge at least 64 MiB at once (%.1f MiB)", gone);
    free_rest();
    dirty = dirty_mib();
    ok(dirty <= 64 + SLACK / MiB, "and at most 64 MiB stays resident once all is freed (%.1f MiB)", dirty);
    return 0;
}
