/*
 * errno_kept — every call of the malloc family, of the sk_* API and of
 * the page and file APIs that succeeds leaves errno as the caller set it
 * (glibc does; a program may test errno after a call that worked).  The
 * paths that retry inside (a mapping refused at one address and placed
 * at another, EEXIST on the way) are reached by the process's first
 * allocations, by 64 MiB blocks and by realloc growing a block in and
 * out of place: the first calls run before anything else has allocated.
 * Built linked with libslabkit.a here; tests/programs/errno_kept.t builds
 * it against the shared library too (whose slices lie elsewhere: the
 * retries it met there were not this build's) and adds operator new.
 */
#include <malloc.h>
#include <stdint.h>

#include "slabkit.h"
#include "tap.h"

#define MARK 4242     /* an errno no call here sets */

struct result { const char *what; int got; };
static struct result early[16];
static int n_early;

/* errno after `expr`, which must succeed, with errno preset to MARK. */
#define KEEP(what_, expr) do { errno = MARK; ok((expr) && errno == MARK, "%s: errno kept (%d)", what_, errno); } while (0)
#define KEEP_VOID(what_, stmt) do { errno = MARK; stmt; ok(errno == MARK, "%s: errno kept (%d)", what_, errno); } while (0)

static void note_early(const char *what, int ok_call)
{
    early[n_early].what = what;
    early[n_early].got = ok_call ? errno : -1;
    n_early++;
}

int main(void)
{
    /* The process's first allocations: initialisation, first slices,
     * before stdio or the harness allocate anything. */
    errno = MARK;
    void *r = malloc(10);
    note_early("first malloc(10)", r != NULL);
    errno = MARK;
    r = realloc(r, 100000);
    note_early("realloc(p, 100000)", r != NULL);
    errno = MARK;
    void *first = malloc(64 << 20);
    note_early("malloc(64 MiB)", first != NULL);
    errno = MARK;
    r = realloc(r, 40 << 20);
    note_early("realloc(p, 40 MiB)", r != NULL);
    errno = MARK;
    free(first);
    free(r);
    note_early("free of both", 1);

    for (int i = 0; i < n_early; i++)
        ok(early[i].got == MARK, "%s: errno kept (%d)", early[i].what, early[i].got);

    /* The malloc family, every size range (classes, page lists, exact
     * blocks, direct mappings). */
    static const size_t sizes[] = { 1, 24, 1000, 12000, 64 << 10, 300 << 10, 1 << 20, 8 << 20, 64 << 20, 200 << 20 };
    void *p[sizeof sizes / sizeof sizes[0]];
    int bad = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        errno = MARK;
        p[i] = malloc(sizes[i]);
        if (!p[i] || errno != MARK) {
            diag("malloc(%zu): %p, errno %d", sizes[i], p[i], errno);
            bad++;
        }
    }
    ok(!bad, "malloc of %zu sizes from 1 B to 200 MiB: errno kept", sizeof sizes / sizeof sizes[0]);
    bad = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        errno = MARK;
        free(p[i]);
        if (errno != MARK)
            bad++;
    }
    ok(!bad, "free of each: errno kept");

    void *q;
    KEEP("calloc(10, 10)", q = calloc(10, 10));
    KEEP_VOID("free", free(q));
    KEEP("calloc(1, 3 MiB)", q = calloc(1, 3 << 20));
    KEEP("realloc grow to 100000", q = realloc(q, 100000));
    KEEP("realloc shrink to 50", q = realloc(q, 50));
    KEEP("realloc grow to 64 MiB", q = realloc(q, 64 << 20));
    KEEP("realloc grow in place to 70 MiB", q = realloc(q, 70 << 20));
    KEEP("reallocarray(p, 10, 100)", q = reallocarray(q, 10, 100));
    KEEP_VOID("free", free(q));
    KEEP("aligned_alloc(64, 100)", q = aligned_alloc(64, 100));
    KEEP_VOID("free", free(q));
    KEEP("aligned_alloc(4096, 10000)", q = aligned_alloc(4096, 10000));
    KEEP_VOID("free", free(q));
    KEEP("aligned_alloc(2 MiB, 3 MiB)", q = aligned_alloc(2 << 20, 3 << 20));
    KEEP_VOID("free", free(q));
    KEEP("posix_memalign(256, 1000)", posix_memalign(&q, 256, 1000) == 0);
    KEEP_VOID("free", free(q));
    KEEP("posix_memalign(1 MiB, 5 MiB)", posix_memalign(&q, 1 << 20, 5 << 20) == 0);
    KEEP_VOID("free", free(q));
    KEEP("memalign(32, 33)", q = memalign(32, 33));
    KEEP_VOID("free", free(q));
    KEEP("valloc(5000)", q = valloc(5000));
    KEEP("malloc_usable_size", malloc_usable_size(q) >= 5000);
    KEEP_VOID("free_sized", free_sized(q, 5000));
    KEEP("pvalloc(100)", q = pvalloc(100));
    KEEP_VOID("free", free(q));
    KEEP("aligned_alloc(128, 256)", q = aligned_alloc(128, 256));
    KEEP_VOID("free_aligned_sized", free_aligned_sized(q, 128, 256));
    KEEP_VOID("malloc_trim(0)", malloc_trim(0));

    /* The sk_* API. */
    KEEP("sk_malloc(64 MiB)", q = sk_malloc(64 << 20));
    KEEP("sk_realloc to 100 MiB", q = sk_realloc(q, 100 << 20));
    KEEP_VOID("sk_free", sk_free(q));
    KEEP("sk_calloc(100, 1000)", q = sk_calloc(100, 1000));
    KEEP_VOID("sk_free", sk_free(q));
    KEEP("sk_aligned_alloc(8192, 100)", q = sk_aligned_alloc(8192, 100));
    KEEP_VOID("sk_free", sk_free(q));
    sk_cache_t *c;
    KEEP("sk_cache_create", c = sk_cache_create("errno-kept", 200, 0, 0, NULL));
    KEEP("sk_cache_alloc", q = sk_cache_alloc(c));
    KEEP_VOID("sk_cache_free", sk_cache_free(c, q));
    KEEP("sk_cache_shrink", sk_cache_shrink(c) >= 0);
    KEEP("sk_cache_destroy", sk_cache_destroy(c) == 0);
    KEEP("sk_alloc_pages(5)", q = sk_alloc_pages(5));
    KEEP_VOID("sk_free_pages", sk_free_pages(q, 5));
    KEEP("sk_vm_map(3 MiB)", q = sk_vm_map(3 << 20, 0));
    KEEP("sk_vm_unmap", sk_vm_unmap(q, 3 << 20) == 0);
    sk_file_t *f;
    KEEP("sk_file_create", f = sk_file_create("errno-kept"));
    static char buf[1 << 16];
    KEEP("sk_file_pwrite(64 KiB at 1 MiB)", sk_file_pwrite(f, buf, sizeof buf, 1 << 20) == (ssize_t)sizeof buf);
    KEEP("sk_file_pread", sk_file_pread(f, buf, sizeof buf, 0) == (ssize_t)sizeof buf);
    KEEP("sk_file_truncate", sk_file_truncate(f, 0) == 0);
    KEEP_VOID("sk_file_destroy", sk_file_destroy(f));
    KEEP_VOID("sk_trim", sk_trim());
    return done_testing();
}
