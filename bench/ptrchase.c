/*
 * ptrchase — the TLB effect of huge-page slices: a pointer chase over a
 * large linked structure of 64-byte nodes from slabkit's kmalloc-64, in
 * random order, with huge_slices=1 (the zone's memory past its first slice
 * on 2 MiB pages) and huge_slices=0 (all on 4 KiB pages).  Each variant is
 * a child process with SLABKIT_OPTIONS set, interleaved; ns per step,
 * median of the runs.
 *
 *   ptrchase [--quick|--full] [--out FILE]
 *   ptrchase --child MIB STEPS          one run (internal): prints ns/step
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "slabkit.h"

struct node { struct node *next; uint64_t pad[7]; };

static int child(long mib, long steps)
{
    size_t n = ((size_t)mib << 20) / sizeof(struct node);
    /* The order array is plain mmap: it must not sit in slabkit's zone. */
    struct node **v = mmap(NULL, n * sizeof *v, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (v == MAP_FAILED)
        return 1;
    for (size_t i = 0; i < n; i++)
        if (!(v[i] = sk_malloc(sizeof(struct node))))
            return 2;
    uint64_t s = 0x2545f4914f6cdd1dull;
    for (size_t i = n - 1; i > 0; i--) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        size_t j = s % (i + 1);
        struct node *t = v[i]; v[i] = v[j]; v[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        v[i]->next = v[(i + 1) % n];
    struct node *p = v[0];
    munmap(v, n * sizeof *v);
    uint64_t t0 = bench_now_ns();
    for (long k = 0; k < steps; k++)
        p = p->next;
    uint64_t dt = bench_now_ns() - t0;
    printf("%.3f %p\n", (double)dt / (double)steps, (void *)p);
    return 0;
}

static double run_variant(const char *self, int huge, long mib, long steps)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char opt[64], a[32], b[32];
        snprintf(opt, sizeof opt, "huge_slices=%d", huge);
        setenv("SLABKIT_OPTIONS", opt, 1);
        snprintf(a, sizeof a, "%ld", mib);
        snprintf(b, sizeof b, "%ld", steps);
        dup2(fd[1], 1);
        close(fd[0]);
        execl(self, self, "--child", a, b, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[128] = { 0 };
    ssize_t got = read(fd[0], buf, sizeof buf - 1);
    close(fd[0]);
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) || got <= 0)
        return -1;
    return atof(buf);
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--child"))
        return child(atol(argv[2]), atol(argv[3]));
    int quick;
    const char *out = "results/ptrchase.txt";
    bench_driver_args(argc, argv, &quick, &out);
    long mib = quick ? 256 : 512, steps = quick ? 10000000 : 50000000;
    int rounds = quick ? 3 : 5;
    double v[2][8];
    for (int k = 0; k < rounds; k++)
        for (int h = 1; h >= 0; h--) {
            bench_progress("round %d/%d, huge_slices=%d", k + 1, rounds, h);
            if ((v[h][k] = run_variant("/proc/self/exe", h, mib, steps)) < 0) {
                fprintf(stderr, "ptrchase: child failed\n");
                return 1;
            }
        }
    bench_progress_done();
    struct bench_stats s0 = bench_summary(v[0], rounds), s1 = bench_summary(v[1], rounds);
    char buf[1024];
    snprintf(buf, sizeof buf,
        "ptrchase: %ld MiB of 64-byte kmalloc-64 nodes linked in random order, %ld steps; "
        "median of %d interleaved runs\n"
        "%-16s %10s %8s %8s\n"
        "%-16s %10.2f %8.2f %8.2f\n"
        "%-16s %10.2f %8.2f %8.2f\n"
        "huge-page slices: %.1f%% less time per step (target: faster): %s\n",
        mib, steps, rounds, "", "ns/step", "min", "max",
        "huge_slices=0", s0.median, s0.min, s0.max,
        "huge_slices=1", s1.median, s1.min, s1.max,
        100 * (1 - s1.median / s0.median), s1.median < s0.median ? "met" : "NOT met");
    fputs(buf, stdout);
    FILE *f = fopen(out, "w");
    if (f) {
        fputs(buf, f);
        fclose(f);
    }
    return 0;
}
