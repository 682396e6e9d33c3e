#!/bin/sh
# fastpath_calls.t — the malloc family's fast paths make no call: free,
# sized free and operator delete are one function each, their slow paths
# reached by tail jumps; malloc and operator new call out only for blocks
# above the slab classes (kmalloc_large_fast, 16-256 KiB) and on their
# slow paths; and no out-of-line copy of the per-CPU fast paths or of
# malloc's exists to be called.  Read from the built library's
# disassembly (objdump), because a compiler may stop inlining a helper
# when it grows: cpu_push_fast once became a call, with a stack frame, on
# every free (137 instructions a pair where 118 were, bench/pairs), and
# operator new called an out-of-line copy of malloc_inline.
set -u
. "$(dirname "$0")/../lib/programs.sh"
[ -f "$LIB" ] || { echo "Bail out! $LIB is missing (make lib)"; exit 1; }
command -v objdump >/dev/null 2>&1 || { echo "1..0 # SKIP objdump missing (binutils)"; exit 0; }
T=$(mktemp -d /tmp/slabkit-fastpath.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
objdump -d --no-show-raw-insn "$LIB" >"$T/dis" 2>/dev/null || { echo "Bail out! objdump failed on $LIB"; exit 1; }

# The targets of the call instructions in function $1's body.
calls() {
    awk -v f="<$1>:" '$2 == f { on = 1; next } on && /^$/ { exit } on && /\tcall/' "$T/dis" |
        sed 's/.*call *//'
}
# Whether function $1 is in the library.
has() { grep -q "^[0-9a-f]* <$1>:\$" "$T/dis"; }

NOCALL="free free_sized _ZdlPv _ZdlPvm"
echo "1..$(( $(echo $NOCALL | wc -w) + 3 ))"
for f in $NOCALL; do
    has "$f" || { ok 1 "$f is in the library"; continue; }
    c=$(calls "$f")
    [ -z "$c" ]
    ok $? "$f calls nothing${c:+ (calls: $(echo $c | tr '\n' ' '))}"
done
for f in malloc _Znwm; do
    has "$f" || { ok 1 "$f is in the library"; continue; }
    c=$(calls "$f" | grep -v -e '<malloc_slow>' -e '<kmalloc_large_fast>' -e '<new_failed>')
    [ -z "$c" ]
    ok $? "$f calls only its slow path and the large blocks' (kmalloc_large_fast)${c:+ (also: $(echo $c | tr '\n' ' '))}"
done
c=$(grep -o '<\(cpu_pop_fast\|cpu_push_fast\|cpu_lock_slot\|malloc_inline\|kmalloc_mid_fast\)>:' "$T/dis" | sort -u)
[ -z "$c" ]
ok $? "no out-of-line copy of cpu_pop_fast, cpu_push_fast, cpu_lock_slot, malloc_inline or kmalloc_mid_fast${c:+ ($(echo $c | tr '\n' ' '))}"
