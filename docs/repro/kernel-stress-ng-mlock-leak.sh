#!/bin/sh
# Kernel behaviour, not a module bug: stress-ng's mlock and mlockmany
# stressors, with the syscalls alone (no library, no ioctl), leave a page of
# stress-ng or of one of its shared libraries behind, on 6.1 and on 6.12.
# It is first on the unevictable list, not mlocked, unmapped: an munlock that
# finds the folio off the LRU clears PG_mlocked while a concurrent mlock of
# another process moves it there.  A later run then mlocks it for good:
# Mlocked stays up after every process is gone.  2026-11-30, one guest per
# kernel, two guests at once: Mlocked up after run 6 on 6.1 (libcrypto.so.3
# page 512) and after run 3 on 6.12 (libcrypto.so.3 page 927); a stranded
# page before that in 2 runs of 28.  Through libmlockfast the same happens,
# at about the same rate, so mlockfast_kselftest_test runs stress-ng from
# private copies that take such pages with them.
#
# usage: docs/repro/kernel-stress-ng-mlock-leak.sh [6.1|6.12] [RUNS]
# exit 0: reproduced (Mlocked stayed up)
set -u
cd "$(dirname "$0")/../.." || exit 2
make -s userspace || exit 2
test/vm/run --kernel "${1:-6.1}" --timeout 1800 -- sh -c '
d=/usr/local/bin/stress-ng.d
for i in $(seq 1 '"${2:-25}"'); do
	$d/ld-linux-x86-64.so.2 --library-path $d $d/stress-ng \
		--mlock 2 --mlockmany 2 --timeout 4 >/dev/null 2>&1
	sleep 1
	echo 1 >/proc/sys/vm/stat_refresh
	m=$(awk "/^Mlocked:/ { print \$2 }" /proc/meminfo)
	u=$(awk "/^Unevictable:/ { print \$2 }" /proc/meminfo)
	echo "# run $i: Mlocked $m kB, Unevictable $u kB, with no process left"
	[ "$m" -gt 0 ] && exit 0
done
exit 1'
