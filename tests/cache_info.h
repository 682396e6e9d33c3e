/*
 * cache_info.h — for the slab tests: a cache's sk_cache_info by name (a
 * missing cache bails out), and a nap in milliseconds.  Include after
 * tap.h and slabkit.h.
 */
#ifndef SK_TEST_CACHE_INFO_H
#define SK_TEST_CACHE_INFO_H
#include <time.h>

static inline struct sk_cache_info cache_info(const char *name)
{
    struct sk_cache_info i;
    if (sk_cache_info(name, &i) != 0)
        BAIL("sk_cache_info(%s) failed", name);
    return i;
}

static inline void nap_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}
#endif
