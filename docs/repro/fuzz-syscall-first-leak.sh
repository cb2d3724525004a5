#!/bin/sh
# Module bug (kept out of the suite): with mlock2(2) first and the same
# MLOCKFAST_IOC_LOCK right after (deferred or reclaim mode), a page-cache
# page (tmpfs: here the test binary's own text, mapped a second time in the
# fuzz window) is left PG_mlocked on the unevictable list after munlockall
# and DRAIN: Mlocked and Unevictable stay up, also after the process exits
# (the page cache page keeps it).  The syscalls alone (MLF_FUZZ_SYSCALLS_ONLY)
# and eager mode never leak; the ioctl-first order (the suite's) has not.
#
#   1. the recorded run: deterministic with defer_ms out of the way, with
#      the module installed until 2026-11-30 00:27 UTC (6.1 and 6.12); the
#      leaking call is #2990, a LOCK(deferred|MLOCK_ONFAULT) of a range that
#      starts in an unlocked private file VMA and ends in a hole (ENOMEM),
#      right after mlock2() of the same range (MLF_FUZZ_TRACE=2990 shows the
#      VMAs and kpageflags before and after).  Later module versions take
#      other paths for the same calls: it may no longer leak there;
#   2. fresh seeds: about half of the runs leak (3 of 6 with the module of
#      00:27 on 6.1, 5 of 6 with the one before on 6.12).
#
# Status (00:45 UTC): since the unlock fix (a7214cc) the recorded run no longer
# leaks; fresh seeds still do in deferred mode (4 of 8 on 6.1), not in
# reclaim mode (0 of 4).  The cause left: a queued move whose lock the
# syscall's munlock() undid, then mlock() redid, is paid on top of the
# kernel's count (no notifier hears munlock(); see README, known limits).
#
# usage: docs/repro/fuzz-syscall-first-leak.sh [6.1|6.12]
# exit 0: reproduced (the recorded run or any fresh seed leaked)
set -u
cd "$(dirname "$0")/../.." || exit 2
make -s userspace || exit 2
test/vm/run --kernel "${1:-6.1}" --timeout 900 -- sh -c '
ms=$(cat /sys/module/mlockfast/parameters/defer_ms)
echo 1000000 > /sys/module/mlockfast/parameters/defer_ms
n=0
MLF_SEED=0xf9cc72514f41bf7a MLF_FUZZ_MODE=2 MLF_FUZZ_ORDER=-1 MLF_FUZZ_STOP=2991 \
	mlockfast_fuzz_test -t single_thread_against_syscalls || n=1
echo "# the recorded run: $([ $n = 1 ] && echo leaked || echo did not leak)"
echo $ms > /sys/module/mlockfast/parameters/defer_ms
for i in 1 2 3 4 5 6; do
	MLF_FUZZ_MODE=2 MLF_FUZZ_ORDER=-1 MLF_FUZZ_CALLS=100000 \
		mlockfast_fuzz_test -t single_thread_against_syscalls || n=$((n + 1))
done
echo "# leaking runs in all: $n"
[ $n -gt 0 ]'
