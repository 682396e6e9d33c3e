/*
 * override.c — the malloc family on slabkit, for LD_PRELOAD and -lslabkit,
 * with C23's sized frees; fork, exit statistics and malloc_stats/malloc_trim.
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
 *  - A sized free trusts its size only while free, as the program links it,
 *    is this file's (malloc.h); the exit output goes only to the stderr
 *    copy taken at load, and only while it is still the same file.
 * Lock order: none taken here except through the layers below.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "malloc/malloc.h"
#include "debug/kfence.h"
#include "debug/report.h"
#include "slab/slabinfo_format.h"
#include "slab/slub_cpu.h"

#define ALIAS(name) SK_API __attribute__((used))

static void fork_child(void);

/*
 * slabinfo_at_exit writes to a copy of stderr taken when the library is
 * loaded: programs such as coreutils close stderr in an atexit handler,
 * before our destructor runs, and others reopen fd 2 on a file of their
 * own.  The copy's identity (device, inode) is kept, and at exit the table
 * goes out only if the copy is still that file: a program that closed
 * every descriptor and opened its own on the same number gets nothing
 * written into it.  Taken only with the option on.
 *
 * slabinfo_file=PATH sends the exit output to PATH instead (%p: the pid),
 * created and truncated at load, its absolute path kept: a program that
 * closes every descriptor or changes directory still gets its report, the
 * file being opened again by that path at exit.  A forked child opens its
 * own file when the path names the pid.
 */
static int exit_fd = -1;
static dev_t exit_dev;
static ino_t exit_ino;
static char exit_path[4096] SK_BIG_BSS;   /* slabinfo_file, expanded and absolute */

/* exit_path from the option: %p the pid, %% a %, relative to the
 * directory we start in.  False when it does not fit. */
static bool exit_path_expand(void)
{
    const char *pat = sk_opt.slabinfo_file;
    size_t n = 0, cap = sizeof exit_path;
    if (pat[0] != '/') {
        if (!getcwd(exit_path, cap - 2))
            return false;
        n = strlen(exit_path);
        exit_path[n++] = '/';
    }
    for (const char *p = pat; *p && n + 24 < cap; p++) {
        if (p[0] == '%' && p[1] == 'p') {
            n += (size_t)snprintf(exit_path + n, cap - n, "%d", (int)getpid());
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            exit_path[n++] = '%';
            p++;
        } else {
            exit_path[n++] = *p;
        }
    }
    exit_path[n] = 0;
    return n + 24 < cap;
}

/* Keep fd (ours now) as the exit output, off the standard descriptors. */
static void exit_output_keep(int fd)
{
    struct stat st;
    if (fd >= 0 && fd < 3) {
        int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        close(fd);
        fd = high;
    }
    if (fd < 0)
        return;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return;
    }
    exit_dev = st.st_dev;
    exit_ino = st.st_ino;
    exit_fd = fd;
}

static void exit_file_open(void)
{
    if (!exit_path_expand()) {
        os_warn("slabinfo_file=%s: path too long: no exit report", sk_opt.slabinfo_file);
        exit_path[0] = 0;
        return;
    }
    int fd = open(exit_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        os_warn("slabinfo_file: cannot create %s: %s: no exit report", exit_path, strerror(errno));
    exit_output_keep(fd);
}

static void exit_output_open(void)
{
    if (exit_fd >= 0)
        return;
    os_options_init();
    if (sk_opt.slabinfo_file[0]) {
        exit_file_open();
        return;
    }
    if (sk_opt.slabinfo_at_exit <= 0 && sk_opt.leak_check <= 0 && !(sk_opt.debug && sk_opt.debug_caches[0]))
        return;
    exit_output_keep(fcntl(2, F_DUPFD_CLOEXEC, 3));
}

/* The exit output's descriptor, or -1 if it is no longer our copy (a
 * slabinfo_file is opened again by its path). */
static int exit_output_fd(void)
{
    struct stat st;
    if (exit_fd >= 0 && fstat(exit_fd, &st) == 0 && st.st_dev == exit_dev && st.st_ino == exit_ino)
        return exit_fd;
    if (!exit_path[0])
        return -1;
    exit_fd = -1;
    exit_output_keep(open(exit_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644));
    return exit_fd;
}

/* A forked child whose report file names the pid gets its own. */
static void exit_output_atfork_child(void)
{
    if (exit_path[0] && strstr(sk_opt.slabinfo_file, "%p")) {
        if (exit_fd >= 0)
            close(exit_fd);
        exit_fd = -1;
        exit_file_open();
    }
}

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

static void slabinfo_at_exit(void);

/* The status a CI run sees (leak_exitcode, debug_exitcode): the program's
 * stdio flushed and the exit report written, as exit() would have, then
 * _exit with it (what LeakSanitizer does). */
static void exit_with(long code)
{
    fflush(NULL);
    slabinfo_at_exit();
    _exit((int)code);
}

/* leak_check=1: the kmemleak scan when the process exits through exit(),
 * registered at load so that it runs after the program's own atexit
 * handlers and before libc's stdio is torn down; then the exit codes. */
static void exit_checks(void)
{
    long leaks = 0;
    if (sk_opt.leak_check > 0) {
        int fd = exit_output_fd();
        leaks = slab_leak_check_fd(fd >= 0 ? fd : -1);
    }
    if (leaks > 0 && sk_opt.leak_exitcode)
        exit_with(sk_opt.leak_exitcode);
    if (sk_opt.debug_exitcode && slab_debug_reports() > 0)
        exit_with(sk_opt.debug_exitcode);
}

__attribute__((constructor)) static void malloc_layer_load(void)
{
    atfork_register();
    os_leader_watch();    /* the constructor runs on the leader (os.h) */
    exit_output_open();
    if (sk_opt.leak_check > 0 || sk_opt.debug_exitcode)
        atexit(exit_checks);
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
}

SK_NOINLINE void *malloc_large(size_t size)
{
    void *obj = kmalloc_large_fast(size);
    return likely(obj) ? obj : malloc_slow(size);
}

SK_NOINLINE void *malloc_slow(size_t size)
{
    void *p = kmalloc_slow(malloc_size(size));
    malloc_layer_init();
    return p;
}

/* malloc and free start on a cache line: their fast paths then span the
 * fewest lines whatever the code before them, where gcc's 16-byte
 * alignment left them to the layout (a malloc+free pair of 32 KiB: 14.55
 * ns at one layout, 13.26 aligned; 64 B: 5.48 and 5.40, 7 interleaved
 * runs). */
ALIAS(malloc) __attribute__((aligned(64))) void *malloc(size_t size)
{
    return malloc_inline(size);
}

ALIAS(free) __attribute__((aligned(64))) void free(void *p)
{
    kfree_inline(p);   /* sk_free's body, inlined: no extra call on the fast path */
}

/* free itself, not interposable: what sized frees compare the program's
 * free with (malloc.h). */
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-attributes"   /* glibc's leaf, nothrow */
#endif
extern __typeof__(free) free_own __attribute__((alias("free"), visibility("hidden")));
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* ---- sized frees (malloc.h) ---- */

/* Is free, as the program links it, slabkit's?  (Read through a volatile:
 * free is interposable, so the compiler may not fold the comparison.) */
static bool free_is_ours(void)
{
    void *volatile linked = (void *)free;
    return linked == (void *)free_own;
}

static struct sized_entry free_entry = { SIZED_UNKNOWN, false, "free_sized", (void *)free, free_is_ours };
static struct sized_entry free_aligned_entry = {
    SIZED_UNKNOWN, false, "free_aligned_sized", (void *)free, free_is_ours
};

/* C23: free p, which malloc, calloc or realloc gave for `size` bytes. */
ALIAS(free_sized) void free_sized(void *p, size_t size)
{
    sized_free(&free_entry, p, size, 0);
}

/* C23: free p, which aligned_alloc(align, size) gave. */
ALIAS(free_aligned_sized) void free_aligned_sized(void *p, size_t align, size_t size)
{
    sized_free(&free_aligned_entry, p, size, align);
}

static int sized_resolve(struct sized_entry *e)
{
    int r = !e->ours() ? SIZED_FORWARD : sk_option("sized_check") > 0 ? SIZED_CHECK
            : sk_option("kfence") > 0 ? SIZED_LOOKUP : SIZED_TRUST;
    __atomic_store_n(&e->route, r, __ATOMIC_RELAXED);
    return r;
}

/* The class a sized free's size and alignment name (slabkit initialised),
 * or NULL for a large block. */
static struct slab_cache *sized_class(size_t size, size_t align)
{
    if (align > 16)
        return kmalloc_aligned_cache(align, size);
    return size <= KMALLOC_MAX_CACHE_SIZE ? kmalloc_caches[kmalloc_index(size)] : NULL;
}

SK_NOINLINE void sized_free_slow(struct sized_entry *e, void *p, size_t size, size_t align)
{
    int route = __atomic_load_n(&e->route, __ATOMIC_RELAXED);
    if (route == SIZED_UNKNOWN)
        route = sized_resolve(e);
    if (route == SIZED_FORWARD) {
        if (e->forward_align)
            ((void (*)(void *, size_t))e->forward)(p, align);
        else
            ((void (*)(void *))e->forward)(p);
        return;
    }
    if (!p)
        return;
    struct slab_cache *c, *want = sized_class(size, align);
    if (route == SIZED_TRUST && want) {
        slab_free_sized(want, p, e->call);
        return;
    }
    if (slab_of_object(p, &c)) {
        if (route == SIZED_CHECK && c != want)
            os_fatal("wrong size: %s(%p, %zu) of an object of %s", e->call, p, size, c->name);
        slab_free(c, p, e->call);
        return;
    }
    if (route == SIZED_CHECK && want && !kfence_addr(p))   /* reports a bad pointer itself */
        os_fatal("wrong size: %s(%p, %zu) of a %zu-byte block", e->call, p, size,
                 kmalloc_usable_nonslab(p, e->call));
    sk_free_slow(p, e->call);   /* a large block, or the report of a bad pointer */
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
    if (align == 0 || (align & (align - 1))) {
        errno = EINVAL;
        return NULL;
    }
    return malloc_aligned(align, size);
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
    for (unsigned nid = 0; page_nr_nodes > 1 && nid < page_nr_nodes; nid++) {
        struct page_node_stats ns;
        page_node_stats(nid, &ns);
        os_printf(fd, SLABINFO_NODE_LINE, nid, ns.cpus, ns.managed_pages, ns.used_pages, ns.free_pages,
                  ns.dirty_pages);
    }
    struct page_stats st;
    page_stats(&st);
    os_printf(fd, SLABINFO_PAGETYPES_LINE, st.mt_pageblocks[MIGRATE_UNMOVABLE], st.mt_pageblocks[MIGRATE_RECLAIMABLE],
              st.mt_pageblocks[MIGRATE_MOVABLE], st.mt_free_pages[MIGRATE_UNMOVABLE],
              st.mt_free_pages[MIGRATE_RECLAIMABLE], st.mt_free_pages[MIGRATE_MOVABLE], st.mt_fallbacks,
              st.mt_claims);
    os_printf(fd, SLABINFO_TOTALS_LINE, st.managed_pages, st.free_pages, st.dirty_pages, st.pcp_pages,
              st.purged_pages, vm_reserved_bytes() >> 20);
}

/* glibc's lines first (malloc_stats_glibc), then slabkit's caches and
 * totals, all on fd 2.  Not cancellable, as glibc's since 2.28: the
 * output is whole even when the calling thread has a cancellation
 * pending (its writes are cancellation points), and no slabkit lock is
 * held by a thread that unwinds. */
ALIAS(malloc_stats) void malloc_stats(void)
{
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    slab_init();
    malloc_stats_glibc(2);
    fflush(stderr);
    sk_slabinfo(stderr);
    fflush(stderr);
    print_totals(2);
    pthread_setcancelstate(cancel, NULL);
}

/* slabinfo_at_exit=1: the process's slabinfo on stderr as it was at
 * start-up (or in slabinfo_file), when it exits through exit() (not
 * _exit: read such a program live, slabinfo -p), whole: written with
 * write(2) a line at a time, without the program's stdio. */
__attribute__((destructor)) static void slabinfo_at_exit(void)
{
    vm_check_underrun();     /* a write below the heap: abort, saying so */
    if (sk_opt.debug && sk_opt.debug_caches[0] && slab_ready())   /* the kmalloc caches exist */
        slab_debug_check_names(exit_output_fd());
    if ((!sk_opt.slabinfo_at_exit && !sk_opt.slabinfo_file[0]) || !slab_ready())
        return;
    int fd = exit_output_fd();
    if (fd < 0)
        return;
    slabinfo_write(fd);
    print_totals(fd);
}

/* ---- fork ---- */


static bool lock_was_held(lock_t *l)
{
    return __atomic_load_n(&l->state, __ATOMIC_RELAXED) != 0;
}

static void reset_arrays(cpu_arrays_t tab, const struct slab_cache *c)
{
    if (tab == cpu_empty_arrays)
        return;
    for (int cpu = 0; cpu <= cpu_nr_ids; cpu++) {    /* and the dummy slot */
        /* A CPU or slot that never used the cache took no lock of it:
         * the rseq fast path takes none, the lock fallback's only on an
         * array a slow path readied, and the slow paths mark the index
         * first (slab_mark_used). */
        if (c && !slab_cpu_used(c, cpu))
            continue;
        struct cpu_array *a = cpu_array_at(tab, cpu);
        spin_reset_child(&a->lock);
        /* A drain caught mid-way still had every object in the array. */
        if (a->word & CPU_ARRAY_LOCKED)
            a->word &= ~(uint64_t)CPU_ARRAY_LOCKED;
    }
}

/* The per-CPU state of a used cache in a forked child: only what a
 * parent thread was caught holding is written. */
static void percpu_atfork_child(struct slab_cache *c)
{
    reset_arrays(slab_arrays(c), c);
    if (c->slots)
        slub_cpu_atfork_child(c);
    for (int cpu = 0; cpu < cpu_nr_ids; cpu++) {
        if (!slab_cpu_used(c, cpu))
            continue;             /* its lock never taken (slab_mark_used) */
        struct slab_cpu *sc = slab_cpu_of(c, cpu);
        if (lock_was_held(&sc->lock)) {
            /* Caught mid-refill: leak this CPU's slabs in the child. */
            sc->slab = NULL;
            sc->freelist = NULL;
            sc->fresh_left = 0;
            sc->partial = NULL;
            sc->partial_slabs = 0;
        }
        lock_reset_child(&sc->lock);
    }
}

static void fork_child(void)
{
    os_options_atfork_child();
    os_threads_atfork_child();
    os_random_atfork_child();
    exit_output_atfork_child();
    lock_atfork_child();
    cpu_atfork_child();
    vm_atfork_child();
    page_atfork_child();
    slab_atfork_child();
    for (unsigned o = 0; o < PCP_NR_LISTS; o++)
        reset_arrays(page_pcp.lists[o], NULL);
    for (struct slab_cache *c = slab_caches(); c; c = c->next) {
        /* A cache never allocated from took no lock of its per-CPU state
         * (slab_mark_used comes first), whose pages a read would make
         * resident here; its node state lies in the cache itself. */
        if (slab_used(c))
            percpu_atfork_child(c);
        for (int n = 0; n < SLAB_NR_NODES; n++) {
            struct slab_node *nd = &c->node[n];
            if (lock_was_held(&nd->list_lock)) {
                /* Abandon a list caught mid-surgery: its slabs keep their
                 * objects, and list_gen makes removals from it no-ops. */
                nd->partial = NULL;
                nd->nr_partial = 0;
                nd->full = NULL;       /* slub_debug's full list too */
                nd->gen = (uint16_t)(nd->gen + 1 ? nd->gen + 1 : 1);
                if (c->mode == SLAB_MODE_CLASSIC)
                    slab_classic_abandon_node(nd);
            }
            lock_reset_child(&nd->list_lock);
            if (lock_was_held(&nd->barn.lock))
                nd->barn.count = 0;     /* caught mid-copy: leak its objects */
            lock_reset_child(&nd->barn.lock);
        }
    }
    kfence_atfork_child();
    report_atfork_child();
}
