/*
 * freelist.c — per-CPU freelists (freelist.h): the locked bodies of the
 * sequences and the remote drain.
 *
 * Invariants (freelist.h has the layout): a slot's head changes only by a
 * sequence on its CPU, or under its lock where no sequence can reach it
 * (the shared slot, every slot of a fallback-mode process), or under its
 * lock by a drainer that published CPU_FL_LOCKED and saw it survive a
 * membarrier(RSEQ) on that CPU.  Without membarrier a drainer moves onto
 * the CPU and takes the list with a sequence there.
 * Lock order: a slot's lock is a leaf.  Callers exclude concurrent
 * drainers of one slot (the slab layer's slot lock).
 */
#define _GNU_SOURCE
#include "cpu/freelist.h"

/* The slot a fallback operation works on, locked; NULL before the thread
 * has one (the caller's slow path assigns it). */
static struct cpu_freelist *lock_slot(void *base)
{
    int slot = cpu_thread_slot;
    if (unlikely(slot < 0))
        return NULL;
    struct cpu_freelist *f = cpu_fl_at(base, slot);
    spin_lock(&f->lock);
    return f;
}

bool cpu_fl_pop_locked(void *base, uintptr_t ofs, uintptr_t rnd, void **obj)
{
    struct cpu_freelist *f = lock_slot(base);
    if (!f)
        return false;
    void *o = f->head;
    if (o) {
        __atomic_store_n(&f->head, cpu_fl_next(o, ofs, rnd), __ATOMIC_RELAXED);
        __atomic_store_n(&f->tid_pops, f->tid_pops + 2, __ATOMIC_RELAXED);
        *obj = o;
    }
    spin_unlock(&f->lock);
    return o != NULL;
}

bool cpu_fl_push_locked(void *base, uintptr_t ofs, uintptr_t rnd, void *obj, const void *owner)
{
    struct cpu_freelist *f = lock_slot(base);
    if (!f)
        return false;
    /* The owner changes under the slab layer's lock, not this one: a
     * stale read only lets an object join the list of a slab's former
     * owner, which the lists allow (docs/slub2011.md). */
    bool ok = __atomic_load_n(&f->owner, __ATOMIC_RELAXED) == owner;
    if (ok) {
        cpu_fl_link(obj, ofs, rnd, f->head);
        __atomic_store_n(&f->head, obj, __ATOMIC_RELAXED);
        __atomic_store_n(&f->tid_pushes, f->tid_pushes + 1, __ATOMIC_RELAXED);
    }
    spin_unlock(&f->lock);
    return ok;
}

bool cpu_fl_install_locked(void *base, uintptr_t ofs, uintptr_t rnd, void *head, void *tail)
{
    struct cpu_freelist *f = lock_slot(base);
    if (!f)
        return false;
    bool ok = tail || !f->head;
    if (ok) {
        if (tail)
            cpu_fl_link(tail, ofs, rnd, f->head);
        __atomic_store_n(&f->head, head, __ATOMIC_RELAXED);
    }
    spin_unlock(&f->lock);
    return ok;
}

/* Take this CPU's whole list with a sequence (the drain by visit).  NULL
 * when empty or when the thread cannot run sequences. */
static void *take_here(void *base)
{
#ifndef SK_TSAN
    void *o;
    __asm__ volatile goto(
        CPU_RSEQ_PROLOGUE
        CPU_FL_LOCATE(empty)
        "movq (%%rax), %[obj]\n\t"
        "movq $0, (%%rax)\n\t"                 /* commit: head = NULL */
        "2:\n\t"
        CPU_RSEQ_EPILOGUE
        : [obj] "=&r"(o)
        : [off] "r"(__rseq_offset), [base] "r"(base), [ids] "m"(cpu_rseq_ids)
        : "rax", "memory", "cc"
        : empty, fallback);
    return o;
empty:
fallback:
#endif
    (void)base;
    return NULL;
}

static SK_NOINLINE void *drain_by_visit(void *base, int slot)
{
    struct os_cpus saved;
    if (slot == cpu_current())
        return take_here(base);
    if (os_visit_cpu(slot, &saved) != 0)
        return NULL;
    void *head = cpu_current() == slot ? take_here(base) : NULL;
    os_restore_cpus(&saved);
    return head;
}

void *cpu_fl_drain(void *base, int slot)
{
    struct cpu_freelist *f = cpu_fl_at(base, slot);
    bool seq = cpu_use_rseq && slot < cpu_nr_ids;   /* the shared slot: lock only */
    if (seq && !cpu_membarrier_ok)
        return drain_by_visit(base, slot);
    spin_lock(&f->lock);
    if (seq) {
        for (;;) {
            __atomic_fetch_or(&f->tid_pops, CPU_FL_LOCKED, __ATOMIC_SEQ_CST);
            if (os_membarrier_rseq_cpu(slot) != 0)
                os_fatal("membarrier(PRIVATE_EXPEDITED_RSEQ, cpu %d) failed", slot);
            if (__atomic_load_n(&f->tid_pops, __ATOMIC_SEQ_CST) & CPU_FL_LOCKED)
                break;
        }
    }
    void *head = __atomic_load_n(&f->head, __ATOMIC_ACQUIRE);
    __atomic_store_n(&f->head, NULL, __ATOMIC_RELAXED);
    if (seq)
        __atomic_fetch_and(&f->tid_pops, ~CPU_FL_LOCKED, __ATOMIC_RELEASE);
    spin_unlock(&f->lock);
    return head;
}

uint64_t cpu_fl_pops(void *base, int slot)
{
    return __atomic_load_n(&cpu_fl_at(base, slot)->tid_pops, __ATOMIC_RELAXED) >> 1;
}

uint64_t cpu_fl_pushes(void *base, int slot)
{
    return __atomic_load_n(&cpu_fl_at(base, slot)->tid_pushes, __ATOMIC_RELAXED);
}
