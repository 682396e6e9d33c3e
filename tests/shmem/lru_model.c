/*
 * lru_model — the LRU behaves as the kernel's, step for step, against a
 * simple model: a new page enters the inactive list referenced (through
 * its CPU's batch); an access to an inactive referenced page moves it to
 * the active head unreferenced, to an unreferenced page sets referenced;
 * aging moves pages from the active tail to the inactive head.  After each
 * of 4000 random steps (append, read, rewrite, age, truncate) both lists
 * must hold the model's pages in the model's order, with the model's
 * flags.  Then the per-CPU batch itself: pages wait in it until it is full
 * (LRU_BATCH), and a page accessed twice there lands on the active list.
 * Run as is and with page_microopt=0 (the before changes atomicity only,
 * never the outcome).
 */
#define _GNU_SOURCE
#include <sched.h>

#include "passes.h"
#include "slabkit.h"
#include "shmem/shmem.h"

#define MAXP 256

enum { NONE, INACTIVE, ACTIVE };
static int list_of[MAXP];
static int refd[MAXP];
/* The model's lists, head first. */
static int act[MAXP], nact, inact[MAXP], ninact;
static int npages;
static sk_file_t *f;
static uint64_t rng = 0x2545F4914F6CDD1Dull;

static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static void push_head(int *l, int *n, int p)
{
    memmove(l + 1, l, (size_t)*n * sizeof *l);
    l[0] = p;
    (*n)++;
}
static void remove_from(int *l, int *n, int p)
{
    for (int i = 0; i < *n; i++)
        if (l[i] == p) {
            memmove(l + i, l + i + 1, (size_t)(*n - i - 1) * sizeof *l);
            (*n)--;
            return;
        }
}

static void model_access(int p)
{
    if (list_of[p] == INACTIVE && refd[p]) {
        remove_from(inact, &ninact, p);
        push_head(act, &nact, p);
        list_of[p] = ACTIVE;
        refd[p] = 0;
    } else if (!refd[p]) {
        refd[p] = 1;
    }
}

static void model_age(int k)
{
    while (k-- > 0 && nact) {
        int p = act[--nact];
        push_head(inact, &ninact, p);
        list_of[p] = INACTIVE;
    }
}

/* The real lists against the model: order, flags, counts. */
static int lists_match(const char **why)
{
    struct lruvec *v = &shmem_lru[0];
    struct lru_list *l[2] = { &v->active, &v->inactive };
    int *m[2] = { act, inact }, n[2] = { nact, ninact };
    for (int k = 0; k < 2; k++) {
        if ((int)l[k]->nr != n[k]) {
            *why = k ? "inactive count" : "active count";
            return 0;
        }
        int i = 0;
        for (struct sk_page *pg = l[k]->head; pg; pg = pg->file.next, i++) {
            if (i >= n[k] || shmem_find_page(f, (uint64_t)m[k][i]) != pg) {
                *why = k ? "inactive order" : "active order";
                return 0;
            }
            uint32_t fl = pg_flags(pg);
            if (!(fl & PG_LRU) || !!(fl & PG_ACTIVE) != (k == 0) || !!(fl & PG_REFERENCED) != refd[m[k][i]]) {
                *why = "flags";
                return 0;
            }
        }
    }
    return 1;
}

static void write_page(int p)
{
    char b[64];
    memset(b, p, sizeof b);
    sk_file_pwrite(f, b, sizeof b, (off_t)p * 4096);
}

static void read_page(int p)
{
    char b[8];
    sk_file_pread(f, b, sizeof b, (off_t)p * 4096 + 10);  /* within the 64 bytes written */
}

int main(int argc, char **argv)
{
    static const char *const opts[] = { "", "page_microopt=0" };
    int pass = passes_begin(argc, argv);
    bail_out_after(120, "lru_model hung");
    /* One CPU: the batch test counts one CPU's batch. */
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(sched_getcpu(), &set);
    sched_setaffinity(0, sizeof set, &set);

    f = sk_file_create("lru");
    if (!f)
        BAIL("sk_file_create");
    int steps = 0, bad = 0;
    const char *why = "";
    int counts[5] = { 0 };
    for (; steps < 4000 && !bad; steps++) {
        unsigned op = rnd(100);
        if (npages == 0 || (op < 15 && npages < MAXP)) {          /* append */
            int p = npages++;
            write_page(p);
            push_head(inact, &ninact, p);
            list_of[p] = INACTIVE;
            refd[p] = 1;
            counts[0]++;
        } else if (op < 55) {                                     /* read */
            int p = (int)rnd((unsigned)npages);
            read_page(p);
            model_access(p);
            counts[1]++;
        } else if (op < 75) {                                     /* rewrite */
            int p = (int)rnd((unsigned)npages);
            write_page(p);
            model_access(p);
            counts[2]++;
        } else if (op < 95) {                                     /* age */
            int k = 1 + (int)rnd(8);
            lru_shrink_active(0, (unsigned long)k);
            model_age(k);
            counts[3]++;
        } else {                                                  /* truncate */
            int keep = (int)rnd((unsigned)npages);
            sk_file_truncate(f, (off_t)keep * 4096);
            for (int p = keep; p < npages; p++) {
                remove_from(list_of[p] == ACTIVE ? act : inact, list_of[p] == ACTIVE ? &nact : &ninact, p);
                list_of[p] = NONE;
            }
            npages = keep;
            counts[4]++;
        }
        lru_add_drain_all();
        if (!lists_match(&why))
            bad = 1;
    }
    ok(!bad, "pass %d: lists match the model after every step (%d steps: %d appends, %d reads, %d rewrites, "
       "%d agings, %d truncates)%s%s", pass, steps, counts[0], counts[1], counts[2], counts[3], counts[4],
       bad ? "; first mismatch: " : "", bad ? why : "");

    struct shmem_stats st;
    shmem_stats(&st);
    is(st.active[0], nact, "pass %d: statistics: active list size", pass);
    is(st.inactive[0], ninact, "pass %d: statistics: inactive list size", pass);
    ok(st.activated > 0 && st.deactivated > 0, "pass %d: promotions (%lu) and demotions (%lu) happened", pass,
       st.activated, st.deactivated);
    /* sk_file_stats prints the same sizes, meminfo style. */
    char *text = NULL, want[2][64];
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    sk_file_stats(mem);
    fclose(mem);
    snprintf(want[0], sizeof want[0], "Node 0 Active(file):   %8lu kB", st.active[0] * 4);
    snprintf(want[1], sizeof want[1], "Node 0 Inactive(file): %8lu kB", st.inactive[0] * 4);
    ok(text && strstr(text, want[0]) && strstr(text, want[1]), "pass %d: sk_file_stats prints each list's size", pass);
    if (text && !(strstr(text, want[0]) && strstr(text, want[1])))
        diag("%s", text);
    free(text);

    /* The batch: new pages wait off the lists until LRU_BATCH are there. */
    sk_file_truncate(f, 0);
    lru_add_drain_all();
    for (int p = 0; p < LRU_BATCH; p++)
        write_page(p);
    shmem_stats(&st);
    is(st.batched, LRU_BATCH, "pass %d: %d new pages wait in this CPU's batch", pass, LRU_BATCH);
    is(st.active[0] + st.inactive[0], 0, "pass %d: none of them on a list yet", pass);
    struct sk_page *first = shmem_find_page(f, 0);
    ok(first && !(pg_flags(first) & PG_LRU) && (pg_flags(first) & PG_REFERENCED),
       "pass %d: a batched page: not PG_LRU, already referenced", pass);
    read_page(0);                      /* second access while batched */
    ok(first && (pg_flags(first) & PG_ACTIVE) && !(pg_flags(first) & PG_REFERENCED),
       "pass %d: accessed again in the batch: PG_ACTIVE set, referenced cleared", pass);
    write_page(LRU_BATCH);             /* the batch is full: all go */
    shmem_stats(&st);
    is(st.batched, 0, "pass %d: the page past a full batch moves the whole batch", pass);
    is(st.inactive[0], LRU_BATCH, "pass %d: %d pages on the inactive list", pass, LRU_BATCH);
    is(st.active[0], 1, "pass %d: the page accessed twice in the batch on the active list", pass);
    ok(shmem_lru[0].active.head == first, "pass %d: it is that page", pass);

    sk_file_destroy(f);
    lru_add_drain_all();
    shmem_stats(&st);
    is(st.active[0] + st.inactive[0] + st.batched + st.resident, 0, "pass %d: destroy empties the LRU", pass);
    passes_next(argv, pass, opts, 2);
}
