/*
 * lock.h — slabkit's locks.
 *
 * spinlock_t: test-and-test-and-set with a bounded spin, then sched_yield;
 *   for critical sections of a few dozen instructions whose holder cannot
 *   block (the per-CPU array lock of the rseq fallback).
 * lock_t: the lock of every slow path whose holder may be preempted (the
 *   per-CPU slab lock, the node list_lock, the zone lock).  It is an
 *   sk_mutex (src/lock/mutex.c): a futex mutex whose waiters spin in an
 *   MCS queue while the owner runs, then sleep.  The lock_* names are the
 *   only ones the layers above use, so the choice lives here.
 *
 * Neither allocates; both are valid when zero-filled, so they can live in
 * static storage and in memory fresh from mmap, and a forked child can
 * reset them by zeroing.
 */
#ifndef SK_LOCK_H
#define SK_LOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "os/os.h"

typedef struct { uint32_t v; } spinlock_t;
#define SPINLOCK_INIT { 0 }

void spin_lock_slow(spinlock_t *l);

static inline bool spin_trylock(spinlock_t *l)
{
    return __atomic_load_n(&l->v, __ATOMIC_RELAXED) == 0 &&
           __atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE) == 0;
}
static inline void spin_lock(spinlock_t *l)
{
    if (likely(__atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE) == 0))
        return;
    spin_lock_slow(l);
}
static inline void spin_unlock(spinlock_t *l)
{
    __atomic_store_n(&l->v, 0, __ATOMIC_RELEASE);
}
static inline bool spin_is_locked(const spinlock_t *l)
{
    return __atomic_load_n(&l->v, __ATOMIC_RELAXED) != 0;
}

static inline void cpu_relax(void) { __builtin_ia32_pause(); }

/* The slow-path lock: an sk_mutex. */
typedef sk_mutex_t lock_t;
#define LOCK_INIT SK_MUTEX_INITIALIZER
static inline void lock_acquire(lock_t *l) { sk_mutex_lock(l); }
static inline bool lock_try(lock_t *l) { return sk_mutex_trylock(l); }
static inline void lock_release(lock_t *l) { sk_mutex_unlock(l); }
static inline void lock_reset(lock_t *l) { sk_mutex_init(l); }
/* A forked child's reset of a lock some parent thread may have held,
 * spun or slept on: only a lock in such a state is written, so that the
 * child, which walks every lock of every cache, does not copy the pages
 * of idle ones (a fork then costs a handful of page faults, not a copy of
 * all of slabkit's metadata).  `owner` and `handoff_after` are only
 * heuristics and stay. */
static inline bool lock_idle(const lock_t *l)
{
    return !(__atomic_load_n(&l->state, __ATOMIC_RELAXED) | __atomic_load_n(&l->handoff, __ATOMIC_RELAXED) |
             __atomic_load_n(&l->spinners, __ATOMIC_RELAXED) | __atomic_load_n(&l->wait, __ATOMIC_RELAXED)) &&
           !__atomic_load_n(&l->osq, __ATOMIC_RELAXED);
}
static inline void lock_reset_child(lock_t *l)
{
    if (!lock_idle(l))
        lock_reset(l);
}
/* The same for a spinlock (a word; SK_CHILD_CLEAR). */
static inline void spin_reset_child(spinlock_t *l) { SK_CHILD_CLEAR(l->v); }
/* In a forked child: free the spin-queue nodes of threads gone with the
 * fork (after every lock_t has been reset). */
void lock_atfork_child(void);

#endif
