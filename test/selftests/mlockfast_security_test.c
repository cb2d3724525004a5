// SPDX-License-Identifier: GPL-2.0
/*
 * The threat model: the ioctls act on the caller's own mm only, whoever
 * opened the file (a descriptor inherited across fork or passed by
 * SCM_RIGHTS, also after its opener exited); RLIMIT_MEMLOCK and
 * CAP_IPC_LOCK bind an unprivileged user exactly as mlock(2) binds it,
 * also when dev_mode lets that user open the device; a cgroup's memory.max
 * holds against locking through the device as against mlock(2).  (The
 * node's mode itself: mlockfast_dev_test and mlockfast_module_test.)
 * Every test leaves Mlocked, Unevictable and VmLck as it found them.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mlf_diff.h"
#include "mlf_test.h"

#define RW	(PROT_READ | PROT_WRITE)
#define ANON	(MAP_PRIVATE | MAP_ANONYMOUS)
#define KB(p)	((long)(p) * (long)(PAGE / 1024))
/* Where the tests map what both processes of a pair have at one address. */
#define SHARED_VA	((char *)0x240000000000UL)
#define NPAGES	16

FIXTURE(sec) {
	long mlocked, unevictable, vmlck;
};

FIXTURE_SETUP(sec)
{
	drain_everything();
	self->mlocked = meminfo_kb("Mlocked");
	self->unevictable = meminfo_kb("Unevictable");
	self->vmlck = status_kb("VmLck");
}

FIXTURE_TEARDOWN(sec)
{
	EXPECT_EQ(self->vmlck, status_kb("VmLck"));
	munlockall();
	drain_everything();
	EXPECT_EQ(self->mlocked, meminfo_kb("Mlocked"));
	EXPECT_EQ(self->unevictable, meminfo_kb("Unevictable"));
}

static int lock_fd(int fd, void *p, size_t len, unsigned int flags)
{
	struct mlockfast_range r = {
		.size = sizeof(r), .flags = flags, .addr = (uintptr_t)p, .len = len,
	};

	return ioctl(fd, MLOCKFAST_IOC_LOCK, &r) ? errno : 0;
}

static int unlock_fd(int fd, void *p, size_t len)
{
	struct mlockfast_range r = {
		.size = sizeof(r), .addr = (uintptr_t)p, .len = len,
	};

	return ioctl(fd, MLOCKFAST_IOC_UNLOCK, &r) ? errno : 0;
}

/* Lock @p's NPAGES through @fd (deferred): this process has them locked, 0. */
static int lock_own(int fd, char *p)
{
	return lock_fd(fd, p, NPAGES * PAGE, MLOCKFAST_MODE_DEFERRED) ||
	       status_kb("VmLck") != KB(NPAGES) ||
	       locked_kb(p, p + NPAGES * PAGE) != KB(NPAGES);
}

/* NPAGES touched pages at SHARED_VA, or NULL. */
static char *map_shared_va(void)
{
	char *p = mmap(SHARED_VA, NPAGES * PAGE, RW, ANON | MAP_FIXED_NOREPLACE,
		       -1, 0);

	if (p != SHARED_VA)
		return NULL;
	diff_touch(p, NPAGES * PAGE, 1);
	return p;
}

/* One byte each way between the processes of a test. */
static void say(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		_exit(90);
}

static char hear(int fd)
{
	char c = 0;

	if (read(fd, &c, 1) != 1)
		_exit(91);
	return c;
}

/* A one-byte message with room for one descriptor. */
struct fd_msg {
	char cbuf[CMSG_SPACE(sizeof(int))], b;
	struct iovec io;
	struct msghdr m;
};

static void fd_msg_init(struct fd_msg *x)
{
	memset(x, 0, sizeof(*x));
	x->b = 'f';
	x->io = (struct iovec) { &x->b, 1 };
	x->m = (struct msghdr) {
		.msg_iov = &x->io, .msg_iovlen = 1,
		.msg_control = x->cbuf, .msg_controllen = sizeof(x->cbuf),
	};
}

static int send_fd(int sock, int fd)
{
	struct fd_msg x;
	struct cmsghdr *c;

	fd_msg_init(&x);
	c = CMSG_FIRSTHDR(&x.m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &x.m, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock)
{
	struct fd_msg x;
	struct cmsghdr *c;
	int fd;

	fd_msg_init(&x);
	if (recvmsg(sock, &x.m, 0) != 1 || !(c = CMSG_FIRSTHDR(&x.m)) ||
	    c->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/*
 * The parent opens the device and locks a page of its own through it (so
 * the file's cached mm state is the parent's); the child inherits the
 * descriptor and locks SHARED_VA, which both have mapped.  Only the child's
 * VMA may be locked; then the parent locks its own SHARED_VA through the
 * same file while the child lives: only the parent's.
 */
TEST_F(sec, fd_inherited_across_fork_acts_on_the_caller)
{
	int fd = open(MLOCKFAST_DEVICE, O_RDWR), up[2], down[2], st = -1;
	char *p = map_shared_va(), *own;
	pid_t pid;

	ASSERT_LE(0, fd);
	ASSERT_NE(NULL, p);
	own = mmap(NULL, PAGE, RW, ANON, -1, 0);
	ASSERT_NE(MAP_FAILED, own);
	ASSERT_EQ(0, lock_fd(fd, own, PAGE, MLOCKFAST_MODE_DEFERRED));
	ASSERT_EQ(self->vmlck + KB(1), status_kb("VmLck"));
	ASSERT_EQ(0, pipe(up));
	ASSERT_EQ(0, pipe(down));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* fork does not inherit locks: the child starts at 0 */
		if (status_kb("VmLck") != 0)
			_exit(10);
		if (lock_own(fd, p))
			_exit(11);
		say(up[1], 'l');
		hear(down[0]);
		/* the parent's lock through the same file did not touch us */
		if (status_kb("VmLck") != KB(NPAGES))
			_exit(13);
		/* exit with the moves still queued: they go with the pages */
		_exit(0);
	}
	ASSERT_EQ('l', hear(up[0]));
	EXPECT_EQ(self->vmlck + KB(1), status_kb("VmLck"));
	EXPECT_EQ(0, locked_kb(p, p + NPAGES * PAGE));
	EXPECT_EQ(KB(NPAGES), proc_status_kb(pid, "VmLck"));
	EXPECT_EQ(0, lock_fd(fd, p, NPAGES * PAGE, MLOCKFAST_MODE_EAGER));
	EXPECT_EQ(self->vmlck + KB(1 + NPAGES), status_kb("VmLck"));
	EXPECT_EQ(KB(NPAGES), proc_status_kb(pid, "VmLck"));
	say(down[1], 'g');
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st)) TH_LOG("child status %#x", st);
	EXPECT_EQ(0, unlock_fd(fd, p, NPAGES * PAGE));
	EXPECT_EQ(0, unlock_fd(fd, own, PAGE));
	close(fd);
	munmap(p, NPAGES * PAGE);
	munmap(own, PAGE);
}

/*
 * The receiver of a descriptor passed by SCM_RIGHTS locks its own memory
 * with it, never the sender's, also after the sender (the opener, whose mm
 * the file cached) has exited.
 */
TEST_F(sec, fd_passed_by_scm_rights_acts_on_the_receiver)
{
	int sv[2], up[2], st = -1;
	pid_t opener, receiver;
	char *p = map_shared_va();

	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	ASSERT_EQ(0, pipe(up));
	/* The receiver exists before the device is opened: it inherits nothing. */
	receiver = fork();
	ASSERT_LE(0, receiver);
	if (!receiver) {
		int fd = recv_fd(sv[1]);

		if (fd < 0)
			_exit(20);
		/* go when the opener has exited */
		if (hear(sv[1]) != 'x')
			_exit(25);
		if (lock_own(fd, p))
			_exit(21);
		say(up[1], 'l');
		hear(sv[1]);
		if (unlock_fd(fd, p, NPAGES * PAGE) || status_kb("VmLck"))
			_exit(23);
		/* locked again, queued, and left so at exit */
		if (lock_fd(fd, p, NPAGES * PAGE, MLOCKFAST_MODE_DEFERRED))
			_exit(24);
		_exit(0);
	}
	opener = fork();
	ASSERT_LE(0, opener);
	if (!opener) {
		int fd = open(MLOCKFAST_DEVICE, O_RDWR);

		/* its own lock first, so the file caches the opener's mm */
		if (fd < 0 || lock_fd(fd, p, NPAGES * PAGE, MLOCKFAST_MODE_DEFERRED) ||
		    send_fd(sv[0], fd))
			_exit(30);
		_exit(0);
	}
	ASSERT_EQ(opener, waitpid(opener, &st, 0));
	ASSERT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st)) TH_LOG("opener status %#x", st);
	say(sv[0], 'x');
	ASSERT_EQ('l', hear(up[0]));
	/* we (the test) opened nothing and locked nothing */
	EXPECT_EQ(self->vmlck, status_kb("VmLck"));
	EXPECT_EQ(0, locked_kb(p, p + NPAGES * PAGE));
	EXPECT_EQ(KB(NPAGES), proc_status_kb(receiver, "VmLck"));
	say(sv[0], 'g');
	ASSERT_EQ(receiver, waitpid(receiver, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st)) TH_LOG("receiver status %#x", st);
	munmap(p, NPAGES * PAGE);
}

static void set_memlock(unsigned long bytes)
{
	struct rlimit rl = { bytes, bytes };

	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		_exit(97);
}

/* Outcomes a non-root user can see of itself: results, VmLck, Locked. */
static void note_vmlck(struct diff_log *log, const char *label, char *m,
		       size_t len)
{
	diff_note(log, "%s: VmLck %ld kB, Locked %ld kB", label,
		  status_kb("VmLck"), locked_kb(m, m + len));
}

/*
 * The rlimit cases as uid nobody: within, beyond, overlapping, ONFAULT,
 * mlockall(MCL_CURRENT) over the limit, MCL_FUTURE then a mapping over it,
 * then limit 0 (EPERM).  @keep: with CAP_IPC_LOCK, where no limit binds.
 */
static void nobody_limits(const struct path_ops *p, struct diff_log *log,
			  int keep)
{
	char *m = diff_map(0, 32 * PAGE, RW, ANON, -1), *later;

	diff_touch(m, 32 * PAGE, 1);
	if (mlf_fd() < 0)	/* opened as root, kept */
		_exit(96);
	set_memlock(8 * PAGE);
	become_nobody(keep);
	diff_note(log, "uid %d", (int)getuid());
	diff_ret(log, "lock within", p->lock(m, 8 * PAGE));
	diff_ret(log, "lock beyond", p->lock(m, 9 * PAGE));
	diff_ret(log, "lock overlap", p->lock(m + 4 * PAGE, 8 * PAGE));
	diff_ret(log, "lock2 onfault beyond", p->lock2(m + 8 * PAGE, 16 * PAGE,
						      MLOCK_ONFAULT));
	note_vmlck(log, "limited", m, 32 * PAGE);
	diff_ret(log, "unlock", p->unlock(m, 32 * PAGE));
	diff_ret(log, "lockall current over the limit", p->lockall(MCL_CURRENT));
	note_vmlck(log, "lockall current", m, 32 * PAGE);
	diff_ret(log, "unlockall", p->unlockall());
	diff_ret(log, "lockall future", p->lockall(MCL_FUTURE));
	later = mmap(DIFF_BASE + 64 * PAGE, 16 * PAGE, RW,
		     ANON | MAP_FIXED_NOREPLACE, -1, 0);
	diff_note(log, "mmap over the limit under MCL_FUTURE: %s",
		  later == MAP_FAILED ? strerror(errno) : "mapped");
	note_vmlck(log, "future", m, 128 * PAGE);
	diff_ret(log, "unlockall", p->unlockall());
	if (later != MAP_FAILED)
		munmap(later, 16 * PAGE);
	set_memlock(0);
	diff_ret(log, "lock with limit 0", p->lock(m, PAGE));
	diff_ret(log, "lock2 onfault with limit 0", p->lock2(m, PAGE, MLOCK_ONFAULT));
	diff_ret(log, "lockall with limit 0", p->lockall(MCL_CURRENT));
	diff_ret(log, "lockall future with limit 0", p->lockall(MCL_FUTURE));
	diff_ret(log, "unlock with limit 0", p->unlock(m, PAGE));
	note_vmlck(log, "after", m, 32 * PAGE);
}

static void scn_nobody(const struct path_ops *p, struct diff_log *log)
{
	nobody_limits(p, log, 0);
}

static void scn_nobody_ipc_lock(const struct path_ops *p, struct diff_log *log)
{
	nobody_limits(p, log, 1);
}

/* Each path (syscall, eager, deferred, reclaim) in its own child, compared. */
TEST_F(sec, nobody_rlimit_as_mlock)
{
	ASSERT_LE(0, mlf_fd());
	EXPECT_EQ(0, diff_run("nobody_rlimit", scn_nobody));
}

TEST_F(sec, nobody_with_cap_ipc_lock_as_mlock)
{
	ASSERT_LE(0, mlf_fd());
	EXPECT_EQ(0, diff_run("nobody_ipc_lock", scn_nobody_ipc_lock));
}

static int reload(const char *params)
{
	return run("rmmod mlockfast && modprobe mlockfast %s", params);
}

/*
 * As nobody: with the default dev_mode the device cannot be opened; with
 * dev_mode=0666 it can, and then grants what mlock(2) grants, no more.
 */
static int nobody_opens(int expect_open)
{
	int st = -1;
	pid_t pid = fork();

	if (!pid) {
		char *m = mmap(NULL, 8 * PAGE, RW, ANON, -1, 0);
		int fd, e[6];

		set_memlock(4 * PAGE);
		become_nobody(0);
		fd = open(MLOCKFAST_DEVICE, O_RDWR);
		if (!expect_open)
			_exit(fd < 0 && errno == EACCES ? 0 : 40);
		if (fd < 0 || m == MAP_FAILED)
			_exit(41);
		e[0] = lock_fd(fd, m, 4 * PAGE, 0);
		e[1] = lock_fd(fd, m, 5 * PAGE, 0);
		e[2] = unlock_fd(fd, m, 8 * PAGE);
		e[3] = mlock(m, 4 * PAGE) ? errno : 0;
		e[4] = mlock(m, 5 * PAGE) ? errno : 0;
		e[5] = munlock(m, 8 * PAGE) ? errno : 0;
		_exit(e[0] || e[1] != ENOMEM || e[2] || e[0] != e[3] ||
		      e[1] != e[4] || e[2] != e[5] || status_kb("VmLck") ? 42 : 0);
	}
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TEST_F(sec, relaxed_dev_mode_grants_no_more_than_mlock)
{
	struct stat s;

	ASSERT_EQ(0, stat(MLOCKFAST_DEVICE, &s));
	ASSERT_EQ(0600, s.st_mode & 07777);
	EXPECT_EQ(0, nobody_opens(0));
	mlf_fd_close();		/* rmmod needs the device closed */
	ASSERT_EQ(0, reload("dev_mode=0666"));
	EXPECT_EQ(0, nobody_opens(1));
	ASSERT_EQ(0, reload(""));
	ASSERT_EQ(0, stat(MLOCKFAST_DEVICE, &s));
	EXPECT_EQ(0600, s.st_mode & 07777);
}

#define CG	CG_ROOT "/mlf-sec"
#define CG_MAX	(8L << 20)

/*
 * In a fresh child of a fresh cgroup with memory.max 8 MiB (no swap in
 * the guest): lock @sz bytes of untouched anonymous memory by @how (0:
 * mlock(2), else the ioctl in that mode).  The outcome: the call's errno
 * and whether the group was charged for what it locked, or the signal
 * that killed the child; whether the group ever went over memory.max.
 */
static void cg_outcome(unsigned int how, size_t sz, char *out, size_t len)
{
	char pid[16], *peak, *events;
	int st = -1, pfd[2], e[2] = { -1, 0 };
	pid_t c;

	rmdir(CG);
	if (mkdir(CG, 0755) || write_file_str(CG "/memory.max", "8M") || pipe(pfd)) {
		snprintf(out, len, "setup: %s", strerror(errno));
		return;
	}
	c = fork();
	if (!c) {
		char *m, *cur;
		int r[2];

		snprintf(pid, sizeof(pid), "%d", getpid());
		if (write_file_str(CG "/cgroup.procs", pid))
			_exit(50);
		m = mmap(NULL, sz, RW, ANON, -1, 0);
		if (m == MAP_FAILED)
			_exit(51);
		r[0] = how ? mlf_lock2(m, sz, how) : mlock(m, sz);
		r[0] = r[0] ? errno : 0;
		cur = read_file(CG "/memory.current");
		r[1] = cur && strtol(cur, NULL, 10) >= (long)sz;
		if (write(pfd[1], r, sizeof(r)) != sizeof(r))
			_exit(52);
		_exit(0);
	}
	close(pfd[1]);
	if (read(pfd[0], e, sizeof(e)) != sizeof(e))
		e[0] = -1;
	close(pfd[0]);
	waitpid(c, &st, 0);
	peak = read_file(CG "/memory.peak");
	events = read_file(CG "/memory.events");
	snprintf(out, len, "%s%s %s, %s, peak %s max",
		 e[0] < 0 ? "no result" : e[0] ? strerror(e[0]) : "locked",
		 e[0] < 0 ? "" : e[1] ? " and charged" : " not charged",
		 WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "exited",
		 events && strstr(events, "oom_kill 0") ? "no oom kill" : "oom kill",
		 peak && strtol(peak, NULL, 10) <= CG_MAX ? "<=" : ">");
	free(peak);
	free(events);
	rmdir(CG);
}

TEST_F_TIMEOUT(sec, cgroup_memory_max_holds, 120)
{
	static const unsigned int how[] = {
		0, MLOCKFAST_MODE_EAGER, MLOCKFAST_MODE_DEFERRED,
		MLOCKFAST_MODE_RECLAIM,
	};
	static const size_t sizes[] = { 4 << 20, 16 << 20 };
	char want[160], got[160];
	int mounted;

	ASSERT_LE(0, mlf_fd());
	ASSERT_EQ(0, cgroup2_memory_ready(&mounted)) TH_LOG("no cgroup v2 memory controller");
	for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++) {
		cg_outcome(0, sizes[j], want, sizeof(want));
		TH_LOG("mlock(2) of %zu MiB under memory.max 8M: %s",
		       sizes[j] >> 20, want);
		/* within the limit it is locked and charged; never over the limit */
		if (sizes[j] < CG_MAX)
			EXPECT_NE(NULL, strstr(want, "locked and charged"));
		EXPECT_NE(NULL, strstr(want, "peak <= max"));
		for (size_t i = 1; i < sizeof(how) / sizeof(how[0]); i++) {
			cg_outcome(how[i], sizes[j], got, sizeof(got));
			EXPECT_STREQ(want, got) TH_LOG("mode %#x", how[i]);
		}
	}
	cgroup2_memory_done(mounted);
}

TEST_HARNESS_MAIN
