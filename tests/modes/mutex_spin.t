#!/bin/sh
# mutex_spin.t — the allocator's stress tests again in each sk_mutex
# spinning mode (SLABKIT_OPTIONS=mutex_spin=0 / =1 / =mcs, the last the
# pre-2014 queue of src/lock/mutex_mcs.c): every binary under
# $SK_BUILD/tests/slab and $SK_BUILD/tests/page whose name contains
# "stress".  One TAP line per binary and setting; a failing run shows the
# tail of its output as diagnostics.
. "$(dirname "$0")/../lib/rerun.sh"
want "$B"/tests/slab/*stress* "$B"/tests/page/*stress*
plan 3 "no allocator stress tests built"
for f in $bins; do
    for spin in 0 1 mcs; do
        check "$(name "$f") with mutex_spin=$spin" -- env SLABKIT_OPTIONS=mutex_spin=$spin "$f"
    done
done
