/*
 * idle_rss — does a program that goes idle get its memory back?  Allocate
 * 64 blocks of 1 MiB (malloc), write every page, free them all, then call
 * the allocator no more: sample the resident set from /proc/self/statm
 * every 100 ms for 3 s.  glibc returns large blocks at free (munmap); an
 * allocator that keeps freed memory for reuse returns it only if something
 * ages it while the program sleeps.
 *
 *     idle_rss [-n blocks] [-s MiB] [-o objects] [-t ms] [-i ms] [-T]
 *
 * -o: also this many small objects (16-328 bytes), allocated, written and
 * freed with the blocks.  -T: start and join a thread first, so that the
 * program has had threads of its own (slabkit starts its purger thread
 * only in such a program; a single-threaded one trims at free).
 *
 * Prints "idle_rss: base_mib=B peak_mib=P" and then one line per sample,
 * "idle_rss: t_ms=T rss_mib=R" (R: resident MiB above the start).
 */
#include "bench.h"
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

static void *noop(void *arg)
{
    return arg;
}

/* Resident bytes, read without stdio (which would allocate). */
static long rss_bytes(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *s = strchr(buf, ' ');
    return s ? atol(s + 1) * sysconf(_SC_PAGESIZE) : -1;
}

int main(int argc, char **argv)
{
    int nblocks = 64, opt, threaded = 0;
    long block_mib = 1, total_ms = 3000, every_ms = 100, nobjs = 0;
    while ((opt = getopt(argc, argv, "n:s:o:t:i:T")) != -1) {
        switch (opt) {
        case 'n': nblocks = atoi(optarg); break;
        case 's': block_mib = atol(optarg); break;
        case 'o': nobjs = atol(optarg); break;
        case 'T': threaded = 1; break;
        case 't': total_ms = atol(optarg); break;
        case 'i': every_ms = atol(optarg); break;
        default:
            fprintf(stderr, "usage: idle_rss [-n blocks] [-s MiB] [-o objects] [-t ms] [-i ms] [-T]\n");
            return 1;
        }
    }
    if (nblocks < 1 || nblocks > 4096 || block_mib < 1 || every_ms < 1 || nobjs < 0 || nobjs > 10000000) {
        fprintf(stderr, "idle_rss: bad arguments\n");
        return 1;
    }
    /* stdout's buffer first, so printing later allocates nothing new. */
    printf("idle_rss: blocks=%d block_mib=%ld\n", nblocks, block_mib);
    fflush(stdout);
    if (threaded) {
        pthread_t t;
        if (pthread_create(&t, NULL, noop, NULL) != 0 || pthread_join(t, NULL) != 0) {
            fprintf(stderr, "idle_rss: cannot start a thread\n");
            return 1;
        }
    }
    char **blk = calloc((size_t)nblocks, sizeof *blk);
    char **obj = nobjs ? calloc((size_t)nobjs, sizeof *obj) : NULL;
    if (!blk || (nobjs && !obj))
        return 1;
    long base = rss_bytes();
    size_t size = (size_t)block_mib << 20;
    for (int i = 0; i < nblocks; i++) {
        blk[i] = malloc(size);
        if (!blk[i]) {
            fprintf(stderr, "idle_rss: malloc failed\n");
            return 1;
        }
        for (size_t off = 0; off < size; off += 4096)
            blk[i][off] = (char)(i + 1);
    }
    for (long i = 0; i < nobjs; i++) {
        if (!(obj[i] = malloc(16 + (size_t)(i % 40) * 8))) {
            fprintf(stderr, "idle_rss: malloc failed\n");
            return 1;
        }
        memset(obj[i], 1, 16);
    }
    long peak = rss_bytes();
    for (int i = 0; i < nblocks; i++)
        free(blk[i]);
    for (long i = 0; i < nobjs; i++)
        free(obj[i]);
    free(blk);
    free(obj);
    printf("idle_rss: base_mib=%.1f peak_mib=%.1f\n", base / 1048576.0, (peak - base) / 1048576.0);
    fflush(stdout);
    /* Idle from here: sample, print at the end (no allocator calls). */
    enum { MAX_SAMPLES = 4096 };
    static long t_ms[MAX_SAMPLES], rss[MAX_SAMPLES];
    int ns = 0;
    uint64_t t0 = bench_now_ns();
    for (long t = 0; t <= total_ms && ns < MAX_SAMPLES; t += every_ms) {
        uint64_t due = t0 + (uint64_t)t * 1000000u;
        uint64_t now = bench_now_ns();
        if (due > now) {
            struct timespec ts = { (time_t)((due - now) / 1000000000u), (long)((due - now) % 1000000000u) };
            nanosleep(&ts, NULL);
        }
        t_ms[ns] = t;
        rss[ns++] = rss_bytes() - base;
    }
    for (int i = 0; i < ns; i++)
        printf("idle_rss: t_ms=%ld rss_mib=%.1f\n", t_ms[i], rss[i] / 1048576.0);
    return 0;
}
