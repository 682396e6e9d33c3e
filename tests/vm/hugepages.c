/*
 * hugepages.c — huge-page slices get huge pages, and give them back whole.
 *
 *  1. sk_vm_map(64 MiB, 2 MiB), touched in full, shows AnonHugePages in
 *     /proc/self/smaps for its range when THP is in madvise (or always)
 *     mode.  If it shows none, a plain mmap with MADV_HUGEPAGE is tried as
 *     a control: none there either means the kernel has no huge pages to
 *     give right now (fragmented memory), and the check is skipped, not
 *     failed.
 *  2. The page allocator: a burst of 2 MiB blocks past the zone's first
 *     slice lands in huge-page slices, which get huge pages.
 *  3. RSS decay: after the burst is freed, with a small slow-path call
 *     every 25 ms (reclaim runs from the slow paths), RSS falls back to
 *     the baseline within decay_ms plus slack, and the huge-page slices
 *     hold no huge page any more (returned whole, never split).
 * THP "never": skipped (huge slices then run on base pages; slices.c
 * covers them).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "statm.h"
#include "tap.h"
#include "threaded.h"
#include "page/page.h"
#include "vm/vm.h"

#define MiB ((size_t)1 << 20)
#define DECAY_MS 300

/* AnonHugePages (kB) of the mappings overlapping [lo, hi). */
static long anon_huge_kb(uintptr_t lo, uintptr_t hi)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    long kb = 0;
    int in = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        long v;
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = a < hi && b > lo;
        else if (in && sscanf(line, "AnonHugePages: %ld kB", &v) == 1)
            kb += v;
    }
    fclose(f);
    return kb;
}

static long rss_kb(void)
{
    return statm_bytes(STATM_RESIDENT) / 1024;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Huge pages in a plain madvised mapping: can the kernel give any now? */
static long control_huge_kb(void)
{
    size_t len = 8 * MiB;
    char *m = mmap(NULL, len + 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 0;
    char *a = (char *)SK_ALIGN_UP((uintptr_t)m, 2 * MiB);
    madvise(a, len, MADV_HUGEPAGE);
    memset(a, 1, len);
    long kb = anon_huge_kb((uintptr_t)a, (uintptr_t)a + len);
    munmap(m, len + 2 * MiB);
    return kb;
}

#define BLOCKS 96    /* 192 MiB of 2 MiB blocks: past the first (base) slice */

int main(void)
{
    enum os_thp thp = os_thp_mode();
    if (thp == OS_THP_NEVER)
        skip_all("transparent huge pages are off (THP \"never\")");
    /* decay, not the dirty bound, returns it; huge-page slices asked for */
    os_options_parse("decay_ms=300,dirty_max_mb=1024,huge_slices=1");
    become_threaded();    /* and the purger's decay, not a single thread's trim (threaded.h) */
    plan(7);

    /* ---- 1. sk_vm_map with 2 MiB pages ---- */
    size_t len = 64 * MiB;
    char *p = sk_vm_map(len, 2 * MiB);
    if (!p)
        BAIL("sk_vm_map(64 MiB, 2 MiB) failed");
    memset(p, 0x5a, len);
    long kb = anon_huge_kb((uintptr_t)p, (uintptr_t)p + len);
    diag("sk_vm_map(64 MiB, 2 MiB) touched: AnonHugePages %ld kB", kb);
    if (kb > 0)
        ok(1, "a huge-page slice from sk_vm_map gets huge pages (%ld kB)", kb);
    else if (control_huge_kb() == 0)
        ok(1, "# SKIP the kernel gives no huge pages right now (a plain MADV_HUGEPAGE mapping got none)");
    else
        ok(0, "a huge-page slice from sk_vm_map gets huge pages (none, though a plain madvised mapping got some)");
    sk_vm_unmap(p, len);

    /* ---- 2. page allocator: dense memory past the first slice ---- */
    void *blk[BLOCKS];
    free(malloc(64));                    /* start-up allocations before the baseline */
    page_reclaim(0, true);
    long base_rss = rss_kb();
    int in_huge = 0;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < BLOCKS; i++) {
        blk[i] = sk_alloc_pages(9);
        if (!blk[i])
            BAIL("sk_alloc_pages(9) failed");
        memset(blk[i], 1, 2 * MiB);
        struct vm_slice *s = vm_slice_of(blk[i]);
        if (s->kind == VM_SLICE_HUGE && s->huge) {
            in_huge++;
            if (s->base < lo)
                lo = s->base;
            if (s->base + SLICE_SIZE > hi)
                hi = s->base + SLICE_SIZE;
        }
    }
    ok(in_huge >= BLOCKS / 2, "%d of %d 2 MiB blocks landed in huge-page slices", in_huge, BLOCKS);
    long zone_kb = in_huge ? anon_huge_kb(lo, hi) : 0;
    diag("huge-page slices of the zone: AnonHugePages %ld kB", zone_kb);
    ok(zone_kb > 0 || control_huge_kb() == 0, "the zone's huge-page slices get huge pages (%ld kB)", zone_kb);

    /* ---- 3. RSS decay ---- */
    long peak = rss_kb();
    for (int i = 0; i < BLOCKS; i++)
        sk_free_pages(blk[i], 9);
    uint64_t t0 = os_now_ns();
    long rss = peak, waited = 0;
    const long limit = DECAY_MS + 1000;
    while (waited < limit) {
        sleep_ms(25);
        sk_free_pages(sk_alloc_pages(5), 5);   /* a slow-path call: reclaim runs */
        waited = (long)((os_now_ns() - t0) / 1000000);
        rss = rss_kb();
        if (rss < base_rss + 8 * 1024)
            break;
    }
    diag("RSS: baseline %ld MiB, burst %ld MiB, after %ld ms %ld MiB", base_rss >> 10, peak >> 10, waited, rss >> 10);
    ok(peak > base_rss + 150 * 1024, "the burst raised RSS (+%ld MiB)", (peak - base_rss) >> 10);
    ok(waited >= DECAY_MS / 2, "recently freed memory is kept a while for reuse (%ld ms)", waited);
    ok(rss < base_rss + 8 * 1024, "RSS falls back within decay_ms + slack (%ld ms, +%ld MiB)",
       waited, (rss - base_rss) >> 10);
    long left = in_huge ? anon_huge_kb(lo, hi) : 0;
    /* The probe's own order-5 block may keep the one huge page it sits in. */
    ok(left <= 2048, "the huge-page slices keep at most the probe's huge page after decay "
       "(%ld kB of %ld): the rest returned whole", left, zone_kb);
    return done_testing();
}
