#!/bin/sh
# programs_sqlite.t — sqlite3 under LD_PRELOAD=libslabkit.so builds a
# 100,000-row table on disk, indexes it and queries it (aggregates, GROUP BY,
# ORDER BY, a join, an update and a delete); the answers are the known ones
# (computed from the generating formulas), integrity_check is ok, and
# slabkit's exit-time slabinfo shows it served the process.
set -u
. "$(dirname "$0")/../lib/programs.sh"

command -v sqlite3 >/dev/null 2>&1 || { echo "1..0 # SKIP sqlite3 is not installed"; exit 0; }
in_workdir sqlite
echo "1..5"

cat >build.sql <<'EOF'
PRAGMA cache_size = -65536;
CREATE TABLE t (id INTEGER PRIMARY KEY, grp INTEGER, val INTEGER, name TEXT, blob BLOB);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 100000)
INSERT INTO t SELECT x, x % 100, (x * 7) % 1000, printf('name-%08d-%s', x, hex(randomblob(8))), zeroblob(x % 200) FROM c;
CREATE INDEX t_grp ON t (grp, val);
CREATE INDEX t_name ON t (name);
CREATE TABLE g (grp INTEGER PRIMARY KEY, label TEXT);
WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM c WHERE x < 99)
INSERT INTO g SELECT x, 'group ' || x FROM c;
EOF
cat >query.sql <<'EOF'
SELECT count(*), sum(id), sum(val), sum(length(blob)) FROM t;
SELECT grp, count(*), sum(val) FROM t WHERE grp IN (0, 1, 99) GROUP BY grp ORDER BY grp;
SELECT id FROM t ORDER BY val DESC, id ASC LIMIT 3;
SELECT count(*) FROM t JOIN g USING (grp) WHERE g.label = 'group 42';
SELECT count(*) FROM t WHERE name LIKE 'name-0000123%';
UPDATE t SET val = val + 1 WHERE grp = 5;
DELETE FROM t WHERE id % 10 = 0;
SELECT count(*), sum(val) FROM t;
PRAGMA integrity_check;
EOF
# The answers, from the formulas: id 1..100000, grp = id % 100,
# val = id*7 % 1000, length(blob) = id % 200.
cat >want.out <<'EOF'
100000|5000050000|49950000|9950000
0|1000|450000
1|1000|457000
99|1000|543000
857
1857
2857
1000
10
90000|45001000
ok
EOF

LD_PRELOAD=$LIB SLABKIT_OPTIONS=slabinfo_at_exit=1 timeout 300 sqlite3 db <build.sql >build.out 2>build.err
rc=$?
ok $rc "sqlite3 creates and indexes a 100,000-row table under slabkit"
[ $rc = 0 ] || show build.err
served build.err
ok $? "slabkit served the building sqlite3 (slabinfo at exit shows kmalloc objects)"

LD_PRELOAD=$LIB SLABKIT_OPTIONS=slabinfo_at_exit=1 timeout 300 sqlite3 db <query.sql >query.out 2>query.err
rc=$?
ok $rc "sqlite3 queries, updates and deletes under slabkit"
[ $rc = 0 ] || show query.err
cmp -s want.out query.out
rc=$?
ok $rc "every answer is the known one and integrity_check is ok"
[ $rc = 0 ] || { echo "#   got:"; show query.out; }
served query.err
ok $? "slabkit served the querying sqlite3"
