/*
 * failslab.c — the kernel's slab fault injection (failslab), for the
 * kernel API's allocations (kslab.c).
 *
 * Invariants: the settings are written whole by sk_failslab_set or, once,
 * from SLABKIT_OPTIONS by the first check (failslab_mode 0 -> 1 or 2);
 * readers load each field with a relaxed atomic, so a concurrent set may
 * mix old and new fields for one check, never tear one.  `times` and a
 * budget only count down, by compare-and-swap: no injection past zero.
 * Lock order: none; no lock is taken here.
 */
#include <errno.h>
#include <string.h>

#include "kernel/kernel.h"

unsigned char failslab_mode;
bool failslab_kmalloc_armed;
static long kmalloc_budget;

static struct {
    unsigned probability;
    unsigned long interval;
    long times;
    bool ignore_wait, cache_filter, verbose;
    unsigned long seen;         /* candidates, for interval */
    unsigned long injected;
} fs;

long *failslab_kmalloc_budget(void)
{
    return &kmalloc_budget;
}

static void apply(const struct sk_failslab *f)
{
    __atomic_store_n(&fs.probability, f->probability, __ATOMIC_RELAXED);
    __atomic_store_n(&fs.interval, f->interval, __ATOMIC_RELAXED);
    __atomic_store_n(&fs.times, f->times, __ATOMIC_RELAXED);
    __atomic_store_n(&fs.ignore_wait, f->ignore_wait, __ATOMIC_RELAXED);
    __atomic_store_n(&fs.cache_filter, f->cache_filter, __ATOMIC_RELAXED);
    __atomic_store_n(&fs.verbose, f->verbose, __ATOMIC_RELAXED);
    __atomic_store_n(&fs.seen, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&failslab_mode, f->probability && f->times ? 2 : 1, __ATOMIC_RELEASE);
}

/* The first check: the settings SLABKIT_OPTIONS gave. */
static void from_options(void)
{
    if (slab_init() != 0)    /* reads the options; a failure leaves them default */
        return;
    struct sk_failslab f = {
        .probability = (unsigned)sk_opt.failslab,
        .interval = (unsigned long)sk_opt.failslab_interval,
        .times = sk_opt.failslab_times,
        .ignore_wait = sk_opt.failslab_ignore_wait != 0,
        .cache_filter = sk_opt.failslab_caches[0] != 0,
        .verbose = sk_opt.verbose != 0,
    };
    unsigned char unset = 0;
    /* A set that came first wins. */
    if (__atomic_load_n(&failslab_mode, __ATOMIC_ACQUIRE) == unset)
        apply(&f);
}

/* Whether `name` is one failslab_caches names. */
static bool named(const char *name)
{
    const char *p = sk_opt.failslab_caches;
    size_t len = strlen(name);
    while (*p) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == len && !memcmp(p, name, n))
            return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

static bool injected(const char *call, const char *name, sk_gfp_t gfp, const char *why)
{
    __atomic_fetch_add(&fs.injected, 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(&fs.verbose, __ATOMIC_RELAXED))
        os_warn("failslab: %s(%s) fails (gfp %#x): %s", call, name, gfp, why);
    return true;
}

bool failslab_check(const char *call, const char *name, unsigned long kernel_flags, bool armed,
                    long *budget, sk_gfp_t gfp, unsigned long n)
{
    if (__atomic_load_n(&failslab_mode, __ATOMIC_ACQUIRE) == 0)
        from_options();
    if (gfp & SK_GFP_NOFAIL)
        return false;
    if (armed && !(gfp & SK_GFP_DIRECT_RECLAIM)) {
        long b = __atomic_load_n(budget, __ATOMIC_RELAXED);
        do {
            if (b < 0)
                break;          /* disarmed meanwhile: failslab's rule */
            if ((unsigned long)b < n)
                return injected(call, name, gfp, "no budget left for allocations that may not sleep");
        } while (!__atomic_compare_exchange_n(budget, &b, b - (long)n, false, __ATOMIC_RELAXED,
                                              __ATOMIC_RELAXED));
        if (b >= 0)
            return false;
    }
    if (__atomic_load_n(&failslab_mode, __ATOMIC_RELAXED) != 2)
        return false;
    if (__atomic_load_n(&fs.ignore_wait, __ATOMIC_RELAXED) && (gfp & SK_GFP_DIRECT_RECLAIM))
        return false;
    if (__atomic_load_n(&fs.cache_filter, __ATOMIC_RELAXED) && !(kernel_flags & SK_SLAB_FAILSLAB) &&
        !named(name))
        return false;
    if (__atomic_load_n(&fs.times, __ATOMIC_RELAXED) == 0)
        return false;
    unsigned long interval = __atomic_load_n(&fs.interval, __ATOMIC_RELAXED);
    if (interval > 1 && (__atomic_add_fetch(&fs.seen, 1, __ATOMIC_RELAXED) % interval) != 0)
        return false;
    unsigned prob = __atomic_load_n(&fs.probability, __ATOMIC_RELAXED);
    if (prob < 100 && os_random64() % 100 >= prob)
        return false;
    long t = __atomic_load_n(&fs.times, __ATOMIC_RELAXED);
    do {
        if (t == 0)
            return false;
        if (t < 0)
            break;
    } while (!__atomic_compare_exchange_n(&fs.times, &t, t - 1, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return injected(call, name, gfp, "failslab");
}

int sk_failslab_set(const struct sk_failslab *f)
{
    if (!f || f->probability > 100 || f->interval == 0) {
        errno = EINVAL;
        return -1;
    }
    apply(f);
    return 0;
}

void sk_failslab_get(struct sk_failslab *f)
{
    if (__atomic_load_n(&failslab_mode, __ATOMIC_ACQUIRE) == 0)
        from_options();
    f->probability = __atomic_load_n(&fs.probability, __ATOMIC_RELAXED);
    f->interval = __atomic_load_n(&fs.interval, __ATOMIC_RELAXED);
    f->times = __atomic_load_n(&fs.times, __ATOMIC_RELAXED);
    f->ignore_wait = __atomic_load_n(&fs.ignore_wait, __ATOMIC_RELAXED);
    f->cache_filter = __atomic_load_n(&fs.cache_filter, __ATOMIC_RELAXED);
    f->verbose = __atomic_load_n(&fs.verbose, __ATOMIC_RELAXED);
    f->injected = __atomic_load_n(&fs.injected, __ATOMIC_RELAXED);
}

void sk_kmem_cache_set_failslab(sk_cache_t *cache, bool on)
{
    struct slab_cache *c = (struct slab_cache *)cache;
    if (on)
        __atomic_fetch_or(&c->kernel_flags, SK_SLAB_FAILSLAB, __ATOMIC_RELAXED);
    else
        __atomic_fetch_and(&c->kernel_flags, ~SK_SLAB_FAILSLAB, __ATOMIC_RELAXED);
}

void sk_kmem_cache_set_nowait_budget(sk_cache_t *cache, long n)
{
    struct slab_cache *c = (struct slab_cache *)cache;
    __atomic_store_n(&c->nowait_budget, n < 0 ? -1 : n, __ATOMIC_RELAXED);
    __atomic_store_n(&c->nowait_armed, n >= 0, __ATOMIC_RELEASE);
}

void sk_kmalloc_set_nowait_budget(long n)
{
    __atomic_store_n(&kmalloc_budget, n < 0 ? -1 : n, __ATOMIC_RELAXED);
    __atomic_store_n(&failslab_kmalloc_armed, n >= 0, __ATOMIC_RELEASE);
}
