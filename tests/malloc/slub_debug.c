/*
 * slub_debug.c — SLABKIT_OPTIONS=debug=FZPUT (the kernel's slub_debug) finds
 * heap bugs at run time and reports them the kernel's way:
 *
 *   - each bad program runs as a re-executed copy of this test with the
 *     options set, its stderr read by the parent.  It must die of SIGABRT
 *     with the report's lines: the "=====" frame, "BUG <cache> (Not
 *     tainted): <what>", "INFO: 0x..-0x.. @offset=N. First byte 0x.. instead
 *     of 0x..", "INFO: Allocated in <the test's function>+0x..", "INFO:
 *     Freed in ...", "INFO: Slab ...", "INFO: Object ...", the hex dump:
 *       one byte past malloc(24)            -> kmalloc Redzone overwritten
 *       a write into a freed object         -> Poison overwritten, when the
 *                                              object is handed out again
 *       a double free after other frees     -> Object already free
 *       free of a pointer inside an object  -> Invalid object pointer
 *   - debug_continue=1: all four in one process are reported and repaired,
 *     and the process goes on (thousands more mallocs, no further report)
 *     and exits 0;
 *   - debug_caches=kmalloc-64 checks kmalloc-64 only: the same overflow in
 *     kmalloc-32 passes unseen, one in kmalloc-64 is reported;
 *   - T logs each alloc and free of the named cache ("TRACE kmalloc-112
 *     alloc 0x<the object>");
 *   - U: sk_cache_calls and the exit-time slabinfo (slabinfo_at_exit=1) list
 *     alloc_calls with the allocating function and the right count and
 *     bytes, free_calls with the freeing one;
 *   - the cache API's SK_CACHE_DEBUG works with no option at all, and a
 *     cache without it is not checked;
 *   - F alone: a free pointer overwritten after a free is "Freepointer
 *     corrupt" at the next alloc; debug_continue isolates the chain;
 *   - allocator=slab and sheaves=0 run debug caches the same way;
 *   - a correct program (malloc, calloc, realloc, aligned_alloc,
 *     malloc_usable_size, threads) under debug=FZPU is silent and exits 0,
 *     and malloc_usable_size is the size asked for.
 *
 * The test links with -rdynamic (Makefile) so that dladdr names its
 * functions in the reports.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slabkit.h"
#include "tap.h"

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wuse-after-free"
#endif

static void *(*volatile malloc_fn)(size_t) = malloc;
static void (*volatile free_fn)(void *) = free;

/* Named call sites the reports must show (exported by -rdynamic; not
 * static: in a program linked with libslabkit.a, a frame with no dynamic
 * symbol cannot be told from slabkit's own hidden functions).  The empty
 * asm keeps each call out of tail position, so each has a frame. */
#define NO_TAIL() __asm__ volatile("" ::: "memory")

__attribute__((noinline)) void *dbg_alloc_site(size_t n)
{
    void *p = malloc_fn(n);
    NO_TAIL();
    return p;
}

__attribute__((noinline)) void dbg_free_site(void *p)
{
    free_fn(p);
    NO_TAIL();
}

__attribute__((noinline)) void *dbg_calls_site(size_t n)
{
    void *p = malloc_fn(n);
    NO_TAIL();
    return p;
}

static void poke(void *p, size_t off, char v)
{
    ((volatile char *)p)[off] = v;
}

/* ---- the bad programs (run re-executed: `slub_debug CASE`) ---- */

int case_overflow(size_t size)
{
    char *p = dbg_alloc_site(size);
    poke(p, size, 1);
    dbg_free_site(p);
    return 0;
}

int case_uaf(void)
{
    char *p = dbg_alloc_site(100);
    dbg_free_site(p);
    poke(p, 10, 'x');
    /* The debug freelist is LIFO: the next object of the class is p. */
    char *q = dbg_alloc_site(100);
    dprintf(2, "again %s\n", q == p ? "same" : "other");
    return 0;
}

int case_double(void)
{
    void *a = dbg_alloc_site(40), *b = dbg_alloc_site(40), *c = dbg_alloc_site(40);
    dbg_free_site(a);
    dbg_free_site(b);
    dbg_free_site(c);
    dbg_free_site(b);
    return 0;
}

int case_invalid(void)
{
    char *p = dbg_alloc_site(64);
    dbg_free_site(p + 8);
    return 0;
}

/* All four, under debug_continue=1, then a heap that still works. */
int case_continue(void)
{
    case_overflow(24);
    case_uaf();
    case_double();
    case_invalid();
    void *keep[512];
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 512; i++) {
            keep[i] = malloc_fn(16 + (size_t)(i * 37 % 300));
            memset(keep[i], i, 16);
        }
        for (int i = 0; i < 512; i++)
            free_fn(keep[i]);
    }
    dprintf(2, "went on\n");
    return 0;
}

int case_trace(void)
{
    void *p = dbg_alloc_site(100);
    dprintf(2, "object %p\n", p);
    dbg_free_site(p);
    return 0;
}

int case_calls(void)
{
    void *p[10];
    for (int i = 0; i < 10; i++)
        p[i] = dbg_calls_site(90);
    for (int i = 0; i < 3; i++)
        dbg_free_site(p[i]);
    dprintf(2, "== sk_cache_calls\n");
    int r = sk_cache_calls("kmalloc-96", 2);
    dprintf(2, "== sk_cache_calls returned %d\n", r);
    return 0;     /* 7 stay allocated for the exit-time report */
}

int case_api(int flags)
{
    sk_cache_t *c = sk_cache_create("dbg-api", 40, 0, (unsigned)flags, NULL);
    if (!c)
        return 3;
    char *o = sk_cache_alloc(c);
    poke(o, 40, 7);
    sk_cache_free(c, o);
    return 0;
}

/* A cache's books and its shrink: 100 objects allocated and freed, then
 * its slow-path count and slabs before and after sk_cache_shrink (a
 * debug cache takes the slow path for every one; a cache never allocated
 * from is skipped by statistics and shrink, so every mode must say it was
 * used). */
int case_books(int flags)
{
    sk_cache_t *c = sk_cache_create("dbg-books", 200, 0, (unsigned)flags, NULL);
    if (!c)
        return 3;
    void *o[100];
    for (int i = 0; i < 100; i++)
        if (!(o[i] = sk_cache_alloc(c)))
            return 3;
    for (int i = 0; i < 100; i++)
        sk_cache_free(c, o[i]);
    struct sk_cache_info in;
    sk_cache_info("dbg-books", &in);
    unsigned long slabs = in.num_slabs, slow = in.stat[SK_ALLOC_SLOWPATH];
    int freed = sk_cache_shrink(c);
    sk_cache_info("dbg-books", &in);
    dprintf(2, "books slow=%lu slabs=%lu shrink=%d after=%lu\n", slow, slabs, freed, in.num_slabs);
    return 0;
}

/* F alone: a write just past a freed object lands on its free pointer
 * (after the object in a debug cache); the next alloc takes the object and
 * finds the pointer invalid. */
int case_fpcorrupt(void)
{
    sk_cache_t *c = sk_cache_create("dbg-fp", 40, 0, SK_CACHE_CONSISTENCY_CHECKS, NULL);
    if (!c)
        return 3;
    char *a = sk_cache_alloc(c), *b = sk_cache_alloc(c);
    sk_cache_free(c, b);
    sk_cache_free(c, a);
    memset(a + 40, 0x41, 8);
    char *again = sk_cache_alloc(c);
    dprintf(2, "again %s\n", again == a ? "same" : "other");
    void *more = sk_cache_alloc(c);
    dprintf(2, "more %p\n", more);
    return 0;
}

static void *correct_thread(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    char *held[64] = { 0 };
    for (int i = 0; i < 20000; i++) {
        seed = seed * 1103515245 + 12345;
        int k = (int)(seed >> 16) % 64;
        size_t n = 1 + (seed >> 8) % 2000;
        if (held[k]) {
            char *r = realloc(held[k], n);
            if (!r)
                return (void *)1;
            held[k] = r;
        } else {
            held[k] = (seed & 1) ? calloc(1, n) : malloc(n);
        }
        if (!held[k] || malloc_usable_size(held[k]) < n)
            return (void *)1;
        memset(held[k], 0x5a, malloc_usable_size(held[k]));
        if ((seed >> 4) % 3 == 0) {
            free(held[k]);
            held[k] = NULL;
        }
    }
    for (int k = 0; k < 64; k++)
        free(held[k]);
    return NULL;
}

int case_correct(void)
{
    char *p = malloc(24);
    if (malloc_usable_size(p) != 24)
        return 4;
    memset(p, 1, 24);
    free(p);
    void *a = aligned_alloc(64, 100);
    if (!a || (uintptr_t)a % 64)
        return 5;
    free(a);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        if (pthread_create(&t[i], NULL, correct_thread, (void *)(uintptr_t)(i + 1)))
            return 6;
    void *bad = correct_thread((void *)99);
    for (int i = 0; i < 3; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad = bad ? bad : r;
    }
    return bad ? 7 : 0;
}

int case_overflow(size_t size);
int case_uaf(void);
int case_double(void);
int case_invalid(void);
int case_continue(void);
int case_trace(void);
int case_calls(void);
int case_api(int flags);
int case_correct(void);
int case_fpcorrupt(void);
int case_books(int flags);

static int run_case(const char *name)
{
    if (!strcmp(name, "overflow"))
        return case_overflow(24);
    if (!strcmp(name, "overflow64"))
        return case_overflow(50);
    if (!strcmp(name, "uaf"))
        return case_uaf();
    if (!strcmp(name, "double"))
        return case_double();
    if (!strcmp(name, "invalid"))
        return case_invalid();
    if (!strcmp(name, "continue"))
        return case_continue();
    if (!strcmp(name, "trace"))
        return case_trace();
    if (!strcmp(name, "calls"))
        return case_calls();
    if (!strcmp(name, "api"))
        return case_api(SK_CACHE_DEBUG);
    if (!strcmp(name, "api_plain"))
        return case_api(0);
    if (!strcmp(name, "correct"))
        return case_correct();
    if (!strcmp(name, "fpcorrupt"))
        return case_fpcorrupt();
    if (!strcmp(name, "books"))
        return case_books(SK_CACHE_DEBUG);
    if (!strcmp(name, "books_plain"))
        return case_books(0);
    return 99;
}

/* ---- the parent ---- */

static char out[1 << 16];

/* Run `self CASE` with SLABKIT_OPTIONS=opts (NULL: unset); its stderr in
 * out; returns its wait status. */
static int run(const char *opts, const char *name)
{
    int err;
    pid_t pid = tap_fork_stderr(&err);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0)
            dup2(null, 1);
        if (opts)
            setenv("SLABKIT_OPTIONS", opts, 1);
        else
            unsetenv("SLABKIT_OPTIONS");
        execl("/proc/self/exe", "slub_debug", name, (char *)NULL);
        _exit(127);
    }
    return tap_child_stderr(pid, err, out, sizeof out);
}

static int has(const char *pattern)
{
    regex_t re;
    if (regcomp(&re, pattern, REG_EXTENDED | REG_NEWLINE | REG_NOSUB))
        BAIL("bad regex %s", pattern);
    int found = regexec(&re, out, 0, NULL, 0) == 0;
    regfree(&re);
    return found;
}

static int count(const char *needle)
{
    int n = 0;
    for (const char *p = out; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static int aborted(int st)
{
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

static int exited0(int st)
{
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void show(void)
{
    int n = 0;
    for (const char *l = out; *l && n < 40; n++) {
        const char *e = strchr(l, '\n');
        int len = e ? (int)(e - l) : (int)strlen(l);
        diag("  %.*s", len, l);
        l += len + (e != NULL);
    }
}

#define FRAME "^=+\nBUG "
#define CHECK(cond, ...) do { if (!ok(cond, __VA_ARGS__)) show(); } while (0)

int main(int argc, char **argv)
{
    if (argc > 1) {
        int r = run_case(argv[1]);
        NO_TAIL();
        return r;
    }
    plan(40);

    int st = run("debug=FZPU", "overflow");
    CHECK(aborted(st) && has(FRAME "kmalloc-32 \\(Not tainted\\): kmalloc Redzone overwritten$") &&
              has("^INFO: 0x[0-9a-f]+-0x[0-9a-f]+ @offset=[0-9]+\\. First byte 0x1 instead of 0xcc$"),
          "one byte past malloc(24): kmalloc Redzone overwritten in kmalloc-32, first byte 0x1 instead of 0xcc, SIGABRT");
    CHECK(has("^INFO: Allocated in dbg_alloc_site\\+0x[0-9a-f]+/0x[0-9a-f]+ age=[0-9]+ cpu=[0-9]+ pid=[0-9]+$") &&
              has("^ case_overflow|^ main\\+"),
          "the report names the allocating function (name+0xoff/0xsize, age, cpu, pid) and its callers");
    CHECK(has("^INFO: Slab 0x[0-9a-f]+ objects=[0-9]+ used=[0-9]+ fp=0x[0-9a-f]+ flags=0x[0-9a-f]+$") &&
              has("^INFO: Object 0x[0-9a-f]+ @offset=[0-9]+ fp=0x[0-9a-f]+$"),
          "and the slab and object lines");
    CHECK(has("^Redzone  [0-9a-f]{16}: (cc ){16} ") && has("^Object   [0-9a-f]{16}: ") &&
              has("^Redzone  [0-9a-f]{16}: (cc ){8}") && has("^Padding  [0-9a-f]{16}: (5a )"),
          "and the hex dump: left red zone, object, right red zone, padding");
    CHECK(has("^Object   [0-9a-f]{16}: ([0-9a-f]{2} ){8}01 cc cc cc cc cc cc cc  "),
          "the dump shows the overwritten byte where the kmalloc red zone starts");

    st = run("debug=FZPU", "uaf");
    CHECK(aborted(st) && has(FRAME "kmalloc-112 \\(Not tainted\\): Poison overwritten$") &&
              has("First byte 0x78 instead of 0x6b$"),
          "a write after free: Poison overwritten (0x78 instead of 0x6b) when the object is handed out again");
    CHECK(has("^INFO: Allocated in dbg_alloc_site\\+") && has("^INFO: Freed in dbg_free_site\\+"),
          "with the object's last alloc and free");
    CHECK(has("^Object   [0-9a-f]{16}: 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 78 6b 6b 6b 6b 6b  kkkkkkkkkkxkkkkk$"),
          "the dump shows the poison and the written byte");

    st = run("debug=FZPU", "double");
    CHECK(aborted(st) && has(FRAME "kmalloc-48 \\(Not tainted\\): Object already free$"),
          "a double free after other frees: Object already free");
    CHECK(has("^INFO: Allocated in dbg_alloc_site\\+") && has("^INFO: Freed in dbg_free_site\\+") &&
              has("^Object   [0-9a-f]{16}: (6b ){16} kkkkkkkkkkkkkkkk$"),
          "with Allocated in / Freed in, the object still poisoned");
    CHECK(has("^Call Trace:\n dbg_free_site\\+"), "and the stack of the bad free");

    st = run("debug=FZPU", "invalid");
    CHECK(aborted(st) && has(FRAME "kmalloc-64 \\(Not tainted\\): Invalid object pointer 0x[0-9a-f]+$") &&
              has("^INFO: free\\(0x[0-9a-f]+\\) is 8 bytes inside object 0x[0-9a-f]+$"),
          "free of a pointer 8 bytes into an object: Invalid object pointer, naming the object");
    CHECK(has("^INFO: Allocated in dbg_alloc_site\\+"), "with the object's allocation");

    st = run("debug=FZPU,debug_continue=1", "continue");
    CHECK(exited0(st), "debug_continue=1: four bugs in one process, which exits 0");
    CHECK(count("BUG ") == 4,
          "each reported once, nothing else (%d BUG lines)", count("BUG "));
    CHECK(has("^FIX kmalloc-32: Restoring kmalloc Redzone 0x[0-9a-f]+-0x[0-9a-f]+=0xcc$") &&
              has("^FIX kmalloc-112: Restoring Poison 0x[0-9a-f]+-0x[0-9a-f]+=0x6b$") &&
              count("not freed") == 2,
          "red zone and poison restored, the double and invalid frees skipped");
    CHECK(has("^went on$"), "and the heap still works after the repairs");

    st = run("debug=FZPU,debug_caches=kmalloc-64", "overflow");
    CHECK(exited0(st) && out[0] == 0, "debug_caches=kmalloc-64: the overflow in kmalloc-32 is not checked");
    st = run("debug=FZPU,debug_caches=kmalloc-64", "overflow64");
    CHECK(aborted(st) && has(FRAME "kmalloc-64 \\(Not tainted\\): kmalloc Redzone overwritten$"),
          "and one past malloc(50) in kmalloc-64 is");
    st = run("debug=Z,debug_caches=kmalloc-16:kmalloc-64:kmalloc-96", "overflow64");
    CHECK(aborted(st) && has("BUG kmalloc-64 .*kmalloc Redzone") && !has("^INFO: Allocated in"),
          "Z alone: found, with no tracks to print");

    st = run("debug=T,debug_caches=kmalloc-112", "trace");
    {
        char *o = strstr(out, "object 0x");
        char obj[32] = "?", want[96];
        if (o)
            sscanf(o + 7, "%31s", obj);
        snprintf(want, sizeof want, "^TRACE kmalloc-112 alloc %s inuse=[0-9]+ fp=0x[0-9a-f]+\n dbg_alloc_site\\+", obj);
        CHECK(exited0(st) && has(want), "T: the alloc is logged with the object and the caller");
        snprintf(want, sizeof want, "^TRACE kmalloc-112 free %s inuse=[0-9]+ fp=0x[0-9a-f]+\n dbg_free_site\\+", obj);
        CHECK(has(want), "and the free");
        CHECK(!has("^TRACE kmalloc-(32|64) "), "only the named cache is traced");
    }

    st = run("debug=U,debug_caches=kmalloc-96,slabinfo_at_exit=1", "calls");
    CHECK(exited0(st) && has("== sk_cache_calls\nalloc_calls kmalloc-96:\n      7 dbg_calls_site\\+0x[0-9a-f]+/0x[0-9a-f]+ "
                             "age=[0-9/]+ pid=[0-9-]+ cpus=[0-9,-]+ bytes=630\n"),
          "U: sk_cache_calls lists alloc_calls: 7 live objects from dbg_calls_site, 630 bytes");
    CHECK(has("free_calls kmalloc-96:\n(.*\n)*      3 dbg_free_site\\+0x[0-9a-f]+/0x[0-9a-f]+ age=[0-9/]+ pid=[0-9-]+ cpus="),
          "and free_calls: 3 freed by dbg_free_site");
    CHECK(has("== sk_cache_calls returned 0$"), "sk_cache_calls returns 0 for a cache with U");
    CHECK(has("^slabinfo - version: 2\\.1$") && count("alloc_calls kmalloc-96:\n      7 dbg_calls_site+") == 2,
          "the exit-time slabinfo ends with the same alloc_calls");

    st = run(NULL, "api");
    CHECK(aborted(st) && has(FRAME "dbg-api \\(Not tainted\\): Right Redzone overwritten$") &&
              has("^INFO: Allocated in case_api\\+|^INFO: Allocated in main\\+"),
          "sk_cache_create(SK_CACHE_DEBUG) checks with no option set");
    st = run(NULL, "api_plain");
    CHECK(exited0(st) && out[0] == 0, "a cache without the flag is not checked");
    st = run("debug=FZPU", "api_plain");
    CHECK(aborted(st) && has("BUG dbg-api .*Right Redzone overwritten"), "debug= applies to user caches by name too");

    st = run(NULL, "fpcorrupt");
    CHECK(aborted(st) && has(FRAME "dbg-fp \\(Not tainted\\): Freepointer corrupt$") &&
              has("^INFO: Object 0x[0-9a-f]+ @offset=[0-9]+ fp=0x[0-9a-f]+$"),
          "F: a free pointer overwritten after a free: Freepointer corrupt at the next alloc");
    st = run("debug_continue=1", "fpcorrupt");
    CHECK(exited0(st) && has("^FIX dbg-fp: Isolating the rest of the freelist of slab 0x[0-9a-f]+$") &&
              has("^again same$") && has("^more 0x[0-9a-f]+$") && count("BUG ") == 1,
          "debug_continue: the object is handed out, the rest of the chain isolated, the cache goes on");

    st = run("debug,allocator=slab", "double");
    CHECK(aborted(st) && has(FRAME "kmalloc-64 \\(Not tainted\\): Object already free$"),
          "allocator=slab: a debug cache runs slub_debug's paths all the same (SLAB's kmalloc-64)");
    st = run("debug,sheaves=0", "overflow");
    CHECK(aborted(st) && has(FRAME "kmalloc-32 \\(Not tainted\\): kmalloc Redzone overwritten$"),
          "sheaves=0: so does a debug cache there");

    st = run(NULL, "books");
    CHECK(exited0(st) && has("^books slow=100 slabs=[1-9][0-9]* shrink=[1-9][0-9]* after=0$"),
          "a debug cache's books count its 100 slow-path allocations, and shrink gives its slabs back");
    st = run(NULL, "books_plain");
    CHECK(exited0(st) && has("^books slow=[1-9][0-9]* slabs=[1-9][0-9]* shrink=[1-9][0-9]* after=0$"),
          "so does a plain cache's");
    st = run("allocator=slab", "books_plain");
    CHECK(exited0(st) && has("^books slow=[1-9][0-9]* slabs=[1-9][0-9]* shrink=[1-9][0-9]* after=0$"),
          "allocator=slab: the same");
    st = run("sheaves=0", "books_plain");
    CHECK(exited0(st) && has("^books slow=[0-9]* slabs=[1-9][0-9]* shrink=[1-9][0-9]* after=0$"),
          "sheaves=0: its shrink gives the slabs back too");

    st = run("debug=FZPU", "correct");
    CHECK(exited0(st) && out[0] == 0, "a correct program under debug=FZPU: silent, exit 0 (status %d)", st);
    st = run("debug=FZPUT,debug_caches=kmalloc-2048,sheaves=0", "overflow64");
    CHECK(exited0(st) && out[0] == 0, "sheaves=0 with a debug cache that is not used: silent");
    return done_testing();
}
