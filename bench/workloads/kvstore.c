/*
 * kvstore — a key-value server's heap, redis-style SET traffic: a table of
 * keys whose values are replaced in a loop (the old value freed, a new one
 * allocated and written), values of about 8 KiB, small key strings and
 * reply buffers beside them.  The working set stays the same size all run,
 * so an allocator that purges the freed values' pages (and faults them in
 * again for the next SET) pays system time for nothing; one that keeps
 * them resident runs at memory speed.
 *
 *     kvstore [-k keys] [-n sets] [-v value-bytes] [-S seed]
 *
 * Defaults: 16384 keys, 8 KiB values (+-12%), 300000 SETs: a 128 MiB
 * working set.  Every value starts with its key and version and ends with
 * a check byte; all are verified before free, and a mismatch exits with
 * status 2.
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

struct entry {
    char *key;
    unsigned char *val;
    size_t len;
    uint64_t version;
};

static int corrupt;

static void check(const struct entry *e, uint64_t k)
{
    uint64_t w[2];
    memcpy(w, e->val, sizeof w);
    if (w[0] != k || w[1] != e->version || e->val[e->len - 1] != (unsigned char)(k + e->version)) {
        fprintf(stderr, "kvstore: corruption: key %llu version %llu\n", (unsigned long long)k,
                (unsigned long long)e->version);
        corrupt = 1;
    }
}

static void set(struct entry *e, uint64_t k, size_t len)
{
    unsigned char *v = malloc(len);
    if (!v) {
        fprintf(stderr, "kvstore: malloc(%zu) failed\n", len);
        exit(3);
    }
    memset(v, (int)(k & 0xff), len);     /* the client's payload, written whole */
    uint64_t w[2] = { k, e->version + 1 };
    memcpy(v, w, sizeof w);
    v[len - 1] = (unsigned char)(k + e->version + 1);
    if (e->val) {
        check(e, k);
        free(e->val);
    }
    e->val = v;
    e->len = len;
    e->version++;
}

int main(int argc, char **argv)
{
    long keys = 16384, sets = 300000;
    size_t vlen = 8192;
    uint64_t rng = 11;
    int c;
    while ((c = getopt(argc, argv, "k:n:v:S:")) != -1) {
        switch (c) {
        case 'k': keys = atol(optarg); break;
        case 'n': sets = atol(optarg); break;
        case 'v': vlen = bench_parse_size(optarg); break;
        case 'S': rng = strtoull(optarg, NULL, 0); break;
        default:
            fprintf(stderr, "usage: kvstore [-k keys] [-n sets] [-v value-bytes] [-S seed]\n");
            return 1;
        }
    }
    if (keys < 1 || sets < 0 || vlen < 64)
        return 1;
    struct entry *tab = calloc((size_t)keys, sizeof *tab);
    if (!tab)
        return 3;
    uint64_t t0 = bench_now_ns();
    for (long k = 0; k < keys; k++) {
        char buf[32];
        int n = snprintf(buf, sizeof buf, "key:%08ld", k);
        tab[k].key = malloc((size_t)n + 1);
        if (!tab[k].key)
            return 3;
        memcpy(tab[k].key, buf, (size_t)n + 1);
        set(&tab[k], (uint64_t)k, vlen);
    }
    size_t spread = vlen / 8;                /* +-12% */
    for (long i = 0; i < sets && !corrupt; i++) {
        uint64_t r = rnd(&rng);
        uint64_t k = r % (uint64_t)keys;
        size_t len = vlen - spread + (size_t)((r >> 32) % (2 * spread + 1));
        /* The reply: a small buffer, built and freed per request. */
        char *reply = malloc(64);
        if (!reply)
            return 3;
        snprintf(reply, 64, "+OK %s", tab[k].key);
        set(&tab[k], k, len);
        free(reply);
    }
    for (long k = 0; k < keys; k++) {
        check(&tab[k], (uint64_t)k);
        free(tab[k].val);
        free(tab[k].key);
    }
    free(tab);
    double s = (double)(bench_now_ns() - t0) / 1e9;
    printf("kvstore: keys=%ld sets=%ld value=%zu: %.3f s, %.0f sets/s\n", keys, sets, vlen, s, (double)sets / s);
    return corrupt ? 2 : 0;
}
