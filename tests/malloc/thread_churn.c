/*
 * thread_churn.c — nothing leaks when threads exit: 100,000 short threads,
 * in waves of WAVE at a time, each allocate and free objects of many
 * classes, free objects an earlier (now exited) thread allocated, and leave
 * some of their own for a later thread to free.  Per-CPU, not per-thread,
 * caches mean RSS after a warm-up stays flat to the end.
 *
 * Measured from /proc/self/statm: RSS after the first WARM threads, then at
 * the end; it may not grow by more than SLACK (a leak of 24 bytes a thread
 * would already be 2 MiB).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "statm.h"
#include "tap.h"

#define THREADS 100000
#define WARM 10000
#define WAVE 8
#define HANDOFF 4             /* objects a thread leaves for a later one */
#define SLACK (2L << 20)

struct slot {
    void *obj[HANDOFF];       /* left by the previous thread in this slot */
    size_t len[HANDOFF];
    unsigned seed;
    int bad;                  /* a handed-off object came back changed */
};

static struct slot slots[WAVE];

static void stamp(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i += 61)
        p[i] = (unsigned char)(seed + i);
}

static int stamped(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i += 61)
        if (p[i] != (unsigned char)(seed + i))
            return 0;
    return 1;
}

static void *worker(void *arg)
{
    struct slot *s = arg;
    unsigned seed = s->seed;
    /* Free what the thread before us in this slot left (it has exited). */
    for (int i = 0; i < HANDOFF; i++) {
        if (s->obj[i] && !stamped(s->obj[i], s->len[i], seed - WAVE + (unsigned)i))
            s->bad = 1;
        free(s->obj[i]);
    }
    /* A burst of private work across the classes. */
    void *mine[24];
    for (int i = 0; i < 24; i++) {
        size_t n = (size_t)16 << (i % 9);           /* 16 B .. 4 KiB */
        mine[i] = malloc(n + (seed % 7) * 8);
        if (mine[i])
            memset(mine[i], i, n);
    }
    void *big = malloc(64 * 1024 + (seed % 3) * 4096);
    if (big)
        memset(big, 1, 4096);
    for (int i = 23; i >= 0; i--)
        free(mine[i]);
    free(big);
    /* Leave a few for the next thread in this slot. */
    for (int i = 0; i < HANDOFF; i++) {
        size_t n = 24 + (size_t)((seed * 13 + (unsigned)i * 101) % 1000);
        s->obj[i] = malloc(n);
        s->len[i] = n;
        if (s->obj[i])
            stamp(s->obj[i], n, seed + (unsigned)i);
    }
    return NULL;
}

static long statm(int field)
{
    return statm_bytes(field);
}

int main(void)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128 * 1024);

    long rss_warm = 0, vm_warm = 0;
    int create_fail = 0, bad = 0;
    unsigned next = 0;
    while (next < THREADS) {
        pthread_t tid[WAVE];
        int started[WAVE] = { 0 };
        for (int w = 0; w < WAVE; w++) {
            slots[w].seed = next + (unsigned)w;
            int rc = pthread_create(&tid[w], &attr, worker, &slots[w]);
            if (rc) {
                if (create_fail++ < 3)
                    diag("pthread_create: %s", strerror(rc));
            } else {
                started[w] = 1;
            }
        }
        for (int w = 0; w < WAVE; w++)
            if (started[w])
                pthread_join(tid[w], NULL);
        /* A slot whose thread did not start keeps last wave's objects;
         * re-stamp them so the next thread's check still holds. */
        for (int w = 0; w < WAVE; w++) {
            if (!started[w]) {
                for (int i = 0; i < HANDOFF; i++) {
                    free(slots[w].obj[i]);
                    slots[w].obj[i] = NULL;
                }
            }
            bad |= slots[w].bad;
        }
        next += WAVE;
        if (next == WARM) {
            rss_warm = statm(1);
            vm_warm = statm(0);
        }
    }
    long rss_end = statm(1), vm_end = statm(0);
    for (int w = 0; w < WAVE; w++)
        for (int i = 0; i < HANDOFF; i++)
            free(slots[w].obj[i]);

    ok(create_fail == 0, "100,000 threads started (%d failed)", create_fail);
    ok(!bad, "objects freed by a later thread came back unchanged");
    diag("RSS after %d threads: %ld KiB, after %d: %ld KiB (address space %ld -> %ld MiB)",
         WARM, rss_warm / 1024, THREADS, rss_end / 1024, vm_warm >> 20, vm_end >> 20);
    ok(rss_end - rss_warm <= SLACK, "RSS stays flat from thread %d to thread %d (grew %ld KiB, limit %ld KiB)",
       WARM, THREADS, (rss_end - rss_warm) / 1024, SLACK / 1024);
    return done_testing();
}
