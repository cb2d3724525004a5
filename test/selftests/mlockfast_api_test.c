// SPDX-License-Identifier: GPL-2.0
/*
 * The parts of the ABI the syscalls have no twin for: LOCKV/UNLOCKV and
 * their done count, the mode bits, DRAIN, STATS (ioctl and sysfs), legacy
 * mode's drains, and unloading with deferred moves still queued.  Every
 * test must leave Mlocked, Unevictable and VmLck as it found them; the
 * fixture checks that.
 */
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mlf_diff.h"
#include "mlf_seq.h"
#include "mlf_test.h"

#define PARAM(name)	"/sys/module/mlockfast/parameters/" name
#define SYSFS_STATS	"/sys/class/misc/mlockfast/stats"
#define RW		(PROT_READ | PROT_WRITE)
#define KB(pages)	((long)(pages) * (long)(PAGE / 1024))
#define NPAGES		64

/*
 * drain_everything() without keeping a descriptor open (the unload test
 * rmmods) and without forking (a fork write-protects every private page,
 * which changes what a later lock has to do).
 */
static void drain_all(void)
{
	int fd = open(MLOCKFAST_DEVICE, O_RDWR | O_CLOEXEC);

	if (fd >= 0) {
		ioctl(fd, MLOCKFAST_IOC_DRAIN);
		close(fd);
	}
	fd = open("/proc/sys/vm/compact_memory", O_WRONLY);
	if (fd >= 0) {
		if (write(fd, "1", 1) != 1)
			perror("compact_memory");
		close(fd);
	}
}

static int loaded(void)
{
	char *mods = read_file("/proc/modules");
	int yes = mods && strstr(mods, "mlockfast ");

	free(mods);
	return yes;
}

static int set_param(const char *path, long v)
{
	return write_file_long(path, v);
}

/*
 * An anonymous mapping of @pages, optionally written to, off the LRU
 * batches (so a move to the unevictable list is counted at once).
 */
static char *anon(size_t pages, int touch)
{
	char *p = mmap(NULL, pages * PAGE, RW, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	madvise(p, pages * PAGE, MADV_NOHUGEPAGE);
	if (touch) {
		diff_touch(p, pages * PAGE, 1);
		drain_all();
	}
	return p;
}

/*
 * Deferred moves' tests start alike: defer_ms set, @pages of touched anon
 * memory locked in deferred mode.  *ue and *s0 are read just before the
 * lock.  NULL if any step fails.
 */
static char *lock_deferred(long defer_ms, size_t pages, long *ue,
			   struct mlockfast_stats *s0)
{
	char *m;

	if (mlf_fd() < 0 || mlf_make_state() ||
	    set_param(PARAM("defer_ms"), defer_ms))
		return NULL;
	m = anon(pages, 1);
	if (!m)
		return NULL;
	*ue = meminfo_kb("Unevictable");
	if (mlf_stats(s0) ||
	    mlf_lock2(m, pages * PAGE, MLOCKFAST_MODE_DEFERRED)) {
		munmap(m, pages * PAGE);
		return NULL;
	}
	return m;
}

/* Is the VMA holding @addr VM_LOCKED ("lo" in VmFlags)?  -1: no VMA. */
static int vma_locked(const void *addr)
{
	char *smaps = read_file("/proc/self/smaps"), *l;
	unsigned long s, e, a = (unsigned long)addr;
	int in = 0, ret = -1;

	for (l = smaps; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (sscanf(l, "%lx-%lx ", &s, &e) == 2 && strchr(l, ' ') &&
		    strchr(l, '-') < strchr(l, ' ')) {
			in = s <= a && a < e;
			continue;
		}
		if (in && !strncmp(l, "VmFlags:", 8)) {
			ret = strstr(l, " lo") && strstr(l, " lo") < strchr(l, '\n') ?
			      1 : 0;
			break;
		}
	}
	free(smaps);
	return ret;
}

static int vec_call(unsigned long cmd, const struct mlockfast_iovec *iov,
		    unsigned int count, unsigned int flags, unsigned int *done)
{
	struct mlockfast_vec v = {
		.size = sizeof(v), .flags = flags, .iov = (uintptr_t)iov,
		.count = count,
	};
	int ret = ioctl(mlf_fd(), cmd, &v);

	*done = v.done;
	return ret < 0 ? -1 : 0;
}

/* A move test's end: unlock the NPAGES at @m; Unevictable back to @ue. */
static void unlock_and_expect(struct __test_metadata *_metadata, char *m,
			      long ue)
{
	EXPECT_EQ(0, mlf_unlock(m, NPAGES * PAGE));
	drain_all();
	EXPECT_EQ(ue, meminfo_kb("Unevictable"));
	munmap(m, NPAGES * PAGE);
}

#define STAT_DELTA(a, b, f)	((long)((b).f - (a).f))

FIXTURE(api) {
	long mlocked, unevictable, vmlck, defer_ms;
};

FIXTURE_SETUP(api)
{
	/*
	 * One CPU: compaction (in drain_all()) puts the pages it moves on
	 * this CPU's LRU batch, which a lock's own drain then empties, so
	 * touched pages are on the LRU when a test counts moves.
	 */
	ASSERT_EQ(0, seq_pin(0));
	drain_all();
	self->mlocked = meminfo_kb("Mlocked");
	self->unevictable = meminfo_kb("Unevictable");
	self->vmlck = status_kb("VmLck");
	self->defer_ms = read_long(PARAM("defer_ms"));
	ASSERT_LE(0, self->defer_ms);
}

FIXTURE_TEARDOWN(api)
{
	/* A test that failed half way may have left the module out. */
	if (!loaded())
		EXPECT_EQ(0, run("modprobe mlockfast"));
	if (read_long(PARAM("defer_ms")) != self->defer_ms)
		EXPECT_EQ(0, set_param(PARAM("defer_ms"), self->defer_ms));
	EXPECT_EQ(self->vmlck, status_kb("VmLck"));
	/* Anything still locked is the test's own; leaks are what remains. */
	munlockall();
	drain_all();
	EXPECT_EQ(self->mlocked, meminfo_kb("Mlocked"));
	EXPECT_EQ(self->unevictable, meminfo_kb("Unevictable"));
	if (self->mlocked != meminfo_kb("Mlocked"))
		mlocked_pages_report();
}

TEST_F(api, lockv_done_counts_every_range)
{
	char *m = anon(12, 1);
	struct mlockfast_iovec iov[3] = {
		{ (uintptr_t)m, 2 * PAGE },
		{ (uintptr_t)m + 4 * PAGE, 3 * PAGE },
		{ (uintptr_t)m + 8 * PAGE, 4 * PAGE },
	};
	unsigned int done = 99;

	ASSERT_NE(NULL, m);
	ASSERT_LE(0, mlf_fd());
	EXPECT_EQ(0, vec_call(MLOCKFAST_IOC_LOCKV, iov, 3,
			      MLOCKFAST_MODE_EAGER, &done));
	EXPECT_EQ(3, done);
	EXPECT_EQ(self->vmlck + KB(9), status_kb("VmLck"));
	EXPECT_EQ(KB(9), locked_kb(m, m + 12 * PAGE));
	EXPECT_EQ(0, vma_locked(m + 3 * PAGE));
	EXPECT_EQ(0, vec_call(MLOCKFAST_IOC_UNLOCKV, iov, 3, 0, &done));
	EXPECT_EQ(3, done);
	EXPECT_EQ(self->vmlck, status_kb("VmLck"));
	munmap(m, 12 * PAGE);
}

/*
 * A hole in the second range: as three mlock() calls, the first range is
 * locked, the second up to the hole (mlock's partial effect), the third
 * not at all; done is 1, the index of the failing range.
 */
TEST_F(api, lockv_stops_at_first_error)
{
	char *m = anon(12, 1);
	struct mlockfast_iovec iov[3] = {
		{ (uintptr_t)m, 2 * PAGE },
		{ (uintptr_t)m + 4 * PAGE, 3 * PAGE },
		{ (uintptr_t)m + 8 * PAGE, 2 * PAGE },
	};
	unsigned int done = 99;
	long want;

	ASSERT_NE(NULL, m);
	ASSERT_LE(0, mlf_fd());
	ASSERT_EQ(0, munmap(m + 5 * PAGE, PAGE));

	/* The syscalls' answer first. */
	ASSERT_EQ(0, mlock(m, 2 * PAGE));
	ASSERT_EQ(-1, mlock(m + 4 * PAGE, 3 * PAGE));
	ASSERT_EQ(ENOMEM, errno);
	want = status_kb("VmLck");
	ASSERT_EQ(0, munlock(m, 5 * PAGE));
	ASSERT_EQ(self->vmlck, status_kb("VmLck"));

	errno = 0;
	EXPECT_EQ(-1, vec_call(MLOCKFAST_IOC_LOCKV, iov, 3,
			       MLOCKFAST_MODE_DEFERRED, &done));
	EXPECT_EQ(ENOMEM, errno);
	EXPECT_EQ(1, done);
	EXPECT_EQ(want, status_kb("VmLck"));
	EXPECT_EQ(1, vma_locked(m + PAGE));
	EXPECT_EQ(1, vma_locked(m + 4 * PAGE));
	EXPECT_EQ(0, vma_locked(m + 6 * PAGE));
	EXPECT_EQ(0, vma_locked(m + 8 * PAGE));

	/* UNLOCKV the same way: lock all there is, then unlock over the hole. */
	ASSERT_EQ(0, mlock(m, 5 * PAGE));
	ASSERT_EQ(0, mlock(m + 6 * PAGE, 6 * PAGE));
	errno = 0;
	EXPECT_EQ(-1, vec_call(MLOCKFAST_IOC_UNLOCKV, iov, 3, 0, &done));
	EXPECT_EQ(ENOMEM, errno);
	EXPECT_EQ(1, done);
	EXPECT_EQ(0, vma_locked(m));
	EXPECT_EQ(0, vma_locked(m + 4 * PAGE));
	EXPECT_EQ(1, vma_locked(m + 6 * PAGE));
	EXPECT_EQ(1, vma_locked(m + 8 * PAGE));
	EXPECT_EQ(0, munlock(m + 6 * PAGE, 6 * PAGE));
	EXPECT_EQ(0, munlock(m, 5 * PAGE));
	munmap(m, 12 * PAGE);
}

/* One LOCKV/UNLOCKV call and what it gave, as seen by the caller. */
struct vec_spec {
	unsigned long cmd;
	const struct mlockfast_iovec *iov;
	unsigned int count, flags;
};

struct vec_out {
	int ret, err;
	unsigned int done;
	long vmlck;
};

#define VEC_WAIT_S	10

/*
 * Make the calls in order in a child, with a descriptor of its own, and
 * wait at most VEC_WAIT_S seconds for each: a call that faults on its
 * vector while holding mmap_lock for writing never returns, and must fail
 * the test rather than hang it.  Returns -1 if all returned, else the
 * index of the call that hung (the child is killed).
 */
static int vec_in_child(const struct vec_spec *spec, int n, struct vec_out *out)
{
	int pfd[2], i, st;
	pid_t pid;

	if (pipe(pfd))
		return 0;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int fd = open(MLOCKFAST_DEVICE, O_RDWR);

		close(pfd[0]);
		for (i = 0; i < n; i++) {
			struct mlockfast_vec v = {
				.size = sizeof(v), .flags = spec[i].flags,
				.iov = (uintptr_t)spec[i].iov,
				.count = spec[i].count,
			};
			struct vec_out o;

			errno = 0;
			o.ret = ioctl(fd, spec[i].cmd, &v) ? -1 : 0;
			o.err = errno;
			o.done = v.done;
			o.vmlck = status_kb("VmLck");
			if (write(pfd[1], &o, sizeof(o)) != sizeof(o))
				_exit(1);
		}
		_exit(0);
	}
	close(pfd[1]);
	for (i = 0; i < n; i++) {
		fd_set set;
		struct timeval tv = { VEC_WAIT_S, 0 };

		FD_ZERO(&set);
		FD_SET(pfd[0], &set);
		if (select(pfd[0] + 1, &set, NULL, NULL, &tv) != 1 ||
		    read(pfd[0], &out[i], sizeof(out[i])) != sizeof(out[i])) {
			kill(pid, SIGKILL);
			break;
		}
	}
	close(pfd[0]);
	waitpid(pid, &st, 0);
	return i == n ? -1 : i;
}

TEST_F(api, lockv_bad_iov_pointer_is_efault)
{
	/* iov[0] at the end of a page, iov[1] in the PROT_NONE page after. */
	char *pages = mmap(NULL, 2 * PAGE, RW, MAP_PRIVATE | MAP_ANONYMOUS,
			   -1, 0);
	char *m = anon(4, 1);
	struct mlockfast_iovec *iov;
	void * const bad[] = { NULL, (void *)1, (void *)0xffff888000000000UL };
	struct vec_out out[2];
	unsigned int done;
	int hung;

	ASSERT_NE(MAP_FAILED, pages);
	ASSERT_NE(NULL, m);
	ASSERT_LE(0, mlf_fd());
	ASSERT_EQ(0, mprotect(pages + PAGE, PAGE, PROT_NONE));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		done = 99;
		errno = 0;
		EXPECT_EQ(-1, vec_call(MLOCKFAST_IOC_LOCKV, bad[i], 2,
				       MLOCKFAST_MODE_EAGER, &done));
		EXPECT_EQ(EFAULT, errno);
		EXPECT_EQ(0, done);
		errno = 0;
		EXPECT_EQ(-1, vec_call(MLOCKFAST_IOC_UNLOCKV, bad[i], 1, 0,
				       &done));
		EXPECT_EQ(EFAULT, errno);
		EXPECT_EQ(0, done);
	}
	EXPECT_EQ(self->vmlck, status_kb("VmLck"));

	/* The first range is done, the second cannot be read. */
	iov = (struct mlockfast_iovec *)(pages + PAGE) - 1;
	iov->addr = (uintptr_t)m;
	iov->len = 2 * PAGE;
	{
		const struct vec_spec spec[] = {
			{ MLOCKFAST_IOC_LOCKV, iov, 2, MLOCKFAST_MODE_EAGER },
			{ MLOCKFAST_IOC_UNLOCKV, iov, 2, 0 },
		};

		hung = vec_in_child(spec, 2, out);
	}
	ASSERT_EQ(-1, hung)
		TH_LOG("%s did not return in %d s: it faulted on the vector with mmap_lock held",
		       hung ? "UNLOCKV" : "LOCKV", VEC_WAIT_S);
	EXPECT_EQ(-1, out[0].ret);
	EXPECT_EQ(EFAULT, out[0].err);
	EXPECT_EQ(1, out[0].done);
	EXPECT_EQ(self->vmlck + KB(2), out[0].vmlck);
	EXPECT_EQ(-1, out[1].ret);
	EXPECT_EQ(EFAULT, out[1].err);
	EXPECT_EQ(1, out[1].done);
	EXPECT_EQ(self->vmlck, out[1].vmlck);
	munmap(pages, 2 * PAGE);
	munmap(m, 4 * PAGE);
}

/*
 * A valid vector whose second element sits on a page not yet faulted in
 * (untouched anonymous memory reads as zeros: {NULL, 0}, a range mlock
 * accepts).  Reading it faults, which is fine as long as nothing holds
 * mmap_lock meanwhile.  The first range needs no populate (onfault, and
 * unlocking never does), so nothing makes the module drop the lock.
 */
TEST_F(api, lockv_vector_on_unfaulted_page)
{
	char *m = anon(4, 1);
	char *vec = mmap(NULL, 2 * PAGE, RW, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct mlockfast_iovec *v = (struct mlockfast_iovec *)(vec + PAGE) - 1;
	struct vec_out out[2];
	int hung;

	ASSERT_NE(NULL, m);
	ASSERT_NE(MAP_FAILED, vec);
	v[0] = (struct mlockfast_iovec){ (uintptr_t)m, 2 * PAGE };
	{
		const struct vec_spec spec[] = {
			{ MLOCKFAST_IOC_LOCKV, v, 2,
			  MLOCK_ONFAULT | MLOCKFAST_MODE_DEFERRED },
			{ MLOCKFAST_IOC_UNLOCKV, v, 2, 0 },
		};

		hung = vec_in_child(spec, 2, out);
	}
	ASSERT_EQ(-1, hung)
		TH_LOG("%s did not return in %d s: it faulted on the vector with mmap_lock held",
		       hung ? "UNLOCKV" : "LOCKV", VEC_WAIT_S);
	EXPECT_EQ(0, out[0].ret);
	EXPECT_EQ(2, out[0].done);
	EXPECT_EQ(self->vmlck + KB(2), out[0].vmlck);
	EXPECT_EQ(0, out[1].ret);
	EXPECT_EQ(2, out[1].done);
	EXPECT_EQ(self->vmlck, out[1].vmlck);
	munmap(vec, 2 * PAGE);
	munmap(m, 4 * PAGE);
}

TEST_F(api, lockv_count_zero_and_limits)
{
	static struct mlockfast_iovec iov[MLOCKFAST_VEC_MAX + 1];
	char *m = anon(4, 1);
	unsigned int done;

	ASSERT_NE(NULL, m);
	ASSERT_LE(0, mlf_fd());
	/* Nothing to do is not an error, and the vector is not read. */
	done = 99;
	EXPECT_EQ(0, vec_call(MLOCKFAST_IOC_LOCKV, NULL, 0, 0, &done));
	EXPECT_EQ(0, done);
	done = 99;
	EXPECT_EQ(0, vec_call(MLOCKFAST_IOC_UNLOCKV, NULL, 0, 0, &done));
	EXPECT_EQ(0, done);

	/* MLOCKFAST_VEC_MAX ranges are fine (length 0: nothing locked) ... */
	for (int i = 0; i <= MLOCKFAST_VEC_MAX; i++)
		iov[i].addr = (uintptr_t)m;
	done = 99;
	EXPECT_EQ(0, vec_call(MLOCKFAST_IOC_LOCKV, iov, MLOCKFAST_VEC_MAX,
			      MLOCKFAST_MODE_EAGER, &done));
	EXPECT_EQ(MLOCKFAST_VEC_MAX, done);
	/* ... one more is EINVAL, before anything is done. */
	iov[0].len = PAGE;
	errno = 0;
	EXPECT_EQ(-1, vec_call(MLOCKFAST_IOC_LOCKV, iov, MLOCKFAST_VEC_MAX + 1,
			       MLOCKFAST_MODE_EAGER, &done));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(-1, vec_call(MLOCKFAST_IOC_UNLOCKV, iov,
			       MLOCKFAST_VEC_MAX + 1, 0, &done));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(self->vmlck, status_kb("VmLck"));
	munmap(m, 4 * PAGE);
}

TEST_F(api, lockv_bad_fields_are_einval)
{
	char *m = anon(4, 1);
	struct mlockfast_iovec iov = { (uintptr_t)m, 4 * PAGE };
	struct mlockfast_vec v = {
		.size = sizeof(v), .iov = (uintptr_t)&iov, .count = 1,
	};
	const unsigned long cmds[] = {
		MLOCKFAST_IOC_LOCKV, MLOCKFAST_IOC_UNLOCKV,
	};

	ASSERT_NE(NULL, m);
	ASSERT_LE(0, mlf_fd());
	for (int c = 0; c < 2; c++) {
		/* done must come in as 0 */
		v.done = 1;
		errno = 0;
		EXPECT_EQ(-1, ioctl(mlf_fd(), cmds[c], &v));
		EXPECT_EQ(EINVAL, errno);
		v.done = 0;
		v.size = sizeof(v) + 8;
		errno = 0;
		EXPECT_EQ(-1, ioctl(mlf_fd(), cmds[c], &v));
		EXPECT_EQ(EINVAL, errno);
		v.size = sizeof(v);
		v.reserved[0] = 1;
		errno = 0;
		EXPECT_EQ(-1, ioctl(mlf_fd(), cmds[c], &v));
		EXPECT_EQ(EINVAL, errno);
		v.reserved[0] = 0;
		v.flags = 7U << MLOCKFAST_MODE_SHIFT;	/* no such mode */
		errno = 0;
		EXPECT_EQ(-1, ioctl(mlf_fd(), cmds[c], &v));
		EXPECT_EQ(EINVAL, errno);
		v.flags = 0;
	}
	/* mlock2's flag check, and UNLOCKV takes no lock flags at all */
	v.flags = 2;
	errno = 0;
	EXPECT_EQ(-1, ioctl(mlf_fd(), MLOCKFAST_IOC_LOCKV, &v));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, v.done);
	v.flags = MLOCK_ONFAULT;
	errno = 0;
	EXPECT_EQ(-1, ioctl(mlf_fd(), MLOCKFAST_IOC_UNLOCKV, &v));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(self->vmlck, status_kb("VmLck"));
	munmap(m, 4 * PAGE);
}

/*
 * What each way of locking leaves: VmLck, smaps Locked and the change in
 * Mlocked, for one shape of mapping.  @how: 0 the syscall, else the mode
 * bits + 1 (so that MODE_DEFAULT can be asked for too).
 */
struct lock_result {
	long vmlck, locked, mlocked;
};

enum shape { SH_ANON_TOUCHED, SH_ANON_UNTOUCHED, SH_MEMFD_HALF, SH_ONFAULT,
	     SH_LOCKALL, NR_SHAPES };

#define SHAPE_BASE	((char *)0x280000000000UL)

static int lock_shape(enum shape sh, int how, struct lock_result *r)
{
	unsigned int mode = how ? (unsigned int)how - 1 : 0;
	long ml0 = meminfo_kb("Mlocked");
	int fd = -1, ret;
	char *m;

	if (sh == SH_MEMFD_HALF) {
		fd = memfd_create("mlf-api", 0);
		if (fd < 0 || ftruncate(fd, 16 * PAGE))
			return -1;
		m = mmap(SHAPE_BASE, 16 * PAGE, RW, MAP_SHARED | MAP_FIXED_NOREPLACE,
			 fd, 0);
	} else {
		m = mmap(SHAPE_BASE, 16 * PAGE, RW,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	}
	if (m != SHAPE_BASE)
		return -1;
	if (sh != SH_ANON_UNTOUCHED)
		diff_touch(m, (sh == SH_MEMFD_HALF || sh == SH_ONFAULT ? 8 : 16) *
			   PAGE, 1);
	switch (sh) {
	case SH_ONFAULT:
		ret = how ? mlf_lock2(m, 16 * PAGE, MLOCK_ONFAULT | mode) :
			    (int)syscall(SYS_mlock2, m, 16 * PAGE, MLOCK_ONFAULT);
		break;
	case SH_LOCKALL:
		ret = how ? mlf_lockall(MCL_CURRENT | mode) : mlockall(MCL_CURRENT);
		break;
	default:
		ret = how ? mlf_lock2(m, 16 * PAGE, mode) : mlock(m, 16 * PAGE);
		break;
	}
	r->vmlck = status_kb("VmLck");
	r->locked = locked_kb(m, m + 16 * PAGE);
	r->mlocked = meminfo_kb("Mlocked") - ml0;
	if (sh == SH_LOCKALL)
		munlockall();
	else
		munlock(m, 16 * PAGE);
	munmap(m, 16 * PAGE);
	if (fd >= 0)
		close(fd);
	return ret;
}

TEST_F(api, every_mode_matches_the_syscall)
{
	static const unsigned int modes[] = {
		MLOCKFAST_MODE_DEFAULT, MLOCKFAST_MODE_EAGER,
		MLOCKFAST_MODE_DEFERRED, MLOCKFAST_MODE_RECLAIM,
		MLOCKFAST_MODE_LEGACY,
	};
	static const char * const shapes[] = {
		"anon touched", "anon untouched", "memfd half touched",
		"onfault", "lockall current",
	};
	struct lock_result want, got;

	ASSERT_LE(0, mlf_fd());
	/* Warm up: the heap must not grow between the runs (mlockall). */
	ASSERT_EQ(0, lock_shape(SH_LOCKALL, 0, &want));
	for (int sh = 0; sh < NR_SHAPES; sh++) {
		ASSERT_EQ(0, lock_shape(sh, 0, &want));
		EXPECT_LT(0, want.vmlck);
		for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
			EXPECT_EQ(0, lock_shape(sh, modes[i] + 1, &got))
				TH_LOG("%s, mode %#x", shapes[sh], modes[i]);
			EXPECT_EQ(want.vmlck, got.vmlck)
				TH_LOG("%s, mode %#x", shapes[sh], modes[i]);
			EXPECT_EQ(want.locked, got.locked)
				TH_LOG("%s, mode %#x", shapes[sh], modes[i]);
			EXPECT_EQ(want.mlocked, got.mlocked)
				TH_LOG("%s, mode %#x", shapes[sh], modes[i]);
		}
	}
}

/* The page frame behind @p (we are root), 0 if none. */
static uint64_t pfn_of(const void *p)
{
	int fd = open("/proc/self/pagemap", O_RDONLY);
	uint64_t e = 0;

	if (fd >= 0) {
		if (pread(fd, &e, 8, (uintptr_t)p / PAGE * 8) != 8)
			e = 0;
		close(fd);
	}
	return e & (1ULL << 63) ? e & ((1ULL << 55) - 1) : 0;
}

/*
 * After a fork (the child gone), private pages are write-protected and
 * locking them write-faults each one: the syscall reuses the page, as
 * nothing else holds it.  A lock must not hold a reference of its own
 * across that fault, or every page is copied instead.
 */
TEST_F(api, lock_after_fork_keeps_the_pages)
{
	static const unsigned int modes[] = {
		MLOCKFAST_MODE_EAGER, MLOCKFAST_MODE_DEFERRED,
		MLOCKFAST_MODE_RECLAIM, MLOCKFAST_MODE_LEGACY,
	};
	uint64_t before[16];

	ASSERT_LE(0, mlf_fd());
	ASSERT_EQ(0, set_param(PARAM("defer_ms"), 100000));
	for (int i = -1; i < (int)(sizeof(modes) / sizeof(modes[0])); i++) {
		char *m = anon(16, 1);
		int moved = 0, ret;
		pid_t pid;

		ASSERT_NE(NULL, m);
		fflush(NULL);
		pid = fork();
		if (pid == 0)
			_exit(0);
		ASSERT_EQ(pid, waitpid(pid, NULL, 0));
		for (int p = 0; p < 16; p++)
			before[p] = pfn_of(m + p * PAGE);
		ret = i < 0 ? mlock(m, 16 * PAGE) :
		      mlf_lock2(m, 16 * PAGE, modes[i]);
		EXPECT_EQ(0, ret);
		for (int p = 0; p < 16; p++)
			moved += pfn_of(m + p * PAGE) != before[p];
		EXPECT_EQ(0, moved)
			TH_LOG("%s: %d of 16 pages were copied by the lock",
			       i < 0 ? "syscall" : "ioctl", moved);
		if (i >= 0)
			TH_LOG("mode %#x: %d of 16 pages copied", modes[i], moved);
		EXPECT_EQ(0, munlock(m, 16 * PAGE));
		munmap(m, 16 * PAGE);
	}
	ASSERT_EQ(0, mlf_drain());
}

/* Deferred moves wait for DRAIN (the timer is set out of reach). */
TEST_F(api, drain_applies_deferred_moves)
{
	struct mlockfast_stats s0, s1, s2;
	char *m;
	long ue;

	m = lock_deferred(100000, NPAGES, &ue, &s0);
	ASSERT_NE(NULL, m);
	ASSERT_EQ(0, mlf_stats(&s1));
	EXPECT_EQ(NPAGES, STAT_DELTA(s0, s1, moves_queued));
	EXPECT_EQ(NPAGES, STAT_DELTA(s0, s1, pages_locked));
	EXPECT_EQ(0, STAT_DELTA(s0, s1, moves_applied));
	EXPECT_EQ(ue, meminfo_kb("Unevictable"));
	EXPECT_EQ(self->mlocked + KB(NPAGES), meminfo_kb("Mlocked"));

	ASSERT_EQ(0, mlf_drain());
	ASSERT_EQ(0, mlf_stats(&s2));
	EXPECT_EQ(ue + KB(NPAGES), meminfo_kb("Unevictable"));
	EXPECT_EQ(NPAGES, STAT_DELTA(s1, s2, moves_applied));
	EXPECT_LE(1, STAT_DELTA(s1, s2, batches_applied));
	EXPECT_EQ(1, STAT_DELTA(s1, s2, calls_drain));

	unlock_and_expect(_metadata, m, ue);
}

TEST_F(api, eager_moves_before_return)
{
	struct mlockfast_stats s0, s1;
	char *m = anon(NPAGES, 1);
	long ue = meminfo_kb("Unevictable");

	ASSERT_NE(NULL, m);
	ASSERT_LE(0, mlf_fd());
	ASSERT_EQ(0, mlf_stats(&s0));
	ASSERT_EQ(0, mlf_lock2(m, NPAGES * PAGE, MLOCKFAST_MODE_EAGER));
	/* no DRAIN, no drain_everything() */
	EXPECT_EQ(ue + KB(NPAGES), meminfo_kb("Unevictable"));
	ASSERT_EQ(0, mlf_stats(&s1));
	EXPECT_EQ(NPAGES, STAT_DELTA(s0, s1, moves_applied));
	EXPECT_EQ(NPAGES, STAT_DELTA(s0, s1, pages_locked));
	unlock_and_expect(_metadata, m, ue);
}

/*
 * Run @body in a fresh child (an mm with no state of ours), with a
 * descriptor of its own and a deferred-mode range over NPAGES touched pages;
 * the child's exit status is what @body returned (10: its own set-up).
 */
static int in_fresh_child(int (*body)(int dfd, struct mlockfast_range *r))
{
	int st;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int dfd = open(MLOCKFAST_DEVICE, O_RDWR | O_CLOEXEC);
		char *m = anon(NPAGES, 1);
		struct mlockfast_range r = {
			.size = sizeof(r), .flags = MLOCKFAST_MODE_DEFERRED,
			.addr = (uintptr_t)m, .len = NPAGES * PAGE,
		};

		_exit(dfd < 0 || !m ? 10 : body(dfd, &r));
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/*
 * A process's first lock makes no per-process state, which would cost more
 * than a small lock, and so it defers nothing: its moves are paid before it
 * returns.  The second lock through the same file defers them.  In a fresh
 * child, with a descriptor of its own.
 */
static int first_lock_pays(int dfd, struct mlockfast_range *r)
{
	struct mlockfast_stats s0, s1;
	long ue = meminfo_kb("Unevictable");

	if (mlf_stats(&s0))
		return 10;
	if (ioctl(dfd, MLOCKFAST_IOC_LOCK, r) || mlf_stats(&s1))
		return 11;
	if (meminfo_kb("Unevictable") != ue + KB(NPAGES) ||
	    STAT_DELTA(s0, s1, moves_applied) != NPAGES)
		return 12;
	if (ioctl(dfd, MLOCKFAST_IOC_UNLOCK, r) ||
	    meminfo_kb("Unevictable") != ue)
		return 13;
	/* The second: queued, no move yet. */
	if (mlf_stats(&s0) || ioctl(dfd, MLOCKFAST_IOC_LOCK, r) ||
	    mlf_stats(&s1))
		return 14;
	if (meminfo_kb("Unevictable") != ue ||
	    STAT_DELTA(s0, s1, moves_queued) != NPAGES ||
	    STAT_DELTA(s0, s1, moves_applied))
		return 15;
	if (ioctl(dfd, MLOCKFAST_IOC_UNLOCK, r))
		return 16;
	return 0;
}

TEST_F(api, first_lock_of_a_process_pays_its_moves)
{
	ASSERT_EQ(0, set_param(PARAM("defer_ms"), 100000));
	/* 10: set-up; 11: the lock; 12: its moves were not paid at once... */
	EXPECT_EQ(0, in_fresh_child(first_lock_pays));
}

/*
 * A deferred lock held past defer_ms has its moves paid by its work, which
 * walks the pages a second time; eager would have paid them in the lock's
 * own walk.  So once the work has paid, the process's deferred locks run
 * eager, until an unlock comes within defer_ms of its lock again.
 */
static int held_locks_turn_eager(int dfd, struct mlockfast_range *r)
{
	struct mlockfast_stats s0, s1;
	long ue = meminfo_kb("Unevictable");

	if (mlf_make_state_fd(dfd))
		return 10;
	/*
	 * Held until the work pays the moves, due after 50 ms; waited for up
	 * to 10 s, as a guest's vCPU may be descheduled for a while.
	 */
	if (mlf_stats(&s0) || ioctl(dfd, MLOCKFAST_IOC_LOCK, r))
		return 11;
	for (int i = 0; i < 500; i++) {
		if (mlf_stats(&s1))
			return 12;
		if (STAT_DELTA(s0, s1, moves_applied) == NPAGES)
			break;
		usleep(20000);
	}
	if (STAT_DELTA(s0, s1, moves_applied) != NPAGES ||
	    meminfo_kb("Unevictable") != ue + KB(NPAGES))
		return 12;
	/* (no work fires from here on; an unlock is always in time) */
	if (ioctl(dfd, MLOCKFAST_IOC_UNLOCK, r) ||
	    set_param(PARAM("defer_ms"), 100000))
		return 13;
	/* The next deferred lock pays its moves itself... */
	if (mlf_stats(&s0) || ioctl(dfd, MLOCKFAST_IOC_LOCK, r) ||
	    mlf_stats(&s1))
		return 14;
	if (STAT_DELTA(s0, s1, moves_applied) != NPAGES ||
	    meminfo_kb("Unevictable") != ue + KB(NPAGES))
		return 15;
	/* ... and its unlock, in time, makes the next one deferred. */
	if (ioctl(dfd, MLOCKFAST_IOC_UNLOCK, r))
		return 16;
	if (mlf_stats(&s0) || ioctl(dfd, MLOCKFAST_IOC_LOCK, r) ||
	    mlf_stats(&s1))
		return 17;
	if (STAT_DELTA(s0, s1, moves_applied) ||
	    STAT_DELTA(s0, s1, moves_queued) != NPAGES ||
	    meminfo_kb("Unevictable") != ue)
		return 18;
	if (ioctl(dfd, MLOCKFAST_IOC_UNLOCK, r) ||
	    meminfo_kb("Unevictable") != ue)
		return 19;
	return 0;
}

TEST_F(api, locks_held_past_defer_ms_turn_eager)
{
	ASSERT_EQ(0, set_param(PARAM("defer_ms"), 50));
	/* 12: the work did not pay; 15: still deferred; 18: still eager */
	EXPECT_EQ(0, in_fresh_child(held_locks_turn_eager));
}

/*
 * synchronize_srcu() calls (a kprobe's hits) during @n children's exits,
 * each having made its state and left a move queued if @dev, each having
 * done nothing otherwise; -1 on failure.
 */
static long srcu_calls_over_exits(int n, int dev)
{
	const char *t = "/sys/kernel/tracing";
	char path[128], *prof, *l;
	long hits = -1;
	int st;

	snprintf(path, sizeof(path), "%s/kprobe_events", t);
	write_file_str(path, "-:mlf_srcu");
	if (write_file_str(path, "p:mlf_srcu synchronize_srcu"))
		return -1;
	snprintf(path, sizeof(path), "%s/events/kprobes/mlf_srcu/enable", t);
	if (write_file_str(path, "1"))
		return -1;
	for (int i = 0; i < n; i++) {
		pid_t pid;

		fflush(NULL);
		pid = fork();
		if (pid == 0) {
			int dfd = open(MLOCKFAST_DEVICE, O_RDWR | O_CLOEXEC);
			char *m = anon(1, 1);
			struct mlockfast_range r = {
				.size = sizeof(r), .addr = (uintptr_t)m,
				.flags = MLOCKFAST_MODE_DEFERRED, .len = PAGE,
			};

			if (!dev)
				_exit(dfd < 0 || !m);
			_exit(dfd < 0 || !m || mlf_make_state_fd(dfd) ||
			      ioctl(dfd, MLOCKFAST_IOC_LOCK, &r) ? 1 : 0);
		}
		if (pid < 0 || waitpid(pid, &st, 0) != pid ||
		    !WIFEXITED(st) || WEXITSTATUS(st))
			n = 0;
	}
	write_file_str(path, "0");
	snprintf(path, sizeof(path), "%s/kprobe_profile", t);
	prof = read_file(path);
	l = prof ? strstr(prof, "mlf_srcu") : NULL;
	if (l && n)
		hits = strtol(l + strlen("mlf_srcu"), NULL, 10);
	free(prof);
	snprintf(path, sizeof(path), "%s/kprobe_events", t);
	if (write_file_str(path, "-:mlf_srcu"))
		hits = -1;
	return hits;
}

/*
 * A process that used the device exits without waiting for an SRCU grace
 * period: the kernel waits for one at exit only for an mm with a plain mmu
 * notifier (mn_hlist_release()), ~14 ms each under TCG, and the module's
 * per-process state has no notifier.  Counted with a kprobe on
 * synchronize_srcu() over children that each make their state, leave a move
 * queued, and exit, against as many children that exit having done
 * nothing: other callers of it in the guest are rare, but they are counted
 * in both.  A plain notifier would add one call per exit.
 */
TEST_F(api, exit_waits_for_no_grace_period)
{
	const int n = 20;
	long control, dev;

	if (access("/sys/kernel/tracing/kprobe_events", W_OK))
		ASSERT_EQ(0, run("mount -t tracefs nodev /sys/kernel/tracing"));
	ASSERT_EQ(0, set_param(PARAM("defer_ms"), 100000));
	control = srcu_calls_over_exits(n, 0);
	dev = srcu_calls_over_exits(n, 1);
	TH_LOG("synchronize_srcu ran %ld times during %d exits of processes with state, %ld during %d without",
	       dev, n, control, n);
	ASSERT_LE(0, control);
	ASSERT_LE(0, dev);
	EXPECT_GT(control + n / 2, dev);
}

TEST_F(api, unlock_before_drain_cancels_moves)
{
	struct mlockfast_stats s0, s1, s2;
	char *m;
	long ue;

	m = lock_deferred(100000, NPAGES, &ue, &s0);
	ASSERT_NE(NULL, m);
	EXPECT_EQ(ue, meminfo_kb("Unevictable"));
	ASSERT_EQ(0, mlf_unlock_mode(m, NPAGES * PAGE, MLOCKFAST_MODE_DEFERRED));
	ASSERT_EQ(0, mlf_stats(&s1));
	EXPECT_EQ(NPAGES, STAT_DELTA(s0, s1, moves_queued));
	EXPECT_EQ(NPAGES, STAT_DELTA(s0, s1, moves_cancelled));
	EXPECT_EQ(0, STAT_DELTA(s0, s1, moves_applied));
	EXPECT_EQ(NPAGES, STAT_DELTA(s0, s1, pages_unlocked));
	EXPECT_EQ(ue, meminfo_kb("Unevictable"));
	EXPECT_EQ(self->mlocked, meminfo_kb("Mlocked"));
	/* Nothing is left to apply: DRAIN moves nothing. */
	ASSERT_EQ(0, mlf_drain());
	ASSERT_EQ(0, mlf_stats(&s2));
	EXPECT_EQ(0, STAT_DELTA(s1, s2, moves_applied));
	EXPECT_EQ(ue, meminfo_kb("Unevictable"));
	drain_all();
	EXPECT_EQ(ue, meminfo_kb("Unevictable"));
	munmap(m, NPAGES * PAGE);
}

/*
 * Private anon pages locked in deferred mode wait as a run of the process;
 * its work moves them defer_ms later, with no DRAIN and no further call.
 */
#define DUE_MS	200
TEST_F(api, deferred_run_moves_after_defer_ms)
{
	struct mlockfast_stats s0, s1;
	char *m;
	long ue;

	double t0 = seq_now(), t1;
	long ue_early;

	m = lock_deferred(DUE_MS, NPAGES, &ue, &s0);
	ASSERT_NE(NULL, m);
	ue_early = meminfo_kb("Unevictable");
	t1 = seq_now();
	/* Not moved at once (unless this thread slept past the work's time). */
	if (t1 - t0 < DUE_MS / 1e3)
		EXPECT_EQ(ue, ue_early);
	/* The work is due after DUE_MS: waited for up to 10 s. */
	for (int i = 0; i < 500 && meminfo_kb("Unevictable") < ue + KB(NPAGES); i++)
		usleep(20000);
	ASSERT_EQ(0, mlf_stats(&s1));
	EXPECT_EQ(ue + KB(NPAGES), meminfo_kb("Unevictable"));
	EXPECT_EQ(NPAGES, STAT_DELTA(s0, s1, moves_applied));
	EXPECT_EQ(0, STAT_DELTA(s0, s1, calls_drain));
	unlock_and_expect(_metadata, m, ue);
}

/* An unlock of the middle of a run cancels just that part of it. */
TEST_F(api, partial_unlock_trims_the_run)
{
	struct mlockfast_stats s0, s1;
	char *m;
	long ue;

	m = lock_deferred(100000, 16, &ue, &s0);
	ASSERT_NE(NULL, m);
	ASSERT_EQ(0, mlf_unlock(m + 4 * PAGE, 4 * PAGE));
	ASSERT_EQ(0, mlf_drain());
	ASSERT_EQ(0, mlf_stats(&s1));
	EXPECT_EQ(16, STAT_DELTA(s0, s1, moves_queued));
	EXPECT_EQ(4, STAT_DELTA(s0, s1, moves_cancelled));
	EXPECT_EQ(12, STAT_DELTA(s0, s1, moves_applied));
	EXPECT_EQ(ue + KB(12), meminfo_kb("Unevictable"));
	EXPECT_EQ(self->mlocked + KB(12), meminfo_kb("Mlocked"));
	EXPECT_EQ(0, mlf_unlock(m, 16 * PAGE));
	drain_all();
	EXPECT_EQ(ue, meminfo_kb("Unevictable"));
	munmap(m, 16 * PAGE);
}

/* Private anon pages mapped once are left for reclaim to cull. */
TEST_F(api, reclaim_mode_moves_nothing)
{
	struct mlockfast_stats s0, s1;
	char *m = anon(NPAGES, 1);
	long ue = meminfo_kb("Unevictable");

	ASSERT_NE(NULL, m);
	ASSERT_LE(0, mlf_fd());
	/* (a first lock, with no state to hear a fork, moves at once) */
	ASSERT_EQ(0, mlf_make_state());
	ASSERT_EQ(0, mlf_stats(&s0));
	ASSERT_EQ(0, mlf_lock2(m, NPAGES * PAGE, MLOCKFAST_MODE_RECLAIM));
	EXPECT_EQ(self->mlocked + KB(NPAGES), meminfo_kb("Mlocked"));
	ASSERT_EQ(0, mlf_drain());
	ASSERT_EQ(0, mlf_stats(&s1));
	/* Owed, to reclaim (or to a fork): queued, and nothing applied. */
	EXPECT_EQ(NPAGES, STAT_DELTA(s0, s1, moves_queued));
	EXPECT_EQ(0, STAT_DELTA(s0, s1, moves_applied));
	EXPECT_EQ(NPAGES, STAT_DELTA(s0, s1, pages_locked));
	EXPECT_EQ(ue, meminfo_kb("Unevictable"));
	EXPECT_EQ(0, mlf_unlock_mode(m, NPAGES * PAGE, MLOCKFAST_MODE_RECLAIM));
	drain_all();
	EXPECT_EQ(ue, meminfo_kb("Unevictable"));
	munmap(m, NPAGES * PAGE);
}

TEST_F(api, stats_count_calls_errors_and_pages)
{
	struct mlockfast_stats s0, s1;
	char *m = anon(16, 1), *u = anon(8, 0), *hole = anon(1, 0);
	struct mlockfast_iovec iov[2];
	struct mlockfast_range bad = { .size = 1 };
	unsigned int done;
	long mode_pages = 0;

	ASSERT_NE(NULL, m);
	ASSERT_NE(NULL, u);
	ASSERT_NE(NULL, hole);
	ASSERT_EQ(0, munmap(hole, PAGE));
	ASSERT_LE(0, mlf_fd());
	iov[0] = (struct mlockfast_iovec){ (uintptr_t)m, 2 * PAGE };
	iov[1] = (struct mlockfast_iovec){ (uintptr_t)m + 4 * PAGE, 2 * PAGE };
	ASSERT_EQ(0, set_param(PARAM("defer_ms"), 100000));

	ASSERT_EQ(0, mlf_stats(&s0));
	/* 8 touched pages, eager: the module sets PG_mlocked, no populate */
	ASSERT_EQ(0, mlf_lock2(m + 8 * PAGE, 8 * PAGE, MLOCKFAST_MODE_EAGER));
	ASSERT_EQ(0, mlf_stats(&s1));
	EXPECT_EQ(1, STAT_DELTA(s0, s1, calls_lock));
	EXPECT_EQ(0, STAT_DELTA(s0, s1, errors));
	EXPECT_EQ(8, STAT_DELTA(s0, s1, pages_locked));
	EXPECT_EQ(0, STAT_DELTA(s0, s1, populate_calls));
	EXPECT_EQ(1, STAT_DELTA(s0, s1, mode_calls[MLOCKFAST_STAT_MODE_EAGER]));
	ASSERT_EQ(0, mlf_unlock_mode(m + 8 * PAGE, 8 * PAGE, MLOCKFAST_MODE_EAGER));

	/* untouched pages: the kernel's populate faults them in */
	ASSERT_EQ(0, mlf_stats(&s0));
	ASSERT_EQ(0, mlf_lock2(u, 8 * PAGE, MLOCKFAST_MODE_DEFERRED));
	ASSERT_EQ(0, mlf_stats(&s1));
	EXPECT_EQ(1, STAT_DELTA(s0, s1, populate_calls));
	EXPECT_EQ(1, STAT_DELTA(s0, s1, mode_calls[MLOCKFAST_STAT_MODE_DEFERRED]));
	ASSERT_EQ(0, mlf_unlock(u, 8 * PAGE));

	/* deferred lock and unlock before any drain: both by the module */
	ASSERT_EQ(0, mlf_stats(&s0));
	ASSERT_EQ(0, vec_call(MLOCKFAST_IOC_LOCKV, iov, 2,
			      MLOCKFAST_MODE_DEFERRED, &done));
	ASSERT_EQ(0, vec_call(MLOCKFAST_IOC_UNLOCKV, iov, 2,
			      MLOCKFAST_MODE_DEFERRED, &done));
	ASSERT_EQ(0, mlf_stats(&s1));
	EXPECT_EQ(1, STAT_DELTA(s0, s1, calls_lockv));
	EXPECT_EQ(1, STAT_DELTA(s0, s1, calls_unlockv));
	EXPECT_EQ(4, STAT_DELTA(s0, s1, pages_locked));
	EXPECT_EQ(4, STAT_DELTA(s0, s1, pages_unlocked));
	EXPECT_EQ(2, STAT_DELTA(s0, s1, mode_calls[MLOCKFAST_STAT_MODE_DEFERRED]));
	for (int i = 0; i < MLOCKFAST_STAT_NR_MODES; i++)
		mode_pages += STAT_DELTA(s0, s1, mode_pages[i]);
	EXPECT_EQ(STAT_DELTA(s0, s1, pages_locked) +
		  STAT_DELTA(s0, s1, pages_unlocked), mode_pages);

	/* lockall/unlockall, drain, and failures */
	ASSERT_EQ(0, mlf_stats(&s0));
	ASSERT_EQ(0, mlf_lockall(MCL_FUTURE | MLOCKFAST_MODE_RECLAIM));
	ASSERT_EQ(0, mlf_unlockall());
	ASSERT_EQ(0, mlf_drain());
	errno = 0;
	EXPECT_EQ(-1, mlf_lock2(hole, PAGE, MLOCKFAST_MODE_EAGER));
	EXPECT_EQ(ENOMEM, errno);
	errno = 0;
	EXPECT_EQ(-1, ioctl(mlf_fd(), MLOCKFAST_IOC_UNLOCK, &bad));
	EXPECT_EQ(EINVAL, errno);
	errno = 0;
	EXPECT_EQ(-1, mlf_lockall(0));
	EXPECT_EQ(EINVAL, errno);
	ASSERT_EQ(0, mlf_stats(&s1));
	EXPECT_EQ(2, STAT_DELTA(s0, s1, calls_lockall));
	EXPECT_EQ(1, STAT_DELTA(s0, s1, calls_unlockall));
	EXPECT_EQ(1, STAT_DELTA(s0, s1, calls_drain));
	EXPECT_EQ(1, STAT_DELTA(s0, s1, calls_lock));
	EXPECT_EQ(1, STAT_DELTA(s0, s1, calls_unlock));
	EXPECT_EQ(3, STAT_DELTA(s0, s1, errors));
	EXPECT_EQ(1, STAT_DELTA(s0, s1, mode_calls[MLOCKFAST_STAT_MODE_RECLAIM]));
	munmap(m, 16 * PAGE);
	munmap(u, 8 * PAGE);
}

/* Every field of the sysfs file against the ioctl, with nothing moving. */
TEST_F(api, stats_sysfs_matches_ioctl)
{
	static const char * const modes[] = {
		"eager", "deferred", "reclaim", "legacy",
	};
	struct mlockfast_stats a, b;
	char *text = NULL, name[64];
	int tries;

	ASSERT_LE(0, mlf_fd());
	for (tries = 0; tries < 5; tries++) {
		ASSERT_EQ(0, mlf_drain());
		ASSERT_EQ(0, mlf_stats(&a));
		free(text);
		text = read_file(SYSFS_STATS);
		ASSERT_NE(NULL, text);
		ASSERT_EQ(0, mlf_stats(&b));
		if (!memcmp(&a, &b, sizeof(a)))
			break;
	}
	ASSERT_GT(5, tries) TH_LOG("the counters would not hold still");
	EXPECT_EQ(sizeof(a), a.size);
#define CHECK(field) do {						\
		char *p = strstr(text, #field " ");			\
		EXPECT_NE(NULL, p) TH_LOG("no " #field);		\
		if (p)							\
			EXPECT_EQ(a.field, strtoull(p + strlen(#field " "),	\
						    NULL, 10))		\
				TH_LOG(#field);				\
	} while (0)
	CHECK(calls_lock);
	CHECK(calls_unlock);
	CHECK(calls_lockall);
	CHECK(calls_unlockall);
	CHECK(calls_lockv);
	CHECK(calls_unlockv);
	CHECK(calls_drain);
	CHECK(errors);
	CHECK(pages_locked);
	CHECK(pages_unlocked);
	CHECK(moves_queued);
	CHECK(moves_applied);
	CHECK(moves_cancelled);
	CHECK(batches_applied);
	CHECK(populate_calls);
	CHECK(legacy_drains);
	CHECK(mms_tracked);
	CHECK(folios_held);
#undef CHECK
	for (int i = 0; i < MLOCKFAST_STAT_NR_MODES; i++) {
		char *p;

		snprintf(name, sizeof(name), "\n%s_calls ", modes[i]);
		p = strstr(text, name);
		EXPECT_NE(NULL, p) TH_LOG("no %s", name + 1);
		if (p)
			EXPECT_EQ(a.mode_calls[i], strtoull(p + strlen(name), NULL, 10));
		snprintf(name, sizeof(name), "\n%s_pages ", modes[i]);
		p = strstr(text, name);
		EXPECT_NE(NULL, p) TH_LOG("no %s", name + 1);
		if (p)
			EXPECT_EQ(a.mode_pages[i], strtoull(p + strlen(name), NULL, 10));
	}
	/* The counters are since load: a sane sum, nothing negative. */
	EXPECT_LE(a.moves_applied + a.moves_cancelled, a.moves_queued);
	free(text);
}

/*
 * The gauges: no folio reference is held for a lock (shared pages are
 * moved at once, private ones wait as runs, by address); a process that
 * used the device has state until it exits (freed after an RCU grace
 * period, so wait for it).
 */
TEST_F(api, gauges_count_held_folios_and_processes)
{
	const size_t len = 16 * PAGE;
	int memfd = memfd_create("mlf-gauge", 0), go[2], ready[2], st = -1;
	struct mlockfast_stats s0, s1;
	char *m, c = 0;
	pid_t pid;

	ASSERT_LE(0, mlf_fd());
	ASSERT_LE(0, memfd);
	ASSERT_EQ(0, ftruncate(memfd, len));
	ASSERT_EQ(0, set_param(PARAM("defer_ms"), 100000));
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	ASSERT_NE(MAP_FAILED, m);
	memset(m, 1, len);
	ASSERT_EQ(0, mlf_make_state());
	drain_all();
	ASSERT_EQ(0, mlf_stats(&s0));
	EXPECT_EQ(0, s0.folios_held);
	/* Shared pages are moved at once: nothing is held for them. */
	ASSERT_EQ(0, mlf_lock2(m, len, MLOCKFAST_MODE_DEFERRED));
	ASSERT_EQ(0, mlf_stats(&s1));
	EXPECT_EQ(0, s1.folios_held);
	/* Other processes' state may have gone meanwhile. */
	s0.mms_tracked = s1.mms_tracked;
	ASSERT_EQ(0, mlf_drain());
	ASSERT_EQ(0, mlf_stats(&s1));
	EXPECT_EQ(0, s1.folios_held);
	ASSERT_EQ(0, mlf_unlock(m, len));

	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(ready));
	pid = fork();
	if (pid == 0) {
		/* Through the parent's descriptor: state of its own mm. */
		c = mlf_make_state() ||
		    mlf_lock2(m, PAGE, MLOCKFAST_MODE_DEFERRED) ? 'e' : 'l';
		if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(1);
		_exit(0);
	}
	ASSERT_LT(0, pid);
	ASSERT_EQ(1, read(ready[0], &c, 1));
	EXPECT_EQ('l', c);
	ASSERT_EQ(0, mlf_stats(&s1));
	EXPECT_EQ(s0.mms_tracked + 1, s1.mms_tracked);
	ASSERT_EQ(1, write(go[1], "g", 1));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	for (int i = 0; i < 50; i++) {
		ASSERT_EQ(0, mlf_stats(&s1));
		if (s1.mms_tracked == s0.mms_tracked)
			break;
		usleep(100 * 1000);
	}
	EXPECT_EQ(s0.mms_tracked, s1.mms_tracked);
	EXPECT_EQ(0, s1.folios_held);
	munmap(m, len);
	close(memfd);
	close(go[0]);
	close(go[1]);
	close(ready[0]);
	close(ready[1]);
}

TEST_F(api, legacy_drains_once_per_lock_and_lockall)
{
	struct mlockfast_stats s0, s1;
	char *m = anon(8, 1);

	ASSERT_NE(NULL, m);
	ASSERT_LE(0, mlf_fd());
	ASSERT_EQ(0, mlf_stats(&s0));
	ASSERT_EQ(0, mlf_lock2(m, 8 * PAGE, MLOCKFAST_MODE_LEGACY));
	ASSERT_EQ(0, mlf_stats(&s1));
	EXPECT_EQ(1, STAT_DELTA(s0, s1, legacy_drains));
	EXPECT_EQ(1, STAT_DELTA(s0, s1, mode_calls[MLOCKFAST_STAT_MODE_LEGACY]));
	EXPECT_EQ(self->vmlck + KB(8), status_kb("VmLck"));

	ASSERT_EQ(0, mlf_stats(&s0));
	ASSERT_EQ(0, mlf_unlock_mode(m, 8 * PAGE, MLOCKFAST_MODE_LEGACY));
	ASSERT_EQ(0, mlf_stats(&s1));
	EXPECT_EQ(0, STAT_DELTA(s0, s1, legacy_drains));
	EXPECT_EQ(self->vmlck, status_kb("VmLck"));

	ASSERT_EQ(0, mlf_stats(&s0));
	ASSERT_EQ(0, mlf_lock2(m, 8 * PAGE, MLOCK_ONFAULT | MLOCKFAST_MODE_LEGACY));
	ASSERT_EQ(0, mlf_lockall(MCL_CURRENT | MLOCKFAST_MODE_LEGACY));
	ASSERT_EQ(0, mlf_lockall(MCL_FUTURE | MLOCKFAST_MODE_LEGACY));
	ASSERT_EQ(0, mlf_stats(&s1));
	EXPECT_EQ(3, STAT_DELTA(s0, s1, legacy_drains));
	EXPECT_LT(self->vmlck + KB(8), status_kb("VmLck"));
	ASSERT_EQ(0, mlf_unlockall());
	EXPECT_EQ(self->vmlck, status_kb("VmLck"));
	munmap(m, 8 * PAGE);
}

/*
 * Unload with deferred moves queued: they are applied on the way out (the
 * pages are still locked by a live process), none is stranded, and after
 * that process unlocks, everything is back.  The test process never opens
 * the device itself, so rmmod can succeed.
 */
TEST_F_TIMEOUT(api, unload_applies_pending_moves, 120)
{
	long ue_before, stranded, ml_locked;
	int to_child[2], from_child[2];
	char c = 0;
	pid_t pid;

	ASSERT_EQ(0, set_param(PARAM("defer_ms"), 100000));
	ASSERT_EQ(0, pipe(to_child));
	ASSERT_EQ(0, pipe(from_child));
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int fd = open(MLOCKFAST_DEVICE, O_RDWR);
		char *m = anon(NPAGES, 1);
		struct mlockfast_range r = {
			.size = sizeof(r), .flags = MLOCKFAST_MODE_DEFERRED,
			.addr = (uintptr_t)m, .len = NPAGES * PAGE,
		};

		c = fd >= 0 && m && !mlf_make_state_fd(fd) &&
		    !ioctl(fd, MLOCKFAST_IOC_LOCK, &r) ? 'L' : 'E';
		if (fd >= 0)
			close(fd);
		if (write(from_child[1], &c, 1) != 1 ||
		    read(to_child[0], &c, 1) != 1)
			_exit(2);
		/* The module is gone: the syscall unlocks. */
		c = munlock(m, NPAGES * PAGE) ? 'E' : 'U';
		if (write(from_child[1], &c, 1) != 1)
			_exit(3);
		_exit(0);
	}
	ASSERT_LT(0, pid);
	ASSERT_EQ(1, read(from_child[0], &c, 1));
	ASSERT_EQ('L', c);
	ml_locked = meminfo_kb("Mlocked");
	EXPECT_EQ(self->mlocked + KB(NPAGES), ml_locked);
	ue_before = meminfo_kb("Unevictable");
	EXPECT_EQ(self->unevictable, ue_before);	/* all still queued */
	stranded = vmstat("unevictable_pgs_stranded");
	ASSERT_LE(0, stranded);

	EXPECT_EQ(0, run("rmmod mlockfast"));
	EXPECT_FALSE(loaded());
	EXPECT_EQ(ue_before + KB(NPAGES), meminfo_kb("Unevictable"));
	EXPECT_EQ(ml_locked, meminfo_kb("Mlocked"));
	EXPECT_EQ(stranded, vmstat("unevictable_pgs_stranded"));

	c = 'u';
	ASSERT_EQ(1, write(to_child[1], &c, 1));
	ASSERT_EQ(1, read(from_child[0], &c, 1));
	EXPECT_EQ('U', c);
	ASSERT_EQ(pid, waitpid(pid, NULL, 0));
	EXPECT_EQ(0, run("modprobe mlockfast"));
	EXPECT_TRUE(loaded());
	EXPECT_EQ(0, set_param(PARAM("defer_ms"), self->defer_ms));
	drain_all();
	EXPECT_EQ(self->mlocked, meminfo_kb("Mlocked"));
	EXPECT_EQ(self->unevictable, meminfo_kb("Unevictable"));
}

/* Pages of the @n at @p that are PG_mlocked (kpageflags; we are root). */
static int mlocked_in(const char *p, int n)
{
	int kf = open("/proc/kpageflags", O_RDONLY), count = 0;

	for (int i = 0; kf >= 0 && i < n; i++) {
		uint64_t pfn = pfn_of(p + i * PAGE), fl = 0;

		if (pfn && pread(kf, &fl, 8, pfn * 8) == 8 &&
		    (fl & (1ULL << 33)))
			count++;
	}
	if (kf >= 0)
		close(kf);
	return count;
}

/*
 * The README's old known limit, the first case: a shared page
 * locked through the device (deferred), unlocked by munlock(2) and locked
 * again by mlock(2) before any move is paid, then unlocked: nothing may
 * stay mlocked (the move must not be paid on top of the syscall's count).
 */
TEST_F(api, syscall_relock_of_a_deferred_shared_lock_leaks_nothing)
{
	int fd = memfd_create("mlf-relock", 0);
	char *m;

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, 16 * PAGE));
	m = mmap(NULL, 16 * PAGE, RW, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, m);
	memset(m, 1, 16 * PAGE);
	ASSERT_LE(0, mlf_fd());
	ASSERT_EQ(0, mlf_make_state());
	ASSERT_EQ(0, set_param(PARAM("defer_ms"), 100000));
	drain_all();
	ASSERT_EQ(0, mlf_lock2(m, 16 * PAGE, MLOCKFAST_MODE_DEFERRED));
	ASSERT_EQ(0, munlock(m, 16 * PAGE));
	ASSERT_EQ(0, mlock(m, 16 * PAGE));
	ASSERT_EQ(0, mlf_drain());
	EXPECT_EQ(16, mlocked_in(m, 16));
	EXPECT_EQ(self->mlocked + KB(16), meminfo_kb("Mlocked"));
	ASSERT_EQ(0, mlf_unlock(m, 16 * PAGE));
	drain_all();
	EXPECT_EQ(0, mlocked_in(m, 16));
	EXPECT_EQ(self->mlocked, meminfo_kb("Mlocked"));
	EXPECT_EQ(self->unevictable, meminfo_kb("Unevictable"));
	munmap(m, 16 * PAGE);
	close(fd);
}

/*
 * The second and third cases: private pages locked through the
 * device (deferred, their moves owed), part unlocked by munlock(2), then
 * a forked child locks them all by mlock(2), unlocks and exits: the
 * parent's locks still hold every page it has locked (an undercount would
 * leave them evictable), and once it unlocks too nothing stays mlocked.
 */
TEST_F(api, forked_child_lock_keeps_the_parents_deferred_lock_counted)
{
	static const unsigned int modes[] = {
		MLOCKFAST_MODE_DEFERRED, MLOCKFAST_MODE_DEFERRED | MLOCK_ONFAULT,
		MLOCKFAST_MODE_RECLAIM,
	};

	ASSERT_LE(0, mlf_fd());
	ASSERT_EQ(0, mlf_make_state());
	ASSERT_EQ(0, set_param(PARAM("defer_ms"), 100000));
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		char *m = anon(16, 1);
		int st = -1;
		pid_t pid;

		ASSERT_NE(NULL, m);
		ASSERT_EQ(0, mlf_lock2(m, 16 * PAGE, modes[i]));
		ASSERT_EQ(0, munlock(m, 4 * PAGE));
		fflush(NULL);
		pid = fork();
		if (pid == 0)
			_exit(mlock(m, 16 * PAGE) || munlock(m, 16 * PAGE));
		ASSERT_EQ(pid, waitpid(pid, &st, 0));
		EXPECT_EQ(0, st);
		ASSERT_EQ(0, mlf_drain());
		EXPECT_EQ(12, mlocked_in(m + 4 * PAGE, 12))
			TH_LOG("mode %#x", modes[i]);
		EXPECT_EQ(0, mlocked_in(m, 4)) TH_LOG("mode %#x", modes[i]);
		EXPECT_EQ(self->mlocked + KB(12), meminfo_kb("Mlocked"))
			TH_LOG("mode %#x", modes[i]);
		ASSERT_EQ(0, mlf_unlock(m, 16 * PAGE));
		drain_all();
		EXPECT_EQ(0, mlocked_in(m, 16)) TH_LOG("mode %#x", modes[i]);
		EXPECT_EQ(self->mlocked, meminfo_kb("Mlocked"));
		EXPECT_EQ(self->unevictable, meminfo_kb("Unevictable"));
		munmap(m, 16 * PAGE);
	}
}

/*
 * The child keeps its lock while the parent unlocks: the child's lock
 * broke COW (mlock populates for writing), so it holds its own copies,
 * which stay locked; the parent's pages are unlocked, and once the child
 * unlocks too nothing is left.
 */
TEST_F(api, forked_child_lock_outlives_the_parents_deferred_lock)
{
	int go[2], ready[2], st = -1;
	char *m = anon(16, 1), c = 0;
	pid_t pid;

	ASSERT_NE(NULL, m);
	ASSERT_LE(0, mlf_fd());
	ASSERT_EQ(0, mlf_make_state());
	ASSERT_EQ(0, set_param(PARAM("defer_ms"), 100000));
	ASSERT_EQ(0, mlf_lock2(m, 16 * PAGE, MLOCKFAST_MODE_DEFERRED));
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(ready));
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		c = mlock(m, 16 * PAGE) ? 'e' : 'l';
		if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(1);
		if (mlocked_in(m, 16) != 16)
			_exit(3);
		_exit(munlock(m, 16 * PAGE) ? 2 : 0);
	}
	ASSERT_LT(0, pid);
	ASSERT_EQ(1, read(ready[0], &c, 1));
	EXPECT_EQ('l', c);
	ASSERT_EQ(0, munlock(m, 16 * PAGE));
	ASSERT_EQ(0, mlf_drain());
	EXPECT_EQ(0, mlocked_in(m, 16));
	EXPECT_EQ(self->mlocked + KB(16), meminfo_kb("Mlocked"));
	ASSERT_EQ(1, write(go[1], "g", 1));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_EQ(0, st) TH_LOG("the child's pages: status %#x", st);
	drain_all();
	EXPECT_EQ(self->mlocked, meminfo_kb("Mlocked"));
	EXPECT_EQ(self->unevictable, meminfo_kb("Unevictable"));
	munmap(m, 16 * PAGE);
	for (int i = 0; i < 2; i++) {
		close(go[i]);
		close(ready[i]);
	}
}

/* @pages touched private pages near @hint, which mmap() may not honour. */
static char *anon_near(char *hint, size_t pages)
{
	char *p = mmap(hint, pages * PAGE, RW, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	madvise(p, pages * PAGE, MADV_NOHUGEPAGE);
	diff_touch(p, pages * PAGE, 1);
	drain_all();
	return p;
}

/*
 * A fork pays every owed move, wherever the runs went: after a run
 * cancelled in a mapping that is then unmapped, runs in mappings gigabytes
 * above and below it are paid before a forked child locks and unlocks the
 * same pages.  A run the fork missed would be taken for unlocked by the
 * child's munlock(2), and the parent's lock left uncounted.
 */
TEST_F(api, fork_pays_owed_moves_wherever_the_runs_go)
{
	char *a = anon(16, 1), *up, *down;
	int st = -1;
	pid_t pid;

	ASSERT_NE(NULL, a);
	up = anon_near(a + (4UL << 30), 16);
	down = anon_near((uintptr_t)a > (8UL << 30) ? a - (4UL << 30) : NULL, 16);
	ASSERT_NE(NULL, up);
	ASSERT_NE(NULL, down);
	ASSERT_LE(0, mlf_fd());
	ASSERT_EQ(0, mlf_make_state());
	ASSERT_EQ(0, set_param(PARAM("defer_ms"), 100000));
	ASSERT_EQ(0, mlf_lock2(a, 16 * PAGE, MLOCKFAST_MODE_DEFERRED));
	ASSERT_EQ(0, mlf_unlock(a, 16 * PAGE));
	ASSERT_EQ(0, munmap(a, 16 * PAGE));
	ASSERT_EQ(0, mlf_lock2(up, 16 * PAGE, MLOCKFAST_MODE_DEFERRED));
	ASSERT_EQ(0, mlf_lock2(down, 16 * PAGE, MLOCKFAST_MODE_DEFERRED));
	fflush(NULL);
	pid = fork();
	if (pid == 0)
		_exit(mlock(up, 16 * PAGE) || munlock(up, 16 * PAGE) ||
		      mlock(down, 16 * PAGE) || munlock(down, 16 * PAGE));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_EQ(0, st);
	ASSERT_EQ(0, mlf_drain());
	EXPECT_EQ(16, mlocked_in(up, 16));
	EXPECT_EQ(16, mlocked_in(down, 16));
	EXPECT_EQ(self->mlocked + KB(32), meminfo_kb("Mlocked"));
	ASSERT_EQ(0, mlf_unlock(up, 16 * PAGE));
	ASSERT_EQ(0, mlf_unlock(down, 16 * PAGE));
	drain_all();
	EXPECT_EQ(0, mlocked_in(up, 16) + mlocked_in(down, 16));
	EXPECT_EQ(self->mlocked, meminfo_kb("Mlocked"));
	EXPECT_EQ(self->unevictable, meminfo_kb("Unevictable"));
	munmap(up, 16 * PAGE);
	munmap(down, 16 * PAGE);
}

/*
 * Runs are addresses, and mremap() moves pages away from them: a fork
 * still pays the moves of the pages it took, before the child locks and
 * unlocks them, or the child's munlock(2) would leave the parent's lock
 * uncounted, as above.  Whether the fork comes while the run is owed, or
 * after the work paid it where it was (DRAIN), finding nothing there.
 */
TEST_F(api, fork_pays_owed_moves_mremap_took_away)
{
	ASSERT_LE(0, mlf_fd());
	ASSERT_EQ(0, mlf_make_state());
	ASSERT_EQ(0, set_param(PARAM("defer_ms"), 100000));
	for (int paid = 0; paid < 2; paid++) {
		char *a = anon(16, 1), *far, *b;
		int st = -1;
		pid_t pid;

		ASSERT_NE(NULL, a);
		far = mmap(a + (4UL << 30), 16 * PAGE, PROT_NONE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		ASSERT_NE(MAP_FAILED, far);
		ASSERT_EQ(0, mlf_lock2(a, 16 * PAGE, MLOCKFAST_MODE_DEFERRED));
		b = mremap(a, 16 * PAGE, 16 * PAGE,
			   MREMAP_MAYMOVE | MREMAP_FIXED, far);
		ASSERT_EQ(far, b);
		EXPECT_EQ(16, mlocked_in(b, 16));
		if (paid)
			ASSERT_EQ(0, mlf_drain());
		fflush(NULL);
		pid = fork();
		if (pid == 0)
			_exit(mlock(b, 16 * PAGE) || munlock(b, 16 * PAGE));
		ASSERT_EQ(pid, waitpid(pid, &st, 0));
		EXPECT_EQ(0, st);
		ASSERT_EQ(0, mlf_drain());
		EXPECT_EQ(16, mlocked_in(b, 16)) TH_LOG("paid first: %d", paid);
		EXPECT_EQ(self->mlocked + KB(16), meminfo_kb("Mlocked"))
			TH_LOG("paid first: %d", paid);
		ASSERT_EQ(0, mlf_unlock(b, 16 * PAGE));
		drain_all();
		EXPECT_EQ(0, mlocked_in(b, 16));
		EXPECT_EQ(self->mlocked, meminfo_kb("Mlocked"));
		EXPECT_EQ(self->unevictable, meminfo_kb("Unevictable"));
		munmap(b, 16 * PAGE);
	}
}

/*
 * Two CPUs: faults into a shared mapping locked on fault leave their mlocks
 * queued in this CPU's kernel batch; an unlock here must apply them before
 * it clears the pages' lock, as munlock(2) drains first.  Left queued, they
 * would count once more on top of another process's lock taken meanwhile
 * on another CPU, and once that process unlocks too the pages would stay
 * mlocked for good.  The syscall's unlock runs first, as the control.
 */
static void queued_fault_mlocks(struct __test_metadata *_metadata,
				long mlocked, long unevictable, int by_device)
{
	int fd = memfd_create("mlf-queued", 0), go[2], ready[2], st = -1;
	char *m, c = 0;
	pid_t pid;

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ftruncate(fd, 16 * PAGE));
	for (int i = 0; i < 16; i++)	/* in the page cache, not mapped */
		ASSERT_EQ(1, pwrite(fd, "x", 1, i * PAGE));
	m = mmap(NULL, 16 * PAGE, RW, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, m);
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(ready));
	drain_all();
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		/* The other process, on the other CPU, locks after the unlock. */
		if (seq_pin(1) || read(go[0], &c, 1) != 1)
			_exit(1);
		c = mlock(m, 16 * PAGE) ? 'e' : 'l';
		if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(1);
		_exit(munlock(m, 16 * PAGE) ? 2 : 0);
	}
	ASSERT_LT(0, pid);
	ASSERT_EQ(0, mlock2(m, 16 * PAGE, MLOCK_ONFAULT));
	for (int i = 0; i < 16; i++)
		(void)*(volatile char *)(m + i * PAGE);
	ASSERT_EQ(0, by_device ? mlf_unlock(m, 16 * PAGE) :
				 munlock(m, 16 * PAGE));
	ASSERT_EQ(1, write(go[1], "g", 1));
	ASSERT_EQ(1, read(ready[0], &c, 1));
	EXPECT_EQ('l', c);
	ASSERT_EQ(0, mlf_drain());	/* what this CPU still had queued */
	EXPECT_EQ(16, mlocked_in(m, 16)) TH_LOG("by device: %d", by_device);
	ASSERT_EQ(1, write(go[1], "g", 1));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_EQ(0, st);
	drain_all();
	EXPECT_EQ(0, mlocked_in(m, 16)) TH_LOG("by device: %d", by_device);
	EXPECT_EQ(mlocked, meminfo_kb("Mlocked"));
	EXPECT_EQ(unevictable, meminfo_kb("Unevictable"));
	munlock(m, 16 * PAGE);	/* (a failed check may leave it locked) */
	munmap(m, 16 * PAGE);
	close(fd);
	for (int i = 0; i < 2; i++) {
		close(go[i]);
		close(ready[i]);
	}
}

TEST_F(api, unlock_applies_this_cpus_queued_fault_mlocks)
{
	/* (the fixture pinned us to the first CPU) */
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(return, "needs a second CPU for the other process");
	ASSERT_LE(0, mlf_fd());
	for (int by_device = 0; by_device < 2; by_device++)
		queued_fault_mlocks(_metadata, self->mlocked, self->unevictable,
				    by_device);
}

TEST_HARNESS_MAIN
