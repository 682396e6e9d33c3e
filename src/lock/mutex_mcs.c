/*
 * mutex_mcs.c — sk_mutex with SLABKIT_OPTIONS=mutex_spin=mcs: waiting for
 * the mutex as kernel mutexes did before the Feb 2014 locking/core series
 * (3.13's kernel/mutex.c), the "before" of seed 004.  mutex.c is the
 * "after" and the default; the fast paths, and so trylock, are the same.
 *
 * What differs from the default (docs/mutex.md, "the mcs mode"): three
 * things the series removed, restored, and one later addition left out.
 *   1. A spin queue that a spinner cannot leave.  A plain MCS lock (3.13's
 *      mspin_lock): once queued, a spinner waits until it is the head,
 *      however long, even behind a preempted predecessor.  The series made
 *      the queue cancellable (the OSQ unqueue, mutex.c's osq_lock).  The
 *      node lives on the spinner's stack: with no unqueue, nothing points
 *      at it once mcs_unlock has returned.
 *   2. One queue pass per owner.  As head, a spinner polls the mutex while
 *      the current owner seems to run, tries it when it reads free, then
 *      leaves the queue and queues again for the next owner (3.13 took the
 *      MCS lock inside its spin loop; the series' "Modify the way
 *      optimistic spinners are queued" queues a spinner once).
 *   3. An unlock under the wait lock.  `wait` holds a spinlock (bit 0) and
 *      the sleeper bookkeeping it protects: the number of threads
 *      registered in the sleep path (wait >> 1), as 3.13's wait_lock
 *      protected its wait_list.  A sleeper registers, checks the state and
 *      sets SLEEPERS under it, and the last one to leave clears SLEEPERS;
 *      an unlock that finds SLEEPERS or HANDOFF takes the wait lock,
 *      releases (or hands off) the mutex and wakes one sleeper while
 *      holding it.  The series' "Unlock the mutex without the wait_lock"
 *      moved the release out; mutex.c's unlock takes no lock at all.
 *   4. A woken waiter does not spin before sleeping again, as in 3.13: it
 *      retries the mutex under the wait lock.  The default's spin of a
 *      woken waiter came to the kernel in 2016, after the series took the
 *      wait lock out of the unlock; here a woken spinner that got the
 *      mutex would then queue for the wait lock while owning it, to leave
 *      the sleepers (far from the seed's "before": docs/mutex.md).
 * Nothing else: none of the default's later additions (no hand-off, no
 * cap of CPUs - 1 spinners, no MUTEX_SPIN_MAX_NS bound, no spin after a
 * wake-up; 3.13 had none of them).  Shared with the default
 * (mutex_impl.h): the head's stand-ins for owner->on_cpu, which a process
 * cannot read: the owner last ran on our CPU, or one owner has held the
 * mutex past MUTEX_SPIN_OWNER_NS (mutex_spin_on_owner).
 *
 * Invariants: registered = wait >> 1 counts the threads between the
 * registration in mutex_mcs_lock_slow and their leaving it; it changes only
 * under the wait lock.  While registered > 0, state has SLEEPERS set or a
 * registered thread is running (woken, or not yet asleep) and will set it
 * or take the mutex: a registered thread takes a free mutex with SLEEPERS
 * exactly when others remain registered, and an unlock wakes one whenever
 * any is registered.
 *
 * Lock order: the wait lock is a leaf.  It is taken with or without the
 * mutex held, never while queued to spin or asleep; nothing is taken and
 * no one sleeps under it (futex_wake does not block).  Nothing allocates.
 */
#define _GNU_SOURCE
#include "lock/mutex_impl.h"

/* ---- the wait lock and the count it protects ------------------------------- */

#define WAIT_LOCKED 1u   /* bit 0 of sk_mutex.wait; the count is above it */

/* Take the wait lock; returns the number of registered sleepers.  Spins,
 * then yields, like spinlock_t: its holder may be preempted. */
static uint32_t wait_lock(sk_mutex_t *m)
{
    unsigned spins = 0;
    for (;;) {
        uint32_t w = LD(&m->wait);
        if (!(w & WAIT_LOCKED)) {
            if (CAS(&m->wait, &w, w | WAIT_LOCKED))
                return w >> 1;
            continue;
        }
        if (++spins < 128) {
            cpu_relax();
        } else {
            os_yield();
            spins = 0;
        }
    }
}

/* Drop the wait lock, storing the new count. */
static void wait_unlock(sk_mutex_t *m, uint32_t registered)
{
    ST_REL(&m->wait, registered << 1);
}

/* ---- the spin queue: an MCS lock without unqueue ---------------------------- */

struct mcs_node {
    struct mcs_node *next;   /* successor, written by it when it links in */
    uint32_t locked;         /* 1: we are the head (set by the previous head) */
} __attribute__((aligned(CACHE_LINE)));

static void mcs_lock(void **tail, struct mcs_node *node)
{
    ST(&node->next, NULL);
    ST(&node->locked, 0);
    struct mcs_node *prev = __atomic_exchange_n(tail, (void *)node, __ATOMIC_ACQ_REL);
    if (!prev)
        return;
    ST_REL(&prev->next, node);
    while (!LD_ACQ(&node->locked))
        cpu_relax();
}

static void mcs_unlock(void **tail, struct mcs_node *node)
{
    struct mcs_node *next = LD_ACQ(&node->next);
    if (!next) {
        void *expect = node;
        if (CAS(tail, &expect, NULL))
            return;
        while (!(next = LD_ACQ(&node->next)))   /* a successor is linking in */
            cpu_relax();
    }
    ST_REL(&next->locked, 1);
}

/* Try to take the mutex by spinning (3.13's loop in __mutex_lock_common):
 * queue, spin as head while the owner seems to run, try the lock, leave
 * the queue; again for each new owner.  No time bound: 3.13 stopped on
 * need_resched(), which a process cannot read (the scheduler preempts a
 * spinner at the same moment instead); the owner's window
 * (MUTEX_SPIN_OWNER_NS, mutex_spin_on_owner) stands for owner->on_cpu. */
static bool mcs_spin(sk_mutex_t *m, uint32_t lockval)
{
    /* mutex_may_spin alone: no cap on spinners (3.13 had none; the MCS
     * queue is what keeps them off the lock word). */
    if (!mutex_may_spin(m))
        return false;
    struct mcs_node node;
    uint32_t last = LD(&m->owner);
    enum mutex_owner_spin r;
    do {
        mcs_lock(&m->osq, &node);
        r = mutex_spin_on_owner(m, lockval, &last, 0, UINT64_MAX);
        mcs_unlock(&m->osq, &node);
    } while (r == MUTEX_SPIN_NEW_OWNER);
    mutex_stat_inc(r == MUTEX_SPIN_GOT ? MUTEX_SPIN_ACQUIRED : MUTEX_SPIN_FAILED);
    return r == MUTEX_SPIN_GOT;
}

/* ---- sleeping and unlocking under the wait lock ---------------------------- */

void mutex_mcs_lock_slow(sk_mutex_t *m)
{
    if (mcs_spin(m, MUTEX_LOCKED))
        return;

    uint32_t n = wait_lock(m) + 1;   /* register (3.13: list_add_tail) */
    for (;;) {
        uint32_t s = LD(&m->state);
        if (s == 0) {
            /* Others registered: keep SLEEPERS so our unlock wakes one. */
            if (CAS(&m->state, &s, n > 1 ? MUTEX_LOCKED | MUTEX_SLEEPERS : MUTEX_LOCKED)) {
                wait_unlock(m, n - 1);
                return;
            }
            continue;
        }
        if (!(s & MUTEX_SLEEPERS)) {
            if (!CAS(&m->state, &s, s | MUTEX_SLEEPERS))
                continue;
            s |= MUTEX_SLEEPERS;
        }
        wait_unlock(m, n);
        mutex_stat_inc(MUTEX_SLEEP);
        os_futex_wait(&m->state, s, -1);
        /* As 3.13: a woken waiter tries the mutex under the wait lock and
         * does not spin again first (that came in 2016, after the unlock
         * had left the wait lock: here the spinner, once owner, would
         * still have to queue for the wait lock to leave the sleepers). */
        n = wait_lock(m);
    }
}

void mutex_mcs_unlock_slow(sk_mutex_t *m, uint32_t s)
{
    uint32_t n = wait_lock(m);
    /* No hand-off here (3.13 had none): only SLEEPERS sends an unlock here. */
    while (!__atomic_compare_exchange_n(&m->state, &s, 0, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
        ;
    if (n)   /* 3.13: wake the first waiter if the list is not empty */
        os_futex_wake(&m->state, 1);
    wait_unlock(m, n);
}
