/*
 * remote.h — read slabkit's state out of another running process
 * (slabinfo -p, slabtop -p; docs/inspect.md).
 *
 * The tool finds the process's sk_inspect_root (src/slab/inspect.h) and
 * copies what it points to with process_vm_readv: the target runs no code
 * for it.  The target keeps allocating meanwhile, so every walk is
 * bounded and every pointer is checked before it is followed; a cache
 * whose lists changed under the walk is marked approximate, never
 * followed into a loop or a crash.
 */
#ifndef SK_TOOLS_REMOTE_H
#define SK_TOOLS_REMOTE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "slabkit.h"
#include "slab/slabinfo_format.h"

struct rmt;   /* an opened process */

/* Open process pid: find its root and check its layout.  NULL with a
 * one-line reason in err (no newline) when the process is gone, does
 * not use slabkit, comes from another slabkit version, or may not be
 * read (Yama's ptrace_scope, another user). */
struct rmt *rmt_open(pid_t pid, char *err, size_t errlen);
void rmt_close(struct rmt *r);

/* One cache as sk_cache_info describes it; approx: the walk met a list
 * that changed under it (counts may be off by a slab). */
struct rmt_cache {
    struct sk_cache_info info;
    int approx;
};

/* The page allocator's totals, as the exit report's totals line. */
struct rmt_totals {
    unsigned long managed_pages, free_pages, resident_pages, pcp_pages, returned_pages;
    size_t reserved_bytes;   /* address space */
    /* Per node, when more than one has pages (SLABINFO_NODE_LINE's). */
    unsigned nodes;
    unsigned long node_cpus[SLABINFO_NODES_MAX], node_managed[SLABINFO_NODES_MAX],
        node_used[SLABINFO_NODES_MAX], node_free[SLABINFO_NODES_MAX], node_resident[SLABINFO_NODES_MAX];
};

/* A snapshot of every cache (creation order, *n of them, malloc'ed) and
 * the totals: 0, or -1 with a one-line reason in err (the process exited,
 * or its memory could not be read). */
int rmt_snapshot(struct rmt *r, struct rmt_cache **caches, size_t *n, struct rmt_totals *t, char *err,
                 size_t errlen);

/* slub_debug's alloc_calls and free_calls (debug=U) of the cache called
 * name, read from its slabs, written to out in the kernel's format (as
 * slabinfo -r shows them for its own process): 0, or -1 with a reason in
 * err (no such cache, or the process could not be read). */
int rmt_calls(struct rmt *r, const char *name, FILE *out, char *err, size_t errlen);

#endif
