/*
 * slicemask — the powerpc slice series' benchmark, in slabkit's arena: a
 * loop of sk_vm_map/sk_vm_unmap of single-slice regions alternating base
 * and 2 MiB page sizes, with thousands of regions live across the address
 * space, timed like `time ./slicemask` (real, user, sys) with
 * slice_mask_cache=1 (masks kept up to date) and =0 (masks recomputed from
 * the slice states on every request, the seed's "before").  Each variant
 * runs as a child process with SLABKIT_OPTIONS set, interleaved.
 *
 *   slicemask [--quick|--full] [--out FILE]     the table (default quick)
 *   slicemask --child LIVE ITERS                 one timed run (internal)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "slabkit.h"

#define SLICE ((size_t)64 << 20)

static int child(long live, long iters)
{
    void **p = calloc((size_t)live, sizeof *p);
    uint64_t s = 88172645463325252ull;
    for (long i = 0; i < live; i++)
        if (!(p[i] = sk_vm_map(SLICE, i & 1 ? (size_t)2 << 20 : 4096)))
            return 1;
    for (long k = 0; k < iters; k++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        long i = (long)(s % (uint64_t)live);
        if (sk_vm_unmap(p[i], SLICE) != 0)
            return 2;
        if (!(p[i] = sk_vm_map(SLICE, k & 1 ? (size_t)2 << 20 : 4096)))
            return 3;
    }
    return 0;
}

struct run { double real, user, sys; };

static int run_variant(const char *self, int cache, long live, long iters, struct run *r)
{
    uint64_t t0 = bench_now_ns();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        char opt[64], a[32], b[32];
        snprintf(opt, sizeof opt, "slice_mask_cache=%d", cache);
        setenv("SLABKIT_OPTIONS", opt, 1);
        snprintf(a, sizeof a, "%ld", live);
        snprintf(b, sizeof b, "%ld", iters);
        execl(self, self, "--child", a, b, (char *)NULL);
        _exit(127);
    }
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
        return -1;
    r->real = (double)(bench_now_ns() - t0) / 1e9;
    r->user = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
    r->sys = (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--child"))
        return child(atol(argv[2]), atol(argv[3]));
    int quick;
    const char *out = "results/slicemask.txt";
    bench_driver_args(argc, argv, &quick, &out);
    long live = 4096, iters = quick ? 200000 : 1000000;
    int rounds = quick ? 3 : 5;
    double v[2][3][8];
    for (int k = 0; k < rounds; k++)
        for (int c = 1; c >= 0; c--) {
            struct run r;
            bench_progress("round %d/%d, slice_mask_cache=%d", k + 1, rounds, c);
            if (run_variant("/proc/self/exe", c, live, iters, &r)) {
                fprintf(stderr, "slicemask: child failed\n");
                return 1;
            }
            v[c][0][k] = r.real;
            v[c][1][k] = r.user;
            v[c][2][k] = r.sys;
        }
    bench_progress_done();
    struct bench_stats st[2][3];
    for (int c = 0; c < 2; c++)
        for (int m = 0; m < 3; m++)
            st[c][m] = bench_summary(v[c][m], rounds);
    char buf[2048];
    int n = snprintf(buf, sizeof buf,
        "slicemask: %ld single-slice regions live (base and 2 MiB pages alternating), "
        "%ld unmap+map pairs; median of %d interleaved runs\n"
        "%-22s %9s %9s %9s\n"
        "%-22s %8.2fs %8.2fs %8.2fs\n"
        "%-22s %8.2fs %8.2fs %8.2fs\n"
        "%-22s %8.1f%% %8.1f%% %8.1f%%\n",
        live, iters, rounds, "", "real", "user", "sys",
        "slice_mask_cache=0", st[0][0].median, st[0][1].median, st[0][2].median,
        "slice_mask_cache=1", st[1][0].median, st[1][1].median, st[1][2].median,
        "change (1 vs 0)",
        100 * (st[1][0].median / st[0][0].median - 1),
        100 * (st[1][1].median / st[0][1].median - 1),
        100 * (st[1][2].median / st[0][2].median - 1));
    double faster = 100 * (1 - st[1][0].median / st[0][0].median);
    n += snprintf(buf + n, sizeof buf - (size_t)n, "cached masks: %.1f%% less real time (target >= 30%%; seed 36%%): %s\n",
                  faster, faster >= 30 ? "met" : "NOT met");
    fputs(buf, stdout);
    FILE *f = fopen(out, "w");
    if (f) {
        fputs(buf, f);
        fclose(f);
    }
    return 0;
}
