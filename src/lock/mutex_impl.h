/*
 * mutex_impl.h — what the two ways of waiting for an sk_mutex share:
 * mutex.c (the default, mutex_spin=1/0) and mutex_mcs.c (mutex_spin=mcs,
 * the spinning before the kernel's 2014 series).  Private to src/lock:
 * tests and benches use mutex_internal.h, the layers above lock.h.
 *
 * The CPU id and owner tag, the head spinner's stop rules (its stand-ins
 * for owner->on_cpu) and the statistics serve both modes; the admission to
 * spin (at most CPUs - 1 spinners), the MUTEX_SPIN_MAX_NS bound and the
 * hand-off only the default.  What else differs: how spinners queue and
 * who takes the wait lock (docs/mutex.md, "the mcs mode").
 */
#ifndef SK_MUTEX_IMPL_H
#define SK_MUTEX_IMPL_H

#include <stdbool.h>
#include <sys/rseq.h>

#include "lock/lock.h"
#include "lock/mutex_internal.h"

#define LD(p)        __atomic_load_n((p), __ATOMIC_RELAXED)
#define LD_ACQ(p)    __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ST(p, v)     __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ST_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define CAS(p, expp, v) \
    __atomic_compare_exchange_n((p), (expp), (v), false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)

/* The CPU this thread runs on, from the rseq area glibc registered; -1 when
 * rseq is not registered (then the "owner on my CPU" test is simply off). */
static inline int mutex_cpu(void)
{
    if (!__rseq_size)
        return -1;
    const struct rseq *r = (const struct rseq *)
        ((char *)__builtin_thread_pointer() + __rseq_offset);
    return (int)__atomic_load_n(&r->cpu_id, __ATOMIC_RELAXED);
}

static inline uint32_t owner_cpu_tag(int cpu)
{
    uint32_t c = (uint32_t)cpu + 1;   /* -1 -> 0; -2 (failed) -> huge -> 0 */
    return c <= MUTEX_OWNER_CPU_MASK ? c : 0;
}

void mutex_stat_inc(enum mutex_stat item);

/* Does owner word `o` say the owner last ran on the CPU we run on now?
 * Then it is not running: the one sign of owner->on_cpu a process can
 * trust (never with rseq off: the tag is 0). */
static inline bool mutex_owner_ran_here(uint32_t o)
{
    uint32_t c = o & MUTEX_OWNER_CPU_MASK;
    return c && c == owner_cpu_tag(mutex_cpu());
}
/* Both modes' admission to spin (3.13's mutex_can_spin_on_owner): false,
 * counted as skipped, while the mutex is held by an owner that ran here. */
bool mutex_may_spin(const sk_mutex_t *m);

/* Admission to spin: false (counted as skipped) when spinning cannot pay;
 * true: the caller is counted in m->spinners until mutex_spin_end. */
bool mutex_spin_begin(sk_mutex_t *m);
void mutex_spin_end(sk_mutex_t *m, bool got);

/* The head spinner polls the mutex while its owner `*last` seems to run.
 * `since`: when this owner's window opened (0: at the first time check). */
enum mutex_owner_spin {
    MUTEX_SPIN_GOT,        /* took the mutex, installing lockval */
    MUTEX_SPIN_STOP,       /* owner preempted or slow, bound reached, hand-off pending */
    MUTEX_SPIN_NEW_OWNER,  /* another acquisition: *last is the new owner */
};
enum mutex_owner_spin mutex_spin_on_owner(sk_mutex_t *m, uint32_t lockval, uint32_t *last,
                                          uint64_t since, uint64_t deadline);

/* Starvation bound (protocol rule 3 of mutex.c): may a woken waiter that
 * started waiting at `start` and now reads `s` ask for the hand-off? */
bool mutex_handoff_due(const sk_mutex_t *m, uint32_t s, uint64_t start);
/* Take the token and wait for the mutex to be passed to us; on true we own
 * it as LOCKED|SLEEPERS.  false: another waiter holds the token. */
bool mutex_handoff_wait(sk_mutex_t *m);

/* mutex_spin=mcs (mutex_mcs.c): the slow paths of lock (returns owning the
 * mutex; the caller records the owner) and of unlock (`s`: the state the
 * fast path read). */
void mutex_mcs_lock_slow(sk_mutex_t *m);
void mutex_mcs_unlock_slow(sk_mutex_t *m, uint32_t s);

#endif
