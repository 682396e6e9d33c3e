/*
 * remote.h — for the tests of frees on another CPU than the allocating
 * one (barn, remote_free, remote_home): pin the calling thread, create a
 * cache and allocate from it, or bail out; read one event counter of a
 * cache by name; say whether frees go home here (remote_free=1, rseq
 * registered, SLUB), with a diag line.
 */
#ifndef SK_TEST_SLAB_REMOTE_H
#define SK_TEST_SLAB_REMOTE_H
#include <stdbool.h>
#include <sys/rseq.h>

#include "slabkit.h"
#include "cpus.h"
#include "tap.h"

static inline void pin_or_bail(int cpu)
{
    if (pin_thread(cpu) != 0)
        BAIL("cannot pin a thread to CPU %d", cpu);
}

static inline sk_cache_t *cache_or_bail(const char *name, size_t size)
{
    sk_cache_t *c = sk_cache_create(name, size, 0, 0, NULL);
    if (!c)
        BAIL("sk_cache_create(%s) failed", name);
    return c;
}

/* n objects of c into objs[]. */
static inline void alloc_or_bail(sk_cache_t *c, void **objs, int n)
{
    for (int i = 0; i < n; i++)
        if (!(objs[i] = sk_cache_alloc(c)))
            BAIL("sk_cache_alloc failed");
}

static inline unsigned long cache_stat(const char *name, enum sk_stat_item item)
{
    struct sk_cache_info i;
    if (sk_cache_info(name, &i) != 0)
        BAIL("sk_cache_info(%s) failed", name);
    return i.stat[item];
}

/* Whether a free on CPU `other` of an object whose slab is at home on
 * another CPU goes home; says so in a diag line. */
static inline bool frees_go_home(int other)
{
    bool slub = sk_option("allocator") == 0;
    bool rseq = __rseq_size >= 20;
    bool home = sk_option("remote_free") == 1 && rseq && slub;
    diag("remote_free=%ld, rseq %s, %s: frees on CPU %d %s", sk_option("remote_free"), rseq ? "on" : "off",
         slub ? "SLUB" : "SLAB", other, home ? "go home" : "stay on that CPU");
    return home;
}
#endif
