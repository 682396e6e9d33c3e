/*
 * mutex.c — sk_mutex: a futex mutex with MCS-queued optimistic spinning.
 * This is the default (mutex_spin=1, the "after" of the kernel's 2014
 * series: a cancellable queue, an unlock that takes no wait lock) and
 * mutex_spin=0 (no spinning); mutex_spin=mcs, the series' "before", is
 * mutex_mcs.c, chosen in the two slow paths.  mutex_impl.h is what the two
 * files share.
 *
 * Words of a mutex (include/slabkit.h) and who writes them:
 *   state     LOCKED | SLEEPERS | HANDOFF.  Taken by CAS 0 -> LOCKED (fast
 *             path, spinners, trylock) or 0 -> LOCKED|SLEEPERS (a thread that
 *             has been in the sleep path: it cannot know whether others still
 *             sleep, so it keeps the flag, as in Drepper's "futexes are
 *             tricky" mutex).  SLEEPERS and HANDOFF imply LOCKED: free is 0.
 *   handoff   the token of the one starving waiter (0 free, 1 waiting,
 *             2 granted) and the futex word it sleeps on.
 *   owner     (acquisition count << 12) | (CPU + 1), stored by every new
 *             owner; read only by the head spinner to decide whether to go
 *             on spinning.  Never trusted for exclusion.
 *   spinners  threads in the spin queue; bounded by CPUs - 1.
 *   handoff_after  earliest time (us, wrapping) of the next hand-off,
 *             written by each grantee (rule 3).
 *   osq       tail of the MCS queue of spinners (pointer to a pool node).
 *
 * Protocol:
 *   1. No lost wake-up: a sleeper sets SLEEPERS (CAS, with LOCKED seen) and
 *      futex-waits on exactly the value it saw, so an unlock in between
 *      makes the wait return at once.  An unlock that clears SLEEPERS wakes
 *      one sleeper; that thread, until it gets the lock or sleeps again,
 *      stands in for every other sleeper: it re-sets SLEEPERS either way.
 *   2. Spinning: at most CPUs - 1 threads per mutex queue on an MCS lock;
 *      only its head reads the mutex.  The head stops when the owner looks
 *      preempted (it last ran on the head's CPU), when one owner holds
 *      longer than MUTEX_SPIN_OWNER_NS, after MUTEX_SPIN_MAX_NS, or when a
 *      hand-off is pending.  A queued spinner past MUTEX_SPIN_MAX_NS leaves
 *      the queue (the OSQ unqueue: unlink from prev, find next, splice).
 *   3. Hand-off: a waiter that has waited MUTEX_STARVE_NS and was woken
 *      without getting the lock takes the token (CAS 0 -> 1), then sets
 *      HANDOFF while the mutex is held (or takes it if free).  From then on
 *      no one can take the mutex (it never reads 0); the owner's unlock
 *      clears HANDOFF, keeps LOCKED, stores 2 to the token and wakes the
 *      token holder, which owns the mutex and frees the token.  The grantee
 *      then bars hand-offs for 8x the time its own took (at most 50 ms), so
 *      a reserved-but-idle mutex costs at most about 1/9 of its time.
 *   4. Spin-queue nodes come from a static pool, claimed per spin attempt
 *      and never freed, so a stale pointer left by the unqueue races (as in
 *      the kernel's per-CPU OSQ nodes) always points at valid memory, even
 *      after the thread that used the node has exited.
 *
 * Lock order: the mutex takes nothing itself; callers nest sk_mutexes as
 * per-CPU slab lock -> node list_lock -> zone lock.  A thread spins on at
 * most one mutex at a time (it holds one pool node at most).  Nothing here
 * allocates memory.
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "lock/mutex_impl.h"

/* ---- helpers -------------------------------------------------------------- */

/* The new owner records itself.  Only owners write this word. */
static inline void mutex_set_owner(sk_mutex_t *m)
{
    uint32_t o = LD(&m->owner);
    ST(&m->owner, ((o & ~MUTEX_OWNER_CPU_MASK) + MUTEX_OWNER_GEN_ONE) | owner_cpu_tag(mutex_cpu()));
}

/* ---- statistics ------------------------------------------------------------ */

const char *const mutex_stat_names[MUTEX_STAT_NR] = {
    "spin_acquired", "spin_failed", "spin_skipped", "sleep", "handoff",
};

#define STAT_ROWS 64
static struct {
    unsigned long v[MUTEX_STAT_NR];
} __attribute__((aligned(CACHE_LINE))) mutex_stats[STAT_ROWS] SK_BIG_BSS;

void mutex_stat_inc(enum mutex_stat item)
{
    int cpu = mutex_cpu();
    unsigned row = cpu < 0 ? 0u : (unsigned)cpu % STAT_ROWS;
    __atomic_fetch_add(&mutex_stats[row].v[item], 1, __ATOMIC_RELAXED);
}

void lock_mutex_stats(unsigned long out[MUTEX_STAT_NR])
{
    for (int i = 0; i < MUTEX_STAT_NR; i++) {
        out[i] = 0;
        for (int r = 0; r < STAT_ROWS; r++)
            out[i] += LD(&mutex_stats[r].v[i]);
    }
}

/* ---- the spin queue (an MCS lock that its waiters may leave) ---------------- */

struct mutex_node {
    struct mutex_node *next;   /* successor; written by it (link) or by unqueue splices */
    struct mutex_node *prev;   /* predecessor, for leaving the queue */
    uint32_t locked;           /* 1: we are the head (set by the previous head) */
    uint32_t busy;             /* claimed from the pool */
} __attribute__((aligned(CACHE_LINE)));

static struct mutex_node node_pool[MUTEX_NODE_POOL] SK_BIG_BSS;
/* Set once a node was ever claimed: until then the pool (16 KiB of bss) is
 * untouched, and a fork child need not read it (lock_atfork_child). */
static bool node_pool_used;

/* Claim a node: probe a few slots from a per-thread hash.  NULL when all
 * are busy, which only happens with hundreds of spinners: then don't spin. */
static struct mutex_node *node_get(void)
{
    uint64_t h = (uint64_t)(uintptr_t)pthread_self();
    h = (h ^ (h >> 17)) * 0x9e3779b97f4a7c15ull;
    unsigned start = (unsigned)(h >> 40);
    if (unlikely(!LD(&node_pool_used)))
        __atomic_store_n(&node_pool_used, true, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < 8; i++) {
        struct mutex_node *n = &node_pool[(start + i) % MUTEX_NODE_POOL];
        if (LD(&n->busy) == 0 && __atomic_exchange_n(&n->busy, 1, __ATOMIC_ACQUIRE) == 0)
            return n;
    }
    return NULL;
}

static void node_put(struct mutex_node *n) { ST_REL(&n->busy, 0); }

/* The fork child, alone: nodes claimed by parent threads that were
 * spinning at the fork would stay busy forever (the callers reset every
 * mutex, so no queue still points at them). */
void lock_atfork_child(void)
{
    if (!LD(&node_pool_used))
        return;                          /* never touched: nothing to free */
    for (unsigned i = 0; i < MUTEX_NODE_POOL; i++)
        SK_CHILD_CLEAR(node_pool[i].busy);
}

/* Wait until our successor is known and detach it, or, if we are the tail,
 * make `prev` the tail (NULL: the queue becomes empty). */
static struct mutex_node *osq_wait_next(void **tail, struct mutex_node *node,
                                        struct mutex_node *prev)
{
    for (;;) {
        void *expect = node;
        if (LD(tail) == node && CAS(tail, &expect, prev))
            return NULL;
        if (LD(&node->next)) {
            struct mutex_node *next = __atomic_exchange_n(&node->next, NULL, __ATOMIC_ACQ_REL);
            if (next)
                return next;
        }
        cpu_relax();
    }
}

/* Join the queue and wait to be its head.  false: we left the queue at
 * `deadline` without becoming head. */
static bool osq_lock(void **tail, struct mutex_node *node, uint64_t deadline)
{
    ST(&node->next, NULL);
    ST(&node->prev, NULL);
    ST(&node->locked, 0);
    struct mutex_node *prev = __atomic_exchange_n(tail, (void *)node, __ATOMIC_ACQ_REL);
    if (!prev)
        return true;
    ST(&node->prev, prev);
    ST_REL(&prev->next, node);

    for (unsigned i = 1; !LD_ACQ(&node->locked); i++) {
        if ((i & 15) == 0 && os_now_ns() > deadline)
            goto unqueue;
        cpu_relax();
    }
    return true;

unqueue:
    /* A: unlink prev -> node, unless the head passed us the lock meanwhile.
     * prev may change under us as predecessors leave; they update node->prev. */
    for (;;) {
        struct mutex_node *expect = node;
        if (LD(&prev->next) == node && CAS(&prev->next, &expect, NULL))
            break;
        if (LD_ACQ(&node->locked))
            return true;
        cpu_relax();
        prev = LD_ACQ(&node->prev);
    }
    /* B: prev waits for a new next (its next is NULL); find ours. */
    struct mutex_node *next = osq_wait_next(tail, node, prev);
    if (!next)
        return false;
    /* C: splice.  next waits in its own step A; prev waits for a next. */
    ST_REL(&next->prev, prev);
    ST_REL(&prev->next, next);
    return false;
}

static void osq_unlock(void **tail, struct mutex_node *node)
{
    void *expect = node;
    if (CAS(tail, &expect, NULL))
        return;
    struct mutex_node *next = __atomic_exchange_n(&node->next, NULL, __ATOMIC_ACQ_REL);
    if (!next)
        next = osq_wait_next(tail, node, NULL);
    if (next)
        ST_REL(&next->locked, 1);
}

/* ---- optimistic spinning --------------------------------------------------- */

/* Spinners beyond CPUs - 1 cannot all run beside the owner: the extra ones
 * would take the CPU the owner needs.  Cached (a benign race: every thread
 * computes the same value). */
static unsigned spin_limit_plus1;   /* the limit + 1, so that 0 means "not yet" */

static unsigned spin_limit(void)
{
    unsigned l = LD(&spin_limit_plus1);
    if (unlikely(!l)) {
        int n = os_nr_online_cpus();
        l = (unsigned)(n > 1 ? n - 1 : 0) + 1;
        ST(&spin_limit_plus1, l);
    }
    return l - 1;
}

void lock_mutex_spin_limit(unsigned n)
{
    ST(&spin_limit_plus1, n ? n + 1 : 0);
}

bool mutex_may_spin(const sk_mutex_t *m)
{
    if (mutex_owner_ran_here(LD(&m->owner)) && LD(&m->state) != 0) {
        mutex_stat_inc(MUTEX_SPIN_SKIPPED);
        return false;
    }
    return true;
}

bool mutex_spin_begin(sk_mutex_t *m)
{
    unsigned limit = spin_limit();
    if (!limit) {
        mutex_stat_inc(MUTEX_SPIN_SKIPPED);
        return false;
    }
    if (!mutex_may_spin(m))
        return false;
    if (__atomic_fetch_add(&m->spinners, 1, __ATOMIC_RELAXED) >= limit) {
        __atomic_fetch_sub(&m->spinners, 1, __ATOMIC_RELAXED);
        mutex_stat_inc(MUTEX_SPIN_SKIPPED);
        return false;
    }
    return true;
}

void mutex_spin_end(sk_mutex_t *m, bool got)
{
    __atomic_fetch_sub(&m->spinners, 1, __ATOMIC_RELAXED);
    mutex_stat_inc(got ? MUTEX_SPIN_ACQUIRED : MUTEX_SPIN_FAILED);
}

enum mutex_owner_spin mutex_spin_on_owner(sk_mutex_t *m, uint32_t lockval, uint32_t *last,
                                          uint64_t since, uint64_t deadline)
{
    for (unsigned i = 1;; i++) {
        uint32_t s = LD(&m->state);
        if (s == 0) {
            if (CAS(&m->state, &s, lockval))
                return MUTEX_SPIN_GOT;
            continue;
        }
        if (s & MUTEX_HANDOFF)
            return MUTEX_SPIN_STOP;    /* the lock is promised to a starving waiter */
        uint32_t o = LD(&m->owner);
        if (o != *last) {              /* progress: a new owner, a new window */
            *last = o;
            if (mutex_owner_ran_here(o))
                return MUTEX_SPIN_STOP; /* it last ran here, and we run here */
            return MUTEX_SPIN_NEW_OWNER;
        }
        if ((i & 7) == 0) {
            uint64_t t = os_now_ns();
            if (!since)
                since = t;
            if (t - since > MUTEX_SPIN_OWNER_NS || t > deadline)
                return MUTEX_SPIN_STOP;
        }
        cpu_relax();
    }
}

/* As the queue head: poll the mutex while its owners seem to be running. */
static bool head_spin(sk_mutex_t *m, uint32_t lockval, uint64_t start, uint64_t deadline)
{
    uint32_t last = LD(&m->owner);
    enum mutex_owner_spin r = mutex_spin_on_owner(m, lockval, &last, start, deadline);
    while (r == MUTEX_SPIN_NEW_OWNER)
        r = mutex_spin_on_owner(m, lockval, &last, 0, deadline);
    return r == MUTEX_SPIN_GOT;
}

/* Try to take the mutex by spinning; lockval is the state to install. */
static bool mutex_spin(sk_mutex_t *m, uint32_t lockval)
{
    if (!mutex_spin_begin(m))
        return false;
    struct mutex_node *node = node_get();
    if (!node) {
        __atomic_fetch_sub(&m->spinners, 1, __ATOMIC_RELAXED);
        mutex_stat_inc(MUTEX_SPIN_SKIPPED);
        return false;
    }
    bool got = false;
    uint64_t start = os_now_ns();
    uint64_t deadline = start + MUTEX_SPIN_MAX_NS;
    if (osq_lock(&m->osq, node, deadline)) {
        got = head_spin(m, lockval, start, deadline);
        osq_unlock(&m->osq, node);
    }
    node_put(node);
    mutex_spin_end(m, got);
    return got;
}

/* ---- sleeping and hand-off ------------------------------------------------- */

static inline uint32_t now_us(void) { return (uint32_t)(os_now_ns() / 1000u); }

/* Hand-offs allowed now?  Wrap-safe: only a time at most the cap ahead of
 * now blocks them, so a stale value never does. */
static inline bool handoff_allowed(const sk_mutex_t *m)
{
    uint32_t ahead = LD(&m->handoff_after) - now_us();
    return ahead == 0 || ahead > MUTEX_HANDOFF_COOLDOWN_MAX_US;
}

bool mutex_handoff_due(const sk_mutex_t *m, uint32_t s, uint64_t start)
{
    return !(s & MUTEX_HANDOFF) && os_now_ns() - start >= MUTEX_STARVE_NS && handoff_allowed(m);
}

bool mutex_handoff_wait(sk_mutex_t *m)
{
    uint32_t expect = MUTEX_HANDOFF_NONE;
    if (!CAS(&m->handoff, &expect, MUTEX_HANDOFF_WAITING))
        return false;
    for (;;) {
        uint32_t s = LD(&m->state);
        if (s == 0) {
            if (CAS(&m->state, &s, MUTEX_LOCKED | MUTEX_SLEEPERS)) {
                ST(&m->handoff, MUTEX_HANDOFF_NONE);
                return true;
            }
            continue;
        }
        /* SLEEPERS too: we stand in for the sleepers (protocol rule 1). */
        if (CAS(&m->state, &s, s | MUTEX_HANDOFF | MUTEX_SLEEPERS))
            break;
    }
    uint32_t asked = now_us();
    while (LD_ACQ(&m->handoff) != MUTEX_HANDOFF_GRANTED)
        os_futex_wait(&m->handoff, MUTEX_HANDOFF_WAITING, -1);
    uint32_t t = now_us(), cool = (t - asked) * MUTEX_HANDOFF_COOLDOWN;
    if (cool > MUTEX_HANDOFF_COOLDOWN_MAX_US || t - asked > MUTEX_HANDOFF_COOLDOWN_MAX_US)
        cool = MUTEX_HANDOFF_COOLDOWN_MAX_US;
    ST(&m->handoff_after, t + cool);
    ST(&m->handoff, MUTEX_HANDOFF_NONE);
    mutex_stat_inc(MUTEX_HANDOFF_DONE);
    return true;
}

static SK_NOINLINE void mutex_lock_slow(sk_mutex_t *m)
{
    os_options_init();
    long mode = sk_opt.mutex_spin;
    if (mode == MUTEX_SPIN_MCS) {
        mutex_mcs_lock_slow(m);
        goto owned;
    }
    bool spin = mode != MUTEX_SPIN_OFF;
    if (spin && mutex_spin(m, MUTEX_LOCKED))
        goto owned;

    uint64_t start = os_now_ns();
    bool woken = false;
    for (;;) {
        uint32_t s = LD(&m->state);
        if (s == 0) {
            if (CAS(&m->state, &s, MUTEX_LOCKED | MUTEX_SLEEPERS))
                goto owned;
            continue;
        }
        if (woken && sk_opt.mutex_handoff && mutex_handoff_due(m, s, start) && mutex_handoff_wait(m))
            goto owned;
        if (!(s & MUTEX_SLEEPERS)) {
            if (!CAS(&m->state, &s, s | MUTEX_SLEEPERS))
                continue;
            s |= MUTEX_SLEEPERS;
        }
        mutex_stat_inc(MUTEX_SLEEP);
        os_futex_wait(&m->state, s, -1);
        woken = true;
        /* Like the kernel's first waiter since 4.10: spin again before
         * sleeping again (mutex_wake_spin=0: 3.15's waiter sleeps). */
        if (spin && sk_opt.mutex_wake_spin && mutex_spin(m, MUTEX_LOCKED | MUTEX_SLEEPERS))
            goto owned;
    }
owned:
    mutex_set_owner(m);
}

/* Unlock with SLEEPERS or HANDOFF set (`s`, as the fast path read it).  No
 * wait lock here: the state word alone decides (the 2014 series' "unlock
 * the mutex without the wait_lock"); mutex_spin=mcs takes it. */
static SK_NOINLINE void mutex_unlock_slow(sk_mutex_t *m, uint32_t s)
{
    if (sk_opt.mutex_spin == MUTEX_SPIN_MCS) {
        mutex_mcs_unlock_slow(m, s);
        return;
    }
    for (;;) {
        if (s & MUTEX_HANDOFF) {
            /* Only the owner clears HANDOFF; LOCKED (and SLEEPERS) stay. */
            __atomic_fetch_and(&m->state, ~MUTEX_HANDOFF, __ATOMIC_RELAXED);
            ST_REL(&m->handoff, MUTEX_HANDOFF_GRANTED);
            os_futex_wake(&m->handoff, 1);
            return;
        }
        if (__atomic_compare_exchange_n(&m->state, &s, 0, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
            if (s & MUTEX_SLEEPERS)
                os_futex_wake(&m->state, 1);
            return;
        }
    }
}

/* ---- the API --------------------------------------------------------------- */

void sk_mutex_init(sk_mutex_t *m)
{
    ST(&m->state, 0);
    ST(&m->handoff, 0);
    ST(&m->owner, 0);
    ST(&m->spinners, 0);
    ST(&m->handoff_after, 0);
    ST(&m->wait, 0);
    ST(&m->osq, NULL);
}

void sk_mutex_destroy(sk_mutex_t *m)
{
    SK_ASSERT(LD(&m->state) == 0);
    (void)m;
}

int sk_mutex_trylock(sk_mutex_t *m)
{
    uint32_t z = 0;
    if (LD(&m->state) == 0 &&
        __atomic_compare_exchange_n(&m->state, &z, MUTEX_LOCKED, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        mutex_set_owner(m);
        return 1;
    }
    return 0;
}

void sk_mutex_lock(sk_mutex_t *m)
{
    uint32_t z = 0;
    if (likely(__atomic_compare_exchange_n(&m->state, &z, MUTEX_LOCKED, false,
                                           __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))) {
        mutex_set_owner(m);
        return;
    }
    mutex_lock_slow(m);
}

void sk_mutex_unlock(sk_mutex_t *m)
{
    uint32_t s = MUTEX_LOCKED;
    if (likely(__atomic_compare_exchange_n(&m->state, &s, 0, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED)))
        return;
    mutex_unlock_slow(m, s);
}
