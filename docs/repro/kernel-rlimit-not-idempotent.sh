#!/bin/sh
# Kernel behaviour, not a module bug: mlock(2) under RLIMIT_MEMLOCK is not
# idempotent over pages it cannot lock (see the .c beside this).  This is
# why the fuzzer's stack ranges stop at the stack's top, and the diff test
# rlimit_counts_pages_mlock_cannot_lock checks the module refuses the same.
# 2026-12-06: 6.1 and 7.2: 0, 0, ENOMEM; 6.1: [vvar] at the stack's top in
# 56 of 3,000 execs (a reader of its own maps), 37 of 3,000 (this program).
#
# usage: docs/repro/kernel-rlimit-not-idempotent.sh [SERIES [EXECS]]
# exit 0: reproduced (the third mlock refused)
set -u
cd "$(dirname "$0")/../.." || exit 2
make -s userspace || exit 2
gcc -std=c11 -Wall -Wextra -Werror -O2 -static \
	-o build/bin/kernel-rlimit-not-idempotent \
	docs/repro/kernel-rlimit-not-idempotent.c || exit 2
test/vm/run --kernel "${1:-6.1}" --no-load --timeout 600 -- \
	sh -c "kernel-rlimit-not-idempotent ${2:-3000} | tee /tmp/out; grep -q 'again: Cannot allocate memory' /tmp/out"
