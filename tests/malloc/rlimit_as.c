/*
 * rlimit_as.c — when the address space runs out (RLIMIT_AS, `ulimit -v`),
 * malloc returns NULL with errno ENOMEM: no crash, no abort, no short
 * block, and once memory is freed malloc works again.
 *
 * The limit must be in force before slabkit starts, as it is for a program
 * run under `ulimit -v`, so the test sets it and re-executes itself.  The
 * large blocks are never touched, so the test costs address space, not RAM.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "statm.h"
#include "tap.h"

#define MiB ((size_t)1 << 20)
#define LIMIT (1024 * MiB)
#define MAX_BIG 4096              /* 4 GiB: far past the limit */
/* Small objects are chained through their first word (an array of
 * pointers would itself eat the address space under test). */
struct small { struct small *next; unsigned char fill[56]; };

static long vm_bytes(void)
{
    return statm_bytes(STATM_SIZE);
}

static void limited(void)
{
    static void *big[MAX_BIG];
    struct rlimit rl;
    getrlimit(RLIMIT_AS, &rl);
    diag("RLIMIT_AS %zu MiB, address space in use at start %ld MiB",
         (size_t)rl.rlim_cur / MiB, vm_bytes() / (long)MiB);
    ok(rl.rlim_cur == LIMIT, "running under a 1 GiB RLIMIT_AS");

    errno = 0;
    void *p = malloc(2 * LIMIT);
    ok(p == NULL && errno == ENOMEM, "malloc(2 GiB) under a 1 GiB limit is NULL/ENOMEM (errno %d)", errno);
    free(p);

    int nbig = 0, err = 0;
    while (nbig < MAX_BIG) {
        errno = 0;
        big[nbig] = malloc(MiB);
        if (!big[nbig]) {
            err = errno;
            break;
        }
        nbig++;
    }
    diag("%d blocks of 1 MiB before NULL; address space %ld MiB", nbig, vm_bytes() / (long)MiB);
    ok(nbig < MAX_BIG, "1 MiB blocks run out before 4 GiB under a 1 GiB limit");
    ok(nbig > 512, "at least half the limit could be allocated in 1 MiB blocks");
    is(err, ENOMEM, "the malloc that fails sets errno ENOMEM");

    /* Room for some small objects, then those run out cleanly too. */
    for (int i = 0; i < 16 && nbig > 0; i++)
        free(big[--nbig]);
    long nsmall = 0;
    struct small *small = NULL;
    err = 0;
    for (;;) {
        errno = 0;
        struct small *o = malloc(sizeof *o);
        if (!o) {
            err = errno;
            break;
        }
        memset(o->fill, 0x33, sizeof o->fill);
        o->next = small;
        small = o;
        nsmall++;
    }
    diag("%ld objects of 64 bytes before NULL", nsmall);
    ok(err == ENOMEM, "small objects run out with NULL/ENOMEM too (errno %d)", err);

    /* Large blocks come from their own zone (src/page), unless a wholly
     * free slice went back to the OS for the small objects: use up what
     * is left before the last checks. */
    while (nbig < MAX_BIG && (big[nbig] = malloc(MiB)) != NULL)
        nbig++;

    errno = 0;
    void *c = calloc(4096, 4096);
    ok(c == NULL && errno == ENOMEM, "calloc of 16 MiB with the space used up is NULL/ENOMEM");
    free(c);
    void *al = NULL;
    int rc = posix_memalign(&al, MiB, 8 * MiB);
    ok(rc == ENOMEM, "posix_memalign with the space used up returns ENOMEM (%d)", rc);
    if (rc == 0)
        free(al);

    int intact = 1;
    for (struct small *o = small; o; o = o->next)
        for (size_t j = 0; j < sizeof o->fill; j++)
            intact &= o->fill[j] == 0x33;
    ok(intact, "every small object handed out before the failure is intact");

    while (small) {
        struct small *o = small;
        small = o->next;
        free(o);
    }
    for (int i = 0; i < nbig; i++)
        free(big[i]);
    void *again = malloc(64 * MiB), *tiny = malloc(100);
    ok(again && tiny, "after freeing everything, malloc(64 MiB) and malloc(100) work again");
    if (again)
        memset(again, 1, 64 * MiB);
    free(again);
    free(tiny);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--limited") == 0) {
        limited();
        return done_testing();
    }
    struct rlimit rl = { LIMIT, LIMIT };
    if (setrlimit(RLIMIT_AS, &rl) != 0)
        skip_all("cannot set RLIMIT_AS: %s", strerror(errno));
    fflush(stdout);
    execl("/proc/self/exe", argv[0], "--limited", (char *)NULL);
    BAIL("exec /proc/self/exe: %s", strerror(errno));
}
