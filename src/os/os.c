/*
 * os.c — system calls: memory mapping, futex, membarrier, time, randomness,
 * CPU ids, THP mode and error output.
 *
 * Invariants: nothing here allocates heap memory or takes a lock, so every
 * function may be called from inside malloc, before slabkit is initialised,
 * and in a forked child.  The exception is os_thread_start: pthread_create
 * may call malloc/calloc itself, so its caller holds no slabkit lock.  Values read from /sys are cached after the first
 * read (a benign race: every reader computes the same value).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "os/os.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* ---- CPU affinity and yield: system calls, not libc's wrappers ----
 *
 * A program's peak RSS counts every page of libc's text mapped into it,
 * and a call into a part of libc the program never uses maps the 64 KiB
 * around it (the kernel's fault-around).  glibc 2.36 keeps
 * sched_getaffinity, sched_setaffinity and sched_yield in such a part,
 * which slabkit's start-up reached for sched_getaffinity alone: calling
 * the kernel directly keeps those 64 KiB out of /bin/true's RSS (1232
 * KiB against 1152 with slabkit preloaded; glibc alone 1008). */

/* sched_getaffinity as libc returns it: 0 and the set zero-filled past
 * what the kernel wrote, or -1. */
static int affinity_get(void *set, size_t size)
{
    memset(set, 0, size);
    return syscall(SYS_sched_getaffinity, 0, size, set) < 0 ? -1 : 0;
}

/* A mapping at exactly `at`, or NULL without touching what is there
 * (MAP_FIXED_NOREPLACE; a kernel before 4.17 takes the flag as a hint and
 * may place it elsewhere: that counts as taken, errno EEXIST). */
static void *map_at(void *at, size_t size, int prot)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE;
    void *p = mmap(at, size, prot, flags, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (p != at) {
        munmap(p, size);
        errno = EEXIST;
        return NULL;
    }
    return p;
}

/* Aligned candidates tried in place before over-mapping, and after an
 * over-map was refused (an address-space limit: the space is there, but
 * not twice the size of it). */
#define MAP_ALIGNED_TRIES 8
#define MAP_ALIGNED_TRIES_LIMITED 1024

/* Try `tries` aligned addresses going down from *at; NULL with errno
 * EEXIST when all were taken (*at then the next candidate). */
static void *map_aligned_below(uintptr_t *at, size_t size, size_t align, int prot, int tries)
{
    for (; tries > 0 && *at >= align; tries--, *at -= align) {
        void *q = map_at((void *)*at, size, prot);
        if (q || errno != EEXIST)
            return q;
    }
    errno = EEXIST;
    return NULL;
}

/*
 * mmap `size` bytes aligned to `align` without mapping more than `size`
 * (under RLIMIT_AS an over-map of size + align fails long before the
 * mapping itself would): a plain mmap first, aligned by luck as often as
 * not; else, since the kernel places mappings top-down, the aligned
 * address just below it is usually free: try it and a few further down
 * with MAP_FIXED_NOREPLACE.  Only then over-map by align and trim, and if
 * the OS refuses that, search further down.
 */
static void *map_aligned(size_t size, size_t align, int prot)
{
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    void *p = mmap(NULL, size, prot, flags, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (align <= SK_PAGE_SIZE || ((uintptr_t)p & (align - 1)) == 0)
        return p;
    munmap(p, size);
    uintptr_t at = SK_ALIGN_DOWN((uintptr_t)p, align);
    void *q = map_aligned_below(&at, size, align, prot, MAP_ALIGNED_TRIES);
    if (q || errno != EEXIST)
        return q;
    size_t over = size + align;
    if (over < size) {
        errno = ENOMEM;
        return NULL;
    }
    char *m = mmap(NULL, over, prot, flags, -1, 0);
    if (m == MAP_FAILED) {
        q = map_aligned_below(&at, size, align, prot, MAP_ALIGNED_TRIES_LIMITED);
        if (!q)
            errno = ENOMEM;
        return q;
    }
    char *a = (char *)SK_ALIGN_UP((uintptr_t)m, align);
    if (a > m)
        munmap(m, (size_t)(a - m));
    size_t tail = (size_t)((m + over) - (a + size));
    if (tail)
        munmap(a + size, tail);
    return a;
}

/* errno as mmap left it, also when they succeed after a refused try: the
 * public entry points put the caller's back (os_errno_restore). */
void *os_reserve(size_t size, size_t align) { return map_aligned(size, align, PROT_NONE); }
void *os_map_ro(size_t size, size_t align) { return map_aligned(size, align, PROT_READ); }
void *os_map(size_t size, size_t align) { return map_aligned(size, align, PROT_READ | PROT_WRITE); }
void *os_reserve_at(void *at, size_t size) { return map_at(at, size, PROT_NONE); }
void *os_map_fixed(void *at, size_t size) { return map_at(at, size, PROT_READ | PROT_WRITE); }

size_t os_limit_bytes(void)
{
    size_t lim = SIZE_MAX;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < lim)
        lim = (size_t)rl.rlim_cur;
    if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < lim)
        lim = (size_t)rl.rlim_cur;
    return lim;
}

int os_commit(void *p, size_t size) { return mprotect(p, size, PROT_READ | PROT_WRITE); }

/* Give the pages back and make the range fault again, keeping it reserved:
 * one fresh PROT_NONE mapping over it (which also drops any advice). */
int os_decommit(void *p, size_t size)
{
    void *q = mmap(p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return q == MAP_FAILED ? -1 : 0;
}
int os_unmap(void *p, size_t size) { return munmap(p, size); }
int os_purge(void *p, size_t size) { return madvise(p, size, MADV_DONTNEED); }
int os_advise_huge(void *p, size_t size) { return madvise(p, size, MADV_HUGEPAGE); }
int os_advise_nohuge(void *p, size_t size) { return madvise(p, size, MADV_NOHUGEPAGE); }

ssize_t os_read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = 0;
    return n;
}

/* The value of `key` (cgroup v1: "memory", v2: "") in /proc/self/cgroup's
 * lines "N:controllers:path": the path, copied into out; or false. */
static bool cgroup_path(const char *buf, bool v2, char *out, size_t len)
{
    for (const char *l = buf; *l; ) {
        const char *end = strchr(l, '\n');
        size_t n = end ? (size_t)(end - l) : strlen(l);
        const char *c1 = memchr(l, ':', n);
        const char *c2 = c1 ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - l)) : NULL;
        if (c2) {
            size_t clen = (size_t)(c2 - c1 - 1);
            bool match = v2 ? clen == 0 : false;
            /* v1: "memory" among the comma-separated controllers */
            for (const char *p = c1 + 1; !v2 && p < c2; ) {
                const char *q = memchr(p, ',', (size_t)(c2 - p));
                size_t w = q ? (size_t)(q - p) : (size_t)(c2 - p);
                if (w == 6 && !memcmp(p, "memory", 6))
                    match = true;
                p += w + 1;
            }
            size_t plen = n - (size_t)(c2 + 1 - l);
            if (match && plen < len) {
                memcpy(out, c2 + 1, plen);
                out[plen] = 0;
                return true;
            }
        }
        if (!end)
            break;
        l = end + 1;
    }
    return false;
}

/* A decimal number at the start of s: *v, true; "max" or anything else
 * false. */
static bool parse_ull(const char *s, unsigned long long *v)
{
    unsigned long long x = 0;
    if (*s < '0' || *s > '9')
        return false;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (x > (~0ull - 9) / 10)
            return false;
        x = x * 10 + (unsigned long long)(*s - '0');
    }
    *v = x;
    return true;
}

unsigned long long os_cgroup_memory_limit(void)
{
    char buf[1024], path[512], file[768], val[64];
    if (os_read_small("/proc/self/cgroup", buf, sizeof buf) <= 0)
        return 0;
    unsigned long long v = 0;
    if (cgroup_path(buf, false, path, sizeof path)) {
        snprintf(file, sizeof file, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", path);
        if (os_read_small(file, val, sizeof val) > 0 && parse_ull(val, &v))
            return v >= (1ull << 60) ? 0 : v;    /* v1's "unlimited" is near 2^63 */
    }
    if (cgroup_path(buf, true, path, sizeof path)) {
        snprintf(file, sizeof file, "/sys/fs/cgroup%s/memory.max", path);
        if (os_read_small(file, val, sizeof val) > 0 && parse_ull(val, &v))
            return v;
    }
    return 0;
}

size_t os_limit_room(void)
{
    struct rlimit as, data;
    bool has_as = getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY;
    bool has_data = getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY;
    if (!has_as && !has_data)
        return SIZE_MAX;
    char buf[160];
    unsigned long size, res, shared, text, lib, dat;
    if (os_read_small("/proc/self/statm", buf, sizeof buf) < 0 ||
        sscanf(buf, "%lu %lu %lu %lu %lu %lu", &size, &res, &shared, &text, &lib, &dat) != 6)
        return 0;
    size_t room = SIZE_MAX, used_as = size * SK_PAGE_SIZE, used_data = dat * SK_PAGE_SIZE;
    if (has_as)
        room = as.rlim_cur > used_as ? (size_t)as.rlim_cur - used_as : 0;
    if (has_data) {
        size_t r = data.rlim_cur > used_data ? (size_t)data.rlim_cur - used_data : 0;
        if (r < room)
            room = r;
    }
    return room;
}

enum os_thp os_thp_mode(void)
{
    static int mode = -1;     /* cached: every racing reader computes the same */
    int cached = __atomic_load_n(&mode, __ATOMIC_RELAXED);
    if (cached >= 0)
        return (enum os_thp)cached;
    char buf[128];
    int m = OS_THP_NEVER;
    if (os_read_small("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf) > 0) {
        if (strstr(buf, "[always]"))
            m = OS_THP_ALWAYS;
        else if (strstr(buf, "[madvise]"))
            m = OS_THP_MADVISE;
    }
    __atomic_store_n(&mode, m, __ATOMIC_RELAXED);
    return (enum os_thp)m;
}

int os_futex_wait(uint32_t *addr, uint32_t val, int64_t rel_ns)
{
    struct timespec ts, *tp = NULL;
    if (rel_ns >= 0) {
        ts.tv_sec = rel_ns / 1000000000;
        ts.tv_nsec = rel_ns % 1000000000;
        tp = &ts;
    }
    long r = syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, tp, NULL, 0);
    return r == 0 ? 0 : -1;
}

int os_futex_wake(uint32_t *addr, int nr)
{
    return (int)syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, nr, NULL, NULL, 0);
}

int os_membarrier_register_rseq(void)
{
    return (int)syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ, 0, 0);
}

unsigned long os_membarrier_calls;

int os_membarrier_rseq_cpu(int cpu)
{
    __atomic_fetch_add(&os_membarrier_calls, 1, __ATOMIC_RELAXED);
    return (int)syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ,
                        MEMBARRIER_CMD_FLAG_CPU, cpu);
}

/* "0-1" or "0-3,8-11": the largest number plus one. */
static int parse_cpu_list(const char *s)
{
    int max = -1, v = 0, have = 0;
    for (;; s++) {
        if (*s >= '0' && *s <= '9') {
            v = v * 10 + (*s - '0');
            have = 1;
        } else {
            if (have && v > max)
                max = v;
            v = 0;
            have = 0;
            if (!*s || *s == '\n')
                break;
        }
    }
    return max + 1;
}

int os_nr_cpu_ids(void)
{
    static int n;
    int cached = __atomic_load_n(&n, __ATOMIC_RELAXED);
    if (cached > 0)
        return cached;
    char buf[256];
    int v = 0;
    if (os_read_small("/sys/devices/system/cpu/possible", buf, sizeof buf) > 0)
        v = parse_cpu_list(buf);
    if (v <= 0)
        v = (int)sysconf(_SC_NPROCESSORS_CONF);
    /* Where /sys is hidden, sysconf counts CPUs rather than numbering
     * them, and sparse ids would index past the per-CPU arrays: cover at
     * least every CPU this process may run on, and the current one. */
    cpu_set_t set;
    if (affinity_get(&set, sizeof set) == 0)
        for (int c = CPU_SETSIZE - 1; c >= v; c--)
            if (CPU_ISSET(c, &set)) {
                v = c + 1;
                break;
            }
    if (sched_getcpu() >= v)
        v = sched_getcpu() + 1;
    if (v <= 0)
        v = 1;
    __atomic_store_n(&n, v, __ATOMIC_RELAXED);
    return v;
}

int os_nr_online_cpus(void)
{
    long v = sysconf(_SC_NPROCESSORS_ONLN);
    return v > 0 ? (int)v : 1;
}

int os_getcpu(void)
{
    int c = sched_getcpu();
    return c < 0 ? 0 : c;
}

_Static_assert(sizeof(struct os_cpus) <= sizeof(cpu_set_t), "os_cpus fits a cpu_set_t");

int os_visit_cpu(int cpu, struct os_cpus *saved)
{
    cpu_set_t *old = (cpu_set_t *)saved, one;
    size_t size = sizeof *saved;
    if (cpu < 0 || cpu >= CPU_MAX_IDS_OS || affinity_get(old, size) != 0 || !CPU_ISSET_S(cpu, size, old))
        return -1;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (syscall(SYS_sched_setaffinity, 0, sizeof one, &one) != 0)
        return -1;
    return 0;   /* the kernel has moved us before sched_setaffinity returns */
}

void os_restore_cpus(const struct os_cpus *saved)
{
    syscall(SYS_sched_setaffinity, 0, sizeof *saved, saved);
}

uint64_t os_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t os_now_ms_coarse(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A pool of getrandom's output, handed out a value at a time under a
 * test-and-set flag (held for a copy, or for the system call that refills
 * it; the os layer has no lock of its own).  256 bytes: what getrandom
 * never returns short of. */
#define RANDOM_POOL 32
static uint64_t random_pool[RANDOM_POOL];
static unsigned random_left;
static int random_busy;

uint64_t os_random64(void)
{
    while (__atomic_exchange_n(&random_busy, 1, __ATOMIC_ACQUIRE))
        os_yield();
    if (!random_left && getrandom(random_pool, sizeof random_pool, GRND_NONBLOCK) == (ssize_t)sizeof random_pool)
        random_left = RANDOM_POOL;
    uint64_t v;
    if (random_left) {
        v = random_pool[--random_left];
        random_pool[random_left] = 0;     /* handed out once */
    } else {
        /* No entropy yet (early boot): still differ per process and run. */
        v = os_now_ns() ^ ((uint64_t)(uintptr_t)&v << 16) ^ (uint64_t)getpid();
        v ^= v >> 29;
        v *= 0xbf58476d1ce4e5b9ull;
        v ^= v >> 32;
    }
    __atomic_store_n(&random_busy, 0, __ATOMIC_RELEASE);
    return v | 1;
}

void os_random_atfork_child(void)
{
    SK_CHILD_CLEAR(random_left);
    SK_CHILD_CLEAR(random_busy);
}

void os_yield(void) { syscall(SYS_sched_yield); }
int os_gettid(void) { return (int)syscall(SYS_gettid); }

void os_sleep_ms(uint64_t ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int os_file_open_rw(const char *path)
{
    return open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

int os_pread_all(int fd, void *buf, size_t len, uint64_t off)
{
    char *p = buf;
    while (len) {
        ssize_t n = pread(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return -1;
        }
        p += n;
        off += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

int os_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
    const char *p = buf;
    while (len) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = ENOSPC;
            return -1;
        }
        p += n;
        off += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

/* A forked child has one thread, but glibc 2.36 leaves
 * __libc_single_threaded false in it when the parent had more: fork_single
 * says so, until os_threaded_recheck finds another thread there. */
static bool fork_single;
static uint64_t fork_single_checked;     /* ms */
#define THREADS_RECHECK_MS 100

static long proc_threads(void);

bool os_threaded(void)
{
    return !__atomic_load_n(&__libc_single_threaded, __ATOMIC_RELAXED) &&
           !__atomic_load_n(&fork_single, __ATOMIC_RELAXED);
}

void os_threaded_recheck(void)
{
    if (!__atomic_load_n(&fork_single, __ATOMIC_RELAXED))
        return;
    uint64_t now = os_now_ms_coarse();
    if (now - fork_single_checked < THREADS_RECHECK_MS)
        return;
    fork_single_checked = now;
    if (proc_threads() > 1)
        __atomic_store_n(&fork_single, false, __ATOMIC_RELAXED);
}

static pthread_key_t leader_key;
static int leader_key_state;      /* 0 none, 1 made, -1 refused */
static int leader_gone;
static void (*leader_fn)(void);

static uintptr_t own_tcb[OS_OWN_THREADS];
static unsigned own_nr;

unsigned os_own_threads(uintptr_t tcb[OS_OWN_THREADS])
{
    unsigned n = __atomic_load_n(&own_nr, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < n; i++)
        tcb[i] = __atomic_load_n(&own_tcb[i], __ATOMIC_RELAXED);
    return n;
}

void os_threads_atfork_child(void)
{
    if (!__atomic_load_n(&__libc_single_threaded, __ATOMIC_RELAXED)) {
        __atomic_store_n(&fork_single, true, __ATOMIC_RELAXED);
        fork_single_checked = os_now_ms_coarse();
    }
    __atomic_store_n(&own_nr, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&leader_gone, 0, __ATOMIC_RELAXED);
    os_leader_watch();      /* the forking thread leads the child */
}

static void leader_exit(void *v)
{
    (void)v;
    if (os_gettid() != getpid())
        return;
    __atomic_store_n(&leader_gone, 1, __ATOMIC_RELEASE);
    void (*fn)(void) = __atomic_load_n(&leader_fn, __ATOMIC_ACQUIRE);
    if (fn)
        fn();
}

void os_leader_watch(void)
{
    if (os_gettid() != getpid())
        return;           /* loaded by dlopen on another thread: not watched */
    if (!leader_key_state)
        leader_key_state = pthread_key_create(&leader_key, leader_exit) == 0 ? 1 : -1;
    if (leader_key_state > 0)
        pthread_setspecific(leader_key, (void *)1);
}

void os_leader_hook(void (*fn)(void))
{
    __atomic_store_n(&leader_fn, fn, __ATOMIC_RELEASE);
}

bool os_leader_gone(void)
{
    return __atomic_load_n(&leader_gone, __ATOMIC_ACQUIRE) != 0;
}

/* The process's threads, from /proc/self/stat; 0 when it cannot be read. */
static long proc_threads(void)
{
    /* "pid (comm) state ..." with num_threads the 20th field; comm may
     * hold spaces and parentheses, so count from the last ')'. */
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    int field = 2;    /* ')' ends field 2; one space before each next */
    for (p++; *p && field < 20; p++)
        if (*p == ' ')
            field++;
    return strtol(p, NULL, 10);
}

static bool only_own_threads_left(void)
{
    long threads = proc_threads();
    /* A leader that called pthread_exit stays a zombie, counted, until the
     * whole group has exited. */
    long others = (long)__atomic_load_n(&own_nr, __ATOMIC_ACQUIRE) + 1;
    return threads > 0 && threads <= others;
}

void os_exit_if_orphaned(void)
{
    if (os_leader_gone() && only_own_threads_left())
        exit(0);
}

int os_thread_start(void *(*fn)(void *), void *arg, const char *name, size_t stack)
{
    pthread_attr_t attr;
    int r = pthread_attr_init(&attr);
    if (r) {
        errno = r;
        return -1;
    }
    long min = sysconf(_SC_THREAD_STACK_MIN);
    if (min > 0 && stack < (size_t)min)
        stack = (size_t)min;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, SK_ALIGN_UP(stack, SK_PAGE_SIZE));
    /* The thread inherits the mask: block everything around the create
     * (glibc keeps its own internal signals deliverable). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    r = pthread_create(&t, &attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (r) {
        errno = r;
        return -1;
    }
    /* Callers are serialised by their own start states (one purger, one
     * KFENCE timer); a slot is filled before it is counted. */
    unsigned i = __atomic_load_n(&own_nr, __ATOMIC_RELAXED);
    if (i < OS_OWN_THREADS) {
        __atomic_store_n(&own_tcb[i], (uintptr_t)t, __ATOMIC_RELAXED);
        __atomic_store_n(&own_nr, i + 1, __ATOMIC_RELEASE);
    }
#ifdef __GLIBC__
    pthread_setname_np(t, name);   /* the thread never exits: t stays valid */
#else
    (void)name;
#endif
    return 0;
}

void os_vprintf(int fd, const char *fmt, va_list ap)
{
    char buf[512];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof buf)
        n = sizeof buf - 1;
    size_t off = 0;
    while (off < (size_t)n) {
        ssize_t w = write(fd, buf + off, (size_t)n - off);
        if (w <= 0) {
            if (w < 0 && errno == EINTR)
                continue;
            return;
        }
        off += (size_t)w;
    }
}

void os_printf(int fd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    os_vprintf(fd, fmt, ap);
    va_end(ap);
}

static void vmessage(const char *fmt, va_list ap)
{
    char buf[480];
    vsnprintf(buf, sizeof buf, fmt, ap);
    os_printf(2, "slabkit: %s\n", buf);
}

void os_name(char *dst, size_t n, const char *prefix, long v)
{
    size_t i = 0;
    while (i + 1 < n && prefix[i]) {
        dst[i] = prefix[i];
        i++;
    }
    if (v >= 0) {
        char digits[24];
        int k = 0;
        do
            digits[k++] = (char)('0' + v % 10);
        while ((v /= 10) != 0);
        while (k > 0 && i + 1 < n)
            dst[i++] = digits[--k];
    }
    dst[i] = '\0';
}

void os_warn(const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
    errno = saved;
}

void os_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmessage(fmt, ap);
    va_end(ap);
    abort();
}
