// SPDX-License-Identifier: GPL-2.0
/*
 * mlf-lock-patterns: two call patterns of real programs, each call timed
 * alone through libc (so that LD_PRELOAD=libmlockfast.so.1 routes it), after
 * unmeasured rounds (10 of heap, 2 of hold).  In an --icount guest ns are
 * instructions.
 *
 *   mlf-lock-patterns heap [-t THREADS] [-n N]
 *	THREADS threads (8) each take a 4 KiB page-aligned buffer from their
 *	own malloc arena, touch it, and lock and unlock it N times (200): the
 *	lock splits the arena's heap VMA in three, the unlock merges it back.
 *   mlf-lock-patterns hold [-n N] [-s SIZE] [-h MS]
 *	One mapping of SIZE bytes (64 KiB), small pages, touched; N times (20)
 *	lock it, hold it MS milliseconds (50, past the module's defer_ms, so
 *	that deferred moves are paid meanwhile), and unlock it: the unlock is
 *	of folios on the unevictable list, and no call should pay the moves.
 *
 *   mlf-lock-patterns guarded [-l] [-n N] [-v L]
 *	A guarded buffer's VM calls, libsodium's sodium_malloc() and
 *	sodium_free() without their mlock: map 4 pages, two PROT_NONE guards,
 *	MADV_DONTDUMP, touch, mprotect read-only and back, MADV_DODUMP, unmap;
 *	N times (300), each timed whole.  -l: after the process has locked
 *	(three lock and unlock pairs, one page kept locked, then 50 ms), as a
 *	program that locks a key at start; else before it ever locks.  -v:
 *	over L layouts of the address space (1): see guarded().
 *   mlf-lock-patterns shared [-o] [-n N] [-v L]
 *	One page at a time of a MAP_SHARED memfd mapping, never touched
 *	before: lock it (which faults it in) and unlock it, N pages (300).
 *	-o: the mapping is first locked with MLOCK_ONFAULT.  -v: as guarded.
 *
 * Prints "lock-patterns WHAT ...: lock p50 A p99 B unlock p50 C p99 D pair
 * p50 E p99 F" in ns per call (pair: a lock and its unlock), or for guarded
 * "...: iteration p50 A p99 B".
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "timing.h"

#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 0x01
#endif

#define WARM	10	/* unmeasured rounds of heap, guarded, shared; hold's 2 */

static int n = -1, failed;
static long long *lock_ns, *unlock_ns, *pair_ns;

/* One lock and unlock of @p, timed into slot @i (< 0: not measured). */
static void round_trip(char *p, size_t size, int i)
{
	long long t0, t1, t2;

	t0 = now_ns();
	if (mlock(p, size))
		failed = 1;
	t1 = now_ns();
	if (munlock(p, size))
		failed = 1;
	t2 = now_ns();
	if (i >= 0) {
		lock_ns[i] = t1 - t0;
		unlock_ns[i] = t2 - t1;
		pair_ns[i] = t2 - t0;
	}
}

static pthread_barrier_t start;

static void *heap_thread(void *arg)
{
	long id = (long)arg;
	char *p = aligned_alloc(4096, 4096);

	if (!p) {
		failed = 1;
		return NULL;
	}
	memset(p, 1, 4096);
	pthread_barrier_wait(&start);
	for (int i = 0; i < WARM; i++)
		round_trip(p, 4096, -1);
	for (int i = 0; i < n; i++)
		round_trip(p, 4096, (int)id * n + i);
	free(p);
	return NULL;
}

static int heap(int threads)
{
	pthread_t t[64];

	if (threads < 1 || threads > 64)
		return -1;
	pthread_barrier_init(&start, NULL, (unsigned int)threads);
	for (long i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, heap_thread, (void *)i))
			return -1;
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	return 0;
}

static int hold(size_t size, int ms)
{
	struct timespec h = { ms / 1000, (ms % 1000) * 1000000L };
	char *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	long long t0, t1;

	if (p == MAP_FAILED || madvise(p, size, MADV_NOHUGEPAGE))
		return -1;
	memset(p, 1, size);
	for (int i = -2; i < n; i++) {
		t0 = now_ns();
		if (mlock(p, size))
			failed = 1;
		t1 = now_ns();
		nanosleep(&h, NULL);
		if (i >= 0) {
			lock_ns[i] = t1 - t0;
			t0 = now_ns();
		}
		if (munlock(p, size))
			failed = 1;
		if (i >= 0) {
			unlock_ns[i] = now_ns() - t0;
			pair_ns[i] = lock_ns[i] + unlock_ns[i];
		}
	}
	munmap(p, size);
	return 0;
}

/* sodium_malloc(4096) and sodium_free()'s VM calls, without the mlock. */
static int guarded_once(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -1;
	if (mprotect(p, pg, PROT_NONE) || mprotect(p + 3 * pg, pg, PROT_NONE) ||
	    madvise(p + pg, 2 * pg, MADV_DONTDUMP))
		return -1;
	memset(p + pg, 1, 2 * pg);
	if (mprotect(p + pg, 2 * pg, PROT_READ) ||
	    mprotect(p + pg, 2 * pg, PROT_READ | PROT_WRITE) ||
	    madvise(p + pg, 2 * pg, MADV_DODUMP))
		return -1;
	return munmap(p, 4 * pg);
}

/* What a program that locks a key at start has done by the time it works. */
static int lock_a_key(void)
{
	struct timespec h = { 0, 50 * 1000000L };
	long pg = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -1;
	memset(p, 1, 2 * pg);
	for (int i = 0; i < 3; i++)
		if (mlock(p, pg) || munlock(p, pg))
			return -1;
	if (mlock(p + pg, pg))
		return -1;
	nanosleep(&h, NULL);
	return 0;
}

/*
 * One VMA more (a page of its own, between two PROT_NONE pages' VMAs that
 * cannot merge with it).
 */
static int one_vma_more(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, 2 * pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	return p == MAP_FAILED || mprotect(p, pg, PROT_NONE) ? -1 : 0;
}

/*
 * The cost of a guarded buffer's VM calls moves with where its VMAs fall in
 * the maple tree's nodes, so with the number of VMAs the process has (on
 * 6.12, from 60k to 82k instructions as one VMA more comes and goes); a
 * preloaded library adds VMAs.  So the n iterations run with 0, 1, ...,
 * @layouts - 1 VMAs more, n / @layouts each: the percentiles are over
 * those layouts, as a program's own layout is any of them.
 */
static int guarded(int after_lock, int layouts)
{
	int per = n / layouts, i = 0;
	long long t0;

	if (after_lock && lock_a_key())
		return -1;
	for (int l = 0; l < layouts; l++) {
		if (l && one_vma_more())
			return -1;
		for (int j = -WARM; j < per || (l == layouts - 1 && i < n); j++) {
			t0 = now_ns();
			if (guarded_once())
				return -1;
			if (j >= 0)
				pair_ns[i++] = now_ns() - t0;
		}
	}
	return 0;
}

/* Over @layouts layouts too, as guarded(): a lock splits a VMA. */
static int shared(int onfault, int layouts)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t size = (size_t)(n + WARM * layouts) * pg;
	int fd = (int)syscall(SYS_memfd_create, "mlf-shared", 0);
	int per = n / layouts, i = 0;
	char *p, *q;

	if (fd < 0 || ftruncate(fd, (off_t)size))
		return -1;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -1;
	if (onfault && syscall(SYS_mlock2, p, size, MLOCK_ONFAULT))
		return -1;
	q = p;
	for (int l = 0; l < layouts; l++) {
		if (l && one_vma_more())
			return -1;
		for (int j = -WARM; j < per || (l == layouts - 1 && i < n);
		     j++, q += pg)
			round_trip(q, pg, j >= 0 ? i++ : -1);
	}
	return munmap(p, size);
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "";
	int threads = 8, ms = 50, opt, total, flag = 0, layouts = 1, ret;
	long long r[6];
	size_t size = 65536;

	optind = 2;
	while ((opt = getopt(argc, argv, "t:n:s:h:lov:")) != -1) {
		switch (opt) {
		case 'v':
			layouts = atoi(optarg);
			break;
		case 'l':
		case 'o':
			flag = 1;
			break;
		case 't':
			threads = atoi(optarg);
			break;
		case 'n':
			n = atoi(optarg);
			break;
		case 's':
			size = strtoul(optarg, NULL, 0);
			break;
		case 'h':
			ms = atoi(optarg);
			break;
		default:
			goto usage;
		}
	}
	if (strcmp(what, "heap") && strcmp(what, "hold") &&
	    strcmp(what, "guarded") && strcmp(what, "shared"))
		goto usage;
	if (n < 0)
		n = !strcmp(what, "heap") ? 200 : !strcmp(what, "hold") ? 20 : 300;
	total = !strcmp(what, "heap") ? threads * n : n;
	if (n < 1 || total < 1 || !size || ms < 0 || layouts < 1 ||
	    layouts > n)
		goto usage;
	lock_ns = calloc(3 * (size_t)total, sizeof(*lock_ns));
	if (!lock_ns)
		return 1;
	unlock_ns = lock_ns + total;
	pair_ns = unlock_ns + total;
	if (!strcmp(what, "heap"))
		ret = heap(threads);
	else if (!strcmp(what, "hold"))
		ret = hold(size, ms);
	else if (!strcmp(what, "guarded"))
		ret = guarded(flag, layouts);
	else
		ret = shared(flag, layouts);
	if (ret || failed) {
		fprintf(stderr, "mlf-lock-patterns: %s failed: %s\n", what,
			strerror(errno));
		return 1;
	}
	if (!strcmp(what, "guarded")) {
		pct(pair_ns, total, &r[4], &r[5]);
		printf("lock-patterns guarded%s n %d: iteration p50 %lld p99 %lld\n",
		       flag ? " after-lock" : "", n, r[4], r[5]);
		free(lock_ns);
		return 0;
	}
	pct(lock_ns, total, &r[0], &r[1]);
	pct(unlock_ns, total, &r[2], &r[3]);
	pct(pair_ns, total, &r[4], &r[5]);
	if (!strcmp(what, "heap"))
		printf("lock-patterns heap threads %d n %d:", threads, n);
	else if (!strcmp(what, "hold"))
		printf("lock-patterns hold size %zu ms %d n %d:", size, ms, n);
	else
		printf("lock-patterns shared%s n %d:", flag ? " onfault" : "", n);
	printf(" lock p50 %lld p99 %lld unlock p50 %lld p99 %lld pair p50 %lld p99 %lld\n",
	       r[0], r[1], r[2], r[3], r[4], r[5]);
	free(lock_ns);
	return 0;
usage:
	fprintf(stderr, "usage: mlf-lock-patterns heap [-t THREADS] [-n N]\n"
		"       mlf-lock-patterns hold [-n N] [-s SIZE] [-h MS]\n"
		"       mlf-lock-patterns guarded [-l] [-n N] [-v L]\n"
		"       mlf-lock-patterns shared [-o] [-n N] [-v L]\n");
	return 2;
}
