/*
 * leak_check.c — leak_check=1 and sk_leak_check(), slabkit's kmemleak.
 * Each case is this program re-executed, its stdout and stderr pipes the
 * parent reads:
 *
 *  - "exit" with leak_check=1: the child leaks three 48-byte objects from
 *    one place (the pointer overwritten), keeps an 80-byte object
 *    referenced from a global and a 112-byte one referenced only from a
 *    96-byte heap object the global holder points to, and a 4-page large
 *    block from a global, and a 64-byte one through a pointer 20 bytes
 *    into it; it prints every address, then exit(0).  The
 *    report at exit lists exactly the three leaks, with their sizes, in
 *    kmemleak's format, and none of the referenced objects;
 *    The same under allocator=slab (both slab_mgmt layouts) and sheaves=0;
 *  - "ondemand" without the option: sk_leak_check() returns 3 and prints
 *    the same three; once the global's pointer is cleared it returns 4;
 *    an object referenced only from the stack of another thread (asleep
 *    in a system call) or of the caller is not reported; a leaked exact
 *    large block and a leaked direct mapping are reported with their
 *    sizes, those a global holds are not;
 *  - "kfence" with leak_check=1,kfence=1: an 80-byte object whose only
 *    pointer is inside a KFENCE-sampled object (kept by a global) is not
 *    reported: sampled objects are scanned as roots;
 *  - real programs under LD_PRELOAD with leak_check=1 (sort, python3):
 *    they exit normally and every report entry is well formed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slabkit.h"
#include "tap.h"

/* ---- the child ---- */

struct holder {
    void *inner;
    char pad[88];
};
_Static_assert(sizeof(struct holder) == 96, "a 96-byte holder");

static void *global_ref;              /* 80 bytes */
static struct holder *global_holder;  /* 96 bytes -> 112 bytes */
static void *global_large;            /* 4 pages */
static char *global_interior;         /* 20 bytes into a 64-byte object */

/* Leak three 48-byte objects; write their addresses as text into out. */
__attribute__((noinline)) static void leak_three(char *out, size_t len)
{
    void *volatile p = NULL;
    size_t n = 0;
    for (int i = 0; i < 3; i++) {
        p = malloc(48);
        memset(p, 'L', 48);
        n += (size_t)snprintf(out + n, len - n, "leak %p\n", p);
    }
    p = NULL;
}

__attribute__((noinline)) static void leak_large(void)
{
    void *volatile p = malloc(100 << 10);
    memset(p, 'E', 100 << 10);
    printf("leak_exact %p\n", p);
    p = malloc(80 << 20);
    memset(p, 'D', 4096);
    printf("leak_direct %p\n", p);
    p = NULL;
}

/* Overwrite the dead part of the stack below the caller, where the leaked
 * pointers sat: a conservative scan must not find them there. */
__attribute__((noinline)) static void scrub_stack(void)
{
    volatile char junk[16384];
    memset((char *)junk, 0, sizeof junk);
}

static int pipefd[2];
static void *volatile thread_obj_addr;

static void *sleeper(void *arg)
{
    (void)arg;
    void *volatile mine = malloc(144);     /* only this thread's stack has it */
    memset(mine, 'T', 144);
    thread_obj_addr = mine;
    char c;
    while (read(pipefd[0], &c, 1) < 0 && errno == EINTR)
        ;
    free(mine);
    return NULL;
}

/*
 * The first objects of the heap sit at the base of a slice, 64 MiB
 * aligned and often 4 GiB aligned: their addresses end in a small 32-bit
 * number, and a stack word made of a small int beside a pointer's upper
 * half (0x00007f09_00000001) points into them, which a conservative scan
 * must take for a reference.  Seen here once in a few runs under ASLR:
 * keep the objects under test clear of the first slots of each class.
 */
static void *volatile padding[4][64];

static void pad_heap(void)
{
    static const size_t sizes[4] = { 48, 80, 96, 112 };
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 64; i++)
            padding[k][i] = malloc(sizes[k]);
}

/* A KFENCE-sampled object (kfence=1) that holds the only pointer to an
 * 80-byte heap object; the sampled one is kept by a global. */
static void **global_kfence;

__attribute__((noinline)) static int kfence_holder(void)
{
    for (int tries = 0; tries < 50000 && !global_kfence; tries++) {
        void **p = malloc(64);
        if (p && sk_kfence_object(p)) {
            global_kfence = p;
            break;
        }
        free(p);
        usleep(200);
    }
    if (!global_kfence)
        return 6;
    void *volatile inner = malloc(80);
    memset(inner, 'F', 80);
    global_kfence[0] = inner;
    printf("kfence %p\nkfinner %p\n", (void *)global_kfence, inner);
    fflush(stdout);
    inner = NULL;
    return 0;
}

static int child(const char *mode)
{
    char text[256];
    if (!strcmp(mode, "kfence")) {
        int rc = kfence_holder();
        scrub_stack();
        if (rc)
            return rc;
        exit(0);
    }
    pad_heap();
    global_ref = malloc(80);
    memset(global_ref, 'G', 80);
    global_holder = malloc(sizeof *global_holder);
    memset(global_holder, 'H', sizeof *global_holder);
    global_holder->inner = malloc(112);
    memset(global_holder->inner, 'I', 112);
    global_large = malloc(4 * 4096);
    memset(global_large, 'B', 4 * 4096);
    global_interior = malloc(64);
    memset(global_interior, 'P', 64);
    global_interior += 20;
    leak_three(text, sizeof text);
    scrub_stack();
    printf("%sref %p\nholder %p\ninner %p\nlarge %p\ninterior %p\n", text, global_ref, (void *)global_holder,
           global_holder->inner, global_large, (void *)(global_interior - 20));
    fflush(stdout);
    if (!strcmp(mode, "exit"))
        exit(0);
    /* ondemand */
    long n = sk_leak_check();
    printf("first %ld\n", n);
    fflush(stdout);
    void *volatile keep = global_ref;     /* now only on this stack */
    global_ref = NULL;
    n = sk_leak_check();
    printf("stack %ld\n", n);
    keep = NULL;
    (void)keep;
    scrub_stack();
    n = sk_leak_check();
    printf("second %ld\n", n);
    fflush(stdout);
    /* Large blocks: a 100 KiB exact block and an 80 MiB direct mapping,
     * one of each leaked, one of each kept by a global. */
    static void *keep_large[2];
    keep_large[0] = malloc(100 << 10);
    keep_large[1] = malloc(80 << 20);
    leak_large();
    scrub_stack();
    n = sk_leak_check();
    printf("bigleaks %ld\n", n);
    fflush(stdout);
    if (!keep_large[0] || !keep_large[1])
        return 5;
    /* Another thread's stack, the thread asleep in read(2). */
    pthread_t t;
    if (pipe(pipefd) || pthread_create(&t, NULL, sleeper, NULL))
        return 3;
    while (!thread_obj_addr)
        usleep(1000);
    usleep(50000);                        /* let it reach read() */
    n = sk_leak_check();
    printf("thread %ld\n", n);
    fflush(stdout);
    if (write(pipefd[1], "x", 1) != 1)
        return 4;
    pthread_join(t, NULL);
    /* glibc keeps the joined thread's DTV with its cached stack: its
     * descriptor there is a root (docs/kmemleak.md), so no new report. */
    n = sk_leak_check();
    printf("joined %ld\n", n);
    fflush(stdout);
    return 0;
}

/* ---- the parent ---- */

/* Run argv with SLABKIT_OPTIONS=options (and LD_PRELOAD=preload); stdout
 * and stderr (NUL-terminated) back, the exit status returned. */
static int run(char *const argv[], const char *options, const char *preload, char *out, size_t outlen, char *err,
               size_t errlen)
{
    char outname[] = "/tmp/slabkit-leak-out.XXXXXX", errname[] = "/tmp/slabkit-leak-err.XXXXXX";
    int ofd = mkstemp(outname), efd = mkstemp(errname);
    if (ofd < 0 || efd < 0)
        BAIL("mkstemp: %s", strerror(errno));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(ofd, 1);
        dup2(efd, 2);
        if (options)
            setenv("SLABKIT_OPTIONS", options, 1);
        else
            unsetenv("SLABKIT_OPTIONS");
        if (preload)
            setenv("LD_PRELOAD", preload, 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    lseek(ofd, 0, SEEK_SET);
    lseek(efd, 0, SEEK_SET);
    tap_read_all(ofd, out, outlen);
    tap_read_all(efd, err, errlen);
    close(ofd);
    close(efd);
    unlink(outname);
    unlink(errname);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The address after `key ` in the child's stdout (the n-th such line). */
static unsigned long addr_of(const char *out, const char *key, int nth)
{
    char k[32];
    snprintf(k, sizeof k, "%s ", key);
    for (const char *p = out; (p = strstr(p, k)); p++)
        if ((p == out || p[-1] == '\n') && nth-- == 0)
            return strtoul(p + strlen(k), NULL, 16);
    return 0;
}

static long num_of(const char *out, const char *key)
{
    char k[32];
    snprintf(k, sizeof k, "\n%s ", key);
    const char *p = strstr(out, k);
    return p ? strtol(p + strlen(k), NULL, 10) : -100;
}

/* Whether the report has an entry for address a, and its size. */
static long reported_size(const char *err, unsigned long a)
{
    char k[64];
    snprintf(k, sizeof k, "unreferenced object 0x%lx (size ", a);
    const char *p = strstr(err, k);
    return p ? strtol(p + strlen(k), NULL, 10) : -1;
}

static int count_lines(const char *err, const char *prefix)
{
    int n = 0;
    size_t len = strlen(prefix);
    for (const char *p = err; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        n += !strncmp(p, prefix, len);
    return n;
}

/* Every entry is kmemleak's five parts, in order; a summary line follows. */
static int well_formed(const char *err, char *why, size_t whylen)
{
    int entries = 0;
    for (const char *p = err; (p = strstr(p, "unreferenced object 0x")); p++) {
        if (p != err && p[-1] != '\n')
            continue;
        const char *l1 = strchr(p, '\n');
        unsigned long a;
        size_t size;
        if (sscanf(p, "unreferenced object 0x%lx (size %zu):", &a, &size) != 2 || !l1 ||
            strncmp(l1 + 1, "  comm \"", 8) || !strstr(l1 + 1, ", pid ")) {
            snprintf(why, whylen, "entry %d: header or comm line: %.60s", entries, p);
            return 0;
        }
        const char *l2 = strchr(l1 + 1, '\n');
        if (!l2 || strncmp(l2 + 1, "  hex dump (first ", 18)) {
            snprintf(why, whylen, "entry %d: no hex dump", entries);
            return 0;
        }
        const char *l = strchr(l2 + 1, '\n');
        int rows = 0;
        while (l && !strncmp(l + 1, "    ", 4)) {
            rows++;
            l = strchr(l + 1, '\n');
        }
        if (rows != (size >= 17 ? 2 : 1) || !l || strncmp(l + 1, "  backtrace:", 12)) {
            snprintf(why, whylen, "entry %d: %d hex rows, then %.20s", entries, rows, l ? l + 1 : "(end)");
            return 0;
        }
        entries++;
    }
    if (!strstr(err, "slabkit: leak_check: ")) {
        snprintf(why, whylen, "no summary line");
        return 0;
    }
    snprintf(why, whylen, "%d entries", entries);
    return 1;
}

static bool have(const char *prog)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
    return system(cmd) == 0;
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "--child"))
        return child(argv[2]);
    bail_out_after(120, "leak_check hung");
    static char out[1 << 16], err[1 << 20];
    char why[160] = "";

    /* ---- at exit ---- */
    char *exit_argv[] = { "/proc/self/exe", "--child", "exit", NULL };
    int rc = run(exit_argv, "leak_check=1", NULL, out, sizeof out, err, sizeof err);
    is(rc, 0, "leak_check=1: the child exits normally");
    is(count_lines(err, "unreferenced object 0x"), 3, "the exit report lists exactly 3 unreferenced objects");
    for (int i = 0; i < 3; i++) {
        unsigned long a = addr_of(out, "leak", i);
        is(reported_size(err, a), 48, "leak %d (%#lx, from one place, pointer overwritten) reported with size 48", i, a);
    }
    ok(reported_size(err, addr_of(out, "ref", 0)) < 0, "the object a global points to is not reported");
    ok(reported_size(err, addr_of(out, "holder", 0)) < 0, "the heap object a global points to is not reported");
    ok(reported_size(err, addr_of(out, "inner", 0)) < 0,
       "the object only that heap object points to is not reported (transitive marking)");
    ok(reported_size(err, addr_of(out, "large", 0)) < 0, "a large block a global points to is not reported");
    ok(reported_size(err, addr_of(out, "interior", 0)) < 0,
       "an object a global points into (not at its start) is not reported");
    ok(well_formed(err, why, sizeof why), "kmemleak's format: header, comm, hex dump, backtrace (%s)", why);
    ok(strstr(err, "    4c 4c 4c 4c 4c 4c 4c 4c 4c 4c 4c 4c 4c 4c 4c 4c  LLLLLLLLLLLLLLLL\n") != NULL,
       "the hex dump shows the object's bytes");
    ok(strstr(err, "  backtrace: (not recorded: set debug=U)\n") != NULL, "backtrace: not recorded, says how");
    ok(strstr(err, "slabkit: leak_check: 3 unreferenced objects (144 bytes)") != NULL,
       "the summary counts 3 objects, 144 bytes");
    ok(strstr(err, "  kmalloc-48                  3 objects          144 bytes\n") != NULL,
       "and groups them by size class");
    if (tap_failed)
        diag("child stdout:\n%s\nchild stderr:\n%.4000s", out, err);

    /* The same under the other slab layers: SLAB (whose big caches kmalloc
     * their slab management: slabkit's own, never reported) and SLUB 2011. */
    static const char *const layers[] = { "allocator=slab", "allocator=slab,slab_mgmt=onslab", "sheaves=0" };
    for (unsigned k = 0; k < sizeof layers / sizeof layers[0]; k++) {
        char opts[128];
        snprintf(opts, sizeof opts, "leak_check=1,%s", layers[k]);
        rc = run(exit_argv, opts, NULL, out, sizeof out, err, sizeof err);
        int found = 0;
        for (int i = 0; i < 3; i++)
            found += reported_size(err, addr_of(out, "leak", i)) > 0;
        ok(rc == 0 && found == 3 && count_lines(err, "unreferenced object 0x") == 3,
           "%s: exactly the 3 leaks reported (rc %d, %d of them among %d entries)", opts, rc, found,
           count_lines(err, "unreferenced object 0x"));
    }

    /* A KFENCE object is a root: what only it points to is not reported. */
    char *kf_argv[] = { "/proc/self/exe", "--child", "kfence", NULL };
    rc = run(kf_argv, "leak_check=1,kfence=1", NULL, out, sizeof out, err, sizeof err);
    is(rc, 0, "leak_check=1,kfence=1: the child got a sampled object and exits normally");
    ok(addr_of(out, "kfinner", 0) && reported_size(err, addr_of(out, "kfinner", 0)) < 0 &&
       count_lines(err, "unreferenced object 0x") == 0,
       "an object only a KFENCE-sampled object points to is not reported (%d reported)",
       count_lines(err, "unreferenced object 0x"));

    /* ---- on demand ---- */
    char *od_argv[] = { "/proc/self/exe", "--child", "ondemand", NULL };
    rc = run(od_argv, NULL, NULL, out, sizeof out, err, sizeof err);
    is(rc, 0, "sk_leak_check() on demand: the child exits normally");
    is(num_of(out, "first"), 3, "sk_leak_check() returns 3");
    is(num_of(out, "stack"), 3, "an object held only on the caller's stack is not reported");
    is(num_of(out, "second"), 4, "once the global's pointer is gone (and the stack scrubbed) it returns 4");
    ok(!strstr(err, "(not scanned)") || strstr(err, "(0 not scanned)"), "no thread was left unscanned");
    /* A direct mapping is 64 MiB aligned; the 80 MiB one holds a 4 GiB
     * boundary in two cases of 64 (it starts on one, or starts 64 MiB
     * below one and runs across it), and a stack word of glibc's start-up
     * frames (a 32-bit 1 beside the upper half of a libc address:
     * 0x00007fXX_00000001) can point just past that boundary.  Then it
     * may rightly (conservatively) be kept. */
    unsigned long direct = addr_of(out, "leak_direct", 0);
    bool holds4g = (direct & 0xffffffffUL) == 0 || (direct >> 32) != ((direct + (80UL << 20) - 1) >> 32);
    long big = num_of(out, "bigleaks");
    ok(big == 6 || (holds4g && big == 5),
       "a leaked exact large block and a leaked direct mapping are counted (%ld%s)", big,
       holds4g ? ", the mapping holds a 4 GiB boundary" : "");
    is(reported_size(err, addr_of(out, "leak_exact", 0)), 100 << 10, "the exact block with its size (25 pages)");
    ok(reported_size(err, direct) == 80 << 20 || (holds4g && big == 5),
       "the direct mapping with its size (80 MiB)");
    char want[128];
    snprintf(want, sizeof want, "  %-20s %8d objects %12d bytes\n", "large blocks", 2, (100 << 10) + (80 << 20));
    ok(strstr(err, want) != NULL || big == 5, "the summary groups them as large blocks");
    is(num_of(out, "thread"), big, "an object held only on another thread's stack (asleep in read) is not reported");
    is(num_of(out, "joined"), num_of(out, "thread"),
       "once that thread is joined (its object freed), nothing new: not glibc's DTV of its cached stack");
    is(count_lines(err, "unreferenced object 0x"), 3 + 3 + 4 + big + big + big, "each scan reports its objects");

    /* ---- real programs under LD_PRELOAD ---- */
    const char *build = getenv("SK_BUILD");
    char lib[4096];
    snprintf(lib, sizeof lib, "%s/libslabkit.so", build ? build : "build");
    if (access(lib, R_OK) != 0) {
        printf("ok %d # SKIP %s not built\n", ++tap_n, lib);
        printf("ok %d # SKIP %s not built\n", ++tap_n, lib);
        return done_testing();
    }
    if (have("sort")) {
        char *sort_argv[] = { "sort", "/proc/self/maps", NULL };
        rc = run(sort_argv, "leak_check=1", lib, out, sizeof out, err, sizeof err);
        ok(rc == 0 && well_formed(err, why, sizeof why), "sort under LD_PRELOAD with leak_check=1: rc %d, report %s",
           rc, why);
    } else {
        printf("ok %d # SKIP no sort\n", ++tap_n);
    }
    if (have("python3")) {
        char *py_argv[] = { "python3", "-c", "import json; d = {str(i): [i] * 3 for i in range(1000)}; "
                                             "print(len(json.dumps(d)))", NULL };
        rc = run(py_argv, "leak_check=1", lib, out, sizeof out, err, sizeof err);
        ok(rc == 0 && well_formed(err, why, sizeof why) && strstr(out, "\n") != NULL,
           "python3 under LD_PRELOAD with leak_check=1 exits normally, its report well formed: rc %d, %s", rc, why);
    } else {
        printf("ok %d # SKIP no python3\n", ++tap_n);
    }
    return done_testing();
}
