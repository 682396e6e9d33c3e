/*
 * rlimit_direct — a freed block beyond 64 MiB gives its address space
 * back: under RLIMIT_AS (`ulimit -v`) it must not keep later mappings out.
 *
 * With the limit set to what the process uses plus 3 GiB: malloc of
 * 1.5 GiB works and is freed; then malloc of 2.5 GiB must work (it could
 * not if the first block's address space stayed reserved), and after it
 * is freed the program's own mmap of 2.5 GiB must work too.  The blocks
 * are never touched: the test costs address space, not memory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "statm.h"
#include "tap.h"

#define GiB ((size_t)1 << 30)

static size_t vm_size(void)
{
    long v = statm_bytes(STATM_SIZE);
    return v < 0 ? 0 : (size_t)v;
}

int main(void)
{
    void *volatile first = malloc(100);    /* slabkit started, its arena reserved */
    free(first);
    size_t base = vm_size();
    if (!base)
        skip_all("cannot read /proc/self/statm");
    struct rlimit rl = { base + 3 * GiB, base + 3 * GiB };
    if (setrlimit(RLIMIT_AS, &rl) != 0)
        skip_all("cannot set RLIMIT_AS: %s", strerror(errno));
    plan(4);
    diag("address space in use %zu MiB; RLIMIT_AS that plus 3 GiB", base >> 20);
    void *a = malloc(GiB + GiB / 2);
    ok(a != NULL, "malloc(1.5 GiB) works (errno %d)", a ? 0 : errno);
    free(a);
    void *b = malloc(2 * GiB + GiB / 2);
    ok(b != NULL, "after it is freed, malloc(2.5 GiB) works (address space %zu MiB)", vm_size() >> 20);
    free(b);
    ok(vm_size() < base + GiB / 2, "after both are freed, the address space is back near where it was (%zu MiB)",
       vm_size() >> 20);
    void *m = mmap(NULL, 2 * GiB + GiB / 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ok(m != MAP_FAILED, "the program's own mmap of 2.5 GiB works");
    if (m != MAP_FAILED)
        munmap(m, 2 * GiB + GiB / 2);
    return done_testing();
}
