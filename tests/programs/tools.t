#!/bin/sh
# tools.t — slabkit under the debugging tools its users reach for.
#
#   valgrind --tool=none   valgrind's CPU without a malloc replacement:
#                          slabkit itself runs (valgrind registers no rseq,
#                          so the per-CPU-lock fallback), sort's output must
#                          be right and slabkit's slabinfo must show it
#                          served sort
#   valgrind (memcheck)    memcheck replaces the whole malloc family of the
#                          preloaded library with its own, as it does for
#                          jemalloc and tcmalloc: the program must run clean
#                          (no memcheck error) with slabkit loaded
#   gdb                    a program whose double free slabkit catches stops
#                          in gdb on SIGABRT with slabkit's one-line message
#                          printed and a backtrace from abort through free
#                          to the caller's main
#
# Each part is skipped when its tool is missing.
set -u
. "$(dirname "$0")/../lib/programs.sh"

in_workdir tools
LC_ALL=C
export LC_ALL
echo "1..9"

skip() { n=$((n + 1)); echo "ok $n # skip $1"; }

awk 'BEGIN { x = 7; for (i = 0; i < 20000; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf "%010d line %d\n", x, i } }' >input
sort input >want.out

if command -v valgrind >/dev/null 2>&1; then
    LD_PRELOAD=$LIB SLABKIT_OPTIONS=slabinfo_at_exit=1 timeout 300 \
        valgrind -q --tool=none sort input >none.out 2>none.err
    ok $? "sort under valgrind --tool=none with slabkit preloaded exits 0"
    cmp -s want.out none.out
    ok $? "its output is right"
    served none.err
    rc=$?
    ok $rc "slabkit served it under valgrind (the lock fallback)"
    [ $rc = 0 ] || show none.err

    LD_PRELOAD=$LIB timeout 300 valgrind -q --error-exitcode=99 --leak-check=no \
        sort input >mc.out 2>mc.err
    rc=$?
    ok $rc "sort under memcheck with slabkit preloaded exits 0, no memcheck error"
    [ $rc = 0 ] || show mc.err
    cmp -s want.out mc.out
    ok $? "its output is right"
else
    for i in 1 2 3 4 5; do skip "valgrind is not installed"; done
fi

cat >df.c <<'EOF'
#include <stdlib.h>
#include <string.h>
static void *volatile keep;
int main(void)
{
    char *p = malloc(48);
    strcpy(p, "freed twice");
    keep = p;
    free(p);
    free(keep);
    return 0;
}
EOF
if ! command -v gdb >/dev/null 2>&1; then
    for i in 1 2 3 4; do skip "gdb is not installed"; done
elif ! cc -g -O0 -o df df.c 2>cc.err; then
    for i in 1 2 3 4; do skip "no C compiler for the gdb test program"; done
else
    timeout 120 gdb -q -batch -nx -ex "set environment LD_PRELOAD $LIB" -ex run -ex bt \
        ./df >gdb.out 2>&1
    grep -q "SIGABRT" gdb.out
    ok $? "gdb stops the program on slabkit's abort (SIGABRT)"
    grep -q "slabkit: double free: free(0x[0-9a-f]*)" gdb.out
    ok $? "slabkit's one-line message names the call and the pointer"
    grep -Eq "^#[0-9]+ .*(free|sk_free|slab_)" gdb.out
    ok $? "the backtrace goes through slabkit's free path"
    grep -Eq "^#[0-9]+ .*main \(\) at df\.c:10" gdb.out
    rc=$?
    ok $rc "and reaches the caller's second free() in main, with its line"
    [ $rc = 0 ] || show gdb.out 30
fi
