/*
 * pair — the cost of one malloc+free pair, for instruction counts under
 * callgrind and for native nanoseconds.  Links no allocator: choose one
 * with LD_PRELOAD.
 *
 *     pair MODE N [BATCHES]
 *
 *   same        N pairs of malloc(64)/free on one thread, with 1000 blocks
 *               of mixed sizes live the whole time (a heap that is not empty)
 *   cross       one thread mallocs N 64-byte objects, another frees them;
 *               they are handed over in batches of 256 through a ring of 8
 *               batches under a mutex, so the hand-over costs about one
 *               instruction a pair
 *   norseq      `same` in a thread that first unregisters its rseq (a raw
 *               clone, a failed registration): slabkit serves it from a
 *               locked shared slot instead of its CPU's array
 *   null-same, null-cross
 *               the same loops with no malloc/free (a static object is
 *               passed instead): the harness's own instructions, which
 *               bench/pairs subtracts
 *
 * PAIR_SIZE=bytes in the environment makes the pairs (and cross's objects)
 * that size instead of 64 (bench/pairs --sizes).
 *
 * Size known (n is 64, or PAIR_SIZE): `same` through function pointers
 * found with dlsym, so that the two members of each pair differ only in
 * the free called:
 *   free        malloc(n) / free(p)
 *   free-sized  malloc(n) / free_sized(p, n) (C23; else the allocator's
 *               own: tc_free_sized, mi_free_size, sdallocx(p, n, 0))
 *   delete      operator new(n) / operator delete(p)
 *   delete-sized  operator new(n) / operator delete(p, n) (C++14)
 * C++'s operators are looked up after loading libstdc++, so an allocator
 * that does not define them gets libstdc++'s, on its malloc.  A mode the
 * allocator has no function for exits 3.
 *
 * Without BATCHES the program just runs (for callgrind: bench/pairs runs
 * N1 and N2 pairs and takes (Ir(N2) - Ir(N1)) / (N2 - N1), so start-up
 * cancels).  With BATCHES it runs N pairs BATCHES times natively and prints
 * the median nanoseconds a pair.
 */
#define _GNU_SOURCE
#include "bench.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <unistd.h>

#define OBJ 64
#define LIVE 1000
#define BATCH 256
#define RING 8

static int null_alloc;                 /* null-*: harness only */
static size_t obj_size = OBJ;          /* PAIR_SIZE=bytes: another size */
static unsigned char null_obj[OBJ];

static inline void *get(void)
{
    void *p = null_alloc ? (void *)null_obj : malloc(obj_size);
    /* The compiler may not drop a malloc/free pair it can see through. */
    __asm__ volatile("" : "+r"(p) : : "memory");
    return p;
}

static inline void put(void *p)
{
    __asm__ volatile("" : "+r"(p) : : "memory");
    if (!null_alloc)
        free(p);
}

/* ---- same thread ----------------------------------------------------------- */

static void **live;

static void live_make(void)
{
    static const size_t sizes[] = { 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024, 2048, 4000 };
    live = malloc(LIVE * sizeof *live);
    if (!live)
        abort();
    for (int i = 0; i < LIVE; i++) {
        size_t sz = sizes[(size_t)i % (sizeof sizes / sizeof sizes[0])];
        live[i] = malloc(sz);
        if (!live[i])
            abort();
        memset(live[i], i & 0xff, sz < 64 ? sz : 64);
    }
}

static void live_free(void)
{
    for (int i = 0; i < LIVE; i++)
        free(live[i]);
    free(live);
}

static void same(long n)
{
    for (long i = 0; i < n; i++) {
        void *p = get();
        if (!p)
            abort();
        put(p);
    }
}

/* ---- size known ------------------------------------------------------------ */

static void *(*alloc_fn)(size_t);
static void (*free_fn)(void *);
static void (*sized_fn)(void *, size_t);
static void (*sized3_fn)(void *, size_t, int);   /* jemalloc's sdallocx */

static void known_free(long n)
{
    for (long i = 0; i < n; i++) {
        void *p = alloc_fn(obj_size);
        __asm__ volatile("" : "+r"(p) : : "memory");
        free_fn(p);
    }
}

static void known_sized(long n)
{
    for (long i = 0; i < n; i++) {
        void *p = alloc_fn(obj_size);
        __asm__ volatile("" : "+r"(p) : : "memory");
        sized_fn(p, obj_size);
    }
}

static void known_sized3(long n)
{
    for (long i = 0; i < n; i++) {
        void *p = alloc_fn(obj_size);
        __asm__ volatile("" : "+r"(p) : : "memory");
        sized3_fn(p, obj_size, 0);
    }
}

/* The loop for a size-known mode, or NULL (with a note) when the
 * allocator has nothing for it. */
static void (*known_mode(const char *mode))(long)
{
    int cxx = !strncmp(mode, "delete", 6);
    if (cxx && !dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL)) {
        fprintf(stderr, "pair: cannot load libstdc++.so.6\n");
        return NULL;
    }
    alloc_fn = (void *(*)(size_t))dlsym(RTLD_DEFAULT, cxx ? "_Znwm" : "malloc");
    free_fn = (void (*)(void *))dlsym(RTLD_DEFAULT, cxx ? "_ZdlPv" : "free");
    if (!alloc_fn || !free_fn)
        return NULL;
    if (!strcmp(mode, "free") || !strcmp(mode, "delete"))
        return known_free;
    static const char *const c_sized[] = { "free_sized", "tc_free_sized", "mi_free_size" };
    if (cxx) {
        sized_fn = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "_ZdlPvm");
    } else {
        for (size_t i = 0; !sized_fn && i < sizeof c_sized / sizeof c_sized[0]; i++)
            sized_fn = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, c_sized[i]);
        if (!sized_fn && (sized3_fn = (void (*)(void *, size_t, int))dlsym(RTLD_DEFAULT, "sdallocx")))
            return known_sized3;
    }
    if (!sized_fn) {
        fprintf(stderr, "pair: no sized free for %s\n", mode);
        return NULL;
    }
    return known_sized;
}

/* ---- cross thread ---------------------------------------------------------- */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    long head, tail;             /* batches produced, batches consumed */
    void *slot[RING][BATCH];
} ring = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, { { 0 } } };

static long cross_batches;

static void *consumer(void *arg)
{
    (void)arg;
    for (long b = 0; b < cross_batches; b++) {
        pthread_mutex_lock(&ring.lock);
        while (ring.head == b)
            pthread_cond_wait(&ring.cond, &ring.lock);
        pthread_mutex_unlock(&ring.lock);
        void **s = ring.slot[b % RING];
        for (int i = 0; i < BATCH; i++)
            put(s[i]);
        pthread_mutex_lock(&ring.lock);
        ring.tail = b + 1;
        pthread_cond_broadcast(&ring.cond);
        pthread_mutex_unlock(&ring.lock);
    }
    return NULL;
}

static void cross(long n)
{
    cross_batches = (n + BATCH - 1) / BATCH;
    ring.head = ring.tail = 0;
    pthread_t t;
    if (pthread_create(&t, NULL, consumer, NULL))
        abort();
    for (long b = 0; b < cross_batches; b++) {
        pthread_mutex_lock(&ring.lock);
        while (b - ring.tail >= RING)
            pthread_cond_wait(&ring.cond, &ring.lock);
        pthread_mutex_unlock(&ring.lock);
        void **s = ring.slot[b % RING];
        for (int i = 0; i < BATCH; i++) {
            s[i] = get();
            if (!s[i])
                abort();
        }
        pthread_mutex_lock(&ring.lock);
        ring.head = b + 1;
        pthread_cond_broadcast(&ring.cond);
        pthread_mutex_unlock(&ring.lock);
    }
    pthread_join(t, NULL);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: pair same|cross|norseq|null-same|null-cross|free|free-sized|delete|delete-sized"
                        " N [BATCHES]\n");
        return 2;
    }
    const char *mode = argv[1];
    if (getenv("PAIR_SIZE") && (obj_size = (size_t)atol(getenv("PAIR_SIZE"))) == 0) {
        fprintf(stderr, "pair: bad PAIR_SIZE\n");
        return 2;
    }
    long n = atol(argv[2]);
    int batches = argc > 3 ? atoi(argv[3]) : 0;
    if (!strncmp(mode, "null-", 5)) {
        null_alloc = 1;
        mode += 5;
    }
    if (!strcmp(mode, "norseq")) {
        if (__rseq_size >= 20 &&
            syscall(SYS_rseq, (char *)__builtin_thread_pointer() + __rseq_offset,
                    __rseq_size < 32 ? 32 : __rseq_size, RSEQ_FLAG_UNREGISTER, RSEQ_SIG) != 0) {
            fprintf(stderr, "pair: cannot unregister rseq\n");
            return 1;
        }
        mode = "same";
    }
    void (*known)(long) = NULL;
    if (!strcmp(mode, "free") || !strcmp(mode, "free-sized") || !strcmp(mode, "delete") ||
        !strcmp(mode, "delete-sized")) {
        known = known_mode(mode);
        if (!known)
            return 3;
    }
    int is_cross = !strcmp(mode, "cross");
    if (!is_cross && !known && strcmp(mode, "same")) {
        fprintf(stderr, "pair: unknown mode %s\n", argv[1]);
        return 2;
    }
    void (*run)(long) = is_cross ? cross : known ? known : same;
    live_make();
    if (is_cross)
        n = (n + BATCH - 1) / BATCH * BATCH;
    if (batches <= 0) {
        run(n);
    } else {
        double *ns = malloc((size_t)batches * sizeof *ns);
        if (!ns)
            abort();
        /* One unmeasured round warms caches and the allocator's per-CPU state. */
        run(is_cross ? n / 4 + BATCH : n / 4 + 1);
        for (int b = 0; b < batches; b++) {
            uint64_t t0 = bench_now_ns();
            run(n);
            ns[b] = (double)(bench_now_ns() - t0) / (double)n;
        }
        printf("%.2f\n", bench_summary(ns, batches).median);
        free(ns);
    }
    live_free();
    return 0;
}
