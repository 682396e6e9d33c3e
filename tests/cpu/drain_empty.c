/*
 * drain_empty — a remote drain interrupts only CPUs whose array holds
 * something: cpu_drain_remote of an empty array returns 0 without a
 * membarrier (shrink, the idle-cache reaper and the page-list drains walk
 * every CPU of every array, and most are empty).
 *
 *  - one object pushed on this CPU, then every CPU drained: the object
 *    comes back, and at most one membarrier was issued (the non-empty
 *    array; none in the lock fallback or with membarrier denied);
 *  - every CPU drained again, all empty: no membarrier at all, nothing
 *    returned;
 *  - an array emptied by pops (cap set, count 0) is skipped the same way.
 * Runs with rseq and, via tests/modes/rseq_off.t, in the fallback.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "tap.h"
#include "cpus.h"

static unsigned char token[4];

static unsigned drain_all(cpu_arrays_t tab, void **got)
{
    unsigned n = 0;
    void *buf[8];
    for (int cpu = 0; cpu < cpu_nr_slots(); cpu++) {
        unsigned k = cpu_drain_remote(tab, cpu, buf, 8);
        for (unsigned i = 0; i < k; i++, n++)
            if (n < 4)
                got[n] = buf[i];
    }
    return n;
}

int main(void)
{
    plan(5);
    if (pin_first_cpu() < 0)
        BAIL("cannot pin to a CPU");
    os_options_init();
    cpu_init();
    diag("per-CPU arrays via %s (%d CPU ids), membarrier %s", cpu_use_rseq ? "rseq" : "the lock fallback",
         cpu_nr_ids, cpu_membarrier_ok ? "on" : "off");
    size_t bytes = SK_ALIGN_UP(cpu_arrays_bytes(), (size_t)CACHE_LINE);
    void *mem = aligned_alloc(CACHE_LINE, bytes);
    if (!mem)
        BAIL("no memory for the arrays");
    memset(mem, 0, bytes);
    cpu_arrays_t tab = cpu_arrays_init(mem, 8);

    void *got[4] = { 0 };
    if (cpu_push(tab, &token[0]) <= 0)
        BAIL("cpu_push failed");
    unsigned long m0 = __atomic_load_n(&os_membarrier_calls, __ATOMIC_RELAXED);
    unsigned n = drain_all(tab, got);
    unsigned long m1 = __atomic_load_n(&os_membarrier_calls, __ATOMIC_RELAXED);
    ok(n == 1 && got[0] == &token[0], "the pushed object comes back from the drain (%u)", n);
    ok(m1 - m0 <= 1, "one non-empty array, %lu membarrier call(s) over %d slots", m1 - m0, cpu_nr_slots());

    n = drain_all(tab, got);
    unsigned long m2 = __atomic_load_n(&os_membarrier_calls, __ATOMIC_RELAXED);
    ok(n == 0 && m2 == m1, "all empty: nothing returned (%u), no membarrier (%lu)", n, m2 - m1);

    if (cpu_push(tab, &token[1]) <= 0 || cpu_pop(tab) != &token[1])
        BAIL("push/pop on this CPU failed");
    n = drain_all(tab, got);
    unsigned long m3 = __atomic_load_n(&os_membarrier_calls, __ATOMIC_RELAXED);
    ok(n == 0 && m3 == m2, "emptied by a pop: skipped as well (%u, %lu membarriers)", n, m3 - m2);
    if (cpu_push(tab, &token[2]) <= 0)
        BAIL("cpu_push failed");
    n = drain_all(tab, got);
    ok(n == 1 && got[0] == &token[2], "and a later push is drained again (%u)", n);
    free(mem);
    return done_testing();
}
