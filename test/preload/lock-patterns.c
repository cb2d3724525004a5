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
 * Prints "lock-patterns WHAT ...: lock p50 A p99 B unlock p50 C p99 D pair
 * p50 E p99 F" in ns per call (pair: a lock and its unlock).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "timing.h"

#define WARM	10	/* heap's unmeasured rounds; hold's are 2 */




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

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "";
	int threads = 8, ms = 50, opt, total;
	long long r[6];
	size_t size = 65536;

	optind = 2;
	while ((opt = getopt(argc, argv, "t:n:s:h:")) != -1) {
		switch (opt) {
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
	if (strcmp(what, "heap") && strcmp(what, "hold"))
		goto usage;
	if (n < 0)
		n = !strcmp(what, "heap") ? 200 : 20;
	total = !strcmp(what, "heap") ? threads * n : n;
	if (n < 1 || total < 1 || !size || ms < 0)
		goto usage;
	lock_ns = calloc(3 * (size_t)total, sizeof(*lock_ns));
	if (!lock_ns)
		return 1;
	unlock_ns = lock_ns + total;
	pair_ns = unlock_ns + total;
	if ((!strcmp(what, "heap") ? heap(threads) : hold(size, ms)) || failed) {
		fprintf(stderr, "mlf-lock-patterns: %s failed\n", what);
		return 1;
	}
	pct(lock_ns, total, &r[0], &r[1]);
	pct(unlock_ns, total, &r[2], &r[3]);
	pct(pair_ns, total, &r[4], &r[5]);
	if (!strcmp(what, "heap"))
		printf("lock-patterns heap threads %d n %d:", threads, n);
	else
		printf("lock-patterns hold size %zu ms %d n %d:", size, ms, n);
	printf(" lock p50 %lld p99 %lld unlock p50 %lld p99 %lld pair p50 %lld p99 %lld\n",
	       r[0], r[1], r[2], r[3], r[4], r[5]);
	free(lock_ns);
	return 0;
usage:
	fprintf(stderr, "usage: mlf-lock-patterns heap [-t THREADS] [-n N]\n"
		"       mlf-lock-patterns hold [-n N] [-s SIZE] [-h MS]\n");
	return 2;
}
