/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libmlockfast: the /dev/mlockfast ioctls as calls, each returning 0 or -1
 * with errno like the system call it stands for.  Where the device is
 * missing or declines a request, the calls that have a system-call
 * equivalent use it (unless MLOCKFAST_STRICT=1); see README.md.
 *
 * Linking this library also routes the program's own mlock(), mlock2(),
 * munlock(), mlockall(), munlockall() and syscall() for those numbers, as
 * LD_PRELOAD=libmlockfast.so does.
 */
#ifndef MLOCKFAST_H
#define MLOCKFAST_H

#include <stddef.h>
#include <linux/mlockfast.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * As mlock2(addr, len, flags), flags being MLOCK_ONFAULT and at most one
 * MLOCKFAST_MODE_*; a call that names no mode gets MLOCKFAST_MODE's.
 * Falls back to mlock2() (the mode dropped).
 */
int mlockfast_lock(const void *addr, size_t len, unsigned int flags);

/* As munlock(addr, len); falls back to munlock(). */
int mlockfast_unlock(const void *addr, size_t len);

/*
 * The @count ranges in order, stopping at the first error; *done (if not
 * NULL) is how many completed, also on error.  Falls back to one mlock2()
 * or munlock() a range.  @flags as for mlockfast_lock (unlockv: a mode only).
 */
int mlockfast_lockv(const struct mlockfast_iovec *iov, unsigned int count,
		    unsigned int flags, unsigned int *done);
int mlockfast_unlockv(const struct mlockfast_iovec *iov, unsigned int count,
		      unsigned int flags, unsigned int *done);

/*
 * Pay every pending move now.  Without the device nothing can be pending:
 * 0 (in strict mode, -1 with ENODEV).
 */
int mlockfast_drain(void);

/* The module's counters into *s; -1 with ENODEV without the device. */
int mlockfast_stats(struct mlockfast_stats *s);

#ifdef __cplusplus
}
#endif

#endif /* MLOCKFAST_H */
