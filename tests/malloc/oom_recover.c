/*
 * oom_recover.c — running out of memory in the middle of a run is not
 * fatal and not permanent, under `ulimit -v 300000` (RLIMIT_AS set, then
 * this test re-executed, as a shell would run a program):
 *  - 64-byte blocks until malloc returns NULL (ENOMEM), all freed: then
 *    malloc(1 MiB) works (it once kept failing, even after malloc_trim:
 *    the slab zone held every slice, free, and the large-block zone could
 *    get none);
 *  - memory freed by small objects serves large blocks, and the reverse:
 *    each fill gets at least half of what the other got;
 *  - realloc that cannot grow returns NULL and keeps the block intact;
 *  - malloc_trim(0) gives wholly free slices' address space back (under a
 *    limit, arena slices too);
 *  - four threads allocating mixed sizes until NULL, then freeing: a large
 *    and a small allocation work again;
 *  - a wild pointer past a partial slice's mapped prefix is "not
 *    slabkit's" (free aborts saying so).
 * Blocks are chained through their first word: an array of pointers
 * would itself eat the address space under test.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "statm.h"
#include "vm/vm.h"
#include "tap.h"

#define LIMIT_KIB 300000
#define MiB ((size_t)1 << 20)

struct blk { struct blk *next; size_t size; };

/* Allocate blocks of `size` (0: a mix) until NULL; returns the chain,
 * with the bytes in *bytes and errno of the failure in *err. */
static struct blk *fill(size_t size, size_t *bytes, int *err)
{
    static const size_t mix[] = { 64, 256, 4096, 40000, 300000, 96, 1500 };
    struct blk *head = NULL;
    size_t total = 0;
    for (unsigned i = 0;; i++) {
        size_t n = size ? size : mix[i % SK_ARRAY_SIZE(mix)];
        errno = 0;
        struct blk *b = malloc(n);
        if (!b) {
            *err = errno;
            break;
        }
        b->next = head;
        b->size = n;
        memset(b + 1, 0x5c, n > 64 ? 48 : n - sizeof *b);
        head = b;
        total += n;
    }
    *bytes = total;
    return head;
}

static int drain(struct blk *b)
{
    int intact = 1;
    while (b) {
        struct blk *next = b->next;
        const unsigned char *c = (const unsigned char *)(b + 1);
        size_t k = b->size > 64 ? 48 : b->size - sizeof *b;
        for (size_t j = 0; j < k; j++)
            intact &= c[j] == 0x5c;
        free(b);
        b = next;
    }
    return intact;
}

/* ---- threads ---- */

#define NTHREADS 4
static pthread_barrier_t filled, freed;
static int thread_err[NTHREADS], thread_intact[NTHREADS];
static size_t thread_bytes[NTHREADS];

static void *filler(void *arg)
{
    int t = (int)(intptr_t)arg;
    struct blk *b = fill(0, &thread_bytes[t], &thread_err[t]);
    pthread_barrier_wait(&filled);     /* every thread has seen NULL */
    thread_intact[t] = drain(b);
    pthread_barrier_wait(&freed);
    return NULL;
}

/* Under `ulimit -v 40000` no arena slice fits: small objects live in a
 * partial slice.  Free a pointer past its mapped prefix: it must abort as
 * "not slabkit's" (its descriptors there are zero).  Run re-executed;
 * exit 3 when the object is not in a partial slice. */
static int tiny(void)
{
    void *p = malloc(64);
    struct vm_slice *s = p ? vm_slice_of(p) : NULL;
    if (!s || !s->partial || s->mapped >= SLICE_SIZE)
        return 3;
    free((char *)s->base + s->mapped + 4096);
    return 0;
}

static void wild_pointer_check(const char *argv0)
{
    int p[2];
    if (pipe(p) != 0)
        BAIL("pipe: %s", strerror(errno));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl;
        getrlimit(RLIMIT_AS, &rl);
        rl.rlim_cur = (rlim_t)40000 << 10;
        setrlimit(RLIMIT_AS, &rl);
        dup2(p[1], 2);
        execl("/proc/self/exe", argv0, "--tiny", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char msg[256] = "";
    ssize_t n = read(p[0], msg, sizeof msg - 1);
    msg[n > 0 ? n : 0] = 0;
    close(p[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    diag("free(wild pointer) under ulimit -v 40000: %s", msg);
    ok(WIFSIGNALED(st) && strstr(msg, "is not slabkit's"),
       "free of a pointer past a partial slice's mapped part aborts: \"not slabkit's\"");
}

static void limited(const char *argv0)
{
    wild_pointer_check(argv0);
    struct rlimit rl;
    getrlimit(RLIMIT_AS, &rl);
    ok(rl.rlim_cur == (rlim_t)LIMIT_KIB << 10, "running under ulimit -v %d", LIMIT_KIB);
    diag("address space in use at start: %ld KiB", statm_bytes(STATM_SIZE) >> 10);

    size_t small_bytes, large_bytes, again_bytes;
    int err = 0;
    struct blk *b = fill(64, &small_bytes, &err);
    diag("64-byte blocks: %zu MiB before NULL", small_bytes / MiB);
    ok(b && err == ENOMEM, "64-byte blocks until NULL: errno ENOMEM (%d)", err);
    ok(small_bytes > 150 * MiB, "more than half the limit went to 64-byte blocks");
    ok(drain(b), "every 64-byte block was intact");
    void *big = malloc(MiB), *tiny = malloc(64);
    ok(big && tiny, "after freeing them all, malloc(1 MiB) and malloc(64) work");
    if (big)
        memset(big, 1, MiB);
    free(big);
    free(tiny);

    err = 0;
    b = fill(MiB, &large_bytes, &err);
    diag("1 MiB blocks: %zu MiB before NULL", large_bytes / MiB);
    ok(err == ENOMEM && large_bytes >= small_bytes / 2,
       "freed slab memory serves large blocks: %zu MiB of 1 MiB blocks after %zu MiB of 64-byte ones",
       large_bytes / MiB, small_bytes / MiB);

    /* At the limit: realloc cannot grow, and keeps the block. */
    char *r = malloc(100);
    if (!r) {
        free(b->next ? b : NULL);   /* make room for one small block */
        b = b->next ? b->next : b;
        r = malloc(100);
    }
    if (r) {
        memset(r, 7, 100);
        errno = 0;
        char *r2 = realloc(r, 64 * MiB);
        ok(r2 == NULL && errno == ENOMEM && r[0] == 7 && r[99] == 7,
           "realloc(64 MiB) at the limit is NULL/ENOMEM and keeps the block");
        free(r2 ? r2 : r);
    } else {
        ok(0, "room for a small block to test realloc");
    }
    ok(drain(b), "every 1 MiB block was intact");

    err = 0;
    b = fill(64, &again_bytes, &err);
    ok(err == ENOMEM && again_bytes >= small_bytes / 2,
       "freed large-block memory serves slabs: %zu MiB of 64-byte blocks again", again_bytes / MiB);
    drain(b);

    /* Free slices keep their address space until an allocation fails or
     * malloc_trim: give it back so that the thread stacks can be mapped. */
    long before = statm_bytes(STATM_SIZE);
    malloc_trim(0);
    long after = statm_bytes(STATM_SIZE);
    diag("malloc_trim(0): address space %ld -> %ld KiB", before >> 10, after >> 10);
    ok(after < before - (long)(100 * MiB), "malloc_trim(0) under a limit gives the free slices' address space back");

    /* Threads: all allocate until NULL, then all free. */
    pthread_t th[NTHREADS];
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 << 10);
    pthread_barrier_init(&filled, NULL, NTHREADS);
    pthread_barrier_init(&freed, NULL, NTHREADS + 1);
    int started = 0;
    for (int t = 0; t < NTHREADS; t++)
        started += pthread_create(&th[t], &attr, filler, (void *)(intptr_t)t) == 0;
    if (started != NTHREADS)
        BAIL("could not start %d threads", NTHREADS);
    pthread_barrier_wait(&freed);
    size_t mt = 0;
    int all_enomem = 1, all_intact = 1;
    for (int t = 0; t < NTHREADS; t++) {
        mt += thread_bytes[t];
        all_enomem &= thread_err[t] == ENOMEM;
        all_intact &= thread_intact[t];
    }
    diag("%d threads: %zu MiB of mixed blocks before NULL", NTHREADS, mt / MiB);
    ok(all_enomem && mt > 100 * MiB, "%d threads each allocated until NULL/ENOMEM", NTHREADS);
    ok(all_intact, "every thread's blocks were intact");
    big = malloc(32 * MiB);
    tiny = malloc(64);
    ok(big && tiny, "after the threads freed everything, malloc(32 MiB) and malloc(64) work");
    if (big)
        memset(big, 2, 32 * MiB);
    free(big);
    free(tiny);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);

}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--tiny") == 0)
        return tiny();
    if (argc > 1 && strcmp(argv[1], "--limited") == 0) {
        bail_out_after(120, "oom_recover hung");
        limited(argv[0]);
        return done_testing();
    }
    struct rlimit rl = { (rlim_t)LIMIT_KIB << 10, RLIM_INFINITY };
    getrlimit(RLIMIT_AS, &rl);
    rl.rlim_cur = (rlim_t)LIMIT_KIB << 10;
    if (setrlimit(RLIMIT_AS, &rl) != 0)
        skip_all("cannot set RLIMIT_AS: %s", strerror(errno));
    fflush(stdout);
    execl("/proc/self/exe", argv[0], "--limited", (char *)NULL);
    BAIL("exec /proc/self/exe: %s", strerror(errno));
}
