/*
 * grouping — what pageblock migratetypes buy (issue 36, item 3): a mixed
 * workload run with page_grouping=1 (the default) and page_grouping=0.
 *
 * Each round interleaves, in one thread:
 *   - small objects: long-lived ones (malloc, 64..256 bytes, one every
 *     KEEP_EVERY allocations) kept to the end, as an index or a cache of a
 *     server grows, and transient ones (512..1024 bytes) freed at the
 *     round's end;
 *   - an sk_file written in 16 KiB pieces between them, 4 MiB a round,
 *     destroyed at the round's end (movable pages coming and going);
 *   - large blocks (malloc, 128 KiB..1 MiB), six a round, freed at its end.
 * After the last round only the long-lived objects are left; sk_trim then
 * gives back what it can.  Figures per run:
 *   peak      peak RSS (getrusage)
 *   rest      RSS after sk_trim
 *   pinned    2 MiB pageblocks of the slab zones that still hold a page
 *             in use (the long-lived objects' slabs)
 *   free2m    2 MiB pageblocks of the slab zones wholly free after the
 *             trim: regions that go back to the OS whole (or serve a huge
 *             page), and what grouping is for
 *   time      the rounds' wall time
 * Variants run in children that re-execute this program (options are read
 * once), alternating A B, B A, ...; medians of --reps runs (5 quick, 11
 * full).  Output: a table on stdout and in --out FILE.
 */
#include "bench.h"
#include "page/page.h"
#include "slabkit.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

enum { F_PEAK, F_REST, F_PINNED, F_FREE2M, F_TIME, F_FALLBACKS, F_CLAIMS, F_NR };
static const char *const fname[F_NR] = { "peak RSS (MiB)", "RSS after sk_trim (MiB)", "pageblocks pinned",
                                         "2 MiB regions free", "time (s)", "fallbacks", "claims" };
enum { V_ON, V_OFF, V_NR };
static const char *const vname[V_NR] = { "page_grouping=1", "page_grouping=0" };

#define ROUNDS_QUICK 30
#define ROUNDS_FULL 120
#define OBJS 40000
#define KEEP_EVERY 4
#define FILE_BYTES ((size_t)32 << 20)
#define PIECE ((size_t)16 << 10)
#define LARGE 6

static double rss_mib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2)
            res = 0;
        fclose(f);
    }
    return (double)res * (double)sysconf(_SC_PAGESIZE) / (1 << 20);
}

/* Pageblocks of the slab zones: managed, and wholly free. */
static void slab_zone_pageblocks(unsigned long *managed, unsigned long *free)
{
    *managed = *free = 0;
    for (unsigned nid = 0; nid < PAGE_MAX_NODES; nid++) {
        struct zone *z = zone_of_node(nid, ZONE_NORMAL);
        lock_acquire(&z->lock);
        *managed += z->managed_pages / PAGEBLOCK_PAGES;
        for (unsigned mt = 0; mt < MIGRATE_TYPES; mt++)
            for (unsigned o = PAGEBLOCK_ORDER; o <= SK_MAX_ORDER; o++)
                *free += (z->dirty[mt][o].nr + z->clean[mt][o].nr) << (o - PAGEBLOCK_ORDER);
        lock_release(&z->lock);
    }
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13, rnd_state ^= rnd_state >> 7, rnd_state ^= rnd_state << 17;
    return rnd_state;
}

static int child(int rounds)
{
    static void *kept[ROUNDS_FULL * (OBJS / KEEP_EVERY + 1)];
    static void *objs[OBJS];
    static char piece[PIECE];
    void *large[LARGE];
    size_t nkept = 0;
    memset(piece, 0x5a, sizeof piece);
    uint64_t t0 = bench_now_ns();
    for (int r = 0; r < rounds; r++) {
        sk_file_t *f = sk_file_create("grouping");
        if (!f)
            return 1;
        size_t off = 0;
        int nlarge = 0;
        for (int i = 0; i < OBJS; i++) {
            bool keep = i % KEEP_EVERY == 0;
            size_t sz = keep ? 64 + (size_t)(rnd() % 193) : 512 + (size_t)(rnd() % 513);
            objs[i] = malloc(sz);
            if (!objs[i])
                return 1;
            memset(objs[i], i, 64);
            if (i % (OBJS / (FILE_BYTES / PIECE)) == 0 && off < FILE_BYTES) {
                if (sk_file_pwrite(f, piece, PIECE, (off_t)off) != (ssize_t)PIECE)
                    return 1;
                off += PIECE;
            }
            if (i % (OBJS / LARGE) == 0 && nlarge < LARGE) {
                size_t lsz = ((size_t)128 << 10) + (size_t)(rnd() % (896u << 10));
                large[nlarge] = malloc(lsz);
                if (!large[nlarge])
                    return 1;
                memset(large[nlarge++], 1, lsz);
            }
        }
        for (int i = 0; i < OBJS; i++) {
            if (i % KEEP_EVERY == 0)
                kept[nkept++] = objs[i];
            else
                free(objs[i]);
        }
        for (int i = 0; i < nlarge; i++)
            free(large[i]);
        sk_file_destroy(f);
    }
    double secs = (double)(bench_now_ns() - t0) / 1e9;
    sk_trim();
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    unsigned long managed, freepb;
    slab_zone_pageblocks(&managed, &freepb);
    struct page_stats st;
    page_stats(&st);
    printf("%.2f %.2f %lu %lu %.4f %lu %lu\n", (double)ru.ru_maxrss / 1024, rss_mib(), managed - freepb, freepb,
           secs, st.mt_fallbacks, st.mt_claims);
    for (size_t i = 0; i < nkept; i++)
        free(kept[i]);
    return 0;
}

static char self_path[4096];

static int run_variant(int v, int rounds, double *out)
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        char opts[256], nbuf[16];
        const char *base = getenv("SLABKIT_OPTIONS");
        snprintf(opts, sizeof opts, "%s%s%s", base && *base ? base : "", base && *base ? "," : "", vname[v]);
        setenv("SLABKIT_OPTIONS", opts, 1);
        snprintf(nbuf, sizeof nbuf, "%d", rounds);
        execl(self_path, self_path, "--child", nbuf, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[512];
    ssize_t n = read(fd[0], buf, sizeof buf - 1);
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    if (n <= 0 || !WIFEXITED(st) || WEXITSTATUS(st))
        return -1;
    buf[n] = 0;
    return sscanf(buf, "%lf %lf %lf %lf %lf %lf %lf", &out[0], &out[1], &out[2], &out[3], &out[4], &out[5],
                  &out[6]) == F_NR ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "--child"))
        return child(atoi(argv[2]));
    int quick = 1;
    const char *out = NULL;
    bench_driver_args(argc, argv, &quick, &out);
    int reps = quick ? 5 : 11, rounds = quick ? ROUNDS_QUICK : ROUNDS_FULL;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
    if (reps < 1 || reps > 64)
        reps = 5;
    ssize_t len = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (len <= 0)
        return 1;
    self_path[len] = 0;
    static double v[V_NR][F_NR][64];
    for (int rep = 0; rep < reps; rep++) {
        for (int k = 0; k < V_NR; k++) {
            int var = rep % 2 ? V_NR - 1 - k : k;   /* A B, B A, ... */
            double f[F_NR];
            bench_progress("grouping: run %d of %d, %s", rep * V_NR + k + 1, reps * V_NR, vname[var]);
            if (run_variant(var, rounds, f) != 0) {
                fprintf(stderr, "grouping: the %s run failed\n", vname[var]);
                return 1;
            }
            for (int i = 0; i < F_NR; i++)
                v[var][i][rep] = f[i];
        }
    }
    bench_progress_done();
    char table[4096];
    int pos = snprintf(table, sizeof table,
                       "grouping: pageblock migratetypes on and off, %d rounds of %d small objects (1 in %d long-lived), "
                       "%zu MiB of sk_file pages and %d large blocks; medians of %d runs, alternated\n\n"
                       "%-26s %18s %18s %10s\n",
                       rounds, OBJS, KEEP_EVERY, FILE_BYTES >> 20, LARGE, reps, "", vname[V_ON], vname[V_OFF],
                       "on/off");
    for (int i = 0; i < F_NR; i++) {
        double on = bench_summary(v[V_ON][i], reps).median, off = bench_summary(v[V_OFF][i], reps).median;
        char ratio[16] = "-";
        if (off > 0)
            snprintf(ratio, sizeof ratio, "%.3f", on / off);
        pos += snprintf(table + pos, sizeof table - (size_t)pos, "%-26s %18.2f %18.2f %10s\n", fname[i], on, off,
                        ratio);
    }
    fputs(table, stdout);
    if (out) {
        FILE *f = fopen(out, "w");
        if (!f || fputs(table, f) < 0 || fclose(f) != 0) {
            fprintf(stderr, "grouping: cannot write %s\n", out);
            return 1;
        }
    }
    return 0;
}
