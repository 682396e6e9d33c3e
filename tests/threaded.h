/*
 * threaded.h — make the test process one with threads of its own.
 * slabkit starts its purger thread only in such a process (os_threaded:
 * glibc's __libc_single_threaded); a single-threaded program returns its
 * memory from the slow paths instead (src/page/reclaim.c, "Returning memory
 * without a thread").  A test of the purger, or of the limits that hold
 * while it runs, calls become_threaded() first: one thread, started and
 * joined, before the test allocates anything of note.
 */
#ifndef SK_TESTS_THREADED_H
#define SK_TESTS_THREADED_H
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static void *threaded_noop(void *arg)
{
    return arg;
}

static inline void become_threaded(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, threaded_noop, NULL) != 0 || pthread_join(t, NULL) != 0) {
        printf("Bail out! cannot start a thread\n");
        exit(2);
    }
}

#ifdef SK_PAGE_H
/* A unit test of placement or of the dirty bound, not of trimming: the
 * zones keep what is freed up to dirty_max_mb, as while the purger runs,
 * though this process has one thread and never starts it (tests that
 * must not allocate through malloc, where a thread's TLS would). */
static inline void zones_keep_freed(void)
{
    for (int n = 0; n < PAGE_NR_ZONES; n++)
        page_zones[n].trim_pages = ~0ul >> 1;
}
#endif
#endif
