/*
 * cpu.h — per-CPU arrays of pointers, reached with restartable sequences.
 *
 * One data structure, two ways to reach it:
 *
 *  - rseq: glibc registered an rseq area for every thread (struct rseq at
 *    thread pointer + __rseq_offset).  Each operation is a few instructions
 *    that read the CPU id, index that CPU's array and end in one commit
 *    store; if the thread is preempted, migrated or signalled inside, the
 *    kernel restarts it at the abort handler.  No atomic, no lock.
 *  - fallback (valgrind, GLIBC_TUNABLES=glibc.pthread.rseq=0): the same
 *    arrays, each behind its own spinlock, indexed by a per-thread slot.
 *
 * Which one is decided once, by cpu_init(), for the whole process, from
 * glibc's own verdict (__rseq_size is 0 unless the main thread registered):
 * mixing would let a locked operation and an rseq race on one array.  Every
 * sequence starts by checking the CPU id against the bound its set
 * carries (struct cpu_set_head): cpu_rseq_ids, which is cpu_nr_ids in rseq
 * mode and 0 otherwise, or 0 in the always-empty set.  One unsigned
 * compare so sends to the locked path: a thread without rseq (id -1/-2), a
 * CPU id past the arrays, every thread of a fallback-mode process, and
 * every operation on the empty set (which then finds no slot).
 * In rseq mode such a thread uses the shared slot (index cpu_nr_ids): a
 * real array that no sequence ever reaches, taken under its lock.
 *
 * Array layout (struct cpu_array): word, cap, lock, a zero sentinel, then
 * objs[cap]; the room's last line holds the set's header in CPU 0's.  word = ops << 16 | count:
 *   count (bits 0-14): 0 <= count <= cap, objs[0..count) are the pointers;
 *   bit 15 (CPU_ARRAY_LOCKED) is set while a remote drain owns the array:
 *     every rseq operation then sees "empty" and "full" and takes its slow
 *     path, so the drainer may touch the array;
 *   ops (bits 16-63): single pops and pushes done on this array.  Each
 *     single operation commits with one `add` to word that moves count and
 *     bumps ops together, so exact fast-path statistics cost nothing;
 *     batch moves change count only.
 *   lock: taken by every fallback operation and by drainers (both modes).
 *   sentinel: objs[-1], read by the double-free check when count is 0.
 */
#ifndef SK_CPU_H
#define SK_CPU_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/rseq.h>

#include "lock/lock.h"
#include "os/os.h"

/* CPU ids with arrays of their own; a CPU beyond (machines with more) runs
 * on the shared slot, correct but locked. */
#define CPU_MAX_IDS 1024
#define CPU_ARRAY_LOCKED 0x8000u
#define CPU_ARRAY_COUNT 0x7fffu
#define CPU_ARRAY_MAX SK_ARRAY_SIZE_MAX /* 117, the largest capacity: 24 + 117 * 8 = 960 */
#define CPU_ARRAY_BYTES 1024u     /* one array's room */
/* The room's last cache line: in CPU 0's array, the set's header (struct
 * cpu_set_head); in the others, unused.  No push ever writes it, so the
 * line every CPU reads the bound from is never taken from under it. */
#define CPU_SET_HEAD 960
/* Every CPU's array of a set lies at base + cpu * CPU_ARRAY_STRIDE: the
 * fast path finds it with a shift, not a load.  The stride is a page, a
 * row that holds the arrays of CPU_SETS_PER_ROW sets side by side
 * (cpu_arrays_alloc): a CPU that runs a few caches touches a page for
 * every four of them, where a stride of one array put every cache's
 * array of a CPU on a page of its own more often than not (docs/design.md,
 * "Per-CPU arrays", has the page counts). */
#define CPU_ARRAY_SHIFT 12
#define CPU_ARRAY_STRIDE (1u << CPU_ARRAY_SHIFT)
#define CPU_SETS_PER_ROW (CPU_ARRAY_STRIDE / CPU_ARRAY_BYTES)
#define CPU_OP_POP  0xffffull     /* one pop: count - 1, ops + 1 */
#define CPU_OP_PUSH 0x10001ull    /* one push: count + 1, ops + 1 */

struct cpu_array {
    uint64_t word;                /* offset 0: ops << 16 | count, see above */
    uint32_t cap;                 /* offset 8 */
    spinlock_t lock;              /* offset 12: fallback and drainers */
    void *sentinel;               /* offset 16: objs[-1], always NULL */
    void *objs[];                 /* offset 24 */
};

/* The asm below reads these offsets as literals. */
_Static_assert(__builtin_offsetof(struct cpu_array, word) == 0, "asm: word at 0");
_Static_assert(__builtin_offsetof(struct cpu_array, cap) == 8, "asm: cap at 8");
_Static_assert(__builtin_offsetof(struct cpu_array, sentinel) == 16, "asm: sentinel at 16");
_Static_assert(__builtin_offsetof(struct cpu_array, objs) == 24, "asm: objs at 24");
_Static_assert(__builtin_offsetof(struct rseq, cpu_id) == 4, "asm: rseq cpu_id at 4");
_Static_assert(__builtin_offsetof(struct rseq, rseq_cs) == 8, "asm: rseq_cs at 8");
_Static_assert(24 + CPU_ARRAY_MAX * 8 <= CPU_SET_HEAD, "an array fits below its header line");
_Static_assert(CPU_SET_HEAD % 64 == 0 && CPU_SET_HEAD + 64 == CPU_ARRAY_BYTES, "the header line ends the room");
_Static_assert(CPU_ARRAY_STRIDE % CPU_ARRAY_BYTES == 0, "a row holds whole arrays");

static inline unsigned cpu_array_len(const struct cpu_array *a)
{
    return (unsigned)(__atomic_load_n(&a->word, __ATOMIC_RELAXED) & CPU_ARRAY_COUNT);
}

/* A per-CPU array set: cpu_nr_ids + 1 arrays, CPU_ARRAY_STRIDE apart, each
 * of CPU_ARRAY_BYTES; the last is the shared slot (cpu_nr_ids): in rseq
 * mode, threads without rseq use it under its lock; no sequence ever
 * reaches it. */
typedef struct cpu_array *cpu_arrays_t;

/* The always-empty set: what a table points at before init, or for good
 * where a mode bypasses the arrays (sheaves=0, slub_debug, pcp=0).  One
 * array of capacity 0 and a header of zeros: every sequence takes the
 * fallback, which finds no slot in it; read-only, so nothing can write
 * it.  A set of its own size, not cpu_nr_ids + 1 arrays: a table loaded
 * before init may still be used after it. */
extern const char cpu_empty_mem[CPU_ARRAY_BYTES] SK_INTERNAL;
#define cpu_empty_arrays ((cpu_arrays_t)cpu_empty_mem)

/* Each set says how far it may be indexed, at CPU_SET_HEAD of its first
 * array, so that a set of one array (the always-empty set) is safe to
 * hand to every operation:
 *   seq_ids: sequences run on CPU ids below it (cpu_rseq_ids at creation;
 *            0 in the empty set and in fallback mode);
 *   slots:   arrays in the set to use (cpu_nr_slots(); 0 in the empty
 *            set, whose one array nothing may lock or index). */
struct cpu_set_head {
    uint32_t seq_ids;             /* offset CPU_SET_HEAD: the asm reads it */
    uint32_t slots;
};

static inline const struct cpu_set_head *cpu_set_head(cpu_arrays_t tab)
{
    return (const struct cpu_set_head *)((const char *)tab + CPU_SET_HEAD);
}

/* Slot `slot` is one of tab's (never one of the empty set's). */
static inline bool cpu_set_has(cpu_arrays_t tab, int slot)
{
    return (unsigned)slot < cpu_set_head(tab)->slots;
}

static inline struct cpu_array *cpu_array_at(cpu_arrays_t tab, int cpu)
{
    return (struct cpu_array *)((char *)tab + ((size_t)cpu << CPU_ARRAY_SHIFT));
}

extern bool cpu_use_rseq SK_INTERNAL;     /* decided once by cpu_init() */
extern int cpu_nr_ids SK_INTERNAL;        /* CPU ids with arrays (<= CPU_MAX_IDS) */
/* The bound every sequence checks the CPU id against: cpu_nr_ids in rseq
 * mode, 0 in the fallback and before cpu_init (so everything locks). */
extern int cpu_rseq_ids SK_INTERNAL;
/* membarrier(PRIVATE_EXPEDITED_RSEQ) registered: a remote drain fences a
 * CPU's sequences with it; without, it visits that CPU. */
extern bool cpu_membarrier_ok SK_INTERNAL;
/* Array slots of a set: every CPU's, and the shared slot. */
static inline int cpu_nr_slots(void) { return cpu_nr_ids + 1; }

void cpu_init(void);
/* Zeroed memory of cpu_arrays_bytes() holds a set; cpu_arrays_init gives
 * each CPU's array `cap` slots (cap <= CPU_ARRAY_MAX), or leaves them at 0
 * for cpu_array_ready to set when a CPU first uses its array (so memory is
 * touched only for CPUs that run the cache). */
size_t cpu_arrays_bytes(void);
cpu_arrays_t cpu_arrays_init(void *mem, unsigned cap);
/* A zeroed set of its own (after cpu_init), one of the CPU_SETS_PER_ROW
 * that share a pool's rows: NULL with errno ENOMEM when the OS refuses a
 * pool.  Sets are never unmapped (a racing reader may hold one); a user
 * that is done with one clears it (cpu_arrays_clear) for its next use. */
cpu_arrays_t cpu_arrays_alloc(void);
void cpu_arrays_clear(cpu_arrays_t tab);
/* The same layout for other per-CPU state: a pool is `rows` rows of
 * CPU_ARRAY_STRIDE bytes, one per CPU id, and hands out columns of
 * `width` bytes (at most the stride), so CPU k's parts of successive
 * columns lie side by side on its row: column + k * CPU_ARRAY_STRIDE.
 * NULL with errno ENOMEM when the OS refuses a pool.  Each pool is a
 * struct cpu_pool of its user's, zero at start, always asked with the
 * same width and rows (after cpu_init); cpu_pool_atfork_child in a forked
 * child abandons the pool a parent thread was caught carving. */
struct cpu_pool {
    spinlock_t lock;
    char *next;                   /* the next column of the pool carved now */
    unsigned left;                /* columns left there */
};
void *cpu_pool_alloc(struct cpu_pool *p, size_t width, int rows);
/* Zero a column of `width` bytes on each of its `rows` rows, for reuse. */
void cpu_pool_clear(void *col, size_t width, int rows);
void cpu_pool_atfork_child(struct cpu_pool *p);
/* Give this thread's array (its CPU's, or its fallback slot's) `cap`
 * slots if it has none yet.  Slow paths call it before pushing; it returns
 * the array's capacity now (`cap` where the thread has no array). */
unsigned cpu_array_ready(cpu_arrays_t tab, unsigned cap);
/*
 * Capacity changes, from slow paths, unlocked for the sequences: one that
 * read the old cap commits against it.  Growing this thread's array (to
 * at most CPU_ARRAY_MAX: the stride has the room) lets pushes go further;
 * trimming slot `slot` back to `cap` (any thread, after a drain) leaves
 * any count above it reading as full everywhere (every push compares
 * count >= cap), so the next push takes the slow path, which flushes.
 * Both store cap under the array's lock, which the fallback holds.
 */
void cpu_array_grow(cpu_arrays_t tab, unsigned cap);
void cpu_array_trim(cpu_arrays_t tab, int slot, unsigned cap);

/* Fallback slot of this thread (its CPU when it first asked). */
int cpu_slot(void);
/* Reset per-thread state in a forked child. */
void cpu_atfork_child(void);

/* ---- operations: 1 / pointer on success, 0 / NULL on empty/full ---- */
static inline struct rseq *cpu_rseq_area(void)
{
    return (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
}

/* The CPU this thread runs on now (a hint in the fallback): the rseq
 * area's id, else the fallback slot.  Inline: the slow paths ask for it
 * per statistic. */
static inline int cpu_current(void)
{
    int id = (int)cpu_rseq_area()->cpu_id;
    if (likely(id >= 0 && id < cpu_nr_ids))
        return id;
    return cpu_slot();
}

/* Retry after a fast operation failed: NULL/0 when empty/full, -1 from
 * push when obj is already on top (rseq and fallback alike). */
void *cpu_pop_locked(cpu_arrays_t tab);
int cpu_push_locked(cpu_arrays_t tab, void *obj);
unsigned cpu_pop_batch(cpu_arrays_t tab, void **buf, unsigned max);
unsigned cpu_push_batch(cpu_arrays_t tab, void **buf, unsigned n);
/* Take up to `max` pointers out of CPU `cpu`'s array from any thread,
 * safe against sequences running there (membarrier RSEQ). */
unsigned cpu_drain_remote(cpu_arrays_t tab, int cpu, void **buf, unsigned max);
/* Objects cached by CPU `cpu` now (a snapshot). */
unsigned cpu_array_count(cpu_arrays_t tab, int cpu);
/* Single pops + pushes ever done on CPU `cpu`'s array. */
uint64_t cpu_array_ops(cpu_arrays_t tab, int cpu);

/* The fallback slot of this thread: -1 until first asked; in an rseq
 * process a thread without rseq gets the shared slot cpu_nr_ids. */
extern __thread int cpu_thread_slot __attribute__((tls_model("initial-exec"))) SK_INTERNAL;

/* The rseq descriptor and abort handler shared by every sequence.
 * start = 1f, post-commit = 2f, abort = 4f; retry from 0b after an abort
 * (the kernel clears rseq_cs when it aborts us, so it is stored again).
 * %[off] holds __rseq_offset: the rseq area is at %fs:off. */
#define CPU_STR_(x) #x
#define CPU_STR(x) CPU_STR_(x)
#define CPU_RSEQ_PROLOGUE                                              \
    ".pushsection __rseq_cs, \"aw\"\n\t"                               \
    ".balign 32\n\t"                                                   \
    "3:\n\t"                                                           \
    ".long 0, 0\n\t"                                                   \
    ".quad 1f, 2f - 1f, 4f\n\t"                                        \
    ".popsection\n\t"                                                  \
    "0:\n\t"                                                           \
    "leaq 3b(%%rip), %%rax\n\t"                                        \
    "movq %%rax, %%fs:8(%[off])\n\t"
#define CPU_RSEQ_EPILOGUE                                              \
    ".pushsection __rseq_failure, \"ax\"\n\t"                          \
    ".byte 0x0f, 0xb9, 0x3d\n\t"                                       \
    ".long " CPU_STR(RSEQ_SIG) "\n\t"     /* glibc registered this one */ \
    "4:\n\t"                                                           \
    "jmp 0b\n\t"                                                       \
    ".popsection\n\t"

/* Start of every sequence (label 1): this CPU's array into %rax; to
 * `fallback` unless 0 <= cpu_id < the set's seq_ids (unsigned: the -1 and
 * -2 of a thread without rseq are huge). */
#define CPU_RSEQ_LOCATE                                                \
    "1:\n\t"                                                           \
    "movl %%fs:4(%[off]), %%eax\n\t"     /* cpu_id, zero-extended */   \
    "cmpl " CPU_STR(CPU_SET_HEAD) "(%[tab]), %%eax\n\t" /* seq_ids */   \
    "jae %l[fallback]\n\t"                                             \
    "shlq $" CPU_STR(CPU_ARRAY_SHIFT) ", %%rax\n\t" /* * stride */     \
    "addq %[tab], %%rax\n\t"             /* this CPU's array */

/* One push: to `full` when full or drained, to `dup` when obj is on top
 * already, to `fallback` without rseq; else commit count + 1, ops + 1. */
#define CPU_PUSH_SEQ(full, dup)                                        \
    CPU_RSEQ_PROLOGUE                                                  \
    CPU_RSEQ_LOCATE                                                    \
    "movzwl (%%rax), %%ecx\n\t"          /* count (| LOCKED) */        \
    "cmpl 8(%%rax), %%ecx\n\t"           /* >= cap: full, or drained */\
    "jae %l[" #full "]\n\t"                                            \
    "cmpq 16(%%rax, %%rcx, 8), %[obj]\n\t" /* objs[count-1] or NULL */ \
    "je %l[" #dup "]\n\t"                                              \
    "movq %[obj], 24(%%rax, %%rcx, 8)\n\t"                             \
    "addq $0x10001, (%%rax)\n\t"         /* commit */                  \
    "2:\n\t"                                                           \
    CPU_RSEQ_EPILOGUE

/* The array the fallback uses, locked; false when the thread has no slot
 * yet, the array has no capacity yet, or the lock is busy (the caller's
 * slow path assigns a slot, readies the array, waits).  An array no slow
 * path has readied is only read here, never locked: the slow path that
 * readies it first says whose it is (the slab layer's cpus_used), and a
 * forked child resets the locks of those arrays only, so a fork while
 * another thread held an unready array's lock would leave it held. */
static SK_ALWAYS_INLINE bool cpu_lock_slot(cpu_arrays_t tab, struct cpu_array **out)
{
    int slot = cpu_thread_slot;
    /* unsigned: no slot yet (-1) reads as past the set */
    if (unlikely((unsigned)slot >= cpu_set_head(tab)->slots))
        return false;
    struct cpu_array *a = cpu_array_at(tab, slot);
    if (unlikely(!__atomic_load_n(&a->cap, __ATOMIC_RELAXED)))
        return false;
    if (unlikely(__atomic_exchange_n(&a->lock.v, 1, __ATOMIC_ACQUIRE)))
        return false;     /* contended: the slow path waits */
    *out = a;
    return true;
}

/*
 * Pop the top pointer of this CPU's array into *obj: true on success;
 * false when empty, drained, or when the slow path must decide (no slot
 * yet).  No atomic in rseq mode; one xchg in the fallback.
 */
static SK_ALWAYS_INLINE bool cpu_pop_fast(cpu_arrays_t tab, void **obj)
{
#ifndef SK_TSAN
    void *o;
    /* volatile, though asm goto is volatile by definition: gcc 12 deleted
     * this sequence where its output went unused (inlined into a caller
     * that ignored obj) and took the fall-through as a pop
     * (tests/cpu/unready_array).  Every asm goto here says it. */
    __asm__ volatile goto(
        CPU_RSEQ_PROLOGUE
        CPU_RSEQ_LOCATE
        "movzwl (%%rax), %%ecx\n\t"           /* count (| LOCKED) */
        "leal -1(%%rcx), %%edx\n\t"
        "cmpl $0x7ffe, %%edx\n\t"             /* empty, or a drain owns it */
        "ja %l[empty]\n\t"
        "movq 16(%%rax, %%rcx, 8), %[obj]\n\t" /* objs[count - 1] */
        "addq $0xffff, (%%rax)\n\t"           /* commit: count - 1, ops + 1 */
        "2:\n\t"
        CPU_RSEQ_EPILOGUE
        : [obj] "=&r"(o)
        : [off] "r"(__rseq_offset), [tab] "r"(tab)
        : "rax", "rcx", "rdx", "memory", "cc"
        : empty, fallback);
    *obj = o;
    return true;
empty:
    return false;
fallback:
#endif
    {
        struct cpu_array *a;
        if (unlikely(!cpu_lock_slot(tab, &a)))
            return false;
        uint64_t w = a->word;
        unsigned n = (unsigned)w & 0xffff;
        bool got = n - 1 < CPU_ARRAY_COUNT;
        if (likely(got)) {
            *obj = a->objs[n - 1];
            __atomic_store_n(&a->word, w + CPU_OP_POP, __ATOMIC_RELAXED);
        }
        spin_unlock(&a->lock);
        return got;
    }
}

/*
 * Push obj on this CPU's array: true when pushed; false when full,
 * drained, obj is already on top (a double free: the slow path says so),
 * or the slow path must decide.
 */
static SK_ALWAYS_INLINE bool cpu_push_fast(cpu_arrays_t tab, void *obj)
{
#ifndef SK_TSAN
    __asm__ volatile goto(
        CPU_PUSH_SEQ(slow, slow)
        :
        : [off] "r"(__rseq_offset), [tab] "r"(tab), [obj] "r"(obj)
        : "rax", "rcx", "memory", "cc"
        : slow, fallback);
    return true;
slow:
    return false;
fallback:
#endif
    {
        struct cpu_array *a;
        if (unlikely(!cpu_lock_slot(tab, &a)))
            return false;
        uint64_t w = a->word;
        unsigned n = (unsigned)w & 0xffff;
        bool ok = n < a->cap && (&a->sentinel)[n] != obj;   /* objs[n - 1] */
        if (likely(ok)) {
            a->objs[n] = obj;
            __atomic_store_n(&a->word, w + CPU_OP_PUSH, __ATOMIC_RELAXED);
        }
        spin_unlock(&a->lock);
        return ok;
    }
}

/* The full operations, for slow paths: they also assign a fallback slot.
 * cpu_push: 1 pushed, 0 full or no array, -1 obj already on top. */
static inline void *cpu_pop(cpu_arrays_t tab)
{
    void *obj;
    if (cpu_pop_fast(tab, &obj))
        return obj;
    return cpu_pop_locked(tab);
}

static inline int cpu_push(cpu_arrays_t tab, void *obj)
{
    if (cpu_push_fast(tab, obj))
        return 1;
    return cpu_push_locked(tab, obj);
}

#endif
