/*
 * messaging — the analogue of `perf bench sched messaging` (hackbench) for
 * an allocator: groups of sender and receiver threads; every message is
 * allocated by the sender, handed to a receiver by writing a pointer into
 * that receiver's pipe, read and freed by the receiver.  So every object
 * is allocated on one thread (often one CPU) and freed on another: the
 * traffic SLUB's per-CPU partial lists were made for.
 *
 * A message allocates what a 100-byte write to a unix socket allocates in
 * the kernel (3.x): a socket-buffer head (struct sk_buff, 232 bytes) from
 * a cache of its own ("skbuff_head_cache": sk_cache_create when the
 * allocator is slabkit, found with dlsym; else malloc), and its data
 * buffer: the message plus struct skb_shared_info (320 bytes) from kmalloc
 * (malloc), about 420 bytes, kmalloc-512.  And a 64-byte object (the
 * small per-message objects of the socket layer, here the sender's
 * credentials: kmalloc-64), so that the classes of 128 bytes or less, where
 * seed 000's effect lives, carry the traffic too.  -p sends one plain
 * malloc'd buffer of SIZE bytes per message instead (the earlier workload).
 *
 *     messaging [-g GROUPS] [-l LOOPS] [-f FDS] [-r RUNS] [-s SIZE] [-p] [-q]
 *
 * Each group has FDS senders and FDS receivers (20, as perf's default);
 * each sender sends LOOPS messages to every receiver of its group.  The time
 * from releasing the threads to the last receiver finishing is printed per
 * run as "Total time: S [sec]" (perf's wording) with the process's CPU
 * seconds beside it and, with several runs, as mean +- stddev.  It links no allocator: choose one with LD_PRELOAD.
 */
#include "bench.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

static int groups = 2, fds = 20, loops = 100, msg_size = 100, plain;

/* The kernel's objects for one message (3.x sizes). */
#define SKB_HEAD_SIZE 232        /* struct sk_buff */
#define SKB_SHINFO_SIZE 320      /* struct skb_shared_info, after the data */
#define CRED_SIZE 64
struct skb {
    unsigned char *data;         /* msg_size bytes + shared info */
    void *cred;
    unsigned len;
    char rest[SKB_HEAD_SIZE - 2 * sizeof(void *) - sizeof(unsigned)];
};
_Static_assert(sizeof(struct skb) == SKB_HEAD_SIZE, "sk_buff head size");

/* slabkit's object caches when it is the allocator (LD_PRELOAD). */
static void *(*cache_create)(const char *, size_t, size_t, unsigned, void (*)(void *));
static void *(*cache_alloc)(void *);
static void (*cache_free)(void *, void *);
static void *skb_cache;

static void skb_cache_init(void)
{
    cache_create = (void *(*)(const char *, size_t, size_t, unsigned, void (*)(void *)))dlsym(RTLD_DEFAULT, "sk_cache_create");
    cache_alloc = (void *(*)(void *))dlsym(RTLD_DEFAULT, "sk_cache_alloc");
    cache_free = (void (*)(void *, void *))dlsym(RTLD_DEFAULT, "sk_cache_free");
    if (cache_create && cache_alloc && cache_free)
        skb_cache = cache_create("skbuff_head_cache", SKB_HEAD_SIZE, 0, 0x1u /* HWALIGN */, NULL);
}

static struct skb *skb_alloc(void)
{
    return skb_cache ? cache_alloc(skb_cache) : malloc(SKB_HEAD_SIZE);
}

static void skb_free(struct skb *skb)
{
    if (skb_cache)
        cache_free(skb_cache, skb);
    else
        free(skb);
}

struct receiver {
    int rfd, wfd;              /* the pipe senders write pointers into */
    long expect;               /* messages this receiver must read */
    unsigned long sum;         /* checksum of what it read, so reads happen */
};

struct sender {
    struct receiver *peers;    /* the fds receivers of its group */
    int id;
};

static pthread_barrier_t start_barrier;
static volatile unsigned long sink;

static void die(const char *what)
{
    fprintf(stderr, "messaging: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void *sender_main(void *arg)
{
    struct sender *s = arg;
    pthread_barrier_wait(&start_barrier);
    for (int l = 0; l < loops; l++) {
        for (int r = 0; r < fds; r++) {
            void *m;
            if (plain) {
                m = malloc((size_t)msg_size);
                if (!m)
                    die("malloc");
                memset(m, (s->id + l) & 0xff, (size_t)msg_size);
            } else {
                struct skb *skb = skb_alloc();
                if (!skb)
                    die("skb head");
                skb->data = malloc((size_t)msg_size + SKB_SHINFO_SIZE);
                skb->cred = malloc(CRED_SIZE);
                if (!skb->data || !skb->cred)
                    die("malloc");
                skb->len = (unsigned)msg_size;
                memset(skb->data, (s->id + l) & 0xff, (size_t)msg_size);
                memset(skb->data + msg_size, 0, 64);     /* the shared info's head */
                memset(skb->cred, s->id, CRED_SIZE);
                m = skb;
            }
            ssize_t w;
            while ((w = write(s->peers[r].wfd, &m, sizeof m)) < 0 && errno == EINTR)
                ;
            if (w != (ssize_t)sizeof m)
                die("write");
        }
    }
    return NULL;
}

static void *receiver_main(void *arg)
{
    struct receiver *r = arg;
    void *buf[64];
    size_t have = 0;            /* bytes of a partial pointer carried over */
    long got = 0;
    unsigned long sum = 0;
    pthread_barrier_wait(&start_barrier);
    while (got < r->expect) {
        ssize_t n = read(r->rfd, (char *)buf + have, sizeof buf - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die("read");
        have += (size_t)n;
        size_t k = have / sizeof buf[0];
        for (size_t i = 0; i < k; i++) {
            if (plain) {
                unsigned char *m = buf[i];
                sum += (unsigned long)m[0] + m[msg_size - 1];
                free(m);
                continue;
            }
            struct skb *skb = buf[i];
            sum += (unsigned long)skb->data[0] + skb->data[skb->len - 1] + *(unsigned char *)skb->cred;
            free(skb->data);
            free(skb->cred);
            skb_free(skb);
        }
        got += (long)k;
        have -= k * sizeof buf[0];
        if (have)
            memmove(buf, (char *)buf + k * sizeof buf[0], have);
    }
    r->sum = sum;
    return NULL;
}

/* One run: all threads of all groups, released together.  Returns elapsed
 * seconds; *cpu gets the process's CPU seconds (user + system) meanwhile. */
static double run_once(double *cpu)
{
    int nthreads = groups * fds * 2;
    struct receiver *recv = calloc((size_t)(groups * fds), sizeof *recv);
    struct sender *send = calloc((size_t)(groups * fds), sizeof *send);
    pthread_t *tid = calloc((size_t)nthreads, sizeof *tid);
    if (!recv || !send || !tid)
        die("calloc");
    pthread_barrier_init(&start_barrier, NULL, (unsigned)nthreads + 1);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128 * 1024);

    int t = 0;
    for (int g = 0; g < groups; g++) {
        for (int i = 0; i < fds; i++) {
            struct receiver *r = &recv[g * fds + i];
            int p[2];
            if (pipe(p) < 0)
                die("pipe");
            r->rfd = p[0];
            r->wfd = p[1];
            r->expect = (long)fds * loops;
            if (pthread_create(&tid[t++], &attr, receiver_main, r))
                die("pthread_create");
        }
        for (int i = 0; i < fds; i++) {
            struct sender *s = &send[g * fds + i];
            s->peers = &recv[g * fds];
            s->id = g * fds + i;
            if (pthread_create(&tid[t++], &attr, sender_main, s))
                die("pthread_create");
        }
    }
    pthread_barrier_wait(&start_barrier);
    uint64_t t0 = bench_now_ns();
    double c0 = bench_cpu_s();
    for (int i = 0; i < t; i++)
        pthread_join(tid[i], NULL);
    uint64_t t1 = bench_now_ns();
    *cpu = bench_cpu_s() - c0;

    unsigned long sum = 0;
    for (int i = 0; i < groups * fds; i++) {
        sum += recv[i].sum;
        close(recv[i].rfd);
        close(recv[i].wfd);
    }
    sink = sum;
    pthread_attr_destroy(&attr);
    pthread_barrier_destroy(&start_barrier);
    free(recv);
    free(send);
    free(tid);
    return (double)(t1 - t0) / 1e9;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: messaging [-g GROUPS] [-l LOOPS] [-f FDS] [-r RUNS] [-s SIZE] [-p] [-q]\n"
            "  -g  groups of FDS senders + FDS receivers (default 2)\n"
            "  -l  messages from each sender to each receiver (default 100)\n"
            "  -f  senders and receivers per group (default 20)\n"
            "  -r  runs in this process (default 1)\n"
            "  -s  message size in bytes (default 100)\n"
            "  -p  plain: one malloc'd SIZE-byte buffer per message, not skb head + data + cred\n"
            "  -q  print only \"ELAPSED CPU\" seconds of each run, one run a line\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int runs = 1, quiet = 0, c;
    while ((c = getopt(argc, argv, "g:l:f:r:s:pqh")) != -1) {
        switch (c) {
        case 'g': groups = atoi(optarg); break;
        case 'l': loops = atoi(optarg); break;
        case 'f': fds = atoi(optarg); break;
        case 'r': runs = atoi(optarg); break;
        case 's': msg_size = atoi(optarg); break;
        case 'p': plain = 1; break;
        case 'q': quiet = 1; break;
        default: usage();
        }
    }
    if (groups < 1 || fds < 1 || loops < 1 || runs < 1 || msg_size < 1)
        usage();
    if (!plain)
        skb_cache_init();
    if (!quiet)
        printf("# %d sender and %d receiver threads per group, %d groups (%d threads), "
               "%d loops, %d-byte messages\n", fds, fds, groups, groups * fds * 2, loops, msg_size);
    double *secs = calloc((size_t)runs, sizeof *secs);
    if (!secs)
        die("calloc");
    for (int i = 0; i < runs; i++) {
        if (runs > 1)
            bench_progress("messaging run %d/%d", i + 1, runs);
        double cpu;
        secs[i] = run_once(&cpu);
        if (quiet)
            printf("%.6f %.6f\n", secs[i], cpu);
        else
            printf("     Total time: %.3f [sec]  (CPU %.3f s)\n", secs[i], cpu);
        fflush(stdout);
    }
    bench_progress_done();
    if (runs > 1 && !quiet) {
        struct bench_stats s = bench_summary(secs, runs);
        /* perf stat's layout; the spread here is the sample stddev. */
        printf("\n %.4f +- %.4f seconds time elapsed  ( +- %.2f%% )\n", s.mean, s.stddev,
               s.mean > 0 ? s.stddev / s.mean * 100 : 0);
    }
    free(secs);
    return 0;
}
