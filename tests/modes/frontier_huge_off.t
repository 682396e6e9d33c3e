#!/bin/sh
# frontier_huge_off.t — page/frontier_huge with huge_slices=0 (its argument
# "off"): the zone's first slice is never advised onto huge pages, and the
# kernel has it not THP-eligible.  One TAP line; a failing run shows the
# tail of its output.
. "$(dirname "$0")/../lib/rerun.sh"
want "$B/tests/page/frontier_huge"
plan 1 "page tests not built"
for f in $bins; do
    check "$(name "$f") with huge_slices=0" -e "huge_slices=0" -- "$f" off
done
