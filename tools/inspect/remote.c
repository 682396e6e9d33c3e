/*
 * remote.c — slabkit's caches and page totals of another process, read
 * with process_vm_readv (remote.h, docs/inspect.md).
 *
 * Invariants:
 *  - The target runs nothing for us: we read its memory, never write it,
 *    never stop it, never signal it.
 *  - Every remote pointer is used only through rmt_read, which fails
 *    cleanly on an unmapped address; nothing read is trusted: lengths and
 *    counts are clamped, names are terminated, list walks stop at a bound
 *    (the cache's own totals) and at the first page that is not a slab of
 *    that cache.  A walk that stopped early marks its cache approximate.
 *  - The root is found by name (the ELF symbol sk_inspect_root in the
 *    executable or a mapped library, plus that object's load bias) or, in
 *    a stripped static executable, by its magic in the process's file-
 *    backed data mappings; either way it is used only after its magic,
 *    version, size and layout hash match this tool's own.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "inspect/remote.h"
#include "debug/calls.h"
#include "slab/inspect.h"

#define RMT_MAX_CACHES 4096          /* caches walked; more means a loop */
#define RMT_MAX_MAPS 8192            /* lines of /proc/PID/maps considered */
#define RMT_SCAN_MAX (64ul << 20)    /* bytes of data mappings scanned for the magic */

struct rmt {
    pid_t pid;
    uintptr_t root_addr;
    struct sk_inspect root;
};

static int rmt_read(const struct rmt *r, uintptr_t addr, void *buf, size_t len)
{
    struct iovec local = { buf, len }, remote = { (void *)addr, len };
    if (!addr)
        return errno = EFAULT, -1;
    ssize_t got = process_vm_readv(r->pid, &local, 1, &remote, 1, 0);
    if (got == (ssize_t)len)
        return 0;
    if (got >= 0)
        errno = EFAULT;
    return -1;
}

/* ---- why a process cannot be read ---- */

static int ptrace_scope(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int v = -1;
    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

/* Whether pid's real, effective and saved uids are all ours (what
 * __ptrace_may_access asks before any security module); -1 if unknown. */
static int same_user(pid_t pid)
{
    char name[64], line[256];
    snprintf(name, sizeof name, "/proc/%d/status", (int)pid);
    FILE *f = fopen(name, "r");
    int same = -1;
    unsigned long ruid, euid, suid;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Uid: %lu %lu %lu", &ruid, &euid, &suid) == 3) {
            uid_t me = getuid();
            same = ruid == me && euid == me && suid == me;
            break;
        }
    if (f)
        fclose(f);
    return same;
}

static void explain_eperm(pid_t pid, char *err, size_t n)
{
    int scope = ptrace_scope();
    const char *why;
    if (geteuid() != 0 && same_user(pid) == 0) {
        snprintf(err, n, "cannot read the memory of process %d (EPERM): it belongs to another user: run as that "
                         "user or as root", (int)pid);
        return;
    }
    switch (scope) {
    case -1:
    case 0:
        why = "it is not dumpable (setuid, or it called prctl(PR_SET_DUMPABLE, 0)): run as root";
        break;
    case 1:
        why = "kernel.yama.ptrace_scope=1 lets a process read only its own descendants: run as root "
              "(CAP_SYS_PTRACE), or set kernel.yama.ptrace_scope=0";
        break;
    case 2:
        why = "kernel.yama.ptrace_scope=2 lets only CAP_SYS_PTRACE read another process: run as root";
        break;
    default:
        why = "kernel.yama.ptrace_scope=3 forbids reading another process's memory to everyone until reboot";
        break;
    }
    snprintf(err, n, "cannot read the memory of process %d (EPERM): %s", (int)pid, why);
}

/* The reason a read of the target failed, in err. */
static void explain_read(const struct rmt *r, int e, char *err, size_t n)
{
    if (e == EPERM)
        explain_eperm(r->pid, err, n);
    else if (e == ESRCH || kill(r->pid, 0) != 0)
        snprintf(err, n, "process %d has exited", (int)r->pid);
    else
        snprintf(err, n, "cannot read the memory of process %d: %s", (int)r->pid, strerror(e));
}

/* ---- finding the root ---- */

struct mapping {
    uintptr_t start, end, offset;
    char perms[5];
    unsigned long inode;
    char path[512];
};

static int read_maps(pid_t pid, struct mapping **out, size_t *n)
{
    char name[64];
    snprintf(name, sizeof name, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(name, "r");
    if (!f)
        return -1;
    size_t cap = 256, cnt = 0;
    struct mapping *m = malloc(cap * sizeof *m);
    char line[1024];
    while (m && cnt < RMT_MAX_MAPS && fgets(line, sizeof line, f)) {
        if (cnt == cap) {
            struct mapping *nm = realloc(m, 2 * cap * sizeof *m);
            if (!nm)
                break;
            m = nm;
            cap *= 2;
        }
        struct mapping *p = &m[cnt];
        int pos = 0;
        unsigned long dev_major, dev_minor;
        if (sscanf(line, "%lx-%lx %4s %lx %lx:%lx %lu %n", &p->start, &p->end, p->perms, &p->offset, &dev_major,
                   &dev_minor, &p->inode, &pos) < 7)
            continue;
        snprintf(p->path, sizeof p->path, "%s", line + pos);
        p->path[strcspn(p->path, "\n")] = 0;
        cnt++;
    }
    fclose(f);
    if (!m)
        return errno = ENOMEM, -1;
    *out = m;
    *n = cnt;
    return 0;
}

/* pread exactly len bytes at off. */
static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t got = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (got <= 0)
            return -1;
        done += (size_t)got;
    }
    return 0;
}

/* An ELF file's symbols as mapped in the target: its load bias (0 for a
 * fixed-address executable) and one symbol table, .symtab where there is
 * one (a superset), else .dynsym.  Empty when the file cannot be read. */
struct symfile {
    char path[512];
    uintptr_t bias;
    Elf64_Sym *syms;
    char *str;
    size_t nsyms, strsize;
};

static void symfile_load(struct symfile *f, const char *path, uintptr_t base)
{
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    Elf64_Ehdr eh;
    Elf64_Shdr *sh = NULL;
    if (pread_all(fd, &eh, sizeof eh, 0) != 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
        eh.e_shnum > 4096 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 512)
        goto out;
    uint64_t lowest = UINT64_MAX;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (pread_all(fd, &ph, sizeof ph, eh.e_phoff + (uint64_t)i * sizeof ph) != 0)
            goto out;
        if (ph.p_type == PT_LOAD && (ph.p_vaddr & ~(uint64_t)4095) < lowest)
            lowest = ph.p_vaddr & ~(uint64_t)4095;
    }
    if (lowest == UINT64_MAX)
        goto out;
    f->bias = eh.e_type == ET_EXEC ? 0 : base - (uintptr_t)lowest;
    sh = malloc((size_t)eh.e_shnum * sizeof *sh);
    if (!sh || pread_all(fd, sh, (size_t)eh.e_shnum * sizeof *sh, eh.e_shoff) != 0)
        goto out;
    /* .symtab when there is one (more names), else .dynsym. */
    for (int pass = 0; pass < 2 && !f->syms; pass++)
        for (unsigned i = 0; i < eh.e_shnum && !f->syms; i++) {
            const Elf64_Shdr *t = &sh[i], *st;
            if (t->sh_type != (pass ? SHT_DYNSYM : SHT_SYMTAB) || t->sh_link >= eh.e_shnum ||
                t->sh_entsize != sizeof(Elf64_Sym) || t->sh_size > (256u << 20))
                continue;
            st = &sh[t->sh_link];
            if (st->sh_size > (256u << 20))
                continue;
            f->syms = malloc(t->sh_size ? t->sh_size : 1);
            f->str = malloc(st->sh_size + 1);
            if (!f->syms || !f->str || pread_all(fd, f->syms, t->sh_size, t->sh_offset) != 0 ||
                pread_all(fd, f->str, st->sh_size, st->sh_offset) != 0) {
                free(f->syms);
                free(f->str);
                f->syms = NULL;
                f->str = NULL;
                continue;
            }
            f->str[st->sh_size] = 0;
            f->strsize = st->sh_size;
            f->nsyms = t->sh_size / sizeof(Elf64_Sym);
        }
out:
    free(sh);
    close(fd);
}

static void symfile_free(struct symfile *f)
{
    free(f->syms);
    free(f->str);
}

/* The run-time address of data symbol `sym` in the ELF file `path`, mapped
 * at `base` (the start of its mapping at file offset 0); 0 when absent. */
static uintptr_t elf_symbol(const char *path, uintptr_t base, const char *sym)
{
    struct symfile f;
    uintptr_t addr = 0;
    symfile_load(&f, path, base);
    for (size_t i = 0; i < f.nsyms && !addr; i++) {
        const Elf64_Sym *y = &f.syms[i];
        if (y->st_name < f.strsize && y->st_shndx != SHN_UNDEF && ELF64_ST_TYPE(y->st_info) == STT_OBJECT &&
            !strcmp(f.str + y->st_name, sym))
            addr = f.bias + (uintptr_t)y->st_value;
    }
    symfile_free(&f);
    return addr;
}

/* Is there a valid root at addr?  Copies it into r->root.  The magic is
 * not enough: a PIE's read-only segment is mapped a page at a time, so its
 * last page can also hold the file's bytes of .data.rel.ro that follow it,
 * the root among them with its pointers not relocated; the root also
 * points at a readable nr_cpu_ids. */
static int root_valid(struct rmt *r, uintptr_t addr)
{
    struct sk_inspect root;
    int ids;
    if (rmt_read(r, addr, &root, sizeof root) != 0)
        return -1;
    if (root.magic != SK_INSPECT_MAGIC)
        return errno = ENOENT, -1;
    if (rmt_read(r, (uintptr_t)root.nr_cpu_ids, &ids, sizeof ids) != 0)
        return errno = ENOENT, -1;
    r->root = root;
    r->root_addr = addr;
    return 0;
}

/* A stripped executable has no symbol table: look for the root's magic
 * in the file-backed read-only and writable data mappings (it sits in
 * .data.rel.ro).  Bounded by RMT_SCAN_MAX bytes. */
static uintptr_t scan_for_root(struct rmt *r, const struct mapping *m, size_t n)
{
    size_t scanned = 0;
    char *buf = malloc(1 << 20);
    if (!buf)
        return 0;
    for (size_t i = 0; i < n && scanned < RMT_SCAN_MAX; i++) {
        if (!m[i].inode || m[i].perms[0] != 'r' || m[i].perms[2] == 'x')
            continue;
        for (uintptr_t a = m[i].start; a < m[i].end && scanned < RMT_SCAN_MAX; a += 1 << 20) {
            size_t len = m[i].end - a < (1u << 20) ? m[i].end - a : (1u << 20);
            if (rmt_read(r, a, buf, len) != 0)
                break;
            scanned += len;
            for (size_t o = 0; o + sizeof(struct sk_inspect) <= len; o += 8) {
                uint64_t w;
                memcpy(&w, buf + o, 8);
                if (w == SK_INSPECT_MAGIC && root_valid(r, a + o) == 0) {
                    free(buf);
                    return a + o;
                }
            }
        }
    }
    free(buf);
    return 0;
}

static int is_zombie(pid_t pid)
{
    char name[64], buf[512];
    snprintf(name, sizeof name, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(name, "r");
    if (!f)
        return 0;
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = 0;
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

static void comm_of(pid_t pid, char *out, size_t n)
{
    char name[64];
    snprintf(name, sizeof name, "/proc/%d/comm", (int)pid);
    FILE *f = fopen(name, "r");
    out[0] = 0;
    if (f) {
        if (fgets(out, (int)n, f))
            out[strcspn(out, "\n")] = 0;
        fclose(f);
    }
}

struct rmt *rmt_open(pid_t pid, char *err, size_t errlen)
{
    if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH) || is_zombie(pid)) {
        snprintf(err, errlen, "no process %d (it has exited, or never was)", (int)pid);
        return NULL;
    }
    struct rmt *r = calloc(1, sizeof *r);
    struct mapping *m = NULL;
    size_t n = 0;
    if (!r)
        return snprintf(err, errlen, "out of memory"), NULL;
    r->pid = pid;
    if (read_maps(pid, &m, &n) != 0) {
        if (errno == EACCES || errno == EPERM)
            explain_eperm(pid, err, errlen);
        else
            snprintf(err, errlen, "no process %d (cannot read /proc/%d/maps: %s)", (int)pid, (int)pid,
                     strerror(errno));
        free(r);
        return NULL;
    }
    /* Each ELF object once, by its mapping at file offset 0: libraries
     * named like slabkit first, then the rest (a static link). */
    uintptr_t addr = 0;
    int read_errno = 0;
    for (int pass = 0; pass < 2 && !addr; pass++)
        for (size_t i = 0; i < n && !addr; i++) {
            if (m[i].offset != 0 || !m[i].inode || m[i].path[0] != '/')
                continue;
            if ((strstr(m[i].path, "slabkit") != NULL) != (pass == 0))
                continue;
            char path[600];
            /* Through the process's root, so a container's files are its own. */
            snprintf(path, sizeof path, "/proc/%d/root%s", (int)pid, m[i].path);
            uintptr_t a = elf_symbol(path, m[i].start, "sk_inspect_root");
            if (!a)
                a = elf_symbol(m[i].path, m[i].start, "sk_inspect_root");
            if (a && root_valid(r, a) == 0)
                addr = a;
            else if (a && (errno == EPERM || errno == ESRCH))
                read_errno = errno;
        }
    /* read_errno set: the symbol is there but its memory may not be read. */
    int scan_errno = 0;
    if (!addr && !read_errno) {
        addr = scan_for_root(r, m, n);
        if (!addr && (errno == EPERM || errno == ESRCH))
            scan_errno = errno;
    }
    free(m);
    if (!addr) {
        char comm[64];
        comm_of(pid, comm, sizeof comm);
        if (read_errno || scan_errno == ESRCH || (kill(pid, 0) != 0 && errno == ESRCH)) {
            explain_read(r, read_errno ? read_errno : ESRCH, err, errlen);
        } else if (scan_errno == EPERM) {
            /* No symbol, and the search of a stripped executable was refused. */
            char why[400];
            explain_eperm(pid, why, sizeof why);
            snprintf(err, errlen,
                     "process %d (%s) does not use slabkit: no sk_inspect_root in its executable or libraries "
                     "(if it is a stripped static program, its memory could not be searched: %s)",
                     (int)pid, comm, why);
        } else {
            snprintf(err, errlen,
                     "process %d (%s) does not use slabkit: no sk_inspect_root in its executable or "
                     "libraries (run it with LD_PRELOAD=libslabkit.so.0 or link libslabkit.a)",
                     (int)pid, comm);
        }
        free(r);
        return NULL;
    }
    if (r->root.version != SK_INSPECT_VERSION || r->root.size != sizeof(struct sk_inspect) ||
        r->root.layout != SK_INSPECT_LAYOUT) {
        snprintf(err, errlen,
                 "process %d uses another build of slabkit (inspect version %u, layout %016llx; this tool "
                 "reads version %u, layout %016llx): use the slabinfo/slabtop built with its library",
                 (int)pid, r->root.version, (unsigned long long)r->root.layout, SK_INSPECT_VERSION,
                 (unsigned long long)SK_INSPECT_LAYOUT);
        free(r);
        return NULL;
    }
    return r;
}

void rmt_close(struct rmt *r)
{
    free(r);
}

/* ---- the walk ---- */

/* A slab descriptor of cache ca, or -1 (unreadable, or no longer a slab of
 * it: the list changed under us). */
static int read_slab(const struct rmt *r, uintptr_t pg, uintptr_t ca, struct sk_page *out)
{
    if (!pg || pg % 8 || rmt_read(r, pg, out, sizeof *out) != 0)
        return -1;
    if (!(out->flags & PG_SLAB) || (uintptr_t)out->slab.cache != ca)
        return -1;
    return 0;
}

static unsigned long slab_free_objs(const struct sk_page *pg)
{
    union slab_counters cnt = { .v = pg->slab.counters };
    return cnt.inuse < cnt.objects ? (unsigned long)cnt.objects - cnt.inuse : 0;
}

/* Objects on a freelist chained through c's free pointers, from head, at
 * most `bound`; *approx when the chain was cut short. */
static unsigned long chain_len(const struct rmt *r, const struct slab_cache *c, uintptr_t head, unsigned long bound,
                               int *approx)
{
    unsigned long n = 0;
    for (uintptr_t o = head; o; n++) {
        uintptr_t slot = o + c->offset, v;
        if (n >= bound || rmt_read(r, slot, &v, sizeof v) != 0) {
            *approx = 1;
            break;
        }
        o = v ^ c->random ^ slot;
    }
    return n;
}

/* A list of slabs of cache ca linked by slab.next from head: free objects
 * added to *free_objs, empty slabs to *empty; returns the slabs seen. */
static unsigned long walk_slabs(const struct rmt *r, uintptr_t ca, uintptr_t head, unsigned long bound,
                                unsigned long *free_objs, unsigned long *empty, int *approx)
{
    unsigned long n = 0;
    for (uintptr_t pg = head; pg; n++) {
        struct sk_page p;
        if (n >= bound || read_slab(r, pg, ca, &p) != 0) {
            *approx = 1;
            break;
        }
        *free_objs += slab_free_objs(&p);
        if (empty && ((union slab_counters){ .v = p.slab.counters }).inuse == 0)
            (*empty)++;
        pg = (uintptr_t)p.slab.next;
    }
    return n;
}

static uint64_t array_word(const struct rmt *r, uintptr_t arrays, int slot, int *approx)
{
    uint64_t w = 0;
    if (rmt_read(r, arrays + ((uintptr_t)slot << CPU_ARRAY_SHIFT), &w, sizeof w) != 0)
        *approx = 1;
    return w;
}

/* slab_cache_info (src/slab/slab.c) done from outside, for the cache at
 * ca whose struct is c.  -1 when its per-CPU state cannot be read. */
static int cache_info(const struct rmt *r, uintptr_t ca, const struct slab_cache *c, int nr_ids,
                      struct rmt_cache *out)
{
    struct sk_cache_info *info = &out->info;
    int approx = 0;
    memset(out, 0, sizeof *out);
    slab_info_fixed(c, info);

    unsigned long num_slabs = 0;
    for (int nid = 0; nid < SLAB_NR_NODES; nid++)
        num_slabs += c->node[nid].nr_slabs;
    /* No list can hold more slabs than the cache has, plus what a racing
     * allocation adds while we walk. */
    unsigned long bound = num_slabs + 64;
    struct slab_info_counts k = { 0 };
    uintptr_t arrays = (uintptr_t)c->arrays;

    struct slab_cpu *cpus = NULL;
    if (c->cpu) {
        /* c is the local copy: slab_cpu_of gives each CPU's remote address. */
        cpus = malloc((size_t)nr_ids * sizeof *cpus);
        int cpu = 0;
        while (cpus && cpu < nr_ids && rmt_read(r, (uintptr_t)slab_cpu_of(c, cpu), &cpus[cpu], sizeof *cpus) == 0)
            cpu++;
        if (cpu < nr_ids) {
            free(cpus);
            return -1;
        }
    }
    for (int cpu = 0; cpu < nr_ids; cpu++) {
        uint64_t w = array_word(r, arrays, cpu, &approx);
        info->array_objs += w & CPU_ARRAY_COUNT;
        k.ops += w >> 16;
        if (!cpus)
            continue;
        const struct slab_cpu *sc = &cpus[cpu];
        k.batch_in += sc->batch_in;
        k.batch_out += sc->batch_out;
        k.slow_pops += sc->slow_pops;
        k.slow_pushes += sc->slow_pushes;
        if (sc->slab) {
            struct sk_page p;
            if (read_slab(r, (uintptr_t)sc->slab, ca, &p) == 0)
                k.free_objs += slab_free_objs(&p);
            else
                approx = 1;
            k.free_objs += chain_len(r, c, (uintptr_t)sc->freelist, c->objects, &approx);
            k.free_objs += sc->fresh_left;   /* its fresh range (slab.c) */
        }
        info->cpu_partial_slabs +=
            walk_slabs(r, ca, (uintptr_t)sc->partial, bound, &k.free_objs, NULL, &approx);
        for (int i = 0; i < SK_STAT_NR; i++)
            info->stat[i] += sc->stat[i];
    }
    free(cpus);
    uint64_t w = array_word(r, arrays, nr_ids, &approx);   /* the shared slot */
    info->array_objs += w & CPU_ARRAY_COUNT;
    k.ops += w >> 16;

    for (int nid = 0; nid < SLAB_NR_NODES; nid++) {
        const struct slab_node *n = &c->node[nid];
        if (c->mode == SLAB_MODE_CLASSIC) {
            k.free_objs += n->classic.free_objects;
            k.empty_slabs += n->classic.nr_free_slabs;
            info->partial_slabs += n->classic.nr_partial_slabs;
        }
        walk_slabs(r, ca, (uintptr_t)n->partial, n->nr_partial + 64, &k.free_objs, &k.empty_slabs, &approx);
        info->partial_slabs += n->nr_partial;
        info->num_slabs += n->nr_slabs;
        info->barn_objs += n->barn.count;
        info->barn_capacity += n->barn.cap;
    }
    slab_info_derive(info, &k);

    if (c->slots) {   /* sheaves=0: SLUB's per-CPU freelists (slub_cpu_info) */
        unsigned long fl_free = 0;
        uint64_t pops = 0, pushes = 0;
        for (int slot = 0; slot <= nr_ids; slot++) {
            struct slub_slot s;
            if (rmt_read(r, (uintptr_t)c->slots + (uintptr_t)slot * sizeof s, &s, sizeof s) != 0) {
                approx = 1;
                continue;
            }
            fl_free += chain_len(r, c, (uintptr_t)s.fl.head, c->objects, &approx);
            if (s.fl.owner) {
                struct sk_page p;
                if (read_slab(r, (uintptr_t)s.fl.owner, ca, &p) == 0)
                    fl_free += slab_free_objs(&p);
            }
            pops += s.fl.tid_pops >> 1;
            pushes += s.fl.tid_pushes;
        }
        info->active_objs = info->active_objs > fl_free ? info->active_objs - fl_free : 0;
        info->stat[SK_ALLOC_FASTPATH] = pops;
        info->stat[SK_FREE_FASTPATH] = pushes;
    }
    out->approx = approx;
    return 0;
}

static int read_totals(const struct rmt *r, int nr_ids, struct rmt_totals *t)
{
    memset(t, 0, sizeof *t);
    struct zone zones[PAGE_NR_ZONES];
    struct pcp_set pcp;
    if (rmt_read(r, (uintptr_t)r->root.zones, zones, sizeof zones) != 0 ||
        rmt_read(r, (uintptr_t)r->root.pcp, &pcp, sizeof pcp) != 0 ||
        rmt_read(r, (uintptr_t)r->root.vm_bytes, &t->reserved_bytes, sizeof t->reserved_bytes) != 0)
        return -1;
    for (int n = 0; n < PAGE_NR_ZONES; n++) {
        t->managed_pages += zones[n].managed_pages;
        t->free_pages += zones[n].free_pages;
        t->resident_pages += zones[n].dirty_pages;
        t->returned_pages += zones[n].purged_pages;
        unsigned nid = zone_nid((unsigned)n);
        if (nid < SLABINFO_NODES_MAX) {
            t->node_managed[nid] += zones[n].managed_pages;
            t->node_used[nid] += zones[n].managed_pages - zones[n].free_pages;
            t->node_free[nid] += zones[n].free_pages;
            t->node_resident[nid] += zones[n].dirty_pages;
            if (zones[n].managed_pages && nid + 1 > t->nodes)
                t->nodes = nid + 1;
        }
    }
    if (t->nodes < 2)
        t->nodes = 0;     /* one node: the totals say it all */
    int approx = 0;
    /* The block lists: orders 0..PCP_MAX_ORDER, then order 0's of the
     * reclaimable and movable types (pcp.c). */
    for (unsigned l = 0; l < PCP_NR_LISTS; l++)
        if (pcp_block_list(l) && pcp.lists[l])
            for (int slot = 0; slot <= nr_ids; slot++)
                t->pcp_pages += (unsigned long)(array_word(r, (uintptr_t)pcp.lists[l], slot, &approx) &
                                                CPU_ARRAY_COUNT)
                                << pcp_order(l);
    /* The exact-block cache: each entry a block of large.nr_pages pages,
     * read from its descriptor (page_stats counts them the same way). */
    uintptr_t etab = (uintptr_t)pcp.lists[PCP_EXACT];
    for (int slot = 0; etab && slot <= nr_ids; slot++) {
        uintptr_t base = etab + ((uintptr_t)slot << CPU_ARRAY_SHIFT);
        unsigned n = (unsigned)(array_word(r, etab, slot, &approx) & CPU_ARRAY_COUNT);
        for (unsigned i = 0; i < n && i < CPU_ARRAY_MAX; i++) {
            uintptr_t pg = 0;
            size_t pages = 0;
            if (rmt_read(r, base + offsetof(struct cpu_array, objs) + i * sizeof(void *), &pg, sizeof pg) != 0 ||
                !pg ||
                rmt_read(r, pg + offsetof(struct sk_page, large.nr_pages), &pages, sizeof pages) != 0)
                break;
            t->pcp_pages += pages;
        }
    }
    return 0;
}

static int snapshot_once(struct rmt *r, struct rmt_cache **caches, size_t *n, struct rmt_totals *t)
{
    int nr_ids;
    uintptr_t ca;
    *caches = NULL;
    *n = 0;
    if (rmt_read(r, (uintptr_t)r->root.nr_cpu_ids, &nr_ids, sizeof nr_ids) != 0 ||
        rmt_read(r, (uintptr_t)r->root.caches, &ca, sizeof ca) != 0)
        return -1;
    if (nr_ids < 1 || nr_ids > CPU_MAX_IDS)
        return errno = EPROTO, -1;
    if (read_totals(r, nr_ids, t) != 0)
        return -1;
    size_t cap = 64, cnt = 0;
    struct rmt_cache *out = malloc(cap * sizeof *out);
    struct slab_cache *c = malloc(sizeof *c);
    if (!out || !c)
        goto fail;
    for (; ca && cnt < RMT_MAX_CACHES; ca = (uintptr_t)c->next) {
        if (ca % CACHE_LINE || rmt_read(r, ca, c, sizeof *c) != 0)
            goto fail;
        /* A cache being destroyed and recycled, seen half-way: start over. */
        if (c->objects == 0 || c->order > SLAB_MAX_ORDER || c->size == 0)
            goto changed;
        if (cnt == cap) {
            struct rmt_cache *no = realloc(out, 2 * cap * sizeof *out);
            if (!no)
                goto fail;
            out = no;
            cap *= 2;
        }
        if (cache_info(r, ca, c, nr_ids, &out[cnt]) != 0)
            goto fail;
        cnt++;
    }
    free(c);
    *caches = out;
    *n = cnt;
    return 0;
changed:
    errno = EAGAIN;
fail:
    free(out);
    free(c);
    return -1;
}

int rmt_snapshot(struct rmt *r, struct rmt_cache **caches, size_t *n, struct rmt_totals *t, char *err,
                 size_t errlen)
{
    for (int tries = 0; tries < 5; tries++) {
        if (snapshot_once(r, caches, n, t) == 0)
            return 0;
        if (errno != EAGAIN && errno != EFAULT)
            break;
        if (kill(r->pid, 0) != 0 && errno == ESRCH)
            break;
    }
    int e = errno;
    if (kill(r->pid, 0) != 0 && errno == ESRCH)
        e = ESRCH;
    explain_read(r, e, err, errlen);
    return -1;
}

/* ---- slub_debug's alloc_calls and free_calls (debug=U) ---- */

/* The symbol covering a run-time (return) address: "name+0xoff/0xsize",
 * else "module+0xoff" (what addr2line -e module takes), as the process's
 * own report would print the site. */
static void symfile_name(const struct symfile *f, uintptr_t addr, uintptr_t modbase, char *buf, size_t n)
{
    uintptr_t look = addr - 1;   /* a return address: inside its call */
    const Elf64_Sym *best = NULL;
    for (size_t i = 0; i < f->nsyms; i++) {
        const Elf64_Sym *y = &f->syms[i];
        if (ELF64_ST_TYPE(y->st_info) != STT_FUNC || y->st_shndx == SHN_UNDEF || y->st_name >= f->strsize)
            continue;
        uintptr_t lo = f->bias + (uintptr_t)y->st_value;
        if (look >= lo && look < lo + (y->st_size ? y->st_size : 1) && (!best || y->st_size))
            best = y;
    }
    if (best && f->str[best->st_name])
        snprintf(buf, n, "%s+0x%lx/0x%lx", f->str + best->st_name,
                 (unsigned long)(addr - f->bias - (uintptr_t)best->st_value), (unsigned long)best->st_size);
    else
        snprintf(buf, n, "%s+0x%lx", f->path, (unsigned long)(look - modbase));
}

/* The mapping (index) holding addr, or -1. */
static long map_of(const struct mapping *m, size_t n, uintptr_t addr)
{
    for (size_t i = 0; i < n; i++)
        if (addr >= m[i].start && addr < m[i].end)
            return (long)i;
    return -1;
}

/* Is addr in the file mapping `own` belongs to (slabkit's own module)? */
static int in_module(const struct mapping *m, size_t n, long own, uintptr_t addr)
{
    long i = own >= 0 ? map_of(m, n, addr) : -1;
    return i >= 0 && !strcmp(m[i].path, m[own].path);
}

/* Where the file of mapping i starts (its mapping at offset 0). */
static uintptr_t map_base(const struct mapping *m, size_t n, size_t i)
{
    for (size_t k = 0; k < n; k++)
        if (m[k].inode == m[i].inode && !strcmp(m[k].path, m[i].path) && m[k].offset == 0)
            return m[k].start;
    return m[i].start - m[i].offset;
}

static void calls_one(const struct rmt *r, const struct slab_cache *c, uintptr_t ca, int which, uintptr_t key,
                      const struct mapping *maps, size_t nmaps, long own, FILE *out)
{
    fprintf(out, "%s %s:\n", which == TRACK_ALLOC ? "alloc_calls" : "free_calls", c->name);
    struct call_loc *locs = calloc(CALLS_MAX, sizeof *locs);
    size_t slab_bytes = ((size_t)SK_PAGE_SIZE << c->order) - c->reserved;
    char *mem = malloc(slab_bytes);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
    const struct slab_node *n = &c->node[0];
    unsigned long bound = n->nr_slabs + 64;
    for (int list = 0; list < 2 && locs && mem; list++) {
        unsigned long k = 0;
        for (uintptr_t pg = (uintptr_t)(list ? n->full : n->partial); pg && k < bound; k++) {
            struct sk_page p;
            if (read_slab(r, pg, ca, &p) != 0)
                break;   /* the list changed under us: what was read stands */
            pg = (uintptr_t)p.slab.next;
            size_t len = (size_t)c->objects * c->size;
            if (len > slab_bytes || rmt_read(r, (uintptr_t)p.slab.s_mem, mem, len) != 0)
                continue;
            for (unsigned i = 0; i < c->objects; i++) {
                char *obj = mem + (size_t)i * c->size;
                uintptr_t mark;
                memcpy(&mark, obj + c->kofs, sizeof mark);
                if (which == TRACK_ALLOC ? mark != 0 : mark != key)
                    continue;
                struct debug_track t;
                memcpy(&t, obj + c->dbg.track_off + (size_t)which * sizeof t, sizeof t);
                if (!t.ms || t.nframes > TRACK_FRAMES)
                    continue;
                /* slabkit's own frames first: skipped, unless all are. */
                unsigned skip = 0;
                while (skip < t.nframes && in_module(maps, nmaps, own, (uintptr_t)t.frames[skip]))
                    skip++;
                if (skip == t.nframes)
                    skip = 0;
                uint32_t orig;
                memcpy(&orig, obj + c->dbg.orig_off, sizeof orig);
                unsigned long bytes = which != TRACK_ALLOC ? 0 : c->kmalloc && orig ? orig : c->object_size;
                calls_add(locs, t.nframes ? (uintptr_t)t.frames[skip] : 0, now > t.ms ? now - t.ms : 0, t.tid, t.cpu,
                          bytes);
            }
        }
    }
    size_t m = locs ? calls_sort(locs) : 0;
    if (!m)
        fprintf(out, "No data\n");
    /* Name each site once; keep the last file's symbols, as most sites are
     * in the program. */
    struct symfile f = { .path = "" };
    for (size_t i = 0; i < m; i++) {
        char site[700] = "<no stack>", line[1100];
        uintptr_t a = locs[i].site;
        long mi = a ? map_of(maps, nmaps, a - 1) : -1;
        if (mi >= 0) {
            uintptr_t base = map_base(maps, nmaps, (size_t)mi);
            if (strcmp(f.path, maps[mi].path)) {
                symfile_free(&f);
                symfile_load(&f, maps[mi].path, base);
            }
            symfile_name(&f, a, base, site, sizeof site);
        } else if (a) {
            snprintf(site, sizeof site, "0x%lx", (unsigned long)a);
        }
        calls_line(line, sizeof line, &locs[i], site, which == TRACK_ALLOC);
        fputs(line, out);
    }
    symfile_free(&f);
    free(locs);
    free(mem);
}

int rmt_calls(struct rmt *r, const char *name, FILE *out, char *err, size_t errlen)
{
    uintptr_t ca, key = 0;
    struct slab_cache *c = malloc(sizeof *c);
    if (!c || rmt_read(r, (uintptr_t)r->root.caches, &ca, sizeof ca) != 0 ||
        rmt_read(r, (uintptr_t)r->root.free_key, &key, sizeof key) != 0) {
        free(c);
        explain_read(r, errno, err, errlen);
        return -1;
    }
    size_t k = 0;
    for (; ca && k < RMT_MAX_CACHES; ca = (uintptr_t)c->next, k++) {
        if (ca % CACHE_LINE || rmt_read(r, ca, c, sizeof *c) != 0) {
            free(c);
            explain_read(r, errno, err, errlen);
            return -1;
        }
        if (!strncmp(c->name, name, sizeof c->name))
            break;
    }
    if (!ca || k == RMT_MAX_CACHES) {
        free(c);
        snprintf(err, errlen, "no cache named '%s' in process %d", name, (int)r->pid);
        return -1;
    }
    if (c->mode != SLAB_MODE_DEBUG || !(c->flags & SK_DEBUG_U)) {
        fprintf(out, "alloc_calls %s:\nNo data\nfree_calls %s:\nNo data\n", c->name, c->name);
        free(c);
        return 0;
    }
    struct mapping *maps = NULL;
    size_t nmaps = 0;
    if (read_maps(r->pid, &maps, &nmaps) != 0)
        nmaps = 0;
    long own = maps ? map_of(maps, nmaps, r->root_addr) : -1;
    calls_one(r, c, ca, TRACK_ALLOC, key, maps, nmaps, own, out);
    calls_one(r, c, ca, TRACK_FREE, key, maps, nmaps, own, out);
    free(maps);
    free(c);
    return 0;
}

