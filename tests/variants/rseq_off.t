#!/bin/sh
# rseq_off.t — the per-CPU tests again on the lock fallback: glibc told
# not to register rseq (GLIBC_TUNABLES=glibc.pthread.rseq=0), so every
# per-CPU array is reached under its lock.  Runs cpu/percpu_arrays, the
# page tests (stress_pages, pcp, buddy) and every binary under
# $SK_BUILD/tests/slab whose name contains "stress"; one TAP line each,
# passing when the binary exits 0.  (There is no option to force the
# fallback while glibc has rseq registered: mixing would race, so the
# choice is glibc's, process-wide.)  A failing run shows the tail of its
# output.
B=${SK_BUILD:-build}
bins=
for f in "$B/tests/cpu/percpu_arrays" "$B/tests/cpu/rseq_signals" "$B/tests/page/stress_pages" "$B/tests/page/pcp" "$B/tests/page/buddy"; do
    [ -f "$f" ] && [ -x "$f" ] && bins="$bins $f"
done
if [ -d "$B/tests/slab" ]; then
    for f in "$B/tests/slab"/*stress*; do
        [ -f "$f" ] && [ -x "$f" ] && bins="$bins $f"
    done
fi
if [ -z "$bins" ]; then
    echo "1..0 # SKIP no per-CPU tests built"
    exit 0
fi
n=0
for f in $bins; do n=$((n + 1)); done
echo "1..$n"
out=$(mktemp "${TMPDIR:-/tmp}/rseq_off.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
i=0
check() {   # check NAME COMMAND...
    name=$1
    shift
    i=$((i + 1))
    if "$@" >"$out" 2>&1; then
        echo "ok $i - $name"
    else
        rc=$?
        echo "not ok $i - $name (exit $rc)"
        tail -n 20 "$out" | sed 's/^/# /'
    fi
}
for f in $bins; do
    check "${f#"$B"/tests/} with rseq off" env GLIBC_TUNABLES=glibc.pthread.rseq=0 "$f"
done

