/*
 * options.c — SLABKIT_OPTIONS: comma-separated key=value, read once.
 *
 * Invariants: sk_opt holds the defaults until os_options_init() runs, and
 * is never written after it (readers need no lock).  The parser works on a
 * bounded stack copy and never allocates: it runs inside the first malloc.
 * An unknown key or a bad value prints one warning line naming it and is
 * ignored; nothing here can crash on any input.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "os/os.h"

struct sk_options sk_opt = {
    .slab_reserved = 0,
    .pcp = 1,
    .slice_mask_cache = 1,
    .cpu_partial = -1,
    .barn = 1,
    .mutex_spin = 1,
    .huge_slices = 1,
    .slabinfo_at_exit = 0,
    .decay_ms = 500,
    .dirty_max_mb = 64,
    .array_size = 0,
    .background = 1,
    .verbose = 0,
    .sized_check = 0,
};

struct option_def {
    const char *key;
    long *val;
    long min, max;
    const char *help;
};

static const struct option_def defs[] = {
    { "slab_reserved", &sk_opt.slab_reserved, 0, 2048, "bytes of header inside each slab (SLAB before 2014)" },
    { "pcp", &sk_opt.pcp, 0, 1, "per-CPU page lists" },
    { "slice_mask_cache", &sk_opt.slice_mask_cache, 0, 1, "keep slice masks instead of recomputing them" },
    { "cpu_partial", &sk_opt.cpu_partial, -1, 1 << 20, "objects on per-CPU partial lists (-1: by size, 0: off)" },
    { "barn", &sk_opt.barn, 0, 1, "full batches of free objects passed between a node's CPUs" },
    { "mutex_spin", &sk_opt.mutex_spin, 0, 1, "sk_mutex optimistic spinning" },
    { "huge_slices", &sk_opt.huge_slices, 0, 1, "dense memory in 2 MiB huge-page slices" },
    { "slabinfo_at_exit", &sk_opt.slabinfo_at_exit, 0, 1, "print slabinfo to stderr at exit" },
    { "decay_ms", &sk_opt.decay_ms, 0, 3600000, "free memory older than this returns to the OS" },
    { "dirty_max_mb", &sk_opt.dirty_max_mb, 0, 1 << 20, "free resident MiB above which memory returns at once" },
    { "array_size", &sk_opt.array_size, 0, 125, "per-CPU object array capacity (0: by size)" },
    { "background", &sk_opt.background, 0, 1, "a background thread returns idle free memory to the OS" },
    { "verbose", &sk_opt.verbose, 0, 1, "print start-up facts" },
    { "sized_check", &sk_opt.sized_check, 0, 1, "free_sized and sized delete check the size (0: trust it)" },
};

/* Strict decimal (or 0x hex) parse; 0 on success. */
static int parse_long(const char *s, long *out)
{
    if (!*s)
        return -1;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 0);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

long sk_option(const char *key)
{
    os_options_init();
    for (size_t i = 0; i < SK_ARRAY_SIZE(defs); i++)
        if (!strcmp(defs[i].key, key))
            return *defs[i].val;
    return -1;
}

int os_options_parse(const char *text)
{
    if (!text)
        return 0;
    char buf[1024];
    size_t len = strnlen(text, sizeof buf);
    int warnings = 0;
    if (len == sizeof buf) {
        os_warn("SLABKIT_OPTIONS longer than %zu bytes: ignored", sizeof buf - 1);
        return 1;
    }
    memcpy(buf, text, len + 1);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        while (*item == ' ')
            item++;
        if (!*item)
            continue;
        char *eq = strchr(item, '=');
        const char *value = eq ? eq + 1 : "1";   /* a bare key means key=1 */
        if (eq)
            *eq = 0;
        const struct option_def *d = NULL;
        for (size_t i = 0; i < SK_ARRAY_SIZE(defs); i++)
            if (!strcmp(defs[i].key, item))
                d = &defs[i];
        long v;
        if (!d) {
            os_warn("SLABKIT_OPTIONS: unknown option '%s' ignored", item);
            warnings++;
        } else if (parse_long(value, &v) || v < d->min || v > d->max) {
            os_warn("SLABKIT_OPTIONS: bad value '%s' for %s (want %ld..%ld) ignored",
                    value, d->key, d->min, d->max);
            warnings++;
        } else {
            *d->val = v;
        }
    }
    return warnings;
}

/* 0: not read, 1: being read, 2: read.  A racing caller waits. */
static int options_state;

void os_options_atfork_child(void)
{
    /* A parent thread caught parsing is gone: parse again (the same
     * environment gives the same values). */
    if (__atomic_load_n(&options_state, __ATOMIC_RELAXED) == 1)
        __atomic_store_n(&options_state, 0, __ATOMIC_RELAXED);
}

void os_options_init(void)
{
    if (likely(__atomic_load_n(&options_state, __ATOMIC_ACQUIRE) == 2))
        return;
    int expect = 0;
    if (__atomic_compare_exchange_n(&options_state, &expect, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        os_options_parse(getenv("SLABKIT_OPTIONS"));
        __atomic_store_n(&options_state, 2, __ATOMIC_RELEASE);
        return;
    }
    while (__atomic_load_n(&options_state, __ATOMIC_ACQUIRE) != 2)
        os_yield();
}
