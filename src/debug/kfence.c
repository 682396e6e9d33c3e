/*
 * kfence.c — KFENCE: sampled guarded allocations, after the kernel's
 * mm/kfence (docs/kfence.md has the design and the report format).
 *
 * The pool: 2N+1 pages reserved PROT_NONE; slot i's object page is page
 * 2i+1, so every object page has a guard page on each side.  A slot is
 * UNUSED (never handed out), ALLOCATED (its page read-write) or FREED (its
 * page decommitted: PROT_NONE again, contents dropped).  Free slots wait
 * in a FIFO, so a freed page stays protected for as long as possible
 * before it is reused (the quarantine).  An object sits against one end
 * of its page, alternately left (underflows hit the guard page) and right
 * (its end at the page end, its start rounded down to its kmalloc class's
 * alignment: overflows hit the guard page); the rest of the page is canary
 * bytes, checked at free.
 *
 * Sampling: a timer thread wakes every kfence ms and, when no sample is
 * pending and a slot is free, arms: it diverts the small-malloc tables to
 * the empty arrays (kmalloc_tables_divert) and sets state ARMED.  The next
 * small malloc reaches kmalloc_slow -> kfence_poll, which takes the state
 * ARMED -> TAKING (one winner), serves the request from the pool, restores
 * the tables and sets IDLE.  The state orders divert and restore: only the
 * thread diverts, only from IDLE; only the TAKING winner restores.
 *
 * Reports: a SIGSEGV handler, installed with the pool, reports faults in
 * the pool and aborts; any other fault goes to the handler that was there
 * before (or the default action).  Stacks and frame names are report.c's
 * (shared with slub_debug): backtrace() warmed at set-up, dladdr names,
 * module+offset for addr2line.  Reports go to stderr through os_printf (no
 * stdio, no allocation).
 *
 * This file makes its own system calls (sigaction, mprotect by way of
 * os_commit/os_decommit) and calls the dynamic linker (dladdr): KFENCE is a
 * debugging aid outside the allocator proper.
 *
 * Lock order: pool_lock (a spinlock) guards the FIFO only; nothing else is
 * taken under it, and no system call is made under it.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "debug/kfence.h"
#include "debug/report.h"
#include "slab/kmalloc.h"

uintptr_t kfence_pool_start;
size_t kfence_pool_size;

#define KFENCE_FRAMES 24          /* return addresses kept per stack */
#define KFENCE_STACK (64 << 10)

enum { SLOT_UNUSED, SLOT_ALLOCATED, SLOT_FREEING, SLOT_FREED };
enum { ARM_IDLE, ARM_ARMED, ARM_TAKING };
enum { ST_NONE, ST_BUSY, ST_READY, ST_OFF };

struct kfence_track {
    int tid, cpu;
    uint64_t ns;                  /* CLOCK_MONOTONIC */
    int nframes;
    void *frames[KFENCE_FRAMES];
};

struct kfence_slot {
    uintptr_t addr;               /* the object */
    const char *cache;            /* a kernel API cache's name; NULL: kmalloc's */
    uint32_t size;                /* asked for */
    uint32_t next;                /* FIFO link */
    int state;                    /* SLOT_* */
    struct kfence_track alloc, free;
};

static struct kfence_slot *slots;
static uint32_t nr_slots;
static spinlock_t pool_lock;
static uint32_t fifo_head = UINT32_MAX, fifo_tail = UINT32_MAX;
static uint32_t fifo_count;
static unsigned long placements;  /* under pool_lock: left/right alternation */

static int arm_state;             /* ARM_*: the sampling "static key" */
static int setup_state;           /* ST_*: pool, handler, unwinder */
static int thread_state;          /* ST_*: the timer thread of this process */
static struct sigaction old_segv;

#define CANARY(addr) ((uint8_t)(0xcb ^ ((uintptr_t)(addr) & 7)))

static uintptr_t slot_page(uint32_t i)
{
    return kfence_pool_start + ((size_t)(2 * i + 1) << SK_PAGE_SHIFT);
}

/* ---- stacks and names ---- */

static void track_record(struct kfence_track *t)
{
    t->tid = os_gettid();
    t->cpu = os_getcpu();
    t->ns = os_now_ns();
    t->nframes = report_stack(t->frames, KFENCE_FRAMES);
}

static void print_track(const char *what, const struct kfence_track *t)
{
    os_printf(2, "\n%s by task %d on cpu %d at %lu.%06lus:\n", what, t->tid, t->cpu,
              (unsigned long)(t->ns / 1000000000), (unsigned long)(t->ns % 1000000000 / 1000));
    int skip = report_skip_allocator(t->frames, t->nframes);
    report_print_frames(t->frames + skip, t->nframes - skip);
}

static const char *class_name(uint32_t size)
{
    if (!size || size > KMALLOC_MAX_CACHE_SIZE || !kmalloc_caches[kmalloc_index(size)])
        return "kmalloc";
    return kmalloc_caches[kmalloc_index(size)]->name;
}

static void print_object(uint32_t i)
{
    const struct kfence_slot *s = &slots[i];
    os_printf(2, "\nkfence-#%u: 0x%lx-0x%lx, size=%u, cache=%s\n", i, (unsigned long)s->addr,
              (unsigned long)(s->addr + s->size - 1), s->size, s->cache ? s->cache : class_name(s->size));
    print_track("allocated", &s->alloc);
    if (s->state == SLOT_FREED || s->state == SLOT_FREEING)
        print_track("freed", &s->free);
}

static const char rule[] = "==================================================================\n";

static void report_end(void)
{
    os_printf(2, "\nCPU: %d PID: %d TID: %d\n%s", os_getcpu(), (int)getpid(), os_gettid(), rule);
}

/* A report from a call (free, realloc, malloc_usable_size): the caller's
 * stack, from here. */
static __attribute__((noreturn)) void report_call(const char *what, uint32_t i, const char *line)
{
    void *frames[KFENCE_FRAMES];
    int n = report_stack(frames, KFENCE_FRAMES);
    int skip = report_skip_allocator(frames, n);
    char fn[320];
    if (n)
        report_format_frame(fn, sizeof fn, frames[skip], true);
    else
        snprintf(fn, sizeof fn, "?");
    os_printf(2, "%sBUG: KFENCE: %s in %s\n\n", rule, what, fn);
    os_printf(2, "%s", line);
    report_print_frames(frames + skip, n - skip);
    print_object(i);
    report_end();
    abort();
}

/* ---- the pool ---- */

static uint32_t slot_of_addr(uintptr_t a)
{
    return (uint32_t)(((a - kfence_pool_start) >> SK_PAGE_SHIFT) - 1) / 2;
}

static void fifo_push(uint32_t i)
{
    slots[i].next = UINT32_MAX;
    if (fifo_tail == UINT32_MAX)
        fifo_head = i;
    else
        slots[fifo_tail].next = i;
    fifo_tail = i;
    fifo_count++;
}

static uint32_t fifo_pop(bool *right)
{
    uint32_t i = fifo_head;
    if (i == UINT32_MAX)
        return i;
    fifo_head = slots[i].next;
    if (fifo_head == UINT32_MAX)
        fifo_tail = UINT32_MAX;
    fifo_count--;
    *right = !(placements++ & 1);
    return i;
}

static void *kfence_alloc(size_t size, size_t align, const char *cache)
{
    bool right = false;
    spin_lock(&pool_lock);
    uint32_t i = fifo_pop(&right);
    spin_unlock(&pool_lock);
    if (i == UINT32_MAX)
        return NULL;                      /* the pool is full: skip */
    uintptr_t page = slot_page(i);
    if (os_commit((void *)page, SK_PAGE_SIZE) != 0) {
        spin_lock(&pool_lock);
        fifo_push(i);
        spin_unlock(&pool_lock);
        return NULL;
    }
    if (!size)
        size = 1;
    /* The alignment its class would have given it: kmalloc classes are
     * naturally aligned (sk_malloc(4096) is page-aligned), at least 16; a
     * cache's, its own. */
    if (!cache) {
        align = kmalloc_caches[kmalloc_index(size)]->align;
        if (align < 16)
            align = 16;
    }
    uintptr_t obj = right ? SK_ALIGN_DOWN(page + SK_PAGE_SIZE - size, align) : page;
    struct kfence_slot *s = &slots[i];
    for (uintptr_t a = page; a < obj; a++)
        *(uint8_t *)a = CANARY(a);
    for (uintptr_t a = obj + size; a < page + SK_PAGE_SIZE; a++)
        *(uint8_t *)a = CANARY(a);
    s->addr = obj;
    s->cache = cache;
    s->size = (uint32_t)size;
    track_record(&s->alloc);
    __atomic_store_n(&s->state, SLOT_ALLOCATED, __ATOMIC_RELEASE);
    return (void *)obj;
}

/* The slot of a pool pointer that must be a live object's start, else a
 * report naming `call`. */
static uint32_t live_slot(const void *p, const char *call, const char *what)
{
    uintptr_t a = (uintptr_t)p;
    size_t page = (a - kfence_pool_start) >> SK_PAGE_SHIFT;
    char line[160];
    if (!(page & 1) || page / 2 >= nr_slots) {
        /* A guard page: name the nearer object. */
        uint32_t i = page / 2 < nr_slots ? (uint32_t)(page / 2) : nr_slots - 1;
        snprintf(line, sizeof line, "Invalid %s(0x%lx): a guard page (near kfence-#%u):\n", call,
                 (unsigned long)a, i);
        report_call(what, i, line);
    }
    uint32_t i = slot_of_addr(a);
    int st = __atomic_load_n(&slots[i].state, __ATOMIC_ACQUIRE);
    if (st != SLOT_ALLOCATED || slots[i].addr != a) {
        snprintf(line, sizeof line, "Invalid %s(0x%lx) %s (in kfence-#%u):\n", call, (unsigned long)a,
                 st == SLOT_ALLOCATED ? "of an interior pointer" : st == SLOT_UNUSED ? "of a never allocated object" :
                 "of a freed object", i);
        report_call(what, i, line);
    }
    return i;
}

size_t kfence_size(const void *p, const char *call)
{
    return slots[live_slot(p, call, "invalid access")].size;
}

void kfence_free(void *p, const char *call)
{
    uint32_t i = live_slot(p, call, "invalid free");
    struct kfence_slot *s = &slots[i];
    int expect = SLOT_ALLOCATED;
    if (!__atomic_compare_exchange_n(&s->state, &expect, SLOT_FREEING, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
        char line[160];
        snprintf(line, sizeof line, "Invalid %s(0x%lx) of a freed object (in kfence-#%u):\n", call,
                 (unsigned long)p, i);
        report_call("invalid free", i, line);
    }
    uintptr_t page = slot_page(i), obj = s->addr;
    uintptr_t bad = 0;
    for (uintptr_t a = page; a < obj && !bad; a++)
        if (*(uint8_t *)a != CANARY(a))
            bad = a;
    for (uintptr_t a = obj + s->size; a < page + SK_PAGE_SIZE && !bad; a++)
        if (*(uint8_t *)a != CANARY(a))
            bad = a;
    if (bad) {
        /* The kernel's picture: the corrupted bytes in hex, good ones '.'. */
        char bytes[16 * 5 + 4];
        size_t n = 0;
        for (uintptr_t a = bad; a < bad + 16 && a < page + SK_PAGE_SIZE && n < sizeof bytes - 6; a++) {
            if (a >= obj && a < obj + s->size)
                break;
            uint8_t v = *(uint8_t *)a;
            n += (size_t)snprintf(bytes + n, sizeof bytes - n, v == CANARY(a) ? " ." : " 0x%02x", v);
        }
        char line[sizeof bytes + 80];
        snprintf(line, sizeof line, "Corrupted memory at 0x%lx [%s ] (in kfence-#%u):\n", (unsigned long)bad,
                 bytes, i);
        __atomic_store_n(&s->state, SLOT_ALLOCATED, __ATOMIC_RELAXED);
        report_call("memory corruption", i, line);
    }
    track_record(&s->free);
    os_decommit((void *)page, SK_PAGE_SIZE);   /* PROT_NONE; contents dropped */
    __atomic_store_n(&s->state, SLOT_FREED, __ATOMIC_RELEASE);
    spin_lock(&pool_lock);
    fifo_push(i);
    spin_unlock(&pool_lock);
}

/* ---- the fault handler ---- */

static void chain(int sig, siginfo_t *si, void *uc)
{
    if (old_segv.sa_flags & SA_SIGINFO) {
        old_segv.sa_sigaction(sig, si, uc);
        return;
    }
    if (old_segv.sa_handler == SIG_DFL || old_segv.sa_handler == SIG_IGN) {
        /* Return to the faulting instruction with the default action; a
         * signal sent by a process (kill, raise) is not repeated by
         * returning: send it again, delivered once this handler returns. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(sig, &dfl, NULL);
        if (si->si_code <= 0)
            raise(sig);
        return;
    }
    old_segv.sa_handler(sig);
}

static void segv_handler(int sig, siginfo_t *si, void *ucp)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    if (!kfence_addr((void *)a) || !slots) {
        chain(sig, si, ucp);
        return;
    }
    const char *rw = "read";
    void *ip = NULL;
#if defined(__x86_64__)
    ucontext_t *uc = ucp;
    if (uc->uc_mcontext.gregs[REG_ERR] & 2)    /* the page fault's error code: a write */
        rw = "write";
    ip = (void *)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    ucontext_t *uc = ucp;
    ip = (void *)uc->uc_mcontext.pc;
    rw = "access";
#else
    rw = "access";
#endif
    size_t page = (a - kfence_pool_start) >> SK_PAGE_SHIFT;
    uint32_t i;
    const char *kind;
    char where[128];
    if (page & 1) {
        i = (uint32_t)(page / 2);
        int st = __atomic_load_n(&slots[i].state, __ATOMIC_ACQUIRE);
        kind = st == SLOT_FREED || st == SLOT_FREEING ? "use-after-free" : "invalid";
        snprintf(where, sizeof where, "(in kfence-#%u)", i);
    } else {
        /* A guard page: the nearer of the objects on either side that has
         * ever been handed out. */
        uint32_t left = page ? (uint32_t)(page / 2 - 1) : UINT32_MAX;
        uint32_t right = page / 2 < nr_slots ? (uint32_t)(page / 2) : UINT32_MAX;
        uintptr_t dl = UINTPTR_MAX, dr = UINTPTR_MAX;
        if (left != UINT32_MAX && slots[left].state != SLOT_UNUSED)
            dl = a - (slots[left].addr + slots[left].size) + 1;
        if (right != UINT32_MAX && slots[right].state != SLOT_UNUSED)
            dr = slots[right].addr - a;
        kind = "out-of-bounds";
        if (dl <= dr && dl != UINTPTR_MAX) {
            i = left;
            snprintf(where, sizeof where, "(%luB right of kfence-#%u)", (unsigned long)dl, i);
        } else if (dr != UINTPTR_MAX) {
            i = right;
            snprintf(where, sizeof where, "(%luB left of kfence-#%u)", (unsigned long)dr, i);
        } else {
            i = right != UINT32_MAX ? right : left;
            kind = "invalid";
            snprintf(where, sizeof where, "(guard page of kfence-#%u)", i);
        }
    }
    void *frames[KFENCE_FRAMES + 8];
    int n = report_stack(frames, KFENCE_FRAMES + 8), first = n;
    for (int k = 0; k < n; k++)
        if (frames[k] == ip) {
            first = k;
            break;
        }
    char fn[320];
    if (ip)
        report_format_frame(fn, sizeof fn, ip, false);
    else
        snprintf(fn, sizeof fn, "?");
    os_printf(2, "%sBUG: KFENCE: %s %s in %s\n\n", rule, kind, rw, fn);
    os_printf(2, "%c%s %s at 0x%lx %s:\n", kind[0] == 'u' ? 'U' : kind[0] == 'o' ? 'O' : 'I', kind + 1, rw,
              (unsigned long)a, where);
    /* The faulting frame is an exact address, the rest return addresses. */
    if (ip)
        report_print_frame(ip, false);
    if (first < n)
        report_print_frames(frames + first + 1, n - first - 1);
    print_object(i);
    report_end();
    abort();
}

/* ---- set-up, the timer, fork ---- */

static void *kfence_timer(void *arg)
{
    (void)arg;
    uint64_t ms = (uint64_t)sk_opt.kfence, checked = 0;
    for (;;) {
        os_sleep_ms(ms);
        /* The leader called pthread_exit: end the process when only
         * slabkit's threads are left (os.h), checked every 100 ms. */
        if (os_leader_gone() && os_now_ms_coarse() - checked >= 100) {
            checked = os_now_ms_coarse();
            os_exit_if_orphaned();
        }
        if (__atomic_load_n(&arm_state, __ATOMIC_ACQUIRE) != ARM_IDLE ||
            !__atomic_load_n(&fifo_count, __ATOMIC_RELAXED))
            continue;
        kmalloc_tables_divert(true);
        __atomic_store_n(&arm_state, ARM_ARMED, __ATOMIC_RELEASE);
    }
    return NULL;
}

static int setup(void)
{
    long n = sk_opt.kfence_pages;
    size_t bytes = (size_t)(2 * n + 1) << SK_PAGE_SHIFT;
    void *pool = os_reserve(bytes, SK_PAGE_SIZE);
    if (!pool)
        return -1;
    struct kfence_slot *s = os_map(SK_ALIGN_UP(sizeof *s * (size_t)n, SK_PAGE_SIZE), SK_PAGE_SIZE);
    if (!s) {
        os_unmap(pool, bytes);
        return -1;
    }
    slots = s;
    nr_slots = (uint32_t)n;
    for (uint32_t i = 0; i < nr_slots; i++)
        fifo_push(i);
    /* The unwinder loads on its first call, allocating: do that now
     * (kfence_poll's state keeps this thread's nested mallocs out). */
    report_ready();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = segv_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &old_segv) != 0)
        return -1;
    kfence_pool_start = (uintptr_t)pool;
    __atomic_store_n(&kfence_pool_size, bytes, __ATOMIC_RELEASE);
    if (sk_opt.verbose)
        os_warn("kfence: %u objects every %ld ms, pool at %p", nr_slots, sk_opt.kfence, pool);
    return 0;
}

static void *sample(size_t size, size_t align, const char *cache)
{
    int st = __atomic_load_n(&setup_state, __ATOMIC_ACQUIRE);
    if (unlikely(st != ST_READY)) {
        int expect = ST_NONE;
        if (st != ST_NONE ||
            !__atomic_compare_exchange_n(&setup_state, &expect, ST_BUSY, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            return NULL;     /* off, or being set up (maybe by this thread, in the unwinder) */
        int r = setup();
        __atomic_store_n(&setup_state, r ? ST_OFF : ST_READY, __ATOMIC_RELEASE);
        if (r)
            return NULL;
    }
    if (unlikely(__atomic_load_n(&thread_state, __ATOMIC_ACQUIRE) == ST_NONE)) {
        int expect = ST_NONE;
        if (__atomic_compare_exchange_n(&thread_state, &expect, ST_BUSY, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            int r = os_thread_start(kfence_timer, NULL, "sk_kfence", KFENCE_STACK);
            __atomic_store_n(&thread_state, r ? ST_OFF : ST_READY, __ATOMIC_RELEASE);
        }
    }
    if (__atomic_load_n(&arm_state, __ATOMIC_ACQUIRE) != ARM_ARMED || size > KFENCE_MAX_SIZE)
        return NULL;
    int expect = ARM_ARMED;
    if (!__atomic_compare_exchange_n(&arm_state, &expect, ARM_TAKING, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return NULL;
    void *p = kfence_alloc(size, align, cache);
    kmalloc_tables_divert(false);
    __atomic_store_n(&arm_state, ARM_IDLE, __ATOMIC_RELEASE);
    return p;
}

void *kfence_poll(size_t size)
{
    return sample(size, 0, NULL);
}

void *kfence_poll_cache(const char *cache, size_t size, size_t align)
{
    if (size > KFENCE_MAX_SIZE || align > SK_PAGE_SIZE || SK_ALIGN_UP(size, align ? align : 1) > SK_PAGE_SIZE)
        return NULL;
    return sample(size, align ? align : 8, cache);
}

void kfence_atfork_child(void)
{
    if (__atomic_load_n(&setup_state, __ATOMIC_RELAXED) != ST_READY)
        return;
    pool_lock.v = 0;
    /* The parent's timer thread is not here.  A sample caught half-way
     * leaks its slot (it left the FIFO).  Arming now sends the child's next
     * small malloc to the slow path, which starts the child's timer. */
    __atomic_store_n(&thread_state, ST_NONE, __ATOMIC_RELAXED);
    kmalloc_tables_divert(true);
    __atomic_store_n(&arm_state, ARM_ARMED, __ATOMIC_RELEASE);
}

SK_API int sk_kfence_object(const void *p)
{
    if (!kfence_addr(p))
        return 0;
    size_t page = ((uintptr_t)p - kfence_pool_start) >> SK_PAGE_SHIFT;
    return (page & 1) && page / 2 < nr_slots &&
           __atomic_load_n(&slots[page / 2].state, __ATOMIC_ACQUIRE) == SLOT_ALLOCATED;
}

void kfence_for_each_live(void (*fn)(uintptr_t addr, size_t size, void *arg), void *arg)
{
    if (!slots)
        return;
    for (uint32_t i = 0; i < nr_slots; i++)
        if (__atomic_load_n(&slots[i].state, __ATOMIC_ACQUIRE) == SLOT_ALLOCATED)
            fn(slots[i].addr, slots[i].size, arg);
}
