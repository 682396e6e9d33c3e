/*
 * leakscan.c — what sk_leak_check() costs on a big heap (docs/kmemleak.md).
 *
 *   build/bench/leakscan [COUNT [SIZE [LEAKS [heap]]]]   (default 16M x 64 bytes, 10 leaks)
 *
 * Allocates COUNT objects of SIZE bytes, each pointed to from a global
 * array (bss; with "heap", from a malloc'd array a global points to: one
 * large block scanned in chunks) and each holding a pointer to the one before it (the rest
 * filled with bytes that are no pointer), drops LEAKS of them, then runs
 * sk_leak_check() and prints its wall time, the CPU time, and the memory
 * the scan added: the peak RSS during the scan (VmHWM, reset just before
 * through /proc/self/clear_refs) above the RSS before it.  Not run by
 * bench/run.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "slabkit.h"

#define MAX_OBJS (16u << 20)
static void *bss_objs[MAX_OBJS];
static void **objs = bss_objs;

static long status_kb(const char *key)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    const char *p = strstr(buf, key);
    return p ? strtol(p + strlen(key) + 1, NULL, 10) : -1;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
    size_t count = argc > 1 ? strtoul(argv[1], NULL, 0) : MAX_OBJS;
    size_t size = argc > 2 ? strtoul(argv[2], NULL, 0) : 64;
    size_t leaks = argc > 3 ? strtoul(argv[3], NULL, 0) : 10;
    if (count > MAX_OBJS || size < 16 || leaks > count) {
        fprintf(stderr, "usage: leakscan [COUNT <= %u [SIZE >= 16 [LEAKS <= COUNT]]]\n", MAX_OBJS);
        return 2;
    }
    /* Touch the whole array now: the scan reads all of bss, and a page
     * never touched would be faulted in by it and counted as its own. */
    for (size_t i = 0; i < MAX_OBJS; i += 512)
        ((void *volatile *)bss_objs)[i] = NULL;
    if (argc > 4 && !strcmp(argv[4], "heap")) {
        objs = calloc(count, sizeof *objs);
        if (!objs)
            return 1;
    }
    void *prev = NULL;
    for (size_t i = 0; i < count; i++) {
        char *p = malloc(size);
        if (!p) {
            perror("malloc");
            return 1;
        }
        memset(p, 0x5a, size);
        memcpy(p, &prev, sizeof prev);
        objs[i] = p;
        prev = p;
    }
    /* The leaks: every (count / leaks)-th object, no longer in the array,
     * and its successor no longer points to it. */
    for (size_t k = 0; k < leaks; k++) {
        size_t i = k * (count / leaks) + 1;
        if (i >= count)
            break;
        objs[i] = NULL;
        if (i + 1 < count)
            memset(objs[i + 1], 0x5a, sizeof(void *));
    }
    prev = NULL;
    long rss0 = status_kb("VmRSS:");
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    if (fd < 0 || write(fd, "5", 1) != 1)
        fprintf(stderr, "leakscan: cannot reset VmHWM: peak below is the process's\n");
    if (fd >= 0)
        close(fd);
    double t0 = now(), c0 = cpu();
    long n = sk_leak_check();
    double t1 = now(), c1 = cpu();
    long hwm = status_kb("VmHWM:"), rss1 = status_kb("VmRSS:");
    printf("leakscan: %zu objects of %zu bytes (%.0f MiB), %zu leaked: sk_leak_check() = %ld in %.3f s wall, "
           "%.3f s CPU; RSS before %ld MiB, peak during the scan +%ld KiB, after +%ld KiB\n",
           count, size, (double)count * (double)size / (1 << 20), leaks, n, t1 - t0, c1 - c0, rss0 >> 10,
           hwm - rss0, rss1 - rss0);
    return n == (long)leaks ? 0 : 1;
}
