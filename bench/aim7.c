/*
 * aim7 — the analogue of the AIM7 fserver and high_systime workloads the
 * kernel's mutex spinning series was measured with.
 *
 * "Users" are threads; each runs jobs that mix private work, short system
 * calls and short critical sections on a few shared mutex-protected
 * structures: an orphan list every job adds itself to and later removes
 * itself from (the ext4 orphan list the seed contended on) and a small
 * hash table of counters with a lock per bucket.
 *   fserver       more private work, four critical sections per job, and
 *                 one bucket section in eight makes a system call while
 *                 holding its lock (a holder that is slow for a moment);
 *   high_systime  less private work, eight system calls per job, the
 *                 orphan list twice per job.
 * Five mutexes run the same jobs: sk_mutex (the default, mutex_spin=1:
 * the seed's "after"), sk_mutex mutex_spin=mcs (the seed's "before": the
 * MCS queue a spinner cannot leave and the unlock under the wait lock, as
 * kernel mutexes were before the Feb 2014 series), sk_mutex mutex_spin=0
 * (no spinning at all), pthread_mutex (default) and pthread_mutex
 * (PTHREAD_MUTEX_ADAPTIVE_NP).  Every run is a fresh child process (this
 * program re-executed with --child), the sk_mutex variants choosing their
 * mode through SLABKIT_OPTIONS, the real option path.  Variants are
 * interleaved (A B C D E A B C D E ...) and each point is the median of
 * the runs.  The report: jobs per minute for each user count; the seed's
 * table, % improvement in throughput of after over before by user range
 * (10-90, 100-900, 1000-2000), beside the seed's own figures and the
 * other mutexes; the worst time any waiter waited for a mutex;
 * results/aim7.txt and results/aim7.png.
 *
 *   aim7 [--quick] [--runs N] [--users 10,100,1000] [--jobs N] [--after OPTS]
 *   --after: options added to the default's (the seed's after), e.g.
 *   mutex_handoff=0,mutex_wake_spin=0 for 3.15 without the 2016 additions.
 *   quick: 6 user counts (two per range), 5 runs, 40000 jobs per run
 *   (about a minute on 2 idle CPUs); full: 24 user counts, 5 runs, 200000
 *   jobs per run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "slabkit.h"
#include "lock/mutex_internal.h"

/* The sk_mutex variants come first (v <= V_SK_NOSPIN), each with the
 * mutex_spin value its child runs with. */
enum { V_SK, V_SK_MCS, V_SK_NOSPIN, V_PT, V_PT_ADAPTIVE, NVAR };
static const char *const var_name[NVAR] = {
    "sk_mutex", "sk_mutex mcs", "sk_mutex spin=0", "pthread", "pthread adaptive",
};
/* The after's options: mutex_spin=1, plus what --after adds (the default's
 * later additions switched off, to compare 3.15 itself with 3.13). */
static char after_option[160] = "mutex_spin=1";
static const char *var_option[V_PT] = { after_option, "mutex_spin=mcs", "mutex_spin=0" };
static const long var_mode[V_PT] = { MUTEX_SPIN_ON, MUTEX_SPIN_MCS, MUTEX_SPIN_OFF };
enum { W_FSERVER, W_HIGH_SYSTIME, NWL };
static const char *const wl_name[NWL] = { "fserver", "high_systime" };

/* ---- the child: one run of one variant ------------------------------------- */

struct lk {
    union { sk_mutex_t sk; pthread_mutex_t pt; } u;
} __attribute__((aligned(64)));

struct onode { struct onode *next, *prev; long ino; };

#define NBUCKET 8
static struct {
    struct lk orphan_lock;
    struct onode orphan;                    /* list head */
    long orphan_len;
    struct lk bucket_lock[NBUCKET];
    struct { long count[8]; } __attribute__((aligned(64))) bucket[NBUCKET];
} S;

static int variant, workload, devnull = -1;
static long jobs_per_user;
static pthread_barrier_t start_barrier;
static int arrived;                     /* users waiting at the start barrier */

static void lk_init(struct lk *l)
{
    if (variant <= V_SK_NOSPIN) {
        sk_mutex_init(&l->u.sk);
        return;
    }
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    if (variant == V_PT_ADAPTIVE)
        pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&l->u.pt, &a);
    pthread_mutexattr_destroy(&a);
}

static inline int lk_try(struct lk *l)
{
    if (variant <= V_SK_NOSPIN)
        return sk_mutex_trylock(&l->u.sk);
    return pthread_mutex_trylock(&l->u.pt) == 0;
}

/* Lock; the time spent waiting goes into *worst when it is the longest. */
static inline void lk_lock(struct lk *l, uint64_t *worst)
{
    if (lk_try(l))
        return;
    uint64_t t0 = bench_now_ns();
    if (variant <= V_SK_NOSPIN)
        sk_mutex_lock(&l->u.sk);
    else
        pthread_mutex_lock(&l->u.pt);
    uint64_t w = bench_now_ns() - t0;
    if (w > *worst)
        *worst = w;
}

static inline void lk_unlock(struct lk *l)
{
    if (variant <= V_SK_NOSPIN)
        sk_mutex_unlock(&l->u.sk);
    else
        pthread_mutex_unlock(&l->u.pt);
}

static inline unsigned private_work(unsigned x, int n)
{
    for (int i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

static inline void short_syscall(int i)
{
    static const char buf[64];
    if (i & 1)
        (void)!write(devnull, buf, sizeof buf);
    else
        (void)syscall(SYS_getppid);
}

static void orphan_add(struct onode *n)
{
    /* Like ext4: check the head entries, then link at the head. */
    long seen = 0;
    for (struct onode *p = S.orphan.next; p != &S.orphan && seen < 4; p = p->next)
        seen += p->ino == n->ino;
    n->next = S.orphan.next;
    n->prev = &S.orphan;
    S.orphan.next->prev = n;
    S.orphan.next = n;
    S.orphan_len += 1 + seen * 0;
}

static void orphan_del(struct onode *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    S.orphan_len--;
}

static void bucket_update(unsigned h, int slow)
{
    for (int i = 0; i < 8; i++)
        S.bucket[h].count[i] += i + 1;
    if (slow)
        short_syscall(1);               /* the holder is slow for a moment */
}

struct user { pthread_t t; uint64_t worst; unsigned id; };

static void *user_main(void *arg)
{
    struct user *u = arg;
    struct onode node = { NULL, NULL, (long)u->id };
    unsigned x = u->id * 2654435761u + 1;
    uint64_t worst = 0;
    __atomic_fetch_add(&arrived, 1, __ATOMIC_RELEASE);
    pthread_barrier_wait(&start_barrier);
    for (long j = 0; j < jobs_per_user; j++) {
        unsigned h = (x >> 13) % NBUCKET, h2 = (x >> 17) % NBUCKET;
        if (workload == W_FSERVER) {
            x = private_work(x, 600);
            lk_lock(&S.orphan_lock, &worst);
            orphan_add(&node);
            lk_unlock(&S.orphan_lock);
            short_syscall(0);
            short_syscall(1);
            x = private_work(x, 300);
            lk_lock(&S.bucket_lock[h], &worst);
            bucket_update(h, (x & 0x700) == 0);
            lk_unlock(&S.bucket_lock[h]);
            x = private_work(x, 300);
            lk_lock(&S.bucket_lock[h2], &worst);
            bucket_update(h2, 0);
            lk_unlock(&S.bucket_lock[h2]);
            lk_lock(&S.orphan_lock, &worst);
            orphan_del(&node);
            lk_unlock(&S.orphan_lock);
        } else {
            x = private_work(x, 200);
            for (int i = 0; i < 4; i++)
                short_syscall(i);
            lk_lock(&S.orphan_lock, &worst);
            orphan_add(&node);
            lk_unlock(&S.orphan_lock);
            for (int i = 0; i < 4; i++)
                short_syscall(i);
            lk_lock(&S.bucket_lock[h], &worst);
            bucket_update(h, 0);
            lk_unlock(&S.bucket_lock[h]);
            lk_lock(&S.orphan_lock, &worst);
            orphan_del(&node);
            lk_unlock(&S.orphan_lock);
        }
    }
    u->worst = worst;
    return NULL;
}

/* Prints "jpm worst_wait_ns handoffs spin_acquired sleeps". */
static int child_main(int v, int w, int users, long jobs)
{
    variant = v;
    workload = w;
    jobs_per_user = jobs;
    devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (v <= V_SK_NOSPIN && sk_option("mutex_spin") != var_mode[v]) {
        fprintf(stderr, "aim7: SLABKIT_OPTIONS did not reach the child (mutex_spin=%ld)\n",
                sk_option("mutex_spin"));
        return 1;
    }
    lk_init(&S.orphan_lock);
    for (int i = 0; i < NBUCKET; i++)
        lk_init(&S.bucket_lock[i]);
    S.orphan.next = S.orphan.prev = &S.orphan;
    struct user *u = calloc((size_t)users, sizeof *u);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_barrier_init(&start_barrier, NULL, (unsigned)users + 1);
    for (int i = 0; i < users; i++) {
        u[i].id = (unsigned)i + 1;
        if (pthread_create(&u[i].t, &attr, user_main, &u[i])) {
            fprintf(stderr, "aim7: cannot create user %d: %s\n", i, strerror(errno));
            return 1;
        }
    }
    /* Start the clock before the last arrival (us) opens the barrier. */
    while (__atomic_load_n(&arrived, __ATOMIC_ACQUIRE) < users)
        usleep(1000);
    uint64_t t0 = bench_now_ns();
    pthread_barrier_wait(&start_barrier);
    uint64_t worst = 0;
    for (int i = 0; i < users; i++) {
        pthread_join(u[i].t, NULL);
        if (u[i].worst > worst)
            worst = u[i].worst;
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    if (S.orphan_len != 0 || S.orphan.next != &S.orphan) {
        fprintf(stderr, "aim7: orphan list corrupt (%ld left)\n", S.orphan_len);
        return 1;
    }
    unsigned long st[MUTEX_STAT_NR];
    lock_mutex_stats(st);
    printf("%.1f %llu %lu %lu %lu\n", (double)users * (double)jobs / secs * 60.0,
           (unsigned long long)worst, st[MUTEX_HANDOFF_DONE], st[MUTEX_SPIN_ACQUIRED], st[MUTEX_SLEEP]);
    return 0;
}

/* ---- the parent: runs, medians, report --------------------------------------- */

struct result { double jpm; double worst_ns; double handoffs, spun, sleeps; int ok; };

static char self_path[4096];

static struct result run_child(int v, int w, int users, long jobs)
{
    struct result r = { 0, 0, 0, 0, 0, 0 };
    int fd[2];
    if (pipe(fd))
        return r;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        if (v <= V_SK_NOSPIN)
            setenv("SLABKIT_OPTIONS", var_option[v], 1);
        else
            unsetenv("SLABKIT_OPTIONS");
        char a1[16], a2[16], a3[16], a4[32];
        snprintf(a1, sizeof a1, "%d", v);
        snprintf(a2, sizeof a2, "%d", w);
        snprintf(a3, sizeof a3, "%d", users);
        snprintf(a4, sizeof a4, "%ld", jobs);
        execl(self_path, self_path, "--child", a1, a2, a3, a4, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[256];
    ssize_t n = 0, k;
    while (n < (ssize_t)sizeof buf - 1 && (k = read(fd[0], buf + n, sizeof buf - 1 - (size_t)n)) > 0)
        n += k;
    buf[n > 0 ? n : 0] = 0;
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
        sscanf(buf, "%lf %lf %lf %lf %lf", &r.jpm, &r.worst_ns, &r.handoffs, &r.spun, &r.sleeps) == 5)
        r.ok = 1;
    return r;
}

#define MAXU 64
#define MAXRUNS 15
static int users[MAXU], nusers;
static int runs = 5;
static long total_jobs = 200000;
static struct result res[NWL][MAXU][NVAR][MAXRUNS];
static struct point { double jpm, noise, worst_ns, handoffs; } pt[NWL][MAXU][NVAR];

static const struct { int lo, hi; const char *name; } range[] = {
    { 10, 99, "10-90" }, { 100, 999, "100-900" }, { 1000, 2000, "1000-2000" },
};
#define NRANGE 3

static long jobs_for(int u)
{
    long j = total_jobs / u;
    return j < 2 ? 2 : j;
}

static void summarize(void)
{
    for (int w = 0; w < NWL; w++)
        for (int i = 0; i < nusers; i++)
            for (int v = 0; v < NVAR; v++) {
                double jpm[MAXRUNS];
                int n = 0;
                double worst = 0, ho = 0;
                for (int r = 0; r < runs; r++) {
                    struct result *x = &res[w][i][v][r];
                    if (!x->ok)
                        continue;
                    jpm[n++] = x->jpm;
                    if (x->worst_ns > worst)
                        worst = x->worst_ns;
                    ho += x->handoffs;
                }
                struct bench_stats s = bench_summary(jpm, n);
                pt[w][i][v].jpm = s.median;
                pt[w][i][v].noise = s.median > 0 ? s.stddev / s.median : 0;
                pt[w][i][v].worst_ns = worst;
                pt[w][i][v].handoffs = n ? ho / n : 0;
            }
}

/* Mean of the medians over the user counts in range r (0 if none). */
static double range_mean(int w, int r, int v, double *noise, double *worst, double *ho)
{
    double sum = 0, nsum = 0, wmax = 0, hsum = 0;
    int n = 0;
    for (int i = 0; i < nusers; i++) {
        if (users[i] < range[r].lo || users[i] > range[r].hi)
            continue;
        sum += pt[w][i][v].jpm;
        nsum += pt[w][i][v].noise;
        hsum += pt[w][i][v].handoffs;
        if (pt[w][i][v].worst_ns > wmax)
            wmax = pt[w][i][v].worst_ns;
        n++;
    }
    if (noise)
        *noise = n ? nsum / n : 0;
    if (worst)
        *worst = wmax;
    if (ho)
        *ho = n ? hsum / n : 0;
    return n ? sum / n : 0;
}

static double pct(double a, double b) { return b > 0 ? (a - b) / b * 100.0 : 0; }

/* The seed's figures (Jason Low's reply to the series, Feb 2014): % change
 * in AIM7 throughput with patches 1-6, by workload and user range (the
 * order of range[]), on his 2-socket and 8-socket machines. */
static const double seed_2s[NWL][NRANGE] = { { -0.7, 0.0, 1.8 }, { 0.0, 0.4, 0.8 } };
static const double seed_8s[NWL][NRANGE] = { { 0.4, 10.0, 29.2 }, { 3.1, 49.2, 34.9 } };

static void rule(FILE *f) { fprintf(f, "%.*s\n", 95, "-----------------------------------------------------------------------------------------------------------"); }

/* The seed's table: per workload, the ranges from the most users down;
 * "% improvement with patches" is after (the default) over before (mcs). */
static void seed_table(FILE *f)
{
    fprintf(f, "%% improvement in throughput with the series: sk_mutex after (mutex_spin=1, the default)\n"
               "over before (mutex_spin=mcs), by user range, in the seed's table shape; beside it the seed's\n"
               "own figures, then the default against no spinning and pthread mutexes.  noise: run-to-run\n"
               "stddev/median of after and before (the larger), averaged over the range.\n");
    for (int w = 0; w < NWL; w++) {
        if (w)
            fprintf(f, "\n");
        rule(f);
        fprintf(f, "%s\n", wl_name[w]);
        rule(f);
        fprintf(f, "%-10s| %-14s| %-9s| %-9s| %-10s| %-10s| %-11s| %s\n", "users", "% improvement", "seed",
                "seed", "after vs", "after vs", "after vs", "noise");
        fprintf(f, "%-10s| %-14s| %-9s| %-9s| %-10s| %-10s| %-11s|\n", "", "in throughput", "2-socket",
                "8-socket", "spin=0", "pthread", "pthread");
        fprintf(f, "%-10s| %-14s| %-9s| %-9s| %-10s| %-10s| %-11s|\n", "", "with patches", "", "", "", "",
                "adaptive");
        rule(f);
        for (int r = NRANGE - 1; r >= 0; r--) {
            double na, nb;
            double after = range_mean(w, r, V_SK, &na, NULL, NULL);
            if (after == 0)
                continue;
            double before = range_mean(w, r, V_SK_MCS, &nb, NULL, NULL);
            double ns = range_mean(w, r, V_SK_NOSPIN, NULL, NULL, NULL);
            double pd = range_mean(w, r, V_PT, NULL, NULL, NULL);
            double pa = range_mean(w, r, V_PT_ADAPTIVE, NULL, NULL, NULL);
            fprintf(f, "%-10s| %+12.1f%% | %+7.1f%% | %+7.1f%% | %+8.1f%% | %+8.1f%% | %+9.1f%% | %4.1f%%\n",
                    range[r].name, pct(after, before), seed_2s[w][r], seed_8s[w][r], pct(after, ns),
                    pct(after, pd), pct(after, pa), (na > nb ? na : nb) * 100);
            rule(f);
        }
    }
}

static void report(FILE *f, int quick)
{
    fprintf(f, "aim7 analogue (%s mode): %d runs per point, variants interleaved, medians; "
            "%ld jobs per run split over the users\n", quick ? "quick" : "full", runs, total_jobs);
    fprintf(f, "machine: %ld CPUs online; sk_mutex (after) runs with %s\n\n", sysconf(_SC_NPROCESSORS_ONLN),
            after_option);
    for (int w = 0; w < NWL; w++) {
        fprintf(f, "%s: jobs per minute (median; noise = run-to-run stddev/median of sk_mutex and sk_mutex mcs)\n",
                wl_name[w]);
        fprintf(f, "%6s %12s %13s %16s %12s %17s %13s\n", "users", var_name[0], var_name[1], var_name[2],
                var_name[3], var_name[4], "noise");
        for (int i = 0; i < nusers; i++)
            fprintf(f, "%6d %12.0f %13.0f %16.0f %12.0f %17.0f %5.1f%%/%5.1f%%\n", users[i], pt[w][i][0].jpm,
                    pt[w][i][1].jpm, pt[w][i][2].jpm, pt[w][i][3].jpm, pt[w][i][4].jpm,
                    pt[w][i][V_SK].noise * 100, pt[w][i][V_SK_MCS].noise * 100);
        fprintf(f, "\n");
    }
    seed_table(f);
    fprintf(f, "\nworst wait for a mutex (ms, the longest of all runs), and sk_mutex hand-offs per run\n");
    fprintf(f, "%-14s %-10s %9s %13s %16s %9s %17s %10s\n", "workload", "users", var_name[0], var_name[1],
            var_name[2], var_name[3], var_name[4], "hand-offs");
    for (int w = 0; w < NWL; w++)
        for (int r = 0; r < NRANGE; r++) {
            double wv[NVAR], ho;
            if (range_mean(w, r, V_SK, NULL, &wv[0], &ho) == 0)
                continue;
            for (int v = 1; v < NVAR; v++)
                range_mean(w, r, v, NULL, &wv[v], NULL);
            fprintf(f, "%-14s %-10s %9.2f %13.2f %16.2f %9.2f %17.2f %10.0f\n", wl_name[w], range[r].name,
                    wv[0] / 1e6, wv[1] / 1e6, wv[2] / 1e6, wv[3] / 1e6, wv[4] / 1e6, ho);
        }
    fprintf(f, "stated bound: a sk_mutex waiter that has waited %.0f ms and loses a wake-up takes the "
            "hand-off token;\nthe next unlock then passes the mutex to it (docs/mutex.md).  Waits above "
            "include the time a\nwoken thread waits for a CPU among %s runnable users on this machine.\n",
            MUTEX_STARVE_NS / 1e6, "up to 2000");
}

static void plot(void)
{
    FILE *d = fopen("results/aim7.dat", "w");
    if (!d)
        return;
    for (int w = 0; w < NWL; w++) {
        fprintf(d, "# %s\n", wl_name[w]);
        for (int i = 0; i < nusers; i++)
            fprintf(d, "%d %.0f %.0f %.0f %.0f %.0f\n", users[i], pt[w][i][0].jpm, pt[w][i][1].jpm,
                    pt[w][i][2].jpm, pt[w][i][3].jpm, pt[w][i][4].jpm);
        fprintf(d, "\n\n");
    }
    fclose(d);
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        printf("(results/aim7.png skipped: gnuplot is not installed)\n");
        return;
    }
    FILE *g = popen("gnuplot", "w");
    if (!g)
        return;
    fprintf(g, "set terminal png size 1200,500\nset output 'results/aim7.png'\n"
               "set termoption noenhanced\nset multiplot layout 1,2\nset logscale x\nset xrange [5:3000]\nset xlabel 'users (threads)'\n"
               "set ylabel 'jobs per minute'\nset key bottom left\nset grid\n");
    for (int w = 0; w < NWL; w++) {
        fprintf(g, "set title 'aim7 %s'\nplot ", wl_name[w]);
        for (int v = 0; v < NVAR; v++)
            fprintf(g, "'results/aim7.dat' index %d using 1:%d with linespoints title '%s'%s", w, v + 2,
                    var_name[v], v < NVAR - 1 ? ", " : "\n");
    }
    fprintf(g, "unset multiplot\n");
    if (pclose(g) == 0)
        printf("plot: results/aim7.png\n");
}

static void parse_users(const char *s)
{
    nusers = 0;
    while (*s && nusers < MAXU) {
        users[nusers++] = atoi(s);
        s = strchr(s, ',');
        if (!s)
            break;
        s++;
    }
}

int main(int argc, char **argv)
{
    if (argc == 6 && !strcmp(argv[1], "--child"))
        return child_main(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atol(argv[5]));

    int quick = 0;
    const char *ulist = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--users") && i + 1 < argc)
            ulist = argv[++i];
        else if (!strcmp(argv[i], "--jobs") && i + 1 < argc)
            total_jobs = atol(argv[++i]);
        else if (!strcmp(argv[i], "--after") && i + 1 < argc)
            snprintf(after_option, sizeof after_option, "mutex_spin=1,%s", argv[++i]);
        else {
            fprintf(stderr, "usage: aim7 [--quick] [--runs N] [--users 10,100,...] [--jobs N] [--after OPTS]\n");
            return 2;
        }
    }
    if (quick) {
        parse_users(ulist ? ulist : "10,90,100,900,1000,2000");
        if (total_jobs == 200000)
            total_jobs = 40000;
    } else {
        parse_users(ulist ? ulist : "10,20,30,40,50,60,70,80,90,100,200,300,400,500,600,700,800,900,"
                                    "1000,1200,1400,1600,1800,2000");
    }
    if (runs < 1)
        runs = 1;
    if (runs > MAXRUNS)
        runs = MAXRUNS;
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (n <= 0) {
        fprintf(stderr, "aim7: cannot find my own executable\n");
        return 1;
    }
    self_path[n] = 0;

    uint64_t t0 = bench_now_ns();
    int total = NWL * nusers * runs * NVAR, done = 0, failed = 0;
    for (int w = 0; w < NWL; w++)
        for (int i = 0; i < nusers; i++)
            for (int r = 0; r < runs; r++)
                for (int v = 0; v < NVAR; v++) {
                    bench_progress("aim7 %s users=%d run %d/%d %s (%d/%d, %.0f s)", wl_name[w], users[i],
                                   r + 1, runs, var_name[v], done, total, (bench_now_ns() - t0) / 1e9);
                    res[w][i][v][r] = run_child(v, w, users[i], jobs_for(users[i]));
                    failed += !res[w][i][v][r].ok;
                    done++;
                }
    bench_progress_done();
    fprintf(stderr, "aim7: %d runs in %.1f s%s\n", total, (bench_now_ns() - t0) / 1e9,
            failed ? " (some runs FAILED)" : "");
    summarize();
    report(stdout, quick);
    mkdir("results", 0755);
    FILE *f = fopen("results/aim7.txt", "w");
    if (f) {
        report(f, quick);
        fclose(f);
    }
    plot();
    return failed ? 1 : 0;
}
