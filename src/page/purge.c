/*
 * purge.c — the purger: a background thread that gives idle free memory
 * back to the OS, as the kernel's periodic vmstat worker drains per-CPU
 * page lists and kswapd ages memory.  Without it memory went back only
 * from the slow paths (zone_maybe_reclaim), so a program that went idle
 * kept its peak for ever.
 *
 * Policy, one tick every decay_ms/4 while there is work:
 *  - per-CPU page lists untouched for a whole tick are drained into their
 *    zone (pcp_drain_idle), so their blocks can age like any other;
 *  - in each zone, dirty blocks free for decay_ms or more are purged
 *    (zone_purge: the zone_reclaim_batch machinery, MADV_DONTNEED with the
 *    lock dropped).  Blocks a busy program keeps reusing are never old, so
 *    they stay: only memory that stayed free for decay_ms goes.
 * Memory freed at t is gone by about t + decay_ms + one tick, a per-CPU
 * list's by t + decay_ms + three ticks: within 2 x decay_ms.
 *
 * Sleeping: when a tick finds nothing that will ever age (no zone dirtied
 * within decay_ms, no per-CPU list holding blocks), the thread stores
 * work = 0, re-checks each zone's dirty_seq under its lock, and waits on
 * the futex `work` with no timeout.  A free that gives a zone dirty blocks
 * reads `work` under the same zone lock (zone_release_dirtied): either the
 * purger's re-check sees that free's dirty_seq, or the free sees work == 0
 * and wakes it.  So only the nothing -> something transition costs a
 * system call.  Blocks freed onto a per-CPU list while the purger sleeps
 * wake nothing (bounded by the lists' high watermarks); the purger drains
 * the lists before it goes to sleep.
 *
 * Starting: page_purger_poll() (page.h), from malloc slow paths that hold
 * no slabkit lock (never from free: see page.h), starts the thread the
 * first time work is wanted or the heap reaches PURGER_EAGER_PAGES, and
 * only in a process with threads of its own (os_threaded): one thread of
 * ours in a single-threaded program would make glibc's fork take its
 * lock (a fork from a signal handler then deadlocks), and such a program
 * trims at free instead (reclaim.c, zone_keep_pages).  state
 * goes NONE -> STARTING by CAS, so a malloc inside pthread_create (its TLS
 * vector) or on another thread meanwhile starts nothing; then RUNNING, or
 * OFF when pthread_create fails (the slow-path reclaim still works).
 * background=0 sets OFF and work = 1 for good: the free path's test then
 * never calls purge_kick.
 *
 * Never blocking a malloc: the purger takes a zone lock only with a
 * try-lock (a busy zone waits for the next tick), never holds one across a
 * system call, and allocates nothing.  After purging a batch it must put
 * the blocks back (zone_reclaim_batch re-takes the lock), and blocks it
 * drained off a per-CPU list go to the zone with lock_acquire: the process
 * is idle then, and those blocks have nowhere else to go.
 *
 * The last thread: when the program's leader has called pthread_exit
 * (os_leader_gone; its exit wakes the purger), the purger checks, at each
 * tick and in steps while idle, whether only slabkit's own threads are
 * left, and then ends the process with exit(0), as glibc's last thread
 * would: counted as a thread and blocking every signal, it would keep the
 * process alive, unkillable by SIGTERM.
 *
 * fork: the child has no purger thread.  page_atfork_child puts blocks
 * caught mid-purge back on the lists and calls purge_atfork_child, which
 * makes state NONE and work 0: the child starts its own thread, lazily,
 * when it frees memory itself.
 *
 * Idle caches: each tick first runs the slab layer's idle pass
 * (page_set_idle_pass: the idle-cache reaper), which shrinks caches whose
 * per-CPU arrays did not move since its last pass, as SLAB's cache_reap
 * did; the pages they give back then age here like any other.  While a
 * used cache has not been shrunk since it last moved the purger keeps
 * ticking, so a program that stops allocating gets it all back.
 *
 * Lock order: zone->lock (try-lock only, or to return drained or purged
 * blocks), then a per-CPU array's spinlock inside cpu_drain_remote is never
 * nested with it.  The idle pass runs with neither held and takes the
 * slab layer's locks (cache_lock with a try-lock) in their own order;
 * shrinking only caches nobody used for a tick, it rarely waits.
 */
#include <errno.h>
#include <string.h>

#include "page/page_internal.h"

struct page_purger page_purger;

/* A helper thread's stack: the purger's deepest frame is the drain's
 * batch of 32 pointers; 64 KiB costs little address space. */
#define PURGER_STACK (64 << 10)
#define PURGER_TICK_MIN_MS 10

/* Per-CPU list operation counts seen at the last tick (purger only). */
static uint32_t pcp_seen[PCP_NR_LISTS * (CPU_MAX_IDS + 1)] SK_BIG_BSS;   /* + the shared slot */

/* The leader's pthread_exit (os.c): wake the purger, which then watches
 * for the program's last thread. */
static void purge_leader_gone(void)
{
    os_futex_wake(&page_purger.work, 1);
}

void purge_init(void)
{
    os_leader_hook(purge_leader_gone);
    if (!sk_opt.background) {
        __atomic_store_n(&page_purger.work, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&page_purger.state, PURGER_OFF, __ATOMIC_RELEASE);
    }
}

void purge_kick(void)
{
    if (__atomic_exchange_n(&page_purger.work, 1, __ATOMIC_SEQ_CST) != 0)
        return;     /* another free got there first */
    __atomic_fetch_add(&page_purger.wakeups, 1, __ATOMIC_RELAXED);
    uint32_t st = __atomic_load_n(&page_purger.state, __ATOMIC_SEQ_CST);
    /* STARTING too: the new thread may already wait on `work`.  NONE: the
     * next page_purger_poll starts it. */
    if (st == PURGER_STARTING || st == PURGER_RUNNING)
        os_futex_wake(&page_purger.work, 1);
}

static uint64_t tick_ms(void)
{
    uint64_t t = (uint64_t)sk_opt.decay_ms / 4;
    return t < PURGER_TICK_MIN_MS ? PURGER_TICK_MIN_MS : t;
}

static bool (*idle_pass)(void);

void page_set_idle_pass(bool (*fn)(void))
{
    __atomic_store_n(&idle_pass, fn, __ATOMIC_RELEASE);
}

/* One tick; *seq gets each zone's dirty_seq.  Returns whether there may
 * be more work without another free. */
static bool purge_tick(unsigned long seq[PAGE_NR_ZONES])
{
    unsigned long drained = 0;
    /* First the upper layer's idle pass: what it gives back reaches the
     * per-CPU lists and zones below, to age with the rest. */
    bool (*pass)(void) = __atomic_load_n(&idle_pass, __ATOMIC_ACQUIRE);
    bool more = pass && pass();
    more |= pcp_drain_idle(pcp_seen, &drained);
    uint64_t now = os_now_ms_coarse();
    for (int n = 0; n < PAGE_NR_ZONES; n++)
        if (zone_purge(&page_zones[n], now, (uint64_t)sk_opt.decay_ms, &seq[n]))
            more = true;
    __atomic_fetch_add(&page_purger.ticks, 1, __ATOMIC_RELAXED);
    if (drained)
        __atomic_fetch_add(&page_purger.drained, drained, __ATOMIC_RELAXED);
    return more;
}

/* Nothing left that will age: go to sleep unless a free came in since
 * the tick (see the protocol above).  Returns whether work is still 0. */
static bool purge_try_sleep(const unsigned long seq[PAGE_NR_ZONES])
{
    __atomic_store_n(&page_purger.work, 0, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&page_budget.kswapd_wanted, __ATOMIC_SEQ_CST)) {
        __atomic_store_n(&page_purger.work, 1, __ATOMIC_RELAXED);   /* a wake-up that found work 1 */
        return false;
    }
    for (int n = 0; n < PAGE_NR_ZONES; n++)
        if (zone_dirtied_since(&page_zones[n], seq[n])) {
            __atomic_store_n(&page_purger.work, 1, __ATOMIC_RELAXED);
            return false;
        }
    return true;
}

/* Sleep until there is work: on the futex with no timeout, or, once the
 * leader has called pthread_exit, in steps (10 ms doubling to a second),
 * each of which ends the process if only slabkit's threads are left. */
static void purger_wait_work(void)
{
    uint64_t ms = 10;
    while (__atomic_load_n(&page_purger.work, __ATOMIC_ACQUIRE) == 0) {
        if (!os_leader_gone()) {
            os_futex_wait(&page_purger.work, 0, -1);
            continue;
        }
        os_exit_if_orphaned();
        os_futex_wait(&page_purger.work, 0, (int64_t)ms * 1000000);
        if (ms < 1000)
            ms *= 2;
    }
}

static void *purger_main(void *arg)
{
    (void)arg;
    unsigned long seq[PAGE_NR_ZONES] = { 0 };
    for (;;) {
        purger_wait_work();
        os_exit_if_orphaned();
        budget_background();      /* kswapd's turn first: no sleep before it */
        os_sleep_ms(tick_ms());
        if (!purge_tick(seq))
            purge_try_sleep(seq);
    }
    return NULL;
}

bool page_purger_wanted(void)
{
    if (__atomic_load_n(&page_purger.work, __ATOMIC_RELAXED))
        return true;
    /* Pages in use (racy reads: a hint is enough). */
    unsigned long used = 0;
    for (int n = 0; n < PAGE_NR_ZONES; n++)
        used += __atomic_load_n(&page_zones[n].managed_pages, __ATOMIC_RELAXED) -
                __atomic_load_n(&page_zones[n].free_pages, __ATOMIC_RELAXED);
    return (long)used >= (long)PURGER_EAGER_PAGES;
}

void page_purger_poll_slow(void)
{
    os_threaded_recheck();
    if (os_threaded() && page_purger_wanted())
        page_purger_start();
}

void page_purger_start(void)
{
    os_options_init();
    if (!sk_opt.background)
        return;
    uint32_t expect = PURGER_NONE;
    if (!__atomic_compare_exchange_n(&page_purger.state, &expect, PURGER_STARTING, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED))
        return;
    if (os_thread_start(purger_main, NULL, "slabkit-purge", PURGER_STACK) != 0) {
        if (sk_opt.verbose)
            os_warn("cannot start the purger thread: %s: idle memory returns only from slow paths", strerror(errno));
        __atomic_store_n(&page_purger.state, PURGER_OFF, __ATOMIC_RELEASE);
        return;
    }
    __atomic_store_n(&page_purger.state, PURGER_RUNNING, __ATOMIC_RELEASE);
}

void purge_atfork_child(void)
{
    if (__atomic_load_n(&page_purger.state, __ATOMIC_RELAXED) == PURGER_OFF && !sk_opt.background)
        return;     /* background=0: stays off */
    /* The parent's thread does not exist here, and a start that failed in
     * the parent may work here.  The child starts its own when it frees
     * memory itself: a child that only execs never pays for a thread.
     * What it inherited ages out once its purger runs. */
    /* Only the purger writes pcp_seen, and only its first PCP_NR_LISTS
     * x cpu_nr_slots() entries (pcp_drain_idle): if the parent never
     * had one, its 16 KiB are untouched (a read would fault them in), else
     * only set entries are cleared (a write copies the page). */
    bool had = __atomic_load_n(&page_purger.state, __ATOMIC_RELAXED) != PURGER_NONE;
    __atomic_store_n(&page_purger.work, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&page_purger.state, PURGER_NONE, __ATOMIC_RELAXED);
    __atomic_store_n(&page_budget.kswapd_wanted, 0, __ATOMIC_RELAXED);
    size_t used = (size_t)PCP_NR_LISTS * (size_t)cpu_nr_slots();
    for (size_t i = 0; had && i < used && i < sizeof pcp_seen / sizeof pcp_seen[0]; i++)
        SK_CHILD_CLEAR(pcp_seen[i]);
}
