/*
 * typesafe_threads — SLAB_TYPESAFE_BY_RCU under threads: the slabs a
 * shrink takes off wait on the cache's rcu_pending stack, pushed
 * lock-free by every discard (slab_discard) and taken whole by each
 * shrink's release (slab_rcu_release, an exchange).  Four threads
 * allocate, tag, check and free objects while each of them also shrinks
 * the cache, so pushes race pushes and a release; the grace callback
 * yields, widening the window.  No object may be handed out twice (each
 * carries its holder's tag until freed), none may be lost, and at the end
 * one shrink gives every slab back.  Also under ThreadSanitizer, in the
 * lock fallback with rseq off.
 * TSAN: yes
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#include <slabkit/linux/slab.h>

#include "tap.h"

enum { THREADS = 4, ROUNDS = 300, BATCH = 64, SIZE = 96 };

static struct kmem_cache *c;
static unsigned long graces;
static int bad;

static void grace(void)
{
    __atomic_fetch_add(&graces, 1, __ATOMIC_RELAXED);
    sched_yield();
}

static void *worker(void *arg)
{
    uintptr_t tag = (uintptr_t)arg + 1;
    void *objs[BATCH];
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < BATCH; i++) {
            uintptr_t *o = kmem_cache_alloc(c, GFP_KERNEL);
            if (!o) {
                __atomic_store_n(&bad, 1, __ATOMIC_RELAXED);
                return NULL;
            }
            for (int w = 0; w < SIZE / 8; w++)
                __atomic_store_n(&o[w], tag, __ATOMIC_RELAXED);
            objs[i] = o;
        }
        for (int i = 0; i < BATCH; i++) {
            uintptr_t *o = objs[i];
            for (int w = 0; w < SIZE / 8; w++)
                if (__atomic_load_n(&o[w], __ATOMIC_RELAXED) != tag)
                    __atomic_store_n(&bad, 2, __ATOMIC_RELAXED);   /* handed out twice */
            kmem_cache_free(c, o);
        }
        if (r % 4 == 0)
            kmem_cache_shrink(c);
    }
    return NULL;
}

int main(void)
{
    sk_kernel_set_rcu(grace, NULL);
    c = kmem_cache_create("ts_threads", SIZE, 0, SLAB_TYPESAFE_BY_RCU, NULL);
    if (!c)
        BAIL("kmem_cache_create failed");
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)i))
            BAIL("pthread_create failed");
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    is(bad, 0, "%d threads, %d rounds of %d objects with shrinks between: none handed out twice or lost",
       THREADS, ROUNDS, BATCH);
    ok(graces > 0, "the shrinks waited for grace periods (%lu)", graces);
    kmem_cache_shrink(c);
    struct sk_cache_info info;
    ok(sk_cache_info("ts_threads", &info) == 0 && info.num_slabs == 0 && info.active_objs == 0,
       "a last shrink gives every slab back (%lu slabs, %lu objects left)", info.num_slabs, info.active_objs);
    kmem_cache_destroy(c);
    return done_testing();
}
