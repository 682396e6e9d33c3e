/*
 * array_pools — per-CPU array sets from cpu_arrays_alloc lie CPU-major:
 *
 *  - CPU_SETS_PER_ROW sets in a row come from one pool, CPU_ARRAY_BYTES
 *    apart, so every CPU's arrays of them share that CPU's one page (the
 *    row), and CPU k's row is CPU_ARRAY_STRIDE past CPU k-1's;
 *  - the next set comes from a new pool, and no two sets overlap;
 *  - every array of a fresh set reads empty with capacity 0, and the sets
 *    are independent: objects pushed on this CPU's array of one set come
 *    back from that set only, each at its capacity;
 *  - cpu_arrays_clear gives a used set back as it came (count 0, cap 0);
 *  - a pool of other columns (cpu_pool_alloc, 320 bytes wide as a
 *    slab_cpu): twelve columns side by side in a pool's rows, the
 *    thirteenth from a new pool, each zero; cpu_pool_clear zeroes a used
 *    column on every row;
 *  - fork while another thread holds a pool's lock (caught carving): the
 *    child, after cpu_pool_atfork_child, carves a column at once, from a
 *    new pool, and the parent's pool goes on where it was.
 * Runs with rseq and, via tests/modes/rseq_off.t, in the fallback.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu/cpu.h"
#include "tap.h"
#include "cpus.h"

#define NSETS ((int)CPU_SETS_PER_ROW + 1)
#define ROW ((int)CPU_SETS_PER_ROW)

static unsigned char token[NSETS][8];
static int held, release;
static struct cpu_pool pool;

/* Holds a pool's lock until told to let go, as a thread in the middle of
 * cpu_pool_alloc does. */
static void *hold_pool(void *arg)
{
    struct cpu_pool *p = arg;
    spin_lock(&p->lock);
    __atomic_store_n(&held, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&release, __ATOMIC_ACQUIRE))
        ;
    spin_unlock(&p->lock);
    return NULL;
}

int main(void)
{
    os_options_init();
    cpu_init();
    cpu_arrays_t set[NSETS];
    for (int i = 0; i < NSETS; i++)
        if (!(set[i] = cpu_arrays_alloc()))
            BAIL("cpu_arrays_alloc failed");

    bool row = true, rows = true;
    for (int i = 1; i < ROW; i++)
        row &= (char *)set[i] == (char *)set[0] + (size_t)i * CPU_ARRAY_BYTES;
    for (int i = 0; i < ROW; i++)
        for (int k = 0; k < cpu_nr_slots(); k++) {
            uintptr_t a = (uintptr_t)cpu_array_at(set[i], k);
            rows &= a / SK_PAGE_SIZE == (uintptr_t)cpu_array_at(set[0], k) / SK_PAGE_SIZE &&
                    (k == 0 || a == (uintptr_t)cpu_array_at(set[i], k - 1) + CPU_ARRAY_STRIDE);
        }
    ok(row, "the first %d sets lie side by side, %u bytes apart", ROW, CPU_ARRAY_BYTES);
    ok(rows, "each CPU's arrays of them share one page, rows %u bytes apart (%d slots)", CPU_ARRAY_STRIDE,
       cpu_nr_slots());

    /* No overlap between any two arrays of any two sets. */
    bool apart = true;
    for (int i = 0; i < NSETS; i++)
        for (int j = i + 1; j < NSETS; j++)
            for (int k = 0; k < cpu_nr_slots(); k++)
                for (int l = 0; l < cpu_nr_slots(); l++) {
                    uintptr_t a = (uintptr_t)cpu_array_at(set[i], k), b = (uintptr_t)cpu_array_at(set[j], l);
                    apart &= a + CPU_ARRAY_BYTES <= b || b + CPU_ARRAY_BYTES <= a;
                }
    ok(apart, "no array of %d sets overlaps another (the last from a second pool)", NSETS);

    bool empty = true;
    for (int i = 0; i < NSETS; i++)
        for (int k = 0; k < cpu_nr_slots(); k++)
            empty &= cpu_array_at(set[i], k)->word == 0 && cpu_array_at(set[i], k)->cap == 0;
    ok(empty, "every array of a fresh set is empty, capacity 0");

    /* Capacity i + 2 for set i; push i + 2 tokens on each, one more fails. */
    for (int i = 0; i < NSETS; i++)
        cpu_arrays_init(set[i], (unsigned)i + 2);
    bool pushed = true;
    for (int i = 0; i < NSETS; i++) {
        for (int t = 0; t < i + 2; t++)
            pushed &= cpu_push(set[i], &token[i][t]) == 1;
        pushed &= cpu_push(set[i], &token[i][7]) == 0;
    }
    bool back = true;
    for (int i = 0; i < NSETS; i++) {
        for (int t = i + 1; t >= 0; t--)
            back &= cpu_pop(set[i]) == &token[i][t];
        back &= cpu_pop(set[i]) == NULL;
    }
    ok(pushed, "each set takes as many objects as its capacity, no more");
    ok(back, "and gives back its own, last in first out, then nothing");

    cpu_push(set[0], &token[0][0]);
    cpu_arrays_clear(set[0]);
    bool clear = true;
    for (int k = 0; k < cpu_nr_slots(); k++)
        clear &= cpu_array_at(set[0], k)->word == 0 && cpu_array_at(set[0], k)->cap == 0;
    ok(clear && cpu_pop(set[0]) == NULL, "cpu_arrays_clear empties a used set and zeroes its capacities");

    enum { W = 320, PER = CPU_ARRAY_STRIDE / W };
    char *col[PER + 1];
    for (int i = 0; i <= PER; i++)
        if (!(col[i] = cpu_pool_alloc(&pool, W, cpu_nr_ids)))
            BAIL("cpu_pool_alloc failed");
    bool side = true, zero = true;
    for (int i = 1; i < PER; i++)
        side &= col[i] == col[0] + (size_t)i * W;
    for (int i = 0; i <= PER; i++)
        for (int k = 0; k < cpu_nr_ids; k++) {
            const char *part = col[i] + (size_t)k * CPU_ARRAY_STRIDE;
            for (int b = 0; b < W; b++)
                zero &= part[b] == 0;
        }
    bool fresh = col[PER] < col[0] || col[PER] >= col[0] + (size_t)cpu_nr_ids * CPU_ARRAY_STRIDE;
    ok(side && fresh && zero, "%d-byte columns: %d side by side in a pool, the next from a new one, all zero", W, PER);

    for (int k = 0; k < cpu_nr_ids; k++)
        memset(col[1] + (size_t)k * CPU_ARRAY_STRIDE, 0x5a, W);
    cpu_pool_clear(col[1], W, cpu_nr_ids);
    bool cleared = true;
    for (int k = 0; k < cpu_nr_ids; k++)
        for (int b = 0; b < W; b++)
            cleared &= col[1][(size_t)k * CPU_ARRAY_STRIDE + b] == 0;
    ok(cleared, "cpu_pool_clear zeroes a written column on all %d rows", cpu_nr_ids);

    /* A thread caught carving: it holds the lock when the process forks. */
    pthread_t t;
    if (pthread_create(&t, NULL, hold_pool, &pool) != 0)
        BAIL("pthread_create failed");
    while (!__atomic_load_n(&held, __ATOMIC_ACQUIRE))
        ;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(10);     /* a child that spins on the inherited lock dies here */
        cpu_pool_atfork_child(&pool);
        char *c2 = cpu_pool_alloc(&pool, W, cpu_nr_ids);
        /* col[PER] opened the parent's pool now being carved. */
        bool apart = c2 && (c2 < col[PER] || c2 >= col[PER] + (size_t)cpu_nr_ids * CPU_ARRAY_STRIDE);
        _exit(apart && c2[0] == 0 ? 0 : 3);
    }
    int st = 0;
    bool child_ok = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    char *next = cpu_pool_alloc(&pool, W, cpu_nr_ids);
    ok(child_ok, "fork with the pool's lock held: the child carves a fresh column at once (status 0x%x)", st);
    ok(next == col[PER] + W, "and the parent's pool goes on from its next column");
    return done_testing();
}
