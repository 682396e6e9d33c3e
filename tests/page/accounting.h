/*
 * accounting.h — the page allocator's books, checked page by page (tests).
 *
 * acct_check(live, n) marks every page of every block slabkit knows about
 * in a count per page of each buddy slice: the caller's live blocks, the
 * free blocks on the zone lists (page_for_each_free), and the blocks on
 * every CPU's page list and exact-block cache (read straight from
 * page_pcp).  The books are
 * right when every page of every slice is counted exactly once (no block
 * overlaps another, no page is lost; a zone's frontier slice is counted
 * up to its frontier, past which no page may be any block's), every
 * block is naturally aligned
 * with the descriptor state its place implies, no two free buddies of one
 * order sit unmerged on the lists, and page_stats agrees with what was
 * found.  Call it with no other thread using the allocator.  It allocates
 * nothing (the process may have slabkit's malloc linked in).
 */
#ifndef SK_TEST_ACCOUNTING_H
#define SK_TEST_ACCOUNTING_H

#include <stdint.h>
#include <string.h>

#include "cpus.h"
#include "page/page.h"
#include "tap.h"

#define ACCT_MAX_SLICES 256

struct acct_block { char *p; unsigned order; };

struct acct_result {
    unsigned long managed, live_pages, free_pages, pcp_pages;
    unsigned long free_blocks[SK_MAX_ORDER + 1];
    long overlaps;        /* pages counted more than once */
    long unaccounted;     /* pages counted nowhere */
    long misaligned;      /* blocks not naturally aligned, or outside any slice */
    long bad_state;       /* descriptor flags/order disagree with the block's place */
    long unmerged;        /* free buddies of the same order both on the lists */
    long stats_mismatch;  /* page_stats disagrees with the walk */
    long stale;           /* a page inside a block whose descriptor still says head */
};

/* page_stats' free pages on the zone lists, and pages on the per-CPU
 * lists (the exact-block cache's too). */
static inline unsigned long acct_zone_free(void)
{
    struct page_stats st;
    page_stats(&st);
    return st.free_pages;
}

static inline unsigned long acct_pcp_pages(void)
{
    struct page_stats st;
    page_stats(&st);
    return st.pcp_pages;
}

/* The books need no other thread in the allocator, and the purger
 * (src/page/purge.c) is one: it drains idle per-CPU lists and purges old
 * free blocks, off the lists meanwhile.  Call before page_init. */
static inline void acct_no_purger(void)
{
    os_options_init();
    os_options_parse("background=0");
    /* Nor a trim at free (a process without the purger trims: reclaim.c):
     * these tests follow blocks, which a purge in between would move. */
    for (int n = 0; n < PAGE_NR_ZONES; n++)
        page_zones[n].trim_pages = ~0ul >> 1;
}

/* The frontier tests' start (frontier_release, frontier_fork,
 * frontier_race): stdout line-buffered in a static buffer (nothing they
 * do afterwards may allocate from the slab zone), no purger, base-page
 * slices only (every slice of the slab zone joins through a frontier).
 * Returns the slab zone; page_init is the caller's, after anything it
 * must set up first. */
static inline struct zone *acct_frontier_start(void)
{
    static char outbuf[1 << 16];
    setvbuf(stdout, outbuf, _IOLBF, sizeof outbuf);
    acct_no_purger();
    os_options_parse("huge_slices=0");
    return &page_zones[0];
}

/* The per-CPU list tests' start: this thread pinned to one CPU (so its
 * lists are the same ones throughout), no purger, skipped with pcp=0,
 * the page allocator up. */
static inline void acct_pcp_start(void)
{
    pin_first_cpu();
    acct_no_purger();
    if (!sk_opt.pcp)
        skip_all("per-CPU page lists are off (pcp=0)");
    page_init();
}

static struct vm_slice *acct_slices[ACCT_MAX_SLICES];
static int acct_nslices;
static uint8_t acct_marks[ACCT_MAX_SLICES][SLICE_PAGES];
static uint8_t acct_free_head[ACCT_MAX_SLICES][SLICE_PAGES];   /* order + 1 at a free block's head */
static uint8_t acct_head[ACCT_MAX_SLICES][SLICE_PAGES];        /* 1 at any block's head */
static size_t acct_joined[ACCT_MAX_SLICES];   /* pages of the slice the zone has */
static int acct_printed, acct_stale_printed;

/* A zone's frontier slice (buddy.c, zone_grow_frontier) is the zone's only
 * up to frontier_next: the pages past it are no block's, and their
 * descriptors stay zero.  Every other slice is the zone's whole. */
static size_t acct_slice_joined(const struct vm_slice *s)
{
    return s->zone->frontier == s ? s->zone->frontier_next : SLICE_PAGES;
}

#define acct_diag(...) do { if (acct_printed++ < 8) diag(__VA_ARGS__); } while (0)

static int acct_slice_index(const void *p)
{
    struct vm_slice *s = vm_slice_of(p);
    for (int i = 0; i < acct_nslices; i++)
        if (acct_slices[i] == s)
            return i;
    return -1;
}

/* Count the pages of one block; returns its slice index or -1. */
static int acct_mark(struct acct_result *r, const void *p, unsigned order, const char *what)
{
    int si = acct_slice_index(p);
    size_t bytes = SK_PAGE_SIZE << order;
    if (si < 0 || order > SK_MAX_ORDER || ((uintptr_t)p - acct_slices[si]->base) % bytes) {
        r->misaligned++;
        acct_diag("%s block %p order %u: misaligned or outside every slice", what, p, order);
        return -1;
    }
    size_t idx = ((uintptr_t)p - acct_slices[si]->base) >> SK_PAGE_SHIFT;
    acct_head[si][idx] = 1;
    for (size_t k = 0; k < ((size_t)1 << order); k++) {
        if (acct_marks[si][idx + k]++ == 1) {
            r->overlaps++;
            acct_diag("%s block %p order %u: page +%zu already counted", what, p, order, k);
        }
    }
    return si;
}

static void acct_free_cb(void *addr, unsigned order, bool clean, void *arg)
{
    struct acct_result *r = arg;
    struct sk_page *pg = page_of(addr);
    r->free_pages += 1ul << order;
    if (order <= SK_MAX_ORDER)
        r->free_blocks[order]++;
    if (!pg || !(pg->flags & PG_BUDDY) || pg->order != order || !(pg->flags & PG_CLEAN) != !clean) {
        r->bad_state++;
        acct_diag("free block %p order %u: descriptor flags %#x order %u", addr, order, pg ? pg->flags : 0,
                  pg ? pg->order : 0);
    }
    int si = acct_mark(r, addr, order, "free");
    if (si >= 0)
        acct_free_head[si][((uintptr_t)addr - acct_slices[si]->base) >> SK_PAGE_SHIFT] = (uint8_t)(order + 1);
}

static void acct_check(const struct acct_block *live, size_t n, struct acct_result *r)
{
    memset(r, 0, sizeof *r);
    acct_printed = 0;       /* (stale heads are shown twice per process, not per call) */
    acct_nslices = 0;
    for (struct vm_slice *s = vm_slices(); s; s = s->next)
        if (s->zone && (s->kind == VM_SLICE_BASE || s->kind == VM_SLICE_HUGE)) {
            if (acct_nslices == ACCT_MAX_SLICES)
                BAIL("more than %d slices", ACCT_MAX_SLICES);
            memset(acct_marks[acct_nslices], 0, SLICE_PAGES);
            memset(acct_free_head[acct_nslices], 0, SLICE_PAGES);
            memset(acct_head[acct_nslices], 0, SLICE_PAGES);
            acct_joined[acct_nslices] = acct_slice_joined(s);
            r->managed += acct_joined[acct_nslices];
            acct_slices[acct_nslices++] = s;
        }

    for (size_t i = 0; i < n; i++) {
        struct sk_page *pg = page_of(live[i].p);
        r->live_pages += 1ul << live[i].order;
        if (!pg || (pg->flags & (PG_HEAD | PG_BUDDY | PG_PCP)) != PG_HEAD || pg->order != live[i].order) {
            r->bad_state++;
            acct_diag("live block %p order %u: descriptor flags %#x order %u", (void *)live[i].p, live[i].order,
                      pg ? pg->flags : 0, pg ? pg->order : 0);
        }
        acct_mark(r, live[i].p, live[i].order, "live");
    }
    page_for_each_free(acct_free_cb, r);
    /* The block lists: orders 0..PCP_MAX_ORDER, then order 0's of the
     * reclaimable and movable types. */
    for (unsigned l = 0; l < PCP_NR_LISTS; l++) {
        cpu_arrays_t tab = page_pcp.lists[l];
        unsigned o = pcp_order(l);
        if (!pcp_block_list(l) || !tab || tab == cpu_empty_arrays)
            continue;
        for (int cpu = 0; cpu < cpu_nr_ids; cpu++) {
            struct cpu_array *a = cpu_array_at(tab, cpu);
            for (int32_t i = 0; i < (int32_t)cpu_array_len(a); i++) {
                struct sk_page *pg = a->objs[i];
                r->pcp_pages += 1ul << o;
                if (!(pg->flags & PG_PCP) || pg->order != o) {
                    r->bad_state++;
                    acct_diag("per-CPU block %p (cpu %d, order %u): flags %#x order %u", page_address(pg), cpu, o,
                              pg->flags, pg->order);
                }
                acct_mark(r, page_address(pg), o, "per-CPU");
            }
        }
    }
    /* The exact-block cache: a block of large.nr_pages pages per entry. */
    cpu_arrays_t etab = page_pcp.lists[PCP_EXACT];
    for (int cpu = 0; etab && etab != cpu_empty_arrays && cpu < cpu_nr_ids; cpu++) {
        struct cpu_array *a = cpu_array_at(etab, cpu);
        for (int32_t i = 0; i < (int32_t)cpu_array_len(a); i++) {
            struct sk_page *pg = a->objs[i];
            r->pcp_pages += pg->large.nr_pages;
            if ((pg->flags & (PG_PCP | PG_HEAD)) != PG_PCP) {
                r->bad_state++;
                acct_diag("cached exact block %p (cpu %d): flags %#x", page_address(pg), cpu, pg->flags);
            }
            for (size_t k = 0; k < pg->large.nr_pages; k++)
                acct_mark(r, (char *)page_address(pg) + (k << SK_PAGE_SHIFT), 0, "cached exact");
        }
    }
    for (int si = 0; si < acct_nslices; si++)
        for (size_t idx = 0; idx < SLICE_PAGES; idx++) {
            if (idx >= acct_joined[si]) {
                const struct sk_page *pg = (const struct sk_page *)acct_slices[si]->pages + idx;
                if (acct_marks[si][idx] || pg->flags) {
                    r->unaccounted++;
                    acct_diag("page %#lx past the zone's frontier: counted %u times, descriptor flags %#x",
                              (unsigned long)(acct_slices[si]->base + (idx << SK_PAGE_SHIFT)),
                              acct_marks[si][idx], pg->flags);
                }
                continue;
            }
            if (acct_marks[si][idx] == 0) {
                r->unaccounted++;
                acct_diag("page %#lx counted nowhere", (unsigned long)(acct_slices[si]->base + (idx << SK_PAGE_SHIFT)));
            }
            const struct sk_page *pg = (const struct sk_page *)acct_slices[si]->pages + idx;
            if (!acct_head[si][idx] && (pg->flags & (PG_HEAD | PG_BUDDY | PG_PCP))) {
                r->stale++;
                if (acct_stale_printed++ < 2)
                    diag("page %#lx inside a block: descriptor flags %#x order %u (a stale head)",
                         (unsigned long)(acct_slices[si]->base + (idx << SK_PAGE_SHIFT)), pg->flags, pg->order);
            }
            unsigned fo = acct_free_head[si][idx];
            if (fo && fo - 1 < SK_MAX_ORDER) {
                size_t b = idx ^ ((size_t)1 << (fo - 1));
                if (b > idx && acct_free_head[si][b] == fo) {
                    r->unmerged++;
                    acct_diag("free buddies %#lx and %#lx of order %u not merged",
                              (unsigned long)(acct_slices[si]->base + (idx << SK_PAGE_SHIFT)),
                              (unsigned long)(acct_slices[si]->base + (b << SK_PAGE_SHIFT)), fo - 1);
                }
            }
        }
    struct page_stats st;
    page_stats(&st);
    if (st.managed_pages != r->managed || st.free_pages != r->free_pages || st.pcp_pages != r->pcp_pages) {
        r->stats_mismatch++;
        acct_diag("page_stats: managed %lu free %lu pcp %lu; walk: managed %lu free %lu pcp %lu", st.managed_pages,
                  st.free_pages, st.pcp_pages, r->managed, r->free_pages, r->pcp_pages);
    }
    for (unsigned o = 0; o <= SK_MAX_ORDER; o++)
        if (st.free_blocks[o] != r->free_blocks[o]) {
            r->stats_mismatch++;
            acct_diag("page_stats: %lu free blocks of order %u, walk found %lu", st.free_blocks[o], o,
                      r->free_blocks[o]);
        }
}

/* The whole verdict as TAP checks, each prefixed with `when`. */
static void acct_report(const struct acct_result *r, const char *when)
{
    is(r->overlaps, 0, "%s: no page in two blocks (live, free or per-CPU)", when);
    is(r->unaccounted, 0, "%s: no page lost", when);
    is(r->live_pages + r->free_pages + r->pcp_pages, r->managed,
       "%s: live + free + per-CPU pages = managed pages", when);
    is(r->misaligned, 0, "%s: every block naturally aligned inside a slice", when);
    is(r->bad_state, 0, "%s: every descriptor in the state its block's place implies", when);
    is(r->unmerged, 0, "%s: no two free buddies left unmerged", when);
    is(r->stats_mismatch, 0, "%s: page_stats agrees with the walk", when);
    is(r->stale, 0, "%s: no page inside a block keeps a head flag", when);
}

/* Everything freed: drain the per-CPU lists, check the books ("all
 * freed"), and fill *st; returns how many free blocks are smaller than the
 * largest order (0 once every slice has coalesced back to one block, and
 * a frontier slice's joined part into one block per bit of its size). */
static inline unsigned long acct_all_freed(struct page_stats *st)
{
    struct acct_result r;
    page_drain_pcp();
    acct_check(NULL, 0, &r);
    acct_report(&r, "all freed");
    page_stats(st);
    unsigned long smaller = 0;
    for (unsigned o = 0; o < SK_MAX_ORDER; o++)
        smaller += st->free_blocks[o];
    /* A frontier slice's joined pages [0, n) merge into one block per
     * bit of n, not into one of order SK_MAX_ORDER. */
    for (int n = 0; n < PAGE_NR_ZONES; n++)
        if (page_zones[n].frontier)
            smaller -= (unsigned long)__builtin_popcountl(page_zones[n].frontier_next);
    return smaller;
}

/* The end of a page test that freed everything: the books balance
 * (acct_all_freed), every whole slice is one block of the largest order
 * again, and no exact block is counted in use.  Three or more TAP lines. */
static inline void acct_end(void)
{
    struct page_stats st;
    unsigned long smaller = acct_all_freed(&st);
    is(smaller, 0, "all freed: every slice one block of order %d again", SK_MAX_ORDER);
    unsigned long blocks, pages;
    page_exact_stats(&blocks, &pages);
    ok(blocks == 0 && pages == 0, "no exact block counted in use (%lu blocks, %lu pages)", blocks, pages);
}

/* Pages the zones hold in open frontier slices (not whole slices). */
static inline unsigned long acct_frontier_pages(void)
{
    unsigned long pages = 0;
    for (int n = 0; n < PAGE_NR_ZONES; n++)
        if (page_zones[n].frontier)
            pages += page_zones[n].frontier_next;
    return pages;
}

#endif
