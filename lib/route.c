// SPDX-License-Identifier: GPL-2.0
/*
 * libmlockfast's device side: the environment, the one descriptor a process
 * opens at load, sending a request and deciding whether the device answered
 * or the system call must, the counters and the debug lines.
 *
 * The device is opened by the constructor, with the credentials the process
 * started with, so a program that drops privileges before its first mlock is
 * still routed (the descriptor grants nothing: every ioctl acts on the
 * caller's own mm with the caller's current credentials and rlimits).  An
 * open that failed is tried again only where it can succeed later, and at
 * most once a second (a vDSO clock read per routed call, no system call).
 * Load costs one open (and its close at exit) and, where it succeeds, one
 * ioctl: whether the kernel routes the process's plain calls to the module
 * (mlf_routed), in which case the interposers make the system call.  A
 * fallback is the system call itself, with nothing to look up.  The hot path takes no lock and
 * allocates nothing: an acquire load of the descriptor and the ioctl, made
 * raw so that errno is neither read nor written unless the answer is an
 * error (each access is a call into libc).  It
 * writes nothing of ours either (the counters only count for MLOCKFAST_STATS,
 * and the ioctl is not bound through our GOT), so that a forked child's first
 * lock does not pay a copy-on-write fault of our data page.
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
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/mlockfast.h>
#include "internal.h"

/* mlf_dev_fd: an open descriptor, or FD_NONE (see retry_at). */
#define FD_NONE		(-1)

atomic_int mlf_dev_fd = FD_NONE;
static atomic_int open_errno;	/* of the last failed open, for strict mode's line */

/*
 * When the device may be opened again after a failed open, in seconds of
 * CLOCK_MONOTONIC_COARSE: 0 at once, RETRY_NEVER not in this process.
 * EACCES and EPERM are tried again only under other credentials than those
 * of the failed open (fail_euid, fail_egid): a privilege drop cannot make an
 * open succeed, so a dropped process pays nothing per call for it.
 */
#define RETRY_NEVER	(-1L)
static atomic_long retry_at;	/* 0: the constructor has not tried yet */
static atomic_uint fail_euid, fail_egid;

static struct {
	int strict;
} cfg;
atomic_int mlf_ready;
unsigned int mlf_cfg_mode;
int mlf_cfg_debug, mlf_cfg_stats;
static pthread_once_t once = PTHREAD_ONCE_INIT;

atomic_ulong mlf_n_device[MLF_OP_NR];
static atomic_ulong n_syscall, n_refused, n_routed;

atomic_int mlf_routed;

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

/*
 * A system call with no call through our PLT: lazy binding would write our
 * GOT on a process's first lock, and so copy our data page in every forked
 * child that locks (binding at load instead costs every exec a lookup).
 */
long mlf_syscall(long nr, long a0, long a1, long a2, long a3, long a4, long a5)
{
#ifdef __x86_64__
	long ret = mlf_raw_syscall(nr, a0, a1, a2, a3, a4, a5);

	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
#else
	static long (*_Atomic fn)(long, ...);
	long (*f)(long, ...) = atomic_load_explicit(&fn, memory_order_acquire);

	if (!f) {
		/* RTLD_NEXT: libc's (or the next interposer's), never our own. */
		f = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
		if (!f) {
			say("libc lacks syscall()");
			abort();
		}
		atomic_store_explicit(&fn, f, memory_order_release);
	}
	return f(nr, a0, a1, a2, a3, a4, a5);
#endif
}

#ifndef __x86_64__
long mlf_raw_ioctl(int fd, unsigned long cmd, void *arg)
{
	int err = errno;
	long ret = mlf_syscall(SYS_ioctl, fd, (long)cmd, (long)arg, 0, 0, 0);

	if (ret < 0)
		ret = -errno;
	errno = err;
	return ret;
}
#endif

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
		atomic_store_explicit(&mlf_n_device[i], 0, memory_order_relaxed);
	atomic_store_explicit(&n_syscall, 0, memory_order_relaxed);
	atomic_store_explicit(&n_refused, 0, memory_order_relaxed);
	atomic_store_explicit(&n_routed, 0, memory_order_relaxed);
}

static long now_s(void)
{
	struct timespec t;
	int err = errno;

	/* The coarse clock is a vDSO read: no system call. */
	if (clock_gettime(CLOCK_MONOTONIC_COARSE, &t)) {
		errno = err;	/* the caller's */
		return 0;
	}
	return t.tv_sec;
}

/* Whether an open that failed with @err may succeed later, and when. */
static void open_failed(int err)
{
	long at;

	switch (err) {
	case ENOENT:	/* the module is not loaded (yet) */
	case ENXIO:
	case ENODEV:
	case EMFILE:	/* out of descriptors or memory: for now */
	case ENFILE:
	case ENOMEM:
	case EINTR:
	case EAGAIN:
	case EACCES:	/* with other credentials only (retry_due) */
	case EPERM:
		at = now_s() + 1;
		break;
	default:	/* a path that is no device node, read-only, ...: never */
		at = RETRY_NEVER;
	}
	atomic_store(&fail_euid, geteuid());
	atomic_store(&fail_egid, getegid());
	atomic_store(&open_errno, err);
	atomic_store_explicit(&retry_at, at, memory_order_release);
}

/*
 * Whether the kernel routes our plain calls, asked once a descriptor is
 * ours.  A module without routing answers ENOTTY: not routed.  The answer
 * can go stale (the route parameter, the process's own choice or its
 * group changes); that costs speed, never a result: a call the kernel no
 * longer routes is the stock system call.
 */
static void route_query(int fd)
{
	struct mlockfast_route r = { .size = sizeof(r), .choice = MLOCKFAST_ROUTE_QUERY };

	if (!mlf_raw_ioctl(fd, MLOCKFAST_IOC_ROUTE, &r))
		atomic_store_explicit(&mlf_routed, r.routed == 1, memory_order_relaxed);
}

/* Open the device; of two threads racing here, one descriptor is kept. */
static int fd_open(void)
{
	int err = errno, expected = FD_NONE;
	int fd = open(MLOCKFAST_DEVICE, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		open_failed(errno);
		fd = FD_NONE;
	} else if (!atomic_compare_exchange_strong(&mlf_dev_fd, &expected, fd)) {
		close(fd);	/* another thread's open won */
		fd = expected;
	} else {
		route_query(fd);
	}
	errno = err;
	return fd;
}

/* No descriptor: whether to try the open again now (rarely true). */
static int retry_due(void)
{
	long at = atomic_load_explicit(&retry_at, memory_order_acquire), t;
	int err;

	if (at == RETRY_NEVER || (t = now_s()) < at)
		return 0;
	err = atomic_load(&open_errno);
	if ((err == EACCES || err == EPERM) && geteuid() == atomic_load(&fail_euid) &&
	    getegid() == atomic_load(&fail_egid)) {
		/* Same credentials, same answer: look again in a second. */
		atomic_store(&retry_at, t + 1);
		return 0;
	}
	/* One thread tries; the others go to the syscall this time. */
	return atomic_compare_exchange_strong(&retry_at, &at, t + 1);
}

/*
 * The program closed our descriptor, or reused its number: forget it (the
 * number is no longer ours to close) so the next try opens the device again.
 * Only on a declined request, so the device node's number is looked up here
 * rather than at load.
 */
static int fd_stale(int fd)
{
	struct stat st, dev;
	int err = errno, ours;

	ours = !fstat(fd, &st) && S_ISCHR(st.st_mode) && !stat(MLOCKFAST_DEVICE, &dev) &&
	       st.st_rdev == dev.st_rdev;
	errno = err;
	if (ours)
		return 0;
	if (atomic_compare_exchange_strong(&mlf_dev_fd, &fd, FD_NONE))
		atomic_store_explicit(&retry_at, 0, memory_order_release);
	return 1;
}

static void init_once(void)
{
	cfg.strict = env_flag("MLOCKFAST_STRICT");
	mlf_cfg_debug = env_flag("MLOCKFAST_DEBUG");
	mlf_cfg_stats = env_flag("MLOCKFAST_STATS");
	mlf_cfg_mode = env_mode_bits();
	if (mlf_cfg_stats)
		pthread_atfork(NULL, NULL, child_reset);
	atomic_store_explicit(&mlf_ready, 1, memory_order_release);
}

void mlf_init(void)
{
	if (!atomic_load_explicit(&mlf_ready, memory_order_acquire))
		pthread_once(&once, init_once);
}

/*
 * At load, with the credentials the process started with.  Another
 * library's constructor may call mlock first: mlf_route opens then.
 */
__attribute__((constructor)) static void mlf_ctor(void)
{
	int err = errno;

	mlf_init();
	if (atomic_load(&mlf_dev_fd) == FD_NONE && retry_due())
		fd_open();
	errno = err;
}

__attribute__((destructor)) static void mlf_report(void)
{
	static const char * const names[MLF_OP_NR] = {
		"lock", "unlock", "lockall", "unlockall", "lockv", "unlockv",
		"drain", "stats",
	};
	char buf[256];
	int n = 0;

	if (!mlf_cfg_stats)
		return;
	for (int i = 0; i < MLF_OP_NR; i++)
		n += snprintf(buf + n, sizeof(buf) - n, " %s %lu", names[i],
			      atomic_load(&mlf_n_device[i]));
	say("pid %d: device%s; syscall %lu; refused %lu; routed %lu", (int)getpid(), buf,
	    atomic_load(&n_syscall), atomic_load(&n_refused), atomic_load(&n_routed));
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

/*
 * errno is the caller's throughout unless the device's answer is an error:
 * the helpers off the hot path keep it themselves.
 */
enum mlf_route mlf_route_rest(enum mlf_op op, unsigned long cmd, void *arg,
			      int arg_is_user, int *ret, int fd, long r)
{
	int decline = 0;

	mlf_init();
	for (int tries = 0; tries < 2; tries++) {
		if (tries || fd == FD_NONE) {
			fd = atomic_load_explicit(&mlf_dev_fd, memory_order_acquire);
			if (fd == FD_NONE && retry_due())
				fd = fd_open();
			if (fd < 0)
				break;
			r = mlf_raw_ioctl(fd, cmd, arg);
		}
		if (r >= 0 || !declined((int)-r, arg_is_user)) {
			mlf_count(&mlf_n_device[op]);
			*ret = r < 0 ? -1 : 0;
			if (r < 0)
				errno = (int)-r;
			return MLF_DEVICE;
		}
		decline = (int)-r;
		if (!fd_stale(fd))
			break;
	}
	if (cfg.strict) {
		if (!atomic_exchange(&strict_said, 1)) {
			if (decline)
				say("MLOCKFAST_STRICT=1: the device declined a request (%s): failing it with ENOSYS",
				    strerror(decline));
			else
				say("MLOCKFAST_STRICT=1: %s: %s: failing %s with ENODEV",
				    MLOCKFAST_DEVICE, strerror(atomic_load(&open_errno)),
				    atomic_load(&retry_at) == RETRY_NEVER ? "every call" :
				    "calls until it can be opened");
		}
		mlf_count(&n_refused);
		*ret = -1;
		errno = decline ? ENOSYS : ENODEV;
		return MLF_REFUSED;
	}
	mlf_count_syscall();
	return MLF_SYSCALL;
}

void mlf_count_syscall(void)
{
	mlf_count(&n_syscall);
}

void mlf_count_routed(void)
{
	mlf_count(&n_routed);
}

void mlf_trace_line(enum mlf_route route, long ret, const char *fmt, ...)
{
	static const char * const where[] = { "device", "syscall", "refused", "routed" };
	char call[160];
	int err = errno;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(call, sizeof(call), fmt, ap);
	va_end(ap);
	if (ret < 0)
		say("%s = %ld %s [%s]", call, ret, strerrorname_np(err) ?: "?", where[route]);
	else
		say("%s = %ld [%s]", call, ret, where[route]);
	errno = err;
}
