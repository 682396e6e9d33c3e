/*
 * passes.h — one shmem test, several passes in one TAP stream, each pass
 * a fresh process with its own SLABKIT_OPTIONS (options are read once per
 * process).  The pass's options come from pass_opts[]; "%s" in them is
 * replaced by a swap file path in $TMPDIR, removed when the pass ends.
 *
 *   int pass = passes_begin(argc, argv);     // 0 first, then 1, 2, ...
 *   ... checks for this pass ...
 *   passes_next(argv, pass, opts, n);        // never returns; the last
 *                                            // pass exits with done_testing
 */
#ifndef SK_TEST_PASSES_H
#define SK_TEST_PASSES_H
#include "tap.h"

static char passes_swap[256];

static inline int passes_begin(int argc, char **argv)
{
    if (argc > 5 && !strcmp(argv[1], "--pass")) {
        tap_n = atoi(argv[3]);
        tap_failed = atoi(argv[4]);
        snprintf(passes_swap, sizeof passes_swap, "%s", argv[5]);
        return atoi(argv[2]);
    }
    return 0;
}

static inline void passes_next(char **argv, int pass, const char *const *opts, int npass)
{
    if (passes_swap[0] && strcmp(passes_swap, "-"))
        unlink(passes_swap);
    if (pass + 1 >= npass)
        exit(done_testing());
    const char *o = opts[pass + 1];
    char path[256] = "-", env[512];
    if (strstr(o, "%s")) {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/sk-swap-%d-%d", tmp && *tmp ? tmp : "/tmp", (int)getpid(), pass + 1);
    }
    snprintf(env, sizeof env, o, path);
    char p[16], n[16], failed[16];
    snprintf(p, sizeof p, "%d", pass + 1);
    snprintf(n, sizeof n, "%d", tap_n);
    snprintf(failed, sizeof failed, "%d", tap_failed);
    printf("# pass %d: SLABKIT_OPTIONS=%s\n", pass + 1, env);
    fflush(stdout);
    setenv("SLABKIT_OPTIONS", env, 1);
    execl("/proc/self/exe", argv[0], "--pass", p, n, failed, path, (char *)NULL);
    printf("Bail out! exec /proc/self/exe failed\n");
    exit(255);
}
#endif
