/*
 * bad_input.c — bad pointers never corrupt the heap silently: free and
 * realloc of a pointer slabkit does not own (stack, global, wild, someone
 * else's mmap), of an interior pointer, and a double free each print one
 * line on stderr naming the call, the pointer and, where known, the cache,
 * then abort():
 *
 *   slabkit: double free: free(0x...) in kmalloc-64
 *   slabkit: invalid pointer: free(0x...) is not slabkit's
 *   slabkit: interior pointer: free(0x...) in kmalloc-64, object at 0x...
 *
 * (realloc( in place of free( for realloc).  Each case runs in a forked
 * child whose stderr goes to a pipe; the parent checks that the child died
 * of SIGABRT, that stderr is exactly that one line, and that the pointers
 * in it are the ones passed and allocated (their spelling may vary).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <regex.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

/* The cases hand bad pointers to free and realloc on purpose. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#if __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wuse-after-free"
#endif
#endif

static int report_fd = -1;     /* child -> parent: the pointers to expect */
static char global_buf[256];

/* Tell the parent which pointer the message must name and, for an
 * interior pointer, which object. */
static void expect(const void *ptr, const void *obj)
{
    uintptr_t v[2] = { (uintptr_t)ptr, (uintptr_t)obj };
    if (write(report_fd, v, sizeof v) != (ssize_t)sizeof v)
        _exit(90);
}

/* Keep the compiler from seeing through the bad calls. */
static void *(*volatile realloc_fn)(void *, size_t) = realloc;
static void (*volatile free_fn)(void *) = free;

static void *obj_of(size_t n)
{
    unsigned char *p = malloc(n);
    if (!p)
        _exit(91);
    memset(p, 0x11, n);
    return p;
}

/* ---- the cases: each does one bad call, which must not return ---------- */

static void double_free_64(void)
{
    void *p = obj_of(64);
    expect(p, NULL);
    free_fn(p);
    free_fn(p);
}

static void double_free_64_busy(void)
{
    /* Other objects of the class are live and freed around it. */
    void *a = obj_of(64), *p = obj_of(64), *b = obj_of(64);
    free_fn(a);
    expect(p, NULL);
    free_fn(p);
    free_fn(p);
    free_fn(b);
}

/* The first free's object is no longer on top of the array: glibc's
 * tcache-key case, free(a); free(b); free(a). */
static void double_free_aba(void)
{
    void *a = obj_of(64), *b = obj_of(64);
    expect(a, NULL);
    free_fn(a);
    free_fn(b);
    free_fn(a);
}

/* 300 other frees in between: the first free's object has been flushed
 * from the per-CPU array to its slab's freelist or the barn. */
static void double_free_after_300(void)
{
    void *a = obj_of(64), *o[300];
    for (int i = 0; i < 300; i++)
        o[i] = obj_of(64);
    expect(a, NULL);
    free_fn(a);
    for (int i = 0; i < 300; i++)
        free_fn(o[i]);
    free_fn(a);
}

/* malloc_trim drains every array to the slabs: the object sits on its
 * slab's freelist (a live neighbour keeps the slab). */
static void double_free_on_slab_freelist(void)
{
    void *keep = obj_of(96), *a = obj_of(96);
    /* keep must hold a's slab through the trim: two objects in a row can
     * straddle slabs (a refill on another CPU, a slab's last object). */
    for (int i = 0; i < 64 && ((uintptr_t)a ^ (uintptr_t)keep) >> 12; i++) {
        keep = a;
        a = obj_of(96);
    }
    expect(a, NULL);
    free_fn(a);
    malloc_trim(0);
    free_fn(a);
    free_fn(keep);
}

/* An object of a fresh slab that malloc never returned (the last slot of
 * the slab of a live object of a class nothing else uses). */
static void free_never_allocated(void)
{
    char *p = obj_of(7000);
    size_t stride = malloc_usable_size(p);
    char *last = p;
    /* Slabs of this class are 8 pages: walk to the last whole object. */
    uintptr_t slab = (uintptr_t)p & ~(uintptr_t)(8 * 4096 - 1);
    while ((uintptr_t)(last + 2 * stride) <= slab + 8 * 4096)
        last += stride;
    if (last == p)
        _exit(92);
    expect(last, NULL);
    free_fn(last);
}

static void double_free_24(void) { void *p = obj_of(24); expect(p, NULL); free_fn(p); free_fn(p); }
static void double_free_1000(void) { void *p = obj_of(1000); expect(p, NULL); free_fn(p); free_fn(p); }
static void double_free_3000(void) { void *p = obj_of(3000); expect(p, NULL); free_fn(p); free_fn(p); }
static void double_free_1m(void) { void *p = obj_of(1 << 20); expect(p, NULL); free_fn(p); free_fn(p); }

static void invalid_stack(void)
{
    char buf[128];
    memset(buf, 0, sizeof buf);
    expect(buf + 16, NULL);
    free_fn(buf + 16);
}

static void invalid_global(void)
{
    expect(global_buf + 32, NULL);
    free_fn(global_buf + 32);
}

static void invalid_wild(void)
{
    /* An address that was just unmapped: nothing lives there. */
    long page = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        _exit(92);
    munmap(m, (size_t)page);
    expect(m + 64, NULL);
    free_fn(m + 64);
}

static void invalid_low(void)
{
    void *p = (void *)(uintptr_t)0x10000010;
    expect(p, NULL);
    free_fn(p);
}

static void invalid_foreign_mmap(void)
{
    long page = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        _exit(92);
    expect(m + 16, NULL);
    free_fn(m + 16);
}

static void interior_64(void)
{
    char *p = obj_of(64);
    expect(p + 16, p);
    free_fn(p + 16);
}

static void interior_64_odd(void)
{
    char *p = obj_of(64);
    expect(p + 1, p);
    free_fn(p + 1);
}

static void interior_1m(void)
{
    char *p = obj_of(1 << 20);
    expect(p + 8192, NULL);     /* the block's start need not be named */
    free_fn(p + 8192);
}

/* A block grown in place past its order's alignment (its head is not
 * where the buddy walk looks): a pointer 150 pages in is still named an
 * interior pointer of it. */
static void interior_grown(void)
{
    char *a = obj_of(128 * 4096);
    char *p = obj_of(100 * 4096);
    char *q = realloc_fn(p, 200 * 4096);
    if (!q || !a)
        _exit(91);
    expect(q + 150 * 4096, NULL);
    free_fn(q + 150 * 4096);
}

static void realloc_double_free_64(void)
{
    void *p = obj_of(64);
    expect(p, NULL);
    free_fn(p);
    realloc_fn(p, 100);
}

static void realloc_invalid_stack(void)
{
    char buf[128];
    memset(buf, 0, sizeof buf);
    expect(buf, NULL);
    realloc_fn(buf, 200);
}

static void realloc_invalid_global(void)
{
    expect(global_buf, NULL);
    realloc_fn(global_buf, 10);
}

static void realloc_interior_64(void)
{
    char *p = obj_of(64);
    expect(p + 16, p);
    realloc_fn(p + 16, 300);
}

static void realloc_interior_64_shrink(void)
{
    char *p = obj_of(64);
    expect(p + 32, p);
    realloc_fn(p + 32, 8);
}

/* ---- running a case ----------------------------------------------------- */

#define HEX "(0x[0-9a-fA-F]+)"
#define CACHE "kmalloc-[0-9]+k?"

struct bad_case {
    const char *name;
    void (*run)(void);
    const char *pattern;  /* ERE for the whole line; group 1 the pointer,
                           * group 2 (if any) the object */
};

static const struct bad_case cases[] = {
    { "double free of a kmalloc-64 object", double_free_64,
      "^slabkit: double free: free\\(" HEX "\\) in kmalloc-64$" },
    { "double free of a kmalloc-64 object among live neighbours", double_free_64_busy,
      "^slabkit: double free: free\\(" HEX "\\) in kmalloc-64$" },
    { "double free after another free (free a, free b, free a)", double_free_aba,
      "^slabkit: double free: free\\(" HEX "\\) in kmalloc-64$" },
    { "double free after 300 other frees (flushed from the array)", double_free_after_300,
      "^slabkit: double free: free\\(" HEX "\\) in kmalloc-64$" },
    { "double free of an object on its slab's freelist (after malloc_trim)", double_free_on_slab_freelist,
      "^slabkit: double free: free\\(" HEX "\\) in kmalloc-96$" },
    { "free of an object never handed out", free_never_allocated,
      "^slabkit: invalid free: free\\(" HEX "\\) in kmalloc-7168, an object never handed out$" },
    { "double free of a 24-byte object", double_free_24,
      "^slabkit: double free: free\\(" HEX "\\) in " CACHE "$" },
    { "double free of a 1000-byte object", double_free_1000,
      "^slabkit: double free: free\\(" HEX "\\) in " CACHE "$" },
    { "double free of a 3000-byte object", double_free_3000,
      "^slabkit: double free: free\\(" HEX "\\) in " CACHE "$" },
    /* A 1 MiB block is pages, not a cache object: no cache to name. */
    { "double free of a 1 MiB block", double_free_1m,
      "^slabkit: (double free|invalid pointer): free\\(" HEX "\\)" },
    { "free of a stack address", invalid_stack,
      "^slabkit: invalid pointer: free\\(" HEX "\\) is not slabkit's$" },
    { "free of a global", invalid_global,
      "^slabkit: invalid pointer: free\\(" HEX "\\) is not slabkit's$" },
    { "free of an unmapped (wild) address", invalid_wild,
      "^slabkit: invalid pointer: free\\(" HEX "\\) is not slabkit's$" },
    { "free of a low wild address", invalid_low,
      "^slabkit: invalid pointer: free\\(" HEX "\\) is not slabkit's$" },
    { "free of another mapping's memory", invalid_foreign_mmap,
      "^slabkit: invalid pointer: free\\(" HEX "\\) is not slabkit's$" },
    { "free of an interior pointer (object + 16)", interior_64,
      "^slabkit: interior pointer: free\\(" HEX "\\) in kmalloc-64, object at " HEX "$" },
    { "free of an interior pointer (object + 1)", interior_64_odd,
      "^slabkit: interior pointer: free\\(" HEX "\\) in kmalloc-64, object at " HEX "$" },
    { "free of a pointer 8 KiB into a 1 MiB block", interior_1m,
      "^slabkit: (interior|invalid) pointer: free\\(" HEX "\\)" },
    { "free of a pointer inside a block grown in place", interior_grown,
      "^slabkit: interior pointer: free\\(" HEX "\\) in a [0-9]+-page block at " HEX "$" },
    { "realloc of a freed kmalloc-64 object", realloc_double_free_64,
      "^slabkit: double free: realloc\\(" HEX "\\) in kmalloc-64$" },
    { "realloc of a stack address", realloc_invalid_stack,
      "^slabkit: invalid pointer: realloc\\(" HEX "\\) is not slabkit's$" },
    { "realloc of a global", realloc_invalid_global,
      "^slabkit: invalid pointer: realloc\\(" HEX "\\) is not slabkit's$" },
    { "realloc (grow) of an interior pointer", realloc_interior_64,
      "^slabkit: interior pointer: realloc\\(" HEX "\\) in kmalloc-64, object at " HEX "$" },
    { "realloc (shrink) of an interior pointer", realloc_interior_64_shrink,
      "^slabkit: interior pointer: realloc\\(" HEX "\\) in kmalloc-64, object at " HEX "$" },
};

static size_t read_all(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
        if (n == cap - 1)
            break;
    }
    buf[n] = '\0';
    return n;
}

/* The number in match group `group` (0 if the group did not match). */
static uintptr_t group_hex(const char *line, const regmatch_t *m, int group)
{
    if (group <= 0 || m[group].rm_so < 0)
        return 0;
    return (uintptr_t)strtoull(line + m[group].rm_so, NULL, 16);
}

static void run_case(const struct bad_case *c)
{
    int err[2], rep[2];
    if (pipe(err) || pipe(rep))
        BAIL("pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        BAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        close(err[0]);
        close(rep[0]);
        dup2(err[1], 2);
        close(err[1]);
        report_fd = rep[1];
        alarm(20);          /* a hang is a failure, not a stuck suite */
        struct rlimit no_core = { 0, 0 };
        setrlimit(RLIMIT_CORE, &no_core);   /* the abort is expected */
        c->run();
        _exit(0);           /* the bad call returned: no abort */
    }
    close(err[1]);
    close(rep[1]);
    char text[4096];
    uintptr_t want[2] = { 0, 0 };
    ssize_t got = read(rep[0], want, sizeof want);
    read_all(err[0], text, sizeof text);
    close(err[0]);
    close(rep[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;

    int aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
    if (!ok(aborted, "%s: abort()", c->name)) {
        if (WIFSIGNALED(status))
            diag("child died of signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
        else
            diag("child exited with status %d", WEXITSTATUS(status));
    }

    /* Exactly one line, and it is the message. */
    char *nl = strchr(text, '\n');
    int one_line = nl && nl[1] == '\0';
    if (nl)
        *nl = '\0';
    regex_t re;
    regmatch_t m[4];
    if (regcomp(&re, c->pattern, REG_EXTENDED))
        BAIL("bad pattern %s", c->pattern);
    int match = regexec(&re, text, 4, m, 0) == 0;
    if (!ok(one_line && match, "%s: one line on stderr naming the call, pointer and cache", c->name)) {
        diag("stderr: \"%s%s\"", text, nl && nl[1] ? "\\n..." : "");
        diag("wanted: /%s/", c->pattern);
    }
    if (got != (ssize_t)sizeof want) {
        ok(0, "%s: the case reported its pointers", c->name);
    } else if (match) {
        /* The first hex group is the pointer, the second the object. */
        int gptr = 0, gobj = 0;
        for (int g = 1; g < 4; g++)
            if (m[g].rm_so >= 0 && strncmp(text + m[g].rm_so, "0x", 2) == 0) {
                if (!gptr)
                    gptr = g;
                else if (!gobj)
                    gobj = g;
            }
        uintptr_t ptr = group_hex(text, m, gptr);
        int right = ptr == want[0];
        if (want[1])
            right &= gobj && group_hex(text, m, gobj) == want[1];
        if (!ok(right, "%s: the message names the pointer%s", c->name, want[1] ? " and the object" : ""))
            diag("wanted pointer %#lx object %#lx", (unsigned long)want[0], (unsigned long)want[1]);
    } else {
        ok(0, "%s: the message names the pointer", c->name);
    }
    regfree(&re);
}

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);

    /* The parent's heap is unharmed by all that: 64-byte objects come and
     * go, each distinct and intact. */
    unsigned char *q[64];
    int fine = 1;
    for (int i = 0; i < 64; i++) {
        q[i] = malloc(64);
        fine &= q[i] != NULL;
        if (q[i])
            memset(q[i], i, 64);
    }
    for (int i = 0; fine && i < 64; i++)
        for (int k = 0; k < 64; k++)
            fine &= q[i][k] == i;
    for (int i = 0; i < 64; i++)
        free(q[i]);
    ok(fine, "the parent still allocates, distinct and intact, after its children's bad calls");
    return done_testing();
}
