/*
 * largeblocks — large blocks (5-25 MiB by default) allocated, written end to
 * end and freed in a loop, one or a few at a time.  An allocator that hands
 * such blocks straight back to the kernel on free (munmap, or madvise of
 * the whole range) faults and zeroes every page again on the next cycle;
 * one that keeps a recently freed large block for reuse (glibc raises its
 * mmap threshold after the first free) runs at memory bandwidth.
 *
 *     largeblocks [-n cycles] [-l live] [-m min] [-M max] [-S seed]
 *
 * Every 4 KiB of a block starts with a word naming the block and the page;
 * all are checked before free, and a mismatch exits with status 2.
 */
#include "bench.h"
#include <unistd.h>

static inline uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

struct block { unsigned char *p; size_t n; uint64_t id; };

static int corrupt;

static void fill(struct block *b)
{
    memset(b->p, (int)(b->id & 0xff), b->n);
    for (size_t off = 0; off + 8 <= b->n; off += 4096) {
        uint64_t w = b->id * 0x100000 + off / 4096;
        memcpy(b->p + off, &w, 8);
    }
}

static void verify(const struct block *b)
{
    for (size_t off = 0; off + 8 <= b->n; off += 4096) {
        uint64_t w, want = b->id * 0x100000 + off / 4096;
        memcpy(&w, b->p + off, 8);
        if (w != want) {
            fprintf(stderr, "largeblocks: corruption: block %p of %zu bytes, page at +%zu\n",
                    (void *)b->p, b->n, off);
            corrupt = 1;
            return;
        }
    }
    if (b->p[b->n - 1] != (unsigned char)(b->id & 0xff) && (b->n - 1) % 4096 >= 8) {
        fprintf(stderr, "largeblocks: corruption: block %p of %zu bytes, last byte\n",
                (void *)b->p, b->n);
        corrupt = 1;
    }
}

int main(int argc, char **argv)
{
    long cycles = 300;
    int live = 1;
    size_t lo = 5u << 20, hi = 25u << 20;
    uint64_t rng = 5;
    int c;
    while ((c = getopt(argc, argv, "n:l:m:M:S:")) != -1) {
        switch (c) {
        case 'n': cycles = atol(optarg); break;
        case 'l': live = atoi(optarg); break;
        case 'm': lo = bench_parse_size(optarg); break;
        case 'M': hi = bench_parse_size(optarg); break;
        case 'S': rng = strtoull(optarg, NULL, 0); break;
        default:
            fprintf(stderr, "usage: largeblocks [-n cycles] [-l live-blocks] [-m min] [-M max] [-S seed]\n");
            return 1;
        }
    }
    if (cycles < 0 || live < 1 || live > 64 || lo < 1 || hi < lo)
        return 1;
    struct block blocks[64] = { { 0 } };
    uint64_t t0 = bench_now_ns();
    size_t bytes = 0;
    for (long i = 0; i < cycles && !corrupt; i++) {
        struct block *b = &blocks[i % live];
        if (b->p) {
            verify(b);
            free(b->p);
        }
        b->n = lo + (size_t)(rnd(&rng) % (hi - lo + 1));
        b->id = (uint64_t)i + 1;
        b->p = malloc(b->n);
        if (!b->p) {
            fprintf(stderr, "largeblocks: malloc(%zu) failed\n", b->n);
            return 3;
        }
        fill(b);
        bytes += b->n;
    }
    for (int i = 0; i < live; i++)
        if (blocks[i].p) {
            verify(&blocks[i]);
            free(blocks[i].p);
        }
    double s = (double)(bench_now_ns() - t0) / 1e9;
    printf("largeblocks: cycles=%ld live=%d sizes=%zu-%zu: %.3f s, %.2f GB/s written\n",
           cycles, live, lo, hi, s, (double)bytes / s / 1e9);
    return corrupt ? 2 : 0;
}
