/*
 * unmap_faults — memory slabkit gave back to the arena faults when used
 * afterwards, instead of silently reading zeros: a region after
 * sk_vm_unmap, and a block larger than a slice after free (a direct run).
 * Each touch happens in a forked child that must die of SIGSEGV.  The
 * arena reuses the slices afterwards (a new map of the same size works).
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slabkit.h"
#include "tap.h"

static int child_segfaults(volatile char *p)
{
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        (void)p[0];
        _exit(0);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return 0;
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV;
}

int main(void)
{
    size_t size = (size_t)64 << 20;
    char *r = sk_vm_map(size, 2u << 20);
    ok(r != NULL, "sk_vm_map of 64 MiB with huge pages");
    if (!r)
        return done_testing();
    memset(r, 7, 1 << 20);
    ok(!child_segfaults(r), "the mapped region is usable");
    ok(sk_vm_unmap(r, size) == 0, "sk_vm_unmap");
    ok(child_segfaults(r), "a read after sk_vm_unmap faults");
    char *r2 = sk_vm_map(size, 2u << 20);
    ok(r2 != NULL, "a new map of the same size works after the unmap");
    if (r2) {
        memset(r2, 9, 1 << 20);
        ok(r2[12345] == 9, "and its memory is usable");
        sk_vm_unmap(r2, size);
    }

    size_t big = (size_t)100 << 20;   /* past the largest buddy block: a direct run */
    char *b = sk_malloc(big);
    ok(b != NULL, "sk_malloc of 100 MiB");
    if (b) {
        b[big - 1] = 1;
        sk_free(b);
        ok(child_segfaults(b), "a read after free of a 100 MiB block faults");
        char *b2 = sk_malloc(big);
        ok(b2 != NULL && (b2[0] = 3) == 3, "a new 100 MiB block works after it");
        sk_free(b2);
    }
    return done_testing();
}
