#!/bin/sh
# slabinfo_file.t — SLABKIT_OPTIONS=slabinfo_file=PATH (issue 14 part 4):
# the exit report goes to PATH (%p: the pid), created at start-up, and
# build/tools/slabinfo reads it back:
#   - ls (coreutils close stdout and stderr at exit): the whole table and
#     the totals line in ls.PID, nothing of slabkit's on its stderr;
#   - slabinfo FILE summarises it, slabinfo FILE --slabinfo gives the same
#     table back;
#   - python3 with a relative PATH that changes directory and closes every
#     descriptor before it exits: the report still lands, whole, in the
#     directory it started in;
#   - a forked child writes its own report, to the file of its own pid;
#   - a PATH that cannot be created: one warning, the program runs on;
#     slabinfo on a file that is no report: one line, exit 1.
set -u
. "$(dirname "$0")/../lib/programs.sh"
SLABINFO=$B/tools/slabinfo
[ -x "$SLABINFO" ] || { echo "Bail out! $SLABINFO is missing (make tools)"; exit 1; }
in_workdir slabinfo-file
LC_ALL=C
export LC_ALL
echo "1..10"
skip() { n=$((n + 1)); echo "ok $n # skip $1"; }
NCACHES=$("$SLABINFO" --slabinfo | grep -c '^kmalloc-')
# whole FILE: one table (header, every kmalloc cache) and the totals line last.
whole() {
    awk -v want="$NCACHES" '
        /^slabinfo - version: 2\.1$/ { h++; n = 0; next }
        h == 1 && /^# name / { h = 2; next }
        h == 2 && /^kmalloc-/ { n++; next }
        { last = $0 }
        END { exit !(h == 2 && n == want && last ~ /^slabkit: pages managed [1-9]/) }' "$1"
}

SLABKIT_OPTIONS=slabinfo_file=$PWD/ls.%p LD_PRELOAD=$LIB ls / >ls.out 2>ls.err
rc=$?
set -- ls.[0-9]*
[ $rc = 0 ] && [ $# = 1 ] && [ -f "$1" ] && whole "$1"
ok $? "ls: the whole table and the totals line in ls.PID, though coreutils close stdout and stderr at exit"
LSREP=$1
[ ! -s ls.err ] && grep -qx bin ls.out
ok $? "nothing of slabkit's on ls's stderr, and ls's own output intact"

"$SLABINFO" "$LSREP" >sum.out 2>sum.err
rc=$?
[ $rc = 0 ] && awk '$1 ~ /^kmalloc-/ && $2 > 0 { k++ } END { exit !(k >= 3) }' sum.out &&
    grep -q '^slabkit: pages managed [1-9]' sum.out
ok $? "slabinfo FILE: the summary of the report, kmalloc caches in use and the totals"
[ $rc = 0 ] || show sum.err
"$SLABINFO" "$LSREP" --slabinfo >again.out 2>>sum.err
grep '^kmalloc-' "$LSREP" >want.lines
grep '^kmalloc-' again.out >got.lines
cmp -s want.lines got.lines && [ "$(tail -1 again.out)" = "$(tail -1 "$LSREP")" ]
ok $? "slabinfo FILE --slabinfo: the same table and totals line back"

PY=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
if [ -z "$PY" ]; then
    for i in 1 2 3; do skip "python3 is not installed"; done
else
    mkdir start
    (cd start && SLABKIT_OPTIONS=slabinfo_file=rel.%p LD_PRELOAD=$LIB "$PY" -c '
import ctypes, os
malloc = ctypes.CDLL(None).malloc  # kept to the end (python frees its own objects first)
keep = [malloc(1000) for i in range(2000)]
os.chdir("/")
os.closerange(0, 65536)' >py.out 2>py.err)
    rc=$?
    set -- start/rel.[0-9]*
    [ $rc = 0 ] && [ $# = 1 ] && whole "$1" && awk '/^kmalloc-1024 / && $2 >= 2000 { f = 1 } END { exit !f }' "$1"
    ok $? "python3 that changes directory and closes every descriptor: its report, whole, where it started"

    LD_PRELOAD=$LIB SLABKIT_OPTIONS=slabinfo_file=$PWD/fork.%p "$PY" -c '
import ctypes, os, sys
pid = os.fork()
if pid == 0:
    malloc = ctypes.CDLL(None).malloc
    keep = [malloc(3000) for i in range(500)]
    sys.exit(0)
os.waitpid(pid, 0)
print(pid)' >fork.out 2>fork.err
    child=$(cat fork.out)
    set -- fork.[0-9]*
    [ $# = 2 ] && [ -n "$child" ] && whole "fork.$child" &&
        awk '/^kmalloc-3072 / && $2 >= 500 { f = 1 } END { exit !f }' "fork.$child"
    ok $? "a forked child writes its own report to the file of its pid"
    parent=$(ls fork.[0-9]* | grep -v "^fork.$child$")
    [ -n "$parent" ] && whole "$parent"
    ok $? "and the parent's report stays whole in its own"
fi

SLABKIT_OPTIONS=slabinfo_file=/nonexistent-dir/x.%p LD_PRELOAD=$LIB ls / >bad.out 2>bad.err
rc=$?
[ $rc = 0 ] && [ "$(grep -c 'slabinfo_file: cannot create /nonexistent-dir/x\.[0-9]*' bad.err)" = 1 ] &&
    grep -qx bin bad.out
ok $? "a PATH that cannot be created: one warning, the program runs on"

"$SLABINFO" ls.out >notrep.out 2>notrep.err
rc=$?
[ $rc = 1 ] && [ "$(wc -l <notrep.err)" = 1 ] && grep -q 'holds no slabkit exit report' notrep.err
ok $? "slabinfo on a file that is no report: one line, exit 1"
"$SLABINFO" does-not-exist >nofile.out 2>nofile.err
[ $? = 1 ] && grep -q '^slabinfo: cannot open does-not-exist' nofile.err
ok $? "slabinfo on a missing file: one line, exit 1"
