/*
 * rseq_signals — the restart path of the rseq sequences, exercised on
 * purpose: signals delivered every few microseconds abort sequences in
 * flight (the kernel restarts them at the abort handler), while threads
 * pass unique tokens through one per-CPU array set.  Every token must be
 * found exactly once at the end.  With rseq, the signal handler itself
 * pops and pushes on the same arrays: an interrupted sequence restarts
 * after it, so even that cannot lose or duplicate a token (under the lock
 * fallback a handler could deadlock on the interrupted thread's lock, so
 * there the handler does nothing).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cpu/cpu.h"
#include "tap.h"
#include "cpus.h"

#define CAP 32
#define TOKENS 1024
#define THREADS 4

static cpu_arrays_t tab;
static uintptr_t tokens[TOKENS];
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static void *pool[TOKENS];
static int pool_n;
static atomic_int stop;
static atomic_long signals_seen, handler_ops;
/* Where a handler parks a token it could not push back (it may have been
 * migrated between its pop and its push, onto a CPU whose array is full):
 * lock-free, since the interrupted thread may hold any lock. */
static void *stash[TOKENS];
static atomic_int stash_n;

static void pool_put(void *t)
{
    pthread_mutex_lock(&pool_lock);
    pool[pool_n++] = t;
    pthread_mutex_unlock(&pool_lock);
}

static void *pool_get(void)
{
    void *t = NULL;
    pthread_mutex_lock(&pool_lock);
    if (pool_n)
        t = pool[--pool_n];
    pthread_mutex_unlock(&pool_lock);
    return t;
}

/* In rseq mode: take a token and put it back, from inside the signal. */
static void on_signal(int sig)
{
    (void)sig;
    atomic_fetch_add_explicit(&signals_seen, 1, memory_order_relaxed);
    if (!cpu_use_rseq)
        return;
    void *t;
    if (cpu_pop_fast(tab, &t)) {
        if (!cpu_push_fast(tab, t))
            stash[atomic_fetch_add(&stash_n, 1)] = t;
        atomic_fetch_add_explicit(&handler_ops, 1, memory_order_relaxed);
    }
}

static void *worker(void *arg)
{
    (void)arg;
    void *held[8];
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        int n = 0;
        for (; n < 8; n++) {
            void *t;
            if (!cpu_pop_fast(tab, &t) && !(t = cpu_pop_locked(tab)) && !(t = pool_get()))
                break;
            held[n] = t;
        }
        for (int i = 0; i < n; i++)
            if (cpu_push(tab, held[i]) <= 0)
                pool_put(held[i]);
    }
    return NULL;
}

/* Signals to each worker thread, every 20 us, for `ms` milliseconds and
 * until the workers have taken more than 1000 (a loaded machine schedules
 * them rarely), at most 20 s. */
static void storm(pthread_t *t, int n, long ms)
{
    struct timespec gap = { 0, 20000 };
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        for (int i = 0; i < n; i++)
            pthread_kill(t[i], SIGUSR1);
        nanosleep(&gap, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        long elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (elapsed >= ms && (atomic_load(&signals_seen) > 1000 || elapsed >= 20000))
            break;
    }
}

int main(void)
{
    os_options_init();
    cpu_init();
    confine_to_two_cpus();
    diag("per-CPU arrays via %s", cpu_use_rseq ? "rseq (the handler pops and pushes too)" : "the lock fallback");
    cpu_arrays_t mem = cpu_arrays_alloc();
    if (!mem)
        BAIL("cpu_arrays_alloc failed");
    tab = cpu_arrays_init(mem, CAP);
    for (int i = 0; i < TOKENS; i++) {
        tokens[i] = 0x1000 + (uintptr_t)i * 16;
        pool[pool_n++] = (void *)tokens[i];
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);

    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, worker, NULL))
            BAIL("pthread_create failed");
    storm(t, THREADS, 1500);
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    diag("%ld signals delivered, %ld pop+push pairs inside handlers",
         atomic_load(&signals_seen), atomic_load(&handler_ops));
    ok(atomic_load(&signals_seen) > 1000, "the storm delivered signals (%ld)", atomic_load(&signals_seen));

    /* Collect everything: arrays (remote drain) and the pool. */
    static int seen[TOKENS];
    void *buf[CAP];
    int dup = 0, foreign = 0, found = 0;
    for (int cpu = 0; cpu < cpu_nr_ids; cpu++) {
        unsigned k;
        while ((k = cpu_drain_remote(tab, cpu, buf, CAP)))
            for (unsigned i = 0; i < k; i++)
                pool[pool_n++] = buf[i];
    }
    for (int i = 0; i < atomic_load(&stash_n); i++)
        pool[pool_n++] = stash[i];
    for (int i = 0; i < pool_n; i++) {
        uintptr_t v = (uintptr_t)pool[i];
        if (v < 0x1000 || (v - 0x1000) % 16 || (v - 0x1000) / 16 >= TOKENS) {
            foreign++;
            continue;
        }
        if (seen[(v - 0x1000) / 16]++)
            dup++;
        else
            found++;
    }
    is(foreign, 0, "no value that was never a token came out");
    is(dup, 0, "no token came out twice");
    is(found, TOKENS, "every token came out");
    return done_testing();
}
