#!/bin/sh
# slub_debug_programs.t — correct programs stay silent under slub_debug:
# python3 (PYTHONMALLOC=malloc, every object through slabkit: dicts, JSON,
# regexes, threads, a forked child) and sqlite3 (a few thousand inserts in
# a transaction, an index, queries) run under LD_PRELOAD=libslabkit.so with
# SLABKIT_OPTIONS=debug=FZPU on every cache, give the right answers, exit 0
# and write nothing on stderr.  Then the tools: slabinfo -r with debug=U
# lists alloc_calls for its workload's cache, the site and the count right.
set -u
. "$(dirname "$0")/../lib/programs.sh"

in_workdir slubdebug
echo "1..7"

if command -v python3 >/dev/null 2>&1; then
    cat >w.py <<'PYEOF'
import json, os, re, threading
def work(n):
    d = {}
    for i in range(n):
        d[str(i) * 2] = [i, "v%d" % i, {"k": i}]
    s = json.dumps(d)
    r = re.compile(r'"(\d+)": \[(\d+)')
    return len(json.loads(s)), sum(1 for _ in r.finditer(s))
ts = [threading.Thread(target=work, args=(3000,)) for _ in range(3)]
for t in ts: t.start()
for t in ts: t.join()
pid = os.fork()
if pid == 0:
    os._exit(0 if work(1000) == (1000, 1000) else 1)
_, st = os.waitpid(pid, 0)
print("answer", work(10000), "child", st)
PYEOF
    LD_PRELOAD=$LIB SLABKIT_OPTIONS=debug=FZPU PYTHONMALLOC=malloc timeout 300 python3 w.py >out 2>err
    rc=$?
    ok $rc "python3 exits 0 under debug=FZPU"
    grep -q '^answer (10000, 10000) child 0$' out
    ok $? "and gives the right answer (threads and a forked child too)"
    [ ! -s err ]
    ok $? "nothing on stderr: no slub_debug report for a correct program"
    [ -s err ] && show err 30
else
    for i in 1 2 3; do n=$((n + 1)); echo "ok $n # SKIP python3 is not installed"; done
fi

if command -v sqlite3 >/dev/null 2>&1; then
    {
        echo "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, v REAL);"
        echo "BEGIN;"
        i=1
        while [ $i -le 3000 ]; do
            echo "INSERT INTO t (name, v) VALUES ('row-$i-' || hex(randomblob(12)), $i * 0.5);"
            i=$((i + 1))
        done
        echo "COMMIT;"
        echo "CREATE INDEX t_name ON t (name);"
        echo "SELECT count(*), sum(v) FROM t;"
        echo "SELECT count(*) FROM t WHERE name LIKE 'row-12%';"
        echo "PRAGMA integrity_check;"
    } >ins.sql
    LD_PRELOAD=$LIB SLABKIT_OPTIONS=debug=FZPU timeout 300 sqlite3 t.db <ins.sql >sq.out 2>sq.err
    rc=$?
    printf '3000|2250750.0\n111\nok\n' >want.out
    [ $rc = 0 ] && cmp -s sq.out want.out
    ok $? "sqlite3: 3000 inserts, an index and queries under debug=FZPU give the right answers"
    [ $rc = 0 ] || show sq.out 5
    [ ! -s sq.err ]
    ok $? "nothing on stderr"
    [ -s sq.err ] && show sq.err 30
else
    for i in 1 2; do n=$((n + 1)); echo "ok $n # SKIP sqlite3 is not installed"; done
fi

SLABKIT_OPTIONS=debug=U,debug_caches=slabinfo-demo "$B/tools/slabinfo" -r slabinfo-demo --workload >si.out 2>si.err
rc=$?
grep -Eq '^alloc_calls slabinfo-demo:$' si.out &&
    grep -Eq '^ +2000 (workload|main)\+0x[0-9a-f]+/0x[0-9a-f]+ age=[0-9/]+ pid=[0-9-]+ cpus=[0-9,-]+ bytes=384000$' si.out
ok $? "slabinfo -r with debug=U: alloc_calls shows the 2000 live objects of its workload and their site"
[ $rc = 0 ] && grep -Eq '^free_calls slabinfo-demo:$' si.out
ok $? "and free_calls"
grep -A3 '_calls' si.out | show /dev/stdin 8
