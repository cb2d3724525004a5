// SPDX-License-Identifier: GPL-2.0
/* The device and its ABI plumbing: node, INFO, bad commands and pointers. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mlf_test.h"

#define PARAM(name) "/sys/module/mlockfast/parameters/" name

TEST(module_loaded)
{
	char *mods = read_file("/proc/modules");

	ASSERT_NE(NULL, mods);
	EXPECT_NE(NULL, strstr(mods, "mlockfast "));
	free(mods);
}

TEST(device_mode_follows_parameter)
{
	struct stat st;
	long mode = read_long(PARAM("dev_mode"));

	ASSERT_EQ(0, stat(MLOCKFAST_DEVICE, &st));
	EXPECT_TRUE(S_ISCHR(st.st_mode));
	EXPECT_EQ(10, (int)major(st.st_rdev));	/* a misc device */
	ASSERT_GE(mode, 0);
	EXPECT_EQ(mode, (long)(st.st_mode & 07777));
}

TEST(info_is_sane)
{
	struct mlockfast_info info;
	struct utsname u;
	char *ver = read_file("/sys/module/mlockfast/version");

	memset(&info, 0xa5, sizeof(info));
	ASSERT_LE(0, mlf_fd());
	ASSERT_EQ(0, ioctl(mlf_fd(), MLOCKFAST_IOC_INFO, &info));
	ASSERT_EQ(0, uname(&u));
	EXPECT_EQ(sizeof(info), info.size);
	EXPECT_EQ(MLOCKFAST_ABI_VERSION, info.abi_version);
	EXPECT_STREQ(u.release, info.kernel_release);
	ASSERT_NE(NULL, ver);
	ver[strcspn(ver, "\n")] = 0;
	EXPECT_STREQ(ver, info.module_version);
	EXPECT_TRUE(info.features & MLOCKFAST_FEAT_LOCK);
	EXPECT_TRUE(info.features & MLOCKFAST_FEAT_LOCKALL);
	/* No batch of its own any more: 0, and no parameter to size it. */
	EXPECT_EQ(0, info.batch_size);
	EXPECT_EQ(-1, read_long(PARAM("batch_size")));
	EXPECT_NE(0, info.default_mode & MLOCKFAST_MODE_MASK);
	EXPECT_EQ(0, info.default_mode & ~MLOCKFAST_MODE_MASK);
	for (size_t i = 0; i < sizeof(info.reserved) / 8; i++)
		EXPECT_EQ(0, info.reserved[i]);
	free(ver);
}

TEST(unknown_commands_get_enotty)
{
	const unsigned long cmds[] = {
		_IO(MLOCKFAST_IOC_MAGIC, 0x7f),
		_IOR(MLOCKFAST_IOC_MAGIC, 0x00, int),
		/* a known number with the wrong size or direction */
		_IOW(MLOCKFAST_IOC_MAGIC, 0x02, int),
		_IOR(MLOCKFAST_IOC_MAGIC, 0x02, struct mlockfast_range),
		_IOR('x', 1, int),
		TCGETS,
	};
	int dummy = 0;

	ASSERT_LE(0, mlf_fd());
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		errno = 0;
		EXPECT_EQ(-1, ioctl(mlf_fd(), cmds[i], &dummy));
		EXPECT_EQ(ENOTTY, errno) TH_LOG("cmd %#lx", cmds[i]);
	}
}

TEST(bad_pointers_get_efault)
{
	const unsigned long cmds[] = {
		MLOCKFAST_IOC_INFO, MLOCKFAST_IOC_LOCK, MLOCKFAST_IOC_UNLOCK,
		MLOCKFAST_IOC_LOCKALL, MLOCKFAST_IOC_LOCKV,
		MLOCKFAST_IOC_UNLOCKV, MLOCKFAST_IOC_STATS,
	};
	void *bad[] = { NULL, (void *)1, (void *)-4096L,
			(void *)0xffff888000000000UL };

	ASSERT_LE(0, mlf_fd());
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		for (size_t j = 0; j < sizeof(bad) / sizeof(bad[0]); j++) {
			errno = 0;
			EXPECT_EQ(-1, ioctl(mlf_fd(), cmds[i], bad[j]));
			EXPECT_EQ(EFAULT, errno)
				TH_LOG("cmd %#lx ptr %p", cmds[i], bad[j]);
		}
	}
}

TEST(bad_struct_fields_get_einval)
{
	char *buf = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct mlockfast_range r = {
		.size = sizeof(r), .addr = (uintptr_t)buf, .len = 4096,
	};
	struct mlockfast_all a = { .size = sizeof(a), .flags = MCL_CURRENT };

	ASSERT_NE(MAP_FAILED, buf);
	ASSERT_LE(0, mlf_fd());
	r.size = sizeof(r) - 8;
	EXPECT_EQ(-1, ioctl(mlf_fd(), MLOCKFAST_IOC_LOCK, &r));
	EXPECT_EQ(EINVAL, errno);
	r.size = sizeof(r);
	r.reserved[1] = 1;
	EXPECT_EQ(-1, ioctl(mlf_fd(), MLOCKFAST_IOC_LOCK, &r));
	EXPECT_EQ(EINVAL, errno);
	r.reserved[1] = 0;
	r.flags = 7U << MLOCKFAST_MODE_SHIFT;	/* no such mode */
	EXPECT_EQ(-1, ioctl(mlf_fd(), MLOCKFAST_IOC_LOCK, &r));
	EXPECT_EQ(EINVAL, errno);
	a.reserved[0] = 1;
	EXPECT_EQ(-1, ioctl(mlf_fd(), MLOCKFAST_IOC_LOCKALL, &a));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, status_kb("VmLck"));
	munmap(buf, 4096);
}

TEST(stats_readable_both_ways)
{
	struct mlockfast_stats s;
	char *text = read_file("/sys/class/misc/mlockfast/stats");

	ASSERT_EQ(0, mlf_stats(&s));
	EXPECT_EQ(sizeof(s), s.size);
	ASSERT_NE(NULL, text);
	EXPECT_NE(NULL, strstr(text, "calls_lock "));
	EXPECT_NE(NULL, strstr(text, "moves_cancelled "));
	free(text);
}

TEST(no_kernel_warnings)
{
	EXPECT_EQ(0, dmesg_count("WARNING:"));
	EXPECT_EQ(0, dmesg_count("BUG:"));
	EXPECT_EQ(0, dmesg_count("Oops"));
	EXPECT_EQ(0, dmesg_count("mlockfast: cannot load"));
}

TEST_HARNESS_MAIN
