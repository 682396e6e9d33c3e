/*
 * slab_debug.c — slub_debug at run time (docs/slub_debug.md): the kernel's
 * F (consistency checks), Z (red zones), P (poison), U (last alloc and
 * free user) and T (trace) for the caches the debug= option names or that
 * were created with SK_CACHE_* debug flags.
 *
 * A debug cache runs in SLAB_MODE_DEBUG: its per-CPU arrays stay at
 * capacity 0 (always empty, always full), so malloc, free and the cache
 * API fall through to slab.c's and kmalloc.c's slow paths, which call here
 * on the mode test they already make.  Non-debug caches never reach this
 * file.  Every object of a debug cache is handed out and taken back here,
 * one at a time, as the kernel's debug caches do.
 *
 * Layout of an object slot (offsets from the object pointer; slab_debug_
 * layout): [-red_left, 0) left red zone (Z) | [0, object_size) the object |
 * [object_size, inuse) right red zone (Z; at least a word) | free pointer
 * (offset) | free marker (kofs) | two tracks (U) | requested size |
 * padding (0x5a) up to the next slot.  The first slot's left red zone is
 * the slab's head (reserved = red_left).
 *
 * Invariants: every slab of a debug cache is on its node's partial list
 * (free objects) or full list (none), changed only under list_lock; its
 * freelist and counters {inuse, objects} change only under list_lock,
 * never frozen.  A free object holds poison (P, no constructor) and
 * inactive red zones (0xbb); a live one active red zones (0xcc) and, for
 * kmalloc, 0xcc from its requested size to object_size (Z).  The free
 * marker is slab_fast.h's protocol: 0 live, the key free, key|1 never handed out.
 *
 * Lock order: the cache's node-0 list_lock only (slab.c's level 2), then
 * the page allocator below it.  Stacks are taken (backtrace) and reports
 * printed (dladdr) with no slabkit lock held: a thread inside dlopen holds
 * the loader's lock and may be waiting for ours in malloc.  Nothing here
 * calls malloc: reports are os_printf lines, the calls tables mmap'd.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "debug/calls.h"
#include "debug/report.h"
#include "slab/slab_internal.h"

/* The kernel's bytes (include/linux/poison.h). */
#define POISON_INUSE 0x5a         /* padding */
#define POISON_FREE 0x6b          /* a free object */
#define POISON_END 0xa5           /* its last byte */
#define RED_INACTIVE 0xbb         /* red zones of a free object */
#define RED_ACTIVE 0xcc           /* of a live one */


#define DBG(c, f) ((c)->flags & SK_DEBUG_##f)

static inline struct debug_track *track_of(const struct slab_cache *c, void *obj, int which)
{
    return (struct debug_track *)((char *)obj + c->dbg.track_off) + which;
}

static inline uint32_t *orig_of(const struct slab_cache *c, const void *obj)
{
    return (uint32_t *)((char *)obj + c->dbg.orig_off);
}

/* P: objects with a constructor stay constructed, unpoisoned (kernel). */
static inline bool poisons(const struct slab_cache *c)
{
    return DBG(c, P) && !c->ctor;
}

static inline char *slab_base(const struct sk_page *pg)
{
    return page_address((struct sk_page *)pg);
}

static inline uint32_t padding(const struct slab_cache *c)
{
    return c->size - c->dbg.red_left - c->dbg.info_end;
}

/* ---- which caches, and their layout ---- */

/* The debug_caches names some cache was made under: bit i, the i-th
 * (the first 64; a name past them is never warned about). */
static uint64_t names_matched;

unsigned slab_debug_flags_for(const char *name)
{
    if (!sk_opt.debug)
        return 0;
    const char *p = sk_opt.debug_caches;
    if (!*p)
        return (unsigned)sk_opt.debug;
    size_t len = strlen(name);
    for (unsigned i = 0;; i++) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == len && !memcmp(p, name, n)) {
            if (i < 64)
                __atomic_fetch_or(&names_matched, (uint64_t)1 << i, __ATOMIC_RELAXED);
            return (unsigned)sk_opt.debug;
        }
        if (!e)
            return 0;
        p = e + 1;
    }
}

void slab_debug_check_names(int fd)
{
    if (fd < 0)
        return;
    if (!sk_opt.debug || !sk_opt.debug_caches[0])
        return;
    uint64_t seen = __atomic_load_n(&names_matched, __ATOMIC_RELAXED);
    const char *p = sk_opt.debug_caches;
    for (unsigned i = 0; i < 64; i++) {
        const char *e = strchr(p, ':');
        int n = (int)(e ? (size_t)(e - p) : strlen(p));
        if (!(seen & ((uint64_t)1 << i)))
            os_printf(fd, "slabkit: debug_caches: '%.*s' matched no cache this program made (slabinfo -a lists the names)\n",
                      n, p);
        if (!e)
            return;
        p = e + 1;
    }
}

size_t slab_debug_layout(struct slab_cache *c, size_t size, size_t align)
{
    /* kmalloc's natural alignment beyond a cache line would cost a whole
     * alignment unit of red zone per object: malloc promises 16 bytes, and
     * aligned_alloc with more takes a large block instead. */
    if (c->kmalloc && align > CACHE_LINE)
        c->align = (uint32_t)(align = CACHE_LINE);
    size_t inuse = SK_ALIGN_UP(size, sizeof(void *));
    if (DBG(c, Z) && inuse == size)
        inuse += sizeof(void *);
    c->dbg.inuse = (uint32_t)inuse;
    c->offset = (uint32_t)inuse;                      /* outside the object */
    c->kofs = (uint32_t)(inuse + sizeof(void *));
    size_t off = inuse + 2 * sizeof(void *);
    c->dbg.track_off = 0;
    if (DBG(c, U)) {
        c->dbg.track_off = (uint32_t)off;
        off += 2 * sizeof(struct debug_track);
    }
    c->dbg.orig_off = (uint32_t)off;
    off += sizeof(void *);
    c->dbg.info_end = (uint32_t)off;
    c->dbg.red_left = DBG(c, Z) ? (uint32_t)SK_ALIGN_UP(sizeof(void *), align) : 0;
    c->mode = SLAB_MODE_DEBUG;
    return SK_ALIGN_UP(off + c->dbg.red_left, align);
}

/* ---- reports ---- */

static void track_now(struct debug_track *t)
{
    t->ms = os_now_ns() / 1000000;
    t->cpu = os_getcpu();
    t->tid = os_gettid();
    t->nframes = (uint32_t)report_stack(t->frames, TRACK_FRAMES);
}

/* "=== / BUG cache (Not tainted): what / ---", with the lock the caller
 * holds (NULL: none) released for the report. */
__attribute__((format(printf, 3, 4))) static void bug_begin(struct slab_cache *c, lock_t *held, const char *fmt, ...)
{
    if (held)
        lock_release(held);
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    os_printf(2, "=============================================================================\n");
    os_printf(2, "BUG %s (Not tainted): %s\n", c->name, msg);
    os_printf(2, "-----------------------------------------------------------------------------\n\n");
}

/* The stack of this call, then abort() unless debug_continue: then a FIX
 * line (what the caller does to repair) and the lock taken back. */
static unsigned long debug_reports;

unsigned long slab_debug_reports(void)
{
    return __atomic_load_n(&debug_reports, __ATOMIC_RELAXED);
}

__attribute__((format(printf, 3, 4))) static void bug_end(struct slab_cache *c, lock_t *held, const char *fix, ...)
{
    __atomic_fetch_add(&debug_reports, 1, __ATOMIC_RELAXED);
    void *frames[32];
    int n = report_stack(frames, 32), skip = report_skip_allocator(frames, n);
    os_printf(2, "CPU: %d PID: %d TID: %d\nCall Trace:\n", os_getcpu(), (int)getpid(), os_gettid());
    report_print_frames(frames + skip, n - skip);
    if (!sk_opt.debug_continue) {
        os_printf(2, "\n");
        abort();
    }
    char msg[200];
    va_list ap;
    va_start(ap, fix);
    vsnprintf(msg, sizeof msg, fix, ap);
    va_end(ap);
    os_printf(2, "FIX %s: %s\n\n", c->name, msg);
    if (held)
        lock_acquire(held);
}

static void print_track(const char *what, const struct debug_track *t)
{
    if (!t->ms)
        return;
    int n = (int)t->nframes, skip = report_skip_allocator(t->frames, n);
    char site[320] = "?";
    if (n)
        report_format_site(site, sizeof site, t->frames[skip]);
    uint64_t now = os_now_ns() / 1000000;
    os_printf(2, "INFO: %s in %s age=%lu cpu=%d pid=%d\n", what, site,
              (unsigned long)(now > t->ms ? now - t->ms : 0), t->cpu, t->tid);
    report_print_frames(t->frames + skip, n - skip);
}

/* print_hex_dump(DUMP_PREFIX_ADDRESS, 16, 1, ascii) of the kernel. */
static void print_section(const char *text, const uint8_t *addr, size_t len)
{
    for (size_t i = 0; i < len; i += 16) {
        char line[160];
        size_t n = (size_t)snprintf(line, sizeof line, "%s%016lx: ", text, (unsigned long)(uintptr_t)(addr + i));
        for (size_t j = 0; j < 16; j++)
            n += (size_t)snprintf(line + n, sizeof line - n, i + j < len ? "%02x " : "   ", addr[i + j]);
        line[n++] = ' ';
        for (size_t j = 0; j < 16 && i + j < len; j++)
            line[n++] = addr[i + j] >= 0x20 && addr[i + j] < 0x7f ? (char)addr[i + j] : '.';
        line[n] = 0;
        os_printf(2, "%s\n", line);
    }
}

static void print_slab_info(struct slab_cache *c, struct sk_page *pg)
{
    union slab_counters cnt = { .v = slab_counters(pg) };
    os_printf(2, "INFO: Slab 0x%lx objects=%u used=%u fp=0x%lx flags=0x%x\n", (unsigned long)slab_base(pg),
              (unsigned)cnt.objects, (unsigned)cnt.inuse, (unsigned long)(uintptr_t)slab_freelist(pg),
              (unsigned)pg_flags(pg));
    (void)c;
}

/* The kernel's print_trailer: tracks, slab, object, then its bytes. */
static void print_trailer(struct slab_cache *c, struct sk_page *pg, char *obj)
{
    if (DBG(c, U)) {
        print_track("Allocated", track_of(c, obj, TRACK_ALLOC));
        print_track("Freed", track_of(c, obj, TRACK_FREE));
    }
    print_slab_info(c, pg);
    os_printf(2, "INFO: Object 0x%lx @offset=%lu fp=0x%lx\n\n", (unsigned long)(uintptr_t)obj,
              (unsigned long)(obj - slab_base(pg)), (unsigned long)(uintptr_t)get_fp(c, obj));
    if (c->dbg.red_left)
        print_section("Redzone  ", (uint8_t *)obj - c->dbg.red_left, c->dbg.red_left);
    else if (obj >= (char *)pg->slab.s_mem + 16)
        print_section("Bytes b4 ", (uint8_t *)obj - 16, 16);
    print_section("Object   ", (uint8_t *)obj, c->object_size < SK_PAGE_SIZE ? c->object_size : SK_PAGE_SIZE);
    if (DBG(c, Z))
        print_section("Redzone  ", (uint8_t *)obj + c->object_size, c->dbg.inuse - c->object_size);
    if (padding(c))
        print_section("Padding  ", (uint8_t *)obj + c->dbg.info_end, padding(c));
    os_printf(2, "\n");
}

/* The kernel's check_bytes_and_report: bytes [start, start+len) of obj
 * must all be `value`; if not, the report, then (debug_continue) they are
 * restored.  `held`: the caller's lock, released for the report. */
static bool check_bytes(struct slab_cache *c, struct sk_page *pg, char *obj, lock_t *held, const char *what,
                        uint8_t *start, uint8_t value, size_t len)
{
    uint8_t *fault = start, *end = start + len;
    while (fault < end && *fault == value)
        fault++;
    if (fault == end)
        return true;
    while (end > fault && end[-1] == value)
        end--;
    bug_begin(c, held, "%s overwritten", what);
    os_printf(2, "INFO: 0x%lx-0x%lx @offset=%lu. First byte 0x%x instead of 0x%x\n", (unsigned long)(uintptr_t)fault,
              (unsigned long)(uintptr_t)(end - 1), (unsigned long)((char *)fault - slab_base(pg)), *fault, value);
    print_trailer(c, pg, obj);
    bug_end(c, held, "Restoring %s 0x%lx-0x%lx=0x%x", what, (unsigned long)(uintptr_t)fault,
            (unsigned long)(uintptr_t)(end - 1), value);
    memset(fault, value, (size_t)(end - fault));
    return false;
}

/* check_object: red zones (val: RED_ACTIVE for a live object, inactive
 * for a free one), the kmalloc red zone of a live one, the poison of a
 * free one, the padding.  False after a report (and a repair). */
static bool check_object(struct slab_cache *c, struct sk_page *pg, char *obj, uint8_t val, lock_t *held)
{
    bool ok = true;
    if (DBG(c, Z)) {
        ok &= check_bytes(c, pg, obj, held, "Left Redzone", (uint8_t *)obj - c->dbg.red_left, val, c->dbg.red_left);
        ok &= check_bytes(c, pg, obj, held, "Right Redzone", (uint8_t *)obj + c->object_size, val,
                          c->dbg.inuse - c->object_size);
        uint32_t orig = *orig_of(c, obj);
        if (val == RED_ACTIVE && c->kmalloc && orig && orig < c->object_size)
            ok &= check_bytes(c, pg, obj, held, "kmalloc Redzone", (uint8_t *)obj + orig, val, c->object_size - orig);
    }
    if (val == RED_INACTIVE && poisons(c)) {
        ok &= check_bytes(c, pg, obj, held, "Poison", (uint8_t *)obj, POISON_FREE, c->object_size - 1);
        ok &= check_bytes(c, pg, obj, held, "End Poison", (uint8_t *)obj + c->object_size - 1, POISON_END, 1);
    }
    if (DBG(c, Z) || DBG(c, P))
        ok &= check_bytes(c, pg, obj, held, "Object padding", (uint8_t *)obj + c->dbg.info_end, POISON_INUSE, padding(c));
    return ok;
}

/* The current stack of a bad call on an object: report, trailer, end. */
__attribute__((format(printf, 4, 5))) static void object_err(struct slab_cache *c, struct sk_page *pg, char *obj,
                                                             const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    bug_begin(c, NULL, "%s", msg);
    print_trailer(c, pg, obj);
}

/* ---- object states ---- */

/* NULL, or an object of pg: a free pointer may hold nothing else. */
static bool fp_valid(const struct slab_cache *c, const struct sk_page *pg, const void *p)
{
    return !p || ((uintptr_t)p - (uintptr_t)pg->slab.s_mem < (uintptr_t)c->objects * c->size &&
                  slab_obj_exact(c, pg, p) < c->objects);
}

/* Is obj on pg's freelist (list_lock held)?  Stops at a corrupt link. */
static bool on_freelist(const struct slab_cache *c, struct sk_page *pg, const void *obj)
{
    void *fp = slab_freelist(pg);
    for (unsigned i = 0; fp && i <= c->objects; i++) {
        if (fp == obj)
            return true;
        void *next = get_fp(c, fp);
        if (!fp_valid(c, pg, next))
            return false;
        fp = next;
    }
    return false;
}

/* A free object as the checks expect it: red zones inactive, poison,
 * padding.  Tracks are kept (the last free is the point of U). */
static void make_free(struct slab_cache *c, char *obj)
{
    if (DBG(c, Z)) {
        memset(obj - c->dbg.red_left, RED_INACTIVE, c->dbg.red_left);
        memset(obj + c->object_size, RED_INACTIVE, c->dbg.inuse - c->object_size);
    }
    if (poisons(c)) {
        memset(obj, POISON_FREE, c->object_size - 1);
        obj[c->object_size - 1] = (char)POISON_END;
    }
    if (DBG(c, Z) || DBG(c, P))
        memset(obj + c->dbg.info_end, POISON_INUSE, padding(c));
}

/* A live object of `size` requested bytes: active red zones, the kmalloc
 * red zone after size. */
static void make_live(struct slab_cache *c, char *obj, size_t size)
{
    if (DBG(c, Z)) {
        memset(obj - c->dbg.red_left, RED_ACTIVE, c->dbg.red_left);
        memset(obj + c->object_size, RED_ACTIVE, c->dbg.inuse - c->object_size);
        if (c->kmalloc)
            memset(obj + size, RED_ACTIVE, c->object_size - size);
    }
    *orig_of(c, obj) = (uint32_t)size;
}

/* ---- the full list (list_lock held) ---- */

static void full_add(struct slab_node *n, struct sk_page *pg)
{
    pg->slab.prev = NULL;
    pg->slab.next = n->full;
    if (n->full)
        n->full->slab.prev = pg;
    n->full = pg;
    pg->list_gen = n->gen;
}

static void full_remove(struct slab_node *n, struct sk_page *pg)
{
    if (pg->list_gen != n->gen)
        return;   /* on a list abandoned by a forked child */
    if (pg->slab.prev)
        pg->slab.prev->slab.next = pg->slab.next;
    else
        n->full = pg->slab.next;
    if (pg->slab.next)
        pg->slab.next->slab.prev = pg->slab.prev;
    pg->list_gen = 0;
}

/* ---- alloc and free ---- */

/* A new slab, every object free and checked-clean, on no list. */
static struct sk_page *new_slab(struct slab_cache *c)
{
    void *fl;
    struct sk_page *pg = slab_new_slab(c, &fl, false, NULL);
    if (!pg)
        return NULL;
    for (unsigned i = 0; i < c->objects; i++) {
        char *obj = (char *)pg->slab.s_mem + (size_t)i * c->size;
        make_free(c, obj);
        if (DBG(c, U))
            memset(track_of(c, obj, 0), 0, 2 * sizeof(struct debug_track));
        *orig_of(c, obj) = 0;
    }
    union slab_counters cnt = { .v = 0 };
    cnt.objects = c->objects;
    __atomic_store_n(&pg->slab.freelist, fl, __ATOMIC_RELAXED);
    __atomic_store_n(&pg->slab.counters, cnt.v, __ATOMIC_RELEASE);
    return pg;
}

static void trace(struct slab_cache *c, struct sk_page *pg, char *obj, bool alloc, const struct debug_track *t)
{
    union slab_counters cnt = { .v = slab_counters(pg) };
    os_printf(2, "TRACE %s %s 0x%lx inuse=%u fp=0x%lx\n", c->name, alloc ? "alloc" : "free",
              (unsigned long)(uintptr_t)obj, (unsigned)cnt.inuse, (unsigned long)(uintptr_t)slab_freelist(pg));
    int n = (int)t->nframes, skip = report_skip_allocator(t->frames, n);
    report_print_frames(t->frames + skip, n - skip);
}

void *slab_debug_alloc(struct slab_cache *c, size_t size)
{
    slab_mark_used(c);            /* kmalloc calls here directly too */
    if (!size || size > c->object_size)
        size = c->object_size;
    struct debug_track t = { 0 };
    if (DBG(c, U) || DBG(c, T))
        track_now(&t);
    stat(c, SK_ALLOC_SLOWPATH);
    struct slab_node *n = &c->node[0];
    lock_acquire(&n->list_lock);
    struct sk_page *pg = n->partial;
    if (!pg) {
        lock_release(&n->list_lock);
        pg = new_slab(c);
        if (!pg) {
            errno = ENOMEM;
            return NULL;
        }
        lock_acquire(&n->list_lock);
        slab_add_partial(n, pg);
    }
    char *obj = slab_freelist(pg);
    void *next = get_fp(c, obj);
    union slab_counters cnt = { .v = slab_counters(pg) };
    bool corrupt = !fp_valid(c, pg, next);
    if (corrupt) {
        /* Isolate the rest of the chain: its objects stay in use (leaked),
         * as the kernel does with a corrupt freechain. */
        set_fp(c, obj, NULL);
        cnt.inuse = (uint32_t)cnt.objects - 1;
    }
    cnt.inuse++;
    __atomic_store_n(&pg->slab.freelist, corrupt ? NULL : next, __ATOMIC_RELAXED);
    __atomic_store_n(&pg->slab.counters, cnt.v, __ATOMIC_RELEASE);
    if (corrupt || !next) {
        slab_remove_partial(n, pg);
        full_add(n, pg);
    }
    lock_release(&n->list_lock);
    if (corrupt) {
        object_err(c, pg, obj, "Freepointer corrupt");
        bug_end(c, NULL, "Isolating the rest of the freelist of slab 0x%lx", (unsigned long)slab_base(pg));
    }
    check_object(c, pg, obj, RED_INACTIVE, NULL);
    make_live(c, obj, size);
    if (DBG(c, U))
        *track_of(c, obj, TRACK_ALLOC) = t;
    slab_mark_live(c, obj);
    if (DBG(c, T))
        trace(c, pg, obj, true, &t);
    return obj;
}

/* The slab and cache of a pointer in a debug cache's slab (any byte of
 * it), or NULL. */
static struct sk_page *debug_slab_of(const void *p, struct slab_cache **cp)
{
    struct vm_slice *s = vm_slice_of(p);
    if (!s || !vm_slice_maps(s, p))
        return NULL;
    struct sk_page *pg = page_of_slice(s, p);
    if (!(pg_flags(pg) & PG_SLAB) || pg->slab.cache->mode != SLAB_MODE_DEBUG)
        return NULL;
    *cp = pg->slab.cache;
    return slab_head(pg);
}

/* Report a free of p in c that is no object of c; returns under
 * debug_continue (the free is skipped). */
static void invalid_pointer(struct slab_cache *c, const void *p, const char *call)
{
    struct slab_cache *owner;
    struct sk_page *pg = debug_slab_of(p, &owner);
    if (pg && owner != c) {
        bug_begin(c, NULL, "Wrong slab cache: %s(0x%lx) of an object of %s", call, (unsigned long)(uintptr_t)p,
                  owner->name);
        print_slab_info(owner, pg);
        bug_end(c, NULL, "Object at 0x%lx not freed", (unsigned long)(uintptr_t)p);
        return;
    }
    bug_begin(c, NULL, "Invalid object pointer 0x%lx", (unsigned long)(uintptr_t)p);
    if (pg) {
        char *first = (char *)pg->slab.s_mem - c->dbg.red_left;
        size_t idx = ((const char *)p - first) / c->size;
        if ((const char *)p >= first && idx < c->objects) {
            char *obj = (char *)pg->slab.s_mem + idx * c->size;
            os_printf(2, "INFO: %s(0x%lx) is %ld bytes %s object 0x%lx\n", call, (unsigned long)(uintptr_t)p,
                      labs((long)((const char *)p - obj)), (const char *)p < obj ? "before" : "inside",
                      (unsigned long)(uintptr_t)obj);
            print_trailer(c, pg, obj);
        } else {
            print_slab_info(c, pg);
        }
    } else {
        os_printf(2, "INFO: %s(0x%lx) is not in a slab of %s\n", call, (unsigned long)(uintptr_t)p, c->name);
    }
    bug_end(c, NULL, "Object at 0x%lx not freed", (unsigned long)(uintptr_t)p);
}

bool slab_debug_bad_pointer(const void *p, const char *call)
{
    struct slab_cache *c;
    if (!debug_slab_of(p, &c))
        return false;
    invalid_pointer(c, p, call);
    return true;
}

void slab_debug_free(struct slab_cache *c, void *p, bool suspect, const char *call)
{
    struct slab_cache *owner;
    struct sk_page *pg = slab_of_object(p, &owner);
    if (!pg || owner != c) {
        invalid_pointer(c, p, call);
        return;
    }
    pg = slab_head(pg);           /* the object may lie in a tail page */
    char *obj = p;
    struct debug_track t = { 0 };
    if (DBG(c, U) || DBG(c, T))
        track_now(&t);
    if (DBG(c, T))
        trace(c, pg, obj, false, &t);
    stat(c, SK_FREE_SLOWPATH);
    struct slab_node *n = &c->node[0];
    lock_acquire(&n->list_lock);
    if ((DBG(c, F) || suspect) && on_freelist(c, pg, obj)) {
        lock_release(&n->list_lock);
        object_err(c, pg, obj, "Object already free");
        bug_end(c, NULL, "Object at 0x%lx not freed", (unsigned long)(uintptr_t)obj);
        return;
    }
    union slab_counters cnt = { .v = slab_counters(pg) };
    if (DBG(c, F) && (cnt.inuse == 0 || cnt.inuse > cnt.objects || cnt.objects != c->objects)) {
        bug_begin(c, &n->list_lock, "Slab counters corrupt: inuse %u objects %u (cache %u)", (unsigned)cnt.inuse,
                  (unsigned)cnt.objects, (unsigned)c->objects);
        print_slab_info(c, pg);
        bug_end(c, NULL, "Object at 0x%lx not freed", (unsigned long)(uintptr_t)obj);
        return;
    }
    check_object(c, pg, obj, RED_ACTIVE, &n->list_lock);
    if (DBG(c, U))
        *track_of(c, obj, TRACK_FREE) = t;
    make_free(c, obj);
    *slab_marker(c, obj) = slab_free_key;
    void *prior = slab_freelist(pg);
    cnt.v = slab_counters(pg);
    set_fp(c, obj, prior);
    cnt.inuse--;
    __atomic_store_n(&pg->slab.freelist, obj, __ATOMIC_RELAXED);
    __atomic_store_n(&pg->slab.counters, cnt.v, __ATOMIC_RELEASE);
    if (!prior) {
        full_remove(n, pg);
        slab_add_partial(n, pg);
    }
    bool discard = cnt.inuse == 0 && n->nr_partial > c->min_partial;
    if (discard)
        slab_remove_partial(n, pg);
    lock_release(&n->list_lock);
    if (discard)
        slab_discard(c, pg);
}

size_t slab_debug_usable(struct slab_cache *c, const void *obj)
{
    uint32_t orig = *orig_of(c, obj);
    return c->kmalloc && orig ? orig : c->object_size;
}

/* ---- alloc_calls and free_calls (U) ---- */

/* One object's track, copied out under list_lock. */
struct call_rec {
    void *frames[8];
    uint32_t nframes;
    int32_t tid, cpu;
    uint32_t bytes;
    uint64_t ms;
};


/* Copy the tracks of live (alloc) or free objects of c's slabs into recs
 * (at most max); list_lock is held only for the copy. */
static size_t collect(struct slab_cache *c, int which, struct call_rec *recs, size_t max)
{
    struct slab_node *n = &c->node[0];
    size_t k = 0;
    lock_acquire(&n->list_lock);
    for (int list = 0; list < 2; list++)
        for (struct sk_page *pg = list ? n->full : n->partial; pg; pg = pg->slab.next)
            for (unsigned i = 0; i < c->objects && k < max; i++) {
                char *obj = (char *)pg->slab.s_mem + (size_t)i * c->size;
                uintptr_t mark = *slab_marker(c, obj);
                if (which == TRACK_ALLOC ? mark != 0 : mark != slab_free_key)
                    continue;
                const struct debug_track *t = track_of(c, obj, which);
                if (!t->ms)
                    continue;
                struct call_rec *r = &recs[k++];
                r->nframes = t->nframes < 8 ? t->nframes : 8;
                memcpy(r->frames, t->frames, r->nframes * sizeof(void *));
                r->tid = t->tid;
                r->cpu = t->cpu;
                r->ms = t->ms;
                r->bytes = which == TRACK_ALLOC ? (uint32_t)slab_debug_usable(c, obj) : 0;
            }
    lock_release(&n->list_lock);
    return k;
}

static void calls_write_one(struct slab_cache *c, int which, int fd, struct call_rec *recs, size_t max,
                            struct call_loc *locs)
{
    os_printf(fd, "%s %s:\n", which == TRACK_ALLOC ? "alloc_calls" : "free_calls", c->name);
    size_t nrec = collect(c, which, recs, max);
    memset(locs, 0, CALLS_MAX * sizeof *locs);
    uint64_t now = os_now_ns() / 1000000;
    for (size_t k = 0; k < nrec; k++) {
        struct call_rec *r = &recs[k];
        int skip = report_skip_allocator(r->frames, (int)r->nframes);
        calls_add(locs, r->nframes ? (uintptr_t)r->frames[skip] : 0, now > r->ms ? now - r->ms : 0, r->tid, r->cpu,
                  r->bytes);
    }
    size_t m = calls_sort(locs);
    if (!m)
        os_printf(fd, "No data\n");
    for (size_t i = 0; i < m; i++) {
        char site[320] = "<no stack>", line[700];
        if (locs[i].site)
            report_format_site(site, sizeof site, (void *)locs[i].site);
        calls_line(line, sizeof line, &locs[i], site, which == TRACK_ALLOC);
        os_printf(fd, "%s", line);
    }
}

void slab_debug_calls_write(struct slab_cache *c, int fd)
{
    if (c->mode != SLAB_MODE_DEBUG || !DBG(c, U))
        return;
    /* Room for every object's record (a snapshot: objects of slabs made
     * meanwhile are left out), and the table of sites. */
    size_t max = __atomic_load_n(&c->node[0].nr_slabs, __ATOMIC_RELAXED) * c->objects + 1;
    size_t bytes = SK_ALIGN_UP(max * sizeof(struct call_rec) + CALLS_MAX * sizeof(struct call_loc), SK_PAGE_SIZE);
    char *buf = os_map(bytes, SK_PAGE_SIZE);
    if (!buf) {
        os_printf(fd, "alloc_calls %s:\nNo memory for the table\n", c->name);
        return;
    }
    struct call_loc *locs = (struct call_loc *)buf;
    struct call_rec *recs = (struct call_rec *)(buf + CALLS_MAX * sizeof(struct call_loc));
    calls_write_one(c, TRACK_ALLOC, fd, recs, max, locs);
    calls_write_one(c, TRACK_FREE, fd, recs, max, locs);
    os_unmap(buf, bytes);
}

int slab_debug_alloc_stack(const struct slab_cache *c, void *obj, void *const **frames, uint64_t *ms)
{
    if (c->mode != SLAB_MODE_DEBUG || !DBG(c, U))
        return 0;
    struct debug_track *t = track_of(c, obj, TRACK_ALLOC);
    if (!t->ms)
        return 0;
    int n = (int)t->nframes, skip = report_skip_allocator(t->frames, n);
    *frames = t->frames + skip;
    *ms = t->ms;
    return n - skip;
}
