#!/bin/sh
# kfence_threads.t — KFENCE's "static key" under threads: with kfence=1 its
# timer thread points the malloc tables at the always-empty arrays every
# millisecond and the next small malloc puts them back (kmalloc.c's
# kmalloc_tables_divert), while other threads allocate and free through
# those same tables.  tests/malloc/fork_stress (8 threads hammering
# malloc, forks in between, every object checked) and thread_churn
# (100,000 short threads handing objects over) run with that going on.
. "$(dirname "$0")/../lib/rerun.sh"
want "$B/tests/malloc/fork_stress" "$B/tests/malloc/thread_churn"
plan 1 "fork_stress and thread_churn not built"
for f in $bins; do
    check "$(name "$f") with kfence=1" -- env SLABKIT_OPTIONS=kfence=1 "$f"
done
