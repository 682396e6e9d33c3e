#!/bin/sh
# options_once.t — a bad SLABKIT_OPTIONS item is reported once per process:
# one line each for an unknown key and a bad value, whatever the threads
# (a C++ program starting 8 threads that race to their first allocation),
# and a forked child that allocates without exec says nothing again (it
# inherits the parsed options).  Each process that execs reads them anew.
set -u
. "$(dirname "$0")/../lib/programs.sh"
in_workdir options-once
echo "1..4"
export SLABKIT_OPTIONS="bogus_key=1,pcp=7"
unset LD_PRELOAD

LD_PRELOAD=$LIB "$B/tests/malloc/cxx_threads" >/dev/null 2>err1
n1=$(grep -c "unknown option 'bogus_key'" err1)
v1=$(grep -c "bad value '7' for pcp" err1)
[ "$n1" = 1 ] && [ "$v1" = 1 ]
ok $? "8 threads racing to their first allocation: each warning once (unknown $n1, bad value $v1)"
[ "$n1" = 1 ] && [ "$v1" = 1 ] || show err1

cat > forker.c <<'C'
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
void *(*volatile get)(size_t) = malloc;
int main(void)
{
    free(get(100));     /* through a pointer: gcc drops a visible pair */
    for (int i = 0; i < 3; i++) {
        pid_t p = fork();
        if (p == 0) {
            void *q = get(5000);
            free(q);
            _exit(q == NULL);
        }
        int st;
        waitpid(p, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st))
            return 1;
    }
    return 0;
}
C
cc -O2 -o forker forker.c
LD_PRELOAD=$LIB ./forker 2>err2
rc=$?
n2=$(grep -c "slabkit: SLABKIT_OPTIONS" err2)
[ $rc = 0 ] && [ "$n2" = 2 ]
ok $? "a process and 3 forked children that allocate: 2 lines in all (got $n2, exit $rc)"
[ "$n2" = 2 ] || show err2

# The wrapper adds its options after the user's: still one line each.
"$B/slabkit" --options verbose=1 ./forker 2>err3
n3=$(grep -c "unknown option 'bogus_key'" err3)
[ "$n3" = 1 ]
ok $? "through the wrapper with --options: the unknown key once (got $n3)"
[ "$n3" = 1 ] || show err3

# A good setting still applies next to the bad ones.
SLABKIT_OPTIONS="bogus_key=1,verbose=1" LD_PRELOAD=$LIB ./forker 2>err4
grep -q "per-CPU arrays via" err4
ok $? "verbose=1 beside an unknown key still takes effect"
