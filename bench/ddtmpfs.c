/*
 * ddtmpfs — seed 001's benchmark: dd to a tmpfs file of 1/10 of memory,
 * here to an sk_file (src/shmem), before and after the series.
 *
 * One "dd" creates a file, writes it in 1 MiB blocks (dd bs=1M) and, as
 * the seed's loop does between runs, removes it (sk_file_destroy).  Its
 * time is the writing, as dd reports; User, System and Elapsed are each
 * variant's processes' rusage and wall time, all dds included.  The
 * variants:
 *
 *   before   SLABKIT_OPTIONS=page_microopt=0: what the series removed,
 *            each patch slabkit has a path for
 *   after    the default
 *   --patches  instead: after, each patch's before alone (page_before=NAME)
 *            and all of them, rotated, one line each (docs/shmem.md)
 *   pcp=0    (--ablation, and --full) no per-CPU page lists: an ablation of slabkit's
 *            page allocator, not the seed's before (2014 kernels had them)
 *
 * SLABKIT_OPTIONS is read once per process, so each variant runs in
 * children that re-execute this program; runs go A B, B A, A B, ... so
 * drift on a shared machine lands on both alike.  Each child does one
 * untimed dd first (the memory faults in once per process, as a kernel's
 * memory is there before dd runs), then --iters timed ones.  The children
 * keep freed memory resident (dirty_max_mb above the file size, decay_ms
 * an hour): the kernel's buddy allocator keeps freed tmpfs pages too, and
 * otherwise each dd would measure page faults, not the allocator.  And
 * they use base-page slices (huge_slices=0): tmpfs pages were 4 KiB pages
 * in 2014, and on huge-page slices khugepaged's collapses made one dd in
 * ten about 7x slower at random (measured: 0.116 s against 0.016 s).
 *
 * Output: the seed's "loopdd Throughput" and "loopdd Time" tables (Min,
 * Mean, Stddev, Max; % against before: for throughput (x - before) /
 * before, for time (before - x) / before, as the seed's mmtests prints
 * them), the User/System/Elapsed lines, medians, and the seed's own
 * figures beside them; on stdout and in results/ddtmpfs.txt (--out).
 */
#include "bench.h"
#include "page/page.h"
#include "slabkit.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

enum variant { V_BEFORE, V_AFTER, V_NOPCP, V_NR };
static const char *const vname[V_NR] = { "before", "after", "pcp=0" };
static const char *const vlabel[V_NR] = { "before (page_microopt=0)", "after (default)", "pcp=0 (ablation)" };
static const char *const vopts[V_NR] = { "page_microopt=0", "", "pcp=0" };

#define BS (1u << 20)
#define MAX_SAMPLES 4096

/* Seed 001's figures (3.15.0-rc1 vanilla vs microopt-v1r11). */
static const double seed_tp[4][2] = { { 3993.6000, 4096.0000 }, { 4766.7200, 4896.4267 },
                                      { 164.5053, 167.7316 }, { 4812.8000, 5120.0000 } };
static const double seed_time[4][2] = { { 0.3521, 0.3317 }, { 0.3570, 0.3458 },
                                        { 0.0140, 0.0112 }, { 0.4230, 0.4083 } };
/* The seed's own % column (from unrounded values: kept as printed). */
static const double seed_tp_pct[4] = { 2.56, 2.72, 1.96, 6.38 };
static const double seed_time_pct[4] = { 5.80, 3.14, 20.59, 3.49 };
static const double seed_usr[3][2] = { { 10.86, 10.78 }, { 70.21, 67.12 }, { 92.43, 89.42 } };

static void *raw_map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("ddtmpfs: mmap");
        exit(1);
    }
    return p;
}

/* ---- child ---------------------------------------------------------------- */

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One dd: returns its wall seconds, and its CPU seconds in *cpu. */
static double dd_once(const char *block, size_t size, double *cpu)
{
    sk_file_t *f = sk_file_create("dd");
    if (!f) {
        perror("ddtmpfs: sk_file_create");
        exit(1);
    }
    uint64_t t0 = bench_now_ns();
    double c0 = thread_cpu_s();
    for (size_t off = 0; off < size; off += BS) {
        size_t n = size - off < BS ? size - off : BS;
        if (sk_file_pwrite(f, block, n, (off_t)off) != (ssize_t)n) {
            perror("ddtmpfs: sk_file_pwrite");
            exit(1);
        }
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    *cpu = thread_cpu_s() - c0;
    sk_file_destroy(f);
    return secs;
}

static void *noop_thread(void *arg)
{
    return arg;
}

static void child(size_t size, int iters)
{
    /* A thread started and joined: the process counts as threaded, so
     * the zones keep freed pages up to dirty_max_mb, as with the purger
     * (src/page/reclaim.c, "Returning memory without a thread"), instead
     * of trimming at free what passes twice the largest block freed.
     * Single-threaded, a third of each dd's pages faulted in afresh
     * (perf stat: 25,000 faults a 65,536-page dd), and the page faults,
     * not the allocator, were a quarter of the profile. */
    pthread_t t;
    if (pthread_create(&t, NULL, noop_thread, NULL) == 0)
        pthread_join(t, NULL);
    char *block = raw_map(BS);          /* dd if=/dev/zero: a block of zeros */
    double cpu;
    dd_once(block, size, &cpu);         /* untimed: the memory faults in */
    for (int i = 0; i < iters; i++) {
        double wall = dd_once(block, size, &cpu);
        printf("%.6f %.6f\n", wall, cpu);
    }
}

/* ---- parent --------------------------------------------------------------- */

static char self_path[4096];

struct totals { double user, sys, elapsed; };

/* Run one child with options vopt (named name); append its dd times to
 * t[*n] (wall) and ct[*n] (CPU). */
static int spawn(const char *vopt, const char *name, char *const argv[], double *t, double *ct, int *n,
                 struct totals *tot)
{
    int fd[2];
    if (pipe(fd) < 0)
        return -1;
    uint64_t t0 = bench_now_ns();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 1);
        close(fd[1]);
        const char *base = getenv("SLABKIT_OPTIONS");
        char opts[1024];
        snprintf(opts, sizeof opts, "%s%s%s", vopt, *vopt && base && *base ? "," : "", base ? base : "");
        setenv("SLABKIT_OPTIONS", opts, 1);
        execv(self_path, argv);
        _exit(127);
    }
    close(fd[1]);
    FILE *in = fdopen(fd[0], "r");
    double x, y;
    while (in && fscanf(in, "%lf %lf", &x, &y) == 2)
        if (*n < MAX_SAMPLES) {
            t[*n] = x;
            ct[(*n)++] = y;
        }
    if (in)
        fclose(in);
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
        ;
    tot->elapsed += (double)(bench_now_ns() - t0) / 1e9;
    tot->user += (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
    tot->sys += (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    if (!WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, "ddtmpfs: %s child failed\n", name);
        return -1;
    }
    return 0;
}

static double gain(double x, double base, int lower_better)
{
    if (base <= 0)
        return 0;
    return (lower_better ? base - x : x - base) / base * 100.0;
}

/*
 * --patches: the series patch by patch.  Variants: after (the default),
 * each patch's before alone (page_before=NAME), and every before
 * (page_microopt=0), interleaved in rotation; per variant the median dd
 * time and dd CPU time, and the processes' user and system time, each
 * as the time the before takes more than after (+: the patch saves it).
 */
#define NPATCH_NAMES PAGE_NR_PATCHES   /* page.h's list: page_patch_names */

static int patch_table(size_t size, int runs, char *size_arg, char *iters_arg, const char *out_path)
{
    enum { NV = NPATCH_NAMES + 2 };
    static char opts[NV][64], names[NV][48];
    static double t[NV][MAX_SAMPLES], ct[NV][MAX_SAMPLES];
    int n[NV] = { 0 };
    struct totals tot[NV];
    memset(tot, 0, sizeof tot);
    snprintf(names[0], sizeof names[0], "after (default)");
    for (int i = 0; i < NPATCH_NAMES; i++) {
        snprintf(opts[i + 1], sizeof opts[i + 1], "page_before=%s", page_patch_names[i]);
        snprintf(names[i + 1], sizeof names[i + 1], "%2d %s", page_patch_numbers[i], page_patch_names[i]);
    }
    snprintf(opts[NV - 1], sizeof opts[NV - 1], "page_microopt=0");
    snprintf(names[NV - 1], sizeof names[NV - 1], "all (page_microopt=0)");
    for (int r = 0; r < runs; r++)
        for (int k = 0; k < NV; k++) {
            int v = (k + r) % NV;   /* rotated: each variant in each place in turn */
            bench_progress("run %d/%d  %s", r + 1, runs, names[v]);
            char *cargv[] = { self_path, "--child", names[v], "--size", size_arg, "--iters", iters_arg, NULL };
            if (spawn(opts[v], names[v], cargv, t[v], ct[v], &n[v], &tot[v]) < 0)
                return 1;
        }
    bench_progress_done();
    FILE *outs[2] = { stdout, out_path && *out_path ? fopen(out_path, "w") : NULL };
    double base_t = bench_summary(t[0], n[0]).median, base_c = bench_summary(ct[0], n[0]).median;
    for (int o = 0; o < 2; o++) {
        FILE *f = outs[o];
        if (!f)
            continue;
        fprintf(f, "ddtmpfs --patches: dd bs=1M of a %zu MiB sk_file, then rm; each of seed 001's patches' before"
                   " alone, %d dds per variant (%d processes, rotated); %% = more than after (+: the patch"
                   " saves that)\n\n",
                size >> 20, n[0], runs);
        fprintf(f, "%-26s %22s %22s %18s %18s\n", "variant", "dd time, median (s)", "dd CPU, median (s)",
                "user (s)", "system (s)");
        for (int v = 0; v < NV; v++) {
            double tm = bench_summary(t[v], n[v]).median, tc = bench_summary(ct[v], n[v]).median;
            fprintf(f, "%-26s %12.4f (%+6.2f%%) %12.4f (%+6.2f%%) %8.2f (%+6.2f%%) %8.2f (%+6.2f%%)\n", names[v], tm,
                    gain(tm, base_t, 0), tc, gain(tc, base_c, 0), tot[v].user, gain(tot[v].user, tot[0].user, 0),
                    tot[v].sys, gain(tot[v].sys, tot[0].sys, 0));
        }
        fprintf(f, "(a negative %% is a before faster than after; the patches not here have no code path in"
                   " slabkit: docs/shmem.md)\n");
    }
    if (outs[1])
        fclose(outs[1]);
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: ddtmpfs [--quick|--full] [--size BYTES] [--runs N] [--iters N] [--ablation] [--patches]"
            " [--out FILE]\n"
            "  --size      file size (K/M/G), default 1/10 of memory (quick: at most 256M)\n"
            "  --runs      processes per variant, interleaved A B B A ..., default 8 (quick: 6)\n"
            "  --iters     timed dds per process, default 10\n"
            "  --ablation  also run pcp=0 (no per-CPU page lists; not the seed's before); on with --full\n"
            "  --patches   each patch's before alone against after: the per-patch table\n");
    exit(2);
}

int main(int argc, char **argv)
{
    size_t size = 0;
    int runs = 0, iters = 0, quick = 1, ablation = 0, patches = 0;
    const char *out_path = "results/ddtmpfs.txt", *child_v = NULL;
    static const struct option lo[] = {
        { "size", required_argument, 0, 's' }, { "runs", required_argument, 0, 'r' },
        { "iters", required_argument, 0, 'i' }, { "quick", no_argument, 0, 'q' },
        { "full", no_argument, 0, 'F' },        { "ablation", no_argument, 0, 'a' },
        { "out", required_argument, 0, 'o' },  { "child", required_argument, 0, 'c' },
        { "help", no_argument, 0, 'h' },       { "patches", no_argument, 0, 'p' },
        { 0, 0, 0, 0 }
    };
    int c;
    while ((c = getopt_long(argc, argv, "s:r:i:qFapo:c:h", lo, NULL)) != -1) {
        switch (c) {
        case 's': size = bench_parse_size(optarg); break;
        case 'r': runs = atoi(optarg); break;
        case 'i': iters = atoi(optarg); break;
        case 'q': quick = 1; break;
        case 'F': quick = 0; break;
        case 'a': ablation = 1; break;
        case 'p': patches = 1; break;
        case 'o': out_path = optarg; break;
        case 'c': child_v = optarg; break;
        default: usage();
        }
    }
    size_t mem = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    if (!size) {
        size = mem / 10;
        if (quick && size > (256u << 20))
            size = 256u << 20;
    }
    size = SK_PAGE_SIZE > size ? SK_PAGE_SIZE : size & ~(SK_PAGE_SIZE - 1);
    if (runs <= 0)
        runs = quick ? 6 : 8;
    if (iters <= 0)
        iters = 10;
    if (!quick)
        ablation = 1;                   /* full mode: the pcp=0 column too */
    if (child_v) {
        child(size, iters);
        return 0;
    }
    ssize_t len = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (len <= 0)
        return 1;
    self_path[len] = 0;

    /* Freed memory stays resident in the children (see the top). */
    char keep[256];
    snprintf(keep, sizeof keep, "dirty_max_mb=%zu,decay_ms=3600000,huge_slices=0", (size >> 20) + 64);
    const char *user_opts = getenv("SLABKIT_OPTIONS");
    char all_opts[1024];
    snprintf(all_opts, sizeof all_opts, "%s%s%s", keep, user_opts && *user_opts ? "," : "",
             user_opts ? user_opts : "");
    setenv("SLABKIT_OPTIONS", all_opts, 1);

    int nv = ablation ? V_NR : V_NOPCP;
    static double t[V_NR][MAX_SAMPLES], ct[V_NR][MAX_SAMPLES];
    int n[V_NR] = { 0 };
    struct totals tot[V_NR] = { { 0, 0, 0 } };
    char size_arg[32], iters_arg[32];
    snprintf(size_arg, sizeof size_arg, "%zu", size);
    snprintf(iters_arg, sizeof iters_arg, "%d", iters);
    fprintf(stderr, "ddtmpfs: %zu MiB file, 1 MiB writes, %d processes x %d dds per variant, interleaved\n",
            size >> 20, runs, iters);
    if (patches)
        return patch_table(size, runs, size_arg, iters_arg, out_path);
    int failed = 0;
    for (int r = 0; r < runs && !failed; r++) {
        for (int k = 0; k < nv; k++) {
            enum variant v = (enum variant)(r % 2 ? nv - 1 - k : k);   /* A B, B A, ... */
            bench_progress("run %d/%d  %s", r + 1, runs, vlabel[v]);
            char *cargv[] = { self_path, "--child", (char *)vname[v], "--size", size_arg,
                              "--iters", iters_arg, NULL };
            if (spawn(vopts[v], vname[v], cargv, t[v], ct[v], &n[v], &tot[v]) < 0)
                failed = 1;
        }
    }
    bench_progress_done();
    if (failed)
        return 1;

    struct bench_stats tp[V_NR], tm[V_NR], tc[V_NR];
    for (int v = 0; v < nv; v++) {
        static double mbs[MAX_SAMPLES];
        for (int i = 0; i < n[v]; i++)
            mbs[i] = (double)size / (1 << 20) / t[v][i];
        tp[v] = bench_summary(mbs, n[v]);
        tm[v] = bench_summary(t[v], n[v]);
        tc[v] = bench_summary(ct[v], n[v]);
    }
    FILE *outs[2] = { stdout, out_path && *out_path ? fopen(out_path, "w") : NULL };
    if (out_path && *out_path && !outs[1])
        fprintf(stderr, "ddtmpfs: cannot write %s: %s\n", out_path, strerror(errno));
    for (int o = 0; o < 2; o++) {
        FILE *f = outs[o];
        if (!f)
            continue;
        fprintf(f, "ddtmpfs: dd bs=1M of a %zu MiB sk_file (%s), then rm; %d dds per variant"
                   " (%d processes, interleaved)\n",
                size >> 20, size >= mem / 10 - (1u << 20) ? "1/10 of memory" : "quick: less than 1/10 of memory",
                n[V_BEFORE], runs);
        fprintf(f, "before = page_microopt=0, after = default%s; seed 001 = 3.15.0-rc1 vanilla vs"
                   " microopt-v1r11, from the seed's mail\n\n", ablation ? "; pcp=0 is an ablation, not a before" : "");
        static const char *const rows[4] = { "Min", "Mean", "Stddev", "Max" };
        for (int table = 0; table < 2; table++) {
            struct bench_stats *s = table ? tm : tp;
            fprintf(f, "%-25s", table ? "loopdd Time (s)" : "loopdd Throughput (MB/s)");
            for (int v = 0; v < nv; v++)
                fprintf(f, " %26s", vlabel[v]);
            fprintf(f, "   | %22s %22s\n", "seed 001 vanilla", "microopt-v1r11");
            for (int k = 0; k < 4; k++) {
                fprintf(f, "%-25s", rows[k]);
                for (int v = 0; v < nv; v++) {
                    double x = k == 0 ? s[v].min : k == 1 ? s[v].mean : k == 2 ? s[v].stddev : s[v].max;
                    double b = k == 0 ? s[0].min : k == 1 ? s[0].mean : k == 2 ? s[0].stddev : s[0].max;
                    fprintf(f, " %15.4f (%7.2f%%)", x, gain(x, b, table));
                }
                const double (*sd)[2] = table ? seed_time : seed_tp;
                fprintf(f, "   | %11.4f (%7.2f%%) %11.4f (%7.2f%%)\n", sd[k][0], 0.0, sd[k][1],
                        table ? seed_time_pct[k] : seed_tp_pct[k]);
            }
            fprintf(f, "%-25s", "Median");
            for (int v = 0; v < nv; v++)
                fprintf(f, " %15.4f (%7.2f%%)", s[v].median, gain(s[v].median, s[0].median, table));
            fprintf(f, "   | %22s\n\n", "(not in the seed)");
        }
        /* Not in the seed: each dd's own CPU time, which a busy shared
         * machine's preemptions do not inflate. */
        fprintf(f, "%-25s", "dd CPU time (s)");
        for (int v = 0; v < nv; v++)
            fprintf(f, " %26s", vlabel[v]);
        fprintf(f, "   | (not in the seed)\n");
        for (int k = 0; k < 5; k++) {
            fprintf(f, "%-25s", k < 4 ? rows[k] : "Median");
            for (int v = 0; v < nv; v++) {
                double x = k == 0 ? tc[v].min : k == 1 ? tc[v].mean : k == 2 ? tc[v].stddev : k == 3 ? tc[v].max : tc[v].median;
                double b = k == 0 ? tc[0].min : k == 1 ? tc[0].mean : k == 2 ? tc[0].stddev : k == 3 ? tc[0].max : tc[0].median;
                fprintf(f, " %15.4f (%7.2f%%)", x, gain(x, b, 1));
            }
            fprintf(f, "\n");
        }
        fprintf(f, "\n%-25s", "");
        for (int v = 0; v < nv; v++)
            fprintf(f, " %26s", vlabel[v]);
        fprintf(f, "   | %11s %11s\n", "seed vanilla", "microopt");
        static const char *const ur[3] = { "User", "System", "Elapsed" };
        for (int k = 0; k < 3; k++) {
            fprintf(f, "%-25s", ur[k]);
            for (int v = 0; v < nv; v++) {
                double x = k == 0 ? tot[v].user : k == 1 ? tot[v].sys : tot[v].elapsed;
                double b = k == 0 ? tot[0].user : k == 1 ? tot[0].sys : tot[0].elapsed;
                fprintf(f, " %15.2f (%7.2f%%)", x, gain(x, b, 1));
            }
            fprintf(f, "   | %11.2f %11.2f\n", seed_usr[k][0], seed_usr[k][1]);
        }
        fprintf(f, "(User/System/Elapsed: seconds over all of a variant's processes, untimed first dds"
                   " and process start included; %% = less than before)\n");
        fprintf(f, "\nafter vs before: mean throughput %+.2f%%; time %.2f%% less (mean), %.2f%% less (median);"
                   " CPU time %.2f%% less (median)  [seed 001: +2.72%% throughput, 3.14%% less time]\n",
                gain(tp[V_AFTER].mean, tp[V_BEFORE].mean, 0), gain(tm[V_AFTER].mean, tm[V_BEFORE].mean, 1),
                gain(tm[V_AFTER].median, tm[V_BEFORE].median, 1), gain(tc[V_AFTER].median, tc[V_BEFORE].median, 1));
    }
    if (outs[1])
        fclose(outs[1]);
    return 0;
}
