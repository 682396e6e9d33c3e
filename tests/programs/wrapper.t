#!/bin/sh
# wrapper.t — tools/slabkit.sh, installed as build/slabkit (like
# jemalloc.sh): `slabkit [--slabinfo] [--leak-check] [--options K=V,...] PROGRAM ARGS...`
# runs PROGRAM with slabkit preloaded.  It must: find the library next to
# itself by an absolute path (so programs that chdir keep it), also through
# a symlink; keep a LIB= line that `make install` can rewrite; set
# slabinfo_at_exit=1 for --slabinfo, leak_check=1 for --leak-check, and append --options to any
# SLABKIT_OPTIONS already set; keep earlier LD_PRELOAD entries; pass the
# arguments through untouched and the exit status back; print usage for
# -h/--help, and fail clearly for no program, an unknown option or a
# missing library.
set -u
. "$(dirname "$0")/../lib/programs.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=$B/slabkit
# is GOT WANT NAME
is() {
    [ "$1" = "$2" ]
    rc=$?
    ok $rc "$3"
    [ $rc = 0 ] || { echo "#   got:    '$1'"; echo "#   wanted: '$2'"; }
}

[ -f "$LIB" ] || { echo "Bail out! $LIB is missing (make lib)"; exit 1; }
[ -x "$W" ] || { echo "Bail out! $W is missing (make $W)"; exit 1; }
T=$(mktemp -d /tmp/slabkit-wrapper.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
unset SLABKIT_OPTIONS LD_PRELOAD
echo "1..28"

# The script as built and as written.
cmp -s "$ROOT/tools/slabkit.sh" "$W"
ok $? "build/slabkit is tools/slabkit.sh"
grep -q '^LIB=' "$W"
ok $? "it has a line starting with LIB= for make install to rewrite"

# Help and errors.
"$W" --help >"$T/help.out" 2>&1 </dev/null
rc=$?
ok $rc "--help exits 0"
grep -qi 'usage' "$T/help.out" && grep -q -- '--slabinfo' "$T/help.out" && grep -q -- '--options' "$T/help.out"
ok $? "--help prints usage naming --slabinfo and --options"
"$W" -h >"$T/h.out" 2>&1
[ $? = 0 ] && cmp -s "$T/help.out" "$T/h.out"
ok $? "-h prints the same usage"
"$W" >"$T/none.out" 2>"$T/none.err"
rc=$?
[ $rc -ne 0 ] && grep -qi usage "$T/none.err"
ok $? "no program: a non-zero exit ($rc) and usage on stderr"
"$W" --bogus true >"$T/bogus.out" 2>"$T/bogus.err"
rc=$?
[ $rc -ne 0 ] && grep -q -- '--bogus' "$T/bogus.err"
ok $? "an unknown option: a non-zero exit ($rc) and a message naming it"
"$W" --options >"$T/o.out" 2>"$T/o.err"
[ $? -ne 0 ]
ok $? "--options without a value fails"

# What the program sees.
is "$("$W" sh -c 'echo "$LD_PRELOAD"')" "$LIB" "LD_PRELOAD is the absolute path of the library next to the script"
rel=${B#/}
is "$(cd / && "$rel/slabkit" sh -c 'echo "$LD_PRELOAD"')" "$LIB" "run by a relative path, it still preloads by an absolute path"
(cd / && "$rel/slabkit" sh -c 'cd /tmp && ls >/dev/null && echo done') >"$T/cd.out" 2>"$T/cd.err"
[ "$(cat "$T/cd.out")" = done ] && ! grep -q 'cannot be preloaded' "$T/cd.err"
ok $? "a program that changes directory keeps the library"
mkdir "$T/bin"
ln -s "$W" "$T/bin/sk"
is "$("$T/bin/sk" sh -c 'echo "$LD_PRELOAD"')" "$LIB" "through a symlink elsewhere, it still finds the library next to the real script"

is "$("$W" sh -c 'echo "${SLABKIT_OPTIONS:-}"')" "" "no options: SLABKIT_OPTIONS stays empty"
is "$("$W" --slabinfo sh -c 'echo "$SLABKIT_OPTIONS"')" "slabinfo_at_exit=1" "--slabinfo sets slabinfo_at_exit=1"
is "$("$W" --leak-check sh -c 'echo "$SLABKIT_OPTIONS"')" "leak_check=1" "--leak-check sets leak_check=1"
is "$("$W" --options cpu_partial=0,pcp=0 sh -c 'echo "$SLABKIT_OPTIONS"')" "cpu_partial=0,pcp=0" "--options K=V,K=V passes the options"
is "$(SLABKIT_OPTIONS=verbose=0 "$W" --options=pcp=0 --slabinfo sh -c 'echo "$SLABKIT_OPTIONS"')" \
    "verbose=0,pcp=0,slabinfo_at_exit=1" "--options=K=V and --slabinfo append to SLABKIT_OPTIONS in order"
is "$("$W" --options pcp=1 --options verbose=0 sh -c 'echo "$SLABKIT_OPTIONS"')" "pcp=1,verbose=0" "--options given twice accumulates"

pre=$(LD_PRELOAD=/lib/x86_64-linux-gnu/libm.so.6 "$W" sh -c 'echo "$LD_PRELOAD"')
case $pre in
"$LIB"[\ :]/lib/x86_64-linux-gnu/libm.so.6) rc=0 ;;
*) rc=1 ;;
esac
ok $rc "an existing LD_PRELOAD is kept, after slabkit ($pre)"

is "$("$W" printf '%s|' 'a b' '' '*' '$HOME' '--slabinfo')" 'a b||*|$HOME|--slabinfo|' \
    "arguments pass through untouched (spaces, empty, glob, \$, option-like)"
is "$("$W" -- sh -c 'echo "$1 ${SLABKIT_OPTIONS:-none}"' x --slabinfo)" "--slabinfo none" \
    "-- ends the wrapper's options; later options are the program's"
"$W" sh -c 'exit 7'
is $? 7 "the program's exit status comes back"
"$W" /no/such/program 2>/dev/null
is $? 127 "a program that cannot be run gives 127"

# It really runs the program under slabkit.
"$W" --slabinfo perl -e 'my %h = map { ("k$_" => "v" x ($_ % 100)) } 1 .. 20000; print scalar(keys %h), "\n"' \
    >"$T/perl.out" 2>"$T/perl.err"
[ "$(cat "$T/perl.out")" = 20000 ]
ok $? "slabkit --slabinfo perl ... runs perl"
served "$T/perl.err"
ok $? "and perl's stderr ends with slabkit's slabinfo showing objects"

# make install's rewrite of the LIB= line.
mkdir -p "$T/prefix/lib" "$T/prefix/bin"
cp "$LIB" "$T/prefix/lib/"
sed "s|^LIB=.*|LIB=$T/prefix/lib/libslabkit.so|" "$ROOT/tools/slabkit.sh" >"$T/prefix/bin/slabkit"
chmod 755 "$T/prefix/bin/slabkit"
is "$("$T/prefix/bin/slabkit" sh -c 'echo "$LD_PRELOAD"')" "$T/prefix/lib/libslabkit.so" \
    "after make install's sed of LIB=, the installed library is preloaded"
"$T/prefix/bin/slabkit" --slabinfo perl -e 'print "ok\n"' >"$T/inst.out" 2>"$T/inst.err"
[ "$(cat "$T/inst.out")" = ok ] && served "$T/inst.err"
ok $? "the installed wrapper runs a program under the installed library"

# A wrapper without its library says so.
mkdir "$T/alone"
cp "$ROOT/tools/slabkit.sh" "$T/alone/slabkit"
"$T/alone/slabkit" true >"$T/alone.out" 2>"$T/alone.err"
rc=$?
[ $rc -ne 0 ] && grep -q "$T/alone/libslabkit.so" "$T/alone.err"
ok $? "with no library next to it: a non-zero exit ($rc) and a message naming the path"
