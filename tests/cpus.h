/*
 * cpus.h — for the stress tests: confine the process to (at most) two
 * CPUs, as the issues ask, so that 8..512 threads oversubscribe them on
 * any machine.  Returns the number of CPUs kept.
 *
 * Also: with SK_TEST_DENY_MEMBARRIER=1 in the environment, membarrier()
 * fails with ENOSYS from before slabkit starts (a seccomp filter, as a
 * container profile or a kernel before 5.10 would have it), so remote
 * drains of the per-CPU arrays take their membarrier-less path.
 * membarrier_denied() says whether that is in force.
 */
#ifndef SK_TEST_CPUS_H
#define SK_TEST_CPUS_H
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((constructor(101))) static void deny_membarrier_if_asked(void)
{
    const char *e = getenv("SK_TEST_DENY_MEMBARRIER");
    if (!e || *e != '1')
        return;
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_membarrier, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { sizeof f / sizeof f[0], f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
        _exit(99);
}

static inline int membarrier_denied(void)
{
    return syscall(SYS_membarrier, 0 /* MEMBARRIER_CMD_QUERY */, 0, 0) < 0 && errno == ENOSYS;
}

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

/* The first two CPUs this process may run on, in *a and *b: 0 when it
 * has fewer than two. */
static inline int first_two_cpus(int *a, int *b)
{
    cpu_set_t set;
    *a = *b = -1;
    if (sched_getaffinity(0, sizeof set, &set))
        return 0;
    for (int c = 0; c < CPU_SETSIZE && *b < 0; c++)
        if (CPU_ISSET(c, &set)) {
            if (*a < 0)
                *a = c;
            else
                *b = c;
        }
    return *b >= 0;
}

/* Pin the calling thread to the first CPU it may run on (so that its
 * per-CPU lists and arrays are the same ones throughout); the CPU, or -1
 * when the kernel refuses. */
static inline int pin_first_cpu(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    int c = 0;
    while (c < CPU_SETSIZE && !CPU_ISSET(c, &set))
        c++;
    CPU_ZERO(&set);
    CPU_SET(c, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0 ? c : -1;
}

/* Pin the calling thread to one CPU: 0, or -1 when the kernel refuses. */
static inline int pin_thread(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof s, &s) == 0 ? 0 : -1;
}
#endif
