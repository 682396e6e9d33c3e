/*
 * rcu.c — the kernel names' RCU side with liburcu, built by
 * tests/kernel/harness/run (which has liburcu-dev): <slabkit/linux/slab.h>
 * after <urcu.h> gives slabkit liburcu's grace periods for
 * SLAB_TYPESAFE_BY_RCU, and kfree_rcu frees through liburcu's call_rcu.
 * Prints TAP lines "ok"/"not ok" without numbers; the run script numbers
 * them.
 */
#include <stdio.h>
#include <string.h>
#include <urcu.h>

#include <linux/slab.h>

struct obj {
    long a;
    struct rcu_head rcu;
    long b[4];
};

static unsigned long active(const char *name)
{
    struct sk_cache_info info;
    return sk_cache_info(name, &info) == 0 ? info.active_objs : (unsigned long)-1;
}

static unsigned long slabs(const char *name)
{
    struct sk_cache_info info;
    return sk_cache_info(name, &info) == 0 ? info.num_slabs : (unsigned long)-1;
}

int main(void)
{
    rcu_register_thread();
    struct kmem_cache *c = kmem_cache_create("rcu_typesafe", sizeof(struct obj), 0, SLAB_TYPESAFE_BY_RCU, NULL);
    printf("%s - SLAB_TYPESAFE_BY_RCU is taken once <urcu.h> came first\n", c ? "ok" : "not ok");
    if (!c)
        return 1;
    enum { N = 1000 };
    static struct obj *o[N];
    for (int i = 0; i < N; i++)
        o[i] = kmem_cache_alloc(c, GFP_KERNEL);
    unsigned long full = slabs("rcu_typesafe");
    for (int i = 0; i < N; i++)
        kmem_cache_free(c, o[i]);
    rcu_read_lock();
    /* A reader may still look at a freed object: same cache, memory kept. */
    int kept = sk_kmem_cache_of(o[N / 2]) == c && slabs("rcu_typesafe") == full;
    rcu_read_unlock();
    printf("%s - freed objects keep their slabs (%lu) until a shrink\n", kept ? "ok" : "not ok", full);
    kmem_cache_shrink(c);
    printf("%s - kmem_cache_shrink gives them back after liburcu's grace period (%lu slabs left)\n",
           slabs("rcu_typesafe") == 0 ? "ok" : "not ok", slabs("rcu_typesafe"));
    kmem_cache_destroy(c);

    struct obj *k = kmalloc(sizeof *k, GFP_KERNEL);
    char name[32];
    snprintf(name, sizeof name, "%s", "kmalloc-64");
    unsigned long before = active(name);
    kfree_rcu(k, rcu);
    rcu_barrier();
    unsigned long after = active(name);
    printf("%s - kfree_rcu frees the object after a grace period (%s: %lu -> %lu)\n",
           after + 1 == before ? "ok" : "not ok", name, before, after);
    rcu_unregister_thread();
    return 0;
}
