/*
 * realloc_cold — an object of 1 KiB or more that realloc moves to a larger
 * class goes back to its slab, not onto this CPU's array, when the array
 * holds an object of its class already (sk_realloc, slab_free_cold):
 *  - on a thread pinned to one CPU, with objects of the class already on
 *    its array, the next malloc of the class after the move is not the
 *    moved-from object (the array path would hand exactly that one out);
 *  - the moved block keeps every byte;
 *  - the object is not lost: mallocs of its class get it back within a few
 *    slabs' worth, and once all is freed the class holds no object;
 *  - a smaller object (under 1 KiB) keeps the array path: the next malloc
 *    of its class is the moved-from object; so does one of 1 KiB or more
 *    when its class's array is empty;
 *  - bad input, in a child: freeing the moved-from pointer is a double
 *    free, reported and aborted, as after any realloc that moved;
 *  - and again without rseq (the lock fallback), which has its own arrays.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slabkit.h"
#include "cpus.h"
#include "tap.h"
#include "blocks.h"

#define SIZE 1500           /* kmalloc-1536 */
#define BIGGER 5000         /* kmalloc-5120: a move */
#define WARM 8              /* objects of the class put on the array first */

static void *(*volatile grow)(void *, size_t) = realloc;

/* Put WARM objects of `size` on this CPU's array (malloc them, free them). */
static void warm(size_t size)
{
    void *w[WARM];
    for (int i = 0; i < WARM; i++)
        if (!(w[i] = malloc(size)))
            BAIL("malloc(%zu) failed", size);
    for (int i = 0; i < WARM; i++)
        release(w[i]);
}

/* realloc a new object of `size` to `bigger` (one TAP line: it moved),
 * with every array emptied into its slabs first if `trim`; then whether
 * the next malloc(size) is the moved-from object. */
static bool next_is_moved_from(size_t size, size_t bigger, bool trim)
{
    unsigned char *a = malloc(size);
    if (trim)
        malloc_trim(0);
    unsigned char *b = grow(a, bigger);
    ok(b && b != a, "realloc(%zu -> %zu) moved the block", size, bigger);
    unsigned char *n = malloc(size);
    bool same = n == a;
    release(n);
    release(b);
    return same;
}

static long in_use(const char *cache)
{
    struct sk_cache_info ci;
    if (sk_cache_info(cache, &ci) != 0)
        BAIL("sk_cache_info(%s) failed", cache);
    return (long)ci.active_objs;
}

int main(int argc, char **argv)
{
    int rerun = tap_rseq_off_run(argc, argv);
    if (pin_thread(sched_getcpu()) != 0)
        BAIL("cannot pin the thread to its CPU");
    diag("rseq %s", rerun ? "off (lock fallback)" : "on");
    long base = in_use("kmalloc-1536");

    /* ---- 1 KiB and up: back to the slab ---- */
    warm(SIZE);
    unsigned char *p = malloc(SIZE);
    if (!p)
        BAIL("malloc(%d) failed", SIZE);
    block_fill(p, SIZE, 7);
    unsigned char *q = grow(p, BIGGER);
    ok(q && q != p, "realloc(%d -> %d) moved the block", SIZE, BIGGER);
    is(block_first_wrong(q, SIZE, 7), SIZE, "every byte came along");
    unsigned char *r = malloc(SIZE);
    ok(r != p, "the next malloc(%d) is not the moved-from object (it went to its slab)", SIZE);

    /* Not lost: the class gives it back before long. */
    enum { MANY = 256 };
    void *many[MANY];
    int found = -1;
    for (int i = 0; i < MANY; i++) {
        many[i] = malloc(SIZE);
        if (many[i] == p && found < 0)
            found = i;
    }
    ok(found >= 0, "malloc(%d) hands the moved-from object out again (after %d)", SIZE, found);
    for (int i = 0; i < MANY; i++)
        release(many[i]);
    release(r);
    release(q);
    malloc_trim(0);   /* every cache shrunk: the arrays emptied into their slabs */
    is(in_use("kmalloc-1536"), base, "all freed: kmalloc-1536 holds no more objects than before");

    /* ---- under 1 KiB: the array, as any free ---- */
    warm(200);
    ok(next_is_moved_from(200, 2000, false),
       "a 200-byte object moved from goes to the array: the next malloc(200) is it");

    /* ---- an empty array: the array, for the next malloc ---- */
    ok(next_is_moved_from(3000, 9000, true),
       "with kmalloc-3072's array empty, the moved-from object went onto it: the next malloc(3000) is it");

    /* ---- the moved-from pointer freed: a double free ---- */
    int err;
    pid_t pid = tap_fork_stderr(&err);
    if (pid == 0) {
        alarm(30);
        unsigned char *a = malloc(SIZE);
        memset(a, 5, SIZE);
        unsigned char *b = grow(a, BIGGER);
        (void)b;
        release(a);
        _exit(93);
    }
    static char text[4096];
    int st = tap_child_stderr(pid, err, text, sizeof text);
    ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(text, "double free") && strstr(text, "kmalloc-1536"),
       "free of the moved-from pointer: SIGABRT with \"double free ... kmalloc-1536\"");
    if (!strstr(text, "double free"))
        diag("status %#x, stderr: %s", st, text);

    if (!rerun)
        tap_rerun_rseq_off(argv);
    return done_testing();
}
