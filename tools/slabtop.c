/*
 * slabtop — procps's slabtop for a process that uses slabkit: its caches,
 * read from outside (tools/inspect, docs/inspect.md), on a full screen
 * refreshed every few seconds, with procps's header and sort keys.
 *
 *   slabtop -p PID [-o] [-d SECONDS] [-s KEY]
 *
 * The header is procps's five lines, then two of slabkit's page totals in
 * the same layout, so the screen fits 80 columns.
 *
 * Invariants: the terminal is put in non-canonical, no-echo mode only when
 * stdin is a terminal and -o is not given, and restored on every way out
 * (q, end of input, SIGINT/SIGTERM/SIGHUP, the process exiting); the screen
 * is plain ANSI escapes (alternate screen, home, clear to end of line and
 * of screen, reverse video), no terminal library.  Each refresh draws one
 * snapshot, so the header and the rows always agree.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "inspect/source.h"

/* ---- sorting: procps slabtop's keys ---- */

static int sort_key = 'o';

static unsigned long cache_kib(const struct sk_cache_info *i)
{
    return (unsigned long)((i->num_slabs * ((unsigned long long)SK_PAGE_SIZE << i->order)) >> 10);
}

static double use_pct(const struct sk_cache_info *i)
{
    return i->num_objs ? 100.0 * (double)i->active_objs / (double)i->num_objs : 0;
}

#define CMP_DESC(a, b) ((a) < (b) ? 1 : (a) > (b) ? -1 : 0)

static int compare(const void *pa, const void *pb)
{
    const struct sk_cache_info *a = &((const struct rmt_cache *)pa)->info;
    const struct sk_cache_info *b = &((const struct rmt_cache *)pb)->info;
    int r = 0;
    switch (sort_key) {
    case 'a': r = CMP_DESC(a->active_objs, b->active_objs); break;
    case 'b': r = CMP_DESC(a->objs_per_slab, b->objs_per_slab); break;
    case 'c': r = CMP_DESC(cache_kib(a), cache_kib(b)); break;
    case 'l': r = CMP_DESC(a->num_slabs, b->num_slabs); break;
    case 'v': r = CMP_DESC(a->active_slabs, b->active_slabs); break;
    case 'n': r = 0; break;
    case 'o': r = CMP_DESC(a->num_objs, b->num_objs); break;
    case 'p': r = CMP_DESC(a->order, b->order); break;
    case 's': r = CMP_DESC(a->size, b->size); break;
    case 'u': r = CMP_DESC(use_pct(a), use_pct(b)); break;
    }
    return r ? r : strcmp(a->name, b->name);
}

static const char sort_keys[] = "abclvnopsu";

/* ---- the screen ---- */

struct screen {
    FILE *out;
    int full;            /* full-screen mode: escapes, and rows bounded */
    int rows, cols;
};

static void window_size(struct screen *sc)
{
    struct winsize ws;
    sc->rows = 24;
    sc->cols = 80;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) {
        sc->rows = ws.ws_row;
        sc->cols = ws.ws_col;
    }
}

/* One line: clipped to the width on a full screen, cleared to its end. */
static void line(struct screen *sc, int *row, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void line(struct screen *sc, int *row, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (sc->full) {
        if (*row >= sc->rows)
            return;
        if (sc->cols > 0 && sc->cols < (int)sizeof buf)
            buf[sc->cols] = 0;
        fprintf(sc->out, "%s\033[K%s", buf, *row + 1 < sc->rows ? "\n" : "");
    } else {
        fprintf(sc->out, "%s\n", buf);
    }
    (*row)++;
}

static double kib(unsigned long long bytes)
{
    return (double)bytes / 1024.0;
}

static double pct(unsigned long long part, unsigned long long whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0;
}

static void draw(struct screen *sc, struct source *src)
{
    unsigned long long aobj = 0, tobj = 0, aslab = 0, tslab = 0, asize = 0, tsize = 0;
    size_t acache = 0;
    double minsz = 0, maxsz = 0;
    for (size_t k = 0; k < src->n; k++) {
        const struct sk_cache_info *i = &src->caches[k].info;
        aobj += i->active_objs;
        tobj += i->num_objs;
        aslab += i->active_slabs;
        tslab += i->num_slabs;
        asize += (unsigned long long)i->active_objs * i->size;
        tsize += (unsigned long long)i->num_objs * i->size;
        acache += i->active_objs != 0;
        if (k == 0 || kib(i->size) < minsz)
            minsz = kib(i->size);
        if (kib(i->size) > maxsz)
            maxsz = kib(i->size);
    }
    qsort(src->caches, src->n, sizeof *src->caches, compare);

    int row = 0;
    if (sc->full)
        fputs("\033[H", sc->out);
    line(sc, &row, " Active / Total Objects (%% used)    : %llu / %llu (%.1f%%)", aobj, tobj, pct(aobj, tobj));
    line(sc, &row, " Active / Total Slabs (%% used)      : %llu / %llu (%.1f%%)", aslab, tslab, pct(aslab, tslab));
    line(sc, &row, " Active / Total Caches (%% used)     : %zu / %zu (%.1f%%)", acache, src->n,
         pct(acache, src->n));
    line(sc, &row, " Active / Total Size (%% used)       : %.2fK / %.2fK (%.1f%%)", kib(asize), kib(tsize),
         pct(asize, tsize));
    line(sc, &row, " Minimum / Average / Maximum Object : %.2fK / %.2fK / %.2fK", minsz,
         tobj ? kib(tsize) / (double)tobj : 0, maxsz);
    const struct rmt_totals *t = &src->totals;
    /* slabkit's page totals, in procps's layout (80 columns). */
    line(sc, &row, " Pages Managed / Free (Resident)    : %lu / %lu (%lu)", t->managed_pages, t->free_pages,
         t->resident_pages);
    line(sc, &row, " Pages Per-CPU / Returned; Address  : %lu / %lu; %zu MiB reserved", t->pcp_pages, t->returned_pages,
         t->reserved_bytes >> 20);
    for (unsigned nid = 0; nid < t->nodes && nid < SLABINFO_NODES_MAX; nid++)
        line(sc, &row, " Node %u Pages In Use / Managed       : %lu / %lu (%lu free, %lu resident)", nid,
             t->node_used[nid], t->node_managed[nid], t->node_free[nid], t->node_resident[nid]);
    line(sc, &row, "%s", "");
    const char *head = "  OBJS ACTIVE  USE OBJ SIZE  SLABS OBJ/SLAB CACHE SIZE NAME";
    if (sc->full)
        line(sc, &row, "\033[7m%-*s\033[0m", sc->cols > 0 && sc->cols < 200 ? sc->cols : 0, head);
    else
        line(sc, &row, "%s", head);
    for (size_t k = 0; k < src->n; k++) {
        const struct sk_cache_info *i = &src->caches[k].info;
        line(sc, &row, "%6lu %6lu %3.0f%% %7.2fK %6lu %8u %9luK %s%s", i->num_objs, i->active_objs, use_pct(i),
             kib(i->size), i->num_slabs, i->objs_per_slab, cache_kib(i), i->name, src->caches[k].approx ? " ~" : "");
    }
    if (sc->full) {
        fputs("\033[J", sc->out);
    }
    fflush(sc->out);
}

/* ---- the terminal ---- */

static struct termios saved_tio;
static int tio_saved, screen_entered;
static volatile sig_atomic_t stop_sig, resized;

static void on_signal(int sig)
{
    if (sig == SIGWINCH)
        resized = 1;
    else
        stop_sig = sig;
}

static void term_enter(struct screen *sc)
{
    struct termios t;
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
        t = saved_tio;
        t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        t.c_cc[VMIN] = 0;
        t.c_cc[VTIME] = 0;
        if (tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0)
            tio_saved = 1;
    }
    /* Alternate screen, cursor hidden, cleared. */
    fputs("\033[?1049h\033[?25l\033[H\033[2J", sc->out);
    screen_entered = 1;
}

static void term_leave(struct screen *sc)
{
    if (screen_entered)
        fputs("\033[?25h\033[?1049l", sc->out);
    screen_entered = 0;
    fflush(sc->out);
    if (tio_saved)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
    tio_saved = 0;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: slabtop -p PID [-o] [-d SECONDS] [-s KEY]\n"
            "  slabkit's caches of a running process, like procps slabtop (read from outside:\n"
            "  same user or root; see slabkit-slabtop(1) for kernel.yama.ptrace_scope)\n"
            "  -p, --pid PID       the process (LD_PRELOAD'ed libslabkit.so.0 or linked with libslabkit.a)\n"
            "  -o, --once          print one screen to stdout and exit\n"
            "  -d, --delay SECONDS refresh period (default 3)\n"
            "  -s, --sort KEY      a: active objects  b: objects per slab  c: cache size  l: slabs\n"
            "                      v: active slabs  n: name  o: objects (default)  p: pages per slab\n"
            "                      s: object size  u: utilization\n"
            "  keys while running: the sort keys above, space to refresh now, q to quit\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "pid", required_argument, NULL, 'p' }, { "once", no_argument, NULL, 'o' },
        { "delay", required_argument, NULL, 'd' }, { "sort", required_argument, NULL, 's' },
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
    };
    long pid = 0;
    double delay = 3;
    int once = 0, opt;
    char *end;
    while ((opt = getopt_long(argc, argv, "p:od:s:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'p':
            pid = strtol(optarg, &end, 10);
            if (*end || pid <= 0 || pid > 0x3fffffff) {
                fprintf(stderr, "slabtop: -p wants a process id, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'o':
            once = 1;
            break;
        case 'd':
            delay = strtod(optarg, &end);
            if (*end || !(delay > 0) || delay > 86400) {
                fprintf(stderr, "slabtop: -d wants a delay in seconds, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 's':
            if (strlen(optarg) != 1 || !strchr(sort_keys, optarg[0])) {
                fprintf(stderr, "slabtop: -s wants one of %s, not '%s'\n", sort_keys, optarg);
                return 2;
            }
            sort_key = optarg[0];
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!pid || optind != argc) {
        fprintf(stderr, "slabtop: %s\n", pid ? "unexpected argument" : "-p PID is needed: which process to show");
        usage(stderr);
        return 2;
    }

    struct source src;
    char err[512];
    if (source_open_pid(&src, (pid_t)pid, err, sizeof err) != 0) {
        fprintf(stderr, "slabtop: %s\n", err);
        return 1;
    }
    struct screen sc = { stdout, 0, 0, 0 };
    if (once) {
        draw(&sc, &src);
        source_close(&src);
        return 0;
    }

    /* Not a terminal (a pipe, a file): frames of plain text, a blank line
     * between them, as top -b writes; no escape codes, no keys. */
    sc.full = isatty(STDOUT_FILENO);
    if (!sc.full) {
        signal(SIGPIPE, SIG_DFL);
        for (;;) {
            draw(&sc, &src);
            if (ferror(sc.out))
                break;
            struct timespec ts = { (time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9) };
            nanosleep(&ts, NULL);
            if (source_refresh(&src, err, sizeof err) != 0) {
                fprintf(stderr, "slabtop: %s\n", err);
                source_close(&src);
                return 1;
            }
            fputc('\n', sc.out);
        }
        source_close(&src);
        return 0;
    }
    window_size(&sc);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;   /* no SA_RESTART: poll returns EINTR */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGWINCH, &sa, NULL);
    term_enter(&sc);
    int rc = 0, input = 1;
    draw(&sc, &src);
    while (!stop_sig) {
        struct pollfd pfd = { STDIN_FILENO, POLLIN, 0 };
        int r = poll(&pfd, input ? 1 : 0, (int)(delay * 1000));
        if (stop_sig)
            break;
        if (r < 0 && errno == EINTR) {
            if (resized) {
                resized = 0;
                window_size(&sc);
                fputs("\033[2J", sc.out);
                draw(&sc, &src);
            }
            continue;
        }
        int quit = 0, now = 0;
        if (r > 0) {
            char keys[32];
            ssize_t got = read(STDIN_FILENO, keys, sizeof keys);
            if (got <= 0) {
                input = 0;   /* end of input: keep refreshing on the timer */
                continue;
            }
            for (ssize_t k = 0; k < got; k++) {
                char c = keys[k];
                if (c == 'q' || c == 'Q')
                    quit = 1;
                else if (c == ' ')
                    now = 1;
                else if (c >= 'A' && c <= 'Z' && strchr(sort_keys, c - 'A' + 'a'))
                    sort_key = c - 'A' + 'a';
                else if (strchr(sort_keys, c) && c)
                    sort_key = c;
            }
            if (quit)
                break;
            if (!now) {
                draw(&sc, &src);   /* the new order at once, on the same snapshot */
                continue;
            }
        }
        if (source_refresh(&src, err, sizeof err) != 0) {
            term_leave(&sc);
            fprintf(stderr, "slabtop: %s\n", err);
            rc = 1;
            break;
        }
        draw(&sc, &src);
    }
    term_leave(&sc);
    source_close(&src);
    return rc;
}
