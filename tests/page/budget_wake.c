/*
 * budget_wake — the handshake between an allocation that finds the
 * budget's headroom below low and the purger (budget.c wake_kswapd,
 * purge.c purge_try_sleep).  The waker sets kswapd_wanted, then work;
 * the purger, going to sleep, clears work and then reads kswapd_wanted
 * (both sequentially consistent), so one of the two sees the other and no
 * wake-up is lost, whether the purger is asleep on its futex, in the
 * middle of a tick, or on its way to sleep.
 * TSAN: yes
 *
 * 300 rounds, each waiting a different time (0 to 15 ms, against a 10 ms
 * tick) before it asks, so that the request lands in each of those
 * states: every request must be answered by a kswapd pass within half a
 * second, and wakes never outrun passes.  Two threads ask at once in
 * every third round: one request, one pass, none lost.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "page/page.h"
#include "slabkit.h"
#include "tap.h"
#include "threaded.h"

#define ROUNDS 300

static void sleep_us(long us)
{
    struct timespec ts = { 0, us * 1000 };
    nanosleep(&ts, NULL);
}

/* One request below low: a refusal under a hard budget at what the
 * process holds (the request is only weighed; nothing is allocated). */
static void *ask(void *arg)
{
    (void)arg;
    page_budget_admit(1);
    return NULL;
}

int main(void)
{
    plan(3);
    bail_out_after(180, "budget_wake hung");
    sk_opt.decay_ms = 40;     /* a 10 ms tick */
    become_threaded();
    free(malloc(100));
    page_purger_start();
    if (!page_purger_running())
        skip_all("no purger thread here");
    int late = 0, worst_ms = 0;
    for (int r = 0; r < ROUNDS; r++) {
        /* The budget at what the process holds (each pass purges some):
         * a page asked for leaves the headroom below every mark. */
        struct sk_mem_budget before;
        sk_mem_budget(&before);
        sk_mem_budget_set(before.charged);
        sleep_us((r * 7919) % 15000);
        if (r % 3 == 0) {
            pthread_t t;
            pthread_create(&t, NULL, ask, NULL);
            ask(NULL);
            pthread_join(t, NULL);
        } else {
            ask(NULL);
        }
        int ms = 0;
        struct sk_mem_budget now;
        for (;;) {
            sk_mem_budget(&now);
            if (now.kswapd_runs > before.kswapd_runs && !__atomic_load_n(&page_budget.kswapd_wanted, __ATOMIC_ACQUIRE))
                break;
            if (ms >= 500) {
                late++;
                break;
            }
            sleep_us(1000);
            ms++;
        }
        if (ms > worst_ms)
            worst_ms = ms;
    }
    struct sk_mem_budget end;
    sk_mem_budget(&end);
    ok(late == 0, "%d requests below low, each answered by a kswapd pass (%d late; the slowest in %d ms)", ROUNDS,
       late, worst_ms);
    ok(end.kswapd_wakes >= ROUNDS && end.kswapd_runs >= end.kswapd_wakes,
       "one wake-up per request, never more wakes than passes (%lu wakes, %lu passes)", end.kswapd_wakes,
       end.kswapd_runs);
    ok(end.refused >= ROUNDS + ROUNDS / 3, "and every request was refused, past a hard budget (%lu)", end.refused);
    sk_mem_budget_set(0);
    return 0;
}
