/*
 * slabinfo.c — statistics: /proc/slabinfo version 2.1 and the SLUB-style
 * event counters of each cache.
 *
 * Counters are kept per CPU in struct slab_cpu (relaxed atomic adds on the
 * slow paths) and summed here when read; a snapshot taken while other
 * threads allocate is consistent per counter, not across counters.
 * Lock order: as slab.c (each slab_cpu lock, then each list_lock, one at a
 * time); never called with a slabkit lock held.
 */
#include <string.h>

#include "slab/slab.h"
#include "slab/slabinfo_format.h"

const char *const sk_stat_names[SK_STAT_NR] = {
    [SK_ALLOC_FASTPATH] = "alloc_fastpath",
    [SK_ALLOC_SLOWPATH] = "alloc_slowpath",
    [SK_FREE_FASTPATH] = "free_fastpath",
    [SK_FREE_SLOWPATH] = "free_slowpath",
    [SK_ARRAY_REFILL] = "array_refill",
    [SK_ARRAY_FLUSH] = "array_flush",
    [SK_ALLOC_CPU_SLAB] = "alloc_cpu_slab",
    [SK_CPU_PARTIAL_ALLOC] = "cpu_partial_alloc",
    [SK_CPU_PARTIAL_FREE] = "cpu_partial_free",
    [SK_CPU_PARTIAL_DRAIN] = "cpu_partial_drain",
    [SK_NODE_PARTIAL_ALLOC] = "node_partial_alloc",
    [SK_NODE_PARTIAL_FREE] = "node_partial_free",
    [SK_NEW_SLAB] = "new_slab",
    [SK_FREE_SLAB] = "free_slab",
    [SK_CMPXCHG_FAIL] = "cmpxchg_double_fail",
    [SK_REMOTE_DRAIN] = "remote_drain",
    [SK_BARN_PUT] = "barn_put",
    [SK_BARN_GET] = "barn_get",
    [SK_FREE_REMOTE] = "free_remote",
};

struct info_query {
    const char *name;
    struct sk_cache_info *info;
    int found;
};

static void info_one(struct slab_cache *c, void *arg)
{
    struct info_query *q = arg;
    if (!q->found && !strcmp(c->name, q->name)) {
        slab_cache_info(c, q->info);
        q->found = 1;
    }
}

int sk_cache_info(const char *name, struct sk_cache_info *info)
{
    if (slab_init() != 0)
        return -1;
    struct info_query q = { name, info, 0 };
    slab_for_each_cache(info_one, &q);
    return q.found ? 0 : -1;
}

struct foreach_call {
    void (*fn)(const struct sk_cache_info *, void *);
    void *arg;
};

static void foreach_one(struct slab_cache *c, void *arg)
{
    struct foreach_call *f = arg;
    struct sk_cache_info info;
    slab_cache_info(c, &info);
    f->fn(&info, f->arg);
}

/* fn runs with the list of caches held still: it must not create or
 * destroy a cache. */
void sk_cache_foreach(void (*fn)(const struct sk_cache_info *, void *), void *arg)
{
    slab_init();   /* on failure: whatever caches exist */
    struct foreach_call f = { fn, arg };
    slab_for_each_cache(foreach_one, &f);
}

static void print_one(const struct sk_cache_info *i, void *arg)
{
    fprintf(arg, SLABINFO_LINE, SLABINFO_ARGS(i));
}

void sk_slabinfo(FILE *out)
{
    fputs(SLABINFO_HEADER, out);
    sk_cache_foreach(print_one, out);
    fflush(out);
}

static void write_one(const struct sk_cache_info *i, void *arg)
{
    os_printf(*(int *)arg, SLABINFO_LINE, SLABINFO_ARGS(i));
}

/* The same text straight to a file descriptor, a line per write(2), with
 * no stdio and no allocation: for the exit output, when the program's
 * stdio may be closed. */
static void calls_one(struct slab_cache *c, void *arg)
{
    slab_debug_calls_write(c, *(int *)arg);
}

/* Then, for each cache with slub_debug's U, its alloc_calls and
 * free_calls (slab_debug.c), a section each. */
void slabinfo_write(int fd)
{
    os_printf(fd, "%s", SLABINFO_HEADER);
    sk_cache_foreach(write_one, &fd);
    if (sk_opt.debug & SK_DEBUG_U)
        slab_for_each_cache(calls_one, &fd);
}

struct calls_query {
    const char *name;
    int fd, found;
};

static void calls_named(struct slab_cache *c, void *arg)
{
    struct calls_query *q = arg;
    if (!q->found && !strcmp(c->name, q->name) && c->mode == SLAB_MODE_DEBUG && (c->flags & SK_DEBUG_U)) {
        slab_debug_calls_write(c, q->fd);
        q->found = 1;
    }
}

int sk_cache_calls(const char *name, int fd)
{
    if (slab_init() != 0)
        return -1;
    struct calls_query q = { name, fd, 0 };
    slab_for_each_cache(calls_named, &q);
    return q.found ? 0 : -1;
}
