/*
 * cpus.h — for the stress tests: confine the process to (at most) two
 * CPUs, as the issues ask, so that 8..512 threads oversubscribe them on
 * any machine.  Returns the number of CPUs kept.
 */
#ifndef SK_TEST_CPUS_H
#define SK_TEST_CPUS_H
#define _GNU_SOURCE
#include <sched.h>

static inline int confine_to_two_cpus(void)
{
    cpu_set_t set, two;
    if (sched_getaffinity(0, sizeof set, &set))
        return 0;
    CPU_ZERO(&two);
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &set)) {
            CPU_SET(c, &two);
            n++;
        }
    sched_setaffinity(0, sizeof two, &two);
    return n;
}
#endif
