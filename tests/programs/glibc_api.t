#!/bin/sh
# glibc_api.t — the rest of glibc's malloc API from the shared library, as
# an unchanged program sees it under LD_PRELOAD: libslabkit.so exports
# mallinfo, mallinfo2, malloc_info, mallopt, free_sized,
# free_aligned_sized and malloc_good_size (nm -D); and python3, calling
# them through ctypes, gets slabkit's figures, not glibc's for an arena it
# never used: mallinfo2 adds up (arena = uordblks + fordblks) and counts a
# 32 MiB bytearray as a large block, malloc_info's XML lists slabkit's
# kmalloc caches, malloc_good_size(100) is 112.  The same script under
# glibc gets none of that (the check that the test can tell them apart).
set -u
. "$(dirname "$0")/../lib/programs.sh"
[ -f "$LIB" ] || { echo "Bail out! $LIB is missing (make lib)"; exit 1; }
T=$(mktemp -d /tmp/slabkit-glibcapi.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
echo "1..6"

if command -v nm >/dev/null 2>&1; then
    nm -D --defined-only "$LIB" | awk '{ print $NF }' >"$T/syms"
    missing=
    for s in mallinfo mallinfo2 malloc_info mallopt free_sized free_aligned_sized malloc_good_size; do
        grep -qx "$s" "$T/syms" || missing="$missing $s"
    done
    [ -z "$missing" ]
    ok $? "libslabkit.so exports the rest of the glibc API${missing:+ (missing:$missing)}"
else
    echo "ok 1 # skip nm (binutils) not installed"
    n=1
fi

cat >"$T/api.py" <<'PY'
import ctypes, sys
libc = ctypes.CDLL(None)
names = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
class MI2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in names]
libc.mallinfo2.restype = MI2
before = libc.mallinfo2()
big = bytearray(32 << 20)
after = libc.mallinfo2()
libc.fopen.restype = ctypes.c_void_p
f = libc.fopen(sys.argv[1].encode(), b"w")
rc = libc.malloc_info(0, ctypes.c_void_p(f))
libc.fclose(ctypes.c_void_p(f))
good = -1
if hasattr(libc, "malloc_good_size"):
    libc.malloc_good_size.restype = ctypes.c_size_t
    good = libc.malloc_good_size(ctypes.c_size_t(100))
print("sum", int(after.arena == after.uordblks + after.fordblks))
print("large", int(after.hblks >= before.hblks + 1 and after.hblkhd >= before.hblkhd + (32 << 20)))
print("info", rc)
print("good", good)
PY

if ! command -v python3 >/dev/null 2>&1; then
    for i in 2 3 4 5 6; do echo "ok $i # skip python3 not installed"; done
    exit 0
fi
LD_PRELOAD="$LIB" python3 "$T/api.py" "$T/sk.xml" >"$T/sk.out" 2>"$T/sk.err"
grep -qx 'sum 1' "$T/sk.out"
ok $? "python3 under slabkit: mallinfo2's arena = uordblks + fordblks"
grep -qx 'large 1' "$T/sk.out"
ok $? "a 32 MiB bytearray is one more large block in hblks/hblkhd"
grep -qx 'info 0' "$T/sk.out" && grep -q '^<malloc version="1">' "$T/sk.xml" &&
    grep -q '<cache name="kmalloc-64" ' "$T/sk.xml" && grep -q '^</malloc>' "$T/sk.xml"
ok $? "malloc_info writes glibc's XML with slabkit's kmalloc caches in it"
grep -qx 'good 112' "$T/sk.out"
ok $? "malloc_good_size(100) is 112 (kmalloc-112)"
[ -s "$T/sk.err" ] && show "$T/sk.err" 5

env -u LD_PRELOAD python3 "$T/api.py" "$T/glibc.xml" >"$T/glibc.out" 2>&1
grep -q '^<malloc version="1">' "$T/glibc.xml" && ! grep -q '<cache name=' "$T/glibc.xml"
ok $? "the same script under glibc gets glibc's XML, without slabkit's caches"
