/*
 * blocks.h — for the malloc tests of the page allocator's blocks (kblock,
 * large_cache).
 *
 * release(p): free through a volatile pointer, so that the compiler
 * neither rejects a bad free nor folds the address compared after one.
 * block_fill(p, n, seed) writes a pattern; block_first_wrong(p, n, seed)
 * is the offset of its first wrong byte, n when all are right.
 * bad_block_case(what, size, interior, want1, want2): the child mallocs
 * `size` bytes and writes them, then frees the block twice (interior 0) or
 * frees the pointer `interior` bytes into it; it must die of SIGABRT with
 * both strings in its stderr (one TAP line).
 */
#ifndef SK_TEST_BLOCKS_H
#define SK_TEST_BLOCKS_H

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

static void (*volatile release)(void *) = free;

static inline void block_fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 31 + seed);
}

static inline size_t block_first_wrong(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 31 + seed))
            return i;
    return n;
}

static inline void bad_block_case(const char *what, size_t size, size_t interior, const char *want1,
                                  const char *want2)
{
    int err;
    pid_t pid = tap_fork_stderr(&err);
    if (pid == 0) {
        alarm(30);
        char *p = malloc(size);
        memset(p, 3, size);
        if (interior) {
            release(p + interior);
        } else {
            release(p);
            release(p);
        }
        _exit(93);
    }
    static char text[4096];
    int st = tap_child_stderr(pid, err, text, sizeof text);
    int aborted = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
    ok(aborted && strstr(text, want1) && strstr(text, want2), "%s: SIGABRT with \"%s ... %s\"", what, want1, want2);
    if (!aborted || !strstr(text, want1))
        diag("status %#x, stderr: %s", st, text);
}

#endif
