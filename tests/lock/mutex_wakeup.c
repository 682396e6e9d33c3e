/*
 * mutex_wakeup — no sk_mutex waiter sleeps forever, and none starves.
 *
 *  1. Waves: 24 threads all block on a mutex main holds; main lets go; all
 *     must get through.  A lost wake-up leaves one asleep with the mutex
 *     free.
 *  2. Churn: threads are created and exit all the time; each takes three
 *     mutexes (sometimes nested) with random delays inside and outside
 *     (busy work, sched_yield, sleeps), by lock or by trylock loops.
 *  3. Hand-off: a holder keeps the mutex 2 ms at a time and retakes it at
 *     once; a victim blocked on it must get it within a few of the
 *     holder's rounds (it starves forever without the hand-off).  Not in
 *     mutex_spin=mcs, 3.13's mutex, which had no hand-off, nor with
 *     mutex_handoff=0: there the holder stops after 50 rounds, and no
 *     hand-off may have happened.
 *
 * A watchdog thread fails the test if overall progress stops for 5 s or
 * any single thread has waited for a mutex for 5 s.  Each part runs with
 * spinning on and off.  Nothing here asserts a speed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lock/mutex_internal.h"
#include "tap.h"

#define STALL_NS   (5ull * 1000000000ull)
#define MAX_SLOTS  64

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- watchdog --------------------------------------------------------------- */

static unsigned long progress;          /* critical sections completed */
static uint64_t wait_since[MAX_SLOTS];  /* per worker slot: when its wait began, 0 idle */
static sk_mutex_t mx[3];
static int watchdog_stop;
static const char *phase = "start";

static void *watchdog(void *arg)
{
    (void)arg;
    unsigned long last = 0;
    uint64_t last_change = now_ns();
    while (!__atomic_load_n(&watchdog_stop, __ATOMIC_ACQUIRE)) {
        usleep(100000);
        uint64_t t = now_ns();
        unsigned long p = __atomic_load_n(&progress, __ATOMIC_RELAXED);
        if (p != last) {
            last = p;
            last_change = t;
        }
        int stuck = -1;
        for (int i = 0; i < MAX_SLOTS; i++) {
            uint64_t w = __atomic_load_n(&wait_since[i], __ATOMIC_RELAXED);
            if (w && t > w && t - w > STALL_NS)
                stuck = i;
        }
        if (t - last_change > STALL_NS || stuck >= 0) {
            printf("not ok - watchdog: %s (phase %s, slot %d, progress %lu)\n",
                   stuck >= 0 ? "a thread waited 5 s for a mutex" : "no progress for 5 s",
                   phase, stuck, p);
            for (int i = 0; i < 3; i++)
                printf("# mutex %d: state %u handoff %u spinners %u wait %u osq %p\n", i, mx[i].state,
                       mx[i].handoff, mx[i].spinners, mx[i].wait, mx[i].osq);
            fflush(stdout);
            _exit(1);
        }
    }
    return NULL;
}

static void lock_watched(sk_mutex_t *m, int slot)
{
    __atomic_store_n(&wait_since[slot], now_ns(), __ATOMIC_RELAXED);
    sk_mutex_lock(m);
    __atomic_store_n(&wait_since[slot], 0, __ATOMIC_RELAXED);
}

/* ---- 1. waves --------------------------------------------------------------- */

#define WAVE_THREADS 24
static unsigned long wave_done;

static void *wave_worker(void *arg)
{
    int slot = (int)(uintptr_t)arg;
    lock_watched(&mx[0], slot);
    wave_done++;
    __atomic_fetch_add(&progress, 1, __ATOMIC_RELAXED);
    sk_mutex_unlock(&mx[0]);
    return NULL;
}

static void waves(int nwaves)
{
    wave_done = 0;
    for (int w = 0; w < nwaves; w++) {
        pthread_t t[WAVE_THREADS];
        sk_mutex_lock(&mx[0]);
        for (int i = 0; i < WAVE_THREADS; i++)
            pthread_create(&t[i], NULL, wave_worker, (void *)(uintptr_t)i);
        /* Let most of them reach the futex before letting go. */
        usleep((w % 4) * 500);
        sk_mutex_unlock(&mx[0]);
        for (int i = 0; i < WAVE_THREADS; i++)
            pthread_join(t[i], NULL);
    }
}

/* ---- 2. churn --------------------------------------------------------------- */

#define CHURN_ALIVE 32
static long shared_sum[3];              /* plain: protected by mx[i] */
static long sections[3];                /* sections completed per mutex (atomic) */

struct churn_arg { int slot; unsigned seed; int done; };

static void random_delay(unsigned r)
{
    switch (r & 7) {
    case 0: case 1: case 2:
        for (unsigned w = (r >> 3) & 511; w; w--)
            __asm__ volatile("" ::: "memory");
        break;
    case 3:
        sched_yield();
        break;
    case 4: {
        struct timespec ts = { 0, (long)((r >> 3) & 0xffff) };   /* up to 65 us */
        nanosleep(&ts, NULL);
        break;
    }
    default:
        break;
    }
}

static void *churn_worker(void *p)
{
    struct churn_arg *a = p;
    unsigned seed = a->seed;
    int rounds = 5 + (int)(seed % 30);
    for (int i = 0; i < rounds; i++) {
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 8) % 3);
        if (seed & 0x40000) {
            lock_watched(&mx[k], a->slot);
        } else {
            __atomic_store_n(&wait_since[a->slot], now_ns(), __ATOMIC_RELAXED);
            while (!sk_mutex_trylock(&mx[k]))
                sched_yield();
            __atomic_store_n(&wait_since[a->slot], 0, __ATOMIC_RELAXED);
        }
        long before = shared_sum[k];
        random_delay(seed >> 12);
        shared_sum[k] = before + 1;
        if (k == 0 && (seed & 0x100000)) {   /* nested, in index order */
            lock_watched(&mx[2], a->slot);
            shared_sum[2]++;
            __atomic_fetch_add(&sections[2], 1, __ATOMIC_RELAXED);
            sk_mutex_unlock(&mx[2]);
        }
        sk_mutex_unlock(&mx[k]);
        __atomic_fetch_add(&sections[k], 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&progress, 1, __ATOMIC_RELAXED);
        seed = seed * 1103515245u + 12345u;
        random_delay(seed >> 9);
    }
    __atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static long churn(double seconds, unsigned seed)
{
    pthread_t t[CHURN_ALIVE];
    struct churn_arg args[CHURN_ALIVE];
    long created = 0;
    memset(shared_sum, 0, sizeof shared_sum);
    memset(sections, 0, sizeof sections);
    for (int i = 0; i < CHURN_ALIVE; i++) {
        args[i] = (struct churn_arg){ i, seed + (unsigned)i * 7919u, 0 };
        pthread_create(&t[i], NULL, churn_worker, &args[i]);
        created++;
    }
    uint64_t end = now_ns() + (uint64_t)(seconds * 1e9);
    while (now_ns() < end) {
        for (int i = 0; i < CHURN_ALIVE; i++) {
            if (!__atomic_load_n(&args[i].done, __ATOMIC_ACQUIRE))
                continue;
            pthread_join(t[i], NULL);
            args[i].done = 0;
            args[i].seed = args[i].seed * 2654435761u + (unsigned)created;
            pthread_create(&t[i], NULL, churn_worker, &args[i]);
            created++;
        }
        usleep(1000);
    }
    for (int i = 0; i < CHURN_ALIVE; i++)
        pthread_join(t[i], NULL);
    return created;
}

/* ---- 3. hand-off -------------------------------------------------------------- */

static int holder_rounds, holder_stop, victim_round = -1;

static int holder_max;   /* stop after this many rounds (0: when told) */

static void *holder(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&holder_stop, __ATOMIC_ACQUIRE) &&
           (!holder_max || __atomic_load_n(&holder_rounds, __ATOMIC_RELAXED) < holder_max)) {
        sk_mutex_lock(&mx[1]);
        __atomic_fetch_add(&holder_rounds, 1, __ATOMIC_RELAXED);
        struct timespec ts = { 0, 2000000 };
        nanosleep(&ts, NULL);
        sk_mutex_unlock(&mx[1]);
        __atomic_fetch_add(&progress, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void *victim(void *arg)
{
    (void)arg;
    lock_watched(&mx[1], 0);
    __atomic_store_n(&victim_round, __atomic_load_n(&holder_rounds, __ATOMIC_RELAXED), __ATOMIC_RELEASE);
    sk_mutex_unlock(&mx[1]);
    return NULL;
}

/* Rounds of the holder the victim waited through. */
static int handoff_rounds(void)
{
    pthread_t h, v;
    holder_rounds = 0;
    holder_stop = 0;
    victim_round = -1;
    pthread_create(&h, NULL, holder, NULL);
    while (__atomic_load_n(&holder_rounds, __ATOMIC_RELAXED) < 2)
        usleep(500);
    int start = __atomic_load_n(&holder_rounds, __ATOMIC_RELAXED);
    pthread_create(&v, NULL, victim, NULL);
    pthread_join(v, NULL);
    __atomic_store_n(&holder_stop, 1, __ATOMIC_RELEASE);
    pthread_join(h, NULL);
    return victim_round - start;
}

int main(void)
{
    for (int i = 0; i < 3; i++)
        sk_mutex_init(&mx[i]);
    os_options_init();
    plan(14);
    pthread_t wd;
    pthread_create(&wd, NULL, watchdog, NULL);
    unsigned long st0[MUTEX_STAT_NR], st1[MUTEX_STAT_NR];

    static const long modes[] = { MUTEX_SPIN_ON, MUTEX_SPIN_MCS, MUTEX_SPIN_OFF };
    static const char *const mode_names[] = { "1", "mcs", "0" };
    static char phase_buf[3][3][32];
    for (int i = 0; i < 3; i++) {
        const char *mode = mode_names[i];
        sk_opt.mutex_spin = modes[i]; /* phases are separated by joins */

        snprintf(phase_buf[i][0], sizeof phase_buf[i][0], "waves, mutex_spin=%s", mode);
        phase = phase_buf[i][0];
        waves(150);
        is(wave_done, 150 * WAVE_THREADS, "mutex_spin=%s: 150 waves of %d blocked threads all got through",
           mode, WAVE_THREADS);

        snprintf(phase_buf[i][1], sizeof phase_buf[i][1], "churn, mutex_spin=%s", mode);
        phase = phase_buf[i][1];
        long created = churn(3.0, 12345u + (unsigned)i);
        int sums_ok = 1;
        for (int k = 0; k < 3; k++)
            sums_ok &= shared_sum[k] == sections[k];
        ok(sums_ok, "mutex_spin=%s: churn of %ld threads, random delays: every section counted once",
           mode, created);
        int all_free = 1;
        for (int k = 0; k < 3; k++)
            all_free &= mx[k].state == 0 && mx[k].wait == 0 && mx[k].osq == NULL;
        ok(all_free, "mutex_spin=%s: all mutexes free afterwards, no sleeper registered", mode);

        snprintf(phase_buf[i][2], sizeof phase_buf[i][2], "handoff, mutex_spin=%s", mode);
        phase = phase_buf[i][2];
        lock_mutex_stats(st0);
        holder_max = modes[i] == MUTEX_SPIN_MCS ? 50 : 0;
        int worst = -1;
        for (int v = 0; v < (holder_max ? 2 : 5); v++) {
            int r = handoff_rounds();
            if (r < 0 || r > worst)
                worst = r < 0 ? 1000 : r;
        }
        lock_mutex_stats(st1);
        unsigned long handoffs = st1[MUTEX_HANDOFF_DONE] - st0[MUTEX_HANDOFF_DONE];
        if (holder_max)
            is(handoffs, 0, "mutex_spin=mcs: no hand-off, as in 3.13 (victims waited up to %d of the holder's "
               "%d rounds)", worst, holder_max);
        else
            ok(worst <= 20, "mutex_spin=%s: victims of a 2 ms barging holder get the mutex within "
               "%d of its rounds (bound 20)", mode, worst);
        diag("mutex_spin=%s: %lu hand-offs in this phase", mode, handoffs);
    }
    /* The default with its 2016 addition switched off. */
    sk_opt.mutex_spin = MUTEX_SPIN_ON;
    sk_opt.mutex_handoff = 0;
    phase = "handoff, mutex_handoff=0";
    holder_max = 50;
    lock_mutex_stats(st0);
    int waited = handoff_rounds();
    lock_mutex_stats(st1);
    is(st1[MUTEX_HANDOFF_DONE] - st0[MUTEX_HANDOFF_DONE], 0,
       "mutex_handoff=0: no hand-off (the victim waited %d of the holder's 50 rounds)", waited);
    sk_opt.mutex_handoff = 1;
    __atomic_store_n(&watchdog_stop, 1, __ATOMIC_RELEASE);
    pthread_join(wd, NULL);
    lock_mutex_stats(st1);
    ok(st1[MUTEX_HANDOFF_DONE] > 0, "the hand-off path ran (%lu hand-offs)", st1[MUTEX_HANDOFF_DONE]);
    for (int i = 0; i < MUTEX_STAT_NR; i++)
        diag("%-14s %lu", mutex_stat_names[i], st1[i]);
    return done_testing();
}
