/*
 * spinlock.c — the contended path of spinlock_t.
 *
 * Invariant: v is 0 (free) or 1 (held).  A waiter spins reading v (no bus
 * traffic while it is held), with a pause per iteration, and yields the CPU
 * after a bounded number of spins so a preempted holder can run: on a
 * 2-CPU machine with 64 threads, pure spinning would burn whole slices.
 * No lock order: a spinlock is a leaf, nothing is taken while holding it.
 */
#include "lock/lock.h"

void spin_lock_slow(spinlock_t *l)
{
    unsigned spins = 0;
    for (;;) {
        while (__atomic_load_n(&l->v, __ATOMIC_RELAXED) != 0) {
            if (++spins < 128)
                cpu_relax();
            else {
                os_yield();
                spins = 0;
            }
        }
        if (__atomic_exchange_n(&l->v, 1, __ATOMIC_ACQUIRE) == 0)
            return;
    }
}
