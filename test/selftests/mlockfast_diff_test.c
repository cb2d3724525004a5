// SPDX-License-Identifier: GPL-2.0
/*
 * Differential tests: every scenario through mlock(2) & co, through the
 * ioctls in each mode and through the routed syscalls in each mode must
 * leave the same observable state (see mlf_diff.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <linux/userfaultfd.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mlf_diff.h"
#include "mlf_test.h"

#define RW	(PROT_READ | PROT_WRITE)
#define ANON	(MAP_PRIVATE | MAP_ANONYMOUS)

#define DIFF_TEST(name)							\
	static void scn_##name(const struct path_ops *p,		\
			       struct diff_log *log);			\
	TEST(name)							\
	{								\
		ASSERT_LE(0, mlf_fd());					\
		EXPECT_EQ(0, diff_run(#name, scn_##name));		\
	}								\
	static void scn_##name(const struct path_ops *p,		\
			       struct diff_log *log)

/* A file of @pages pages, private to this run, with the content written. */
static int new_file(const char *dir, size_t pages)
{
	char path[64], page[PAGE];
	int fd;

	snprintf(path, sizeof(path), "%s/mlf-diff-%d", dir, getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		_exit(95);
	unlink(path);
	memset(page, 'x', sizeof(page));
	for (size_t i = 0; i < pages; i++)
		if (write(fd, page, sizeof(page)) != (ssize_t)sizeof(page))
			_exit(94);
	return fd;
}

/*
 * A child that holds the address space's pages shared (COW) until the
 * caller closes fds[1], the write end of the pipe the child waits on.
 */
static pid_t sharing_child(int fds[2])
{
	pid_t pid;
	char c;

	if (pipe(fds))
		_exit(92);
	pid = fork();
	if (pid == 0) {
		close(fds[1]);
		if (read(fds[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(fds[0]);
	return pid;
}

DIFF_TEST(anon_touched)
{
	char *m = diff_map(0, 16 * PAGE, RW, ANON, -1);

	diff_touch(m, 16 * PAGE, 1);
	diff_ret(log, "lock", p->lock(m, 16 * PAGE));
	diff_state(log, "locked");
	diff_ret(log, "unlock", p->unlock(m, 16 * PAGE));
	diff_state(log, "unlocked");
}

DIFF_TEST(anon_untouched)
{
	char *m = diff_map(0, 16 * PAGE, RW, ANON, -1);

	diff_ret(log, "lock", p->lock(m, 16 * PAGE));
	diff_state(log, "locked");
	diff_ret(log, "unlock", p->unlock(m, 16 * PAGE));
	diff_state(log, "unlocked");
}

DIFF_TEST(anon_partly_touched_and_zero_page)
{
	char *m = diff_map(0, 32 * PAGE, RW, ANON, -1);

	for (int i = 0; i < 32; i += 3)
		diff_touch(m + i * PAGE, PAGE, 1);
	for (int i = 1; i < 32; i += 3)
		diff_touch(m + i * PAGE, PAGE, 0);	/* the zero page */
	diff_ret(log, "lock", p->lock(m, 32 * PAGE));
	diff_state(log, "locked");
	diff_ret(log, "unlock", p->unlock(m, 32 * PAGE));
	diff_state(log, "unlocked");
}

DIFF_TEST(unaligned_and_odd_lengths)
{
	char *m = diff_map(0, 16 * PAGE, RW, ANON, -1);

	diff_touch(m, 16 * PAGE, 1);
	diff_ret(log, "lock +100,5000", p->lock(m + 100, 5000));
	diff_state(log, "a");
	diff_ret(log, "lock len 0", p->lock(m + 8 * PAGE, 0));
	diff_ret(log, "lock len 1", p->lock(m + 9 * PAGE + PAGE - 1, 1));
	diff_state(log, "b");
	diff_ret(log, "unlock +1,1", p->unlock(m + 1, 1));
	diff_ret(log, "unlock len 0", p->unlock(m, 0));
	diff_state(log, "c");
	diff_ret(log, "lock len -1", p->lock(m, -1UL));
	diff_ret(log, "lock wraps", p->lock(m + PAGE, -2 * PAGE));
	diff_ret(log, "unlock wraps", p->unlock(m + PAGE, -2 * PAGE));
	diff_ret(log, "unlock len -1", p->unlock(m, -1UL));
	diff_state(log, "d");
	diff_ret(log, "unlock all", p->unlock(m, 16 * PAGE));
	diff_state(log, "e");
}

DIFF_TEST(holes_and_unmapped)
{
	char *m = diff_map(0, 8 * PAGE, RW, ANON, -1);

	diff_touch(m, 8 * PAGE, 1);
	munmap(m + 3 * PAGE, PAGE);
	diff_ret(log, "lock over hole", p->lock(m, 8 * PAGE));
	diff_state(log, "after hole");
	diff_ret(log, "lock unmapped", p->lock(m + 3 * PAGE, PAGE));
	diff_ret(log, "lock past end", p->lock(m + 4 * PAGE, 8 * PAGE));
	diff_state(log, "after past end");
	diff_ret(log, "unlock over hole", p->unlock(m, 8 * PAGE));
	diff_state(log, "unlocked");
	diff_ret(log, "lock NULL", p->lock(NULL, PAGE));
	diff_ret(log, "lock kernel", p->lock((void *)0xffff888000000000UL, PAGE));
}

DIFF_TEST(split_and_merge)
{
	char *m = diff_map(0, 10 * PAGE, RW, ANON, -1);

	diff_touch(m, 10 * PAGE, 1);
	diff_ret(log, "lock middle", p->lock(m + 4 * PAGE, 2 * PAGE));
	diff_state(log, "split in three");
	diff_ret(log, "lock left", p->lock(m + 3 * PAGE, PAGE));
	diff_ret(log, "lock right", p->lock(m + 6 * PAGE, PAGE));
	diff_state(log, "merged");
	diff_ret(log, "unlock one", p->unlock(m + 5 * PAGE, PAGE));
	diff_state(log, "split again");
	diff_ret(log, "unlock all", p->unlock(m, 10 * PAGE));
	diff_state(log, "merged back");
}

/* Lock (or unlock) page @from of @base, then every @step-th one below @n. */
static int each_page(const struct path_ops *p, bool lock, char *base,
		     int from, int step, int n)
{
	int ret = 0;

	for (int i = from; i < n; i += step)
		ret |= lock ? p->lock(base + i * PAGE, PAGE) :
			      p->unlock(base + i * PAGE, PAGE);
	return ret;
}

/*
 * Whole VMAs among many: with a hundred VMAs side by side the kernel's VMA
 * tree spreads them over several leaves, so a call meets neighbours in its
 * own leaf and in the leaves beside it (the module reads both itself to see
 * whether a merge is possible).  Each lock or unlock below covers exactly
 * one VMA: its neighbours can merge with it on both sides, on neither (their
 * protections differ), or on one.
 */
DIFF_TEST(whole_vmas_across_tree_leaves)
{
	enum { N = 96 };
	char *m = diff_map(0, N * PAGE, RW, ANON, -1);
	char *q = diff_map((N + 8) * PAGE, N * PAGE, RW, ANON, -1);
	int i, k;

	diff_touch(m, N * PAGE, 1);
	diff_touch(q, N * PAGE, 1);
	diff_ret(log, "lock every other page", each_page(p, true, m, 0, 2, N));
	diff_state(log, "alternating");
	diff_ret(log, "lock each gap: merge", each_page(p, true, m, 1, 2, N));
	diff_state(log, "merged by lock");
	diff_ret(log, "unlock every other page",
		 each_page(p, false, m, 0, 2, N));
	diff_state(log, "alternating again");
	diff_ret(log, "unlock each locked VMA: merge",
		 each_page(p, false, m, 1, 2, N));
	diff_state(log, "merged by unlock");
	for (i = 0; i < N; i += 2)
		mprotect(q + i * PAGE, PAGE, PROT_READ);
	diff_ret(log, "lock each VMA, none merges", each_page(p, true, q, 0, 1, N));
	diff_state(log, "each alone, locked");
	diff_ret(log, "unlock each VMA", each_page(p, false, q, 0, 1, N));
	diff_state(log, "each alone, unlocked");
	/*
	 * One side merges: read-only, unlocked, locked in the first region,
	 * the mirror image in the second; again with the pattern shifted by
	 * one VMA and by two, so that the leaf boundaries fall at each place.
	 */
	for (k = 0; k < 3; k++) {
		char *a = m + k * PAGE, *b = q + k * PAGE;

		mprotect(m, N * PAGE, RW);
		mprotect(q, N * PAGE, RW);
		for (i = 0; i < k; i++) {
			mprotect(m + i * PAGE, PAGE, PROT_NONE);
			mprotect(q + i * PAGE, PAGE, PROT_NONE);
		}
		for (i = 0; i + 2 < N - k; i += 3) {
			mprotect(a + i * PAGE, PAGE, PROT_READ);
			mprotect(b + (i + 2) * PAGE, PAGE, PROT_READ);
		}
		diff_ret(log, "lock every third page",
			 each_page(p, true, a, 2, 3, N - k) |
			 each_page(p, true, b, 0, 3, N - k - 2));
		diff_ret(log, "lock the middle ones: merge on one side",
			 each_page(p, true, a, 1, 3, N - k - 1) |
			 each_page(p, true, b, 1, 3, N - k - 1));
		diff_state(log, "merged on one side");
		diff_ret(log, "unlock it all", p->unlock(m, (2 * N + 8) * PAGE));
	}
	diff_state(log, "unlocked again");
}

/*
 * One whole VMA locked and unlocked call after call, as a benchmark does:
 * the module remembers it from one call to the next (6.12), which must not
 * outlive a change to the mm in between.  Each change below makes the next
 * call's right answer differ from the last one's: a new neighbour to merge
 * with, the VMA replaced in the same place, a neighbour's protection
 * changed, the VMA locked and unlocked by mlock(2) itself.
 */
DIFF_TEST(same_vma_call_after_call)
{
	char *r = diff_map(8 * PAGE, 4 * PAGE, PROT_READ, ANON, -1);
	char *m, *n;

	/*
	 * Read-only and read (the zero page), it has no anon_vma: one mapped
	 * beside it later merges with it once their flags agree.
	 */
	diff_touch(r, 4 * PAGE, 0);
	diff_ret(log, "lock", p->lock(r, 4 * PAGE));
	diff_ret(log, "unlock", p->unlock(r, 4 * PAGE));
	diff_ret(log, "lock again", p->lock(r, 4 * PAGE));
	diff_state(log, "locked");
	n = diff_map(12 * PAGE, 4 * PAGE, PROT_READ, ANON, -1);
	diff_ret(log, "unlock: merges with the new one",
		 p->unlock(r, 4 * PAGE));
	diff_state(log, "merged with the new one");
	munmap(r, 8 * PAGE);
	m = diff_map(8 * PAGE, 4 * PAGE, RW, ANON, -1);
	diff_touch(m, 4 * PAGE, 1);
	diff_ret(log, "lock", p->lock(m, 4 * PAGE));
	diff_ret(log, "unlock", p->unlock(m, 4 * PAGE));
	diff_ret(log, "lock", p->lock(m, 4 * PAGE));
	munmap(m, 4 * PAGE);
	m = diff_map(8 * PAGE, 4 * PAGE, RW, ANON, -1);
	diff_touch(m, 2 * PAGE, 1);
	diff_ret(log, "lock the VMA now there", p->lock(m, 4 * PAGE));
	diff_state(log, "replaced and locked");
	diff_ret(log, "unlock", p->unlock(m, 4 * PAGE));
	n = diff_map(4 * PAGE, 4 * PAGE, PROT_READ, ANON, -1);
	diff_ret(log, "lock beside a read-only one", p->lock(m, 4 * PAGE));
	diff_ret(log, "unlock", p->unlock(m, 4 * PAGE));
	diff_ret(log, "lock", p->lock(m, 4 * PAGE));
	mprotect(n, 4 * PAGE, RW);
	mlock(n, 4 * PAGE);
	diff_ret(log, "unlock beside one made RW and mlocked",
		 p->unlock(m, 4 * PAGE));
	diff_state(log, "neighbour changed");
	munlock(n, 4 * PAGE);
	diff_ret(log, "lock: merges with it", p->lock(m, 4 * PAGE));
	diff_state(log, "merged with the neighbour");
	mlock(m, 4 * PAGE);
	munlock(m, 4 * PAGE);
	diff_ret(log, "lock after mlock(2) and munlock(2)",
		 p->lock(m, 4 * PAGE));
	diff_ret(log, "unlock it all", p->unlock(n, 8 * PAGE));
	diff_state(log, "unlocked");
}

DIFF_TEST(lock_twice_unlock_once)
{
	char *m = diff_map(0, 8 * PAGE, RW, ANON, -1);

	diff_touch(m, 8 * PAGE, 1);
	diff_ret(log, "lock", p->lock(m, 8 * PAGE));
	diff_ret(log, "lock again", p->lock(m, 8 * PAGE));
	diff_state(log, "locked twice");
	diff_ret(log, "unlock", p->unlock(m, 8 * PAGE));
	diff_ret(log, "unlock again", p->unlock(m, 8 * PAGE));
	diff_state(log, "unlocked");
}

/*
 * A range locked already is only populated again: every page there is
 * touched as GUP would, and GUP takes over at the first it does more for
 * (a COW shared with a child, a page made absent by the child's exit
 * and a hole the lock never populated, a read-only file page).
 */
DIFF_TEST(lock_again_what_populate_meets)
{
	int fd = new_file("/tmp", 8);
	char *m = diff_map(0, 16 * PAGE, RW, ANON, -1);
	char *f = diff_map(24 * PAGE, 8 * PAGE, PROT_READ, MAP_PRIVATE, fd);
	char *s = diff_map(40 * PAGE, 8 * PAGE, RW, MAP_SHARED, fd);
	int fds[2];
	pid_t pid;

	diff_touch(m, 16 * PAGE, 1);
	diff_touch(f, 8 * PAGE, 0);
	diff_touch(s, 4 * PAGE, 0);
	diff_ret(log, "lock", p->lock(m, 16 * PAGE));
	diff_ret(log, "lock file private", p->lock(f, 8 * PAGE));
	diff_ret(log, "lock file shared", p->lock(s, 8 * PAGE));
	diff_ret(log, "lock again", p->lock(m, 16 * PAGE));
	diff_ret(log, "lock file private again", p->lock(f, 8 * PAGE));
	diff_ret(log, "lock file shared again", p->lock(s, 8 * PAGE));
	diff_state(log, "locked twice");
	pid = sharing_child(fds);
	/* The child's copy is not locked: the pages are COW-shared. */
	diff_ret(log, "lock the second half again",
		 p->lock(m + 8 * PAGE, 8 * PAGE));
	diff_state(log, "second half's COW broken");
	diff_ret(log, "lock all again", p->lock(m, 16 * PAGE));
	diff_state(log, "all COW broken");
	close(fds[1]);
	waitpid(pid, NULL, 0);
	diff_ret(log, "lockall", p->lockall(MCL_CURRENT));
	diff_ret(log, "lockall again", p->lockall(MCL_CURRENT));
	diff_state(log, "lockall twice");
	diff_ret(log, "unlockall", p->unlockall());
	diff_state(log, "unlocked");
	close(fd);
}

/*
 * GUP refuses a VMA whose protection key this thread may not use: mlock
 * locks it, then populate fails (ENOMEM), pages present or not.  QEMU's
 * "max" CPU has protection keys; a machine without them skips.
 */
static void scn_protection_key_closed(const struct path_ops *p,
				      struct diff_log *log);

TEST(protection_key_closed)
{
	int k = pkey_alloc(0, 0);

	if (k < 0)
		SKIP(return, "no protection keys: %s", strerror(errno));
	pkey_free(k);
	ASSERT_LE(0, mlf_fd());
	EXPECT_EQ(0, diff_run("protection_key_closed",
			      scn_protection_key_closed));
}

static void scn_protection_key_closed(const struct path_ops *p,
				      struct diff_log *log)
{
	char *m = diff_map(0, 8 * PAGE, RW, ANON, -1);
	char *n = diff_map(16 * PAGE, 8 * PAGE, RW, ANON, -1);
	int k = pkey_alloc(0, 0);

	if (k < 0)
		_exit(90);
	diff_touch(m, 8 * PAGE, 1);
	diff_touch(n, 4 * PAGE, 1);
	if (pkey_mprotect(m, 4 * PAGE, RW, k) ||
	    pkey_mprotect(n, 8 * PAGE, RW, k))
		_exit(91);
	pkey_set(k, PKEY_DISABLE_ACCESS);
	diff_ret(log, "lock, key closed", p->lock(m, 8 * PAGE));
	diff_ret(log, "lock one present page", p->lock(n + PAGE, PAGE));
	diff_ret(log, "lock one absent page", p->lock(n + 6 * PAGE, PAGE));
	diff_ret(log, "lock again", p->lock(m, 8 * PAGE));
	pkey_set(k, PKEY_DISABLE_WRITE);
	diff_ret(log, "lock, key read-only", p->lock(n, 8 * PAGE));
	diff_ret(log, "lock2 onfault", p->lock2(n, 8 * PAGE, MLOCK_ONFAULT));
	pkey_set(k, 0);
	diff_state(log, "locked");
	diff_ret(log, "unlock", p->unlock(m, 24 * PAGE));
	pkey_free(k);
	diff_state(log, "unlocked");
}

DIFF_TEST(onfault)
{
	char *m = diff_map(0, 16 * PAGE, RW, ANON, -1);

	diff_touch(m, 4 * PAGE, 1);
	diff_ret(log, "lock2 onfault", p->lock2(m, 16 * PAGE, MLOCK_ONFAULT));
	diff_state(log, "onfault");
	diff_touch(m + 8 * PAGE, 2 * PAGE, 1);
	diff_state(log, "faulted two");
	diff_ret(log, "lock without onfault", p->lock(m, 16 * PAGE));
	diff_state(log, "populated");
	diff_ret(log, "lock2 bad flags", p->lock2(m, PAGE, 2));
	diff_ret(log, "lock2 bad flags", p->lock2(m, PAGE, 0x80000000));
	diff_ret(log, "unlock", p->unlock(m, 16 * PAGE));
	diff_state(log, "unlocked");
}

DIFF_TEST(protections)
{
	char *ro = diff_map(0, 4 * PAGE, PROT_READ, ANON, -1);
	char *none = diff_map(8 * PAGE, 4 * PAGE, PROT_NONE, ANON, -1);
	char *rw = diff_map(16 * PAGE, 4 * PAGE, RW, ANON, -1);

	diff_touch(ro, 4 * PAGE, 0);
	diff_touch(rw, 4 * PAGE, 1);
	diff_ret(log, "lock ro", p->lock(ro, 4 * PAGE));
	diff_ret(log, "lock none", p->lock(none, 4 * PAGE));
	diff_state(log, "locked");
	mprotect(rw, 4 * PAGE, PROT_NONE);
	diff_ret(log, "lock rw made none", p->lock(rw, 4 * PAGE));
	mprotect(rw, 4 * PAGE, PROT_READ);
	diff_ret(log, "lock rw made ro", p->lock(rw, 4 * PAGE));
	diff_state(log, "after mprotect");
	diff_ret(log, "unlock", p->unlock(ro, 20 * PAGE));
	diff_ret(log, "unlock pieces", p->unlock(rw, 4 * PAGE));
	diff_state(log, "unlocked");
}

DIFF_TEST(file_private_and_shared)
{
	int fd = new_file("/tmp", 8);
	char *priv = diff_map(0, 8 * PAGE, RW, MAP_PRIVATE, fd);
	char *shared = diff_map(16 * PAGE, 8 * PAGE, RW, MAP_SHARED, fd);
	char *rdonly = diff_map(32 * PAGE, 8 * PAGE, PROT_READ, MAP_SHARED, fd);

	diff_touch(priv, 4 * PAGE, 0);		/* cached, not yet COW */
	diff_touch(shared, 2 * PAGE, 1);
	diff_ret(log, "lock private", p->lock(priv, 8 * PAGE));
	diff_ret(log, "lock shared", p->lock(shared, 8 * PAGE));
	diff_ret(log, "lock rdonly", p->lock(rdonly, 8 * PAGE));
	diff_state(log, "locked");
	diff_ret(log, "unlock shared", p->unlock(shared, 8 * PAGE));
	diff_state(log, "shared unlocked");
	diff_ret(log, "unlock all", p->unlock(priv, 40 * PAGE));
	diff_state(log, "unlocked");
	close(fd);
}

DIFF_TEST(memfd_shared_twice)
{
	int fd = memfd_create("mlf-diff", 0);
	char *a, *b;

	if (fd < 0 || ftruncate(fd, 8 * PAGE))
		_exit(93);
	a = diff_map(0, 8 * PAGE, RW, MAP_SHARED, fd);
	b = diff_map(16 * PAGE, 8 * PAGE, RW, MAP_SHARED, fd);
	diff_touch(a, 8 * PAGE, 1);
	diff_touch(b, 8 * PAGE, 0);
	diff_ret(log, "lock a", p->lock(a, 8 * PAGE));
	diff_ret(log, "lock b", p->lock(b, 8 * PAGE));
	diff_state(log, "both locked");
	diff_ret(log, "unlock a", p->unlock(a, 8 * PAGE));
	diff_state(log, "b still locked");
	diff_ret(log, "unlock b", p->unlock(b, 8 * PAGE));
	diff_state(log, "unlocked");
	close(fd);
}

DIFF_TEST(cow_after_fork)
{
	char *m = diff_map(0, 8 * PAGE, RW, ANON, -1);
	pid_t pid;
	int fds[2];

	diff_touch(m, 8 * PAGE, 1);
	pid = sharing_child(fds);
	diff_state(log, "shared with child");
	diff_ret(log, "lock", p->lock(m, 8 * PAGE));
	diff_state(log, "locked: COW broken");
	diff_ret(log, "unlock", p->unlock(m, 8 * PAGE));
	close(fds[1]);
	waitpid(pid, NULL, 0);
	diff_state(log, "unlocked");
}

DIFF_TEST(child_inherits_no_lock)
{
	char *m = diff_map(0, 8 * PAGE, RW, ANON, -1);
	int fds[2];
	pid_t pid;

	diff_touch(m, 8 * PAGE, 1);
	diff_ret(log, "lock", p->lock(m, 8 * PAGE));
	if (pipe(fds))
		_exit(92);
	pid = fork();
	if (pid == 0) {
		char line[256];
		char *s = read_file("/proc/self/smaps");
		char *lo = s ? strstr(s, "VmFlags:") : NULL;
		int n = snprintf(line, sizeof(line), "child VmLck %ld kB, lo %s",
				 status_kb("VmLck"),
				 lo && strstr(lo, " lo") ? "yes" : "no");

		if (write(fds[1], line, n) != n)
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	{
		char buf[256] = { 0 };

		if (read(fds[0], buf, sizeof(buf) - 1) < 0)
			_exit(91);
		diff_note(log, "%s", buf);
	}
	waitpid(pid, NULL, 0);
	diff_state(log, "parent");
	diff_ret(log, "unlock", p->unlock(m, 8 * PAGE));
}

DIFF_TEST(rlimit_and_capability)
{
	char *m = diff_map(0, 32 * PAGE, RW, ANON, -1);

	diff_touch(m, 32 * PAGE, 1);
	diff_limit(8 * PAGE);
	diff_ret(log, "lock within", p->lock(m, 8 * PAGE));
	diff_ret(log, "lock same again", p->lock(m, 8 * PAGE));
	diff_ret(log, "lock beyond", p->lock(m, 9 * PAGE));
	diff_ret(log, "lock overlap", p->lock(m + 4 * PAGE, 8 * PAGE));
	diff_state(log, "limited");
	diff_ret(log, "lockall current", p->lockall(MCL_CURRENT));
	diff_ret(log, "unlock", p->unlock(m, 32 * PAGE));
	diff_limit(0);
	diff_ret(log, "lock with limit 0", p->lock(m, PAGE));
	diff_ret(log, "lockall with limit 0", p->lockall(MCL_CURRENT));
	diff_ret(log, "unlock with limit 0", p->unlock(m, PAGE));
	diff_state(log, "after");
}

/*
 * RLIMIT_MEMLOCK counts a range's pages that mlock leaves unlocked (the
 * vdso: VM_SPECIAL) in the request but never in locked_vm, so the same
 * lock is allowed once and refused after another lock: mlock(2) under a
 * limit is not idempotent.  (This is why the fuzzer compares its vectors
 * with the syscalls only on ranges clear of such mappings.)
 */
DIFF_TEST(rlimit_counts_pages_mlock_cannot_lock)
{
	char *m = diff_map(0, 8 * PAGE, RW, ANON, -1);
	unsigned long start, end, pages;

	if (mlf_mapping(0, "[vdso]", &start, &end))
		_exit(90);
	pages = (end - start) / PAGE;
	diff_touch(m, 8 * PAGE, 1);
	diff_limit((pages > 4 ? pages : 4) * PAGE);
	diff_ret(log, "lock the vdso", p->lock((void *)start, end - start));
	diff_ret(log, "lock the vdso onfault",
		 p->lock2((void *)start, end - start, MLOCK_ONFAULT));
	diff_ret(log, "lock 4 pages", p->lock(m, 4 * PAGE));
	diff_ret(log, "lock the vdso again", p->lock((void *)start, end - start));
	diff_ret(log, "lock the vdso and nothing else", p->lock((void *)start, 0));
	diff_state(log, "limited");
	diff_ret(log, "unlock the vdso", p->unlock((void *)start, end - start));
	diff_ret(log, "unlock", p->unlock(m, 8 * PAGE));
	diff_ret(log, "lock the vdso at last", p->lock((void *)start, end - start));
	diff_state(log, "after");
}

DIFF_TEST(lockall_current_future)
{
	char *m = diff_map(0, 8 * PAGE, RW, ANON, -1);
	char *later;

	diff_touch(m, 4 * PAGE, 1);
	diff_ret(log, "lockall 0", p->lockall(0));
	diff_ret(log, "lockall onfault alone", p->lockall(MCL_ONFAULT));
	diff_ret(log, "lockall bad bit", p->lockall(8));
	diff_ret(log, "lockall future", p->lockall(MCL_FUTURE));
	later = diff_map(16 * PAGE, 4 * PAGE, RW, ANON, -1);
	diff_state(log, "future mapping");
	diff_ret(log, "munmap", munmap(later, 4 * PAGE));
	diff_ret(log, "unlockall", p->unlockall());
	diff_ret(log, "lockall future onfault",
		 p->lockall(MCL_FUTURE | MCL_ONFAULT));
	later = diff_map(16 * PAGE, 4 * PAGE, RW, ANON, -1);
	diff_touch(later, PAGE, 1);
	diff_state(log, "future onfault mapping");
	diff_ret(log, "unlockall", p->unlockall());
	diff_state(log, "all unlocked");
}

/* mlockall(MCL_CURRENT) locks everything; only our region is compared. */
DIFF_TEST(lockall_current)
{
	char *m = diff_map(0, 8 * PAGE, RW, ANON, -1);
	char *o = diff_map(16 * PAGE, 8 * PAGE, RW, ANON, -1);

	diff_touch(m, 4 * PAGE, 1);
	diff_touch(o, 8 * PAGE, 0);
	diff_ret(log, "lockall current", p->lockall(MCL_CURRENT));
	diff_state(log, "locked");
	diff_note(log, "VmLck>0: %d", status_kb("VmLck") > 0);
	diff_ret(log, "unlockall", p->unlockall());
	diff_state(log, "unlocked");
	diff_ret(log, "lockall current onfault",
		 p->lockall(MCL_CURRENT | MCL_ONFAULT));
	diff_state(log, "locked onfault");
	diff_ret(log, "unlockall", p->unlockall());
	diff_state(log, "unlocked again");
}

DIFF_TEST(thp)
{
	char *m = diff_map(0, 4UL << 20, RW, ANON, -1);

	madvise(m, 4UL << 20, MADV_HUGEPAGE);
	diff_touch(m, 4UL << 20, 1);
	diff_state(log, "touched");
	diff_ret(log, "lock whole", p->lock(m, 2UL << 20));
	diff_state(log, "first THP locked");
	diff_ret(log, "lock cutting", p->lock(m + (3UL << 20), 64 * PAGE));
	diff_state(log, "second THP cut");
	diff_ret(log, "unlock", p->unlock(m, 4UL << 20));
	diff_state(log, "unlocked");
}

/*
 * Large anonymous folios (mTHP, 64 KiB) in a MAP_PRIVATE /dev/zero mapping
 * at a file offset: mlock(2) locks a large folio only where the range
 * covers it whole, and which pages a folio spans comes from its index
 * against the VMA's offset, which from Linux 7.3 is the VMA's anonymous
 * offset rather than vm_pgoff (1 GiB here).  Locks that cover folios
 * whole, half of one, across two, and after the VMA was split inside one.
 */
#define MTHP64		"/sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled"
#define FOLIO64		(16 * PAGE)
#define ZERO_OFF	(1UL << 30)
#define KPF_HEAD	(1ULL << 15)
#define KPF_TAIL	(1ULL << 16)

/* One letter a 64 KiB chunk of @m: L one 64K folio, s not, . absent. */
static void folio_map(const char *m, size_t chunks, char *out)
{
	int pm = open("/proc/self/pagemap", O_RDONLY);
	int kf = open("/proc/kpageflags", O_RDONLY);

	for (size_t c = 0; c < chunks; c++) {
		uint64_t e[16], f = 0, pfn0 = 0;
		int large = 1;

		out[c] = '.';
		if (pm < 0 || kf < 0 ||
		    pread(pm, e, sizeof(e), (uintptr_t)(m + c * FOLIO64) / PAGE * 8) !=
		    (ssize_t)sizeof(e) || !(e[0] >> 63))
			continue;
		for (int i = 0; i < 16 && large; i++) {
			uint64_t pfn = e[i] & ((1ULL << 55) - 1);

			if (!i)
				pfn0 = pfn;
			large = (e[i] >> 63) && pfn == pfn0 + i &&
				pread(kf, &f, 8, pfn * 8) == 8 &&
				(f & (i ? KPF_TAIL : KPF_HEAD));
		}
		out[c] = large ? 'L' : 's';
	}
	out[chunks] = 0;
	if (pm >= 0)
		close(pm);
	if (kf >= 0)
		close(kf);
}

/*
 * The mapping faulted in, in 64K folios where the kernel has them (a few
 * tries, compacting between, so that every path sees the same layout).
 */
static char *map_zero_folios(size_t chunks, struct diff_log *log)
{
	char map[64];
	int fd = open("/dev/zero", O_RDWR);
	char *m = NULL;

	if (fd < 0)
		_exit(95);
	for (int t = 0; t < 5; t++) {
		if (m) {
			munmap(m, chunks * FOLIO64);
			drain_everything();
		}
		m = mmap(DIFF_BASE, chunks * FOLIO64, RW,
			 MAP_PRIVATE | MAP_FIXED_NOREPLACE, fd, ZERO_OFF);
		if (m != DIFF_BASE)
			_exit(99);
		diff_touch(m, chunks * FOLIO64, 1);
		folio_map(m, chunks, map);
		if (access(MTHP64, F_OK) || !strchr(map, 's'))
			break;
	}
	close(fd);
	if (!access(MTHP64, F_OK) && strchr(map, 's')) {
		fprintf(stderr, "# no 64K folios after 5 tries: %s\n", map);
		_exit(93);
	}
	diff_note(log, "64K folios %s", map);
	return m;
}

static void scn_large_folios_at_file_offset(const struct path_ops *p,
					    struct diff_log *log);

/* 64K mTHP on for the test, where the kernel has it (6.8 on). */
TEST(large_folios_at_file_offset)
{
	char *was;
	int set;

	ASSERT_LE(0, mlf_fd());
	was = thp_setting(MTHP64);
	set = was ? write_file_str(MTHP64, "always") : -1;
	EXPECT_EQ(0, diff_run("large_folios_at_file_offset",
			      scn_large_folios_at_file_offset));
	if (was) {
		EXPECT_EQ(0, set) TH_LOG("%s: %m", MTHP64);
		write_file_str(MTHP64, was);
	} else {
		ksft_print_msg("no 64K mTHP here: small folios only\n");
	}
	free(was);
}

static void scn_large_folios_at_file_offset(const struct path_ops *p,
					    struct diff_log *log)
{
	char *m = map_zero_folios(8, log);

	diff_ret(log, "lock folio 0 whole", p->lock(m, FOLIO64));
	diff_state(log, "whole");
	diff_ret(log, "lock half of folio 2", p->lock(m + 2 * FOLIO64, FOLIO64 / 2));
	diff_state(log, "half");
	diff_ret(log, "lock across folios 4-5",
		 p->lock(m + 4 * FOLIO64 + FOLIO64 / 2, FOLIO64));
	diff_state(log, "across");
	/* folio 2's VMA split inside it; folios 2 and 3 locked whole after */
	diff_ret(log, "lock folios 2-3", p->lock(m + 2 * FOLIO64, 2 * FOLIO64));
	diff_ret(log, "lock folios 6-7", p->lock(m + 6 * FOLIO64, 2 * FOLIO64));
	diff_state(log, "after the splits");
	diff_ret(log, "unlock half of folio 6", p->unlock(m + 6 * FOLIO64, FOLIO64 / 2));
	diff_state(log, "folio 6 half unlocked");
	diff_ret(log, "unlock", p->unlock(m, 8 * FOLIO64));
	diff_state(log, "unlocked");
}

DIFF_TEST(mremap_and_munmap_locked)
{
	char *m = diff_map(0, 8 * PAGE, RW, ANON, -1);
	char *n;

	diff_touch(m, 8 * PAGE, 1);
	diff_ret(log, "lock", p->lock(m, 8 * PAGE));
	n = mremap(m, 8 * PAGE, 12 * PAGE, MREMAP_MAYMOVE | MREMAP_FIXED,
		   DIFF_BASE + 32 * PAGE);
	diff_note(log, "mremap %s", n == DIFF_BASE + 32 * PAGE ? "ok" : "failed");
	diff_state(log, "moved and grown");
	diff_ret(log, "munmap part", munmap(n + 2 * PAGE, 2 * PAGE));
	diff_state(log, "part unmapped");
	diff_ret(log, "unlock", p->unlock(n, 12 * PAGE));
	diff_state(log, "unlocked");
}

DIFF_TEST(brk_with_future)
{
	char *cur = sbrk(0);

	diff_ret(log, "lockall future", p->lockall(MCL_FUTURE));
	diff_note(log, "sbrk %s", sbrk(8 * PAGE) == (void *)-1 ? "failed" : "ok");
	diff_note(log, "heap grew locked: VmLck %ld kB >= 32",
		  status_kb("VmLck"));
	diff_ret(log, "unlockall", p->unlockall());
	diff_note(log, "VmLck %ld", status_kb("VmLck"));
	diff_note(log, "brk back %d", brk(cur));
}

/*
 * A real-time program's start: mlockall(MCL_CURRENT | MCL_FUTURE), then it
 * expects to take no page fault at all, major or minor, in memory it had
 * before the call or mapped after it.  In a child, through @p; its exit
 * status: 0, or which part faulted.
 */
static int rt_start_faults(const struct path_ops *p)
{
	const size_t len = 8UL << 20;
	char *before = mmap(NULL, len, RW, ANON, -1, 0), *after;
	int fd = open("/proc/self/exe", O_RDONLY);
	char *file = fd < 0 ? MAP_FAILED :
		     mmap(NULL, 16 * PAGE, PROT_READ, MAP_PRIVATE, fd, 0);
	volatile char sink = 0;
	struct rusage r0, r1;

	if (before == MAP_FAILED || file == MAP_FAILED)
		return 90;
	before[0] = 1;	/* one page present, the rest not */
	if (p->lockall(MCL_CURRENT | MCL_FUTURE))
		return 91;
	after = mmap(NULL, len, RW, ANON, -1, 0);
	if (after == MAP_FAILED)
		return 92;
	getrusage(RUSAGE_SELF, &r0);
	for (size_t i = 0; i < len; i += PAGE) {
		before[i] = 2;
		after[i] = 3;
	}
	for (size_t i = 0; i < 16 * PAGE; i += PAGE)
		sink += file[i];
	getrusage(RUSAGE_SELF, &r1);
	(void)sink;
	if (r1.ru_majflt != r0.ru_majflt)
		return 93;
	if (r1.ru_minflt != r0.ru_minflt)
		return 94;
	return p->unlockall() ? 95 : 0;
}

TEST(rt_start_no_faults_after_lockall)
{
	long mlocked0 = meminfo_kb("Mlocked");

	ASSERT_LE(0, mlf_fd());
	for (int i = 0; i < diff_npaths; i++) {
		int st = 0, skip = diff_path_prepare(&diff_paths[i]);
		pid_t pid;

		ASSERT_LE(0, skip) TH_LOG("%s", diff_paths[i].name);
		if (skip)
			continue;
		pid = fork();
		ASSERT_LE(0, pid);
		if (!pid)
			_exit(diff_path_enter(&diff_paths[i]) ? 89 :
			      rt_start_faults(&diff_paths[i]));
		ASSERT_EQ(pid, waitpid(pid, &st, 0));
		EXPECT_TRUE(WIFEXITED(st));
		/* 93: a major fault, 94: a minor one, others: setup */
		EXPECT_EQ(0, WEXITSTATUS(st))
			TH_LOG("%s: exit %d", diff_paths[i].name, WEXITSTATUS(st));
	}
	write_file_str("/sys/module/mlockfast/parameters/default_mode",
		       "deferred");
	drain_everything();
	EXPECT_EQ(mlocked0, meminfo_kb("Mlocked"));
}

/*
 * Userfaultfd read-write protection (RWP, Linux 7.3): a protected page is a
 * present pte made PROT_NONE.  mlock(2)'s populate faults every such pte
 * (GUP does, present or not), which in async mode lifts the protection: a
 * locked range then takes no fault when touched.  Defined here as in 7.3's
 * uapi header; the build host's is older.
 */
#ifndef UFFD_FEATURE_RWP
#define UFFD_FEATURE_RWP		(1ULL << 17)
#define UFFD_FEATURE_RWP_ASYNC		(1ULL << 18)
#define UFFDIO_REGISTER_MODE_RWP	(1ULL << 3)
#define _UFFDIO_RWPROTECT		(0x09)
struct uffdio_rwprotect {
	struct uffdio_range range;
	__u64 mode;
};
#define UFFDIO_RWPROTECT_MODE_RWP	(1ULL << 0)
#define UFFDIO_RWPROTECT	_IOWR(UFFDIO, _UFFDIO_RWPROTECT, struct uffdio_rwprotect)
#endif

/* A userfaultfd with async RWP, or -1 with errno (EINVAL: no RWP). */
static int uffd_rwp_async(void)
{
	struct uffdio_api api = {
		.api = UFFD_API,
		.features = UFFD_FEATURE_RWP | UFFD_FEATURE_RWP_ASYNC,
	};
	int fd = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);

	if (fd < 0)
		return -1;
	if (ioctl(fd, UFFDIO_API, &api)) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* The mappings RWP is tried on: the walk treats each differently. */
enum rwp_map { RWP_PRIVATE, RWP_SHARED, RWP_READ_ONLY, RWP_NMAPS };
static const char *const rwp_map_names[] = {
	"private anonymous", "shared anonymous", "read-only private",
};

/*
 * In a child, through @p: 16 touched pages of mapping @kind, RWP-protected,
 * locked, touched again (read, where read-only).  Its exit status: 100 +
 * the minor faults the second touch took (at most 100 + 16), or a setup
 * step's code below 100.
 */
static int rwp_faults_after_lock(const struct path_ops *p, enum rwp_map kind)
{
	const size_t len = 16 * PAGE;
	char *m = mmap(NULL, len, RW, kind == RWP_SHARED ?
		       MAP_SHARED | MAP_ANONYMOUS : ANON, -1, 0);
	struct uffdio_register reg = {
		.range = { .start = (unsigned long)m, .len = len },
		.mode = UFFDIO_REGISTER_MODE_RWP,
	};
	struct uffdio_rwprotect prot = {
		.range = { .start = (unsigned long)m, .len = len },
		.mode = UFFDIO_RWPROTECT_MODE_RWP,
	};
	volatile char sink = 0;
	struct rusage r0, r1;
	int fd = uffd_rwp_async();

	if (m == MAP_FAILED || fd < 0)
		return 90;
	memset(m, 1, len);
	if (kind == RWP_READ_ONLY && mprotect(m, len, PROT_READ))
		return 90;
	if (ioctl(fd, UFFDIO_REGISTER, &reg) || ioctl(fd, UFFDIO_RWPROTECT, &prot))
		return 91;
	if (p->lock(m, len))
		return 92;
	getrusage(RUSAGE_SELF, &r0);
	for (size_t i = 0; i < len; i += PAGE) {
		if (kind == RWP_READ_ONLY)
			sink += m[i];
		else
			m[i] = 2;
	}
	getrusage(RUSAGE_SELF, &r1);
	(void)sink;
	if (p->unlock(m, len))
		return 93;
	return 100 + (int)(r1.ru_minflt - r0.ru_minflt);
}

/*
 * Through every path the lock of an RWP-protected range leaves it taking
 * as many faults as through mlock(2) (none: it faults them all itself),
 * in a private, a shared and a read-only mapping (the walk sends a
 * private writable one's PROT_NONE ptes to populate for COW anyway; the
 * others only for RWP).  On a kernel without RWP (before 7.3), that the
 * kernel has none: the module then has nothing to do for it
 * (MLF_VM_UFFD_RWP is VM_NONE there).
 */
/* rwp_faults_after_lock() in a child: its exit status, 0 if it died. */
static int rwp_child(const struct path_ops *p, enum rwp_map kind)
{
	int st = 0;
	pid_t pid = fork();

	if (pid < 0)
		return 0;
	if (!pid)
		_exit(diff_path_enter(p) ? 89 : rwp_faults_after_lock(p, kind));
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return 0;
	return WEXITSTATUS(st);
}

/* Is the running kernel 7.3 or later (where every flavour we test has RWP)? */
static bool kernel_has_rwp_series(void)
{
	struct utsname u;
	int major = 0, minor = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &major, &minor) != 2)
		return false;
	return major > 7 || (major == 7 && minor >= 3);
}

TEST(rwp_protected_range_populated_as_mlock_does)
{
	int fd = uffd_rwp_async();

	if (fd < 0) {
		/* 7.3's three Debian flavours all have it: no RWP there is a defect */
		EXPECT_FALSE(kernel_has_rwp_series())
			TH_LOG("userfaultfd with RWP on 7.3 or later: %m");
		EXPECT_EQ(EINVAL, errno) TH_LOG("userfaultfd: %m");
		return;
	}
	close(fd);
	ASSERT_LE(0, mlf_fd());
	/*
	 * A locked page migrated between the lock and the touch (compaction
	 * may move mlocked pages) costs one more fault on that side, so a
	 * count is taken up to three times: the least of the syscalls', and
	 * each path's until it matches.  A defect is every time (16 faults).
	 */
	for (int k = 0; k < RWP_NMAPS; k++) {
		int want = -1;

		for (int i = 0; i < diff_npaths; i++) {
			int got = -1, skip = diff_path_prepare(&diff_paths[i]);

			ASSERT_LE(0, skip) TH_LOG("%s", diff_paths[i].name);
			if (skip)
				continue;
			for (int t = 0; t < 3; t++) {
				int st = rwp_child(&diff_paths[i], k);

				ASSERT_LE(100, st)
					TH_LOG("%s, %s: setup step %d failed",
					       rwp_map_names[k], diff_paths[i].name, st);
				if (got < 0 || st - 100 < got)
					got = st - 100;
				if (i > 0 && got == want)
					break;
			}
			if (i == 0)	/* [0]: the syscalls */
				want = got;
			EXPECT_EQ(want, got)
				TH_LOG("%s, %s: %d faults after the lock, mlock(2): %d",
				       rwp_map_names[k], diff_paths[i].name, got, want);
		}
		ksft_print_msg("rwp: %s: faults after mlock(2) of 16 protected pages: %d\n",
			       rwp_map_names[k], want);
	}
	write_file_str("/sys/module/mlockfast/parameters/default_mode",
		       "deferred");
}

/*
 * Every scenario also through the routed syscalls, in each mode: routing
 * on for this program (the syscall path chooses never to be routed).
 */
static void __attribute__((constructor)) route_all(void)
{
	if (mlf_module_loaded() && diff_route_all())
		fprintf(stderr, "# route=all: %m (routed paths not checked)\n");
}

TEST_HARNESS_MAIN
