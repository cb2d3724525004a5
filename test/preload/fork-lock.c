// SPDX-License-Identifier: GPL-2.0
/*
 * mlf-fork-lock [-n N] [-s SIZE] [-k none|mlock|mlockall] [-H]: fork N
 * children (after 10 unmeasured, none if SIZE is over 64 MiB) that each map
 * SIZE bytes (in small pages, or with -H in THP), touch them, lock them once
 * through libc (so LD_PRELOAD=libmlockfast.so.1 routes the call) and exit;
 * the parent reaps each before the next.  Prints the time per child from
 * fork to reaped, and of the lock call alone (the child's first), p50 and
 * p99, in ns: instructions under --icount.  This is the shape of a
 * short-lived program that locks a secure pool once, and of stress-ng's
 * --mlockmany: the lock's first call and the exit are all of it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int pct99(int n)
{
	return (n * 99) / 100 < n ? (n * 99) / 100 : n - 1;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

static int thp;
static long long *call_ns;	/* shared: the child's lock call, timed by it */

static void child(size_t size, const char *how)
{
	char *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	long long t0;
	int err = 0;

	if (p == MAP_FAILED)
		_exit(2);
	/* Debian's THP default is "always": small pages must be asked for. */
	if (madvise(p, size, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE))
		_exit(2);
	memset(p, 1, size);
	t0 = now_ns();
	if (!strcmp(how, "mlock"))
		err = mlock(p, size);
	else if (!strcmp(how, "mlockall"))
		err = mlockall(MCL_CURRENT);
	*call_ns = now_ns() - t0;
	_exit(err ? 3 : 0);
}

static int one(size_t size, const char *how, long long *ns, long long *call)
{
	long long t0 = now_ns();
	pid_t pid = fork();
	int st;

	if (pid == 0)
		child(size, how);
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	*ns = now_ns() - t0;
	*call = *call_ns;
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "mlf-fork-lock: child exited %d (%s)\n",
			WIFEXITED(st) ? WEXITSTATUS(st) : -1,
			WEXITSTATUS(st) == 3 ? "lock failed" : "no memory");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *how = "mlock";
	size_t size = 32768;
	long long *t, dummy;
	int n = 200, opt;

	while ((opt = getopt(argc, argv, "n:s:k:H")) != -1) {
		switch (opt) {
		case 'n':
			n = atoi(optarg);
			break;
		case 's':
			size = strtoul(optarg, NULL, 0);
			break;
		case 'k':
			how = optarg;
			break;
		case 'H':
			thp = 1;
			break;
		default:
			goto usage;
		}
	}
	if (n <= 0 || !size || (strcmp(how, "none") && strcmp(how, "mlock") &&
				strcmp(how, "mlockall")))
		goto usage;
	t = calloc(2 * (size_t)n, sizeof(*t));
	call_ns = mmap(NULL, sizeof(*call_ns), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!t || call_ns == MAP_FAILED)
		return 1;
	for (int i = 0; i < (size > (64 << 20) ? 0 : 10); i++)
		if (one(size, how, &dummy, &dummy))
			return 1;
	for (int i = 0; i < n; i++)
		if (one(size, how, &t[i], &t[n + i]))
			return 1;
	qsort(t, n, sizeof(*t), cmp_ll);
	qsort(t + n, n, sizeof(*t), cmp_ll);
	printf("fork-lock %-8s size %zu n %d: p50 %lld p99 %lld ns per child, call p50 %lld p99 %lld\n",
	       how, size, n, t[n / 2], t[pct99(n)], t[n + n / 2], t[n + pct99(n)]);
	free(t);
	return 0;
usage:
	fprintf(stderr, "usage: mlf-fork-lock [-n N] [-s SIZE] [-k none|mlock|mlockall] [-H]\n");
	return 2;
}
