#!/bin/sh
# harness.t — the kernel's radix-tree test harness on slabkit, make test's
# subset (tests/kernel/harness/run --quick; make kernel-tests runs all of
# it): the xarray, IDA/IDR and multi-order suites under the harness's own
# ASan and UBSan, and the xarray suite under debug=FZP, kfence=1 and
# leak_check=1.  Skipped, saying why, where linux-source-6.1 cannot be
# installed.
exec "$(dirname "$0")/harness/run" --quick
