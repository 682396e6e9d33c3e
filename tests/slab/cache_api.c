/*
 * cache_api — the sk_cache_* API does what slabkit.h promises:
 *
 *  - bad arguments (no name, size 0 or too large, alignment not a power of
 *    two or above a page) give NULL with errno EINVAL;
 *  - create/alloc/free/shrink/destroy: thousands of distinct, disjoint,
 *    writable objects; the counters of sk_cache_info follow every step;
 *    shrink of an idle cache returns every slab and says how many;
 *  - constructor semantics: the constructor runs once for each object when
 *    its slab is created (ctor calls == new slabs x objects per slab, after
 *    any number of alloc/free cycles), objects come back in the state they
 *    were freed in (the free pointer lives outside the object), and only
 *    slabs made after a shrink run it again;
 *  - sk_cache_destroy with objects allocated names the cache and the count
 *    on stderr, refuses (-1, EBUSY) and leaves the cache usable; once empty
 *    it is destroyed and gone from sk_cache_info;
 *  - freeing into the wrong cache, or twice, aborts with a message naming
 *    the cache (checked in forked children);
 *  - slab layout: no header inside a slab: objects per slab =
 *    (slab bytes - reserved, 0 under SLUB) / stride for every cache, and =
 *    (4096 << order) / size for every kmalloc class by default;
 *  - kmalloc classes: kmalloc-8 .. kmalloc-16384 in creation order, with
 *    kmalloc-64, -96, -128 and -192, at least four classes per doubling
 *    above 128 bytes.
 * (slab_reserved, the header this checked against, is retired: SLAB's
 * on-slab management is allocator=slab, tests/slab/objperslab.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slabkit.h"
#include "cpus.h"
#include "tap.h"

static long reserved_opt;

/* ---- stderr capture ---- */

static char captured[4096];

/* Run fn(arg) with fd 2 sent to a temporary file; the text lands in captured. */
static void capture_stderr(void (*fn)(void *), void *arg)
{
    char path[] = "/tmp/sk_cache_api.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        BAIL("mkstemp: %s", strerror(errno));
    unlink(path);
    int saved = dup(2);
    dup2(fd, 2);
    fn(arg);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, captured, sizeof captured - 1, 0);
    captured[n > 0 ? n : 0] = 0;
    close(fd);
}

/* ---- bad arguments ---- */

static void bad_args(void)
{
    static const struct { const char *name; size_t size, align; const char *why; } bad[] = {
        { NULL, 64, 0, "no name" },
        { "bad", 0, 0, "size 0" },
        { "bad", (size_t)1 << 20, 0, "size 1 MiB" },
        { "bad", SIZE_MAX, 0, "size SIZE_MAX" },
        { "bad", 64, 3, "align 3" },
        { "bad", 64, 24, "align 24" },
        { "bad", 64, 8192, "align 8192 (above a page)" },
        { "bad", 64, (size_t)1 << 40, "align 2^40" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        sk_cache_t *c = sk_cache_create(bad[i].name, bad[i].size, bad[i].align, 0, NULL);
        ok(!c && errno == EINVAL, "sk_cache_create with %s: NULL, EINVAL (errno %d)", bad[i].why, errno);
    }
    sk_cache_free(NULL, NULL);   /* documented no-op for a NULL object: must not crash */
    ok(1, "sk_cache_free(cache, NULL) is a no-op");
}

/* ---- create/alloc/free/shrink/destroy ---- */

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

#define NOBJ 5000
static void *objs[NOBJ];

static void lifecycle(const char *name, size_t size, size_t align)
{
    int nobj = (int)((8u << 20) / size);
    if (nobj > NOBJ)
        nobj = NOBJ;
    sk_cache_t *c = sk_cache_create(name, size, align, 0, NULL);
    if (!ok(c, "%s: created (size %zu, align %zu)", name, size, align))
        return;
    ok(!strcmp(sk_cache_name(c), name), "%s: sk_cache_name", name);
    is(sk_cache_object_size(c), size, "%s: sk_cache_object_size", name);
    struct sk_cache_info info;
    is(sk_cache_info(name, &info), 0, "%s: sk_cache_info finds it", name);
    is(info.num_slabs + info.active_objs + info.num_objs, 0, "%s: new cache holds nothing", name);
    ok(info.size >= size && info.size % info.align == 0, "%s: stride %zu >= size, multiple of align %zu",
       name, info.size, info.align);
    is(info.objs_per_slab, ((SK_PAGE_SIZE << info.order) - info.reserved) / info.size,
       "%s: objects per slab = (slab bytes - reserved %u) / stride %zu (order %u)", name, info.reserved,
       info.size, info.order);

    int bad_write = 0;
    for (int i = 0; i < nobj; i++) {
        objs[i] = sk_cache_alloc(c);
        if (!objs[i])
            BAIL("%s: sk_cache_alloc returned NULL at %d", name, i);
        memset(objs[i], i & 0xff, size);
    }
    sk_cache_info(name, &info);
    is(info.active_objs, nobj, "%s: %d allocated, active_objs", name, nobj);
    is(info.num_objs, info.num_slabs * info.objs_per_slab, "%s: num_objs = num_slabs x objs_per_slab", name);
    ok(info.num_slabs >= (nobj + info.objs_per_slab - 1) / info.objs_per_slab,
       "%s: %lu slabs hold them", name, info.num_slabs);
    is(info.stat[SK_NEW_SLAB], info.num_slabs, "%s: new_slab counter = slabs made", name);
    /* Each allocation either popped the per-CPU array or refilled it. */
    is(info.stat[SK_ALLOC_FASTPATH] + info.stat[SK_ALLOC_SLOWPATH], nobj,
       "%s: alloc_fastpath %lu + alloc_slowpath %lu = allocations", name, info.stat[SK_ALLOC_FASTPATH],
       info.stat[SK_ALLOC_SLOWPATH]);
    for (int i = 0; i < nobj; i++) {
        unsigned char *p = objs[i];
        for (size_t k = 0; k < size; k++)
            if (p[k] != (i & 0xff))
                bad_write++;
    }
    is(bad_write, 0, "%s: every object keeps its own bytes (no overlap)", name);
    static void *sorted[NOBJ];
    memcpy(sorted, objs, sizeof sorted);
    qsort(sorted, (size_t)nobj, sizeof sorted[0], cmp_ptr);
    int overlap = 0, misaligned = 0;
    for (int i = 0; i < nobj; i++) {
        if ((uintptr_t)sorted[i] % info.align)
            misaligned++;
        if (i && (uintptr_t)sorted[i] - (uintptr_t)sorted[i - 1] < size)
            overlap++;
    }
    is(overlap, 0, "%s: objects distinct and disjoint", name);
    is(misaligned, 0, "%s: every object aligned to %zu", name, info.align);

    for (int i = 0; i < nobj; i += 2)
        sk_cache_free(c, objs[i]);
    sk_cache_info(name, &info);
    is(info.active_objs, nobj / 2, "%s: half freed, active_objs", name);
    for (int i = 1; i < nobj; i += 2)
        sk_cache_free(c, objs[i]);
    sk_cache_info(name, &info);
    is(info.active_objs, 0, "%s: all freed, active_objs 0", name);
    is(info.stat[SK_FREE_FASTPATH] + info.stat[SK_FREE_SLOWPATH], nobj,
       "%s: free_fastpath %lu + free_slowpath %lu = frees", name, info.stat[SK_FREE_FASTPATH],
       info.stat[SK_FREE_SLOWPATH]);
    unsigned long slabs = info.num_slabs;
    int freed = sk_cache_shrink(c);
    sk_cache_info(name, &info);
    is(freed, (long)slabs, "%s: shrink returns the number of slabs freed", name);
    is(info.num_slabs, 0, "%s: no slab left after shrink", name);
    is(info.num_objs + info.array_objs + info.partial_slabs + info.cpu_partial_slabs, 0,
       "%s: no object, array entry or partial slab left", name);
    is(info.stat[SK_FREE_SLAB], info.stat[SK_NEW_SLAB], "%s: free_slab = new_slab", name);
    is(sk_cache_shrink(c), 0, "%s: a second shrink frees nothing", name);

    /* Reuse after shrink. */
    void *p = sk_cache_alloc(c);
    ok(p, "%s: alloc after shrink", name);
    sk_cache_free(c, p);
    is(sk_cache_destroy(c), 0, "%s: destroy of an empty cache", name);
    ok(sk_cache_info(name, &info) == -1, "%s: gone from sk_cache_info after destroy", name);
}

/* ---- constructor ---- */

#define CTOR_SIZE 40
#define CTOR_MAGIC 0xC0FFEE00D15EA5E5ull

struct ctor_obj {
    uint64_t magic;          /* set by the constructor only */
    uint64_t self;           /* address of the object, set by the constructor */
    uint64_t generation;     /* user state, left in place across free */
    char rest[CTOR_SIZE - 24];
};

static long ctor_calls;

static void ctor(void *p)
{
    struct ctor_obj *o = p;
    o->magic = CTOR_MAGIC;
    o->self = (uint64_t)(uintptr_t)p;
    o->generation = 0;
    memset(o->rest, 0x5a, sizeof o->rest);
    ctor_calls++;
}

/* A fresh object is exactly what the constructor made, or what we left in
 * it at its last free (generation > 0, same magic and self). */
static int constructed(const struct ctor_obj *o)
{
    if (o->magic != CTOR_MAGIC || o->self != (uint64_t)(uintptr_t)o)
        return 0;
    for (size_t k = 0; k < sizeof o->rest; k++)
        if ((unsigned char)o->rest[k] != 0x5a)
            return 0;
    return 1;
}

static void ctor_semantics(void)
{
    const char *name = "test-ctor";
    sk_cache_t *c = sk_cache_create(name, sizeof(struct ctor_obj), 0, 0, ctor);
    if (!ok(c, "%s: created with a constructor", name))
        return;
    struct sk_cache_info info;
    sk_cache_info(name, &info);
    is(ctor_calls, 0, "%s: no constructor call before the first slab", name);

    int n = 3000, bad = 0;
    for (int i = 0; i < n; i++) {
        objs[i] = sk_cache_alloc(c);
        if (!constructed(objs[i]) || ((struct ctor_obj *)objs[i])->generation != 0)
            bad++;
    }
    is(bad, 0, "%s: every object of a new slab comes constructed", name);
    sk_cache_info(name, &info);
    is(ctor_calls, (long)(info.stat[SK_NEW_SLAB] * info.objs_per_slab),
       "%s: ctor ran once per object of each new slab (%lu slabs x %u)", name, info.stat[SK_NEW_SLAB],
       info.objs_per_slab);
    is(ctor_calls, (long)info.num_objs, "%s: ctor calls = num_objs", name);
    long after_first = ctor_calls;

    /* Free in constructed state (with our generation mark); alloc again,
     * many times.  An object comes back either with our mark (it was never
     * reconstructed: the free pointer lives outside the object) or freshly
     * constructed because its slab went empty, was freed and made again;
     * never more fresh objects than constructor calls.  Counted over all
     * cycles, not per cycle: a slab made in one cycle may hand its other
     * constructed objects out in the next (and the first fill left
     * num_objs - n constructed objects never handed out). */
    int cycles = 20, survived = 0, fresh = 0, total = 0;
    for (int cyc = 1; cyc <= cycles; cyc++) {
        for (int i = 0; i < n; i++) {
            ((struct ctor_obj *)objs[i])->generation = (uint64_t)cyc;
            sk_cache_free(c, objs[i]);
        }
        int fresh_now = 0;
        for (int i = 0; i < n; i++) {
            struct ctor_obj *o = sk_cache_alloc(c);
            objs[i] = o;
            if (!constructed(o))
                bad++;
            else if (o->generation == (uint64_t)cyc)
                survived++;
            else if (o->generation == 0)
                fresh_now++;
            else
                bad++;
            total++;
        }
        fresh += fresh_now;
    }
    is(bad, 0, "%s: %d alloc/free cycles: every object constructed, with our mark or fresh", name, cycles);
    is(survived + fresh, total, "%s: %d kept their state at free, %d came from new slabs", name, survived, fresh);
    ok(fresh <= ctor_calls - n, "%s: never more fresh objects than constructor calls (%d fresh, %ld calls past the first %d objects)",
       name, fresh, ctor_calls - n, n);
    sk_cache_info(name, &info);
    is(ctor_calls, (long)(info.stat[SK_NEW_SLAB] * info.objs_per_slab),
       "%s: ctor calls still = new slabs x objects per slab (%ld calls, %lu slabs freed meanwhile)", name,
       ctor_calls, info.stat[SK_FREE_SLAB]);
    if (ctor_calls != after_first)
        diag("%s: %ld constructor calls for slabs that went empty and were made again", name,
             ctor_calls - after_first);

    /* A working set that stays within the cached slabs: a million
     * allocations, no constructor call.  On one CPU: moved to another
     * mid-loop (a busy machine), the thread finds that CPU's slab or
     * array empty and a new slab is made there, rightly (1 run in 30
     * under load, with sheaves=0,cpu_partial=0). */
    {
        cpu_set_t was;
        int pinned = sched_getaffinity(0, sizeof was, &was) == 0 && pin_first_cpu() >= 0;
        void *few[16];
        for (int k = 0; k < 16; k++)
            few[k] = sk_cache_alloc(c);   /* may need a new slab: all others are in use */
        long calls0 = ctor_calls;
        for (int r = 0; r < 60000; r++)
            for (int k = 0; k < 16; k++) {
                sk_cache_free(c, few[k]);
                few[k] = sk_cache_alloc(c);
            }
        for (int k = 0; k < 16; k++)
            sk_cache_free(c, few[k]);
        if (pinned)
            sched_setaffinity(0, sizeof was, &was);
        is(ctor_calls, calls0, "%s: ~1M alloc/free of a small working set: no constructor call", name);
    }

    /* Shrink gives the slabs back; objects allocated after run the
     * constructor again, once per object of the new slabs. */
    for (int i = 0; i < n; i++)
        sk_cache_free(c, objs[i]);
    int freed = sk_cache_shrink(c);
    sk_cache_info(name, &info);
    ok(freed > 0 && info.num_slabs == 0, "%s: shrink freed %d slabs, none left", name, freed);
    long before = ctor_calls;
    for (int i = 0; i < n; i++) {
        objs[i] = sk_cache_alloc(c);
        if (!constructed(objs[i]) || ((struct ctor_obj *)objs[i])->generation != 0)
            bad++;
    }
    sk_cache_info(name, &info);
    is(bad, 0, "%s: after shrink, objects come freshly constructed", name);
    is(ctor_calls - before, (long)info.num_objs, "%s: after shrink, ctor ran for each object of the new slabs",
       name);
    is(ctor_calls, (long)(info.stat[SK_NEW_SLAB] * info.objs_per_slab),
       "%s: ctor calls = new slabs x objects per slab over the cache's life", name);
    for (int i = 0; i < n; i++)
        sk_cache_free(c, objs[i]);
    is(sk_cache_destroy(c), 0, "%s: destroyed", name);
}

/* ---- destroy refusal ---- */

struct destroy_call { sk_cache_t *c; int rc, err; };

static void call_destroy(void *arg)
{
    struct destroy_call *d = arg;
    errno = 0;
    d->rc = sk_cache_destroy(d->c);
    d->err = errno;
}

static void destroy_busy(void)
{
    const char *name = "test-destroy-busy";
    sk_cache_t *c = sk_cache_create(name, 100, 0, 0, NULL);
    if (!ok(c, "%s: created", name))
        return;
    enum { LIVE = 37 };
    void *live[LIVE];
    for (int i = 0; i < LIVE; i++)
        live[i] = sk_cache_alloc(c);
    struct destroy_call d = { c, 0, 0 };
    capture_stderr(call_destroy, &d);
    is(d.rc, -1, "%s: destroy with %d objects allocated returns -1", name, LIVE);
    is(d.err, EBUSY, "%s: errno EBUSY", name);
    ok(strstr(captured, name) != NULL, "%s: the message names the cache", name);
    ok(strstr(captured, "37") != NULL, "%s: the message gives the count 37", name);
    diag("stderr was: %.*s", (int)strcspn(captured, "\n"), captured);
    struct sk_cache_info info;
    ok(sk_cache_info(name, &info) == 0 && info.active_objs == LIVE, "%s: cache kept, %lu objects", name,
       info.active_objs);

    /* Still usable after the refusal. */
    void *p = sk_cache_alloc(c);
    ok(p, "%s: alloc after the refusal", name);
    sk_cache_free(c, p);
    for (int i = 0; i < LIVE - 1; i++)
        sk_cache_free(c, live[i]);
    capture_stderr(call_destroy, &d);
    is(d.rc, -1, "%s: one object left: still refused", name);
    ok(strstr(captured, name) && strstr(captured, " 1 "), "%s: and the message says 1", name);
    sk_cache_free(c, live[LIVE - 1]);
    capture_stderr(call_destroy, &d);
    is(d.rc, 0, "%s: empty: destroyed", name);
    is(captured[0], 0, "%s: no message for a clean destroy", name);
    ok(sk_cache_info(name, &info) == -1, "%s: gone", name);

    /* The name is free again. */
    c = sk_cache_create(name, 100, 0, 0, NULL);
    ok(c && sk_cache_info(name, &info) == 0, "%s: the name can be used again", name);
    is(sk_cache_destroy(c), 0, "%s: the new cache destroyed", name);
}

/* ---- bad frees abort (in a child) ---- */

struct child_out { int sig; char msg[512]; };

static struct child_out run_child(void (*fn)(void))
{
    struct child_out out = { 0, "" };
    int pfd[2];
    if (pipe(pfd))
        BAIL("pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit no_core = { 0, 0 };
        setrlimit(RLIMIT_CORE, &no_core);     /* the abort is expected: no core file */
        dup2(pfd[1], 2);
        close(pfd[0]);
        fn();
        _exit(0);
    }
    close(pfd[1]);
    size_t got = 0;
    ssize_t r;
    while ((r = read(pfd[0], out.msg + got, sizeof out.msg - 1 - got)) > 0)
        got += (size_t)r;
    out.msg[got] = 0;
    close(pfd[0]);
    int st;
    waitpid(pid, &st, 0);
    out.sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    return out;
}

static void wrong_cache_free(void)
{
    sk_cache_t *a = sk_cache_create("test-owner-a", 64, 0, 0, NULL);
    sk_cache_t *b = sk_cache_create("test-owner-b", 64, 0, 0, NULL);
    void *p = sk_cache_alloc(a);
    sk_cache_free(b, p);
}

static void double_cache_free(void)
{
    sk_cache_t *a = sk_cache_create("test-double", 64, 0, 0, NULL);
    void *p = sk_cache_alloc(a);
    sk_cache_free(a, p);
    sk_cache_free(a, p);
}

static void foreign_cache_free(void)
{
    static char not_slab[64];
    sk_cache_t *a = sk_cache_create("test-foreign", 64, 0, 0, NULL);
    sk_cache_free(a, not_slab);
}

static void bad_frees(void)
{
    struct child_out o = run_child(wrong_cache_free);
    ok(o.sig == SIGABRT, "free into the wrong cache aborts (signal %d)", o.sig);
    ok(strstr(o.msg, "test-owner-a") && strstr(o.msg, "test-owner-b"), "and names both caches: %.*s",
       (int)strcspn(o.msg, "\n"), o.msg);
    o = run_child(double_cache_free);
    ok(o.sig == SIGABRT, "sk_cache_free twice aborts (signal %d)", o.sig);
    ok(strstr(o.msg, "double free") && strstr(o.msg, "test-double"), "and says double free in the cache: %.*s",
       (int)strcspn(o.msg, "\n"), o.msg);
    o = run_child(foreign_cache_free);
    ok(o.sig == SIGABRT, "sk_cache_free of a pointer that is no object aborts (signal %d)", o.sig);
    ok(strstr(o.msg, "test-foreign") != NULL, "and names the cache: %.*s", (int)strcspn(o.msg, "\n"), o.msg);
}

/* ---- slab layout and kmalloc classes ---- */

#define MAXC 256
static struct sk_cache_info all[MAXC];
static int nall;

static void collect(const struct sk_cache_info *i, void *arg)
{
    (void)arg;
    if (nall < MAXC)
        all[nall++] = *i;
}

static void layout_and_classes(void)
{
    /* Make every cache have a slab, so order and objects are in use. */
    nall = 0;
    sk_cache_foreach(collect, NULL);
    int nk = 0, bad_layout = 0, bad_kmalloc_layout = 0, seq_bad = 0;
    unsigned long sizes[MAXC];
    for (int i = 0; i < nall; i++) {
        struct sk_cache_info *c = &all[i];
        if (c->objs_per_slab != ((SK_PAGE_SIZE << c->order) - c->reserved) / c->size ||
            c->objs_per_slab == 0 || c->reserved != (reserved_opt + c->align - 1) / c->align * c->align) {
            bad_layout++;
            diag("%s: order %u size %zu reserved %u objperslab %u", c->name, c->order, c->size, c->reserved,
                 c->objs_per_slab);
        }
        unsigned long n;
        char tail;
        if (sscanf(c->name, "kmalloc-%lu%c", &n, &tail) != 1)
            continue;
        if (nk && n <= sizes[nk - 1])
            seq_bad++;
        sizes[nk++] = n;
        if (c->size != n || c->object_size != n)
            bad_kmalloc_layout++;
        if (reserved_opt == 0 && c->objs_per_slab != (SK_PAGE_SIZE << c->order) / c->size) {
            bad_kmalloc_layout++;
            diag("%s: objperslab %u, (4096 << %u) / %zu = %zu", c->name, c->objs_per_slab, c->order, c->size,
                 (SK_PAGE_SIZE << c->order) / c->size);
        }
    }
    is(bad_layout, 0, "every cache: objperslab = ((4096 << order) - reserved) / size, reserved = %ld aligned",
       reserved_opt);
    is(bad_kmalloc_layout, 0, "every kmalloc class: stride = class size%s", reserved_opt ? "" :
       ", objperslab = (4096 << order) / size exactly (no header in the slab)");
    ok(nk > 0 && sizes[0] == 8, "kmalloc-8 is the first class");
    ok(nk > 0 && sizes[nk - 1] == 16384, "kmalloc-16384 is the last class (larger: the page allocator)");
    is(seq_bad, 0, "kmalloc classes come in increasing size order");
    int have[4] = { 0 };
    const unsigned long need[4] = { 64, 96, 128, 192 };
    for (int i = 0; i < nk; i++)
        for (int k = 0; k < 4; k++)
            if (sizes[i] == need[k])
                have[k] = 1;
    for (int k = 0; k < 4; k++)
        ok(have[k], "kmalloc-%lu present", need[k]);
    int thin = 0;
    for (unsigned long lo = 128; lo < 16384; lo *= 2) {
        int cnt = 0;
        for (int i = 0; i < nk; i++)
            if (sizes[i] > lo && sizes[i] <= 2 * lo)
                cnt++;
        if (cnt < 4) {
            thin++;
            diag("only %d classes in (%lu, %lu]", cnt, lo, 2 * lo);
        }
    }
    is(thin, 0, "at least 4 classes per doubling from 128 to 16384");
    int waste = 0;
    for (int i = 1; i < nk; i++)
        if (sizes[i - 1] >= 128 && (sizes[i] - sizes[i - 1]) * 4 > sizes[i])
            waste++;
    is(waste, 0, "above 128 bytes, internal waste of every class under 25%%");
}

int main(void)
{
    printf("# cache_api\n");
    bad_args();
    lifecycle("test-small", 8, 0);
    lifecycle("test-24", 24, 0);
    lifecycle("test-100", 100, 0);
    lifecycle("test-align-512", 200, 512);
    lifecycle("test-3000", 3000, 0);
    lifecycle("test-20000", 20000, 0);
    ctor_semantics();
    destroy_busy();
    bad_frees();
    layout_and_classes();
    return done_testing();
}
