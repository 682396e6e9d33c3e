/*
 * slabinfo_format.h — the text of the slabinfo report, in one place for
 * the library (sk_slabinfo, the exit report) and the tools that print or
 * read it (tools/slabinfo for another process or an exit report file).
 */
#ifndef SK_SLAB_SLABINFO_FORMAT_H
#define SK_SLAB_SLABINFO_FORMAT_H

#define SLABINFO_HEADER                                                                      \
    "slabinfo - version: 2.1\n"                                                              \
    "# name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab>"       \
    " : tunables <limit> <batchcount> <sharedfactor>"                                         \
    " : slabdata <active_slabs> <num_slabs> <sharedavail>\n"
/* The columns and widths of the kernel's /proc/slabinfo.  tunables:
 * SLAB's limit and batchcount are, here, the per-CPU array capacity and
 * the refill/flush batch; its shared array is the node's barn:
 * sharedfactor its capacity in batches, sharedavail the objects in it. */
#define SLABINFO_LINE "%-17s %6lu %6lu %6zu %4u %4u : tunables %4u %4u %4u : slabdata %6lu %6lu %6lu\n"
#define SLABINFO_ARGS(i)                                                                          \
    (i)->name, (i)->active_objs, (i)->num_objs, (i)->size, (i)->objs_per_slab, 1u << (i)->order,  \
        (i)->array_capacity, (i)->batch, (i)->batch ? (i)->barn_capacity / (i)->batch : 0,        \
        (i)->active_slabs, (i)->num_slabs, (i)->barn_objs

/* The totals line after the table: the page allocator's pages (managed,
 * free, of which resident, cached per CPU, returned to the OS since
 * start) and the address space reserved, in MiB. */
#define SLABINFO_TOTALS_LINE                                                                    \
    "slabkit: pages managed %lu, free %lu (resident %lu), on per-CPU lists %lu, "               \
    "returned to the OS %lu; address space %zu MiB\n"

/* With more than one node (numa_nodes, src/page/node.c), a line per node
 * before the totals: its CPUs, and its zones' pages managed, in use (per-CPU
 * lists included), free, and free but resident. */
#define SLABINFO_NODE_LINE                                                                      \
    "slabkit: node %u: cpus %lu, pages managed %lu, in use %lu, free %lu (resident %lu)\n"
#define SLABINFO_NODES_MAX 4

/* Before the totals: the slab zones' 2 MiB pageblocks of each migratetype
 * and their free pages (the kernel's /proc/pagetypeinfo), and requests
 * served from another type's lists and pageblocks they claimed. */
#define SLABINFO_PAGETYPES_LINE                                                                 \
    "slabkit: pageblocks unmovable %lu, reclaimable %lu, movable %lu; free pages %lu, %lu, %lu; " \
    "fallbacks %lu, claims %lu\n"

#endif
