/*
 * os.h — the only way slabkit talks to the kernel.
 *
 * Everything that makes a system call lives behind this header: mapping
 * and advising memory, futexes, membarrier, time, randomness, the THP mode,
 * the CPU count, helper threads, error output and the SLABKIT_OPTIONS
 * parser.  Nothing here allocates memory (it may run before slabkit is
 * initialised, and inside malloc), except what pthread_create does inside
 * os_thread_start.
 */
#ifndef SK_OS_H
#define SK_OS_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "slabkit.h"

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define SK_INTERNAL __attribute__((visibility("hidden")))
#define SK_NOINLINE __attribute__((noinline))
/* A fast path that must be inlined into its public entry points whatever
 * the compiler's unit-growth budget says. */
#define SK_ALWAYS_INLINE inline __attribute__((always_inline))
/* In a forked child's handlers: clear x only if it is set.  Each page the
 * child writes is copied from its parent's, and a page it reads that was
 * never written is faulted in: resetting state unconditionally made every
 * fork copy slabkit's metadata (tests/malloc/fork_cow). */
#define SK_CHILD_CLEAR(x) do { if (x) (x) = 0; } while (0)
#define SK_COLD     __attribute__((cold, noinline))
/* A large zero array that a process touches little or not at all (tables
 * sized for the most CPUs, pools, report buffers).  In a section of its
 * own, which the library's link (-Wl,--sort-section=name) lays out after
 * every object's .bss: the small variables slabkit writes at start-up
 * share a few pages instead of one page each between the arrays (9
 * resident pages of .bss became 5; tests/slab/meta_pack checks the
 * layout).  Only a placement: the arrays stay static where they were. */
#define SK_BIG_BSS  __attribute__((section(".bss.sk_big")))
#define CACHE_LINE  64
#define SK_ALIGN_UP(x, a)   (((x) + ((a) - 1)) & ~((__typeof__(x))(a) - 1))
#define SK_ALIGN_DOWN(x, a) ((x) & ~((__typeof__(x))(a) - 1))
#define SK_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* errno across a call that succeeded: what the caller had.  The allocator
 * retries internally (a mapping refused at one address, placed at the
 * next; a file of /sys that is not there), and a malloc that worked must
 * not show that (glibc leaves errno alone on success).  Save at the entry
 * of every public call that can allocate (its slow path), restore when it
 * returns a result; the os_* calls below leave errno as the kernel did. */
static inline void *os_errno_restore(void *result, int saved)
{
    if (result)
        errno = saved;
    return result;
}
#ifdef SK_DEBUG
#define SK_ASSERT(c) do { if (!(c)) os_fatal("assertion failed: %s (%s:%d)", #c, __FILE__, __LINE__); } while (0)
#else
#define SK_ASSERT(c) do { (void)sizeof(c); } while (0)
#endif

/* ---- memory ---- */
/* Reserve address space: PROT_NONE, MAP_NORESERVE, aligned to `align`
 * (a power of two >= 4096).  NULL on failure (errno as mmap left it). */
void *os_reserve(size_t size, size_t align);
/* Map read-write, MAP_NORESERVE, aligned; pages are zero until touched.
 * Aligned mappings never map more than `size` unless every aligned
 * candidate near where the kernel would place them is taken. */
void *os_map(size_t size, size_t align);
/* Map read-write exactly at `at` (page-aligned) without replacing
 * anything: NULL with errno EEXIST when part of the range is taken,
 * ENOMEM when the OS refuses. */
void *os_map_fixed(void *at, size_t size);
/* Map read-only zeros, aligned (as os_map): reads see zeros and cost no
 * memory, and none of it counts as data (RLIMIT_DATA) until os_commit. */
void *os_map_ro(size_t size, size_t align);
/* Reserve (PROT_NONE, as os_reserve) exactly at `at`, or NULL without
 * touching what is there. */
void *os_reserve_at(void *at, size_t size);
/* The smaller of RLIMIT_AS and RLIMIT_DATA (soft limits) in bytes;
 * SIZE_MAX when neither is set.  Read anew on each call: a program may
 * change its limits at any time. */
size_t os_limit_bytes(void);
/* What those limits leave now: the least of RLIMIT_AS less VmSize and
 * RLIMIT_DATA less the data size (/proc/self/statm); SIZE_MAX without
 * a limit, 0 when it cannot be read. */
size_t os_limit_room(void);
/* Read a small file (/proc, /sys) into buf, NUL-terminated, without
 * allocating: bytes read, or -1. */
ssize_t os_read_small(const char *path, char *buf, size_t len);
/* The memory limit of the process's cgroup in bytes: v2's memory.max, or
 * v1's memory.limit_in_bytes; 0 when there is none (unset, "max", or
 * unreadable).  Reads /proc and /sys without allocating. */
unsigned long long os_cgroup_memory_limit(void);
/* Make reserved space usable (PROT_READ|PROT_WRITE): 0 or -1. */
int os_commit(void *p, size_t size);
/* Return the pages and make the range inaccessible again (still reserved):
 * the opposite of os_commit.  0 or -1. */
int os_decommit(void *p, size_t size);
int os_unmap(void *p, size_t size);
/* Give the pages back to the OS now (MADV_DONTNEED): they read as zero. */
int os_purge(void *p, size_t size);
/* Ask for transparent huge pages on [p, p+size) (MADV_HUGEPAGE). */
int os_advise_huge(void *p, size_t size);
int os_advise_nohuge(void *p, size_t size);

enum os_thp { OS_THP_NEVER, OS_THP_MADVISE, OS_THP_ALWAYS };
enum os_thp os_thp_mode(void);

/* ---- futex ---- */
/* Sleep while *addr == val (private futex); rel_ns < 0: no timeout.
 * Returns 0 when woken, -1 with errno (EAGAIN, ETIMEDOUT, EINTR). */
int os_futex_wait(uint32_t *addr, uint32_t val, int64_t rel_ns);
int os_futex_wake(uint32_t *addr, int nr);

/* ---- membarrier ---- */
/* Register for MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ: 0 or -1. */
int os_membarrier_register_rseq(void);
/* Restart any rseq critical section running on `cpu` now: 0 or -1.
 * Each call interrupts that CPU: os_membarrier_calls counts them
 * (relaxed; tests and statistics). */
int os_membarrier_rseq_cpu(int cpu);
extern unsigned long os_membarrier_calls SK_INTERNAL;

/* ---- CPUs, time, randomness, threads ---- */
int os_nr_cpu_ids(void);        /* highest possible CPU id + 1 */
int os_nr_online_cpus(void);
int os_getcpu(void);            /* current CPU via sched_getcpu, 0 on error */
/* A thread's CPU affinity (CPUs 0..1023), saved while it visits one CPU. */
#define CPU_MAX_IDS_OS 1024
struct os_cpus { unsigned long bits[CPU_MAX_IDS_OS / (8 * sizeof(unsigned long))]; };
/* Move the calling thread onto `cpu`, saving its affinity in *saved: 0 once
 * it runs there, -1 if it may not (its affinity excludes cpu; nothing
 * changed then). */
int os_visit_cpu(int cpu, struct os_cpus *saved);
void os_restore_cpus(const struct os_cpus *saved);
uint64_t os_now_ns(void);       /* CLOCK_MONOTONIC */
uint64_t os_now_ms_coarse(void); /* CLOCK_MONOTONIC_COARSE, for aging */
/* 64 random bits (odd): getrandom, 32 values a call (each cache takes
 * one at creation: a call each was most of a short program's system
 * calls), falling back to time ^ address.  Thread-safe. */
uint64_t os_random64(void);
/* In a forked child: values the parent had fetched are not reused. */
void os_random_atfork_child(void);
void os_yield(void);
int os_gettid(void);
void os_sleep_ms(uint64_t ms);
/* The swap file (src/shmem): created or truncated, read-write, close on
 * exec; -1 with errno.  Whole-buffer positioned I/O: 0, or -1 with errno
 * (a short read past the end counts as an error). */
int os_file_open_rw(const char *path);
int os_pread_all(int fd, void *buf, size_t len, uint64_t off);
int os_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* Start a detached helper thread running fn(arg) with a `stack`-byte stack
 * (at least the system minimum), every signal blocked (so it never takes a
 * signal meant for the program), named `name` (15 characters at most)
 * where pthread_setname_np exists.  0, or -1 with errno.  The one function
 * here that may allocate: pthread_create can call malloc or calloc (the new
 * thread's TLS vector), so call it with no slabkit lock held. */
int os_thread_start(void *(*fn)(void *), void *arg, const char *name, size_t stack);
/* Whether the process has ever had a second thread (glibc's
 * __libc_single_threaded, cleared by pthread_create and set again in a
 * forked child).  slabkit starts a helper thread only where this is true:
 * a program with one thread must keep one (glibc's fork then takes no
 * lock, so a fork from a signal handler that interrupted fork() works;
 * unshare(CLONE_NEWUSER) needs it too). */
bool os_threaded(void);
/* In a forked child of a threaded parent: look again (at most every
 * 100 ms, /proc/self/stat) whether it has started threads.  No lock held. */
void os_threaded_recheck(void);
/* The helper threads os_thread_start made in this process (none in a
 * forked child), each as the address of its TCB (glibc's pthread_t: in the
 * thread's stack mapping, with its static TLS below it).  Known from the
 * moment pthread_create returns, before the thread first runs: the leak
 * scan reads them whatever the threads are doing. */
#define OS_OWN_THREADS 4
unsigned os_own_threads(uintptr_t tcb[OS_OWN_THREADS]);
void os_threads_atfork_child(void);
/*
 * A process ends when its last thread does: a program whose main thread
 * calls pthread_exit ends when its other threads have.  slabkit's own
 * threads must not keep it alive (they count as threads to glibc and the
 * kernel, and they block every signal, so such a process could not even
 * be stopped by SIGTERM).  os_leader_watch(), called on the process's
 * leader thread (the library's constructor, a fork child), arranges that
 * the leader's pthread_exit is noticed (a thread-specific destructor):
 * os_leader_gone() then says so and the hook set by os_leader_hook runs
 * (the purger's wake-up).  os_exit_if_orphaned(), from a helper, then
 * reads the thread count from /proc/self/stat and, when only slabkit's
 * helpers remain (and the exited leader, which the count keeps until the
 * group ends), ends the process with exit(0), as glibc's last thread
 * does; before the leader is gone it returns at once.
 */
void os_leader_watch(void);
void os_leader_hook(void (*fn)(void));
bool os_leader_gone(void);
void os_exit_if_orphaned(void);

/* ---- output ---- */
/* Format into a stack buffer and write(2) it: never allocates. */
void os_printf(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void os_vprintf(int fd, const char *fmt, va_list ap);
/* "slabkit: <msg>\n" on stderr, then abort(). */
__attribute__((noreturn, format(printf, 1, 2))) void os_fatal(const char *fmt, ...);
/* dst (n > 0 bytes) = prefix, then v in decimal unless v is negative;
 * cut to fit, always terminated.  The start-up paths name caches with it
 * rather than snprintf: printf's code is some 200 KiB of libc text that a
 * program which never prints would otherwise fault in. */
void os_name(char *dst, size_t n, const char *prefix, long v);
/* "s" after a count that is not 1 ("1 object", "2 objects"). */
#define PLURAL(n) ((n) == 1 ? "" : "s")
/* "slabkit: <msg>\n" on stderr. */
void os_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- options (SLABKIT_OPTIONS, read once) ---- */
/* The largest per-CPU array (cpu.h's CPU_ARRAY_MAX, which equals it). */
#define SK_ARRAY_SIZE_MAX 117

/* The options' values; what each means, its range and default: the one
 * table in options.c (SLABKIT_OPTIONS=help prints it). */
/* The most nodes the page allocator keeps zones for (PAGE_MAX_NODES). */
#define SK_NUMA_NODES_MAX 4

struct sk_options {
    long allocator;          /* SK_ALLOC_SLUB or SK_ALLOC_SLAB */
    long slab_mgmt;          /* SK_SLAB_MGMT_PAGE or _ONSLAB */
    long pcp;
    long slice_mask_cache;
    long cpu_partial;
    long barn;
    long remote_free;
    long sheaves;
    long mutex_spin;         /* MUTEX_SPIN_OFF, _ON or _MCS */
    long mutex_handoff;      /* the default's additions of 2016 (docs/mutex.md) */
    long mutex_wake_spin;
    long huge_slices;
    long slabinfo_at_exit;
    char slabinfo_file[256];
    long decay_ms;
    long dirty_max_mb;
    long mem_limit_mb;       /* -1: the cgroup's limit, 0: none */
    long numa_nodes;         /* 0: the system's; N: the CPUs split in N (at most SK_NUMA_NODES_MAX) */
    long array_size;         /* at most SK_ARRAY_SIZE_MAX */
    long background;
    long zone_borrow;
    long page_grouping;      /* pageblock migratetypes: grouping by mobility */
    long file_dirty_ratio;   /* % of a node's memory its sk_file pages may take (0: no limit) */
    long verbose;
    long page_microopt;
    char page_before[256];   /* seed 001's patches whose before to restore, NAME:NAME */
    long shmem_limit_mb;
    char swap_file[256];
    long sized_check;
    long kfence;
    long kfence_pages;
    long leak_check;
    long leak_exitcode;
    long debug;              /* SK_DEBUG_* flags */
    char debug_caches[256];
    long debug_continue;
    long debug_exitcode;
    long failslab;           /* percent; failslab_* (include/slabkit/kernel.h) */
    long failslab_interval;
    long failslab_times;
    long failslab_ignore_wait;
    char failslab_caches[256];
};
/* debug=: the kernel's slub_debug letters, as the sk_cache_create flags
 * of the same values (include/slabkit.h; the kernel's SLAB_* bits). */
#define SK_DEBUG_F 0x00000100    /* consistency checks */
#define SK_DEBUG_Z 0x00000400    /* red zones */
#define SK_DEBUG_P 0x00000800    /* poison */
#define SK_DEBUG_U 0x00010000    /* store the last alloc and free user */
#define SK_DEBUG_T 0x00200000    /* trace each alloc and free */
#define SK_DEBUG_ALL (SK_DEBUG_F | SK_DEBUG_Z | SK_DEBUG_P | SK_DEBUG_U | SK_DEBUG_T)
#define SK_DEBUG_DEFAULT (SK_DEBUG_F | SK_DEBUG_Z | SK_DEBUG_P | SK_DEBUG_U)   /* debug, debug=1 */
enum { SK_ALLOC_SLUB, SK_ALLOC_SLAB };           /* allocator=slub|slab */
enum { SK_SLAB_MGMT_PAGE, SK_SLAB_MGMT_ONSLAB };  /* slab_mgmt=page|onslab */
extern struct sk_options sk_opt SK_INTERNAL;
/* sk_opt.mutex_spin: how sk_mutex waiters spin (docs/mutex.md). */
#define MUTEX_SPIN_OFF 0   /* never: straight to the futex sleep */
#define MUTEX_SPIN_ON  1   /* cancellable MCS queue, unlock without the wait lock (after 2014) */
#define MUTEX_SPIN_MCS 2   /* "mcs": the queue before the 2014 series (src/lock/mutex_mcs.c) */
/* Parse `text` (NULL: read $SLABKIT_OPTIONS) into sk_opt over the defaults.
 * Unknown keys and bad values print one warning line each and are ignored.
 * Returns the number of warnings. */
int os_options_parse(const char *text);
/* Defaults, then $SLABKIT_OPTIONS; idempotent. */
void os_options_init(void);
/* In a forked child: a parse caught half-way is done again. */
void os_options_atfork_child(void);
/* Option i of the table, described for people (help, tools/gen-options):
 * 0, or -1 past the last. */
struct sk_option_doc {
    const char *key, *help;
    const char *idle_why;    /* the mode without which it does nothing, or NULL */
    char def[32], now[256], values[160];
};
int sk_option_doc(unsigned i, struct sk_option_doc *doc);

#endif
