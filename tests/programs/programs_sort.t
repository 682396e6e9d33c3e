#!/bin/sh
# programs_sort.t — sort(1) under LD_PRELOAD=libslabkit.so on a generated
# 20 MB file: once with one large in-memory buffer, once with a 4 MiB
# buffer, two threads and temporary files to merge.  Both outputs must equal
# what sort prints without slabkit, and slabkit's exit-time slabinfo must
# show it served sort.
#
# Note: coreutils close stderr on the way out (gnulib's close_stdout runs
# from atexit, before shared-library destructors), so slabkit can only show
# its exit-time slabinfo here if it writes to a descriptor it kept from
# start-up.
set -u
. "$(dirname "$0")/../lib/programs.sh"

command -v sort >/dev/null 2>&1 || { echo "1..0 # SKIP sort is not installed"; exit 0; }
in_workdir sort
LC_ALL=C
export LC_ALL
echo "1..6"

# About 20 MB: 470,000 lines of pseudo-random keys and varied lengths.
awk 'BEGIN {
    x = 12345
    for (i = 0; i < 470000; i++) {
        x = (x * 1103515245 + 12345) % 2147483648
        pad = substr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 1, x % 52)
        printf "%010d %s %d\n", x, pad, i
    }
}' >input
sort input >want.out || { echo "Bail out! sort fails without slabkit"; exit 1; }
echo "# input: $(wc -c <input) bytes, $(wc -l <input) lines"

mkdir tmp
LD_PRELOAD=$LIB SLABKIT_OPTIONS=slabinfo_at_exit=1 timeout 300 sort -S 256M input >big.out 2>big.err
rc=$?
ok $rc "sort of 20 MB in one 256 MiB buffer exits 0 under slabkit"
cmp -s want.out big.out
ok $? "its output equals sort's without slabkit"
served big.err
rc=$?
ok $rc "slabkit served sort (slabinfo at exit shows kmalloc objects)"
[ $rc = 0 ] || echo "#   stderr had $(wc -l <big.err) lines; sort closes stderr at exit (gnulib close_stdout)"

LD_PRELOAD=$LIB SLABKIT_OPTIONS=slabinfo_at_exit=1 timeout 300 sort -S 4M --parallel=2 -T tmp input >merge.out 2>merge.err
rc=$?
ok $rc "sort with a 4 MiB buffer, 2 threads and temporary-file merges exits 0 under slabkit"
cmp -s want.out merge.out
ok $? "its output equals sort's without slabkit"
served merge.err
ok $? "slabkit served the merging sort"
