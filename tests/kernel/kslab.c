/*
 * kslab — the kernel's slab API (include/slabkit/linux/slab.h, on
 * include/slabkit/kernel.h), under its kernel names: caches and their
 * flags, gfp semantics, the bulk calls, the kmalloc family, pages, and
 * bad input (a child checks the message and the signal).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slabkit/linux/slab.h>

#include "tap.h"

struct node {
    unsigned long key;
    struct node *left, *right;
    char pad[40];
};

static int ctor_runs;
static void node_ctor(void *p)
{
    struct node *n = p;
    memset(n, 0, sizeof *n);
    n->key = 0xc0ffee;
    __atomic_fetch_add(&ctor_runs, 1, __ATOMIC_RELAXED);
}

static unsigned long active(const char *name)
{
    struct sk_cache_info info;
    return sk_cache_info(name, &info) == 0 ? info.active_objs : (unsigned long)-1;
}

static struct kmem_cache *victim;
static void double_free_in_bulk(void)
{
    void *p[3];
    if (kmem_cache_alloc_bulk(victim, GFP_KERNEL, 2, p) != 2)
        _exit(3);
    p[2] = p[0];
    kmem_cache_free_bulk(victim, 3, p);
}

static void wrong_cache_free(void)
{
    struct kmem_cache *other = kmem_cache_create("kslab_other", 64, 0, 0, NULL);
    void *o = kmem_cache_alloc(other, GFP_KERNEL);
    kmem_cache_free(victim, o);
}

static void panic_create(void)
{
    kmem_cache_create("", 64, 0, SLAB_PANIC, NULL);
}

int main(void)
{
    /* ---- caches ---- */
    ctor_runs = 0;
    struct kmem_cache *c = kmem_cache_create("kslab_node", sizeof(struct node), 0, SLAB_HWCACHE_ALIGN, node_ctor);
    ok(c != NULL, "kmem_cache_create with SLAB_HWCACHE_ALIGN and a constructor");
    struct node *n = kmem_cache_alloc(c, GFP_KERNEL);
    ok(n && n->key == 0xc0ffee && ctor_runs > 0, "kmem_cache_alloc gives a constructed object");
    ok(((uintptr_t)n & 63) == 0, "SLAB_HWCACHE_ALIGN: the object is on a cache line");
    is(active("kslab_node"), 1, "slabinfo counts it");
    kmem_cache_free(c, n);
    is(active("kslab_node"), 0, "kmem_cache_free gives it back");

    struct kmem_cache *d = kmem_cache_create("kslab_node", 32, 0, 0, NULL);
    ok(d && d != c, "a second cache of the same name is made, as the kernel allows");
    ok(d && !strcmp(sk_cache_name(d), "kslab_node#2"), "and shows as kslab_node#2 (%s)", d ? sk_cache_name(d) : "-");
    char *z = kmem_cache_alloc(d, GFP_KERNEL);
    memset(z, 0x5a, 32);
    kmem_cache_free(d, z);
    z = kmem_cache_zalloc(d, GFP_KERNEL);
    int zero = 1;
    for (int i = 0; i < 32; i++)
        zero &= z[i] == 0;
    ok(zero, "kmem_cache_zalloc zeroes an object that was written before");
    kmem_cache_free(d, z);
    kmem_cache_destroy(d);
    ok(sk_cache_info("kslab_node#2", &(struct sk_cache_info){ 0 }) != 0, "kmem_cache_destroy removes it");

    errno = 0;
    ok(kmem_cache_create("kslab_rcu", 64, 0, SLAB_TYPESAFE_BY_RCU, NULL) == NULL && errno == EINVAL,
       "SLAB_TYPESAFE_BY_RCU with no RCU to wait on is refused with EINVAL, not ignored");

    char buf[1024];
    int st = tap_child_report(panic_create, buf, sizeof buf, 1);
    ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(buf, "SLAB_PANIC"),
       "SLAB_PANIC: a failed create aborts with a message (%s)", buf);

    /* ---- bulk ---- */
    enum { BULK = 1000 };
    static void *objs[BULK];
    struct kmem_cache *b = kmem_cache_create("kslab_bulk", 48, 0, 0, NULL);
    victim = b;
    is(kmem_cache_alloc_bulk(b, GFP_KERNEL, BULK, objs), BULK, "kmem_cache_alloc_bulk gives all %d", BULK);
    int distinct = 1;
    for (int i = 0; i < BULK; i++) {
        memset(objs[i], i & 0xff, 48);
        if (sk_kmem_cache_of(objs[i]) != b)
            distinct = 0;
    }
    for (int i = 0; i < BULK && distinct; i++)
        for (int j = 0; j < 48; j++)
            if (((unsigned char *)objs[i])[j] != (i & 0xff))
                distinct = 0;
    ok(distinct, "each is an object of the cache, and no two overlap");
    is(active("kslab_bulk"), BULK, "slabinfo counts them all");
    kmem_cache_free_bulk(b, BULK, objs);
    is(active("kslab_bulk"), 0, "kmem_cache_free_bulk gives them all back");
    is(kmem_cache_alloc_bulk(b, GFP_KERNEL | __GFP_ZERO, 100, objs), 100, "a bulk of 100 with __GFP_ZERO");
    zero = 1;
    for (int i = 0; i < 100; i++)
        for (int j = 0; j < 48; j++)
            zero &= ((char *)objs[i])[j] == 0;
    ok(zero, "every object of it zeroed");
    void *kept50 = objs[50];
    objs[50] = NULL;
    kmem_cache_free_bulk(b, 100, objs);
    is(active("kslab_bulk"), 1, "free_bulk skips NULLs (the one left out is still out)");
    void *last = kmem_cache_alloc(b, GFP_KERNEL);
    (void)last;
    st = tap_child_report(double_free_in_bulk, buf, sizeof buf, 1);
    ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(buf, "double free"),
       "a double free inside one free_bulk is caught (%.120s)", buf);
    st = tap_child_report(wrong_cache_free, buf, sizeof buf, 1);
    ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(buf, "wrong cache"),
       "kmem_cache_free of another cache's object is caught (%.120s)", buf);

    /* ---- kmalloc family ---- */
    ok(kmalloc(0, GFP_KERNEL) == ZERO_SIZE_PTR, "kmalloc(0) is ZERO_SIZE_PTR, as in the kernel");
    kfree(ZERO_SIZE_PTR);
    kfree(NULL);
    is(ksize(ZERO_SIZE_PTR), 0, "ksize(ZERO_SIZE_PTR) is 0");
    char *k = kmalloc(100, GFP_KERNEL);
    ok(k && ksize(k) >= 100, "kmalloc(100): ksize %zu", k ? ksize(k) : 0);
    memset(k, 'x', 100);
    char *k2 = krealloc(k, 5000, GFP_KERNEL | __GFP_ZERO);
    int kept = k2 != NULL;
    for (int i = 0; kept && i < 100; i++)
        kept = k2[i] == 'x';
    ok(kept, "krealloc keeps the contents");
    zero = k2 != NULL;
    for (size_t i = 100 > ksize(k) ? 100 : ksize(k); zero && i < 5000; i++)
        zero = k2[i] == 0;
    ok(zero, "krealloc with __GFP_ZERO zeroes what it adds");
    ok(krealloc(k2, 0, GFP_KERNEL) == ZERO_SIZE_PTR, "krealloc(p, 0) frees p and gives ZERO_SIZE_PTR");
    char *s = kstrdup("slab", GFP_KERNEL), *s2 = kstrndup("slabkit", 4, GFP_KERNEL);
    ok(s && s2 && !strcmp(s, "slab") && !strcmp(s2, "slab"), "kstrdup and kstrndup");
    int v[4] = { 1, 2, 3, 4 };
    int *m = kmemdup(v, sizeof v, GFP_KERNEL);
    ok(m && !memcmp(m, v, sizeof v), "kmemdup");
    kfree(s);
    kfree(s2);
    kfree_sensitive(m);
    errno = 0;
    ok(kmalloc_array(SIZE_MAX / 2, 4, GFP_KERNEL) == NULL && errno == ENOMEM, "kmalloc_array overflow: NULL");
    long *cz = kcalloc(1000, sizeof(long), GFP_KERNEL);
    zero = cz != NULL;
    for (int i = 0; zero && i < 1000; i++)
        zero = cz[i] == 0;
    ok(zero, "kcalloc zeroes");
    kvfree(cz);
    void *big = kvmalloc(3 << 20, GFP_KERNEL);
    ok(big != NULL, "kvmalloc of 3 MiB");
    kvfree(big);
    errno = 1234;
    void *e = kmalloc(64, GFP_KERNEL);
    is(errno, 1234, "a kmalloc that succeeds leaves errno alone");
    kfree(e);

    /* kfree_rcu's callback gets the rcu_head inside the object. */
    struct node *inner = kmalloc(sizeof *inner, GFP_KERNEL);
    size_t before = active("kmalloc-64");
    sk_kfree_inner(&inner->right);
    is(active("kmalloc-64"), before - 1, "sk_kfree_inner frees the object around an inner address");

    /* ---- pages ---- */
    struct page *pg = alloc_pages(GFP_KERNEL | __GFP_ZERO, 2);
    char *pa = page_address(pg);
    zero = pa && ((uintptr_t)pa & (4 * SK_PAGE_SIZE - 1)) == 0;
    for (size_t i = 0; zero && i < 4 * SK_PAGE_SIZE; i++)
        zero = pa[i] == 0;
    ok(zero, "alloc_pages(order 2, __GFP_ZERO): aligned and zeroed");
    ok(virt_to_page(pa + 5000) == virt_to_page(pa + 4096), "virt_to_page rounds down to the page");
    __free_pages(pg, 2);
    unsigned long addr = get_zeroed_page(GFP_KERNEL);
    ok(addr && *(long *)addr == 0, "get_zeroed_page");
    free_page(addr);

    kmem_cache_free(b, last);
    kmem_cache_free(b, kept50);
    kmem_cache_destroy(b);
    kmem_cache_destroy(c);
    return done_testing();
}
