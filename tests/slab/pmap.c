/*
 * pmap — the page map (slab_types.h, vm.h) that free reads instead of a
 * page's descriptor agrees with the descriptors, page by page, at every
 * quiet point of a run that makes, fills, frees and discards slabs:
 *  - a word in the map is a slab page's, initialised (no PG_FRESH), of the
 *    cache its id names (the descriptor's cache), at the index in its slab
 *    the word says, of a cache whose slabs enter the map;
 *  - every initialised page of a slab of such a cache is in the map (a
 *    whole slice's: a partial slice has no map);
 *  - a fresh range's pages stay out until handed out from, and enter it as
 *    they are (a cache of 4 KiB objects in 8-page slabs);
 *  - a discarded slab leaves it (sk_cache_shrink, malloc_trim): a page
 *    back in the page allocator has no word;
 *  - slabs of a cache with a constructor (made eagerly) enter whole;
 *  - the home in a word is the slab's home (counters.owner) once the
 *    threads that moved slabs between CPUs are joined;
 *  - the frees that take the map's way are right: every object freed
 *    through free() comes back through malloc intact (a pattern each);
 *  - the lock-free updates race as they should: for 300 ms two threads
 *    allocate on one CPU and free on the other (homes rewritten by
 *    compare and swap) while a third shrinks every cache over and over
 *    (slabs discarded, their words cleared, fresh ranges started again);
 *    joined, the map agrees with the descriptors, homes included: no
 *    word outlives its slab, none is missing.
 * Bad frees through the map's way (double, interior, never handed out)
 * are tests/malloc/bad_input's, which runs the same path.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "slabkit.h"
#include "cpus.h"
#include "tap.h"
#include "cache_info.h"
#include "page/page.h"
#include "slab/slab_internal.h"

struct walk {
    size_t words;          /* pages in the map */
    size_t wrong;          /* words that disagree with the descriptor */
    size_t missing;        /* initialised slab pages of mapped caches out of the map */
    size_t homes;          /* words whose home differs from the slab's */
    size_t maps;           /* slices with a map */
};

static struct walk walk_map(void)
{
    struct walk w = { 0 };
    for (struct vm_slice *s = vm_slices(); s; s = s->next) {
        if (s->kind != VM_SLICE_BASE && s->kind != VM_SLICE_HUGE)
            continue;
        uint64_t *map = vm_pmap_of(s);
        w.maps += map != NULL;
        size_t pages = s->mapped >> SK_PAGE_SHIFT;
        for (size_t i = 0; i < pages && i < SLICE_PAGES; i++) {
            struct sk_page *pg = (struct sk_page *)s->pages + i;
            uint32_t flags = pg->flags;
            uint64_t word = vm_pmap(s)[i];
            bool slab = (flags & (PG_SLAB | PG_FRESH)) == PG_SLAB;
            if (word) {
                w.words++;
                struct slab_cache *c = (struct slab_cache *)(uintptr_t)(word >> 16);
                struct sk_page *head = slab ? pg->slab.head : NULL;
                if (!map || !slab || !c || !c->pmap || pg->slab.cache != c ||
                    (size_t)(pg - head) != ((word >> 8) & 0xff)) {
                    if (w.wrong++ < 5)
                        diag("page %zu of slice %p: word %#llx, flags %#x", i, (void *)s,
                             (unsigned long long)word, flags);
                    continue;
                }
                union slab_counters cnt = { .v = head->slab.counters };
                if (c->remote_free && cnt.owner != (uint8_t)word)
                    w.homes++;
            } else if (map && slab && pg->slab.cache && pg->slab.cache->pmap) {
                if (w.missing++ < 5)
                    diag("page %zu of slice %p: a slab page of %s out of the map", i, (void *)s,
                         pg->slab.cache->name);
            }
        }
    }
    return w;
}

static void check(const char *when)
{
    struct walk w = walk_map();
    if (!ok(w.words > 0 && w.wrong == 0 && w.missing == 0,
            "%s: %zu pages in the map, every word a slab page's as its descriptor says, none missing",
            when, w.words))
        diag("%zu wrong, %zu missing, %zu slices with a map", w.wrong, w.missing, w.maps);
}

/* check, homes included: after threads that moved slabs between CPUs. */
static void check_homes(const char *when)
{
    struct walk w = walk_map();
    ok(w.wrong == 0 && w.missing == 0 && w.homes == 0,
       "%s: the map agrees, homes too (%zu wrong, %zu missing, %zu homes off)", when, w.wrong, w.missing,
       w.homes);
}

/* The word of p's page (0: out of the map). */
static uint64_t word_of(const void *p)
{
    struct vm_slice *s = vm_slice_of(p);
    return s ? vm_pmap(s)[((uintptr_t)p >> SK_PAGE_SHIFT) & (SLICE_PAGES - 1)] : 0;
}

static void fill(unsigned char *p, size_t n, unsigned k) { memset(p, (int)(k * 7 + 1), n); }
static bool intact(const unsigned char *p, size_t n, unsigned k)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(k * 7 + 1))
            return false;
    return true;
}

#define N 6000
static void *objs[N];
static size_t sizes[N];

static void ctor(void *p) { memset(p, 0x5a, 48); }

/* Threads that allocate on one CPU and free on the other: slabs change
 * homes. */
#define T_OBJS 4000
static void *shared[T_OBJS];
static pthread_barrier_t bar;
static int cpus[2];

static void *cross(void *arg)
{
    int id = (int)(intptr_t)arg;
    pin_thread(cpus[id]);
    for (int round = 0; round < 20; round++) {
        if (id == 0)
            for (int i = 0; i < T_OBJS; i++)
                shared[i] = malloc(32 + (size_t)(i % 8) * 16);
        pthread_barrier_wait(&bar);
        if (id == 1)
            for (int i = 0; i < T_OBJS; i++)
                free(shared[i]);
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

/* The race: a producer on one CPU, a consumer on the other through a
 * ring of slots, and a trimmer. */
#define RING 1024
static void *ring[RING];
static volatile int stop;

static void *producer(void *arg)
{
    (void)arg;
    pin_thread(cpus[0]);
    for (unsigned i = 0; !stop; i++) {
        void **slot = &ring[i % RING];
        void *p = malloc(16 + (size_t)(i % 32) * 24);
        *(volatile char *)p = 1;
        p = __atomic_exchange_n(slot, p, __ATOMIC_ACQ_REL);
        free(p);     /* the slot's last object, maybe the consumer's turn lost */
    }
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    pin_thread(cpus[1]);
    for (unsigned i = 0; !stop; i++)
        free(__atomic_exchange_n(&ring[(i * 7) % RING], NULL, __ATOMIC_ACQ_REL));
    return NULL;
}

static void *trimmer(void *arg)
{
    (void)arg;
    while (!stop)
        malloc_trim(0);
    return NULL;
}

int main(int argc, char **argv)
{
    /* No purger thread (background=0, added to the options this runs
     * under): the walks read slabs and the map while nothing else changes
     * them, this program's own threads being joined first. */
    if (argc < 2 || strcmp(argv[1], "--child") != 0) {
        const char *o = getenv("SLABKIT_OPTIONS");
        char opts[512];
        snprintf(opts, sizeof opts, "%s%sbackground=0", o ? o : "", o && *o ? "," : "");
        setenv("SLABKIT_OPTIONS", opts, 1);
        execl("/proc/self/exe", argv[0], "--child", (char *)NULL);
        BAIL("execl: %s", strerror(errno));
    }
    srand(7);
    int two = first_two_cpus(&cpus[0], &cpus[1]);

    /* ---- malloc of every small size, half freed ---- */
    for (int i = 0; i < N; i++) {
        sizes[i] = 8 + (size_t)rand() % 4096;
        objs[i] = malloc(sizes[i]);
        if (!objs[i])
            BAIL("malloc");
        fill(objs[i], sizes[i], (unsigned)i);
    }
    check("after 6000 mallocs of 8-4104 bytes");
    for (int i = 0; i < N; i += 2) {
        free(objs[i]);
        objs[i] = NULL;
    }
    check("after freeing every other one");
    int bad = 0;
    for (int i = 0; i < N; i++) {
        if (!objs[i]) {
            sizes[i] = 8 + (size_t)rand() % 4096;
            objs[i] = malloc(sizes[i]);
            fill(objs[i], sizes[i], (unsigned)i);
        }
    }
    for (int i = 0; i < N; i++)
        bad += !intact(objs[i], sizes[i], (unsigned)i);
    is(bad, 0, "every object intact after frees through the map and mallocs of the same");

    /* ---- a fresh range: pages enter the map as they are handed out ---- */
    sk_cache_t *big = sk_cache_create("pmap_big", 4096, 0, 0, NULL);
    if (!big)
        BAIL("sk_cache_create");
    struct sk_cache_info ci = cache_info("pmap_big");
    if (ci.order != 3 || ci.objs_per_slab != 8)
        BAIL("pmap_big: %u objects in order-%u slabs, want 8 in order 3", ci.objs_per_slab, ci.order);
    pin_first_cpu();
    char *b0 = sk_cache_alloc(big);
    ok(b0 && ((uintptr_t)b0 & (8 * 4096 - 1)) == 0, "a new slab: its first object starts it");
    int out = 0;
    for (int k = 1; k < 8; k++)
        out += word_of(b0 + (size_t)k * 4096) == 0;
    ok(word_of(b0) != 0 && out == 7, "its first page is in the map, the 7 fresh pages are not (%d)", out);
    char *b[8] = { b0 };
    for (int k = 1; k < 8; k++)
        b[k] = sk_cache_alloc(big);
    out = 0;
    for (int k = 0; k < 8; k++)
        out += word_of(b0 + (size_t)k * 4096) == 0;
    is(out, 0, "all 8 handed out: all 8 pages in the map");
    is((int)((word_of(b0 + 5 * 4096) >> 8) & 0xff), 5, "page 5's word says page 5 of its slab");
    ok((struct slab_cache *)(uintptr_t)(word_of(b0) >> 16) == (struct slab_cache *)big,
       "and names its cache");
    check("with a fresh range used up");
    for (int k = 0; k < 8; k++)
        sk_cache_free(big, b[k]);
    sk_cache_shrink(big);
    out = 0;
    for (int k = 0; k < 8; k++)
        out += word_of(b0 + (size_t)k * 4096) != 0;
    is(out, 0, "its slab discarded (sk_cache_shrink): none of its pages left in the map");

    /* ---- a constructor: slabs made whole, in the map whole ---- */
    sk_cache_t *cc = sk_cache_create("pmap_ctor", 48, 0, 0, ctor);
    void *c0 = sk_cache_alloc(cc);
    ok(c0 && word_of(c0) != 0, "an object of a cache with a constructor: its page is in the map");
    check("with a constructor's cache");
    sk_cache_free(cc, c0);

    /* ---- homes ---- */
    if (two) {
        pthread_t t[2];
        pthread_barrier_init(&bar, NULL, 2);
        for (intptr_t i = 0; i < 2; i++)
            pthread_create(&t[i], NULL, cross, (void *)i);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        check_homes("after 20 rounds of malloc on CPU 0 and free on CPU 1");
    } else {
        skip("one CPU: no slab changes home");
    }

    /* ---- the race ---- */
    if (two) {
        pthread_t t[3];
        pthread_create(&t[0], NULL, producer, NULL);
        pthread_create(&t[1], NULL, consumer, NULL);
        pthread_create(&t[2], NULL, trimmer, NULL);
        nap_ms(300);
        stop = 1;
        for (int i = 0; i < 3; i++)
            pthread_join(t[i], NULL);
        for (int i = 0; i < RING; i++)
            free(ring[i]);
        check_homes("after 300 ms of cross-CPU malloc/free racing malloc_trim");
    } else {
        skip("one CPU: no race between homes");
    }

    /* ---- everything freed and trimmed ---- */
    for (int i = 0; i < N; i++)
        free(objs[i]);
    malloc_trim(0);
    struct walk w = walk_map();
    ok(w.wrong == 0 && w.missing == 0, "all freed and trimmed: the map agrees (%zu pages left in it)", w.words);
    sk_cache_destroy(big);
    sk_cache_destroy(cc);
    done_testing();
}
