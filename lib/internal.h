/* SPDX-License-Identifier: GPL-2.0 */
/* What the API (api.c) and the interposers (preload.c) share. */
#ifndef MLF_LIB_INTERNAL_H
#define MLF_LIB_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <sys/syscall.h>

/* The library exports the API and the interposers, nothing else. */
#define MLF_EXPORT __attribute__((visibility("default")))

/* Operations, for the per-process counters. */
enum mlf_op {
	MLF_OP_LOCK, MLF_OP_UNLOCK, MLF_OP_LOCKALL, MLF_OP_UNLOCKALL,
	MLF_OP_LOCKV, MLF_OP_UNLOCKV, MLF_OP_DRAIN, MLF_OP_STATS, MLF_OP_NR,
};

/* Where a call went. */
enum mlf_route {
	MLF_DEVICE,	/* the device answered: its result stands */
	MLF_SYSCALL,	/* the caller must make the system call */
	MLF_REFUSED,	/* strict mode: -1, errno set */
	MLF_ROUTED,	/* the caller makes the system call; the kernel routes it */
};

/*
 * 1: the module routed this process's plain calls when the library opened
 * the device (MLOCKFAST_IOC_ROUTE); the interposers then make the system
 * call, as the ioctl would only add cost.  Hidden, so it is read without a
 * GOT load.
 */
extern atomic_int mlf_routed __attribute__((visibility("hidden")));

/*
 * The system call itself, as libc's wrappers make it: -1 with errno set on
 * failure.  On x86-64 a raw syscall instruction, so that a fallback costs
 * no lookup and, in a forked child, no copy of the loader's pages; elsewhere
 * libc's syscall(), looked up on first use.
 */
long mlf_syscall(long nr, long a0, long a1, long a2, long a3, long a4, long a5);

#ifdef __x86_64__
/* The syscall instruction: the kernel's result, -errno on failure. */
static inline long mlf_raw_syscall(long nr, long a0, long a1, long a2, long a3,
				   long a4, long a5)
{
	register long r10 __asm__("r10") = a3;
	register long r8 __asm__("r8") = a4;
	register long r9 __asm__("r9") = a5;
	long ret;

	__asm__ volatile ("syscall"
			  : "=a" (ret)
			  : "0" (nr), "D" (a0), "S" (a1), "d" (a2),
			    "r" (r10), "r" (r8), "r" (r9)
			  : "rcx", "r11", "memory");
	return ret;
}
#endif

/*
 * The device's ioctl as the raw system call: 0, or -errno, errno left as it
 * was.  The hot path then never reads or writes errno (each access is a
 * call into libc) unless the device's answer is an error.
 */
#ifdef __x86_64__
static inline long mlf_raw_ioctl(int fd, unsigned long cmd, void *arg)
{
	return mlf_raw_syscall(SYS_ioctl, fd, (long)cmd, (long)arg, 0, 0, 0);
}
#else
long mlf_raw_ioctl(int fd, unsigned long cmd, void *arg);
#endif
#define libc_mlock(a, l)	((int)mlf_syscall(SYS_mlock, (long)(a), (long)(l), 0, 0, 0, 0))
#define libc_mlock2(a, l, f)	((int)mlf_syscall(SYS_mlock2, (long)(a), (long)(l), (long)(f), 0, 0, 0))
#define libc_munlock(a, l)	((int)mlf_syscall(SYS_munlock, (long)(a), (long)(l), 0, 0, 0, 0))
#define libc_mlockall(f)	((int)mlf_syscall(SYS_mlockall, (long)(f), 0, 0, 0, 0, 0))
#define libc_munlockall()	((int)mlf_syscall(SYS_munlockall, 0, 0, 0, 0, 0, 0))

/* Once per process: the environment; idempotent. */
void mlf_init(void);

/*
 * The environment as mlf_init() read it, for the interposers to read
 * inline: MLOCKFAST_MODE as MLOCKFAST_MODE_* bits (0 when unset), and
 * MLOCKFAST_DEBUG.  Valid once mlf_ready is 1.
 */
extern atomic_int mlf_ready __attribute__((visibility("hidden")));
extern unsigned int mlf_cfg_mode __attribute__((visibility("hidden")));
extern int mlf_cfg_debug __attribute__((visibility("hidden")));

static inline unsigned int mlf_env_mode(void)
{
	if (!atomic_load_explicit(&mlf_ready, memory_order_acquire))
		mlf_init();
	return mlf_cfg_mode;
}

/* The descriptor (-1: none yet, or none to be had) and MLOCKFAST_STATS's. */
extern atomic_int mlf_dev_fd __attribute__((visibility("hidden")));
extern int mlf_cfg_stats __attribute__((visibility("hidden")));
extern atomic_ulong mlf_n_device[MLF_OP_NR] __attribute__((visibility("hidden")));

static inline void mlf_count(atomic_ulong *n)
{
	if (mlf_cfg_stats)
		atomic_fetch_add_explicit(n, 1, memory_order_relaxed);
}

/*
 * mlf_route() past its first ioctl: @r is that ioctl's answer, made on
 * @fd, or @fd is -1 and none was made.
 */
enum mlf_route mlf_route_rest(enum mlf_op op, unsigned long cmd, void *arg,
			      int arg_is_user, int *ret, int fd, long r);

/*
 * Send @cmd with @arg to the device.  MLF_DEVICE: *ret is its result, errno
 * set.  MLF_SYSCALL: missing or declined, not strict.  MLF_REFUSED: *ret is
 * -1, errno ENODEV (no device) or ENOSYS (declined).  @arg_is_user: an
 * EFAULT may be the caller's pointer, so it is an answer, not a decline.
 * Inline up to the device's success, every call's path: the descriptor,
 * the ioctl, the counter.  A descriptor is only opened after mlf_init(),
 * so one read with acquire means the environment has been read too.
 */
static inline enum mlf_route mlf_route(enum mlf_op op, unsigned long cmd,
				       void *arg, int arg_is_user, int *ret)
{
	int fd = atomic_load_explicit(&mlf_dev_fd, memory_order_acquire);
	long r = 0;

	if (__builtin_expect(fd >= 0, 1)) {
		r = mlf_raw_ioctl(fd, cmd, arg);
		if (__builtin_expect(!r, 1)) {
			mlf_count(&mlf_n_device[op]);
			*ret = 0;
			return MLF_DEVICE;
		}
	}
	return mlf_route_rest(op, cmd, arg, arg_is_user, ret, fd, r);
}

/* Count a call the caller made as a system call without asking the device. */
void mlf_count_syscall(void);

/* Count one it made as a system call because the kernel routes it. */
void mlf_count_routed(void);

/*
 * MLOCKFAST_DEBUG=1: one stderr line "mlockfast: CALL = RET [ROUTE]".  The
 * flag is read here, so that a call without it costs no variadic call.
 */
void mlf_trace_line(enum mlf_route route, long ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define mlf_trace(route, ret, ...)					\
	do {								\
		if (__builtin_expect(mlf_cfg_debug, 0))			\
			mlf_trace_line(route, ret, __VA_ARGS__);	\
	} while (0)

#endif
