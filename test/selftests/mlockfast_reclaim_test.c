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
 *
 * The same for file pages, on an ext2 file system on a second zram device
 * (the guest's root is tmpfs, whose pages only swap): reclaim drops clean
 * page cache, and must drop none of the locked file's pages, while it does
 * drop those of an unlocked file read alongside.
 *
 * And an undercounted page (a page of a locked VMA that is neither
 * PG_mlocked nor on the unevictable list, what the mixed-path fuzzer finds
 * after the kernel's own races, see undercounted()) is not a lost lock:
 * reclaim meets the VM_LOCKED VMA in its rmap walk, mlocks the page and
 * culls it to the unevictable list; it is never swapped out.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
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
#define FS		"/tmp/mlf-ext2"
#define CONTROL		(8UL << 20)
/* undercounted pages: fewer than the lru_add batch holds (15 on 6.1) */
#define UNDER		8
#define UNDER_TRIES	50
#define KPF_LRU		5
#define KPF_UNEVICTABLE	18
#define KPF_MLOCKED	33

struct outcome {
	long not_present, swapped, majflt, culled, swap_used, lock_err;
	long control_dropped;	/* file test: unlocked pages reclaim dropped */
	/* undercount test: tries to make them, pages made, pages re-mlocked */
	long tries, undercounted, rescued, mlocked_events;
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
	/* A test that failed half way leaves swap on: start from nothing. */
	run("umount " FS " 2>/dev/null; swapoff /dev/zram0 2>/dev/null; "
	    "[ ! -e /sys/block/zram0 ] || echo 1 > /sys/block/zram0/reset");
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

/* The locker's end: touch the locked pages (no major fault), unlock, go. */
static void touch_unlock_exit(char *l, struct outcome *o)
{
	long mf0 = majflt();

	diff_touch(l, LOCKED, 0);
	o->majflt = majflt() - mf0;
	_exit(mlf_unlock(l, LOCKED) ? 62 : 0);
}

/*
 * @locker in a child, in @mode (deferred: with defer_ms raised so that the
 * moves are still queued under reclaim); its outcome, or NULL.
 */
static struct outcome *run_locker(struct __test_metadata *_metadata,
				  void (*locker)(unsigned int, struct outcome *),
				  unsigned int mode)
{
	struct outcome *o = mmap(NULL, sizeof(*o), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int st = -1;
	pid_t pid;

	if (o == MAP_FAILED || mlf_fd() < 0)
		return NULL;
	if (mode == MLOCKFAST_MODE_DEFERRED &&
	    write_file_str(DEFER_MS, "100000"))
		return NULL;
	memset(o, 0, sizeof(*o));
	pid = fork();
	if (pid == 0)
		locker(mode, o);
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return NULL;
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st)) TH_LOG("locker status %#x", st);
	return o;
}

/* In the cgroup: lock, hog, look at the locked pages, touch them. */
static void locker(unsigned int mode, struct outcome *o)
{
	int pm = open("/proc/self/pagemap", O_RDONLY);
	char pid[16], *l, *h, *sw;
	long culled0;

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
	/* This child's first lock would pay its moves, whatever the mode. */
	if (mlf_make_state())
		_exit(63);
	o->lock_err = mlf_lock2(l, LOCKED, mode) ? errno : 0;
	/* after the lock: its own moves to the unevictable list count too */
	culled0 = vmstat("unevictable_pgs_culled");
	for (int pass = 0; pass < 2; pass++)
		diff_touch(h, HOG, 1);
	/*
	 * A folio that reclaim's rmap walk found in a locked VMA goes to the
	 * unevictable list through a CPU's mlock batch, and is counted culled
	 * only when that batch drains: up to 14 may wait there (seen once, on
	 * 6.1 cloud).  DRAIN applies every CPU's batch; it pays no move
	 * reclaim mode leaves owing, and deferred mode's are culls too.
	 */
	if (mlf_drain())
		_exit(64);
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
	touch_unlock_exit(l, o);
}

TEST_F_TIMEOUT(rec, locked_pages_stay_and_get_culled, 300)
{
	struct outcome *o = run_locker(_metadata, locker, variant->mode);

	ASSERT_NE(NULL, o);
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

/*
 * An ext2 file system on a zram device of its own, at FS; the device's
 * number is returned (-1 on failure).  Its pages are clean page cache that
 * reclaim drops rather than swaps.
 */
static int ext2_on_zram(void)
{
	char *id, dev[32];
	int n;

	if (run("[ -e /sys/class/zram-control ] || modprobe zram num_devices=1"))
		return -1;
	id = read_file("/sys/class/zram-control/hot_add");
	if (!id)
		return -1;
	n = atoi(id);
	free(id);
	snprintf(dev, sizeof(dev), "/dev/zram%d", n);
	if (run("echo 64M > /sys/block/zram%d/disksize && "
		/* zram has 4K sectors: 4K blocks */
		"mke2fs -q -b 4096 %s >/dev/null && "
		"mkdir -p " FS " && { modprobe ext4 2>/dev/null; true; } && "
		"mount -t ext2 %s " FS, n, dev, dev))
		return -1;
	return n;
}

/* A file of @len bytes under FS, written and synced here (so charged to our cgroup). */
static char *clean_file_map(const char *name, size_t len)
{
	char path[64], *buf = malloc(1 << 16), *m;
	int fd;

	snprintf(path, sizeof(path), FS "/%s", name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || !buf)
		return NULL;
	memset(buf, 'f', 1 << 16);
	for (size_t off = 0; off < len; off += 1 << 16)
		if (write(fd, buf, 1 << 16) != 1 << 16)
			return NULL;
	free(buf);
	if (fsync(fd))
		return NULL;
	m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	return m == MAP_FAILED ? NULL : m;
}

/* Resident pages of [p, p + len) by mincore(). */
static long resident(const char *p, size_t len)
{
	unsigned char v[4096];
	long n = 0;

	for (size_t off = 0; off < len; off += sizeof(v) * PAGE) {
		size_t part = len - off < sizeof(v) * PAGE ? len - off : sizeof(v) * PAGE;

		if (mincore((void *)(p + off), part, v))
			return -1;
		for (size_t i = 0; i < part / PAGE; i++)
			n += v[i] & 1;
	}
	return n;
}

/* In the cgroup: two files, one locked; the hog; what is left of each. */
static void file_locker(unsigned int mode, struct outcome *o)
{
	char pid[16], *l, *c, *h;

	snprintf(pid, sizeof(pid), "%d", getpid());
	if (write_file_str(CG "/cgroup.procs", pid))
		_exit(60);
	l = clean_file_map("locked", LOCKED);
	c = clean_file_map("control", CONTROL);
	h = mmap(NULL, HOG, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!l || !c || h == MAP_FAILED)
		_exit(61);
	diff_touch(l, LOCKED, 0);
	diff_touch(c, CONTROL, 0);
	o->lock_err = mlf_lock2(l, LOCKED, mode) ? errno : 0;
	madvise(h, HOG, MADV_NOHUGEPAGE);
	for (int pass = 0; pass < 2; pass++)
		diff_touch(h, HOG, 1);
	o->not_present = (long)(LOCKED / PAGE) - resident(l, LOCKED);
	o->control_dropped = (long)(CONTROL / PAGE) - resident(c, CONTROL);
	touch_unlock_exit(l, o);
}

TEST_F_TIMEOUT(rec, locked_file_pages_stay, 300)
{
	int dev = ext2_on_zram(), tries;
	struct outcome *o;

	ASSERT_LE(0, dev) TH_LOG("no ext2 on zram here");
	o = run_locker(_metadata, file_locker, variant->mode);
	ASSERT_NE(NULL, o);
	TH_LOG("locked file: %ld pages dropped, %ld major faults; unlocked file: %ld of %lu pages dropped",
	       o->not_present, o->majflt, o->control_dropped, CONTROL / PAGE);
	EXPECT_EQ(0, o->lock_err);
	/* reclaim did drop page cache: otherwise nothing here was tested */
	EXPECT_LT(0, o->control_dropped);
	EXPECT_EQ(0, o->not_present);
	EXPECT_EQ(0, o->majflt);
	/*
	 * The locker is reaped, yet once on 7.2 (eager, 2026-12-04) the
	 * umount met EBUSY: try for up to 10 s, and say how long it took.
	 */
	for (tries = 0; tries < 100 && run("umount " FS " 2>/dev/null"); tries++)
		usleep(100 * 1000);
	if (tries)
		TH_LOG("umount: busy for %.1f s", tries / 10.0);
	EXPECT_EQ(0, run("! grep -q ' " FS " ' /proc/mounts && echo %d > /sys/class/zram-control/hot_remove", dev));
	munmap(o, sizeof(*o));
}

/* /proc/kpageflags of the page mapped at @a, or 0 if none is. */
static uint64_t page_flags(const char *a)
{
	int pm = open("/proc/self/pagemap", O_RDONLY);
	int kf = open("/proc/kpageflags", O_RDONLY);
	uint64_t e = 0, fl = 0;

	if (pm >= 0 && kf >= 0 &&
	    pread(pm, &e, 8, (uintptr_t)a / PAGE * 8) == 8 && (e >> 63) &&
	    pread(kf, &fl, 8, (e & ((1ULL << 55) - 1)) * 8) != 8)
		fl = 0;
	if (pm >= 0)
		close(pm);
	if (kf >= 0)
		close(kf);
	return fl;
}

/* Pages of [p, p + n pages) whose flags, masked by @mask, are @want. */
static int pages_with(const char *p, int n, uint64_t mask, uint64_t want)
{
	int k = 0;

	for (int i = 0; i < n; i++)
		k += (page_flags(p + i * PAGE) & mask) == want;
	return k;
}

static int on_cpu(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	return sched_setaffinity(0, sizeof(s), &s);
}

#define F(bit)	(1ULL << (bit))
#define UNDERCOUNT_MASK	(F(KPF_LRU) | F(KPF_UNEVICTABLE) | F(KPF_MLOCKED))

/*
 * Make the kernel undercount, the syscalls alone: UNDER pages of a memfd,
 * mapped shared at @b (not locked) and at @a, locked through the device in
 * @mode (the first half) and through mlock() (the second); afterwards every
 * page is mapped in a VM_LOCKED VMA and is neither PG_mlocked nor on the
 * unevictable list.  The kernel's lru_add() sets mlock_count 0 for a
 * PG_mlocked folio it adds ("underestimate, let page reclaim fix it"), so a
 * lock taken while the folio waits in another CPU's lru_add batch is never
 * counted: written on @far, the pages wait in its batch while @b is locked
 * here; a lock of @far's own drains it; @a's locks count 1, and munlock(@b)
 * takes the count to 0.  Something else may drain @far's batch first (a
 * full batch, lru_add_drain_all()): the page flags tell, and it tries again.
 * 0, or -1 if it never got there.
 */
static int undercounted(char *b, char *a, int fd, unsigned int mode,
			int here, int far, struct outcome *o)
{
	static const char data[UNDER * PAGE];
	const int half = UNDER / 2;
	char *scratch = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (scratch == MAP_FAILED)
		return -1;
	diff_touch(scratch, PAGE, 1);
	for (o->tries = 1; o->tries <= UNDER_TRIES; o->tries++) {
		/* fresh pages, each time */
		if (ftruncate(fd, 0) || ftruncate(fd, UNDER * PAGE) ||
		    on_cpu(far) ||
		    pwrite(fd, data, sizeof(data), 0) != sizeof(data) ||
		    on_cpu(here))
			return -1;
		diff_touch(b, UNDER * PAGE, 0);
		/* still in @far's batch: off the LRU */
		if (pages_with(b, UNDER, F(KPF_LRU), 0) != UNDER)
			continue;
		if (mlock(b, UNDER * PAGE))
			return -1;
		if (pages_with(b, UNDER, UNDERCOUNT_MASK, F(KPF_MLOCKED)) != UNDER) {
			munlock(b, UNDER * PAGE);
			continue;
		}
		/* @far drains its batch: unevictable, counted 0 */
		if (on_cpu(far) || mlock(scratch, PAGE) || munlock(scratch, PAGE) ||
		    on_cpu(here) ||
		    mlf_lock2(a, half * PAGE, mode) ||
		    mlock(a + half * PAGE, half * PAGE) ||
		    munlock(b, UNDER * PAGE))
			return -1;
		if (pages_with(a, UNDER, UNDERCOUNT_MASK, F(KPF_LRU)) == UNDER) {
			munmap(scratch, PAGE);
			return 0;
		}
		if (mlf_unlock(a, half * PAGE) || munlock(a + half * PAGE, half * PAGE))
			return -1;
	}
	return -1;
}

/*
 * In the cgroup, with two CPUs: undercounted pages, the hog, and then where
 * those pages are.
 */
static void undercount_locker(unsigned int mode, struct outcome *o)
{
	int fd = memfd_create("mlf-undercount", 0), here = -1, far = -1;
	int cfd = memfd_create("mlf-control", 0);
	char pid[16], *b, *a, *c;
	cpu_set_t s;
	long ml0;
	char *h;

	snprintf(pid, sizeof(pid), "%d", getpid());
	if (fd < 0 || cfd < 0 || write_file_str(CG "/cgroup.procs", pid) ||
	    sched_getaffinity(0, sizeof(s), &s))
		_exit(60);
	for (int c = 0; c < CPU_SETSIZE && far < 0; c++)
		if (CPU_ISSET(c, &s))
			*(here < 0 ? &here : &far) = c;
	b = mmap(NULL, UNDER * PAGE, PROT_READ, MAP_SHARED, fd, 0);
	a = mmap(NULL, UNDER * PAGE, PROT_READ, MAP_SHARED, fd, 0);
	h = mmap(NULL, HOG, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	/* the control: pages like those, in no locked VMA */
	c = mmap(NULL, UNDER * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, cfd, 0);
	if (far < 0 || b == MAP_FAILED || a == MAP_FAILED || h == MAP_FAILED ||
	    c == MAP_FAILED || ftruncate(cfd, UNDER * PAGE))
		_exit(61);
	diff_touch(c, UNDER * PAGE, 1);
	if (mlf_make_state())
		_exit(63);
	if (undercounted(b, a, fd, mode, here, far, o))
		_exit(64);
	o->undercounted = UNDER;
	ml0 = vmstat("unevictable_pgs_mlocked");
	madvise(h, HOG, MADV_NOHUGEPAGE);
	for (int pass = 0; pass < 2; pass++)
		diff_touch(h, HOG, 1);
	o->mlocked_events = vmstat("unevictable_pgs_mlocked") - ml0;
	o->swap_used = read_long(CG "/memory.swap.current");
	/* (a page not mapped has no flags here) */
	o->not_present = pages_with(a, UNDER, ~0ULL, 0);
	o->control_dropped = pages_with(c, UNDER, ~0ULL, 0);
	o->rescued = pages_with(a, UNDER, UNDERCOUNT_MASK,
				F(KPF_LRU) | F(KPF_UNEVICTABLE) | F(KPF_MLOCKED));
	munmap(h, HOG);
	if (mlf_unlock(a, UNDER / 2 * PAGE) ||
	    munlock(a + UNDER / 2 * PAGE, UNDER / 2 * PAGE))
		_exit(62);
	_exit(0);
}

TEST_F_TIMEOUT(rec, undercounted_page_is_no_lost_lock, 300)
{
	struct outcome *o = run_locker(_metadata, undercount_locker, variant->mode);

	ASSERT_NE(NULL, o);
	TH_LOG("%ld pages undercounted (try %ld), %ld mlocked again by reclaim (%ld mlock events), %ld not present; unlocked control: %ld of %d swapped; swap used %ld kB",
	       o->undercounted, o->tries, o->rescued, o->mlocked_events,
	       o->not_present, o->control_dropped, UNDER, o->swap_used >> 10);
	ASSERT_EQ(UNDER, o->undercounted);
	/* reclaim did swap pages like these: otherwise nothing was tested */
	EXPECT_LT(0, o->swap_used);
	EXPECT_LT(0, o->control_dropped);
	/* never reclaimed: still mapped, and reclaim put the lock back */
	EXPECT_EQ(0, o->not_present);
	EXPECT_EQ(UNDER, o->rescued);
	EXPECT_LE(UNDER, o->mlocked_events);
	munmap(o, sizeof(*o));
}

TEST_HARNESS_MAIN
