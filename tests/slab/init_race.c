/*
 * init_race — slabkit's lazy start-up under concurrent first use.
 *
 * Eight threads, released together by a barrier, each make their first
 * slabkit call through a different door: sk_malloc, sk_trim, the page
 * allocator, sk_cache_create, sk_calloc, sk_cache_info, sk_realloc, and
 * sk_vm_map with sk_aligned_alloc; then each runs 300 sk_malloc/sk_free of
 * sizes up to 2000 bytes.  Every result is checked: the object is at least
 * as large as asked (an index read before the size-class table was filled
 * must not yield a smaller class), every byte writable and read back,
 * calloc memory zero, realloc keeps the contents, alignment honoured,
 * cache_info answers.  Start-up happens once per process, so the parent
 * re-executes itself once per rotation of doors to threads (8 children),
 * each a fresh process in which no slabkit call (nor stdio, which could
 * call malloc) precedes the race.
 *
 * TSAN: yes  (the ThreadSanitizer build checks the start-up's ordering:
 * every table a fast path reads is published after what it points to)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slabkit.h"
#include "tap.h"

#define N 8
#define ROUNDS 300

static pthread_barrier_t bar;
static int rot;
static int bad[N];
static char why[N][160];

#define FAIL(k, ...) do { if (!bad[k]) snprintf(why[k], sizeof why[k], __VA_ARGS__); bad[k] = 1; } while (0)

/* Fill n bytes and read them back; a malloc-family block's usable size
 * must also cover n (pages and mappings have none). */
static void fill(int k, unsigned char *p, size_t n, const char *what, int block)
{
    if (!p) {
        FAIL(k, "%s(%zu) returned NULL", what, n);
        return;
    }
    if (block && sk_usable_size(p) < n)
        FAIL(k, "%s(%zu) gave an object of %zu bytes", what, n, sk_usable_size(p));
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 7 + (size_t)k);
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 7 + (size_t)k)) {
            FAIL(k, "%s(%zu): byte %zu did not keep its value", what, n, i);
            return;
        }
}

static void use(int k, unsigned char *p, size_t n, const char *what)
{
    fill(k, p, n, what, 1);
}

static void first_call(int k, int door)
{
    switch (door % N) {
    case 0: {
        unsigned char *p = sk_malloc(24);
        use(k, p, 24, "sk_malloc");
        sk_free(p);
        break;
    }
    case 1:
        sk_trim();
        break;
    case 2: {
        unsigned char *p = sk_alloc_pages(1);
        fill(k, p, 8192, "sk_alloc_pages", 0);
        if (p)
            sk_free_pages(p, 1);
        break;
    }
    case 3: {
        sk_cache_t *c = sk_cache_create("init-race", 72, 0, 0, NULL);
        if (!c) {
            FAIL(k, "sk_cache_create failed");
            break;
        }
        unsigned char *o = sk_cache_alloc(c);
        use(k, o, 72, "sk_cache_alloc");
        sk_cache_free(c, o);
        break;
    }
    case 4: {
        unsigned char *p = sk_calloc(3, 300);
        for (size_t i = 0; p && i < 900; i++)
            if (p[i]) {
                FAIL(k, "sk_calloc(3, 300): byte %zu is not zero", i);
                break;
            }
        use(k, p, 900, "sk_calloc");
        sk_free(p);
        break;
    }
    case 5: {
        struct sk_cache_info info;
        if (sk_cache_info("kmalloc-64", &info) != 0 || info.object_size != 64)
            FAIL(k, "sk_cache_info(kmalloc-64) did not answer");
        break;
    }
    case 6: {
        unsigned char *p = sk_malloc(100);
        use(k, p, 100, "sk_malloc");
        unsigned char *q = p ? sk_realloc(p, 5000) : NULL;
        for (size_t i = 0; q && i < 100; i++)
            if (q[i] != (unsigned char)(i * 7 + (size_t)k)) {
                FAIL(k, "sk_realloc(100 -> 5000) lost byte %zu", i);
                break;
            }
        use(k, q, 5000, "sk_realloc");
        sk_free(q);
        break;
    }
    case 7: {
        unsigned char *m = sk_vm_map(1 << 20, 0);
        fill(k, m, 1 << 20, "sk_vm_map", 0);
        if (m)
            sk_vm_unmap(m, 1 << 20);
        unsigned char *a = sk_aligned_alloc(256, 40);
        if (a && (uintptr_t)a % 256)
            FAIL(k, "sk_aligned_alloc(256, 40) = %p is not aligned", (void *)a);
        use(k, a, 40, "sk_aligned_alloc");
        sk_free(a);
        break;
    }
    }
}

static void *thread(void *arg)
{
    int k = (int)(intptr_t)arg;
    pthread_barrier_wait(&bar);
    first_call(k, k + rot);
    for (int j = 0; j < ROUNDS && !bad[k]; j++) {
        size_t n = (size_t)(j * 37 + k * 11) % 2000 + 1;
        unsigned char *p = sk_malloc(n);
        use(k, p, n, "sk_malloc");
        sk_free(p);
    }
    return NULL;
}

/* One race in a fresh process: no output before the threads are done. */
static int child(void)
{
    pthread_t t[N];
    pthread_barrier_init(&bar, NULL, N);
    for (intptr_t i = 0; i < N; i++)
        if (pthread_create(&t[i], NULL, thread, (void *)i) != 0)
            return 3;
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    int failed = 0;
    for (int i = 0; i < N; i++)
        if (bad[i]) {
            fprintf(stderr, "thread %d (first door %d): %s\n", i, (i + rot) % N, why[i]);
            failed = 1;
        }
    return failed;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "child")) {
        rot = atoi(argv[2]);
        return child();
    }
    plan(N);
    for (int r = 0; r < N; r++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            char arg[16];
            snprintf(arg, sizeof arg, "%d", r);
            execl("/proc/self/exe", argv[0], "child", arg, (char *)NULL);
            _exit(127);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid)
            st = -1;
        ok(st == 0, "8 threads whose first calls race start-up (doors rotated by %d): every result right", r);
        if (st != 0)
            diag("child status 0x%x (messages above on stderr)", st);
    }
    return done_testing();
}
