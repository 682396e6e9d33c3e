/*
 * mstorm — a mixed-size allocation storm.  Each thread keeps a window of
 * live objects whose sizes follow a server-like mix (mostly small, some
 * medium, a few up to 256 KiB) and replaces random ones; every so often a
 * burst frees half the window at once and refills it, the way a batch of
 * requests completes together.  One allocation in ten is calloc (which must
 * come back zeroed) and one in twenty is aligned_alloc with a cache-line
 * alignment (which must come back aligned), so the whole malloc family
 * is under the same load.
 *
 *     mstorm [-t threads] [-n ops] [-w window] [-b burst-every] [-M max-size] [-S seed]
 *
 * Each object is filled and tagged at both ends; a lost tag, a non-zero
 * calloc or a misaligned aligned_alloc is reported and exits with status 2.
 */
#include "bench.h"
#include <pthread.h>
#include <unistd.h>

struct slot { unsigned char *p; size_t n; };
struct worker { pthread_t tid; uint64_t rng; };

static int nthreads = 2, window = 4096;
static long ops = 400000, burst_every = 25000;
static size_t max_size = 256 * 1024;
static volatile int corrupt;

static inline uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t pick(uint64_t r)
{
    unsigned c = (unsigned)(r % 100);
    uint64_t v = r >> 8;
    size_t lo, hi;
    if (c < 55) lo = 8, hi = 128;
    else if (c < 85) lo = 129, hi = 1024;
    else if (c < 97) lo = 1025, hi = 16384;
    else lo = 16385, hi = max_size;
    if (hi > max_size) hi = max_size;
    if (lo > hi) lo = hi;
    return lo + (size_t)(v % (hi - lo + 1));
}

static inline uint64_t tag_of(const void *p, size_t n) { return (uint64_t)(uintptr_t)p * 0x9e37 + n; }

static void fail(const char *what, const void *p, size_t n)
{
    fprintf(stderr, "mstorm: corruption: %s: object %p of %zu bytes\n", what, p, n);
    corrupt = 1;
}

static void fill(unsigned char *p, size_t n)
{
    uint64_t t = tag_of(p, n);
    memset(p, (int)(t & 0xff), n);
    if (n >= 16) {
        memcpy(p, &t, 8);
        t = ~t;
        memcpy(p + n - 8, &t, 8);
    }
}

static void check(const struct slot *s)
{
    const unsigned char *p = s->p;
    size_t n = s->n;
    uint64_t t = tag_of(p, n), h, e;
    if (n >= 16) {
        memcpy(&h, p, 8);
        memcpy(&e, p + n - 8, 8);
        if (h != t || e != ~t || (n >= 24 && p[n / 2] != (unsigned char)(t & 0xff)))
            fail("lost its tag", p, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(t & 0xff)) {
            fail("lost its fill", p, n);
            return;
        }
}

static void make(struct slot *s, uint64_t r)
{
    size_t n = pick(r);
    unsigned kind = (unsigned)((r >> 40) % 20);
    unsigned char *p;
    if (kind < 2) {
        p = calloc(1, n);
        if (p)
            for (size_t i = 0; i < n; i += 61)
                if (p[i]) {
                    fail("calloc not zeroed", p, n);
                    break;
                }
    } else if (kind == 2) {
        /* Cache-line alignments only: libmimalloc2.0 (2.0.9) returns
         * misaligned blocks for some larger ones (mimalloc issue #700),
         * and this workload compares speed, not alignment corner cases. */
        size_t align = (size_t)16 << ((r >> 48) % 3); /* 16, 32, 64 */
        size_t sz = (n + align - 1) / align * align;   /* C11 wants a multiple */
        p = aligned_alloc(align, sz);
        if (p && ((uintptr_t)p & (align - 1)))
            fail("aligned_alloc misaligned", p, n);
    } else {
        p = malloc(n);
    }
    if (!p) {
        fprintf(stderr, "mstorm: allocation of %zu bytes failed\n", n);
        exit(3);
    }
    fill(p, n);
    s->p = p;
    s->n = n;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    struct slot *win = calloc((size_t)window, sizeof *win);
    if (!win)
        exit(3);
    for (int i = 0; i < window; i++)
        make(&win[i], rnd(&w->rng));
    for (long op = 1; op <= ops && !corrupt; op++) {
        uint64_t r = rnd(&w->rng);
        if (burst_every > 0 && op % burst_every == 0) {
            /* The storm: half the window freed in one go, then refilled. */
            int first = (int)(r % (uint64_t)window), half = window / 2;
            for (int i = 0; i < half; i++) {
                struct slot *s = &win[(first + i) % window];
                check(s);
                free(s->p);
            }
            for (int i = 0; i < half; i++)
                make(&win[(first + i) % window], rnd(&w->rng));
            continue;
        }
        struct slot *s = &win[r % (uint64_t)window];
        check(s);
        free(s->p);
        make(s, rnd(&w->rng));
    }
    for (int i = 0; i < window; i++) {
        check(&win[i]);
        free(win[i].p);
    }
    free(win);
    return NULL;
}

int main(int argc, char **argv)
{
    uint64_t seed = 7;
    int c;
    while ((c = getopt(argc, argv, "t:n:w:b:M:S:")) != -1) {
        switch (c) {
        case 't': nthreads = atoi(optarg); break;
        case 'n': ops = atol(optarg); break;
        case 'w': window = atoi(optarg); break;
        case 'b': burst_every = atol(optarg); break;
        case 'M': max_size = bench_parse_size(optarg); break;
        case 'S': seed = strtoull(optarg, NULL, 0); break;
        default:
            fprintf(stderr, "usage: mstorm [-t threads] [-n ops-per-thread] [-w window] "
                            "[-b burst-every] [-M max-size] [-S seed]\n");
            return 1;
        }
    }
    if (nthreads < 1 || window < 2 || ops < 0 || max_size < 16)
        return 1;
    uint64_t t0 = bench_now_ns();
    struct worker *w = calloc((size_t)nthreads, sizeof *w);
    if (!w)
        return 3;
    for (int i = 0; i < nthreads; i++) {
        w[i].rng = seed * 0x100000001b3ull + (uint64_t)i * 0x632be5ab;
        if (pthread_create(&w[i].tid, NULL, run, &w[i])) {
            fprintf(stderr, "mstorm: pthread_create failed\n");
            return 3;
        }
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(w[i].tid, NULL);
    free(w);
    double s = (double)(bench_now_ns() - t0) / 1e9;
    printf("mstorm: threads=%d ops=%ld window=%d burst-every=%ld max=%zu: %.3f s, %.2f Mops/s\n",
           nthreads, (long)nthreads * ops, window, burst_every, max_size, s,
           (double)nthreads * (double)ops / s / 1e6);
    return corrupt ? 2 : 0;
}
