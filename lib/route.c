// SPDX-License-Identifier: GPL-2.0
/*
 * libmlockfast's device side: the environment, the one descriptor a process
 * opens on first use, sending a request and deciding whether the device
 * answered or the system call must, the counters and the debug lines.
 * The hot path takes no lock and allocates nothing: an acquire load of the
 * descriptor, the ioctl, a relaxed counter increment.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/mlockfast.h>
#include "internal.h"

struct mlf_real mlf_real;

/* dev_fd: an open descriptor, or one of these. */
#define FD_UNOPENED	(-1)
#define FD_MISSING	(-2)	/* the open failed for good: always the syscall */

static atomic_int dev_fd = FD_UNOPENED;
static atomic_ulong dev_rdev;	/* to tell our descriptor from a reused number */
static atomic_int open_errno;

static struct {
	int strict, debug, stats;
	unsigned int mode;
} cfg;
static atomic_int ready;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static atomic_ulong n_device[MLF_OP_NR], n_syscall, n_refused;
static atomic_int strict_said;

/* One line on stderr, without stdio (safe in any state, no allocation). */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char buf[512];
	int err = errno, n = snprintf(buf, sizeof(buf), "mlockfast: ");
	va_list ap;

	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, n) < 0)
		errno = err;	/* nowhere to report it */
	errno = err;
}

/* 0 or 1; anything else is reported and taken as 0. */
static int env_flag(const char *name)
{
	const char *v = getenv(name);

	if (!v || !*v || !strcmp(v, "0"))
		return 0;
	if (!strcmp(v, "1"))
		return 1;
	say("%s=%s: unknown value (0 or 1): taken as 0", name, v);
	return 0;
}

static unsigned int env_mode_bits(void)
{
	static const struct { const char *name; unsigned int bits; } modes[] = {
		{ "eager", MLOCKFAST_MODE_EAGER },
		{ "deferred", MLOCKFAST_MODE_DEFERRED },
		{ "reclaim", MLOCKFAST_MODE_RECLAIM },
	};
	const char *v = getenv("MLOCKFAST_MODE");

	if (!v || !*v)
		return 0;
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (!strcmp(v, modes[i].name))
			return modes[i].bits;
	say("MLOCKFAST_MODE=%s: unknown mode (eager, deferred, reclaim): the module's default is used",
	    v);
	return 0;
}

/* A forked child counts its own calls: MLOCKFAST_STATS is per process. */
static void child_reset(void)
{
	for (int i = 0; i < MLF_OP_NR; i++)
		atomic_store_explicit(&n_device[i], 0, memory_order_relaxed);
	atomic_store_explicit(&n_syscall, 0, memory_order_relaxed);
	atomic_store_explicit(&n_refused, 0, memory_order_relaxed);
}

static void init_once(void)
{
	cfg.strict = env_flag("MLOCKFAST_STRICT");
	cfg.debug = env_flag("MLOCKFAST_DEBUG");
	cfg.stats = env_flag("MLOCKFAST_STATS");
	cfg.mode = env_mode_bits();
	/* RTLD_NEXT: libc's (or the next interposer's), never our own. */
	mlf_real.mlock = (int (*)(const void *, size_t))dlsym(RTLD_NEXT, "mlock");
	mlf_real.mlock2 = (int (*)(const void *, size_t, unsigned int))dlsym(RTLD_NEXT, "mlock2");
	mlf_real.munlock = (int (*)(const void *, size_t))dlsym(RTLD_NEXT, "munlock");
	mlf_real.mlockall = (int (*)(int))dlsym(RTLD_NEXT, "mlockall");
	mlf_real.munlockall = (int (*)(void))dlsym(RTLD_NEXT, "munlockall");
	mlf_real.syscall = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	if (!mlf_real.mlock || !mlf_real.mlock2 || !mlf_real.munlock ||
	    !mlf_real.mlockall || !mlf_real.munlockall || !mlf_real.syscall) {
		say("libc lacks mlock, mlock2, munlock, mlockall, munlockall or syscall (glibc >= 2.27 needed)");
		abort();
	}
	pthread_atfork(NULL, NULL, child_reset);
	atomic_store_explicit(&ready, 1, memory_order_release);
}

void mlf_init(void)
{
	if (!atomic_load_explicit(&ready, memory_order_acquire))
		pthread_once(&once, init_once);
}

unsigned int mlf_env_mode(void)
{
	mlf_init();
	return cfg.mode;
}

/* Another library's constructor may call mlock first: mlf_init covers it. */
__attribute__((constructor)) static void mlf_ctor(void)
{
	mlf_init();
}

__attribute__((destructor)) static void mlf_report(void)
{
	static const char * const names[MLF_OP_NR] = {
		"lock", "unlock", "lockall", "unlockall", "lockv", "unlockv",
		"drain", "stats",
	};
	char buf[256];
	int n = 0;

	if (!cfg.stats)
		return;
	for (int i = 0; i < MLF_OP_NR; i++)
		n += snprintf(buf + n, sizeof(buf) - n, " %s %lu", names[i],
			      atomic_load(&n_device[i]));
	say("pid %d: device%s; syscall %lu; refused %lu", (int)getpid(), buf,
	    atomic_load(&n_syscall), atomic_load(&n_refused));
}

/* Open the device; of two threads racing here, one descriptor is kept. */
static int fd_open(void)
{
	int expected = FD_UNOPENED, fd = open(MLOCKFAST_DEVICE, O_RDWR | O_CLOEXEC);
	struct stat st;

	if (fd < 0) {
		int err = errno;

		/* Out of descriptors or memory now is no answer for good. */
		if (err == EMFILE || err == ENFILE || err == ENOMEM || err == EINTR)
			return FD_MISSING;
		atomic_store(&open_errno, err);
		atomic_compare_exchange_strong(&dev_fd, &expected, FD_MISSING);
		return expected == FD_UNOPENED ? FD_MISSING : expected;
	}
	if (!fstat(fd, &st))
		atomic_store(&dev_rdev, st.st_rdev);
	if (!atomic_compare_exchange_strong(&dev_fd, &expected, fd)) {
		close(fd);	/* another thread's open won */
		return expected;
	}
	return fd;
}

/*
 * The program closed our descriptor, or reused its number: forget it (the
 * number is no longer ours to close) so the next try opens the device again.
 */
static int fd_stale(int fd)
{
	struct stat st;

	if (!fstat(fd, &st) && S_ISCHR(st.st_mode) &&
	    st.st_rdev == atomic_load(&dev_rdev))
		return 0;
	atomic_compare_exchange_strong(&dev_fd, &fd, FD_UNOPENED);
	return 1;
}

/* Errnos that are the ioctl's, never the syscall's: the device declined. */
static int declined(int err, int arg_is_user)
{
	switch (err) {
	case ENOTTY:
	case ENODEV:
	case EBADF:
	case ENOSYS:
	case EOPNOTSUPP:
		return 1;
	case EFAULT:
		return !arg_is_user;	/* our own struct cannot fault */
	}
	return 0;
}

enum mlf_route mlf_route(enum mlf_op op, unsigned long cmd, void *arg,
			 int arg_is_user, int *ret)
{
	int saved = errno, decline = 0;

	mlf_init();
	for (int tries = 0; tries < 2; tries++) {
		int fd = atomic_load_explicit(&dev_fd, memory_order_acquire);

		if (fd == FD_UNOPENED)
			fd = fd_open();
		if (fd < 0)
			break;
		*ret = ioctl(fd, cmd, arg) ? -1 : 0;
		if (!*ret || !declined(errno, arg_is_user)) {
			atomic_fetch_add_explicit(&n_device[op], 1, memory_order_relaxed);
			if (!*ret)
				errno = saved;
			return MLF_DEVICE;
		}
		decline = errno;
		if (!fd_stale(fd))
			break;
	}
	if (cfg.strict) {
		if (!atomic_exchange(&strict_said, 1)) {
			if (decline)
				say("MLOCKFAST_STRICT=1: the device declined a request (%s): failing it with ENOSYS",
				    strerror(decline));
			else
				say("MLOCKFAST_STRICT=1: %s: %s: failing every call with ENODEV",
				    MLOCKFAST_DEVICE, strerror(atomic_load(&open_errno)));
		}
		atomic_fetch_add_explicit(&n_refused, 1, memory_order_relaxed);
		*ret = -1;
		errno = decline ? ENOSYS : ENODEV;
		return MLF_REFUSED;
	}
	mlf_count_syscall();
	errno = saved;
	return MLF_SYSCALL;
}

void mlf_count_syscall(void)
{
	atomic_fetch_add_explicit(&n_syscall, 1, memory_order_relaxed);
}

void mlf_trace(enum mlf_route route, long ret, const char *fmt, ...)
{
	static const char * const where[] = { "device", "syscall", "refused" };
	char call[160];
	int err = errno;
	va_list ap;

	if (!cfg.debug)
		return;
	va_start(ap, fmt);
	vsnprintf(call, sizeof(call), fmt, ap);
	va_end(ap);
	if (ret < 0)
		say("%s = %ld %s [%s]", call, ret, strerrorname_np(err) ?: "?", where[route]);
	else
		say("%s = %ld [%s]", call, ret, where[route]);
	errno = err;
}
