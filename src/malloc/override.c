/*
 * override.c — the malloc family on slabkit, for LD_PRELOAD and -lslabkit;
 * fork, exit statistics and malloc_stats/malloc_trim.
 *
 * Invariants:
 *  - Every entry point is safe before initialisation: the first call of any
 *    of them initialises slabkit (kmalloc's slow path), and initialisation
 *    never calls malloc, so nothing recurses.
 *  - pthread_atfork is registered once, after initialisation, outside any
 *    slabkit lock (it may itself allocate).
 *  - fork takes no slabkit lock (docs/design.md, "fork"): a prepare handler
 *    that did would deadlock against a thread in stdio.  The child, alone,
 *    resets every lock, and repairs what a lock held at the fork protected.
 * Lock order: none taken here except through the layers below.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "slab/slub_cpu.h"

#define ALIAS(name) SK_API __attribute__((used))

static void fork_child(void);

/* slabinfo_at_exit writes to a copy of stderr taken at start-up: programs
 * such as coreutils close stderr in an atexit handler, before we run. */
static int exit_fd = -1;

/* The fork repair, registered once: when the library is loaded (a
 * program may never call malloc itself: calloc, posix_memalign or the sk_*
 * API only), and from the first slow path in case that comes first. */
static void atfork_register(void)
{
    static int done;
    int expect = 0;
    if (__atomic_load_n(&done, __ATOMIC_ACQUIRE) ||
        !__atomic_compare_exchange_n(&done, &expect, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return;
    pthread_atfork(NULL, NULL, fork_child);   /* no prepare: see above */
}

__attribute__((constructor)) static void malloc_layer_load(void)
{
    atfork_register();
}

/* Called from the first slow path after initialisation. */
static void malloc_layer_init(void)
{
    static int done;
    if (likely(__atomic_load_n(&done, __ATOMIC_ACQUIRE)))
        return;
    int expect = 0;
    if (!__atomic_compare_exchange_n(&done, &expect, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return;
    atfork_register();
    if (sk_opt.slabinfo_at_exit)
        exit_fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
}

/* The malloc family hands out 16-byte aligned memory: kmalloc-8, which the
 * kernel-style sk_malloc uses for 1..8 bytes, is never theirs.  malloc's
 * own fast path gets this from its table (kmalloc_arrays16). */
static inline size_t malloc_size(size_t n)
{
    return n < 16 ? 16 : n;
}

static SK_NOINLINE void *malloc_slow(size_t size)
{
    void *p = kmalloc_slow(malloc_size(size));
    malloc_layer_init();
    return p;
}

ALIAS(malloc) void *malloc(size_t size)
{
    if (likely(size <= KMALLOC_SMALL_MAX)) {
        void *obj;
        /* Acquire: kmalloc_init publishes the entry after its cache. */
        if (likely(cpu_pop_fast(__atomic_load_n(&kmalloc_arrays16[(size + 15) >> 4], __ATOMIC_ACQUIRE), &obj))) {
            ((uintptr_t *)obj)[1] = 0;   /* no free marker (slab.h): classes >= 16 */
            return obj;
        }
    } else if (likely(size <= KMALLOC_MAX_CACHE_SIZE)) {
        /* 1-32 KiB: one table load too (every class here is 256-aligned). */
        void *obj;
        unsigned i = __atomic_load_n(&kmalloc_mid_index[(size - 1) >> KMALLOC_MID_SHIFT], __ATOMIC_RELAXED);
        if (likely(cpu_pop_fast(__atomic_load_n(&kmalloc_arrays[i], __ATOMIC_ACQUIRE), &obj))) {
            ((uintptr_t *)obj)[1] = 0;
            return obj;
        }
    }
    return malloc_slow(size);
}

ALIAS(free) void free(void *p)
{
    kfree_inline(p);   /* sk_free's body, inlined: no extra call on the fast path */
}

ALIAS(calloc) void *calloc(size_t nmemb, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return sk_calloc(malloc_size(total), 1);
}

ALIAS(realloc) void *realloc(void *p, size_t size)
{
    if (!p)
        return malloc(size);
    if (size == 0) {          /* glibc: free and return NULL */
        free(p);
        return NULL;
    }
    return sk_realloc(p, malloc_size(size));
}

ALIAS(reallocarray) void *reallocarray(void *p, size_t nmemb, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, total);
}

ALIAS(aligned_alloc) void *aligned_alloc(size_t align, size_t size)
{
    return sk_aligned_alloc(align, malloc_size(size));
}

ALIAS(posix_memalign) int posix_memalign(void **out, size_t align, size_t size)
{
    if (align < sizeof(void *) || (align & (align - 1)))
        return EINVAL;
    int saved = errno;
    void *p = sk_aligned_alloc(align, malloc_size(size));
    if (!p) {
        /* glibc leaves errno ENOMEM when out of memory (its tests rely on
         * it), and untouched for a bad argument. */
        if (errno == EINVAL) {
            errno = saved;
            return EINVAL;
        }
        errno = ENOMEM;
        return ENOMEM;
    }
    *out = p;
    return 0;
}

ALIAS(memalign) void *memalign(size_t align, size_t size)
{
    /* glibc rounds a bad alignment up to a power of two; past 2^63 there
     * is none to round to. */
    if (align > ((size_t)1 << 63)) {
        errno = EINVAL;
        return NULL;
    }
    if (align & (align - 1))
        align = (size_t)1 << (64 - __builtin_clzl(align));
    if (align == 0)
        align = 16;
    return sk_aligned_alloc(align, malloc_size(size));
}

ALIAS(valloc) void *valloc(size_t size)
{
    return memalign(SK_PAGE_SIZE, size);
}

ALIAS(pvalloc) void *pvalloc(size_t size)
{
    size_t r = SK_ALIGN_UP(size ? size : 1, SK_PAGE_SIZE);
    if (r < size) {
        errno = ENOMEM;
        return NULL;
    }
    return memalign(SK_PAGE_SIZE, r);
}

ALIAS(malloc_usable_size) size_t malloc_usable_size(void *p)
{
    return sk_usable_size(p);
}

ALIAS(malloc_trim) int malloc_trim(size_t pad)
{
    (void)pad;
    return sk_trim() > 0;
}

static void print_totals(int fd)
{
    struct page_stats st;
    page_stats(&st);
    os_printf(fd, "slabkit: pages managed %lu, free %lu (resident %lu), on per-CPU lists %lu, "
                 "returned to the OS %lu; address space %zu MiB\n",
              st.managed_pages, st.free_pages, st.dirty_pages, st.pcp_pages, st.purged_pages,
              vm_reserved_bytes() >> 20);
}

ALIAS(malloc_stats) void malloc_stats(void)
{
    slab_init();
    sk_slabinfo(stderr);
    print_totals(2);
}

/* slabinfo_at_exit=1: the process's slabinfo on stderr when it exits. */
__attribute__((destructor)) static void slabinfo_at_exit(void)
{
    if (!sk_opt.slabinfo_at_exit || !slab_ready())
        return;
    FILE *out = exit_fd >= 0 ? fdopen(exit_fd, "w") : NULL;
    sk_slabinfo(out ? out : stderr);
    if (out)
        fflush(out);
    print_totals(exit_fd >= 0 ? exit_fd : 2);
}

/* ---- fork ---- */


static bool lock_was_held(lock_t *l)
{
    return __atomic_load_n(&l->state, __ATOMIC_RELAXED) != 0;
}

static void reset_arrays(cpu_arrays_t tab)
{
    if (tab == cpu_empty_arrays)
        return;
    for (int cpu = 0; cpu <= cpu_nr_ids; cpu++) {    /* and the dummy slot */
        struct cpu_array *a = cpu_array_at(tab, cpu);
        a->lock.v = 0;
        /* A drain caught mid-way still had every object in the array. */
        a->word &= ~(uint64_t)CPU_ARRAY_LOCKED;
    }
}

static void fork_child(void)
{
    os_options_atfork_child();
    lock_atfork_child();
    cpu_atfork_child();
    vm_atfork_child();
    page_atfork_child();
    slab_atfork_child();
    for (unsigned o = 0; o <= PCP_MAX_ORDER; o++)
        reset_arrays(page_pcp.lists[o]);
    for (struct slab_cache *c = slab_caches(); c; c = c->next) {
        reset_arrays(slab_arrays(c));
        if (c->slots)
            slub_cpu_atfork_child(c);
        for (int cpu = 0; cpu < cpu_nr_ids; cpu++) {
            struct slab_cpu *sc = &c->cpu[cpu];
            if (lock_was_held(&sc->lock)) {
                /* Caught mid-refill: leak this CPU's slabs in the child. */
                sc->slab = NULL;
                sc->freelist = NULL;
                sc->partial = NULL;
                sc->partial_slabs = 0;
            }
            lock_reset(&sc->lock);
        }
        for (int n = 0; n < MAX_NUMNODES; n++) {
            struct slab_node *nd = &c->node[n];
            if (lock_was_held(&nd->list_lock)) {
                /* Abandon a list caught mid-surgery: its slabs keep their
                 * objects, and list_gen makes removals from it no-ops. */
                nd->partial = NULL;
                nd->nr_partial = 0;
                nd->gen = (uint16_t)(nd->gen + 1 ? nd->gen + 1 : 1);
                if (c->mode == SLAB_MODE_CLASSIC)
                    slab_classic_abandon_node(nd);
            }
            lock_reset(&nd->list_lock);
            if (lock_was_held(&nd->barn.lock))
                nd->barn.count = 0;     /* caught mid-copy: leak its objects */
            lock_reset(&nd->barn.lock);
        }
    }
}
