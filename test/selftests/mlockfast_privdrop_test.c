// SPDX-License-Identifier: GPL-2.0
/*
 * libmlockfast and privileges (issue 18).  The device gets the udev rule's
 * owner and mode (the guest has no udev: GROUP and MODE are read from the
 * rule file the package ships, MLF_UDEV_RULE, else the rule's values), a
 * member of that group and a non-member are added to /etc, and
 * mlf-preload-calls runs with and without the library (MLF_LIB, else the
 * one beside this program):
 *
 *  - root that drops privileges after the library was loaded is routed
 *    (the library opened the device at load) and gets the syscall's results
 *    in every mode: member or not, the descriptor grants nothing;
 *  - a process that starts as a member is routed through the group's access;
 *  - one that starts as a non-member cannot open the device: it gets the
 *    syscall's results by fallback, or ENODEV in strict mode with one line
 *    on stderr a process saying why;
 *  - seteuid(65534); mlock(); seteuid(0); mlock() behaves as the syscall,
 *    routed, also in strict mode.
 *
 * Each test puts Mlocked, Unevictable and VmLck back where they were.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mlf_test.h"
#include "mlf_libcalls.h"

#define OUT		"/tmp/mlf_privdrop.out"
#define ERR		"/tmp/mlf_privdrop.err"
#define RULE_DEFAULT	"/lib/udev/rules.d/60-mlockfast.rules"
#define GROUP_GID	990
struct who {
	const char *name;
	uid_t uid;
	gid_t gid;
	bool member;	/* of the device's group */
};

static const struct who member = { "mlf-member", 1001, 1001, true };
static const struct who nonmember = { "nobody", NOBODY, NOBODY, false };

/* AT_START: exec'd with @who's credentials; AFTER_LOAD: root at load, then @who. */
enum when { AT_START, AFTER_LOAD };

static const char *lib_path(void)
{
	static char path[PATH_MAX];
	const char *env = getenv("MLF_LIB");

	if (env && *env)
		return env;
	snprintf(path, sizeof(path), "%s/libmlockfast.so.1", mlf_bindir());
	return path;
}

/*
 * mlf-preload-calls @what as @w (NULL: root throughout), preloaded or not,
 * with the blank-separated VAR=value words of @env.
 */
static struct result calls(const struct who *w, enum when when, bool preload,
			   const char *env, const char *what)
{
	char prog[PATH_MAX], pre[PATH_MAX + 16], same[PATH_MAX + 16], spec[64], envbuf[256];
	char *envp[16] = { "PATH=/usr/local/bin:/usr/bin:/bin" }, *argv[5];
	int n = 1, a = 0, fo, fe, st;
	struct result r = { -1, NULL, NULL };
	pid_t pid;

	snprintf(prog, sizeof(prog), "%s/mlf-preload-calls", mlf_bindir());
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", lib_path());
	if (preload)
		envp[n++] = pre;
	/* the same file mapped with and without preloading: mlockall counts it */
	snprintf(same, sizeof(same), "MLF_CALLS_LIB=%s", lib_path());
	envp[n++] = same;
	snprintf(envbuf, sizeof(envbuf), "%s", env);
	for (char *tok = strtok(envbuf, " "); tok && n < 15; tok = strtok(NULL, " "))
		envp[n++] = tok;
	envp[n] = NULL;
	argv[a++] = prog;
	if (w && when == AFTER_LOAD) {
		snprintf(spec, sizeof(spec), w->member ? "%u:%u:%u" : "%u:%u", w->uid,
			 w->gid, GROUP_GID);
		argv[a++] = "--as";
		argv[a++] = spec;
	}
	argv[a++] = (char *)what;
	argv[a] = NULL;

	fo = open(OUT, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	fe = open(ERR, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		gid_t g = GROUP_GID;

		if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
			_exit(125);
		if (w && when == AT_START &&
		    (setgroups(w->member ? 1 : 0, &g) || setgid(w->gid) || setuid(w->uid)))
			_exit(126);
		execve(prog, argv, envp);
		_exit(127);
	}
	if (pid > 0 && waitpid(pid, &st, 0) == pid)
		r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	if (fo >= 0)
		close(fo);
	if (fe >= 0)
		close(fe);
	result_collect(&r, OUT, ERR);
	return r;
}

static unsigned long routed(const struct lib_stats *l)
{
	return l->v[L_LOCK] + l->v[L_UNLOCK] + l->v[L_LOCKALL] + l->v[L_UNLOCKALL];
}

/* GROUP="..." and MODE="..." of the rule's line for the device. */
static int parse_rule(const char *path, char *group, size_t glen, mode_t *mode)
{
	char *text = read_file(path), *line, *save = NULL;
	int found = -1;

	for (line = text ? strtok_r(text, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *g = strstr(line, "GROUP=\""), *m = strstr(line, "MODE=\"");

		if (line[strspn(line, " \t")] == '#' || !strstr(line, "KERNEL==\"mlockfast\"") ||
		    !g || !m)
			continue;
		g += 7;
		snprintf(group, glen, "%.*s", (int)strcspn(g, "\""), g);
		*mode = (mode_t)strtoul(m + 6, NULL, 8);
		found = 0;
		break;
	}
	free(text);
	return found;
}

static const char * const etc_files[] = { "/etc/passwd", "/etc/group" };

/* @path holds @text afterwards: 0, or -1. */
static int put_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ssize_t len = (ssize_t)strlen(text), n = fd < 0 ? -1 : write(fd, text, len);

	if (fd >= 0)
		close(fd);
	return n == len ? 0 : -1;
}

FIXTURE(privdrop) {
	long mlocked, unevictable, vmlck;
	char *etc_saved[2];
	struct stat dev;	/* the device's owner and mode before */
	char group[64];
	mode_t mode;
	struct result plain, lib;
};

FIXTURE_SETUP(privdrop)
{
	const char *rule = getenv("MLF_UDEV_RULE");
	char text[512];

	ASSERT_EQ(0, geteuid()) TH_LOG("runs as root, in the guest");
	ASSERT_TRUE(mlf_module_loaded());
	/* The package's rule when there is one; else what it says. */
	if (!rule && !access(RULE_DEFAULT, R_OK))
		rule = RULE_DEFAULT;
	if (rule) {
		ASSERT_EQ(0, parse_rule(rule, self->group, sizeof(self->group), &self->mode))
			TH_LOG("%s: no GROUP and MODE for KERNEL==\"mlockfast\"", rule);
	} else {
		snprintf(self->group, sizeof(self->group), "mlockfast");
		self->mode = 0660;
	}
	ASSERT_EQ(0660, self->mode) TH_LOG("rule %s: mode %o", rule ?: "(built in)", self->mode);

	/* The group, a member and nobody, as adduser would have made them. */
	mkdir("/etc", 0755);
	for (int i = 0; i < 2; i++)
		self->etc_saved[i] = read_file(etc_files[i]);
	ASSERT_EQ(0, put_file("/etc/passwd",
			      "root:x:0:0:root:/root:/bin/sh\n"
			      "mlf-member:x:1001:1001::/tmp:/bin/sh\n"
			      "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"));
	snprintf(text, sizeof(text), "root:x:0:\nmlf-member:x:1001:\n%s:x:%d:mlf-member\n"
		 "nogroup:x:65534:\n", self->group, GROUP_GID);
	ASSERT_EQ(0, put_file("/etc/group", text));

	/* What udev does with the rule (the guest has no udev). */
	ASSERT_EQ(0, stat(MLOCKFAST_DEVICE, &self->dev));
	ASSERT_EQ(0, chown(MLOCKFAST_DEVICE, 0, GROUP_GID));
	ASSERT_EQ(0, chmod(MLOCKFAST_DEVICE, self->mode));

	settle();
	self->mlocked = meminfo_kb("Mlocked");
	self->unevictable = meminfo_kb("Unevictable");
	self->vmlck = status_kb("VmLck");
}

FIXTURE_TEARDOWN(privdrop)
{
	result_free(&self->plain);
	result_free(&self->lib);
	EXPECT_EQ(0, chown(MLOCKFAST_DEVICE, self->dev.st_uid, self->dev.st_gid));
	EXPECT_EQ(0, chmod(MLOCKFAST_DEVICE, self->dev.st_mode & 07777));
	for (int i = 0; i < 2; i++) {
		if (self->etc_saved[i]) {
			EXPECT_EQ(0, put_file(etc_files[i], self->etc_saved[i]));
		} else {
			EXPECT_EQ(0, unlink(etc_files[i]));
		}
		free(self->etc_saved[i]);
	}
	settle();
	EXPECT_EQ(self->mlocked, meminfo_kb("Mlocked"));
	EXPECT_EQ(self->unevictable, meminfo_kb("Unevictable"));
	EXPECT_EQ(self->vmlck, status_kb("VmLck"));
}

/* Who can open the device: root, the group; not others. */
static int open_as(const struct who *w)
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		gid_t g = GROUP_GID;
		int fd;

		if (setgroups(w->member ? 1 : 0, &g) || setgid(w->gid) || setuid(w->uid))
			_exit(126);
		fd = open(MLOCKFAST_DEVICE, O_RDWR | O_CLOEXEC);
		_exit(fd >= 0 ? 0 : errno);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

TEST_F(privdrop, the_rule_opens_the_device_to_its_group_only)
{
	EXPECT_EQ(0, open_as(&member));
	EXPECT_EQ(EACCES, open_as(&nonmember));
}

static const char * const modes[] = { "", "eager", "deferred", "reclaim" };
static const int stat_modes[] = { -1, MLOCKFAST_STAT_MODE_EAGER,
				  MLOCKFAST_STAT_MODE_DEFERRED, MLOCKFAST_STAT_MODE_RECLAIM };

/*
 * "calls" as @w (@when) without the library, then with it in every mode
 * (and strict): the same text, every call the device could take routed to
 * it, as the module's own counters confirm.
 */
static void routed_in_every_mode(struct __test_metadata *_metadata,
				 FIXTURE_DATA(privdrop) *self, const struct who *w,
				 enum when when)
{
	self->plain = calls(w, when, false, "", "calls");
	ASSERT_EQ(0, self->plain.status) TH_LOG("%s", self->plain.err);
	EXPECT_STREQ("", self->plain.err);
	EXPECT_EQ(6, count(self->plain.out, "=== "));
	EXPECT_EQ(0, count(self->plain.out, "failed"));
	/* the limits scenario as an unprivileged user: mlock(2)'s answers */
	EXPECT_NE(NULL, strstr(self->plain.out, "mlock limit 0 = -1 errno Operation not permitted"));

	for (size_t m = 0; m < 2 * sizeof(modes) / sizeof(modes[0]); m++) {
		const char *mode = modes[m % 4];
		bool strict = m >= 4;
		struct mlockfast_stats s[2];
		struct lib_stats l;
		char env[128];

		snprintf(env, sizeof(env), "MLOCKFAST_STATS=1%s%s%s",
			 strict ? " MLOCKFAST_STRICT=1" : "", *mode ? " MLOCKFAST_MODE=" : "", mode);
		ASSERT_EQ(0, dev_stats(&s[0]));
		self->lib = calls(w, when, true, env, "calls");
		ASSERT_EQ(0, dev_stats(&s[1]));
		EXPECT_EQ(0, self->lib.status) TH_LOG("%s: %s", env, self->lib.err);
		EXPECT_SAME(self->plain.out, self->lib.out);
		l = lib_stats(self->lib.err);
		/* six scenario children and the parent */
		EXPECT_EQ(7, l.lines) TH_LOG("%s: %s", env, self->lib.err);
		EXPECT_LT(0, l.v[L_LOCK]);
		EXPECT_LT(0, l.v[L_UNLOCK]);
		EXPECT_LT(0, l.v[L_LOCKALL]);
		EXPECT_LT(0, l.v[L_UNLOCKALL]);
		EXPECT_EQ(LIBC_ONLY_CALLS, l.v[L_SYSCALL]) TH_LOG("%s", env);
		EXPECT_EQ(0, l.v[L_REFUSED]);
		EXPECT_EQ(s[1].calls_lock - s[0].calls_lock, l.v[L_LOCK]);
		EXPECT_EQ(s[1].calls_unlock - s[0].calls_unlock, l.v[L_UNLOCK]);
		EXPECT_EQ(s[1].calls_lockall - s[0].calls_lockall, l.v[L_LOCKALL]);
		EXPECT_EQ(s[1].calls_unlockall - s[0].calls_unlockall, l.v[L_UNLOCKALL]);
		if (stat_modes[m % 4] >= 0) {
			EXPECT_LE(l.v[L_LOCK] + l.v[L_UNLOCK] + l.v[L_LOCKALL],
				  s[1].mode_calls[stat_modes[m % 4]] -
				  s[0].mode_calls[stat_modes[m % 4]]) TH_LOG("%s", env);
		}
		EXPECT_EQ(0, count(self->lib.err, "STRICT"));
		result_free(&self->lib);
	}
}

TEST_F(privdrop, member_after_load_is_routed_in_every_mode)
{
	routed_in_every_mode(_metadata, self, &member, AFTER_LOAD);
}

/* The descriptor root opened grants nothing: the kernel checks the caller. */
TEST_F(privdrop, nonmember_after_load_is_routed_with_its_own_limits)
{
	routed_in_every_mode(_metadata, self, &nonmember, AFTER_LOAD);
}

TEST_F(privdrop, member_from_the_start_is_routed_through_the_group)
{
	routed_in_every_mode(_metadata, self, &member, AT_START);
}

TEST_F(privdrop, nonmember_from_the_start_falls_back_or_fails_strictly)
{
	struct lib_stats l;
	struct result r;

	self->plain = calls(&nonmember, AT_START, false, "", "calls");
	ASSERT_EQ(0, self->plain.status) TH_LOG("%s", self->plain.err);
	EXPECT_EQ(6, count(self->plain.out, "=== "));

	/* fallback: the syscall's results, nothing through the device */
	self->lib = calls(&nonmember, AT_START, true, "MLOCKFAST_STATS=1", "calls");
	EXPECT_EQ(0, self->lib.status) TH_LOG("%s", self->lib.err);
	EXPECT_SAME(self->plain.out, self->lib.out);
	l = lib_stats(self->lib.err);
	EXPECT_EQ(7, l.lines) TH_LOG("%s", self->lib.err);
	EXPECT_EQ(0, routed(&l));
	EXPECT_LT(LIBC_ONLY_CALLS, l.v[L_SYSCALL]);
	EXPECT_EQ(0, l.v[L_REFUSED]);
	EXPECT_EQ(7, count(self->lib.err, "\n")) TH_LOG("only the stats lines: %s", self->lib.err);

	/* strict: routed calls fail with ENODEV, one line a process says why */
	r = calls(&nonmember, AT_START, true, "MLOCKFAST_STRICT=1 MLOCKFAST_STATS=1", "calls");
	EXPECT_EQ(0, r.status) TH_LOG("%s", r.err);
	EXPECT_NE(NULL, strstr(r.out, "mlock 4 pages = -1 errno No such device"));
	EXPECT_NE(NULL, strstr(r.out, "mlockall current = -1 errno No such device"));
	EXPECT_NE(NULL, strstr(r.out, "mlock2 flag 0x100 = -1 errno Invalid argument"));
	EXPECT_EQ(0, count(r.out, "= 0\n")) TH_LOG("a routed call succeeded:\n%s", r.out);
	l = lib_stats(r.err);
	EXPECT_EQ(0, routed(&l));
	EXPECT_EQ(LIBC_ONLY_CALLS, l.v[L_SYSCALL]);
	EXPECT_LT(0, l.v[L_REFUSED]);
	/* the six scenario children call; the parent, which makes no call, says nothing */
	EXPECT_EQ(6, count(r.err, "mlockfast: MLOCKFAST_STRICT=1: /dev/mlockfast: Permission denied: "))
		TH_LOG("%s", r.err);
	EXPECT_EQ(13, count(r.err, "\n")) TH_LOG("%s", r.err);
	result_free(&r);
}

/*
 * Issue 18's reproduction, as real test suites do it: root, drop to nobody
 * (RLIMIT_MEMLOCK default, then 0), mlock, back to root, mlock.
 */
TEST_F(privdrop, seteuid_nobody_then_root_behaves_as_the_syscall)
{
	const char *out;

	self->plain = calls(NULL, AT_START, false, "", "seteuid");
	out = self->plain.out;
	ASSERT_EQ(0, self->plain.status) TH_LOG("%s", self->plain.err);
	EXPECT_NE(NULL, strstr(out, "RLIMIT_MEMLOCK 0\nas nobody: mlock = -1 errno Operation not permitted"))
		TH_LOG("%s", out);
	EXPECT_EQ(3, count(out, "mlock = 0 errno -")) TH_LOG("%s", out);

	for (size_t m = 0; m < 2 * sizeof(modes) / sizeof(modes[0]); m++) {
		const char *mode = modes[m % 4];
		struct lib_stats l;
		char env[128];

		snprintf(env, sizeof(env), "MLOCKFAST_STATS=1%s%s%s",
			 m >= 4 ? " MLOCKFAST_STRICT=1" : "", *mode ? " MLOCKFAST_MODE=" : "", mode);
		self->lib = calls(NULL, AT_START, true, env, "seteuid");
		EXPECT_EQ(0, self->lib.status) TH_LOG("%s: %s", env, self->lib.err);
		EXPECT_SAME(out, self->lib.out);
		l = lib_stats(self->lib.err);
		EXPECT_EQ(1, l.lines) TH_LOG("%s", self->lib.err);
		/* as nobody too: the device, not the syscall */
		EXPECT_EQ(4, l.v[L_LOCK]) TH_LOG("%s: %s", env, self->lib.err);
		EXPECT_EQ(4, l.v[L_UNLOCK]);
		EXPECT_EQ(0, l.v[L_SYSCALL]);
		EXPECT_EQ(0, l.v[L_REFUSED]);
		result_free(&self->lib);
	}
}

TEST_HARNESS_MAIN
