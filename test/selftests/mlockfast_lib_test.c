// SPDX-License-Identifier: GPL-2.0
/*
 * The libmlockfast API (mlockfast.h) in a program linked with the library,
 * as pkg-config links it.  Each call is checked against libc's mlock2 or
 * munlock on an identical mapping (taken from libc.so.6 itself: this
 * program's own mlock2 is the library's).  With the device the module's
 * counters must move; without it (mlockfast_preload_test runs this program
 * with the module unloaded) the calls fall back and STATS is ENODEV.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mlf_test.h"
#include "mlockfast.h"

#define PAGE	4096UL

static bool device(void)
{
	return access(MLOCKFAST_DEVICE, F_OK) == 0;
}

/* libc's own functions, past the library's interposers. */
static int (*libc_mlock2)(const void *, size_t, unsigned int);
static int (*libc_munlock)(const void *, size_t);

static void libc_open(struct __test_metadata *_metadata)
{
	void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);

	ASSERT_NE(NULL, h);
	libc_mlock2 = (int (*)(const void *, size_t, unsigned int))dlsym(h, "mlock2");
	libc_munlock = (int (*)(const void *, size_t))dlsym(h, "munlock");
	ASSERT_NE(NULL, libc_mlock2);
	ASSERT_NE(NULL, libc_munlock);
}

/*
 * @pages touched pages between PROT_NONE guards, so each is a VMA of its
 * own, and then a hole of two pages, so a range past the end stops there.
 */
static char *guarded(size_t pages)
{
	char *p = mmap(NULL, (pages + 4) * PAGE, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || munmap(p + (pages + 2) * PAGE, 2 * PAGE))
		return NULL;
	p += PAGE;
	if (mprotect(p, pages * PAGE, PROT_READ | PROT_WRITE))
		return NULL;
	memset(p, 1, pages * PAGE);
	return p;
}

/* A call's result: return value, errno (0 on success), change of VmLck. */
struct res {
	int ret, err;
	long vmlck;
};

#define RES(call) ({								\
	long v0_ = status_kb("VmLck");						\
	int ret_ = (call);							\
	struct res r_ = { ret_, ret_ ? errno : 0, status_kb("VmLck") - v0_ };	\
	r_;									\
})

#define EXPECT_RES_EQ(a, b, what) do {						\
	EXPECT_EQ((a).ret, (b).ret) TH_LOG("%s", what);				\
	EXPECT_EQ((a).err, (b).err) TH_LOG("%s", what);				\
	EXPECT_EQ((a).vmlck, (b).vmlck) TH_LOG("%s", what);			\
} while (0)

struct baseline {
	long mlocked, unevictable;
};

static struct baseline baseline(void)
{
	struct baseline b;

	mlockfast_drain();
	b.mlocked = meminfo_kb("Mlocked");
	b.unevictable = meminfo_kb("Unevictable");
	return b;
}

#define EXPECT_BASELINE(b) do {							\
	mlockfast_drain();							\
	EXPECT_EQ((b).mlocked, meminfo_kb("Mlocked"));				\
	EXPECT_EQ((b).unevictable, meminfo_kb("Unevictable"));			\
	EXPECT_EQ(0, status_kb("VmLck"));					\
} while (0)

TEST(which_path)
{
	/* for the log, and for mlockfast_preload_test to see which it was */
	ksft_print_msg("libmlockfast: with%s the device\n", device() ? "" : "out");
	EXPECT_EQ(0, status_kb("VmLck"));
}

TEST(lock_and_unlock_as_mlock2_and_munlock)
{
	static const struct { const char *what; size_t off, pages; unsigned int flags; } c[] = {
		{ "lock", 0, 8, 0 },
		{ "lock onfault", 0, 8, MLOCK_ONFAULT },
		{ "lock unaligned", 100, 3, 0 },
		{ "lock past the end", 4 * PAGE, 8, 0 },
		{ "lock flag 2", 0, 1, 2 },
	};
	struct mlockfast_stats s0 = { 0 }, s1 = { 0 };
	struct baseline b = baseline();
	char *p = guarded(8), *q = guarded(8);

	libc_open(_metadata);
	ASSERT_NE(NULL, p);
	ASSERT_NE(NULL, q);
	if (device())
		ASSERT_EQ(0, mlockfast_stats(&s0));
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		size_t off = c[i].off;
		struct res want = RES(libc_mlock2(q + off, c[i].pages * PAGE, c[i].flags));
		struct res got = RES(mlockfast_lock(p + off, c[i].pages * PAGE, c[i].flags));

		EXPECT_RES_EQ(want, got, c[i].what);
		want = RES(libc_munlock(q, 8 * PAGE));
		got = RES(mlockfast_unlock(p, 8 * PAGE));
		EXPECT_RES_EQ(want, got, c[i].what);
	}
	/* libc's answers for the record: the API gave the same */
	EXPECT_EQ(-1, libc_mlock2(q, PAGE, 2));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, mlockfast_lock(p, PAGE, 7U << MLOCKFAST_MODE_SHIFT));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, mlockfast_unlock(p - PAGE, 10 * PAGE));	/* the guards too */
	EXPECT_EQ(0, libc_munlock(q - PAGE, 10 * PAGE));
	EXPECT_EQ(0, mlockfast_lock(p, 8 * PAGE, MLOCKFAST_MODE_EAGER));
	EXPECT_EQ(32, status_kb("VmLck"));
	EXPECT_EQ(0, mlockfast_unlock(p, 8 * PAGE));
	if (device()) {
		ASSERT_EQ(0, mlockfast_stats(&s1));
		/* five cases, the bad mode, the eager one; and their unlocks */
		EXPECT_EQ(7, s1.calls_lock - s0.calls_lock);
		EXPECT_EQ(7, s1.calls_unlock - s0.calls_unlock);
		EXPECT_EQ(1, s1.mode_calls[MLOCKFAST_STAT_MODE_EAGER] -
			     s0.mode_calls[MLOCKFAST_STAT_MODE_EAGER]);
	}
	munmap(p - PAGE, 10 * PAGE);
	munmap(q - PAGE, 10 * PAGE);
	EXPECT_BASELINE(b);
}

TEST(lockv_and_unlockv_stop_at_the_first_error)
{
	struct baseline b = baseline();
	char *p = guarded(4), *q = guarded(4), *hole = guarded(1);
	struct mlockfast_iovec iov[3];
	unsigned int done = 99;

	ASSERT_NE(NULL, p);
	ASSERT_NE(NULL, q);
	ASSERT_NE(NULL, hole);
	munmap(hole - PAGE, 3 * PAGE);
	iov[0] = (struct mlockfast_iovec){ (uintptr_t)p, 4 * PAGE };
	iov[1] = (struct mlockfast_iovec){ (uintptr_t)q, 2 * PAGE };
	iov[2] = (struct mlockfast_iovec){ (uintptr_t)q + 2 * PAGE, 2 * PAGE };
	EXPECT_EQ(0, mlockfast_lockv(iov, 3, 0, &done));
	EXPECT_EQ(3, done);
	EXPECT_EQ(32, status_kb("VmLck"));
	EXPECT_EQ(0, mlockfast_unlockv(iov, 3, 0, &done));
	EXPECT_EQ(3, done);
	EXPECT_EQ(0, status_kb("VmLck"));

	iov[1].addr = (uintptr_t)hole;
	EXPECT_EQ(-1, mlockfast_lockv(iov, 3, MLOCK_ONFAULT, &done));
	EXPECT_EQ(ENOMEM, errno);
	EXPECT_EQ(1, done);
	EXPECT_EQ(16, status_kb("VmLck"));
	EXPECT_EQ(-1, mlockfast_unlockv(iov, 3, 0, &done));
	EXPECT_EQ(ENOMEM, errno);
	EXPECT_EQ(1, done);
	EXPECT_EQ(0, status_kb("VmLck"));

	EXPECT_EQ(0, mlockfast_lockv(iov, 0, 0, NULL));
	EXPECT_EQ(-1, mlockfast_lockv(iov, MLOCKFAST_VEC_MAX + 1, 0, &done));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, done);
	EXPECT_EQ(-1, mlockfast_unlockv(iov, 1, MLOCK_ONFAULT, &done));
	EXPECT_EQ(EINVAL, errno);
	if (device()) {
		/* the vector is the caller's: its fault is the answer */
		EXPECT_EQ(-1, mlockfast_lockv((void *)8, 1, 0, &done));
		EXPECT_EQ(EFAULT, errno);
	}
	munmap(p - PAGE, 6 * PAGE);
	munmap(q - PAGE, 6 * PAGE);
	EXPECT_BASELINE(b);
}

TEST(drain_and_stats)
{
	struct mlockfast_stats s0, s1;

	EXPECT_EQ(0, mlockfast_drain());
	if (!device()) {
		errno = 0;
		EXPECT_EQ(-1, mlockfast_stats(&s0));
		EXPECT_EQ(ENODEV, errno);
		return;
	}
	ASSERT_EQ(0, mlockfast_stats(&s0));
	EXPECT_EQ(sizeof(s0), s0.size);
	EXPECT_EQ(0, mlockfast_drain());
	ASSERT_EQ(0, mlockfast_stats(&s1));
	EXPECT_EQ(1, s1.calls_drain - s0.calls_drain);
}

TEST(linking_routes_the_programs_mlock)
{
	struct mlockfast_stats s0 = { 0 }, s1 = { 0 };
	char *p = guarded(4);

	ASSERT_NE(NULL, p);
	if (device())
		ASSERT_EQ(0, mlockfast_stats(&s0));
	EXPECT_EQ(0, mlock(p, 4 * PAGE));
	EXPECT_EQ(16, status_kb("VmLck"));
	EXPECT_EQ(0, munlock(p, 4 * PAGE));
	EXPECT_EQ(0, status_kb("VmLck"));
	if (device()) {
		ASSERT_EQ(0, mlockfast_stats(&s1));
		EXPECT_EQ(1, s1.calls_lock - s0.calls_lock);
		EXPECT_EQ(1, s1.calls_unlock - s0.calls_unlock);
	}
	munmap(p - PAGE, 6 * PAGE);
}

TEST_HARNESS_MAIN
