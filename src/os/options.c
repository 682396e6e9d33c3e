/*
 * options.c — SLABKIT_OPTIONS: comma-separated key=value, read once.
 *
 * Invariants: sk_opt holds the defaults until os_options_init() runs, and
 * is never written after it (readers need no lock).  The parser works on a
 * bounded stack copy and never allocates: it runs inside the first malloc.
 * An unknown key or a bad value prints one warning line naming it and is
 * ignored; nothing here can crash on any input.  A value is a number in
 * the option's range or, for options that have them, one of its words
 * (mutex_spin=mcs, allocator=slab); allocator and slab_mgmt take words only.
 * swap_file and slabinfo_file take a path.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/os.h"

struct sk_options sk_opt = {
    .allocator = SK_ALLOC_SLUB,
    .slab_mgmt = SK_SLAB_MGMT_PAGE,
    .pcp = 1,
    .slice_mask_cache = 1,
    .cpu_partial = -1,
    .barn = 1,
    .remote_free = 1,
    .sheaves = 1,
    .mutex_spin = 1,
    .huge_slices = 1,
    .slabinfo_at_exit = 0,
    .decay_ms = 500,
    .dirty_max_mb = 64,
    .array_size = 0,
    .background = 1,
    .zone_borrow = 1,
    .verbose = 0,
    .page_microopt = 1,
    .shmem_limit_mb = 0,
    .swap_file = "",
    .slabinfo_file = "",
    .sized_check = 0,
    .kfence = 0,
    .kfence_pages = 255,
    .leak_check = 0,
    .debug = 0,
    .debug_caches = "",
    .debug_continue = 0,
};

/* A value given by name; a list ends with a NULL name. */
struct option_word {
    const char *name;
    long val;
};

/* An option takes a number in min..max (an empty range: none) or, where
 * `words` is set, one of those words. */
struct option_def {
    const char *key;
    long *val;
    long min, max;
    const char *help;
    const struct option_word *words;   /* NULL-name-terminated, or NULL */
};

/* Words for values: allocator and slab_mgmt take only words (a word says
 * what it means); mutex_spin's "mcs" stands for a value 0..1 does not reach. */
static const struct option_word allocator_words[] = {
    { "slub", SK_ALLOC_SLUB }, { "slab", SK_ALLOC_SLAB }, { NULL, 0 } };
static const struct option_word slab_mgmt_words[] = {
    { "page", SK_SLAB_MGMT_PAGE }, { "onslab", SK_SLAB_MGMT_ONSLAB }, { NULL, 0 } };
static const struct option_word mutex_spin_words[] = {
    { "mcs", MUTEX_SPIN_MCS }, { NULL, 0 } };

static const struct option_def defs[] = {
    { "allocator", &sk_opt.allocator, 0, -1, "slub (default) or slab: the kernel's SLAB (docs/slab.md)",
      allocator_words },
    { "slab_mgmt", &sk_opt.slab_mgmt, 0, -1,
      "allocator=slab: slab fields in the page descriptor (page) or at the slab head (onslab)", slab_mgmt_words },
    { "pcp", &sk_opt.pcp, 0, 1, "per-CPU page lists (orders 0-3, and a cached 32-256 KiB block)", NULL },
    { "slice_mask_cache", &sk_opt.slice_mask_cache, 0, 1, "keep slice masks instead of recomputing them", NULL },
    { "cpu_partial", &sk_opt.cpu_partial, -1, 1 << 20, "objects on per-CPU partial lists (-1: by size, 0: off)", NULL },
    { "remote_free", &sk_opt.remote_free, 0, 1, "a free on another CPU than its slab's home goes back to the slab (0: into this CPU's array)", NULL },
    { "barn", &sk_opt.barn, 0, 1, "full batches of free objects passed between a node's CPUs", NULL },
    { "sheaves", &sk_opt.sheaves, 0, 1, "per-CPU object arrays and the barn (0: SLUB's per-CPU freelists, 2011)", NULL },
    { "mutex_spin", &sk_opt.mutex_spin, 0, 1, "sk_mutex spinning: 0 off, 1 cancellable queue, mcs the pre-2014 queue",
      mutex_spin_words },
    { "huge_slices", &sk_opt.huge_slices, 0, 1, "dense memory in 2 MiB huge-page slices", NULL },
    { "slabinfo_at_exit", &sk_opt.slabinfo_at_exit, 0, 1, "print slabinfo to stderr at exit", NULL },
    { "decay_ms", &sk_opt.decay_ms, 0, 3600000, "free memory older than this returns to the OS", NULL },
    { "dirty_max_mb", &sk_opt.dirty_max_mb, 0, 1 << 20, "free resident MiB above which memory returns at once", NULL },
    { "array_size", &sk_opt.array_size, 0, SK_ARRAY_SIZE_MAX, "per-CPU object array capacity, fixed (0: by size, growing with use)", NULL },
    { "background", &sk_opt.background, 0, 1, "a background thread returns idle free memory to the OS", NULL },
    { "zone_borrow", &sk_opt.zone_borrow, 0, 1, "large blocks take the slab zone's resident free pages before fresh memory", NULL },
    { "verbose", &sk_opt.verbose, 0, 1, "print start-up facts", NULL },
    { "page_microopt", &sk_opt.page_microopt, 0, 1, "seed 001's page/shmem/LRU micro-optimisations (0: before)", NULL },
    { "shmem_limit_mb", &sk_opt.shmem_limit_mb, 0, 1 << 20, "resident MiB of sk_file pages before they swap (0: none)", NULL },
    { "sized_check", &sk_opt.sized_check, 0, 1, "free_sized and sized delete check the size (0: trust it)", NULL },
    { "kfence", &sk_opt.kfence, 0, 3600000, "KFENCE: one malloc of <= 4 KiB every this many ms is guarded (0: off)",
      NULL },
    { "kfence_pages", &sk_opt.kfence_pages, 1, 16383, "objects in the KFENCE pool (each a page and a guard page)",
      NULL },
    { "leak_check", &sk_opt.leak_check, 0, 1, "report unreferenced heap objects at exit (kmemleak, docs/kmemleak.md)", NULL },
    { "debug_continue", &sk_opt.debug_continue, 0, 1, "after a slub_debug report, repair and go on (0: abort)", NULL },
};

/* debug=: slub_debug's letters F Z P U T (either case) in any order; 1 or
 * a bare "debug" is FZPU, as the kernel's slub_debug with no flags; 0 or
 * "-" is off.  0 on success. */
static int parse_debug(const char *s, long *out)
{
    static const struct { char letter; long flag; } letters[] = {
        { 'F', SK_DEBUG_F }, { 'Z', SK_DEBUG_Z }, { 'P', SK_DEBUG_P }, { 'U', SK_DEBUG_U }, { 'T', SK_DEBUG_T },
    };
    if (!strcmp(s, "1")) {
        *out = SK_DEBUG_DEFAULT;
        return 0;
    }
    if (!strcmp(s, "0") || !strcmp(s, "-")) {
        *out = 0;
        return 0;
    }
    long v = 0;
    for (; *s; s++) {
        size_t i = 0;
        while (i < SK_ARRAY_SIZE(letters) && letters[i].letter != (*s & ~0x20))
            i++;
        if (i == SK_ARRAY_SIZE(letters))
            return -1;
        v |= letters[i].flag;
    }
    if (!v)
        return -1;
    *out = v;
    return 0;
}

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

/* `s` as d's value: one of its words, else a number in its range; 0 on
 * success. */
static int parse_value(const struct option_def *d, const char *s, long *out)
{
    for (const struct option_word *w = d->words; w && w->name; w++)
        if (!strcmp(w->name, s)) {
            *out = w->val;
            return 0;
        }
    long v;
    if (parse_long(s, &v) || v < d->min || v > d->max)
        return -1;
    *out = v;
    return 0;
}

/* What d accepts, for a warning: "0..1 or mcs", "slub or slab". */
static void describe_values(const struct option_def *d, char *buf, size_t size)
{
    size_t n = 0;
    if (d->min <= d->max)
        n = (size_t)snprintf(buf, size, "%ld..%ld", d->min, d->max);
    for (const struct option_word *w = d->words; w && w->name && n < size; w++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? " or " : "", w->name);
}

long sk_option(const char *key)
{
    os_options_init();
    if (!strcmp(key, "debug"))
        return sk_opt.debug;
    for (size_t i = 0; i < SK_ARRAY_SIZE(defs); i++)
        if (!strcmp(defs[i].key, key))
            return *defs[i].val;
    return -1;
}

/* The options whose value is a path: their buffer, or NULL. */
static char *path_option(const char *key)
{
    _Static_assert(sizeof sk_opt.swap_file == sizeof sk_opt.slabinfo_file, "path options: one size");
    if (!strcmp(key, "swap_file"))
        return sk_opt.swap_file;
    if (!strcmp(key, "slabinfo_file"))
        return sk_opt.slabinfo_file;
    return NULL;
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
        if (!strcmp(item, "debug")) {         /* letters, not a number */
            if (parse_debug(value, &sk_opt.debug)) {
                os_warn("SLABKIT_OPTIONS: bad value '%s' for debug (want 1, 0, - or letters of FZPUT) ignored", value);
                warnings++;
            }
            continue;
        }
        if (!strcmp(item, "debug_caches")) {  /* names, not a number */
            if (strlen(value) >= sizeof sk_opt.debug_caches) {
                os_warn("SLABKIT_OPTIONS: debug_caches too long: ignored");
                warnings++;
            } else {
                strcpy(sk_opt.debug_caches, value);
            }
            continue;
        }
        char *path = path_option(item);
        if (path) {                           /* a path, not a number */
            if (strlen(value) >= sizeof sk_opt.swap_file) {
                os_warn("SLABKIT_OPTIONS: %s path too long: ignored", item);
                warnings++;
            } else {
                strcpy(path, value);
            }
            continue;
        }
        const struct option_def *d = NULL;
        for (size_t i = 0; i < SK_ARRAY_SIZE(defs); i++)
            if (!strcmp(defs[i].key, item))
                d = &defs[i];
        long v;
        if (!d) {
            os_warn("SLABKIT_OPTIONS: unknown option '%s' ignored", item);
            warnings++;
        } else if (parse_value(d, value, &v)) {
            char want[160];
            describe_values(d, want, sizeof want);
            os_warn("SLABKIT_OPTIONS: bad value '%s' for %s (want %s) ignored", value, d->key, want);
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
