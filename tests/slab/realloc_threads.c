/*
 * realloc_threads — buffers grown by sk_realloc on many threads at once,
 * each finished buffer freed by another thread, while every thread also
 * churns objects of the classes the buffers pass through.  The moves of
 * objects of 1 KiB and up put the outgrown object straight back on its
 * slab's freelist (sk_realloc, slab_free_cold: a cmpxchg on a slab that may
 * be frozen to this CPU or another) whenever this CPU's array of its class
 * holds an object, which the churn keeps so; meanwhile the other threads
 * refill their arrays from, and flush them to, the same slabs.
 *
 *  - every buffer keeps every byte through its moves and its hand-over (a
 *    pattern of owner, round and offset, checked before the free);
 *  - no object is handed out twice: a buffer's first word names it, and
 *    the churned objects are written and checked while held;
 *  - at the end, after sk_trim, every kmalloc class is back to its count
 *    from the start (nothing stranded on a slab or lost).
 * Eight threads on however many CPUs there are, so they preempt one
 * another inside the slow paths.
 *
 * TSAN: yes  (smaller: fewer rounds)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "slabkit.h"
#include "kmalloc_counts.h"
#include "tap.h"

#define THREADS 8
#ifdef SK_TSAN
#define ROUNDS 150
#else
#define ROUNDS 4000
#endif
#define START 1100          /* kmalloc-1280: the first move is a cold one */
#define TOP (20 << 10)      /* grown to past the classes, into kblocks */
#define CHURN 4             /* objects held per churned class */

static const size_t churn_sizes[] = { 1300, 1700, 2300, 3500, 5000, 7000, 9500, 13000 };
#define NCHURN (sizeof churn_sizes / sizeof churn_sizes[0])

/* One slot per thread: the buffer its left neighbour finished, for it to
 * check and free. */
static struct {
    pthread_mutex_t lock;
    unsigned char *buf;
    size_t len;
    unsigned owner, round;
} mailbox[THREADS];

static long bad, handed, freed_by_other;

static inline unsigned char byte_of(unsigned owner, unsigned round, size_t i)
{
    return (unsigned char)(owner * 37 + round * 11 + i * 131 + (i >> 9));
}

static void check_and_free(unsigned char *b, size_t len, unsigned owner, unsigned round)
{
    uint64_t tag;
    memcpy(&tag, b, sizeof tag);
    if (tag != ((uint64_t)owner << 32 | round))
        __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
    for (size_t i = sizeof tag; i < len; i++)
        if (b[i] != byte_of(owner, round, i)) {
            __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
            break;
        }
    sk_free(b);
}

/* Take the buffer waiting in slot `t`, if any, and free it. */
static void collect(unsigned t)
{
    pthread_mutex_lock(&mailbox[t].lock);
    unsigned char *b = mailbox[t].buf;
    size_t len = mailbox[t].len;
    unsigned owner = mailbox[t].owner, round = mailbox[t].round;
    mailbox[t].buf = NULL;
    pthread_mutex_unlock(&mailbox[t].lock);
    if (b) {
        check_and_free(b, len, owner, round);
        __atomic_fetch_add(&freed_by_other, 1, __ATOMIC_RELAXED);
    }
}

static void *worker(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg, next = (me + 1) % THREADS;
    unsigned char *held[NCHURN][CHURN] = { { NULL } };
    for (unsigned round = 0; round < ROUNDS; round++) {
        /* Churn: replace one object of every class, keeping the arrays of
         * the buffers' classes stocked. */
        for (unsigned k = 0; k < NCHURN; k++) {
            unsigned char **h = &held[k][round % CHURN];
            if (*h && ((*h)[0] != (unsigned char)me || (*h)[churn_sizes[k] - 1] != (unsigned char)k))
                __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
            sk_free(*h);
            *h = sk_malloc(churn_sizes[k]);
            if (!*h)
                BAIL("sk_malloc(%zu) failed", churn_sizes[k]);
            (*h)[0] = (unsigned char)me;
            (*h)[churn_sizes[k] - 1] = (unsigned char)k;
        }
        /* Grow a buffer a third at a time, writing what each step adds. */
        size_t len = START + (round * 7) % 64;
        unsigned char *b = sk_malloc(len);
        if (!b)
            BAIL("sk_malloc(%zu) failed", len);
        uint64_t tag = (uint64_t)me << 32 | round;
        memcpy(b, &tag, sizeof tag);
        for (size_t i = sizeof tag; i < len; i++)
            b[i] = byte_of(me, round, i);
        while (len < TOP) {
            size_t more = len + len / 3;
            unsigned char *q = sk_realloc(b, more);
            if (!q)
                BAIL("sk_realloc(%zu) failed", more);
            for (size_t i = len; i < more; i++)
                q[i] = byte_of(me, round, i);
            b = q;
            len = more;
        }
        /* Hand it to the right neighbour; free what the left one left. */
        collect(me);
        pthread_mutex_lock(&mailbox[next].lock);
        unsigned char *old = mailbox[next].buf;
        size_t olen = mailbox[next].len;
        unsigned oowner = mailbox[next].owner, oround = mailbox[next].round;
        mailbox[next].buf = b;
        mailbox[next].len = len;
        mailbox[next].owner = me;
        mailbox[next].round = round;
        pthread_mutex_unlock(&mailbox[next].lock);
        __atomic_fetch_add(&handed, 1, __ATOMIC_RELAXED);
        if (old)   /* the neighbour has not come for it yet */
            check_and_free(old, olen, oowner, oround);
    }
    for (unsigned k = 0; k < NCHURN; k++)
        for (unsigned j = 0; j < CHURN; j++)
            sk_free(held[k][j]);
    return NULL;
}

int main(void)
{
    struct kmalloc_counts before, after;
    kmalloc_counts_take(&before);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_mutex_init(&mailbox[t].lock, NULL);
    pthread_t tid[THREADS];
    for (unsigned t = 0; t < THREADS; t++)
        if (pthread_create(&tid[t], NULL, worker, (void *)(uintptr_t)t) != 0)
            BAIL("pthread_create failed");
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(tid[t], NULL);
    for (unsigned t = 0; t < THREADS; t++)
        collect(t);

    is(bad, 0, "%d threads, %d buffers each grown from %d bytes to %d KiB: every byte kept, no object shared",
       THREADS, ROUNDS, START, TOP >> 10);
    is(handed, (long)THREADS * ROUNDS, "every buffer was handed over");
    ok(freed_by_other > 0, "%ld of them freed by the thread they were handed to", freed_by_other);
    sk_trim();
    kmalloc_counts_take(&after);
    is(kmalloc_counts_differ(&before, &after), 0, "after sk_trim every kmalloc class is back to its count");
    return done_testing();
}
