#!/bin/sh
# stack.t — no function on the malloc/free paths uses a stack frame above
# the budget (docs/slices.md, "Stack budget"), read from the -fstack-usage
# files of the library build by tools/checkstack.  Skipped when the build
# wrote no .su files (a compiler without -fstack-usage).
B=${SK_BUILD:-build}
BUDGET=512
if ! ls "$B"/obj/src/*/*.su >/dev/null 2>&1; then
    echo "1..0 # SKIP no .su files under $B/obj (build with -fstack-usage)"
    exit 0
fi
echo "1..1"
out=$(tools/checkstack --check "$BUDGET" -n 10 "$B/obj" 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
if [ $rc -eq 0 ]; then
    echo "ok 1 - every malloc/free path frame is within $BUDGET bytes"
else
    echo "not ok 1 - a malloc/free path frame exceeds $BUDGET bytes"
fi
