/*
 * family.c — slabkit serves the whole malloc family: malloc, calloc,
 * realloc, reallocarray, aligned_alloc, posix_memalign, memalign, valloc,
 * pvalloc, malloc_usable_size, free; malloc_trim returns free memory to the
 * OS now; malloc_stats prints slabinfo and totals.
 *
 * "Served" is proved from slabkit's own books, not from behaviour glibc
 * would share: allocating 2048 objects through a call must raise the bytes
 * slabkit's caches hold active (sk_cache_foreach), or hand out blocks
 * slabkit's page allocator knows (sk_page_order); freeing them through
 * free must lower it again; malloc_usable_size must agree with
 * sk_usable_size; and sk_free / free take each other's objects.
 *
 * The trim case runs in a re-executed copy of the test with memory aging
 * and the dirty limit pushed out of the way, in a process with a thread of
 * its own (a single-threaded one trims at free: threaded.h), so that only
 * malloc_trim can be what gives the memory back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "slabkit.h"
#include "statm.h"
#include "tap.h"
#include "threaded.h"

#define N 2048
#define MiB ((size_t)1 << 20)

enum fn { F_MALLOC, F_CALLOC, F_REALLOC, F_REALLOCARRAY, F_ALIGNED_ALLOC, F_POSIX_MEMALIGN,
          F_MEMALIGN, F_VALLOC, F_PVALLOC, F_NR };
static const char *const fn_name[F_NR] = {
    "malloc(64)", "calloc(8, 8)", "realloc(NULL, 64)", "reallocarray(NULL, 8, 8)",
    "aligned_alloc(64, 64)", "posix_memalign(64, 64)", "memalign(64, 64)",
    "valloc(100)", "pvalloc(100)",
};

static void *call(enum fn f)
{
    void *p = NULL;
    switch (f) {
    case F_MALLOC: return malloc(64);
    case F_CALLOC: return calloc(8, 8);
    case F_REALLOC: return realloc(NULL, 64);
    case F_REALLOCARRAY: return reallocarray(NULL, 8, 8);
    case F_ALIGNED_ALLOC: return aligned_alloc(64, 64);
    case F_POSIX_MEMALIGN: return posix_memalign(&p, 64, 64) ? NULL : p;
    case F_MEMALIGN: return memalign(64, 64);
    case F_VALLOC: return valloc(100);
    case F_PVALLOC: return pvalloc(100);
    default: return NULL;
    }
}

static void add_active(const struct sk_cache_info *i, void *arg)
{
    *(unsigned long *)arg += i->active_objs * i->size;
}

/* Bytes slabkit's caches count as allocated. */
static unsigned long cache_bytes(void)
{
    unsigned long b = 0;
    sk_cache_foreach(add_active, &b);
    return b;
}

static void *ptrs[N];

static void test_served(enum fn f)
{
    size_t size = f >= F_VALLOC ? 100 : 64;
    unsigned long before = cache_bytes();
    int null = 0, pages = 0, usable = 0;
    for (int i = 0; i < N; i++) {
        ptrs[i] = call(f);
        if (!ptrs[i]) {
            null++;
            continue;
        }
        memset(ptrs[i], 0x77, size);
        pages += sk_page_order(ptrs[i]) >= 0;
        usable += malloc_usable_size(ptrs[i]) == sk_usable_size(ptrs[i]) && sk_usable_size(ptrs[i]) >= size;
    }
    unsigned long during = cache_bytes();
    for (int i = 0; i < N; i++)
        free(ptrs[i]);
    unsigned long after = cache_bytes();

    long up = (long)(during - before), down = (long)(during - after);
    int in_caches = up >= (long)(N * size / 2) && down >= (long)(N * size / 2);
    if (!ok(null == 0 && (in_caches || pages == N), "%s is slabkit's: its objects are in slabkit's books, and free takes them out", fn_name[f]))
        diag("cache bytes %lu -> %lu -> %lu, %d of %d are slabkit page blocks, %d NULL",
             before, during, after, pages, N, null);
    ok(usable == N - null, "malloc_usable_size agrees with sk_usable_size for %s", fn_name[f]);
}

static void test_interop(void)
{
    int good = 1;
    for (size_t n = 1; n < 2 * MiB; n = n * 2 + 3) {
        void *a = malloc(n), *b = sk_malloc(n);
        good &= a && b && sk_usable_size(a) >= n && malloc_usable_size(b) >= n;
        if (a)
            memset(a, 1, n);
        if (b)
            memset(b, 2, n);
        b = realloc(b, n + 100);
        good &= b != NULL;
        sk_free(a);
        free(b);
    }
    ok(good, "sk_free takes malloc's objects, free and realloc take sk_malloc's");
}

/* Run f with stderr going to a file; return what it wrote (static). */
static const char *capture_stderr(void (*f)(void))
{
    static char text[1 << 16];
    char path[] = "/tmp/slabkit-family-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        BAIL("mkstemp: %s", strerror(errno));
    unlink(path);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    f();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    text[n > 0 ? n : 0] = '\0';
    return text;
}

static void test_malloc_stats(void)
{
    void *live[1000];
    for (int i = 0; i < 1000; i++)
        live[i] = malloc(64);
    const char *out = capture_stderr(malloc_stats);
    for (int i = 0; i < 1000; i++)
        free(live[i]);

    ok(strstr(out, "slabinfo - version: 2.1\n") != NULL, "malloc_stats prints the slabinfo 2.1 header");
    const char *line = strstr(out, "\nkmalloc-64 ");
    unsigned long active = 0, num = 0, objsize = 0;
    int fields = line ? sscanf(line + 1, "kmalloc-64 %lu %lu %lu", &active, &num, &objsize) : 0;
    if (!ok(fields == 3 && objsize == 64 && active >= 1000 && num >= active,
            "malloc_stats' kmalloc-64 line counts the 1000 live 64-byte objects (active %lu, total %lu)",
            active, num))
        diag("malloc_stats wrote:\n%.600s", out);
    /* Totals: some line that is neither slabinfo header nor a cache line. */
    int totals = 0;
    for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, "slabinfo - ", 11) == 0 || l[0] == '#' || strncmp(l, "kmalloc-", 8) == 0)
            continue;
        const char *end = strchr(l, '\n');
        for (const char *c = l; c < (end ? end : l + strlen(l)); c++)
            if (*c >= '0' && *c <= '9') {
                totals = 1;
                break;
            }
    }
    ok(totals, "malloc_stats prints totals after the caches");
}

static long rss_bytes(void)
{
    return statm_bytes(STATM_RESIDENT);
}

#define SMALL_OBJS (48 * 1024)       /* 48 MiB of 1 KiB objects */
#define LARGE_OBJS 64                /* 64 MiB of 1 MiB blocks */

static void test_trim(void)
{
    static void *small[SMALL_OBJS], *large[LARGE_OBJS];
    long base = rss_bytes();
    for (int i = 0; i < SMALL_OBJS; i++)
        if ((small[i] = malloc(1000)))
            memset(small[i], 3, 1000);
    for (int i = 0; i < LARGE_OBJS; i++)
        if ((large[i] = malloc(MiB)))
            memset(large[i], 4, MiB);
    long full = rss_bytes();
    for (int i = 0; i < SMALL_OBJS; i++)
        free(small[i]);
    for (int i = 0; i < LARGE_OBJS; i++)
        free(large[i]);
    long freed = rss_bytes();
    int rc = malloc_trim(0);
    long trimmed = rss_bytes();
    diag("RSS: start %ld MiB, 112 MiB allocated %ld MiB, all freed %ld MiB, after malloc_trim %ld MiB",
         base >> 20, full >> 20, freed >> 20, trimmed >> 20);
    ok(full - base >= 100 * (long)MiB, "112 MiB of touched objects raise RSS by at least 100 MiB");
    is(rc, 1, "malloc_trim(0) returns 1: memory was given back");
    ok(trimmed - base <= 16 * (long)MiB, "after malloc_trim RSS is back within 16 MiB of the start (%ld MiB above)",
       (trimmed - base) >> 20);

    /* And the heap still works afterwards, memory reading as written. */
    unsigned char *p = malloc(MiB), *q = malloc(1000);
    int good = p && q;
    if (good) {
        memset(p, 9, MiB);
        memset(q, 9, 1000);
        good = p[MiB - 1] == 9 && q[999] == 9;
    }
    free(p);
    free(q);
    ok(good, "malloc works after malloc_trim");
}

int main(int argc, char **argv)
{
    if (argc > 3 && strcmp(argv[1], "--trim") == 0) {
        /* Carry on the TAP count of the image before the exec. */
        tap_n = atoi(argv[2]);
        tap_failed = atoi(argv[3]);
        become_threaded();
        test_trim();
        return done_testing();
    }
    for (enum fn f = 0; f < F_NR; f++)
        test_served(f);
    test_interop();
    test_malloc_stats();

    /* Give malloc_trim something to return that nothing else returns. */
    fflush(stdout);
    setenv("SLABKIT_OPTIONS", "decay_ms=3600000,dirty_max_mb=1048576", 1);
    char n[16], failed[16];
    snprintf(n, sizeof n, "%d", tap_n);
    snprintf(failed, sizeof failed, "%d", tap_failed);
    execl("/proc/self/exe", argv[0], "--trim", n, failed, (char *)NULL);
    BAIL("exec /proc/self/exe: %s", strerror(errno));
}
