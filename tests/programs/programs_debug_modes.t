#!/bin/sh
# programs_debug_modes.t — correct programs stay silent under KFENCE and
# leak_check, as slub_debug_programs.t shows for debug=FZPU: python3
# (PYTHONMALLOC=malloc, so every object goes through slabkit: a dict, list
# and str churn with a known checksum) and sqlite3 (a 20,000-row table, an
# index, known answers, integrity_check) under LD_PRELOAD=libslabkit.so
#   kfence=1        a sampled object every millisecond: nothing on stderr
#   leak_check=1    at exit, every summary line says 0 unreferenced objects
#                   and no object is reported
# A program that is not installed is skipped with its lines.
set -u
. "$(dirname "$0")/../lib/programs.sh"
in_workdir debugmodes
echo "1..4"

churn_py 100000
cat >q.sql <<'SQL'
create table t(a integer primary key, b text, c integer);
begin;
with recursive n(i) as (select 1 union all select i + 1 from n where i < 20000)
insert into t select i, printf('row-%d', i), i * 7 % 1000 from n;
commit;
create index tc on t(c);
select count(*), sum(c), max(length(b)) from t;
select count(*) from t where c = 7;
pragma integrity_check;
SQL
printf '20000|9990000|9\n20\nok\n' >sq.want

# silent MODE FILE: stderr quiet for MODE
silent() {
    case $1 in
    kfence=1) [ ! -s "$2" ] ;;
    leak_check=1) grep -q '^slabkit: leak_check: 0 unreferenced objects' "$2" &&
        ! grep -q '^unreferenced object' "$2" &&
        ! grep -v '^slabkit: leak_check: 0 unreferenced objects' "$2" | grep -q . ;;
    esac
}

# The interpreter itself, not a wrapper script that may run in front of it
# (whose shell's own exit-time leaks are not python3's).
PY=
command -v python3 >/dev/null 2>&1 && PY=$(python3 -c 'import sys; print(sys.executable)')
for m in kfence=1 leak_check=1; do
    if [ -n "$PY" ]; then
        "$PY" churn.py >py.want 2>/dev/null
        LD_PRELOAD=$LIB SLABKIT_OPTIONS=$m PYTHONMALLOC=malloc timeout 300 "$PY" churn.py >py.got 2>py.err
        rc=$?
        [ $rc = 0 ] && cmp -s py.want py.got && silent $m py.err
        ok $? "python3 under $m: right answer, exit 0, nothing reported"
        [ $rc = 0 ] || show py.err 10
    else
        n=$((n + 1)); echo "ok $n # SKIP python3 is not installed"
    fi
    if command -v sqlite3 >/dev/null 2>&1; then
        rm -f db
        LD_PRELOAD=$LIB SLABKIT_OPTIONS=$m timeout 300 sqlite3 db <q.sql >sq.got 2>sq.err
        rc=$?
        [ $rc = 0 ] && cmp -s sq.want sq.got && silent $m sq.err
        ok $? "sqlite3 under $m: known answers, integrity_check ok, nothing reported"
        [ $rc = 0 ] || show sq.err 10
    else
        n=$((n + 1)); echo "ok $n # SKIP sqlite3 is not installed"
    fi
done
