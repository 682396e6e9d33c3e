/*
 * barn — the node's barn of full batches, with threads pinned to CPUs so
 * that what happens is certain:
 *
 *  - one thread alone (pinned to one CPU) allocating and freeing 20,000
 *    objects puts nothing in the barn: no other CPU asked (the barn would
 *    only park memory the slabs could take back);
 *  - a producer pinned to one CPU and a consumer pinned to another, in
 *    lockstep rounds of 1,000 objects (the producer allocates and fills
 *    them, the consumer checks and frees them): the consumer's flushes go
 *    to the barn and the producer's refills come from it; no object is
 *    handed out while live (each round's pointers are distinct, every fill
 *    pattern intact); the barn never holds more than its capacity;
 *  - once everything is freed, sk_cache_shrink empties the barn with the
 *    rest: no slab, no object left;
 *  - with SLABKIT_OPTIONS=barn=0 (tests/modes/slab_options.t) the cache
 *    has no barn and nothing goes through one.
 * Runs with rseq and in the lock fallback (the pinned threads' fallback
 * slots are their CPUs).  Needs two CPUs; skips otherwise.
 *
 * TSAN: yes
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slabkit.h"
#include "cpus.h"
#include "remote.h"
#include "tap.h"

#define OBJ 64
#define ROUND 1000
#define ROUNDS 40

static int cpu_a = -1, cpu_b = -1;
static sk_cache_t *cache;
static void *objs[ROUND];
static pthread_barrier_t step;
static long dup_or_bad;
static unsigned long most_in_barn;

static struct sk_cache_info info(void)
{
    struct sk_cache_info i;
    if (sk_cache_info("barn-test", &i) != 0)
        BAIL("sk_cache_info(barn-test) failed");
    return i;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static void *producer(void *arg)
{
    (void)arg;
    pin_or_bail(cpu_a);
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < ROUND; i++) {
            unsigned char *p = sk_cache_alloc(cache);
            if (!p)
                BAIL("sk_cache_alloc failed");
            memset(p, (r * 7 + i) & 0xff, OBJ);
            objs[i] = p;
        }
        /* Distinct pointers within the round: none handed out twice. */
        void *sorted[ROUND];
        memcpy(sorted, objs, sizeof sorted);
        qsort(sorted, ROUND, sizeof sorted[0], cmp_ptr);
        for (int i = 1; i < ROUND; i++)
            if (sorted[i] == sorted[i - 1])
                __atomic_fetch_add(&dup_or_bad, 1, __ATOMIC_RELAXED);
        pthread_barrier_wait(&step);    /* objects to the consumer */
        pthread_barrier_wait(&step);    /* consumer done */
        unsigned long in = info().barn_objs;
        if (in > most_in_barn)
            most_in_barn = in;
    }
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    pin_or_bail(cpu_b);
    for (int r = 0; r < ROUNDS; r++) {
        pthread_barrier_wait(&step);
        for (int i = 0; i < ROUND; i++) {
            unsigned char *p = objs[i];
            for (int k = 0; k < OBJ; k++)
                if (p[k] != ((r * 7 + i) & 0xff)) {
                    __atomic_fetch_add(&dup_or_bad, 1, __ATOMIC_RELAXED);
                    break;
                }
            sk_cache_free(cache, p);
        }
        pthread_barrier_wait(&step);
    }
    return NULL;
}

static void *alone(void *arg)
{
    static void *v[20000];
    (void)arg;
    pin_or_bail(cpu_a);
    alloc_or_bail(cache, v, 20000);
    for (int i = 0; i < 20000; i++)
        sk_cache_free(cache, v[i]);
    return NULL;
}

int main(void)
{
    if (!first_two_cpus(&cpu_a, &cpu_b))
        skip_all("needs two CPUs");
    plan(9);
    long barn_on = sk_option("barn");
    cache = cache_or_bail("barn-test", OBJ);
    struct sk_cache_info i0 = info();
    if (barn_on)
        ok(i0.barn_capacity > 0 && i0.barn_capacity % i0.batch == 0,
           "the cache has a barn of whole batches (%u objects, batch %u)", i0.barn_capacity, i0.batch);
    else
        is(i0.barn_capacity, 0, "barn=0: the cache has no barn");

    /* One thread, one CPU: nobody else asks, nothing is parked. */
    pthread_t t;
    pthread_create(&t, NULL, alone, NULL);
    pthread_join(t, NULL);
    struct sk_cache_info i1 = info();
    is(i1.stat[SK_BARN_PUT], 0, "one thread on one CPU put nothing in the barn");

    /* Producer on one CPU, consumer on another. */
    pthread_barrier_init(&step, NULL, 2);
    pthread_t a, b;
    pthread_create(&b, NULL, consumer, NULL);
    pthread_create(&a, NULL, producer, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    struct sk_cache_info i2 = info();
    is(dup_or_bad, 0, "%d rounds of %d objects from CPU %d to CPU %d: none handed out twice, every fill intact",
       ROUNDS, ROUND, cpu_a, cpu_b);
    if (barn_on) {
        ok(i2.stat[SK_BARN_PUT] > 0, "the consumer's flushes went to the barn (%lu puts)", i2.stat[SK_BARN_PUT]);
        ok(i2.stat[SK_BARN_GET] > 0, "the producer's refills came from it (%lu gets)", i2.stat[SK_BARN_GET]);
    } else {
        is(i2.stat[SK_BARN_PUT], 0, "barn=0: no flush went to a barn");
        is(i2.stat[SK_BARN_GET], 0, "barn=0: no refill came from one");
    }
    ok(most_in_barn <= i0.barn_capacity, "the barn never held more than its capacity (at most %lu of %u)",
       most_in_barn, i0.barn_capacity);
    is(i2.active_objs, 0, "every object freed");

    sk_cache_shrink(cache);
    struct sk_cache_info i3 = info();
    is(i3.barn_objs + i3.num_slabs + i3.array_objs, 0, "shrink empties the barn, the arrays and the slabs");
    is(sk_cache_destroy(cache), 0, "the cache is destroyed");
    return done_testing();
}
