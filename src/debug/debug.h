/*
 * debug.h — the debugging tools (src/debug) as the slab layer calls them:
 * slub_debug's object checks and layout, KFENCE's sampled allocations
 * (kfence.h), the poisoning that memcheck and AddressSanitizer see
 * (poison.h), the leak scan's entry.  The tools sit above slab/: they read
 * its caches and slabs (slab_internal.h) to report; slab/ knows them only
 * by these hooks, as mm/slub.c knows mm/kfence through <linux/kfence.h>.
 * report.h (stacks and frame names) and calls.h (call-site tables) are
 * the tools' own.
 */
#ifndef SK_DEBUG_H
#define SK_DEBUG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "debug/kfence.h"
#include "debug/poison.h"
#include "slab/slab_types.h"

/* leak_check (leak.c): scan for unreferenced objects, report them to fd
 * (kmemleak's format), return their number; -1 when the scan cannot run.
 * No allocation. */
long slab_leak_check_fd(int fd);
/* slub_debug reports made so far (with debug_continue: the program went on). */
unsigned long slab_debug_reports(void);
/* At exit: a warning on fd for each debug_caches name that matched no cache. */
void slab_debug_check_names(int fd);

/* sk_slabinfo's text to a file descriptor: no stdio, no allocation. */
void slabinfo_write(int fd);

/* ---- slub_debug (slab_debug.c, docs/slub_debug.md) ---- */

/* U's record of an object's last alloc (TRACK_ALLOC) and free (TRACK_FREE),
 * the two at c->dbg.track_off; here because tools/inspect reads them too. */
#define TRACK_FRAMES 16           /* return addresses kept, slabkit's too */
struct debug_track {
    uint64_t ms;                  /* CLOCK_MONOTONIC ms; 0: never */
    int32_t cpu, tid;
    uint32_t nframes, unused;
    void *frames[TRACK_FRAMES];
};
enum { TRACK_ALLOC, TRACK_FREE };

/*
 * A cache with SK_DEBUG_* flags (debug= option, or sk_cache_create flags)
 * runs in SLAB_MODE_DEBUG: its per-CPU arrays keep capacity 0, so every
 * fast path falls through to the slow paths, which dispatch here on the
 * mode they already test. */
/* The SK_DEBUG_* flags the debug= and debug_caches= options give cache
 * `name`. */
unsigned slab_debug_flags_for(const char *name);
/* Lay the cache out for its debug flags (red zones, tracks, requested
 * size); returns the object stride.  Sets mode, offset, kofs, reserved. */
size_t slab_debug_layout(struct slab_cache *c, size_t size, size_t align);
/* An object of c for a request of `size` bytes (0: the object size). */
void *slab_debug_alloc(struct slab_cache *c, size_t size);
/* Free obj to c: checks, then its slab; `suspect`: its free marker was
 * set (a double free or never handed out). */
void slab_debug_free(struct slab_cache *c, void *obj, bool suspect, const char *call);
/* A pointer no cache's fast check accepted: when it lies in a debug
 * cache's slab, report it ("Invalid object pointer") and return true
 * under debug_continue (abort otherwise); false: not a debug slab. */
bool slab_debug_bad_pointer(const void *p, const char *call);
/* What the user may use of obj: the size it was asked for. */
size_t slab_debug_usable(struct slab_cache *c, const void *obj);
/* With U: alloc_calls and free_calls of c as the kernel's sysfs files,
 * to fd (no allocation); nothing for a cache without U. */
void slab_debug_calls_write(struct slab_cache *c, int fd);
/* The allocation stack user tracking (U) kept for a live object of c: sets
 * *frames to its frames past slabkit's own and *ms to its time (CLOCK_
 * MONOTONIC ms); returns how many, 0 without U or when never recorded.
 * leak_check's reports and sites come from here. */
int slab_debug_alloc_stack(const struct slab_cache *c, void *obj, void *const **frames, uint64_t *ms);

#endif
