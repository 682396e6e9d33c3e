/*
 * report.c — stacks and frame names for the heap-bug reports (report.h):
 * KFENCE's (kfence.c) and slub_debug's (slab_debug.c).
 *
 * Invariants: nothing here allocates once report_ready() has returned
 * true: backtrace() has loaded its unwinder, dladdr reads the loader's
 * tables, and output goes through os_printf (a stack buffer and write(2)).
 * Frames stay small: reports may run on a signal stack.
 * Lock order: no slabkit lock; state is a one-way flag (NONE -> BUSY ->
 * READY).  dladdr takes the dynamic loader's lock: callers print with no
 * slabkit lock held (a thread in dlopen may be waiting for one in malloc).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>
#include <link.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "slab/report.h"

enum { ST_NONE, ST_BUSY, ST_READY };
static int state;
static uintptr_t self_base;       /* slabkit's module, for skipping its frames */
static bool self_shared;          /* slabkit is a shared object (not linked in) */
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
    Dl_info di;
    if (dladdr((void *)report_ready, &di)) {
        self_base = (uintptr_t)di.dli_fbase;
        Dl_info me;
        self_shared = !dladdr((void *)getauxval(AT_ENTRY), &me) || me.dli_fbase != di.dli_fbase;
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

int report_skip_allocator(void *const *frames, int n)
{
    int i = 0;
    while (i < n && allocator_frame(frames[i]))
        i++;
    return i == n ? 0 : i;
}

/* A module's path for addr2line. */
static const char *module_name(const Dl_info *di)
{
    return di->dli_fname && di->dli_fname[0] ? di->dli_fname : exe_path;
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
    return true;
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
