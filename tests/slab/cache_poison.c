/*
 * cache_poison — memcheck and ASan see sk_cache objects (src/debug/poison.h):
 * a handed-out object is addressable for its object_size bytes and no
 * further, a free one (freed, or never handed out) is not addressable at
 * all (only the allocator's two words after it are), an object of a cache with a constructor comes back defined and one
 * without comes back undefined (memcheck), and a destroyed cache's pages
 * are plain memory again for whoever gets them next.  The allocator's own
 * accesses to free objects (free pointers, free markers) raise nothing:
 * a stress of alloc and free across two threads, shrink and destroy runs
 * with no tool error.
 *
 * Where the checks run: in the `make asan` build (ASan), and under valgrind
 * (tests/programs/memcheck_cache.t runs this program under memcheck with
 * --error-exitcode, so any error memcheck reports fails it).  Natively only
 * the stress runs (contents and constructed state survive every cycle).
 * In the ASan build, forked children read and write an object after its
 * sk_cache_free: ASan reports use-after-poison and the child exits non-zero.
 *
 *   cache_poison                 the TAP test
 *   cache_poison uaf-read|uaf-write|uninit
 *                                one bug for the tool to report (memcheck_cache.t)
 *   cache_poison has-valgrind    exit 0 when slabkit was built with the
 *                                memcheck annotations
 *
 * ASAN: yes
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slabkit.h"
#include "debug/poison.h"
#include "tap.h"

/* ---- what the tool says about memory ---- */

static bool under_valgrind(void)
{
#if SK_VALGRIND
    return RUNNING_ON_VALGRIND != 0;
#else
    return false;
#endif
}

static bool tool_present(void)
{
    return SK_ASAN || under_valgrind();
}

/* Every byte of [p, p+n) addressable, as the tool sees it. */
static bool addressable(const void *p, size_t n)
{
#if SK_ASAN
    return __asan_region_is_poisoned((void *)p, n) == NULL;
#elif SK_VALGRIND
    unsigned char vbits[4096];
    if (n > sizeof vbits)
        BAIL("addressable: %zu bytes", n);
    return VALGRIND_GET_VBITS(p, vbits, n) == 1;   /* 3: some byte is not */
#else
    (void)p, (void)n;
    return true;
#endif
}

/* No byte of [p, p+n) addressable. */
static bool unaddressable(const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (addressable((const char *)p + i, 1))
            return false;
    return true;
}

/* memcheck: 1 every byte defined, 0 every byte undefined, -1 mixed or no
 * memcheck. */
static int definedness(const void *p, size_t n)
{
#if SK_VALGRIND
    unsigned char vbits[4096];
    if (!under_valgrind() || n > sizeof vbits || VALGRIND_GET_VBITS(p, vbits, n) != 1)
        return -1;
    size_t zero = 0, ones = 0;
    for (size_t i = 0; i < n; i++) {
        zero += vbits[i] == 0;
        ones += vbits[i] == 0xff;
    }
    return zero == n ? 1 : ones == n ? 0 : -1;
#else
    (void)p, (void)n;
    return -1;
#endif
}

/* ---- the bugs, one per run (for the tools to report) ---- */

struct rec { long id; int flags; int count; char name[24]; };   /* 40 bytes */

static sk_cache_t *rec_cache(void)
{
    sk_cache_t *c = sk_cache_create("poison_rec", sizeof(struct rec), 0, 0, NULL);
    if (!c)
        BAIL("sk_cache_create");
    return c;
}

static volatile int sink;

__attribute__((noinline)) static int uaf_read(void)
{
    sk_cache_t *c = rec_cache();
    struct rec *r = sk_cache_alloc(c);
    r->id = 1;
    r->count = 7;
    sk_cache_free(c, r);
    sink = r->count;            /* the bug: read after free */
    return 0;
}

__attribute__((noinline)) static int uaf_write(void)
{
    sk_cache_t *c = rec_cache();
    struct rec *r = sk_cache_alloc(c);
    r->id = 2;
    sk_cache_free(c, r);
    r->flags = 1;               /* the bug: write after free */
    return 0;
}

__attribute__((noinline)) static int uninit_read(void)
{
    sk_cache_t *c = rec_cache();
    struct rec *r = sk_cache_alloc(c);
    r->id = 3;
    if (r->count > 0)           /* the bug: count was never set */
        sink = 1;
    sk_cache_free(c, r);
    return 0;
}

/* ---- the checks ---- */

static int ctor_calls;
static void fill_ctor(void *p)
{
    memset(p, 0x5a, 200);
    ctor_calls++;
}

static void check_states(void)
{
    /* 20 bytes: 4 bytes of slack before the allocator's words. */
    sk_cache_t *c = sk_cache_create("poison_20", 20, 0, 0, NULL);
    struct sk_cache_info info;
    if (sk_cache_info("poison_20", &info) != 0)
        BAIL("sk_cache_info(poison_20)");
    char *a = sk_cache_alloc(c);
    ok(a && addressable(a, 20), "a handed-out object is addressable for its 20 bytes");
    ok(unaddressable(a + 20, 4), "the 4 bytes past object_size are not");
    ok(addressable(a + 24, 16), "the allocator's two words after it (free pointer, marker) are");
    ok(unaddressable(a + info.size, 20), "the next object of the new slab (never handed out) is not");
    if (under_valgrind())
        is(definedness(a, 20), 0, "memcheck: it comes undefined (no constructor)");
    memset(a, 1, 20);
    sk_cache_free(c, a);
    ok(unaddressable(a, 24), "after sk_cache_free none of its bytes is addressable");
    char *b = sk_cache_alloc(c);
    ok(b && addressable(b, 20) && unaddressable(b + 20, 4) && (b == a || unaddressable(a, 20)),
       "the next one handed out is addressable, object_size only (the freed one, if another, still not)");
    if (under_valgrind())
        is(definedness(b, 20), 0, "memcheck: undefined again, whatever it held");
    sk_cache_free(c, b);

    /* With a constructor: objects come back constructed, so defined. */
    sk_cache_t *k = sk_cache_create("poison_ctor", 200, 0, 0, fill_ctor);
    unsigned char *o = sk_cache_alloc(k);
    ok(o && o[0] == 0x5a && o[199] == 0x5a, "a constructed object comes out constructed");
    if (under_valgrind())
        is(definedness(o, 200), 1, "memcheck: and defined");
    ok(addressable(o + 200, 16), "its free pointer and marker, after the object, are the allocator's");
    o[10] = 0x5a;
    sk_cache_free(k, o);
    ok(unaddressable(o, 200), "freed, the constructed object is not addressable");
    unsigned char *o2 = sk_cache_alloc(k);
    if (under_valgrind())
        is(definedness(o2, 200), 1, "memcheck: defined when it comes back");
    sk_cache_free(k, o2);
    is(sk_cache_destroy(k), 0, "the constructor cache is destroyed");

    /* A destroyed cache's slabs go back to the page allocator unpoisoned:
     * the pages sk_alloc_pages hands out next are plain memory. */
    void *objs[600];
    for (int i = 0; i < 600; i++)
        objs[i] = sk_cache_alloc(c);
    uintptr_t page0 = (uintptr_t)objs[599] & ~(uintptr_t)4095;
    for (int i = 0; i < 600; i++)
        sk_cache_free(c, objs[i]);
    is(sk_cache_destroy(c), 0, "the 20-byte cache is destroyed");
    int reused = 0, clean = 0;
    void *pages[64];
    for (int i = 0; i < 64; i++) {
        pages[i] = sk_alloc_pages(0);
        if (pages[i] && (uintptr_t)pages[i] == page0) {
            reused++;
            clean += addressable(pages[i], 4096);
        }
        if (pages[i])
            memset(pages[i], 0, 4096);     /* a tool error here fails the run */
    }
    for (int i = 0; i < 64; i++)
        if (pages[i])
            sk_free_pages(pages[i], 0);
    if (reused)
        is(clean, reused, "a page of its last slab, handed out by sk_alloc_pages, is addressable");
    else
        diag("no page of the destroyed cache came back among 64 (not checked)");
}

/* ---- the stress: two threads, objects crossing between them ---- */

#define ROUNDS 4000
#define BATCH 24
struct xfer {                   /* objects for the other thread to free */
    pthread_mutex_t lock;
    void *objs[4 * BATCH];
    sk_cache_t *cache[4 * BATCH];
    int n;
};
struct worker {
    sk_cache_t *small, *ctor, *big;
    struct xfer *in, *out;
    unsigned long bad;
};

static void stamp(unsigned char *p, size_t n, unsigned char v)
{
    memset(p, v, n);
}
static bool stamped(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return false;
    return true;
}

static void *worker(void *arg)
{
    struct worker *w = arg;
    void *mine[BATCH];
    for (int r = 0; r < ROUNDS; r++) {
        sk_cache_t *c = r % 3 == 0 ? w->small : r % 3 == 1 ? w->ctor : w->big;
        size_t n = sk_cache_object_size(c);
        for (int i = 0; i < BATCH; i++) {
            unsigned char *p = sk_cache_alloc(c);
            if (!p) {
                w->bad++;
                mine[i] = NULL;
                continue;
            }
            if (c == w->ctor && !stamped(p, 200, 0x5a))
                w->bad++;               /* constructed state lost */
            if (c != w->ctor)
                stamp(p, n, (unsigned char)(r + i));
            mine[i] = p;
        }
        for (int i = 0; i < BATCH; i++) {
            unsigned char *p = mine[i];
            if (!p)
                continue;
            if (c != w->ctor && !stamped(p, n, (unsigned char)(r + i)))
                w->bad++;
            if (i & 1) {
                sk_cache_free(c, p);
                continue;
            }
            /* Hand every other object to the other thread to free. */
            pthread_mutex_lock(&w->out->lock);
            if (w->out->n < 4 * BATCH) {
                w->out->cache[w->out->n] = c;
                w->out->objs[w->out->n++] = p;
                p = NULL;
            }
            pthread_mutex_unlock(&w->out->lock);
            if (p)
                sk_cache_free(c, p);
        }
        pthread_mutex_lock(&w->in->lock);
        for (int i = 0; i < w->in->n; i++)
            sk_cache_free(w->in->cache[i], w->in->objs[i]);
        w->in->n = 0;
        pthread_mutex_unlock(&w->in->lock);
        if (r % 1000 == 999)
            sk_cache_shrink(w->small);
    }
    return NULL;
}

static void stress(void)
{
    sk_cache_t *small = sk_cache_create("poison_small", 8, 0, 0, NULL);
    sk_cache_t *ctor = sk_cache_create("poison_ctor2", 200, 0, 0, fill_ctor);
    sk_cache_t *big = sk_cache_create("poison_big", 512, 64, SK_CACHE_HWALIGN, NULL);
    ok(small && ctor && big, "three caches: 8 bytes, 200 with a constructor, 512 aligned");
    struct xfer x[2] = { { .lock = PTHREAD_MUTEX_INITIALIZER }, { .lock = PTHREAD_MUTEX_INITIALIZER } };
    struct worker w[2] = {
        { small, ctor, big, &x[0], &x[1], 0 },
        { small, ctor, big, &x[1], &x[0], 0 },
    };
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, worker, &w[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < x[i].n; j++)
            sk_cache_free(x[i].cache[j], x[i].objs[j]);
    is(w[0].bad + w[1].bad, 0, "%d rounds of %d objects on two threads, half freed by the other: "
       "every object whole, every constructed one constructed", ROUNDS, BATCH);
    sk_cache_shrink(small);
    sk_cache_shrink(ctor);
    sk_cache_shrink(big);
    ok(sk_cache_destroy(small) == 0 && sk_cache_destroy(ctor) == 0 && sk_cache_destroy(big) == 0,
       "all three destroyed empty");
}

/* ---- ASan: a forked child's use after free is reported ---- */

__attribute__((unused)) static void asan_child(int (*bug)(void), const char *what)
{
    int err;
    pid_t pid = tap_fork_stderr(&err);
    if (pid == 0) {
        bug();
        _exit(0);
    }
    static char buf[16384];
    int st = tap_child_stderr(pid, err, buf, sizeof buf);
    ok(WIFEXITED(st) && WEXITSTATUS(st) != 0, "%s: the child exits non-zero", what);
    bool said = strstr(buf, "AddressSanitizer: use-after-poison") != NULL;
    ok(said, "%s: ASan reports use-after-poison", what);
    ok(strstr(buf, what) != NULL, "the report's stack names %s", what);
    if (!said)
        diag("child stderr: %.600s", buf);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        if (!strcmp(argv[1], "uaf-read"))
            return uaf_read();
        if (!strcmp(argv[1], "uaf-write"))
            return uaf_write();
        if (!strcmp(argv[1], "uninit"))
            return uninit_read();
        if (!strcmp(argv[1], "has-valgrind"))
            return SK_VALGRIND ? 0 : 1;
        fprintf(stderr, "usage: %s [uaf-read|uaf-write|uninit|has-valgrind]\n", argv[0]);
        return 2;
    }
    bail_out_after(under_valgrind() ? 600 : 120, "cache_poison hung");
    if (tool_present()) {
        diag("checking with %s", SK_ASAN ? "ASan" : "memcheck");
        check_states();
    } else {
        diag("no tool watching (make asan, or under valgrind): the stress only");
    }
    stress();
#if SK_ASAN
    asan_child(uaf_read, "uaf_read");
    asan_child(uaf_write, "uaf_write");
#endif
    return done_testing();
}
