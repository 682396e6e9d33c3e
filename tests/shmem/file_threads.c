/*
 * file_threads — one sk_file, many threads: writers at random offsets in
 * stripes that share pages (stripes of 1000 bytes, so every page holds
 * several threads' bytes), each reading its own bytes back while the
 * others write; a second file truncated to 0 and rewritten over and over
 * while readers check that every byte they see is either a hole's zero
 * or the one value its offset may hold.  Then again under swap, where
 * reclaim writes pages out under the writers' feet, and with
 * page_microopt=0.
 * TSAN: yes
 */
#include <pthread.h>
#include <sys/mman.h>

#include "passes.h"
#include "slabkit.h"
#include "shmem/shmem.h"

#define NTHREADS 4
#define STRIPE 1000
#define FILE_BYTES (4u << 20)
#define CHURN_BYTES (256u << 10)

static sk_file_t *shared, *churn;
static int stop_churn;

static unsigned char churn_byte(size_t off) { return (unsigned char)(off * 31 + 7) | 1; }

struct worker { int id; int bad; unsigned char *mine; uint64_t rng; };

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Offsets of thread id's bytes: stripe k belongs to thread k % NTHREADS. */
static size_t stripe_start(int id, size_t k) { return (k * NTHREADS + (size_t)id) * STRIPE; }

static void *writer(void *arg)
{
    struct worker *w = arg;
    unsigned char buf[STRIPE];
    size_t stripes = FILE_BYTES / (STRIPE * NTHREADS);
    for (int i = 0; i < 3000; i++) {
        size_t k = rnd(&w->rng) % stripes, off = stripe_start(w->id, k);
        size_t in = rnd(&w->rng) % STRIPE, n = 1 + rnd(&w->rng) % (STRIPE - in);
        for (size_t j = 0; j < n; j++)
            buf[j] = (unsigned char)(rnd(&w->rng) | 1);
        if (sk_file_pwrite(shared, buf, n, (off_t)(off + in)) != (ssize_t)n)
            w->bad++;
        memcpy(w->mine + k * STRIPE + in, buf, n);
        /* Read back one of its stripes (pages others are writing). */
        size_t r = rnd(&w->rng) % stripes;
        /* Short past the end of the file (others make it grow); bytes
         * never written read as zeros (mine holds zeros there). */
        ssize_t got = sk_file_pread(shared, buf, STRIPE, (off_t)stripe_start(w->id, r));
        if (got < 0 || memcmp(buf, w->mine + r * STRIPE, (size_t)got))
            w->bad++;
        for (ssize_t j = got < 0 ? STRIPE : got; j < STRIPE; j++)
            if (w->mine[r * STRIPE + (size_t)j])
                w->bad++;
    }
    return NULL;
}

static void *churner(void *arg)
{
    (void)arg;
    static unsigned char buf[CHURN_BYTES];
    for (size_t i = 0; i < CHURN_BYTES; i++)
        buf[i] = churn_byte(i);
    while (!__atomic_load_n(&stop_churn, __ATOMIC_RELAXED)) {
        sk_file_truncate(churn, 0);
        for (size_t off = 0; off < CHURN_BYTES; off += 64 << 10)
            sk_file_pwrite(churn, buf + off, 64 << 10, (off_t)off);
    }
    return NULL;
}

static void *churn_reader(void *arg)
{
    struct worker *w = arg;
    unsigned char buf[8192];
    for (int i = 0; i < 3000; i++) {
        size_t off = rnd(&w->rng) % CHURN_BYTES, n = 1 + rnd(&w->rng) % sizeof buf;
        ssize_t got = sk_file_pread(churn, buf, n, (off_t)off);
        if (got < 0)
            w->bad++;
        for (ssize_t j = 0; j < got; j++)
            if (buf[j] && buf[j] != churn_byte(off + (size_t)j)) {
                w->bad++;
                break;
            }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    static const char *const opts[] = { "", "shmem_limit_mb=1,swap_file=%s", "page_microopt=0" };
    int pass = passes_begin(argc, argv);
    bail_out_after(300, "file_threads hung");
    shared = sk_file_create("shared");
    churn = sk_file_create("churn");
    if (!shared || !churn)
        BAIL("sk_file_create");
    struct worker w[NTHREADS + 2];
    pthread_t t[NTHREADS + 3];
    size_t mine_bytes = FILE_BYTES / NTHREADS;
    for (int i = 0; i < NTHREADS + 2; i++) {
        w[i].id = i;
        w[i].bad = 0;
        w[i].rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1 + pass * 10);
        w[i].mine = mmap(NULL, mine_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], NULL, writer, &w[i]);
    pthread_create(&t[NTHREADS], NULL, churner, NULL);
    pthread_create(&t[NTHREADS + 1], NULL, churn_reader, &w[NTHREADS]);
    pthread_create(&t[NTHREADS + 2], NULL, churn_reader, &w[NTHREADS + 1]);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    pthread_join(t[NTHREADS + 1], NULL);
    pthread_join(t[NTHREADS + 2], NULL);
    __atomic_store_n(&stop_churn, 1, __ATOMIC_RELAXED);
    pthread_join(t[NTHREADS], NULL);

    int bad = 0;
    for (int i = 0; i < NTHREADS; i++)
        bad += w[i].bad;
    is(bad, 0, "pass %d: %d writers sharing pages read their own bytes back while the others write", pass,
       NTHREADS);
    is(w[NTHREADS].bad + w[NTHREADS + 1].bad, 0,
       "pass %d: readers racing truncate-and-rewrite see only zeros or the right bytes", pass);

    /* Every thread's bytes, read back whole after the storm. */
    bad = 0;
    unsigned char *all = mmap(NULL, FILE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ssize_t got = sk_file_pread(shared, all, FILE_BYTES, 0);
    for (size_t k = 0; k < FILE_BYTES / (STRIPE * NTHREADS); k++)
        for (int i = 0; i < NTHREADS; i++) {
            size_t off = stripe_start(i, k);
            if (off + STRIPE <= (size_t)(got > 0 ? got : 0) && memcmp(all + off, w[i].mine + k * STRIPE, STRIPE))
                bad++;
        }
    is(bad, 0, "pass %d: every stripe holds its writer's last bytes", pass);

    sk_file_destroy(shared);
    sk_file_destroy(churn);
    lru_add_drain_all();
    struct shmem_stats st;
    shmem_stats(&st);
    is(st.resident + st.swapped + st.active[0] + st.inactive[0] + st.batched, 0,
       "pass %d: nothing left resident, swapped or on the LRU after destroy", pass);
    if (pass == 1)
        ok(st.swapouts > 0 && st.swapins > 0, "pass 1: pages went to swap and back (%lu out, %lu in)",
           st.swapouts, st.swapins);
    passes_next(argv, pass, opts, 3);
}
