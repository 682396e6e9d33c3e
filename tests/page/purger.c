/*
 * purger — idle memory goes back to the OS with no further allocator call
 * (src/page/purge.c), with decay_ms=200 set before the first allocation,
 * in a process with threads of its own (threaded.h; a single-threaded one
 * never gets the thread: tests/malloc/single_thread):
 *  - no purger thread while the heap is under 16 MiB; one appears
 *    (lazily, from a malloc slow path: never from free, see page.h) once
 *    64 x 1 MiB are allocated, and sleeps until they are freed;
 *  - then, while the program only sleeps, RSS falls back to where it was
 *    within 2 x decay_ms;
 *  - idle means idle: freeing and reallocating (and rewriting) a 32 MiB
 *    working set every 50 ms for 2 s purges none of it: RSS never drops
 *    and no page of it faults in again (minor faults), and its frees do
 *    not keep waking the purger (a system call each); after the loop
 *    stops, RSS falls back within 2 x decay_ms, and the purger goes to
 *    sleep (no more ticks);
 *  - threads churning small blocks (per-CPU lists) with pauses while the
 *    purger drains idle lists and purges: every page keeps its pattern
 *    (nothing in use is purged), and everything goes back afterwards;
 *  - fork: the child of a process whose purger runs has one thread, and
 *    keeps one when it frees memory (glibc leaves __libc_single_threaded
 *    false there: slabkit counts the child's threads itself), and its
 *    memory goes back at the free, trimmed;
 *  - background=0 (a re-execution of this test): no thread; the frees
 *    trim, so RSS falls all the same.
 * Under ThreadSanitizer (which keeps shadow memory resident and does not
 * follow fork with threads) the RSS checks read the zone's books instead
 * and the fork case is skipped.
 *
 * TSAN: yes
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cpus.h"        /* SK_TEST_DENY_MEMBARRIER=1: drains visit the CPUs */
#include "slab/kmalloc.h"
#include "statm.h"
#include "tap.h"
#include "threaded.h"

#define DECAY_MS 200
#define MiB ((size_t)1 << 20)
#define SLACK_MIB 6.0
#define NBIG 64
#define NCHURN 32

static char *big[NBIG];
static int bg_off;

static long now_ms(void)
{
    return (long)(os_now_ns() / 1000000);
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
}

static double mib(long bytes)
{
    return (double)bytes / (double)MiB;
}

/* What is resident and not in use, in MiB: RSS above `base`, or under
 * TSan the free pages the zones still hold resident. */
static double idle_mib(long base)
{
#ifdef SK_TSAN
    (void)base;
    struct page_stats st;
    page_stats(&st);
    return (double)((st.dirty_pages + st.pcp_pages) << SK_PAGE_SHIFT) / (double)MiB;
#else
    return mib(statm_bytes(STATM_RESIDENT) - base);
#endif
}

/* Sleep (no allocator call) until idle_mib(base) <= SLACK_MIB, at most
 * `limit` ms: the ms it took, or -1. */
static long wait_fall(long base, long limit)
{
    long t0 = now_ms();
    for (;;) {
        long t = now_ms() - t0;
        if (idle_mib(base) <= SLACK_MIB)
            return t;
        if (t > limit)
            return -1;
        sleep_ms(10);
    }
}

static void alloc_touch(char **v, int n, int tag)
{
    for (int i = 0; i < n; i++) {
        v[i] = sk_malloc(MiB);
        if (!v[i])
            BAIL("sk_malloc(1 MiB) failed");
        for (size_t off = 0; off < MiB; off += SK_PAGE_SIZE)
            v[i][off] = (char)(tag + i);
    }
}

static void free_all(char **v, int n)
{
    for (int i = 0; i < n; i++)
        sk_free(v[i]);
}

static unsigned long purged_pages(void)
{
    struct page_stats st;
    page_stats(&st);
    return st.purged_pages;
}

static struct page_stats stats(void)
{
    struct page_stats st;
    page_stats(&st);
    return st;
}

static long minflt(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* ---- threads churning small blocks against the purger ---- */

#define NTHR 4
#define PER 48

static void *small_churn(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    uint64_t s = 0x9e3779b97f4a7c15ull * (id + 1);
    struct { char *p; unsigned order; } b[PER];
    long t_end = now_ms() + 800, bad = 0;
    for (int round = 0; now_ms() < t_end; round++) {
        for (int i = 0; i < PER; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            b[i].order = (unsigned)(s % 4);
            b[i].p = sk_alloc_pages(b[i].order);
            if (!b[i].p)
                return (void *)-1;
            for (size_t off = 0; off < (SK_PAGE_SIZE << b[i].order); off += SK_PAGE_SIZE)
                *(uint64_t *)(b[i].p + off) = (id << 56) ^ ((uint64_t)round << 20) ^ off;
        }
        /* Pause longer than a purger tick now and then: idle lists. */
        sleep_ms((long)(s % 3) * 40);
        for (int i = 0; i < PER; i++) {
            for (size_t off = 0; off < (SK_PAGE_SIZE << b[i].order); off += SK_PAGE_SIZE)
                bad += *(uint64_t *)(b[i].p + off) != ((id << 56) ^ ((uint64_t)round << 20) ^ off);
            sk_free_pages(b[i].p, b[i].order);
        }
    }
    return (void *)bad;
}

/* ---- fork ---- */

#ifndef SK_TSAN
static long child_base;

/* Exit status bits: 1 a purger thread already there, 2 one after the
 * free (the child has one thread of its own), 4 RSS did not fall. */
static int child(void)
{
    alarm(20);
    int r = 0;
    if (proc_threads() != 1)
        r |= 1;
    char *v[NBIG];
    child_base = statm_bytes(STATM_RESIDENT);
    alloc_touch(v, NBIG, 7);
    free_all(v, NBIG);
    void *(*volatile use_malloc)(size_t) = malloc;   /* slow paths after the frees */
    for (int i = 0; i < 64; i++)
        free(use_malloc(64 << 10));
    if (proc_threads() != 1)
        r |= 2;
    if (wait_fall(child_base, 2 * DECAY_MS + 200) < 0)
        r |= 4;
    return r;
}
#endif

/* ---- background=0, in a re-execution ---- */

static void background_off(void)
{
    long t0 = proc_threads();
    long base = statm_bytes(STATM_RESIDENT);
    alloc_touch(big, NBIG, 3);
    free_all(big, NBIG);
    is(proc_threads(), t0, "background=0: no purger thread after the frees");
    sleep_ms(3 * DECAY_MS);
    double left = idle_mib(base);
    ok(left <= SLACK_MIB, "background=0: the frees trimmed, idle RSS back within %.0f MiB (%.1f MiB)", SLACK_MIB, left);
}

int main(int argc, char **argv)
{
    become_threaded();    /* the purger's conditions (threaded.h) */
    bail_out_after(60, "purger test hung");
    if (argc > 3 && !strcmp(argv[1], "--background-off")) {
        tap_n = atoi(argv[2]);
        tap_failed = atoi(argv[3]);
        bg_off = 1;
    } else {
        /* Not setenv: it allocates, and the first allocation reads the
         * options.  The re-execution gets them in its environment. */
        os_options_init();
        os_options_parse("decay_ms=200");
    }
    /* malloc itself, so that this program has slabkit's (and its fork
     * handler) and not only the sk_* calls. */
    void *(*volatile use_malloc)(size_t) = malloc;   /* volatile: not optimised away */
    free(use_malloc(16));
    slab_init();
    if (statm_bytes(STATM_RESIDENT) <= 0)
        skip_all("no /proc/self/statm");
    if (sk_option("decay_ms") != DECAY_MS)
        BAIL("decay_ms is %ld, not %d", sk_option("decay_ms"), DECAY_MS);
    if (bg_off) {
        background_off();
        return done_testing();
    }

    /* ---- lazily started, idle memory goes back ---- */
    long t0 = proc_threads();
    long base = statm_bytes(STATM_RESIDENT);
    alloc_touch(big, 8, 1);
    is(proc_threads(), t0, "8 x 1 MiB allocated and written (heap under 16 MiB): no purger thread yet (%ld tasks)", t0);
    alloc_touch(big + 8, NBIG - 8, 1);
#ifdef SK_TSAN
    /* TSan starts a thread of its own with the first pthread_create. */
    ok(proc_threads() > t0, "64 x 1 MiB: a purger thread, started from malloc (%ld tasks)", proc_threads());
#else
    is(proc_threads(), t0 + 1, "64 x 1 MiB (heap past 16 MiB): one purger thread, started from malloc");
#endif
    double peak = mib(statm_bytes(STATM_RESIDENT) - base);
    free_all(big, NBIG);
    long fell = wait_fall(base, 2 * DECAY_MS);
    diag("peak +%.1f MiB; idle: back within %ld ms (decay_ms %d)", peak, fell, DECAY_MS);
    ok(fell >= 0, "sleeping, never calling the allocator: resident memory back within 2 x decay_ms (%.1f MiB left)",
       idle_mib(base));

    /* ---- idle means idle: a churning working set stays ---- */
    char *ws[NCHURN];
    alloc_touch(ws, NCHURN, 5);
    sleep_ms(DECAY_MS + 100);          /* let anything left from before age out */
    unsigned long p0 = purged_pages(), w0 = stats().purger_wakeups;
    long f0 = minflt(), r0 = statm_bytes(STATM_RESIDENT), rmin = r0;
    long t_end = now_ms() + 2000;
    int rounds = 0;
    while (now_ms() < t_end) {
        free_all(ws, NCHURN);
        alloc_touch(ws, NCHURN, 5 + rounds);
        long r = statm_bytes(STATM_RESIDENT);
        if (r < rmin)
            rmin = r;
        rounds++;
        sleep_ms(50);
    }
    unsigned long purged = purged_pages() - p0, wakeups = stats().purger_wakeups - w0;
    long faults = minflt() - f0;
    diag("churn: %d rounds, %lu pages purged, %ld minor faults, %lu purger wake-ups, RSS min %+.1f MiB", rounds,
         purged, faults, wakeups, mib(rmin - r0));
    ok(purged <= NCHURN * MiB / SK_PAGE_SIZE / 32,
       "a 32 MiB working set freed and reused every 50 ms for 2 s: (almost) nothing purged (%lu pages)", purged);
#ifndef SK_TSAN
    ok(faults < (long)(NCHURN * MiB / SK_PAGE_SIZE / 16), "... and none of it faulted in again (%ld minor faults)",
       faults);
    ok(mib(r0 - rmin) < 2.0, "... and RSS never dropped (lowest %+.1f MiB)", mib(rmin - r0));
#endif
    ok(wakeups <= 1, "... and its frees woke the purger at most once: no system call in steady state (%lu)", wakeups);
    free_all(ws, NCHURN);
    fell = wait_fall(base, 2 * DECAY_MS);
    diag("after the churn: back within %ld ms", fell);
    ok(fell >= 0, "the loop stopped: its memory back within 2 x decay_ms (%.1f MiB left)", idle_mib(base));
    /* Everything back: within a few ticks the purger sleeps, no timeout. */
    sleep_ms(DECAY_MS);
    unsigned long ticks = stats().purger_ticks;
    sleep_ms(DECAY_MS);
    is(stats().purger_ticks - ticks, 0, "nothing left to purge: the purger sleeps (no tick in decay_ms)");

    /* ---- small blocks on per-CPU lists, threads against the purger ---- */
    struct page_stats st0, st1;
    page_stats(&st0);
    pthread_t th[NTHR];
    for (uintptr_t i = 0; i < NTHR; i++)
        pthread_create(&th[i], NULL, small_churn, (void *)i);
    long bad = 0;
    for (int i = 0; i < NTHR; i++) {
        void *r;
        pthread_join(th[i], &r);
        bad += (long)r;
    }
    page_stats(&st1);
    is(bad, 0, "4 threads churning orders 0..3 with pauses: every page kept its pattern");
    diag("purger: %lu ticks, %lu blocks drained from idle per-CPU lists, %lu pages purged so far",
         st1.purger_ticks - st0.purger_ticks, st1.purger_drained, st1.purger_pages);
    fell = wait_fall(base, 2 * DECAY_MS + 100);
    ok(fell >= 0, "their memory, per-CPU lists too, back within 2 x decay_ms (+100 ms: the idle tick) (%ld ms, %.1f MiB left)",
       fell, idle_mib(base));

    /* ---- fork ---- */
#ifdef SK_TSAN
    diag("fork case skipped under ThreadSanitizer");
#else
    int status = tap_fork_wait(child);
    ok(WIFEXITED(status) && !(WEXITSTATUS(status) & 1), "fork: the child has no purger thread");
    ok(WIFEXITED(status) && !(WEXITSTATUS(status) & 2), "fork: the child, one thread, frees and mallocs and starts none");
    ok(WIFEXITED(status) && !(WEXITSTATUS(status) & 4), "fork: the child's idle memory goes back within 2 x decay_ms");
    if (!WIFEXITED(status) || WEXITSTATUS(status) > 7)
        diag("child wait status %#x", status);
#endif

    /* ---- background=0 ---- */
    char n[16], failed[16];
    snprintf(n, sizeof n, "%d", tap_n);
    snprintf(failed, sizeof failed, "%d", tap_failed);
    fflush(stdout);
    setenv("SLABKIT_OPTIONS", "decay_ms=200,background=0", 1);
    execl("/proc/self/exe", argv[0], "--background-off", n, failed, (char *)NULL);
    printf("Bail out! exec /proc/self/exe failed\n");
    return 255;
}
