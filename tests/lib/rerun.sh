# rerun.sh — sourced by the variant scripts that run test binaries again
# under other settings (not run by prove itself).
#   want FILE...            queue those that are built executables in $bins
#   plan PER SKIP-REASON    the TAP plan: PER lines per queued binary (or a
#                           SKIP line and exit when none is built)
#   check NAME [-e PATTERN] -- COMMAND...
#                           one TAP line: COMMAND exits 0 (and, with -e, its
#                           output holds PATTERN); a failure shows the tail
#                           of its output
#   name FILE               FILE's name under tests/ (for the TAP lines)
B=${SK_BUILD:-build}
bins=
i=0
out=$(mktemp "${TMPDIR:-/tmp}/slabkit-variant.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT

want() {
    for f in "$@"; do
        [ -f "$f" ] && [ -x "$f" ] && bins="$bins $f"
    done
}

plan() {
    if [ -z "$bins" ]; then
        echo "1..0 # SKIP $2"
        exit 0
    fi
    total=0
    for f in $bins; do total=$((total + $1)); done
    echo "1..$total"
}

name() { echo "${1#"$B"/tests/}"; }

check() {
    desc=$1
    shift
    pattern=
    if [ "$1" = -e ]; then
        pattern=$2
        shift 2
    fi
    [ "$1" = -- ] && shift
    i=$((i + 1))
    if "$@" >"$out" 2>&1; then
        if [ -n "$pattern" ] && ! grep -q -- "$pattern" "$out"; then
            echo "not ok $i - $desc (no '$pattern' in its output)"
            tail -n 20 "$out" | sed 's/^/# /'
        else
            echo "ok $i - $desc"
        fi
    else
        rc=$?
        echo "not ok $i - $desc (exit $rc)"
        grep -v '^ok ' "$out" | tail -n 20 | sed 's/^/# /'
    fi
}
