/*
 * cache_scratch — passive false sharing, in the spirit of Hoard's
 * cache-scratch: the main thread allocates one small object per worker, all
 * in a row (so they likely share cache lines), and hands one to each.  Each
 * worker frees its object at once and then repeatedly allocates, writes
 * many times and frees an object of the same size.  An allocator that gives
 * the freed object straight back to the worker (a per-thread or per-CPU
 * free list that is LIFO over remote frees) keeps the workers writing to
 * one cache line; one that sends the object home to its owner does not.
 *
 *     cache_scratch [-t threads] [-i iterations] [-r writes] [-s object-size]
 *
 * Objects are checked after their writes (every byte must hold writes mod
 * 256); a mismatch means overlapping live objects and exits with status 2.
 */
#include "bench.h"
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

static int nthreads = 2;
static long iterations = 1000, writes = 100000;
static size_t objsize = 8;
static pthread_barrier_t start;
static void **seed; /* seed[i]: worker i's object, allocated by main */
static volatile int corrupt;

/* The false sharing the allocator set up, counted whatever the machine's
 * caches make of it (bench.h, bench_lines_publish). */
static struct bench_line_slot *lines;
static _Atomic long shared_iterations;

static void publish(int self, const void *p)
{
    if (bench_lines_publish(lines, nthreads, self, p, objsize))
        atomic_fetch_add_explicit(&shared_iterations, 1, memory_order_relaxed);
}

static void scribble(volatile unsigned char *p)
{
    for (size_t k = 0; k < objsize; k++)
        p[k] = 0;
    for (long r = 0; r < writes; r++)
        for (size_t k = 0; k < objsize; k++)
            p[k]++;
    for (size_t k = 0; k < objsize; k++)
        if (p[k] != (unsigned char)writes) {
            fprintf(stderr, "cache_scratch: corruption: object %p byte %zu is %u, want %u\n",
                    (void *)p, k, p[k], (unsigned char)writes);
            corrupt = 1;
            return;
        }
}

static void *worker(void *arg)
{
    int self = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    free(seed[self]); /* the main thread's object: where does it go next? */
    for (long i = 0; i < iterations && !corrupt; i++) {
        volatile unsigned char *p = malloc(objsize);
        if (!p) {
            fprintf(stderr, "cache_scratch: malloc(%zu) failed\n", objsize);
            exit(3);
        }
        publish(self, (const void *)p);
        scribble(p);
        publish(self, NULL);
        free((void *)p);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int c;
    while ((c = getopt(argc, argv, "t:i:r:s:")) != -1) {
        switch (c) {
        case 't': nthreads = atoi(optarg); break;
        case 'i': iterations = atol(optarg); break;
        case 'r': writes = atol(optarg); break;
        case 's': objsize = bench_parse_size(optarg); break;
        default:
            fprintf(stderr, "usage: cache_scratch [-t threads] [-i iterations] [-r writes] [-s object-size]\n");
            return 1;
        }
    }
    if (nthreads < 1 || iterations < 0 || writes < 0 || objsize < 1)
        return 1;
    uint64_t t0 = bench_now_ns();
    pthread_t *tid = calloc((size_t)nthreads, sizeof *tid);
    seed = calloc((size_t)nthreads, sizeof *seed);
    lines = aligned_alloc(64, (size_t)nthreads * sizeof *lines);
    if (!tid || !seed || !lines)
        return 3;
    memset(lines, 0, (size_t)nthreads * sizeof *lines);
    /* Allocated back to back by one thread: neighbours in most allocators. */
    for (int i = 0; i < nthreads; i++)
        if (!(seed[i] = malloc(objsize)))
            return 3;
    pthread_barrier_init(&start, NULL, (unsigned)nthreads);
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&tid[i], NULL, worker, (void *)(intptr_t)i)) {
            fprintf(stderr, "cache_scratch: pthread_create failed\n");
            return 3;
        }
    for (int i = 0; i < nthreads; i++)
        pthread_join(tid[i], NULL);
    pthread_barrier_destroy(&start);
    free(seed);
    free(tid);
    free(lines);
    double s = (double)(bench_now_ns() - t0) / 1e9;
    printf("cache_scratch: threads=%d iterations=%ld writes=%ld size=%zu: %.3f s, "
           "shared_lines=%ld of %ld objects\n", nthreads, iterations, writes, objsize, s,
           atomic_load(&shared_iterations), (long)nthreads * iterations);
    return corrupt ? 2 : 0;
}
