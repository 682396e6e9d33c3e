/*
 * frontier_huge — the zone's first slice starts on base pages (a small
 * program pays no 2 MiB of RSS for a few pages), and what joins past its
 * first 4 MiB is advised onto huge pages (buddy.c, zone_frontier_join):
 *  - 2 MiB taken: nothing advised (s->huge_from 0);
 *  - past 4 MiB: huge_from is the 4 MiB mark, and the kernel says the
 *    range is THP-eligible (smaps), unless THP is "never";
 *  - with huge_slices=0 (argument "off") nothing is ever advised, and the
 *    kernel has the range not THP-eligible;
 *  - every block frees back and the books balance.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "accounting.h"

#define NBLK 8   /* blocks of 1 MiB: 8 MiB in all */

/* THPeligible of the smaps entry holding p: 1, 0, or -1 if not found. */
static int thp_eligible(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[256];
    int in = 0, r = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') == line + strcspn(line, "-")) {
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (in && sscanf(line, "THPeligible: %d", &r) == 1)
            break;
    }
    fclose(f);
    return r;
}

int main(int argc, char **argv)
{
    bool off = argc > 1 && strcmp(argv[1], "off") == 0;
    acct_no_purger();
    os_options_parse(off ? "huge_slices=0" : "huge_slices=1");
    page_init();
    struct zone *z = &page_zones[0];
    bool thp = os_thp_mode() != OS_THP_NEVER;
    diag("huge_slices=%d, THP %s", off ? 0 : 1, thp ? "available" : "never");

    const unsigned order = 8;    /* 1 MiB */
    char *blk[NBLK];
    for (int i = 0; i < 2; i++)
        if (!(blk[i] = sk_alloc_pages(order)))
            BAIL("sk_alloc_pages(%u) failed", order);
    struct vm_slice *s = vm_slice_of(blk[0]);
    ok(z->frontier == s && z->frontier_next <= 1024, "2 MiB taken: the frontier holds %zu pages", z->frontier_next);
    is(s->huge_from, 0, "nothing advised onto huge pages yet");

    for (int i = 2; i < NBLK; i++) {
        if (!(blk[i] = sk_alloc_pages(order)))
            BAIL("sk_alloc_pages(%u) failed", order);
        memset(blk[i], i, (size_t)SK_PAGE_SIZE << order);
    }
    ok(z->frontier_next > 1024, "8 MiB taken: the frontier holds %zu pages", z->frontier_next);
    char *past = (char *)s->base + ((size_t)6 << 20);
    if (off || !thp) {
        is(s->huge_from, 0, "huge_slices=0 or THP never: nothing advised");
        is(thp_eligible(past), 0, "and the kernel has the range not THP-eligible");
    } else {
        is(s->huge_from, (4u << 20) >> SK_PAGE_SHIFT, "advised from the 4 MiB mark (page %u)", s->huge_from);
        is(thp_eligible(past), 1, "the kernel has the range past it THP-eligible");
    }
    for (int i = 0; i < NBLK; i++)
        sk_free_pages(blk[i], order);
    struct page_stats st;
    unsigned long smaller = acct_all_freed(&st);
    is(smaller, 0, "all freed: the books balance");
    return done_testing();
}
