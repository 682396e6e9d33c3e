/*
 * fresh_shrink_stress — a shrink that gives back a CPU slab with a fresh
 * range (src/slab/slab.c, deactivate_cpu_slab: only when it is entirely
 * free, decided by one cmpxchg of inuse against the objects the CPU holds
 * privately) racing frees of that slab's objects from another CPU.
 *
 * A producer pinned to the first CPU allocates 4 KiB objects (8 to a
 * lazily made 8-page slab) one to three at a time, stamps each with a
 * sequence number and hands it to a consumer pinned to the second CPU,
 * which checks the stamp and frees it (into its own array, flushed to the
 * producer's frozen slab); a third thread shrinks the cache without pause.
 * So the producer's CPU slab is often entirely free but for the objects in
 * flight, and the shrink's cmpxchg meets the consumer's flushes.  A slab
 * given back while an object of it was live, or an object handed out
 * twice, shows as a stamp overwritten before the consumer reads it.  At the
 * end nothing is active and a last shrink leaves no slab.
 * The rseq-off variant runs it too (tests/modes/rseq_off.t: names with
 * "stress"); with fewer than two CPUs it is skipped.
 * TSAN: yes  (fewer objects)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slabkit.h"
#include "tap.h"
#include "cpus.h"
#include "cache_info.h"

#ifdef SK_TSAN
#define OBJECTS 20000
#else
#define OBJECTS 200000
#endif
#define OBJ 4096
#define RING 64

static sk_cache_t *cache;
static int cpu_a, cpu_b;

/* The hand-off: a ring of (object, stamp) under a mutex. */
static struct { uint64_t *obj; uint64_t stamp; } ring[RING];
static unsigned head, tail;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int done, stop_shrink;
static long bad, shrinks;

static void put(uint64_t *obj, uint64_t stamp)
{
    pthread_mutex_lock(&lock);
    while (head - tail == RING)
        pthread_cond_wait(&cond, &lock);
    ring[head % RING].obj = obj;
    ring[head % RING].stamp = stamp;
    head++;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void *producer(void *arg)
{
    (void)arg;
    pin_thread(cpu_a);
    uint64_t seq = 0, rng = 7;
    while (seq < OBJECTS) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        unsigned k = 1 + (unsigned)(rng >> 62) % 3;
        for (unsigned i = 0; i < k && seq < OBJECTS; i++) {
            uint64_t *o = sk_cache_alloc(cache);
            if (!o)
                BAIL("sk_cache_alloc failed");
            seq++;
            o[0] = seq;
            o[OBJ / 8 - 1] = ~seq;
            put(o, seq);
        }
    }
    pthread_mutex_lock(&lock);
    done = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    pin_thread(cpu_b);
    for (;;) {
        pthread_mutex_lock(&lock);
        while (head == tail && !done)
            pthread_cond_wait(&cond, &lock);
        if (head == tail) {
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        uint64_t *o = ring[tail % RING].obj, stamp = ring[tail % RING].stamp;
        tail++;
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&lock);
        if (o[0] != stamp || o[OBJ / 8 - 1] != ~stamp)
            __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
        sk_cache_free(cache, o);
    }
}

static void *shrinker(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&stop_shrink, __ATOMIC_ACQUIRE)) {
        sk_cache_shrink(cache);
        shrinks++;
    }
    return NULL;
}

int main(void)
{
    if (!first_two_cpus(&cpu_a, &cpu_b))
        skip_all("fewer than two CPUs");
    cache = sk_cache_create("fresh_race", OBJ, 0, 0, NULL);
    if (!cache)
        BAIL("sk_cache_create");
    struct sk_cache_info i = cache_info("fresh_race");
    if (i.objs_per_slab < 2 || i.order < 1)
        BAIL("fresh_race: %u objects in order-%u slabs: no lazy slabs", i.objs_per_slab, i.order);
    pthread_t p, c, s;
    pthread_create(&s, NULL, shrinker, NULL);
    pthread_create(&c, NULL, consumer, NULL);
    pthread_create(&p, NULL, producer, NULL);
    pthread_join(p, NULL);
    pthread_join(c, NULL);
    __atomic_store_n(&stop_shrink, 1, __ATOMIC_RELEASE);
    pthread_join(s, NULL);
    i = cache_info("fresh_race");
    diag("%d objects, %ld shrinks, %lu slabs made, %lu given back", OBJECTS, shrinks, i.stat[SK_NEW_SLAB],
         i.stat[SK_FREE_SLAB]);
    is(bad, 0, "every object reached the consumer with its stamp (none given back or handed out twice while live)");
    ok(shrinks > 0, "the shrinker ran beside them (%ld shrinks)", shrinks);
    is(i.active_objs, 0, "all freed: nothing active");
    sk_cache_shrink(cache);
    is(cache_info("fresh_race").num_slabs, 0, "a last shrink leaves no slab");
    ok(sk_cache_destroy(cache) == 0, "the cache is destroyed");
    return done_testing();
}
