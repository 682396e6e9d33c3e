/*
 * report.c — stacks and frame names for the heap-bug reports (report.h):
 * KFENCE's (kfence.c) and slub_debug's (slab_debug.c).
 *
 * Invariants: nothing here allocates once report_ready() has returned
 * true: backtrace() has loaded its unwinder, dladdr reads the loader's
 * tables, and output goes through os_printf (a stack buffer and write(2)).
 * Frames stay small: reports may run on a signal stack.
 * Lock order: no slabkit lock but symtab_lock, a leaf; state is a one-way
 * flag (NONE -> BUSY -> READY).  dladdr takes the dynamic loader's lock: callers print with no
 * slabkit lock held (a thread in dlopen may be waiting for one in malloc).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lock/lock.h"
#include "debug/report.h"

enum { ST_NONE, ST_BUSY, ST_READY };
static int state;
static uintptr_t self_base;       /* slabkit's module, for skipping its frames */
static bool self_shared;          /* slabkit is a shared object (not linked in) */
static uintptr_t main_base;       /* the main program's module */
/* The main program's path (dladdr may give it as ""), read at set-up. */
static char exe_path[256] = "?";

bool report_ready(void)
{
    int st = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    if (likely(st == ST_READY))
        return true;
    int expect = ST_NONE;
    if (st != ST_NONE ||
        !__atomic_compare_exchange_n(&state, &expect, ST_BUSY, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return false;     /* being set up (maybe by this thread, in the unwinder) */
    Dl_info di, me;
    if (dladdr((void *)getauxval(AT_ENTRY), &me))
        main_base = (uintptr_t)me.dli_fbase;
    if (dladdr((void *)report_ready, &di)) {
        self_base = (uintptr_t)di.dli_fbase;
        self_shared = !main_base || main_base != self_base;
    }
    ssize_t len = readlink("/proc/self/exe", exe_path, sizeof exe_path - 1);
    if (len > 0)
        exe_path[len] = 0;
    /* The unwinder loads on the first call, allocating: do that now. */
    void *warm[4];
    backtrace(warm, 4);
    __atomic_store_n(&state, ST_READY, __ATOMIC_RELEASE);
    return true;
}

void report_atfork_child(void)
{
    if (__atomic_load_n(&state, __ATOMIC_RELAXED) == ST_BUSY)
        __atomic_store_n(&state, ST_NONE, __ATOMIC_RELAXED);
}

int report_stack(void **frames, int max)
{
    return report_ready() ? backtrace(frames, max) : 0;
}

static const char *const entry_names[] = {
    "malloc", "calloc", "realloc", "reallocarray", "free", "cfree", "free_sized", "free_aligned_sized",
    "aligned_alloc", "posix_memalign", "memalign", "valloc", "pvalloc", "malloc_usable_size",
    "sk_", "_Znwm", "_Znam", "_ZdlPv", "_ZdaPv", "_ZnwmRKSt9nothrow_t",
};

/* Is the return address a frame of slabkit's allocator itself?  In the
 * shared library, any frame of it; linked into a program, its hidden
 * functions (no name for dladdr) and its named entry points. */
static bool allocator_frame(void *ret)
{
    Dl_info di;
    if (!dladdr((char *)ret - 1, &di) || (uintptr_t)di.dli_fbase != self_base)
        return false;
    if (self_shared || !di.dli_sname)
        return true;
    for (size_t i = 0; i < SK_ARRAY_SIZE(entry_names); i++)
        if (!strncmp(di.dli_sname, entry_names[i], strlen(entry_names[i])))
            return true;
    return false;
}

struct frame_name;
static bool frame_name(void *addr, bool ret, struct frame_name *f);
static bool entry_frame(void *ret);

/* Frames searched for slabkit's entry points in a program it is linked
 * into. */
#define ENTRY_SEARCH 24

int report_skip_allocator(void *const *frames, int n)
{
    int i = 0;
    while (i < n && allocator_frame(frames[i]))
        i++;
    Dl_info di;
    if (!self_shared && i > 0 && i < n &&
        !(dladdr((char *)frames[i] - 1, &di) && (uintptr_t)di.dli_fbase == self_base)) {
        /* Linked into a program that exports none of its functions (no
         * -rdynamic), dladdr names none of the program's frames either:
         * they all looked like slabkit's, and the stack began in libc
         * (__libc_start_main, in the kernel harness's debug=U tracks).
         * Skip through the outermost of slabkit's entry points among the
         * first frames instead, named from .symtab. */
        int last = -1;
        for (int k = 0; k < i && k < ENTRY_SEARCH; k++)
            if (entry_frame(frames[k]))
                last = k;
        return last + 1;
    }
    return i == n ? 0 : i;
}

/* A module's path for addr2line: the main program's as /proc/self/exe
 * has it (dladdr gives "" or the relative name it was started by, which
 * a reader in another directory, or after a chdir, cannot open). */
static const char *module_name(const Dl_info *di)
{
    if ((uintptr_t)di->dli_fbase == main_base || !di->dli_fname || !di->dli_fname[0])
        return exe_path;
    return di->dli_fname;
}

/* The offset addr2line -e takes: from the load base for position-
 * independent modules, the address itself for a fixed-address program. */
static uintptr_t module_offset(const Dl_info *di, uintptr_t addr)
{
    const Elf64_Ehdr *eh = di->dli_fbase;
    return eh && eh->e_type == ET_EXEC ? addr : addr - (uintptr_t)eh;
}

/* A frame's address: a return address (ret) is looked up one byte back,
 * inside its call instruction, so that its module offset is what
 * addr2line needs to name the line of the call; the name's offset is the
 * address itself, as the kernel prints it. */
struct frame_name {
    const char *sym, *module;
    unsigned long sym_off, sym_size, mod_off;
};

/*
 * Static functions: dladdr reads only the dynamic symbol table, which
 * holds what a module exports, so a static function (or any function of
 * a program linked without -rdynamic) had no name.  The full table,
 * .symtab, is in the module's file unless it was stripped: mapped
 * read-only on the first report that needs it (no malloc), kept mapped
 * for the next (a report is rare, and mostly the last thing a process
 * does), MODULES_MAPPED modules at most.
 */
#define MODULES_MAPPED 8
static struct symtab {
    char path[256];
    const ElfW(Sym) *syms;
    size_t nsyms;
    const char *strs;
    size_t strs_size;
} symtabs[MODULES_MAPPED];
static int nr_symtabs;
static spinlock_t symtab_lock = SPINLOCK_INIT;

/* The .symtab of the ELF file at path, mapped; false if it has none. */
static bool symtab_map(const char *path, struct symtab *t)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    void *m = MAP_FAILED;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(ElfW(Ehdr)))
        m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return false;
    size_t size = (size_t)st.st_size;
    const ElfW(Ehdr) *eh = m;
    const ElfW(Shdr) *sh = (const ElfW(Shdr) *)((const char *)m + eh->e_shoff);
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_shentsize != sizeof *sh ||
        eh->e_shoff + (size_t)eh->e_shnum * sizeof *sh > size)
        goto none;
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum)
            continue;
        const ElfW(Shdr) *str = &sh[sh[i].sh_link];
        if (sh[i].sh_offset + sh[i].sh_size > size || str->sh_offset + str->sh_size > size)
            goto none;
        t->syms = (const ElfW(Sym) *)((const char *)m + sh[i].sh_offset);
        t->nsyms = sh[i].sh_size / sizeof(ElfW(Sym));
        t->strs = (const char *)m + str->sh_offset;
        t->strs_size = str->sh_size;
        return true;
    }
none:
    munmap(m, size);
    return false;
}

/* The function of module `path` around module offset off, from .symtab:
 * its name, and off's distance into it and its size. */
static bool symtab_name(const char *path, unsigned long off, struct frame_name *f)
{
    spin_lock(&symtab_lock);
    struct symtab *t = NULL;
    for (int i = 0; i < nr_symtabs && !t; i++)
        if (!strcmp(symtabs[i].path, path))
            t = &symtabs[i];
    if (!t && nr_symtabs < MODULES_MAPPED && strlen(path) < sizeof symtabs[0].path) {
        struct symtab *n = &symtabs[nr_symtabs];
        strcpy(n->path, path);
        if (!symtab_map(path, n))
            n->syms = NULL;      /* remembered: no table */
        nr_symtabs++;
        t = n;
    }
    spin_unlock(&symtab_lock);
    if (!t || !t->syms)
        return false;
    for (size_t i = 0; i < t->nsyms; i++) {
        const ElfW(Sym) *s = &t->syms[i];
        if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || !s->st_size || s->st_name >= t->strs_size)
            continue;
        if (off >= s->st_value && off - s->st_value < s->st_size) {
            f->sym = t->strs + s->st_name;
            f->sym_off = off - (unsigned long)s->st_value;
            f->sym_size = (unsigned long)s->st_size;
            return true;
        }
    }
    return false;
}

static bool frame_name(void *addr, bool ret, struct frame_name *f)
{
    Dl_info di;
    const ElfW(Sym) *sym = NULL;
    uintptr_t a = (uintptr_t)addr, look = a - ret;
    if (!dladdr1((void *)look, &di, (void **)&sym, RTLD_DL_SYMENT))
        return false;
    f->sym = di.dli_sname && di.dli_saddr ? di.dli_sname : NULL;
    f->sym_off = f->sym ? (unsigned long)(a - (uintptr_t)di.dli_saddr) : 0;
    f->sym_size = f->sym && sym ? (unsigned long)sym->st_size : 0;
    f->module = module_name(&di);
    f->mod_off = (unsigned long)module_offset(&di, look);
    /* No exported name, or the nearest exported one ends before addr (a
     * static function after it): the full symbol table knows better.
     * Its name's offset is to the address itself, as dladdr's. */
    if ((!f->sym || (f->sym_size && f->sym_off > f->sym_size)) && symtab_name(f->module, f->mod_off, f))
        f->sym_off += ret;
    return true;
}

/* Is the return address in one of slabkit's entry points (entry_names),
 * named by dladdr or the module's .symtab? */
static bool entry_frame(void *ret)
{
    struct frame_name f;
    if (!frame_name(ret, true, &f) || !f.sym)
        return false;
    for (size_t i = 0; i < SK_ARRAY_SIZE(entry_names); i++)
        if (!strncmp(f.sym, entry_names[i], strlen(entry_names[i])))
            return true;
    return false;
}

static void format_frame(char *buf, size_t size, void *addr, bool ret, bool with_size)
{
    struct frame_name f;
    if (!frame_name(addr, ret, &f))
        snprintf(buf, size, "0x%lx", (unsigned long)(uintptr_t)addr);
    else if (f.sym && f.sym_size && with_size)
        snprintf(buf, size, "%s+0x%lx/0x%lx", f.sym, f.sym_off, f.sym_size);
    else if (f.sym)
        snprintf(buf, size, "%s+0x%lx", f.sym, f.sym_off);
    else
        snprintf(buf, size, "%s+0x%lx", f.module, f.mod_off);
}

void report_format_frame(char *buf, size_t size, void *addr, bool ret)
{
    format_frame(buf, size, addr, ret, false);
}

void report_format_site(char *buf, size_t size, void *addr)
{
    format_frame(buf, size, addr, true, true);
}

void report_print_frame(void *addr, bool ret)
{
    struct frame_name f;
    if (!frame_name(addr, ret, &f))
        os_printf(2, " 0x%lx\n", (unsigned long)(uintptr_t)addr);
    else if (f.sym)
        os_printf(2, " %s+0x%lx (%s+0x%lx)\n", f.sym, f.sym_off, f.module, f.mod_off);
    else
        os_printf(2, " %s+0x%lx\n", f.module, f.mod_off);
}

void report_print_frames(void *const *frames, int n)
{
    if (n > REPORT_PRINT_FRAMES)
        n = REPORT_PRINT_FRAMES;
    for (int i = 0; i < n; i++)
        report_print_frame(frames[i], true);
}
