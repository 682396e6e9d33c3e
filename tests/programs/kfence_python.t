#!/bin/sh
# kfence_python.t — a correct program under KFENCE stays silent: python3
# under LD_PRELOAD=libslabkit.so with SLABKIT_OPTIONS=kfence=1 (a sample
# every millisecond) and PYTHONMALLOC=malloc (every Python object through
# slabkit) builds dicts, strings and JSON on four threads and in a forked
# child, and gets the right answer with nothing on stderr; the program
# itself (ctypes, sk_kfence_object on the addresses of bytes objects)
# finds that some of its objects did come from the KFENCE pool.
set -u
. "$(dirname "$0")/../lib/programs.sh"

command -v python3 >/dev/null 2>&1 || { echo "1..0 # SKIP python3 is not installed"; exit 0; }
PY=$(python3 -c 'import sys; print(sys.executable)') || PY=python3
in_workdir kfence
echo "1..4"

cat >w.py <<'PYEOF'
import ctypes, json, os, threading, time
isk = ctypes.CDLL(None).sk_kfence_object
isk.argtypes = [ctypes.c_void_p]
held, seen = [], 0
def work(n):
    d = {}
    for i in range(n):
        d[str(i) * 3] = [i, str(i), {"k": i}]
    return len(json.loads(json.dumps(d)))
for r in range(200):
    b = bytes(r % 300 + 20)          # a bytes object's id is its malloc pointer
    if isk(id(b)):
        seen += 1
        held.append(b)
    time.sleep(0.002)
ts = [threading.Thread(target=work, args=(20000,)) for _ in range(4)]
for t in ts: t.start()
for t in ts: t.join()
pid = os.fork()
if pid == 0:
    os._exit(0 if work(5000) == 5000 else 1)
_, st = os.waitpid(pid, 0)
print("answer", work(30000), "child", st, "sampled", seen)
PYEOF

LD_PRELOAD=$LIB SLABKIT_OPTIONS=kfence=1 PYTHONMALLOC=malloc timeout 120 "$PY" w.py >out 2>err
rc=$?
ok $rc "python3 exits 0 under slabkit with kfence=1"
grep -q '^answer 30000 child 0 sampled ' out
ok $? "and gives the right answer (threads and a forked child too)"
[ $rc = 0 ] || show out 5
[ ! -s err ]
ok $? "nothing on stderr: no KFENCE report for a correct program"
[ -s err ] && show err 30
sampled=$(sed -n 's/.* sampled \([0-9]*\)$/\1/p' out)
[ -n "$sampled" ] && [ "$sampled" -gt 0 ]
ok $? "objects did come from the KFENCE pool (${sampled:-0} of 200 bytes objects)"
