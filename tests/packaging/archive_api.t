#!/bin/sh
# archive_api.t — libslabkit.a exports only the API, as libslabkit.so does:
#   - its defined global symbols are the sk_* API, the malloc family and
#     C++'s operators (_Znw*, _Zna*, _Zdl*, _Zda*), nothing else;
#   - a program that defines a function under every internal name of the
#     library (cpu_init, page_alloc, slab_init, ... taken from
#     libslabkit_internal.a, the unlocalised objects the tests link) links
#     with libslabkit.a, runs, and its mallocs are slabkit's; also fully
#     static (-static), where libc.a's malloc is replaced.
set -u
. "$(dirname "$0")/../lib/programs.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CC=${CC:-cc}
command -v "$CC" >/dev/null 2>&1 || { echo "1..0 # SKIP no C compiler"; exit 0; }
command -v nm >/dev/null 2>&1 || { echo "1..0 # SKIP no nm"; exit 0; }
in_workdir archive
[ -f "$B/libslabkit.a" ] && [ -f "$B/libslabkit_internal.a" ] ||
    { echo "Bail out! $B/libslabkit.a or libslabkit_internal.a is missing (make lib)"; exit 1; }
echo "1..5"

nm -g --defined-only "$B/libslabkit.a" | awk 'NF == 3 { print $3 }' | sort -u >exported
api='^(sk_[a-z0-9_]+|malloc|free|calloc|realloc|reallocarray|aligned_alloc|posix_memalign|memalign|valloc|pvalloc|malloc_usable_size|malloc_trim|malloc_stats|mallinfo|mallinfo2|malloc_info|mallopt|free_sized|free_aligned_sized|malloc_good_size|_Z(nw|na|dl|da)[A-Za-z0-9_]+)$'
grep -Ev "$api" exported >extra
[ -s exported ] && [ ! -s extra ]
ok $? "libslabkit.a exports $(wc -l <exported) symbols, all API; $(wc -l <extra) others"
show extra 20

# Every hidden global of the objects: the names a program must be free to use.
nm -g --defined-only "$B/libslabkit_internal.a" | awk 'NF == 3 { print $3 }' | sort -u | grep -Ev "$api" >internal
[ "$(wc -l <internal)" -gt 100 ]
ok $? "$(wc -l <internal) internal names to define ($(head -3 internal | tr '\n' ' ')...)"

{
    echo '#include <stdio.h>'
    echo '#include <stdlib.h>'
    echo '#include "slabkit.h"'
    while read -r s; do echo "int $s(void) { return 7; }"; done <internal
    cat <<'CEOF'
int main(void)
{
    void *p = malloc(300);
    size_t n = sk_usable_size(p);
    free(p);
    if (n < 300 || cpu_init() != 7 || page_alloc() != 7 || slab_init() != 7)
        return 1;
    puts("mine and slabkit's");
    return 0;
}
CEOF
} >mine.c
grep -qx 'cpu_init' internal && grep -qx 'page_alloc' internal && grep -qx 'slab_init' internal || {
    # the names the program calls must be among them
    echo "Bail out! cpu_init, page_alloc or slab_init is no longer an internal name"; exit 1; }
"$CC" -std=gnu11 -O2 -pthread -w -I"$ROOT/include" -o mine mine.c "$B/libslabkit.a" >cc.out 2>&1
ok $? "a program defining all $(wc -l <internal) internal names links with libslabkit.a"
show cc.out 10
./mine >run.out 2>&1 && grep -q "mine and slabkit's" run.out
ok $? "it runs: its own functions answer, its malloc is slabkit's"
show run.out 5
if "$CC" -std=gnu11 -O2 -static -pthread -w -I"$ROOT/include" -o mine_static mine.c "$B/libslabkit.a" >cc2.out 2>&1; then
    ./mine_static >run2.out 2>&1 && grep -q "mine and slabkit's" run2.out
    ok $? "the same, fully static (-static)"
    show run2.out 5
else
    if grep -q "cannot find -lc\|cannot find -lpthread" cc2.out; then
        echo "ok 5 # SKIP no static libc"
    else
        ok 1 "the same, fully static (-static)"
        show cc2.out 10
    fi
fi
