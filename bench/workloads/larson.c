/*
 * larson — server churn across threads, in the spirit of Larson and
 * Krishnan's server benchmark: each worker owns a lane of live objects and
 * repeatedly frees a random one and allocates a replacement of random size.
 * Workers live for one round only; in the next round a fresh set of threads
 * takes the lanes over, shifted by one, so most objects are freed by a
 * different thread from the one that allocated them, and every thread's
 * cached memory is orphaned when it exits.  The lanes start out filled by
 * the main thread, which frees nothing until the end: the classic
 * producer/consumer skew.
 *
 *     larson [-t threads] [-r rounds] [-n ops] [-s slots] [-m min] [-M max] [-S seed] [-p]
 *
 * Work is fixed (rounds x threads x ops), so elapsed time compares
 * allocators.  Every object carries a tag at both ends and a fill byte; a
 * mismatch before free is reported and exits 2.
 *
 * -p runs it as the published larson does (mimalloc-bench's larson.cpp,
 * Larson and Krishnan's): the main thread allocates every lane's blocks,
 * shuffles them across the lanes and frees and allocates 4 times as many
 * at random; then each lane's thread, after its ops, creates its own
 * successor on the same lane and exits (threads come and go all through
 * the run, none joined, as there), for `rounds` generations; sizes are
 * min..max-1; and each new block gets two bytes written ('a', then 'b'),
 * the only check being those two bytes at its free.  Without -p every
 * byte is written and checked, which costs every allocator the same and
 * shrinks the ratios between them, and rounds of threads are joined.
 */
#include "bench.h"
#include <pthread.h>
#include <unistd.h>

struct lane {
    unsigned char **obj; /* slots live objects; obj[i] has size[i] bytes */
    size_t *size;
    uint64_t rng;
    int gens;            /* -p: generations this lane has left */
};

static int nthreads = 4, rounds = 8, slots = 2000;
static long ops = 300000;
static size_t min_size = 8, max_size = 1000;
static struct lane *lanes;
static volatile int corrupt;
static int published;            /* -p */
static int generations_left;     /* -p: lanes still running */
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;

static inline uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Tag: which slot and size the object was made for, so a block handed out
 * twice or overlapping a neighbour shows as a wrong tag. */
static inline uint64_t tag_of(const void *p, size_t n) { return (uint64_t)(uintptr_t)p * 31 + n; }

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

static int check(const unsigned char *p, size_t n)
{
    uint64_t t = tag_of(p, n), h, e;
    if (n >= 16) {
        memcpy(&h, p, 8);
        memcpy(&e, p + n - 8, 8);
        if (h != t || e != ~t || (n >= 24 && p[n / 2] != (unsigned char)(t & 0xff)))
            return 0;
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(t & 0xff))
            return 0;
    return 1;
}

static void bad(const void *p, size_t n)
{
    fprintf(stderr, "larson: corruption: object %p of %zu bytes lost its pattern\n", p, n);
    corrupt = 1;
}

static unsigned char *make(size_t n)
{
    unsigned char *p = malloc(n);
    if (!p) {
        fprintf(stderr, "larson: malloc(%zu) failed\n", n);
        exit(3);
    }
    if (published) {
        volatile unsigned char *w = p;
        w[0] = 'a';
        (void)w[0];
        w[1] = 'b';
    } else {
        fill(p, n);
    }
    return p;
}

static int intact(const unsigned char *p, size_t n)
{
    return published ? p[0] == 'a' && p[1] == 'b' : check(p, n);
}

/* A block size drawn from r: min..max, or as the published larson
 * min..max-1 (min alone when they are equal). */
static size_t random_size(uint64_t r)
{
    size_t span = max_size - min_size + (published ? 0 : 1);
    return min_size + (size_t)((r >> 32) % (span ? span : 1));
}

/* Slot k of lane l gets a new block of n bytes (the old one freed). */
static void replace(struct lane *l, size_t k, size_t n)
{
    free(l->obj[k]);
    l->obj[k] = make(n);
    l->size[k] = n;
}

static void spawn(pthread_t *t, void *(*fn)(void *), void *arg)
{
    if (pthread_create(t, NULL, fn, arg)) {
        fprintf(stderr, "larson: pthread_create failed\n");
        exit(3);
    }
}

static void *worker(void *arg)
{
    struct lane *l = arg;
    uint64_t rng = l->rng;   /* a local copy: lanes share lines */
    for (long i = 0; i < ops && !corrupt; i++) {
        uint64_t r = rnd(&rng);
        size_t k = (size_t)(r % (uint64_t)slots);
        if (!intact(l->obj[k], l->size[k]))
            bad(l->obj[k], l->size[k]);
        replace(l, k, random_size(r));
    }
    l->rng = rng;
    return NULL;
}

/* -p: a lane's thread; after its ops it makes its successor and exits. */
static void *successor(void *arg)
{
    struct lane *l = arg;
    worker(l);
    if (--l->gens > 0 && !corrupt) {
        pthread_t t;
        spawn(&t, successor, l);   /* never joined, as the published larson's */
        return NULL;
    }
    pthread_mutex_lock(&done_lock);
    if (--generations_left == 0)
        pthread_cond_signal(&done_cond);
    pthread_mutex_unlock(&done_lock);
    return NULL;
}

/* -p: the published warm-up on the main thread: every block to a random
 * slot of any lane, then 4 frees and allocations per block at random. */
static void shuffle_and_churn(void)
{
    size_t total = (size_t)nthreads * (size_t)slots;
    uint64_t rng = 0x4141;
    for (size_t i = total; i > 1; i--) {
        size_t j = (size_t)(rnd(&rng) % i);
        struct lane *a = &lanes[(i - 1) / (size_t)slots], *b = &lanes[j / (size_t)slots];
        size_t ai = (i - 1) % (size_t)slots, bi = j % (size_t)slots;
        unsigned char *p = a->obj[ai];
        size_t n = a->size[ai];
        a->obj[ai] = b->obj[bi];
        a->size[ai] = b->size[bi];
        b->obj[bi] = p;
        b->size[bi] = n;
    }
    for (size_t c = 0; c < 4 * total; c++) {
        uint64_t r = rnd(&rng);
        replace(&lanes[(r % total) / (size_t)slots], (r % total) % (size_t)slots, random_size(r));
    }
}

/* -p: each lane's line of threads, rounds generations long; returns when
 * the last has ended. */
static void run_successions(void)
{
    shuffle_and_churn();
    generations_left = nthreads;
    for (int i = 0; i < nthreads; i++) {
        pthread_t t;
        lanes[i].gens = rounds;
        spawn(&t, successor, &lanes[i]);
    }
    pthread_mutex_lock(&done_lock);
    while (generations_left > 0)
        pthread_cond_wait(&done_cond, &done_lock);
    pthread_mutex_unlock(&done_lock);
}

/* Rounds of threads, joined; in round r thread i serves lane (i + r) %
 * nthreads. */
static void run_rounds(void)
{
    pthread_t *tid = calloc((size_t)nthreads, sizeof *tid);
    if (!tid)
        exit(3);
    for (int r = 0; r < rounds && !corrupt; r++) {
        for (int i = 0; i < nthreads; i++)
            spawn(&tid[i], worker, &lanes[(i + r) % nthreads]);
        for (int i = 0; i < nthreads; i++)
            pthread_join(tid[i], NULL);
    }
    free(tid);
}

static void usage(void)
{
    fprintf(stderr, "usage: larson [-t threads] [-r rounds] [-n ops-per-thread-per-round] "
                    "[-s slots-per-thread] [-m min-size] [-M max-size] [-S seed] [-p]\n");
    exit(1);
}

int main(int argc, char **argv)
{
    uint64_t seed = 4141;
    int c;
    while ((c = getopt(argc, argv, "t:r:n:s:m:M:S:p")) != -1) {
        switch (c) {
        case 't': nthreads = atoi(optarg); break;
        case 'r': rounds = atoi(optarg); break;
        case 'n': ops = atol(optarg); break;
        case 's': slots = atoi(optarg); break;
        case 'm': min_size = bench_parse_size(optarg); break;
        case 'M': max_size = bench_parse_size(optarg); break;
        case 'S': seed = strtoull(optarg, NULL, 0); break;
        case 'p': published = 1; break;
        default: usage();
        }
    }
    if (nthreads < 1 || rounds < 1 || slots < 1 || ops < 0 || min_size < 1 || max_size < min_size)
        usage();

    uint64_t t0 = bench_now_ns();
    lanes = calloc((size_t)nthreads, sizeof *lanes);
    if (!lanes)
        return 3;
    for (int i = 0; i < nthreads; i++) {
        struct lane *l = &lanes[i];
        l->obj = calloc((size_t)slots, sizeof *l->obj);
        l->size = calloc((size_t)slots, sizeof *l->size);
        if (!l->obj || !l->size)
            return 3;
        l->rng = seed * 0x100000001b3ull + (uint64_t)i;
        for (int k = 0; k < slots; k++) {
            size_t n = random_size(rnd(&l->rng));
            l->obj[k] = make(n);
            l->size[k] = n;
        }
    }
    if (published)
        run_successions();
    else
        run_rounds();
    for (int i = 0; i < nthreads; i++) {
        struct lane *l = &lanes[i];
        for (int k = 0; k < slots; k++) {
            if (!intact(l->obj[k], l->size[k]))
                bad(l->obj[k], l->size[k]);
            free(l->obj[k]);
        }
        free(l->obj);
        free(l->size);
    }
    free(lanes);
    double s = (double)(bench_now_ns() - t0) / 1e9;
    long total = (long)rounds * nthreads * ops;
    printf("larson: threads=%d rounds=%d ops=%ld slots=%d sizes=%zu-%zu: %.3f s, %.1f Mops/s\n",
           nthreads, rounds, total, slots, min_size, max_size, s, (double)total / s / 1e6);
    return corrupt ? 2 : 0;
}
