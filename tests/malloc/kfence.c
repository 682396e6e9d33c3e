/*
 * kfence.c — KFENCE (SLABKIT_OPTIONS=kfence=1: a sample every ms) finds
 * heap bugs in sampled objects and reports them as the kernel does:
 *
 *   - each bad access runs in a forked child, whose stderr the parent
 *     reads: an out-of-bounds read and write past the end (right-aligned
 *     object) and before the start (left-aligned), a use-after-free read
 *     and write, corrupted canary bytes found at free, a double free.  The
 *     child must die of SIGABRT, and its report must have the kernel's
 *     lines: "BUG: KFENCE: <kind> <read|write> in <the test's function>",
 *     the address and where it lies, the object's range and size, and the
 *     "allocated by task" (and "freed by task") stacks naming the
 *     function that called malloc;
 *   - a sampled object works as any other: malloc_usable_size is its
 *     size, realloc moves it with its contents, calloc's is zero,
 *     free_sized frees it, and it is aligned as its kmalloc class would
 *     align it;
 *   - a forked child keeps the pool: the parent's object is readable and
 *     freeable there, and the child gets samples of its own (its timer
 *     thread starts at its first malloc);
 *   - with the pool full (kfence_pages=4, a re-executed copy), sampling
 *     skips: no object comes from the pool until one is freed;
 *   - faults outside the pool are not KFENCE's: with no handler of the
 *     program's, the process dies of SIGSEGV as it would without slabkit,
 *     silently; a handler the program installed before slabkit set KFENCE
 *     up still gets them (a re-executed copy that installs one first).
 *
 * The test re-executes itself with the options set (they are read once, at
 * the first malloc, which may be libc's own).  It links with -rdynamic
 * (Makefile) so that dladdr names its functions in the reports.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <regex.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "slabkit.h"
#include "tap.h"

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wuse-after-free"
#endif

void free_sized(void *p, size_t size);

static void *(*volatile malloc_fn)(size_t) = malloc;
static void (*volatile free_fn)(void *) = free;

enum place { ANY, LEFT, RIGHT };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A sampled object of `size` bytes placed as asked (LEFT: at its page's
 * start; RIGHT: ending at its page's end), or NULL after 10 s. */
__attribute__((noinline)) char *kfence_get(size_t size, enum place where)
{
    double end = now_s() + 10;
    while (now_s() < end) {
        for (int i = 0; i < 64; i++) {
            char *p = malloc_fn(size);
            if (!p)
                return NULL;
            if (sk_kfence_object(p)) {
                uintptr_t a = (uintptr_t)p;
                if (where == ANY || (where == LEFT && a % 4096 == 0) ||
                    (where == RIGHT && (a + size) % 4096 == 0))
                    return p;
            }
            free_fn(p);
        }
        usleep(200);
    }
    return NULL;
}

/* ---- the bad cases: each runs in a child and must not return ---- */

static int report_fd = -1;

static void tell(uintptr_t addr, uintptr_t obj)
{
    uintptr_t v[2] = { addr, obj };
    if (write(report_fd, v, sizeof v) != (ssize_t)sizeof v)
        _exit(90);
}

__attribute__((noinline)) void oob_read_case(void)
{
    volatile char *p = kfence_get(64, RIGHT);
    if (!p)
        _exit(91);
    tell((uintptr_t)(p + 64), (uintptr_t)p);
    (void)p[64];
}

__attribute__((noinline)) void oob_write_case(void)
{
    volatile char *p = kfence_get(128, RIGHT);
    if (!p)
        _exit(91);
    tell((uintptr_t)(p + 130), (uintptr_t)p);
    p[130] = 1;
}

__attribute__((noinline)) void oob_left_read_case(void)
{
    volatile char *p = kfence_get(32, LEFT);
    if (!p)
        _exit(91);
    tell((uintptr_t)(p - 1), (uintptr_t)p);
    (void)p[-1];
}

__attribute__((noinline)) void uaf_read_case(void)
{
    volatile char *p = kfence_get(48, ANY);
    if (!p)
        _exit(91);
    tell((uintptr_t)(p + 8), (uintptr_t)p);
    free_fn((void *)p);
    (void)p[8];
}

__attribute__((noinline)) void uaf_write_case(void)
{
    volatile char *p = kfence_get(200, ANY);
    if (!p)
        _exit(91);
    tell((uintptr_t)p, (uintptr_t)p);
    free_fn((void *)p);
    p[0] = 7;
}

__attribute__((noinline)) void corrupt_case(void)
{
    volatile char *p = kfence_get(40, LEFT);
    if (!p)
        _exit(91);
    tell((uintptr_t)(p + 41), (uintptr_t)p);
    p[41] = 0x5a;     /* within the page: a canary byte, no fault */
    free_fn((void *)p);
    _exit(94);        /* (not a tail call: the report names this function) */
}

__attribute__((noinline)) void double_free_case(void)
{
    char *p = kfence_get(24, ANY);
    if (!p)
        _exit(91);
    tell((uintptr_t)p, (uintptr_t)p);
    free_fn(p);
    free_fn(p);
    _exit(94);
}

struct bad_case {
    const char *name;
    void (*fn)(void);
    /* Lines the report must have (%A: the address, %O: the object); each
     * an extended regex matched against one line. */
    const char *lines[6];
};

static const struct bad_case cases[] = {
    { "out-of-bounds read past the end", oob_read_case,
      { "^BUG: KFENCE: out-of-bounds read in oob_read_case\\+0x[0-9a-f]+$",
        "^Out-of-bounds read at %A \\(1B right of kfence-#[0-9]+\\):$",
        "^kfence-#[0-9]+: %O-0x[0-9a-f]+, size=64, cache=kmalloc-64$",
        "^allocated by task [0-9]+ on cpu [0-9]+ at [0-9]+\\.[0-9]{6}s:$",
        "^ kfence_get\\+0x[0-9a-f]+ \\(.*kfence\\+0x[0-9a-f]+\\)$", NULL } },
    { "out-of-bounds write past the end", oob_write_case,
      { "^BUG: KFENCE: out-of-bounds write in oob_write_case\\+0x[0-9a-f]+$",
        "^Out-of-bounds write at %A \\(3B right of kfence-#[0-9]+\\):$",
        "^kfence-#[0-9]+: %O-0x[0-9a-f]+, size=128, cache=kmalloc-128$",
        "^allocated by task [0-9]+ on cpu [0-9]+ at [0-9]+\\.[0-9]{6}s:$", NULL } },
    { "out-of-bounds read before the start", oob_left_read_case,
      { "^BUG: KFENCE: out-of-bounds read in oob_left_read_case\\+0x[0-9a-f]+$",
        "^Out-of-bounds read at %A \\(1B left of kfence-#[0-9]+\\):$",
        "^kfence-#[0-9]+: %O-0x[0-9a-f]+, size=32, cache=kmalloc-32$", NULL } },
    { "use-after-free read", uaf_read_case,
      { "^BUG: KFENCE: use-after-free read in uaf_read_case\\+0x[0-9a-f]+$",
        "^Use-after-free read at %A \\(in kfence-#[0-9]+\\):$",
        "^kfence-#[0-9]+: %O-0x[0-9a-f]+, size=48, cache=kmalloc-48$",
        "^freed by task [0-9]+ on cpu [0-9]+ at [0-9]+\\.[0-9]{6}s:$",
        "^ uaf_read_case\\+0x[0-9a-f]+ ", NULL } },
    { "use-after-free write", uaf_write_case,
      { "^BUG: KFENCE: use-after-free write in uaf_write_case\\+0x[0-9a-f]+$",
        "^Use-after-free write at %A \\(in kfence-#[0-9]+\\):$",
        "^kfence-#[0-9]+: %O-0x[0-9a-f]+, size=200, cache=kmalloc-224$",
        "^freed by task [0-9]+ on cpu [0-9]+ at [0-9]+\\.[0-9]{6}s:$", NULL } },
    { "corrupted canary found at free", corrupt_case,
      { "^BUG: KFENCE: memory corruption in corrupt_case\\+0x[0-9a-f]+$",
        "^Corrupted memory at %A \\[ 0x5a( \\.)* \\] \\(in kfence-#[0-9]+\\):$",
        "^kfence-#[0-9]+: %O-0x[0-9a-f]+, size=40, cache=kmalloc-48$",
        "^allocated by task [0-9]+ on cpu [0-9]+ at [0-9]+\\.[0-9]{6}s:$", NULL } },
    { "double free", double_free_case,
      { "^BUG: KFENCE: invalid free in double_free_case\\+0x[0-9a-f]+$",
        "^Invalid free\\(%A\\) of a freed object \\(in kfence-#[0-9]+\\):$",
        "^freed by task [0-9]+ on cpu [0-9]+ at [0-9]+\\.[0-9]{6}s:$", NULL } },
};

/* Replace %A and %O by the addresses as the report prints them. */
static void expand(const char *pat, uintptr_t addr, uintptr_t obj, char *out, size_t size)
{
    size_t n = 0;
    for (const char *s = pat; *s && n + 24 < size; s++) {
        if (s[0] == '%' && (s[1] == 'A' || s[1] == 'O')) {
            n += (size_t)snprintf(out + n, size - n, "0x%lx", (unsigned long)(s[1] == 'A' ? addr : obj));
            s++;
        } else {
            out[n++] = *s;
        }
    }
    out[n] = 0;
}

static int has_line(const char *text, const char *pat)
{
    regex_t re;
    if (regcomp(&re, pat, REG_EXTENDED | REG_NEWLINE | REG_NOSUB) != 0)
        return 0;
    int r = regexec(&re, text, 0, NULL, 0) == 0;
    regfree(&re);
    return r;
}

static void run_case(const struct bad_case *c)
{
    int err, rep[2];
    if (pipe(rep))
        BAIL("pipe");
    pid_t pid = tap_fork_stderr(&err);
    if (pid == 0) {
        alarm(30);
        close(rep[0]);
        report_fd = rep[1];
        c->fn();
        _exit(93);     /* the bad access returned */
    }
    close(rep[1]);
    static char text[65536];
    /* The child's report of its addresses is written before the bad
     * access, and the pipe holds it: read stderr to the end first. */
    int status = tap_child_stderr(pid, err, text, sizeof text);
    uintptr_t v[2] = { 0, 0 };
    if (read(rep[0], v, sizeof v) != (ssize_t)sizeof v)
        v[0] = v[1] = 0;
    close(rep[0]);
    int aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
    int all = aborted && v[0];
    for (int i = 0; c->lines[i]; i++) {
        char pat[512];
        expand(c->lines[i], v[0], v[1], pat, sizeof pat);
        if (!has_line(text, pat)) {
            all = 0;
            diag("missing line /%s/", pat);
        }
    }
    if (!ok(all, "%s: SIGABRT and the kernel's report", c->name)) {
        diag("status %#x (signal %d, exit %d)", status, WIFSIGNALED(status) ? WTERMSIG(status) : 0,
             WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
            diag("  %s", line);
    }
}

/* ---- good behaviour ---- */

static int child_side(char *from_parent)
{
    /* The parent's object: still mapped, readable, freeable. */
    if (!sk_kfence_object(from_parent) || strcmp(from_parent, "parent") != 0)
        return 1;
    free(from_parent);
    if (sk_kfence_object(from_parent))
        return 2;
    /* The child's own samples (its timer starts here). */
    char *p = kfence_get(100, ANY);
    if (!p)
        return 3;
    free(p);
    return 0;
}

static void good_cases(void)
{
    char *p = kfence_get(100, ANY);
    ok(p != NULL, "a sampled object comes within 10 s (kfence=1)");
    if (!p)
        return;
    is(malloc_usable_size(p), 100, "malloc_usable_size of a sampled object is its size");
    memset(p, 0xab, 100);
    char *q = realloc(p, 3000);
    ok(q && (unsigned char)q[0] == 0xab && (unsigned char)q[99] == 0xab, "realloc moves it with its contents");
    free(q);

    int zero = 1, got = 0;
    for (int tries = 0; tries < 20000 && !got; tries++) {
        unsigned char *c = calloc(1, 512);
        if (sk_kfence_object(c)) {
            got = 1;
            for (int i = 0; i < 512; i++)
                zero &= c[i] == 0;
        }
        free(c);
        if (!got)
            usleep(20);
    }
    ok(got && zero, "calloc can be sampled and its object is zero");

    p = kfence_get(64, ANY);
    ok(p != NULL, "another sample");
    if (p) {
        free_sized(p, 64);
        ok(!sk_kfence_object(p), "free_sized frees a sampled object (kfence routes sized frees by lookup)");
    }

    /* Natural alignment, as the class would give: sk_malloc(2048) is
     * 2048-aligned, sk_malloc(3000) (kmalloc-3072) 1024-aligned, whether
     * the object sits at its page's start or against its end. */
    int aligned = 1, sampled = 0;
    double end = now_s() + 10;
    while (sampled < 6 && now_s() < end) {
        size_t n = sampled & 1 ? 3000 : 2048, a = sampled & 1 ? 1024 : 2048;
        char *o = sk_malloc(n);
        if (sk_kfence_object(o)) {
            sampled++;
            aligned &= (uintptr_t)o % a == 0;
        }
        sk_free(o);
        usleep(50);
    }
    ok(sampled == 6 && aligned, "sampled objects keep their class's natural alignment (sk_malloc 2048, 3000)");

    char *shared = kfence_get(32, ANY);
    if (!shared)
        BAIL("no sample");
    strcpy(shared, "parent");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGALRM, SIG_DFL);
        alarm(30);
        _exit(child_side(shared));
    }
    int status;
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "a forked child keeps the pool (reads and frees the parent's object) and gets samples of its own");
    if (!WIFEXITED(status) || WEXITSTATUS(status))
        diag("child status %#x", status);
    ok(sk_kfence_object(shared) && !strcmp(shared, "parent"), "the parent's object is still its own");
    free(shared);
}

/* kfence_pages=4: hold four samples, then none comes; free one, one comes. */
static int pool_full_run(void)
{
    char *held[4];
    for (int i = 0; i < 4; i++)
        if (!(held[i] = kfence_get(16 + 16 * (size_t)i, ANY)))
            return 1;
    /* 300 ms of allocations (300 ticks): none from the pool. */
    double end = now_s() + 0.3;
    while (now_s() < end) {
        char *p = malloc(64);
        if (sk_kfence_object(p))
            return 2;
        free(p);
        usleep(50);
    }
    free(held[2]);
    char *p = kfence_get(64, ANY);
    if (!p)
        return 3;
    free(p);
    for (int i = 0; i < 4; i++)
        if (i != 2)
            free(held[i]);
    return 0;
}

/* A fault on a page nobody maps (just unmapped): not in the pool. */
static void wild_fault(void)
{
    char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        _exit(92);
    munmap(m, 4096);
    *(volatile char *)m = 1;
}

static void own_handler(int sig)
{
    (void)sig;
    _exit(42);
}

/* Installs its SIGSEGV handler before the first malloc sets KFENCE up. */
static int chain_run(void)
{
    signal(SIGSEGV, own_handler);
    free(malloc_fn(32));
    if (!kfence_get(32, ANY))
        return 3;
    wild_fault();
    return 4;
}

int main(int argc, char **argv)
{
    const char *opts = getenv("SLABKIT_OPTIONS");
    if (argc > 1 && !strcmp(argv[1], "--pool-full"))
        return pool_full_run();
    if (argc > 1 && !strcmp(argv[1], "--chain"))
        return chain_run();
    if (!opts || !strstr(opts, "kfence=1")) {
        setenv("SLABKIT_OPTIONS", "kfence=1", 1);
        execl("/proc/self/exe", argv[0], (char *)NULL);
        BAIL("exec /proc/self/exe failed");
    }
    bail_out_after(240, "kfence test hung");
    plan((int)(sizeof cases / sizeof cases[0]) + 12);
    for (size_t i = 0; i < (sizeof cases / sizeof cases[0]); i++)
        run_case(&cases[i]);
    good_cases();

    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("SLABKIT_OPTIONS", "kfence=1,kfence_pages=4", 1);
        execl("/proc/self/exe", argv[0], "--pool-full", (char *)NULL);
        _exit(99);
    }
    int status;
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "a full pool (kfence_pages=4) skips sampling until an object is freed");
    if (!WIFEXITED(status) || WEXITSTATUS(status))
        diag("status %#x", status);

    int err[2];
    if (pipe(err))
        BAIL("pipe");
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        signal(SIGALRM, SIG_DFL);
        close(err[0]);
        dup2(err[1], 2);
        wild_fault();
        _exit(93);
    }
    close(err[1]);
    char buf[256];
    ssize_t got = read(err[0], buf, sizeof buf);
    close(err[0]);
    waitpid(pid, &status, 0);
    ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV && got == 0,
       "a fault outside the pool kills with SIGSEGV, no report (the default action, chained)");
    if (!WIFSIGNALED(status) || got)
        diag("status %#x, %zd bytes on stderr", status, got);

    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", argv[0], "--chain", (char *)NULL);
        _exit(99);
    }
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 42,
       "a SIGSEGV handler installed before KFENCE's still gets faults outside the pool");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 42)
        diag("status %#x", status);
    return done_testing();
}
