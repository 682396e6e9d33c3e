/*
 * rss_decay — memory freed after a burst goes back to the OS: resident
 * set size (from /proc/self/statm) rises by a 256 MiB burst of blocks of
 * orders 4..9 with every page touched, and after they are all freed
 *  - the dirty bound holds at once: at most dirty_max_mb of free memory
 *    stays resident (plus slack);
 *  - page_reclaim(0, true) returns it at once;
 *  - below dirty_max_mb it stays resident until trimmed or aged;
 *  - sk_trim() returns it at once, with the slab layer up or not;
 *  - free memory older than decay_ms is purged from the slow paths: after
 *    an idle decay_ms a few small calls return it; and so does a steady
 *    trickle of small allocations and frees, within decay_ms plus slack
 *    (freeing a small block next to an old free one must not make the
 *    old memory young again).
 * Not a speed test: only the decay contract, with generous slack.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "page/page.h"
#include "statm.h"
#include "tap.h"
#include "threaded.h"

#define MiB (1024.0 * 1024.0)
#define BURST ((size_t)256 << 20)
/* Below dirty_max_mb (64 MiB with nothing in use, by default): only trim,
 * reclaim or decay returns it. */
#define SMALL ((size_t)40 << 20)
#define SLACK ((long)16 << 20)

struct blk { char *p; unsigned order; };
static struct blk blks[8192];
static int nblk;

static long rss(void)
{
    return statm_bytes(STATM_RESIDENT);
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
}

/* Allocate `bytes` in blocks of orders 4..9, touching every page. */
static void burst(size_t bytes)
{
    uint64_t s = 0x8badf00dull;
    size_t got = 0;
    nblk = 0;
    while (got < bytes) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        unsigned o = 4 + (unsigned)(s % 6);
        size_t size = SK_PAGE_SIZE << o;
        char *p = sk_alloc_pages(o);
        if (!p)
            BAIL("sk_alloc_pages(%u) failed in the burst", o);
        for (size_t off = 0; off < size; off += SK_PAGE_SIZE)
            p[off] = 1;
        blks[nblk++] = (struct blk){ p, o };
        got += size;
    }
}

static void free_all(void)
{
    for (int i = 0; i < nblk; i++)
        sk_free_pages(blks[i].p, blks[i].order);
    nblk = 0;
}

int main(void)
{
    zones_keep_freed();   /* placement, not trimming (threaded.h) */
    page_init();
    long decay = sk_option("decay_ms"), dirty_max = sk_option("dirty_max_mb");
    if (dirty_max < 0)
        dirty_max = 64;   /* the default's floor: nothing is in use once all is freed (dirty_cap) */
    /* Warm up: the first slices and their descriptors stay mapped. */
    burst(BURST);
    free_all();
    page_reclaim(0, true);
    long base = rss();
    if (base <= 0)
        skip_all("no /proc/self/statm");
    diag("decay_ms %ld, dirty_max_mb %ld, RSS at rest %.1f MiB", decay, dirty_max, base / MiB);

    /* ---- the dirty bound ---- */
    burst(BURST);
    long high = rss();
    ok(high - base >= (long)BURST - SLACK, "burst of 256 MiB is resident (RSS +%.1f MiB)", (high - base) / MiB);
    free_all();
    long after = rss();
    ok(after - base <= (dirty_max << 20) + SLACK,
       "freed: at most dirty_max_mb stays resident at once (RSS +%.1f MiB, bound %ld MiB)", (after - base) / MiB,
       dirty_max);
    page_reclaim(0, true);

    /* ---- sk_trim with only the page layer up ---- */
    if ((long)SMALL > (dirty_max << 20) - SLACK)
        diag("dirty_max_mb %ld is below the small burst: the trim checks prove less", dirty_max);
    burst(SMALL);
    free_all();
    after = rss();
    ok(after - base >= (long)SMALL - SLACK, "a 40 MiB burst freed stays resident under dirty_max_mb (+%.1f MiB)",
       (after - base) / MiB);
    size_t trimmed = sk_trim();
    long now = rss();
    ok(now - base <= SLACK, "sk_trim before any malloc returns it at once (RSS +%.1f MiB, %zu bytes reported)",
       (now - base) / MiB, trimmed);
    page_reclaim(0, true);

    /* ---- page_reclaim(0, true) ---- */
    burst(SMALL);
    free_all();
    size_t got = page_reclaim(0, true);
    now = rss();
    ok(now - base <= SLACK, "page_reclaim(0, true) returns it at once (RSS +%.1f MiB)", (now - base) / MiB);
    ok(got > 0, "page_reclaim reports %.1f MiB returned", got / MiB);

    /* ---- sk_trim with the slab layer up ---- */
    sk_free(sk_malloc(100));
    burst(SMALL);
    free_all();
    trimmed = sk_trim();
    now = rss();
    ok(now - base <= SLACK, "sk_trim returns it at once (RSS +%.1f MiB)", (now - base) / MiB);
    ok(trimmed > 0, "sk_trim reports %.1f MiB returned", trimmed / MiB);

    /* ---- decay, idle: nothing happens until decay_ms has passed ---- */
    burst(SMALL);
    free_all();
    after = rss();
    ok(after - base >= (long)SMALL - SLACK, "freed again: resident until it ages (+%.1f MiB)", (after - base) / MiB);
    sleep_ms(decay + 50);
    for (int i = 0; i < 4; i++) {
        sk_free_pages(sk_alloc_pages(5), 5);     /* above the per-CPU lists: a zone slow path */
        sleep_ms(decay / 4 + 10);                /* reclaim runs at most every decay_ms/4 */
    }
    now = rss();
    ok(now - base <= SLACK, "idle past decay_ms, then a few slow-path calls: RSS falls (+%.1f MiB)",
       (now - base) / MiB);
    page_reclaim(0, true);

    /* ---- decay under steady small churn ---- */
    burst(SMALL);
    free_all();
    long t0 = (long)(os_now_ns() / 1000000);
    long limit = decay + decay / 2 + 1000, fell_at = -1;
    for (long t = 0; t <= limit; t = (long)(os_now_ns() / 1000000) - t0) {
        sleep_ms(25);
        sk_free_pages(sk_alloc_pages(5), 5);
        if (rss() - base <= SLACK) {
            fell_at = (long)(os_now_ns() / 1000000) - t0;
            break;
        }
    }
    now = rss();
    if (fell_at >= 0)
        diag("RSS fell back after %ld ms", fell_at);
    ok(fell_at >= 0, "small alloc/free calls every 25 ms: RSS falls within decay_ms + slack (%ld ms; now +%.1f MiB)",
       limit, (now - base) / MiB);
    return done_testing();
}
