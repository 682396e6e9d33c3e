#!/bin/sh
# leak_preload.t — docs/heap_bugs.md's leaky.c under LD_PRELOAD=libslabkit.so with
# leak_check=1, plus a function that mallocs 100 bytes, writes them and
# drops the pointer: all three leaks are reported, conn-0 (the process's
# first malloc, at the heap's base, which slabkit's own data once kept
# "referenced"), conn-1 and the 100 bytes, without debug=U; conn-2, which
# the global still holds, is not.
set -u
. "$(dirname "$0")/../lib/programs.sh"
CC=${CC:-cc}
command -v "$CC" >/dev/null 2>&1 || { echo "1..0 # SKIP no C compiler"; exit 0; }
in_workdir leakpre
echo "1..3"
cat >leaky.c <<'CEOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct conn { char name[40]; int fd; };
static struct conn *current;

__attribute__((noinline)) static void drop(void)
{
    char *p = malloc(100);
    memset(p, 'D', 100);
    __asm__ volatile("" : : "r"(p) : "memory");   /* the writes happen */
}

int main(void)
{
    for (int i = 0; i < 3; i++) {
        current = malloc(sizeof *current);   /* the previous one is lost */
        snprintf(current->name, sizeof current->name, "conn-%d", i);
        current->fd = i + 3;
    }
    drop();
    return 0;
}
CEOF
"$CC" -O2 -o leaky leaky.c || { echo "Bail out! cannot build leaky.c"; exit 1; }
SLABKIT_OPTIONS=leak_check=1 LD_PRELOAD="$LIB" ./leaky >out 2>err
ok $? "leaky runs under slabkit with leak_check=1"
cnt=$(grep -c '^unreferenced object ' err)
grep -q 'conn-0' err && grep -q 'conn-1' err && grep -q '44 44 44 44' err && ! grep -q 'conn-2' err && [ "$cnt" = 3 ]
ok $? "conn-0, conn-1 and the dropped 100 bytes reported ($cnt entries), conn-2 not"
show err 30
grep -q '^slabkit: leak_check: 3 unreferenced objects (208 bytes)' err
ok $? "the summary counts 3 objects, 208 bytes"
