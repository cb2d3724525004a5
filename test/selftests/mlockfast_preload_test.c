// SPDX-License-Identifier: GPL-2.0
/*
 * libmlockfast as LD_PRELOAD: mlf-preload-calls (an unmodified dynamic
 * program) runs with and without the library and must print the same
 * results, errnos and observable state; the module's counters and the
 * library's MLOCKFAST_STATS lines prove the device path was taken; the
 * environment variables do what they say; without the module it falls back,
 * or fails in strict mode.  This program never keeps the device open, so
 * the module can be unloaded; it is loaded again before each test ends.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mlf_test.h"
#include "mlf_libcalls.h"

#define OUT	"/tmp/mlf_preload.out"
#define ERR	"/tmp/mlf_preload.err"
/* mlf-preload-calls @what, preloaded or not, with @env; output captured. */
static struct result calls(bool preload, const char *env, const char *what)
{
	char pre[PATH_MAX + 32] = "";
	struct result r;

	if (preload)
		snprintf(pre, sizeof(pre), "LD_PRELOAD=%s/libmlockfast.so", mlf_bindir());
	r.status = run("env %s %s %s/mlf-preload-calls %s >" OUT " 2>" ERR, pre, env,
		       mlf_bindir(), what);
	result_collect(&r, OUT, ERR);
	return r;
}

/*
 * Preloaded calls with the module's counters read around them: s[1] - s[0]
 * is what the run did (nothing else uses the device meanwhile).
 */
static struct result counted(struct __test_metadata *_metadata, const char *env,
			     const char *what, struct mlockfast_stats s[2])
{
	struct result r;

	EXPECT_EQ(0, dev_stats(&s[0]));
	r = calls(true, env, what);
	EXPECT_EQ(0, dev_stats(&s[1]));
	EXPECT_EQ(0, r.status) TH_LOG("%s %s: %s", env, what, r.err);
	return r;
}

/* The module's default mode, as a MLOCKFAST_STAT_MODE_* slot. */
static int default_mode(void)
{
	struct mlockfast_info info = { .size = sizeof(info) };
	int fd = open(MLOCKFAST_DEVICE, O_RDWR | O_CLOEXEC), ret;

	if (fd < 0)
		return -1;
	ret = ioctl(fd, MLOCKFAST_IOC_INFO, &info);
	close(fd);
	return ret ? -1 : (int)(info.default_mode >> MLOCKFAST_MODE_SHIFT) - 1;
}

/* Mlocked, Unevictable and our VmLck at the start; checked at the end. */
struct baseline {
	long mlocked, unevictable, vmlck;
};

static struct baseline baseline(void)
{
	struct baseline b;

	settle();
	b.mlocked = meminfo_kb("Mlocked");
	b.unevictable = meminfo_kb("Unevictable");
	b.vmlck = status_kb("VmLck");
	return b;
}

#define EXPECT_BASELINE(b) do {							\
	settle();								\
	EXPECT_EQ((b).mlocked, meminfo_kb("Mlocked"));				\
	EXPECT_EQ((b).unevictable, meminfo_kb("Unevictable"));			\
	EXPECT_EQ((b).vmlck, status_kb("VmLck"));				\
} while (0)

/* The reference: no library in the way. */
static struct result reference(struct __test_metadata *_metadata)
{
	struct result r = calls(false, "", "calls");

	EXPECT_EQ(0, r.status) TH_LOG("%s", r.err);
	EXPECT_STREQ("", r.err);
	/* every scenario ran, and the kernel said what mlock(2) says */
	EXPECT_EQ(6, count(r.out, "=== "));
	EXPECT_EQ(0, count(r.out, "failed"));
	EXPECT_NE(NULL, strstr(r.out, "mlock limit 0 = -1 errno Operation not permitted"));
	EXPECT_NE(NULL, strstr(r.out, "mlock2 flag 0x100 = -1 errno Invalid argument"));
	EXPECT_NE(NULL, strstr(r.out, "mlock hole = -1 errno Cannot allocate memory"));
	EXPECT_NE(NULL, strstr(r.out, "errno after success 1234"));
	EXPECT_NE(NULL, strstr(r.out, "SYS_mmap at 1"));
	return r;
}

/*
 * Each test starts from its baseline and must come back to it; the runs it
 * keeps here are freed after it.
 */
FIXTURE(preload) {
	struct baseline b;
	struct result plain, lib;	/* without and with the library */
	struct mlockfast_stats s[2];	/* the module's, around the lib run */
};

FIXTURE_SETUP(preload)
{
	self->b = baseline();
}

FIXTURE_TEARDOWN(preload)
{
	result_free(&self->plain);
	result_free(&self->lib);
	EXPECT_BASELINE(self->b);
}

/* @what without the library, then with it and @env, counted; its stats. */
static struct lib_stats both(struct __test_metadata *_metadata,
			     FIXTURE_DATA(preload) *self, const char *env,
			     const char *what)
{
	self->plain = calls(false, "", what);
	EXPECT_EQ(0, self->plain.status) TH_LOG("%s", self->plain.err);
	self->lib = counted(_metadata, env, what, self->s);
	return lib_stats(self->lib.err);
}

/* With the library, per mode: same text, and the device did the work. */
static void check_mode(struct __test_metadata *_metadata, const char *want,
		       const char *mode, int stat_mode)
{
	struct mlockfast_stats s[2];
	struct lib_stats l;
	struct result r;
	char env[64];

	snprintf(env, sizeof(env), "MLOCKFAST_STATS=1 %s%s", mode ? "MLOCKFAST_MODE=" : "",
		 mode ? mode : "");
	r = counted(_metadata, env, "calls", s);
	EXPECT_SAME(want, r.out);
	l = lib_stats(r.err);
	/* the forked scenario children report, the idle parent too */
	EXPECT_EQ(7, l.lines) TH_LOG("%s", r.err);
	EXPECT_LT(0, l.v[L_LOCK]);
	EXPECT_LT(0, l.v[L_UNLOCK]);
	EXPECT_LT(0, l.v[L_LOCKALL]);
	EXPECT_LT(0, l.v[L_UNLOCKALL]);
	EXPECT_EQ(s[1].calls_lock - s[0].calls_lock, l.v[L_LOCK]);
	EXPECT_EQ(s[1].calls_unlock - s[0].calls_unlock, l.v[L_UNLOCK]);
	EXPECT_EQ(s[1].calls_lockall - s[0].calls_lockall, l.v[L_LOCKALL]);
	EXPECT_EQ(s[1].calls_unlockall - s[0].calls_unlockall, l.v[L_UNLOCKALL]);
	EXPECT_EQ(LIBC_ONLY_CALLS, l.v[L_SYSCALL]);
	EXPECT_EQ(0, l.v[L_REFUSED]);
	if (stat_mode >= 0) {
		/* lock, unlock and lockall carry the mode; unlockall, the default */
		unsigned long moded = l.v[L_LOCK] + l.v[L_UNLOCK] + l.v[L_LOCKALL];

		if (stat_mode == default_mode())
			moded += l.v[L_UNLOCKALL];
		EXPECT_EQ(moded, s[1].mode_calls[stat_mode] - s[0].mode_calls[stat_mode])
			TH_LOG("%s", mode);
	}
	result_free(&r);
}

TEST_F(preload, calls_match_without_library_in_every_mode)
{
	self->plain = reference(_metadata);
	check_mode(_metadata, self->plain.out, NULL, -1);
	check_mode(_metadata, self->plain.out, "eager", MLOCKFAST_STAT_MODE_EAGER);
	check_mode(_metadata, self->plain.out, "deferred", MLOCKFAST_STAT_MODE_DEFERRED);
	check_mode(_metadata, self->plain.out, "reclaim", MLOCKFAST_STAT_MODE_RECLAIM);
}

/* "calls" preloaded with @env gives the reference's text; its stats. */
static struct lib_stats like_reference(struct __test_metadata *_metadata,
				       FIXTURE_DATA(preload) *self, const char *env)
{
	self->plain = reference(_metadata);
	self->lib = calls(true, env, "calls");
	EXPECT_EQ(0, self->lib.status) TH_LOG("%s", env);
	EXPECT_SAME(self->plain.out, self->lib.out);
	return lib_stats(self->lib.err);
}

TEST_F(preload, debug_logs_each_call)
{
	struct lib_stats l = like_reference(_metadata, self, "MLOCKFAST_DEBUG=1 MLOCKFAST_STATS=1");
	const char *err = self->lib.err;

	EXPECT_EQ(l.v[L_LOCK] + l.v[L_UNLOCK] + l.v[L_LOCKALL] + l.v[L_UNLOCKALL],
		  (unsigned long)count(err, " [device]\n"));
	EXPECT_EQ(LIBC_ONLY_CALLS, count(err, " [syscall]\n"));
	EXPECT_LT(0, count(err, "mlock2("));
	EXPECT_LT(0, count(err, "syscall("));
	/* every line is the library's */
	EXPECT_EQ(count(err, "\n"), count(err, "mlockfast: "));
}

TEST_F(preload, unknown_values_are_reported_once)
{
	struct result r = self->lib = calls(true, "MLOCKFAST_MODE=fast MLOCKFAST_STRICT=yes "
					    "MLOCKFAST_DEBUG=2 MLOCKFAST_STATS=on", "threads");

	EXPECT_EQ(0, r.status) TH_LOG("%s", r.err);
	/* eight threads, one report each, and the defaults in force */
	EXPECT_EQ(1, count(r.err, "MLOCKFAST_MODE=fast: unknown"));
	EXPECT_EQ(1, count(r.err, "MLOCKFAST_STRICT=yes: unknown"));
	EXPECT_EQ(1, count(r.err, "MLOCKFAST_DEBUG=2: unknown"));
	EXPECT_EQ(1, count(r.err, "MLOCKFAST_STATS=on: unknown"));
	EXPECT_EQ(4, count(r.err, "\n")) TH_LOG("%s", r.err);
	EXPECT_NE(NULL, strstr(r.out, "errors 0 fds 1 VmLck 0")) TH_LOG("%s", r.out);
}

TEST_F(preload, threads_share_one_descriptor)
{
	struct lib_stats l = both(_metadata, self, "MLOCKFAST_STATS=1", "threads");
	const struct mlockfast_stats *s = self->s;

	/* the library opens the device at load, also when only dlopen'ed */
	EXPECT_STREQ("threads 8 pairs 200 errors 0 fds 1 VmLck 0\n", self->plain.out);
	EXPECT_STREQ("threads 8 pairs 200 errors 0 fds 1 VmLck 0\n", self->lib.out);
	EXPECT_EQ(1, l.lines);
	EXPECT_EQ(1600, l.v[L_LOCK]);
	EXPECT_EQ(1600, l.v[L_UNLOCK]);
	EXPECT_EQ(0, l.v[L_SYSCALL]);
	EXPECT_EQ(1600, s[1].calls_lock - s[0].calls_lock);
	EXPECT_EQ(1600, s[1].calls_unlock - s[0].calls_unlock);
	EXPECT_EQ(0, s[1].errors - s[0].errors);
}

TEST_F(preload, forked_child_acts_on_itself)
{
	struct lib_stats l = both(_metadata, self, "MLOCKFAST_STATS=1", "fork");
	const struct mlockfast_stats *s = self->s;
	const char *r0 = self->plain.out, *err = self->lib.err;

	EXPECT_NE(NULL, strstr(r0, "parent mlock 0 VmLck 64\nchild before 0 VmLck 0\n"
			       "child mlock 0 VmLck 128\n"));
	EXPECT_NE(NULL, strstr(r0, "exec'd fds 1\nchild status 0\nparent after 0 VmLck 64\n"
			       "parent munlock 0 VmLck 0\n"));
	EXPECT_SAME(r0, self->lib.out);
	/* parent, child and exec'd image each count their own calls */
	EXPECT_EQ(3, l.lines) TH_LOG("%s", err);
	EXPECT_EQ(1, count(err, "device lock 1 unlock 1 lockall 0 unlockall 0 "));
	EXPECT_EQ(1, count(err, "device lock 1 unlock 1 lockall 1 unlockall 1 "));
	EXPECT_EQ(1, count(err, "device lock 0 unlock 0 lockall 0 unlockall 0 "));
	EXPECT_EQ(2, s[1].calls_lock - s[0].calls_lock);
	EXPECT_EQ(1, s[1].calls_lockall - s[0].calls_lockall);
}

TEST_F(preload, a_closed_descriptor_is_opened_again)
{
	struct lib_stats l = both(_metadata, self, "MLOCKFAST_STATS=1", "stale");
	const struct mlockfast_stats *s = self->s;

	/* libc's calls never notice the closed descriptor: no new open */
	EXPECT_STREQ("closed 1\nfirst 0 second 0 null still open 1\nfds 0\n", self->plain.out);
	EXPECT_STREQ("closed 1\nfirst 0 second 0 null still open 1\nfds 1\n", self->lib.out);
	/* both pairs went to the device, not to libc */
	EXPECT_EQ(2, l.v[L_LOCK]);
	EXPECT_EQ(2, l.v[L_UNLOCK]);
	EXPECT_EQ(0, l.v[L_SYSCALL]);
	EXPECT_EQ(2, s[1].calls_lock - s[0].calls_lock);
}

TEST_F(preload, strict_with_the_device_changes_nothing)
{
	struct lib_stats l = like_reference(_metadata, self, "MLOCKFAST_STRICT=1 MLOCKFAST_STATS=1");

	EXPECT_EQ(0, l.v[L_REFUSED]);
	EXPECT_EQ(0, count(self->lib.err, "STRICT"));
}

TEST_F(preload, without_the_module_falls_back_or_fails_strictly)
{
	struct result r0 = self->plain = reference(_metadata), r1, r2, r3, r4;
	struct lib_stats l1, l2;
	int rm;

	rm = run("rmmod mlockfast");
	r1 = calls(true, "MLOCKFAST_STATS=1", "calls");
	r2 = calls(true, "MLOCKFAST_STRICT=1 MLOCKFAST_STATS=1", "calls");
	r3 = calls(true, "", "threads");
	/* the API, in a program linked with the library */
	r4.status = run("%s/mlockfast_lib_test >" OUT " 2>&1", mlf_bindir());
	r4.out = read_file(OUT);
	r4.err = NULL;
	if (!mlf_module_loaded())
		run("modprobe mlockfast");
	ASSERT_TRUE(mlf_module_loaded());
	ASSERT_EQ(0, rm);

	EXPECT_EQ(0, r1.status);
	EXPECT_SAME(r0.out, r1.out);
	l1 = lib_stats(r1.err);
	EXPECT_EQ(0, l1.v[L_LOCK] + l1.v[L_UNLOCK] + l1.v[L_LOCKALL] + l1.v[L_UNLOCKALL]);
	EXPECT_LT(LIBC_ONLY_CALLS, l1.v[L_SYSCALL]);
	EXPECT_EQ(0, l1.v[L_REFUSED]);

	/* strict: routed calls fail with ENODEV, one message a process */
	EXPECT_EQ(0, r2.status);
	EXPECT_NE(NULL, strstr(r2.out, "mlock 4 pages = -1 errno No such device"));
	EXPECT_NE(NULL, strstr(r2.out, "mlockall current = -1 errno No such device"));
	EXPECT_NE(NULL, strstr(r2.out, "SYS_munlockall = -1 errno No such device"));
	EXPECT_NE(NULL, strstr(r2.out, "mlock2 flag 0x100 = -1 errno Invalid argument"));
	EXPECT_EQ(0, count(r2.out, "= 0\n")) TH_LOG("a routed call succeeded:\n%s", r2.out);
	l2 = lib_stats(r2.err);
	EXPECT_EQ(LIBC_ONLY_CALLS, l2.v[L_SYSCALL]);
	EXPECT_LT(0, l2.v[L_REFUSED]);
	EXPECT_EQ(6, count(r2.err, "MLOCKFAST_STRICT=1: /dev/mlockfast: No such file"))
		TH_LOG("%s", r2.err);

	EXPECT_EQ(0, r3.status);
	EXPECT_STREQ("threads 8 pairs 200 errors 0 fds 0 VmLck 0\n", r3.out);

	EXPECT_EQ(0, r4.status) TH_LOG("%s", r4.out);
	EXPECT_TRUE(r4.out && strstr(r4.out, "# libmlockfast: without the device"));
	EXPECT_TRUE(r4.out && strstr(r4.out, " fail:0 ")) TH_LOG("%s", r4.out);
	result_free(&r1);
	result_free(&r2);
	result_free(&r3);
	free(r4.out);
}

TEST_HARNESS_MAIN
