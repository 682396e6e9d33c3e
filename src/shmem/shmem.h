/*
 * shmem.h — in-memory files (sk_file, the tmpfs analogue), the LRU their
 * pages live on, and swap under a limit.  The layer sits on src/page: its
 * pages are order-0 buddy blocks, and its index nodes are pages too.
 *
 *   file.c  sk_file_*: a radix tree per file (index -> page or swap entry),
 *           the file lock, page references, the write/read/truncate paths
 *   lru.c   per-node active and inactive lists, per-CPU add batches (the
 *           kernel's pagevecs), mark_page_accessed, aging
 *   swap.c  the swap file's slots, reclaim from the inactive tail under
 *           shmem_limit_mb, and the statistics
 *
 * A file page's descriptor (struct sk_page, PG_FILE) carries its flags and
 * its reference count, as the kernel's struct page does: the file holds one
 * reference while the page is in its tree, a per-CPU batch one while the
 * page waits there, a reader one while it copies, reclaim one while the
 * page is isolated.  The last reference frees the page.
 *
 * Seed 001's series (page.h, page_patch_before): by default a page that no
 * other thread can reach yet, or can reach no longer, has its flags set
 * with plain stores; with a patch's before (page_microopt=0: all), as
 * before the series, with atomic read-modify-writes, and a write marks
 * every page accessed after the copy, new pages included.  docs/shmem.md
 * has the table, patch by patch.
 */
#ifndef SK_SHMEM_H
#define SK_SHMEM_H

#include <stdbool.h>
#include <stdint.h>

#include "page/page.h"

/* ---- page flags: atomic (the page is visible) and plain (it is not) ---- */

/* tests/shmem/locked_ops builds this layer a second time with
 * SK_SHMEM_COUNT_LOCKED, to count the locked flag updates each
 * page_microopt setting makes; the library itself never counts. */
#ifdef SK_SHMEM_COUNT_LOCKED
extern __thread unsigned long shmem_locked_flag_ops;
#define shmem_count_locked() (shmem_locked_flag_ops++)
#else
#define shmem_count_locked() ((void)0)
#endif

static inline void pg_flag_set(struct sk_page *pg, uint32_t f)
{
    shmem_count_locked();
    __atomic_fetch_or(&pg->flags, f, __ATOMIC_RELAXED);    /* lock or */
}
static inline void pg_flag_clear(struct sk_page *pg, uint32_t f)
{
    shmem_count_locked();
    __atomic_fetch_and(&pg->flags, ~f, __ATOMIC_RELAXED);  /* lock and */
}
/* Plain read-modify-write (the kernel's __SetPageX): two movs and an or,
 * no lock prefix; only for a page no other thread can see.  Relaxed
 * accesses so that the tools see no race where there is none. */
static inline void pg_flag_set_plain(struct sk_page *pg, uint32_t f)
{
    __atomic_store_n(&pg->flags, __atomic_load_n(&pg->flags, __ATOMIC_RELAXED) | f, __ATOMIC_RELAXED);
}
static inline void pg_flag_clear_plain(struct sk_page *pg, uint32_t f)
{
    __atomic_store_n(&pg->flags, __atomic_load_n(&pg->flags, __ATOMIC_RELAXED) & ~f, __ATOMIC_RELAXED);
}


/* ---- references (file.c) ---- */

static inline void shmem_get_page(struct sk_page *pg)
{
    __atomic_fetch_add(&pg->file.refcount, 1, __ATOMIC_RELAXED);
}
/* The last put takes the page off its LRU list and frees it. */
void shmem_release_page(struct sk_page *pg);
static inline void shmem_put_page(struct sk_page *pg)
{
    if (__atomic_sub_fetch(&pg->file.refcount, 1, __ATOMIC_ACQ_REL) == 0)
        shmem_release_page(pg);
}

/* 0, or -1 with errno (page_init failed, or the batches could not be
 * mapped); idempotent. */
int shmem_init(void);

/* Tests: the page at `index` of f (NULL: hole or swapped), no reference
 * taken; the caller makes sure no one truncates f meanwhile. */
struct sk_page *shmem_find_page(struct sk_file *f, uint64_t index);

/* ---- the LRU (lru.c) ---- */

struct lru_list {
    struct sk_page *head, *tail;       /* head: newest; tail: next to age */
    unsigned long nr;
};

/* One per node, as the kernel's per-zone lruvec in 2014. */
struct lruvec {
    lock_t lock;                       /* the lists and PG_LRU changes */
    struct lru_list active, inactive;  /* PG_ACTIVE set on exactly the
                                        * pages of `active` */
    /* Events (under lock): pages added from batches, promoted by
     * mark_page_accessed, demoted by aging, isolated by reclaim, put back. */
    unsigned long added, activated, deactivated, isolated, putback;
};
extern struct lruvec shmem_lru[PAGE_NR_ZONES] SK_INTERNAL;

/* Pages per per-CPU batch (the kernel's PAGEVEC_SIZE of 2014). */
#define LRU_BATCH 14

int lru_init(void);
/* A new page to the LRU through this CPU's batch; takes a reference for
 * the batch.  PG_ACTIVE chooses the list it lands on. */
void lru_cache_add(struct sk_page *pg);
/* Move this CPU's batch (all CPUs': lru_add_drain_all) to the lists. */
void lru_add_drain(void);
void lru_add_drain_all(void);
/* Pages now waiting in per-CPU batches (a snapshot). */
unsigned long lru_batched(void);
/* inactive,unreferenced -> inactive,referenced -> active,unreferenced. */
void mark_page_accessed(struct sk_page *pg);
/* The first access of a page no one else sees yet (series: plain store). */
void init_page_accessed(struct sk_page *pg);
/* A page whose last reference is gone: off its list, if on one. */
void lru_del_released(struct sk_page *pg);
/* Aging: demote up to nr pages from the active tail to the inactive head.
 * Returns pages demoted. */
unsigned long lru_shrink_active(int node, unsigned long nr);
/* Reclaim's pick: the inactive tail, off the list with a reference taken
 * (NULL when the list is empty). */
struct sk_page *lru_isolate_inactive(int node);
/* An isolated page goes back (to the list its PG_ACTIVE says). */
void lru_putback(struct sk_page *pg);

/* ---- swap and reclaim (swap.c) ---- */

/* A tree slot holds a page pointer (64-byte aligned: low bit 0), a swap
 * entry (slot << 1 | 1), or 0 (a hole). */
#define SWAP_ENTRY(slot) (((uintptr_t)(slot) << 1) | 1)
#define IS_SWAP_ENTRY(e) ((e) & 1)
#define SWAP_SLOT(e) ((uint64_t)(e) >> 1)

/* Resident file pages (in a file's tree, not swapped), all files. */
extern unsigned long shmem_resident SK_INTERNAL;

/* Make room for `need` more resident pages under shmem_limit_mb, and
 * under the memory budget when it is short (page_budget_below): swap out
 * from the inactive tails.  Called with no file lock held. */
void shmem_reclaim(unsigned long need);
/* Register the budget's file-page shrinker (shmem_init). */
void shmem_swap_init(void);
/* Write page pg to a new slot: the slot, or -1 (no swap, or an I/O error). */
int64_t swap_write(struct sk_page *pg);
/* Read slot into pg and free the slot: 0, or -1 with errno. */
int swap_read(uint64_t slot, struct sk_page *pg);
void swap_free(uint64_t slot);

/* Per-file reclaim hook (file.c): with f's lock taken, swap out isolated
 * page pg if only the file and the caller hold it.  Returns whether it
 * was swapped out (the caller then drops its reference: the last). */
bool shmem_pageout(struct sk_page *pg);

struct shmem_stats {
    unsigned long active[PAGE_NR_ZONES], inactive[PAGE_NR_ZONES];
    unsigned long batched;             /* in per-CPU batches */
    unsigned long resident, swapped;   /* file pages in memory / in swap */
    unsigned long files;
    unsigned long added, activated, deactivated, isolated, putback;
    unsigned long swapouts, swapins;
};
void shmem_stats(struct shmem_stats *st);

#endif
