#!/bin/sh
# slab_options.t — the slab tests again under the options that change the
# slab layer's paths:
#   - tests/slab/stress_cross_cpu with SLABKIT_OPTIONS=cpu_partial=0 (slabs
#     that become partial go straight to the node list), with barn=0 (no
#     batches passed between CPUs through the node's barn), with rseq off
#     (GLIBC_TUNABLES=glibc.pthread.rseq=0: the per-CPU arrays' lock
#     fallback; the test's own diagnostic must say so), and with both;
#   - tests/slab/barn with barn=0 and with rseq off;
#   - tests/slab/remote_free with remote_free=0, with rseq off and with
#     allocator=slab (small objects freed on another CPU then stay in that
#     CPU's array);
#   - allocator=slab: kmalloc-64 and kmalloc-128 have exactly one object
#     fewer per slab with slab_mgmt=onslab than with slab_mgmt=page (the
#     struct slab SLAB kept inside the slab before 2014), read from the
#     slabinfo text of tests/slab/slabinfo_format and of tools/slabinfo
#     (the SLAB-mode tests are in slab_classic.t);
#   - tests/slab/whole_free with sheaves=0 (SLUB's own per-CPU freelists
#     free through the same slab_free_chain), with cpu_partial=0 and with
#     rseq off;
#   - tests/slab/reap with rseq off (the idle-cache reaper reads the
#     fallback arrays' operation counts, and drains them under their locks);
#   - tests/slab/remote_home with remote_free=0, rseq off (nothing goes
#     home) and cpu_partial=0 (home-going frees into full slabs take the
#     node list);
#   - slabinfo_at_exit=1 prints the 2.1 header to stderr at exit.
# One TAP line per run; a failing run shows the tail of its output.
. "$(dirname "$0")/../lib/rerun.sh"
S=$B/tests/slab
if [ ! -x "$S/stress_cross_cpu" ] || [ ! -x "$S/slabinfo_format" ] || [ ! -x "$S/cache_api" ] || [ ! -x "$S/barn" ] || [ ! -x "$S/remote_free" ] || [ ! -x "$S/remote_home" ] || [ ! -x "$S/whole_free" ] || [ ! -x "$S/reap" ]; then
    echo "1..0 # SKIP slab tests not built"
    exit 0
fi
echo "1..21"

check "stress_cross_cpu with cpu_partial=0" -e "cpu_partial=0" -- \
    env SLABKIT_OPTIONS=cpu_partial=0 "$S/stress_cross_cpu"
check "stress_cross_cpu with barn=0" -e "barn=0" -- \
    env SLABKIT_OPTIONS=barn=0 "$S/stress_cross_cpu"
check "barn with barn=0" -- env SLABKIT_OPTIONS=barn=0 "$S/barn"
check "remote_free with remote_free=0 (frees stay on the freeing CPU)" -e "stay on that CPU" -- \
    env SLABKIT_OPTIONS=remote_free=0 "$S/remote_free"
check "remote_free with rseq off (no CPU to compare: the array path)" -e "stay on that CPU" -- \
    env GLIBC_TUNABLES=glibc.pthread.rseq=0 "$S/remote_free"
check "remote_free with allocator=slab (SLAB: the array path)" -e "SLAB: frees on CPU [0-9]* stay on that CPU" -- \
    env SLABKIT_OPTIONS=allocator=slab "$S/remote_free"
check "remote_home with remote_free=0 (frees stay on the freeing CPU)" -e "stay on that CPU" -- \
    env SLABKIT_OPTIONS=remote_free=0 "$S/remote_home"
check "remote_home with rseq off (the array path)" -e "stay on that CPU" -- \
    env GLIBC_TUNABLES=glibc.pthread.rseq=0 "$S/remote_home"
check "remote_home with cpu_partial=0 (a full slab freed into goes to the node list)" -e "go home" -- \
    env SLABKIT_OPTIONS=cpu_partial=0 "$S/remote_home"
check "barn with rseq off (lock fallback)" -- env GLIBC_TUNABLES=glibc.pthread.rseq=0 "$S/barn"
check "stress_cross_cpu with rseq off (lock fallback)" -e "via the lock fallback" -- \
    env GLIBC_TUNABLES=glibc.pthread.rseq=0 "$S/stress_cross_cpu"
check "stress_cross_cpu with cpu_partial=0 and rseq off" -e "via the lock fallback" -- \
    env SLABKIT_OPTIONS=cpu_partial=0 GLIBC_TUNABLES=glibc.pthread.rseq=0 "$S/stress_cross_cpu"
check "whole_free with sheaves=0" -- env SLABKIT_OPTIONS=sheaves=0 "$S/whole_free"
check "whole_free with cpu_partial=0" -- env SLABKIT_OPTIONS=cpu_partial=0 "$S/whole_free"
check "whole_free with rseq off (lock fallback)" -- env GLIBC_TUNABLES=glibc.pthread.rseq=0 "$S/whole_free"
check "reap with rseq off (lock fallback)" -- env GLIBC_TUNABLES=glibc.pthread.rseq=0 "$S/reap"

# objperslab of a kmalloc class from the slabinfo text under SLAB, with its
# struct slab at the slab head (slab_mgmt=onslab) and in the page
# descriptor (slab_mgmt=page): the seed's one more object per slab.
objs() { # class options reader
    if [ "$3" = tool ]; then
        [ -x "$B/tools/slabinfo" ] || return 1
        SLABKIT_OPTIONS=$2 "$B/tools/slabinfo" --slabinfo | awk -v c="$1" '$1 == c { print $5 }'
    else
        SLABKIT_OPTIONS=$2 "$S/slabinfo_format" --objperslab "$1"
    fi
}
for reader in test tool; do
    for class in kmalloc-64 kmalloc-128; do
        i=$((i + 1))
        d=$(objs $class allocator=slab,slab_mgmt=page $reader)
        r=$(objs $class allocator=slab,slab_mgmt=onslab $reader)
        if [ -n "$d" ] && [ -n "$r" ] && [ "$r" -eq $((d - 1)) ]; then
            echo "ok $i - $class: $d objects per slab with slab_mgmt=page, $r with onslab ($reader)"
        else
            echo "not ok $i - $class: '$d' objects per slab with slab_mgmt=page, '$r' with onslab, want one fewer ($reader)"
        fi
    done
done


i=$((i + 1))
if SLABKIT_OPTIONS=slabinfo_at_exit=1 "$S/slabinfo_format" --objperslab kmalloc-64 2>&1 >/dev/null |
        grep -q '^slabinfo - version: 2.1$'; then
    echo "ok $i - slabinfo_at_exit=1 prints slabinfo to stderr at exit"
else
    echo "not ok $i - slabinfo_at_exit=1 prints slabinfo to stderr at exit"
fi
