/*
 * percpu_freelist — the per-CPU freelist sequences (src/cpu/freelist.h,
 * the fast path of sheaves=0) lose and duplicate nothing: 8 and 64 threads
 * confined to two CPUs pop, push (with the owner check: a push naming
 * another owner must be refused), and install chains (NULL-terminated
 * onto an empty list, or spliced with their tail) on one freelist set,
 * passing a pool of unique 16-byte tokens, whose links are stored encoded
 * as the slab layer stores free pointers, between the lists, their hands
 * and a locked overflow pool, while a drainer takes whole lists with
 * cpu_fl_drain.  Every token is owned by at most one thread at any moment
 * (an atomic owner word per token), and at the end every token is found
 * exactly once: on a list or in the pool.
 *
 * With and without rseq: tests/modes/rseq_off.t runs it with
 * GLIBC_TUNABLES=glibc.pthread.rseq=0 and with membarrier denied; the TSan
 * build runs the lock fallback.
 * Usage: percpu_freelist [milliseconds per run [threads ...]]  (default 1000 8 64)
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

#include "cpu/freelist.h"
#include "tap.h"
#include "cpus.h"

#define NTOK 2048
#define HAND 48
#define OFS 0
#define RND ((uintptr_t)0x5bd1e9955bd1e995ull)

static uintptr_t tokens[NTOK][2] __attribute__((aligned(16)));
static int owner[NTOK];
static void *base;
static char owner_a, owner_b;          /* two "slabs" */
static int stop;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static void *pool[NTOK];
static unsigned pool_n;

static long errors, ops_pop, ops_push, ops_refused, ops_install, ops_drained, drains;

static void error(const char *what, void *p)
{
    if (__atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED) < 10)
        diag("error: %s (%p)", what, p);
}

static long index_of(void *p)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)tokens;
    if (a < b || a >= b + sizeof tokens || (a - b) % sizeof tokens[0])
        return -1;
    return (long)((a - b) / sizeof tokens[0]);
}

static void claim(void *p, int id)
{
    long i = index_of(p);
    if (i < 0) {
        error("a value that is no token came off a list", p);
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

/* Claim every token of a drained list; hand them to the pool. */
static long take_list(void *o, int id)
{
    void *buf[64];
    unsigned n = 0;
    long total = 0;
    for (long guard = 0; o && guard <= NTOK; guard++) {
        claim(o, id);
        buf[n++] = o;
        o = cpu_fl_next(o, OFS, RND);
        if (n == 64) {
            pool_put(buf, n);
            n = 0;
        }
        total++;
    }
    if (o)
        error("a list longer than the tokens (a cycle)", o);
    pool_put(buf, n);
    return total;
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
    long pops = 0, pushes = 0, refused = 0, installs = 0;
    cpu_slot();       /* the fallback slot (the slab layer's slow path assigns it) */
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        uint64_t r = rnd(&seed);
        switch (r % 8) {
        case 0:
        case 1:
            if (nh < HAND) {
                void *p;
                if (cpu_fl_pop(base, OFS, RND, &p)) {
                    claim(p, id);
                    hand[nh++] = p;
                    pops++;
                }
            }
            break;
        case 2:
        case 3:
            if (nh) {
                void *p = hand[--nh];
                bool wrong = (r >> 8) % 8 == 0;
                release(p);
                bool ok = cpu_fl_push(base, OFS, RND, p, wrong ? &owner_b : &owner_a);
                if (ok && wrong)
                    error("a push naming another owner was taken", p);
                if (ok) {
                    pushes++;
                } else {
                    refused++;
                    pool_put(&p, 1);
                }
            }
            break;
        case 4:
            if (nh) {
                /* A chain of the top m tokens in hand, top first. */
                unsigned m = 1 + (unsigned)((r >> 8) % 16);
                if (m > nh)
                    m = nh;
                void **c = hand + nh - m;
                for (unsigned i = 0; i < m; i++) {
                    release(c[i]);
                    cpu_fl_link(c[i], OFS, RND, i + 1 < m ? c[i + 1] : NULL);
                }
                bool spliced = (r >> 16) & 1;
                bool ok = cpu_fl_install(base, OFS, RND, c[0], spliced ? c[m - 1] : NULL);
                if (ok)
                    installs++;
                else
                    pool_put(c, m);
                nh -= m;
            }
            break;
        case 5:
        case 6:
            if (nh < HAND / 2)
                nh += pool_take(hand + nh, 1 + (unsigned)((r >> 8) % 8), id);
            break;
        case 7:
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
    __atomic_fetch_add(&ops_refused, refused, __ATOMIC_RELAXED);
    __atomic_fetch_add(&ops_install, installs, __ATOMIC_RELAXED);
    return NULL;
}

static void *drainer(void *arg)
{
    int id = (int)(intptr_t)arg;
    long got = 0, n_drains = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        for (int slot = 0; slot < cpu_nr_slots(); slot++) {
            got += take_list(cpu_fl_drain(base, slot), id);
            n_drains++;
        }
        struct timespec ts = { 0, 50000 };
        nanosleep(&ts, NULL);
    }
    __atomic_fetch_add(&ops_drained, got, __ATOMIC_RELAXED);
    __atomic_fetch_add(&drains, n_drains, __ATOMIC_RELAXED);
    return NULL;
}

static void run(int nthreads, long ms)
{
    size_t bytes = (size_t)cpu_nr_slots() * CPU_FL_STRIDE;
    base = aligned_alloc(CPU_FL_STRIDE, bytes);
    if (!base)
        BAIL("no memory for the freelists");
    memset(base, 0, bytes);
    for (int slot = 0; slot < cpu_nr_slots(); slot++)
        cpu_fl_set_owner(base, slot, &owner_a);
    stop = 0;
    errors = ops_pop = ops_push = ops_refused = ops_install = ops_drained = drains = 0;
    memset(owner, 0, sizeof owner);
    pool_n = 0;
    for (int i = 0; i < NTOK; i++)
        pool[pool_n++] = tokens[i];

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
    ok(have_drainer && made == nthreads, "%d threads: workers and drainer running", nthreads);

    static int seen[NTOK];
    memset(seen, 0, sizeof seen);
    long foreign = 0, on_lists = 0, locked = 0;
    for (int slot = 0; slot < cpu_nr_slots(); slot++) {
        struct cpu_freelist *f = cpu_fl_at(base, slot);
        if ((f->tid_pops & CPU_FL_LOCKED) || spin_is_locked(&f->lock))
            locked++;
        void *o = f->head;
        for (long guard = 0; o && guard <= NTOK; guard++) {
            long k = index_of(o);
            if (k < 0) {
                foreign++;
                break;
            }
            seen[k]++;
            on_lists++;
            o = cpu_fl_next(o, OFS, RND);
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
    diag("%d threads, %s: %ld pops, %ld pushes, %ld refused, %ld installs, %ld drains took %ld, %ld left on lists",
         nthreads, cpu_use_rseq ? "rseq" : "lock fallback", ops_pop, ops_push, ops_refused, ops_install, drains,
         ops_drained, on_lists);
    is(errors, 0, "%d threads: no token handed out twice, no push to the wrong owner", nthreads);
    is(lost, 0, "%d threads: no token lost", nthreads);
    is(dup, 0, "%d threads: no token duplicated", nthreads);
    is(foreign, 0, "%d threads: nothing but tokens on the lists", nthreads);
    is(held, 0, "%d threads: no token left owned", nthreads);
    is(locked, 0, "%d threads: no list left locked by a drain", nthreads);
    ok(ops_pop > 0 && ops_push > 0 && ops_install > 0 && ops_refused > 0 && ops_drained > 0,
       "%d threads: pops, pushes, refusals, installs and drains all happened", nthreads);
    uint64_t counted_pops = 0;
    for (int slot = 0; slot < cpu_nr_slots(); slot++)
        counted_pops += cpu_fl_pops(base, slot);
    ok(counted_pops >= (uint64_t)ops_pop, "%d threads: the tids count every pop (%llu >= %ld)", nthreads,
       (unsigned long long)counted_pops, ops_pop);
    free(base);
}

int main(int argc, char **argv)
{
    confine_to_two_cpus();
    os_options_init();
    cpu_init();
    long ms = argc > 1 ? atol(argv[1]) : 1000;
    if (ms <= 0)
        ms = 1000;
    const char *tun = getenv("GLIBC_TUNABLES");
    int rseq_off = tun && strstr(tun, "glibc.pthread.rseq=0");
    diag("per-CPU freelists via %s (%d CPU ids)", cpu_use_rseq ? "rseq" : "the lock fallback", cpu_nr_ids);
    if (rseq_off)
        ok(!cpu_use_rseq, "rseq off by tunable: the lock fallback is used");
    if (argc > 2)
        for (int i = 2; i < argc; i++)
            run(atoi(argv[i]), ms);
    else {
        run(8, ms);
        run(64, ms);
    }
    return done_testing();
}
