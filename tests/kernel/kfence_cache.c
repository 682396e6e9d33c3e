/*
 * kfence_cache — KFENCE samples the kernel API's cache allocations
 * (kmem_cache_alloc), as the kernel's does: a sampled object keeps its
 * cache's alignment and constructor, kmem_cache_free and free_bulk take it
 * back, and a use after free or a one-byte overflow of one is reported
 * naming the cache (children check the message and the signal).  Runs
 * itself again with SLABKIT_OPTIONS=kfence=1.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slabkit/linux/slab.h>

#include "tap.h"

#define SIZE 200
#define ALIGN 64

static struct kmem_cache *c;

static void ctor(void *p)
{
    memset(p, 0x77, SIZE);
}

/* An object of c that KFENCE sampled, within 5 s; the others freed. */
static void *sampled(void)
{
    static void *hold[64];
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int n = 0;
        void *k = NULL;
        for (; n < 64; n++) {
            hold[n] = kmem_cache_alloc(c, GFP_KERNEL);
            if (sk_kfence_object(hold[n])) {
                k = hold[n];
                break;
            }
        }
        for (int i = 0; i < n; i++)
            kmem_cache_free(c, hold[i]);
        if (k)
            return k;
        usleep(200);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 5)
            return NULL;
    }
}

static void use_after_free(void)
{
    char *k = sampled();
    if (!k)
        _exit(3);
    kmem_cache_free(c, k);
    k[10] = 1;
}

static void overflow(void)
{
    /* Both placements: against the page's end the byte hits the guard
     * page; against its start it corrupts the canary, seen at free. */
    for (int i = 0; i < 2; i++) {
        char *k = sampled();
        if (!k)
            _exit(3);
        k[SIZE] = 1;
        kmem_cache_free(c, k);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fflush(stdout);
        setenv("SLABKIT_OPTIONS", "kfence=1", 1);
        execl("/proc/self/exe", argv[0], "--kfence", (char *)NULL);
        BAIL("exec failed");
    }
    /* slabkit's malloc linked in, and with it its fork handlers (the
     * children's KFENCE timer). */
    void *volatile m = malloc(1);
    free(m);
    c = kmem_cache_create("kf_cache", SIZE, ALIGN, 0, ctor);
    char *k = sampled();
    ok(k != NULL, "kfence=1: an allocation of the cache is sampled within 5 s");
    if (!k)
        return done_testing();
    ok(((uintptr_t)k & (ALIGN - 1)) == 0, "the sample has its cache's alignment");
    int built = 1;
    for (int i = 0; i < SIZE; i++)
        built &= (unsigned char)k[i] == 0x77;
    ok(built, "its constructor ran");
    kmem_cache_free(c, k);
    ok(!sk_kfence_object(k), "kmem_cache_free takes it back");
    void *b[2] = { sampled(), kmem_cache_alloc(c, GFP_KERNEL) };
    kmem_cache_free_bulk(c, 2, b);
    ok(!sk_kfence_object(b[0]), "so does kmem_cache_free_bulk");

    char buf[8192];
    int st = tap_child_report(use_after_free, buf, sizeof buf, 0);
    ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(buf, "BUG: KFENCE: use-after-free") &&
       strstr(buf, "cache=kf_cache"), "a use after free of a sampled object: a report naming the cache");
    ok(strstr(buf, "freed by task") && strstr(buf, "use_after_free"), "with the free's stack");
    st = tap_child_report(overflow, buf, sizeof buf, 0);
    ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(buf, "BUG: KFENCE:") && strstr(buf, "cache=kf_cache") &&
       (strstr(buf, "out-of-bounds") || strstr(buf, "memory corruption")),
       "a one-byte overflow: a report naming the cache");
    kmem_cache_destroy(c);
    return done_testing();
}
