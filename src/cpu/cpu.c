/*
 * cpu.c — per-CPU arrays: batch moves, the lock fallback, remote drain.
 *
 * Invariants (see cpu.h for the array layout):
 *  - cpu_use_rseq and cpu_rseq_ids are written once, by cpu_init(), before
 *    any array holds a pointer; afterwards every thread reaches arrays the
 *    same way.  Every set is made after cpu_init and copies the bounds
 *    into its header; a sequence runs only on an index below its set's
 *    seq_ids, a locked operation only on a slot below its set's slots.
 *    The always-empty set (read-only) has both at 0.
 *  - In rseq mode an array of a CPU is modified only by rseq sequences
 *    running on that CPU, or by a drainer that holds its lock AND has
 *    published CPU_ARRAY_LOCKED in count AND has seen a membarrier(RSEQ) on
 *    that CPU complete after publishing it (so no sequence that read the
 *    old count can still commit).  Where membarrier cannot be registered,
 *    a drainer instead moves onto that CPU and pops with a sequence there.
 *    The shared slot (index cpu_nr_ids), which no sequence reaches, is
 *    modified only under its lock.
 *  - In fallback mode every array is modified only under its lock.
 *  - cap is written only under the array's lock (first use, growth by a
 *    slow path, a trim after a drain), and read unlocked by sequences: any
 *    value up to CPU_ARRAY_MAX is safe for them, and a count at or above
 *    cap reads as full.
 * Lock order: an array lock is a leaf; nothing else is taken inside it.
 * A pool's lock (carving new columns) is a leaf too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "cpu/cpu.h"

bool cpu_use_rseq;
int cpu_rseq_ids;                 /* 0 until cpu_init: every operation locks */
static bool cpu_ready;
/* membarrier(PRIVATE_EXPEDITED_RSEQ) registered: remote drains can fence
 * another CPU's sequences.  Without it (kernels before 5.10, a seccomp
 * profile) a drain visits the CPU instead. */
bool cpu_membarrier_ok;
int cpu_nr_ids = 1;

/* Always empty, always full, and no slot in it (cpu.h). */
const char cpu_empty_mem[CPU_ARRAY_BYTES] __attribute__((aligned(CACHE_LINE))) = { 0 };

__thread int cpu_thread_slot __attribute__((tls_model("initial-exec"))) = -1;

void cpu_init(void)
{
    /* Called under the page layer's init lock; done again in a fork child
     * whose parent was caught half-way (cpu_ready is set last). */
    if (__atomic_load_n(&cpu_ready, __ATOMIC_RELAXED))
        return;
    int ids = os_nr_cpu_ids();
    /* CPUs past CPU_MAX_IDS fail the sequences' bound and share the locked
     * slot: slower on such machines, never wrong. */
    cpu_nr_ids = ids < CPU_MAX_IDS ? ids : CPU_MAX_IDS;
#ifdef SK_TSAN
    cpu_use_rseq = false;     /* TSan cannot see the restart guarantee */
#else
    /* The process's mode, not this thread's: glibc leaves __rseq_size 0
     * unless the main thread registered (valgrind, the rseq tunable off).
     * The first thread to allocate may itself lack rseq (a raw clone, a
     * failed registration); it then takes the shared slot like any other
     * such thread, while the rest run their sequences. */
    cpu_use_rseq = __rseq_size >= 20;
    cpu_membarrier_ok = cpu_use_rseq && os_membarrier_register_rseq() == 0;
#endif
    /* Published last: from here on sequences run (in rseq mode). */
    __atomic_store_n(&cpu_rseq_ids, cpu_use_rseq ? cpu_nr_ids : 0, __ATOMIC_RELEASE);
    __atomic_store_n(&cpu_ready, true, __ATOMIC_RELEASE);
    if (sk_opt.verbose)
        os_warn("%d CPU ids, per-CPU arrays via %s", cpu_nr_ids,
                !cpu_use_rseq ? "per-CPU locks (rseq not registered)"
                : cpu_membarrier_ok ? "rseq" : "rseq (no membarrier: remote drains visit the CPU)");
}

size_t cpu_arrays_bytes(void)
{
    return (size_t)(cpu_nr_ids + 1) * CPU_ARRAY_STRIDE;
}

/* Sets come from pools of CPU_SETS_PER_ROW, CPU-major: row k of a pool
 * holds CPU k's arrays of its sets side by side.  A pool's lock guards the
 * pool being carved (a leaf; held across the mmap of a new pool, which
 * only cache creation and init wait for). */
void *cpu_pool_alloc(struct cpu_pool *p, size_t width, int rows)
{
    spin_lock(&p->lock);
    if (!p->left) {
        char *mem = os_map(SK_ALIGN_UP((size_t)rows * CPU_ARRAY_STRIDE, SK_PAGE_SIZE), SK_PAGE_SIZE);
        if (!mem) {
            spin_unlock(&p->lock);
            errno = ENOMEM;
            return NULL;
        }
        p->next = mem;
        p->left = (unsigned)(CPU_ARRAY_STRIDE / width);
    }
    void *col = p->next;
    p->next += width;
    p->left--;
    spin_unlock(&p->lock);
    return col;
}

void cpu_pool_atfork_child(struct cpu_pool *p)
{
    if (spin_is_locked(&p->lock)) {
        p->left = 0;      /* the next column maps a new pool */
        spin_unlock(&p->lock);
    }
}

static struct cpu_pool array_pool;

/* A set's header: the bounds of this process's mode, final after cpu_init. */
static cpu_arrays_t set_head(cpu_arrays_t tab)
{
    struct cpu_set_head *h = (struct cpu_set_head *)((char *)tab + CPU_SET_HEAD);
    h->seq_ids = (uint32_t)cpu_rseq_ids;
    h->slots = (uint32_t)cpu_nr_slots();
    return tab;
}

cpu_arrays_t cpu_arrays_alloc(void)
{
    cpu_arrays_t tab = cpu_pool_alloc(&array_pool, CPU_ARRAY_BYTES, cpu_nr_slots());
    return tab ? set_head(tab) : NULL;
}

void cpu_pool_clear(void *col, size_t width, int rows)
{
    for (int i = 0; i < rows; i++)
        memset((char *)col + (size_t)i * CPU_ARRAY_STRIDE, 0, width);
}

void cpu_arrays_clear(cpu_arrays_t tab)
{
    cpu_pool_clear(tab, CPU_ARRAY_BYTES, cpu_nr_slots());
    set_head(tab);
}

cpu_arrays_t cpu_arrays_init(void *mem, unsigned cap)
{
    if (cap > CPU_ARRAY_MAX)
        cap = CPU_ARRAY_MAX;
    cpu_arrays_t tab = set_head(mem);
    /* The memory is zero: word 0, cap 0 and a NULL sentinel already; with
     * cap 0 (slab caches: cpu_array_ready sets it on first use) nothing
     * needs writing. */
    if (cap)
        for (int i = 0; i < cpu_nr_slots(); i++)   /* the shared slot too */
            cpu_array_at(tab, i)->cap = cap;
    return tab;
}

/* This thread's array: its CPU's in rseq mode, its fallback slot's
 * otherwise; NULL before init, past the arrays, or in the empty set. */
static struct cpu_array *this_array(cpu_arrays_t tab)
{
    int cpu = cpu_use_rseq ? cpu_current() : cpu_slot();
    if (!cpu_set_has(tab, cpu))
        return NULL;
    return cpu_array_at(tab, cpu);
}

/* Move a's capacity towards cap (up: grow, down: trim), deciding under
 * the lock: a thread that read the capacity, then was preempted while
 * another grew the array further, must not lower it. */
static void set_cap(struct cpu_array *a, unsigned cap, bool up)
{
    if (cap > CPU_ARRAY_MAX)
        cap = CPU_ARRAY_MAX;
    spin_lock(&a->lock);
    if (up ? a->cap < cap : a->cap > cap)
        __atomic_store_n(&a->cap, cap, __ATOMIC_RELAXED);
    spin_unlock(&a->lock);
}

unsigned cpu_array_ready(cpu_arrays_t tab, unsigned cap)
{
    struct cpu_array *a = this_array(tab);
    if (!a)
        return cap;
    unsigned now = __atomic_load_n(&a->cap, __ATOMIC_RELAXED);
    if (now != 0)
        return now;
    /* Set under the array's lock: the fallback reads cap under it. */
    spin_lock(&a->lock);
    if (a->cap == 0)
        __atomic_store_n(&a->cap, cap > CPU_ARRAY_MAX ? CPU_ARRAY_MAX : cap, __ATOMIC_RELAXED);
    now = a->cap;
    spin_unlock(&a->lock);
    return now;
}

void cpu_array_grow(cpu_arrays_t tab, unsigned cap)
{
    struct cpu_array *a = this_array(tab);
    if (a && __atomic_load_n(&a->cap, __ATOMIC_RELAXED) < cap)
        set_cap(a, cap, true);
}

void cpu_array_trim(cpu_arrays_t tab, int slot, unsigned cap)
{
    if (!cpu_set_has(tab, slot))
        return;
    struct cpu_array *a = cpu_array_at(tab, slot);
    if (cap && __atomic_load_n(&a->cap, __ATOMIC_RELAXED) > cap)
        set_cap(a, cap, false);
}

int cpu_slot(void)
{
    int s = cpu_thread_slot;
    if (unlikely(s < 0)) {
        /* In an rseq process, a thread that reaches here has no rseq of
         * its own (or runs on a CPU past the arrays): the shared slot. */
        s = cpu_use_rseq ? cpu_nr_ids : os_getcpu() % cpu_nr_ids;
        /* Before cpu_init the mode is unknown: answer, but remember only
         * a slot chosen under the final mode. */
        if (__atomic_load_n(&cpu_ready, __ATOMIC_ACQUIRE))
            cpu_thread_slot = s;
    }
    return s;
}

void cpu_atfork_child(void)
{
    cpu_thread_slot = -1;
    cpu_pool_atfork_child(&array_pool);
}

/* ---- fallback: the same arrays under their locks ---- */

/* This thread's slot's array, locked; NULL in the empty set (a table not
 * pointed at its cache yet, or a mode without arrays: empty and full). */
static inline struct cpu_array *locked_array(cpu_arrays_t tab)
{
    int slot = cpu_slot();
    if (unlikely(!cpu_set_has(tab, slot)))
        return NULL;
    struct cpu_array *a = cpu_array_at(tab, slot);
    spin_lock(&a->lock);
    return a;
}

void *cpu_pop_locked(cpu_arrays_t tab)
{
    void *obj;
    cpu_slot();
    return cpu_pop_fast(tab, &obj) ? obj : NULL;
}

static int push_locked(cpu_arrays_t tab, void *obj)
{
    struct cpu_array *a = locked_array(tab);
    if (!a)
        return 0;
    int r = 0;
    unsigned n = (unsigned)a->word & 0xffff;
    if (n < a->cap) {
        if ((&a->sentinel)[n] == obj)      /* objs[n - 1] */
            r = -1;
        else {
            a->objs[n] = obj;
            __atomic_store_n(&a->word, a->word + CPU_OP_PUSH, __ATOMIC_RELAXED);
            r = 1;
        }
    }
    spin_unlock(&a->lock);
    return r;
}

/* The push of the slow path: tells a double free (obj on top) from full. */
int cpu_push_locked(cpu_arrays_t tab, void *obj)
{
    cpu_slot();
#ifndef SK_TSAN
    __asm__ volatile goto(
        CPU_PUSH_SEQ(full, dup)
        :
        : [off] "r"(__rseq_offset), [tab] "r"(tab), [obj] "r"(obj)
        : "rax", "rcx", "memory", "cc"
        : full, dup, fallback);
    return 1;
full:
    return 0;
dup:
    return -1;
fallback:
#endif
    return push_locked(tab, obj);
}

static unsigned pop_batch_locked(cpu_arrays_t tab, void **buf, unsigned max)
{
    struct cpu_array *a = locked_array(tab);
    if (!a)
        return 0;
    unsigned n = (unsigned)a->word & 0xffff;
    if (n > CPU_ARRAY_COUNT)
        n = 0;
    unsigned k = n < max ? n : max;
    memcpy(buf, &a->objs[n - k], k * sizeof(void *));
    __atomic_store_n(&a->word, a->word - k, __ATOMIC_RELAXED);
    spin_unlock(&a->lock);
    return k;
}

static unsigned push_batch_locked(cpu_arrays_t tab, void **buf, unsigned n)
{
    struct cpu_array *a = locked_array(tab);
    if (!a)
        return 0;
    unsigned cnt = (unsigned)a->word & 0xffff;
    unsigned room = cnt < a->cap ? a->cap - cnt : 0;
    unsigned m = n < room ? n : room;
    memcpy(&a->objs[cnt], buf, m * sizeof(void *));
    __atomic_store_n(&a->word, a->word + m, __ATOMIC_RELAXED);
    spin_unlock(&a->lock);
    return m;
}

/* ---- rseq batch moves ---- */

/* Move up to `max` pointers from the top of this CPU's array to buf. */
unsigned cpu_pop_batch(cpu_arrays_t tab, void **buf, unsigned max)
{
#ifndef SK_TSAN
    unsigned k;
    if (max == 0)
        return 0;
    cpu_slot();
    __asm__ volatile goto(
        CPU_RSEQ_PROLOGUE
        CPU_RSEQ_LOCATE
        "movzwl (%%rax), %%ecx\n\t"            /* n */
        "leal -1(%%rcx), %%r8d\n\t"
        "cmpl $0x7ffe, %%r8d\n\t"              /* empty, or drained */
        "ja %l[empty]\n\t"
        "movl %%ecx, %[k]\n\t"
        "cmpl %[max], %[k]\n\t"
        "jbe 5f\n\t"
        "movl %[max], %[k]\n\t"                /* k = min(n, max) */
        "5:\n\t"
        "movl %%ecx, %%r8d\n\t"
        "subl %[k], %%r8d\n\t"                 /* n - k */
        "leaq 24(%%rax, %%r8, 8), %%r10\n\t"   /* &objs[n - k] */
        "xorl %%r9d, %%r9d\n\t"
        "6:\n\t"
        "movq (%%r10, %%r9, 8), %%r11\n\t"
        "movq %%r11, (%[buf], %%r9, 8)\n\t"
        "incq %%r9\n\t"
        "cmpl %[k], %%r9d\n\t"
        "jb 6b\n\t"
        "movl %[k], %%r8d\n\t"
        "subq %%r8, (%%rax)\n\t"               /* commit: count - k */
        "2:\n\t"
        CPU_RSEQ_EPILOGUE
        : [k] "=&r"(k)
        : [off] "r"(__rseq_offset), [tab] "r"(tab), [buf] "r"(buf), [max] "r"(max)
        : "rax", "rcx", "r8", "r9", "r10", "r11", "memory", "cc"
        : empty, fallback);
    return k;
empty:
    return 0;
fallback:
#endif
    return pop_batch_locked(tab, buf, max);
}

/* Push buf[0..m) on this CPU's array, m = min(n, room); returns m. */
unsigned cpu_push_batch(cpu_arrays_t tab, void **buf, unsigned n)
{
#ifndef SK_TSAN
    unsigned m;
    if (n == 0)
        return 0;
    cpu_slot();
    __asm__ volatile goto(
        CPU_RSEQ_PROLOGUE
        CPU_RSEQ_LOCATE
        "movzwl (%%rax), %%ecx\n\t"            /* count */
        "movl 8(%%rax), %[m]\n\t"              /* cap */
        "cmpl %[m], %%ecx\n\t"
        "jae %l[full]\n\t"                     /* full, or drained */
        "subl %%ecx, %[m]\n\t"                 /* room */
        "cmpl %[n], %[m]\n\t"
        "jbe 5f\n\t"
        "movl %[n], %[m]\n\t"                  /* m = min(room, n) */
        "5:\n\t"
        "leaq 24(%%rax, %%rcx, 8), %%r10\n\t"  /* &objs[count] */
        "xorl %%r9d, %%r9d\n\t"
        "6:\n\t"
        "movq (%[buf], %%r9, 8), %%r11\n\t"
        "movq %%r11, (%%r10, %%r9, 8)\n\t"
        "incq %%r9\n\t"
        "cmpl %[m], %%r9d\n\t"
        "jb 6b\n\t"
        "movl %[m], %%ecx\n\t"
        "addq %%rcx, (%%rax)\n\t"              /* commit: count + m */
        "2:\n\t"
        CPU_RSEQ_EPILOGUE
        : [m] "=&r"(m)
        : [off] "r"(__rseq_offset), [tab] "r"(tab), [buf] "r"(buf), [n] "r"(n)
        : "rax", "rcx", "r9", "r10", "r11", "memory", "cc"
        : full, fallback);
    return m;
full:
    return 0;
fallback:
#endif
    return push_batch_locked(tab, buf, n);
}

unsigned cpu_array_count(cpu_arrays_t tab, int cpu)
{
    return cpu_set_has(tab, cpu) ? cpu_array_len(cpu_array_at(tab, cpu)) : 0;
}

uint64_t cpu_array_ops(cpu_arrays_t tab, int cpu)
{
    if (!cpu_set_has(tab, cpu))
        return 0;
    return __atomic_load_n(&cpu_array_at(tab, cpu)->word, __ATOMIC_RELAXED) >> 16;
}

/*
 * Remote drain.  In rseq mode: publish CPU_ARRAY_LOCKED in count, then
 * membarrier(RSEQ) on that CPU, which restarts any sequence in flight
 * there.  A sequence that read count before we published may have
 * committed before the membarrier and overwritten our bit: so check the
 * bit after the membarrier, and repeat until it survived one.  From then
 * on every sequence on that CPU sees the bit and bails out.
 */
/* Without membarrier: run on that CPU for a moment and pop there (an rseq
 * pop is correct on whichever CPU it lands).  0 when this thread may not
 * run there (its affinity excludes that CPU). */
static SK_NOINLINE unsigned drain_by_visit(cpu_arrays_t tab, int cpu, void **buf, unsigned max)
{
    if (cpu == cpu_current())
        return cpu_pop_batch(tab, buf, max);
    struct os_cpus saved;
    if (os_visit_cpu(cpu, &saved) != 0)
        return 0;
    unsigned k = cpu_current() == cpu ? cpu_pop_batch(tab, buf, max) : 0;
    os_restore_cpus(&saved);
    return k;
}

unsigned cpu_drain_remote(cpu_arrays_t tab, int cpu, void **buf, unsigned max)
{
    if (!cpu_set_has(tab, cpu))
        return 0;
    struct cpu_array *a = cpu_array_at(tab, cpu);
    if (__atomic_load_n(&a->cap, __ATOMIC_RELAXED) == 0)
        return 0;
    /* Empty and no drain in progress: nothing to take, and no reason to
     * interrupt that CPU (a push that lands after this read could as well
     * have landed after a drain).  Shrinks and page-list drains walk every
     * CPU; most lists are empty. */
    if ((__atomic_load_n(&a->word, __ATOMIC_RELAXED) & (CPU_ARRAY_COUNT | CPU_ARRAY_LOCKED)) == 0)
        return 0;
    bool seq = cpu_use_rseq && cpu < cpu_nr_ids;   /* the shared slot: lock only */
    if (seq && !cpu_membarrier_ok)
        return drain_by_visit(tab, cpu, buf, max);
    spin_lock(&a->lock);
    unsigned n, k;
    if (seq) {
        uint64_t w;
        for (;;) {
            __atomic_fetch_or(&a->word, (uint64_t)CPU_ARRAY_LOCKED, __ATOMIC_SEQ_CST);
            if (os_membarrier_rseq_cpu(cpu) != 0)
                os_fatal("membarrier(PRIVATE_EXPEDITED_RSEQ, cpu %d) failed", cpu);
            w = __atomic_load_n(&a->word, __ATOMIC_SEQ_CST);
            if (w & CPU_ARRAY_LOCKED)
                break;
        }
        n = (unsigned)w & CPU_ARRAY_COUNT;
        k = n < max ? n : max;
        memcpy(buf, &a->objs[n - k], k * sizeof(void *));
        /* Keep ops; count - k; drop the lock bit. */
        __atomic_store_n(&a->word, (w & ~(uint64_t)0xffff) | (n - k), __ATOMIC_RELEASE);
    } else {
        n = (unsigned)a->word & CPU_ARRAY_COUNT;
        k = n < max ? n : max;
        memcpy(buf, &a->objs[n - k], k * sizeof(void *));
        __atomic_store_n(&a->word, a->word - k, __ATOMIC_RELAXED);
    }
    spin_unlock(&a->lock);
    return k;
}
