#!/bin/sh
# cxx_ops.t — C++'s operator new and delete are slabkit's under
# LD_PRELOAD=libslabkit.so: tests/malloc/cxx_sized (built plain) proves the
# twenty forms resolve into libslabkit and that sized, array and aligned
# sized delete give objects back to the cache their size names;
# tests/malloc/cxx_replace proves a program that replaces only the basic
# new and delete keeps them paired (slabkit's other forms call its two).
# Each runs with rseq and on the lock fallback, its own TAP all passing,
# none skipped.  Then cxx_sized linked statically with libslabkit.a: its
# operator new is slabkit's (a weak definition, libstdc++'s is strong),
# and with no operator after slabkit to defer to, slabkit itself throws
# std::bad_alloc (through the C++ ABI) and runs the new-handler.
set -u
. "$(dirname "$0")/../lib/programs.sh"
T=$(mktemp -d /tmp/slabkit-cxxops.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
[ -f "$LIB" ] || { echo "Bail out! $LIB is missing (make lib)"; exit 1; }
echo "1..10"

for prog in cxx_sized cxx_replace; do
    P=$B/tests/malloc/$prog
    [ -x "$P" ] || { echo "Bail out! $P is missing (make)"; exit 1; }
    for mode in rseq locks; do
        tun=
        [ $mode = locks ] && tun=glibc.pthread.rseq=0
        env ${tun:+GLIBC_TUNABLES=$tun} LD_PRELOAD="$LIB" SK_EXPECT_SLABKIT=1 timeout 60 "$P" >"$T/out" 2>"$T/err"
        rc=$?
        ok $rc "$prog exits 0 under slabkit ($mode)"
        [ $rc = 0 ] || { show "$T/out" 30; show "$T/err" 5; }
        plan=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$T/out")
        passed=$(grep -c '^ok ' "$T/out")
        ! grep -q '^not ok' "$T/out" && [ -n "$plan" ] && [ "$plan" -gt 0 ] && [ "$passed" = "$plan" ] &&
            ! grep -qi '# skip' "$T/out"
        ok $? "all of its $plan checks pass ($prog, $mode)"
    done
done

CXX=${CXX:-c++}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if $CXX -static -O2 -I"$ROOT/include" -o "$T/static" "$ROOT/tests/malloc/cxx_sized.cc" "$B/libslabkit.a" -pthread \
    >"$T/cc.out" 2>&1; then
    nm "$T/static" 2>/dev/null | grep -Eq ' W _Znwm$' && nm "$T/static" | grep -Eq ' W _ZdlPvm$'
    ok $? "statically linked, operator new and sized delete are slabkit's (weak definitions)"
    timeout 60 "$T/static" >"$T/out" 2>"$T/err"
    rc=$?
    plan=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$T/out")
    [ $rc = 0 ] && [ -n "$plan" ] && [ "$(grep -c '^ok ' "$T/out")" = "$plan" ] && grep -q 'throws std::bad_alloc' "$T/out"
    ok $? "and its checks pass: bad_alloc thrown by slabkit, the new-handler run, nothrow new nullptr"
    [ $rc = 0 ] || { show "$T/out" 20; show "$T/err" 5; }
else
    echo "ok 9 # skip no static C++ runtime ($(head -1 "$T/cc.out"))"
    echo "ok 10 # skip no static C++ runtime"
fi
