/*
 * slabinfo_format — sk_slabinfo writes /proc/slabinfo version 2.1 exactly,
 * and its numbers are the caches' counters:
 *
 *  - the two header lines, byte for byte as the kernel prints them;
 *  - one line per cache, in sk_cache_foreach order, each with the 16
 *    fields in their places: name, active_objs, num_objs, objsize,
 *    objperslab, pagesperslab, ":", "tunables", limit, batchcount,
 *    sharedfactor, ":", "slabdata", active_slabs, num_slabs, sharedavail;
 *  - every value equals sk_cache_info of the same cache taken right after
 *    (nothing allocates in between: the output buffer is allocated before
 *    the first cache is read); objsize = stride, pagesperslab = 2^order,
 *    num_objs = num_slabs x objperslab, active <= num, batchcount in
 *    1..limit, sharedavail (objects in the node's barn) at most
 *    sharedfactor x batchcount and at most the free objects;
 *  - a cache with a 31-character name still has its 16 fields; a created
 *    cache appears, a destroyed one disappears;
 *  - from a quiescent state, N sk_malloc(300) raise kmalloc-320's
 *    active_objs by exactly N (in the text and in sk_cache_info); freeing
 *    them brings it back, and after sk_trim no free slab is left.
 * The malloc family is slabkit's in this test (see `text`), so stdio's
 * buffers come from the caches being inspected, as in a real process.
 *
 * Mode for tests/modes/slab_options.t:
 *   slabinfo_format --objperslab NAME   print NAME's objperslab from the text
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "slabkit.h"
#include "tap.h"

#define TEXT_MAX (256 * 1024)
#define LINES_MAX 512

/* From malloc: that links slabkit's malloc into this test (the override
 * is pulled from libslabkit.a only by a reference), so stdio's buffers
 * here come from slabkit too, and slabinfo_at_exit=1 has a destructor. */
static char *text;
static char *lines[LINES_MAX];
static int nlines;

struct row {
    char name[64];
    unsigned long v[16];    /* numeric fields by position (0 where a word) */
    int nfields;
    int words_ok;           /* ":" "tunables" ":" "slabdata" in place, numbers numeric */
};
static struct row rows[LINES_MAX];
static int nrows;

/* Write sk_slabinfo to a temporary file and read it back into `text`. */
static FILE *snapshot_file;

static void snapshot(void)
{
    if (!snapshot_file) {
        snapshot_file = tmpfile();
        if (!snapshot_file)
            BAIL("tmpfile: %s", strerror(errno));
        /* Make stdio allocate its buffer now, not while caches are read. */
        fputs("x", snapshot_file);
        fflush(snapshot_file);
    }
    rewind(snapshot_file);
    if (ftruncate(fileno(snapshot_file), 0))
        BAIL("ftruncate");
    sk_slabinfo(snapshot_file);
    fflush(snapshot_file);
    ssize_t n = pread(fileno(snapshot_file), text, TEXT_MAX - 1, 0);
    if (n <= 0 || n >= TEXT_MAX - 1)
        BAIL("slabinfo text: %zd bytes", n);
    text[n] = 0;
    nlines = 0;
    for (char *s = text; *s && nlines < LINES_MAX;) {
        lines[nlines++] = s;
        char *nl = strchr(s, '\n');
        if (!nl)
            break;
        *nl = 0;
        s = nl + 1;
    }
}

static int numeric(const char *w, unsigned long *out)
{
    if (!*w)
        return 0;
    for (const char *p = w; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    errno = 0;
    *out = strtoul(w, NULL, 10);
    return errno == 0;
}

static void parse_rows(void)
{
    nrows = 0;
    for (int l = 2; l < nlines; l++) {
        struct row *r = &rows[nrows++];
        memset(r, 0, sizeof *r);
        char buf[512];
        snprintf(buf, sizeof buf, "%s", lines[l]);
        char *save = NULL;
        r->words_ok = 1;
        for (char *w = strtok_r(buf, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
            int f = r->nfields++;
            if (f >= 16) {
                r->words_ok = 0;
                continue;
            }
            if (f == 0)
                snprintf(r->name, sizeof r->name, "%s", w);
            else if (f == 6 || f == 11)
                r->words_ok &= !strcmp(w, ":");
            else if (f == 7)
                r->words_ok &= !strcmp(w, "tunables");
            else if (f == 12)
                r->words_ok &= !strcmp(w, "slabdata");
            else
                r->words_ok &= numeric(w, &r->v[f]);
        }
    }
}

static struct row *find_row(const char *name)
{
    for (int i = 0; i < nrows; i++)
        if (!strcmp(rows[i].name, name))
            return &rows[i];
    return NULL;
}

/* ---- the foreach order, to compare with the text ---- */

static char names[LINES_MAX][32];
static int nnames;

static void collect(const struct sk_cache_info *i, void *arg)
{
    (void)arg;
    if (nnames < LINES_MAX)
        snprintf(names[nnames++], sizeof names[0], "%s", i->name);
}

/* Compare one row with sk_cache_info: the number of mismatching fields. */
static int row_vs_info(const struct row *r, const struct sk_cache_info *i, int verbose)
{
    unsigned long want[16] = { 0 };
    want[1] = i->active_objs;
    want[2] = i->num_objs;
    want[3] = i->size;
    want[4] = i->objs_per_slab;
    want[5] = 1ul << i->order;
    want[8] = i->array_capacity;
    want[9] = i->batch;
    want[10] = i->batch ? i->barn_capacity / i->batch : 0;
    want[13] = i->active_slabs;
    want[14] = i->num_slabs;
    want[15] = i->barn_objs;
    int bad = 0;
    static const int fields[] = { 1, 2, 3, 4, 5, 8, 9, 10, 13, 14, 15 };
    static const char *const fname[16] = { [1] = "active_objs", [2] = "num_objs", [3] = "objsize",
        [4] = "objperslab", [5] = "pagesperslab", [8] = "limit", [9] = "batchcount", [10] = "sharedfactor",
        [13] = "active_slabs", [14] = "num_slabs", [15] = "sharedavail" };
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++) {
        int f = fields[k];
        if (r->v[f] != want[f]) {
            bad++;
            if (verbose)
                diag("%s: %s %lu in the text, %lu in sk_cache_info", r->name, fname[f], r->v[f], want[f]);
        }
    }
    /* Internal consistency of the line itself. */
    if (r->v[2] != r->v[14] * r->v[4] || r->v[1] > r->v[2] || r->v[13] > r->v[14] || r->v[9] == 0 ||
        r->v[9] > r->v[8] || r->v[15] > r->v[10] * r->v[9] || r->v[15] > r->v[2] - r->v[1]) {
        bad++;
        if (verbose)
            diag("%s: inconsistent line: %s", r->name, "num_objs != num_slabs x objperslab, or active > num, "
                 "or batchcount not in 1..limit, or sharedavail above sharedfactor x batchcount "
                 "or above the free objects");
    }
    return bad;
}

static void check_all_rows(const char *when)
{
    snapshot();
    parse_rows();
    nnames = 0;
    sk_cache_foreach(collect, NULL);
    /* Every info right after the snapshot, before anything can allocate. */
    static struct sk_cache_info infos[LINES_MAX];
    int missing = 0;
    for (int i = 0; i < nrows; i++)
        if (sk_cache_info(rows[i].name, &infos[i]))
            missing++;
    is(missing, 0, "%s: every cache line names a cache sk_cache_info knows", when);
    is(nrows, nnames, "%s: one line per cache (%d)", when, nnames);
    int order_bad = 0;
    for (int i = 0; i < nrows && i < nnames; i++)
        order_bad += strcmp(rows[i].name, names[i]) != 0;
    is(order_bad, 0, "%s: lines in creation order", when);
    int bad_fields = 0, bad_values = 0;
    for (int i = 0; i < nrows; i++) {
        if (rows[i].nfields != 16 || !rows[i].words_ok) {
            if (bad_fields++ < 3)
                diag("bad line: '%s' (%d fields)", lines[i + 2], rows[i].nfields);
            continue;
        }
        bad_values += row_vs_info(&rows[i], &infos[i], bad_values < 5) != 0;
    }
    is(bad_fields, 0, "%s: every cache line has the 16 fields in their places", when);
    is(bad_values, 0, "%s: every value equals sk_cache_info's", when);
}

static void headers(void)
{
    snapshot();
    ok(nlines >= 2, "at least the two header lines");
    ok(!strcmp(lines[0], "slabinfo - version: 2.1"), "first line: 'slabinfo - version: 2.1'");
    const char *h2 = "# name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab>"
                     " : tunables <limit> <batchcount> <sharedfactor>"
                     " : slabdata <active_slabs> <num_slabs> <sharedavail>";
    if (!ok(nlines >= 2 && !strcmp(lines[1], h2), "second line: the kernel's column header, exactly"))
        diag("got: '%s'", nlines >= 2 ? lines[1] : "");
    ok(text[0] && lines[nlines - 1][0], "no empty line");
}

/* ---- a cache with a long name appears and disappears ---- */

static void created_and_destroyed(void)
{
    const char *longname = "a-cache-name-of-31-characters-x";    /* 31: the longest kept */
    sk_cache_t *c = sk_cache_create(longname, 72, 0, 0, NULL);
    void *objs[50];
    for (int i = 0; i < 50; i++)
        objs[i] = sk_cache_alloc(c);
    snapshot();
    parse_rows();
    struct row *r = find_row(longname);
    struct sk_cache_info info;
    sk_cache_info(longname, &info);
    ok(r && r->nfields == 16 && r->words_ok, "a 31-character name: its line has the 16 fields");
    ok(r && r->v[1] == 50 && row_vs_info(r, &info, 1) == 0, "its values: 50 active, as sk_cache_info");
    for (int i = 0; i < 50; i++)
        sk_cache_free(c, objs[i]);
    is(sk_cache_destroy(c), 0, "destroyed");
    snapshot();
    parse_rows();
    ok(!find_row(longname), "a destroyed cache has no line");
}

/* ---- active_objs follows allocations ---- */

#define N 1000
static void *held[N];

static int read_kmalloc320(struct row *out, struct sk_cache_info *info)
{
    snapshot();
    parse_rows();
    struct row *r = find_row("kmalloc-320");
    sk_cache_info("kmalloc-320", info);
    if (!r)
        return -1;
    *out = *r;
    return 0;
}

static void active_follows(void)
{
    struct row r0, r1, r2, r3;
    struct sk_cache_info i0, i1, i2, i3;
    if (read_kmalloc320(&r0, &i0))
        BAIL("no kmalloc-320 line");
    for (int i = 0; i < N; i++)
        held[i] = sk_malloc(300);
    read_kmalloc320(&r1, &i1);
    is(r1.v[1] - r0.v[1], N, "kmalloc-320: %d sk_malloc(300) raise active_objs by %d in the text", N, N);
    is(i1.active_objs - i0.active_objs, N, "kmalloc-320: and in sk_cache_info");
    ok(r1.v[14] * r1.v[4] >= r1.v[1] && r1.v[13] >= (N + r1.v[4] - 1) / r1.v[4],
       "kmalloc-320: enough slabs for them (%lu active, %lu total)", r1.v[13], r1.v[14]);
    for (int i = 0; i < N; i++)
        sk_free(held[i]);
    read_kmalloc320(&r2, &i2);
    is(r2.v[1], r0.v[1], "kmalloc-320: freed, active_objs back to %lu in the text", r0.v[1]);
    is(i2.active_objs, i0.active_objs, "kmalloc-320: and in sk_cache_info");
    sk_trim();
    read_kmalloc320(&r3, &i3);
    is(r3.v[1], r0.v[1], "kmalloc-320: after sk_trim, active_objs still %lu", r0.v[1]);
    /* A slab that still holds a live object (the one from before, if
     * any) stays on the partial list, as the kernel's shrink leaves it;
     * no other may. */
    ok(i3.array_objs == 0 && i3.cpu_partial_slabs == 0 && i3.partial_slabs <= i3.active_objs,
       "kmalloc-320: after sk_trim no object in arrays, no CPU partial slab, a partial slab only around a "
       "live object (%u in arrays, %lu CPU partial, %lu partial, %lu active)", (unsigned)i3.array_objs,
       (unsigned long)i3.cpu_partial_slabs, (unsigned long)i3.partial_slabs, (unsigned long)i3.active_objs);
    ok(r0.v[1] != 0 || r3.v[14] == 0, "kmalloc-320: after sk_trim, no slab left when nothing is allocated "
       "(%lu active, %lu slabs)", r3.v[1], r3.v[14]);
    is(r3.v[13], r3.v[14], "kmalloc-320: after sk_trim every slab left holds an object");
}

int main(int argc, char **argv)
{
    text = malloc(TEXT_MAX);
    if (!text)
        BAIL("malloc");
    if (argc == 3 && !strcmp(argv[1], "--objperslab")) {
        snapshot();
        parse_rows();
        struct row *r = find_row(argv[2]);
        if (!r || r->nfields != 16)
            return 1;
        printf("%lu\n", r->v[4]);
        return 0;
    }
    printf("# slabinfo_format\n");
    fflush(stdout);
    headers();
    check_all_rows("at start");
    /* Put something in every kmalloc class and a few caches, and look again. */
    static void *some[64];
    int n = 0;
    for (size_t s = 8; s <= 32768 && n < 64; s = s * 5 / 4 + 8)
        some[n++] = sk_malloc(s);
    sk_cache_t *c = sk_cache_create("slabinfo-test", 200, 0, SK_CACHE_HWALIGN, NULL);
    void *objs[300];
    for (int i = 0; i < 300; i++)
        objs[i] = sk_cache_alloc(c);
    for (int i = 0; i < 300; i += 3)
        sk_cache_free(c, objs[i]);
    check_all_rows("with objects allocated");
    struct row *r = find_row("slabinfo-test");
    ok(r && r->v[1] == 200, "slabinfo-test: 200 active objects (300 allocated, 100 freed)");
    for (int i = 0; i < n; i++)
        sk_free(some[i]);
    for (int i = 1; i < 300; i++)
        if (i % 3)
            sk_cache_free(c, objs[i]);
    created_and_destroyed();
    active_follows();
    sk_cache_destroy(c);
    check_all_rows("at the end");
    return done_testing();
}
