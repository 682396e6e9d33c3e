/*
 * exact_cache_race — the per-CPU exact-block cache (pcp.c) under
 * threads: four workers take and free exact blocks of three page counts
 * (so the cache hits, misses and gives blocks back to the zone), each
 * block's first and last words written with its owner and checked before
 * the free, while a fifth thread reads the statistics (page_exact_stats,
 * page_stats: the cache's blocks read with no lock but the fallback
 * path's) in a loop and every eighth time drains every CPU's lists
 * (page_drain_pcp, as the purger's idle drain does: a remote drain of the
 * cache racing its own CPU's pops and pushes, each drained block going
 * to its zone while the workers cut and free blocks there):
 *  - no block is handed out twice (the words stay the owner's);
 *  - the statistics never count more blocks in use than exist;
 *  - once everything is freed no exact block is counted in use, and the
 *    books balance (accounting.h).
 * Built under ThreadSanitizer too (run with rseq off: every per-CPU list
 * operation takes the fallback lock that the statistics read under).
 * TSAN: yes
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "accounting.h"

#define WORKERS 4
#define ROUNDS 4000
#define HELD 3

static const size_t counts[] = { 9, 16, 40 };
static int stop;
static long bad_words, bad_stats;

static void *worker(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    struct sk_page *held[HELD] = { 0 };
    uint64_t seed = id * 0x9e3779b97f4a7c15ull + 1;
    for (int i = 0; i < ROUNDS; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int slot = (int)((seed >> 33) % HELD);
        if (held[slot]) {
            uint64_t *w = page_address(held[slot]);
            size_t n = held[slot]->large.nr_pages;
            uint64_t *end = (uint64_t *)((char *)w + n * SK_PAGE_SIZE) - 1;
            if (w[0] != id || *end != ~id)
                __atomic_fetch_add(&bad_words, 1, __ATOMIC_RELAXED);
            page_free_exact(held[slot]);
        }
        size_t n = counts[(seed >> 40) % 3];
        held[slot] = page_alloc_exact(n, 0);
        if (!held[slot])
            BAIL("page_alloc_exact(%zu) failed", n);
        uint64_t *w = page_address(held[slot]);
        w[0] = id;
        *((uint64_t *)((char *)w + n * SK_PAGE_SIZE) - 1) = ~id;
    }
    for (int s = 0; s < HELD; s++)
        if (held[s])
            page_free_exact(held[s]);
    return NULL;
}

static long drains;

static void *reader(void *arg)
{
    (void)arg;
    for (unsigned i = 0; !__atomic_load_n(&stop, __ATOMIC_ACQUIRE); i++) {
        if (i % 8 == 0) {
            page_drain_pcp();
            drains++;
        }
        unsigned long blocks, pages;
        page_exact_stats(&blocks, &pages);
        if (blocks > WORKERS * HELD || pages > WORKERS * HELD * 40)
            __atomic_fetch_add(&bad_stats, 1, __ATOMIC_RELAXED);
        struct page_stats st;
        page_stats(&st);
    }
    return NULL;
}

int main(void)
{
    static char outbuf[1 << 16];
    setvbuf(stdout, outbuf, _IOLBF, sizeof outbuf);
    acct_no_purger();
    page_init();
    pthread_t w[WORKERS], r;
    if (pthread_create(&r, NULL, reader, NULL) != 0)
        BAIL("pthread_create failed");
    for (uintptr_t i = 0; i < WORKERS; i++)
        if (pthread_create(&w[i], NULL, worker, (void *)(i + 1)) != 0)
            BAIL("pthread_create failed");
    for (int i = 0; i < WORKERS; i++)
        pthread_join(w[i], NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(r, NULL);
    is(bad_words, 0, "%d threads, %d rounds of 9/16/40-page blocks: every block kept its owner's words", WORKERS,
       ROUNDS);
    is(bad_stats, 0, "the statistics never counted more blocks in use than exist");
    ok(drains > 0, "%ld remote drains of every CPU's lists ran meanwhile", drains);
    acct_end();
    return done_testing();
}
