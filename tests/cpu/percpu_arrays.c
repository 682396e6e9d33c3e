/*
 * percpu_arrays — per-CPU arrays lose and duplicate nothing: 8 and 64
 * threads confined to two CPUs hammer one shared array set (capacity 32)
 * with cpu_pop, cpu_pop_batch, cpu_push and cpu_push_batch, passing a pool
 * of unique tokens between the arrays, their hands and a locked overflow
 * pool, while a drainer thread takes random amounts out of every CPU's
 * array with cpu_drain_remote.  Every token is owned by at most one thread
 * at any moment (an atomic owner word per token catches a duplicate the
 * moment it is handed out twice), and at the end every token is found
 * exactly once: in an array or in the overflow pool.
 *
 * The same binary proves the rseq path (default) and the lock fallback
 * (tests/modes/rseq_off.t runs it with GLIBC_TUNABLES=glibc.pthread.rseq=0;
 * TSan builds always use the fallback; rseq_off.t also runs it with
 * membarrier denied, SK_TEST_DENY_MEMBARRIER=1, tests/cpus.h).
 * Usage: percpu_arrays [milliseconds per run [threads ...]]  (default 1200 8 64)
 *
 * TSAN: yes
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu.h"
#include "tap.h"
#include "cpus.h"

#define CAP 32u
#define NTOK 2048
#define HAND 48

static unsigned char tokens[NTOK];          /* a token is &tokens[i] */
static int owner[NTOK];                     /* thread id + 1 holding it, 0: none */
static cpu_arrays_t tab;
static int stop;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static void *pool[NTOK];
static unsigned pool_n;

static long errors;                          /* duplicates, foreign values, bad returns */
static long ops_pop, ops_push, ops_full, ops_drained, drains;

static void error(const char *what, void *p)
{
    if (__atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED) < 10)
        diag("error: %s (%p)", what, p);
}

static long index_of(void *p)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)tokens;
    if (a < b || a >= b + NTOK)
        return -1;
    return (long)(a - b);
}

/* The calling thread `id` takes p out of shared storage. */
static void claim(void *p, int id)
{
    long i = index_of(p);
    if (i < 0) {
        error("a value that is no token came out of an array", p);
        return;
    }
    int expect = 0;
    if (!__atomic_compare_exchange_n(&owner[i], &expect, id + 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        error("token handed out twice", p);
}

static void release(void *p)
{
    long i = index_of(p);
    if (i >= 0)
        __atomic_store_n(&owner[i], 0, __ATOMIC_RELEASE);
}

/* Tokens in hand go to the pool: release first, the pool owns them next. */
static void pool_put(void **buf, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        release(buf[i]);
    pthread_mutex_lock(&pool_lock);
    for (unsigned i = 0; i < n; i++) {
        if (pool_n >= NTOK)
            error("overflow pool holds more tokens than exist", buf[i]);
        else
            pool[pool_n++] = buf[i];
    }
    pthread_mutex_unlock(&pool_lock);
}

static unsigned pool_take(void **buf, unsigned max, int id)
{
    pthread_mutex_lock(&pool_lock);
    unsigned n = pool_n < max ? pool_n : max;
    pool_n -= n;
    memcpy(buf, &pool[pool_n], n * sizeof(void *));
    pthread_mutex_unlock(&pool_lock);
    for (unsigned i = 0; i < n; i++)
        claim(buf[i], id);
    return n;
}

static inline uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
    void *hand[HAND];
    unsigned nh = 0;
    long pops = 0, pushes = 0, full = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        uint64_t r = rnd(&seed);
        switch (r % 8) {
        case 0:
        case 1:
            if (nh < HAND) {
                void *p = cpu_pop(tab);
                if (p) {
                    claim(p, id);
                    hand[nh++] = p;
                    pops++;
                }
            }
            break;
        case 2: {
            unsigned want = 1 + (unsigned)((r >> 8) % 16);
            if (want > HAND - nh)
                want = HAND - nh;
            unsigned n = cpu_pop_batch(tab, hand + nh, want);
            if (n > want)
                error("cpu_pop_batch returned more than asked", NULL);
            for (unsigned i = 0; i < n && i < want; i++)
                claim(hand[nh + i], id);
            nh += n < want ? n : want;
            pops += n;
            break;
        }
        case 3:
        case 4:
            if (nh) {
                void *p = hand[--nh];
                release(p);
                int rc = cpu_push(tab, p);
                if (rc == 1) {
                    pushes++;
                } else {
                    /* Not pushed: still ours alone, so it goes to the pool. */
                    if (rc != 0)
                        error("cpu_push reported a duplicate of a unique token", p);
                    full++;
                    pool_put(&p, 1);
                }
            }
            break;
        case 5:
            if (nh) {
                unsigned m = 1 + (unsigned)((r >> 8) % 16);
                if (m > nh)
                    m = nh;
                for (unsigned i = nh - m; i < nh; i++)
                    release(hand[i]);
                unsigned pushed = cpu_push_batch(tab, hand + nh - m, m);
                if (pushed > m) {
                    error("cpu_push_batch pushed more than given", NULL);
                    pushed = m;
                }
                pushes += pushed;
                if (pushed < m) {
                    full++;
                    /* The rest never left our hand: give it to the pool. */
                    pool_put(hand + nh - m + pushed, m - pushed);
                }
                nh -= m;
            }
            break;
        case 6:
            if (nh < HAND / 2)
                nh += pool_take(hand + nh, 1 + (unsigned)((r >> 8) % 8), id);
            break;
        case 7:
            /* Hold what we have for a moment; now and then let others run. */
            if ((r >> 8) % 64 == 0)
                sched_yield();
            else
                for (unsigned w = (unsigned)((r >> 16) % 128); w; w--)
                    __asm__ volatile("" ::: "memory");
            break;
        }
    }
    pool_put(hand, nh);
    __atomic_fetch_add(&ops_pop, pops, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ops_push, pushes, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ops_full, full, __ATOMIC_RELAXED);
    return NULL;
}

/* Takes random amounts out of every CPU's array while the others run. */
static void *drainer(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t seed = 0x2545f4914f6cdd1dull;
    void *buf[CAP];
    long got = 0, n_drains = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        for (int cpu = 0; cpu < cpu_nr_ids; cpu++) {
            unsigned max = 1 + (unsigned)(rnd(&seed) % CAP);
            unsigned n = cpu_drain_remote(tab, cpu, buf, max);
            n_drains++;
            if (n > max) {
                error("cpu_drain_remote returned more than asked", NULL);
                n = max;
            }
            for (unsigned i = 0; i < n; i++)
                claim(buf[i], id);
            pool_put(buf, n);
            got += n;
        }
        struct timespec ts = { 0, 20000 };
        nanosleep(&ts, NULL);
    }
    __atomic_fetch_add(&ops_drained, got, __ATOMIC_RELAXED);
    __atomic_fetch_add(&drains, n_drains, __ATOMIC_RELAXED);
    return NULL;
}

static void run(int nthreads, long ms)
{
    size_t bytes = SK_ALIGN_UP(cpu_arrays_bytes(), (size_t)CACHE_LINE);
    void *mem = aligned_alloc(CACHE_LINE, bytes);
    if (!mem)
        BAIL("no memory for the arrays");
    memset(mem, 0, bytes);
    tab = cpu_arrays_init(mem, CAP);
    stop = 0;
    errors = ops_pop = ops_push = ops_full = ops_drained = drains = 0;
    memset(owner, 0, sizeof owner);
    pool_n = 0;
    for (int i = 0; i < NTOK; i++)
        pool[pool_n++] = &tokens[i];

    pthread_t *t = calloc((size_t)nthreads + 1, sizeof *t);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int made = 0;
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&t[made], &attr, worker, (void *)(intptr_t)i) == 0)
            made++;
    int have_drainer = pthread_create(&t[made], &attr, drainer, (void *)(intptr_t)nthreads) == 0;
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < made + have_drainer; i++)
        pthread_join(t[i], NULL);
    pthread_attr_destroy(&attr);
    free(t);
    if (made < nthreads)
        diag("only %d of %d threads could be created", made, nthreads);
    ok(have_drainer, "%d threads: drainer thread running", nthreads);

    /* Everything left: the arrays (drained in full) and the pool. */
    static int seen[NTOK];
    memset(seen, 0, sizeof seen);
    long foreign = 0, in_arrays = 0;
    void *buf[CAP];
    for (int cpu = 0; cpu < cpu_nr_ids; cpu++) {
        if ((cpu_array_at(tab, cpu)->word & 0xffff) > CAP)
            error("an array's count is past its capacity or still locked", cpu_array_at(tab, cpu));
        unsigned n;
        while ((n = cpu_drain_remote(tab, cpu, buf, CAP)) != 0)
            for (unsigned i = 0; i < n; i++) {
                long k = index_of(buf[i]);
                if (k < 0)
                    foreign++;
                else
                    seen[k]++;
                in_arrays++;
            }
    }
    for (unsigned i = 0; i < pool_n; i++) {
        long k = index_of(pool[i]);
        if (k < 0)
            foreign++;
        else
            seen[k]++;
    }
    long lost = 0, dup = 0, held = 0;
    for (int i = 0; i < NTOK; i++) {
        lost += seen[i] == 0;
        dup += seen[i] > 1;
        held += owner[i] != 0;
    }
    diag("%d threads, %s: %ld pops, %ld pushes, %ld full, %ld drains took %ld, %ld left in arrays",
         nthreads, cpu_use_rseq ? "rseq" : "lock fallback", ops_pop, ops_push, ops_full, drains,
         ops_drained, in_arrays);
    is(errors, 0, "%d threads: no token handed out twice, no bad return during the run", nthreads);
    is(lost, 0, "%d threads: no token lost", nthreads);
    is(dup, 0, "%d threads: no token duplicated", nthreads);
    is(foreign, 0, "%d threads: nothing but tokens came out of the arrays", nthreads);
    is(held, 0, "%d threads: no token left owned", nthreads);
    ok(ops_pop > 0 && ops_push > 0 && ops_drained > 0, "%d threads: pops, pushes and remote drains all happened",
       nthreads);

    /* Every array is usable after the drains: its lock bit is gone. */
    unsigned counts = 0;
    int clear = 1;
    for (int cpu = 0; cpu < cpu_nr_ids; cpu++) {
        counts += cpu_array_count(tab, cpu);
        if (cpu_array_len(cpu_array_at(tab, cpu)) != 0 || (cpu_array_at(tab, cpu)->word & CPU_ARRAY_LOCKED) || spin_is_locked(&cpu_array_at(tab, cpu)->lock))
            clear = 0;
    }
    ok(clear && counts == 0, "%d threads: drained arrays are empty and unlocked", nthreads);
    int pushed = cpu_push(tab, &tokens[0]);
    counts = 0;
    for (int cpu = 0; cpu < cpu_nr_ids; cpu++)
        counts += cpu_array_count(tab, cpu);
    ok(pushed == 1 && counts == 1, "%d threads: a push after the drains lands in one array", nthreads);
    free(mem);
}

int main(int argc, char **argv)
{
    confine_to_two_cpus();
    os_options_init();
    cpu_init();
    cpu_init();                    /* idempotent */
    long ms = argc > 1 ? atol(argv[1]) : 1200;
    if (ms <= 0)
        ms = 1200;
    const char *tun = getenv("GLIBC_TUNABLES");
    int rseq_off = tun && strstr(tun, "glibc.pthread.rseq=0");
    diag("per-CPU arrays via %s (%d CPU ids)%s", cpu_use_rseq ? "rseq" : "the lock fallback", cpu_nr_ids,
         rseq_off ? ", GLIBC_TUNABLES turns rseq off" : "");
    if (rseq_off)
        ok(!cpu_use_rseq, "rseq off by tunable: the lock fallback is used");
    if (getenv("SK_TEST_DENY_MEMBARRIER"))
        ok(membarrier_denied(), "membarrier denied (remote drains visit each CPU instead)");
    if (argc > 2)
        for (int i = 2; i < argc; i++)
            run(atoi(argv[i]), ms);
    else {
        run(8, ms);
        run(64, ms);
    }
    return done_testing();
}
