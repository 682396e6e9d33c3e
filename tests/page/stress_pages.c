/*
 * stress_pages — 16 threads confined to two CPUs allocate and free blocks
 * of orders 0..4 concurrently, losing nothing and overlapping nothing.
 * Every page of every block is filled with a pattern naming its owner
 * (thread, sequence number, page) and checked before the block is freed,
 * so a block handed to two threads at once, or purged while in use, shows
 * up as a changed word.  Some blocks are handed to another thread through
 * a locked inbox and freed there (cross-CPU frees).  A 17th thread drains
 * the per-CPU lists and returns free memory to the OS meanwhile.  A block
 * handed out as zeroed (PG_ZEROED) must read zero.  At the end everything
 * is freed and the books (accounting.h) must balance, with every slice
 * coalesced into one block.  The drain of every CPU's lists that an
 * allocation makes before it takes fresh memory must have run meanwhile.
 * Every fourth worker allocates in bursts instead: 20-40 blocks of one
 * order from 1 to 3, more than that order's list holds, then frees them
 * all, so that its CPU's lists overflow, run dry and grow (pcp.c,
 * pcp_tune), put one another back, and are trimmed by the reclaimer's
 * drains, all while the other threads push and pop on the same lists:
 * the tuning must have run (page_stats' pcp_grows).  Thread i asks for
 * migratetype i % 3 (unmovable, reclaimable, movable: buddy.c, "grouping
 * by mobility"), so requests fall back and claim pageblocks under the
 * zone lock while frees read the types without it (page_free picks its
 * per-CPU list by its pageblock's type); both must have happened.
 * Usage: stress_pages [milliseconds]   (default 1500)
 *
 * TSAN: yes
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "accounting.h"
#include "cpus.h"

#define NTHREADS 16
#define MAXORDER 4
#define PER_THREAD 48
#define INBOX 64

struct rec { char *p; unsigned order; uint32_t owner, seq; };

struct inbox {
    pthread_mutex_t lock;
    unsigned n;
    struct rec r[INBOX];
};

static struct inbox inbox[NTHREADS];
static int stop;
static long bad_pattern, bad_zero, bad_state, alloc_fail;
static long n_alloc, n_free, n_handed, n_remote_free, n_reclaims;

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static inline uint64_t word(const struct rec *r, size_t page)
{
    return ((uint64_t)r->owner << 56) | ((uint64_t)r->seq << 20) | (page & 0xfffff);
}

static void fill(const struct rec *r)
{
    size_t pages = (size_t)1 << r->order;
    for (size_t k = 0; k < pages; k++) {
        uint64_t *w = (uint64_t *)(r->p + k * SK_PAGE_SIZE), v = word(r, k);
        for (size_t i = 0; i < SK_PAGE_SIZE / 8; i++)
            w[i] = v;
    }
}

/* Check the pattern, then free the block (by whichever thread holds it). */
static void check_and_free(const struct rec *r)
{
    size_t pages = (size_t)1 << r->order;
    for (size_t k = 0; k < pages; k++) {
        const uint64_t *w = (const uint64_t *)(r->p + k * SK_PAGE_SIZE);
        uint64_t v = word(r, k);
        for (size_t i = 0; i < SK_PAGE_SIZE / 8; i++)
            if (w[i] != v) {
                if (__atomic_fetch_add(&bad_pattern, 1, __ATOMIC_RELAXED) < 5)
                    diag("block %p order %u of thread %u seq %u: page %zu word %zu is %#llx, want %#llx",
                         (void *)r->p, r->order, r->owner, r->seq, k, i, (unsigned long long)w[i],
                         (unsigned long long)v);
                break;
            }
    }
    sk_free_pages(r->p, r->order);
}

static int alloc_one(struct rec *r, unsigned order, uint32_t owner, uint32_t seq)
{
    struct sk_page *blk = page_alloc_mt(order, owner % MIGRATE_TYPES);
    char *p = blk ? page_address(blk) : NULL;
    if (!p) {
        __atomic_fetch_add(&alloc_fail, 1, __ATOMIC_RELAXED);
        return 0;
    }
    struct sk_page *pg = page_of(p);
    uint32_t flags = pg ? pg->flags : 0;
    if (!pg || (flags & (PG_HEAD | PG_BUDDY | PG_PCP)) != PG_HEAD || pg->order != order ||
        (uintptr_t)p % (SK_PAGE_SIZE << order)) {
        if (__atomic_fetch_add(&bad_state, 1, __ATOMIC_RELAXED) < 5)
            diag("block %p order %u: descriptor flags %#x order %u", (void *)p, order, flags, pg ? pg->order : 0);
    }
    if (flags & PG_ZEROED) {
        size_t n = (SK_PAGE_SIZE << order) / 8;
        for (size_t i = 0; i < n; i++)
            if (((const uint64_t *)p)[i]) {
                if (__atomic_fetch_add(&bad_zero, 1, __ATOMIC_RELAXED) < 5)
                    diag("block %p order %u handed out as zeroed: word %zu is %#llx", (void *)p, order, i,
                         (unsigned long long)((const uint64_t *)p)[i]);
                break;
            }
    }
    *r = (struct rec){ p, order, owner, seq };
    fill(r);
    return 1;
}

/* Bursts of one order at a time, each larger than that order's list. */
static void burst(uint32_t id, uint64_t *s, long *allocs, long *frees)
{
    struct rec live[PER_THREAD];
    uint32_t seq = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        uint64_t x = rnd(s);
        unsigned order = 1 + (unsigned)(x % 3), want = 20 + (unsigned)((x >> 8) % 21), n = 0;
        while (n < want && alloc_one(&live[n], order, id, ++seq))
            n++;
        for (unsigned i = 0; i < n; i++)
            check_and_free(&live[i]);
        *allocs += n;
        *frees += n;
    }
}

static void *worker(void *arg)
{
    uint32_t id = (uint32_t)(uintptr_t)arg, seq = 0;
    uint64_t s = 0x1234567ull * (id + 1) + 99;
    struct rec live[PER_THREAD];
    unsigned n = 0;
    long allocs = 0, frees = 0, handed = 0, remote = 0;
    if (id % 4 == 0)
        burst(id, &s, &allocs, &frees);
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        uint64_t x = rnd(&s);
        unsigned op = (unsigned)(x % 16);
        if (op < 7 && n < PER_THREAD) {
            if (alloc_one(&live[n], (unsigned)((x >> 8) % (MAXORDER + 1)), id, ++seq)) {
                n++;
                allocs++;
            }
        } else if (op < 13 && n) {
            unsigned k = (unsigned)((x >> 8) % n);
            check_and_free(&live[k]);
            live[k] = live[--n];
            frees++;
        } else if (op == 13 && n) {
            /* Hand a block to another thread: it checks and frees it. */
            unsigned k = (unsigned)((x >> 8) % n);
            unsigned to = (id + 1 + (unsigned)((x >> 16) % (NTHREADS - 1))) % NTHREADS;
            struct inbox *b = &inbox[to];
            pthread_mutex_lock(&b->lock);
            int room = b->n < INBOX;
            if (room)
                b->r[b->n++] = live[k];
            pthread_mutex_unlock(&b->lock);
            if (!room) {
                check_and_free(&live[k]);
                frees++;
            }
            live[k] = live[--n];
            handed += room;
        } else if (op >= 14) {
            struct rec got[INBOX];
            struct inbox *b = &inbox[id];
            pthread_mutex_lock(&b->lock);
            unsigned m = b->n;
            for (unsigned i = 0; i < m; i++)
                got[i] = b->r[i];
            b->n = 0;
            pthread_mutex_unlock(&b->lock);
            for (unsigned i = 0; i < m; i++)
                check_and_free(&got[i]);
            remote += m;
        }
    }
    for (unsigned i = 0; i < n; i++)
        check_and_free(&live[i]);
    frees += n;
    __atomic_fetch_add(&n_alloc, allocs, __ATOMIC_RELAXED);
    __atomic_fetch_add(&n_free, frees, __ATOMIC_RELAXED);
    __atomic_fetch_add(&n_handed, handed, __ATOMIC_RELAXED);
    __atomic_fetch_add(&n_remote_free, remote, __ATOMIC_RELAXED);
    return NULL;
}

/* Drains every CPU's lists and returns free memory while others work. */
static void *reclaimer(void *arg)
{
    (void)arg;
    long k = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        struct timespec ts = { 0, 20 * 1000000 };
        nanosleep(&ts, NULL);
        if (k++ % 2)
            page_drain_pcp();
        else
            page_reclaim(0, true);
    }
    __atomic_store_n(&n_reclaims, k, __ATOMIC_RELAXED);
    return NULL;
}

int main(int argc, char **argv)
{
    long ms = argc > 1 ? atol(argv[1]) : 1500;
    if (ms <= 0)
        ms = 1500;
    confine_to_two_cpus();
    acct_no_purger();
    page_init();
    diag("%d threads on two CPUs for %ld ms, per-CPU arrays via %s, pcp=%ld", NTHREADS, ms,
         cpu_use_rseq ? "rseq" : "the lock fallback", sk_opt.pcp);
    for (int i = 0; i < NTHREADS; i++)
        pthread_mutex_init(&inbox[i].lock, NULL);

    pthread_t t[NTHREADS + 1];
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 512 * 1024);
    int made = 0;
    for (int i = 0; i < NTHREADS; i++)
        if (pthread_create(&t[made], &attr, worker, (void *)(uintptr_t)i) == 0)
            made++;
    int rec_ok = pthread_create(&t[made], &attr, reclaimer, NULL) == 0;
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < made + rec_ok; i++)
        pthread_join(t[i], NULL);
    pthread_attr_destroy(&attr);
    is(made, NTHREADS, "%d worker threads ran", NTHREADS);
    ok(rec_ok, "the reclaimer thread ran");

    /* Blocks still waiting in inboxes: their receivers have stopped. */
    for (int i = 0; i < NTHREADS; i++) {
        for (unsigned k = 0; k < inbox[i].n; k++)
            check_and_free(&inbox[i].r[k]);
        n_remote_free += inbox[i].n;
        inbox[i].n = 0;
    }
    diag("%ld allocs, %ld freed by their owner (%ld handed to another thread, %ld freed there), %ld drains/reclaims",
         n_alloc, n_free, n_handed, n_remote_free, n_reclaims);
    is(alloc_fail, 0, "no allocation failed");
    is(n_free + n_remote_free, n_alloc, "every block allocated was freed once");
    ok(n_alloc > 1000 && n_remote_free > 0, "work done: %ld blocks, %ld freed by another thread", n_alloc,
       n_remote_free);
    is(bad_state, 0, "every block aligned, handed out with a head descriptor of its order");
    is(bad_pattern, 0, "every page's owner pattern intact when freed (no overlap, no purge in use)");
    is(bad_zero, 0, "every block handed out as zeroed read zero");

    struct page_stats st;
    page_stats(&st);
    /* The drain a request makes before it takes fresh memory
     * (pcp.c, zone_drain_before_fresh) empties other CPUs' lists while
     * their threads push and pop: it must have run during the stress. */
    ok(!sk_opt.pcp || st.pcp_fresh_drains > 0,
       "allocations drained the per-CPU lists before taking fresh memory %lu times during the stress",
       st.pcp_fresh_drains);
    ok(!sk_opt.pcp || st.pcp_grows > 0, "per-CPU lists grew %lu times under the bursts", st.pcp_grows);
    ok(!page_grouping || (st.mt_fallbacks > 0 && st.mt_claims > 0),
       "requests of the three migratetypes fell back %lu times and claimed %lu pageblocks meanwhile",
       st.mt_fallbacks, st.mt_claims);
    unsigned long smaller = acct_all_freed(&st);
    ok(st.free_blocks[SK_MAX_ORDER] == st.managed_pages >> SK_MAX_ORDER && smaller == 0,
       "all freed: %lu slices coalesced into %lu blocks of order %d (%lu smaller blocks)",
       st.managed_pages >> SK_MAX_ORDER, st.free_blocks[SK_MAX_ORDER], SK_MAX_ORDER, smaller);
    return done_testing();
}
