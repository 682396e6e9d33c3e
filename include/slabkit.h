/*
 * slabkit.h — the one public header of slabkit.
 *
 * slabkit is the Linux kernel's memory-allocation stack in user space:
 * slices of address space, a buddy page allocator with per-CPU page lists,
 * SLUB slab caches reached through per-CPU object arrays, kmalloc size
 * classes, the malloc family on top, and an adaptive mutex.
 *
 * Vocabulary (used the same way in every file):
 *   page    a 4 KiB page and its descriptor (struct sk_page, like struct page)
 *   block   a buddy block of 2^order pages
 *   slab    the block a cache carves into objects
 *   object  what the user gets from a cache or from malloc
 *   slice   a 64 MiB aligned piece of address space, one page size each
 *
 * Every function here is thread-safe.  Options come from the environment
 * variable SLABKIT_OPTIONS (see README.md), read once at start-up.
 */
#ifndef SLABKIT_H
#define SLABKIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SK_API __attribute__((visibility("default")))

/* ---- page allocator ---------------------------------------------------- */

/* Largest buddy order: 2^SK_MAX_ORDER pages (64 MiB, one slice). */
#define SK_PAGE_SHIFT 12
#define SK_PAGE_SIZE  ((size_t)1 << SK_PAGE_SHIFT)
#define SK_MAX_ORDER  14

/* A naturally aligned block of 2^order pages; NULL with errno ENOMEM. */
SK_API void *sk_alloc_pages(unsigned order);
/* Free a block from sk_alloc_pages; order must be the order it was got with. */
SK_API void sk_free_pages(void *block, unsigned order);
/* Order of the allocated block that starts at p; -1 if p is not the start
 * of a block slabkit handed out (works for any pointer value). */
SK_API int sk_page_order(const void *p);

/* ---- object caches (the kernel's kmem_cache) ---------------------------- */

typedef struct sk_cache sk_cache_t;

/* Flags for sk_cache_create. */
#define SK_CACHE_HWALIGN  0x1u  /* align objects to a cache line */
/*
 * slub_debug for this cache (docs/slub_debug.md), the kernel's SLAB_* debug
 * flags and values; SLABKIT_OPTIONS=debug=FZPUT gives them to every cache,
 * or to those named by debug_caches=NAME:NAME.  A debug cache takes its slow
 * path for every alloc and free (other caches keep their fast paths), and
 * reports a bug the kernel's way on stderr, then abort()s (debug_continue=1:
 * repairs and goes on).
 */
#define SK_CACHE_CONSISTENCY_CHECKS 0x00000100u /* F: each free checks the object is live and sound */
#define SK_CACHE_RED_ZONE        0x00000400u /* Z: red zones around each object, checked at free and alloc */
#define SK_CACHE_POISON          0x00000800u /* P: free objects filled with 0x6b..0xa5, checked at alloc */
#define SK_CACHE_STORE_USER      0x00010000u /* U: each object keeps its last alloc and free stack */
#define SK_CACHE_TRACE           0x00200000u /* T: each alloc and free logged on stderr */
#define SK_CACHE_DEBUG (SK_CACHE_CONSISTENCY_CHECKS | SK_CACHE_RED_ZONE | SK_CACHE_POISON | SK_CACHE_STORE_USER)

/*
 * Create a cache of objects of `size` bytes aligned to `align` (0: the
 * natural alignment, at least 8).  `ctor`, when given, runs once for each
 * object when its slab is created; objects must be freed in their
 * constructed state.  NULL with errno EINVAL for a bad size or alignment
 * or a name of 0 or more than 31 bytes (never cut), EEXIST when a cache
 * of that name exists (the name is how sk_cache_info and debug_caches
 * find it); a line on stderr says which.
 */
SK_API sk_cache_t *sk_cache_create(const char *name, size_t size, size_t align,
                                   unsigned flags, void (*ctor)(void *));
SK_API void *sk_cache_alloc(sk_cache_t *cache);
SK_API void sk_cache_free(sk_cache_t *cache, void *obj);
/* Drain every CPU's array of this cache and give its empty slabs back to
 * the page allocator.  Returns the number of slabs freed. */
SK_API int sk_cache_shrink(sk_cache_t *cache);
/* Destroy an empty cache: 0.  With objects still allocated it prints the
 * cache's name and the count, refuses, and returns -1 (errno EBUSY). */
SK_API int sk_cache_destroy(sk_cache_t *cache);
SK_API const char *sk_cache_name(const sk_cache_t *cache);
SK_API size_t sk_cache_object_size(const sk_cache_t *cache);

/* ---- kmalloc ----------------------------------------------------------- */

SK_API void *sk_malloc(size_t size);
SK_API void sk_free(void *p);
SK_API void *sk_calloc(size_t nmemb, size_t size);
SK_API void *sk_realloc(void *p, size_t size);
SK_API void *sk_aligned_alloc(size_t align, size_t size);
SK_API size_t sk_usable_size(const void *p);
/* Whether p is a live object of the KFENCE pool (SLABKIT_OPTIONS=kfence=MS:
 * sampled allocations between guard pages, docs/kfence.md): 1 or 0. */
SK_API int sk_kfence_object(const void *p);
/* Return free memory to the OS now (malloc_trim); bytes returned. */
SK_API size_t sk_trim(void);

/* ---- the memory budget (docs/design.md, "Memory budget") ---------------- */

/* Memory slabkit holds (pages in use, free pages still resident, direct
 * mappings) against a limit: mem_limit_mb, or the cgroup's memory limit.
 * Below the low watermark of headroom (limit - charged) a background
 * reclaimer gives memory back up to high; an allocation that would go
 * below min reclaims first.  Under a hard budget (mem_limit_mb=N,
 * sk_mem_budget_set) it then fails with ENOMEM if it cannot; under the
 * cgroup's (soft) it goes on, and the kernel's memory controller, which
 * counts touched pages only, decides, as for glibc's malloc. */
struct sk_mem_budget {
    size_t limit;                   /* bytes; 0: no budget */
    size_t min, low, high;          /* watermarks of headroom, bytes */
    size_t charged;                 /* bytes charged now */
    size_t direct;                  /* of which direct mappings */
    unsigned long kswapd_wakes;     /* times headroom fell below low */
    unsigned long kswapd_runs;      /* background reclaim passes */
    size_t kswapd_reclaimed;        /* bytes they gave back */
    unsigned long direct_reclaims;  /* allocations that reclaimed before going on */
    size_t direct_reclaimed;        /* bytes they gave back */
    unsigned long below_min;        /* allocations let below min (__GFP_HIGH, GFP_ATOMIC) */
    unsigned long refused;          /* allocations refused: past their watermark (hard) */
    unsigned long overruns;         /* allocations let past it (soft: the cgroup's limit) */
    int hard;                       /* 1: mem_limit_mb or sk_mem_budget_set; 0: the cgroup's */
};
SK_API void sk_mem_budget(struct sk_mem_budget *out);
/* Set a hard limit in bytes (0: none), and with it the watermarks. */
SK_API void sk_mem_budget_set(size_t bytes);

/* ---- statistics --------------------------------------------------------- */

/* /proc/slabinfo version 2.1, exactly. */
SK_API void sk_slabinfo(FILE *out);

/* SLUB-style event counters of one cache, summed over CPUs. */
enum sk_stat_item {
    SK_ALLOC_FASTPATH,      /* object popped from the per-CPU array */
    SK_ALLOC_SLOWPATH,      /* array empty: refill */
    SK_FREE_FASTPATH,       /* object pushed on the per-CPU array */
    SK_FREE_SLOWPATH,       /* array full: flush */
    SK_ARRAY_REFILL,        /* batches moved slabs -> array */
    SK_ARRAY_FLUSH,         /* batches moved array -> slabs */
    SK_ALLOC_CPU_SLAB,      /* refill served by this CPU's current slab */
    SK_CPU_PARTIAL_ALLOC,   /* refill took a slab from the CPU partial list */
    SK_CPU_PARTIAL_FREE,    /* a slab that became partial joined a CPU list */
    SK_CPU_PARTIAL_DRAIN,   /* CPU partial list moved to the node list */
    SK_NODE_PARTIAL_ALLOC,  /* refill took a slab from the node list */
    SK_NODE_PARTIAL_FREE,   /* a slab went on the node list */
    SK_NEW_SLAB,            /* slab allocated from the page allocator */
    SK_FREE_SLAB,           /* empty slab given back */
    SK_CMPXCHG_FAIL,        /* double-width cmpxchg retries */
    SK_REMOTE_DRAIN,        /* remote drains of another CPU's array */
    SK_BARN_PUT,            /* flushes that left their batch in the node's barn */
    SK_BARN_GET,            /* refills served from the barn */
    SK_FREE_REMOTE,         /* frees sent home to a slab of another CPU (in free_slowpath too) */
    SK_STAT_NR
};
SK_API extern const char *const sk_stat_names[SK_STAT_NR];

struct sk_cache_info {
    char name[32];
    size_t object_size;       /* bytes the user asked for */
    size_t size;              /* bytes per object in the slab */
    size_t align;
    unsigned objs_per_slab;
    unsigned order;           /* slab = 2^order pages */
    unsigned reserved;        /* slab_reserved header bytes */
    unsigned cpu_partial;     /* objects kept on a CPU's partial list */
    unsigned array_capacity;  /* per-CPU array size */
    unsigned batch;           /* objects per refill / flush */
    unsigned long active_objs;   /* allocated (counting per-CPU arrays) */
    unsigned long num_objs;
    unsigned long active_slabs;  /* slabs holding at least one object */
    unsigned long num_slabs;
    unsigned long partial_slabs; /* on node partial lists */
    unsigned long cpu_partial_slabs;
    unsigned long array_objs;    /* objects sitting in per-CPU arrays */
    unsigned long barn_objs;     /* free objects in the nodes' barns */
    unsigned barn_capacity;      /* objects a node's barn holds (0: off) */
    unsigned long stat[SK_STAT_NR];
    /* The CPU partial list's limit in slabs (the 5.16+ kernels' conversion
     * of cpu_partial), or 0 where it is counted in free objects against
     * cpu_partial, as 3.1 did (sheaves=0). */
    unsigned cpu_partial_slabs_max;
};
/* Fill `info` for the cache named `name` (e.g. "kmalloc-64"): 0, or -1. */
SK_API int sk_cache_info(const char *name, struct sk_cache_info *info);
/* Call fn for each cache, in creation order. */
SK_API void sk_cache_foreach(void (*fn)(const struct sk_cache_info *, void *), void *arg);
/* For a cache with SK_CACHE_STORE_USER (debug=U): its alloc_calls (sites of
 * the objects allocated now) and free_calls (of its free objects' last
 * free), as the kernel's /sys/kernel/slab/NAME files, written to fd with
 * write(2), no allocation.  0; -1 for no such cache or one without U. */
SK_API int sk_cache_calls(const char *name, int fd);

/* ---- address space ------------------------------------------------------ */

/* Map `size` bytes backed by pages of `page_size` (4096 or 2 MiB; 0 picks
 * by size); NULL with errno ENOMEM or EINVAL. */
SK_API void *sk_vm_map(size_t size, size_t page_size);
SK_API int sk_vm_unmap(void *p, size_t size);

/* ---- sk_mutex: futex mutex with MCS-queued optimistic spinning ---------- */

/*
 * A mutex for critical sections whose holder may be preempted.  Uncontended
 * lock and unlock are one compare-and-swap each.  Contended waiters spin in
 * an MCS queue (only its head polls the lock) while the owner looks like it
 * is running, for a bounded time, then sleep on a futex; a waiter that has
 * waited more than 1 ms takes a hand-off token and the next unlock passes
 * the lock to it.  SLABKIT_OPTIONS=mutex_spin=0 turns spinning off;
 * mutex_spin=mcs spins as kernel mutexes did before 2014.  Never
 * allocates; valid when zero-filled; not recursive.  docs/mutex.md.
 */
typedef struct sk_mutex {
    uint32_t state;     /* LOCKED | SLEEPERS | HANDOFF bits; 0 = free; futex word */
    uint32_t handoff;   /* hand-off token: 0 free, 1 held by a starving waiter, 2 granted */
    uint32_t owner;     /* (acquisition count << 12) | owner's CPU + 1: spin heuristic only */
    uint32_t spinners;  /* threads in the spin queue, at most CPUs - 1 */
    uint32_t handoff_after; /* no new hand-off before this time (us, wrapping) */
    uint32_t wait;      /* mutex_spin=mcs only: wait lock (bit 0), sleepers (<< 1) */
    void    *osq;       /* tail of the MCS queue of spinners */
} sk_mutex_t;

#define SK_MUTEX_INITIALIZER { 0, 0, 0, 0, 0, 0, NULL }

SK_API void sk_mutex_init(sk_mutex_t *m);
SK_API void sk_mutex_lock(sk_mutex_t *m);
SK_API int  sk_mutex_trylock(sk_mutex_t *m);  /* 1 if taken, 0 if busy */
SK_API void sk_mutex_unlock(sk_mutex_t *m);
SK_API void sk_mutex_destroy(sk_mutex_t *m);

/* ---- in-memory files (the tmpfs analogue, docs/shmem.md) ---------------- */

/* A file whose pages come from the page allocator and sit on the LRU;
 * with shmem_limit_mb and swap_file they swap.  Holes read as zeros.
 * Any number of threads may read, write and truncate one file at once
 * (writes to a file are serialised, as by the kernel's inode lock). */
typedef struct sk_file sk_file_t;
SK_API sk_file_t *sk_file_create(const char *name);          /* NULL, errno */
SK_API ssize_t sk_file_pwrite(sk_file_t *f, const void *buf, size_t len, off_t off);
SK_API ssize_t sk_file_pread(sk_file_t *f, void *buf, size_t len, off_t off);
SK_API int sk_file_truncate(sk_file_t *f, off_t size);        /* 0, or -1, errno */
SK_API off_t sk_file_size(sk_file_t *f);
SK_API void sk_file_destroy(sk_file_t *f);                    /* frees its pages */
/* /proc/meminfo-style lines: resident file pages, each node's active and
 * inactive lists, pages in per-CPU batches, swap in use, LRU events. */
SK_API void sk_file_stats(FILE *out);

/* ---- the malloc family's newer members ---------------------------------- */

/*
 * libslabkit also exports these, which older C libraries do not declare:
 * C23's sized frees (p from malloc, calloc or realloc of `size` bytes; from
 * aligned_alloc(align, size)), which skip free's page-map walk, and
 * macOS's and jemalloc's malloc_good_size, the usable size malloc(size)
 * would give.  A size other than the one asked for is undefined behaviour,
 * as in C23; SLABKIT_OPTIONS=sized_check=1 catches it.
 */
#ifdef __THROW                /* as glibc declares its malloc family */
#define SK_THROW __THROW
#else
#define SK_THROW
#endif
SK_API void free_sized(void *p, size_t size) SK_THROW;
SK_API void free_aligned_sized(void *p, size_t align, size_t size) SK_THROW;
SK_API size_t malloc_good_size(size_t size) SK_THROW;

/* ---- leak check (kmemleak, docs/kmemleak.md) ----------------------------- */

/*
 * Scan the heap conservatively from the roots (every module's data and bss,
 * this thread's stack, registers and TLS, the stacks of threads sleeping in
 * the kernel) and report every allocated object no word points at or into,
 * in kmemleak's format, on stderr.  Returns the number of unreferenced
 * objects, or -1 (errno) when the scan cannot run (EBUSY: another scan is
 * running).  Never allocates.  SLABKIT_OPTIONS=leak_check=1 runs it at exit.
 */
SK_API long sk_leak_check(void);

/* ---- options ------------------------------------------------------------ */

/* The value of a SLABKIT_OPTIONS key as slabkit uses it (defaults applied);
 * -1 for an unknown key. */
SK_API long sk_option(const char *key);

#ifdef __cplusplus
}
#endif
#endif /* SLABKIT_H */
