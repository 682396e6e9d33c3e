/*
 * resource_limits — where the OS refuses what slabkit asks on the way
 * back, memory must still never come back with old contents as if new:
 *
 *  - mlocked memory: MADV_DONTNEED fails on it, so a purged block stays
 *    resident.  A 1 MiB block is mlocked, filled, freed, and sk_trim purges
 *    the zone; sk_calloc of 1 MiB (which trusts clean blocks to be zero)
 *    must return zeros.  Again in a child under mlockall(MCL_FUTURE).
 *  - vm.max_map_count: a 100 MiB direct block is freed while the process
 *    has used up its mappings, so the PROT_NONE remap that gives its
 *    slices back cannot split the mapping; the next sk_calloc of 100 MiB
 *    (often the same address) must return zeros.  In a child.
 *  - an alignment beyond what slabkit can give (128 MiB) is ENOMEM, not
 *    EINVAL (POSIX keeps EINVAL for a bad alignment).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slabkit.h"
#include "tap.h"

#define MiB ((size_t)1 << 20)

static size_t nonzero(const unsigned char *p, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += p[i] != 0;
    return k;
}

/* 0: calloc came back zero; 1: it did not; 2: mlock refused (skip). */
static int mlocked_block(int all)
{
    if (all && mlockall(MCL_CURRENT | MCL_FUTURE) != 0)
        return 2;
    unsigned char *p = sk_malloc(MiB);
    if (!p || (!all && mlock(p, MiB) != 0))
        return 2;
    memset(p, 0x5a, MiB);
    sk_free(p);
    sk_trim();
    unsigned char *c = sk_calloc(1, MiB);
    return !c || nonzero(c, MiB) ? 1 : 0;
}

static void *fill[70000];

/* 0: zeros; 1: old data. */
static int map_count_exhausted(void)
{
    void *small = sk_malloc(64);
    unsigned char *d = sk_malloc(100 * MiB);
    if (!small || !d)
        return 1;
    memset(d, 0xab, MiB);
    d[100 * MiB - 1] = 0xab;
    int n = 0;
    for (; n < 70000; n++) {
        fill[n] = mmap(NULL, 4096, (n & 1) ? PROT_READ : PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (fill[n] == MAP_FAILED)
            break;
    }
    sk_free(d);
    for (int i = 0; i < n; i++)
        munmap(fill[i], 4096);
    unsigned char *c = sk_calloc(1, 100 * MiB);
    return !c || c[0] || c[MiB - 1] || c[100 * MiB - 1] || nonzero(c, MiB) ? 1 : 0;
}

static int in_child(int (*fn)(int), int arg)
{
    pid_t pid = fork();
    if (pid == 0) {
        alarm(60);
        _exit(fn(arg));
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return 1;
    return WEXITSTATUS(st);
}

static int map_count_child(int unused)
{
    (void)unused;
    return map_count_exhausted();
}

int main(void)
{
    plan(5);
    int r = mlocked_block(0);
    if (r == 2) {
        printf("ok 1 # skip mlock refused (RLIMIT_MEMLOCK)\n");
        tap_n++;
    } else
        is(r, 0, "an mlocked 1 MiB block, freed and trimmed: calloc of 1 MiB returns zeros");
    r = in_child(mlocked_block, 1);
    if (r == 2) {
        printf("ok 2 # skip mlockall refused (RLIMIT_MEMLOCK)\n");
        tap_n++;
    } else
        is(r, 0, "under mlockall(MCL_FUTURE), a freed and trimmed block: calloc returns zeros");
    is(in_child(map_count_child, 0), 0,
       "a 100 MiB block freed with vm.max_map_count used up: calloc of 100 MiB returns zeros");
    errno = 0;
    void *a = sk_aligned_alloc((size_t)128 << 20, 4096);
    ok(!a && errno == ENOMEM, "sk_aligned_alloc(128 MiB alignment) is NULL with ENOMEM (errno %d)", errno);
    a = sk_aligned_alloc((size_t)64 << 20, 4096);
    ok(a && ((uintptr_t)a & (((size_t)64 << 20) - 1)) == 0, "sk_aligned_alloc(64 MiB alignment) works");
    sk_free(a);
    return done_testing();
}
