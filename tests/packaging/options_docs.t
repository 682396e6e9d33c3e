#!/bin/bash
# options_docs.t — the options are documented from one table
# (src/os/options.c): tools/gen-options --check passes on the tree (the
# README's and docs/options.md's tables are what it generates, slabkit(7)
# has every option with the table's default, docs/design.md names each),
# and fails, naming the place, when a copy drifts: a row edited, an option
# missing from the man page, a default changed there, a man entry for an
# option that does not exist.  And every man page renders from the source
# tree with `man -l` (no .so redirect that only works installed).
set -u
. "$(dirname "$0")/../lib/programs.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
G=$ROOT/tools/gen-options
[ -x "$B/tools/options_doc" ] || { echo "Bail out! $B/tools/options_doc is missing (make tools)"; exit 1; }
in_workdir options-docs
echo "1..7"
"$G" --check >out 2>&1
ok $? "gen-options --check: the tree's documents agree with the table"
[ $? = 0 ] || show out

copy() { rm -rf d; mkdir -p d/docs d/man; cp "$ROOT/README.md" d/; cp "$ROOT"/docs/options.md "$ROOT"/docs/design.md d/docs/; cp "$ROOT/man/slabkit.7" d/man/; }
drifts() {   # drifts NAME EXPECTED-WORDS: the check fails, saying EXPECTED-WORDS
    "$G" --check --root d >out 2>&1
    rc=$?
    [ $rc != 0 ] && grep -q "$2" out
    ok $? "$1: the check fails, saying '$2'"
    [ $? = 0 ] || show out
}
copy; sed -i 's/^| `decay_ms` | 500 |/| `decay_ms` | 250 |/' d/README.md
drifts "a default edited in the README's table" "README.md's options table differs"
copy; sed -i '/^\.BR kfence_pages " (255)"/,+2d' d/man/slabkit.7
drifts "kfence_pages taken out of slabkit(7)" "has no entry for kfence_pages"
copy; sed -i 's/^\.BR decay_ms " (500)"/.BR decay_ms " (250)"/' d/man/slabkit.7
drifts "decay_ms's default changed in slabkit(7)" "gives decay_ms the default 250, the table 500"
copy; printf '.TP\n.BR old_knob " (1)"\nGone.\n' >>d/man/slabkit.7
drifts "slabkit(7) describing an option that does not exist" "describes old_knob, which is no option"
copy; sed -i 's/`leak_exitcode`//g' d/docs/design.md
drifts "docs/design.md no longer naming leak_exitcode" "never names .leak_exitcode."

if command -v man >/dev/null 2>&1; then
    bad=
    for f in "$ROOT"/man/*.[137]; do
        MANWIDTH=80 man -l "$f" >page 2>err && [ -s page ] && [ ! -s err ] || bad="$bad $(basename "$f")"
    done
    [ -z "$bad" ]
    ok $? "man -l renders every page of man/ from the source tree${bad:+ (not:$bad)}"
else
    echo "ok 7 # SKIP man not installed"
fi
