/*
 * classic_order.c — allocator=slab moves objects as 3.13's SLAB did, under
 * both slab_mgmt layouts (each in a fresh process, SLABKIT_OPTIONS):
 *
 *  - the flush (cache_flusharray) takes the array's *oldest* batchcount
 *    objects to the shared array and keeps the newer ones: after freeing
 *    o[0..120] into a 117-slot array (o[117] flushes o[0..59]), the next
 *    61 allocations return
 *    o[120] down to o[60], newest first;
 *  - a refill takes from the shared array first (transfer_objects, its
 *    newest objects) and hands out the last one taken (ac_get_obj): the
 *    next allocations return o[59], o[58], ...;
 *  - a refill from the slabs hands out the last object taken, so a fresh
 *    slab's objects come out in descending address order.
 * The SLUB flush order (the newest objects leave) fails the first check.
 */
#define _GNU_SOURCE
#include <stdint.h>

#include "cpus.h"
#include "tap.h"
#include "slabkit.h"

#define NOBJ 200
#define FREED 121

static int child(const char *mode)
{
    if (pin_first_cpu() < 0)
        BAIL("cannot pin to a CPU");
    sk_cache_t *c = sk_cache_create("classic_order", 64, 0, 0, NULL);
    if (!c)
        BAIL("sk_cache_create: %s", strerror(errno));
    struct sk_cache_info info;
    sk_cache_info("classic_order", &info);
    diag("%s: array %u, batchcount %u, shared array %u objects", mode, info.array_capacity, info.batch,
         info.barn_capacity);
    /* SLAB's limit 120, of which the arrays hold 117 (CPU_ARRAY_MAX). */
    if (info.array_capacity != 117 || info.batch != 60)
        BAIL("want an array of 117 and SLAB's batchcount 60 for 64-byte objects");

    void *o[NOBJ];
    for (unsigned i = 0; i < NOBJ; i++)
        o[i] = sk_cache_alloc(c);
    /* The first two of a fresh slab: the refill's last object first. */
    ok((uintptr_t)o[1] < (uintptr_t)o[0], "%s: a refill from a slab hands out the last object taken", mode);

    for (unsigned i = 0; i < FREED; i++)
        sk_cache_free(c, o[i]);
    int order_ok = 1;
    void *p[61];
    for (unsigned i = 0; i < 61; i++) {
        p[i] = sk_cache_alloc(c);
        if (p[i] != o[120 - i])
            order_ok = 0;
    }
    ok(order_ok, "%s: the flush kept the newest 60 and o[120] (LIFO: o[120] .. o[60])", mode);
    if (info.barn_capacity) {
        void *q = sk_cache_alloc(c), *r = sk_cache_alloc(c);
        ok(q == o[59] && r == o[58], "%s: the oldest 60 went to the shared array; a refill takes them back, "
           "last taken first (o[59], o[58])", mode);
        sk_cache_free(c, r);
        sk_cache_free(c, q);
    } else {
        skip("%s: no shared array with one CPU", mode);
    }
    for (unsigned i = 0; i < 61; i++)
        sk_cache_free(c, p[i]);
    for (unsigned i = FREED; i < NOBJ; i++)
        sk_cache_free(c, o[i]);
    sk_cache_shrink(c);
    is(sk_cache_destroy(c), 0, "%s: every object came back", mode);
    return done_testing();
}

int main(int argc, char **argv)
{
    static const char *const modes[] = { "allocator=slab,slab_mgmt=onslab", "allocator=slab,slab_mgmt=page" };
    static const int per[] = { 4, 4 };
    return tap_modes(argc, argv, modes, per, 2, child);
}
