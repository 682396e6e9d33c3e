/*
 * objperslab — allocator=slab sizes kmalloc caches as the kernel's SLAB
 * did, before and after "use struct page for slab management" (seed 000):
 * objects per slab, pages per slab, object size, limit and batchcount of
 * kmalloc-32 ... kmalloc-512 equal the seed's /proc/slabinfo, read both
 * through sk_cache_info and from sk_slabinfo's text.  And in SLAB mode a
 * double free and a free of an object never handed out are still caught
 * (in a child, whose abort message is checked).
 *
 * SLABKIT_OPTIONS is read before the first allocation, so the modes are
 * set from outside: tests/modes/slab_classic.t runs this binary with
 * allocator=slab,slab_mgmt=onslab and =page.  Under the default (SLUB)
 * it checks only that SLUB keeps no header: objperslab = slab / size.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "os/os.h"
#include "slabkit.h"
#include "tap.h"

struct row {
    const char *name;
    unsigned objsize, before, after, limit, batch;
};

/* The seed's table (Joonsoo Kim, 2014-01-09): objperslab before / after. */
static const struct row seed[] = {
    { "kmalloc-32", 32, 112, 113, 120, 60 },
    { "kmalloc-64", 64, 59, 60, 120, 60 },
    { "kmalloc-96", 128, 30, 31, 120, 60 },
    { "kmalloc-128", 128, 30, 31, 120, 60 },
    { "kmalloc-192", 192, 20, 20, 120, 60 },
    { "kmalloc-256", 256, 15, 15, 120, 60 },
    { "kmalloc-512", 512, 8, 8, 54, 27 },
};

/* The limit an array holds: SLAB's, up to the arrays' room (117 of its
 * 120; the batchcount stays SLAB's 60). */
static unsigned held(unsigned limit)
{
    return limit < SK_ARRAY_SIZE_MAX ? limit : SK_ARRAY_SIZE_MAX;
}

static void *volatile escape;

/* The child frees p twice (or frees q, never handed out); the parent
 * checks that it died by SIGABRT saying `want`. */
static void caught(int never_handed_out, const char *want, const char *what)
{
    int fd[2];
    if (pipe(fd))
        BAIL("pipe");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        if (never_handed_out) {
            /* A fresh cache: objects come in address order, so the one
             * after the second was never handed out. */
            sk_cache_t *c = sk_cache_create("objperslab_fresh", 48, 0, 0, NULL);
            char *p = sk_cache_alloc(c), *q = sk_cache_alloc(c);
            sk_cache_free(c, q + (q - p));
        } else {
            /* q keeps the slab alive; the trim sends p from the array
             * back to its slab's index freelist, where the search finds
             * it. */
            char *p = malloc(40), *q = malloc(40);
            escape = q;        /* the compiler may not drop a pair */
            escape = p;
            free(p);
            sk_trim();
            free(escape);      /* p again */
            free(q);
        }
        _exit(0);
    }
    close(fd[1]);
    char buf[512] = "";
    ssize_t n = read(fd[0], buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    if (!ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(buf, want), "%s", what))
        diag("status %d, stderr: %s", st, buf);
}

int main(void)
{
    void *warm = malloc(1);   /* reads SLABKIT_OPTIONS */
    free(warm);
    long allocator = sk_option("allocator"), mgmt = sk_option("slab_mgmt");
    if (allocator != SK_ALLOC_SLAB) {
        struct sk_cache_info info;
        is(sk_cache_info("kmalloc-64", &info), 0, "kmalloc-64 exists");
        is(info.objs_per_slab, (4096u << info.order) / 64, "SLUB: kmalloc-64 has no header (%u a slab)",
           info.objs_per_slab);
        return done_testing();
    }
    int onslab = mgmt == SK_SLAB_MGMT_ONSLAB;
    diag("allocator=slab,slab_mgmt=%s (%s the seed)", onslab ? "onslab" : "page", onslab ? "before" : "after");

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    sk_slabinfo(f);
    fclose(f);
    for (size_t i = 0; i < sizeof seed / sizeof seed[0]; i++) {
        const struct row *r = &seed[i];
        unsigned want = onslab ? r->before : r->after;
        struct sk_cache_info info;
        if (sk_cache_info(r->name, &info)) {
            ok(0, "%s exists", r->name);
            continue;
        }
        ok(info.objs_per_slab == want && info.order == 0 && info.size == r->objsize,
           "%s: objsize %zu, %u objects in a slab of %u page(s) (seed: %u, %u, 1)", r->name, info.size,
           info.objs_per_slab, 1u << info.order, r->objsize, want);
        ok(info.array_capacity == held(r->limit) && info.batch == r->batch,
           "%s: tunables %u %u (seed: %u %u; an array holds at most %u)", r->name, info.array_capacity,
           info.batch, r->limit, r->batch, SK_ARRAY_SIZE_MAX);
        /* The same figures in the /proc/slabinfo text. */
        char line[64];
        snprintf(line, sizeof line, "\n%-17s ", r->name);
        const char *l = strstr(text, line);
        unsigned objsize = 0, per = 0, pages = 0, limit = 0;
        if (l)
            sscanf(l + strlen(line), "%*u %*u %u %u %u : tunables %u", &objsize, &per, &pages, &limit);
        ok(l && objsize == r->objsize && per == want && pages == 1 && limit == held(r->limit),
           "%s: slabinfo line says %u %u %u, limit %u", r->name, objsize, per, pages, limit);
    }
    free(text);

    /* Many objects, freed in another order: the index freelists and lists
     * stay consistent and every object comes back. */
    struct sk_cache_info info;
    sk_trim();
    sk_cache_info("kmalloc-64", &info);
    unsigned long active0 = info.active_objs;
    enum { N = 20000 };
    static void *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = malloc((size_t)(i % 600) + 1);
        memset(p[i], 0x5a, (size_t)(i % 600) + 1);
    }
    for (int i = 0; i < N; i += 2)
        free(p[i]);
    for (int i = 1; i < N; i += 2)
        free(p[i]);
    sk_trim();
    sk_cache_info("kmalloc-64", &info);
    is(info.active_objs, active0, "kmalloc-64: every object back after %d mixed-size frees (%lu slabs left)", N,
       info.num_slabs);

    caught(0, "double free", "allocator=slab: a double free is caught");
    caught(1, "an object never handed out", "allocator=slab: a free of an object never handed out is caught");
    return done_testing();
}
