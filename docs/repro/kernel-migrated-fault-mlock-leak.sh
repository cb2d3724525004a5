#!/bin/sh
# Kernel behaviour, not a module bug: a task faults pages into a VMA locked
# on fault on one CPU and munlocks them on another; a third lock and unlock
# then leave the pages mlocked, with the syscalls alone and no stranded page
# (see the .c beside this).  2026-12-02: 6.1 leaked 1 page of 16, 6.12 all
# 16.
# The mix test pins each worker to a CPU so that its leaks can be told from
# this one.
#
# usage: docs/repro/kernel-migrated-fault-mlock-leak.sh [6.1|6.12]
# exit 0: reproduced
set -u
cd "$(dirname "$0")/../.." || exit 2
make -s userspace || exit 2
gcc -std=c11 -Wall -Wextra -Werror -O2 -static \
	-o build/bin/kernel-migrated-fault-mlock-leak \
	docs/repro/kernel-migrated-fault-mlock-leak.c || exit 2
test/vm/run --kernel "${1:-6.1}" --smp 2 --timeout 600 -- \
	kernel-migrated-fault-mlock-leak
