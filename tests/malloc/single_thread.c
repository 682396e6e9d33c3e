/*
 * single_thread — a program with one thread keeps one (issue: a drop-in
 * malloc must not change how many threads a program has), and still gets
 * its memory back (src/page/reclaim.c, "Returning memory without a thread"):
 *  - 64 x 1 MiB and 200,000 small objects allocated, written, freed, then
 *    more mallocs and a sleep of 3 x decay_ms: still one thread, and the
 *    resident set is back within a few MiB of its start, with no thread
 *    and no further allocator call;
 *  - a working set of 32 x 1 MiB freed and allocated again, 16 rounds: the
 *    trim threshold rises to it (zone_trim_grow), so the last 8 rounds
 *    purge nothing and fault nothing in;
 *  - unshare(CLONE_NEWUSER), which the kernel refuses to a process with
 *    threads (EINVAL), works after the frees (skipped where the kernel
 *    forbids user namespaces to this user);
 *  - fork() from a SIGUSR1 handler that interrupts fork() or malloc, in a
 *    loop, signals sent by another process every millisecond (after glibc's
 *    tst-mallocfork2): with one thread glibc's fork takes no lock, so none
 *    of 1000 forks hangs (with the purger thread, one did within a few).  (With a second thread, glibc's own atfork lock
 *    would deadlock it, under any malloc: this is why slabkit starts none.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "slabkit.h"
#include "page/page.h"
#include "statm.h"
#include "tap.h"

#define DECAY_MS 200
#define NBIG 64

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static double mib(long bytes)
{
    return bytes / 1048576.0;
}

static long minflt(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

static char *big[NBIG];
static void *small[200000];

static void alloc_touch(int n, size_t size)
{
    for (int i = 0; i < n; i++) {
        if (!(big[i] = malloc(size)))
            BAIL("malloc(%zu)", size);
        memset(big[i], i + 1, size);
    }
}

static void free_big(int n)
{
    for (int i = 0; i < n; i++)
        free(big[i]);
}

/* ---- fork from a signal handler ---- */

static volatile sig_atomic_t handler_forks, handler_failed;

static void on_usr1(int sig)
{
    (void)sig;
    int saved = errno;
    pid_t p = fork();
    if (p == 0)
        _exit(0);
    if (p < 0) {
        handler_failed = 1;
    } else {
        while (waitpid(p, NULL, 0) < 0 && errno == EINTR) {
        }
        handler_forks++;
    }
    errno = saved;
}

/* The sender: SIGUSR1 to the parent every millisecond, until killed: a
 * few times a fork's length, so that many forks are interrupted and the
 * handler's own forks leave the loop room to go on. */
static void sender(pid_t target)
{
    for (;;) {
        if (kill(target, SIGUSR1) != 0)
            _exit(0);
        usleep(1000);
    }
}

static int fork_in_handler(void)
{
    alarm(60);         /* a hang fails the test (tap_fork_wait sees SIGALRM) */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGUSR1, &sa, NULL) != 0)
        return 3;
    /* Enough heap that the purger would have started, before. */
    alloc_touch(NBIG / 2, 1 << 20);
    free_big(NBIG / 2);
    pid_t me = getpid(), s = fork();
    if (s < 0)
        return 3;
    if (s == 0) {
        sender(me);
        _exit(0);
    }
    int forks = 0, bad = 0;
    while (forks < 1000 && !handler_failed) {
        void *p = malloc(100 + (size_t)(forks % 50) * 1000);
        pid_t c = fork();
        if (c == 0)
            _exit(0);
        if (c < 0) {
            if (errno == EAGAIN)
                continue;
            bad = 1;
            break;
        }
        while (waitpid(c, NULL, 0) < 0 && errno == EINTR) {
        }
        free(p);
        forks++;
    }
    kill(s, SIGKILL);
    waitpid(s, NULL, 0);
    printf("# %d forks in the loop, %d from the handler, %ld threads\n", forks, (int)handler_forks, proc_threads());
    fflush(stdout);
    if (bad || handler_failed)
        return 2;
    return proc_threads() == 1 ? 0 : 4;
}

static int unshare_user(void)
{
    alloc_touch(NBIG, 1 << 20);
    free_big(NBIG);
    for (int i = 0; i < 1000; i++)
        free(malloc(20000));
    if (unshare(CLONE_NEWUSER) == 0)
        return 0;
    if (errno == EINVAL)
        return 1;      /* refused to a threaded process */
    return 77;         /* EPERM, ENOSPC, EUSERS: this kernel or user may not */
}

int main(void)
{
    bail_out_after(120, "single_thread test hung");
    /* Not setenv: the first allocation reads the options. */
    os_options_init();
    os_options_parse("decay_ms=200");
    void *(*volatile use_malloc)(size_t) = malloc;   /* slabkit's malloc, not only sk_* */
    free(use_malloc(16));
    if (statm_bytes(STATM_RESIDENT) <= 0 || proc_threads() < 0)
        skip_all("no /proc/self/statm or status");
    plan(9);

    /* ---- one thread, memory back ---- */
    memset(small, 0, sizeof small);    /* the test's own 1.6 MB array, resident before the start */
    long base = statm_bytes(STATM_RESIDENT);
    alloc_touch(NBIG, 1 << 20);
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        if (!(small[i] = malloc(16 + (i % 40) * 8)))
            BAIL("malloc");
        memset(small[i], 1, 16);
    }
    double peak = mib(statm_bytes(STATM_RESIDENT) - base);
    free_big(NBIG);
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
        free(small[i]);
    for (int i = 0; i < 100; i++)
        free(malloc(4096 + (size_t)i * 512));
    is(proc_threads(), 1, "64 MiB of large blocks and 200,000 small objects freed, more mallocs: one thread");
    double at_free = mib(statm_bytes(STATM_RESIDENT) - base);
    sleep_ms(3 * DECAY_MS);
    is(proc_threads(), 1, "after 3 x decay_ms asleep: still one thread");
    double idle = mib(statm_bytes(STATM_RESIDENT) - base);
    diag("peak +%.1f MiB, after the frees +%.1f MiB, idle +%.1f MiB", peak, at_free, idle);
    struct page_stats st;
    page_stats(&st);
    diag("pages: %lu managed, %lu free, %lu of them resident, %lu on per-CPU lists, %lu purged", st.managed_pages,
         st.free_pages, st.dirty_pages, st.pcp_pages, st.purged_pages);
    for (int n = 0; n < 2; n++)
        diag("zone %d: %lu managed, %lu resident free, keeps %lu", n, page_zones[n].managed_pages,
             page_zones[n].dirty_pages, page_zones[n].trim_pages);
    ok(idle <= 6.0, "no thread, and the resident set is back within 6 MiB of its start (+%.1f of a +%.1f MiB peak)",
       idle, peak);
    is(st.purger_ticks, 0, "the purger never ran (%lu ticks)", st.purger_ticks);

    /* ---- a working set reused: the trim threshold follows it ---- */
    long purged_mid = 0, faults_mid = 0, rss_low = -1;
    for (int round = 0; round < 16; round++) {
        if (round == 8) {
            page_stats(&st);
            purged_mid = (long)st.purged_pages;
            faults_mid = minflt();
        }
        alloc_touch(32, 1 << 20);
        free_big(32);
        long r = statm_bytes(STATM_RESIDENT);
        if (round >= 8 && (rss_low < 0 || r < rss_low))
            rss_low = r;
    }
    page_stats(&st);
    long purged = (long)st.purged_pages - purged_mid, faults = minflt() - faults_mid;
    ok(purged < 256 && faults < 2048,
       "32 x 1 MiB freed and allocated again, 16 rounds: the last 8 purge %ld pages and fault %ld in", purged, faults);
    is(proc_threads(), 1, "... with one thread");

    /* ---- unshare ---- */
    int status = tap_fork_wait(unshare_user);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
        skip("unshare(CLONE_NEWUSER) not allowed here (not a thread question)");
    else
        ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "unshare(CLONE_NEWUSER) after 64 MiB freed works (status %#x; 1: EINVAL, a threaded process)", status);

    /* ---- fork from a signal handler ---- */
    status = tap_fork_wait(fork_in_handler);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "1000 forks, SIGUSR1's handler forking too, interrupting them: none hangs (status %#x)", status);
    is(proc_threads(), 1, "the test itself still has one thread");
    return done_testing();
}
