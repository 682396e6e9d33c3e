/*
 * mutex.c — sk_mutex: a futex mutex.
 *
 * state: 0 unlocked, 1 locked, 2 locked with (possible) sleepers.
 * (Interim version: optimistic MCS spinning is added by issue 5.)
 */
#include "lock/lock.h"

void sk_mutex_init(sk_mutex_t *m)
{
    __atomic_store_n(&m->state, 0, __ATOMIC_RELAXED);
    m->handoff = 0;
    m->osq = NULL;
    m->owner = NULL;
}

void sk_mutex_destroy(sk_mutex_t *m) { (void)m; }

int sk_mutex_trylock(sk_mutex_t *m)
{
    uint32_t z = 0;
    return __atomic_compare_exchange_n(&m->state, &z, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

void sk_mutex_lock(sk_mutex_t *m)
{
    uint32_t z = 0;
    if (likely(__atomic_compare_exchange_n(&m->state, &z, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)))
        return;
    for (int i = 0; i < 100; i++) {
        cpu_relax();
        z = 0;
        if (__atomic_load_n(&m->state, __ATOMIC_RELAXED) == 0 &&
            __atomic_compare_exchange_n(&m->state, &z, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
    }
    while (__atomic_exchange_n(&m->state, 2, __ATOMIC_ACQUIRE) != 0)
        os_futex_wait(&m->state, 2, -1);
}

void sk_mutex_unlock(sk_mutex_t *m)
{
    if (__atomic_exchange_n(&m->state, 0, __ATOMIC_RELEASE) == 2)
        os_futex_wake(&m->state, 1);
}
