/*
 * inspect.h — the root a debugger-like tool finds in a live process that
 * uses slabkit (tools/slabinfo -p, tools/slabtop -p; docs/inspect.md).
 *
 * sk_inspect_root is one constant, exported struct (symbol version
 * SLABKIT_INSPECT_1 in tools/libslabkit.map): magic, version and a hash
 * of every struct layout the tools read, then the addresses of the state
 * they walk.  It is built by the linker (relocated, then read-only), so the
 * running process does nothing for it: no store, no call, no thread.  A
 * tool reads it and everything it points to with process_vm_readv, and
 * refuses a process whose layout hash differs from its own, since it
 * would read the structs at the wrong offsets.
 */
#ifndef SK_SLAB_INSPECT_H
#define SK_SLAB_INSPECT_H

#include <stddef.h>
#include <stdint.h>

#include "slab/slab.h"
#include "slab/slub_cpu.h"

#define SK_INSPECT_MAGIC 0x50534e494b42534cull   /* "LSBKINSP" little-endian */
#define SK_INSPECT_VERSION 2u   /* 2: per-CPU arrays and slab_cpu CPU-major */

/* FNV-1a over the sizes and offsets the remote walk depends on: any
 * change to one of them gives another hash, and the tools refuse. */
#define SKI_MIX(h, v) ((((uint64_t)(h)) ^ (uint64_t)(v)) * 0x100000001b3ull)
#define SKI_OFF(t, f) offsetof(struct t, f)
#define SK_INSPECT_LAYOUT                                                                                      \
    SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(                                  \
    SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(   \
    SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(   \
    SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(SKI_MIX(                         \
        0xcbf29ce484222325ull, SK_INSPECT_VERSION), sizeof(struct slab_cache)),                              \
        SKI_OFF(slab_cache, size)), SKI_OFF(slab_cache, offset)), SKI_OFF(slab_cache, random)),             \
        SKI_OFF(slab_cache, objects)), SKI_OFF(slab_cache, order)), SKI_OFF(slab_cache, object_size)),      \
        SKI_OFF(slab_cache, batch)), SKI_OFF(slab_cache, cpu_partial)), SKI_OFF(slab_cache, mode)),         \
        SKI_OFF(slab_cache, slots)), SKI_OFF(slab_cache, cpu)), SKI_OFF(slab_cache, node)),                 \
        SKI_OFF(slab_cache, next)), SKI_OFF(slab_cache, name)), SKI_OFF(slab_cache, arrays)),                 \
        sizeof(struct slab_cpu)), SKI_OFF(slab_cpu, partial)), SKI_OFF(slab_cpu, stat)),                    \
        SKI_OFF(slab_cpu, batch_in)), sizeof(struct slab_node)), SKI_OFF(slab_node, barn)),                 \
        SKI_OFF(slab_node, classic)), sizeof(struct sk_page)), SKI_OFF(sk_page, slab.counters)),            \
        sizeof(struct zone)), SKI_OFF(zone, managed_pages)), sizeof(struct pcp_set)),                       \
        sizeof(struct slub_slot)), CPU_ARRAY_SHIFT), SK_STAT_NR), PAGE_NR_ZONES), SLAB_NAME_LEN),           \
        PCP_MAX_ORDER), CPU_MAX_IDS), SKI_OFF(slab_cache, flags)), SKI_OFF(slab_cache, kofs)),              \
        SKI_OFF(slab_cache, dbg.track_off)), SKI_OFF(slab_cache, dbg.orig_off)), SKI_OFF(slab_cache, kmalloc)),     \
        SKI_OFF(slab_node, full)), sizeof(struct debug_track)), SK_DEBUG_U), SKI_OFF(slab_cpu, fresh_left))

struct sk_inspect {
    uint64_t magic;                    /* SK_INSPECT_MAGIC */
    uint32_t version;                  /* SK_INSPECT_VERSION */
    uint32_t size;                     /* sizeof(struct sk_inspect) */
    uint64_t layout;                   /* SK_INSPECT_LAYOUT */
    struct slab_cache *const *caches;  /* head of the list of caches */
    const int *nr_cpu_ids;             /* CPU ids with per-CPU state */
    const struct zone *zones;          /* [PAGE_NR_ZONES] */
    const struct pcp_set *pcp;         /* per-CPU page lists */
    const size_t *vm_bytes;            /* address space reserved */
    const uintptr_t *free_key;         /* slab_free_key: marks a free object
                                        * (slub_debug's free_calls) */
};

extern const struct sk_inspect sk_inspect_root;

#endif
