#!/bin/sh
# Kernel behaviour, not a module bug: an unmap reschedules with munlocks
# still queued in the CPU's mlock batch, and a fault's mlock of the same
# page, queued behind one, counts nothing: a locked VMA's page ends up
# unlocked with the syscalls alone, on one CPU, on 6.1 and 6.12 as well
# (see the .c beside this).  The mix test's control shows it now and then.
#
# usage: docs/repro/kernel-zap-queued-munlock-undercount.sh [KERNEL [SECONDS]]
# exit 0: reproduced
set -u
cd "$(dirname "$0")/../.." || exit 2
make -s userspace || exit 2
gcc -std=c11 -Wall -Wextra -Werror -O2 -static \
	-o build/bin/kernel-zap-queued-munlock-undercount \
	docs/repro/kernel-zap-queued-munlock-undercount.c || exit 2
test/vm/run --kernel "${1:-6.1}" --smp 1 --no-load --timeout 900 -- \
	kernel-zap-queued-munlock-undercount "${2:-120}"
