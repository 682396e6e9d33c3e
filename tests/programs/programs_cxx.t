#!/bin/sh
# programs_cxx.t — the multi-threaded C++ program (tests/malloc/cxx_threads,
# built plain, no allocator linked) under LD_PRELOAD=libslabkit.so: std::map
# and std::string in 4 threads, cross-thread deletes, exceptions, aligned
# and failing new.  Its own TAP must pass, including the check that
# operator new's blocks are slabkit's, and slabkit's exit-time slabinfo
# shows it served the program.  Also: the same under the lock fallback
# (glibc registers no rseq), where the per-CPU arrays are reached under
# per-CPU locks.
set -u
. "$(dirname "$0")/../lib/programs.sh"
PROG=$B/tests/malloc/cxx_threads

[ -f "$LIB" ] || { echo "Bail out! $LIB is missing (make lib)"; exit 1; }
[ -x "$PROG" ] || { echo "Bail out! $PROG is missing (make $PROG)"; exit 1; }
T=$(mktemp -d /tmp/slabkit-cxx.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
echo "1..8"

# run NAME ENV...: the program under slabkit with extra environment.
run() {
    name=$1
    shift
    env "$@" LD_PRELOAD="$LIB" SK_EXPECT_SLABKIT=1 timeout 120 "$PROG" >"$T/$name.out" 2>"$T/$name.err"
    rc=$?
    ok $rc "cxx_threads exits 0 under slabkit ($name)"
    [ $rc = 0 ] || { show "$T/$name.out" 20; show "$T/$name.err" 5; }
    # Its TAP: a plan, no failures, the slabkit check not skipped.
    plan=$(sed -n 's/^1\.\.\([0-9]*\)$/\1/p' "$T/$name.out")
    passed=$(grep -c '^ok ' "$T/$name.out")
    ! grep -q '^not ok' "$T/$name.out" && [ -n "$plan" ] && [ "$passed" = "$plan" ] &&
        ! grep -q '# skip' "$T/$name.out"
    ok $? "all of its $plan checks pass, none skipped ($name)"
    grep -q "operator new's blocks .* are slabkit's" "$T/$name.out"
    ok $? "it found operator new's blocks to be slabkit's ($name)"
    served "$T/$name.err"
    ok $? "slabkit served it (slabinfo at exit shows kmalloc objects) ($name)"
}

run rseq SLABKIT_OPTIONS=slabinfo_at_exit=1
run locks SLABKIT_OPTIONS=slabinfo_at_exit=1 GLIBC_TUNABLES=glibc.pthread.rseq=0
