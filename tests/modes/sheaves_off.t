#!/bin/sh
# sheaves_off.t — SLUB as Linux 3.1 had it (SLABKIT_OPTIONS=sheaves=0: no
# per-CPU arrays, no barn; the fast path pops and pushes the CPU slab's
# freelist with rseq, docs/slub2011.md), and the same with cpu_partial=0
# (the "before" of the 2011 per-CPU partial lists):
#   - slab/stress_cross_cpu (its diagnostic must say sheaves=0),
#     kmalloc_soak, cache_api, norseq_thread, norseq_first and
#     malloc/fork_stress, bad_input under both settings; malloc/glibc_api's
#     sized frees and malloc_good_size (--sized-only: mallinfo2's smblks
#     count per-CPU arrays, which sheaves=0 has none of);
#   - stress_cross_cpu under sheaves=0 with rseq off (the freelists' lock
#     fallback) and with membarrier denied (shrink visits each CPU);
#   - the ThreadSanitizer build of stress_cross_cpu under both settings
#     (rseq off), when built;
#   - sqlite3 (when installed) under LD_PRELOAD with sheaves=0 builds,
#     indexes and queries a table and gets the known answers.
# One TAP line per run; a failing run shows the tail of its output.
. "$(dirname "$0")/../lib/rerun.sh"
S=$B/tests/slab
M=$B/tests/malloc
want "$S/stress_cross_cpu" "$S/kmalloc_soak" "$S/cache_api" "$S/norseq_thread" "$S/norseq_first" \
     "$M/fork_stress" "$M/bad_input"
[ -n "$bins" ] || { echo "1..0 # SKIP slab tests not built"; exit 0; }
extra=0
[ -x "$S/stress_cross_cpu" ] && extra=2
sq=0
command -v sqlite3 >/dev/null 2>&1 && [ -f "$B/libslabkit.so" ] && sq=1
gapi=0
[ -x "$M/glibc_api" ] && gapi=2
TS=$B/tsan/tests/slab/stress_cross_cpu
ts=0
[ -x "$TS" ] && ts=2
echo "1..$(($(echo $bins | wc -w) * 2 + extra + sq + gapi + ts))"

for opts in sheaves=0 sheaves=0,cpu_partial=0; do
    for f in $bins; do
        pat=
        case $f in */stress_cross_cpu) pat="sheaves=0" ;; esac
        if [ -n "$pat" ]; then
            check "$(name "$f") with $opts" -e "$pat" -- env SLABKIT_OPTIONS=$opts "$f"
        else
            check "$(name "$f") with $opts" -- env SLABKIT_OPTIONS=$opts "$f"
        fi
    done
done
if [ $gapi = 2 ]; then
    for opts in sheaves=0 sheaves=0,cpu_partial=0; do
        check "malloc/glibc_api --sized-only with $opts" -- env SLABKIT_OPTIONS=$opts "$M/glibc_api" --sized-only
    done
fi
if [ $extra = 2 ]; then
    check "slab/stress_cross_cpu with sheaves=0 and rseq off" -e "via the lock fallback" -- \
        env SLABKIT_OPTIONS=sheaves=0 GLIBC_TUNABLES=glibc.pthread.rseq=0 "$S/stress_cross_cpu"
    check "slab/stress_cross_cpu with sheaves=0 and membarrier denied" -e "sheaves=0" -- \
        env SLABKIT_OPTIONS=sheaves=0 SK_TEST_DENY_MEMBARRIER=1 "$S/stress_cross_cpu"
fi

# The ThreadSanitizer build (the lock fallback): the per-CPU freelists'
# lock paths and the 3.1-sized partial lists, under both settings.
if [ $ts = 2 ]; then
    for opts in sheaves=0 sheaves=0,cpu_partial=0; do
        check "ThreadSanitizer stress_cross_cpu with $opts" -- \
            env SLABKIT_OPTIONS=$opts GLIBC_TUNABLES=glibc.pthread.rseq=0 TSAN_OPTIONS=halt_on_error=1 "$TS"
    done
fi

if [ $sq = 1 ]; then
    i=$((i + 1))
    T=$(mktemp -d "${TMPDIR:-/tmp}/slabkit-sheaves.XXXXXX") || exit 1
    trap 'rm -rf "$T" "$out"' EXIT
    cat >"$T/q.sql" <<'SQL'
CREATE TABLE t (id INTEGER PRIMARY KEY, grp INTEGER, name TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 50000)
INSERT INTO t SELECT x, x % 100, printf('name-%08d', x) FROM c;
CREATE INDEX t_grp ON t (grp);
SELECT count(*), sum(id) FROM t;
SELECT count(*) FROM t WHERE grp = 42;
DELETE FROM t WHERE id % 10 = 0;
SELECT count(*) FROM t;
PRAGMA integrity_check;
SQL
    printf '50000|1250025000\n500\n45000\nok\n' >"$T/want"
    if LD_PRELOAD=$B/libslabkit.so SLABKIT_OPTIONS=sheaves=0,slabinfo_at_exit=1 timeout 300 \
            sqlite3 "$T/db" <"$T/q.sql" >"$T/got" 2>"$T/err" && cmp -s "$T/want" "$T/got" &&
            grep -q '^slabinfo - version: 2.1$' "$T/err"; then
        echo "ok $i - sqlite3 under sheaves=0: a 50,000-row table, the known answers, integrity ok"
    else
        echo "not ok $i - sqlite3 under sheaves=0: a 50,000-row table, the known answers, integrity ok"
        sed 's/^/# /' "$T/got" "$T/err" | tail -n 20
    fi
fi
