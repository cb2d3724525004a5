// SPDX-License-Identifier: GPL-2.0
/*
 * Loading and unloading: refused while open, reloadable, parameters honoured,
 * and a missing kernel symbol fails the load with one clear line.  Runs last:
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
 * A process that locked through the device keeps the module's mmu notifier
 * after it closes the device.  Unloading must take the notifier away: the
 * process's munmap and exit afterwards must not call into the gone module.
 */
TEST(unload_while_a_user_lives_on)
{
	const size_t len = 64 << 10;
	long ml0 = meminfo_kb("Mlocked"), ue0 = meminfo_kb("Unevictable");
	int ready[2], go[2], st = -1;
	char c = 0;
	pid_t pid;

	ASSERT_EQ(0, pipe(ready));
	ASSERT_EQ(0, pipe(go));
	pid = fork();
	if (pid == 0) {
		char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		int fd = open(MLOCKFAST_DEVICE, O_RDWR), ok;
		struct mlockfast_range r = {
			.size = sizeof(r), .addr = (unsigned long)p, .len = len,
			.flags = MLOCKFAST_MODE_DEFERRED,
		};

		if (p == MAP_FAILED || fd < 0)
			_exit(10);
		memset(p, 1, len);
		/* Half stays locked and queued, half is locked and unlocked. */
		ok = !ioctl(fd, MLOCKFAST_IOC_LOCK, &r);
		r.len = len / 2;
		r.flags = 0;
		ok = ok && !ioctl(fd, MLOCKFAST_IOC_UNLOCK, &r);
		close(fd);
		if (!ok || write(ready[1], "r", 1) != 1 ||
		    read(go[0], &c, 1) != 1)
			_exit(11);
		/* The module is gone: these reach the kernel's own paths only. */
		if (munlock(p + len / 2, len / 4) || munmap(p, len))
			_exit(12);
		_exit(0);
	}
	ASSERT_LT(0, pid);
	ASSERT_EQ(1, read(ready[0], &c, 1));
	EXPECT_EQ(0, run("rmmod mlockfast"));
	EXPECT_FALSE(loaded());
	ASSERT_EQ(1, write(go[1], "g", 1));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st)) TH_LOG("child: status %#x", st);
	EXPECT_EQ(ml0, meminfo_kb("Mlocked"));
	EXPECT_EQ(ue0, meminfo_kb("Unevictable"));
	EXPECT_EQ(0, run("modprobe mlockfast"));
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

TEST(bad_parameters_refused)
{
	ASSERT_EQ(0, run("rmmod mlockfast"));
	EXPECT_NE(0, run("modprobe mlockfast default_mode=legacy 2>/dev/null"));
	EXPECT_NE(0, run("modprobe mlockfast batch_size=0 2>/dev/null"));
	ASSERT_EQ(0, run("modprobe mlockfast"));
	EXPECT_TRUE(loaded());
}

TEST_HARNESS_MAIN
