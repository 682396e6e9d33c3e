/*
 * mutex_exclusion — sk_mutex excludes: 64 and 512 threads confined to two
 * CPUs update a plain counter and a plain doubly linked ring under one
 * mutex (and, every eighth time, a second counter under a nested mutex),
 * in each spinning mode: on (the cancellable queue), mcs (the queue a
 * spinner cannot leave, unlock under the wait lock: mutex_mcs.c) and off.
 * On two CPUs the default lets at most one thread spin per mutex, so it
 * is also run with 8 spinners allowed: queues of several spinners,
 * preempted ones among them, which it leaves; mcs mode (3.13) has no cap,
 * so its queue holds several spinners in every run and waits them out.
 * A race shows up as a lost increment, a broken ring, or two threads
 * inside at once; a lost wake-up or a broken queue as a hang.
 *
 * TSAN: yes — the ThreadSanitizer build of this file checks that lock and
 * unlock order the plain accesses (no atomics protect the shared data).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>

#include "lock/mutex_internal.h"
#include "tap.h"
#include "cpus.h"

#define RING 32

struct ring_node { struct ring_node *next, *prev; int id; };

static sk_mutex_t outer = SK_MUTEX_INITIALIZER;
static sk_mutex_t inner;              /* zero-filled static: valid unlocked */
static long counter, nested_counter;  /* plain: only the mutexes protect them */
static int inside;                    /* threads inside `outer` right now */
static long violations;
static struct ring_node nodes[RING];
static struct ring_node head;
static int iters;

static void ring_init(void)
{
    head.next = head.prev = &head;
    for (int i = 0; i < RING; i++) {
        nodes[i].id = i;
        nodes[i].prev = head.prev;
        nodes[i].next = &head;
        head.prev->next = &nodes[i];
        head.prev = &nodes[i];
    }
}

/* Move the first node to the tail: six plain pointer stores that leave a
 * broken ring if two threads interleave them. */
static void ring_rotate(void)
{
    struct ring_node *n = head.next;
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = head.prev;
    n->next = &head;
    head.prev->next = n;
    head.prev = n;
}

/* Intact: RING nodes forward, RING backward, every id once. */
static int ring_ok(void)
{
    int seen[RING] = { 0 }, fwd = 0, back = 0;
    for (struct ring_node *n = head.next; n != &head && fwd <= RING; n = n->next, fwd++) {
        if (n->next->prev != n)
            return 0;
        seen[n->id]++;
    }
    for (struct ring_node *n = head.prev; n != &head && back <= RING; n = n->prev)
        back++;
    for (int i = 0; i < RING; i++)
        if (seen[i] != 1)
            return 0;
    return fwd == RING && back == RING;
}

static void *worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u + 1;
    for (int i = 0; i < iters; i++) {
        sk_mutex_lock(&outer);
        if (inside++ != 0)
            violations++;
        counter++;
        ring_rotate();
        if ((i & 7) == 0) {
            sk_mutex_lock(&inner);
            nested_counter++;
            sk_mutex_unlock(&inner);
        }
        inside--;
        sk_mutex_unlock(&outer);
        /* Private work of varying length, so arrivals spread out. */
        seed = seed * 1103515245u + 12345u;
        for (unsigned w = (seed >> 16) & 255; w; w--)
            __asm__ volatile("" ::: "memory");
    }
    return NULL;
}

static const char *mode_name(long spin)
{
    return spin == MUTEX_SPIN_MCS ? "mcs" : spin ? "1" : "0";
}

static void run(int nthreads, int n_iters, long spin)
{
    const char *mode = mode_name(spin);
    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    sk_opt.mutex_spin = spin;          /* no threads running: ordered by create */
    counter = nested_counter = violations = 0;
    iters = n_iters;
    ring_init();
    int made = 0;
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&t[i], &attr, worker, (void *)(uintptr_t)(i + 1)) == 0)
            made++;
    for (int i = 0; i < made; i++)
        pthread_join(t[i], NULL);
    if (made < nthreads)
        diag("only %d of %d threads could be created", made, nthreads);
    pthread_attr_destroy(&attr);
    free(t);
    is(counter, (long)made * n_iters, "%d threads, mutex_spin=%s: counter exact", nthreads, mode);
    ok(violations == 0 && ring_ok(), "%d threads, mutex_spin=%s: ring intact, one thread inside at a time",
       nthreads, mode);
    is(nested_counter, (long)made * ((n_iters + 7) / 8), "%d threads, mutex_spin=%s: nested counter exact",
       nthreads, mode);
    ok(outer.state == 0 && inner.state == 0 && outer.wait == 0 && inner.wait == 0 && outer.osq == NULL,
       "%d threads, mutex_spin=%s: both mutexes free, no sleeper registered, spin queue empty", nthreads,
       mode);
}

int main(void)
{
    confine_to_two_cpus();
    os_options_init();
#ifdef SK_TSAN
    const int scale = 8;               /* TSan runs about 10x slower */
#else
    const int scale = 1;
#endif
    static const long modes[] = { MUTEX_SPIN_ON, MUTEX_SPIN_MCS, MUTEX_SPIN_OFF };
    plan(32);
    for (int i = 0; i < 3; i++) {
        run(64, 40000 / scale, modes[i]);
        run(512, 4000 / scale, modes[i]);
    }
    lock_mutex_spin_limit(8);
    for (int i = 0; i < 2; i++) {
        diag("8 spinners allowed per mutex, mutex_spin=%s", mode_name(modes[i]));
        run(16, 20000 / scale, modes[i]);
    }
    lock_mutex_spin_limit(0);
    unsigned long st[MUTEX_STAT_NR];
    lock_mutex_stats(st);
    for (int i = 0; i < MUTEX_STAT_NR; i++)
        diag("%-14s %lu", mutex_stat_names[i], st[i]);
    sk_mutex_destroy(&outer);
    sk_mutex_destroy(&inner);
    return done_testing();
}
