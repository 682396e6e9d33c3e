/*
 * netscale — the analogue of the netperf request/response table from the
 * SLUB per-CPU partial series: N client threads each talk to a server
 * thread over an AF_UNIX socketpair (the traffic never leaves the process),
 * and every request and every reply is built the way the kernel builds a
 * socket buffer: a small header object (sk_buff-sized) plus a data buffer
 * of 64..4096 bytes.  The sender allocates and fills both and passes the
 * header's address through the socket; the receiver reads the data and
 * frees both, so every object is freed by another thread than the one that
 * allocated it.
 *
 *     netscale [-t THREADS] [-n TRANSACTIONS] [-r RUNS] [-q]
 *
 * THREADS clients and THREADS servers; TRANSACTIONS request/response pairs
 * in all, split evenly over the clients, so a run's length hardly depends
 * on THREADS.  Prints transactions per second of each run, of wall time and
 * of the process's CPU time ("-q": only the two numbers).  Links no allocator: choose one with LD_PRELOAD.
 */
#include "bench.h"

#include <errno.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* The socket-buffer analogue: header object + separately allocated data. */
struct msg {
    unsigned char *data;
    uint32_t len;
    uint32_t seq;
    unsigned char cb[48];      /* control block, as skb->cb */
    uint64_t pad[20];          /* header about the size of struct sk_buff */
};

struct conn {
    int fd[2];                 /* [0] client end, [1] server end */
    long transactions;
    uint64_t rng;
    unsigned long sum;
};

static pthread_barrier_t start_barrier;
static volatile unsigned long sink;

static void die(const char *what)
{
    fprintf(stderr, "netscale: %s: %s\n", what, strerror(errno));
    exit(1);
}

static uint32_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 11);
}

/* Payload sizes 64..4096, weighted towards small packets like real traffic. */
static uint32_t payload_len(uint64_t *rng)
{
    uint32_t r = next_rand(rng);
    switch (r & 3) {
    case 0: return 64 + (r >> 4) % 192;          /* acks, small requests */
    case 1: return 256 + (r >> 4) % 768;
    case 2: return 1024 + (r >> 4) % 1472;       /* about an MTU */
    default: return 64 + (r >> 4) % 4033;        /* anything up to a page */
    }
}

static void send_msg(int fd, uint64_t *rng, uint32_t seq)
{
    struct msg *m = malloc(sizeof *m);
    if (!m)
        die("malloc");
    m->len = payload_len(rng);
    m->seq = seq;
    m->data = malloc(m->len);
    if (!m->data)
        die("malloc");
    memset(m->data, (int)(seq & 0xff), m->len);
    m->cb[0] = (unsigned char)seq;
    ssize_t w;
    while ((w = write(fd, &m, sizeof m)) < 0 && errno == EINTR)
        ;
    if (w != (ssize_t)sizeof m)
        die("write");
}

static unsigned long recv_msg(int fd)
{
    struct msg *m;
    size_t have = 0;
    while (have < sizeof m) {
        ssize_t n = read(fd, (char *)&m + have, sizeof m - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            die("read");
        have += (size_t)n;
    }
    unsigned long s = (unsigned long)m->data[0] + m->data[m->len - 1] + m->cb[0];
    free(m->data);
    free(m);
    return s;
}

static void *client_main(void *arg)
{
    struct conn *c = arg;
    unsigned long sum = 0;
    pthread_barrier_wait(&start_barrier);
    for (long i = 0; i < c->transactions; i++) {
        send_msg(c->fd[0], &c->rng, (uint32_t)i);
        sum += recv_msg(c->fd[0]);
    }
    c->sum = sum;
    return NULL;
}

static void *server_main(void *arg)
{
    struct conn *c = arg;
    uint64_t rng = c->rng ^ 0x9e3779b97f4a7c15ull;
    unsigned long sum = 0;
    pthread_barrier_wait(&start_barrier);
    for (long i = 0; i < c->transactions; i++) {
        sum += recv_msg(c->fd[1]);
        send_msg(c->fd[1], &rng, (uint32_t)i);
    }
    c->sum += sum;
    return NULL;
}

/* Transactions a second of wall time; *cpu_tps: a second of this process's
 * CPU time (user + system), which other jobs on a shared machine barely
 * move. */
static double run_once(int threads, long total, double *cpu_tps)
{
    struct conn *conn = calloc((size_t)threads, sizeof *conn);
    pthread_t *tid = calloc((size_t)threads * 2, sizeof *tid);
    if (!conn || !tid)
        die("calloc");
    pthread_barrier_init(&start_barrier, NULL, (unsigned)threads * 2 + 1);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128 * 1024);
    long per = total / threads;
    if (per < 1)
        per = 1;
    for (int i = 0; i < threads; i++) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, conn[i].fd) < 0)
            die("socketpair");
        conn[i].transactions = per;
        conn[i].rng = 0x2545f4914f6cdd1dull * (uint64_t)(i + 1);
        if (pthread_create(&tid[2 * i], &attr, server_main, &conn[i]) ||
            pthread_create(&tid[2 * i + 1], &attr, client_main, &conn[i]))
            die("pthread_create");
    }
    pthread_barrier_wait(&start_barrier);
    uint64_t t0 = bench_now_ns();
    double c0 = bench_cpu_s();
    for (int i = 0; i < threads * 2; i++)
        pthread_join(tid[i], NULL);
    uint64_t t1 = bench_now_ns();
    double c1 = bench_cpu_s();
    *cpu_tps = c1 > c0 ? (double)per * threads / (c1 - c0) : 0;
    unsigned long sum = 0;
    for (int i = 0; i < threads; i++) {
        sum += conn[i].sum;
        close(conn[i].fd[0]);
        close(conn[i].fd[1]);
    }
    sink = sum;
    pthread_attr_destroy(&attr);
    pthread_barrier_destroy(&start_barrier);
    free(conn);
    free(tid);
    return (double)per * threads / ((double)(t1 - t0) / 1e9);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: netscale [-t THREADS] [-n TRANSACTIONS] [-r RUNS] [-q]\n"
            "  -t  client threads (and as many servers), default 16\n"
            "  -n  request/response transactions in all, default 200000\n"
            "  -r  runs in this process, default 1\n"
            "  -q  print only \"TPS CPU_TPS\" of each run (wall and CPU-time rates)\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int threads = 16, runs = 1, quiet = 0, c;
    long total = 200000;
    while ((c = getopt(argc, argv, "t:n:r:qh")) != -1) {
        switch (c) {
        case 't': threads = atoi(optarg); break;
        case 'n': total = atol(optarg); break;
        case 'r': runs = atoi(optarg); break;
        case 'q': quiet = 1; break;
        default: usage();
        }
    }
    if (threads < 1 || total < 1 || runs < 1)
        usage();
    if (!quiet)
        printf("# %d clients + %d servers over AF_UNIX socketpairs, %ld transactions\n",
               threads, threads, total);
    for (int i = 0; i < runs; i++) {
        if (runs > 1)
            bench_progress("netscale %d threads, run %d/%d", threads, i + 1, runs);
        double cpu_tps;
        double tps = run_once(threads, total, &cpu_tps);
        if (quiet)
            printf("%.0f %.0f\n", tps, cpu_tps);
        else
            printf("%8d threads  %12.0f transactions/s  %12.0f per CPU-second\n", threads, tps, cpu_tps);
        fflush(stdout);
    }
    bench_progress_done();
    return 0;
}
