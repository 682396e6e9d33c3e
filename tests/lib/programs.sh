# programs.sh — shared by the tests/*/*.t scripts (tests/modes, tests/programs, tests/packaging) that run real
# programs under slabkit (sourced, not run by prove).
#   B, LIB          the build directory ($SK_BUILD from tests/run) and library
#   ok RC NAME      one TAP line, numbered, passing when RC is 0
#   served FILE     FILE holds slabkit's exit-time slabinfo with objects in it
#   show FILE [N]   the first N (15) lines of FILE as TAP comments
#   whole FILE      the last slabinfo table in FILE is complete
#   churn_py N      write churn.py (python3 churn over N keys, a checksum)
#   in_workdir NAME bail out unless the library is built; then make a
#                   temporary directory T (/tmp/slabkit-NAME.*, removed at
#                   exit) and cd into it
B=${SK_BUILD:-$(cd "$(dirname "$0")/../.." && pwd)/build}
LIB=$B/libslabkit.so
n=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
served() {
    awk '/^slabinfo - version: 2\.1$/ { h = 1 }
         h && /^kmalloc-/ && ($2 > 0 || $3 > 0) { s = 1 }
         END { exit !(h && s) }' "$1"
}
show() { sed -n "1,${2:-15}p" "$1" | sed 's/^/#   /'; }
# whole FILE: the last slabinfo table in FILE is complete: its header,
# every kmalloc cache (as many as this build's tools/slabinfo lists), then
# the totals line.
whole() {
    [ -n "${NCACHES:-}" ] || NCACHES=$("$B/tools/slabinfo" --slabinfo | grep -c '^kmalloc-')
    awk -v want="$NCACHES" '
        /^slabinfo - version: 2\.1$/ { h = 1; n = 0; next }
        h == 1 && /^# name / { h = 2; next }
        h == 2 && /^kmalloc-/ { n++; next }
        { last = $0 }
        END { exit !(h == 2 && n == want && last ~ /^slabkit: pages managed [1-9][0-9]*, .*address space [1-9][0-9]* MiB$/) }' "$1"
}
# churn_py N: write churn.py, python3's dict/list/str churn over N keys
# that prints a checksum of what is left (compare with a run without
# slabkit).
churn_py() {
    cat >churn.py <<PYEOF
import hashlib
d = {}
for i in range($1):
    d["k%d" % i] = [i, str(i) * (i % 7), (i, i * 2)]
    if i % 3 == 0:
        del d["k%d" % (i // 2)]
h = hashlib.sha256()
for k in sorted(d):
    h.update(repr(d[k]).encode())
print(len(d), h.hexdigest())
PYEOF
}
in_workdir() {
    [ -f "$LIB" ] || { echo "Bail out! $LIB is missing (make lib)"; exit 1; }
    T=$(mktemp -d "/tmp/slabkit-$1.XXXXXX") || exit 1
    trap 'rm -rf "$T"' EXIT
    cd "$T" || exit 1
}
