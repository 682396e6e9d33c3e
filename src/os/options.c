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
 * swap_file and slabinfo_file take a path, debug_caches names, debug
 * slub_debug's letters.  A retired name's warning names what replaced it;
 * an option set where the mode makes it do nothing is warned about once
 * the whole list is read.  `help` prints the table (defs, below), which is
 * also what the documentation's tables are generated from.
 * No lock: the parse runs once, under options_state.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/os.h"

/* The defaults: sk_opt starts as these, and `help` prints them. */
#define SK_OPT_DEFAULTS {                                                  \
    .allocator = SK_ALLOC_SLUB, .slab_mgmt = SK_SLAB_MGMT_PAGE, .pcp = 1,  \
    .slice_mask_cache = 1, .cpu_partial = -1, .barn = 1, .remote_free = 1, \
    .sheaves = 1, .mutex_spin = MUTEX_SPIN_ON, .huge_slices = 0,           \
    .mutex_handoff = 1, .mutex_wake_spin = 1,                              \
    .decay_ms = 500, .dirty_max_mb = -1, .mem_limit_mb = -1, .background = 1, \
    .zone_borrow = 1, .page_grouping = 1, .file_dirty_ratio = 20, .page_microopt = 1, .kfence_pages = 255,             \
    .failslab_interval = 1, .failslab_times = -1, .failslab_ignore_wait = 1, \
}
struct sk_options sk_opt = SK_OPT_DEFAULTS;
static const struct sk_options opt_defaults = SK_OPT_DEFAULTS;

/* A value given by name; a list ends with a NULL name. */
struct option_word {
    const char *name;
    long val;
};

/* How a value is written: a number in min..max or one of `words` (NUM),
 * slub_debug's letters (DEBUG), cache names (NAMES), a path (PATH). */
enum option_kind { OPT_NUM, OPT_DEBUG, OPT_NAMES, OPT_PATH };

/*
 * The one table of options: everything the parser, `SLABKIT_OPTIONS=help`,
 * sk_option() and the generated documentation (tools/gen-options: the
 * README's table, docs/options.md, slabkit(7)) know of an option.
 * `idle` says when the option does nothing (`idle_why` names the mode it
 * needs); setting it then earns a warning.
 */
struct option_def {
    const char *key;
    enum option_kind kind;
    long *val;                          /* NUM, DEBUG */
    char *str;                          /* NAMES, PATH: a buffer of OPT_STR_MAX */
    long min, max;                      /* NUM: the range (min > max: words only) */
    const struct option_word *words;    /* NUM: NULL-name-terminated, or NULL */
    const char *help;
    bool (*idle)(void);
    const char *idle_why;
};
#define OPT_STR_MAX sizeof sk_opt.swap_file
_Static_assert(sizeof sk_opt.swap_file == sizeof sk_opt.slabinfo_file &&
               sizeof sk_opt.swap_file == sizeof sk_opt.debug_caches &&
               sizeof sk_opt.swap_file == sizeof sk_opt.page_before &&
               sizeof sk_opt.swap_file == sizeof sk_opt.failslab_caches, "string options: one size");

/* Words for values: allocator and slab_mgmt take only words (a word says
 * what it means); mutex_spin's "mcs" stands for a value 0..1 does not reach. */
static const struct option_word allocator_words[] = {
    { "slub", SK_ALLOC_SLUB }, { "slab", SK_ALLOC_SLAB }, { NULL, 0 } };
static const struct option_word slab_mgmt_words[] = {
    { "page", SK_SLAB_MGMT_PAGE }, { "onslab", SK_SLAB_MGMT_ONSLAB }, { NULL, 0 } };
static const struct option_word mutex_spin_words[] = {
    { "mcs", MUTEX_SPIN_MCS }, { NULL, 0 } };

static bool not_slab(void) { return sk_opt.allocator != SK_ALLOC_SLAB; }
static bool is_slab(void) { return sk_opt.allocator == SK_ALLOC_SLAB; }
static bool no_sheaves(void) { return is_slab() || !sk_opt.sheaves || sk_opt.debug; }
static bool no_arrays(void) { return (!is_slab() && !sk_opt.sheaves) || sk_opt.debug; }
static bool no_kfence(void) { return !sk_opt.kfence; }
static bool no_debug(void) { return !sk_opt.debug; }
/* swap_file's users: shmem_limit_mb, and a memory budget (mem_limit_mb,
 * or by default the cgroup's limit when there is one). */
static bool no_swap_user(void)
{
    return !sk_opt.shmem_limit_mb && !(sk_opt.mem_limit_mb > 0 || (sk_opt.mem_limit_mb < 0 && os_cgroup_memory_limit()));
}
static bool no_failslab(void) { return !sk_opt.failslab; }
static bool not_mutex_spin_on(void) { return sk_opt.mutex_spin != MUTEX_SPIN_ON; }

#define NUM(k, lo, hi, words, help) OPT_NUM, &sk_opt.k, NULL, lo, hi, words, help
static const struct option_def defs[] = {
    { "allocator", NUM(allocator, 0, -1, allocator_words,
      "slub, or slab: the kernel's SLAB (array caches, shared array, three slab lists, colouring; docs/slab.md)"),
      NULL, NULL },
    { "slab_mgmt", NUM(slab_mgmt, 0, -1, slab_mgmt_words,
      "SLAB's slab fields in the page descriptor (page, after 2014) or in a struct slab at the slab's head (onslab, before)"),
      not_slab, "allocator=slab" },
    { "pcp", NUM(pcp, 0, 1, NULL,
      "per-CPU page lists (orders 0-3) and the exact-block cache (the last 32-256 KiB block freed on a CPU)"),
      NULL, NULL },
    { "slice_mask_cache", NUM(slice_mask_cache, 0, 1, NULL,
      "keep the slice masks of each page size (0: recompute them per request, seed 002's before)"), NULL, NULL },
    { "cpu_partial", NUM(cpu_partial, -1, 1 << 20, NULL,
      "free objects on a CPU's partial slabs (-1: by object size as SLUB, 0: no per-CPU partial lists)"),
      is_slab, "allocator=slub" },
    { "remote_free", NUM(remote_free, 0, 1, NULL,
      "an object freed on another CPU than its slab's home goes back to its slab, not this CPU's array "
      "(no false sharing; 0: the array always)"), no_sheaves, "sheaves=1 and no debug" },
    { "barn", NUM(barn, 0, 1, NULL,
      "a node's barn of full batches passed between CPUs (SLAB: its shared array)"), no_arrays,
      "per-CPU arrays (sheaves=1 or allocator=slab, no debug)" },
    { "sheaves", NUM(sheaves, 0, 1, NULL,
      "per-CPU object arrays and the barn (0: SLUB's per-CPU freelists of 2011, docs/slub2011.md)"),
      is_slab, "allocator=slub" },
    { "mutex_spin", NUM(mutex_spin, 0, 1, mutex_spin_words,
      "sk_mutex waiters spin: 1 in the cancellable MCS queue (2014), mcs in the queue before it, 0 never"),
      NULL, NULL },
    { "mutex_handoff", NUM(mutex_handoff, 0, 1, NULL,
      "a waiter starved 1 ms gets the mutex handed to it (Linux 4.10, after seed 004's 3.15; 0: barging only)"),
      not_mutex_spin_on, "mutex_spin=1" },
    { "mutex_wake_spin", NUM(mutex_wake_spin, 0, 1, NULL,
      "a woken waiter spins again before it sleeps again (Linux 4.10, after seed 004's 3.15; 0: it sleeps)"),
      not_mutex_spin_on, "mutex_spin=1" },
    { "huge_slices", NUM(huge_slices, 0, 1, NULL,
      "dense memory in 2 MiB huge-page slices (0: 4 KiB pages only; each 2 MiB fault zeroes its page at once)"),
      NULL, NULL },
    { "decay_ms", NUM(decay_ms, 0, 3600000, NULL, "free memory older than this many ms goes back to the OS"),
      NULL, NULL },
    { "dirty_max_mb", NUM(dirty_max_mb, -1, 1 << 20, NULL,
      "free resident MiB above which memory goes back to the OS at once (-1: 64, or the memory in use if more)"),
      NULL, NULL },
    { "numa_nodes", NUM(numa_nodes, 0, SK_NUMA_NODES_MAX, NULL,
      "nodes: 0 the system's (/sys/devices/system/node), N the CPUs split into N for testing (zones, zonelists, per-node budget shares)"),
      NULL, NULL },
    { "mem_limit_mb", NUM(mem_limit_mb, -1, 1 << 20, NULL,
      "memory budget in MiB, with min/low/high watermarks: reclaim from low, fail past min (-1: the cgroup's limit, 0: none)"),
      NULL, NULL },
    { "background", NUM(background, 0, 1, NULL,
      "in a program with threads of its own, a thread returns memory free for decay_ms (0: trim at free only)"),
      NULL, NULL },
    { "zone_borrow", NUM(zone_borrow, 0, 1, NULL,
      "a large block takes the slab zone's resident free pages before fresh memory"), NULL, NULL },
    { "file_dirty_ratio", NUM(file_dirty_ratio, 0, 100, NULL,
      "% of a node's memory (its share of the budget, else of RAM) its sk_file pages may take before new ones go to the next node (0: no limit)"),
      NULL, NULL },
    { "page_grouping", NUM(page_grouping, 0, 1, NULL,
      "pageblock migratetypes: unmovable, reclaimable and movable pages keep to 2 MiB pageblocks of their own (0: one type)"),
      NULL, NULL },
    { "array_size", NUM(array_size, 0, SK_ARRAY_SIZE_MAX, NULL,
      "per-CPU object array capacity, fixed (0: by object size, growing with use)"), no_arrays,
      "per-CPU arrays (sheaves=1 or allocator=slab, no debug)" },
    { "slabinfo_at_exit", NUM(slabinfo_at_exit, 0, 1, NULL,
      "print slabinfo at exit to the stderr the program started with"), NULL, NULL },
    { "slabinfo_file", OPT_PATH, NULL, sk_opt.slabinfo_file, 0, -1, NULL,
      "write the exit report to this path (%p: the pid); implies slabinfo_at_exit", NULL, NULL },
    { "verbose", NUM(verbose, 0, 1, NULL, "print start-up facts (rseq or fallback, THP)"), NULL, NULL },
    { "page_microopt", NUM(page_microopt, 0, 1, NULL,
      "seed 001's series, every patch of it that slabkit has a path for (0: each one's 3.15-rc1 before)"),
      NULL, NULL },
    { "page_before", OPT_NAMES, NULL, sk_opt.page_before, 0, -1, NULL,
      "seed 001's patches whose 3.15-rc1 before to restore, NAME:NAME (zlc, dirty_full, buddy_zone_id, dirty_once, no_watermarks, "
      "pageblock_word, pfn_once, free_mt_unlocked, shmem_getpage, release_pages, lru_add, accessed, prefetch_flags)",
      NULL, NULL },
    { "shmem_limit_mb", NUM(shmem_limit_mb, 0, 1 << 20, NULL,
      "resident MiB of sk_file pages; beyond it they swap to swap_file (0: no limit)"), NULL, NULL },
    { "swap_file", OPT_PATH, NULL, sk_opt.swap_file, 0, -1, NULL,
      "the swap file for shmem_limit_mb and the memory budget (created at the first swap-out)", no_swap_user,
      "shmem_limit_mb or a memory budget" },
    { "sized_check", NUM(sized_check, 0, 1, NULL,
      "free_sized and sized delete look the object up and abort on a wrong size (0: trust it)"), NULL, NULL },
    { "kfence", NUM(kfence, 0, 3600000, NULL,
      "KFENCE: every this many ms one malloc of at most 4 KiB is guarded (0: off; docs/kfence.md)"), NULL, NULL },
    { "kfence_pages", NUM(kfence_pages, 1, 16383, NULL,
      "objects in the KFENCE pool (each a page and a guard page)"), no_kfence, "kfence" },
    { "leak_check", NUM(leak_check, 0, 1, NULL,
      "at exit, report heap objects nothing points to, as kmemleak (docs/kmemleak.md)"), NULL, NULL },
    { "leak_exitcode", NUM(leak_exitcode, 0, 255, NULL,
      "exit status of a program whose leak scan found leaks, for CI (0: the program's own)"), NULL, NULL },
    { "debug", OPT_DEBUG, &sk_opt.debug, NULL, 0, -1, NULL,
      "slub_debug: letters of FZPUT (checks, red zones, poison, user tracking, trace); 1 or bare: FZPU; 0 or -: off",
      NULL, NULL },
    { "debug_caches", OPT_NAMES, NULL, sk_opt.debug_caches, 0, -1, NULL,
      "only these caches, NAME:NAME (kmalloc-64, or an sk_cache_create name; empty: all)", no_debug, "debug" },
    { "debug_continue", NUM(debug_continue, 0, 1, NULL,
      "after a report, repair and go on (0: abort)"), no_debug, "debug" },
    { "debug_exitcode", NUM(debug_exitcode, 0, 255, NULL,
      "exit status of a program that had a slub_debug or KFENCE report and went on, for CI (0: its own)"),
      NULL, NULL },
    { "failslab", NUM(failslab, 0, 100, NULL,
      "failslab: percent of the kernel API's slab allocations (kmem_cache_alloc, kmalloc) that fail (0: off; docs/kernel.md)"),
      NULL, NULL },
    { "failslab_interval", NUM(failslab_interval, 1, LONG_MAX, NULL,
      "failslab picks only every this many-th candidate"), no_failslab, "failslab" },
    { "failslab_times", NUM(failslab_times, -1, LONG_MAX, NULL,
      "failslab injects at most this many failures (-1: no limit)"), no_failslab, "failslab" },
    { "failslab_ignore_wait", NUM(failslab_ignore_wait, 0, 1, NULL,
      "failslab spares allocations that may sleep (__GFP_DIRECT_RECLAIM: GFP_KERNEL)"), no_failslab, "failslab" },
    { "failslab_caches", OPT_NAMES, NULL, sk_opt.failslab_caches, 0, -1, NULL,
      "failslab fails only these caches, NAME:NAME (a kmem_cache_create name, or kmalloc-64; empty: all)",
      no_failslab, "failslab" },
};
#undef NUM

/* Names an earlier version took, and what does their work now. */
static const struct { const char *key, *use; } retired[] = {
    { "slab_reserved", "allocator=slab,slab_mgmt=onslab" },
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

static const struct option_def *find_def(const char *key)
{
    for (size_t i = 0; i < SK_ARRAY_SIZE(defs); i++)
        if (!strcmp(defs[i].key, key))
            return &defs[i];
    return NULL;
}

long sk_option(const char *key)
{
    os_options_init();
    const struct option_def *d = find_def(key);
    return d && d->val ? *d->val : -1;
}

/* An option's value in `o` (sk_opt or the defaults), as SLABKIT_OPTIONS
 * would write it: a word where one stands for it, the letters of debug. */
static void format_value(const struct option_def *d, const struct sk_options *o, char *buf, size_t size)
{
    /* The same field of another struct sk_options. */
    size_t off = d->val ? (size_t)((char *)d->val - (char *)&sk_opt) : (size_t)(d->str - (char *)&sk_opt);
    const char *base = (const char *)o + off;
    if (d->str) {
        /* Empty names: a filter that passes all (debug_caches,
         * failslab_caches), or page_before's list of nothing. */
        bool all = d->kind == OPT_NAMES && strcmp(d->key, "page_before") != 0;
        snprintf(buf, size, "%s", *base ? base : all ? "(all)" : "(none)");
        return;
    }
    long v = *(const long *)base;
    if (d->kind == OPT_DEBUG) {
        static const char letters[] = "FZPUT";
        static const long flags[] = { SK_DEBUG_F, SK_DEBUG_Z, SK_DEBUG_P, SK_DEBUG_U, SK_DEBUG_T };
        size_t n = 0;
        for (size_t i = 0; i < 5 && n + 1 < size; i++)
            if (v & flags[i])
                buf[n++] = letters[i];
        buf[n] = 0;
        if (!n)
            snprintf(buf, size, "0");
        return;
    }
    for (const struct option_word *w = d->words; w && w->name; w++)
        if (w->val == v) {
            snprintf(buf, size, "%s", w->name);
            return;
        }
    snprintf(buf, size, "%ld", v);
}

static bool at_default(const struct option_def *d)
{
    char now[OPT_STR_MAX + 8], def[OPT_STR_MAX + 8];
    format_value(d, &sk_opt, now, sizeof now);
    format_value(d, &opt_defaults, def, sizeof def);
    return !strcmp(now, def);
}

int sk_option_doc(unsigned i, struct sk_option_doc *doc)
{
    if (i >= SK_ARRAY_SIZE(defs))
        return -1;
    const struct option_def *d = &defs[i];
    doc->key = d->key;
    doc->help = d->help;
    doc->idle_why = d->idle_why;
    format_value(d, &opt_defaults, doc->def, sizeof doc->def);
    format_value(d, &sk_opt, doc->now, sizeof doc->now);
    switch (d->kind) {
    case OPT_DEBUG:
        snprintf(doc->values, sizeof doc->values, "FZPUT letters, 1, 0");
        break;
    case OPT_NAMES:
        snprintf(doc->values, sizeof doc->values, "NAME:NAME");
        break;
    case OPT_PATH:
        snprintf(doc->values, sizeof doc->values, "a path");
        break;
    default:
        describe_values(d, doc->values, sizeof doc->values);
    }
    return 0;
}

/* SLABKIT_OPTIONS=help: every option, its value now and its default, on
 * stderr (the program then runs as usual). */
static void print_help(void)
{
    os_printf(2, "slabkit: SLABKIT_OPTIONS=key=value,key=value...; options (value now, default):\n");
    struct sk_option_doc doc;
    for (unsigned i = 0; sk_option_doc(i, &doc) == 0; i++) {
        os_printf(2, "  %-17s %-9s (default %s; %s)\n", doc.key, doc.now, doc.def, doc.values);
        os_printf(2, "      %s%s%s\n", doc.help, doc.idle_why ? "; needs " : "", doc.idle_why ? doc.idle_why : "");
    }
    os_printf(2, "  help              print this (docs/options.md)\n");
}

/* Parse value for d; 0, or -1 after a warning. */
static int set_value(const struct option_def *d, const char *value)
{
    switch (d->kind) {
    case OPT_DEBUG:
        if (parse_debug(value, d->val) == 0)
            return 0;
        os_warn("SLABKIT_OPTIONS: bad value '%s' for debug (want 1, 0, - or letters of FZPUT) ignored", value);
        return -1;
    case OPT_NAMES:
    case OPT_PATH:
        if (strlen(value) < OPT_STR_MAX) {
            strcpy(d->str, value);
            return 0;
        }
        os_warn("SLABKIT_OPTIONS: %s value of %zu bytes too long (at most %zu): ignored", d->key, strlen(value),
                OPT_STR_MAX - 1);
        return -1;
    case OPT_NUM:
        break;
    }
    long v;
    if (parse_value(d, value, &v) == 0) {
        *d->val = v;
        return 0;
    }
    char want[160];
    describe_values(d, want, sizeof want);
    os_warn("SLABKIT_OPTIONS: bad value '%s' for %s (want %s) ignored", value, d->key, want);
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
    bool set[SK_ARRAY_SIZE(defs)] = { false }, help = false;
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
        if (!strcmp(item, "help") && !eq) {
            help = true;
            continue;
        }
        const struct option_def *d = find_def(item);
        if (!d) {
            const char *use = NULL;
            for (size_t i = 0; i < SK_ARRAY_SIZE(retired); i++)
                if (!strcmp(retired[i].key, item))
                    use = retired[i].use;
            if (use)
                os_warn("SLABKIT_OPTIONS: '%s' is retired: use %s (ignored)", item, use);
            else
                os_warn("SLABKIT_OPTIONS: unknown option '%s' ignored (SLABKIT_OPTIONS=help lists them)", item);
            warnings++;
        } else if (set_value(d, value) != 0) {
            warnings++;
        } else {
            set[d - defs] = true;
        }
    }
    /* After the whole list: a mode set later in it counts.  An option set
     * to its default changes nothing either way. */
    for (size_t i = 0; i < SK_ARRAY_SIZE(defs); i++)
        if (set[i] && defs[i].idle && defs[i].idle() && !at_default(&defs[i])) {
            os_warn("SLABKIT_OPTIONS: %s does nothing without %s", defs[i].key, defs[i].idle_why);
            warnings++;
        }
    if (help)
        print_help();
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
