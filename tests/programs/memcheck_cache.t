#!/bin/sh
# memcheck_cache.t — valgrind's memcheck sees sk_cache objects (slabkit's
# client requests, src/debug/poison.h):
#   - tests/slab/cache_poison runs under memcheck with --error-exitcode: its
#     checks of what is addressable and defined pass, and its stress (two
#     threads, cross frees, shrink, destroy; the allocator reading and
#     writing free pointers in free objects all along) raises no error;
#   - a read and a write of an sk_cache object after sk_cache_free are
#     reported ("Invalid read" / "Invalid write"), the address described as
#     inside a block that was freed, freed by sk_cache_free and allocated by
#     sk_cache_alloc; memcheck's exit status says it found an error;
#   - a branch on a field sk_cache_alloc left uninitialised is reported.
# Skipped without valgrind, or when slabkit was built without
# <valgrind/memcheck.h> (the annotations compile out); CI installs it.
set -u
. "$(dirname "$0")/../lib/programs.sh"
P=$B/tests/slab/cache_poison
[ -x "$P" ] || { echo "Bail out! $P is missing (make)"; exit 1; }
command -v valgrind >/dev/null 2>&1 || { echo "1..0 # SKIP valgrind is not installed"; exit 0; }
"$P" has-valgrind || { echo "1..0 # SKIP slabkit built without <valgrind/memcheck.h>"; exit 0; }
in_workdir memcheck
echo "1..10"

vg() { timeout 600 valgrind --error-exitcode=99 "$@"; }

vg -q "$P" >clean.out 2>clean.err
rc=$?
ok $rc "cache_poison under memcheck: exit 0, no memcheck error"
[ $rc = 0 ] || { show clean.out 40; show clean.err 40; }
grep -q "checking with memcheck" clean.out && ! grep -q "^not ok" clean.out
ok $? "and it ran its memcheck checks, all passing"

# report FILE KIND: the first error of FILE is KIND, on a block freed by
# sk_cache_free and allocated by sk_cache_alloc.
report() {
    awk -v kind="$2" '
        !seen && /== (Invalid|Conditional)/ { seen = 1; first = ($0 ~ kind) }
        seen && /is [0-9]+ bytes inside a block of size 40 free.d/ { inside = 1; part = "free" }
        seen && /Block was alloc.d at/ { part = "alloc" }
        part == "free" && /sk_cache_free \(cache\.c/ { freed = 1 }
        part == "alloc" && /sk_cache_alloc \(cache\.c/ { allocd = 1 }
        END { exit !(first && inside && freed && allocd) }' "$1"
}

vg "$P" uaf-read >uaf.out 2>uaf.err
rc=$?
[ $rc = 99 ]
ok $? "a read after sk_cache_free: memcheck's error exit (99)"
report uaf.err "Invalid read of size 4"
rc=$?
ok $rc "reported as an invalid read inside a 40-byte block freed by sk_cache_free, allocated by sk_cache_alloc"
[ $rc = 0 ] || show uaf.err 30
grep -q "at 0x[0-9A-F]*: uaf_read (cache_poison.c:" uaf.err
ok $? "at the line of the bad read"

vg "$P" uaf-write >uafw.out 2>uafw.err
rc=$?
[ $rc = 99 ]
ok $? "a write after sk_cache_free: memcheck's error exit"
report uafw.err "Invalid write of size 4"
rc=$?
ok $rc "reported as an invalid write inside the freed block, with both stacks"
[ $rc = 0 ] || show uafw.err 30

vg "$P" uninit >un.out 2>un.err
rc=$?
[ $rc = 99 ]
ok $? "a branch on a field never set: memcheck's error exit"
grep -q "Conditional jump or move depends on uninitialised value" un.err
ok $? "reported as depending on an uninitialised value"
grep -q "uninit_read (cache_poison.c:" un.err
rc=$?
ok $rc "at the line of the branch"
[ $rc = 0 ] || show un.err 30
