/* SPDX-License-Identifier: GPL-2.0 */
/* What test_mlock and mlock_scale share: the modes and the timed pair. */
#ifndef MLF_TOOL_H
#define MLF_TOOL_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <linux/mlockfast.h>

/* Modes from M_IOCTL on use the device directly. */
enum { M_SYSCALL, M_PRELOAD, M_IOCTL, M_EAGER, M_DEFERRED, M_RECLAIM, M_LEGACY, M_NR };

static const char * const mode_names[M_NR] = {
	"syscall", "preload", "ioctl", "eager", "deferred", "reclaim", "legacy",
};

static const unsigned int mode_bits[M_NR] = {
	0, 0, MLOCKFAST_MODE_DEFAULT, MLOCKFAST_MODE_EAGER,
	MLOCKFAST_MODE_DEFERRED, MLOCKFAST_MODE_RECLAIM, MLOCKFAST_MODE_LEGACY,
};

/*
 * -m preload: libmlockfast's own mlock and munlock, the functions an
 * LD_PRELOADed program calls instead of libc's, with its environment
 * (MLOCKFAST_MODE, ...).  Loaded RTLD_LOCAL, so the other modes keep libc's.
 */
static int (*preload_mlock)(const void *, size_t);
static int (*preload_munlock)(const void *, size_t);

static inline int preload_open(const char *prog)
{
	void *h = dlopen("libmlockfast.so.1", RTLD_NOW | RTLD_LOCAL);

	if (h) {
		preload_mlock = (int (*)(const void *, size_t))dlsym(h, "mlock");
		preload_munlock = (int (*)(const void *, size_t))dlsym(h, "munlock");
	}
	if (!preload_mlock || !preload_munlock) {
		fprintf(stderr, "%s: -m preload: %s\n", prog, dlerror());
		return -1;
	}
	return 0;
}

#define GUARD	4096UL

/*
 * Map @size bytes with a PROT_NONE guard page on each side, which keeps the
 * buffer a VMA of its own, as in the original test: otherwise it merges with
 * its neighbours and every lock splits the merged VMA, which would time
 * split and merge instead.  Unmap with munmap(p - GUARD, size + 2 * GUARD).
 */
static inline char *map_guarded(size_t size, int flags, int fd)
{
	char *p = mmap(NULL, size + 2 * GUARD, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p != MAP_FAILED)
		p = mmap(p + GUARD, size, PROT_READ | PROT_WRITE,
			 flags | MAP_FIXED, fd, 0);
	if (p == MAP_FAILED)
		return NULL;
	for (size_t i = 0; i < size; i += 4096)
		p[i] = 1;	/* pages touched first, as in the original */
	return p;
}

/* One mlock+munlock pair through @mode: 0, or -1 with errno. */
static inline int lock_pair(int dev_fd, int mode, char *buf, size_t size)
{
	struct mlockfast_range r = {
		.size = sizeof(r), .flags = mode_bits[mode],
		.addr = (uintptr_t)buf, .len = size,
	};

	if (mode == M_SYSCALL)
		return mlock(buf, size) || munlock(buf, size) ? -1 : 0;
	if (mode == M_PRELOAD)
		return preload_mlock(buf, size) || preload_munlock(buf, size) ? -1 : 0;
	if (ioctl(dev_fd, MLOCKFAST_IOC_LOCK, &r))
		return -1;
	r.flags = mode == M_LEGACY ? MLOCKFAST_MODE_LEGACY : 0;
	return ioctl(dev_fd, MLOCKFAST_IOC_UNLOCK, &r) ? -1 : 0;
}

/*
 * MLOCKFAST_IOC_ROUTE: make @choice (MLOCKFAST_ROUTE_*) the caller's and
 * fill in @r with the reply.  0, or -1 with errno (ENOTTY: a module
 * without routing).
 */
static inline int route_choose(int dev_fd, unsigned int choice, struct mlockfast_route *r)
{
	*r = (struct mlockfast_route){ .size = sizeof(*r), .choice = choice };
	return ioctl(dev_fd, MLOCKFAST_IOC_ROUTE, r);
}

#endif
