# bench/lib.sh — shell helpers shared by slabkit's bench scripts.
# POSIX sh (works under dash and bash).  Source it from the repository root:
#
#     cd "$(dirname "$0")/.." && . bench/lib.sh
#
# The documented interface (other bench scripts rely on exactly these):
#
#   alloc_list                 names of the allocators present, one a line, in
#                              the order slabkit glibc jemalloc tcmalloc mimalloc;
#                              a missing one is skipped with a note on stderr
#   alloc_lib NAME             path of NAME's shared library (empty for glibc);
#                              status 1 if NAME is not present
#   alloc_preload NAME         the LD_PRELOAD value for NAME (empty for glibc)
#   run_with NAME [OPTS] -- cmd args...
#                              run cmd with allocator NAME; OPTS is the value
#                              of SLABKIT_OPTIONS (slabkit only, e.g.
#                              "cpu_partial=0,pcp=0"); returns cmd's status
#   measure cmd args...        run cmd (a program or run_with ...) and set
#                              M_ELAPSED_S M_USER_S M_SYS_S M_RSS_KB from the
#                              child's wait4 rusage; output passes through
#   peak_rss_kb cmd args...    run cmd (a program or run_with ...) with its
#                              stdout sent to stderr, and print its peak RSS
#                              in KiB:  kb=$(peak_rss_kb run_with glibc -- prog)
#   have_gnuplot               status 0 if gnuplot can draw PNGs
#   plot_lines OUT.png TITLE XLABEL YLABEL DATA
#   plot_bars  OUT.png TITLE YLABEL DATA
#                              DATA: whitespace columns, first line a header
#                              (x name, then one name per series), '#' lines
#                              ignored.  Lines: column 1 is x.  Bars: column 1
#                              is the group label.  Without gnuplot they print
#                              a note and return 0.
#   bench_note MSG...          a note line on stderr
#   bench_progress MSG...      a progress line on stderr: rewritten in place on
#                              a terminal, else a plain line at most every 2 s;
#                              bench_progress_done ends it
#   median N...                median of the numbers given
#
# Variables: SK_ROOT (repository root), B (build dir, default build),
# RESULTS (results dir, default results; created), BENCH_QUICK (1 in quick
# mode, set by bench/run).

if [ -z "${SK_ROOT:-}" ]; then
    if [ -f bench/lib.sh ]; then
        SK_ROOT=$(pwd)
    else
        SK_ROOT=$(git rev-parse --show-toplevel 2>/dev/null || pwd)
    fi
fi
B=${B:-build}
case $B in /*) SK_BUILD=$B ;; *) SK_BUILD=$SK_ROOT/$B ;; esac
RESULTS=${RESULTS:-$SK_ROOT/results}
BENCH_QUICK=${BENCH_QUICK:-1}
mkdir -p "$RESULTS" 2>/dev/null

bench_note() { printf '  [bench] %s\n' "$*" >&2; }

_bench_prog_last=0
bench_progress() {
    if [ -t 2 ]; then
        printf '\r  ... %s\033[K' "$*" >&2
    else
        _now=$(date +%s)
        if [ "$_now" -ge $((_bench_prog_last + 2)) ]; then
            _bench_prog_last=$_now
            printf '  ... %s\n' "$*" >&2
        fi
    fi
}
bench_progress_done() { if [ -t 2 ]; then printf '\r\033[K' >&2; fi; }

# First existing path of a peer's library: ldconfig's cache, then the
# Debian multiarch directory.
_bench_find_lib() {
    for _n in "$@"; do
        _p=$(ldconfig -p 2>/dev/null | awk -v n="$_n" '$1 == n { print $NF; exit }')
        [ -n "$_p" ] && [ -e "$_p" ] && { echo "$_p"; return 0; }
        for _d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib; do
            [ -e "$_d/$_n" ] && { echo "$_d/$_n"; return 0; }
        done
    done
    return 1
}

# slabkit counts as present only once the library actually runs a program
# (the core is built in stages; a broken .so must not take the bench down).
_bench_slabkit_ok=
alloc_lib() {
    case $1 in
    slabkit)
        _l=$SK_BUILD/libslabkit.so
        [ -e "$_l" ] || return 1
        if [ -z "$_bench_slabkit_ok" ]; then
            # It must also replace malloc, or the numbers would be glibc's.
            if nm -D --defined-only "$_l" 2>/dev/null | grep -q ' T malloc$' &&
               LD_PRELOAD=$_l /bin/true >/dev/null 2>&1 &&
               LD_PRELOAD=$_l /bin/sh -c 'echo ok | cat' >/dev/null 2>&1; then
                _bench_slabkit_ok=yes
            else
                _bench_slabkit_ok=no
            fi
        fi
        [ "$_bench_slabkit_ok" = yes ] || return 1
        echo "$_l" ;;
    glibc) echo "" ;;
    jemalloc) _bench_find_lib libjemalloc.so.2 libjemalloc.so ;;
    tcmalloc) _bench_find_lib libtcmalloc_minimal.so.4 libtcmalloc_minimal.so libtcmalloc.so.4 ;;
    mimalloc) _bench_find_lib libmimalloc.so.2 libmimalloc.so.2.0 libmimalloc.so.2.1 libmimalloc.so ;;
    *) return 1 ;;
    esac
}

alloc_preload() { alloc_lib "$1"; }

alloc_list() {
    for _a in slabkit glibc jemalloc tcmalloc mimalloc; do
        if alloc_lib "$_a" >/dev/null; then
            echo "$_a"
        else
            case $_a in
            slabkit) bench_note "slabkit skipped: $SK_BUILD/libslabkit.so missing, exports no malloc, or does not run /bin/sh" ;;
            *) bench_note "$_a skipped: library not installed (bench/deps installs it)" ;;
            esac
        fi
    done
}

# Prefix for the measured command (set by measure/peak_rss_kb); run_with puts
# it before `env`, so the wrapper itself never runs under the allocator.
_BENCH_WRAP=

run_with() {
    _name=$1; shift
    _opts=
    if [ "$#" -gt 0 ] && [ "$1" != "--" ]; then _opts=$1; shift; fi
    [ "${1:-}" = "--" ] && shift
    if ! _pre=$(alloc_lib "$_name"); then
        bench_note "run_with: allocator '$_name' not available"
        return 127
    fi
    if [ "$_name" = slabkit ]; then
        $_BENCH_WRAP env LD_PRELOAD="$_pre" SLABKIT_OPTIONS="$_opts" "$@"
    elif [ -n "$_pre" ]; then
        $_BENCH_WRAP env -u SLABKIT_OPTIONS LD_PRELOAD="$_pre" "$@"
    else
        $_BENCH_WRAP env -u SLABKIT_OPTIONS -u LD_PRELOAD "$@"
    fi
}

# The wait4 wrapper: build/bench/workloads/rusage, else /usr/bin/time.
_bench_rusage_cmd() {  # $1: file for "elapsed user sys maxrss_kb"
    if [ -x "$SK_BUILD/bench/workloads/rusage" ]; then
        echo "$SK_BUILD/bench/workloads/rusage -o $1"
    elif [ -x /usr/bin/time ]; then
        echo "/usr/bin/time -q -f %e,%U,%S,%M -o $1"
    else
        return 1
    fi
}

measure() {
    _mf=$(mktemp "${TMPDIR:-/tmp}/skbench.XXXXXX") || return 1
    M_ELAPSED_S=0; M_USER_S=0; M_SYS_S=0; M_RSS_KB=0
    if ! _w=$(_bench_rusage_cmd "$_mf"); then
        bench_note "measure: neither build/bench/workloads/rusage nor /usr/bin/time"
        "$@"; _st=$?; rm -f "$_mf"; return $_st
    fi
    if [ "$1" = run_with ]; then
        _BENCH_WRAP=$_w; "$@"; _st=$?; _BENCH_WRAP=
    else
        $_w "$@"; _st=$?
    fi
    # /usr/bin/time may prefix "Command exited with non-zero status".
    set -- $(tail -n 1 "$_mf" 2>/dev/null | tr ',' ' ') 0 0 0 0
    M_ELAPSED_S=$1; M_USER_S=$2; M_SYS_S=$3; M_RSS_KB=$4
    rm -f "$_mf"
    return $_st
}

peak_rss_kb() {
    measure "$@" >&2
    _st=$?
    echo "$M_RSS_KB"
    return $_st
}

median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print 0; exit }
        if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

have_gnuplot() {
    command -v gnuplot >/dev/null 2>&1 || return 1
    gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1 ||
        gnuplot -e 'set terminal png' >/dev/null 2>&1
}

_bench_png_term() {
    if gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1; then
        echo "pngcairo size 900,560 noenhanced"
    else
        echo "png size 900,560 noenhanced"
    fi
}

# Header line (first non-# line) of a data file, as gnuplot column titles.
_bench_ncols() { grep -v '^#' "$1" | head -n 1 | awk '{ print NF }'; }

plot_lines() {  # OUT TITLE XLABEL YLABEL DATA
    have_gnuplot || { bench_note "gnuplot missing: $1 not drawn (bench/deps installs gnuplot-nox)"; return 0; }
    _n=$(_bench_ncols "$5")
    gnuplot <<EOF 2>&1 | sed 's/^/  gnuplot: /' >&2
set terminal $(_bench_png_term)
set output '$1'
set title '$2'
set xlabel '$3'
set ylabel '$4'
set key outside right top autotitle columnhead
set grid
set yrange [0:*]
plot for [i=2:$_n] '$5' using 1:i with linespoints lw 2
EOF
    [ -s "$1" ] && bench_note "plot: $1"
    return 0
}

plot_bars() {  # OUT TITLE YLABEL DATA
    have_gnuplot || { bench_note "gnuplot missing: $1 not drawn (bench/deps installs gnuplot-nox)"; return 0; }
    _n=$(_bench_ncols "$4")
    gnuplot <<EOF 2>&1 | sed 's/^/  gnuplot: /' >&2
set terminal $(_bench_png_term)
set output '$1'
set title '$2'
set ylabel '$3'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key outside right top autotitle columnhead
set grid ytics
set yrange [0:*]
set xtics rotate by -30
plot for [i=2:$_n] '$4' using i:xtic(1)
EOF
    [ -s "$1" ] && bench_note "plot: $1"
    return 0
}
