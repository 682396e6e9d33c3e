/*
 * freelist.h — per-CPU freelists reached with restartable sequences: the
 * fast path of SLUB before sheaves (SLABKIT_OPTIONS=sheaves=0).
 *
 * A set holds one struct cpu_freelist per CPU id plus the shared slot
 * (index cpu_nr_ids), CPU_FL_STRIDE bytes apart (the slab layer embeds each
 * in a 64-byte slot of its own).  Each is the kernel's kmem_cache_cpu fast
 * half: a singly linked list of free objects whose links live in the
 * objects (at byte `ofs`, stored as next ^ rnd ^ &link: the slab layer's
 * get_fp), the tid, and the owner (the CPU slab) whose objects a free may
 * push here.  The operations are the kernel's this_cpu_cmpxchg_double on
 * (freelist, tid), done the rseq way: read this CPU's head, (pop) load the
 * next link from the object or (push) write the link into the object, bump
 * the tid, and commit the new head with one store.  A sequence preempted,
 * migrated or signalled before that store restarts from the top, so the
 * object it read is still the head, and its memory (a slab owned by a CPU
 * or counted in use) is mapped.
 *
 * Invariants:
 *  - head is changed only by sequences running on that CPU, or under
 *    `lock` (the shared slot, every slot in a fallback-mode process, and a
 *    remote drain that has fenced the CPU's sequences: CPU_FL_LOCKED).
 *  - tid = pushes << 32 | pops << 1 | LOCKED.  Every pop adds 2 to the low
 *    half and every push 1 to the high half (32-bit adds: the halves never
 *    carry into each other); a sequence aborted after its add and before
 *    its commit counts twice, so the counts are statistics, not books.
 *    LOCKED (bit 0) makes every sequence bail to its slow path: a drainer
 *    sets it, fences the CPU with membarrier(RSEQ) and checks it survived
 *    (a pop that read the tid before it may have written it back without),
 *    exactly as cpu.c drains an array.
 *  - owner is written by the slab layer under its slot lock, read unlocked
 *    by pushes: a push that raced with a change of owner leaves an object
 *    of the old owner on the list, which is allowed (the list may hold
 *    objects of any slab of the cache; see docs/slub2011.md).
 * Lock order: `lock` is a leaf spinlock.
 */
#ifndef SK_CPU_FREELIST_H
#define SK_CPU_FREELIST_H

#include "cpu/cpu.h"

#define CPU_FL_SHIFT 6
#define CPU_FL_STRIDE (1u << CPU_FL_SHIFT)
#define CPU_FL_LOCKED 1   /* no suffix: the asm reads it too */

struct cpu_freelist {
    void *head;                   /* offset 0: first free object, or NULL */
    uint32_t tid_pops;            /* offset 8: pops << 1 | CPU_FL_LOCKED */
    uint32_t tid_pushes;          /* offset 12: pushes */
    void *owner;                  /* offset 16: pushes need obj's slab == owner */
    spinlock_t lock;              /* offset 24: fallback, shared slot, drainers */
};

_Static_assert(__builtin_offsetof(struct cpu_freelist, head) == 0, "asm: head at 0");
_Static_assert(__builtin_offsetof(struct cpu_freelist, tid_pops) == 8, "asm: tid at 8");
_Static_assert(__builtin_offsetof(struct cpu_freelist, tid_pushes) == 12, "asm: pushes at 12");
_Static_assert(__builtin_offsetof(struct cpu_freelist, owner) == 16, "asm: owner at 16");
_Static_assert(sizeof(struct cpu_freelist) <= CPU_FL_STRIDE, "a freelist fits its stride");

static inline struct cpu_freelist *cpu_fl_at(void *base, int slot)
{
    return (struct cpu_freelist *)((char *)base + ((size_t)slot << CPU_FL_SHIFT));
}

/* Decode and encode a link, as the slab layer's get_fp/set_fp. */
static inline void *cpu_fl_next(const void *obj, uintptr_t ofs, uintptr_t rnd)
{
    const uintptr_t *link = (const uintptr_t *)((const char *)obj + ofs);
    return (void *)(*link ^ rnd ^ (uintptr_t)link);
}

static inline void cpu_fl_link(void *obj, uintptr_t ofs, uintptr_t rnd, const void *next)
{
    uintptr_t *link = (uintptr_t *)((char *)obj + ofs);
    *link = (uintptr_t)next ^ rnd ^ (uintptr_t)link;
}

/* Start of every freelist sequence (label 1): this CPU's freelist into
 * %rax, to `fallback` unless 0 <= cpu_id < cpu_rseq_ids, to `busy` while a
 * drainer owns it.  The same bound as the array sequences (cpu.h). */
#define CPU_FL_LOCATE(busy)                                            \
    "1:\n\t"                                                           \
    "movl %%fs:4(%[off]), %%eax\n\t"                                   \
    "cmpl %[ids], %%eax\n\t"                                           \
    "jae %l[fallback]\n\t"                                             \
    "shlq $" CPU_STR(CPU_FL_SHIFT) ", %%rax\n\t"                       \
    "addq %[base], %%rax\n\t"                                          \
    "testb $" CPU_STR(CPU_FL_LOCKED) ", 8(%%rax)\n\t"                  \
    "jnz %l[" #busy "]\n\t"

/* The locked bodies: the fallback of each sequence (out of line). */
bool cpu_fl_pop_locked(void *base, uintptr_t ofs, uintptr_t rnd, void **obj);
bool cpu_fl_push_locked(void *base, uintptr_t ofs, uintptr_t rnd, void *obj, const void *owner);
bool cpu_fl_install_locked(void *base, uintptr_t ofs, uintptr_t rnd, void *head, void *tail);
/* The whole list of slot `slot`, from any thread, leaving it empty: safe
 * against sequences running there (membarrier RSEQ, or a visit to that
 * CPU where membarrier is missing; a CPU outside this thread's affinity
 * then keeps its list: NULL).  The caller excludes other drainers and
 * installers of that slot (the slab layer's slot lock). */
void *cpu_fl_drain(void *base, int slot);
/* Counts for statistics. */
uint64_t cpu_fl_pops(void *base, int slot);
uint64_t cpu_fl_pushes(void *base, int slot);

/*
 * Pop the head of this CPU's freelist into *obj: true on success; false
 * when empty, drained, or (fallback) no slot yet.
 */
static inline bool cpu_fl_pop(void *base, uintptr_t ofs, uintptr_t rnd, void **obj)
{
#ifndef SK_TSAN
    void *o;
    __asm__ volatile goto(
        CPU_RSEQ_PROLOGUE
        CPU_FL_LOCATE(empty)
        "movq (%%rax), %[obj]\n\t"             /* head */
        "testq %[obj], %[obj]\n\t"
        "jz %l[empty]\n\t"
        "movq (%[obj], %[ofs]), %%rcx\n\t"     /* its link, encoded */
        "xorq %[rnd], %%rcx\n\t"
        "leaq (%[obj], %[ofs]), %%rdx\n\t"
        "xorq %%rdx, %%rcx\n\t"                /* next */
        "addl $2, 8(%%rax)\n\t"                /* tid: one more pop */
        "movq %%rcx, (%%rax)\n\t"              /* commit: head = next */
        "2:\n\t"
        CPU_RSEQ_EPILOGUE
        : [obj] "=&r"(o)
        : [off] "r"(__rseq_offset), [base] "r"(base), [ids] "m"(cpu_rseq_ids),
          [ofs] "r"(ofs), [rnd] "r"(rnd)
        : "rax", "rcx", "rdx", "memory", "cc"
        : empty, fallback);
    *obj = o;
    return true;
empty:
    return false;
fallback:
#endif
    return cpu_fl_pop_locked(base, ofs, rnd, obj);
}

/*
 * Push obj on this CPU's freelist when `owner` (obj's slab) is that
 * freelist's owner: true when pushed; false when another slab is this
 * CPU's, a drain owns the list, or (fallback) no slot yet.
 */
static inline bool cpu_fl_push(void *base, uintptr_t ofs, uintptr_t rnd, void *obj, const void *owner)
{
#ifndef SK_TSAN
    uintptr_t link = (uintptr_t)obj + ofs;
    __asm__ volatile goto(
        CPU_RSEQ_PROLOGUE
        CPU_FL_LOCATE(refused)
        "cmpq 16(%%rax), %[owner]\n\t"         /* obj of this CPU's slab? */
        "jne %l[refused]\n\t"
        "movq (%%rax), %%rcx\n\t"              /* head */
        "xorq %[rnd], %%rcx\n\t"
        "xorq %[link], %%rcx\n\t"
        "movq %%rcx, (%[link])\n\t"            /* obj's link = head */
        "addl $1, 12(%%rax)\n\t"               /* tid: one more push */
        "movq %[obj], (%%rax)\n\t"             /* commit: head = obj */
        "2:\n\t"
        CPU_RSEQ_EPILOGUE
        :
        : [off] "r"(__rseq_offset), [base] "r"(base), [ids] "m"(cpu_rseq_ids),
          [obj] "r"(obj), [owner] "r"(owner), [rnd] "r"(rnd), [link] "r"(link)
        : "rax", "rcx", "memory", "cc"
        : refused, fallback);
    return true;
refused:
    return false;
fallback:
#endif
    return cpu_fl_push_locked(base, ofs, rnd, obj, owner);
}

/*
 * The slow path's refill: put the chain head..tail on this CPU's freelist,
 * whatever the owner.  tail NULL: the chain is NULL-terminated and goes
 * there only if the list is empty (no walk to its tail); else tail's link
 * is set to the old head.  False when refused (not empty, drained, or no
 * slot yet): the caller finds the tail and tries again, or gives the
 * chain back to its slab.
 */
static inline bool cpu_fl_install(void *base, uintptr_t ofs, uintptr_t rnd, void *head, void *tail)
{
#ifndef SK_TSAN
    uintptr_t link = tail ? (uintptr_t)tail + ofs : 0;
    __asm__ volatile goto(
        CPU_RSEQ_PROLOGUE
        CPU_FL_LOCATE(refused)
        "movq (%%rax), %%rcx\n\t"              /* head */
        "testq %[link], %[link]\n\t"
        "jnz 5f\n\t"
        "testq %%rcx, %%rcx\n\t"               /* no tail: only if empty */
        "jnz %l[refused]\n\t"
        "jmp 6f\n\t"
        "5:\n\t"
        "xorq %[rnd], %%rcx\n\t"
        "xorq %[link], %%rcx\n\t"
        "movq %%rcx, (%[link])\n\t"            /* tail's link = head */
        "6:\n\t"
        "movq %[head], (%%rax)\n\t"            /* commit */
        "2:\n\t"
        CPU_RSEQ_EPILOGUE
        :
        : [off] "r"(__rseq_offset), [base] "r"(base), [ids] "m"(cpu_rseq_ids),
          [head] "r"(head), [rnd] "r"(rnd), [link] "r"(link)
        : "rax", "rcx", "memory", "cc"
        : refused, fallback);
    return true;
refused:
    return false;
fallback:
#endif
    return cpu_fl_install_locked(base, ofs, rnd, head, tail);
}

/* Set the owner of slot `slot` (the slab layer's slot lock held). */
static inline void cpu_fl_set_owner(void *base, int slot, void *owner)
{
    __atomic_store_n(&cpu_fl_at(base, slot)->owner, owner, __ATOMIC_RELEASE);
}

static inline void *cpu_fl_owner(void *base, int slot)
{
    return __atomic_load_n(&cpu_fl_at(base, slot)->owner, __ATOMIC_ACQUIRE);
}

#endif
