/*
 * tap.h — a minimal TAP producer for slabkit's tests (run under prove).
 * plan(n) first (or done_testing() last), then ok()/is() per check.
 * A failed check prints a diagnostic with file and line; the exit status
 * is non-zero if any check failed.
 */
#ifndef SK_TAP_H
#define SK_TAP_H
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_n, tap_failed, tap_planned;

static inline void plan(int n) { tap_planned = n; printf("1..%d\n", n); fflush(stdout); }

static inline int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    tap_n++;
    printf("%sok %d - ", cond ? "" : "not ", tap_n);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!cond) {
        tap_failed++;
        printf("#   Failed test at %s line %d.\n", file, line);
    }
    fflush(stdout);
    return cond;
}
#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is(got, want, ...) do { long long g_ = (long long)(got), w_ = (long long)(want); \
        if (!ok(g_ == w_, __VA_ARGS__)) printf("#          got: %lld\n#     expected: %lld\n", g_, w_); } while (0)
#define diag(...) do { printf("# "); printf(__VA_ARGS__); printf("\n"); fflush(stdout); } while (0)
#define skip_all(...) do { printf("1..0 # SKIP "); printf(__VA_ARGS__); printf("\n"); exit(0); } while (0)

static inline int done_testing(void)
{
    if (!tap_planned) printf("1..%d\n", tap_n);
    fflush(stdout);
    return tap_failed ? 1 : 0;
}
/* Abort the test with a message (a bail-out, counted as a failure). */
#define BAIL(...) do { printf("Bail out! "); printf(__VA_ARGS__); printf("\n"); fflush(stdout); exit(255); } while (0)
#endif
