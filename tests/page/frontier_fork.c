/*
 * frontier_fork — a fork while another thread is joining a range of the
 * frontier slice to the zone (buddy.c, zone_frontier_join: grow_lock and
 * the zone lock held, the range half on the lists).  The child rebuilds
 * its lists from the descriptors, and must not join that range again:
 * its blocks would be freed twice (found in review: the child handed the
 * same pages out twice and then hung in its corrupted lists).
 *
 * The joining thread is stopped at a known point: the descriptor page of
 * slice page 256 is made read-only, so the thread faults while it writes
 * the head of the block at 256, and its SIGSEGV handler parks it there.
 * The child then takes an order-8 block (the size the parked join was
 * for) and an order-0 page, and the books must show no page in two
 * blocks and every descriptor in its place.  The pages the parked join
 * never reached are leaked in the child (address space only): the books'
 * "no page lost" does not apply.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accounting.h"

static volatile sig_atomic_t parked;

static void on_segv(int sig)
{
    (void)sig;
    parked = 1;
    for (;;)
        pause();
}

static volatile int go;

static void *joiner(void *arg)
{
    (void)arg;
    while (!go)
        usleep(100);
    sk_alloc_pages(8);   /* the frontier joins [64, 512): blocks at 64, 128 and 256 */
    return NULL;
}

int main(void)
{
    /* Once a thread is parked holding the zone's locks, nothing here may
     * allocate (acct_frontier_start: stdout's buffer is static). */
    struct zone *z = acct_frontier_start();
    free(malloc(64));   /* slabkit up: its fork handlers registered */
    page_init();
    char *p0 = sk_alloc_pages(0);
    if (!p0)
        BAIL("sk_alloc_pages(0) failed");
    struct vm_slice *s = vm_slice_of(p0);
    if (z->frontier != s || z->frontier_next != 64)
        BAIL("the zone's first slice is not a frontier at 64 pages (%zu)", z->frontier_next);

    /* The thread first (pthread_create allocates), then the trap: from
     * here on this thread allocates nothing until the fork. */
    pthread_t t;
    pthread_create(&t, NULL, joiner, NULL);
    struct sigaction sa = { .sa_handler = on_segv };
    sigaction(SIGSEGV, &sa, NULL);
    void *ro = (void *)SK_ALIGN_DOWN((uintptr_t)((struct sk_page *)s->pages + 256), SK_PAGE_SIZE);
    if (mprotect(ro, SK_PAGE_SIZE, PROT_READ) != 0)
        BAIL("mprotect: %s", strerror(errno));
    go = 1;
    for (int i = 0; !parked && i < 5000; i++)
        usleep(1000);
    if (!parked)
        BAIL("the joining thread did not stop at page 256's descriptor");
    ok(z->lock.state != 0, "a thread is parked inside the join, the zone lock held");

    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        BAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        mprotect(ro, SK_PAGE_SIZE, PROT_READ | PROT_WRITE);
        alarm(20);   /* a corrupted list loops for ever */
        int bad = z->frontier == s;
        char *q = sk_alloc_pages(8), *r = sk_alloc_pages(0);
        struct acct_block live[3] = { { p0, 0 }, { q, 8 }, { r, 0 } };
        page_drain_pcp();
        struct acct_result res;
        int null = open("/dev/null", O_WRONLY);   /* its diagnostics name those pages */
        if (null >= 0)
            dup2(null, 1);
        acct_check(live, q && r ? 3 : 1, &res);
        /* (Pages of malloc's own slabs are in no list here: "lost" and
         * "stale head" do not apply.) */
        if (!q || !r || res.overlaps || res.misaligned || res.bad_state || res.unmerged)
            bad |= 2;
        _exit(bad);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ok(WIFEXITED(st), "the child finished (status %#x: a signal means its lists were corrupt)", st);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    ok(code >= 0 && !(code & 1), "in the child the slice is no frontier any more");
    ok(code >= 0 && !(code & 2),
       "the child's new blocks overlap nothing, and every descriptor is in its place (accounting.h)");
    /* The parked thread still holds the zone's locks here: leave without
     * running anything that could take them. */
    int rc = done_testing();
    fflush(stdout);
    _exit(rc);
}
