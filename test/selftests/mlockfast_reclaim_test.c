// SPDX-License-Identifier: GPL-2.0
/*
 * Locked pages under reclaim, in each mode: with swap (zram, set up here)
 * and a memory hog in a cgroup whose memory.max is well below what the hog
 * touches, reclaim swaps the hog out and scans the anonymous LRU where
 * reclaim-mode (and queued deferred-mode) pages still sit.  The locked pages
 * must stay: present in pagemap, never swapped, no major fault when touched
 * afterwards; the hog must really have been swapped (else the test proves
 * nothing); and pages left on an evictable list must be culled to the
 * unevictable one (unevictable_pgs_culled rises after the lock returned:
 * the lock's own moves count there too).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mlf_diff.h"
#include "mlf_test.h"

#define CG		CG_ROOT "/mlf-reclaim"
/* fewer folios than a batch holds: deferred moves stay queued */
#define LOCKED		(1UL << 20)
#define HOG		(96UL << 20)
#define DEFER_MS	"/sys/module/mlockfast/parameters/defer_ms"

struct outcome {
	long not_present, swapped, majflt, culled, swap_used, lock_err;
};

FIXTURE(rec) {
	long mlocked, unevictable, defer_ms;
	int mounted;
};

FIXTURE_VARIANT(rec) {
	unsigned int mode;
	int culls;	/* its pages sit on an evictable list during reclaim */
};

FIXTURE_VARIANT_ADD(rec, eager) { .mode = MLOCKFAST_MODE_EAGER, .culls = 0 };
/* defer_ms is raised so that the moves are still queued under reclaim */
FIXTURE_VARIANT_ADD(rec, deferred) { .mode = MLOCKFAST_MODE_DEFERRED, .culls = 1 };
FIXTURE_VARIANT_ADD(rec, reclaim) { .mode = MLOCKFAST_MODE_RECLAIM, .culls = 1 };

FIXTURE_SETUP(rec)
{
	drain_everything();
	self->mlocked = meminfo_kb("Mlocked");
	self->unevictable = meminfo_kb("Unevictable");
	self->defer_ms = read_long(DEFER_MS);
	/* Swap on zram: the guest has no disk; test/vm/run packs the module. */
	ASSERT_EQ(0, run("{ [ -e /sys/block/zram0 ] || modprobe zram num_devices=1; } && "
			 "echo 128M > /sys/block/zram0/disksize && "
			 "mkswap /dev/zram0 >/dev/null && swapon /dev/zram0"));
	ASSERT_EQ(0, cgroup2_memory_ready(&self->mounted));
	rmdir(CG);
	ASSERT_EQ(0, mkdir(CG, 0755));
	ASSERT_EQ(0, write_file_str(CG "/memory.max", "32M"));
}

FIXTURE_TEARDOWN(rec)
{
	char v[32];

	snprintf(v, sizeof(v), "%ld", self->defer_ms);
	EXPECT_EQ(0, write_file_str(DEFER_MS, v));
	rmdir(CG);
	cgroup2_memory_done(self->mounted);
	EXPECT_EQ(0, run("swapoff /dev/zram0 && echo 1 > /sys/block/zram0/reset"));
	drain_everything();
	EXPECT_EQ(self->mlocked, meminfo_kb("Mlocked"));
	EXPECT_EQ(self->unevictable, meminfo_kb("Unevictable"));
}

static long majflt(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_majflt;
}

/* In the cgroup: lock, hog, look at the locked pages, touch them. */
static void locker(unsigned int mode, struct outcome *o)
{
	int pm = open("/proc/self/pagemap", O_RDONLY);
	char pid[16], *l, *h, *sw;
	long culled0, mf0;

	snprintf(pid, sizeof(pid), "%d", getpid());
	l = mmap(NULL, LOCKED, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	h = mmap(NULL, HOG, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pm < 0 || l == MAP_FAILED || h == MAP_FAILED ||
	    write_file_str(CG "/cgroup.procs", pid))
		_exit(60);
	/* small pages: what reclaim mode leaves on the anonymous LRU */
	madvise(l, LOCKED, MADV_NOHUGEPAGE);
	madvise(h, HOG, MADV_NOHUGEPAGE);
	diff_touch(l, LOCKED, 1);
	o->lock_err = mlf_lock2(l, LOCKED, mode) ? errno : 0;
	/* after the lock: its own moves to the unevictable list count too */
	culled0 = vmstat("unevictable_pgs_culled");
	for (int pass = 0; pass < 2; pass++)
		diff_touch(h, HOG, 1);
	o->culled = vmstat("unevictable_pgs_culled") - culled0;
	sw = read_file(CG "/memory.swap.current");
	o->swap_used = sw ? strtol(sw, NULL, 10) : -1;
	free(sw);
	for (size_t off = 0; off < LOCKED; off += PAGE) {
		uint64_t e = 0;

		if (pread(pm, &e, 8, ((uintptr_t)l + off) / PAGE * 8) != 8)
			_exit(61);
		o->not_present += !(e >> 63);
		o->swapped += !!(e & (1ULL << 62));
	}
	mf0 = majflt();
	diff_touch(l, LOCKED, 0);
	o->majflt = majflt() - mf0;
	if (mlf_unlock(l, LOCKED))
		_exit(62);
	_exit(0);
}

TEST_F_TIMEOUT(rec, locked_pages_stay_and_get_culled, 300)
{
	struct outcome *o = mmap(NULL, sizeof(*o), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int st = -1;
	pid_t pid;

	ASSERT_NE(MAP_FAILED, o);
	ASSERT_LE(0, mlf_fd());
	if (variant->mode == MLOCKFAST_MODE_DEFERRED)
		ASSERT_EQ(0, write_file_str(DEFER_MS, "100000"));
	memset(o, 0, sizeof(*o));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		locker(variant->mode, o);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st)) TH_LOG("locker status %#x", st);
	TH_LOG("culled %ld, swap used %ld kB, not present %ld, swapped %ld, major faults %ld",
	       o->culled, o->swap_used >> 10, o->not_present, o->swapped, o->majflt);
	EXPECT_EQ(0, o->lock_err);
	/* reclaim did run and swap: otherwise nothing here was tested */
	EXPECT_LT(0, o->swap_used);
	EXPECT_EQ(0, o->not_present);
	EXPECT_EQ(0, o->swapped);
	EXPECT_EQ(0, o->majflt);
	/* every page left on an evictable list is met and culled; eager left none */
	if (variant->culls) {
		EXPECT_LE((long)(LOCKED / PAGE), o->culled);
	} else {
		EXPECT_GT((long)(LOCKED / PAGE), o->culled);
	}
	munmap(o, sizeof(*o));
}

TEST_HARNESS_MAIN
