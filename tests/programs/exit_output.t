#!/bin/sh
# exit_output.t — `slabkit --slabinfo` on real programs that close or
# reuse stderr before slabkit's exit output runs: ls and sort (coreutils
# close stderr in an atexit handler), bash after `exec 2>&-`, and python3
# after closing fd 2 and opening a file that takes its number.  Each time
# the table arrives whole on the original stderr (header, one line per
# cache, the totals line last) and nothing of slabkit's lands in the
# program's file.  (dash leaves through _exit, which runs no exit code:
# nothing is printed there, by design.)
set -u
. "$(dirname "$0")/../lib/programs.sh"
W=$B/slabkit
[ -x "$W" ] || { echo "Bail out! $W is missing (make)"; exit 1; }
in_workdir exitout
NCACHES=$("$B/tools/slabinfo" --slabinfo | grep -c '^kmalloc-')
echo "1..6"


"$W" --slabinfo ls / >ls.out 2>ls.err
whole ls.err
ok $? "ls: the whole table ($NCACHES caches and the totals) though coreutils close stderr at exit"
whole ls.err || show ls.err 5

"$W" --slabinfo sort /etc/passwd >sort.out 2>sort.err
whole sort.err
ok $? "sort: the whole table"

"$W" --slabinfo bash -c 'exec 2>&-; echo hi >/dev/null' >bash.out 2>bash.err
whole bash.err
ok $? "bash after exec 2>&-: the whole table on the stderr it started with"

if command -v python3 >/dev/null 2>&1; then
    "$W" --slabinfo python3 -c '
import os
os.close(2)
fd = os.open("py.file", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
assert fd == 2, fd
os.write(fd, b"python data\n")' >py.out 2>py.err
    rc=$?
    [ $rc = 0 ] && whole py.err
    ok $? "python3 closing fd 2 and opening a file on it: the whole table on the original stderr"
    [ "$(cat py.file)" = "python data" ]
    ok $? "and the file holds only python's data"
else
    echo "ok 4 # skip python3 not installed"
    echo "ok 5 # skip python3 not installed"
    n=5
fi

"$W" --slabinfo ls / >/dev/null 2>tty.err </dev/null
[ "$(grep -c '^slabinfo - version' tty.err)" = 1 ]
ok $? "the table is printed once"
