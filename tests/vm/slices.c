/*
 * slices.c — the slice arena under 16 threads: a long random sequence of
 * sk_vm_map/sk_vm_unmap of mixed page sizes and lengths (with large
 * mallocs, which take direct slice runs, in between) never hands out two
 * overlapping mappings, and after every operation the cached slice masks
 * equal a from-scratch recomputation from the per-slice states
 * (vm_check_masks).  Then the same with slice_mask_cache=0, and the
 * sk_vm_map argument checks.
 *
 * Overlap is caught by stamps: every slice of a mapping gets its owner's
 * (thread, serial) word at the start when mapped; the stamps must all be
 * intact when it is unmapped, and the page map must point every slice of
 * the mapping at one header whose run is exactly the mapping.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "vm/vm.h"

#define THREADS 16
#define OPS 600
#define LIVE 4

struct map { char *p; size_t size; uint64_t stamp; int malloced; };
static long mask_errors, overlap_errors, map_fail, map_ok;

static uint64_t rnd(uint64_t *s) { *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17; return *s; }

static int check_run(const struct map *m)
{
    int bad = 0;
    struct vm_slice *s = vm_slice_of(m->p);
    size_t span = SK_ALIGN_UP(m->size, SLICE_SIZE);
    if (!s || s->base != (uintptr_t)m->p || s->size != span)
        bad++;
    for (size_t off = 0; off < span; off += SLICE_SIZE) {
        if (vm_slice_of(m->p + off) != s)
            bad++;
        if (*(uint64_t *)(m->p + off) != m->stamp)
            bad++;
    }
    return bad;
}

static void *worker(void *arg)
{
    uint64_t seed = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
    struct map live[LIVE] = { { 0 } };
    long masks = 0, overlaps = 0, fails = 0, oks = 0;
    for (int op = 0; op < OPS; op++) {
        struct map *m = &live[rnd(&seed) % LIVE];
        if (m->p) {
            overlaps += check_run(m);
            if (m->malloced)
                free(m->p);
            else if (sk_vm_unmap(m->p, m->size) != 0)
                overlaps++;
            m->p = NULL;
        } else {
            uint64_t r = rnd(&seed);
            size_t slices = 1 + (r >> 8) % 3;
            size_t size = slices * SLICE_SIZE - (r >> 16) % 4096;
            m->malloced = (r & 7) == 0;
            if (m->malloced) {
                size = (size_t)70 << 20;   /* past the buddy's largest block: a direct run */
                m->p = malloc(size);
            } else {
                static const size_t psz[3] = { 0, 4096, (size_t)2 << 20 };
                m->p = sk_vm_map(size, psz[(r >> 4) % 3]);
            }
            if (!m->p) {
                fails++;
                continue;
            }
            oks++;
            m->size = size;
            m->stamp = ((uint64_t)(uintptr_t)arg << 48) | (uint64_t)op;
            for (size_t off = 0; off < SK_ALIGN_UP(size, SLICE_SIZE); off += SLICE_SIZE)
                *(uint64_t *)(m->p + off) = m->stamp;
        }
        masks += vm_check_masks() != 0;
    }
    for (int i = 0; i < LIVE; i++)
        if (live[i].p) {
            overlaps += check_run(&live[i]);
            if (live[i].malloced)
                free(live[i].p);
            else
                sk_vm_unmap(live[i].p, live[i].size);
        }
    __atomic_add_fetch(&mask_errors, masks, __ATOMIC_RELAXED);
    __atomic_add_fetch(&overlap_errors, overlaps, __ATOMIC_RELAXED);
    __atomic_add_fetch(&map_fail, fails, __ATOMIC_RELAXED);
    __atomic_add_fetch(&map_ok, oks, __ATOMIC_RELAXED);
    return NULL;
}

static void run(const char *what)
{
    mask_errors = overlap_errors = map_fail = map_ok = 0;
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)(i + 1)))
            BAIL("pthread_create");
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    is(map_fail, 0, "%s: %ld maps by %d threads, none refused", what, map_ok, THREADS);
    is(mask_errors, 0, "%s: after every map/unmap the cached masks equal a recomputation", what);
    is(overlap_errors, 0, "%s: no two mappings overlap (stamps and page map intact)", what);
    is(vm_check_masks(), 0, "%s: masks exact at the end", what);
}

int main(void)
{
    plan(4 * 2 + 8);
    run("slice_mask_cache=1");
    os_options_parse("slice_mask_cache=0");
    run("slice_mask_cache=0");
    os_options_parse("slice_mask_cache=1");

    errno = 0;
    ok(!sk_vm_map(SLICE_SIZE, 8192) && errno == EINVAL, "sk_vm_map with an 8 KiB page size: EINVAL");
    errno = 0;
    ok(!sk_vm_map(0, 0) && errno == EINVAL, "sk_vm_map of 0 bytes: EINVAL");
    errno = 0;
    ok(!sk_vm_map(SIZE_MAX - 4096, 0) && errno == ENOMEM, "sk_vm_map of SIZE_MAX - 4096: ENOMEM");
    char *p = sk_vm_map(3 << 20, 0);
    struct vm_slice *s = vm_slice_of(p);
    ok(p && s && s->kind == VM_SLICE_USER && ((uintptr_t)p & (SLICE_SIZE - 1)) == 0,
       "sk_vm_map(3 MiB, 0): a user slice, slice-aligned");
    ok(s && s->huge == (os_thp_mode() != OS_THP_NEVER), "page size 0 picks huge pages for 3 MiB");
    char *q = sk_vm_map(100 << 10, 0);
    ok(q && !vm_slice_of(q)->huge, "page size 0 picks base pages for 100 KiB");
    ok(sk_vm_unmap(p + 4096, 3 << 20) == -1 && errno == EINVAL, "unmap of an interior pointer: EINVAL");
    ok(sk_vm_unmap(p, 3 << 20) == 0 && sk_vm_unmap(p, 3 << 20) == -1 && errno == EINVAL &&
       sk_vm_unmap(q, 100 << 10) == 0 && !vm_slice_of(p),
       "unmap, then a second unmap of the same region: EINVAL; the page map forgets it");
    return done_testing();
}
