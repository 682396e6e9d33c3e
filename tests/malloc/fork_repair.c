/*
 * fork_repair — the child side of fork, deterministically: a thread of the
 * parent holds the zone lock, a node list_lock and a per-CPU slab lock (as
 * it would in the middle of a slow path) at the moment of the fork.  The
 * child, alone, must reset them and repair what they protected (the zone's
 * free lists rebuilt from the descriptors, the list abandoned, the CPU's
 * slab state dropped), then allocate and free pages and objects of every
 * kind without deadlock or corruption, and give memory back.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "slab/kmalloc.h"
#include "tap.h"

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int state;   /* 1: locks held; 2: parent done forking */

static struct slab_cache *victim(void)
{
    return kmalloc_caches[kmalloc_index(64)];
}

static void *holder(void *arg)
{
    (void)arg;
    struct slab_cache *c = victim();
    /* As every path that takes a CPU's slab lock does first (the fork
     * child resets the locks of the CPUs marked so). */
    slab_mark_cpu(c, 0);
    lock_acquire(&slab_cpu_of(c, 0)->lock);
    lock_acquire(&c->node[0].list_lock);
    lock_acquire(&page_zones[0].lock);
    pthread_mutex_lock(&m);
    state = 1;
    pthread_cond_broadcast(&cv);
    while (state != 2)
        pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);
    lock_release(&page_zones[0].lock);
    lock_release(&c->node[0].list_lock);
    lock_release(&slab_cpu_of(c, 0)->lock);
    return NULL;
}

/* The child's work: returns 0 when everything checked out. */
static int child(void)
{
    alarm(20);
    enum { N = 2000 };
    static void *objs[N];
    static void *pages[256];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            size_t sz = 16 + (size_t)(i % 40) * 24;
            objs[i] = malloc(sz);
            if (!objs[i])
                return 1;
            memset(objs[i], i & 0xff, sz);
        }
        for (int i = 0; i < 256; i++) {
            pages[i] = sk_alloc_pages((unsigned)(i % 5));
            if (!pages[i])
                return 2;
            memset(pages[i], 0x5a, 4096);
        }
        for (int i = 0; i < N; i++) {
            size_t sz = 16 + (size_t)(i % 40) * 24;
            unsigned char *p = objs[i];
            for (size_t k = 0; k < sz; k += 97)
                if (p[k] != (i & 0xff))
                    return 3;
            free(objs[i]);
        }
        for (int i = 0; i < 256; i++) {
            if (((unsigned char *)pages[i])[100] != 0x5a)
                return 4;
            sk_free_pages(pages[i], (unsigned)(i % 5));
        }
    }
    void *big = malloc(3 << 20);
    if (!big)
        return 5;
    memset(big, 1, 3 << 20);
    free(big);
    sk_trim();
    return 0;
}

int main(void)
{
    /* Warm up: slabkit initialised, the fork handler registered, the
     * zone and the victim cache holding free and partial memory. */
    void *warm[500];
    for (int i = 0; i < 500; i++)
        warm[i] = malloc(64);
    for (int i = 0; i < 500; i += 2)
        free(warm[i]);
    void *pg = sk_alloc_pages(3);

    pthread_t t;
    if (pthread_create(&t, NULL, holder, NULL))
        BAIL("pthread_create failed");
    pthread_mutex_lock(&m);
    while (state != 1)
        pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);

    pid_t pid = fork();
    if (pid == 0)
        _exit(child());
    int st = 0;
    waitpid(pid, &st, 0);

    pthread_mutex_lock(&m);
    state = 2;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&m);
    pthread_join(t, NULL);

    ok(WIFEXITED(st), "the child ended by itself (no deadlock on the locks held at the fork)");
    is(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0,
       "the child allocated and freed objects, pages and a large block, checked them, and trimmed");
    /* The parent carries on with its own (released) locks. */
    for (int i = 1; i < 500; i += 2)
        free(warm[i]);
    sk_free_pages(pg, 3);
    void *p = malloc(64);
    ok(p != NULL, "the parent allocates after its thread released the locks");
    free(p);
    return done_testing();
}
