/*
 * swap.c — swap under a limit, and the layer's statistics.
 *
 * With shmem_limit_mb=N and swap_file=PATH, file pages beyond N MiB are
 * written to the swap file from the inactive tail (mm/vmscan.c's
 * shrink_inactive_list with shmem_writepage) and read back when accessed
 * (shmem_swapin).  The swap file is a flat array of 4 KiB slots; a swapped
 * page's tree slot holds SWAP_ENTRY(slot).
 *
 * Reclaim runs in the task that needs room, before it takes its file lock
 * (direct reclaim): it keeps the inactive list at least as long as the
 * active one by aging (inactive_file_is_low), isolates the inactive tail,
 * and writes the page out under its file's lock if only the file and
 * reclaim hold it; a busy page goes back to the list.
 *
 * Lock order: a file's lock, then swap_lock (an sk_mutex: slot numbers,
 * and the free-slot stack, which grows with page_alloc under it: the zone
 * locks come after; the I/O runs outside it, on positions no one else
 * owns).
 * Invariants (swap_lock): slots in use = next_slot - nfree; free_slots
 * holds nfree distinct slot numbers below next_slot.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "shmem/shmem.h"
#include "slabkit.h"

unsigned long shmem_resident;
extern unsigned long shmem_files;

static lock_t swap_lock = LOCK_INIT;
static int swap_fd = -1;
static bool swap_broken;              /* open failed: no swap from then on */
static uint64_t *free_slots;          /* a page block of 2^free_order pages */
static unsigned free_order;
static unsigned long nfree;
static uint64_t next_slot;
static unsigned long swapouts, swapins;
static bool warned_no_swap;

/* The limit in pages, 0 when there is none (or no swap file to honour it). */
static unsigned long limit_pages(void)
{
    if (!sk_opt.shmem_limit_mb)
        return 0;
    if (!sk_opt.swap_file[0]) {
        if (!__atomic_exchange_n(&warned_no_swap, true, __ATOMIC_RELAXED))
            os_warn("shmem_limit_mb=%ld without swap_file: no limit", sk_opt.shmem_limit_mb);
        return 0;
    }
    return (unsigned long)sk_opt.shmem_limit_mb << (20 - SK_PAGE_SHIFT);
}

/* ---- slots ---- */

static int64_t slot_alloc(void)
{
    lock_acquire(&swap_lock);
    if (swap_fd < 0 && !swap_broken) {
        /* First swap-out: open it now (once per process). */
        swap_fd = os_file_open_rw(sk_opt.swap_file);
        if (swap_fd < 0) {
            swap_broken = true;
            os_warn("swap_file %s: cannot open: %s: no swap", sk_opt.swap_file, strerror(errno));
        }
    }
    int64_t s = -1;
    if (swap_fd >= 0)
        s = nfree ? (int64_t)free_slots[--nfree] : (int64_t)next_slot++;
    lock_release(&swap_lock);
    return s;
}

void swap_free(uint64_t slot)
{
    lock_acquire(&swap_lock);
    size_t cap = free_slots ? (SK_PAGE_SIZE << free_order) / sizeof *free_slots : 0;
    if (nfree == cap) {
        /* Grow the free stack.  Out of memory: the slot is lost, which
         * only wastes swap space. */
        unsigned order = free_slots ? free_order + 1 : 0;
        struct sk_page *pg = order <= SK_MAX_ORDER ? page_alloc(order) : NULL;
        if (!pg) {
            lock_release(&swap_lock);
            return;
        }
        uint64_t *n = page_address(pg);
        if (free_slots) {
            memcpy(n, free_slots, nfree * sizeof *n);
            page_free(page_of(free_slots), free_order);
        }
        free_slots = n;
        free_order = order;
    }
    free_slots[nfree++] = slot;
    lock_release(&swap_lock);
}

int64_t swap_write(struct sk_page *pg)
{
    int64_t s = slot_alloc();
    if (s < 0)
        return -1;
    if (os_pwrite_all(swap_fd, page_address(pg), SK_PAGE_SIZE, (uint64_t)s << SK_PAGE_SHIFT) != 0) {
        swap_free((uint64_t)s);
        return -1;
    }
    __atomic_fetch_add(&swapouts, 1, __ATOMIC_RELAXED);
    return s;
}

int swap_read(uint64_t slot, struct sk_page *pg)
{
    if (os_pread_all(swap_fd, page_address(pg), SK_PAGE_SIZE, slot << SK_PAGE_SHIFT) != 0)
        return -1;
    swap_free(slot);
    __atomic_fetch_add(&swapins, 1, __ATOMIC_RELAXED);
    return 0;
}

/* ---- reclaim ---- */

/* Pages aged per step (the kernel's SWAP_CLUSTER_MAX). */
#define RECLAIM_CLUSTER 32

static bool inactive_low(int node)
{
    struct lruvec *v = &shmem_lru[node];
    lock_acquire(&v->lock);
    bool low = v->inactive.nr < v->active.nr;
    lock_release(&v->lock);
    return low;
}

/* Swap out inactive file pages of one LRU (`node`: its zone's id) while
 * more(need) says so, or until `most` are out; returns how many went out. */
static unsigned long swap_out_node(int node, bool (*more)(unsigned long), unsigned long need, unsigned long most)
{
    unsigned long busy = 0, out = 0;
    bool drained_all = false;
    while (out < most && more(need)) {
        if (inactive_low(node))
            lru_shrink_active(node, RECLAIM_CLUSTER);
        struct sk_page *pg = lru_isolate_inactive(node);
        if (!pg) {
            if (lru_shrink_active(node, RECLAIM_CLUSTER))
                continue;
            if (!drained_all) {        /* the other CPUs' batches */
                drained_all = true;
                lru_add_drain_all();
                continue;
            }
            break;                     /* nothing left to swap */
        }
        /* page_check_references for an unmapped swap-backed page: the
         * referenced bit is cleared and the page reclaimed anyway. */
        pg_flag_clear(pg, PG_REFERENCED);
        if (shmem_pageout(pg)) {
            shmem_put_page(pg);        /* the last reference: freed */
            out++;
            continue;
        }
        lru_putback(pg);
        shmem_put_page(pg);
        if (swap_broken || ++busy > 4 * RECLAIM_CLUSTER)
            break;                     /* busy pages or no swap: give up for now */
    }
    return out;
}

/* swap_out_node over every node's LRU (file pages come from the slab zone
 * of the writing CPU's node), this node's first. */
static unsigned long swap_out(bool (*more)(unsigned long), unsigned long need, unsigned long most)
{
    lru_add_drain();
    unsigned long out = 0;
    unsigned home = page_node_here();
    for (unsigned i = 0; i < page_nr_nodes && out < most && more(need); i++)
        out += swap_out_node(ZONE_ID((home + i) % page_nr_nodes, ZONE_NORMAL), more, need, most - out);
    return out;
}

static bool over_shmem_limit(unsigned long need)
{
    return __atomic_load_n(&shmem_resident, __ATOMIC_RELAXED) + need > limit_pages();
}

/* Under the memory budget (page_budget): `need` more pages would leave
 * the headroom below low, and file pages are resident to swap. */
static bool budget_short(unsigned long need)
{
    return __atomic_load_n(&shmem_resident, __ATOMIC_RELAXED) && page_budget_below(PAGE_WMARK_LOW, need);
}

/* A swap file to write to under the budget (shmem_limit_mb's own case
 * warns in limit_pages). */
static bool budget_swap(void)
{
    return sk_opt.swap_file[0] && !swap_broken && page_budget_on();
}

void shmem_reclaim(unsigned long need)
{
    unsigned long limit = limit_pages();
    if (limit && over_shmem_limit(need))
        swap_out(over_shmem_limit, need, ~0ul);
    /* Direct reclaim of file pages under the budget: before this task
     * takes its file lock, as for the limit above. */
    if (unlikely(budget_swap()) && budget_short(need))
        swap_out(budget_short, need, ~0ul);
}

/* The budget's shrinker (page_register_shrinker): the purger's kswapd
 * pass swaps out up to nr file pages while the headroom is below low. */
static unsigned long shmem_shrink(unsigned long nr)
{
    if (!budget_swap() || !nr)
        return 0;
    return swap_out(budget_short, 0, nr);
}

void shmem_swap_init(void)
{
    page_register_shrinker(shmem_shrink);
}

/* ---- statistics ---- */

void shmem_stats(struct shmem_stats *st)
{
    memset(st, 0, sizeof *st);
    for (int n = 0; n < PAGE_NR_ZONES; n++) {
        struct lruvec *v = &shmem_lru[n];
        lock_acquire(&v->lock);
        st->active[n] = v->active.nr;
        st->inactive[n] = v->inactive.nr;
        st->added += v->added;
        st->activated += v->activated;
        st->deactivated += v->deactivated;
        st->isolated += v->isolated;
        st->putback += v->putback;
        lock_release(&v->lock);
    }
    st->batched = lru_batched();
    st->resident = __atomic_load_n(&shmem_resident, __ATOMIC_RELAXED);
    lock_acquire(&swap_lock);
    st->swapped = (unsigned long)next_slot - nfree;
    lock_release(&swap_lock);
    st->files = __atomic_load_n(&shmem_files, __ATOMIC_RELAXED);
    st->swapouts = __atomic_load_n(&swapouts, __ATOMIC_RELAXED);
    st->swapins = __atomic_load_n(&swapins, __ATOMIC_RELAXED);
}

void sk_file_stats(FILE *out)
{
    struct shmem_stats st;
    shmem_stats(&st);
    unsigned long kb = SK_PAGE_SIZE >> 10;
    fprintf(out, "Files:          %8lu\n", st.files);
    fprintf(out, "Shmem:          %8lu kB\n", st.resident * kb);
    for (int n = 0; n < PAGE_NR_ZONES; n++) {
        if (!st.active[n] && !st.inactive[n] && n)
            continue;
        fprintf(out, "Node %d Active(file):   %8lu kB\n", n, st.active[n] * kb);
        fprintf(out, "Node %d Inactive(file): %8lu kB\n", n, st.inactive[n] * kb);
    }
    fprintf(out, "Batched(lru_add):%7lu kB\n", st.batched * kb);
    fprintf(out, "SwapUsed:       %8lu kB\n", st.swapped * kb);
    fprintf(out, "pgactivate %lu\npgdeactivate %lu\npglru_add %lu\npgisolated %lu\npgputback %lu\n"
                 "pswpout %lu\npswpin %lu\n",
            st.activated, st.deactivated, st.added, st.isolated, st.putback, st.swapouts, st.swapins);
}
