#!/bin/bash
# reports.t — what a developer acts on, and what CI can use (issue 33):
#  - a slub_debug report names a static function of a program linked
#    without -rdynamic (from its .symtab), and slabkit-symbolize turns the
#    report's frames into file:line;
#  - KFENCE's report the same;
#  - leak_exitcode (and the wrapper's --error-exitcode) fail the run when
#    the leak check finds leaks, after the program's stdout is flushed;
#    no leak or no exit code: the program's own status;
#  - debug_exitcode after a report that debug_continue let pass;
#  - the wrapper says plainly that a program does not exist;
#  - slabtop into a pipe writes no terminal escape codes; slabinfo with no
#    process says it shows its own;
#  - a debug_caches name that matched no cache is named at exit;
#  - a bad slabinfo_file gets the error's text, not its number.
set -u
. "$(dirname "$0")/../lib/programs.sh"
in_workdir reports
command -v cc >/dev/null 2>&1 || { echo "1..0 # SKIP no C compiler"; exit 0; }
unset SLABKIT_OPTIONS
echo "1..17"

cat >bugs.c <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void __attribute__((noinline)) release(char *p) { free(p); }
int main(int argc, char **argv)
{
    char *p = malloc(32);
    memset(p, 'x', argc > 1 ? 40 : 32);   /* 8 bytes past the end with an argument */
    release(p);                            /* line 9: the red zone is checked here */
    printf("done");                        /* no newline: exit must flush it */
    return 0;
}
C
cat >leaky.c <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static void __attribute__((noinline)) leak(void) { char *p = malloc(100); memset(p, 1, 100); }
int main(int argc, char **argv) { if (argc > 1) leak(); printf("out"); return 3; }
C
cat >uaf.c <<'C'
#include <stdlib.h>
#include <unistd.h>
struct conn { char peer[40]; int fd; long bytes; };
static struct conn *__attribute__((noinline)) conn_open(int fd) { struct conn *c = malloc(sizeof *c); c->fd = fd; return c; }
static void __attribute__((noinline)) conn_close(struct conn *c) { free(c); }
int main(void)
{
    long total = 0;
    for (int i = 0; i < 100000; i++) {
        struct conn *c = conn_open(i);
        c->bytes = i;
        conn_close(c);
        total += *(volatile long *)&c->bytes;   /* line 13: after the free */
        usleep(10);
    }
    return (int)(total & 1);
}
C
# -O0: at -O1 gcc drops a store before free and a malloc nothing reads
cc -O0 -g -o bugs bugs.c && cc -O0 -g -o leaky leaky.c && cc -O0 -g -o uaf uaf.c || { echo "Bail out! cc failed"; exit 1; }

{ SLABKIT_OPTIONS=debug=FZPU LD_PRELOAD=$LIB ./bugs x >out 2>err; } 2>/dev/null   # it aborts
grep -q '^ release+0x[0-9a-f]* (/.*/bugs+0x[0-9a-f]*)$' err
ok $? "slub_debug names the static function release, not bugs+0x..., without -rdynamic, and the program by its full path"
[ $? = 0 ] || show err 40
"$B/tools/slabkit-symbolize" <err >sym
grep -q '^ release+0x[0-9a-f]* (.*) at bugs\.c:4$' sym && grep -q '^ main+0x[0-9a-f]* (.*) at bugs\.c:9$' sym &&
    grep -A1 '^INFO: Allocated in main' sym | grep -q 'at bugs\.c:7$'
ok $? "slabkit-symbolize gives file:line: release at bugs.c:4, main at bugs.c:9, allocated at bugs.c:7"
[ $? = 0 ] || show sym 40
cmp -s <(grep -v '+0x' err) <(grep -v '+0x' sym)
ok $? "lines without a frame pass through unchanged"

{ SLABKIT_OPTIONS=kfence=1 LD_PRELOAD=$LIB ./uaf >/dev/null 2>kerr; } 2>/dev/null
"$B/tools/slabkit-symbolize" <kerr >ksym
grep -q '^BUG: KFENCE: use-after-free read in main+0x' kerr && grep -q '^ main+0x[0-9a-f]* (.*) at uaf\.c:13$' ksym &&
    grep -A1 '^freed by task' ksym | grep -q '^ conn_close+0x.* at uaf\.c:5$'
ok $? "KFENCE's use-after-free: main at uaf.c:13, freed in conn_close at uaf.c:5"
[ $? = 0 ] || show ksym 30

SLABKIT_OPTIONS=leak_check=1,leak_exitcode=23 LD_PRELOAD=$LIB ./leaky x >out 2>err
rc=$?
[ $rc = 23 ] && [ "$(cat out)" = out ]
ok $? "leak_exitcode=23 with a leak: exit 23, stdout flushed ($rc, '$(cat out)')"
grep -q "leak_check: 1 unreferenced object (112 bytes)" err
ok $? "  the summary says '1 unreferenced object', not '1 objects'"
SLABKIT_OPTIONS=leak_check=1,leak_exitcode=23 LD_PRELOAD=$LIB ./leaky >/dev/null 2>&1
rc=$?
[ $rc = 3 ]
ok $? "leak_exitcode=23 without a leak: the program's own status ($rc)"
SLABKIT_OPTIONS=leak_check=1 LD_PRELOAD=$LIB ./leaky x >/dev/null 2>&1
rc=$?
[ $rc = 3 ]
ok $? "a leak without leak_exitcode: the program's own status ($rc)"
"$B/slabkit" --leak-check --error-exitcode=9 ./leaky x >/dev/null 2>&1
rc=$?
[ $rc = 9 ]
ok $? "the wrapper's --leak-check --error-exitcode=9: exit 9 ($rc)"

SLABKIT_OPTIONS=debug=FZPU,debug_continue,debug_exitcode=5 LD_PRELOAD=$LIB ./bugs x >out 2>err
rc=$?
[ $rc = 5 ] && grep -q '^FIX kmalloc-32' err && [ "$(cat out)" = done ]
ok $? "debug_continue,debug_exitcode=5 after a repaired red zone: exit 5, stdout flushed ($rc)"
SLABKIT_OPTIONS=debug=FZPU,debug_continue,debug_exitcode=5 LD_PRELOAD=$LIB ./bugs >/dev/null 2>&1
rc=$?
[ $rc = 0 ]
ok $? "  without a report: exit 0 ($rc)"

"$B/slabkit" ./nope >out 2>err
rc=$?
[ $rc = 127 ] && [ "$(cat err)" = "slabkit: ./nope: no such program (or not executable)" ]
ok $? "the wrapper on a missing program: exit 127 and one plain line ($(cat err))"

LD_PRELOAD=$LIB python3 -c 'import time; x = [bytes(100) for i in range(1000)]; time.sleep(2.5)' &
pid=$!
sleep 0.7
timeout 2 "$B/tools/slabtop" -p $pid -d 0.3 >top.out 2>&1
wait $pid
grep -q 'kmalloc-' top.out && ! grep -q "$(printf '\033')" top.out && [ "$(grep -c 'Active / Total Objects' top.out)" -ge 2 ]
ok $? "slabtop -p into a pipe: frames of plain text, no escape codes ($(grep -c 'Active / Total Objects' top.out) frames)"
"$B/tools/slabinfo" >si.out 2>si.err
grep -q "this is slabinfo's own process" si.err
ok $? "slabinfo with no process says it shows its own"

SLABKIT_OPTIONS=debug,debug_caches=kmalloc-33:kmalloc-64 LD_PRELOAD=$LIB ls / >/dev/null 2>err
grep -q "debug_caches: 'kmalloc-33' matched no cache" err && ! grep -q "'kmalloc-64'" err
ok $? "debug_caches=kmalloc-33: named at exit as matching no cache (kmalloc-64 did match)"
SLABKIT_OPTIONS=slabinfo_file=/nonexistent/dir/r LD_PRELOAD=$LIB ls / >/dev/null 2>err
grep -q "cannot create /nonexistent/dir/r: No such file or directory" err
ok $? "a bad slabinfo_file: the error's text ($(head -1 err))"
SLABKIT_OPTIONS=help LD_PRELOAD=$LIB ls / >/dev/null 2>err
grep -q '^  decay_ms          500 ' err && [ "$(grep -c '^  [a-z_]* ' err)" -ge 31 ]
ok $? "SLABKIT_OPTIONS=help lists every option with its value"
