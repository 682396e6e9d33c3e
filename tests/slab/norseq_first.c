/*
 * norseq_first — the per-CPU mode is the process's, whoever allocates
 * first, and a thread without rseq is served from the locked shared slot
 * at array speed, not slab speed.
 *
 * The main thread unregisters its rseq before the process's first
 * allocation, so slabkit initialises in a thread without rseq.  The mode
 * must still be rseq (glibc registered rseq for the process, and every
 * later thread has it): deciding "fallback" there would let the other
 * threads' sequences and this thread's locked operations meet on the same
 * arrays.  Then:
 *   - 4 threads with rseq and the main thread without churn kmalloc
 *     objects of several classes, each filled with its owner's pattern and
 *     checked before free, and every class comes back to its count;
 *   - 100,000 malloc/free pairs in the main thread take the slab slow path
 *     for under 1% of them (each pair used to refill and flush a batch);
 *   - with a CPU id past the arrays written into its (unregistered) rseq
 *     area, the thread is bounded to the shared slot: the same churn is
 *     intact (an unchecked index would reach past the array set).
 * Skips where the process has no rseq, or something allocated before main.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "slab/kmalloc.h"
#include "tap.h"
#include "kmalloc_counts.h"

static long bad;
static volatile int go;

static struct rseq *rseq_area(void)
{
    return (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
}

/* Allocate `rounds` x 64 blocks of mixed sizes, fill with a pattern of
 * `who`, check and free them. */
static void churn(unsigned who, int rounds)
{
    unsigned seed = who * 7919u + 1;
    unsigned char *p[64];
    size_t n[64];
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < 64; i++) {
            n[i] = (seed = seed * 1103515245u + 12345u) % 1500 + 1;
            p[i] = malloc(n[i]);
            if (!p[i]) {
                __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
                continue;
            }
            memset(p[i], (int)(who * 16 + (unsigned)i % 16), n[i]);
        }
        for (int i = 0; i < 64; i++) {
            for (size_t k = 0; p[i] && k < n[i]; k += 7)
                if (p[i][k] != (unsigned char)(who * 16 + (unsigned)i % 16)) {
                    __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
                    break;
                }
            free(p[i]);
        }
    }
}

static void *with_rseq(void *arg)
{
    if (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
        return NULL;      /* the warm-up round */
    churn((unsigned)(uintptr_t)arg, 400);
    return NULL;
}

static unsigned long slowpaths(const char *cache)
{
    struct sk_cache_info info;
    if (sk_cache_info(cache, &info) != 0)
        return 0;
    return info.stat[SK_ALLOC_SLOWPATH] + info.stat[SK_FREE_SLOWPATH];
}

int main(void)
{
    /* Nothing may allocate before this point: the first allocation of the
     * process must come from this thread, without rseq. */
    int was_ready = slab_ready();
    int had_rseq = __rseq_size >= 20 && (int)rseq_area()->cpu_id >= 0;
    long unreg = -1;
    if (!was_ready && had_rseq)
        unreg = syscall(SYS_rseq, rseq_area(), __rseq_size < 32 ? 32 : __rseq_size,
                        RSEQ_FLAG_UNREGISTER, RSEQ_SIG);
    void *first = malloc(64);
    int cpu_id_after = (int)rseq_area()->cpu_id;
    if (!had_rseq)
        skip_all("this process has no registered rseq");
    if (was_ready)
        skip_all("something allocated before main");
    plan(7);
    bail_out_after(120, "norseq_first hung (watchdog)");
    is(unreg, 0, "the main thread unregistered its rseq before the first allocation");
    ok(first && cpu_id_after < 0, "the first allocation came from a thread without rseq (cpu_id %d)", cpu_id_after);
    ok(cpu_use_rseq, "the process still runs its per-CPU arrays with rseq (the mode is the process's)");
    free(first);

    /* glibc keeps exited threads' stacks with their TLS vectors (from
     * malloc): make those exist before counting. */
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, with_rseq, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    struct kmalloc_counts before;
    kmalloc_counts_take(&before);
    __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, with_rseq, (void *)(uintptr_t)(i + 1));
    churn(9, 400);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    is(bad, 0, "4 threads with rseq and one without: every block intact");
    struct kmalloc_counts after;
    kmalloc_counts_take(&after);
    is(kmalloc_counts_differ(&before, &after), 0, "every kmalloc class is back to its count");

    /* Pairs without rseq stay on the shared slot's array. */
    unsigned long s0 = slowpaths("kmalloc-64");
    for (int i = 0; i < 100000; i++) {
        void *q = malloc(64);
        *(volatile char *)q = 1;
        free(q);
    }
    unsigned long slow = slowpaths("kmalloc-64") - s0;
    ok(slow < 1000, "100,000 malloc/free pairs without rseq: %lu slow paths (under 1%%)", slow);

    /* A CPU id past the arrays (CPU_MAX_IDS and beyond): bounded. */
    rseq_area()->cpu_id_start = 5000;
    rseq_area()->cpu_id = 5000;
    bad = 0;
    churn(11, 200);
    rseq_area()->cpu_id = (uint32_t)-1;
    rseq_area()->cpu_id_start = 0;
    is(bad, 0, "with cpu_id 5000 (past the arrays) the churn is served intact from the shared slot");
    return done_testing();
}
