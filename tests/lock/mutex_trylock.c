/*
 * mutex_trylock — sk_mutex_trylock takes a free mutex and never blocks on
 * a held one (not even its own: sk_mutex is not recursive); the static
 * initializer and zero-filled memory give unlocked mutexes; sk_mutex_init
 * resets a mutex a forked child inherited locked; and under contention a
 * mix of trylock and lock still admits one thread at a time, in each
 * spinning mode (on, mcs, off).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lock/mutex_internal.h"
#include "tap.h"

static sk_mutex_t m = SK_MUTEX_INITIALIZER;

static void *try_from_other(void *arg)
{
    return (void *)(uintptr_t)sk_mutex_trylock((sk_mutex_t *)arg);
}

static int other_trylock(sk_mutex_t *mx)
{
    pthread_t t;
    void *r;
    pthread_create(&t, NULL, try_from_other, mx);
    pthread_join(t, &r);
    return (int)(uintptr_t)r;
}

/* A blocked locker: sets `entered` once it holds the mutex. */
static int entered;
static void *locker(void *arg)
{
    sk_mutex_lock((sk_mutex_t *)arg);
    __atomic_store_n(&entered, 1, __ATOMIC_RELEASE);
    sk_mutex_unlock((sk_mutex_t *)arg);
    return NULL;
}

/* Contention: trylock or lock, count entries, check exclusion. */
static sk_mutex_t cm;
static long entries, tries_won, expected, inside_now, bad;
#define CT_THREADS 16
#define CT_ITERS 20000
static void *contender(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    long won = 0, locked = 0;
    for (int i = 0; i < CT_ITERS; i++) {
        seed = seed * 1103515245u + 12345u;
        if (seed & 0x10000) {
            if (!sk_mutex_trylock(&cm))
                continue;
            won++;
        } else {
            sk_mutex_lock(&cm);
            locked++;
        }
        if (inside_now++)
            bad++;
        entries++;
        inside_now--;
        sk_mutex_unlock(&cm);
    }
    __atomic_fetch_add(&tries_won, won, __ATOMIC_RELAXED);
    __atomic_fetch_add(&expected, won + locked, __ATOMIC_RELAXED);
    return NULL;
}

int main(void)
{
    plan(16);

    /* Static initializer. */
    is(sk_mutex_trylock(&m), 1, "trylock takes a statically initialised mutex");
    is(sk_mutex_trylock(&m), 0, "trylock by the owner fails: not recursive, does not block");
    is(other_trylock(&m), 0, "trylock from another thread fails while held");
    sk_mutex_unlock(&m);
    is(other_trylock(&m), 1, "trylock from another thread succeeds once unlocked");
    /* ...and that thread exited holding it: unlock from here (a plain word). */
    sk_mutex_unlock(&m);
    is(sk_mutex_trylock(&m), 1, "trylock succeeds again after unlock");
    sk_mutex_unlock(&m);

    /* Zero-filled memory fresh from mmap. */
    sk_mutex_t *z = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    is(sk_mutex_trylock(z), 1, "a zero-filled mutex is unlocked");
    sk_mutex_unlock(z);
    sk_mutex_lock(z);
    sk_mutex_unlock(z);
    ok(z->state == 0, "lock and unlock leave the word free");

    /* Many failed trylocks on a held mutex return without blocking. */
    sk_mutex_lock(z);
    int fails = 0;
    for (int i = 0; i < 100000; i++)
        fails += !sk_mutex_trylock(z);
    is(fails, 100000, "100000 trylocks on a held mutex all fail and return");

    /* A blocked lock() waits for the unlock, then gets in. */
    pthread_t t;
    pthread_create(&t, NULL, locker, z);
    usleep(20000);
    is(__atomic_load_n(&entered, __ATOMIC_ACQUIRE), 0, "lock() waits while the mutex is held");
    sk_mutex_unlock(z);
    pthread_join(t, NULL);
    is(entered, 1, "lock() gets in after the unlock");
    sk_mutex_destroy(z);

    /* A child forked while the mutex is held resets it with sk_mutex_init. */
    sk_mutex_lock(&m);
    pid_t pid = fork();
    if (pid == 0) {
        int rc = 0;
        if (sk_mutex_trylock(&m))
            rc |= 1;                   /* the child's copy is held */
        sk_mutex_init(&m);
        if (!sk_mutex_trylock(&m))
            rc |= 2;
        sk_mutex_unlock(&m);
        sk_mutex_lock(&m);
        sk_mutex_unlock(&m);
        _exit(rc);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "a forked child sees the mutex held and sk_mutex_init resets it (status %d)", status);
    sk_mutex_unlock(&m);

    /* trylock and lock mixed under contention. */
    static const long modes[] = { MUTEX_SPIN_ON, MUTEX_SPIN_MCS, MUTEX_SPIN_OFF };
    static const char *const mode_names[] = { "1", "mcs", "0" };
    for (int i = 0; i < 3; i++) {
        const char *mode = mode_names[i];
        os_options_init();
        sk_opt.mutex_spin = modes[i];
        entries = tries_won = expected = bad = 0;
        pthread_t ts[CT_THREADS];
        for (int i = 0; i < CT_THREADS; i++)
            pthread_create(&ts[i], NULL, contender, (void *)(uintptr_t)(i + 1));
        for (int i = 0; i < CT_THREADS; i++)
            pthread_join(ts[i], NULL);
        ok(bad == 0 && entries == expected && cm.wait == 0, "mutex_spin=%s: trylock/lock mix, one thread "
           "inside at a time, every entry counted (%ld of %ld)", mode, entries, expected);
        diag("mutex_spin=%s: %ld entries, %ld by trylock", mode, entries, tries_won);
    }
    is(sk_mutex_trylock(&cm), 1, "after the contention the mutex is free");
    sk_mutex_unlock(&cm);
    is(cm.state, 0, "and its state word is 0");
    return done_testing();
}
