/*
 * kmalloc_counts.h — active_objs of every kmalloc class, taken at two
 * moments and compared: a stress test's objects all came back when every
 * class is at its count from before.
 */
#ifndef SK_TEST_KMALLOC_COUNTS_H
#define SK_TEST_KMALLOC_COUNTS_H
#include <stdio.h>
#include <string.h>

#include "page/page.h"
#include "slabkit.h"
#include "tap.h"

#define KMALLOC_COUNTS_MAX 64
struct kmalloc_counts {
    int n;
    struct { char name[32]; unsigned long active; } c[KMALLOC_COUNTS_MAX];
};

static inline void kmalloc_counts_one(const struct sk_cache_info *i, void *arg)
{
    struct kmalloc_counts *k = arg;
    if (!strncmp(i->name, "kmalloc-", 8) && k->n < KMALLOC_COUNTS_MAX) {
        snprintf(k->c[k->n].name, sizeof k->c[k->n].name, "%s", i->name);
        k->c[k->n++].active = i->active_objs;
    }
}

/* Nothing allocates while the caches are walked (snprintf into k).
 * The purger's thread (src/page/purge.c) starts lazily, at the first free
 * that leaves memory to purge, and pthread_create allocates its TLS
 * vector then, once and for good: started before the first count, it
 * does not read as a leak. */
static inline void kmalloc_counts_take(struct kmalloc_counts *k)
{
    page_purger_start();
    k->n = 0;
    sk_cache_foreach(kmalloc_counts_one, k);
}

/* How many classes differ (each named in a diagnostic); -1 when the two
 * lists do not match or are empty. */
static inline int kmalloc_counts_differ(const struct kmalloc_counts *a, const struct kmalloc_counts *b)
{
    if (a->n == 0 || a->n != b->n)
        return -1;
    int d = 0;
    for (int i = 0; i < a->n; i++)
        if (a->c[i].active != b->c[i].active) {
            d++;
            diag("%s: active_objs %lu before, %lu after", a->c[i].name, a->c[i].active, b->c[i].active);
        }
    return d;
}
#endif
