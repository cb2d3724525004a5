#!/bin/sh
# A fixed module bug, kept as a longer check than the suite's one run: the
# fuzzer's racing test, three threads making ioctls over a window that a
# fourth thread munmaps, mprotects and remaps, leaked Mlocked in deferred
# mode now and then: after UNLOCKALL and DRAIN, a page of the test binary
# (also mapped in the window) stayed PG_mlocked on the unevictable list.
#
# History (runs of 90000 or 300000 racing calls): about 1 run in 2 until
# 2026-11-30 03:00 UTC; 1 in 36 after de89510 and efab2f7 (an unlock missed
# its queued moves on other CPUs); 0cb17a7 fixed a 6.1 cause (a kernel mlock
# the walk queued left on a CPU the task moved away from): 6.1 0 of 150, 6.12
# still 4 of 150 (3 of 150 again at 9c1e1a8).  The last cause, traced with
# ftrace callbacks on the kernel's mlock functions: mlf_batch_apply() (of the
# module's own per-CPU batches then, since replaced by runs and the kernel's
# batches; DRAIN and the timer, without mmap_lock) killed each entry before the kernel's
# batch counted its mlock, so an unlock on another CPU saw nothing queued,
# only cleared PG_mlocked, and the mlock still queued then counted a later
# lock twice.  Entries now die after the drain, under the batch lock: 0 of
# 152 runs on 6.12 (0 of 40 on each series with the window widened by a
# 300 us delay, against 23 and 2 of 40 before).  The suite's racing part now
# draws each call's mode at random.
#
# usage: docs/repro/fuzz-racing-deferred-leak.sh [6.12|6.1]
# exit 0: reproduced (some run leaked): the bug is back
set -u
cd "$(dirname "$0")/../.." || exit 2
make -s userspace || exit 2
test/vm/run --kernel "${1:-6.12}" --timeout 1800 -- sh -c '
n=0
for i in $(seq 1 40); do
	MLF_FUZZ_MODE=2 MLF_FUZZ_CALLS=300000 \
		mlockfast_fuzz_test -t threads_racing_munmap_mprotect || n=$((n + 1))
done
echo "# $n of 40 runs leaked"
[ $n -gt 0 ]'
