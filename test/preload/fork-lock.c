// SPDX-License-Identifier: GPL-2.0
/*
 * mlf-fork-lock [-n N] [-s SIZE] [-k none|mlock|mlockall|ioctl|many] [-H] [-x]: fork N
 * children (after 10 unmeasured, none if SIZE is over 64 MiB) that each map
 * SIZE bytes (in small pages, or with -H in THP), touch them, lock them once
 * through libc (so LD_PRELOAD=libmlockfast.so.1 routes the call) and exit;
 * the parent reaps each before the next.  Prints the time per child from
 * fork to reaped, and of the lock call alone (the child's first), p50 and
 * p99, in ns: instructions under --icount.  This is the shape of a
 * short-lived program that locks a secure pool once, and of stress-ng's
 * --mlockmany: the lock's first call and the exit are all of it.  "-k
 * ioctl" locks through /dev/mlockfast directly, opened by the parent, so
 * that the module's path is measured apart from the library's.  With -x
 * each child execs this program again before it maps and locks: a freshly
 * started program's first lock, whose libraries the loader has just run,
 * rather than a forked child's, which faults in every code page it runs.
 * "-k many" is the life of a child of stress-ng's --mlockmany, run to its
 * end rather than until the stressor kills it: SIZE (its RLIMIT_MEMLOCK)
 * locked in 64 KiB calls (the first lock: the call's figure), one round
 * of its loop (unlock and lock again; mlock and munlock of nothing; lock
 * and unlock twice SIZE, which stop at the first call that fails; an
 * munlock of ~0 bytes), unlocked and unmapped.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/mlockfast.h>
#include "timing.h"

static int thp;
static int dev = -1;	/* -k ioctl: the parent's descriptor */
static long long *call_ns;	/* shared: the child's lock call, timed by it */

/* stress-ng's mlock_interruptible() and munlock_interruptible(). */
static int chunks(char *p, size_t len, int (*f)(const void *, size_t))
{
	const size_t chunk = 65536;

	for (; len; p += chunk, len -= len < chunk ? len : chunk)
		if (f(p, len < chunk ? len : chunk))
			return -1;
	return 0;
}

/* The rest of a --mlockmany child's life, after its first lock. */
static void many(char *p, size_t size)
{
	chunks(p, size, munlock);
	chunks(p, size, mlock);
	mlock(p, 0);
	munlock(p, 0);
	chunks(p, 2 * size, mlock);
	chunks(p, 2 * size, munlock);
	munlock(p, ~(size_t)0);
	chunks(p, size, munlock);
	munmap(p, size);
}

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
	else if (!strcmp(how, "many"))
		err = chunks(p, size, mlock);
	else if (!strcmp(how, "mlockall"))
		err = mlockall(MCL_CURRENT);
	else if (!strcmp(how, "ioctl")) {
		struct mlockfast_range r = {
			.size = sizeof(r), .addr = (unsigned long)p, .len = size,
		};

		err = ioctl(dev, MLOCKFAST_IOC_LOCK, &r);
	}
	*call_ns = now_ns() - t0;
	if (!err && !strcmp(how, "many"))
		many(p, size);
	_exit(err ? 3 : 0);
}

static char *self_exe;	/* -x: argv[0] of the exec, or NULL */

static int one(size_t size, const char *how, long long *ns, long long *call)
{
	long long t0 = now_ns();
	pid_t pid = fork();
	int st;

	if (pid == 0 && self_exe) {
		char sz[32], fd[16], *argv[] = {
			self_exe, "--child", sz, (char *)how, fd,
			thp ? "1" : "0", NULL,
		};

		snprintf(sz, sizeof(sz), "%zu", size);
		snprintf(fd, sizeof(fd), "%d", dev);
		execv("/proc/self/exe", argv);
		_exit(4);
	}
	if (pid == 0)
		child(size, how);
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	*ns = now_ns() - t0;
	*call = *call_ns;
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "mlf-fork-lock: child exited %d (%s)\n",
			WIFEXITED(st) ? WEXITSTATUS(st) : -1,
			WEXITSTATUS(st) == 3 ? "lock failed" :
			WEXITSTATUS(st) == 4 ? "exec failed" : "no memory");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *how = "mlock";
	size_t size = 32768;
	long long *t, dummy, r[4];
	int n = 200, opt;

	/* -x's exec'd child: --child SIZE HOW FD THP, the shared page as fd 3 */
	if (argc == 6 && !strcmp(argv[1], "--child")) {
		dev = atoi(argv[4]);
		thp = atoi(argv[5]);
		call_ns = mmap(NULL, sizeof(*call_ns), PROT_READ | PROT_WRITE,
			       MAP_SHARED, 3, 0);
		if (call_ns == MAP_FAILED)
			_exit(2);
		child(strtoul(argv[2], NULL, 0), argv[3]);
	}
	while ((opt = getopt(argc, argv, "n:s:k:Hx")) != -1) {
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
		case 'x':
			self_exe = argv[0];
			break;
		default:
			goto usage;
		}
	}
	if (n <= 0 || !size || (strcmp(how, "none") && strcmp(how, "mlock") &&
				strcmp(how, "mlockall") && strcmp(how, "ioctl") &&
				strcmp(how, "many")))
		goto usage;
	if (!strcmp(how, "ioctl")) {
		/* (-x: the exec'd child inherits it) */
		dev = open("/dev/mlockfast", O_RDWR | (self_exe ? 0 : O_CLOEXEC));
		if (dev < 0) {
			perror("mlf-fork-lock: /dev/mlockfast");
			return 1;
		}
	}
	t = calloc(2 * (size_t)n, sizeof(*t));
	if (!t)
		return 1;
	if (self_exe) {
		/* The exec'd child finds the shared page as its fd 3. */
		int fd = memfd_create("mlf-fork-lock", 0);

		if (fd < 0 || ftruncate(fd, sizeof(*call_ns)) ||
		    (fd != 3 && dup2(fd, 3) != 3))
			return 1;
		call_ns = mmap(NULL, sizeof(*call_ns), PROT_READ | PROT_WRITE,
			       MAP_SHARED, 3, 0);
	} else {
		call_ns = mmap(NULL, sizeof(*call_ns), PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	}
	if (call_ns == MAP_FAILED)
		return 1;
	for (int i = 0; i < (size > (64 << 20) ? 0 : 10); i++)
		if (one(size, how, &dummy, &dummy))
			return 1;
	for (int i = 0; i < n; i++)
		if (one(size, how, &t[i], &t[n + i]))
			return 1;
	pct(t, n, &r[0], &r[1]);
	pct(t + n, n, &r[2], &r[3]);
	printf("fork-lock %-8s size %zu n %d: p50 %lld p99 %lld ns per child, call p50 %lld p99 %lld\n",
	       how, size, n, r[0], r[1], r[2], r[3]);
	free(t);
	return 0;
usage:
	fprintf(stderr, "usage: mlf-fork-lock [-n N] [-s SIZE] [-k none|mlock|mlockall|ioctl|many] [-H] [-x]\n");
	return 2;
}
