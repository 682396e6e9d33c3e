#!/bin/sh
# slab_classic.t — allocator=slab (the kernel's SLAB, src/slab/slab_classic.c)
# under both slab_mgmt layouts:
#   - tests/slab/objperslab: objects per slab, object size, pages per slab
#     and tunables of kmalloc-32 .. kmalloc-512 equal seed 000's
#     /proc/slabinfo before (onslab) and after (page); a double free and a
#     free of an object never handed out are caught;
#   - tests/slab/stress_cross_cpu (64 threads on the machine's CPUs, frees
#     on other threads, every object checked), also with rseq off (the
#     lock fallback);
#   - tests/malloc/fork_stress and fork_repair: fork while threads allocate;
#   - tests/malloc/glibc_api: mallinfo2, malloc_info, mallopt and the sized
#     frees on SLAB's classes;
#   - the ThreadSanitizer build of stress_cross_cpu (rseq off), when built;
#   - a real program: sort(1) of a generated file under LD_PRELOAD, its
#     output equal to sort's without slabkit.
# One TAP line per run; a failing run shows the tail of its output.
. "$(dirname "$0")/../lib/rerun.sh"
S=$B/tests/slab
M=$B/tests/malloc
if [ ! -x "$S/objperslab" ] || [ ! -x "$S/stress_cross_cpu" ] || [ ! -x "$M/fork_stress" ] ||
        [ ! -x "$M/fork_repair" ] || [ ! -f "$B/libslabkit.so" ]; then
    echo "1..0 # SKIP slab tests or the library not built"
    exit 0
fi
TS=$B/tsan/tests/slab/stress_cross_cpu
if [ -x "$TS" ]; then echo "1..18"; else echo "1..16"; fi
for mgmt in onslab page; do
    o=allocator=slab,slab_mgmt=$mgmt
    check "objperslab with $o (the seed's table)" -e "slab_mgmt=$mgmt" -- env SLABKIT_OPTIONS=$o "$S/objperslab"
    check "stress_cross_cpu with $o" -- env SLABKIT_OPTIONS=$o "$S/stress_cross_cpu"
    check "stress_cross_cpu with $o and rseq off" -e "via the lock fallback" -- \
        env SLABKIT_OPTIONS=$o GLIBC_TUNABLES=glibc.pthread.rseq=0 "$S/stress_cross_cpu"
    check "fork_stress with $o" -- env SLABKIT_OPTIONS=$o "$M/fork_stress"
    check "fork_repair with $o" -- env SLABKIT_OPTIONS=$o "$M/fork_repair"
    check "glibc_api with $o" -- env SLABKIT_OPTIONS=$o "$M/glibc_api"
    if [ -x "$TS" ]; then
        check "ThreadSanitizer stress_cross_cpu with $o" -- \
            env SLABKIT_OPTIONS=$o GLIBC_TUNABLES=glibc.pthread.rseq=0 TSAN_OPTIONS=halt_on_error=1 "$TS"
    fi
done

T=$(mktemp -d "/tmp/slabkit-classic.XXXXXX") || exit 1
trap 'rm -rf "$T" "$out"' EXIT
awk 'BEGIN { x = 7; for (i = 0; i < 200000; i++) { x = (x * 1103515245 + 12345) % 2147483648
     printf "%010d %s %d\n", x, substr("abcdefghijklmnopqrstuvwxyz", 1, x % 26), i } }' >"$T/in"
LC_ALL=C sort "$T/in" >"$T/want"
for mgmt in onslab page; do
    o=allocator=slab,slab_mgmt=$mgmt
    i=$((i + 1))
    if LC_ALL=C LD_PRELOAD=$B/libslabkit.so SLABKIT_OPTIONS=$o,slabinfo_at_exit=1 \
            sort -S 16M --parallel=2 -T "$T" "$T/in" >"$T/got" 2>"$T/err" && cmp -s "$T/want" "$T/got"; then
        echo "ok $i - sort under $o: output equals sort's without slabkit"
    else
        echo "not ok $i - sort under $o: output equals sort's without slabkit"
        tail -n 5 "$T/err" | sed 's/^/# /'
    fi
    i=$((i + 1))
    if LD_PRELOAD=$B/libslabkit.so SLABKIT_OPTIONS=$o,slabinfo_at_exit=1 \
            sh -c 'ls -lR /usr/include | wc -l' >/dev/null 2>"$T/err2" &&
            grep -q '^kmalloc-96  .* 128 ' "$T/err2"; then
        echo "ok $i - sh, ls and wc under $o; slabinfo at exit shows SLAB's kmalloc-96 (objsize 128)"
    else
        echo "not ok $i - sh, ls and wc under $o; slabinfo at exit shows SLAB's kmalloc-96 (objsize 128)"
        tail -n 5 "$T/err2" | sed 's/^/# /'
    fi
done
