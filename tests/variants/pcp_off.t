#!/bin/sh
# pcp_off.t — the buddy allocator's invariants without per-CPU page lists
# (SLABKIT_OPTIONS=pcp=0: every order-0..3 allocation and free goes to the
# zone under its lock): page/buddy and page/stress_pages, one TAP line
# each, passing when the binary exits 0.  A failing run shows the tail of
# its output.
B=${SK_BUILD:-build}
bins=
for f in "$B/tests/page/buddy" "$B/tests/page/stress_pages"; do
    [ -f "$f" ] && [ -x "$f" ] && bins="$bins $f"
done
if [ -z "$bins" ]; then
    echo "1..0 # SKIP page tests not built"
    exit 0
fi
n=0
for f in $bins; do n=$((n + 1)); done
echo "1..$n"
out=$(mktemp "${TMPDIR:-/tmp}/pcp_off.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
i=0
for f in $bins; do
    i=$((i + 1))
    name=${f#"$B"/tests/}
    if SLABKIT_OPTIONS=pcp=0 "$f" >"$out" 2>&1; then
        echo "ok $i - $name with pcp=0"
    else
        rc=$?
        echo "not ok $i - $name with pcp=0 (exit $rc)"
        tail -n 20 "$out" | sed 's/^/# /'
    fi
done
