#!/bin/sh
# rseq_off.t — the per-CPU tests again on the lock fallback: glibc told
# not to register rseq (GLIBC_TUNABLES=glibc.pthread.rseq=0), so every
# per-CPU array is reached under its lock.  Runs cpu/percpu_arrays,
# cpu/percpu_freelist (the sheaves=0 freelist sequences), cpu/drain_empty,
# cpu/array_pools, cpu/unready_array, the
# page tests (stress_pages, pcp, pcp_tune, buddy), slab/fresh_range and every binary under
# $SK_BUILD/tests/slab whose name contains "stress"; one TAP line each,
# passing when the binary exits 0.  (There is no option to force the
# fallback while glibc has rseq registered: mixing would race, so the
# choice is glibc's, process-wide.)  Then percpu_arrays, percpu_freelist,
# drain_empty, slab/stress_cross_cpu and page/purger (whose thread drains idle per-CPU
# page lists) with rseq on but membarrier denied
# (SK_TEST_DENY_MEMBARRIER=1: a seccomp filter, as a container profile or a
# kernel before 5.10 would have it), where remote drains cannot fence a
# CPU's sequences and visit the CPU instead.  A failing run shows the tail
# of its output.
. "$(dirname "$0")/../lib/rerun.sh"
want "$B/tests/cpu/percpu_arrays" "$B/tests/cpu/percpu_freelist" "$B/tests/cpu/rseq_signals" "$B/tests/cpu/drain_empty" \
     "$B/tests/cpu/array_pools" "$B/tests/cpu/unready_array" "$B/tests/cpu/empty_set" \
     "$B/tests/page/stress_pages" \
     "$B/tests/page/pcp" "$B/tests/page/pcp_tune" "$B/tests/page/buddy" "$B/tests/slab/fresh_range" "$B"/tests/slab/*stress*
nomb=
for f in "$B/tests/cpu/percpu_arrays" "$B/tests/cpu/percpu_freelist" "$B/tests/cpu/drain_empty" "$B/tests/slab/stress_cross_cpu" \
         "$B/tests/page/purger"; do
    [ -x "$f" ] && nomb="$nomb $f"
done
[ -n "$bins" ] || { echo "1..0 # SKIP no per-CPU tests built"; exit 0; }
echo "1..$(($(echo $bins | wc -w) + $(echo $nomb | wc -w)))"
for f in $bins; do
    check "$(name "$f") with rseq off" -- env GLIBC_TUNABLES=glibc.pthread.rseq=0 "$f"
done
for f in $nomb; do
    check "$(name "$f") with membarrier denied" -- env SK_TEST_DENY_MEMBARRIER=1 "$f"
done
