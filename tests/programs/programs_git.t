#!/bin/sh
# programs_git.t — git under LD_PRELOAD=libslabkit.so on a generated
# repository: init, 40 commits one by one (add, commit), 3,000 more through
# fast-import, log, gc (pack-objects with threads), fsck.  Commit hashes are
# deterministic (fixed names and dates), so the result must equal what git
# builds from the same input without slabkit; log -p must read the same too.
# slabkit's exit-time slabinfo shows it served git.
set -u
. "$(dirname "$0")/../lib/programs.sh"

command -v git >/dev/null 2>&1 || { echo "1..0 # SKIP git is not installed"; exit 0; }
in_workdir git
echo "1..10"

# No user or system configuration; fixed identities and dates.
HOME=$T GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
GIT_AUTHOR_NAME=slabkit GIT_AUTHOR_EMAIL=slabkit@example.invalid
GIT_COMMITTER_NAME=slabkit GIT_COMMITTER_EMAIL=slabkit@example.invalid
GIT_AUTHOR_DATE='1700000000 +0000' GIT_COMMITTER_DATE='1700000000 +0000'
export HOME GIT_CONFIG_NOSYSTEM GIT_CONFIG_GLOBAL GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL \
    GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL GIT_AUTHOR_DATE GIT_COMMITTER_DATE

# sk CMD...: run under slabkit (stderr goes where the caller says).
sk() { LD_PRELOAD=$LIB timeout 300 "$@"; }

# The same history built twice, with and without slabkit.
commits() {     # commits DIR: 40 commits with the porcelain
    for i in $(seq 1 40); do
        for f in 1 2 3 4 5; do
            awk -v i="$i" -v f="$f" 'BEGIN { for (l = 0; l < 200 + i * f; l++) printf "file %d line %d of commit %d\n", f, l, i }' >"$1/f$f.txt"
        done
        mkdir -p "$1/dir$((i % 7))" && echo "$i" >"$1/dir$((i % 7))/n$i"
        git -C "$1" add -A && git -C "$1" commit -q -m "commit $i" || return 1
    done
}
stream() {      # a fast-import stream of 3,000 commits on top of master
    awk 'BEGIN {
        for (c = 1; c <= 3000; c++) {
            printf "commit refs/heads/master\n"
            printf "committer slabkit <slabkit@example.invalid> %d +0000\n", 1700000000 + c
            msg = sprintf("imported commit %d", c)
            printf "data %d\n%s\n", length(msg), msg
            if (c == 1) printf "from refs/heads/master^0\n"
            for (f = 0; f < 3; f++) {
                body = ""
                for (l = 0; l < 5 + (c * 7 + f) % 40; l++) body = body sprintf("c%d f%d l%d\n", c, f, l)
                printf "M 644 inline imp/%d/%d.txt\ndata %d\n%s\n", c % 50, f, length(body), body
            }
        }
    }'
}

stream >fast.stream
git init -q ref && commits ref && git -C ref fast-import --quiet <fast.stream && git -C ref gc --quiet ||
    { echo "Bail out! git fails without slabkit: cannot build the reference"; exit 1; }
git -C ref log -p >ref.log

LD_PRELOAD=$LIB timeout 300 sh -c 'git init -q repo' 2>init.err
rc=$?
if [ $rc = 0 ]; then
    (export LD_PRELOAD=$LIB; commits repo) >commits.out 2>&1
    rc=$?
fi
ok $rc "git init and 40 commits (add -A, commit) under slabkit"
[ $rc = 0 ] || show commits.out

sk git -C repo fast-import --quiet <fast.stream >import.out 2>&1
rc=$?
ok $rc "git fast-import of 3,000 commits under slabkit"
[ $rc = 0 ] || show import.out

SLABKIT_OPTIONS=slabinfo_at_exit=1 sk git -C repo log --oneline >log.out 2>log.err
rc=$?
ok $rc "git log under slabkit"
[ "$(wc -l <log.out)" -eq 3040 ]
ok $? "git log shows all 3,040 commits ($(wc -l <log.out))"
served log.err
ok $? "slabkit served git log (slabinfo at exit shows kmalloc objects)"

SLABKIT_OPTIONS=slabinfo_at_exit=1 sk git -C repo gc --quiet >gc.out 2>gc.err
rc=$?
ok $rc "git gc (repack with threads) under slabkit"
[ $rc = 0 ] || show gc.err
served gc.err
ok $? "slabkit served git gc and its children"

sk git -C repo fsck --full --strict >fsck.out 2>&1
rc=$?
ok $rc "git fsck --full --strict is clean after gc under slabkit"
[ $rc = 0 ] || show fsck.out

[ "$(git -C repo rev-parse HEAD)" = "$(git -C ref rev-parse HEAD)" ]
ok $? "HEAD is the same commit git makes without slabkit"

sk git -C repo log -p >repo.log 2>/dev/null && cmp -s ref.log repo.log
ok $? "git log -p under slabkit reads the same as without it ($(wc -l <ref.log) lines)"
