/*
 * statm.h — the process's own address space and resident set, from
 * /proc/self/statm, in bytes (-1 if it cannot be read).  Read with
 * open/read and parsed by hand: no stdio, so asking allocates nothing
 * (tests that count memory must not disturb it).
 */
#ifndef SK_TEST_STATM_H
#define SK_TEST_STATM_H
#include <fcntl.h>
#include <unistd.h>

#define STATM_SIZE 0        /* address space */
#define STATM_RESIDENT 1    /* resident set */

static inline long statm_bytes(int field)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
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
#endif
