/*
 * bench.h — shared helpers for slabkit's benchmarks: clocks, summary
 * statistics over repeated runs, progress lines on stderr, and tables.
 * Header-only so plain workloads (bench/workloads, no allocator linked)
 * can use it too.  Nothing here allocates in a timed region.
 */
#ifndef SK_BENCH_H
#define SK_BENCH_H
#define _GNU_SOURCE
#include <math.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct bench_stats { double min, mean, stddev, max, median; int n; };

static int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Summary of v[0..n) (v is sorted in place). */
static inline struct bench_stats bench_summary(double *v, int n)
{
    struct bench_stats s = { 0, 0, 0, 0, 0, n };
    if (n <= 0)
        return s;
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += v[i];
    s.mean = sum / n;
    double var = 0;
    for (int i = 0; i < n; i++)
        var += (v[i] - s.mean) * (v[i] - s.mean);
    s.stddev = n > 1 ? sqrt(var / (n - 1)) : 0;
    s.min = v[0];
    s.max = v[n - 1];
    s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return s;
}

/* A progress line on stderr, overwritten in place on a terminal.  Into a
 * log (not a terminal) it is a plain line, at most one every 2 seconds, so
 * a run under `make bench > log` stays readable. */
static inline int bench_stderr_tty(void)
{
    static int tty = -1;
    if (tty < 0)
        tty = isatty(2);
    return tty;
}
static inline void bench_progress(const char *fmt, ...)
{
    static uint64_t last_ns;
    va_list ap;
    if (!bench_stderr_tty()) {
        uint64_t now = bench_now_ns();
        if (last_ns && now - last_ns < 2000000000ull)
            return;
        last_ns = now;
    }
    va_start(ap, fmt);
    fprintf(stderr, bench_stderr_tty() ? "\r  ... " : "  ... ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, bench_stderr_tty() ? "\033[K" : "\n");
    va_end(ap);
    fflush(stderr);
}
static inline void bench_progress_done(void)
{
    if (bench_stderr_tty())
        fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

/* The options of a driver that re-executes itself per variant (ptrchase,
 * slicemask): --quick (the default) or --full, and --out FILE. */
static inline void bench_driver_args(int argc, char **argv, int *quick, const char **out)
{
    *quick = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--full"))
            *quick = 0;
        else if (!strcmp(argv[i], "--quick"))
            *quick = 1;
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            *out = argv[++i];
    }
}

/* CPU seconds (user + system) the process has used so far. */
static inline double bench_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* Size with a K/M/G suffix ("1G", "64M", "4096"). */
static inline size_t bench_parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1024; break;
    case 'm': case 'M': v *= 1024 * 1024; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
    default: break;
    }
    return (size_t)v;
}
/*
 * False-sharing census for the cache-thrash/scratch workloads: where each
 * thread's live object is, by cache line, one padded slot per thread.
 * Record that thread `self` now holds [p, p + size) (p NULL: nothing) and
 * return 1 when another thread's live object lies on one of its lines.
 */
struct bench_line_slot { _Atomic uintptr_t first, last; char pad[48]; };

static inline int bench_lines_publish(struct bench_line_slot *lines, int nthreads, int self,
                                      const void *p, size_t size)
{
    uintptr_t first = p ? (uintptr_t)p >> 6 : 0, last = p ? ((uintptr_t)p + size - 1) >> 6 : 0;
    atomic_store_explicit(&lines[self].first, first, memory_order_relaxed);
    atomic_store_explicit(&lines[self].last, last, memory_order_relaxed);
    if (!p)
        return 0;
    for (int t = 0; t < nthreads; t++) {
        if (t == self)
            continue;
        uintptr_t f = atomic_load_explicit(&lines[t].first, memory_order_relaxed);
        uintptr_t l = atomic_load_explicit(&lines[t].last, memory_order_relaxed);
        if (f && f <= last && first <= l)
            return 1;
    }
    return 0;
}
#endif
