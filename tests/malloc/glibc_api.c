/*
 * glibc_api.c — the rest of glibc's malloc API, with slabkit's figures:
 *
 *  - malloc_good_size(n) is exactly what malloc_usable_size reports for
 *    malloc(n), for every size up to 40 KiB and some beyond;
 *  - mallinfo2 keeps glibc's algebra (arena = uordblks + fordblks) and
 *    moves as slabkit's own books do: 4096 objects of 64 bytes raise
 *    uordblks by their bytes, a 1 MiB block raises hblks by one and hblkhd
 *    by 1 MiB, its pages leaving arena, a resize in place moves hblkhd by
 *    the pages it gained or gave back, and freeing undoes both; per-CPU
 *    arrays show as smblks/fsmblks; keepcost is what malloc_trim returns;
 *    mallinfo is the same figures as ints;
 *  - malloc_info writes well-formed XML in glibc's shape (malloc, heap,
 *    sizes, total fast/rest/mmap, system, aspace) with slabkit's caches,
 *    whose counts are sk_cache_info's; options other than 0 are EINVAL;
 *  - mallopt: M_TRIM_THRESHOLD sets dirty_max_mb (rounded up to MiB),
 *    M_MMAP_THRESHOLD makes blocks from that size direct mappings whose
 *    pages go back to the OS when freed (and over 64 MiB is refused, 0),
 *    M_MMAP_MAX=0 turns that off, and the parameters with no slabkit
 *    meaning return 1 and change nothing;
 *  - free_sized and free_aligned_sized give every object back to the
 *    cache its size names, after realloc too (realloc keeps an object in
 *    place only within its class), and NULL is a no-op;
 *  - bad input (in forked children): a double free through free_sized
 *    aborts naming free_sized, and so does free_sized of an object of a
 *    new slab never handed out (it holds no marker: the trusted route
 *    looks up objects on such pages, or it would be handed out twice);
 *    with sized_check=1 (a re-executed copy), a
 *    wrong size aborts with "wrong size: free_sized(P, N) of an object of
 *    kmalloc-112", while right sizes pass.
 * Classes are found (cache_for), not assumed, so that --sized-only (good
 * size, sized frees, bad input) also runs under allocator=slab and
 * sheaves=0 (tests/modes/slab_classic.t, sheaves_off.t).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slabkit.h"
#include "statm.h"
#include "tap.h"

#define MiB ((size_t)1 << 20)

/* Through volatiles: the compiler may drop a malloc/free pair it sees. */
static void (*volatile free_sized_fn)(void *, size_t) = free_sized;
static void *(*volatile malloc_fn)(size_t) = malloc;

/* The kmalloc cache malloc(n) uses: the smallest kmalloc class of at
 * least n bytes (SLUB's classes, or SLAB's with allocator=slab). */
struct class_query { size_t n; size_t best; char name[32]; size_t usable; };
static void class_one(const struct sk_cache_info *i, void *arg)
{
    struct class_query *q = arg;
    if (strncmp(i->name, "kmalloc-", 8) || i->object_size < q->n || i->object_size < 16)
        return;
    if (!q->best || i->object_size < q->best) {
        q->best = i->object_size;
        snprintf(q->name, sizeof q->name, "%s", i->name);
        q->usable = i->size;
    }
}
static const char *cache_for(size_t n, size_t *usable)
{
    static char names[8][32];
    static int next;
    struct class_query q = { n, 0, "", 0 };
    sk_cache_foreach(class_one, &q);
    if (usable)
        *usable = q.usable;
    char *out = names[next++ % 8];
    snprintf(out, 32, "%s", q.name);
    return out;
}

static unsigned long active_of(const char *name)
{
    struct sk_cache_info i;
    return sk_cache_info(name, &i) == 0 ? i.active_objs : ~0ul;
}


static void test_good_size(void)
{
    int bad = 0;
    size_t first_bad = 0;
    for (size_t n = 0; n <= 40960 + 8192; n += (n < 2048 ? 1 : 7)) {
        void *p = malloc(n);
        size_t u = malloc_usable_size(p), g = malloc_good_size(n);
        if (!p || u != g || g < n) {
            if (!bad++)
                first_bad = n;
        }
        free(p);
    }
    ok(!bad, "malloc_good_size(n) == malloc_usable_size(malloc(n)) >= n, n = 0..48 KiB (%d bad, first %zu)",
       bad, first_bad);
    size_t u16, u100;
    cache_for(16, &u16);
    const char *c100 = cache_for(100, &u100);
    is(malloc_good_size(0), u16, "malloc_good_size(0) is the smallest class's usable size");
    is(malloc_good_size(100), u100, "malloc_good_size(100) is %s's usable size", c100);
    is(malloc_good_size(5 * MiB + 1), 5 * MiB + 4096, "a large request is rounded to pages");
}

static void test_mallinfo2(void)
{
    enum { N = 4096 };
    static void *p[N];
    struct mallinfo2 a = mallinfo2();
    ok(a.arena == a.uordblks + a.fordblks, "arena (%zu) = uordblks (%zu) + fordblks (%zu)", a.arena,
       a.uordblks, a.fordblks);
    for (int i = 0; i < N; i++)
        p[i] = malloc(64);
    struct mallinfo2 b = mallinfo2();
    long grew = (long)(b.uordblks - a.uordblks);
    /* Give or take the slack of slabs the idle-cache reaper may give back
     * meanwhile (kmalloc-96 fills 4032 bytes of its 4096: the other 64 go
     * from uordblks to fordblks with the slab). */
    ok(grew >= N * 64 - 16384 && grew <= N * 64 + 65536, "4096 x malloc(64) raise uordblks by their 256 KiB (%ld)",
       grew);
    ok(b.arena == b.uordblks + b.fordblks, "and arena = uordblks + fordblks still");
    for (int i = 0; i < N; i++)
        free(p[i]);
    struct mallinfo2 c = mallinfo2();
    long back = (long)(c.uordblks - a.uordblks);
    ok(back > -65536 && back < 65536, "freeing them brings uordblks back (%ld from the start)", back);
    ok(c.smblks > 0 && c.fsmblks >= c.smblks * 16 && c.fsmblks <= c.fordblks,
       "freed objects wait in per-CPU arrays: smblks %zu, fsmblks %zu <= fordblks", c.smblks, c.fsmblks);

    void *big = malloc_fn(MiB);
    struct mallinfo2 d = mallinfo2();
    is(d.hblks - c.hblks, 1, "a 1 MiB block is one more large block (hblks)");
    is(d.hblkhd - c.hblkhd, MiB, "and 1 MiB more in hblkhd");
    is(d.arena + d.hblkhd, c.arena + c.hblkhd, "its pages move out of arena, as glibc's mmapped chunks are not in it");
    /* Resized in place (realloc keeps the block while the pages after it
     * are free): hblkhd follows its pages, hblks stays.  A fresh 1 MiB
     * block sits in a larger free block, so growing by 64 KiB fits. */
    void *r = realloc(big, MiB + (64 << 10));
    struct mallinfo2 d2 = mallinfo2();
    ok(r && d2.hblks == d.hblks && d2.hblkhd == d.hblkhd + (64 << 10),
       "grown to 1 MiB + 64 KiB: hblkhd follows (+%ld), hblks the same (%s)", (long)(d2.hblkhd - d.hblkhd),
       r == big ? "in place" : "moved");
    big = r ? r : big;
    /* Below half its size a block gives its tail back in place. */
    r = realloc(big, 400 << 10);
    struct mallinfo2 d3 = mallinfo2();
    ok(r == big && d3.hblks == d.hblks && d3.hblkhd == d.hblkhd - MiB + (400 << 10),
       "shrunk in place to 400 KiB: hblkhd follows (%ld from 1 MiB)", (long)(d3.hblkhd - d.hblkhd));
    big = r ? r : big;
    free(big);
    struct mallinfo2 e = mallinfo2();
    ok(e.hblks == c.hblks && e.hblkhd == c.hblkhd, "freeing it takes both back");

    malloc_trim(0);
    struct mallinfo2 f = mallinfo2();
    ok(f.keepcost <= f.fordblks, "keepcost (%zu) is free memory (<= fordblks %zu)", f.keepcost, f.fordblks);
    ok(f.keepcost < 256 * 1024, "after malloc_trim(0) little free memory stays resident (keepcost %zu)", f.keepcost);
    is(f.usmblks, 0, "usmblks is 0, as glibc");

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    struct mallinfo m = mallinfo();
#pragma GCC diagnostic pop
    struct mallinfo2 g = mallinfo2();
    ok((size_t)m.arena == g.arena && (size_t)m.hblkhd == g.hblkhd && (size_t)m.uordblks == g.uordblks &&
       (size_t)m.fordblks == g.fordblks && (size_t)m.hblks == g.hblks,
       "mallinfo gives the same figures as int");
}

/* ---- malloc_info ---- */

/* Well-formed enough: every <tag ...> is closed by </tag> or "/>", in order. */
static int xml_balanced(const char *s, char *why, size_t whylen)
{
    char stack[16][32];
    int depth = 0;
    for (const char *p = strchr(s, '<'); p; p = strchr(p + 1, '<')) {
        const char *end = strchr(p, '>');
        if (!end) {
            snprintf(why, whylen, "unterminated tag");
            return 0;
        }
        if (p[1] == '/') {
            size_t n = strcspn(p + 2, ">");
            if (!depth || strlen(stack[depth - 1]) != n || strncmp(stack[depth - 1], p + 2, n)) {
                snprintf(why, whylen, "</%.*s> closes nothing open", (int)n, p + 2);
                return 0;
            }
            depth--;
        } else if (end[-1] != '/') {
            if (depth == 16) {
                snprintf(why, whylen, "too deep");
                return 0;
            }
            size_t n = strcspn(p + 1, " >");
            snprintf(stack[depth++], sizeof stack[0], "%.*s", (int)(n < 31 ? n : 31), p + 1);
        }
    }
    if (depth)
        snprintf(why, whylen, "<%s> left open", stack[depth - 1]);
    return depth == 0;
}

static void test_malloc_info(void)
{
    void *keep[100];
    for (int i = 0; i < 100; i++)
        keep[i] = malloc(64);
    void *big = malloc_fn(2 * MiB);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        BAIL("open_memstream: %s", strerror(errno));
    struct mallinfo2 mi = mallinfo2();
    unsigned long act = active_of("kmalloc-64");
    int rc = malloc_info(0, f);
    fclose(f);
    is(rc, 0, "malloc_info(0, fp) returns 0");
    char why[80] = "";
    ok(xml_balanced(buf, why, sizeof why), "its XML is balanced %s", why);
    ok(!strncmp(buf, "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n", 42), "it opens as glibc's does");
    const char *tags[] = { "<total type=\"fast\"", "<total type=\"rest\"", "<total type=\"mmap\"",
                           "<system type=\"current\"", "<system type=\"max\"", "<aspace type=\"total\"",
                           "<aspace type=\"mprotect\"", "</heap>\n", "</malloc>\n" };
    int missing = 0;
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++)
        if (!strstr(buf, tags[i])) {
            diag("missing %s", tags[i]);
            missing++;
        }
    ok(!missing, "it has glibc's totals, system and aspace elements");
    char want[160];
    snprintf(want, sizeof want, "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>", mi.hblks, mi.hblkhd);
    ok(strstr(buf, want) != NULL, "mmap total is mallinfo2's large blocks: %s", want);
    snprintf(want, sizeof want, "<cache name=\"kmalloc-64\" objsize=\"64\" active_objs=\"%lu\"", act);
    ok(strstr(buf, want) != NULL, "slabkit's caches are in it, with sk_cache_info's counts: %s", want);
    free(buf);
    errno = 0;
    FILE *g = fopen("/dev/null", "w");
    rc = malloc_info(1, g);
    ok(rc == -1 && errno == EINVAL, "malloc_info(1, fp) is EINVAL, as glibc");
    fclose(g);
    for (int i = 0; i < 100; i++)
        free(keep[i]);
    free(big);
}

/* ---- mallopt ---- */

static void test_mallopt(void)
{
    is(mallopt(M_TRIM_THRESHOLD, 0), 1, "mallopt(M_TRIM_THRESHOLD, 0) returns 1");
    is(sk_option("dirty_max_mb"), 0, "and free resident memory goes back at once (dirty_max_mb 0)");
    mallopt(M_TRIM_THRESHOLD, 3 * MiB + 1);
    is(sk_option("dirty_max_mb"), 4, "M_TRIM_THRESHOLD of 3 MiB + 1 is dirty_max_mb 4 (rounded up)");
    mallopt(M_TRIM_THRESHOLD, 64 * MiB);

    /* 8 MiB blocks, written, then freed: resident memory tells where
     * their pages went. */
    char *buddy = malloc_fn(8 * MiB);
    memset(buddy, 1, 8 * MiB);
    long rss0 = statm_bytes(STATM_RESIDENT);
    free(buddy);
    long kept = rss0 - statm_bytes(STATM_RESIDENT);
    ok(kept < (long)MiB, "by default a freed 8 MiB block stays resident until it decays (%ld bytes went)", kept);
    is(mallopt(M_MMAP_THRESHOLD, MiB), 1, "mallopt(M_MMAP_THRESHOLD, 1 MiB) returns 1");
    char *direct = malloc_fn(8 * MiB);
    memset(direct, 1, 8 * MiB);
    char *small = malloc_fn(512 * 1024);
    ok(direct && ((uintptr_t)direct & (64 * MiB - 1)) == 0, "then an 8 MiB block is a mapping of its own (a slice run)");
    rss0 = statm_bytes(STATM_RESIDENT);
    free(direct);
    long went = rss0 - statm_bytes(STATM_RESIDENT);
    ok(went >= (long)(7 * MiB), "whose pages go back to the OS when it is freed (%ld bytes went)", went);
    free(small);
    is(mallopt(M_MMAP_THRESHOLD, 65 * (int)MiB), 0, "a threshold over 64 MiB is refused (0), as glibc past its maximum");
    is(mallopt(M_MMAP_MAX, 0), 1, "mallopt(M_MMAP_MAX, 0) returns 1");
    char *again = malloc_fn(8 * MiB);
    memset(again, 1, 8 * MiB);
    rss0 = statm_bytes(STATM_RESIDENT);
    free(again);
    kept = rss0 - statm_bytes(STATM_RESIDENT);
    ok(kept < (long)MiB, "and turns direct mappings off again (%ld bytes went)", kept);

    int params[] = { M_MXFAST, M_TOP_PAD, M_CHECK_ACTION, M_PERTURB, M_ARENA_TEST, M_ARENA_MAX, 12345 };
    int ones = 0;
    long before = sk_option("decay_ms");
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
        ones += mallopt(params[i], 4) == 1;
    is(ones, 7, "M_MXFAST, M_TOP_PAD, M_CHECK_ACTION, M_PERTURB, M_ARENA_TEST, M_ARENA_MAX, unknown: 1");
    is(sk_option("decay_ms"), before, "and they change nothing");
}

/* ---- sized frees ---- */

static void test_sized(void)
{
    enum { N = 1000 };
    static void *p[N];
    /* The classes (SLUB: kmalloc-112, -64, -128, -2048; SLAB: -128, -64,
     * -128, -2048), found, not assumed. */
    const char *k100 = cache_for(100, NULL), *k60 = cache_for(60, NULL), *k128 = cache_for(128, NULL),
               *k2k = cache_for(2000, NULL);
    unsigned long a100 = active_of(k100), a60 = active_of(k60), a128 = active_of(k128), a2k = active_of(k2k);
    for (int i = 0; i < N; i++)
        p[i] = malloc(100);
    is(active_of(k100) - a100, N, "1000 x malloc(100) are %s objects", k100);
    for (int i = 0; i < N; i++)
        free_sized(p[i], 100);
    is(active_of(k100), a100, "free_sized(p, 100) gives all of them back");

    for (int i = 0; i < N; i++)
        p[i] = realloc(malloc(100), 60);
    ok(active_of(k100) == a100 && active_of(k60) - a60 == N,
       "realloc(malloc(100), 60) moves to %s, the class 60 names", k60);
    for (int i = 0; i < N; i++)
        free_sized(p[i], 60);
    is(active_of(k60), a60, "free_sized(p, 60) after it gives them back");

    for (int i = 0; i < N; i++)
        p[i] = realloc(malloc(100), 110);
    is(active_of(k100) - a100, N, "realloc within a class stays in place");
    for (int i = 0; i < N; i++)
        free_sized(p[i], 110);
    is(active_of(k100), a100, "free_sized of the new size gives them back");

    for (int i = 0; i < N; i++)
        p[i] = aligned_alloc(64, 100);
    is(active_of(k128) - a128, N, "aligned_alloc(64, 100) is %s (a multiple of 64)", k128);
    for (int i = 0; i < N; i++)
        free_aligned_sized(p[i], 64, 100);
    is(active_of(k128), a128, "free_aligned_sized(p, 64, 100) gives them back");

    for (int i = 0; i < 100; i++)
        p[i] = malloc(2000);
    for (int i = 0; i < 100; i++)
        free_sized(p[i], 2000);
    is(active_of(k2k), a2k, "free_sized of 2000-byte objects (past the first table) too");

    struct mallinfo2 m0 = mallinfo2();
    void *big = malloc_fn(3 * MiB);
    free_sized(big, 3 * MiB);
    struct mallinfo2 m1 = mallinfo2();
    is(m1.hblks, m0.hblks, "free_sized of a 3 MiB block frees it");
    void *al = aligned_alloc(8192, 5000);
    ok(((uintptr_t)al & 8191) == 0 && mallinfo2().hblks == m0.hblks + 1,
       "aligned_alloc(8192, 5000) is an aligned large block");
    free_aligned_sized(al, 8192, 5000);
    is(mallinfo2().hblks, m0.hblks, "free_aligned_sized(p, 8192, 5000) frees it");
    struct mallinfo2 m2 = mallinfo2();
    free_sized(NULL, 10);
    free_aligned_sized(NULL, 64, 10);
    is(mallinfo2().uordblks, m2.uordblks, "free_sized(NULL, n) and free_aligned_sized(NULL, ...) do nothing");
}

/* ---- bad input, in children ---- */

/* Run fn in a child with stderr on a pipe: its stderr text, and whether it
 * died of SIGABRT. */
static int child_abort(void (*fn)(void), char *err, size_t errlen)
{
    int fds[2];
    if (pipe(fds))
        return 0;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        fn();
        _exit(0);
    }
    close(fds[1]);
    int st = tap_child_stderr(pid, fds[0], err, errlen);
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

static void *victim;

static void double_free_sized(void)
{
    victim = malloc(100);
    free_sized_fn(victim, 100);
    free_sized_fn(victim, 100);
}

/* The next object of a new slab of a class nothing here used before
 * (7000 bytes, kmalloc-7168 as bad_input's): never handed out, and its
 * page says so (PG_FRESH; an eager slab, the fresh marker). */
static void sized_never_handed_out(void)
{
    char *p = malloc(7000);
    free_sized_fn(p + malloc_usable_size(p), 7000);
    /* Not caught: whatever comes next must not hand one object out twice. */
    void *v[64];
    for (int i = 0; i < 64; i++) {
        v[i] = malloc(7000);
        for (int j = 0; j < i; j++)
            if (v[j] == v[i])
                _exit(3);
    }
}

static void wrong_size(void)
{
    void *ok1 = malloc(100);
    free_sized_fn(ok1, 100);       /* a right size passes */
    victim = malloc(100);
    free_sized_fn(victim, 200);
}

static void wrong_size_large(void)
{
    victim = malloc(MiB);
    free_sized_fn(victim, 64);
}

static void test_bad_input(int checked)
{
    char err[512], want[160];
    if (!checked) {
        int aborted = child_abort(double_free_sized, err, sizeof err);
        char in[48];
        snprintf(in, sizeof in, "in %s\n", cache_for(100, NULL));
        ok(aborted && strstr(err, "slabkit: double free: free_sized(") && strstr(err, in),
           "a double free through free_sized aborts naming free_sized and %s", cache_for(100, NULL));
        if (!aborted)
            diag("stderr: %s", err);
        if (sk_option("allocator") != 0) {
            /* SLAB's sized frees of objects never handed out are not
             * caught (noted in docs/design.md, "Known gaps"). */
            skip("allocator=slab: a sized free of an object never handed out");
            return;
        }
        aborted = child_abort(sized_never_handed_out, err, sizeof err);
        ok(aborted && strstr(err, "slabkit: invalid free: free_sized(") && strstr(err, ", an object never handed out"),
           "free_sized of an object of a new slab never handed out aborts naming free_sized");
        if (!aborted || !strstr(err, "never handed out"))
            diag("stderr: %s", err);
        return;
    }
    int aborted = child_abort(wrong_size, err, sizeof err);
    snprintf(want, sizeof want, ", 200) of an object of %s\n", cache_for(100, NULL));
    char *nl = strchr(err, '\n');
    static const char head[] = "slabkit: wrong size: free_sized(0x";
    ok(aborted && !strncmp(err, head, sizeof head - 1) && strstr(err, want) && nl && !nl[1],
       "sized_check=1: free_sized(p, 200) of a malloc(100) object aborts with one line naming the class");
    if (!aborted || !strstr(err, want))
        diag("stderr: %s", err);
    aborted = child_abort(wrong_size_large, err, sizeof err);
    ok(aborted && strstr(err, "slabkit: wrong size: free_sized(") && strstr(err, ", 64) of a 1048576-byte block"),
       "sized_check=1: free_sized(p, 64) of a 1 MiB block aborts naming the block's size");
    if (!aborted)
        diag("stderr: %s", err);
}

int main(int argc, char **argv)
{
    bail_out_after(120, "glibc_api hung");
    if (argc > 3 && !strcmp(argv[1], "--checked")) {
        /* The re-executed copy: sized_check=1 from the environment. */
        tap_n = atoi(argv[2]);
        tap_failed = atoi(argv[3]);
        test_bad_input(1);
        return done_testing();
    }
    /* --sized-only: what does not depend on the per-CPU layout, for the
     * other allocators (allocator=slab, sheaves=0: tests/variants). */
    bool sized_only = argc > 1 && !strcmp(argv[1], "--sized-only");
    test_good_size();
    if (!sized_only) {
        test_mallinfo2();
        test_malloc_info();
        test_mallopt();
    }
    test_sized();
    test_bad_input(0);
    char n[16], failed[16], opts[512];
    snprintf(n, sizeof n, "%d", tap_n);
    snprintf(failed, sizeof failed, "%d", tap_failed);
    const char *old = getenv("SLABKIT_OPTIONS");
    snprintf(opts, sizeof opts, "%s%ssized_check=1", old ? old : "", old && *old ? "," : "");
    fflush(stdout);
    setenv("SLABKIT_OPTIONS", opts, 1);
    execl("/proc/self/exe", argv[0], "--checked", n, failed, (char *)NULL);
    BAIL("exec /proc/self/exe: %s", strerror(errno));
}
