#!/bin/sh
# mutex_spin.t — the allocator's stress tests again with sk_mutex spinning
# off and on (SLABKIT_OPTIONS=mutex_spin=0 / =1): every binary under
# $SK_BUILD/tests/slab and $SK_BUILD/tests/page whose name contains
# "stress".  One TAP line per binary and setting; a failing run shows the
# tail of its output as diagnostics.
B=${SK_BUILD:-build}
bins=
for d in "$B/tests/slab" "$B/tests/page"; do
    [ -d "$d" ] || continue
    for f in "$d"/*stress*; do
        [ -f "$f" ] && [ -x "$f" ] && bins="$bins $f"
    done
done
if [ -z "$bins" ]; then
    echo "1..0 # SKIP no allocator stress tests built"
    exit 0
fi
n=0
for f in $bins; do n=$((n + 2)); done
echo "1..$n"
i=0
out=$(mktemp "${TMPDIR:-/tmp}/mutex_spin.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
for f in $bins; do
    for spin in 0 1; do
        i=$((i + 1))
        name=${f#"$B"/tests/}
        if SLABKIT_OPTIONS=mutex_spin=$spin "$f" >"$out" 2>&1; then
            echo "ok $i - $name with mutex_spin=$spin"
        else
            rc=$?
            echo "not ok $i - $name with mutex_spin=$spin (exit $rc)"
            tail -n 20 "$out" | sed 's/^/# /'
        fi
    done
done
