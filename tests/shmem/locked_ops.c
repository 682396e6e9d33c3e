/*
 * locked_ops — seed 001's before really runs: page_microopt=0 makes the
 * locked page-flag updates the series took out of sk_file's paths.
 *
 * This test links the shmem layer compiled again with a counter in the
 * locked flag helpers (Makefile: SK_SHMEM_COUNT_LOCKED).  One file gets 64
 * new pages written (the path of the seed's dd to tmpfs), then rewritten,
 * then truncated away: with the series (the default) a new page's
 * SwapBacked and accessed bits are plain stores (__SetPageSwapBacked,
 * init_page_accessed), the LRU add tests PG_ACTIVE before clearing it and
 * the release clears PG_LRU plainly; page_microopt=0 does each with a
 * locked instruction.  So the before makes four more locked updates per
 * page: SetPageSwapBacked, SetPageReferenced (mark_page_accessed after
 * the copy, where the series marks a new page at allocation), the LRU
 * add's ClearPageActive and the release's ClearPageLRU.  Both make one
 * more, the LRU add's SetPageLRU.  It fails if the switch is ignored.
 */
#define _GNU_SOURCE
#include "cpus.h"
#include "tap.h"
#include "slabkit.h"
#include "shmem/shmem.h"

__thread unsigned long shmem_locked_flag_ops;

#define PAGES 64

static unsigned long run(const char *name)
{
    static char buf[PAGES * 4096];
    memset(buf, 'x', sizeof buf);
    sk_file_t *f = sk_file_create(name);
    if (!f)
        BAIL("sk_file_create: %s", strerror(errno));
    unsigned long before = shmem_locked_flag_ops;
    if (sk_file_pwrite(f, buf, sizeof buf, 0) != (ssize_t)sizeof buf)
        BAIL("sk_file_pwrite failed");
    sk_file_truncate(f, 0);
    lru_add_drain();                 /* pages still in this CPU's add batch go now */
    unsigned long n = shmem_locked_flag_ops - before;
    sk_file_destroy(f);
    return n;
}

int main(void)
{
    plan(3);
    /* One CPU: every page goes through this CPU's LRU add batch, which
     * lru_add_drain empties, so each run counts the same updates. */
    if (pin_first_cpu() < 0)
        BAIL("cannot pin to a CPU");
    if (shmem_init() != 0)
        BAIL("shmem_init failed");
    run("warm-up");                  /* first-use work out of the count */
    page_before = 0;
    unsigned long after = run("series");
    page_before = (1u << PAGE_NR_PATCHES) - 1;
    unsigned long before = run("before");
    page_before = 0;
    unsigned long after2 = run("series-again");
    diag("locked page-flag updates for %d new pages written and truncated: %lu with the series, %lu with "
         "page_microopt=0", PAGES, after, before);
    is(before - after, 4 * PAGES, "page_microopt=0: four more locked updates a page");
    is(after2, after, "the series' count is the same each time");
    ok(after < before, "the series makes fewer locked updates");
    return done_testing();
}
