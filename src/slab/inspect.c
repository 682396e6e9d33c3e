/*
 * inspect.c — sk_inspect_root, the constant a tool reads to walk this
 * process's caches and page counters from outside (inspect.h,
 * docs/inspect.md).
 *
 * Invariants: the root is const and statically initialised (addresses
 * only, filled by the dynamic linker's relocations before any code
 * runs), so nothing in the process ever writes it, and inspection costs
 * the process nothing.  slab_init names it once so a static link keeps
 * this object.
 */
#include "slab/inspect.h"

SK_API const struct sk_inspect sk_inspect_root = {
    .magic = SK_INSPECT_MAGIC,
    .version = SK_INSPECT_VERSION,
    .size = sizeof(struct sk_inspect),
    .layout = SK_INSPECT_LAYOUT,
    .caches = &slab_cache_list,
    .nr_cpu_ids = &cpu_nr_ids,
    .zones = page_zones,
    .pcp = &page_pcp,
    .vm_bytes = &vm_bytes,
    .free_key = &slab_free_key,
};
