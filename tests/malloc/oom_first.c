/*
 * oom_first.c — the very first allocation of a process can fail cleanly:
 * NULL with errno ENOMEM, no abort (slabkit once aborted with "cannot map
 * per-CPU page lists"), and once memory is available the next call
 * initialises slabkit and works.  Three ways to be out of memory from the
 * start, each in a fresh process (this test re-executed), since the
 * parent has long initialised slabkit by printing:
 *   full   every free range of the address space mapped PROT_NONE, and
 *          RLIMIT_DATA 0 (glibc's malloc returns NULL here too)
 *   data   RLIMIT_DATA of one page alone (a soft limit of 0 under a larger
 *          hard one is ignored by the kernel, for valgrind's sake)
 *   as     RLIMIT_AS a little above what the process already uses
 * The child cannot print before malloc works (stdio allocates its
 * buffer), so it reports through its exit status, one bit per check.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slab/kmalloc.h"
#include "statm.h"
#include "tap.h"

enum {
    FRESH = 1,         /* slabkit not initialised at the start of main */
    REFUSED = 2,       /* malloc(100) NULL with ENOMEM */
    REFUSED_BIG = 4,   /* malloc(1 MiB) and calloc NULL with ENOMEM */
    WORKS = 8,         /* after lifting the limit: malloc, calloc, free */
    WORKS_MANY = 16,   /* ... and 10000 objects of every small size */
};
#define ALL (FRESH | REFUSED | REFUSED_BIG | WORKS | WORKS_MANY)

#define MAX_FILL 4096
static void *fill_at[MAX_FILL];
static size_t fill_len[MAX_FILL];
static int nfill;

/* Map PROT_NONE over every free range: largest pieces first. */
static void fill_address_space(void)
{
    for (int shift = 47; shift >= 12; shift--) {
        size_t len = (size_t)1 << shift;
        while (nfill < MAX_FILL) {
            void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED)
                break;
            fill_at[nfill] = p;
            fill_len[nfill++] = len;
        }
    }
}

static void set_limit(int resource, rlim_t v)
{
    struct rlimit rl;
    getrlimit(resource, &rl);
    rl.rlim_cur = v;
    setrlimit(resource, &rl);
}

static int child(const char *mode)
{
    int bits = 0;
    if (!slab_ready())
        bits |= FRESH;
    struct rlimit data0, as0;
    getrlimit(RLIMIT_DATA, &data0);
    getrlimit(RLIMIT_AS, &as0);
    if (!strcmp(mode, "full")) {
        fill_address_space();
        set_limit(RLIMIT_DATA, 0);
    } else if (!strcmp(mode, "data")) {
        set_limit(RLIMIT_DATA, 4096);
    } else {
        set_limit(RLIMIT_AS, (rlim_t)statm_bytes(STATM_SIZE) + (256 << 10));
    }
    errno = 0;
    void *p = malloc(100);
    if (!p && errno == ENOMEM)
        bits |= REFUSED;
    errno = 0;
    void *q = malloc(1 << 20);
    int e1 = errno;
    errno = 0;
    void *r = calloc(1000, 1000);
    if (!q && e1 == ENOMEM && !r && errno == ENOMEM)
        bits |= REFUSED_BIG;
    free(p);
    free(q);
    free(r);
    /* Memory back: the next call initialises slabkit and works. */
    for (int i = 0; i < nfill; i++)
        munmap(fill_at[i], fill_len[i]);
    setrlimit(RLIMIT_DATA, &data0);
    setrlimit(RLIMIT_AS, &as0);
    p = malloc(100);
    q = calloc(1, 1 << 20);
    if (p && q && slab_ready()) {
        memset(p, 1, 100);
        bits |= WORKS;
    }
    free(p);
    free(q);
    static void *objs[10000];
    int ok_all = 1;
    for (size_t size = 1; size <= 4096 && ok_all; size = size * 2 + 1) {
        for (int i = 0; i < 10000; i++)
            if (!(objs[i] = malloc(size)))
                ok_all = 0;
        for (int i = 0; i < 10000; i++)
            free(objs[i]);
    }
    if (ok_all)
        bits |= WORKS_MANY;
    return bits;
}

static void run(const char *argv0, const char *mode, const char *what)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", argv0, "--child", mode, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    int bits = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
    if (!WIFEXITED(st))
        diag("%s: the child died of signal %d", what, WTERMSIG(st));
    ok(WIFEXITED(st) && WEXITSTATUS(st) != 127, "%s: the first malloc returns, no abort", what);
    ok(bits & FRESH, "%s: slabkit was not initialised before it", what);
    ok(bits & REFUSED, "%s: malloc(100) is NULL with errno ENOMEM", what);
    ok(bits & REFUSED_BIG, "%s: malloc(1 MiB) and calloc(1000, 1000) are NULL with ENOMEM", what);
    ok(bits & WORKS, "%s: with memory back, malloc and calloc work (slabkit initialised)", what);
    ok(bits & WORKS_MANY, "%s: and 10000 objects of each small size", what);
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "--child"))
        return child(argv[2]) & ALL;
    bail_out_after(120, "oom_first hung");
    run(argv[0], "full", "address space full, RLIMIT_DATA 0");
    run(argv[0], "data", "RLIMIT_DATA one page");
    run(argv[0], "as", "RLIMIT_AS 256 KiB above what is in use");
    return done_testing();
}
