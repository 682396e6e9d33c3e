/*
 * swap_budget — sk_file pages under the memory budget (mem_limit_mb=24,
 * a swap file, no shmem_limit_mb): a 48 MiB file is written and read back.
 * The budget's direct reclaim (shmem_reclaim, before each write takes its
 * file lock) swaps the inactive tail out, so every write goes through,
 * every byte survives, and the charge stays within the limit.  A second
 * pass checks that without a swap file the writes fail cleanly (ENOMEM)
 * once the budget is spent, rather than pass it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "passes.h"
#include "slabkit.h"
#include "shmem/shmem.h"

#define FILE_MB 48
#define MB (1u << 20)

static unsigned char value(size_t off) { return (unsigned char)((off >> 12) * 29 + off); }

int main(int argc, char **argv)
{
    static const char *const opts[] = { "-", "mem_limit_mb=24,swap_file=%s", "mem_limit_mb=24" };
    int pass = passes_begin(argc, argv);
    if (pass == 0)
        passes_next(argv, 0, opts, 3);
    bail_out_after(120, "swap_budget hung");
    unsigned char *buf = mmap(NULL, MB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    sk_file_t *f = sk_file_create("budget");
    if (!f || buf == MAP_FAILED)
        BAIL("setup");
    struct sk_mem_budget b;
    sk_mem_budget(&b);
    size_t written = 0, peak = 0;
    int err = 0;
    for (size_t m = 0; m < FILE_MB; m++) {
        for (size_t i = 0; i < MB; i++)
            buf[i] = value(m * MB + i);
        errno = 0;
        ssize_t n = sk_file_pwrite(f, buf, MB, (off_t)(m * MB));
        if (n >= 0 && n < (ssize_t)MB)     /* a short write: the rest again */
            n = sk_file_pwrite(f, buf + n, MB - (size_t)n, (off_t)(m * MB) + n);
        if (n != MB) {
            err = n < 0 ? errno : 0;
            break;
        }
        written++;
        sk_mem_budget(&b);
        if (b.charged > peak)
            peak = b.charged;
    }
    struct shmem_stats st;
    shmem_stats(&st);
    if (pass == 1) {
        ok(written == FILE_MB, "a %u MiB file under a 24 MiB budget: every write went through (%zu MiB)", FILE_MB,
           written);
        ok(st.swapouts > 0 && peak <= b.limit,
           "its pages swapped out (%lu), the charge stayed within the limit (peak %.1f of %.1f MiB)", st.swapouts,
           (double)peak / MB, (double)b.limit / MB);
        int same = 1;
        for (size_t m = 0; m < FILE_MB && same; m++) {
            if (sk_file_pread(f, buf, MB, (off_t)(m * MB)) != MB)
                same = 0;
            for (size_t i = 0; same && i < MB; i++)
                same = buf[i] == value(m * MB + i);
        }
        ok(same, "and every byte reads back (%lu swapped in)", (shmem_stats(&st), st.swapins));
    } else {
        ok(written < FILE_MB && written >= 16 && err == ENOMEM,
           "without a swap file the writes stop at the budget: %zu MiB, then a short write and %s", written, strerrorname_np(err));
        ok(peak <= b.limit, "the charge stayed within the limit (peak %.1f of %.1f MiB)", (double)peak / MB,
           (double)b.limit / MB);
    }
    sk_file_destroy(f);
    passes_next(argv, pass, opts, 3);
}
