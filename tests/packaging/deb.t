#!/bin/sh
# deb.t — `make deb`: dpkg-buildpackage -us -uc -b on a copy of the tree
# builds libslabkit0, libslabkit-dev and slabkit-tools, and lintian finds
# no error in them (make deb fails otherwise); each package holds what it
# should: the soname file and link in libslabkit0; the header, the
# development link, the static library, the pkg-config file and
# slabkit(3) in -dev; the wrapper, slabkit-slabinfo, slabkit-slabtop, their pages and
# slabkit(7) in -tools; dpkg-gensymbols warns of nothing (debian/rules
# makes a difference fatal too), and libslabkit0.symbols lists exactly what
# the built library exports.  Skipped where dpkg-buildpackage, debhelper or
# lintian is not installed (.ci/run installs them).
set -u
. "$(dirname "$0")/../lib/programs.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
for tool in dpkg-buildpackage dh lintian; do
    command -v $tool >/dev/null 2>&1 || { echo "1..0 # SKIP $tool not installed"; exit 0; }
done
T=$(mktemp -d /tmp/slabkit-deb.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
echo "1..7"

# A build directory of its own, so that the test does not replace $B/deb.
timeout 600 make -s -C "$ROOT" B="$T/b" deb >"$T/deb.out" 2>&1
rc=$?
ok $rc "make deb: dpkg-buildpackage -us -uc -b, then lintian --fail-on error"
[ $rc = 0 ] || { grep -E '^(E|W): |error' "$T/deb.out" | head -15 | sed 's/^/#   /'; }
debs=$(ls "$T"/b/deb/libslabkit0_*.deb "$T"/b/deb/libslabkit-dev_*.deb "$T"/b/deb/slabkit-tools_*.deb 2>/dev/null | wc -l)
[ "$debs" = 3 ]
ok $? "it built libslabkit0, libslabkit-dev and slabkit-tools"

# has PACKAGE PATH...: every PATH is in PACKAGE's .deb.
has() {
    pkg=$1; shift
    dpkg-deb -c "$T"/b/deb/"$pkg"_*.deb 2>/dev/null | awk '{ print $6 }' | sed 's|^\./|/|' >"$T/list"
    for p in "$@"; do grep -qx "$p" "$T/list" || { echo "#   $pkg lacks $p"; return 1; }; done
}
MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
has libslabkit0 /usr/lib/$MA/libslabkit.so.0.1.0 /usr/lib/$MA/libslabkit.so.0
ok $? "libslabkit0 holds libslabkit.so.0.1.0 and its soname link"
has libslabkit-dev /usr/include/slabkit.h /usr/lib/$MA/libslabkit.so /usr/lib/$MA/libslabkit.a \
    /usr/lib/$MA/pkgconfig/slabkit.pc /usr/share/man/man3/slabkit.3.gz
ok $? "libslabkit-dev holds the header, the link, the archive, slabkit.pc and slabkit(3)"
has slabkit-tools /usr/bin/slabkit /usr/bin/slabkit-slabinfo /usr/bin/slabkit-slabtop /usr/bin/slabkit-symbolize \
    /usr/share/man/man1/slabkit.1.gz /usr/share/man/man1/slabkit-slabinfo.1.gz \
    /usr/share/man/man1/slabkit-slabtop.1.gz /usr/share/man/man1/slabkit-symbolize.1.gz /usr/share/man/man7/slabkit.7.gz
ok $? "slabkit-tools holds the wrapper, slabkit-slabinfo, slabkit-slabtop, slabkit-symbolize, their pages and slabkit(7)"

# dpkg-gensymbols: no warning (new or missing symbols), in the output.
! grep -q 'dpkg-gensymbols: warning' "$T/deb.out"
ok $? "dpkg-gensymbols gives no warning"
grep -A12 'dpkg-gensymbols: warning' "$T/deb.out" | head -15 | sed 's/^/#   /'

# The symbols file lists the library's whole API: every defined dynamic
# symbol of the packaged .so (name@version; a version node names itself,
# an unversioned symbol is @Base), no more, no less.
dpkg-deb -x "$T"/b/deb/libslabkit0_*.deb "$T/x" 2>/dev/null
so=$(ls "$T"/x/usr/lib/*/libslabkit.so.0.1.0 2>/dev/null | head -1)
if [ -n "$so" ]; then
    nm -D --defined-only "$so" | awk '{ n = $3; sub(/@@/, "@", n); if (n ~ /^SLABKIT_[A-Z0-9_]*$/) n = n "@" n; else if (n !~ /@/) n = n "@Base"; print n }' |
        sort -u >"$T/exported"
    awk 'NR > 1 && $1 !~ /^\*/ { print $1 }' "$ROOT/debian/libslabkit0.symbols" | sort -u >"$T/listed"
    diff "$T/listed" "$T/exported" >"$T/symdiff"
    ok $? "libslabkit0.symbols lists the $(wc -l <"$T/exported") symbols the library exports"
    show "$T/symdiff" 15
else
    ok 1 "libslabkit0.symbols lists the symbols the library exports (no .so in the package)"
fi
