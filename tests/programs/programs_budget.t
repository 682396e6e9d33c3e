#!/bin/bash
# programs_budget.t — real programs under a memory budget
# (SLABKIT_OPTIONS=mem_limit_mb=N, docs/design.md "Memory budget and
# watermarks") with LD_PRELOAD=libslabkit.so:
#  - python3 turning 400 MB over under a 48 MiB budget (20 rounds of
#    about 20 MB made and dropped, small strings and 512 KiB bytes
#    objects in turn, so that slab pages and large blocks take each
#    other's memory) exits 0 and prints what it prints without slabkit;
#    asked for a 200 MiB bytearray it gets MemoryError (malloc returned
#    NULL with ENOMEM: no abort, no crash);
#  - sort -n of 28 MiB of numbers under 24 MiB prints the same bytes as
#    without slabkit (sort sizes its buffer, then reads and merges).
# Each run is checked to be served by slabkit (its exit-time slabinfo).
set -u
. "$(dirname "$0")/../lib/programs.sh"
in_workdir budget
LC_ALL=C
export LC_ALL
PY=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
[ -x "${PY:-}" ] || PY=
echo "1..$([ -n "$PY" ] && echo 7 || echo 2)"

if [ -n "$PY" ]; then
    cat >churn.py <<'PYEOF'
t = 0
for i in range(20):
    if i % 2:
        l = [bytes([k % 251]) * (512 << 10) for k in range(40)]
    else:
        l = [str(j) for j in range(300000)]
    t += sum(len(s) for s in l)
    del l
print(t)
PYEOF
    cat >big.py <<'PYEOF'
try:
    b = bytearray(200 * 2**20)
    print("allocated")
except MemoryError:
    print("MemoryError")
PYEOF
    "$PY" churn.py >churn.want
    LD_PRELOAD=$LIB SLABKIT_OPTIONS=mem_limit_mb=48,slabinfo_at_exit=1 "$PY" churn.py >churn.out 2>churn.err
    rc=$?
    ok $rc "python3 turning 400 MB over under mem_limit_mb=48 exits 0"
    [ $rc = 0 ] || show churn.err 5
    cmp -s churn.want churn.out
    ok $? "and prints what it prints without slabkit ($(cat churn.out))"
    served churn.err
    ok $? "and was served by slabkit"
    LD_PRELOAD=$LIB SLABKIT_OPTIONS=mem_limit_mb=48,slabinfo_at_exit=1 "$PY" big.py >big.out 2>big.err
    rc=$?
    ok $rc "python3 asking for 200 MiB under mem_limit_mb=48 exits 0"
    [ "$(cat big.out)" = MemoryError ]
    ok $? "it got MemoryError: malloc said ENOMEM ($(cat big.out))"
fi

seq 1 3000000 | awk 'BEGIN { srand(7) } { print int(rand() * 1e9) }' >nums
sort -n nums | md5sum >sort.want
LD_PRELOAD=$LIB SLABKIT_OPTIONS=mem_limit_mb=24,slabinfo_at_exit=1 sort -n nums 2>sort.err | md5sum >sort.out
cmp -s sort.want sort.out
ok $? "sort -n of $(($(wc -c <nums) >> 20)) MiB under mem_limit_mb=24 prints the same bytes"
served sort.err
ok $? "and was served by slabkit"
