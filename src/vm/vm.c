/*
 * vm.c — slices and the page map.
 *
 * Invariants:
 *  - vm_slice_map[i] is non-NULL exactly while slice i is mapped by
 *    slabkit; it is published (release) only after the header is fully
 *    initialised, and cleared before the memory is unmapped.
 *  - Headers live in their own mmap (never in the slice), so freeing a
 *    direct mapping never leaves a dangling descriptor inside user memory.
 * Lock order: vm_lock is a leaf (taken by the page allocator's zone code
 * with the zone lock held, never the other way round).
 */
#include <errno.h>
#include <string.h>

#include "lock/lock.h"
#include "vm/vm.h"

struct vm_slice *vm_slice_map[VM_MAP_ENTRIES];

static spinlock_t vm_lock = SPINLOCK_INIT;
static struct vm_slice *vm_all;
static size_t vm_bytes;

static void publish(struct vm_slice *s)
{
    spin_lock(&vm_lock);
    s->next = vm_all;
    vm_all = s;
    vm_bytes += s->size;
    for (uint32_t i = 0; i < s->nr_slices; i++)
        __atomic_store_n(&vm_slice_map[(s->base >> SLICE_SHIFT) + i], s, __ATOMIC_RELEASE);
    spin_unlock(&vm_lock);
}

static struct vm_slice *header_new(size_t descs, size_t desc_size)
{
    size_t bytes = SK_ALIGN_UP(sizeof(struct vm_slice) + descs * desc_size, SK_PAGE_SIZE);
    if (bytes > VM_HEADER_ALIGN)
        os_fatal("slice header of %zu bytes exceeds its %zu-byte alignment", bytes, VM_HEADER_ALIGN);
    struct vm_slice *s = os_map(bytes, VM_HEADER_ALIGN);
    return s;
}

struct vm_slice *vm_slice_new(enum vm_slice_kind kind, size_t desc_size)
{
    void *mem = os_map(SLICE_SIZE, SLICE_SIZE);
    if (!mem) {
        errno = ENOMEM;
        return NULL;
    }
    struct vm_slice *s = header_new(SLICE_PAGES, desc_size);
    if (!s) {
        os_unmap(mem, SLICE_SIZE);
        errno = ENOMEM;
        return NULL;
    }
    s->base = (uintptr_t)mem;
    s->size = SLICE_SIZE;
    s->kind = (uint8_t)kind;
    s->nr_slices = 1;
    if (kind == VM_SLICE_HUGE && os_thp_mode() != OS_THP_NEVER)
        s->huge = os_advise_huge(mem, SLICE_SIZE) == 0;
    else if (kind == VM_SLICE_BASE && os_thp_mode() == OS_THP_ALWAYS)
        os_advise_nohuge(mem, SLICE_SIZE);
    publish(s);
    return s;
}

struct vm_slice *vm_direct_new(size_t size, size_t desc_size)
{
    size_t span = SK_ALIGN_UP(size, SLICE_SIZE);
    if (span < size) {
        errno = ENOMEM;
        return NULL;
    }
    void *mem = os_map(span, SLICE_SIZE);
    if (!mem) {
        errno = ENOMEM;
        return NULL;
    }
    /* The unused tail of the last slice stays reserved with the run, so
     * no other mapping can land in a slice the map points at. */
    struct vm_slice *s = header_new(SLICE_PAGES, desc_size);
    if (!s) {
        os_unmap(mem, span);
        errno = ENOMEM;
        return NULL;
    }
    s->base = (uintptr_t)mem;
    s->size = span;
    s->kind = VM_SLICE_DIRECT;
    s->nr_slices = (uint32_t)(span >> SLICE_SHIFT);
    publish(s);
    return s;
}

void vm_direct_free(struct vm_slice *s)
{
    spin_lock(&vm_lock);
    for (uint32_t i = 0; i < s->nr_slices; i++)
        __atomic_store_n(&vm_slice_map[(s->base >> SLICE_SHIFT) + i], NULL, __ATOMIC_RELEASE);
    struct vm_slice **pp = &vm_all;
    while (*pp && *pp != s)
        pp = &(*pp)->next;
    if (*pp)
        *pp = s->next;
    vm_bytes -= s->size;
    spin_unlock(&vm_lock);
    os_unmap((void *)s->base, s->size);
    /* The header stays mapped (its memory is returned): a racing lookup
     * of a stale pointer may still read it.  It is a few pages at most. */
    os_purge(s, SK_ALIGN_UP(sizeof(struct vm_slice), SK_PAGE_SIZE));
}

struct vm_slice *vm_slices(void)
{
    return __atomic_load_n(&vm_all, __ATOMIC_ACQUIRE);
}

size_t vm_reserved_bytes(void)
{
    return __atomic_load_n(&vm_bytes, __ATOMIC_RELAXED);
}

void vm_atfork_child(void)
{
    spin_unlock(&vm_lock);
}
