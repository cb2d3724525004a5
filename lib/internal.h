/* SPDX-License-Identifier: GPL-2.0 */
/* What the API (api.c) and the interposers (preload.c) share. */
#ifndef MLF_LIB_INTERNAL_H
#define MLF_LIB_INTERNAL_H

#include <stddef.h>

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
};

/*
 * libc's own functions, next after this library in the search order, looked
 * up on first use (a program that never falls back never pays for dlsym).
 */
enum mlf_sym {
	MLF_SYM_MLOCK, MLF_SYM_MLOCK2, MLF_SYM_MUNLOCK, MLF_SYM_MLOCKALL,
	MLF_SYM_MUNLOCKALL, MLF_SYM_SYSCALL, MLF_SYM_NR,
};
void *mlf_libc(enum mlf_sym sym);
#define libc_mlock	((int (*)(const void *, size_t))mlf_libc(MLF_SYM_MLOCK))
#define libc_mlock2	((int (*)(const void *, size_t, unsigned int))mlf_libc(MLF_SYM_MLOCK2))
#define libc_munlock	((int (*)(const void *, size_t))mlf_libc(MLF_SYM_MUNLOCK))
#define libc_mlockall	((int (*)(int))mlf_libc(MLF_SYM_MLOCKALL))
#define libc_munlockall	((int (*)(void))mlf_libc(MLF_SYM_MUNLOCKALL))
#define libc_syscall	((long (*)(long, ...))mlf_libc(MLF_SYM_SYSCALL))

/* Once per process: the environment; idempotent. */
void mlf_init(void);

/* MLOCKFAST_MODE as MLOCKFAST_MODE_* bits (0 when unset). */
unsigned int mlf_env_mode(void);

/*
 * Send @cmd with @arg to the device.  MLF_DEVICE: *ret is its result, errno
 * set.  MLF_SYSCALL: missing or declined, not strict.  MLF_REFUSED: *ret is
 * -1, errno ENODEV (no device) or ENOSYS (declined).  @arg_is_user: an
 * EFAULT may be the caller's pointer, so it is an answer, not a decline.
 */
enum mlf_route mlf_route(enum mlf_op op, unsigned long cmd, void *arg,
			 int arg_is_user, int *ret);

/* Count a call the caller made as a system call without asking the device. */
void mlf_count_syscall(void);

/* MLOCKFAST_DEBUG=1: one stderr line "mlockfast: CALL = RET [ROUTE]". */
void mlf_trace(enum mlf_route route, long ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
