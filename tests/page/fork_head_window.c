/*
 * fork_head_window — a fork that catches a thread between taking an exact
 * block off its zone and finishing its head, while another thread holds
 * the zone lock (so the child rebuilds the zone's free lists from the
 * descriptors, src/page/fork.c).
 *
 * In that window (zone_took drops the lock, then writes the head; then
 * alloc_exact adds PG_LARGE) the head says PG_HEAD without PG_LARGE, and
 * its order is the block's rounded-up order or an older one, not its
 * extent.  The rebuild used to step over 2^order pages from such a head,
 * over the free blocks of the exact block's tail: they kept PG_BUDDY and
 * were on no list, and the child's next run placement took them and
 * unlinked them through stale links into live descriptors
 * (tests/malloc/fork_stdio_race's rare crash: a getline buffer whose
 * nr_pages held a descriptor pointer).
 *
 * Here the window is made by hand: an 11-page exact block (a 16-page
 * buddy block with its 5-page tail freed) gets the head the window
 * shows, and this thread holds the zone lock at the fork.  In the child
 * every descriptor that says PG_BUDDY must be on its zone's lists, and
 * exact blocks of the same size must come and go cleanly.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "page/page_internal.h"
#include "tap.h"

#define NR 11       /* pages: a 16-page block, tail of 5 (blocks of 1 and 4) */

static char *freed[1024];
static unsigned nfreed;

static void collect(void *addr, unsigned order, bool clean, void *arg)
{
    (void)order, (void)clean, (void)arg;
    if (nfreed < sizeof freed / sizeof freed[0])
        freed[nfreed++] = addr;
}

/* PG_BUDDY heads of the slice around p that page_for_each_free does not
 * list (the free blocks on no list). */
static int ghosts(struct sk_page *first)
{
    nfreed = 0;
    page_for_each_free(collect, NULL);
    int n = 0;
    for (size_t idx = 0; idx < SLICE_PAGES; idx++) {
        struct sk_page *pg = first + idx;
        if (!(pg_flags(pg) & PG_BUDDY))
            continue;
        char *addr = page_address(pg);
        bool listed = false;
        for (unsigned i = 0; i < nfreed && !listed; i++)
            listed = freed[i] == addr;
        if (!listed)
            n++;
    }
    return n;
}

int main(void)
{
    void *volatile p = malloc(64);   /* slabkit's malloc linked in: its fork handlers */
    free(p);
    if (page_init() != 0)
        BAIL("page_init failed");
    struct sk_page *pg = page_alloc_exact(NR, 0);
    if (!pg)
        BAIL("page_alloc_exact(%d) failed", NR);
    struct sk_page *first = page_first(pg);
    size_t idx = (size_t)(pg - first);
    int tail = 0;
    for (size_t i = idx + NR; i < idx + 16 && i < SLICE_PAGES; i++)
        tail += (pg_flags(first + i) & PG_BUDDY) != 0;
    ok(tail > 0, "the exact block's tail went back as free blocks (%d heads after page %zu)", tail, idx);
    is(ghosts(first), 0, "before the fork, every free head is on a list");

    /* The window: the head as zone_took leaves it, before PG_LARGE. */
    struct zone *z = &page_zones[pg->node];
    uint32_t saved_flags = pg_flags(pg);
    uint8_t saved_order = pg->order;
    pg_set_flags(pg, PG_HEAD);
    pg->order = 4;
    lock_acquire(&z->lock);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        BAIL("fork failed");
    if (pid == 0) {
        alarm(20);   /* a corrupted list can loop for ever */
        int bad = ghosts(first) != 0;
        /* The caught block is the dead thread's: leaked.  Exact blocks of
         * its size, and a run over the tail, must come and go. */
        for (int round = 0; round < 50; round++) {
            struct sk_page *a = page_alloc_exact(NR, 0), *b = page_alloc_exact(5, 0);
            if (!a || !b)
                bad |= 2;
            if (a)
                page_free_exact(a);
            if (b)
                page_free_exact(b);
        }
        page_drain_pcp();
        bad |= ghosts(first) != 0 ? 4 : 0;
        _exit(bad);
    }
    lock_release(&z->lock);
    pg->order = saved_order;
    pg_set_flags(pg, saved_flags);
    int st = 0;
    waitpid(pid, &st, 0);
    ok(WIFEXITED(st), "the child finished (status %#x: a signal means a corrupt list)", st);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    ok(code >= 0 && !(code & 1), "in the child, every PG_BUDDY head is on a list after the rebuild");
    ok(code >= 0 && !(code & 2), "the child allocates exact blocks of the caught block's size");
    ok(code >= 0 && !(code & 4), "and after they come and go, still no free head off the lists");
    page_free_exact(pg);
    return done_testing();
}
