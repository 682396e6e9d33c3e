#!/bin/sh
# leak_sites.t — leak_check=1 with slub_debug's user tracking (debug=U):
# each unreferenced object's report carries the allocation stack U kept
# (kmemleak's `backtrace:`) and its age, and the summary groups the leaks
# by allocation site with counts and bytes.  A small program, built here
# as any user's program would be (dynamically, -rdynamic so that its own
# functions have names), leaks three 48-byte objects from leaky_three()
# and one 200-byte object from leaky_one(), and keeps a third kind alive
# from a global (never reported); it runs under LD_PRELOAD.  Then the
# same program with debug=U,slabinfo_file=FILE: `slabinfo FILE -r
# kmalloc-48` prints the cache's alloc_calls from that exit report, one
# line per site with its count (issue 13 part 5); and the same from the
# live process: `slabinfo -p PID -r kmalloc-48` reads alloc_calls and
# free_calls out of a running program's slabs (tools/inspect).
set -u
. "$(dirname "$0")/../lib/programs.sh"
in_workdir leaksites
CC=${CC:-cc}
command -v "$CC" >/dev/null 2>&1 || { echo "1..0 # SKIP no C compiler"; exit 0; }
echo "1..11"
cat >leaky.c <<'C'
#include <stdlib.h>
#include <string.h>
void *keep;
__attribute__((noinline)) void leaky_three(void)
{
    for (int i = 0; i < 3; i++) {
        void *volatile p = malloc(48);
        memset(p, 'L', 48);
    }
}
__attribute__((noinline)) void leaky_one(void)
{
    void *volatile p = malloc(200);
    memset(p, 'O', 200);
}
__attribute__((noinline)) void kept(void)
{
    keep = malloc(48);
    memset(keep, 'K', 48);
}
int main(void)
{
    leaky_three();
    leaky_one();
    kept();
    return 0;
}
C
"$CC" -O1 -g -rdynamic -o leaky leaky.c 2>cc.err
ok $? "the program builds"
env LD_PRELOAD="$LIB" SLABKIT_OPTIONS=leak_check=1,debug=U ./leaky 2>err
ok $? "it exits 0 under leak_check=1,debug=U"
[ "$(grep -c '^unreferenced object 0x' err)" = 4 ]
ok $? "exactly 4 unreferenced objects are reported (the global's is not)"
awk '/^unreferenced object/ { size = $5 } /^  backtrace:$/ { bt = 1; next }
     bt { if (size == "48):" && $0 ~ /\] leaky_three\+0x/) t++; if (size != "48):" && $0 ~ /\] leaky_one\+0x/) o++; bt = 0 }
     END { exit !(t == 3 && o == 1) }' err
ok $? "each report's backtrace starts at its allocating function (leaky_three 3x, leaky_one 1x)"
grep -Eq '^  comm "leaky", pid [0-9]+, jiffies [0-9]+ \(age [0-9]+\.[0-9]{3}s\)$' err
ok $? "the comm line gives the object's age"
grep -Eq '^  kmalloc-48 +3 objects +144 bytes leaky_three\+0x[0-9a-f]+/0x[0-9a-f]+$' err
ok $? "the summary groups leaky_three's 3 objects (144 bytes) by site"
grep -Eq '^  kmalloc-[0-9]+ +1 object +[0-9]+ bytes leaky_one\+0x[0-9a-f]+/0x[0-9a-f]+$' err
ok $? "and leaky_one's object under its own site"
env LD_PRELOAD="$LIB" SLABKIT_OPTIONS=debug=U,slabinfo_file="$T/rep" ./leaky 2>err2 &&
    "$B/tools/slabinfo" "$T/rep" -r kmalloc-48 >calls 2>calls.err
ok $? "slabinfo reads the exit report debug=U,slabinfo_file wrote"
# age=min/avg/max, or one number when they are equal (the kernel's format):
# three mallocs within the same millisecond print age=N.
grep -q '^alloc_calls kmalloc-48:$' calls &&
    grep -Eq '^ +3 leaky_three\+0x[0-9a-f]+/0x[0-9a-f]+ age=[0-9]+(/[0-9]+/[0-9]+)? pid=[0-9]+ cpus=[0-9,-]+ bytes=144$' calls &&
    grep -Eq '^ +1 kept\+0x[0-9a-f]+/0x[0-9a-f]+ age=' calls
ok $? "its -r kmalloc-48 lists alloc_calls: leaky_three 3 objects (144 bytes), kept 1"

# Live: a program that allocates five 40-byte objects in make_conns, frees
# two in drop_two and waits on a fifo (it lets any process of its user
# read it, for Yama's ptrace_scope 1).
cat >hold.c <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>
void *keep[8];
__attribute__((noinline)) void make_conns(void)
{
    for (int i = 0; i < 5; i++) {
        keep[i] = malloc(40);
        memset(keep[i], 'C', 40);
    }
}
__attribute__((noinline)) void drop_two(void)
{
    free(keep[0]);
    free(keep[1]);
    keep[0] = keep[1] = 0;
}
int main(void)
{
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    make_conns();
    drop_two();
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char b;
    return read(0, &b, 1) < 0;
}
C
"$CC" -O1 -g -rdynamic -o hold hold.c 2>>cc.err && mkfifo fifo || echo "# no hold program"
env LD_PRELOAD="$LIB" SLABKIT_OPTIONS=debug=U ./hold <fifo >hold.out 2>hold.err &
HOLD=$!
exec 7>fifo
i=0
while ! grep -q '^ready' hold.out 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
"$B/tools/slabinfo" -p "$HOLD" -r kmalloc-48 >live 2>live.err
ok $? "slabinfo -p reads the running program's kmalloc-48 report"
awk '/^alloc_calls kmalloc-48:$/ { s = "a"; next } /^free_calls kmalloc-48:$/ { s = "f"; next }
     s == "a" && $1 == 3 && $2 ~ /^make_conns\+0x[0-9a-f]+\/0x[0-9a-f]+$/ && / bytes=120$/ { a = 1 }
     s == "f" && $2 ~ /^drop_two\+0x/ { f += $1 }
     END { exit !(a && f == 2) }' live
rc=$?
ok $rc "live alloc_calls: make_conns 3 objects (120 bytes); free_calls: drop_two 2"
[ $rc = 0 ] || { show live 60; show live.err 5; }
echo x >&7
exec 7>&-
wait "$HOLD"

