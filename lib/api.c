// SPDX-License-Identifier: GPL-2.0
/* The public API (include/mlockfast.h): each call, and its fallback. */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include "include/mlockfast.h"
#include "internal.h"

/* A call that names no mode gets MLOCKFAST_MODE's. */
static unsigned int with_mode(unsigned int flags)
{
	return flags & MLOCKFAST_MODE_MASK ? flags : flags | mlf_env_mode();
}

/*
 * The syscall has no modes: refuse an unknown one as the device would, and
 * drop a known one.
 */
static int fallback_range(int lock, uint64_t addr, uint64_t len, unsigned int flags)
{
	if ((flags & MLOCKFAST_MODE_MASK) > MLOCKFAST_MODE_LEGACY ||
	    (!lock && (flags & ~MLOCKFAST_MODE_MASK))) {
		errno = EINVAL;
		return -1;
	}
	flags &= ~MLOCKFAST_MODE_MASK;
	if (lock)
		return libc_mlock2((const void *)(uintptr_t)addr, len, flags);
	return libc_munlock((const void *)(uintptr_t)addr, len);
}

static int range(int lock, const void *addr, size_t len, unsigned int flags)
{
	struct mlockfast_range r = {
		.size = sizeof(r), .flags = with_mode(flags),
		.addr = (uintptr_t)addr, .len = len,
	};
	enum mlf_route route;
	int ret;

	route = mlf_route(lock ? MLF_OP_LOCK : MLF_OP_UNLOCK,
			  lock ? MLOCKFAST_IOC_LOCK : MLOCKFAST_IOC_UNLOCK, &r, 0, &ret);
	if (route == MLF_SYSCALL)
		ret = fallback_range(lock, r.addr, r.len, r.flags);
	mlf_trace(route, ret, "mlockfast_%s(%p, %zu, %#x)", lock ? "lock" : "unlock",
		  addr, len, flags);
	return ret;
}

MLF_EXPORT int mlockfast_lock(const void *addr, size_t len, unsigned int flags)
{
	return range(1, addr, len, flags);
}

MLF_EXPORT int mlockfast_unlock(const void *addr, size_t len)
{
	return range(0, addr, len, 0);
}

/* The device's LOCKV/UNLOCKV, one syscall a range. */
static int fallback_vec(int lock, const struct mlockfast_iovec *iov,
			unsigned int count, unsigned int flags, uint32_t *done)
{
	if (count > MLOCKFAST_VEC_MAX) {
		errno = EINVAL;
		return -1;
	}
	for (*done = 0; *done < count; ++*done)
		if (fallback_range(lock, iov[*done].addr, iov[*done].len, flags))
			return -1;
	return 0;
}

static int vec(int lock, const struct mlockfast_iovec *iov, unsigned int count,
	       unsigned int flags, unsigned int *done)
{
	struct mlockfast_vec v = {
		.size = sizeof(v), .flags = with_mode(flags),
		.iov = (uintptr_t)iov, .count = count,
	};
	enum mlf_route route;
	int ret;

	/* The iovec is the caller's: an EFAULT is its answer. */
	route = mlf_route(lock ? MLF_OP_LOCKV : MLF_OP_UNLOCKV,
			  lock ? MLOCKFAST_IOC_LOCKV : MLOCKFAST_IOC_UNLOCKV, &v, 1, &ret);
	if (route == MLF_SYSCALL)
		ret = fallback_vec(lock, iov, count, v.flags, &v.done);
	if (done)
		*done = v.done;
	mlf_trace(route, ret, "mlockfast_%s(%p, %u, %#x) done %u",
		  lock ? "lockv" : "unlockv", (const void *)iov, count, flags, v.done);
	return ret;
}

MLF_EXPORT int mlockfast_lockv(const struct mlockfast_iovec *iov, unsigned int count,
			       unsigned int flags, unsigned int *done)
{
	return vec(1, iov, count, flags, done);
}

MLF_EXPORT int mlockfast_unlockv(const struct mlockfast_iovec *iov, unsigned int count,
				 unsigned int flags, unsigned int *done)
{
	return vec(0, iov, count, flags, done);
}

MLF_EXPORT int mlockfast_drain(void)
{
	int ret;
	enum mlf_route route = mlf_route(MLF_OP_DRAIN, MLOCKFAST_IOC_DRAIN, NULL, 0, &ret);

	if (route == MLF_SYSCALL)
		ret = 0;	/* without the device nothing can be pending */
	mlf_trace(route, ret, "mlockfast_drain()");
	return ret;
}

MLF_EXPORT int mlockfast_stats(struct mlockfast_stats *s)
{
	int ret;
	enum mlf_route route;

	if (s)
		s->size = sizeof(*s);
	route = mlf_route(MLF_OP_STATS, MLOCKFAST_IOC_STATS, s, 1, &ret);
	if (route == MLF_SYSCALL) {
		errno = ENODEV;	/* no counters without the module */
		ret = -1;
	}
	mlf_trace(route, ret, "mlockfast_stats(%p)", (void *)s);
	return ret;
}
