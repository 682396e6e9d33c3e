/*
 * budget — the memory budget and its watermarks (src/page/budget.c).
 * TSAN: yes (the purger's kswapd pass against the allocating thread)
 *
 * Under a 64 MiB budget (page_budget_set, as mem_limit_mb=64 sets it):
 *  - the watermarks are the kernel's rule (min = sqrt(16 x KiB) KiB:
 *    1 MiB; low 1.25, high 1.5 MiB);
 *  - malloc never fails while memory can be reclaimed: 40 MiB of small
 *    objects allocated and freed, then 40 MiB of large blocks, then the
 *    small objects again: each phase needs what the last freed, which
 *    stays resident (charged) until reclaim purges it;
 *  - live memory cannot pass it: 1 MiB blocks are refused with ENOMEM
 *    once the headroom would fall below min, and the charge stays within
 *    the limit;
 *  - the kernel API's gfp, with the headroom at min and 2 MiB of free
 *    resident pages (charged until purged): GFP_NOWAIT fails at once, with
 *    one line on stderr, none under __GFP_NOWARN; GFP_KERNEL reclaims the
 *    2 MiB directly and goes on to min; GFP_ATOMIC goes on into the
 *    reserve (3/8 of min kept), and stops there;
 *  - background reclaim: in a threaded process, 16 KiB blocks that take
 *    the headroom below low (but not min) wake the purger, which brings it
 *    back to high by purging 16 MiB of free pages no block could use;
 *  - a soft budget (the cgroup's limit, by default) refuses nothing: 80
 *    MiB of blocks under 64 MiB, each past the mark an overrun;
 *  - no budget (0): nothing is refused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <slabkit/kernel.h>

#include "page/page.h"
#include "tap.h"
#include "threaded.h"

#define MiB ((size_t)1 << 20)
#define LIMIT (64 * MiB)
#define SMALL 64
#define NSMALL ((40 * MiB) / SMALL)
#define BIG (256 << 10)
#define NBIG ((40 * MiB) / BIG)

static void *small[NSMALL];
static void *big[NBIG];
static void *blocks[128];

static struct sk_mem_budget budget(void)
{
    struct sk_mem_budget b;
    sk_mem_budget(&b);
    return b;
}

static long headroom(void)
{
    struct sk_mem_budget b = budget();
    return (long)b.limit - (long)b.charged;
}

/* Up to max objects of `size` into arr, each written whole, until one
 * fails (errno then says why); returns how many. */
static size_t fill(void **arr, size_t max, size_t size)
{
    size_t n = 0;
    while (n < max && (arr[n] = sk_malloc(size))) {
        memset(arr[n], (int)n, size);
        n++;
    }
    return n;
}

static void free_all(void **arr, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sk_free(arr[i]);
}

/* The most charged seen: sampled after each phase. */
static size_t peak;
static void sample(void)
{
    size_t c = budget().charged;
    if (c > peak)
        peak = c;
}

static void test_reclaimable(void)
{
    /* Large blocks borrow the slab zone's free resident pages
     * (zone_borrow): without it they must have that memory purged to
     * grow, which is the reclaim to see. */
    sk_opt.zone_borrow = 0;
    /* And what is freed stays resident (a single-threaded program trims
     * at free otherwise): only the budget purges. */
    zones_keep_freed();
    long decay = sk_opt.decay_ms;
    sk_opt.decay_ms = 3600000;
    unsigned long refused0 = budget().refused;
    size_t a = fill(small, NSMALL, SMALL);
    sample();
    free_all(small, a);
    size_t b = fill(big, NBIG, BIG);
    sample();
    free_all(big, b);
    size_t c = fill(small, NSMALL, SMALL);
    sample();
    free_all(small, c);
    ok(a == NSMALL && b == NBIG && c == NSMALL,
       "malloc never fails while memory can be reclaimed: 40 MiB small, 40 MiB large, 40 MiB small again "
       "(%zu/%zu, %zu/%zu, %zu/%zu)", a, (size_t)NSMALL, b, (size_t)NBIG, c, (size_t)NSMALL);
    struct sk_mem_budget s = budget();
    ok(s.direct_reclaims > 0 && s.direct_reclaimed > 0,
       "they reclaimed directly: %lu times, %.1f MiB", s.direct_reclaims, (double)s.direct_reclaimed / MiB);
    ok(peak <= LIMIT, "the charge stayed within the limit (peak %.1f MiB of %.1f)", (double)peak / MiB,
       (double)LIMIT / MiB);
    ok(s.refused == refused0, "nothing was refused (%lu)", s.refused - refused0);
    sk_opt.zone_borrow = 1;
    sk_opt.decay_ms = decay;
}

static void test_limit(void)
{
    errno = 0;
    size_t n = fill(blocks, sizeof blocks / sizeof blocks[0], MiB);
    int err = errno;
    struct sk_mem_budget s = budget();
    ok(n < sizeof blocks / sizeof blocks[0] && err == ENOMEM,
       "live memory cannot pass the budget: 1 MiB blocks refused after %zu (errno %s)", n, strerrorname_np(err));
    ok(n >= 56 && s.charged <= s.limit, "refused only near it: %zu MiB live, %.1f MiB charged of %.1f", n,
       (double)s.charged / MiB, (double)s.limit / MiB);
    ok(s.refused > 0, "the refusal is counted (%lu)", s.refused);
    free_all(blocks, n);
    void *p = sk_malloc(MiB);
    ok(p != NULL, "freed, the same request goes through");
    sk_free(p);
}

/* Pages of order 0 taken with gfp until one fails; returns how many. */
static void *pages[64 * 1024];
static size_t npages;
static size_t take_pages(sk_gfp_t gfp)
{
    size_t got = 0;
    while (npages < sizeof pages / sizeof pages[0]) {
        void *p = sk_kernel_alloc_pages(gfp | SK_GFP_NOWARN, 0);
        if (!p)
            break;
        memset(p, 4, SK_PAGE_SIZE);
        pages[npages++] = p;
        got++;
    }
    return got;
}

static void nowait_loud(void)
{
    if (sk_kernel_alloc_pages(SK_GFP_NOWAIT, 0))
        _exit(3);
}
static void nowait_quiet(void)
{
    if (sk_kernel_alloc_pages(SK_GFP_NOWAIT | SK_GFP_NOWARN, 0))
        _exit(3);
}

static void test_gfp(void)
{
    sk_trim();
    /* Fill to the min mark with GFP_NOWAIT (no reclaim), then free 2 MiB
     * of it: free resident pages, charged until reclaim purges them. */
    size_t base = take_pages(SK_GFP_NOWAIT);
    size_t freed = 0;
    while (freed < 512 && npages > 0) {
        sk_kernel_free_pages(pages[--npages], 0);
        freed++;
    }
    page_drain_pcp();    /* to the zone, where a request must ask the budget */
    struct sk_mem_budget s = budget();
    long min = (long)s.min, room = headroom();
    ok(base > 512 && room < min + (long)(64 * SK_PAGE_SIZE),
       "GFP_NOWAIT filled %zu pages to the min mark; 2 MiB freed stays charged (headroom %ld KiB, min %ld KiB)",
       base, room >> 10, min >> 10);

    unsigned long refused0 = s.refused;
    errno = 0;
    void *p = sk_kernel_alloc_pages(SK_GFP_NOWAIT | SK_GFP_NOWARN, 0);
    ok(p == NULL && errno == ENOMEM && budget().refused > refused0,
       "at min, GFP_NOWAIT fails at once: no reclaim (errno %s)", strerrorname_np(errno));
    if (p)
        pages[npages++] = p;
    char loud[256], quiet[256];
    int st1 = tap_child_report(nowait_loud, loud, sizeof loud, 1);
    int st2 = tap_child_report(nowait_quiet, quiet, sizeof quiet, 0);
    ok(st1 == 0 && strstr(loud, "alloc_pages(order 0") && strstr(loud, "out of memory") && st2 == 0 && !quiet[0],
       "its failure says one line ('%s'), none under __GFP_NOWARN ('%s')", loud, quiet);

    unsigned long direct0 = budget().direct_reclaims;
    size_t kernel = take_pages(SK_GFP_KERNEL);
    struct sk_mem_budget t = budget();
    ok(kernel >= 256 && t.direct_reclaims > direct0 && headroom() < min + (long)SK_PAGE_SIZE,
       "GFP_KERNEL reclaims the 2 MiB and goes on to min: %zu pages (%lu direct reclaims, %.1f MiB)", kernel,
       t.direct_reclaims - direct0, (double)(t.direct_reclaimed - s.direct_reclaimed) / MiB);

    unsigned long below0 = budget().below_min;
    size_t atomic = take_pages(SK_GFP_ATOMIC);
    room = headroom();
    ok(atomic > 0 && budget().below_min > below0,
       "GFP_ATOMIC goes on below min: %zu pages (ALLOC_HARDER | ALLOC_HIGH)", atomic);
    long reserve = min - min / 2;
    reserve -= reserve / 4;
    ok(room >= reserve - (long)SK_PAGE_SIZE && room < min,
       "and stops at its own mark: headroom %ld KiB, mark %ld KiB", room >> 10, reserve >> 10);

    /* __GFP_MEMALLOC (ALLOC_NO_WATERMARKS, the reclaimer's reserve) goes
     * on to the limit; the same with seed 001's patch 7 undone (the flag
     * tested before the mark, on every admission). */
    size_t mark_at = npages, memalloc = take_pages(SK_GFP_NOWAIT | SK_GFP_MEMALLOC);
    room = headroom();
    for (size_t i = mark_at; i < npages; i++)
        sk_kernel_free_pages(pages[i], 0);
    npages = mark_at;
    page_reclaim(0, true);      /* charged no more: purged */
    page_before |= 1u << PATCH_NO_WATERMARKS;
    size_t before_patch = take_pages(SK_GFP_NOWAIT | SK_GFP_MEMALLOC);
    page_before &= ~(1u << PATCH_NO_WATERMARKS);
    ok(memalloc > 0 && room < 16 * (long)SK_PAGE_SIZE && before_patch + 16 >= memalloc && before_patch <= memalloc + 16,
       "__GFP_MEMALLOC goes on to the limit: %zu pages, headroom %ld KiB; %zu with page_before=no_watermarks",
       memalloc, room >> 10, before_patch);

    for (size_t i = 0; i < npages; i++)
        sk_kernel_free_pages(pages[i], 0);
    npages = 0;
}

/* Order-0 pages for the background test: every other one freed leaves
 * 16 MiB of free resident pages no 1 MiB block can use. */
#define NHOLES 8192
static void *holes[NHOLES];
static void *steps[4096];

static void test_background(void)
{
    become_threaded();
    sk_trim();
    for (int i = 0; i < NHOLES; i++) {
        if (!(holes[i] = sk_alloc_pages(0)))
            BAIL("sk_alloc_pages(0)");
        memset(holes[i], 5, SK_PAGE_SIZE);
    }
    for (int i = 0; i < NHOLES; i += 2)
        sk_free_pages(holes[i], 0);
    page_drain_pcp();
    struct sk_mem_budget s = budget();
    /* 16 KiB blocks (order 2: no hole serves one), so that the last one
     * stops between low and min, where only the purger reclaims. */
    size_t n = 0;
    while (n < sizeof steps / sizeof steps[0] && headroom() >= (long)s.low) {
        steps[n] = sk_alloc_pages(2);
        if (!steps[n])
            break;
        memset(steps[n++], 6, 4 * SK_PAGE_SIZE);
    }
    long crossed = headroom();
    struct timespec ts = { 0, 10 * 1000 * 1000 };
    int waited = 0;
    while (waited < 300 && (budget().kswapd_reclaimed == s.kswapd_reclaimed || headroom() < (long)s.high)) {
        nanosleep(&ts, NULL);
        waited++;
    }
    struct sk_mem_budget t = budget();
    ok(crossed < (long)s.low && t.kswapd_wakes > s.kswapd_wakes && t.kswapd_runs > s.kswapd_runs,
       "%zu blocks of 16 KiB took the headroom below low (%ld KiB): the purger was woken (%lu) and ran (%lu)", n,
       crossed >> 10, t.kswapd_wakes - s.kswapd_wakes, t.kswapd_runs - s.kswapd_runs);
    ok(headroom() >= (long)t.high && t.kswapd_reclaimed > s.kswapd_reclaimed,
       "it purged the free pages no block could use: headroom %ld KiB (high %zu KiB), %.1f MiB back, in %d ms",
       headroom() >> 10, t.high >> 10, (double)t.kswapd_reclaimed / MiB, waited * 10);
    for (size_t i = 0; i < n; i++)
        sk_free_pages(steps[i], 2);
    for (int i = 1; i < NHOLES; i += 2)
        sk_free_pages(holes[i], 0);
}

/* The cgroup's limit is a soft budget (page_budget_set(.., false), as
 * mem_limit_mb=-1 sets it): the same reclaim, but nothing refused, as
 * the kernel's memory controller counts touched pages only. */
static void test_soft(void)
{
    page_budget_set(LIMIT, false);
    struct sk_mem_budget s = budget();
    size_t n = fill(blocks, 80, MiB);
    struct sk_mem_budget t = budget();
    ok(!t.hard && n == 80 && t.refused == s.refused && t.overruns > s.overruns,
       "a soft budget (the cgroup's): 80 MiB of blocks under 64 MiB all given, %lu overruns, none refused",
       t.overruns - s.overruns);
    free_all(blocks, n);
}

int main(void)
{
    plan(20);
    if (page_init() != 0)
        BAIL("page_init");
    sk_free(sk_malloc(1));
    sk_mem_budget_set(LIMIT);
    struct sk_mem_budget b = budget();
    ok(b.hard && b.limit == LIMIT && b.min == MiB && b.low == MiB + MiB / 4 && b.high == MiB + MiB / 2,
       "64 MiB, hard (sk_mem_budget_set): min %zu KiB, low %zu KiB, high %zu KiB (min_free_kbytes' rule)", b.min >> 10, b.low >> 10,
       b.high >> 10);
    test_reclaimable();
    test_limit();
    test_gfp();
    test_background();
    test_soft();
    sk_mem_budget_set(0);
    void *p = sk_malloc(80 * MiB);
    ok(p != NULL && budget().limit == 0, "no budget: 80 MiB at once");
    sk_free(p);
    return 0;
}
