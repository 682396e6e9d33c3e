#!/bin/sh
# slabkit — run a program with slabkit as its malloc (like jemalloc.sh).
#   slabkit [--slabinfo] [--leak-check] [--error-exitcode=N] [--options K=V,...] PROGRAM ARGS...
# --slabinfo          print the program's slabinfo to stderr when it exits
# --leak-check        report unreferenced heap objects when it exits (kmemleak)
# --error-exitcode=N  exit N when the leak check found leaks or a slub_debug
#                     report let the program go on (as valgrind's option)
# --options K=V,..    append to SLABKIT_OPTIONS (SLABKIT_OPTIONS=help lists
#                     them; slabkit(7))
# The library next to the script, by an absolute path (programs may chdir),
# found through symlinks to the script.  `make install` rewrites this line.
LIB="$(cd "$(dirname "$(readlink -f "$0" 2>/dev/null || echo "$0")")" && pwd)/libslabkit.so"
usage() {
    echo "usage: slabkit [--slabinfo] [--leak-check] [--error-exitcode=N] [--options K=V,...] PROGRAM [ARGS...]"
    echo "  runs PROGRAM with slabkit ($LIB) preloaded as its malloc"
    echo "  options: SLABKIT_OPTIONS=help slabkit true; man 7 slabkit"
}
opts=${SLABKIT_OPTIONS:-}
add() { if [ -n "$opts" ]; then opts="$opts,$1"; else opts=$1; fi; }
while [ $# -gt 0 ]; do
    case $1 in
    -h|--help) usage; exit 0 ;;
    --slabinfo) add slabinfo_at_exit=1; shift ;;
    --leak-check) add leak_check=1; shift ;;
    --error-exitcode=*)
        n=${1#--error-exitcode=}
        case $n in ''|*[!0-9]*) echo "slabkit: --error-exitcode wants a number 0..255, not '$n'" >&2; exit 2 ;; esac
        add "leak_exitcode=$n,debug_exitcode=$n"; shift ;;
    --options) [ $# -ge 2 ] || { usage >&2; exit 2; }; add "$2"; shift 2 ;;
    --options=*) add "${1#--options=}"; shift ;;
    --) shift; break ;;
    -*) echo "slabkit: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) break ;;
    esac
done
[ $# -gt 0 ] || { usage >&2; exit 2; }
[ -f "$LIB" ] || { echo "slabkit: $LIB not found (run make)" >&2; exit 127; }
# What exec would say with this script's line number, said plainly.
command -v -- "$1" >/dev/null 2>&1 || { echo "slabkit: $1: no such program (or not executable)" >&2; exit 127; }
if [ -n "$opts" ]; then export SLABKIT_OPTIONS="$opts"; fi
export LD_PRELOAD="$LIB${LD_PRELOAD:+ $LD_PRELOAD}"
exec "$@"
