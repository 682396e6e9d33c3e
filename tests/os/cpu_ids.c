/*
 * cpu_ids — os_nr_cpu_ids() numbers every CPU a per-CPU array may be
 * indexed by: at least the highest CPU of the process's affinity mask
 * plus one, at least the current CPU plus one, and the same answer every
 * time (the arrays are sized once).
 */
#define _GNU_SOURCE
#include <sched.h>

#include "os/os.h"
#include "tap.h"

int main(void)
{
    plan(3);
    int n = os_nr_cpu_ids();
    cpu_set_t set;
    int top = -1;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set))
                top = c;
    ok(n > top, "%d CPU ids cover the affinity mask's highest CPU (%d)", n, top);
    ok(n > sched_getcpu(), "they cover the current CPU (%d)", sched_getcpu());
    is(os_nr_cpu_ids(), n, "the answer does not change");
    return done_testing();
}
