/*
 * norseq_thread — a thread with no rseq of its own in a process that has
 * rseq (one that unregistered it, or was started by a raw clone) is still
 * served correctly.  Its per-CPU arrays are the dummy slot, and its slow
 * paths borrow the state of the CPU it runs on: it must never index past
 * a cache's per-CPU slow-path state (that was the next cache's metadata:
 * a hang on a lock that was really an object size).
 *
 * The thread unregisters its rseq, then allocates and frees 20,000 objects
 * of cache A, 20,000 kmalloc objects of mixed sizes and a few page blocks,
 * checking every fill; meanwhile the main thread does the same with rseq.
 * Afterwards cache B (created right after A, so its metadata follows A's)
 * is byte for byte what it was, A and B shrink to nothing, and slabinfo
 * agrees.  A watchdog fails the test instead of hanging.  Skips where the
 * process has no rseq (GLIBC_TUNABLES=glibc.pthread.rseq=0, valgrind).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "slabkit.h"
#include "tap.h"

static sk_cache_t *A, *B;
static long unregister_rc = -1, bad;

static void churn(unsigned seed)
{
    static __thread void *p[200];
    for (int round = 0; round < 100; round++) {
        for (int i = 0; i < 200; i++) {
            size_t n = (seed = seed * 1103515245u + 12345u) % 3000 + 1;
            unsigned char *q = (i & 1) ? sk_cache_alloc(A) : sk_malloc(n);
            if (!q) {
                __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
                continue;
            }
            size_t len = (i & 1) ? 64 : n;
            memset(q, i & 0xff, len);
            p[i] = q;
        }
        for (int i = 0; i < 200; i++) {
            unsigned char *q = p[i];
            size_t len = (i & 1) ? 64 : 1;
            for (size_t k = 0; q && k < len; k++)
                if (q[k] != (i & 0xff))
                    __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
            if (i & 1)
                sk_cache_free(A, q);
            else
                sk_free(q);
        }
        void *pg = sk_alloc_pages(1);
        if (pg)
            sk_free_pages(pg, 1);
    }
}

static void *without_rseq(void *arg)
{
    (void)arg;
    struct rseq *r = (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
    unregister_rc = syscall(SYS_rseq, r, __rseq_size < 32 ? 32 : __rseq_size, RSEQ_FLAG_UNREGISTER, RSEQ_SIG);
    if (unregister_rc != 0)
        unregister_rc = syscall(SYS_rseq, r, 32, RSEQ_FLAG_UNREGISTER, RSEQ_SIG);
    if (unregister_rc == 0)
        churn(7);
    return NULL;
}

int main(void)
{
    if (__rseq_size < 20 || ((struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset))->cpu_id >= 0x80000000u)
        skip_all("this process has no registered rseq");
    plan(6);
    bail_out_after(60, "norseq_thread hung (watchdog)");
    A = sk_cache_create("norseq-A", 64, 0, 0, NULL);
    B = sk_cache_create("norseq-B", 128, 0, 0, NULL);
    if (!A || !B)
        BAIL("sk_cache_create failed");
    struct sk_cache_info bi0;
    sk_cache_info("norseq-B", &bi0);
    unsigned char before[256];
    memcpy(before, B, sizeof before);

    pthread_t t;
    pthread_create(&t, NULL, without_rseq, NULL);
    churn(3);
    pthread_join(t, NULL);
    is(unregister_rc, 0, "the thread unregistered its rseq");
    is(bad, 0, "objects, kmalloc blocks and pages served to both threads, every fill intact");
    ok(!memcmp(before, B, sizeof before), "the next cache's metadata is untouched");
    struct sk_cache_info bi1;
    sk_cache_info("norseq-B", &bi1);
    is(bi1.object_size, bi0.object_size, "norseq-B still has its object size (%zu)", bi1.object_size);
    sk_cache_shrink(A);
    struct sk_cache_info ai;
    sk_cache_info("norseq-A", &ai);
    is(ai.active_objs + ai.num_slabs, 0, "norseq-A shrinks to nothing");
    ok(sk_cache_destroy(A) == 0 && sk_cache_destroy(B) == 0, "both caches destroyed");
    return done_testing();
}
