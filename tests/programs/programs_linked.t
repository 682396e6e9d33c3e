#!/bin/sh
# programs_linked.t — slabkit replaces malloc when linked, not only when
# preloaded, and it bootstraps safely:
#   - a program linked with -lslabkit (the shared library) that allocates in
#     an ELF constructor before main, from a thread started there, through
#     dlopen/dlsym/dlerror (which allocate inside the dynamic linker and
#     libc) and through strdup/getline/qsort in libc: its blocks are
#     slabkit's (sk_usable_size knows them) and it exits 0;
#   - the same program linked statically with libslabkit.a;
#   - a fully static (-static) threaded program with libslabkit.a: no
#     dynamic loader at all, glibc's rseq area still found;
#   - everyday programs start and finish under LD_PRELOAD (true, ls, sh,
#     env, awk, a pipeline); ls and awk close stderr in atexit, and their
#     exit-time slabinfo must still show service.  (sh is not checked that
#     way: dash leaves with _exit, so no destructor runs.)
set -u
. "$(dirname "$0")/../lib/programs.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

CC=${CC:-cc}
command -v "$CC" >/dev/null 2>&1 || { echo "1..0 # SKIP no C compiler"; exit 0; }
in_workdir linked
echo "1..17"

cat >early.c <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "slabkit.h"

static void *early[3];
static int bad;

static void *in_thread(void *arg)
{
    (void)arg;
    void *p = malloc(300);
    if (!p || sk_usable_size(p) < 300)
        bad |= 1;
    return p;       /* freed by main */
}

__attribute__((constructor)) static void before_main(void)
{
    early[0] = malloc(40);
    early[1] = calloc(10, 100);
    pthread_t t;
    if (pthread_create(&t, NULL, in_thread, NULL) || pthread_join(t, &early[2]))
        bad |= 2;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void)
{
    for (int i = 0; i < 3; i++)
        if (!early[i] || sk_usable_size(early[i]) == 0)
            bad |= 4;
    /* dlopen and dlerror allocate inside ld.so and libc. */
    void *h = dlopen("libslabkit-does-not-exist.so", RTLD_NOW);
    if (h || !dlerror())
        bad |= 8;
    h = dlopen("libm.so.6", RTLD_NOW);
    if (!h || !dlsym(h, "cos"))
        bad |= 16;
    /* libc's own allocations are slabkit's too. */
    char *s = strdup("a string copied by libc");
    if (!s || sk_usable_size(s) < 24)
        bad |= 32;
    char *words[1000];
    for (int i = 0; i < 1000; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "w%04d", (i * 7919) % 1000);
        words[i] = strdup(buf);
    }
    qsort(words, 1000, sizeof words[0], cmp);
    if (strcmp(words[0], "w0000") || strcmp(words[999], "w0999"))
        bad |= 64;
    for (int i = 0; i < 1000; i++)
        free(words[i]);
    FILE *f = fopen("/proc/self/maps", "r");
    char *line = NULL;
    size_t cap = 0;
    int lines = 0;
    while (f && getline(&line, &cap, f) > 0)
        lines++;
    if (!f || !lines || !line || sk_usable_size(line) < cap)
        bad |= 128;
    free(line);
    if (f)
        fclose(f);
    if (h)
        dlclose(h);
    free(s);
    for (int i = 0; i < 3; i++)
        free(early[i]);
    printf("bad=%d\n", bad);
    return bad != 0;
}
EOF

$CC -std=gnu11 -O2 -pthread -I"$ROOT/include" -o dyn early.c -L"$B" -lslabkit -Wl,-rpath,"$B" >cc1.out 2>&1
rc=$?
ok $rc "a program links with -lslabkit"
[ $rc = 0 ] || show cc1.out
ldd ./dyn 2>/dev/null | grep -q "libslabkit.so.0 => $B/libslabkit.so.0"
ok $? "it loads libslabkit.so.0 (the soname) from $B"
SLABKIT_OPTIONS=slabinfo_at_exit=1 timeout 60 ./dyn >dyn.out 2>dyn.err
rc=$?
ok $rc "allocations before main, in a constructor's thread, in dlopen/dlerror, strdup, getline: all slabkit's ($(cat dyn.out))"
[ $rc = 0 ] || show dyn.err
served dyn.err
ok $? "slabkit served the -lslabkit program (slabinfo at exit)"

$CC -std=gnu11 -O2 -pthread -I"$ROOT/include" -o static early.c "$B/libslabkit.a" -ldl >cc2.out 2>&1
rc=$?
ok $rc "the same program links statically with libslabkit.a"
[ $rc = 0 ] || show cc2.out
SLABKIT_OPTIONS=slabinfo_at_exit=1 timeout 60 ./static >static.out 2>static.err
rc=$?
ok $rc "the statically linked program's blocks are all slabkit's too ($(cat static.out))"
[ $rc = 0 ] || show static.err
served static.err
ok $? "slabkit served the statically linked program (slabinfo at exit)"

# Fully static: libslabkit.a's malloc family replaces libc.a's whole.
cat >full.c <<'EOF'
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <slabkit.h>
static void *churn(void *arg)
{
    unsigned seed = (unsigned)(size_t)arg;
    for (int i = 0; i < 50000; i++) {
        size_t n = (seed = seed * 1103515245u + 12345u) % 5000 + 1;
        unsigned char *p = malloc(n);
        if (!p || sk_usable_size(p) < n)
            return (void *)1;
        memset(p, i & 0xff, n);
        free(p);
    }
    return NULL;
}
int main(void)
{
    pthread_t t[4];
    void *r;
    int bad = 0;
    for (long i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, churn, (void *)(i + 1));
    for (int i = 0; i < 4; i++)
        bad |= pthread_join(t[i], &r) != 0 || r != NULL;
    char *s = strdup("static");
    bad |= !s || malloc_usable_size(s) < 7 || sk_usable_size(s) == 0;
    free(s);
    printf("%s\n", bad ? "bad" : "ok");
    return bad;
}
EOF
if [ ! -f "$($CC -print-file-name=libc.a)" ]; then
    # No libc.a (libc6-dev missing): nothing of slabkit's to test.
    for i in 1 2 3; do n=$((n + 1)); echo "ok $n # skip no static libc to link against"; done
else
    $CC -std=gnu11 -O2 -static -pthread -I"$ROOT/include" -o full full.c "$B/libslabkit.a" >cc3.out 2>&1
    rc=$?
    ok $rc "a threaded program links fully static (-static) with libslabkit.a"
    [ $rc = 0 ] || show cc3.out
    SLABKIT_OPTIONS=slabinfo_at_exit=1,verbose=1 timeout 60 ./full >full.out 2>full.err
    rc=$?
    ok $rc "it runs 4 threads of malloc/free and strdup on slabkit, exit 0 ($(cat full.out))"
    [ $rc = 0 ] || show full.err
    served full.err && grep -q "per-CPU arrays via" full.err
    ok $? "slabkit served it (slabinfo at exit) and found its per-CPU mode ($(grep -o 'via .*' full.err | head -1))"
fi

# Everyday programs start and finish under LD_PRELOAD.
pre() { LD_PRELOAD=$LIB SLABKIT_OPTIONS=slabinfo_at_exit=1 timeout 60 "$@"; }
pre /bin/true 2>true.err
ok $? "true starts and exits 0 under LD_PRELOAD"
pre ls -la / >ls.out 2>ls.err && grep -q ' etc$' ls.out
ok $? "ls -la / lists the root under LD_PRELOAD"
served ls.err
ok $? "slabkit served ls, though ls closes stderr at exit (slabinfo at exit)"
pre sh -c 'x=$(echo hello); for i in 1 2 3; do x="$x $i"; done; echo "$x"' >sh.out 2>sh.err &&
    [ "$(cat sh.out)" = "hello 1 2 3" ]
ok $? "sh runs a script with command substitution under LD_PRELOAD"
pre awk 'BEGIN { for (i = 0; i < 200000; i++) a[i] = "v" i; n = 0; for (k in a) n++; print n }' >awk.out 2>awk.err &&
    [ "$(cat awk.out)" = 200000 ]
ok $? "awk fills and counts a 200,000-entry array under LD_PRELOAD"
served awk.err
ok $? "slabkit served awk (slabinfo at exit)"
# A pipeline of preloaded processes, each its own slabkit.
LD_PRELOAD=$LIB timeout 60 sh -c 'seq 1 100000 | env tac | awk "{ s += \$1 } END { printf \"%.0f\\n\", s }"' >pipe.out 2>pipe.err &&
    [ "$(cat pipe.out)" = 5000050000 ]
ok $? "a pipeline seq | env tac | awk sums correctly under LD_PRELOAD"
