#!/bin/sh
# purger_join.t — the purger thread is never started from free.  glibc
# frees a dead thread's TLS (free of its DTV) while it holds its stack-cache
# lock (pthread_join -> __nptl_free_stacks), and pthread_create takes that
# lock: a purger started from that free deadlocked.  bench/aim7's child with
# 2000 users (threads with 64 KiB stacks created, run and joined) hung in
# about half of its runs before the fix.  Each run here must finish within
# its time limit; a hang is a failure, not a stuck suite.
. "$(dirname "$0")/../lib/rerun.sh"
AIM7=$B/bench/aim7
[ -x "$AIM7" ] || { echo "1..0 # SKIP $AIM7 is not built"; exit 0; }
RUNS=6
echo "1..$RUNS"
i=0
while [ $i -lt $RUNS ]; do
    i=$((i + 1))
    # Variant 0 (sk_mutex, mutex_spin=1), workload 0, 2000 users, 20 jobs each.
    SLABKIT_OPTIONS=mutex_spin=1 timeout -k 5 120 "$AIM7" --child 0 0 2000 20 >/dev/null 2>"${TMPDIR:-/tmp}/purger_join.$$"
    rc=$?
    if [ $rc = 0 ]; then
        echo "ok $i - aim7 child, 2000 threads created and joined: finished"
    else
        echo "not ok $i - aim7 child, 2000 threads created and joined: exit $rc (124: hung)"
        sed 's/^/#   /' "${TMPDIR:-/tmp}/purger_join.$$" | head -5
    fi
done
rm -f "${TMPDIR:-/tmp}/purger_join.$$"
