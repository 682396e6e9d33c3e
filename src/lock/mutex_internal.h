/*
 * mutex_internal.h — sk_mutex internals shared by mutex.c, its tests and
 * bench/aim7: the bits of the state word, the spin and starvation bounds,
 * and event counters.  Nothing above the lock layer uses this header; the
 * layers above take lock_t from lock.h.
 */
#ifndef SK_MUTEX_INTERNAL_H
#define SK_MUTEX_INTERNAL_H

#include <stdint.h>

#include "lock/lock.h"

/* sk_mutex.state.  Invariant: SLEEPERS and HANDOFF are only ever set
 * together with LOCKED, so an unlocked mutex reads exactly 0. */
#define MUTEX_LOCKED   1u  /* held */
#define MUTEX_SLEEPERS 2u  /* some thread may sleep in futex_wait on state */
#define MUTEX_HANDOFF  4u  /* the hand-off token holder waits: unlock grants, never releases */

/* sk_mutex.handoff: the futex word of the one starving waiter. */
#define MUTEX_HANDOFF_NONE    0u  /* token free */
#define MUTEX_HANDOFF_WAITING 1u  /* a waiter holds the token */
#define MUTEX_HANDOFF_GRANTED 2u  /* the lock was passed to it */

/* sk_mutex.owner: (generation << 12) | (owner's CPU + 1), 0 = unknown CPU.
 * Written by each new owner, read by the head spinner only. */
#define MUTEX_OWNER_CPU_MASK 0xfffu
#define MUTEX_OWNER_GEN_ONE  0x1000u

/*
 * Bounds (docs/mutex.md explains the numbers).  A futex sleep plus wake-up
 * costs about 2.5 us of CPU on this class of machine and far more when the
 * CPUs are oversubscribed; spinning longer than that on one owner cannot
 * pay (the ski-rental argument), so:
 */
#define MUTEX_SPIN_OWNER_NS  5000ull    /* same owner this long: it is preempted or blocked */
#define MUTEX_SPIN_MAX_NS    20000ull   /* one spin attempt, head or queued, never longer */
#ifndef MUTEX_STARVE_NS
#define MUTEX_STARVE_NS      1000000ull /* waited this long and lost a wake-up: ask for hand-off */
#endif
/* After a hand-off that kept the mutex reserved for L (from the request to
 * the grantee running), no new hand-off for MUTEX_HANDOFF_COOLDOWN x L, at
 * most MUTEX_HANDOFF_COOLDOWN_MAX_US: a mutex reserved for a thread that is
 * waiting for a CPU is idle, and back-to-back hand-offs would make every
 * acquisition wait for a wake-up (a convoy). */
#define MUTEX_HANDOFF_COOLDOWN        8u
#define MUTEX_HANDOFF_COOLDOWN_MAX_US 50000u
#define MUTEX_NODE_POOL      256        /* spin-queue nodes, never freed */

/* Slow-path event counters, summed over CPUs (cheap: slow paths only). */
enum mutex_stat {
    MUTEX_SPIN_ACQUIRED,   /* spinning got the lock */
    MUTEX_SPIN_FAILED,     /* spinning gave up (owner slow, bound, hand-off) */
    MUTEX_SPIN_SKIPPED,    /* did not spin: owner on our CPU, queue full, no node */
    MUTEX_SLEEP,           /* futex waits on the state word */
    MUTEX_HANDOFF_DONE,    /* locks passed to a starving waiter */
    MUTEX_STAT_NR
};
extern const char *const mutex_stat_names[MUTEX_STAT_NR];
/* Tests: allow n spinners per mutex instead of CPUs - 1 (0: CPUs - 1
 * again), so that a 2-CPU machine queues several spinners.  Only while no
 * thread is in a slow path. */
void lock_mutex_spin_limit(unsigned n);
void lock_mutex_stats(unsigned long out[MUTEX_STAT_NR]);

#endif
