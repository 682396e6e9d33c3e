#!/bin/sh
# pcp_off.t — the buddy allocator's invariants without per-CPU page lists
# (SLABKIT_OPTIONS=pcp=0: every order-0..3 allocation and free goes to the
# zone under its lock): page/buddy, page/stress_pages, malloc/kblock
# (16-32 KiB blocks from the zone instead of the lists) and
# malloc/large_cache (no exact-block cache), one TAP line each, passing
# when the binary exits 0.  A failing run shows the tail of its output.
. "$(dirname "$0")/../lib/rerun.sh"
want "$B/tests/page/buddy" "$B/tests/page/stress_pages" "$B/tests/malloc/kblock" "$B/tests/malloc/large_cache"
plan 1 "page tests not built"
for f in $bins; do
    check "$(name "$f") with pcp=0" -- env SLABKIT_OPTIONS=pcp=0 "$f"
done
