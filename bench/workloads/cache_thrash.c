/*
 * cache_thrash — active false sharing, in the spirit of Hoard's cache-thrash:
 * every thread repeatedly allocates a small object, writes it many times and
 * frees it.  An allocator that hands two threads objects on the same cache
 * line at the same time makes every write a coherence miss, and the run
 * takes many times longer; one that keeps each thread's (or CPU's) small
 * objects apart runs at the speed of the write loop.
 *
 *     cache_thrash [-t threads] [-i iterations] [-r writes] [-s object-size]
 *
 * Each object is zeroed, incremented `writes` times byte by byte, and must
 * then hold writes mod 256 in every byte; anything else means two live
 * objects overlapped, reported with exit status 2.
 */
#include "bench.h"
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

static int nthreads = 2;
static long iterations = 1000, writes = 100000;
static size_t objsize = 8;
static pthread_barrier_t start;
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

static void *worker(void *arg)
{
    int self = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    for (long i = 0; i < iterations && !corrupt; i++) {
        volatile unsigned char *p = malloc(objsize);
        if (!p) {
            fprintf(stderr, "cache_thrash: malloc(%zu) failed\n", objsize);
            exit(3);
        }
        publish(self, (const void *)p);
        for (size_t k = 0; k < objsize; k++)
            p[k] = 0;
        for (long r = 0; r < writes; r++)
            for (size_t k = 0; k < objsize; k++)
                p[k]++;
        for (size_t k = 0; k < objsize; k++)
            if (p[k] != (unsigned char)writes) {
                fprintf(stderr, "cache_thrash: corruption: object %p byte %zu is %u, want %u\n",
                        (void *)p, k, p[k], (unsigned char)writes);
                corrupt = 1;
                break;
            }
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
            fprintf(stderr, "usage: cache_thrash [-t threads] [-i iterations] [-r writes] [-s object-size]\n");
            return 1;
        }
    }
    if (nthreads < 1 || iterations < 0 || writes < 0 || objsize < 1)
        return 1;
    uint64_t t0 = bench_now_ns();
    pthread_t *tid = calloc((size_t)nthreads, sizeof *tid);
    lines = aligned_alloc(64, (size_t)nthreads * sizeof *lines);
    if (!tid || !lines)
        return 3;
    memset(lines, 0, (size_t)nthreads * sizeof *lines);
    pthread_barrier_init(&start, NULL, (unsigned)nthreads);
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&tid[i], NULL, worker, (void *)(intptr_t)i)) {
            fprintf(stderr, "cache_thrash: pthread_create failed\n");
            return 3;
        }
    for (int i = 0; i < nthreads; i++)
        pthread_join(tid[i], NULL);
    pthread_barrier_destroy(&start);
    free(tid);
    free(lines);
    double s = (double)(bench_now_ns() - t0) / 1e9;
    printf("cache_thrash: threads=%d iterations=%ld writes=%ld size=%zu: %.3f s, "
           "shared_lines=%ld of %ld objects\n", nthreads, iterations, writes, objsize, s,
           atomic_load(&shared_iterations), (long)nthreads * iterations);
    return corrupt ? 2 : 0;
}
