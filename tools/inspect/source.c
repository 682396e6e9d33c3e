/*
 * source.c — one cache table for the tools, from their own process,
 * another process or an exit report (source.h).
 *
 * Invariants: a snapshot is taken whole by source_refresh and only read
 * afterwards, so a report prints one consistent copy; SOURCE_SELF reads
 * the live caches through the sk_cache_* API each time and its totals
 * through the same root another process would show (its own memory).
 * An exit report is parsed leniently: lines that are not the table or the
 * totals line (other sections, the program's own stderr) are skipped,
 * and the last table in the file wins.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inspect/source.h"
#include "slab/slabinfo_format.h"

int source_open_self(struct source *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->kind = SOURCE_SELF;
    s->pid = getpid();
    s->rmt = rmt_open(s->pid, err, errlen);
    return source_refresh(s, err, errlen);
}

int source_open_pid(struct source *s, pid_t pid, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->kind = SOURCE_PID;
    s->pid = pid;
    s->rmt = rmt_open(pid, err, errlen);
    if (!s->rmt)
        return -1;
    return source_refresh(s, err, errlen);
}

int source_open_file(struct source *s, const char *path, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->kind = SOURCE_FILE;
    s->path = path;
    return source_refresh(s, err, errlen);
}

void source_close(struct source *s)
{
    free(s->caches);
    rmt_close(s->rmt);
    memset(s, 0, sizeof *s);
}

/* One table line of the exit report into info: 0, or -1 if it is not one. */
static int parse_line(const char *line, struct sk_cache_info *info)
{
    unsigned long active, num, size, per, pages, limit, batch, shared, aslabs, nslabs, avail;
    char name[64];
    memset(info, 0, sizeof *info);
    if (sscanf(line, "%63s %lu %lu %lu %lu %lu : tunables %lu %lu %lu : slabdata %lu %lu %lu", name, &active, &num,
               &size, &per, &pages, &limit, &batch, &shared, &aslabs, &nslabs, &avail) != 12)
        return -1;
    if (!pages || (pages & (pages - 1)))
        return -1;
    snprintf(info->name, sizeof info->name, "%.*s", (int)sizeof info->name - 1, name);
    info->active_objs = active;
    info->num_objs = num;
    info->size = info->object_size = size;   /* the report has the stride only */
    info->objs_per_slab = (unsigned)per;
    info->order = (unsigned)__builtin_ctzl(pages);
    info->array_capacity = (unsigned)limit;
    info->batch = (unsigned)batch;
    info->barn_capacity = (unsigned)(shared * batch);
    info->active_slabs = aslabs;
    info->num_slabs = nslabs;
    info->barn_objs = avail;
    return 0;
}

static int read_file(struct source *s, char *err, size_t errlen)
{
    FILE *f = fopen(s->path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot open %s: %s", s->path, strerror(errno));
        return -1;
    }
    char line[1024];
    size_t cap = 0, tables = 0;
    int in_table = 0;
    while (fgets(line, sizeof line, f)) {
        struct sk_cache_info info;
        struct rmt_totals t = { 0 };
        unsigned node;
        unsigned long ncpus, nmanaged, nused, nfree, nres;
        if (!strcmp(line, "slabinfo - version: 2.1\n")) {
            tables++;
            s->n = 0;   /* the last table wins */
            s->have_totals = 0;
            memset(&s->totals, 0, sizeof s->totals);
            in_table = 1;
        } else if (sscanf(line, SLABINFO_NODE_LINE, &node, &ncpus, &nmanaged, &nused, &nfree, &nres) == 6) {
            if (node < SLABINFO_NODES_MAX) {
                s->totals.node_cpus[node] = ncpus;
                s->totals.node_managed[node] = nmanaged;
                s->totals.node_used[node] = nused;
                s->totals.node_free[node] = nfree;
                s->totals.node_resident[node] = nres;
                if (node + 1 > s->totals.nodes)
                    s->totals.nodes = node + 1;
            }
        } else if (sscanf(line, SLABINFO_TOTALS_LINE, &t.managed_pages, &t.free_pages, &t.resident_pages,
                          &t.pcp_pages, &t.returned_pages, &t.reserved_bytes) == 6) {
            t.reserved_bytes <<= 20;
            /* The node lines came before it. */
            t.nodes = s->totals.nodes;
            memcpy(t.node_cpus, s->totals.node_cpus, sizeof t.node_cpus);
            memcpy(t.node_managed, s->totals.node_managed, sizeof t.node_managed);
            memcpy(t.node_used, s->totals.node_used, sizeof t.node_used);
            memcpy(t.node_free, s->totals.node_free, sizeof t.node_free);
            memcpy(t.node_resident, s->totals.node_resident, sizeof t.node_resident);
            s->totals = t;
            s->have_totals = 1;
            in_table = 0;
        } else if (in_table && parse_line(line, &info) == 0) {
            if (s->n == cap) {
                cap = cap ? 2 * cap : 64;
                struct rmt_cache *nc = realloc(s->caches, cap * sizeof *nc);
                if (!nc) {
                    fclose(f);
                    snprintf(err, errlen, "out of memory");
                    return -1;
                }
                s->caches = nc;
            }
            s->caches[s->n].info = info;
            s->caches[s->n].approx = 0;
            s->n++;
        }
    }
    fclose(f);
    if (!tables) {
        snprintf(err, errlen, "%s holds no slabkit exit report (no \"slabinfo - version: 2.1\" line)", s->path);
        return -1;
    }
    return 0;
}

int source_refresh(struct source *s, char *err, size_t errlen)
{
    switch (s->kind) {
    case SOURCE_SELF: {
        /* The totals through the root, as for another process; without
         * them (no root: cannot happen in a tool linked with slabkit) the
         * table still prints. */
        struct rmt_cache *c = NULL;
        size_t n = 0;
        s->have_totals = s->rmt && rmt_snapshot(s->rmt, &c, &n, &s->totals, err, errlen) == 0;
        free(c);
        return 0;
    }
    case SOURCE_PID: {
        struct rmt_cache *c;
        size_t n;
        if (rmt_snapshot(s->rmt, &c, &n, &s->totals, err, errlen) != 0) {
            /* The process may have exec'd (a wrapper script becomes the
             * program): find its root again, once. */
            struct rmt *again = rmt_open(s->pid, err, errlen);
            if (!again)
                return -1;
            rmt_close(s->rmt);
            s->rmt = again;
            if (rmt_snapshot(s->rmt, &c, &n, &s->totals, err, errlen) != 0)
                return -1;
        }
        free(s->caches);
        s->caches = c;
        s->n = n;
        s->have_totals = 1;
        s->approx = 0;
        for (size_t i = 0; i < n; i++)
            s->approx += c[i].approx != 0;
        return 0;
    }
    case SOURCE_FILE:
        return read_file(s, err, errlen);
    }
    return -1;
}

void source_foreach(struct source *s, void (*fn)(const struct sk_cache_info *, void *), void *arg)
{
    if (s->kind == SOURCE_SELF) {
        sk_cache_foreach(fn, arg);
        return;
    }
    for (size_t i = 0; i < s->n; i++)
        fn(&s->caches[i].info, arg);
}

int source_info(struct source *s, const char *name, struct sk_cache_info *info)
{
    if (s->kind == SOURCE_SELF)
        return sk_cache_info(name, info);
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->caches[i].info.name, name)) {
            *info = s->caches[i].info;
            return 0;
        }
    return -1;
}

static void print_line(const struct sk_cache_info *i, void *arg)
{
    fprintf(arg, SLABINFO_LINE, SLABINFO_ARGS(i));
}

void source_print_slabinfo(struct source *s, FILE *out)
{
    if (s->kind == SOURCE_SELF) {
        sk_slabinfo(out);
    } else {
        fputs(SLABINFO_HEADER, out);
        source_foreach(s, print_line, out);
    }
    source_print_totals(s, out);
}

void source_print_totals(struct source *s, FILE *out)
{
    if (!s->have_totals)
        return;
    const struct rmt_totals *t = &s->totals;
    /* The node lines as the exit report had them (a live process's zones
     * give no CPUs: slabtop shows its nodes' pages). */
    for (unsigned nid = 0; nid < t->nodes && nid < SLABINFO_NODES_MAX; nid++)
        if (t->node_cpus[nid])
            fprintf(out, SLABINFO_NODE_LINE, nid, t->node_cpus[nid], t->node_managed[nid], t->node_used[nid],
                    t->node_free[nid], t->node_resident[nid]);
    fprintf(out, SLABINFO_TOTALS_LINE, t->managed_pages, t->free_pages, t->resident_pages, t->pcp_pages,
            t->returned_pages, t->reserved_bytes >> 20);
    /* On stderr: the table and its totals line keep the exit report's
     * shape for whoever parses them. */
    if (s->approx)
        fprintf(stderr, "slabinfo: %zu caches changed while they were read: their counts may be off by a slab\n",
                s->approx);
}

int source_calls(struct source *s, const char *name, FILE *out, char *err, size_t errlen)
{
    if (s->kind != SOURCE_PID || !s->rmt) {
        snprintf(err, errlen, "alloc_calls are read from a live process (-p) only here");
        return -1;
    }
    return rmt_calls(s->rmt, name, out, err, errlen);
}
