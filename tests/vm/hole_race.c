/*
 * hole_race — the arena's holes under contention (src/vm/vm.c): while one
 * thread calls sk_trim() over and over (vm_arena_trim unmaps every free
 * slice and makes it a hole; wholly free zone slices become holes too),
 * three threads map, write, check and unmap runs of 1-3 slices
 * (sk_vm_map, whose claim reclaims holes with MAP_FIXED_NOREPLACE when the
 * arena has no free run) and allocate, write, check and free 80 MiB
 * direct blocks (sk_malloc).  Two reclaimers of one hole race (one gets
 * EEXIST), a trim races a claim (the slice is marked a hole under vm_lock
 * before it is unmapped), and nothing may be lost or shared:
 *  - every run and block keeps the pattern its thread wrote;
 *  - runs are mapped again where holes were (reclaims happened), and the
 *    arena's books agree with its regions at the end (vm_check_masks).
 *
 * TSAN: yes
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slabkit.h"
#include "tap.h"
#include "vm/vm.h"

#define SECONDS_NS 1500000000ull
#define MAPPERS 3
#define SEEN 4096

static volatile int stop;
static uintptr_t seen[SEEN];      /* bases handed out, to count reuse */
static unsigned nseen, reused;
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;

static void note_base(uintptr_t b)
{
    pthread_mutex_lock(&seen_lock);
    bool again = false;
    for (unsigned i = 0; i < nseen; i++)
        if (seen[i] == b)
            again = true;
    if (again)
        reused++;
    else if (nseen < SEEN)
        seen[nseen++] = b;
    pthread_mutex_unlock(&seen_lock);
}

/* Write a word naming (tag, page) on the first and last page of each
 * slice-sized step, check it back. */
static int fill_check(char *p, size_t len, uintptr_t tag)
{
    for (size_t off = 0; off < len; off += SLICE_SIZE / 4)
        *(uintptr_t *)(p + off) = tag ^ off;
    *(uintptr_t *)(p + len - sizeof(uintptr_t)) = ~tag;
    int bad = 0;
    for (size_t off = 0; off < len; off += SLICE_SIZE / 4)
        bad |= *(uintptr_t *)(p + off) != (tag ^ off);
    bad |= *(uintptr_t *)(p + len - sizeof(uintptr_t)) != ~tag;
    return bad;
}

static void *mapper(void *arg)
{
    uintptr_t id = (uintptr_t)arg, bad = 0;
    for (unsigned i = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); i++) {
        size_t len = (size_t)(1 + (i + id) % 3) * SLICE_SIZE;
        char *p = sk_vm_map(len, SK_PAGE_SIZE);
        if (p) {
            note_base((uintptr_t)p);
            bad |= (uintptr_t)fill_check(p, len, (id << 32) | i);
            if (sk_vm_unmap(p, len) != 0)
                bad |= 2;
        }
        char *b = sk_malloc(80u << 20);
        if (b) {
            bad |= (uintptr_t)fill_check(b, 80u << 20, (id << 40) | i) << 2;
            sk_free(b);
        }
    }
    return (void *)bad;
}

static void *trimmer(void *arg)
{
    (void)arg;
    unsigned long n = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        sk_trim();
        n++;
    }
    return (void *)n;
}

int main(void)
{
    plan(3);
    pthread_t m[MAPPERS], t;
    for (uintptr_t i = 0; i < MAPPERS; i++)
        pthread_create(&m[i], NULL, mapper, (void *)(i + 1));
    pthread_create(&t, NULL, trimmer, NULL);
    uint64_t t0 = os_now_ns();
    while (os_now_ns() - t0 < SECONDS_NS)
        os_sleep_ms(50);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    uintptr_t bad = 0;
    for (int i = 0; i < MAPPERS; i++) {
        void *r;
        pthread_join(m[i], &r);
        bad |= (uintptr_t)r;
    }
    void *trims;
    pthread_join(t, &trims);
    diag("%lu trims; %u distinct run bases, %u runs mapped again at a base seen before", (unsigned long)trims,
         nseen, reused);
    is(bad, 0, "every run and direct block kept its pattern, every unmap worked");
    ok(reused > 0, "runs were mapped again where trimmed slices had been (%u)", reused);
    is(vm_check_masks(), 0, "the arena's masks and free counts agree with its slices' states");
    return done_testing();
}
