/*
 * statm.h — the process's own address space and resident set, from
 * /proc/self/statm, in bytes (-1 if it cannot be read); and how many pages
 * of a range are resident (mincore).  Read with
 * open/read and parsed by hand: no stdio, so asking allocates nothing
 * (tests that count memory must not disturb it).
 */
#ifndef SK_TEST_STATM_H
#define SK_TEST_STATM_H
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define STATM_SIZE 0        /* address space */
#define STATM_RESIDENT 1    /* resident set */

/* A small /proc file into buf, NUL-terminated, with open/read only: its
 * length, or -1. */
static inline ssize_t proc_read(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    return n;
}

static inline long statm_bytes(int field)
{
    char buf[128];
    if (proc_read("/proc/self/statm", buf, sizeof buf) < 0)
        return -1;
    const char *s = buf;
    long v = -1;
    for (int f = 0; f <= field; f++) {
        while (*s == ' ')
            s++;
        if (*s < '0' || *s > '9')
            return -1;
        for (v = 0; *s >= '0' && *s <= '9'; s++)
            v = v * 10 + (*s - '0');
    }
    return v * sysconf(_SC_PAGESIZE);
}
/* How many of the `pages` pages from p (page-aligned) are resident
 * (mincore), or -1. */
static inline long resident_pages(const void *p, size_t pages)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char vec[256];
    long r = 0;
    for (size_t done = 0; done < pages;) {
        size_t n = pages - done < sizeof vec ? pages - done : sizeof vec;
        if (mincore((char *)p + done * page, n * page, vec) != 0)
            return -1;
        for (size_t i = 0; i < n; i++)
            r += vec[i] & 1;
        done += n;
    }
    return r;
}

/* Threads of this process, from /proc/self/status (open/read: opendir
 * would allocate); -1 if it cannot be read. */
static inline long proc_threads(void)
{
    char buf[4096];
    if (proc_read("/proc/self/status", buf, sizeof buf) < 0)
        return -1;
    const char *t = strstr(buf, "\nThreads:");
    return t ? atol(t + 9) : -1;
}
#endif
