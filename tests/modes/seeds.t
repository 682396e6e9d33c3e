#!/bin/sh
# seeds.t — bench/seeds (the page of each seed's figures beside slabkit's)
# against small fixture tables in a scratch results directory, with
# --no-run so no bench runs: a few seconds.  Checks that the page has one
# section per seed, that the seeds' own numbers are there as the mails give
# them, that slabkit's numbers are the fixtures' (read, not invented),
# that build/tools/slabinfo's objperslab lands beside the seed's, that
# without ddtmpfs.txt seed 001 shows pagestream's pcp=0 labelled as an
# ablation with its own before pending, and with ddtmpfs.txt the real
# before; seed 004 judged against the seed's 2-socket figures, seed 002's
# before and after frames, LL misses beside the seed's cache-misses; and
# that with no tables at all it still writes every section, with no
# explanation.
set -u
cd "$(dirname "$0")/../.." || exit 1
B=${B:-build}
case $B in /*) ;; *) B=$(pwd)/$B ;; esac
if [ ! -x "$B/tools/slabinfo" ]; then
    echo "1..0 # SKIP build/tools/slabinfo not built"
    exit 0
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/skseedst.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT INT TERM
mkdir -p "$T/r" "$T/dd" "$T/none"

cat > "$T/r/messaging.txt" <<'EOF'
messaging (perf bench sched messaging analogue): -g 2 -l 300 (20 senders + 20 receivers a group,
100-byte messages: skb head from its own cache + data buffer + 64-byte object, freed by the
receiving thread); 5 runs each, interleaved
time elapsed, mean +- sample stddev; change of the mean against slabkit;
CPU: the process's user+system seconds (steadier than wall time on a shared machine)

variant                        time elapsed (s)    change   median     CPU s    change
slabkit                0.8424 +- 0.1826 (+- 21.7%)    +0.00%   0.8190    1.2003    -0.00%
slab_mgmt=onslab       0.6000 +- 0.0300 (+-  5.0%)   -34.18%   0.5410    1.1000   -14.35%
slab_mgmt=page         0.5400 +- 0.0270 (+-  5.0%)   -33.49%   0.5269    0.9900   -20.11%
sheaves=0,cpu_partial=0     1.0217 +- 0.0714 (+-  7.0%)    -7.86%   1.0107    2.0167    -8.31%
sheaves=0              1.0575 +- 0.0671 (+-  6.3%)    -4.64%   1.0659    2.0924    -4.87%

cachegrind (simulated D1 and LL misses per message, -g 1 -f 20 -l 60 minus -g 1 -f 20 -l 20;
valgrind runs slabkit's lock fallback, not rseq):
variant               D1 misses    LL misses      time
slab_mgmt=onslab           7.26         0.01    0.6000
slab_mgmt=page             7.04         0.02    0.5400

SLUB as in 2011 (sheaves=0: alloc and free on the CPU slab's freelist with rseq), the seed's
comparison: before = sheaves=0,cpu_partial=0, after = sheaves=0 (mean time elapsed, CPU s)
    hackbench  before   1.0217 s  after   1.0575 s   +3.50%   | CPU s:   2.0167   2.0924  +3.75%
EOF
cat > "$T/r/netscale.txt" <<'EOF'
threads       before        after       (%)        glibc   | per CPU-s: before    after      (%)
     16       169294       164319    -2.94%       164226   |             87694    84438    -3.71%

SLUB as in 2011 (sheaves=0: no per-CPU arrays or barn; alloc and free use the CPU slab's
freelist with rseq), the seed's table: before = sheaves=0,cpu_partial=0, after = sheaves=0

threads       before        after       (%)   | per CPU-s: before    after      (%)
     16       111111       122222    10.00%   |             83851    85506     1.97%
     64        92446        94570     2.30%   |             46473    47744     2.73%
    112        95458        97710     2.36%   |             48043    49150     2.30%
    160       110825       122917    10.91%   |             55710    61734    10.81%

seed (Rientjes, netperf RR on 3.1-rc, 16..160 threads):
     16        78031    74714  (-4.3%)     96   239807   246222  (+2.7%)
EOF
cat > "$T/r/aim7.txt" <<'EOF'
aim7 analogue (quick mode): 5 runs per point, variants interleaved, medians; 40000 jobs per run split over the users
-----------------------------------------------------------------------------------------------
fserver
-----------------------------------------------------------------------------------------------
users     | % improvement | seed     | seed     | after vs  | after vs  | after vs   | noise
-----------------------------------------------------------------------------------------------
1000-2000 |        +23.7% |    +1.8% |   +29.2% |   +171.9% |    +51.3% |     +32.5% | 39.7%
-----------------------------------------------------------------------------------------------
100-900   |         -0.7% |    +0.0% |   +10.0% |    +42.7% |    +32.1% |      -3.1% | 24.0%
-----------------------------------------------------------------------------------------------
10-90     |         -0.0% |    -0.7% |    +0.4% |     +3.6% |     +3.6% |      -0.1% |  7.1%
-----------------------------------------------------------------------------------------------
high_systime
-----------------------------------------------------------------------------------------------
1000-2000 |         +7.5% |    +0.8% |   +34.9% |    +31.9% |    +30.3% |      -3.4% | 17.9%
-----------------------------------------------------------------------------------------------
100-900   |        +17.9% |    +0.4% |   +49.2% |    +10.6% |     +3.7% |      -1.5% |  8.6%
-----------------------------------------------------------------------------------------------
10-90     |         +1.7% |    +0.0% |    +3.1% |     +0.1% |     +1.1% |      -0.4% |  2.9%
EOF
cat > "$T/r/slicemask.txt" <<'EOF'
slicemask: 4096 single-slice regions live (base and 2 MiB pages alternating), 200000 unmap+map pairs; median of 3 interleaved runs
                            real      user       sys
slice_mask_cache=0         4.21s     1.11s     3.05s
slice_mask_cache=1         2.43s     0.71s     1.66s
change (1 vs 0)           -42.3%    -36.0%    -45.6%
EOF
cat > "$T/r/pagestream.txt" <<'EOF'
pagestream: 64 MiB streamed through 4 KiB pages (alloc, fill, keep; then free all)
first pass of each process (cold: every page faults in)
5 runs of each variant, interleaved; % change against pcp=0
(throughput: higher is better; time and CPU: lower is better)

                                    pcp                  pcp=0                   mmap                 malloc
Min    MB/s             2100.00 (  5.00%)      2000.00 (  0.00%)       900.00 (-55.00%)      1500.00 (-25.00%)
Mean   MB/s             2310.00 ( 10.00%)      2100.00 (  0.00%)      1000.00 (-52.38%)      1600.00 (-23.81%)
Stddev MB/s              110.00 ( 10.00%)       100.00 (  0.00%)        50.00 (-50.00%)        60.00 (-40.00%)
Max    MB/s             2500.00 (  8.70%)      2300.00 (  0.00%)      1100.00 (-52.17%)      1700.00 (-26.09%)
Min    time s              0.03 (-12.00%)         0.03 (  0.00%)         0.06 ( 96.00%)         0.04 ( 33.00%)
Mean   time s              0.0277 ( -9.00%)         0.0305 (  0.00%)         0.06 ( 96.00%)         0.04 ( 33.00%)
Stddev time s              0.00 ( -9.00%)         0.0015 (  0.00%)         0.00 ( 96.00%)         0.00 ( 33.00%)
Max    time s              0.03 ( -9.00%)         0.03 (  0.00%)         0.06 ( 96.00%)         0.04 ( 33.00%)
EOF
for f in messaging netscale aim7 slicemask; do cp "$T/r/$f.txt" "$T/dd/"; done
cat > "$T/dd/ddtmpfs.txt" <<'EOF'
ddtmpfs: dd bs=1M of a 256 MiB sk_file (quick: less than 1/10 of memory), then rm; 60 dds per variant (6 processes, interleaved)
before = page_microopt=0, after = default; seed 001 = 3.15.0-rc1 vanilla vs microopt-v1r11, from the seed's mail

loopdd Throughput (MB/s)    before (page_microopt=0)            after (default)   |       seed 001 vanilla         microopt-v1r11
Min                             4609.0416 (   0.00%)       5655.9586 (  22.71%)   |   3993.6000 (   0.00%)   4096.0000 (   2.56%)
Mean                           10944.4144 (   0.00%)      11513.8697 (   5.20%)   |   4766.7200 (   0.00%)   4896.4267 (   2.72%)
Stddev                          2763.9263 (   0.00%)       3393.3659 (  22.77%)   |    164.5053 (   0.00%)    167.7316 (   1.96%)
Max                            15243.5394 (   0.00%)      17135.2075 (  12.41%)   |   4812.8000 (   0.00%)   5120.0000 (   6.38%)
Median                         10514.4464 (   0.00%)      11342.2966 (   7.87%)   |      (not in the seed)

loopdd Time (s)             before (page_microopt=0)            after (default)   |       seed 001 vanilla         microopt-v1r11
Min                                0.0168 (   0.00%)          0.0149 (  11.04%)   |      0.3521 (   0.00%)      0.3317 (   5.80%)
Mean                               0.0251 (   0.00%)          0.0244 (   2.75%)   |      0.3570 (   0.00%)      0.3458 (   3.14%)
Stddev                             0.0074 (   0.00%)          0.0079 (  -6.91%)   |      0.0140 (   0.00%)      0.0112 (  20.59%)
Max                                0.0555 (   0.00%)          0.0453 (  18.51%)   |      0.4230 (   0.00%)      0.4083 (   3.49%)

after vs before: mean throughput +5.20%; time 2.75% less (mean), 7.29% less (median)
EOF

echo "1..15"
i=0
ok() { i=$((i + 1)); echo "ok $i - $1"; }
nok() { i=$((i + 1)); echo "not ok $i - $1"; shift; for l in "$@"; do echo "#   $l"; done; }
# has FILE DESC STRING...: every fixed string is in the page
has() {
    _f=$1; _d=$2; shift 2
    _miss=
    for _s in "$@"; do grep -qF -- "$_s" "$_f" || _miss="$_miss${_miss:+ / }$_s"; done
    if [ -z "$_miss" ]; then ok "$_d"; else nok "$_d" "missing: $_miss"; fi
}

RESULTS=$T/r B=$B bench/seeds --no-run > "$T/out" 2> "$T/err"
st=$?
if [ $st -eq 0 ] && [ -s "$T/r/seeds.md" ] && cmp -s "$T/out" "$T/r/seeds.md"; then
    ok "bench/seeds writes results/seeds.md and prints the same page"
else
    nok "bench/seeds writes results/seeds.md and prints the same page" "status $st" "$(tail -n 3 "$T/err")"
fi
P=$T/r/seeds.md
n=$(grep -c '^## Seed 00[0-4] ' "$P")
if [ "$n" -eq 5 ] && grep -q '^## Seed 000' "$P" && grep -q '^## Seed 004' "$P"; then
    ok "one section per seed (5)"
else
    nok "one section per seed" "found $n"
fi
has "$P" "seed 000: objperslab of the seed and of build/tools/slabinfo side by side" \
    "| kmalloc-32 | 32 | 112 | 113 | 112 | 113 |" "| kmalloc-64 | 64 | 59 | 60 | 59 | 60 |" \
    "| kmalloc-128 | 128 | 30 | 31 | 30 | 31 |" "| kmalloc-512 | 512 | 8 | 8 | 8 | 8 |" "14 of 14 cells"
has "$P" "seed 000: the seed's messaging figures beside the fixture's" \
    "12.010172090 (± 0.21%)" "11.627897174 (± 0.14%)" "238,309,671" "229,945,138" \
    "0.6000 ± 0.0300 (±5.0%)" "0.5400 ± 0.0270 (±5.0%)" "| -10.00% |" "| 7.26 | 7.04 |" "| 11.92 | 11.50 |" "| 0.01 | 0.02 |"
has "$P" "seed 000: a change beyond the noise in the seed's direction is called so" \
    "Time: goes the seed's way (slabkit +10.0%, seed +3.2%), beyond the noise (stddev 5.0%)"
has "$P" "seed 001 without ddtmpfs.txt: the pcp=0 ablation, labelled, own before pending" \
    "before (\`page_microopt=0\`, bench/ddtmpfs) is pending" "ABLATION" \
    "| Mean | 4766.7200 ( 0.00%) | 4896.4267 ( 2.72%) | 2100.00 | 2310.00 | +10.00% |" \
    "| Mean | 0.3570 ( 0.00%) | 0.3458 ( 3.14%) | 0.0305 | 0.0277 | +9.18% |"
has "$P" "seed 002: slicemask and checkstack figures of the seed and of the fixture" \
    "| real | 20.712 | 13.197 | -36.28% | 33.26 | 29.69 | -10.73% | 4.21 | 2.43 | -42.28% |" \
    "slice_get_unmapped_area 656" "slice_get_unmapped_area 320" "slice_check_fit 112"
has "$P" "seed 003: every seed row, slabkit's where measured, hackbench" \
    "| 16 | 78031 | 74714 | -4.3% | 111111 | 122222 | +10.00% | +1.97% |" \
    "| 32 | 118269 | 115810 | -2.1% | — |" "| 160 | 285972 | 299798 | +4.8% | 110825 | 122917 | +10.91% |" \
    "~10-20% with hackbench" "| 1.0217 | 1.0575 | +3.50% |"
has "$P" "seed 004: the seed's 2- and 8-socket % beside the fixture's" \
    "| fserver | 1000-2000 | +1.8% | +29.2% | +23.7% | 39.7% |" \
    "| high_systime | 100-900 | +0.4% | +49.2% | +17.9% | 8.6% |" \
    "| high_systime | 10-90 | +0.0% | +3.1% | +1.7% | 2.9% |" \
    "fserver, 1000-2000 users (beside the 2-socket figure)" "out of reach here"
has "$P" "seed 002: the before's and the after's frames beside the seed's" \
    "| 656 | 320 |" "arena_claim_uncached"
has "$P" "seed 000: LL misses (simulated) against the seed's last-level cache-misses" \
    "cachegrind's LL, simulated" "under half a miss per message in both layouts"

RESULTS=$T/dd B=$B bench/seeds --no-run > /dev/null 2> "$T/err2"
P=$T/dd/seeds.md
has "$P" "seed 001 with ddtmpfs.txt: its before and after beside the seed's" \
    "\`page_microopt=0\`" \
    "| Mean | 4766.7200 ( 0.00%) | 4896.4267 ( 2.72%) | 10944.4144 | 11513.8697 | +5.20% |" \
    "| Stddev | 0.0140 ( 0.00%) | 0.0112 ( 20.59%) | 0.0074 | 0.0079 | -6.76% |"
if [ -s "$P" ] && ! grep -q 'ABLATION' "$P"; then
    ok "seed 001 with ddtmpfs.txt: no ablation shown"
else
    nok "seed 001 with ddtmpfs.txt: no ablation shown"
fi

RESULTS=$T/none B=$B bench/seeds --no-run > /dev/null 2> "$T/err3"
st=$?
P=$T/none/seeds.md
n=$(grep -c '^## Seed 00[0-4] ' "$P" 2>/dev/null)
m=$(grep -c 'not measured' "$P" 2>/dev/null)
if [ $st -eq 0 ] && [ "$n" -eq 5 ] && [ "$m" -ge 4 ] && ! grep -q '0\.5400' "$P"; then
    ok "no tables and --no-run: every section, marked not measured, no numbers from elsewhere"
else
    nok "no tables and --no-run: every section, marked not measured" "status $st, $n sections, $m not measured"
fi
# An explanation only beside its measurement: none on a page that measured nothing
# (the stack frames, read from the build, have no explanation of their own).
w=$(grep -c '^Why' "$P" 2>/dev/null)
if [ "$w" -eq 0 ]; then
    ok "no tables: no explanation printed"
else
    nok "no tables: no explanation printed" "$(grep '^Why' "$P" | head -n 3)"
fi
