/*
 * stress_cross_cpu — objects allocated on one CPU and freed on another,
 * by 64 threads on two CPUs, are never lost, corrupted or handed out twice.
 *
 * 31 producers allocate from three sk_cache caches (24 bytes; 200 bytes
 * with a constructor; 1000 bytes SK_CACHE_HWALIGN) and from kmalloc
 * (sk_malloc, and malloc except under TSan, 24 bytes to 2 KiB, now and
 * then up to 40 KiB), tag every
 * object (owner, sequence number, kind and size, a canary over all of it,
 * a fill pattern) and pass it in batches through locked queues to 32
 * consumers, which check the tag, the pattern, the alignment and the
 * constructed state, and free it.  A shrinker thread calls sk_cache_shrink
 * on the three caches all along, so remote drains race the fast paths.
 * Every pointer is entered in a set of live objects when it is handed out
 * and removed before it is freed: an object handed out twice is caught at
 * once.  The process is confined to two CPUs, so the 64 threads migrate
 * and preempt each other inside the allocator all the time.
 *
 * At the end: every object produced was consumed; the live set is empty;
 * after sk_cache_shrink each cache has no active object, no slab, nothing
 * in its per-CPU arrays or partial lists, new_slab = free_slab, and the
 * constructor ran exactly once per object per slab; the kmalloc classes
 * are back to their active counts from before; with SLABKIT_OPTIONS=
 * cpu_partial=0 no slab ever went to a CPU partial list (and with the
 * default some did); with barn=0 no batch went through the node's barn;
 * the barn is empty after shrink; the idle-cache reaper ran meanwhile
 * (shrinking kmalloc classes that went idle while the heap grew); with
 * rseq, cross-CPU frees went home both to one-page slabs (24 bytes) and
 * to the 1000-byte cache's four-page ones, whose home the free path reads
 * from tail pages (none without rseq), so the checks above ran over
 * those paths racing the homes' refills and the shrinker.
 *
 * tests/modes/slab_options.t reruns it with cpu_partial=0, with rseq off
 * (GLIBC_TUNABLES=glibc.pthread.rseq=0) and both; mutex_spin.t with
 * mutex_spin=0/1.  Usage: stress_cross_cpu [objects per producer]
 *
 * TSAN: yes  (smaller: 8 producers, 8 consumers, 10000 objects each)
 * ASAN: yes  (sk_cache objects poisoned while free; malloc is ASan's)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu.h"
#include "debug/poison.h"        /* SK_ASAN */
#include "slab/kmalloc.h"          /* slab_reaped */
#include "slabkit.h"
#include "kmalloc_counts.h"
#include "tap.h"
#include "cpus.h"

#ifdef SK_TSAN
#define NPROD 8
#define NCONS 8
#define PER_PRODUCER 10000
#else
#define NPROD 31
#define NCONS 32
#define PER_PRODUCER 120000
#endif
#define BATCH 16
#define QCAP 256
#define TIME_CAP_NS (20ll * 1000000000ll)   /* stop producing after this, whatever the load */

enum kind { K_SMALL, K_CTOR, K_HW, K_KMALLOC, K_NR };
static const char *const cache_names[3] = { "stress-24", "stress-ctor-200", "stress-hw-1000" };
static const size_t cache_sizes[3] = { 24, 200, 1000 };
static sk_cache_t *caches[3];

/* ---- tags ---- */

struct tag {
    uint32_t owner;          /* producer id + 1 */
    uint32_t kind_size;      /* size << 4 | 8 if from malloc | kind */
    uint64_t seq;
    uint64_t canary;         /* mix of the above and the address */
};

#define CTOR_OFF 192         /* the constructor's mark in a stress-ctor-200 object */
#define CTOR_MAGIC 0x5EED0F5EED0F5EEDull
static long ctor_calls;

static void ctor(void *p)
{
    memset(p, 0, 200);
    *(uint64_t *)((char *)p + CTOR_OFF) = CTOR_MAGIC ^ (uint64_t)(uintptr_t)p;
    __atomic_fetch_add(&ctor_calls, 1, __ATOMIC_RELAXED);
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static uint64_t canary_of(const void *p, const struct tag *t)
{
    return mix((uint64_t)(uintptr_t)p ^ ((uint64_t)t->owner << 32) ^ t->kind_size ^ mix(t->seq));
}

/* Bytes [24, fill_end) carry a pattern; the ctor's mark stays untouched. */
static size_t fill_end(enum kind k, size_t size)
{
    size_t e = size < 512 ? size : 512;
    if (k == K_CTOR)
        e = CTOR_OFF;
    return e;
}

static long errors;

static void error(const char *what, const void *p, const struct tag *t)
{
    if (__atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED) < 12) {
        if (t)
            diag("error: %s: %p owner %u seq %llu kind/size %#x", what, p, t->owner, (unsigned long long)t->seq,
                 t->kind_size);
        else
            diag("error: %s: %p", what, p);
    }
}

/* ---- the set of live objects: sharded open addressing ---- */

#define SHARDS 256
#define SLOTS 512            /* per shard; at most ~10k objects live in all */
struct shard {
    pthread_mutex_t lock;
    uintptr_t slot[SLOTS];
    unsigned n;
} __attribute__((aligned(64)));
static struct shard live[SHARDS];

static uint64_t hash_ptr(uintptr_t p)
{
    return mix(p);
}

/* 0 when p was not live (and now is); -1 when it already was. */
static int live_insert(const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    uint64_t h = hash_ptr(p);
    struct shard *s = &live[h % SHARDS];
    pthread_mutex_lock(&s->lock);
    if (s->n >= SLOTS - SLOTS / 4) {
        pthread_mutex_unlock(&s->lock);
        BAIL("live set shard full");
    }
    unsigned i = (unsigned)(h / SHARDS) % SLOTS;
    int r = 0;
    for (;; i = (i + 1) % SLOTS) {
        if (!s->slot[i]) {
            s->slot[i] = p;
            s->n++;
            break;
        }
        if (s->slot[i] == p) {
            r = -1;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return r;
}

/* 0 when p was live (and now is not); -1 when it was not. */
static int live_remove(const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    uint64_t h = hash_ptr(p);
    struct shard *s = &live[h % SHARDS];
    pthread_mutex_lock(&s->lock);
    unsigned i = (unsigned)(h / SHARDS) % SLOTS;
    while (s->slot[i] && s->slot[i] != p)
        i = (i + 1) % SLOTS;
    if (!s->slot[i]) {
        pthread_mutex_unlock(&s->lock);
        return -1;
    }
    /* Backward-shift deletion keeps every probe chain unbroken. */
    unsigned j = i;
    for (;;) {
        s->slot[i] = 0;
        for (;;) {
            j = (j + 1) % SLOTS;
            if (!s->slot[j])
                goto done;
            unsigned home = (unsigned)(hash_ptr(s->slot[j]) / SHARDS) % SLOTS;
            /* Move slot j into the hole at i unless its home lies in (i, j]. */
            if (i <= j ? (home <= i || home > j) : (home <= i && home > j))
                break;
        }
        s->slot[i] = s->slot[j];
        i = j;
    }
done:
    s->n--;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

static unsigned long live_count(void)
{
    unsigned long n = 0;
    for (int i = 0; i < SHARDS; i++) {
        pthread_mutex_lock(&live[i].lock);
        n += live[i].n;
        pthread_mutex_unlock(&live[i].lock);
    }
    return n;
}

/* ---- queues ---- */

struct queue {
    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
    void *ring[QCAP];
    unsigned head, count;
} __attribute__((aligned(64)));
static struct queue queues[NCONS];
static int producers_left = NPROD;

static void queue_put(struct queue *q, void **objs, unsigned n)
{
    pthread_mutex_lock(&q->lock);
    while (q->count + n > QCAP)
        pthread_cond_wait(&q->not_full, &q->lock);
    for (unsigned i = 0; i < n; i++)
        q->ring[(q->head + q->count + i) % QCAP] = objs[i];
    q->count += n;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->lock);
}

/* Up to max objects; 0 when every producer is done and the queue empty. */
static unsigned queue_get(struct queue *q, void **objs, unsigned max)
{
    pthread_mutex_lock(&q->lock);
    while (!q->count && __atomic_load_n(&producers_left, __ATOMIC_ACQUIRE))
        pthread_cond_wait(&q->not_empty, &q->lock);
    unsigned n = q->count < max ? q->count : max;
    for (unsigned i = 0; i < n; i++)
        objs[i] = q->ring[(q->head + i) % QCAP];
    q->head = (q->head + n) % QCAP;
    q->count -= n;
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->lock);
    return n;
}

static void wake_all_consumers(void)
{
    for (int i = 0; i < NCONS; i++) {
        pthread_mutex_lock(&queues[i].lock);
        pthread_cond_broadcast(&queues[i].not_empty);
        pthread_mutex_unlock(&queues[i].lock);
    }
}

/* ---- producers and consumers ---- */

static long produced, consumed;
static long per_producer = PER_PRODUCER;
static int shrinker_stop;
static struct timespec t_start;

static long long elapsed_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t_start.tv_sec) * 1000000000ll + (t.tv_nsec - t_start.tv_nsec);
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static size_t kmalloc_size(uint64_t r)
{
    if ((r & 511) == 0)
        return 2048 + (size_t)(r >> 20) % 38000;   /* now and then: big classes and page blocks */
    if ((r & 7) == 0)
        return 256 + (size_t)(r >> 20) % 1793;
    return 24 + (size_t)(r >> 20) % 232;
}

static void *producer(void *arg)
{
    uint32_t id = (uint32_t)(uintptr_t)arg;
    uint64_t rng = mix(id + 1) | 1;
    void *batch[BATCH];
    unsigned nb = 0;
    long made = 0;
    for (long seq = 0; seq < per_producer; seq++) {
        if ((seq & 255) == 0 && elapsed_ns() > TIME_CAP_NS)
            break;
        uint64_t r = rng_next(&rng);
        enum kind k = (enum kind)(r % K_NR);
        size_t size;
        void *p;
        unsigned via_malloc = 0;
        if (k == K_KMALLOC) {
            size = kmalloc_size(r >> 8);
#if !defined(SK_TSAN) && !SK_ASAN      /* under a sanitizer, malloc is its own */
            /* Half through the malloc family on top (also links it in, so
             * thread creation and stdio allocate from slabkit too). */
            via_malloc = (r >> 40) & 1;
#endif
            p = via_malloc ? malloc(size) : sk_malloc(size);
        } else {
            size = cache_sizes[k];
            p = sk_cache_alloc(caches[k]);
        }
        if (!p) {
            error("allocation failed", NULL, NULL);
            continue;
        }
        if (live_insert(p))
            error("object handed out twice (already live)", p, (struct tag *)p);
        if (k == K_HW && (uintptr_t)p % 64)
            error("SK_CACHE_HWALIGN object not on a cache line", p, NULL);
        if ((uintptr_t)p % 8 || (k == K_KMALLOC && size >= 16 && (uintptr_t)p % 16))
            error("object misaligned", p, NULL);
        if (k == K_CTOR && *(uint64_t *)((char *)p + CTOR_OFF) != (CTOR_MAGIC ^ (uint64_t)(uintptr_t)p))
            error("constructed state lost", p, NULL);
        struct tag *t = p;
        t->owner = id + 1;
        t->kind_size = (uint32_t)(size << 4 | via_malloc << 3 | k);
        t->seq = (uint64_t)seq;
        t->canary = canary_of(p, t);
        memset((char *)p + sizeof *t, (int)(seq & 0xff), fill_end(k, size) - sizeof *t);
        batch[nb++] = p;
        made++;
        if (nb == BATCH) {
            queue_put(&queues[(id + (uint64_t)seq / BATCH) % NCONS], batch, nb);
            nb = 0;
        }
    }
    if (nb)
        queue_put(&queues[id % NCONS], batch, nb);
    __atomic_fetch_add(&produced, made, __ATOMIC_RELAXED);
    if (__atomic_sub_fetch(&producers_left, 1, __ATOMIC_ACQ_REL) == 0)
        wake_all_consumers();
    return NULL;
}

static void consume_one(void *p)
{
    struct tag t = *(struct tag *)p;
    enum kind k = (enum kind)(t.kind_size & 7);
    unsigned via_malloc = t.kind_size & 8;
    size_t size = t.kind_size >> 4;
    if (t.owner == 0 || t.owner > NPROD || k >= K_NR || t.canary != canary_of(p, &t)) {
        error("tag corrupted", p, &t);
        live_remove(p);
        return;          /* do not free what we cannot trust */
    }
    unsigned char pat = (unsigned char)(t.seq & 0xff);
    const unsigned char *b = p;
    for (size_t i = sizeof t; i < fill_end(k, size); i++)
        if (b[i] != pat) {
            error("fill pattern corrupted", p, &t);
            break;
        }
    if (k == K_CTOR && *(uint64_t *)((char *)p + CTOR_OFF) != (CTOR_MAGIC ^ (uint64_t)(uintptr_t)p))
        error("constructed state corrupted", p, &t);
    if (k == K_KMALLOC && sk_usable_size(p) < size)
        error("usable size below the request", p, &t);
    /* Scramble the tag so a stale copy cannot pass for a live object. */
    ((struct tag *)p)->canary = ~t.canary;
    if (live_remove(p))
        error("object freed that was not live", p, &t);
    if (k == K_KMALLOC && via_malloc)
        free(p);
    else if (k == K_KMALLOC)
        sk_free(p);
    else
        sk_cache_free(caches[k], p);
}

static void *consumer(void *arg)
{
    struct queue *q = &queues[(uintptr_t)arg];
    void *objs[BATCH];
    long n = 0;
    unsigned got;
    while ((got = queue_get(q, objs, BATCH)) > 0) {
        for (unsigned i = 0; i < got; i++)
            consume_one(objs[i]);
        n += got;
    }
    __atomic_fetch_add(&consumed, n, __ATOMIC_RELAXED);
    return NULL;
}

static long shrinks;

static void *shrinker(void *arg)
{
    (void)arg;
    struct timespec ts = { 0, 2000000 };
    while (!__atomic_load_n(&shrinker_stop, __ATOMIC_ACQUIRE)) {
        for (int i = 0; i < 3; i++)
            sk_cache_shrink(caches[i]);
        shrinks++;
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* Thread stacks small enough that glibc's stack cache (40 MiB) keeps all
 * of them: then the warm-up below leaves glibc's per-thread allocations
 * (the TLS vectors of cached stacks, from malloc) at the level of the run. */
#define STACK_SIZE (512 * 1024)
#define NTHREADS (NPROD + NCONS + 1)
static pthread_barrier_t warm_barrier;

static void *warm(void *arg)
{
    pthread_barrier_wait(&warm_barrier);
    return arg;
}

static struct kmalloc_counts kbase, kend;

int main(int argc, char **argv)
{
    if (argc > 1)
        per_producer = atol(argv[1]);
    printf("# stress_cross_cpu\n");
    fflush(stdout);
    int ncpu = confine_to_two_cpus();
    for (int i = 0; i < SHARDS; i++)
        pthread_mutex_init(&live[i].lock, NULL);
    for (int i = 0; i < NCONS; i++) {
        pthread_mutex_init(&queues[i].lock, NULL);
        pthread_cond_init(&queues[i].not_empty, NULL);
        pthread_cond_init(&queues[i].not_full, NULL);
    }
    caches[K_SMALL] = sk_cache_create(cache_names[K_SMALL], 24, 0, 0, NULL);
    caches[K_CTOR] = sk_cache_create(cache_names[K_CTOR], 200, 0, 0, ctor);
    caches[K_HW] = sk_cache_create(cache_names[K_HW], 1000, 0, SK_CACHE_HWALIGN, NULL);
    if (!caches[0] || !caches[1] || !caches[2])
        BAIL("sk_cache_create failed");
    long cpu_partial = sk_option("cpu_partial"), barn = sk_option("barn"), sheaves = sk_option("sheaves");
    /* Remote frees need rseq (the CPU to compare) and the SLUB arrays. */
    bool remote_on = sk_option("remote_free") == 1 && sheaves != 0 && sk_option("allocator") != SK_ALLOC_SLAB &&
                     cpu_use_rseq && !SK_ASAN;
    /* allocator=slab (tests/modes/slab_classic.t): SLAB has no CPU
     * partial lists, as cpu_partial=0. */
    if (sk_option("allocator") == SK_ALLOC_SLAB)
        cpu_partial = 0;
    diag("%d producers, %d consumers, 1 shrinker on %d CPUs; %ld objects per producer; per-CPU arrays via %s; "
         "cpu_partial=%ld barn=%ld sheaves=%ld", NPROD, NCONS, ncpu, per_producer,
         cpu_use_rseq ? "rseq" : "the lock fallback", cpu_partial, barn, sheaves);

    /* Baseline of the kmalloc classes once thread creation has done its
     * own allocations. */
    pthread_t th[NTHREADS];
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, STACK_SIZE);
    pthread_barrier_init(&warm_barrier, NULL, NTHREADS);
    for (int i = 0; i < NTHREADS; i++)
        if (pthread_create(&th[i], &attr, warm, NULL))
            BAIL("pthread_create");
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    sk_trim();
    kmalloc_counts_take(&kbase);

    clock_gettime(CLOCK_MONOTONIC, &t_start);
    int nth = 0;
    for (int i = 0; i < NCONS; i++)
        if (pthread_create(&th[nth++], &attr, consumer, (void *)(uintptr_t)i))
            BAIL("pthread_create");
    for (int i = 0; i < NPROD; i++)
        if (pthread_create(&th[nth++], &attr, producer, (void *)(uintptr_t)i))
            BAIL("pthread_create");
    pthread_t shr;
    pthread_create(&shr, &attr, shrinker, NULL);
    for (int i = 0; i < nth; i++)
        pthread_join(th[i], NULL);
    __atomic_store_n(&shrinker_stop, 1, __ATOMIC_RELEASE);
    pthread_join(shr, NULL);
    diag("%ld objects in %.2f s, %ld shrinks meanwhile", produced, elapsed_ns() / 1e9, shrinks);

    is(errors, 0, "no object lost, corrupted, misaligned or handed out twice");
    ok(produced > 0, "%ld objects produced", produced);
    if (produced < NPROD * per_producer)
        diag("time cap reached: %ld of %ld objects (a loaded machine)", produced, NPROD * per_producer);
    is(consumed, produced, "every object produced was consumed");
    is(live_count(), 0, "no object left in the live set");

    unsigned long cpu_partial_events = 0, barn_puts = 0, barn_gets = 0, small_remote = 0, hw_remote = 0;
    unsigned hw_order = 0;
    for (int k = 0; k < 3; k++) {
        const char *name = cache_names[k];
        struct sk_cache_info info;
        int freed = sk_cache_shrink(caches[k]);
        sk_cache_info(name, &info);
        is(info.active_objs, 0, "%s: active_objs 0 after shrink (%d slabs freed)", name, freed);
        is(info.num_slabs, 0, "%s: every slab returned after shrink", name);
        is(info.num_objs + info.array_objs + info.barn_objs + info.partial_slabs + info.cpu_partial_slabs, 0,
           "%s: nothing in arrays or the barn, no partial slab", name);
        barn_puts += info.stat[SK_BARN_PUT];
        barn_gets += info.stat[SK_BARN_GET];
        is(info.stat[SK_FREE_SLAB], info.stat[SK_NEW_SLAB], "%s: free_slab = new_slab (%lu)", name,
           info.stat[SK_NEW_SLAB]);
        if (k == K_CTOR)
            is(ctor_calls, (long)(info.stat[SK_NEW_SLAB] * info.objs_per_slab),
               "%s: constructor ran once per object per slab (%ld calls)", name, ctor_calls);
        cpu_partial_events += info.stat[SK_CPU_PARTIAL_FREE] + info.stat[SK_CPU_PARTIAL_ALLOC];
        if (k == K_SMALL)
            small_remote = info.stat[SK_FREE_REMOTE];
        if (k == K_HW) {
            hw_remote = info.stat[SK_FREE_REMOTE];
            hw_order = info.order;
        }
        diag("%s: alloc fast %lu slow %lu, free fast %lu slow %lu, cpu partial free %lu alloc %lu drain %lu, "
             "node partial free %lu alloc %lu, remote drains %lu, cmpxchg retries %lu", name,
             info.stat[SK_ALLOC_FASTPATH], info.stat[SK_ALLOC_SLOWPATH], info.stat[SK_FREE_FASTPATH],
             info.stat[SK_FREE_SLOWPATH], info.stat[SK_CPU_PARTIAL_FREE], info.stat[SK_CPU_PARTIAL_ALLOC],
             info.stat[SK_CPU_PARTIAL_DRAIN], info.stat[SK_NODE_PARTIAL_FREE], info.stat[SK_NODE_PARTIAL_ALLOC],
             info.stat[SK_REMOTE_DRAIN], info.stat[SK_CMPXCHG_FAIL]);
        if (cpu_partial == 0)
            is(info.cpu_partial, 0, "%s: cpu_partial=0: no CPU partial list", name);
        is(sk_cache_destroy(caches[k]), 0, "%s: destroyed", name);
    }
    if (cpu_partial == 0)
        is(cpu_partial_events, 0, "cpu_partial=0: no slab went through a CPU partial list");
    else
        ok(cpu_partial_events > 0, "cross-CPU frees sent slabs through CPU partial lists (%lu events)",
           cpu_partial_events);
    /* Whether the barn was used depends on where the threads ran (two
     * CPUs asking of each other): tests/slab/barn checks that with pinned
     * threads; here only that barn=0 turns it off. */
    /* The 24-byte cache's objects share lines: a free on the other CPU
     * goes home to the slab its producer's CPU holds (slab_free_at's
     * remote free, a cmpxchg16b racing that CPU's own refills), so the
     * checks above ran over that path too. */
    /* The 1000-byte cache's slabs span several pages: its home-going
     * frees read the home from tail pages (slab_mirror_owner's copies,
     * rewritten as slabs change home under these frees), and a full slab
     * one of them reopens goes on the node list while its home refills. */
    if (remote_on && ncpu >= 2) {
        ok(small_remote > 0, "%s: cross-CPU frees went home to their slabs (%lu remote frees)",
           cache_names[K_SMALL], small_remote);
        ok(hw_remote > 0 && hw_order > 0, "%s: and to slabs of %u pages (%lu remote frees)", cache_names[K_HW],
           1u << hw_order, hw_remote);
    } else {
        is(small_remote, 0, "%s: no remote free (remote_free=0, rseq off or one CPU)", cache_names[K_SMALL]);
        is(hw_remote, 0, "%s: none either", cache_names[K_HW]);
    }
    if (barn == 0)
        is(barn_puts + barn_gets, 0, "barn=0: no batch went through the barn");
    else
        diag("barn: %lu puts, %lu gets", barn_puts, barn_gets);

    /* The idle-cache reaper shrinks kmalloc classes the threads stopped
     * using while others grow the heap: its drains raced the fast paths
     * above (not with sheaves=0 or SLAB, whose caches it leaves alone). */
    unsigned long reaped = __atomic_load_n(&slab_reaped, __ATOMIC_RELAXED);
    if (sheaves != 0 && sk_option("allocator") != SK_ALLOC_SLAB && !SK_ASAN)
        ok(reaped > 0, "the idle-cache reaper ran during the stress (%lu caches shrunk)", reaped);
    else
        diag("idle-cache reaper: %lu caches shrunk", reaped);
    sk_trim();
    kmalloc_counts_take(&kend);
    is(kmalloc_counts_differ(&kbase, &kend), 0, "kmalloc classes back to their active counts from before");
    return done_testing();
}
