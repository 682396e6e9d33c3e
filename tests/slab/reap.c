/*
 * reap — the idle-cache reaper (slab_reap): while the heap grows into
 * memory that was not resident, a size class left idle gives back what it
 * keeps (per-CPU array objects, CPU and partial slabs, empty slabs), and a
 * class in use keeps its cache.  One thread, pinned to one CPU:
 *
 *  - kmalloc-2048 is used and left with objects in its per-CPU array and
 *    slabs (600 allocated, then freed); kmalloc-4096 is kept busy (4
 *    allocated and freed before every 16 KiB of growth); kmalloc-1024 grows
 *    the heap, 256 KiB a round, held, every 2 ms, until kmalloc-2048 is
 *    empty or 64 MiB;
 *  - kmalloc-2048 ends with no object in an array and no slab, within
 *    that growth; kmalloc-4096 was never drained and still has objects
 *    in its array;
 *  - without growth nothing is reaped: kmalloc-512, left the same way
 *    while the program only sleeps and reuses memory, keeps its objects;
 *  - every object keeps its contents meanwhile (the busy class's and the
 *    growing class's are checked);
 *  - no pass can deadlock on a lock its own thread holds: the heap grows
 *    (and idle classes wait to be reaped) from inside an sk_cache_foreach
 *    callback (cache_lock held) and from inside a cache constructor (its
 *    slab_cpu lock held); both finish (a watchdog fails a hang).
 * Needs the malloc family (kmalloc caches): linked with libslabkit.a.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slabkit.h"
#include "slab/kmalloc.h"          /* SLAB_REAP_MS */
#include "cpus.h"
#include "tap.h"
#include "cache_info.h"

#define SLAB_REAP_WAIT_MS (SLAB_REAP_MS + 2)   /* past the reaper's time between passes */

/* Leave a class with objects cached: n allocated (and written), freed. */
static void use_and_leave(size_t size, int n)
{
    void **p = malloc((size_t)n * sizeof *p);
    if (!p)
        BAIL("malloc");
    for (int i = 0; i < n; i++) {
        if (!(p[i] = malloc(size)))
            BAIL("malloc(%zu)", size);
        memset(p[i], 0x5a, size);
    }
    for (int i = 0; i < n; i++)
        free(p[i]);
    free(p);
}

struct grow {
    int calls, bad;
};

/* Memory the heap has never held: n KiB of 1 KiB objects, written and
 * kept (held[], freed by drop_held) so that every call grows the heap. */
#define HELD_MAX (48 << 10)
static unsigned char *held[HELD_MAX];
static int nheld;

static void grow_held(int kib)
{
    for (int k = 0; k < kib && nheld < HELD_MAX; k++, nheld++) {
        if (!(held[nheld] = malloc(1024)))
            BAIL("malloc(1024)");
        memset(held[nheld], nheld & 0xff, 1024);
    }
}

static int drop_held(void)
{
    int bad = 0;
    for (int k = 0; k < nheld; k++) {
        bad += held[k][1023] != (unsigned char)(k & 0xff);
        free(held[k]);
    }
    nheld = 0;
    return bad;
}

/* With cache_lock held (sk_cache_foreach): idle kmalloc-2048 waits to be
 * reaped while the heap grows, pass after pass. */
static void grow_in_callback(const struct sk_cache_info *i, void *arg)
{
    struct grow *g = arg;
    (void)i;
    if (g->calls++ < 4) {
        nap_ms(SLAB_REAP_WAIT_MS);
        grow_held(2048);
    }
}

/* With this cache's slab_cpu lock held: the cache is idle between slabs,
 * and the heap grows from inside its constructor. */
static int ctor_calls, ctor_grow, ctor_grew;
static void ctor_grows(void *obj)
{
    memset(obj, 0, 3000);
    ctor_calls++;
    if (ctor_grow && ctor_grew < 24) {     /* several passes within one slab */
        nap_ms(SLAB_REAP_WAIT_MS);
        grow_held(256);
        ctor_grew++;
    }
}

#define GROW_MAX 256   /* rounds of 256 KiB: 64 MiB */
static unsigned char *grown[GROW_MAX * 256];

int main(void)
{
    plan(9);
    bail_out_after(60, "reap: hung (a reaper waiting for a lock its thread holds?)");
    if (pin_first_cpu() < 0)
        BAIL("cannot pin to a CPU");

    /* No growth, no reaping: an idle class keeps its cache while the
     * program sleeps and reuses what it freed. */
    use_and_leave(512, 600);
    struct sk_cache_info a0 = cache_info("kmalloc-512");
    for (int r = 0; r < 10; r++) {
        nap_ms(5);
        use_and_leave(64, 100);
    }
    struct sk_cache_info a1 = cache_info("kmalloc-512");
    ok(a0.array_objs > 0 && a1.array_objs == a0.array_objs && a1.num_slabs == a0.num_slabs,
       "without heap growth an idle class keeps its cache (%lu array objects, %lu slabs; before %lu, %lu)",
       a1.array_objs, a1.num_slabs, a0.array_objs, a0.num_slabs);

    use_and_leave(2048, 600);
    struct sk_cache_info i0 = cache_info("kmalloc-2048");
    ok(i0.array_objs > 0 && i0.num_slabs > 0, "kmalloc-2048 keeps %lu objects in its array, %lu slabs",
       i0.array_objs, i0.num_slabs);

    void *busy[4];
    int rounds = 0, bad = 0;
    size_t n = 0;
    struct sk_cache_info i1 = i0;
    struct sk_cache_info b0 = cache_info("kmalloc-4096");
    while (rounds < GROW_MAX) {
        /* The busy class is used between every 16 allocations of the
         * growth: never idle for a reaper pass, let alone two. */
        for (int chunk = 0; chunk < 16; chunk++) {
            for (int k = 0; k < 4; k++) {
                if (!(busy[k] = malloc(4096)))
                    BAIL("malloc(4096)");
                memset(busy[k], k, 4096);
            }
            for (int k = 0; k < 4; k++) {
                bad += ((unsigned char *)busy[k])[4095] != (unsigned char)k;
                free(busy[k]);
            }
            for (int k = 0; k < 16; k++, n++) {
                if (!(grown[n] = malloc(1024)))
                    BAIL("malloc(1024)");
                memset(grown[n], (int)(n & 0xff), 1024);
            }
        }
        rounds++;
        i1 = cache_info("kmalloc-2048");
        if (i1.array_objs == 0 && i1.num_slabs == 0)
            break;
        nap_ms(2);
    }
    ok(i1.array_objs == 0 && i1.num_slabs == 0,
       "while the heap grows, idle kmalloc-2048 gives back its array objects and slabs (%lu, %lu after %d rounds, %zu KiB grown)",
       i1.array_objs, i1.num_slabs, rounds, n);
    struct sk_cache_info b = cache_info("kmalloc-4096");
    ok(b.array_objs > 0 && b.stat[SK_REMOTE_DRAIN] == b0.stat[SK_REMOTE_DRAIN],
       "busy kmalloc-4096 keeps its cache (%lu objects in its array, drained %lu times)", b.array_objs,
       b.stat[SK_REMOTE_DRAIN] - b0.stat[SK_REMOTE_DRAIN]);
    for (size_t k = 0; k < n; k++)
        bad += grown[k][0] != (unsigned char)(k & 0xff) || grown[k][1023] != (unsigned char)(k & 0xff);
    is(bad, 0, "every live object kept its contents");
    for (size_t k = 0; k < n; k++)
        free(grown[k]);
    /* The reaped class works as before. */
    use_and_leave(2048, 100);
    struct sk_cache_info i2 = cache_info("kmalloc-2048");
    ok(i2.num_slabs > 0, "the reaped class serves again (%lu slabs)", i2.num_slabs);
    ok(i2.stat[SK_ALLOC_SLOWPATH] > i1.stat[SK_ALLOC_SLOWPATH], "refilled from its slabs");

    /* Growth with cache_lock held by this thread. */
    use_and_leave(2048, 600);
    struct grow g = { 0, 0 };
    sk_cache_foreach(grow_in_callback, &g);
    ok(g.calls > 0, "growing inside sk_cache_foreach's callback finishes (%d callbacks)", g.calls);

    /* Growth inside a constructor (its cache's slab_cpu lock held): the
     * cache itself is idle between slabs. */
    use_and_leave(2048, 600);
    sk_cache_t *cc = sk_cache_create("reap-ctor", 3000, 0, 0, ctor_grows);
    if (!cc)
        BAIL("sk_cache_create");
    /* First in use (its arrays move), then a new slab whose objects are
     * constructed across several reaper passes. */
    void *objs[256];
    for (int k = 0; k < 64; k++)
        if (!(objs[k] = sk_cache_alloc(cc)))
            BAIL("sk_cache_alloc");
    for (int k = 0; k < 64; k++)
        sk_cache_free(cc, objs[k]);
    ctor_grow = 1;
    for (int k = 0; k < 256; k++)
        if (!(objs[k] = sk_cache_alloc(cc)))
            BAIL("sk_cache_alloc");
    for (int k = 0; k < 256; k++)
        sk_cache_free(cc, objs[k]);
    /* (What the callback grew stays held: only fresh memory calls the
     * reaper, and the constructor's growth must be fresh too.) */
    int bad2 = drop_held();
    ok(ctor_grew == 24 && bad2 == 0, "growing inside a constructor finishes (%d constructed, %d of them growing the heap)",
       ctor_calls, ctor_grew);
    return done_testing();
}
