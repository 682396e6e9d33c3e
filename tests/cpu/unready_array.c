/*
 * unready_array — the fast paths only read an array that no slow path has
 * readied (capacity 0): they never lock it.  A forked child resets the
 * locks of the arrays whose cache says it was used, and the slow path
 * that readies an array says so first; a lock taken on an unready array
 * (the lock fallback did, before reading the capacity) could be held by a
 * thread the fork left behind, and nobody would reset it.
 *
 *  - a set of arrays with capacity 0, its memory made read-only:
 *    cpu_pop_fast and cpu_push_fast each return false, in a child, which
 *    a write would have killed with SIGSEGV;
 *  - the same set readied (capacity 4, writable again): a push and a pop
 *    go through the fast paths.
 * Runs with rseq and, via tests/modes/rseq_off.t, in the fallback.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu/cpu.h"
#include "tap.h"
#include "cpus.h"

static unsigned char token[2];

int main(void)
{
    plan(3);
    if (pin_first_cpu() < 0)
        BAIL("cannot pin to a CPU");
    os_options_init();
    cpu_init();
    diag("per-CPU arrays via %s (%d CPU ids)", cpu_use_rseq ? "rseq" : "the lock fallback", cpu_nr_ids);

    /* A readied set first, so that this thread has its fallback slot. */
    size_t bytes = SK_ALIGN_UP(cpu_arrays_bytes(), (size_t)SK_PAGE_SIZE);
    void *other = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (other == MAP_FAILED || mem == MAP_FAILED)
        BAIL("no memory for the arrays");
    cpu_arrays_t ready = cpu_arrays_init(other, 4);
    if (cpu_push(ready, &token[0]) <= 0 || cpu_pop(ready) != &token[0])
        BAIL("push/pop on a readied set failed");

    cpu_arrays_t tab = cpu_arrays_init(mem, 0);
    if (mprotect(mem, bytes, PROT_READ) != 0)
        BAIL("mprotect failed");
    pid_t pid = fork();
    if (pid < 0)
        BAIL("fork failed");
    if (pid == 0) {
        void *obj = NULL;
        bool popped = cpu_pop_fast(tab, &obj);
        bool pushed = cpu_push_fast(tab, &token[1]);
        _exit(popped || pushed ? 2 : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
       "capacity 0, read-only: pop and push fail without writing (child %s %d)",
       WIFSIGNALED(st) ? "killed by signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));

    if (mprotect(mem, bytes, PROT_READ | PROT_WRITE) != 0)
        BAIL("mprotect failed");
    unsigned cap = cpu_array_ready(tab, 4);
    ok(cap == 4, "readied: capacity %u", cap);
    void *obj = NULL;
    bool pushed = cpu_push_fast(tab, &token[1]);
    bool popped = cpu_pop_fast(tab, &obj);
    ok(pushed && popped && obj == &token[1], "then a push and a pop go through the fast paths");
    munmap(mem, bytes);
    munmap(other, bytes);
    return done_testing();
}
