/*
 * realloc_grow — buffers grown by realloc a few bytes at a time, the way a
 * naive string builder or log line grows.  Many buffers grow side by side,
 * so in-place growth competes with the neighbours; each grows to a random
 * length up to the target, is checked end to end and freed, and starts
 * over.  With -g the buffers double instead (vector growth), which only
 * moves the work to realloc's copy and mremap paths.
 *
 *     realloc_grow [-b buffers] [-n appends] [-a max-append] [-T target] [-g] [-S seed]
 *
 * Every byte has a value derived from its position and the buffer's
 * generation; a byte that realloc lost or mangled is reported and the
 * program exits with status 2.
 */
#include "bench.h"
#include <unistd.h>

struct buf { unsigned char *p; size_t len, goal; uint32_t gen; };

static int nbufs = 64, doubling;
static long appends = 3000000;
static size_t max_append = 64, target = 128 * 1024;
static int corrupt;

static inline uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline unsigned char byte_at(const struct buf *b, size_t i)
{
    return (unsigned char)(i * 131 + (i >> 8) + b->gen * 7);
}

static void fail(const struct buf *b, size_t i)
{
    fprintf(stderr, "realloc_grow: corruption: buffer %p (length %zu) byte %zu is %u, want %u\n",
            (void *)b->p, b->len, i, b->p[i], byte_at(b, i));
    corrupt = 1;
}

static void verify(const struct buf *b)
{
    for (size_t i = 0; i < b->len; i++)
        if (b->p[i] != byte_at(b, i)) {
            fail(b, i);
            return;
        }
}

static void restart(struct buf *b, uint64_t *rng, uint32_t gen)
{
    b->p = NULL;
    b->len = 0;
    b->gen = gen;
    b->goal = target / 2 + (size_t)(rnd(rng) % (target / 2 + 1));
}

static void grow(struct buf *b, size_t add)
{
    size_t n = b->len + add;
    if (doubling) {
        /* Capacity doubles; realloc only when it is exceeded. */
        size_t cap = 16;
        while (cap < b->len)
            cap *= 2;
        if (b->p && n <= cap) {
            for (size_t i = b->len; i < n; i++)
                b->p[i] = byte_at(b, i);
            b->len = n;
            return;
        }
        while (cap < n)
            cap *= 2;
        n = b->len + add;
        add = cap; /* what to ask realloc for */
    } else {
        add = n;
    }
    unsigned char *q = realloc(b->p, add);
    if (!q) {
        fprintf(stderr, "realloc_grow: realloc(%zu) failed\n", add);
        exit(3);
    }
    b->p = q;
    /* The first and last old bytes must have come along. */
    if (b->len && (q[0] != byte_at(b, 0) || q[b->len - 1] != byte_at(b, b->len - 1)))
        fail(b, q[0] != byte_at(b, 0) ? 0 : b->len - 1);
    for (size_t i = b->len; i < n; i++)
        q[i] = byte_at(b, i);
    b->len = n;
}

int main(int argc, char **argv)
{
    uint64_t rng = 99;
    int c;
    while ((c = getopt(argc, argv, "b:n:a:T:gS:")) != -1) {
        switch (c) {
        case 'b': nbufs = atoi(optarg); break;
        case 'n': appends = atol(optarg); break;
        case 'a': max_append = bench_parse_size(optarg); break;
        case 'T': target = bench_parse_size(optarg); break;
        case 'g': doubling = 1; break;
        case 'S': rng = strtoull(optarg, NULL, 0); break;
        default:
            fprintf(stderr, "usage: realloc_grow [-b buffers] [-n appends] [-a max-append] "
                            "[-T target] [-g] [-S seed]\n");
            return 1;
        }
    }
    if (nbufs < 1 || appends < 0 || max_append < 1 || target < 2)
        return 1;
    uint64_t t0 = bench_now_ns();
    struct buf *bufs = calloc((size_t)nbufs, sizeof *bufs);
    if (!bufs)
        return 3;
    uint32_t gen = 0;
    long done = 0;
    for (int i = 0; i < nbufs; i++)
        restart(&bufs[i], &rng, gen++);
    for (long k = 0; k < appends && !corrupt; k++) {
        uint64_t r = rnd(&rng);
        struct buf *b = &bufs[r % (uint64_t)nbufs];
        grow(b, 1 + (size_t)((r >> 32) % max_append));
        if (b->len >= b->goal) {
            verify(b);
            free(b->p);
            restart(b, &rng, gen++);
            done++;
        }
    }
    for (int i = 0; i < nbufs; i++) {
        verify(&bufs[i]);
        free(bufs[i].p);
    }
    free(bufs);
    double s = (double)(bench_now_ns() - t0) / 1e9;
    printf("realloc_grow: buffers=%d appends=%ld max-append=%zu target=%zu %s: %ld completed, %.3f s\n",
           nbufs, appends, max_append, target, doubling ? "doubling" : "append", done, s);
    return corrupt ? 2 : 0;
}
