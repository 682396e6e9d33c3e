/*
 * file.c — sk_file: in-memory files whose pages come from the buddy
 * allocator (the tmpfs analogue: mm/shmem.c and mm/filemap.c).
 *
 * A file is a radix tree of 4 KiB index nodes (512 slots each, one page
 * from page_alloc) mapping a page index to a page descriptor, a swap entry
 * or nothing (a hole, read as zeros), and its size.
 *
 * Lock order: file->lock (an sk_mutex: the tree, the size, every slot;
 * writers hold it across their copy, as the kernel's i_mutex), then the
 * lru locks (lru.c), then the zone locks (page_alloc/page_free).  Reclaim
 * takes a victim's file lock holding nothing else, so pread/pwrite make
 * room (shmem_reclaim) before they take their own.  swap_lock (swap.c) is
 * a leaf, taken under a file lock around a slot's allocation.
 *
 * Invariants (file->lock held):
 *  - a page in slot i has PG_FILE, file.mapping == this file, file.index
 *    == i, and one reference for the slot; taken out of the tree it gets
 *    mapping NULL and that reference is dropped;
 *  - a reader takes its reference under the lock and copies after the
 *    unlock; reclaim swaps a page out only when the slot's reference and
 *    its own are the only ones (no copy can be in flight);
 *  - bytes of the last page past `size` are zero (truncate zeroes them,
 *    a new page is zeroed where the write does not cover it), so growing
 *    the file by a write or a truncate exposes zeros.
 * Files are type-stable: a destroyed file goes on a free list and is
 * reused, never unmapped, so reclaim may lock the file of a page it
 * isolated and then check that the page is still that file's.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "shmem/shmem.h"
#include "slabkit.h"

#define NODE_SHIFT 9
#define NODE_SLOTS (1u << NODE_SHIFT)
#define MAX_HEIGHT 5                  /* 2^45 pages: more than off_t needs */

struct sk_file {
    lock_t lock;
    uint64_t size;                    /* bytes */
    uintptr_t *root;                  /* a node; NULL: empty tree */
    unsigned height;                  /* levels: covers NODE_SLOTS^height pages */
    unsigned long nr_pages, nr_swapped;
    struct sk_file *next_free;        /* on file_pool (destroyed) */
    char name[64];
};

unsigned long shmem_files;
static struct sk_file *file_pool;     /* destroyed files, for reuse (pool_lock) */
static spinlock_t pool_lock = SPINLOCK_INIT;
static bool shmem_ready;
static spinlock_t init_lock = SPINLOCK_INIT;

int shmem_init(void)
{
    if (likely(__atomic_load_n(&shmem_ready, __ATOMIC_ACQUIRE)))
        return 0;
    int r = 0;
    spin_lock(&init_lock);
    if (!shmem_ready) {
        r = page_init();
        if (r == 0)
            r = lru_init();
        if (r == 0) {
            shmem_swap_init();
            __atomic_store_n(&shmem_ready, true, __ATOMIC_RELEASE);
        }
    }
    spin_unlock(&init_lock);
    return r;
}

/* ---- pages ---- */

void shmem_release_page(struct sk_page *pg)
{
    SK_ASSERT(pg->file.refcount == 0 && pg->file.mapping == NULL);
    lru_del_released(pg);
    pg_set_flags(pg, PG_HEAD);        /* no one else can see it now */
    page_file_account(pg, -1);
    page_free(pg, 0);
}

static void *zeroed_page(struct sk_page **out)
{
    struct sk_page *pg = page_alloc(0);
    if (!pg)
        return NULL;
    void *p = page_address(pg);
    if (!(pg_flags(pg) & PG_ZEROED))
        memset(p, 0, SK_PAGE_SIZE);
    *out = pg;
    return p;
}

/* A new page for slot `index` of f (shmem_getpage_gfp's allocation).  Its
 * content is zero where [from, to) will not cover it.  Not yet in the
 * tree: flags may be plain stores (the series), or atomic (before).
 * `write`: a write allocates it, and the series marks it accessed now
 * (FGP_ACCESSED); a swap-in page is marked by the access that wanted it. */
static struct sk_page *file_new_page(struct sk_file *f, uint64_t index, size_t from, size_t to, bool write)
{
    /* Movable, as the kernel's page cache pages are (GFP_HIGHUSER_MOVABLE):
     * they keep to pageblocks of their own, away from slabs.  A write's
     * page is __GFP_WRITE: the zonelist passes by a node over its dirty
     * limit (node.c, zone_dirty_ok). */
    unsigned ctx = write ? page_ctx_enter(page_alloc_ctx | PAGE_ALLOC_WRITE) : 0;
    struct sk_page *pg = page_alloc_mt(0, MIGRATE_MOVABLE);
    if (write)
        page_ctx_exit(ctx);
    if (!pg)
        return NULL;
    page_file_account(pg, 1);
    if (!(pg_flags(pg) & PG_ZEROED) && (from > 0 || to < SK_PAGE_SIZE)) {
        char *p = page_address(pg);
        memset(p, 0, from);
        memset(p + to, 0, SK_PAGE_SIZE - to);
    }
    pg->file.mapping = f;
    pg->file.index = index;
    pg->file.next = pg->file.prev = NULL;
    __atomic_store_n(&pg->file.refcount, 1, __ATOMIC_RELAXED);   /* the file's */
    pg_set_flags(pg, PG_HEAD | PG_FILE);
    if (!page_patch_before(PATCH_SHMEM_GETPAGE))
        pg_flag_set_plain(pg, PG_SWAPBACKED);    /* __SetPageSwapBacked */
    else
        pg_flag_set(pg, PG_SWAPBACKED);          /* SetPageSwapBacked */
    if (write && !page_patch_before(PATCH_ACCESSED))
        init_page_accessed(pg);                  /* FGP_ACCESSED at allocation */
    return pg;
}

/* ---- the tree ---- */

static uint64_t tree_capacity(unsigned height)
{
    return height ? (uint64_t)1 << (NODE_SHIFT * height) : 0;
}

/* The slot for `index`, growing the tree when `create`; NULL when absent
 * (no create) or out of memory (errno ENOMEM). */
static uintptr_t *tree_slot(struct sk_file *f, uint64_t index, bool create)
{
    if (index >= tree_capacity(f->height)) {
        if (!create)
            return NULL;
        while (index >= tree_capacity(f->height)) {
            if (f->height == MAX_HEIGHT) {
                errno = EFBIG;
                return NULL;
            }
            struct sk_page *npg;
            uintptr_t *node = zeroed_page(&npg);
            if (!node) {
                errno = ENOMEM;
                return NULL;
            }
            node[0] = (uintptr_t)f->root;   /* the old tree is the first child */
            f->root = node;
            f->height++;
        }
    }
    uintptr_t *node = f->root;
    SK_ASSERT(node && f->height > 0);
    for (unsigned level = f->height - 1; level > 0; level--) {
        uintptr_t *slot = &node[(index >> (NODE_SHIFT * level)) & (NODE_SLOTS - 1)];
        if (!*slot) {
            if (!create)
                return NULL;
            struct sk_page *npg;
            uintptr_t *child = zeroed_page(&npg);
            if (!child) {
                errno = ENOMEM;
                return NULL;
            }
            *slot = (uintptr_t)child;
        }
        node = (uintptr_t *)*slot;
    }
    return &node[index & (NODE_SLOTS - 1)];
}

/* mapping changes under the file lock, but reclaim reads it without
 * (to find which file's lock to take): atomic, relaxed. */
static inline void page_set_mapping(struct sk_page *pg, struct sk_file *f)
{
    __atomic_store_n((struct sk_file **)&pg->file.mapping, f, __ATOMIC_RELAXED);
}

/* Drop what one leaf slot holds (truncate). */
static void slot_clear(struct sk_file *f, uintptr_t *slot)
{
    uintptr_t e = *slot;
    if (!e)
        return;
    *slot = 0;
    if (IS_SWAP_ENTRY(e)) {
        swap_free(SWAP_SLOT(e));
        f->nr_swapped--;
        return;
    }
    struct sk_page *pg = (struct sk_page *)e;
    page_set_mapping(pg, NULL);
    f->nr_pages--;
    __atomic_fetch_sub(&shmem_resident, 1, __ATOMIC_RELAXED);
    shmem_put_page(pg);
}

/* Clear every slot at index >= from under node (covering `level` levels
 * below it, base index `base`); free nodes that end up wholly cleared.
 * Returns whether node is now empty. */
static bool tree_trim(struct sk_file *f, uintptr_t *node, unsigned level, uint64_t base, uint64_t from)
{
    uint64_t span = (uint64_t)1 << (NODE_SHIFT * level);
    bool empty = true;
    for (unsigned i = 0; i < NODE_SLOTS; i++) {
        uint64_t lo = base + i * span;
        if (!node[i])
            continue;
        if (lo + span <= from) {
            empty = false;
            continue;
        }
        if (level == 0) {
            slot_clear(f, &node[i]);
        } else if (tree_trim(f, (uintptr_t *)node[i], level - 1, lo, from)) {
            page_free(page_of((void *)node[i]), 0);
            node[i] = 0;
        } else {
            empty = false;
        }
    }
    return empty;
}

static void tree_truncate(struct sk_file *f, uint64_t from_index)
{
    if (!f->root)
        return;
    if (tree_trim(f, f->root, f->height - 1, 0, from_index)) {
        page_free(page_of(f->root), 0);
        f->root = NULL;
        f->height = 0;
    }
}

/* ---- swap-in (file lock held) ---- */

/* The page for an entry found in a slot: swap it in if it is swapped. */
static struct sk_page *slot_page(struct sk_file *f, uintptr_t *slot, uint64_t index)
{
    uintptr_t e = *slot;
    if (!IS_SWAP_ENTRY(e)) {
        /* The series' last patch: the descriptor's flags, which the
         * caller reads next (mark_page_accessed), fetched while the tree
         * walk's result comes back. */
        if (!page_patch_before(PATCH_PREFETCH_FLAGS))
            __builtin_prefetch(&((struct sk_page *)e)->flags, 1);
        return (struct sk_page *)e;
    }
    struct sk_page *pg = file_new_page(f, index, 0, SK_PAGE_SIZE, false);
    if (!pg)
        return NULL;
    if (swap_read(SWAP_SLOT(e), pg) != 0) {
        pg_set_flags(pg, PG_HEAD);
        page_file_account(pg, -1);
        page_free(pg, 0);
        return NULL;
    }
    *slot = (uintptr_t)pg;
    f->nr_swapped--;
    f->nr_pages++;
    __atomic_fetch_add(&shmem_resident, 1, __ATOMIC_RELAXED);
    lru_cache_add(pg);
    return pg;
}

/* ---- reclaim's hook ---- */

bool shmem_pageout(struct sk_page *pg)
{
    struct sk_file *f = __atomic_load_n((struct sk_file **)&pg->file.mapping, __ATOMIC_RELAXED);
    if (!f)
        return false;                  /* truncated meanwhile */
    lock_acquire(&f->lock);
    bool out = false;
    uintptr_t *slot;
    if (pg->file.mapping == f && __atomic_load_n(&pg->file.refcount, __ATOMIC_ACQUIRE) == 2 &&
        (slot = tree_slot(f, pg->file.index, false)) && *slot == (uintptr_t)pg) {
        int64_t s = swap_write(pg);
        if (s >= 0) {
            *slot = SWAP_ENTRY(s);
            page_set_mapping(pg, NULL);
            f->nr_pages--;
            f->nr_swapped++;
            __atomic_fetch_sub(&shmem_resident, 1, __ATOMIC_RELAXED);
            shmem_put_page(pg);        /* the slot's reference */
            out = true;
        }
    }
    lock_release(&f->lock);
    return out;
}

struct sk_page *shmem_find_page(struct sk_file *f, uint64_t index)
{
    lock_acquire(&f->lock);
    uintptr_t *slot = tree_slot(f, index, false);
    uintptr_t e = slot ? *slot : 0;
    lock_release(&f->lock);
    return e && !IS_SWAP_ENTRY(e) ? (struct sk_page *)e : NULL;
}

/* ---- the API ---- */

static sk_file_t *file_create(const char *name)
{
    if (shmem_init() != 0)
        return NULL;
    spin_lock(&pool_lock);
    struct sk_file *f = file_pool;
    if (f)
        file_pool = f->next_free;
    spin_unlock(&pool_lock);
    if (!f) {
        struct sk_page *pg;
        f = zeroed_page(&pg);          /* a page per file: few files, simple */
        if (!f) {
            errno = ENOMEM;
            return NULL;
        }
        lock_reset(&f->lock);
    }
    lock_acquire(&f->lock);
    f->size = 0;
    f->root = NULL;
    f->height = 0;
    f->nr_pages = f->nr_swapped = 0;
    f->next_free = NULL;
    snprintf(f->name, sizeof f->name, "%s", name ? name : "");
    lock_release(&f->lock);
    __atomic_fetch_add(&shmem_files, 1, __ATOMIC_RELAXED);
    return f;
}

/* errno is the caller's again when the file is made (os_errno_restore). */
sk_file_t *sk_file_create(const char *name)
{
    int saved = errno;
    return os_errno_restore(file_create(name), saved);
}

void sk_file_destroy(sk_file_t *f)
{
    if (!f)
        return;
    lock_acquire(&f->lock);
    tree_truncate(f, 0);
    f->size = 0;
    lock_release(&f->lock);
    __atomic_fetch_sub(&shmem_files, 1, __ATOMIC_RELAXED);
    spin_lock(&pool_lock);
    f->next_free = file_pool;
    file_pool = f;
    spin_unlock(&pool_lock);
}

off_t sk_file_size(sk_file_t *f)
{
    lock_acquire(&f->lock);
    off_t s = (off_t)f->size;
    lock_release(&f->lock);
    return s;
}

/* Pages one locked round of pread/pwrite covers (1 MiB): it bounds both
 * the lock's hold time and how far reclaim must look ahead. */
#define CHUNK_PAGES 256

static bool bad_range(size_t len, off_t off)
{
    if (off < 0 || (uint64_t)off + len < (uint64_t)off || (uint64_t)off + len > ((uint64_t)1 << 56)) {
        errno = off < 0 ? EINVAL : EFBIG;
        return true;
    }
    return false;
}

static ssize_t file_pwrite(sk_file_t *f, const void *buf, size_t len, off_t off)
{
    if (bad_range(len, off))
        return -1;
    if (len > SSIZE_MAX)
        len = SSIZE_MAX;
    const char *src = buf;
    uint64_t pos = (uint64_t)off, end = pos + len;
    while (pos < end) {
        uint64_t chunk_end = (pos & ~(uint64_t)(SK_PAGE_SIZE - 1)) + (uint64_t)CHUNK_PAGES * SK_PAGE_SIZE;
        if (chunk_end > end)
            chunk_end = end;
        shmem_reclaim(((chunk_end - 1) >> SK_PAGE_SHIFT) - (pos >> SK_PAGE_SHIFT) + 1);
        lock_acquire(&f->lock);
        while (pos < chunk_end) {
            uint64_t index = pos >> SK_PAGE_SHIFT;
            size_t from = pos & (SK_PAGE_SIZE - 1);
            size_t to = chunk_end - (index << SK_PAGE_SHIFT) < SK_PAGE_SIZE
                            ? (size_t)(chunk_end - (index << SK_PAGE_SHIFT)) : SK_PAGE_SIZE;
            uintptr_t *slot = tree_slot(f, index, true);
            struct sk_page *pg = NULL;
            if (slot && *slot) {
                pg = slot_page(f, slot, index);
                if (pg && !page_patch_before(PATCH_ACCESSED))
                    mark_page_accessed(pg);     /* found: FGP_ACCESSED */
            } else if (slot) {
                pg = file_new_page(f, index, from, to, true);
                if (pg) {
                    *slot = (uintptr_t)pg;
                    f->nr_pages++;
                    __atomic_fetch_add(&shmem_resident, 1, __ATOMIC_RELAXED);
                    lru_cache_add(pg);
                }
            }
            if (!pg) {
                lock_release(&f->lock);
                if (pos > (uint64_t)off)
                    return (ssize_t)(pos - (uint64_t)off);
                errno = errno == EFBIG ? EFBIG : ENOMEM;
                return -1;
            }
            memcpy((char *)page_address(pg) + from, src, to - from);
            if (page_patch_before(PATCH_ACCESSED))
                mark_page_accessed(pg);         /* generic_perform_write, 2014 */
            src += to - from;
            pos += to - from;
            if (pos > f->size)
                f->size = pos;
        }
        lock_release(&f->lock);
    }
    return (ssize_t)len;
}

/* errno is the caller's again when the write succeeds. */
ssize_t sk_file_pwrite(sk_file_t *f, const void *buf, size_t len, off_t off)
{
    int saved = errno;
    ssize_t n = file_pwrite(f, buf, len, off);
    if (n >= 0)
        errno = saved;
    return n;
}

ssize_t sk_file_pread(sk_file_t *f, void *buf, size_t len, off_t off)
{
    if (bad_range(len, off))
        return -1;
    if (len > SSIZE_MAX)
        len = SSIZE_MAX;
    char *dst = buf;
    uint64_t pos = (uint64_t)off, end = pos + len;
    lock_acquire(&f->lock);
    if (end > f->size)
        end = f->size > pos ? f->size : pos;
    lock_release(&f->lock);
    while (pos < end) {
        uint64_t index = pos >> SK_PAGE_SHIFT;
        size_t from = pos & (SK_PAGE_SIZE - 1);
        size_t n = SK_PAGE_SIZE - from;
        if (n > end - pos)
            n = (size_t)(end - pos);
        shmem_reclaim(1);
        lock_acquire(&f->lock);
        uintptr_t *slot = tree_slot(f, index, false);
        struct sk_page *pg = NULL;
        if (slot && *slot) {
            pg = slot_page(f, slot, index);
            if (!pg) {
                lock_release(&f->lock);
                if (pos > (uint64_t)off)
                    break;
                return -1;
            }
            shmem_get_page(pg);
            mark_page_accessed(pg);
        }
        lock_release(&f->lock);
        if (pg) {
            memcpy(dst, (char *)page_address(pg) + from, n);
            shmem_put_page(pg);
        } else {
            memset(dst, 0, n);                  /* a hole */
        }
        dst += n;
        pos += n;
    }
    return (ssize_t)(pos - (uint64_t)off);
}

int sk_file_truncate(sk_file_t *f, off_t size)
{
    if (size < 0 || (uint64_t)size > ((uint64_t)1 << 56)) {
        errno = size < 0 ? EINVAL : EFBIG;
        return -1;
    }
    uint64_t s = (uint64_t)size;
    lock_acquire(&f->lock);
    if (s < f->size) {
        uint64_t keep = (s + SK_PAGE_SIZE - 1) >> SK_PAGE_SHIFT;
        tree_truncate(f, keep);
        size_t part = s & (SK_PAGE_SIZE - 1);
        if (part) {                             /* the new last page's tail */
            uintptr_t *slot = tree_slot(f, s >> SK_PAGE_SHIFT, false);
            struct sk_page *pg = slot && *slot ? slot_page(f, slot, s >> SK_PAGE_SHIFT) : NULL;
            if (slot && *slot && !pg) {
                lock_release(&f->lock);
                return -1;
            }
            if (pg)
                memset((char *)page_address(pg) + part, 0, SK_PAGE_SIZE - part);
        }
    }
    f->size = s;
    lock_release(&f->lock);
    return 0;
}
