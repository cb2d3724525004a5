# SPDX-License-Identifier: GPL-2.0
#
#   make                  module for KERNELRELEASE, and the userspace programs
#   make install          DKMS add/build/install for KERNELRELEASE, or for
#                         every installed kernel of a supported series, and
#                         install-lib
#   make install-lib      libmlockfast, its header and .pc under PREFIX
#   make uninstall        DKMS remove (same kernels)
#   make check            the whole test suite in QEMU, every supported kernel
#   make ab               the A/B of test_mlock against the syscall, in QEMU
#   make route-cost       what routing costs and gains, --icount, every series
#   make report           test_mlock and mlock_scale in QEMU on every series:
#                         results/<UTC stamp>-<release>/ (tables, CSVs, plots)
#   make stress           the stress test alone, STRESS_S seconds (default an
#                         hour) per supported kernel, in QEMU
#   make style            checkpatch.pl (from linux-source) on the kernel code
#   make preload-cost     instructions per exec that preloading libmlockfast costs
#   make deb              the Debian packages in build/deb/ (see below)
#   make check-packages   the packages built, installed, tested and purged
#
PACKAGE := mlockfast
VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' dkms.conf)
DKMS_SRC := /usr/src/$(PACKAGE)-$(VERSION)
TOP := $(CURDIR)
BUILD := $(TOP)/build
BIN := $(BUILD)/bin

# The supported kernels' releases, from ./supported-kernels; those installed
# with their headers (a kernel without them is skipped, as DKMS's autoinstall
# skips it: an old kernel left in /lib/modules is not an error).
SUPPORTED_RE := $(shell test/kernel-table regex)
SERIES := $(shell test/kernel-table series)
INSTALLED_KERNELS = $(shell for k in $$(ls /lib/modules 2>/dev/null | grep -E '$(SUPPORTED_RE)' | sort -V); do \
	[ -d /lib/modules/$$k/build ] && echo $$k; done)
# Default: the running kernel if its headers are here, else the newest supported one.
KERNELRELEASE ?= $(shell r=$$(uname -r); if [ -d /lib/modules/$$r/build ]; then echo $$r; else echo $(INSTALLED_KERNELS) | tr ' ' '\n' | tail -n 1; fi)
# make install / uninstall: the one named on the command line, else all.
ifeq ($(origin KERNELRELEASE),command line)
DKMS_KERNELS := $(KERNELRELEASE)
else ifeq ($(origin KERNELRELEASE),environment)
DKMS_KERNELS := $(KERNELRELEASE)
else
DKMS_KERNELS = $(INSTALLED_KERNELS)
# and the other suites' kernels, in the chroots test/vm/deps made (if any)
CHROOT_INSTALL = $(wildcard $(CHROOTS)/*/chroot)
endif

# Userspace: C11, warnings are errors; the selftests static, the tools and
# libmlockfast's programs dynamic (test/vm/run copies their libraries).
CC ?= cc
CFLAGS ?= -O2 -g
USER_CFLAGS := $(CFLAGS) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror \
	-I$(TOP)/include/uapi -isystem $(BUILD)/kselftest
USER_LDFLAGS := -static -pthread

# kselftest_harness.h comes from the linux-source package at build time.
LINUX_SOURCE_TAR := $(lastword $(sort $(wildcard /usr/src/linux-source-6.12.tar.xz /usr/src/linux-source-6.*.tar.xz)))
KSELFTEST_HDRS := $(BUILD)/kselftest/kselftest_harness.h $(BUILD)/kselftest/kselftest.h

TESTS := $(patsubst test/selftests/%.c,$(BIN)/%,$(wildcard test/selftests/*_test.c))
TOOLS := $(patsubst test/%.c,$(BIN)/%,$(wildcard test/*.c)) $(BIN)/mlockfast-run
SCRIPTS := $(patsubst test/guest/%,$(BIN)/%,$(wildcard test/guest/*))
TEST_LIB := $(wildcard test/selftests/lib/*.c)
TEST_LIB_H := $(wildcard test/selftests/lib/*.h)

all: module userspace

module:
	$(MAKE) -C module KVER=$(KERNELRELEASE)

userspace: $(TESTS) $(TOOLS) $(SCRIPTS)

$(KSELFTEST_HDRS):
	@test -n "$(LINUX_SOURCE_TAR)" || { echo "linux-source-6.12 is needed for kselftest_harness.h: run test/vm/deps" >&2; exit 1; }
	mkdir -p $(BUILD)/kselftest
	tar -xJf $(LINUX_SOURCE_TAR) -C $(BUILD)/kselftest --strip-components=4 --wildcards \
		'*/tools/testing/selftests/kselftest_harness.h' '*/tools/testing/selftests/kselftest.h'
	touch $(KSELFTEST_HDRS)

$(BIN)/%_test: test/selftests/%_test.c $(TEST_LIB) $(TEST_LIB_H) include/uapi/linux/mlockfast.h $(KSELFTEST_HDRS)
	@mkdir -p $(BIN)
	$(CC) $(USER_CFLAGS) -Itest/selftests/lib -o $@ $< $(TEST_LIB) $(USER_LDFLAGS)

# Dynamic, for -m preload: they dlopen libmlockfast.so.1 from their own directory.
$(BIN)/%: test/%.c test/mlf_tool.h include/uapi/linux/mlockfast.h
	@mkdir -p $(BIN)
	$(CC) $(USER_CFLAGS) -o $@ $< $(DYN_LDFLAGS) -lm

# No libmlockfast: the command it execs is routed by the kernel.
$(BIN)/mlockfast-run: tools/mlockfast-run.c include/uapi/linux/mlockfast.h
	@mkdir -p $(BIN)
	$(CC) $(USER_CFLAGS) -o $@ $< $(LDFLAGS)

$(BIN)/%: test/guest/%
	@mkdir -p $(BIN)
	install -m 0755 $< $@

# The kernel's own mlock selftests, unmodified, from each series' source
# package; mlockfast_kselftest_test runs the running series' set with and
# without libmlockfast.  Dynamic, for LD_PRELOAD; not our code, so not our
# warning flags.
KST_PROGS := mlock2-tests mlock-random-test on-fault-limit
# Other suites' sources are in their chroots (test/vm/suite-chroot); a series
# the host has too is taken from the host.
CHROOTS ?= $(or $(MLOCKFAST_CHROOTS),/var/cache/mlockfast)
export MLOCKFAST_CHROOTS := $(CHROOTS)
KST_TARS := $(foreach s,$(SERIES),$(firstword $(wildcard /usr/src/linux-source-$(s).tar.xz \
	$(CHROOTS)/*/chroot/usr/src/linux-source-$(s).tar.xz)))
KST_SERIES := $(patsubst linux-source-%.tar.xz,%,$(notdir $(KST_TARS)))
KST_BINS := $(foreach s,$(KST_SERIES),$(addprefix $(BIN)/kernel-selftests/$(s)/,$(KST_PROGS)))
userspace: $(KST_BINS)

define KST_RULE
$(BUILD)/kst/$(1)/.extracted: $(filter %/linux-source-$(1).tar.xz,$(KST_TARS))
	rm -rf $$(@D)
	mkdir -p $$(@D)
	tar -xJf $$< -C $$(@D) --strip-components=1 --wildcards \
		'*/tools/testing/selftests/kselftest.h' '*/tools/testing/selftests/?m/mlock*' \
		'*/tools/testing/selftests/?m/on-fault-limit.c' '*/tools/testing/selftests/?m/vm_util.*' \
		'*/include/uapi/linux/fs.h' '*/include/uapi/linux/mman.h'
	touch $$@

$(BIN)/kernel-selftests/$(1)/%: $(BUILD)/kst/$(1)/.extracted
	@mkdir -p $$(@D)
	$$(CC) -O2 -g -Wall -I$(BUILD)/kst/$(1)/include/uapi \
		-I$(BUILD)/kst/$(1)/tools/testing/selftests -o $$@ \
		$$(wildcard $(BUILD)/kst/$(1)/tools/testing/selftests/?m/$$*.c) \
		$$(wildcard $(BUILD)/kst/$(1)/tools/testing/selftests/?m/vm_util.c) -lcap
endef
$(foreach s,$(KST_SERIES),$(eval $(call KST_RULE,$(s))))
.SECONDARY: $(foreach s,$(KST_SERIES),$(BUILD)/kst/$(s)/.extracted)

# Debian's stress-ng, whose mlock stressors the same test runs, with its
# loader and libraries beside it: the test runs private copies of them all.
userspace: $(BIN)/stress-ng.d/stress-ng
$(BIN)/stress-ng.d/stress-ng:
	@test -x /usr/bin/stress-ng || { echo "stress-ng is needed: run test/vm/deps" >&2; exit 1; }
	rm -rf $(@D)
	mkdir -p $(@D)
	cp -L $$(ldd /usr/bin/stress-ng | awk '{ for (i = 1; i <= NF; i++) if ($$i ~ /^\//) print $$i }') $(@D)/
	install -m 0755 /usr/bin/stress-ng $@

# ---- libmlockfast: the preload library and its API (lib/) ----
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
LIB_SONAME := libmlockfast.so.1
LIB_SRC := $(wildcard lib/*.c)
LIB_H := lib/internal.h lib/include/mlockfast.h include/uapi/linux/mlockfast.h
# Dynamic programs find libmlockfast.so.1 next to them (build/bin, the guest's
# /usr/local/bin); packaged ones (TOOL_RPATH=) in the system's library path.
TOOL_RPATH ?= -Wl,-rpath,'$$ORIGIN'
DYN_LDFLAGS = -pthread -ldl $(TOOL_RPATH) $(LDFLAGS)
DYN_TESTS := $(BIN)/mlockfast_preload_test $(BIN)/mlockfast_lib_test
LIB_TARGETS := $(BIN)/$(LIB_SONAME) $(BIN)/libmlockfast.so $(BUILD)/mlockfast.pc \
	$(BIN)/mlf-preload-calls $(BIN)/mlf-fork-lock $(BIN)/mlf-lock-patterns $(BIN)/mlf-real-libs $(DYN_TESTS) \
	$(BIN)/mlf-small-calls $(BIN)/mlf-exec-cost $(BIN)/mlf-nop
userspace: $(LIB_TARGETS)

# What the packages ship, without the tests (no linux-source needed).
libmlockfast: $(BIN)/$(LIB_SONAME) $(BIN)/libmlockfast.so $(BUILD)/mlockfast.pc
tools: $(TOOLS)

# What every process it is preloaded into pays at exec, measured under
# --icount: two LOAD segments, not four (-z noseparate-code), save the
# loader an mmap and page faults (~55k instructions); lazy binding, even
# where LDFLAGS ask for -z now, saves resolving every symbol (~25k).
$(BIN)/$(LIB_SONAME): $(LIB_SRC) $(LIB_H) Makefile
	@mkdir -p $(BIN)
	$(CC) $(USER_CFLAGS) -fPIC -fvisibility=hidden -shared -Wl,-soname,$(LIB_SONAME) \
		-Wl,-z,defs -Wl,-z,noseparate-code -o $@ $(LIB_SRC) -pthread -ldl $(LDFLAGS) \
		-Wl,-z,lazy

$(BIN)/libmlockfast.so: $(BIN)/$(LIB_SONAME)
	ln -sf $(LIB_SONAME) $@

$(BUILD)/mlockfast.pc: lib/mlockfast.pc.in dkms.conf
	@mkdir -p $(BUILD)
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|; s|@VERSION@|$(VERSION)|' $< >$@

# The in-guest programs that call mlock & co. with and without the library.
$(BIN)/mlf-preload-calls: test/preload/calls.c $(TEST_LIB) $(TEST_LIB_H) include/uapi/linux/mlockfast.h
	@mkdir -p $(BIN)
	$(CC) $(USER_CFLAGS) -Itest/selftests/lib -o $@ $< $(TEST_LIB) $(DYN_LDFLAGS)

# Dynamic, so that LD_PRELOAD routes its children's calls.
$(BIN)/mlf-fork-lock: test/preload/fork-lock.c test/preload/timing.h include/uapi/linux/mlockfast.h
	@mkdir -p $(BIN)
	$(CC) $(USER_CFLAGS) -o $@ $< $(DYN_LDFLAGS)

$(BIN)/mlf-lock-patterns: test/preload/lock-patterns.c test/preload/timing.h
	@mkdir -p $(BIN)
	$(CC) $(USER_CFLAGS) -o $@ $< $(DYN_LDFLAGS)

# Benchmarks of routing and preloading (test/vm/route-cost, the report):
# dynamic, as a program that could be preloaded is; mlf-exec-cost static.
$(BIN)/mlf-small-calls: test/preload/small-calls.c test/preload/timing.h
	@mkdir -p $(BIN)
	$(CC) $(USER_CFLAGS) -o $@ $< $(DYN_LDFLAGS)

$(BIN)/mlf-nop: test/preload/nop.c
	@mkdir -p $(BIN)
	$(CC) $(USER_CFLAGS) -o $@ $< $(DYN_LDFLAGS)

$(BIN)/mlf-exec-cost: test/preload/exec-cost.c
	@mkdir -p $(BIN)
	$(CC) $(USER_CFLAGS) -static -o $@ $<

# Debian's libsodium and libgcrypt as they are (see the source for why the
# soname).
$(BIN)/mlf-real-libs: test/preload/real-libs.c test/preload/timing.h
	@mkdir -p $(BIN)
	$(CC) $(USER_CFLAGS) -o $@ $< -l:libsodium.so.23 -lgcrypt $(DYN_LDFLAGS)

$(BIN)/mlockfast_preload_test: test/selftests/mlockfast_preload_test.c $(TEST_LIB) $(TEST_LIB_H) \
		include/uapi/linux/mlockfast.h $(KSELFTEST_HDRS)
	@mkdir -p $(BIN)
	$(CC) $(USER_CFLAGS) -Itest/selftests/lib -o $@ $< $(TEST_LIB) $(DYN_LDFLAGS)

# Linked as a user links it: its own mlock calls are routed too.
$(BIN)/mlockfast_lib_test: test/selftests/mlockfast_lib_test.c $(BIN)/libmlockfast.so $(TEST_LIB) \
		$(TEST_LIB_H) $(LIB_H) $(KSELFTEST_HDRS)
	@mkdir -p $(BIN)
	$(CC) $(USER_CFLAGS) -Ilib/include -Itest/selftests/lib -o $@ $< $(TEST_LIB) \
		-L$(BIN) -lmlockfast $(DYN_LDFLAGS)

# What preloading the library costs a program that never calls mlock: a
# do-nothing dynamic program exec'd 300 times in an --icount guest (ns are
# instructions), without and with LD_PRELOAD.  The installed module, or
# MLOCKFAST_KO=...; the second pair runs with the module unloaded.
PRELOAD_COST_KERNEL ?= 6.1
preload-cost: $(BIN)/$(LIB_SONAME) test/preload/exec-cost.c
	@mkdir -p $(BUILD)/preload-cost
	$(CC) $(USER_CFLAGS) -static -o $(BUILD)/preload-cost/mlf-exec-cost test/preload/exec-cost.c
	printf 'int main(void) { return 0; }\n' | $(CC) -O2 -x c -o $(BUILD)/preload-cost/nop -
	test/vm/run --kernel $(PRELOAD_COST_KERNEL) --icount --add $(BUILD)/preload-cost -- sh -c '\
		cd /extra/preload-cost && L=/usr/local/bin/$(LIB_SONAME) && \
		./mlf-exec-cost 300 ./nop && LD_PRELOAD=$$L ./mlf-exec-cost 300 ./nop && \
		rmmod mlockfast && echo "# without the module:" && \
		./mlf-exec-cost 300 ./nop && LD_PRELOAD=$$L ./mlf-exec-cost 300 ./nop'

install-lib: $(BIN)/$(LIB_SONAME) $(BUILD)/mlockfast.pc
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR)/linux
	install -m 0755 $(BIN)/$(LIB_SONAME) $(DESTDIR)$(LIBDIR)/
	ln -sf $(LIB_SONAME) $(DESTDIR)$(LIBDIR)/libmlockfast.so
	install -m 0644 lib/include/mlockfast.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 0644 include/uapi/linux/mlockfast.h $(DESTDIR)$(INCLUDEDIR)/linux/
	install -m 0644 $(BUILD)/mlockfast.pc $(DESTDIR)$(LIBDIR)/pkgconfig/
	-test -n "$(DESTDIR)" || ldconfig

uninstall-lib:
	rm -f $(DESTDIR)$(LIBDIR)/$(LIB_SONAME) $(DESTDIR)$(LIBDIR)/libmlockfast.so \
		$(DESTDIR)$(INCLUDEDIR)/mlockfast.h $(DESTDIR)$(INCLUDEDIR)/linux/mlockfast.h \
		$(DESTDIR)$(LIBDIR)/pkgconfig/mlockfast.pc
	-test -n "$(DESTDIR)" || ldconfig
# ---- end libmlockfast ----

# ---- Debian packages (debian/, test/pkg/) ----
#   make deb              mlockfast-dkms, libmlockfast1, libmlockfast-dev and
#                         mlockfast-tools in build/deb/, lintian-clean
#   make check-packages   build them, install them with apt, test them (DKMS
#                         on every supported kernel, a guest of 6.1 and of
#                         6.12 with the packaged module, tools and library),
#                         purge them and check that nothing is left
DEB_DIR := $(BUILD)/deb
deb:
	test/pkg/deps
	test/pkg/build-debs $(DEB_DIR)

check-packages: deb userspace
	test/pkg/check-packages $(DEB_DIR) '$(SUPPORTED_RE)'
# ---- end Debian packages ----

# DKMS builds from a clean copy of exactly what the module needs.
dkms-source:
	rm -rf $(DKMS_SRC)
	mkdir -p $(DKMS_SRC)/module $(DKMS_SRC)/include/uapi/linux
	cp dkms.conf $(DKMS_SRC)/
	cp module/Kbuild module/Makefile module/*.c module/*.h $(DKMS_SRC)/module/
	cp include/uapi/linux/mlockfast.h $(DKMS_SRC)/include/uapi/linux/

install: dkms-source install-lib
	@test -n "$(strip $(DKMS_KERNELS))$(wildcard $(CHROOTS)/*/chroot)" || { echo "no supported kernel (./supported-kernels) is installed: run test/vm/deps" >&2; exit 1; }
	-dkms remove -m $(PACKAGE) -v $(VERSION) --all >/dev/null 2>&1
	dkms add -m $(PACKAGE) -v $(VERSION)
	set -e; for k in $(DKMS_KERNELS); do \
		dkms build -m $(PACKAGE) -v $(VERSION) -k $$k; \
		dkms install -m $(PACKAGE) -v $(VERSION) -k $$k --force; \
	done
	dkms status -m $(PACKAGE)
	@# other suites' kernels: DKMS in their chroots, as on hosts of those suites
	$(if $(CHROOT_INSTALL),test/vm/chroot-dkms-install $(DKMS_SRC))

uninstall: uninstall-lib
	set -e; for k in $(DKMS_KERNELS); do \
		dkms remove -m $(PACKAGE) -v $(VERSION) -k $$k || true; \
	done
	-dkms status -m $(PACKAGE)

deps:
	test/vm/deps

check: deps
	$(MAKE) userspace
	$(MAKE) deb
	$(MAKE) install
	test/check --packages $(DEB_DIR) '$(SUPPORTED_RE)'

# The main job: test_mlock's A/B in a guest of the default kernel, all host
# CPUs as vCPUs.  Legacy mode (pre-4.15 mlock: a drain queued and waited for
# on every CPU) costs ~4.5 ms a pair under TCG, so it runs a smaller count.
# routed: the plain syscalls of a process that chose routing, with
# route=group and the device in a group nobody holds (no one else routed).
AB_KERNEL ?= 6.12
ab: deps
	$(MAKE) userspace
	$(MAKE) install
	test/vm/run --kernel $(AB_KERNEL) --timeout 1200 -- sh -c '\
		chgrp 4242 /dev/mlockfast && echo group >/sys/module/mlockfast/parameters/route && \
		test_mlock -c 100000 -m syscall,ioctl,eager,deferred,reclaim,preload,routed -r 5 && \
		echo "# the 2011 without-patch column, at 2000 pairs:" && \
		test_mlock -c 2000 -m syscall,legacy,ioctl -w 0'

route-cost: deps
	$(MAKE) userspace
	$(MAKE) install
	test/vm/route-cost

# The suite runs the stress for 60 s a kernel; this runs it for as long as
# you like.  STRESS_S=36000 make stress: ten hours on each.
STRESS_S ?= 3600
stress: deps
	$(MAKE) userspace
	$(MAKE) install
	set -e; for k in $(SERIES); do \
		test/vm/run --kernel $$k --timeout $$(($(STRESS_S) + 900)) -- \
			env MLF_STRESS_S=$(STRESS_S) mlockfast_concurrency_test \
			-t threads_and_processes; \
	done

# Timing, scaling and --icount instruction counts on every supported series;
# about 6-8 minutes on 2 CPUs under TCG.
report: deps
	$(MAKE) userspace
	$(MAKE) install
	test/report

# LINUX_VERSION_CODE (and the CONSTANT_COMPARISON it trips) is ignored: the rule
# is for in-tree code; compat.h is where an out-of-tree module must test it.
style:
	@mkdir -p $(BUILD)/checkpatch
	@test -f $(BUILD)/checkpatch/scripts/checkpatch.pl || tar -xJf $(LINUX_SOURCE_TAR) -C $(BUILD)/checkpatch \
		--strip-components=1 --wildcards '*/scripts/checkpatch.pl' '*/scripts/spelling.txt' \
		'*/scripts/const_structs.checkpatch'
	$(BUILD)/checkpatch/scripts/checkpatch.pl --no-tree --strict --show-types \
		--ignore FILE_PATH_CHANGES,SPDX_LICENSE_TAG,LINUX_VERSION_CODE,CONSTANT_COMPARISON -f \
		module/*.c module/*.h include/uapi/linux/mlockfast.h

# W=1 build of the module for every installed supported kernel.
build-all:
	set -e; for k in $(INSTALLED_KERNELS); do $(MAKE) -C module KVER=$$k W=1; $(MAKE) -C module KVER=$$k clean >/dev/null; done
	@# other suites' kernels, in their chroots (their compilers), from a copy of the tree
	set -e; for s in $$(test/kernel-table where | awk '$$5 != "host" && !seen[$$5]++ { print $$5 }'); do \
		d=$(CHROOTS)/$$s/chroot/root/mlockfast-build; rm -rf $$d; mkdir -p $$d; cp -a module include $$d/; \
		for k in $$(test/vm/suite-chroot $$s); do \
			test/vm/suite-chroot $$s -- sh -c "cd /root/mlockfast-build && make -C module W=1 KVER=$$k && make -C module KVER=$$k clean >/dev/null"; \
		done; \
	done

clean:
	-$(MAKE) -C module KVER=$(KERNELRELEASE) clean
	rm -rf $(BIN) $(BUILD)/deb $(BUILD)/pkg-test $(BUILD)/preload-cost $(BUILD)/mlockfast.pc $(BUILD)/kselftest $(BUILD)/kst $(BUILD)/checkpatch $(BUILD)/logs

.PHONY: route-cost all module userspace libmlockfast tools preload-cost deb check-packages dkms-source install uninstall install-lib uninstall-lib deps check ab report stress style build-all clean
