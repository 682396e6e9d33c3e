/*
 * mutex_modes — each mutex mode runs its own mechanism, seen from outside:
 *
 *  1. The sleeper bookkeeping.  mutex_spin=mcs (3.13's mutex) registers a
 *     blocked thread under the wait lock (the count in `wait`, 3.13's
 *     wait_list); the default keeps only the SLEEPERS bit and leaves
 *     `wait` at 0.
 *  2. The woken waiter.  One thread blocks on a mutex held for 50 ms, so
 *     it stops spinning and sleeps; the unlock wakes it.  In the default
 *     (4.10's addition) it spins once more before anything else: two spin
 *     attempts.  With mutex_wake_spin=0 (3.15) and in mcs mode (3.13) it
 *     takes the free mutex without spinning: one.
 * The hand-off (none in mcs mode, none with mutex_handoff=0) is checked by
 * mutex_wakeup.  Each check fails if its switch is ignored.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "lock/mutex_internal.h"
#include "tap.h"

static sk_mutex_t m;
static int blocked_done;

static void *blocker(void *arg)
{
    (void)arg;
    sk_mutex_lock(&m);
    sk_mutex_unlock(&m);
    __atomic_store_n(&blocked_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static unsigned long spins(void)
{
    unsigned long st[MUTEX_STAT_NR];
    lock_mutex_stats(st);
    return st[MUTEX_SPIN_ACQUIRED] + st[MUTEX_SPIN_FAILED] + st[MUTEX_SPIN_SKIPPED];
}

/* Hold m while one thread blocks on it until it sleeps (SLEEPERS set),
 * then let go.  *wait_seen: the wait word while it slept; returns the
 * spin attempts the blocked thread made. */
static unsigned long block_one(uint32_t *wait_seen)
{
    sk_mutex_init(&m);
    sk_mutex_lock(&m);
    unsigned long before = spins();
    blocked_done = 0;
    pthread_t t;
    pthread_create(&t, NULL, blocker, NULL);
    for (int i = 0; i < 2000 && !(__atomic_load_n(&m.state, __ATOMIC_ACQUIRE) & MUTEX_SLEEPERS); i++)
        usleep(1000);
    usleep(50000);                    /* asleep in futex_wait by now */
    *wait_seen = __atomic_load_n(&m.wait, __ATOMIC_ACQUIRE);
    sk_mutex_unlock(&m);
    pthread_join(t, NULL);
    return spins() - before;
}

int main(void)
{
    os_options_init();
    lock_mutex_spin_limit(1);         /* one spinner, whatever the CPUs */
    plan(6);
    uint32_t wait;

    sk_opt.mutex_spin = MUTEX_SPIN_MCS;
    unsigned long n = block_one(&wait);
    is(wait >> 1, 1, "mutex_spin=mcs: the sleeper registered under the wait lock (3.13's wait_list)");
    is(n, 1, "mutex_spin=mcs: the woken waiter took the mutex without spinning again (3.13)");

    sk_opt.mutex_spin = MUTEX_SPIN_ON;
    n = block_one(&wait);
    is(wait, 0, "default: no wait lock, no registration (3.15's unlock without the wait_lock)");
    is(n, 2, "default: the woken waiter spun once more (4.10's addition)");

    sk_opt.mutex_wake_spin = 0;
    n = block_one(&wait);
    is(n, 1, "mutex_wake_spin=0: the woken waiter took the mutex without spinning (3.15)");
    sk_opt.mutex_wake_spin = 1;

    ok(blocked_done, "every blocked thread got through");
    return done_testing();
}
