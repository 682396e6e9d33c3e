/*
 * largeblocks — large blocks (5-25 MiB by default) allocated, written end to
 * end and freed in a loop, one or a few at a time.  An allocator that hands
 * such blocks straight back to the kernel on free (munmap, or madvise of
 * the whole range) faults and zeroes every page again on the next cycle;
 * one that keeps a recently freed large block for reuse (glibc raises its
 * mmap threshold after the first free) runs at memory bandwidth.
 *
 *     largeblocks [-n cycles] [-l live] [-m min] [-M max] [-S seed] [-r]
 *
 * -r picks the block to replace at random and allocates the new block
 * before freeing the old one, as mimalloc-bench's malloc-large does
 * (`buffers[i] = std::make_unique<char[]>(n)`: the new array is made, then
 * the old one deleted); without it the blocks are replaced in turn, the
 * old one freed first, so the next request may take its place.  With -r
 * only a block's first and last pages are checked before its free: the
 * published program reads nothing back, and a read of every page
 * (about 0.3 ms a block, all cache misses) made each allocator's run
 * longer by the same amount and every ratio between them smaller.
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

static int sparse_check;   /* -r */

/* The next page after `off` whose first word names the block and the
 * page: every page, or with -r only the first and the last (the
 * published program reads nothing back); b->n when none is left. */
static size_t next_checked(const struct block *b, size_t off)
{
    size_t last = b->n < 8 ? 0 : (b->n - 8) & ~(size_t)4095;
    size_t next = sparse_check && off < last ? last : off + 4096;
    return next + 8 <= b->n ? next : b->n;
}

static uint64_t word_of(const struct block *b, size_t off) { return b->id * 0x100000 + off / 4096; }

/* The block's byte everywhere and the checked pages' words.  Without -r
 * a page at a time, its word then the rest (a memset of the whole block
 * first and then the words missed the cache on every page a second time);
 * with -r one memset of the whole block, as the published program's
 * zeroing (glibc's memset goes non-temporal for such sizes, and the peers
 * that fault every block in again fault differently page by page). */
static void put_word(struct block *b, size_t off)
{
    uint64_t w = word_of(b, off);
    memcpy(b->p + off, &w, 8);
}

static void fill(struct block *b)
{
    int byte = (int)(b->id & 0xff);
    if (sparse_check) {
        memset(b->p, byte, b->n);
        for (size_t off = 0; off + 8 <= b->n; off = next_checked(b, off))
            put_word(b, off);
        return;
    }
    for (size_t off = 0; off < b->n; off += 4096) {
        size_t len = b->n - off < 4096 ? b->n - off : 4096, at = 0;
        if (len >= 8) {
            put_word(b, off);
            at = 8;
        }
        memset(b->p + off + at, byte, len - at);
    }
}

static void verify(const struct block *b)
{
    for (size_t off = 0; off + 8 <= b->n; off = next_checked(b, off)) {
        uint64_t w;
        memcpy(&w, b->p + off, 8);
        if (w != word_of(b, off)) {
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
    int live = 1, random_order = 0;
    size_t lo = 5u << 20, hi = 25u << 20;
    uint64_t rng = 5;
    int c;
    while ((c = getopt(argc, argv, "n:l:m:M:S:r")) != -1) {
        switch (c) {
        case 'n': cycles = atol(optarg); break;
        case 'l': live = atoi(optarg); break;
        case 'm': lo = bench_parse_size(optarg); break;
        case 'M': hi = bench_parse_size(optarg); break;
        case 'S': rng = strtoull(optarg, NULL, 0); break;
        case 'r': random_order = sparse_check = 1; break;
        default:
            fprintf(stderr, "usage: largeblocks [-n cycles] [-l live-blocks] [-m min] [-M max] [-S seed] [-r]\n");
            return 1;
        }
    }
    if (cycles < 0 || live < 1 || live > 64 || lo < 1 || hi < lo)
        return 1;
    struct block blocks[64] = { { 0 } };
    uint64_t t0 = bench_now_ns();
    size_t bytes = 0;
    for (long i = 0; i < cycles && !corrupt; i++) {
        struct block *b = &blocks[random_order ? rnd(&rng) % (uint64_t)live : (uint64_t)(i % live)];
        struct block old = *b;
        if (old.p && !random_order) {
            verify(&old);
            free(old.p);
        }
        b->n = lo + (size_t)(rnd(&rng) % (hi - lo + 1));
        b->id = (uint64_t)i + 1;
        b->p = malloc(b->n);
        if (!b->p) {
            fprintf(stderr, "largeblocks: malloc(%zu) failed\n", b->n);
            return 3;
        }
        fill(b);
        if (old.p && random_order) {
            verify(&old);
            free(old.p);
        }
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
