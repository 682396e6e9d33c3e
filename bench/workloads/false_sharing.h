/*
 * false_sharing.h — the two false-sharing workloads in the spirit of
 * Hoard's cache-thrash (active) and cache-scratch (passive); the programs
 * differ only in what the main thread does first (see cache_thrash.c and
 * cache_scratch.c).
 *
 *     NAME [-t threads] [-i iterations] [-r writes] [-s object-size]
 *
 * Each worker repeatedly allocates a small object, zeroes it, increments
 * every byte `writes` times, checks that every byte holds writes mod 256
 * (anything else means two live objects overlapped: exit status 2) and
 * frees it.  The false sharing the allocator set up is counted whatever
 * the machine's caches make of it (bench.h, bench_lines_publish).
 */
#include "bench.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

static const char *fs_name;
static bool fs_passive;
static int nthreads = 2;
static long iterations = 1000, writes = 100000;
static size_t objsize = 8;
static pthread_barrier_t start;
static volatile int corrupt;
static void **seed;       /* passive: seed[i], worker i's object, allocated by main */
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
            fprintf(stderr, "%s: corruption: object %p byte %zu is %u, want %u\n", fs_name,
                    (void *)p, k, p[k], (unsigned char)writes);
            corrupt = 1;
            return;
        }
}

static void *worker(void *arg)
{
    int self = (int)(intptr_t)arg;
    pthread_barrier_wait(&start);
    if (fs_passive)
        free(seed[self]);   /* the main thread's object: where does it go next? */
    for (long i = 0; i < iterations && !corrupt; i++) {
        volatile unsigned char *p = malloc(objsize);
        if (!p) {
            fprintf(stderr, "%s: malloc(%zu) failed\n", fs_name, objsize);
            exit(3);
        }
        publish(self, (const void *)p);
        scribble(p);
        publish(self, NULL);
        free((void *)p);
    }
    return NULL;
}

static int false_sharing_main(int argc, char **argv, const char *name, bool passive)
{
    fs_name = name;
    fs_passive = passive;
    int c;
    while ((c = getopt(argc, argv, "t:i:r:s:")) != -1) {
        switch (c) {
        case 't': nthreads = atoi(optarg); break;
        case 'i': iterations = atol(optarg); break;
        case 'r': writes = atol(optarg); break;
        case 's': objsize = bench_parse_size(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-t threads] [-i iterations] [-r writes] [-s object-size]\n", name);
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
    for (int i = 0; passive && i < nthreads; i++)
        if (!(seed[i] = malloc(objsize)))
            return 3;
    pthread_barrier_init(&start, NULL, (unsigned)nthreads);
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&tid[i], NULL, worker, (void *)(intptr_t)i)) {
            fprintf(stderr, "%s: pthread_create failed\n", name);
            return 3;
        }
    for (int i = 0; i < nthreads; i++)
        pthread_join(tid[i], NULL);
    pthread_barrier_destroy(&start);
    free(tid);
    free(seed);
    free(lines);
    double s = (double)(bench_now_ns() - t0) / 1e9;
    printf("%s: threads=%d iterations=%ld writes=%ld size=%zu: %.3f s, "
           "shared_lines=%ld of %ld objects\n", name, nthreads, iterations, writes, objsize, s,
           atomic_load(&shared_iterations), (long)nthreads * iterations);
    return corrupt ? 2 : 0;
}
