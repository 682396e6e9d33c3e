/*
 * reap_idle — a program that stops allocating gets back what its caches
 * keep: the purger's tick runs the idle-cache reaper (page_set_idle_pass),
 * as SLAB's cache_reap ran every 2 s.
 *
 *  - 2000 objects of 512 bytes allocated and freed leave kmalloc-512 with
 *    objects in its per-CPU array and slabs; a 4 MiB block freed gives a
 *    zone dirty memory, and the next malloc starts the purger;
 *  - then the program only sleeps: within 5 s kmalloc-512 has no object
 *    in an array and no slab, and the purger ran ticks meanwhile;
 *  - with SLABKIT_OPTIONS=background=0 (no purger; the test runs itself
 *    again so) kmalloc-512 keeps its cache over the same 1.5 s.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "slabkit.h"
#include "page/page.h"
#include "tap.h"
#include "threaded.h"
#include "cache_info.h"

static void *objs[2000];

/* Leave kmalloc-512 holding objects; give a zone dirty memory; start the
 * purger with one more malloc. */
static struct sk_cache_info setup(void)
{
    for (int i = 0; i < 2000; i++) {
        if (!(objs[i] = malloc(512)))
            BAIL("malloc(512)");
        memset(objs[i], i & 0xff, 512);
    }
    for (int i = 0; i < 2000; i++)
        free(objs[i]);
    struct sk_cache_info a = cache_info("kmalloc-512");
    void *big = malloc(4 << 20);
    if (!big)
        BAIL("malloc(4 MiB)");
    memset(big, 1, 4 << 20);
    free(big);
    void *start = malloc(100 << 10);    /* a slow path: the purger starts */
    if (!start)
        BAIL("malloc(100 KiB)");
    free(start);
    return a;
}

/* The run with background=0: print what stayed, for the parent. */
static int without_purger(void)
{
    struct sk_cache_info a = setup();
    nap_ms(1500);
    struct sk_cache_info b = cache_info("kmalloc-512");
    printf("kept %lu %lu %lu %lu\n", a.array_objs, a.num_slabs, b.array_objs, b.num_slabs);
    return 0;
}

int main(int argc, char **argv)
{
    become_threaded();    /* the purger's conditions (threaded.h) */
    if (argc > 1 && !strcmp(argv[1], "--no-purger"))
        return without_purger();
    plan(4);
    bail_out_after(60, "reap_idle: hung");
    struct sk_cache_info a = setup();
    ok(a.array_objs > 0 && a.num_slabs > 0, "kmalloc-512 keeps %lu objects in its array and %lu slabs",
       a.array_objs, a.num_slabs);
    struct page_stats s0;
    page_stats(&s0);
    struct sk_cache_info b = a;
    int waited = 0;
    for (; waited < 5000; waited += 50) {
        b = cache_info("kmalloc-512");
        if (b.array_objs == 0 && b.num_slabs == 0)
            break;
        nap_ms(50);
    }
    struct page_stats s1;
    page_stats(&s1);
    ok(b.array_objs == 0 && b.num_slabs == 0,
       "idle, it gives them back: %lu array objects, %lu slabs after %d ms", b.array_objs, b.num_slabs, waited);
    ok(s1.purger_ticks > s0.purger_ticks, "the purger ticked meanwhile (%lu ticks)", s1.purger_ticks - s0.purger_ticks);

    /* background=0: no purger, nothing reaps an idle program. */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "SLABKIT_OPTIONS=background=0 '%s' --no-purger", argv[0]);
    FILE *f = popen(cmd, "r");
    unsigned long k[4] = { 0 };
    int got = f ? fscanf(f, "kept %lu %lu %lu %lu", &k[0], &k[1], &k[2], &k[3]) : 0;
    if (f)
        pclose(f);
    ok(got == 4 && k[0] > 0 && k[2] == k[0] && k[3] == k[1],
       "with background=0 the idle cache keeps them (%lu -> %lu array objects, %lu -> %lu slabs)", k[0], k[2], k[1],
       k[3]);
    return done_testing();
}
