// SPDX-License-Identifier: GPL-2.0
/*
 * Loading and unloading: refused while open, reloadable, parameters honoured,
 * and a missing kernel symbol fails the load with one clear line.  Runs last:
 * it leaves the module loaded with its default parameters.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
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
