#!/bin/sh
# /init of the test guest (busybox ash). test/vm/run puts /vm.conf (LOAD,
# MODPARAMS, QUIET) and /cmd (the command) beside it. The command's exit status
# leaves through QEMU's isa-debug-exit port and, in full, on the console.
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root

mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t debugfs debugfs /sys/kernel/debug
mount -t tmpfs tmp /tmp
echo "vm/init: booted $(uname -r)"

# A setup failure: say why in one line, stop without an exit status.
fail() {
    echo "vm/init: FAIL: $*"
    poweroff -f
}

# shellcheck source=/dev/null # written by test/vm/run
. /vm.conf

[ "$(cat /proc/sys/kernel/panic_on_warn)" = 1 ] || fail "panic_on_warn is not 1"

if [ "$LOAD" = 1 ]; then
    # Not insmod: it exits 0 on a .ko.xz it cannot read. Trust /proc/modules.
    # shellcheck disable=SC2086 # MODPARAMS is a list of words
    out=$(modprobe mlockfast $MODPARAMS 2>&1) ||
        fail "modprobe mlockfast${MODPARAMS:+ $MODPARAMS}: $(printf %s "$out" | tr '\n' ' ')"
    grep -q '^mlockfast ' /proc/modules || fail "mlockfast is not in /proc/modules after modprobe"
fi

# An --icount guest counts every instruction the vCPU runs, the test's and
# anyone else's: wait for the boot's leftover work to end first (6.12 runs
# its crypto self-tests in a kthread for ~0.7 s of guest time after /init
# starts).  Quiet: 0.2 s of guest time at least 90% idle.
if [ "$QUIET" = 1 ]; then
    i=0
    while :; do
        a=$(cat /proc/uptime)
        sleep 0.2
        b=$(cat /proc/uptime)
        echo "$a $b" | awk '{ exit !($4 - $2 >= 0.9 * ($3 - $1)) }' && break
        i=$((i + 1))
        [ $i -lt 100 ] || fail "the guest is still busy after 20 s: $(cat /proc/loadavg)"
    done
    echo "vm/init: quiet after $(cut -d' ' -f1 /proc/uptime) s of uptime"
fi

cd /extra && sh /cmd </dev/null
rc=$?
# The port carries 7 bits (QEMU exits with (value << 1) | 1); the console line
# carries the whole status, and the host checks one against the other.
# Kernels without CONFIG_DEVPORT (the cloud flavour) have no /dev/port: the
# console line alone carries the status, and a power-off ends QEMU.
echo "vm/init: exit $rc"
if [ ! -c /dev/port ]; then
    echo "vm/init: no /dev/port: the status goes by the console only"
    poweroff -f
fi
printf %b "\\0$(printf %o $((rc & 127)))" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
fail "isa-debug-exit did not stop QEMU"
