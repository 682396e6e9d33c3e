/*
 * leak.c — kmemleak for any program: leak_check=1 and sk_leak_check().
 *
 * The kernel's kmemleak (mm/kmemleak.c) finds memory nobody can reach any
 * more by a conservative mark-and-sweep: every aligned word of the roots
 * (data and bss, stacks) that points at or into a tracked object marks it
 * ("gray"), marked objects are scanned in turn from a work list, and what
 * stays unmarked ("white") at the end is reported as an unreferenced
 * object.  slabkit needs no tracking tree: its page map already answers,
 * for any word, which slab object or large block it falls in, and the free
 * marker (slab_fast.h) tells an allocated object from a free one.
 *
 * Tracked: objects of every slab cache with a free marker (all of malloc's
 * classes and sk_cache_create's caches of 16 bytes and more), large blocks
 * (exact page blocks, PG_LARGE) and direct mappings (VM_SLICE_DIRECT).
 * Not tracked (neither reported nor scanned): 8-byte caches (no marker
 * once on a slab freelist), sk_alloc_pages blocks, sk_vm_map regions and
 * sk_file pages.
 *
 * Roots (docs/kmemleak.md says what is and is not scanned):
 *  - every loaded module's writable PT_LOAD segments (dl_iterate_phdr):
 *    .data, .bss, the GOT; libc's among them, so what libc allocated for
 *    itself (stdio buffers) is reachable through it; but not slabkit's
 *    own data (leak_scan_segment), whichever module it is linked into;
 *  - the calling thread: its callee-saved registers, its stack from
 *    sk_leak_check's frame to the top of the stack mapping (the frames of
 *    the scan itself are not scanned), and the 256 KiB either side of its
 *    thread pointer (static TLS and the TCB, whose DTV leads to dynamic
 *    TLS blocks);
 *  - every other thread blocked in a system call (one found running is
 *    looked at again, 1 ms apart, up to 20 times): its stack from the
 *    stack pointer the kernel shows in /proc/self/task/TID/syscall to the
 *    top of the mapping (glibc puts a thread's TCB and static TLS there).
 *    There is no stop-the-world: a running thread's stack and other
 *    threads' registers are not scanned, and memory changed during the
 *    scan can be misjudged either way.  slabkit's own threads are
 *    scanned from their static TLS up whatever they do (their TCB).
 *  - KFENCE-sampled objects in use (kfence.c's pool is outside the slices):
 *    read through process_vm_readv, never reported themselves.
 * allocator=slab's off-slab management (kmalloc'd, held by slab
 * descriptors) is slabkit's own: marked up front, never scanned.
 * Nothing of the scan's own state comes from malloc: the slice table, the
 * mark bitmaps (one bit per 16 bytes of heap), the work list and the
 * /proc text all live in private mmaps, unmapped at the end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "slabkit.h"
#include "slab/kmalloc.h"
#include "debug/report.h"
#include "debug/kfence.h"

#define LEAK_GRANULE_SHIFT 4       /* one mark bit per 16 bytes (strides are 16+) */
#define LEAK_DRAIN_AT 4096         /* root scans drain the work list beyond this */
#define LEAK_CHUNK 4096            /* bytes of an object scanned at a time */
#define LEAK_TLS_SPAN ((uintptr_t)256 << 10)
#define LEAK_MAX_GROUPS 128

struct leak_slice {
    struct vm_slice *s;
    uint64_t *bits;
    size_t nbits;
};

struct leak_item {
    uintptr_t start;
    size_t len;
};

struct leak_obj {
    uintptr_t start;
    size_t len;
    uint64_t *word;
    uint64_t mask;
};

struct leak_group {
    const struct slab_cache *cache;   /* NULL: large blocks */
    void *site;                       /* allocation site (debug=U), else NULL */
    size_t count, bytes;
};

struct leak_scan {
    struct leak_slice *slices;
    size_t nr_slices, slices_bytes;
    uint64_t *bits;
    size_t bits_bytes;
    struct leak_item *work;
    size_t work_len, work_cap, work_peak;
    char *maps;
    size_t maps_len, maps_bytes;
    uintptr_t heap_lo, heap_span;
    bool draining;
    bool overflow;               /* the work list could not grow */
    /* Figures for the summary. */
    size_t root_bytes, own_bytes, heap_bytes, marked, threads_seen, threads_missed, tcbs_scanned;
};

/* ---- private memory (never malloc) ---- */

static void *leak_map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static size_t page_round(size_t n)
{
    return (n + SK_PAGE_SIZE - 1) & ~(size_t)(SK_PAGE_SIZE - 1);
}

/* ---- the slice table: snapshot, sorted by header address ---- */

static bool leak_slices_build(struct leak_scan *ls)
{
    size_t n = 0;
    for (struct vm_slice *s = vm_slices(); s; s = s->next)
        n++;
    ls->slices_bytes = page_round((n + 1) * sizeof *ls->slices);
    ls->slices = leak_map(ls->slices_bytes);
    if (!ls->slices)
        return false;
    size_t words = 0, k = 0;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (struct vm_slice *s = vm_slices(); s && k < n; s = s->next) {
        size_t nbits;
        if (s->kind == VM_SLICE_DIRECT)
            nbits = 1;
        else if (s->kind == VM_SLICE_BASE || s->kind == VM_SLICE_HUGE)
            nbits = __atomic_load_n(&s->mapped, __ATOMIC_ACQUIRE) >> LEAK_GRANULE_SHIFT;
        else
            continue;          /* sk_vm_map regions: not the heap */
        ls->slices[k].s = s;
        ls->slices[k].nbits = nbits;
        ls->slices[k].bits = (uint64_t *)(uintptr_t)words;   /* offset for now */
        words += (nbits + 63) / 64;
        if (s->base < lo)
            lo = s->base;
        if (s->base + s->size > hi)
            hi = s->base + s->size;
        k++;
    }
    ls->nr_slices = k;
    ls->bits_bytes = page_round(words * sizeof(uint64_t) + 1);
    ls->bits = leak_map(ls->bits_bytes);
    if (!ls->bits)
        return false;
    for (size_t i = 0; i < k; i++)
        ls->slices[i].bits = ls->bits + (uintptr_t)ls->slices[i].bits;
    /* Shell sort by header address (qsort may allocate). */
    for (size_t gap = k / 2; gap; gap /= 2)
        for (size_t i = gap; i < k; i++) {
            struct leak_slice t = ls->slices[i];
            size_t j = i;
            for (; j >= gap && (uintptr_t)ls->slices[j - gap].s > (uintptr_t)t.s; j -= gap)
                ls->slices[j] = ls->slices[j - gap];
            ls->slices[j] = t;
        }
    ls->heap_lo = k ? lo : 1;
    ls->heap_span = k ? hi - lo : 0;
    return true;
}

static struct leak_slice *leak_slice_find(struct leak_scan *ls, const struct vm_slice *s)
{
    size_t lo = 0, hi = ls->nr_slices;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ls->slices[mid].s == s)
            return &ls->slices[mid];
        if ((uintptr_t)ls->slices[mid].s < (uintptr_t)s)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static bool leak_set_bit(struct leak_slice *ls_slice, size_t bit, struct leak_obj *o)
{
    if (bit >= ls_slice->nbits)
        return false;          /* grown since the snapshot: not tracked */
    o->word = &ls_slice->bits[bit / 64];
    o->mask = (uint64_t)1 << (bit % 64);
    return true;
}

/*
 * The allocated object that word value p points at or into, or false:
 * not slabkit's heap, a free object, slab management, a page not in use.
 */
static bool leak_resolve(struct leak_scan *ls, uintptr_t p, struct leak_obj *o)
{
    struct vm_slice *s = vm_slice_of((void *)p);
    if (!s)
        return false;
    struct leak_slice *sl = leak_slice_find(ls, s);
    if (!sl)
        return false;
    if (s->kind == VM_SLICE_DIRECT) {
        struct sk_page *pg = (struct sk_page *)s->pages;
        if (!(pg_flags(pg) & PG_LARGE))
            return false;
        size_t len = pg->large.nr_pages << SK_PAGE_SHIFT;
        if (p - s->base >= len)
            return false;
        o->start = s->base;
        o->len = len;
        return leak_set_bit(sl, 0, o);
    }
    if (!vm_slice_maps(s, (void *)p))
        return false;
    struct sk_page *pg = page_of_slice(s, (void *)p);
    uint32_t f = pg_flags(pg);
    if (f & PG_SLAB) {
        /* Head and tail pages both carry the cache and s_mem. */
        struct slab_cache *c = pg->slab.cache;
        uintptr_t s_mem = (uintptr_t)pg->slab.s_mem;
        if (!c || !c->kofs || p < s_mem)
            return false;
        size_t idx = (p - s_mem) / c->size;
        if (idx >= c->objects)
            return false;
        char *obj = (char *)s_mem + idx * c->size;
        /* On a page of a fresh range not initialised yet: never handed
         * out, and its memory holds no marker (slab.c); the page the
         * object starts on says. */
        if (slab_page_fresh(page_of_slice(s, obj)))
            return false;
        if (slab_marked_free(c, obj))
            return false;
        o->start = (uintptr_t)obj;
        o->len = c->object_size;
    } else {
        struct sk_page *head = page_find_head((void *)p);
        if (!head || (pg_flags(head) & (PG_HEAD | PG_LARGE | PG_SLAB)) != (PG_HEAD | PG_LARGE))
            return false;
        o->start = (uintptr_t)page_address(head);
        o->len = head->large.nr_pages << SK_PAGE_SHIFT;
    }
    return leak_set_bit(sl, (o->start - s->base) >> LEAK_GRANULE_SHIFT, o);
}

/* ---- mark ---- */

static void leak_drain(struct leak_scan *ls);

static void leak_push(struct leak_scan *ls, uintptr_t start, size_t len)
{
    if (ls->work_len == ls->work_cap) {
        size_t old = ls->work_cap * sizeof *ls->work;
        size_t bytes = old ? old * 2 : (size_t)1 << 20;
        void *p = old ? mremap(ls->work, old, bytes, MREMAP_MAYMOVE) : leak_map(bytes);
        if (p == MAP_FAILED || !p) {
            /* Out of memory for the work list: this object stays
             * unscanned, so what only it references may be reported. */
            ls->overflow = true;
            return;
        }
        ls->work = p;
        ls->work_cap = bytes / sizeof *ls->work;
    }
    ls->work[ls->work_len].start = start;
    ls->work[ls->work_len].len = len;
    if (++ls->work_len > ls->work_peak)
        ls->work_peak = ls->work_len;
}

static inline void leak_ref(struct leak_scan *ls, uintptr_t v)
{
    struct leak_obj o;
    if (!leak_resolve(ls, v, &o) || (*o.word & o.mask))
        return;
    *o.word |= o.mask;
    ls->marked++;
    leak_push(ls, o.start, o.len);
}

/* Whether the page at a must not be read as a root: slabkit's heap (a
 * root range merged with a slice) or the scan's own mappings. */
static bool leak_excluded(struct leak_scan *ls, uintptr_t a)
{
    if (vm_slice_of((void *)a))
        return true;
    uintptr_t work = (uintptr_t)ls->work, bits = (uintptr_t)ls->bits;
    return (a - (uintptr_t)ls->slices < ls->slices_bytes) || (a - bits < ls->bits_bytes) ||
           (ls->work && a - work < ls->work_cap * sizeof *ls->work) ||
           (a - (uintptr_t)ls->maps < ls->maps_bytes);
}

static void leak_scan_words(struct leak_scan *ls, uintptr_t lo, uintptr_t hi)
{
    uintptr_t heap_lo = ls->heap_lo, span = ls->heap_span;
    for (uintptr_t a = lo; a < hi; a += sizeof(uintptr_t)) {
        uintptr_t v = *(const volatile uintptr_t *)a;
        if (v - heap_lo < span)
            leak_ref(ls, v);
    }
}

/* A KFENCE object in use (its own guarded page, outside the slices): a
 * root, so what only it points to is not reported; it is never reported
 * itself.  Read through process_vm_readv on this process, which fails
 * with EFAULT instead of faulting should another thread free the object
 * (its page goes PROT_NONE) meanwhile. */
static void leak_scan_kfence(uintptr_t addr, size_t size, void *arg)
{
    struct leak_scan *ls = arg;
    uintptr_t buf[SK_PAGE_SIZE / sizeof(uintptr_t)];
    uintptr_t lo = addr & ~(uintptr_t)(sizeof(uintptr_t) - 1);
    size_t len = (addr + size - lo + sizeof(uintptr_t) - 1) & ~(sizeof(uintptr_t) - 1);
    if (len > sizeof buf)
        len = sizeof buf;
    struct iovec local = { buf, len }, remote = { (void *)lo, len };
    ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (got > 0)
        leak_scan_words(ls, (uintptr_t)buf, (uintptr_t)buf + ((size_t)got & ~(sizeof(uintptr_t) - 1)));
}

static void leak_scan_root(struct leak_scan *ls, uintptr_t lo, uintptr_t hi)
{
    lo = (lo + sizeof(uintptr_t) - 1) & ~(uintptr_t)(sizeof(uintptr_t) - 1);
    hi &= ~(uintptr_t)(sizeof(uintptr_t) - 1);
    while (lo < hi) {
        uintptr_t end = (lo | (SK_PAGE_SIZE - 1)) + 1;
        if (end > hi)
            end = hi;
        if (!leak_excluded(ls, lo)) {
            leak_scan_words(ls, lo, end);
            ls->root_bytes += end - lo;
            if (ls->work_len > LEAK_DRAIN_AT)
                leak_drain(ls);
        }
        lo = end;
    }
    leak_drain(ls);
}

/* Scan gray objects until none is left, depth first: the list holds at
 * most LEAK_CHUNK / 8 items per level of the reference graph being
 * walked (a linked list: a few; a tree: chunk x depth). */
static void leak_drain(struct leak_scan *ls)
{
    if (ls->draining)
        return;
    ls->draining = true;
    while (ls->work_len) {
        struct leak_item it = ls->work[--ls->work_len];
        size_t n = it.len & ~(size_t)7;
        if (n > LEAK_CHUNK) {
            /* A big object goes in chunks, its rest back on the list
             * under what this chunk adds (kmemleak's scan_large_block):
             * an array of N pointers adds at most LEAK_CHUNK / 8 items
             * at a time, not N. */
            ls->work[ls->work_len].start = it.start + LEAK_CHUNK;
            ls->work[ls->work_len].len = it.len - LEAK_CHUNK;
            ls->work_len++;
            n = LEAK_CHUNK;
        }
        ls->heap_bytes += n;
        leak_scan_words(ls, it.start, it.start + n);
    }
    ls->draining = false;
}

/*
 * slabkit's own heap objects: allocator=slab keeps the management of big
 * objects' slabs (struct slab and index array) off the slab, kmalloc'd
 * (SLAB's off-slab management), pointed to from the slab's descriptor,
 * which is no root.  Mark them as referenced without scanning them (their
 * s_mem points at the slab's first object, which must not count), as the
 * kernel's SLAB told kmemleak about its own management.
 */
static void leak_mark_slab_metadata(struct leak_scan *ls)
{
    for (size_t i = 0; i < ls->nr_slices; i++) {
        struct leak_slice *sl = &ls->slices[i];
        if (sl->s->kind == VM_SLICE_DIRECT)
            continue;
        size_t npages = (sl->nbits << LEAK_GRANULE_SHIFT) >> SK_PAGE_SHIFT;
        struct sk_page *first = (struct sk_page *)sl->s->pages;
        for (size_t p = 0; p < npages; p++) {
            struct sk_page *pg = first + p;
            if ((pg_flags(pg) & (PG_HEAD | PG_SLAB)) != (PG_HEAD | PG_SLAB))
                continue;
            struct slab_cache *c = pg->slab.cache;
            if (c->mode == SLAB_MODE_CLASSIC && c->classic.off_slab) {
                uintptr_t mgmt = c->classic.onslab ? (uintptr_t)pg->slab.freelist : (uintptr_t)pg->slab.counters;
                struct leak_obj o;
                if (leak_resolve(ls, mgmt, &o))
                    *o.word |= o.mask;
            }
            p += ((size_t)1 << c->order) - 1;
        }
    }
}

/* ---- roots: /proc/self/maps, modules, threads ---- */

static bool leak_read_file(struct leak_scan *ls, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ls->maps_len = 0;
    for (;;) {
        if (ls->maps_len + 4096 > ls->maps_bytes) {
            size_t bytes = ls->maps_bytes ? ls->maps_bytes * 2 : (size_t)256 << 10;
            void *p = ls->maps ? mremap(ls->maps, ls->maps_bytes, bytes, MREMAP_MAYMOVE) : leak_map(bytes);
            if (p == MAP_FAILED || !p) {
                close(fd);
                return false;
            }
            ls->maps = p;
            ls->maps_bytes = bytes;
        }
        ssize_t n = read(fd, ls->maps + ls->maps_len, ls->maps_bytes - ls->maps_len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        ls->maps_len += (size_t)n;
    }
    close(fd);
    ls->maps[ls->maps_len] = 0;
    return true;
}

static uintptr_t parse_hex(const char **sp)
{
    const char *s = *sp;
    uintptr_t v = 0;
    for (;; s++) {
        unsigned d;
        if (*s >= '0' && *s <= '9')
            d = (unsigned)(*s - '0');
        else if (*s >= 'a' && *s <= 'f')
            d = (unsigned)(*s - 'a' + 10);
        else
            break;
        v = v * 16 + d;
    }
    *sp = s;
    return v;
}

/* The mapping of /proc/self/maps (read into ls->maps) holding a. */
static bool leak_mapping_of(struct leak_scan *ls, uintptr_t a, uintptr_t *lo, uintptr_t *hi)
{
    const char *s = ls->maps, *end = ls->maps + ls->maps_len;
    while (s < end) {
        uintptr_t l = parse_hex(&s);
        if (*s == '-')
            s++;
        uintptr_t h = parse_hex(&s);
        if (a >= l && a < h && s[1] == 'r') {
            *lo = l;
            *hi = h;
            return true;
        }
        while (s < end && *s != '\n')
            s++;
        s++;
    }
    return false;
}

/*
 * slabkit's own writable data is no root: its variables hold heap
 * addresses (a slice's base is the first object's address; a per-CPU
 * array in the .bss keeps, above its top, the pointers it handed out),
 * and they would keep leaked objects looking referenced.  The markers of
 * src/os/own_begin.c and own_end.c bracket it in each section, in the
 * shared library and in a program linked with the archive alike.
 */
extern char sk_own_data_begin[8], sk_own_data_end[8], sk_own_bss_begin[8], sk_own_bss_end[8];
extern char sk_own_big_begin[8], sk_own_big_end[8];
extern void *sk_own_rel_begin, *sk_own_rel_end, *sk_own_rel_local_begin, *sk_own_rel_local_end;

#define LEAK_OWN_RANGES 5
#define LEAK_OWN_MAX ((uintptr_t)64 << 20)    /* slabkit's data is some MiB */
struct leak_range {
    uintptr_t lo, hi;
};

/* The own ranges, sorted by address. */
static void leak_own_ranges(struct leak_range r[LEAK_OWN_RANGES])
{
    r[0] = (struct leak_range){ (uintptr_t)sk_own_data_begin, (uintptr_t)sk_own_data_end + sizeof sk_own_data_end };
    r[1] = (struct leak_range){ (uintptr_t)&sk_own_rel_begin, (uintptr_t)(&sk_own_rel_end + 1) };
    r[2] = (struct leak_range){ (uintptr_t)&sk_own_rel_local_begin, (uintptr_t)(&sk_own_rel_local_end + 1) };
    r[3] = (struct leak_range){ (uintptr_t)sk_own_bss_begin, (uintptr_t)sk_own_bss_end + sizeof sk_own_bss_end };
    r[4] = (struct leak_range){ (uintptr_t)sk_own_big_begin, (uintptr_t)sk_own_big_end + sizeof sk_own_big_end };
    /* Linked from the separate objects in another order (a unit test's
     * archive pulls its members as they are needed), a begin marker may
     * follow its end: then nothing is known of that section, and nothing
     * is excluded of it. */
    for (int i = 0; i < LEAK_OWN_RANGES; i++)
        if (r[i].hi < r[i].lo || r[i].hi - r[i].lo > LEAK_OWN_MAX)
            r[i].hi = r[i].lo;
    for (int i = 1; i < LEAK_OWN_RANGES; i++)
        for (int j = i; j > 0 && r[j].lo < r[j - 1].lo; j--) {
            struct leak_range t = r[j];
            r[j] = r[j - 1];
            r[j - 1] = t;
        }
}

/* A writable segment of a module as roots, less slabkit's own data. */
static void leak_scan_segment(struct leak_scan *ls, uintptr_t lo, uintptr_t hi)
{
    struct leak_range own[LEAK_OWN_RANGES];
    leak_own_ranges(own);
    for (int i = 0; i < LEAK_OWN_RANGES && lo < hi; i++) {
        if (own[i].hi <= lo || own[i].lo >= hi)
            continue;
        if (own[i].lo > lo)
            leak_scan_root(ls, lo, own[i].lo);
        ls->own_bytes += (own[i].hi < hi ? own[i].hi : hi) - (own[i].lo > lo ? own[i].lo : lo);
        lo = own[i].hi;
    }
    if (lo < hi)
        leak_scan_root(ls, lo, hi);
}

static int leak_phdr(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct leak_scan *ls = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W) || !ph->p_memsz)
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        leak_scan_segment(ls, lo, lo + ph->p_memsz);
    }
    return 0;
}

static uintptr_t leak_thread_pointer(void)
{
#if defined(__x86_64__)
    uintptr_t tp;
    __asm__("movq %%fs:0, %0" : "=r"(tp));
    return tp;
#else
    return (uintptr_t)__builtin_thread_pointer();
#endif
}

struct linux_dirent64_ {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* How many times, 1 ms apart, a thread found running is looked at again. */
#define LEAK_RUNNING_TRIES 20

/* The stack pointer of thread tid if it sleeps in the kernel, else 0. */
static uintptr_t leak_thread_sp(struct leak_scan *ls, const char *tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%s/syscall", tid);
    if (!leak_read_file(ls, path))
        return 0;
    /* "NR a1 a2 a3 a4 a5 a6 SP PC", "-1 SP PC" (blocked, not in a system
     * call) or "running". */
    const char *s = ls->maps;
    if (*s != '-' && (*s < '0' || *s > '9'))
        return 0;
    int field = 0, want = s[0] == '-' ? 1 : 7;
    for (; *s; s++)
        if (*s == ' ' && ++field == want) {
            s++;
            if (s[0] == '0' && s[1] == 'x')
                s += 2;
            return parse_hex(&s);
        }
    return 0;
}

/*
 * glibc's thread descriptors, live or cached: a thread that exited keeps
 * its stack mapping in glibc's stack cache, its struct pthread (at the
 * top of the mapping: the TCB on x86-64) still pointing at its DTV, which
 * _dl_allocate_tls took from malloc and frees only when the cached stack
 * goes.  Nothing the scan reads reaches it (the cache's list runs through
 * the cached descriptors themselves), so every thread that ever exited
 * left a "leak" of its DTV (the kernel harness's threads, 320 bytes
 * each).  A descriptor is found by its self-pointers (tcbhead_t: tcb and
 * self both point at it) near the top of an anonymous read-write mapping,
 * and is scanned to the mapping's end: the DTV and what it points at are
 * glibc's, never the program's leak.  The thread's static TLS below it is
 * not scanned (an exited thread's thread-locals that still point at the
 * heap are leaks).
 */
#define LEAK_TCB_SEARCH ((uintptr_t)16 << 10)
static void leak_scan_tcbs(struct leak_scan *ls)
{
    const char *s = ls->maps, *end = ls->maps + ls->maps_len;
    while (s < end) {
        const char *line = s;
        while (s < end && *s != '\n')
            s++;
        const char *eol = s++;
        const char *p = line;
        uintptr_t lo = parse_hex(&p);
        if (*p++ != '-')
            continue;
        uintptr_t hi = parse_hex(&p);
        if (p + 5 > eol || memcmp(p, " rw-p", 5) != 0 || hi - lo < 2 * LEAK_TCB_SEARCH)
            continue;
        /* Anonymous: offset, device, inode 0, and no path. */
        const char *q = p + 5, *f = q;
        for (int field = 0; field < 3; field++) {
            while (q < eol && *q == ' ')
                q++;
            f = q;
            while (q < eol && *q != ' ')
                q++;
        }
        bool inode0 = q - f == 1 && *f == '0';
        while (q < eol && *q == ' ')
            q++;
        if (!inode0 || q < eol)
            continue;     /* a file mapping, or a named one ([heap], [stack]) */
        if (vm_slice_of((void *)lo))
            continue;     /* slabkit's heap */
        /* Read through process_vm_readv: a mapping another thread unmaps
         * meanwhile fails the read instead of faulting the scan. */
        static uintptr_t probe[LEAK_TCB_SEARCH / sizeof(uintptr_t)] SK_BIG_BSS;
        struct iovec local = { probe, sizeof probe }, remote = { (void *)(hi - LEAK_TCB_SEARCH), sizeof probe };
        if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)sizeof probe)
            continue;
        for (size_t off = LEAK_TCB_SEARCH - 64;; off -= 64) {
            const uintptr_t *w = probe + off / sizeof(uintptr_t), a = hi - LEAK_TCB_SEARCH + off;
            if (w[0] == a && w[2] == a) {
                leak_scan_root(ls, a, hi);
                ls->tcbs_scanned++;
                break;
            }
            if (off == 0)
                break;
        }
    }
}

/* Scan every other thread's stack (those blocked in the kernel). */
static void leak_scan_threads(struct leak_scan *ls)
{
    int dfd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return;
    char self[16];
    snprintf(self, sizeof self, "%d", os_gettid());
    /* Collect the stack pointers first (reading each task's file reuses
     * ls->maps), then the maps, then scan. */
    enum { MAX_SP = 4096, DIRENT_BYTES = 4096 };
    size_t sp_bytes = page_round(MAX_SP * sizeof(uintptr_t)) + DIRENT_BYTES;
    uintptr_t *sps = leak_map(sp_bytes);
    if (!sps) {
        close(dfd);
        return;
    }
    char *buf = (char *)sps + page_round(MAX_SP * sizeof(uintptr_t));   /* not on the stack */
    size_t nsp = 0;
    for (;;) {
        long n = syscall(SYS_getdents64, dfd, buf, DIRENT_BYTES);
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            struct linux_dirent64_ *d = (struct linux_dirent64_ *)(buf + off);
            off += d->d_reclen;
            if (d->d_name[0] < '0' || d->d_name[0] > '9' || !strcmp(d->d_name, self))
                continue;
            uintptr_t sp = leak_thread_sp(ls, d->d_name);
            /* Running: look again for a while.  A thread that runs at the
             * exit scan is mostly on its way to a wait (liburcu's call_rcu
             * worker, between a grace period and its callbacks, holds a
             * batch of objects only on its stack), and a blocked thread's
             * stack can be read. */
            for (int tries = 0; !sp && tries < LEAK_RUNNING_TRIES; tries++) {
                os_sleep_ms(1);
                sp = leak_thread_sp(ls, d->d_name);
            }
            if (sp && nsp < MAX_SP) {
                sps[nsp++] = sp;
                ls->threads_seen++;
            } else {
                ls->threads_missed++;
            }
        }
    }
    close(dfd);
    if (leak_read_file(ls, "/proc/self/maps")) {
        for (size_t i = 0; i < nsp; i++) {
            uintptr_t lo, hi;
            if (leak_mapping_of(ls, sps[i], &lo, &hi))
                leak_scan_root(ls, sps[i], hi);
            else
                ls->threads_missed++;
        }
        leak_scan_tcbs(ls);
        /* slabkit's own threads (purger, KFENCE timer), running, asleep
         * or not started yet: what glibc allocated for them (the DTV their
         * TCB points at) is never a leak.  Their TCB and static TLS, to
         * the top of their stack mapping; their frames below hold no heap
         * pointer of the program's. */
        uintptr_t tcb[OS_OWN_THREADS];
        for (unsigned i = 0, n = os_own_threads(tcb); i < n; i++) {
            uintptr_t lo, hi;
            if (!leak_mapping_of(ls, tcb[i], &lo, &hi))
                continue;
            if (tcb[i] - lo > LEAK_TLS_SPAN)
                lo = tcb[i] - LEAK_TLS_SPAN;
            leak_scan_root(ls, lo, hi);
        }
    }
    munmap(sps, sp_bytes);
}

/* The calling thread: its saved registers, its stack above `frame`, the
 * memory around its thread pointer. */
static void leak_scan_self(struct leak_scan *ls, const uintptr_t *regs, size_t nregs, uintptr_t frame)
{
    for (size_t i = 0; i < nregs; i++)
        if (regs[i] - ls->heap_lo < ls->heap_span)
            leak_ref(ls, regs[i]);
    leak_drain(ls);
    if (!leak_read_file(ls, "/proc/self/maps"))
        return;
    uintptr_t lo, hi, stack_hi = frame;
    if (leak_mapping_of(ls, frame, &lo, &hi)) {
        stack_hi = hi;
        leak_scan_root(ls, frame, hi);
    }
    uintptr_t tp = leak_thread_pointer();
    if (tp >= frame && tp < stack_hi)
        return;                  /* a thread's TLS: at its stack's top, done */
    if (vm_slice_of((void *)tp)) {
        leak_ref(ls, tp);        /* TLS in a heap block: that block is live */
        leak_drain(ls);
        return;
    }
    if (leak_mapping_of(ls, tp, &lo, &hi)) {
        if (lo < tp - LEAK_TLS_SPAN && tp > LEAK_TLS_SPAN)
            lo = tp - LEAK_TLS_SPAN;
        if (hi > tp + LEAK_TLS_SPAN)
            hi = tp + LEAK_TLS_SPAN;
        leak_scan_root(ls, lo, hi);
    }
}

/* ---- sweep and report ---- */

static void leak_comm(char *comm, size_t size)
{
    comm[0] = 0;
    int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, comm, size - 1);
    close(fd);
    if (n < 0)
        n = 0;
    comm[n] = 0;
    char *nl = strchr(comm, '\n');
    if (nl)
        *nl = 0;
}

struct leak_report {
    int fd;
    char comm[32];
    int pid;
    uint64_t jiffies;
    size_t leaks, leak_bytes, objects, object_bytes;
    struct leak_group groups[LEAK_MAX_GROUPS];
    size_t nr_groups;
    struct leak_group other;
};

static void leak_report_one(struct leak_report *r, const struct slab_cache *c, uintptr_t start, size_t len)
{
    r->leaks++;
    r->leak_bytes += len;
    /* With user tracking (debug=U) the object's allocation stack: its
     * site groups the summary, and the report shows the stack. */
    void *const *frames = NULL;
    uint64_t born = 0;
    int nframes = c ? slab_debug_alloc_stack(c, (void *)start, &frames, &born) : 0;
    void *site = nframes ? frames[0] : NULL;
    struct leak_group *g = NULL;
    for (size_t i = 0; i < r->nr_groups && !g; i++)
        if (r->groups[i].cache == c && r->groups[i].site == site)
            g = &r->groups[i];
    if (!g && r->nr_groups < LEAK_MAX_GROUPS) {
        g = &r->groups[r->nr_groups++];
        g->cache = c;
        g->site = site;
    }
    if (!g)
        g = &r->other;
    g->count++;
    g->bytes += len;
    if (r->fd < 0)
        return;
    os_printf(r->fd, "unreferenced object 0x%lx (size %zu):\n", (unsigned long)start, len);
    if (nframes)
        os_printf(r->fd, "  comm \"%s\", pid %d, jiffies %llu (age %.3fs)\n", r->comm, r->pid,
                  (unsigned long long)born, r->jiffies > born ? (double)(r->jiffies - born) / 1e3 : 0.0);
    else
        os_printf(r->fd, "  comm \"%s\", pid %d, jiffies %llu (age not recorded)\n", r->comm, r->pid,
                  (unsigned long long)r->jiffies);
    size_t n = len < 32 ? len : 32;
    os_printf(r->fd, "  hex dump (first %zu bytes):\n", n);
    const unsigned char *b = (const unsigned char *)start;
    for (size_t row = 0; row < n; row += 16) {
        char line[96];
        size_t k = 0, m = n - row < 16 ? n - row : 16;
        for (size_t i = 0; i < 16; i++) {
            static const char hex[] = "0123456789abcdef";
            if (i < m) {
                line[k++] = hex[b[row + i] >> 4];
                line[k++] = hex[b[row + i] & 15];
            } else {
                line[k++] = ' ';
                line[k++] = ' ';
            }
            line[k++] = ' ';
        }
        line[k++] = ' ';
        for (size_t i = 0; i < m; i++) {
            unsigned char ch = b[row + i];
            line[k++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '.';
        }
        line[k] = 0;
        os_printf(r->fd, "    %s\n", line);
    }
    if (!nframes) {
        os_printf(r->fd, "  backtrace: (not recorded: set debug=U)\n");
        return;
    }
    os_printf(r->fd, "  backtrace:\n");
    for (int i = 0; i < nframes && i < REPORT_PRINT_FRAMES; i++) {
        char name[320];
        report_format_site(name, sizeof name, frames[i]);
        os_printf(r->fd, "    [<%016lx>] %s\n", (unsigned long)(uintptr_t)frames[i], name);
    }
}

static bool leak_marked(struct leak_slice *sl, size_t bit)
{
    return bit < sl->nbits && (sl->bits[bit / 64] >> (bit % 64) & 1);
}

static void leak_sweep(struct leak_scan *ls, struct leak_report *r)
{
    for (size_t i = 0; i < ls->nr_slices; i++) {
        struct leak_slice *sl = &ls->slices[i];
        struct vm_slice *s = sl->s;
        if (s->kind == VM_SLICE_DIRECT) {
            struct sk_page *pg = (struct sk_page *)s->pages;
            if (!(pg_flags(pg) & PG_LARGE))
                continue;
            size_t len = pg->large.nr_pages << SK_PAGE_SHIFT;
            r->objects++;
            r->object_bytes += len;
            if (!leak_marked(sl, 0))
                leak_report_one(r, NULL, s->base, len);
            continue;
        }
        size_t npages = (sl->nbits << LEAK_GRANULE_SHIFT) >> SK_PAGE_SHIFT;
        struct sk_page *first = (struct sk_page *)s->pages;
        for (size_t p = 0; p < npages; p++) {
            struct sk_page *pg = first + p;
            uint32_t f = pg_flags(pg);
            if (!(f & PG_HEAD))
                continue;
            if (f & PG_SLAB) {
                struct slab_cache *c = pg->slab.cache;
                if (c->kofs)
                    for (unsigned k = 0; k < c->objects; k++) {
                        char *obj = pg->slab.s_mem + (size_t)k * c->size;
                        /* A fresh range's pages not initialised yet
                         * (slab.c) run to the slab's end. */
                        if (slab_page_fresh(pg + (((uintptr_t)obj - (uintptr_t)page_address(pg)) >> SK_PAGE_SHIFT)))
                            break;
                        if (slab_marked_free(c, obj))
                            continue;
                        r->objects++;
                        r->object_bytes += c->object_size;
                        if (!leak_marked(sl, ((uintptr_t)obj - s->base) >> LEAK_GRANULE_SHIFT))
                            leak_report_one(r, c, (uintptr_t)obj, c->object_size);
                    }
                p += ((size_t)1 << c->order) - 1;
            } else if (f & PG_LARGE) {
                size_t len = pg->large.nr_pages << SK_PAGE_SHIFT;
                r->objects++;
                r->object_bytes += len;
                if (!leak_marked(sl, (p << SK_PAGE_SHIFT) >> LEAK_GRANULE_SHIFT))
                    leak_report_one(r, NULL, (uintptr_t)page_address(pg), len);
                p += pg->large.nr_pages - 1;
            }
        }
    }
}

static void leak_unmap(struct leak_scan *ls)
{
    if (ls->slices)
        munmap(ls->slices, ls->slices_bytes);
    if (ls->bits)
        munmap(ls->bits, ls->bits_bytes);
    if (ls->work)
        munmap(ls->work, ls->work_cap * sizeof *ls->work);
    if (ls->maps)
        munmap(ls->maps, ls->maps_bytes);
}

static int leak_busy;

/*
 * The scan and the report (fd < 0: count only).  regs: the caller's
 * callee-saved registers; frame: the caller's stack above which its
 * stack is scanned.
 */
SK_NOINLINE static long leak_run(int fd, const uintptr_t *regs, size_t nregs, uintptr_t frame)
{
    if (!slab_ready()) {
        if (fd >= 0)
            os_printf(fd, "slabkit: leak_check: 0 unreferenced objects (no heap: nothing was allocated)\n");
        return 0;
    }
    int expect = 0;
    if (!__atomic_compare_exchange_n(&leak_busy, &expect, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        errno = EBUSY;
        return -1;
    }
    uint64_t t0 = os_now_ns();
    struct leak_scan ls;
    memset(&ls, 0, sizeof ls);
    long ret = -1;
    if (!leak_slices_build(&ls)) {
        if (fd >= 0)
            os_printf(fd, "slabkit: leak_check: no memory for the scan\n");
        goto out;
    }
    leak_mark_slab_metadata(&ls);
    leak_scan_self(&ls, regs, nregs, frame);
    dl_iterate_phdr(leak_phdr, &ls);
    leak_scan_threads(&ls);
    kfence_for_each_live(leak_scan_kfence, &ls);
    leak_drain(&ls);
    uint64_t t1 = os_now_ns();

    static struct leak_report r SK_BIG_BSS;     /* large: not on the scanned stack */
    memset(&r, 0, sizeof r);
    r.fd = fd;
    r.pid = getpid();
    r.jiffies = os_now_ns() / 1000000;
    leak_comm(r.comm, sizeof r.comm);
    leak_sweep(&ls, &r);
    if (fd >= 0) {
        size_t meta = ls.slices_bytes + ls.bits_bytes + ls.work_cap * sizeof *ls.work + ls.maps_bytes;
        os_printf(fd,
                  "slabkit: leak_check: %zu unreferenced object%s (%zu bytes) of %zu allocated (%zu bytes); "
                  "scanned %zu KiB of roots, %zu KiB of heap, %zu other thread%s stack%s (%zu not scanned) "
                  "in %.1f ms, %zu KiB of scan memory\n",
                  r.leaks, PLURAL(r.leaks), r.leak_bytes, r.objects, r.object_bytes, ls.root_bytes >> 10,
                  ls.heap_bytes >> 10, ls.threads_seen, ls.threads_seen == 1 ? "'s" : "s'", PLURAL(ls.threads_seen),
                  ls.threads_missed, (double)(t1 - t0) / 1e6, meta >> 10);
        if (ls.overflow)
            os_printf(fd, "slabkit: leak_check: the work list could not grow: some objects were not scanned, "
                          "and what only they reference is reported\n");
        for (size_t i = 0; i < r.nr_groups; i++) {
            char site[320] = "";
            if (r.groups[i].site) {
                site[0] = ' ';
                report_format_site(site + 1, sizeof site - 1, r.groups[i].site);
            }
            os_printf(fd, "  %-20s %8zu object%s %12zu bytes%s\n",
                      r.groups[i].cache ? r.groups[i].cache->name : "large blocks", r.groups[i].count,
                      r.groups[i].count == 1 ? " " : "s", r.groups[i].bytes, site);
        }
        if (r.other.count)
            os_printf(fd, "  %-20s %8zu object%s %12zu bytes\n", "other caches", r.other.count,
                      r.other.count == 1 ? " " : "s", r.other.bytes);
    }
    ret = (long)r.leaks;
out:
    leak_unmap(&ls);
    __atomic_store_n(&leak_busy, 0, __ATOMIC_RELEASE);
    return ret;
}

/* The caller's callee-saved registers, taken first thing, and its stack
 * from regs[] up: that takes in the registers this frame's prologue pushed
 * (their values at the call, should the compiler reuse one before the
 * asm), and none of the scan's own frames. */
#if defined(__x86_64__)
#define LEAK_NREGS 6
#define LEAK_SAVE_REGS(r)                                                        \
    __asm__ volatile("movq %%rbx, %0\n\tmovq %%rbp, %1\n\tmovq %%r12, %2\n\t"   \
                     "movq %%r13, %3\n\tmovq %%r14, %4\n\tmovq %%r15, %5"        \
                     : "=m"(r[0]), "=m"(r[1]), "=m"(r[2]), "=m"(r[3]), "=m"(r[4]), "=m"(r[5]))
#else
/* Elsewhere the prologue spills every callee-saved register into this
 * frame, above regs[], which the stack scan covers. */
#define LEAK_NREGS 1
#define LEAK_SAVE_REGS(r) __builtin_unwind_init()
#endif

SK_NOINLINE long slab_leak_check_fd(int fd)
{
    uintptr_t regs[LEAK_NREGS] = { 0 };
    LEAK_SAVE_REGS(regs);
    long r = leak_run(fd, regs, LEAK_NREGS, (uintptr_t)regs);
    __asm__ volatile("" ::: "memory");   /* no tail call: keep this frame */
    return r;
}

SK_API SK_NOINLINE long sk_leak_check(void)
{
    uintptr_t regs[LEAK_NREGS] = { 0 };
    LEAK_SAVE_REGS(regs);
    long r = leak_run(2, regs, LEAK_NREGS, (uintptr_t)regs);
    __asm__ volatile("" ::: "memory");
    return r;
}
