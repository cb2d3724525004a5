#!/bin/sh
# Open module bug (kept out of the suite), now seen on 6.12 only: the
# fuzzer's racing test, three threads making ioctls over a window that a
# fourth thread munmaps, mprotects and remaps, leaks Mlocked in deferred
# mode now and then: after UNLOCKALL and DRAIN, a page of the test binary's
# text (also mapped in the window) stays PG_mlocked on the unevictable list.
#
# History (90000 racing calls a run): about 1 run in 2 until 2026-11-30
# 03:00 UTC; 1 in 36 after de89510 and efab2f7 (an unlock missed its queued
# moves on other CPUs).  0cb17a7 fixed the cause a trace then showed on 6.1:
# a kernel mlock the walk queued was left on the CPU the task moved away
# from, and counted a later lock twice.  Since, on 6.1: 0 of 150 runs in
# deferred mode, 0 of 150 with random modes, 0 of 150 with the syscalls
# alone.  On 6.12: 4 of 150 in deferred mode, 0 of 150 with the syscalls
# alone.  A trace of a 6.12 leak (a debug build tracing each step on file
# pages) shows the page always on the unevictable list, every module step
# going through the kernel's own mlock_folio()/munlock_folio(), and one
# count more than the locks held appearing between two of them: the next
# step is to trace the kernel's side (kprobes on mlock_folio and
# munlock_folio, with the caller) in such a run.  The suite runs the racing
# fuzzer in eager mode.
#
# usage: docs/repro/fuzz-racing-deferred-leak.sh [6.12|6.1]
# exit 0: reproduced (some run leaked)
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
