/*
 * sizeclass — a single-threaded malloc/free loop per size class, reported
 * per class.  Two loops each: `pair` allocates and frees one object at a
 * time (the fast path when the per-thread or per-CPU cache hits), `batch`
 * allocates a batch of objects (1024, at most 1 MiB) and then frees them in
 * the same order (the refill and flush paths, a slab's worth of objects at
 * a time).
 *
 *     sizeclass [-n objects-per-class] [-k batch] [-s size,size,...]
 *
 * One line per size on stdout:
 *     sizeclass: size=64 pair_ns=9.81 batch_ns=14.20
 * (nanoseconds per malloc+free pair), then the total.  Each object is
 * tagged before it is freed and checked first; a mismatch exits with 2.
 */
#include "bench.h"
#include <unistd.h>

static const size_t default_sizes[] = {
    8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768,
    1024, 1536, 2048, 3072, 4096, 8192, 16384, 32768,
};

static int corrupt;

/* Keeps the compiler from pairing up malloc and free and deleting both. */
static inline void escape(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

static unsigned char *get(size_t n)
{
    unsigned char *p = malloc(n);
    if (!p) {
        fprintf(stderr, "sizeclass: malloc(%zu) failed\n", n);
        exit(3);
    }
    escape(p);
    return p;
}

static inline void tag(unsigned char *p, size_t n)
{
    uint64_t t = (uint64_t)(uintptr_t)p ^ n;
    memcpy(p, &t, sizeof t < n ? sizeof t : n);
    if (n > sizeof t)
        p[n - 1] = (unsigned char)n;
}

static inline void untag(unsigned char *p, size_t n)
{
    uint64_t t = (uint64_t)(uintptr_t)p ^ n, h = 0;
    size_t w = sizeof t < n ? sizeof t : n;
    memcpy(&h, p, w);
    if ((n > sizeof t && p[n - 1] != (unsigned char)n) || memcmp(&h, &t, w)) {
        if (corrupt++ < 10)
            fprintf(stderr, "sizeclass: corruption: object %p of %zu bytes lost its tag\n",
                    (void *)p, n);
    }
}

int main(int argc, char **argv)
{
    long per_class = 200000;
    int batch = 1024;
    size_t sizes[64];
    int nsizes = 0;
    int c;
    while ((c = getopt(argc, argv, "n:k:s:")) != -1) {
        switch (c) {
        case 'n': per_class = atol(optarg); break;
        case 'k': batch = atoi(optarg); break;
        case 's':
            for (char *tok = strtok(optarg, ","); tok && nsizes < 64; tok = strtok(NULL, ","))
                sizes[nsizes++] = bench_parse_size(tok);
            break;
        default:
            fprintf(stderr, "usage: sizeclass [-n objects-per-class] [-k batch] [-s size,size,...]\n");
            return 1;
        }
    }
    if (!nsizes) {
        nsizes = (int)(sizeof default_sizes / sizeof default_sizes[0]);
        memcpy(sizes, default_sizes, sizeof default_sizes);
    }
    if (per_class < 1 || batch < 1)
        return 1;
    for (int i = 0; i < nsizes; i++)
        if (sizes[i] < 1)
            return 1;
    unsigned char **live = calloc((size_t)batch, sizeof *live);
    if (!live)
        return 3;
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < nsizes && !corrupt; i++) {
        size_t n = sizes[i];
        /* Warm the class so the first slab's cost is not in `pair`. */
        unsigned char *w = get(n);
        tag(w, n);
        uint64_t a = bench_now_ns();
        for (long k = 0; k < per_class; k++) {
            unsigned char *p = get(n);
            tag(p, n);
            untag(p, n);
            free(p);
            if (corrupt)
                break;
        }
        uint64_t b = bench_now_ns();
        /* A batch holds at most 1 MiB, so big classes measure the
         * allocator rather than page faults on a huge working set. */
        int nb = batch;
        if ((size_t)nb * n > ((size_t)1 << 20))
            nb = (int)(((size_t)1 << 20) / n);
        if (nb < 16)
            nb = batch < 16 ? batch : 16;
        long rounds = (per_class + nb - 1) / nb;
        for (long r = 0; r < rounds && !corrupt; r++) {
            for (int k = 0; k < nb; k++) {
                live[k] = get(n);
                tag(live[k], n);
            }
            for (int k = 0; k < nb; k++) {
                untag(live[k], n);
                free(live[k]);
            }
        }
        uint64_t e = bench_now_ns();
        untag(w, n);
        free(w);
        printf("sizeclass: size=%zu pair_ns=%.2f batch_ns=%.2f\n", n,
               (double)(b - a) / (double)per_class,
               (double)(e - b) / (double)(rounds * nb));
    }
    free(live);
    printf("sizeclass: %d classes, %ld objects each: %.3f s\n", nsizes, per_class,
           (double)(bench_now_ns() - t0) / 1e9);
    return corrupt ? 2 : 0;
}
