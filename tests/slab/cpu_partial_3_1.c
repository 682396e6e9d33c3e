/*
 * cpu_partial_3_1.c — seed 003's per-CPU partial lists, sized and drained
 * as Linux 3.1 did under sheaves=0, and their before (cpu_partial=0).
 *
 * One thread, pinned to one CPU, fills 80 slabs of a 64-byte cache, then
 * frees one object of each of the first 78: every free turns a full slab
 * partial.  Each mode runs in a fresh process (SLABKIT_OPTIONS, re-exec):
 *   - sheaves=0: each of the 78 joins the CPU partial list (3.1's
 *     put_cpu_partial), which counts free objects (pobjects) against
 *     cpu_partial = 30 and drains only when the list before the new slab
 *     holds more than that: 2 drains, the count 3.1's rule gives.  The old
 *     slab-count limit (one slab for 64 objects a slab) drained every
 *     other free, 39 times.
 *   - sheaves=0,cpu_partial=0: no slab joins a CPU list; each goes on the
 *     node list under list_lock (78 node-partial frees, no drain).
 *   - the default (per-CPU arrays): the limit is converted to slabs, as
 *     5.16+ kernels do, and sk_cache_info says which.
 * It fails if the switch is ignored: the counts differ in each mode.
 */
#define _GNU_SOURCE
#include <stdint.h>

#include "cpus.h"
#include "tap.h"
#include "slabkit.h"

#define SLABS 80
#define FREED 78

/* Fill SLABS slabs, free one object of each of the first FREED; the
 * cache's counters after. */
static void run(const char *name, struct sk_cache_info *before, struct sk_cache_info *after)
{
    sk_cache_t *c = sk_cache_create(name, 64, 0, 0, NULL);
    if (!c)
        BAIL("sk_cache_create: %s", strerror(errno));
    struct sk_cache_info info;
    sk_cache_info(name, &info);
    unsigned per = info.objs_per_slab, n = per * SLABS;
    void **objs = malloc(n * sizeof *objs);
    for (unsigned i = 0; i < n; i++)
        objs[i] = sk_cache_alloc(c);
    /* Objects of a fresh cache come out slab by slab (one-page slabs
     * here): each run of `per` fills one page, so the first of each run
     * lies in a slab of its own. */
    if (info.order != 0)
        BAIL("64-byte objects in slabs of order %u", info.order);
    for (unsigned i = 0; i < n; i++)
        if ((uintptr_t)objs[i] >> 12 != (uintptr_t)objs[i - i % per] >> 12)
            BAIL("object %u is not in the page of the first of its run", i);
    sk_cache_info(name, before);
    for (unsigned s = 0; s < FREED; s++) {
        char *o = objs[s * per];
        objs[s * per] = NULL;
        sk_cache_free(c, o);
    }
    sk_cache_info(name, after);
    for (unsigned i = 0; i < n; i++)
        if (objs[i])
            sk_cache_free(c, objs[i]);
    free(objs);
}

static unsigned long delta(const struct sk_cache_info *a, const struct sk_cache_info *b, int stat)
{
    return b->stat[stat] - a->stat[stat];
}

/* 3.1's put_cpu_partial over FREED slabs with one free object each. */
static unsigned drains_3_1(unsigned cpu_partial)
{
    unsigned pobjects = 0, drains = 0;
    for (unsigned i = 0; i < FREED; i++) {
        if (pobjects > cpu_partial) {
            drains++;
            pobjects = 0;
        }
        pobjects++;
    }
    return drains;
}

static int child(const char *mode)
{
    if (pin_first_cpu() < 0)
        BAIL("cannot pin to a CPU");
    struct sk_cache_info a, b;
    run("cp31_cache", &a, &b);
    unsigned long put = delta(&a, &b, SK_CPU_PARTIAL_FREE), drains = delta(&a, &b, SK_CPU_PARTIAL_DRAIN);
    unsigned long node = delta(&a, &b, SK_NODE_PARTIAL_FREE);
    diag("%s: cpu_partial %u (slabs %u), %lu joined a CPU list, %lu drains, %lu put on the node list",
         mode, b.cpu_partial, b.cpu_partial_slabs_max, put, drains, node);
    if (!strcmp(mode, "sheaves=0")) {
        is(b.cpu_partial, 30, "sheaves=0: cpu_partial 30 objects for 64-byte objects (3.1's default)");
        is(b.cpu_partial_slabs_max, 0, "sheaves=0: the limit counts objects, not slabs");
        is(put, FREED, "every slab a free made partial joined this CPU's partial list");
        is(drains, drains_3_1(30), "drained as 3.1 did: when the list before it held over 30 free objects");
        ok(drains < FREED / 4, "not every other free, as a one-slab limit would (%lu drains)", drains);
    } else if (!strcmp(mode, "sheaves=0,cpu_partial=0")) {
        is(b.cpu_partial, 0, "cpu_partial=0: no CPU partial list");
        is(put, 0, "no slab joined a CPU partial list");
        is(drains, 0, "nothing to drain");
        is(node, FREED, "each slab a free made partial went on the node list, under list_lock");
    } else {
        is(b.cpu_partial, 30, "default: cpu_partial 30 objects for 64-byte objects");
        ok(b.cpu_partial_slabs_max >= 1, "default: the limit converted to slabs (5.16+), %u",
           b.cpu_partial_slabs_max);
    }
    return done_testing();
}

int main(int argc, char **argv)
{
    static const char *const modes[] = { "sheaves=0", "sheaves=0,cpu_partial=0", "default" };
    static const int per[] = { 5, 4, 2 };
    return tap_modes(argc, argv, modes, per, 3, child);
}
