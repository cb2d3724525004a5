#!/bin/sh
# Kernel behaviour, not a module bug: on 7.2 an unmap's munlocks wait in the
# CPU's mlock batch, and a fault's mlock of the same page queued behind one
# counts nothing: a locked VMA's pages end up unlocked, with the syscalls
# alone, on one CPU (see the .c beside this).  2026-12-02: 6.12 0 of 16
# pages unlocked, 7.2 16 of 16.
# The mix test runs the same check (kernel_unmap_undercounts()) and compares
# its undercounts with the control's where it holds.
#
# usage: docs/repro/kernel-unmap-queued-munlock-undercount.sh [7.2|6.12]
# exit 0: reproduced
set -u
cd "$(dirname "$0")/../.." || exit 2
make -s userspace || exit 2
gcc -std=c11 -Wall -Wextra -Werror -O2 -static \
	-o build/bin/kernel-unmap-queued-munlock-undercount \
	docs/repro/kernel-unmap-queued-munlock-undercount.c || exit 2
test/vm/run --kernel "${1:-7.2}" --timeout 600 -- \
	kernel-unmap-queued-munlock-undercount
