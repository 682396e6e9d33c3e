/*
 * trim_space — malloc_trim(0) gives address space back, and a large block
 * reuses free slices before it maps new ones (VmSize, /proc/self/status):
 *  - 256 MiB of 64-byte objects allocated and freed, then malloc_trim(0):
 *    it returns 1, and VmSize falls by at least 200 MiB (the slices are
 *    unmapped, not only purged);
 *  - then malloc(256 MiB): the block lies where those objects were (the
 *    arena mapped its holes again) and VmSize grows by at most 256 MiB
 *    and a slice header per slice;
 *  - without malloc_trim: the same objects freed, then malloc(256 MiB):
 *    the zones' wholly free slices go back to the arena first (unmapped),
 *    and the block takes the arena's room: VmSize does not grow.
 * Each case runs in a child of its own, so that one's heap is not the
 * other's.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "statm.h"
#include "tap.h"

#define MiB (1024L * 1024)
#define OBJS ((size_t)(256 * MiB) / 64)

static void **objs;
static uintptr_t lo = UINTPTR_MAX, hi;

static long vm_mib(void)
{
    return statm_bytes(STATM_SIZE) / MiB;
}

static void fill(void)
{
    objs = malloc(OBJS * sizeof *objs);
    for (size_t i = 0; i < OBJS; i++) {
        objs[i] = malloc(64);
        if (!objs[i])
            exit(9);
        *(char *)objs[i] = 1;
        uintptr_t a = (uintptr_t)objs[i];
        lo = a < lo ? a : lo;
        hi = a > hi ? a : hi;
    }
}

static void empty(void)
{
    for (size_t i = 0; i < OBJS; i++)
        free(objs[i]);
}

/* Exit status bits: 1 malloc_trim returned 0, 2 VmSize did not fall, 4 the
 * block is not where the objects were, 8 VmSize grew too much. */
static int with_trim(void)
{
    fill();
    empty();
    long before = vm_mib();
    int r = malloc_trim(0);
    long after = vm_mib();
    char *volatile big = malloc(256 * MiB);
    memset(big, 1, 4096);
    long with_block = vm_mib();
    printf("# with malloc_trim: VmSize %ld MiB freed, %ld trimmed, %ld with a 256 MiB block at %p (objects %#lx-%#lx)\n",
           before, after, with_block, (void *)big, (unsigned long)lo, (unsigned long)hi);
    fflush(stdout);
    int st = 0;
    if (r != 1)
        st |= 1;
    if (before - after < 200)
        st |= 2;
    if ((uintptr_t)big + 256 * MiB <= lo || (uintptr_t)big > hi)
        st |= 4;
    if (with_block - after > 256 + 16)
        st |= 8;
    return st;
}

static int without_trim(void)
{
    fill();
    empty();
    long before = vm_mib();
    char *volatile big = malloc(256 * MiB);
    memset(big, 1, 4096);
    long with_block = vm_mib();
    printf("# without: VmSize %ld MiB freed, %ld with a 256 MiB block at %p (objects %#lx-%#lx)\n", before, with_block,
           (void *)big, (unsigned long)lo, (unsigned long)hi);
    fflush(stdout);
    return with_block > before ? 8 : 0;
}

int main(void)
{
    if (statm_bytes(STATM_SIZE) <= 0)
        skip_all("no /proc/self/statm");
    plan(5);
    int st = tap_fork_wait(with_trim);
    ok(WIFEXITED(st) && !(WEXITSTATUS(st) & 1), "256 MiB of 64-byte objects freed: malloc_trim(0) returns 1");
    ok(WIFEXITED(st) && !(WEXITSTATUS(st) & 2), "and VmSize falls by at least 200 MiB: the slices are unmapped");
    ok(WIFEXITED(st) && !(WEXITSTATUS(st) & 12),
       "malloc(256 MiB) then lies where the objects were, VmSize up by the block at most (status %#x)", st);
    st = tap_fork_wait(without_trim);
    ok(WIFEXITED(st) && WEXITSTATUS(st) != 9, "without malloc_trim: the objects allocated and freed");
    ok(WIFEXITED(st) && !(WEXITSTATUS(st) & 8),
       "malloc(256 MiB) takes the room the zones' free slices leave: VmSize does not grow (status %#x)", st);
    return done_testing();
}
