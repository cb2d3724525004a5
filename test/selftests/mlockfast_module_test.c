// SPDX-License-Identifier: GPL-2.0
/*
 * Loading and unloading: refused while open, reloadable (100 times, with
 * locks left queued each time), parameters honoured, and a missing kernel
 * symbol fails the load with one clear line.  Runs last:
 * it leaves the module loaded with its default parameters.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mlf_test.h"

static int loaded(void)
{
	char *mods = read_file("/proc/modules");
	int yes = mods && strstr(mods, "mlockfast ") != NULL;

	free(mods);
	return yes;
}

TEST(rmmod_refused_while_open)
{
	int fd = open(MLOCKFAST_DEVICE, O_RDWR);

	ASSERT_LE(0, fd);
	EXPECT_NE(0, run("rmmod mlockfast 2>/dev/null"));
	EXPECT_TRUE(loaded());
	close(fd);
	EXPECT_EQ(0, run("rmmod mlockfast"));
	EXPECT_FALSE(loaded());
	EXPECT_EQ(0, run("modprobe mlockfast"));
	EXPECT_TRUE(loaded());
}

TEST(load_unload_load)
{
	for (int i = 0; i < 5; i++) {
		ASSERT_EQ(0, run("rmmod mlockfast"));
		ASSERT_FALSE(loaded());
		ASSERT_EQ(0, run("modprobe mlockfast"));
		ASSERT_TRUE(loaded());
	}
	EXPECT_EQ(0, access(MLOCKFAST_DEVICE, F_OK));
}

/*
 * A child that locks anon and shared (memfd) pages through the device in
 * @mode, leaves moves queued and a quarter unlocked, closes the device,
 * tells @ready, and after @go unlocks the rest with the syscall, unmaps and
 * exits: once the module is gone, these reach the kernel's own paths only.
 */
static void traffic_child(unsigned int mode, int ready, int go)
{
	const size_t len = 256 << 10;
	int memfd = memfd_create("mlf-cycle", 0), fd, ok;
	char *p = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct mlockfast_range r = { .size = sizeof(r), .flags = mode };
	char c;

	if (memfd < 0 || ftruncate(memfd, len) || p == MAP_FAILED ||
	    mmap(p + len, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		 memfd, 0) != p + len)
		_exit(10);
	memset(p, 1, 2 * len);
	fd = open(MLOCKFAST_DEVICE, O_RDWR);
	r.addr = (unsigned long)p;
	r.len = 2 * len;
	ok = fd >= 0 && !ioctl(fd, MLOCKFAST_IOC_LOCK, &r);
	r.addr += len / 2;
	r.len = len / 2;
	r.flags = 0;
	ok = ok && !ioctl(fd, MLOCKFAST_IOC_UNLOCK, &r);
	close(fd);
	if (!ok || write(ready, "r", 1) != 1 || read(go, &c, 1) != 1)
		_exit(11);
	_exit(munlock(p, 2 * len) || munmap(p, 2 * len) ? 12 : 0);
}

/*
 * One unload with a user living on: a process that locked through the
 * device keeps its state in the module after it closes the device.
 * Unloading must take its probes away and pay the queued moves;
 * the process's munlock, munmap and exit afterwards must not call into the
 * gone module.  Then the module is loaded again.  0, or what failed.
 */
static const char *unload_under(unsigned int mode)
{
	int ready[2], go[2], st = -1;
	const char *why = NULL;
	char c = 0;
	pid_t pid;

	if (pipe(ready) || pipe(go))
		return "pipe";
	pid = fork();
	if (pid == 0)
		traffic_child(mode, ready[1], go[0]);
	if (pid < 0 || read(ready[0], &c, 1) != 1)
		why = "the child could not lock";
	else if (run("rmmod mlockfast") || loaded())
		why = "rmmod";
	if (pid > 0 && (write(go[1], "g", 1) != 1 || waitpid(pid, &st, 0) != pid ||
			!WIFEXITED(st) || WEXITSTATUS(st)))
		why = why ? why : "the child failed after the unload";
	if (!loaded() && (run("modprobe mlockfast") || !loaded()))
		why = why ? why : "modprobe";
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
	return why;
}

TEST(unload_while_a_user_lives_on)
{
	long ml0 = meminfo_kb("Mlocked"), ue0 = meminfo_kb("Unevictable");
	const char *why = unload_under(MLOCKFAST_MODE_DEFERRED);

	EXPECT_EQ(NULL, why) TH_LOG("%s", why);
	EXPECT_EQ(ml0, meminfo_kb("Mlocked"));
	EXPECT_EQ(ue0, meminfo_kb("Unevictable"));
	EXPECT_TRUE(loaded());
}

FIXTURE(cycles) {};
FIXTURE_SETUP(cycles) {}
FIXTURE_TEARDOWN(cycles) {}

/*
 * 100 unloads, each with such a user (every mode in turn), then a reload.
 * Nothing may leak, strand or warn (the guest panics on a warning).
 */
TEST_F_TIMEOUT(cycles, hundred_load_unload_cycles_with_traffic, 900)
{
	static const unsigned int modes[] = {
		MLOCKFAST_MODE_EAGER, MLOCKFAST_MODE_DEFERRED,
		MLOCKFAST_MODE_RECLAIM,
	};
	long ml0 = meminfo_kb("Mlocked"), ue0 = meminfo_kb("Unevictable");
	long stranded0 = vmstat("unevictable_pgs_stranded");

	for (int i = 0; i < 100; i++) {
		const char *why = unload_under(modes[i % 3]);

		ASSERT_EQ(NULL, why) TH_LOG("cycle %d: %s", i, why);
	}
	EXPECT_EQ(ml0, meminfo_kb("Mlocked"));
	EXPECT_EQ(ue0, meminfo_kb("Unevictable"));
	EXPECT_EQ(stranded0, vmstat("unevictable_pgs_stranded"));
	EXPECT_TRUE(loaded());
}

/* default_mode takes each mode but legacy, at load time and through sysfs. */
TEST(default_mode_parameter)
{
	static const char * const modes[] = { "eager", "deferred", "reclaim" };
	const char *p = "/sys/module/mlockfast/parameters/default_mode";
	char want[16], *v;

	ASSERT_EQ(0, run("rmmod mlockfast"));
	ASSERT_EQ(0, run("modprobe mlockfast default_mode=eager"));
	v = read_file(p);
	EXPECT_TRUE(v && !strcmp(v, "eager\n")) TH_LOG("default_mode: %s", v);
	free(v);
	for (int i = 2; i >= 0; i--) {
		EXPECT_EQ(0, run("echo %s > %s", modes[i], p));
		v = read_file(p);
		snprintf(want, sizeof(want), "%s\n", modes[i]);
		EXPECT_TRUE(v && !strcmp(v, want)) TH_LOG("default_mode: %s", v);
		free(v);
	}
	EXPECT_NE(0, run("echo legacy > %s 2>/dev/null", p));
	EXPECT_NE(0, run("echo bogus > %s 2>/dev/null", p));
	v = read_file(p);
	EXPECT_TRUE(v && !strcmp(v, "eager\n")) TH_LOG("default_mode: %s", v);
	free(v);
	ASSERT_EQ(0, run("rmmod mlockfast"));
	ASSERT_EQ(0, run("modprobe mlockfast"));
}

TEST(dev_mode_parameter)
{
	struct stat st;

	ASSERT_EQ(0, run("rmmod mlockfast"));
	ASSERT_EQ(0, run("modprobe mlockfast dev_mode=0640"));
	ASSERT_EQ(0, stat(MLOCKFAST_DEVICE, &st));
	EXPECT_EQ(0640, st.st_mode & 07777);
	ASSERT_EQ(0, run("rmmod mlockfast"));
	ASSERT_EQ(0, run("modprobe mlockfast"));
	ASSERT_EQ(0, stat(MLOCKFAST_DEVICE, &st));
	EXPECT_EQ(0600, st.st_mode & 07777);
}

TEST(missing_symbol_fails_load_cleanly)
{
	const char *line =
		"mlockfast: cannot load: kernel symbol mlf_no_such_symbol not found";

	ASSERT_EQ(0, run("rmmod mlockfast"));
	dmesg_mark();
	EXPECT_NE(0, run("modprobe mlockfast debug_require_symbol=mlf_no_such_symbol 2>/dev/null"));
	EXPECT_FALSE(loaded());
	/*
	 * One line per load attempt, and nothing else from the module
	 * (busybox modprobe tries finit_module, then init_module).
	 */
	EXPECT_LE(1, dmesg_count(line));
	EXPECT_EQ(dmesg_count(line), dmesg_count("mlockfast"));
	EXPECT_EQ(0, dmesg_count("WARNING:"));
	EXPECT_EQ(0, dmesg_count("BUG:"));
	ASSERT_EQ(0, run("modprobe mlockfast"));
	EXPECT_TRUE(loaded());
}

/*
 * A kernel outside supported-kernels is declined at load as DKMS declines
 * it, even where its series' code would build: the release checked is the
 * debug_release parameter's (the guest runs a supported one).  One dmesg
 * line per attempt naming the release; a release of the table loads.
 */
TEST(untested_kernel_refused_at_load)
{
	static const char *const declined[] = {
		"7.2.12+deb13-amd64",		/* trixie-backports' 7.2 */
		"7.2.13+deb14-rt-amd64",	/* sid's rt 7.2 */
		"6.12.118+deb12-amd64-unsigned",
		"6.1.0--amd64",			/* no ABI number */
		"7.4.1+deb13-amd64",		/* the next series */
	};
	char cmd[256], line[200];

	ASSERT_EQ(0, run("rmmod mlockfast"));
	for (size_t i = 0; i < sizeof(declined) / sizeof(declined[0]); i++) {
		snprintf(cmd, sizeof(cmd),
			 "modprobe mlockfast debug_release=%s 2>/dev/null", declined[i]);
		snprintf(line, sizeof(line),
			 "mlockfast: cannot load: kernel %s is not one mlockfast supports",
			 declined[i]);
		dmesg_mark();
		EXPECT_NE(0, run(cmd)) TH_LOG("%s loaded", declined[i]);
		EXPECT_FALSE(loaded());
		EXPECT_LE(1, dmesg_count(line)) TH_LOG("no line for %s", declined[i]);
		EXPECT_EQ(dmesg_count(line), dmesg_count("mlockfast:"));
		EXPECT_EQ(0, dmesg_count("WARNING:"));
	}
	ASSERT_EQ(0, run("modprobe mlockfast debug_release=6.12.119+deb13-cloud-amd64"));
	EXPECT_TRUE(loaded());
	ASSERT_EQ(0, run("rmmod mlockfast"));
	ASSERT_EQ(0, run("modprobe mlockfast"));
	EXPECT_TRUE(loaded());
}

TEST(bad_parameters_refused)
{
	ASSERT_EQ(0, run("rmmod mlockfast"));
	EXPECT_NE(0, run("modprobe mlockfast default_mode=legacy 2>/dev/null"));
	EXPECT_NE(0, run("modprobe mlockfast defer_ms=x 2>/dev/null"));
	ASSERT_EQ(0, run("modprobe mlockfast"));
	EXPECT_TRUE(loaded());
}

/*
 * The module's own maple walk (raw_maple.h reads the tree's nodes directly)
 * against the kernel's mas_walk(), mas_prev() and mas_next(), through the
 * debug_selftest parameter: on this process with some 900 VMAs (pages of
 * alternating protection, which cannot merge, and gaps), whose tree has
 * inner nodes and leaf edges; then at load, on modprobe's own mm.
 */
TEST(maple_walk_matches_the_kernels)
{
	const size_t n = 1000, page = 4096;
	char *m = mmap(NULL, n * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	ASSERT_NE(MAP_FAILED, m);
	for (size_t i = 0; i < n; i += 2)
		ASSERT_EQ(0, mprotect(m + i * page, page, PROT_READ | PROT_WRITE));
	for (size_t i = 3; i < n; i += 10)
		ASSERT_EQ(0, munmap(m + i * page, page));
	dmesg_mark();
	EXPECT_EQ(0, write_file_long("/sys/module/mlockfast/parameters/debug_selftest", 1));
	EXPECT_EQ(1, dmesg_count(" differ"));
	EXPECT_EQ(1, dmesg_count(" walks, 0 differ"));
	EXPECT_EQ(0, munmap(m, n * page));
	ASSERT_EQ(0, run("rmmod mlockfast"));
	dmesg_mark();
	EXPECT_EQ(0, run("modprobe mlockfast debug_selftest=1"));
	EXPECT_TRUE(loaded());
	EXPECT_EQ(1, dmesg_count(" walks, 0 differ"));
	if (!loaded())	/* the load's self-test failed: the rest needs it */
		EXPECT_EQ(0, run("modprobe mlockfast"));
}

TEST_HARNESS_MAIN
