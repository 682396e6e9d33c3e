/*
 * fork_stress.c — fork is safe while 8 threads hammer malloc and free:
 * every child finds a usable heap, frees objects the parent's threads
 * owned at the moment of fork, allocates and frees across the classes
 * (also from a new thread of its own) and exits 0.
 *
 * A child that hangs is killed by its alarm and counted as a failure; a
 * parent that hangs in fork is stopped by its own alarm (Bail out!).
 *
 * With rseq, one hammer and the child's thread unregister theirs: they
 * use the shared slot of threads without rseq, whose array locks a fork
 * can catch held as well.
 *
 * Run twice: with rseq, then re-executed with glibc's rseq registration
 * off (GLIBC_TUNABLES=glibc.pthread.rseq=0), where the per-CPU arrays sit
 * behind per-CPU locks that a fork can catch held.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"

#define HAMMERS 8
#define FORKS 100
#define SLOTS 512

/* Objects shared between the hammer threads: a thread swaps a new object
 * into a random slot and frees the one it took out (a cross-thread free).
 * An object in a slot is fully written, and carries its size and a check
 * word, so a child can verify and free every one. */
struct obj {
    size_t size;
    uint64_t check;
};
static struct obj *slots[SLOTS];
static volatile int stop;

static uint64_t check_of(const struct obj *o) { return (uintptr_t)o * 0x9e3779b97f4a7c15ull ^ o->size; }

static size_t pick_size(uint64_t *rng)
{
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    unsigned r = (unsigned)(*rng >> 33);
    switch (r % 16) {
    /* One in 256 goes to the page allocator: enough to race it, few
     * enough that page faults do not starve the children of CPU. */
    case 0: return (r & 0xf00) ? 2048 + r % 2048 : 64 * 1024 + r % (512 * 1024);
    case 1: case 2: return 1024 + r % 7000;
    default: return sizeof(struct obj) + r % 512;
    }
}

static struct obj *make(size_t n)
{
    struct obj *o = malloc(n);
    if (!o)
        return NULL;
    memset(o, 0x42, n < 256 ? n : 256);
    o->size = n;
    o->check = check_of(o);
    return o;
}

static int rseq_mode;   /* this run has rseq: hammer 0 and the child's thread drop theirs */

/* Unregister this thread's rseq, so that it runs on the shared slot of
 * threads without rseq (under its lock) in a process that has rseq. */
static void drop_rseq(void)
{
    if (!rseq_mode)
        return;
    struct rseq *r = (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
    if (syscall(SYS_rseq, r, __rseq_size < 32 ? 32 : __rseq_size, RSEQ_FLAG_UNREGISTER, RSEQ_SIG) != 0)
        syscall(SYS_rseq, r, 32, RSEQ_FLAG_UNREGISTER, RSEQ_SIG);
}

static void *hammer(void *arg)
{
    if (arg == 0)
        drop_rseq();    /* forks catch the shared slot's locks held too */
    uint64_t rng = (uintptr_t)arg * 7919 + 1;
    void *local[64] = { 0 };
    unsigned i = 0;
    while (!stop) {
        size_t n = pick_size(&rng);
        /* Private churn. */
        unsigned k = i++ % 64;
        free(local[k]);
        local[k] = (i & 3) ? malloc(n) : calloc(1, n);
        if ((i & 15) == 0)
            local[k] = realloc(local[k], n / 2 + 1);
        /* Shared swap. */
        struct obj *o = make(n);
        if (o) {
            struct obj *old = __atomic_exchange_n(&slots[(rng >> 20) % SLOTS], o, __ATOMIC_ACQ_REL);
            free(old);
        }
    }
    for (int k = 0; k < 64; k++)
        free(local[k]);
    return NULL;
}

static void *child_thread(void *arg)
{
    (void)arg;
    drop_rseq();        /* the shared slot, which a parent thread may have held */
    void *p[200];
    for (int i = 0; i < 200; i++) {
        p[i] = malloc(16 + (size_t)i * 37);
        if (!p[i])
            return (void *)1;
        memset(p[i], i, 16 + (size_t)i * 37);
    }
    for (int i = 0; i < 200; i++)
        free(p[i]);
    return NULL;
}

/* Exit codes say what went wrong in the child. */
static int child(void)
{
    alarm(30);          /* a hang, not a slow machine: 2 loaded CPUs run 8 hammers too */
    /* The shared objects as they were at fork: each must be intact and
     * freeable here. */
    for (int s = 0; s < SLOTS; s++) {
        struct obj *o = slots[s];
        if (o && o->check != check_of(o))
            return 2;
        free(o);
        slots[s] = NULL;
    }
    /* A fresh heap's worth of work in every class. */
    void *p[300];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 300; i++) {
            size_t n = (i % 50 == 0) ? (size_t)300 * 1024 : 8 + (size_t)i * 29;
            p[i] = malloc(n);
            if (!p[i])
                return 3;
            memset(p[i], round, n);
        }
        for (int i = 299; i >= 0; i--)
            free(p[i]);
    }
    pthread_t t;
    void *res = (void *)1;
    if (pthread_create(&t, NULL, child_thread, NULL) || pthread_join(t, &res) || res)
        return 4;
    return 0;
}

int main(int argc, char **argv)
{
    int rseq_off = tap_rseq_off_run(argc, argv);
    const char *mode = rseq_off ? "rseq off" : "rseq";
    if (rseq_off)
        ok(__rseq_size == 0, "re-executed with glibc's rseq registration off");
    int forks = rseq_off ? FORKS / 2 : FORKS;
    rseq_mode = !rseq_off && __rseq_size >= 20;
    bail_out_after(180, "the parent hung (fork or wait deadlocked)");   /* about 20 s alone; 60 s was hit under load */

    pthread_t t[HAMMERS];
    for (long i = 0; i < HAMMERS; i++)
        if (pthread_create(&t[i], NULL, hammer, (void *)i))
            BAIL("pthread_create failed");
    usleep(20000);

    int fork_fail = 0, exit_bad = 0, hung = 0, crashed = 0;
    for (int f = 0; f < forks; f++) {
        fflush(NULL);
        int status = tap_fork_wait(child);
        if (status < 0) {
            fork_fail++;
            continue;
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
            if (exit_bad++ < 3)
                diag("child %d exited %d", f, WEXITSTATUS(status));
        } else if (WIFSIGNALED(status)) {
            if (WTERMSIG(status) == SIGALRM)
                hung++;
            else if (crashed++ < 3)
                diag("child %d died of %s", f, strsignal(WTERMSIG(status)));
        }
    }
    stop = 1;
    for (int i = 0; i < HAMMERS; i++)
        pthread_join(t[i], NULL);
    int intact = 1;
    for (int s = 0; s < SLOTS; s++) {
        if (slots[s] && slots[s]->check != check_of(slots[s]))
            intact = 0;
        free(slots[s]);
    }

    ok(fork_fail == 0, "%s: %d forks while 8 threads hammer malloc/free", mode, forks);
    ok(hung == 0, "%s: no child hung (%d hung)", mode, hung);
    ok(crashed == 0, "%s: no child crashed (%d crashed)", mode, crashed);
    ok(exit_bad == 0, "%s: every child allocated, freed (also the objects shared at fork, and from a new thread) and exited 0 (%d did not)", mode, exit_bad);
    ok(intact, "%s: the parent's shared objects are intact after all the forks", mode);
    if (rseq_off)
        return done_testing();
    tap_rerun_rseq_off(argv);
}
