/*
 * calls.h — slub_debug's alloc_calls and free_calls (U): the tracks of a
 * cache's objects summed by call site, printed as the kernel's
 * /sys/kernel/slab/NAME/alloc_calls.  Shared by slab_debug.c (the process
 * itself, without malloc: a fixed table in a caller's mmap) and
 * tools/inspect/remote.c (the same from outside).
 *
 * A table is CALLS_MAX zeroed call_loc slots, open addressing by site; a
 * slot is in use once its count is non-zero (a NULL site, an object whose
 * stack was never taken, is a site like any other: "<no stack>").
 */
#ifndef SK_SLAB_CALLS_H
#define SK_SLAB_CALLS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define CALLS_MAX 4096

/* One call site: the kernel's struct location. */
struct call_loc {
    uintptr_t site;
    unsigned long count, bytes;
    uint64_t sum_age, min_age, max_age;
    int min_pid, max_pid;
    uint64_t cpus[4];             /* CPUs 0..255 */
};

/* Count one object of `site` in locs: NULL when the table is full. */
static inline struct call_loc *calls_add(struct call_loc *locs, uintptr_t site, uint64_t age, int tid, int cpu,
                                         unsigned long bytes)
{
    size_t h = (size_t)((site >> 2) * 0x9E3779B97F4A7C15ull >> 52);   /* 12 bits */
    struct call_loc *l = NULL;
    for (size_t i = 0; i < CALLS_MAX && !l; i++) {
        struct call_loc *s = &locs[(h + i) % CALLS_MAX];
        if (s->count && s->site == site)
            l = s;
        else if (!s->count) {
            l = s;
            l->site = site;
            l->min_age = UINT64_MAX;
            l->min_pid = INT32_MAX;
            l->max_pid = INT32_MIN;
        }
    }
    if (!l)
        return NULL;
    l->count++;
    l->bytes += bytes;
    l->sum_age += age;
    l->min_age = age < l->min_age ? age : l->min_age;
    l->max_age = age > l->max_age ? age : l->max_age;
    l->min_pid = tid < l->min_pid ? tid : l->min_pid;
    l->max_pid = tid > l->max_pid ? tid : l->max_pid;
    if (cpu >= 0 && cpu < 256)
        l->cpus[cpu / 64] |= 1ull << (cpu % 64);
    return l;
}

/* Compact the sites in use to the front, most objects first (an insertion
 * sort: no qsort, which may allocate); returns how many. */
static inline size_t calls_sort(struct call_loc *locs)
{
    size_t m = 0;
    for (size_t i = 0; i < CALLS_MAX; i++)
        if (locs[i].count)
            locs[m++] = locs[i];
    for (size_t i = 1; i < m; i++) {
        struct call_loc x = locs[i];
        size_t j = i;
        for (; j > 0 && (locs[j - 1].count < x.count || (locs[j - 1].count == x.count && locs[j - 1].site > x.site));
             j--)
            locs[j] = locs[j - 1];
        locs[j] = x;
    }
    return m;
}

/* One line, "  COUNT SITE age=.. pid=.. cpus=..[ bytes=..]\n", with the
 * site already named. */
static inline void calls_line(char *buf, size_t size, const struct call_loc *l, const char *site, bool alloc)
{
    char age[80], pid[40], cpus[200] = "";
    if (l->min_age == l->max_age)
        snprintf(age, sizeof age, "age=%lu", (unsigned long)l->min_age);
    else
        snprintf(age, sizeof age, "age=%lu/%lu/%lu", (unsigned long)l->min_age,
                 (unsigned long)(l->sum_age / l->count), (unsigned long)l->max_age);
    if (l->min_pid == l->max_pid)
        snprintf(pid, sizeof pid, "pid=%d", l->min_pid);
    else
        snprintf(pid, sizeof pid, "pid=%d-%d", l->min_pid, l->max_pid);
    size_t n = 0;
    for (int i = 0; i < 256 && n < sizeof cpus; i++) {
        if (!(l->cpus[i / 64] >> (i % 64) & 1))
            continue;
        int j = i;
        while (j + 1 < 256 && (l->cpus[(j + 1) / 64] >> ((j + 1) % 64) & 1))
            j++;
        n += (size_t)snprintf(cpus + n, sizeof cpus - n, j > i ? "%s%d-%d" : "%s%d", n ? "," : "", i, j);
        i = j;
    }
    if (alloc)
        snprintf(buf, size, "%7lu %s %s %s cpus=%s bytes=%lu\n", l->count, site, age, pid, cpus, l->bytes);
    else
        snprintf(buf, size, "%7lu %s %s %s cpus=%s\n", l->count, site, age, pid, cpus);
}

#endif
