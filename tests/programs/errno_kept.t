#!/bin/sh
# errno_kept.t — errno is untouched by every call that succeeds, with the
# shared library, where the first slices lie elsewhere than in the static
# test's process: tests/malloc/errno_kept built against libslabkit.so
# (the malloc family, sk_*, the page and file APIs; the process's first
# malloc of 64 MiB and realloc to 100000, which once left EEXIST from a
# retried mapping), run as it is and under LD_PRELOAD with an unlinked
# program; then C++'s operator new, new[], aligned and nothrow forms.
set -u
. "$(dirname "$0")/../lib/programs.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CC=${CC:-cc}
CXX=${CXX:-c++}
command -v "$CC" >/dev/null 2>&1 || { echo "1..0 # SKIP no C compiler"; exit 0; }
in_workdir errno
echo "1..4"

"$CC" -std=gnu11 -O2 -Wall -Wextra -I"$ROOT/include" -I"$ROOT/tests" -o errno_dyn \
    "$ROOT/tests/malloc/errno_kept.c" -L"$B" -lslabkit -Wl,-rpath,"$B" 2>cc.err
ok $? "errno_kept builds against libslabkit.so"
./errno_dyn >out 2>err
rc=$?
fails=$(grep -c '^not ok' out)
passes=$(grep -c '^ok' out)
[ $rc = 0 ] && [ "$fails" = 0 ] && [ "$passes" -gt 50 ]
ok $? "linked with libslabkit.so: $passes calls keep errno, $fails do not"
[ "$fails" = 0 ] || grep -A2 '^not ok' out | sed 's/^/#   /'

cat >plain.c <<'CEOF'
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
int main(void)
{
    int bad = 0;
    errno = 4242;
    void *p = malloc(10);
    if (!p || errno != 4242) { printf("first malloc(10): errno %d\n", errno); bad = 1; }
    p = realloc(p, 100000);
    if (!p || errno != 4242) { printf("realloc(p, 100000): errno %d\n", errno); bad = 1; }
    void *big = malloc(64 << 20);
    if (!big || errno != 4242) { printf("malloc(64 MiB): errno %d\n", errno); bad = 1; }
    errno = 4242;
    p = realloc(p, 50 << 20);
    if (!p || errno != 4242) { printf("realloc(p, 50 MiB): errno %d\n", errno); bad = 1; }
    errno = 4242;
    free(p);
    free(big);
    if (errno != 4242) { printf("free: errno %d\n", errno); bad = 1; }
    return bad;
}
CEOF
"$CC" -O2 -o plain plain.c && LD_PRELOAD="$LIB" ./plain >plain.out 2>&1
ok $? "LD_PRELOAD: first malloc, realloc to 100000, malloc(64 MiB), realloc to 50 MiB, free keep errno"
show plain.out 5

if command -v "$CXX" >/dev/null 2>&1; then
    cat >new.cc <<'CEOF'
#include <cerrno>
#include <cstdio>
#include <new>
struct alignas(256) wide { char c[300]; };
int main()
{
    int bad = 0;
    errno = 4242;
    char *a = new char[64 << 20];
    if (errno != 4242) { std::printf("new[] 64 MiB: errno %d\n", errno); bad = 1; }
    int *b = new int(5);
    wide *w = new wide;
    char *n = new (std::nothrow) char[100000];
    if (errno != 4242) { std::printf("new: errno %d\n", errno); bad = 1; }
    delete[] n;
    delete w;
    delete b;
    delete[] a;
    if (errno != 4242) { std::printf("delete: errno %d\n", errno); bad = 1; }
    return bad;
}
CEOF
    "$CXX" -std=gnu++17 -O2 -o newp new.cc && LD_PRELOAD="$LIB" ./newp >new.out 2>&1
    ok $? "LD_PRELOAD: operator new, new[], aligned and nothrow new and delete keep errno"
    show new.out 5
else
    echo "ok 4 # SKIP no C++ compiler"
fi
