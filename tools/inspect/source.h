/*
 * source.h — where a tool's cache table comes from: its own process (the
 * sk_cache_* API), another live process (remote.c), or an exit report
 * file (slabinfo_at_exit / slabinfo_file output).  The reports of
 * tools/slabinfo.c and tools/slabtop.c are written once, against this.
 */
#ifndef SK_TOOLS_SOURCE_H
#define SK_TOOLS_SOURCE_H

#include <stdio.h>
#include <sys/types.h>

#include "inspect/remote.h"

enum source_kind { SOURCE_SELF, SOURCE_PID, SOURCE_FILE };

struct source {
    enum source_kind kind;
    pid_t pid;
    const char *path;
    struct rmt *rmt;
    struct rmt_cache *caches;   /* SOURCE_PID, SOURCE_FILE: the snapshot */
    size_t n;
    struct rmt_totals totals;
    int have_totals;
    size_t approx;              /* caches read while their lists changed */
};

/* Each returns 0, or -1 with a one-line reason in err. */
int source_open_self(struct source *s, char *err, size_t errlen);
int source_open_pid(struct source *s, pid_t pid, char *err, size_t errlen);
int source_open_file(struct source *s, const char *path, char *err, size_t errlen);
/* A new snapshot (a live process: read again; a file: read again). */
int source_refresh(struct source *s, char *err, size_t errlen);
void source_close(struct source *s);

void source_foreach(struct source *s, void (*fn)(const struct sk_cache_info *, void *), void *arg);
int source_info(struct source *s, const char *name, struct sk_cache_info *info);
/* /proc/slabinfo text, then the totals line when known. */
void source_print_slabinfo(struct source *s, FILE *out);
void source_print_totals(struct source *s, FILE *out);
/* slub_debug's alloc_calls and free_calls of cache name (a live process
 * only: rmt_calls): 0, or -1 with a reason in err. */
int source_calls(struct source *s, const char *name, FILE *out, char *err, size_t errlen);

#endif
