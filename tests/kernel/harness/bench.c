/*
 * bench.c — a driver for the kernel radix-tree harness's own benchmark
 * (benchmark.c: insertion, tagging, iteration and deletion over trees of
 * 1 Ki and 1 Mi entries in 11 strides), and for its bulk calls against
 * single ones, linked either with the harness's stand-in allocator or with
 * slabkit's replacement (tests/kernel/harness/run --bench builds both).
 *
 *   bench radix   the harness's benchmark; prints its ns lines and a
 *                 total of insertion and deletion ns (what allocates)
 *   bench bulk    ns per object of 64-object kmem_cache_alloc_bulk +
 *                 kmem_cache_free_bulk, and of 64 kmem_cache_alloc +
 *                 kmem_cache_free, on a 256-byte cache (the size of a
 *                 radix_tree_node with SHIFT 3 is far smaller; a maple
 *                 node's is 256)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <linux/slab.h>
#include <linux/radix-tree.h>

#include "test.h"

void benchmark(void);

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void bulk(void)
{
    enum { BATCH = 64, ROUNDS = 20000 };
    void *p[BATCH];
    struct kmem_cache *c = kmem_cache_create("bench_node", 256, 0, SLAB_PANIC, NULL);
    /* Warm both paths once. */
    for (int r = 0; r < 100; r++) {
        if (kmem_cache_alloc_bulk(c, GFP_KERNEL, BATCH, p) != BATCH)
            abort();
        kmem_cache_free_bulk(c, BATCH, p);
    }
    double t0 = now_ns();
    for (int r = 0; r < ROUNDS; r++) {
        if (kmem_cache_alloc_bulk(c, GFP_KERNEL, BATCH, p) != BATCH)
            abort();
        kmem_cache_free_bulk(c, BATCH, p);
    }
    double t1 = now_ns();
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < BATCH; i++)
            if (!(p[i] = kmem_cache_alloc(c, GFP_KERNEL)))
                abort();
        for (int i = 0; i < BATCH; i++)
            kmem_cache_free(c, p[i]);
    }
    double t2 = now_ns();
    printf("bulk %.2f ns/object\nsingle %.2f ns/object\n", (t1 - t0) / ((double)ROUNDS * BATCH),
           (t2 - t1) / ((double)ROUNDS * BATCH));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench radix|bulk\n");
        return 2;
    }
    rcu_register_thread();
    radix_tree_init();
    if (!strcmp(argv[1], "bulk")) {
        bulk();
    } else {
        test_verbose = 2;
        benchmark();
    }
    rcu_unregister_thread();
    return 0;
}
