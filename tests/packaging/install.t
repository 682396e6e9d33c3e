#!/bin/sh
# install.t — `make install` and `make uninstall` with DESTDIR, as a
# distribution would run them (PREFIX=/usr, the multiarch LIBDIR): the
# library's file, soname links and static archive, the header, the
# pkg-config file, the wrapper (its LIB= pointing at the installed
# soname), slabkit-slabinfo, slabkit-slabtop and the man pages land where they should; the
# soname is libslabkit.so.0, sk_* carry the version SLABKIT_0 (but
# sk_inspect_root, SLABKIT_INSPECT_1: docs/inspect.md) and the
# malloc family none (so that it interposes on glibc's); a program built
# against the staged tree with pkg-config needs libslabkit.so.0 and
# SLABKIT_0 and runs; every man page renders without a warning; uninstall
# leaves nothing behind.  Tools that may be absent on a bare machine
# (pkg-config, man, groff) turn their checks into TAP skips.
set -u
. "$(dirname "$0")/../lib/programs.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[ -f "$LIB" ] || { echo "Bail out! $LIB is missing (make lib)"; exit 1; }
T=$(mktemp -d /tmp/slabkit-install.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
MA=$(gcc -print-multiarch 2>/dev/null)
[ -n "$MA" ] || MA=x86_64-linux-gnu
LD=/usr/lib/$MA
D=$T/root
VARS="B=$B PREFIX=/usr LIBDIR=$LD DESTDIR=$D"
echo "1..15"
skip() { n=$((n + 1)); echo "ok $n # skip $1"; }

make -s -C "$ROOT" $VARS install >"$T/install.out" 2>&1
rc=$?
ok $rc "make install DESTDIR=... PREFIX=/usr LIBDIR=$LD"
[ $rc = 0 ] || show "$T/install.out"

want="$LD/libslabkit.so.0.1.0 $LD/libslabkit.a /usr/include/slabkit.h $LD/pkgconfig/slabkit.pc
/usr/include/slabkit/kernel.h /usr/include/slabkit/linux/slab.h /usr/include/slabkit/linux/gfp.h
/usr/bin/slabkit /usr/bin/slabkit-slabinfo /usr/bin/slabkit-slabtop /usr/bin/slabkit-symbolize /usr/share/man/man1/slabkit.1
/usr/share/man/man1/slabkit-slabinfo.1 /usr/share/man/man1/slabkit-slabtop.1 /usr/share/man/man1/slabkit-symbolize.1
/usr/share/man/man3/slabkit.3 /usr/share/man/man7/slabkit.7"
missing=
for f in $want; do [ -f "$D$f" ] || missing="$missing $f"; done
[ -z "$missing" ]
ok $? "every file is installed${missing:+ (missing:$missing)}"
[ "$(readlink "$D$LD/libslabkit.so.0")" = libslabkit.so.0.1.0 ] && [ "$(readlink "$D$LD/libslabkit.so")" = libslabkit.so.0 ]
ok $? "libslabkit.so.0 -> libslabkit.so.0.1.0 and libslabkit.so -> libslabkit.so.0"
[ "$(stat -c %a "$D$LD/libslabkit.so.0.1.0")" = 644 ] && [ -x "$D/usr/bin/slabkit" ] && [ -x "$D/usr/bin/slabkit-slabinfo" ] &&
    [ -x "$D/usr/bin/slabkit-slabtop" ] && [ -x "$D/usr/bin/slabkit-symbolize" ]
ok $? "the library is 0644, the programs executable"
grep -qx "LIB=$LD/libslabkit.so.0" "$D/usr/bin/slabkit"
ok $? "the installed wrapper preloads $LD/libslabkit.so.0"

if command -v readelf >/dev/null 2>&1 && command -v objdump >/dev/null 2>&1; then
    readelf -d "$D$LD/libslabkit.so.0.1.0" | grep -q 'Library soname: \[libslabkit.so.0\]'
    ok $? "its soname is libslabkit.so.0"
    objdump -T "$D$LD/libslabkit.so.0.1.0" >"$T/syms"
    # NF < 2: objdump's blank and header lines (mawk stops at $(-1)).
    stray=$(awk 'NF < 2 { next }
                 $(NF-1) == "SLABKIT_0" && $NF !~ /^sk_/ && $NF != "SLABKIT_0" { print $NF }
                 $(NF-1) != "SLABKIT_0" && $NF ~ /^sk_/ && $NF != "sk_inspect_root" { print $NF }' "$T/syms") ||
        stray="(awk failed)"
    grep -Eq 'SLABKIT_0 +sk_cache_alloc$' "$T/syms" && grep -Eq 'SLABKIT_0 +sk_malloc$' "$T/syms" &&
        grep -Eq 'SLABKIT_INSPECT_1 +sk_inspect_root$' "$T/syms" &&
        grep -Eq 'Base +malloc$' "$T/syms" && grep -Eq 'Base +free_sized$' "$T/syms" && [ -z "$stray" ]
    ok $? "sk_* carry SLABKIT_0 (the inspection root SLABKIT_INSPECT_1), the malloc family no version${stray:+ (wrong: $stray)}"
else
    skip "binutils (readelf, objdump) not installed"
    skip "binutils (readelf, objdump) not installed"
fi

if command -v pkg-config >/dev/null 2>&1; then
    cat >"$T/app.c" <<'C'
#include <slabkit.h>
#include <stdio.h>
#include <stdlib.h>
int main(void)
{
    sk_cache_t *c = sk_cache_create("app", 48, 0, 0, NULL);
    void *o = sk_cache_alloc(c);
    sk_cache_free(c, o);
    char *p = malloc(100);
    printf("%zu %zu %d\n", sk_usable_size(p), malloc_good_size(100), sk_cache_destroy(c));
    free_sized(p, 100);
    return 0;
}
C
    PKG_CONFIG_PATH=$D$LD/pkgconfig PKG_CONFIG_SYSROOT_DIR=$D \
        cc -o "$T/app" "$T/app.c" $(PKG_CONFIG_PATH=$D$LD/pkgconfig PKG_CONFIG_SYSROOT_DIR=$D pkg-config --cflags --libs slabkit) \
        >"$T/cc.out" 2>&1
    rc=$?
    ok $rc "a program builds against the staged tree with pkg-config --cflags --libs slabkit"
    [ $rc = 0 ] || show "$T/cc.out"
    readelf -d "$T/app" 2>/dev/null | grep -q 'Shared library: \[libslabkit.so.0\]' &&
        readelf -V "$T/app" 2>/dev/null | grep -q 'Name: SLABKIT_0'
    ok $? "it needs libslabkit.so.0 and the version SLABKIT_0"
    [ "$(LD_LIBRARY_PATH=$D$LD "$T/app")" = "112 112 0" ]
    ok $? "and runs on the staged library"
    pre=$(PKG_CONFIG_PATH=$D$LD/pkgconfig pkg-config --variable=prefix slabkit)
    lib=$(PKG_CONFIG_PATH=$D$LD/pkgconfig pkg-config --define-variable=prefix=/opt/sk --variable=libdir slabkit)
    case $lib in /opt/sk/lib*) lib_ok=1 ;; *) lib_ok= ;; esac
    [ "$pre" = /usr ] && [ -n "$lib_ok" ]
    ok $? "slabkit.pc has a prefix (/usr: $pre) that libdir follows (prefix=/opt/sk: $lib)"
else
    skip "pkg-config not installed"; skip "pkg-config not installed"; skip "pkg-config not installed"
    skip "pkg-config not installed"
fi

if command -v man >/dev/null 2>&1; then
    bad=
    for page in 1/slabkit 1/slabkit-slabinfo 1/slabkit-slabtop 1/slabkit-symbolize 3/slabkit 7/slabkit; do
        out=$(MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -M "$D/usr/share/man" "${page%%/*}" "${page#*/}" 2>&1 >"$T/page.txt")
        [ -z "$out" ] && grep -q 'slabkit' "$T/page.txt" || bad="$bad $page ($out)"
    done
    [ -z "$bad" ]
    ok $? "man renders slabkit(1), slabkit-slabinfo(1), slabkit-slabtop(1), slabkit-symbolize(1), slabkit(3), slabkit(7) without a warning${bad:+:$bad}"
    MANWIDTH=80 man -M "$D/usr/share/man" 7 slabkit 2>/dev/null | grep -q 'sized_check'
    ok $? "slabkit(7) documents the options (sized_check among them)"
else
    skip "man (man-db) not installed"; skip "man (man-db) not installed"
fi

make -s -C "$ROOT" $VARS uninstall >"$T/uninstall.out" 2>&1
ok $? "make uninstall with the same variables"
left=$(find "$D" ! -type d)
[ -z "$left" ]
ok $? "it leaves no file behind${left:+ (left: $(echo $left))}"
