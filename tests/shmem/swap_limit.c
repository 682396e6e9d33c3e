/*
 * swap_limit — with shmem_limit_mb=8 and a swap file, a 64 MiB file is
 * written, read back, rewritten at random and truncated: every byte
 * survives, resident file pages never pass the limit by more than one
 * write's look-ahead, and the process's RSS stays near the limit (its
 * start plus the limit plus a margin for the free pages the allocator
 * keeps), never near the file's size.  Swap slots are given back by
 * truncate and destroy.  A second pass does it with page_microopt=0.
 */
#include <sys/mman.h>

#include "passes.h"
#include "slabkit.h"
#include "shmem/shmem.h"
#include "statm.h"

#define LIMIT_MB 8
#define FILE_MB 64
#define MB (1u << 20)

static unsigned char value(size_t off, unsigned gen) { return (unsigned char)((off >> 12) * 13 + off + gen); }

int main(int argc, char **argv)
{
    static const char *const opts[] = { "-", "shmem_limit_mb=8,swap_file=%s",
                                        "shmem_limit_mb=8,swap_file=%s,page_microopt=0" };
    int pass = passes_begin(argc, argv);
    if (pass == 0)
        passes_next(argv, 0, opts, 3);     /* every pass runs under the limit */
    bail_out_after(120, "swap_limit hung");
    unsigned char *buf = mmap(NULL, MB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    /* Warm the allocator and measure where RSS starts. */
    sk_file_t *f = sk_file_create("big");
    if (!f || buf == MAP_FAILED)
        BAIL("setup");
    memset(buf, 1, MB);
    long rss0 = statm_bytes(STATM_RESIDENT);

    unsigned long limit = (unsigned long)LIMIT_MB * MB / 4096, worst = 0;
    long rss_max = 0;
    int bad = 0;
    for (size_t m = 0; m < FILE_MB; m++) {
        for (size_t i = 0; i < MB; i++)
            buf[i] = value(m * MB + i, 0);
        if (sk_file_pwrite(f, buf, MB, (off_t)(m * MB)) != MB)
            bad++;
        struct shmem_stats st;
        shmem_stats(&st);
        if (st.resident > worst)
            worst = st.resident;
        long rss = statm_bytes(STATM_RESIDENT);
        if (rss > rss_max)
            rss_max = rss;
    }
    is(bad, 0, "pass %d: %d MiB written in 1 MiB writes", pass, FILE_MB);
    ok(worst <= limit + 256, "pass %d: resident file pages at most the limit + one write (%lu <= %lu + 256)",
       pass, worst, limit);
    long margin = 16l * MB;
    ok(rss_max - rss0 <= (long)LIMIT_MB * MB + margin,
       "pass %d: RSS grew %ld MiB writing %d MiB (limit %d MiB, margin %ld MiB)", pass, (rss_max - rss0) >> 20,
       FILE_MB, LIMIT_MB, margin >> 20);
    struct shmem_stats st;
    shmem_stats(&st);
    ok(st.swapped >= (FILE_MB - LIMIT_MB) * 256 - 512, "pass %d: most of the file is in swap (%lu pages)", pass,
       st.swapped);

    /* A page swapped in is new to the LRU: one access leaves it inactive
     * and referenced, whether a read or a write brought it back. */
    ok(shmem_find_page(f, 0) == NULL && shmem_find_page(f, 1) == NULL, "pass %d: pages 0 and 1 are in swap", pass);
    sk_file_pread(f, buf, 1, 0);
    memset(buf, value(4096, 0), 1);
    sk_file_pwrite(f, buf, 1, 4096);
    lru_add_drain_all();
    int lru_ok = 1;
    for (int p = 0; p < 2; p++) {
        struct sk_page *pg = shmem_find_page(f, (uint64_t)p);
        uint32_t fl = pg ? pg_flags(pg) : 0;
        if (!pg || (fl & (PG_LRU | PG_ACTIVE | PG_REFERENCED)) != (PG_LRU | PG_REFERENCED))
            lru_ok = 0;
    }
    ok(lru_ok, "pass %d: swapped in by a read and by a write: inactive, referenced", pass);

    /* Read it all back: swapped pages come back intact. */
    bad = 0;
    for (size_t m = 0; m < FILE_MB; m++) {
        if (sk_file_pread(f, buf, MB, (off_t)(m * MB)) != MB)
            bad++;
        for (size_t i = 0; i < MB; i++)
            if (buf[i] != value(m * MB + i, 0)) {
                bad++;
                break;
            }
    }
    is(bad, 0, "pass %d: every byte read back through swap", pass);

    /* Random rewrites of single pages, then check those and the rest. */
    static unsigned char gen[FILE_MB * 256];
    uint64_t r = 12345 + (uint64_t)pass;
    for (int k = 0; k < 3000; k++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        size_t p = (r >> 33) % (FILE_MB * 256);
        gen[p]++;
        for (size_t i = 0; i < 4096; i++)
            buf[i] = value(p * 4096 + i, gen[p]);
        if (sk_file_pwrite(f, buf, 4096, (off_t)(p * 4096)) != 4096)
            bad++;
    }
    for (size_t p = 0; p < FILE_MB * 256; p++) {
        if (sk_file_pread(f, buf, 4096, (off_t)(p * 4096)) != 4096)
            bad++;
        for (size_t i = 0; i < 4096; i++)
            if (buf[i] != value(p * 4096 + i, gen[p])) {
                bad++;
                break;
            }
    }
    is(bad, 0, "pass %d: 3000 random page rewrites under swap read back", pass);
    shmem_stats(&st);
    ok(st.resident <= limit + 256, "pass %d: still within the limit after reading (%lu pages resident)", pass,
       st.resident);

    /* Truncate gives swap slots back; destroy gives back the rest. */
    unsigned long before = st.swapped;
    sk_file_truncate(f, (off_t)(FILE_MB / 2) * MB);
    shmem_stats(&st);
    ok(st.swapped < before && st.swapped + st.resident <= (FILE_MB / 2) * 256,
       "pass %d: truncate to half frees swap slots (%lu -> %lu)", pass, before, st.swapped);
    sk_file_destroy(f);
    lru_add_drain_all();
    shmem_stats(&st);
    is(st.swapped + st.resident, 0, "pass %d: destroy frees every page and swap slot", pass);
    passes_next(argv, pass, opts, 3);
}
