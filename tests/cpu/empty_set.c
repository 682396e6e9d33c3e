/*
 * empty_set — the always-empty per-CPU set is one read-only array, safe
 * to hand to every operation on every CPU, before cpu_init and after.
 *
 * Every table (kmalloc's, the page lists', the LRU batches') points at it
 * before init, and for good in modes without arrays; a table loaded
 * before init may be used after it.  It was CPU_MAX_IDS + 1 zero arrays
 * (4 MiB of bss) so that any CPU's index read zeros; now each set carries
 * its own bounds (struct cpu_set_head), the empty set's both 0.  So:
 *  - before cpu_init: pop finds nothing, push is refused, on this CPU;
 *  - after it, on each CPU in turn (pinned): the sequences' pops and
 *    pushes, the slow paths' locked ones, the batch moves, a grow, a trim,
 *    the readying, the counters and a remote drain of every slot all find
 *    nothing and write nothing (the set is read-only: a write would kill
 *    the test with SIGSEGV);
 *  - 16 threads doing the same at once, on two CPUs, while a real set
 *    next to it works as usual.
 * Runs with rseq and, via tests/modes/rseq_off.t, in the fallback;
 * TSAN: yes (the fallback's locks).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "cpu/cpu.h"
#include "cpus.h"
#include "tap.h"

static unsigned char token[2];

/* Every operation on the empty set, from this thread; how many of them
 * gave something (all must give nothing). */
static int poke_empty(void)
{
    cpu_arrays_t e = cpu_empty_arrays;
    void *obj = NULL, *buf[4] = { &token[0], &token[1], &token[0], &token[1] };
    int bad = 0;
    bad += cpu_pop_fast(e, &obj);
    bad += cpu_push_fast(e, &token[0]);
    bad += cpu_pop(e) != NULL;
    bad += cpu_push(e, &token[1]) != 0;
    bad += cpu_pop_batch(e, buf, 4) != 0;
    bad += cpu_push_batch(e, buf, 4) != 0;
    cpu_array_grow(e, 8);
    for (int slot = 0; slot < cpu_nr_slots(); slot++) {
        cpu_array_trim(e, slot, 1);
        bad += cpu_array_count(e, slot) != 0;
        bad += cpu_array_ops(e, slot) != 0;
        bad += cpu_drain_remote(e, slot, buf, 4) != 0;
    }
    return bad;
}

static cpu_arrays_t real;
static int thread_bad;

static void *worker(void *arg)
{
    pin_thread((int)(intptr_t)arg);
    int bad = 0;
    for (int i = 0; i < 2000; i++) {
        bad += poke_empty();
        void *obj;
        if (cpu_push(real, &token[i & 1]) > 0 && !(obj = cpu_pop(real)))
            bad++;
    }
    __atomic_fetch_add(&thread_bad, bad, __ATOMIC_RELAXED);
    return NULL;
}

int main(void)
{
    plan(5);
    ok(sizeof cpu_empty_mem == CPU_ARRAY_BYTES && cpu_set_head(cpu_empty_arrays)->seq_ids == 0 &&
       cpu_set_head(cpu_empty_arrays)->slots == 0,
       "the empty set is one array (%u bytes) whose header lets no CPU in", CPU_ARRAY_BYTES);

    void *obj = NULL;
    bool got = cpu_pop_fast(cpu_empty_arrays, &obj) || cpu_push_fast(cpu_empty_arrays, &token[0]) ||
               cpu_pop(cpu_empty_arrays) || cpu_push(cpu_empty_arrays, &token[0]) != 0;
    ok(!got, "before cpu_init it is empty and full");

    os_options_init();
    cpu_init();
    diag("per-CPU arrays via %s (%d CPU ids)", cpu_use_rseq ? "rseq" : "the lock fallback", cpu_nr_ids);

    int a, b;
    int ncpu = first_two_cpus(&a, &b) ? 2 : 1;
    int bad = 0, cpus = 0;
    for (int cpu = 0; cpu < cpu_nr_ids && cpus < 64; cpu++) {
        if (pin_thread(cpu) != 0)
            continue;         /* not ours to run on */
        bad += poke_empty();
        cpus++;
    }
    ok(cpus > 0 && bad == 0, "after it, on each of %d CPUs, every operation finds nothing (%d did)", cpus, bad);

    real = cpu_arrays_alloc();
    if (!real)
        BAIL("cpu_arrays_alloc failed");
    cpu_arrays_init(real, 4);
    ok(cpu_set_head(real)->slots == (uint32_t)cpu_nr_slots() &&
       cpu_set_head(real)->seq_ids == (uint32_t)(cpu_use_rseq ? cpu_nr_ids : 0),
       "a real set's header bounds it: %u slots, sequences below CPU %u",
       cpu_set_head(real)->slots, cpu_set_head(real)->seq_ids);

    pthread_t t[16];
    for (int i = 0; i < 16; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)(intptr_t)(ncpu == 2 && (i & 1) ? b : a)) != 0)
            BAIL("pthread_create failed");
    for (int i = 0; i < 16; i++)
        pthread_join(t[i], NULL);
    ok(thread_bad == 0, "16 threads on %d CPUs: the empty set gave nothing, the real one worked (%d wrong)",
       ncpu, thread_bad);
    return done_testing();
}
