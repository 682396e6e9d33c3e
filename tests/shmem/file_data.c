/*
 * file_data — sk_file keeps every byte: random writes at random offsets,
 * reads, holes, truncates down and up, checked against a plain array
 * model; then the same under swap (shmem_limit_mb=2 with a swap file, so
 * most of the 16 MiB file lives in swap) and with page_microopt=0.
 */
#include <sys/mman.h>

#include "passes.h"
#include "slabkit.h"
#include "shmem/shmem.h"

#define FILE_MAX (16u << 20)

static unsigned char *model;          /* the file's bytes, as they should be */
static size_t model_size;
static unsigned char *buf;
static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void *raw(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        BAIL("mmap");
    return p;
}

/* The whole file read back in pieces of random length equals the model. */
static int whole_file_matches(sk_file_t *f)
{
    if (sk_file_size(f) != (off_t)model_size)
        return 0;
    size_t pos = 0;
    while (pos < model_size) {
        size_t n = 1 + rnd() % (300u << 10);
        if (n > model_size - pos)
            n = model_size - pos;
        if (sk_file_pread(f, buf, n, (off_t)pos) != (ssize_t)n || memcmp(buf, model + pos, n))
            return 0;
        pos += n;
    }
    /* Past the end: nothing. */
    return sk_file_pread(f, buf, 10, (off_t)model_size) == 0;
}

static void fill(unsigned char *p, size_t n)
{
    unsigned char v = (unsigned char)rnd();
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(v + i * 7);
}

static void run_pass(int pass)
{
    memset(model, 0, FILE_MAX);
    model_size = 0;
    sk_file_t *f = sk_file_create("data");
    ok(f != NULL, "pass %d: sk_file_create", pass);
    if (!f)
        return;
    is(sk_file_size(f), 0, "pass %d: a new file is empty", pass);
    is(sk_file_pread(f, buf, 100, 0), 0, "pass %d: reading an empty file gives 0 bytes", pass);

    /* A hole: write far out, everything before reads as zeros. */
    memset(buf, 0xab, 100);
    is(sk_file_pwrite(f, buf, 100, 5 << 20), 100, "pass %d: write 100 bytes at 5 MiB", pass);
    memset(model + (5 << 20), 0xab, 100);
    model_size = (5 << 20) + 100;
    ok(whole_file_matches(f), "pass %d: the 5 MiB hole before them reads as zeros", pass);

    /* Random writes, some across page boundaries, some page-aligned and
     * page-sized (dd's shape), some growing the file. */
    int bad = 0;
    for (int i = 0; i < 3000; i++) {
        size_t off = rnd() % (FILE_MAX - 1), n;
        switch (rnd() % 4) {
        case 0: n = 1 + rnd() % 64; break;
        case 1: n = 1 + rnd() % 20000; break;
        case 2: off &= ~(size_t)4095; n = 4096; break;
        default: off &= ~(size_t)4095; n = 1u << 20; break;
        }
        if (off + n > FILE_MAX)
            n = FILE_MAX - off;
        fill(buf, n);
        if (sk_file_pwrite(f, buf, n, (off_t)off) != (ssize_t)n)
            bad++;
        memcpy(model + off, buf, n);
        if (off + n > model_size)
            model_size = off + n;
        if (i % 1000 == 999 && !whole_file_matches(f))
            bad++;
    }
    is(bad, 0, "pass %d: 3000 random writes read back exactly", pass);
    ok(whole_file_matches(f), "pass %d: whole file matches after the writes", pass);

    /* Random reads at random offsets, also straddling the end. */
    bad = 0;
    for (int i = 0; i < 2000; i++) {
        size_t off = rnd() % (model_size + 5000), n = 1 + rnd() % 50000;
        ssize_t want = off >= model_size ? 0 : (ssize_t)(off + n > model_size ? model_size - off : n);
        ssize_t got = sk_file_pread(f, buf, n, (off_t)off);
        if (got != want || (want > 0 && memcmp(buf, model + off, (size_t)want)))
            bad++;
    }
    is(bad, 0, "pass %d: 2000 random reads match the model", pass);

    /* Truncate down mid-page, then up: the cut bytes come back as zeros. */
    size_t cut = model_size / 3 + 1234;
    is(sk_file_truncate(f, (off_t)cut), 0, "pass %d: truncate down to %zu", pass, cut);
    memset(model + cut, 0, model_size - cut);
    model_size = cut;
    ok(whole_file_matches(f), "pass %d: file matches after truncating down", pass);
    is(sk_file_truncate(f, (off_t)cut + (3 << 20)), 0, "pass %d: truncate up by 3 MiB", pass);
    model_size = cut + (3 << 20);
    ok(whole_file_matches(f), "pass %d: truncated bytes and the new tail read as zeros", pass);
    /* A write past the end after a truncate: the gap is zeros. */
    memset(buf, 0x5a, 3);
    sk_file_pwrite(f, buf, 3, (off_t)model_size + 10000);
    memset(model + model_size + 10000, 0x5a, 3);
    model_size += 10003;
    ok(whole_file_matches(f), "pass %d: a write past the end leaves a zero gap", pass);

    /* Truncate frees pages: resident file pages go down to nothing. */
    lru_add_drain_all();
    struct shmem_stats st;
    is(sk_file_truncate(f, 0), 0, "pass %d: truncate to 0", pass);
    lru_add_drain_all();
    shmem_stats(&st);
    is(st.resident, 0, "pass %d: no resident file pages after truncate to 0", pass);
    is(st.active[0] + st.inactive[0] + st.batched, 0, "pass %d: no page left on the LRU", pass);
    is(st.swapped, 0, "pass %d: no swap slot left in use", pass);
    model_size = 0;
    ok(whole_file_matches(f), "pass %d: empty after truncate to 0", pass);

    /* Errors. */
    errno = 0;
    is(sk_file_pwrite(f, buf, 1, -1), -1, "pass %d: negative offset refused", pass);
    is(errno, EINVAL, "pass %d: with EINVAL", pass);
    is(sk_file_truncate(f, -5), -1, "pass %d: negative truncate refused", pass);

    /* Destroy returns everything; a file made after reuses its memory. */
    sk_file_pwrite(f, model, 1 << 20, 0);
    sk_file_destroy(f);
    lru_add_drain_all();
    shmem_stats(&st);
    is(st.resident + st.files, 0, "pass %d: destroy frees the pages and the file", pass);
}

int main(int argc, char **argv)
{
    static const char *const opts[] = { "", "shmem_limit_mb=2,swap_file=%s", "page_microopt=0" };
    int pass = passes_begin(argc, argv);
    bail_out_after(120, "file_data hung");
    model = raw(FILE_MAX);
    buf = raw(FILE_MAX);
    rng += (uint64_t)pass * 1000003;
    run_pass(pass);
    if (pass == 1) {
        struct shmem_stats st;
        shmem_stats(&st);
        ok(st.swapouts > 1000 && st.swapins > 100, "pass 1: the data went through swap (%lu out, %lu in)",
           st.swapouts, st.swapins);
    }
    passes_next(argv, pass, opts, 3);
}
