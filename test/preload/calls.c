// SPDX-License-Identifier: GPL-2.0
/*
 * mlf-preload-calls: an ordinary dynamically linked program that calls
 * mlock, mlock2, munlock, mlockall, munlockall and syscall() for their
 * numbers, for mlockfast_preload_test to run with and without
 * LD_PRELOAD=libmlockfast.so and compare.
 *
 *   mlf-preload-calls calls     every call, with what a process can observe
 *                               after each (mlf_diff's text), on stdout
 *   mlf-preload-calls threads   threads racing to their first call, then pairs
 *   mlf-preload-calls fork      calls before and after fork, child and parent
 *   mlf-preload-calls fds       how many descriptors of /dev/mlockfast are open
 *   mlf-preload-calls stale     calls after the program closed the library's
 *                               descriptor and reused its number
 *   mlf-preload-calls seteuid   mlock as nobody (seteuid), then as root again,
 *                               with the default RLIMIT_MEMLOCK and with 0
 *   mlf-preload-calls --as UID:GID[:GID] WHAT
 *                               WHAT after giving up root for UID, GID and
 *                               (optionally) one supplementary group: after
 *                               the library was loaded, before any call
 *
 * libmlockfast.so.1 is always loaded, RTLD_LOCAL when not preloaded (no
 * interposing then): mlockall locks every mapping, so both runs must map
 * the same libraries for VmLck and Mlocked to compare.  MLF_CALLS_LIB names
 * the file, when the preloaded one is not the one beside the program.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/mlockfast.h>
#include "mlf_diff.h"
#include "mlf_test.h"

#define RW	(PROT_READ | PROT_WRITE)
#define ANON	(MAP_PRIVATE | MAP_ANONYMOUS)
#define HOLE	(DIFF_BASE + (8UL << 20))	/* never mapped */

static char *anon(size_t off, size_t pages, int touch)
{
	char *p = diff_map(off, pages * PAGE, RW, ANON, -1);

	if (touch)
		diff_touch(p, pages * PAGE, 1);
	return p;
}

static void scn_mlock(const struct path_ops *po, struct diff_log *log)
{
	char *p = anon(0, 16, 1), *n = diff_map(32 * PAGE, 4 * PAGE, PROT_NONE, ANON, -1);

	(void)po;
	errno = 1234;
	diff_ret(log, "mlock 4 pages", mlock(p, 4 * PAGE));
	diff_note(log, "errno after success %d", errno);
	diff_state(log, "4 locked");
	diff_ret(log, "mlock unaligned", mlock(p + 100, PAGE));
	diff_ret(log, "mlock len 0", mlock(p + 8 * PAGE, 0));
	diff_ret(log, "mlock hole", mlock(HOLE, PAGE));
	diff_ret(log, "mlock past the end", mlock(p + 8 * PAGE, 16 * PAGE));
	diff_state(log, "past the end");
	diff_ret(log, "mlock wrapping", mlock(p, ~0UL - PAGE));
	diff_ret(log, "mlock PROT_NONE", mlock(n, 4 * PAGE));
	diff_state(log, "PROT_NONE");
	diff_ret(log, "munlock all", munlock(p, 36 * PAGE));
	diff_state(log, "unlocked");
}

static void scn_mlock2(const struct path_ops *po, struct diff_log *log)
{
	char *p = anon(0, 8, 0);

	(void)po;
	diff_ret(log, "mlock2 onfault", mlock2(p, 8 * PAGE, MLOCK_ONFAULT));
	diff_state(log, "onfault, untouched");
	diff_touch(p, 3 * PAGE, 1);
	diff_state(log, "onfault, 3 touched");
	diff_ret(log, "mlock2 0", mlock2(p, 8 * PAGE, 0));
	diff_state(log, "populated");
	diff_ret(log, "mlock2 flag 2", mlock2(p, PAGE, 2));
	/* a mode bit of the device's flags is no mlock2 flag */
	diff_ret(log, "mlock2 flag 0x100", mlock2(p, PAGE, MLOCKFAST_MODE_EAGER));
	diff_ret(log, "mlock2 onfault|0x200", mlock2(p, PAGE, MLOCK_ONFAULT | 0x200));
	diff_ret(log, "mlock2 hole", mlock2(HOLE, PAGE, MLOCK_ONFAULT));
	diff_ret(log, "munlock", munlock(p, 8 * PAGE));
	diff_state(log, "unlocked");
}

static void scn_munlock(const struct path_ops *po, struct diff_log *log)
{
	char *p = anon(0, 12, 1);

	(void)po;
	diff_ret(log, "munlock unlocked", munlock(p, 12 * PAGE));
	diff_ret(log, "munlock hole", munlock(HOLE, PAGE));
	diff_ret(log, "mlock", mlock(p, 12 * PAGE));
	diff_ret(log, "munlock middle", munlock(p + 4 * PAGE, 4 * PAGE));
	diff_state(log, "split");
	diff_ret(log, "munlock past the end", munlock(p, 20 * PAGE));
	diff_state(log, "unlocked");
}

static void scn_mlockall(const struct path_ops *po, struct diff_log *log)
{
	char *p = anon(0, 8, 1), *q;

	(void)po;
	(void)p;
	diff_ret(log, "mlockall 0", mlockall(0));
	diff_ret(log, "mlockall onfault", mlockall(MCL_ONFAULT));
	diff_ret(log, "mlockall 0x100", mlockall(MCL_CURRENT | MLOCKFAST_MODE_EAGER));
	diff_ret(log, "mlockall current", mlockall(MCL_CURRENT));
	diff_state(log, "all locked");
	diff_ret(log, "munlockall", munlockall());
	diff_state(log, "all unlocked");
	diff_ret(log, "mlockall future", mlockall(MCL_FUTURE));
	q = anon(16 * PAGE, 4, 0);
	diff_state(log, "future mapping");
	diff_ret(log, "mlockall current|onfault", mlockall(MCL_CURRENT | MCL_ONFAULT));
	diff_touch(q, PAGE, 1);
	diff_state(log, "onfault");
	diff_ret(log, "munlockall", munlockall());
	diff_state(log, "unlocked");
}

static void scn_syscall(const struct path_ops *po, struct diff_log *log)
{
	char *p = anon(0, 8, 1), *m;
	int fd;

	(void)po;
	diff_ret(log, "SYS_mlock", syscall(SYS_mlock, p, 4 * PAGE));
	diff_ret(log, "SYS_mlock2 onfault", syscall(SYS_mlock2, p + 4 * PAGE, 2 * PAGE, MLOCK_ONFAULT));
	diff_ret(log, "SYS_mlock2 0x100", syscall(SYS_mlock2, p, PAGE, MLOCKFAST_MODE_EAGER));
	diff_ret(log, "SYS_mlock hole", syscall(SYS_mlock, HOLE, PAGE));
	diff_state(log, "locked");
	diff_ret(log, "SYS_munlock", syscall(SYS_munlock, p, 8 * PAGE));
	diff_ret(log, "SYS_munlock hole", syscall(SYS_munlock, HOLE, PAGE));
	diff_ret(log, "SYS_mlockall 0", syscall(SYS_mlockall, 0));
	diff_ret(log, "SYS_mlockall current", syscall(SYS_mlockall, MCL_CURRENT));
	diff_state(log, "all locked");
	diff_ret(log, "SYS_munlockall", syscall(SYS_munlockall));
	diff_state(log, "unlocked");
	/* other numbers pass through, all six arguments */
	diff_note(log, "SYS_getppid same %d", syscall(SYS_getppid) == getppid());
	m = (char *)syscall(SYS_mmap, DIFF_BASE + 64 * PAGE, PAGE, RW,
			    ANON | MAP_FIXED_NOREPLACE, -1, 0);
	diff_note(log, "SYS_mmap at %d", m == DIFF_BASE + 64 * PAGE);
	diff_state(log, "mmap'd");
	/* an error's errno, and a sixth argument that matters (the offset) */
	diff_ret(log, "SYS_close -1", syscall(SYS_close, -1));
	fd = (int)syscall(SYS_memfd_create, "mlf-calls", 0);
	diff_note(log, "SYS_memfd_create %d", fd >= 0 && !ftruncate(fd, 2 * PAGE) &&
		  pwrite(fd, "x", 1, PAGE) == 1);
	m = (char *)syscall(SYS_mmap, NULL, PAGE, PROT_READ, MAP_SHARED, fd, PAGE);
	diff_note(log, "SYS_mmap offset %d", m != MAP_FAILED && m[0] == 'x');
	if (m != MAP_FAILED)
		munmap(m, PAGE);
	close(fd);
}

static void scn_limits(const struct path_ops *po, struct diff_log *log)
{
	char *p = anon(0, 16, 1);

	(void)po;
	diff_limit(8 * PAGE);	/* lowered only: raising needs CAP_SYS_RESOURCE */
	diff_ret(log, "mlock over limit", mlock(p, 16 * PAGE));
	diff_ret(log, "mlock2 within limit", mlock2(p, 4 * PAGE, 0));
	diff_ret(log, "mlockall over limit", mlockall(MCL_CURRENT));
	diff_state(log, "limited");
	diff_ret(log, "munlockall", munlockall());
	diff_limit(0);
	diff_ret(log, "mlock limit 0", mlock(p, PAGE));
}

static const struct { const char *name; scenario_fn fn; } scenarios[] = {
	{ "mlock", scn_mlock }, { "mlock2", scn_mlock2 }, { "munlock", scn_munlock },
	{ "mlockall", scn_mlockall }, { "syscall", scn_syscall }, { "limits", scn_limits },
};

/* Each scenario in a child of its own, which exits (MLOCKFAST_STATS reports). */
static int calls(void)
{
	int bad = 0;

	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
		int st;
		pid_t pid;

		printf("=== %s\n", scenarios[i].name);
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			diff_print(scenarios[i].fn);
			exit(0);
		}
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st)) {
			printf("scenario %s failed\n", scenarios[i].name);
			bad = 1;
		}
	}
	return bad;
}

/* Descriptors of /dev/mlockfast open in this process; closed if @close_them. */
static int dev_fds(int close_them)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d))) {
		char target[64];
		ssize_t len = readlinkat(dirfd(d), e->d_name, target, sizeof(target) - 1);

		if (len > 0) {
			target[len] = 0;
			if (!strcmp(target, MLOCKFAST_DEVICE)) {
				n++;
				if (close_them)
					close(atoi(e->d_name));
			}
		}
	}
	if (d)
		closedir(d);
	return n;
}

#define THREADS	8
#define PAIRS	200

static pthread_barrier_t start;

static void *pairs(void *arg)
{
	char *p = mmap(NULL, 16 * PAGE, RW, ANON | MAP_POPULATE, -1, 0);
	long errors = 0;

	(void)arg;
	if (p == MAP_FAILED)
		return (void *)1L;
	pthread_barrier_wait(&start);	/* first calls race to open the device */
	for (int i = 0; i < PAIRS; i++)
		errors += mlock(p, 16 * PAGE) || munlock(p, 16 * PAGE);
	munmap(p, 16 * PAGE);
	return (void *)errors;
}

static int threads(void)
{
	pthread_t t[THREADS];
	long errors = 0;

	pthread_barrier_init(&start, NULL, THREADS);
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, pairs, NULL))
			return 1;
	for (int i = 0; i < THREADS; i++) {
		void *r;

		pthread_join(t[i], &r);
		errors += (long)r;
	}
	printf("threads %d pairs %d errors %ld fds %d VmLck %ld\n", THREADS,
	       PAIRS, errors, dev_fds(0), status_kb("VmLck"));
	return errors != 0;
}

/* As a daemon closing every descriptor it did not open does. */
static int stale(void)
{
	char *p = mmap(NULL, 16 * PAGE, RW, ANON | MAP_POPULATE, -1, 0);
	int first, second, null;

	first = mlock(p, 16 * PAGE) || munlock(p, 16 * PAGE);
	printf("closed %d\n", dev_fds(1));
	null = open("/dev/null", O_RDONLY);	/* the lowest number: likely ours */
	second = mlock(p, 16 * PAGE) || munlock(p, 16 * PAGE);
	printf("first %d second %d null still open %d\n", first, second,
	       fcntl(null, F_GETFD) >= 0);
	printf("fds %d\n", dev_fds(0));
	return first || second;
}

/* A call's result, then VmLck: printf's arguments have no order. */
static void show(const char *what, int ret)
{
	printf("%s %d VmLck %ld\n", what, ret, status_kb("VmLck"));
}

/* The child's calls act on the child; an exec'd image inherits no descriptor. */
static int forking(const char *self)
{
	char *a = mmap(NULL, 16 * PAGE, RW, ANON | MAP_POPULATE, -1, 0);
	int st;
	pid_t pid;

	show("parent mlock", mlock(a, 16 * PAGE));
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		char *b = mmap(NULL, 32 * PAGE, RW, ANON | MAP_POPULATE, -1, 0);

		show("child before", 0);
		show("child mlock", mlock(b, 32 * PAGE));
		show("child munlock", munlock(b, 32 * PAGE));
		st = mlockall(MCL_CURRENT);
		printf("child mlockall %d VmLck>0 %d\n", st, status_kb("VmLck") > 0);
		show("child munlockall", munlockall());
		fflush(stdout);
		if (fork() == 0) {
			execl(self, self, "fds", (char *)NULL);
			_exit(127);
		}
		wait(&st);
		exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
	}
	waitpid(pid, &st, 0);
	printf("child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	show("parent after", 0);
	show("parent munlock", munlock(a, 16 * PAGE));
	return st != 0;
}

/* A call's result and errno, then VmLck. */
static void show_errno(const char *what, int ret)
{
	printf("%s = %d errno %s VmLck %ld\n", what, ret, ret ? strerror(errno) : "-",
	       status_kb("VmLck"));
}

/*
 * The real test suites' pattern (issue 18's reproduction): root, drop to
 * nobody for one mlock, back to root for another; the caller's credentials
 * and RLIMIT_MEMLOCK at each call decide, as for mlock(2).
 */
static int seteuid_calls(void)
{
	char *p = mmap(NULL, PAGE, RW, ANON | MAP_POPULATE, -1, 0);
	struct rlimit rl;

	if (p == MAP_FAILED || getrlimit(RLIMIT_MEMLOCK, &rl))
		return 1;
	for (int limit0 = 0; limit0 < 2; limit0++) {
		struct rlimit now = { limit0 ? 0 : rl.rlim_cur, rl.rlim_max };

		if (setrlimit(RLIMIT_MEMLOCK, &now))
			return 1;
		printf("RLIMIT_MEMLOCK %s\n", limit0 ? "0" : "default");
		if (seteuid(NOBODY))
			return 1;
		show_errno("as nobody: mlock", mlock(p, PAGE));
		show_errno("as nobody: munlock", munlock(p, PAGE));
		if (seteuid(0))
			return 1;
		show_errno("as root: mlock", mlock(p, PAGE));
		show_errno("as root: munlock", munlock(p, PAGE));
	}
	return setrlimit(RLIMIT_MEMLOCK, &rl) != 0;
}

/* --as UID:GID[:GID]: root given up for good (and every capability with it). */
static int drop_to(const char *spec)
{
	unsigned int uid, gid, sup;
	int n = sscanf(spec, "%u:%u:%u", &uid, &gid, &sup);
	gid_t groups[1] = { sup };

	if (n < 2 || setgroups(n == 3 ? 1 : 0, groups) || setgid(gid) || setuid(uid)) {
		fprintf(stderr, "mlf-preload-calls: --as %s: %s\n", spec, strerror(errno));
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *lib = getenv("MLF_CALLS_LIB");

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!dlopen(lib && *lib ? lib : "libmlockfast.so.1", RTLD_NOW | RTLD_LOCAL)) {
		fprintf(stderr, "mlf-preload-calls: %s\n", dlerror());
		return 2;
	}
	if (argc == 4 && !strcmp(argv[1], "--as")) {
		if (drop_to(argv[2]))
			return 2;
		argv[2] = argv[0];	/* the program, for fork's exec */
		argv += 2;
		argc -= 2;
	}
	if (argc == 2 && !strcmp(argv[1], "seteuid"))
		return seteuid_calls();
	if (argc == 2 && !strcmp(argv[1], "calls"))
		return calls();
	if (argc == 2 && !strcmp(argv[1], "threads"))
		return threads();
	if (argc == 2 && !strcmp(argv[1], "fork"))
		return forking(argv[0]);
	if (argc == 2 && !strcmp(argv[1], "stale"))
		return stale();
	if (argc == 2 && !strcmp(argv[1], "fds")) {
		printf("exec'd fds %d\n", dev_fds(0));
		return 0;
	}
	fprintf(stderr, "usage: mlf-preload-calls [--as UID:GID[:GID]] calls|threads|fork|stale|fds|seteuid\n");
	return 2;
}
