#!/bin/sh
# Module bug (kept out of the suite): the default_mode parameter refuses
# every value, at load time and through sysfs.  mlf_mode_names[] starts at
# index MLF_EAGER (1), so its slot 0 is NULL, and sysfs_match_string()
# stops at the first NULL entry: it never matches.  README documents
# "modprobe mlockfast default_mode=eager".  (mlockfast_module_test only
# checks that legacy is refused, which this makes pass for the wrong reason.)
#
# Reproduced on 6.1 and 6.12 with the module installed until 2026-11-30
# 00:27 UTC; the module installed then has a fix ("Not sysfs_match_string()")
# and passes.
#
# usage: docs/repro/default-mode-param.sh [6.1|6.12]   (exit 0: reproduced)
set -u
cd "$(dirname "$0")/../.." || exit 2
make -s userspace || exit 2
test/vm/run --kernel "${1:-6.1}" --timeout 300 -- sh -c '
p=/sys/module/mlockfast/parameters/default_mode
bad=0
for m in eager deferred reclaim; do
	if echo $m > $p 2>/dev/null; then echo "# sysfs: $m accepted"
	else echo "# sysfs: $m refused"; bad=$((bad + 1)); fi
done
rmmod mlockfast
if modprobe mlockfast default_mode=eager 2>/dev/null; then echo "# modprobe default_mode=eager: loaded"
else echo "# modprobe default_mode=eager: refused"; bad=$((bad + 1)); modprobe mlockfast; fi
[ $bad -gt 0 ]'
