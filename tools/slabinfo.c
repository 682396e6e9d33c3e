/*
 * slabinfo — slabkit's caches as the kernel's tools/mm/slabinfo shows
 * SLUB's: a one-line summary per cache, a full report of one cache with its
 * event counters and per-CPU partial statistics, or /proc/slabinfo text.
 *
 * Without -p or FILE it reports its own process (slabkit lives in the
 * process that uses it), so --workload first runs a small mixed
 * allocation workload, with objects freed on other threads, and leaves
 * part of it allocated.  -p PID reads another running process that uses
 * slabkit, from outside (tools/inspect, docs/inspect.md); FILE reads an
 * exit report (slabinfo_at_exit, slabinfo_file).
 *
 *   slabinfo [-p PID | FILE] [-a] [--workload]  summary of caches in use (-a: all)
 *   slabinfo [-p PID | FILE] -r NAME            full report of cache NAME (repeatable)
 *   slabinfo [-p PID | FILE] --slabinfo         /proc/slabinfo version 2.1, totals line
 *   slabinfo -h                                 usage
 *
 * With SLABKIT_OPTIONS=debug=U (slub_debug's user tracking) -r also shows
 * the cache's alloc_calls and free_calls: one line per call site with the
 * count, site, age min/avg/max (ms), thread ids, CPUs and bytes.  A
 * program run with debug=U,slabinfo_at_exit=1 (or slabinfo_file=FILE)
 * writes the same sections after its exit-time slabinfo, and -r on that
 * FILE prints the cache's two sections; with -p they are read live, out
 * of the target's slabs (each object's track: tools/inspect/remote.c).
 *
 * Summary columns: Objects (active), Objsize (bytes asked for), Space
 * (bytes of all slabs), Slabs/Part/Cpu (slabs, on node partial lists, on
 * CPU partial lists), O/S (objects per slab), O (order), %Fr (slabs
 * partial on the node), %Ef (object bytes / slab bytes).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect/source.h"
#include "slabkit.h"

static struct source src;   /* where the table comes from */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: slabinfo [WHERE] [-a] [--workload]  one line per cache in use (-a: every cache)\n"
            "       slabinfo [WHERE] -r NAME            full report of a cache (event counters,\n"
            "                                           per-CPU partial statistics; alloc_calls and\n"
            "                                           free_calls under debug=U);\n"
            "                                           -r may repeat\n"
            "       slabinfo [WHERE] --slabinfo         /proc/slabinfo version 2.1 format, totals\n"
            "       slabinfo -h                         this text\n"
            "WHERE: -p PID  a running process that uses slabkit (read from outside; same user or root)\n"
            "       FILE    an exit report (SLABKIT_OPTIONS=slabinfo_at_exit=1 or slabinfo_file=FILE)\n"
            "       none    this tool's own process; --workload first runs a small mixed\n"
            "               allocation workload to have something to show.\n");
}

/* 1234567 -> "1.2M", the way the kernel tool prints sizes. */
static const char *human(unsigned long long v, char *buf, size_t n)
{
    static const char unit[] = " KMGTP";
    int u = 0;
    double d = (double)v;
    while (d >= 1000 && u < 5) {
        d /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, n, "%llu", v);
    else
        snprintf(buf, n, d < 10 ? "%.1f%c" : "%.0f%c", d, unit[u]);
    return buf;
}

static unsigned long long slab_bytes(const struct sk_cache_info *i)
{
    return (unsigned long long)SK_PAGE_SIZE << i->order;
}

/* ---- summary ---- */

struct summary { int all, lines; unsigned long long space, used; };

static void summary_line(const struct sk_cache_info *i, void *arg)
{
    struct summary *s = arg;
    if (!s->all && i->num_slabs == 0 && i->active_objs == 0)
        return;
    unsigned long long space = i->num_slabs * slab_bytes(i);
    unsigned long long used = (unsigned long long)i->active_objs * i->object_size;
    char sp[16], dist[40];
    snprintf(dist, sizeof dist, "%lu/%lu/%lu", i->num_slabs, i->partial_slabs, i->cpu_partial_slabs);
    printf("%-24s %8lu %7zu %9s %15s %4u %1u %3lu %3llu\n", i->name, i->active_objs, i->object_size,
           human(space, sp, sizeof sp), dist, i->objs_per_slab, i->order,
           i->num_slabs ? i->partial_slabs * 100 / i->num_slabs : 0, space ? used * 100 / space : 100);
    s->lines++;
    s->space += space;
    s->used += used;
}

static void summary(int all)
{
    struct summary s = { all, 0, 0, 0 };
    printf("%-24s %8s %7s %9s %15s %4s %1s %3s %3s\n", "Name", "Objects", "Objsize", "Space", "Slabs/Part/Cpu",
           "O/S", "O", "%Fr", "%Ef");
    source_foreach(&src, summary_line, &s);
    char sp[16], us[16];
    printf("%d caches%s, %s in slabs, %s in objects\n", s.lines, all ? "" : " in use (-a: all)",
           human(s.space, sp, sizeof sp), human(s.used, us, sizeof us));
    source_print_totals(&src, stdout);
}

/* ---- full report of one cache ---- */

static unsigned long pct(unsigned long part, unsigned long whole)
{
    return whole ? part * 100 / whole : 0;
}

static void report(const struct sk_cache_info *i)
{
    const unsigned long *st = i->stat;
    unsigned long long slab = slab_bytes(i), space = i->num_slabs * slab;
    unsigned long long used = (unsigned long long)i->active_objs * i->object_size;
    unsigned long waste = (unsigned long)(slab - i->reserved - (unsigned long long)i->objs_per_slab * i->size);
    char b1[16], b2[16];

    printf("\nSlabcache: %-24s Order: %u  Objects: %lu\n", i->name, i->order, i->active_objs);
    printf("\nSizes (bytes)       Slabs               Memory\n");
    printf("------------------------------------------------------------\n");
    printf("Object : %8zu   Total  : %8lu   Space    : %9s\n", i->object_size, i->num_slabs,
           human(space, b1, sizeof b1));
    printf("Stride : %8zu   Active : %8lu   In use   : %9s\n", i->size, i->active_slabs, human(used, b2, sizeof b2));
    printf("Align  : %8zu   Partial: %8lu   Efficiency: %7llu%%\n", i->align, i->partial_slabs,
           space ? used * 100 / space : 100);
    printf("Slab   : %8llu   CpuPart: %8lu   Wasted/slab: %6lu (mgmt on slab %u)\n", slab,
           i->cpu_partial_slabs, waste, i->reserved);
    printf("Obj/Slab: %7u   Objects: %8lu of %lu; %lu in per-CPU arrays\n", i->objs_per_slab, i->active_objs,
           i->num_objs, i->array_objs);

    unsigned long allocs = st[SK_ALLOC_FASTPATH] + st[SK_ALLOC_SLOWPATH];
    unsigned long frees = st[SK_FREE_FASTPATH] + st[SK_FREE_SLOWPATH];
    printf("\nSlab Perf Counter       Alloc     Free %%Al %%Fr\n");
    printf("--------------------------------------------------\n");
    printf("Fastpath (array) %12lu %8lu %3lu %3lu\n", st[SK_ALLOC_FASTPATH], st[SK_FREE_FASTPATH],
           pct(st[SK_ALLOC_FASTPATH], allocs), pct(st[SK_FREE_FASTPATH], frees));
    printf("Slowpath         %12lu %8lu %3lu %3lu\n", st[SK_ALLOC_SLOWPATH], st[SK_FREE_SLOWPATH],
           pct(st[SK_ALLOC_SLOWPATH], allocs), pct(st[SK_FREE_SLOWPATH], frees));
    printf("Array batches    %12lu %8lu   (refills / flushes; array capacity %u)\n", st[SK_ARRAY_REFILL],
           st[SK_ARRAY_FLUSH], i->array_capacity);
    printf("Page alloc/free  %12lu %8lu\n", st[SK_NEW_SLAB], st[SK_FREE_SLAB]);
    printf("Node partial     %12lu %8lu   (slabs taken from / put on the node list)\n",
           st[SK_NODE_PARTIAL_ALLOC], st[SK_NODE_PARTIAL_FREE]);
    printf("Cpu slab refills %12lu\n", st[SK_ALLOC_CPU_SLAB]);
    printf("Total            %12lu %8lu\n", allocs, frees);

    printf("\nPer-CPU partial lists\n");
    printf("--------------------------------------------------\n");
    if (i->cpu_partial && i->cpu_partial_slabs_max)
        printf("cpu_partial limit        %8u slabs per CPU (cpu_partial %u objects, converted as 5.16+ does)\n",
               i->cpu_partial_slabs_max, i->cpu_partial);
    else if (i->cpu_partial)
        printf("cpu_partial limit        %8u free objects per CPU (counted as 3.1 did: drain past it)\n",
               i->cpu_partial);
    else
        printf("cpu_partial limit        %8s (cpu_partial=0: partial slabs go to the node list)\n", "off");
    printf("CPU partial slabs now    %8lu\n", i->cpu_partial_slabs);
    printf("Alloc via cpu partial    %8lu   (refills that took a slab from the CPU list)\n",
           st[SK_CPU_PARTIAL_ALLOC]);
    printf("Free via cpu partial     %8lu   (slabs that became partial and joined a CPU list)\n",
           st[SK_CPU_PARTIAL_FREE]);
    printf("Drains to node list      %8lu   (CPU list over its limit, or shrink)\n", st[SK_CPU_PARTIAL_DRAIN]);

    printf("\nEvent counters\n");
    printf("--------------------------------------------------\n");
    for (int k = 0; k < SK_STAT_NR; k++)
        printf("%-24s %12lu\n", sk_stat_names[k], st[k]);
}

/* ---- a small workload with something to show ---- */

#define WL_OBJS 4000
static sk_cache_t *wl_cache;
static void *wl_objs[WL_OBJS];
static void *wl_km[WL_OBJS];
static unsigned wl_ctor_calls;

static void wl_ctor(void *p)
{
    memset(p, 0, 192);
    wl_ctor_calls++;
}

/* Frees every other object allocated by the main thread: frees from
 * another thread, so slabs go through the CPU partial lists. */
static void *wl_freer(void *arg)
{
    (void)arg;
    for (int i = 0; i < WL_OBJS; i += 2) {
        sk_cache_free(wl_cache, wl_objs[i]);
        wl_objs[i] = NULL;
        sk_free(wl_km[i]);
        wl_km[i] = NULL;
    }
    return NULL;
}

/* The alloc_calls and free_calls sections of cache `name` in an exit
 * report (written under debug=U after the slabinfo table), as they are. */
static void file_calls(const char *path, const char *name)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[1024], a[160], fr[160];
    snprintf(a, sizeof a, "alloc_calls %s:", name);
    snprintf(fr, sizeof fr, "free_calls %s:", name);
    int in = 0, found = 0;
    while (fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, "\n");
        line[n] = 0;
        if (!strncmp(line, "alloc_calls ", 12) || !strncmp(line, "free_calls ", 11)) {
            in = !strcmp(line, a) || !strcmp(line, fr);
            if (in) {
                printf("%s%s\n", found ? "" : "\n", line);
                found = 1;
            }
            continue;
        }
        /* A section's lines: "No data" or "  COUNT site ..."; anything
         * else ends it. */
        if (in && (!strcmp(line, "No data") || (line[0] == ' ' && strstr(line, " age="))))
            printf("%s\n", line);
        else
            in = 0;
    }
    fclose(f);
}

static void workload(void)
{
    wl_cache = sk_cache_create("slabinfo-demo", 192, 0, SK_CACHE_HWALIGN, wl_ctor);
    if (!wl_cache) {
        perror("sk_cache_create");
        exit(1);
    }
    unsigned long long rng = 88172645463325252ull;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < WL_OBJS; i++) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            size_t size = rng % 8 ? 16 + rng % 500 : 512 + rng % 7000;
            if (!wl_objs[i])
                wl_objs[i] = sk_cache_alloc(wl_cache);
            if (!wl_km[i])
                wl_km[i] = sk_malloc(size);
        }
        pthread_t t;
        if (pthread_create(&t, NULL, wl_freer, NULL) == 0)
            pthread_join(t, NULL);
        else
            wl_freer(NULL);
    }
    /* The malloc family too (this reference also links slabkit's malloc
     * into the tool, so stdio's own buffers show in kmalloc-*). */
    char *line = NULL;
    for (int i = 0; i < 100; i++) {
        char *n = realloc(line, 64 + (size_t)i * 40);
        if (!n)
            break;
        line = n;
        snprintf(line, 64, "line %d", i);
    }
    free(line);
    /* Half stays allocated, so the caches have something in them. */
}

int main(int argc, char **argv)
{
    const char *reports[64], *file = NULL;
    int nrep = 0, all = 0, proc = 0, wl = 0;
    long pid = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "-h") || !strcmp(argv[a], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[a], "-a")) {
            all = 1;
        } else if (!strcmp(argv[a], "--slabinfo")) {
            proc = 1;
        } else if (!strcmp(argv[a], "--workload")) {
            wl = 1;
        } else if (!strcmp(argv[a], "-r") && a + 1 < argc && nrep < 64) {
            reports[nrep++] = argv[++a];
        } else if (!strcmp(argv[a], "-p") && a + 1 < argc && !pid && !file) {
            char *end;
            pid = strtol(argv[++a], &end, 10);
            if (*end || pid <= 0 || pid > 0x3fffffff) {
                fprintf(stderr, "slabinfo: -p wants a process id, not '%s'\n", argv[a]);
                return 2;
            }
        } else if (argv[a][0] != '-' && !pid && !file) {
            file = argv[a];
        } else {
            fprintf(stderr, "slabinfo: bad argument '%s'\n", argv[a]);
            usage(stderr);
            return 2;
        }
    }
    if (wl && (pid || file)) {
        fprintf(stderr, "slabinfo: --workload runs in this process: not with -p or FILE\n");
        return 2;
    }
    if (wl)
        workload();
    char err[512];
    int opened = pid ? source_open_pid(&src, (pid_t)pid, err, sizeof err)
                     : file ? source_open_file(&src, file, err, sizeof err) : source_open_self(&src, err, sizeof err);
    if (opened != 0) {
        fprintf(stderr, "slabinfo: %s\n", err);
        return 1;
    }
    if (!pid && !file)
        fprintf(stderr, "slabinfo: no -p PID or FILE: this is slabinfo's own process%s\n",
                wl ? ", after --workload" : " (-p PID reads another; --workload gives this one something to show)");
    if (proc) {
        source_print_slabinfo(&src, stdout);
        return 0;
    }
    if (nrep) {
        int rc = 0;
        if (file)
            fprintf(stderr, "slabinfo: an exit report holds the table only: sizes and slab counts below, "
                            "event counters zero\n");
        for (int r = 0; r < nrep; r++) {
            struct sk_cache_info info;
            if (source_info(&src, reports[r], &info)) {
                fprintf(stderr, "slabinfo: no cache named '%s'\n", reports[r]);
                rc = 1;
                continue;
            }
            report(&info);
            /* slub_debug's U (SLABKIT_OPTIONS=debug=U): the call sites of
             * its allocated and freed objects, as the kernel's sysfs
             * alloc_calls and free_calls: this process's, or the
             * sections of an exit report. */
            fflush(stdout);
            if (file) {
                file_calls(file, reports[r]);
            } else if (pid) {
                printf("\n");
                if (source_calls(&src, reports[r], stdout, err, sizeof err) != 0)
                    fprintf(stderr, "slabinfo: %s\n", err);
            } else if (sk_cache_calls(reports[r], 1) == 0) {
                printf("\n");
            }
        }
        return rc;
    }
    summary(all);
    return 0;
}
