// SPDX-License-Identifier: GPL-2.0
/*
 * The interposers: mlock, mlock2, munlock, mlockall, munlockall, and
 * syscall() for their numbers, routed to /dev/mlockfast, else to the kernel
 * as libc would call it.  In a process whose calls the kernel routes to
 * the module, the system call itself, unless MLOCKFAST_MODE names a mode
 * (a routed call gets the module's default).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/mlockfast.h>
#include "internal.h"

/* MLF_SYSCALL or MLF_ROUTED: the caller makes the system call. */
static int to_kernel(enum mlf_route route)
{
	return route == MLF_SYSCALL || route == MLF_ROUTED;
}

/* The kernel routes our calls, and @mode (MLOCKFAST_MODE's) asks no other. */
static int kernel_routes(unsigned int mode, enum mlf_route *route)
{
	if (mode || !atomic_load_explicit(&mlf_routed, memory_order_relaxed))
		return 0;
	mlf_count_routed();
	*route = MLF_ROUTED;
	return 1;
}

/*
 * mlock2's flags are all the device is given; it judges those, libc the
 * rest.  These four are inline in each interposer: the device's path is
 * then one function, with no result passed through memory.
 */
static inline __attribute__((always_inline)) int lock(const void *addr, size_t len, unsigned int flags, enum mlf_route *route)
{
	struct mlockfast_range r = {
		.size = sizeof(r), .flags = flags | mlf_env_mode(),
		.addr = (uintptr_t)addr, .len = len,
	};
	int ret = 0;

	if (flags & ~MLOCK_ONFAULT) {
		mlf_count_syscall();
		*route = MLF_SYSCALL;
		return 0;
	}
	if (kernel_routes(r.flags & MLOCKFAST_MODE_MASK, route))
		return 0;
	*route = mlf_route(MLF_OP_LOCK, MLOCKFAST_IOC_LOCK, &r, 0, &ret);
	return ret;
}

static inline __attribute__((always_inline)) int unlock(const void *addr, size_t len,
							 enum mlf_route *route)
{
	struct mlockfast_range r = {
		.size = sizeof(r), .flags = mlf_env_mode(),
		.addr = (uintptr_t)addr, .len = len,
	};
	int ret = 0;

	if (kernel_routes(r.flags, route))
		return 0;
	*route = mlf_route(MLF_OP_UNLOCK, MLOCKFAST_IOC_UNLOCK, &r, 0, &ret);
	return ret;
}

/* Mode bits would overlap flags mlockall does not know: libc judges those. */
static inline __attribute__((always_inline)) int lockall(int flags, enum mlf_route *route)
{
	struct mlockfast_all a = { .size = sizeof(a) };
	int ret = 0;

	if (flags & ~(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT)) {
		mlf_count_syscall();
		*route = MLF_SYSCALL;
		return 0;
	}
	a.flags = (unsigned int)flags | mlf_env_mode();
	if (kernel_routes(a.flags & MLOCKFAST_MODE_MASK, route))
		return 0;
	*route = mlf_route(MLF_OP_LOCKALL, MLOCKFAST_IOC_LOCKALL, &a, 0, &ret);
	return ret;
}

static inline __attribute__((always_inline)) int unlockall(enum mlf_route *route)
{
	int ret = 0;

	if (kernel_routes(mlf_env_mode(), route))
		return 0;
	*route = mlf_route(MLF_OP_UNLOCKALL, MLOCKFAST_IOC_UNLOCKALL, NULL, 0, &ret);
	return ret;
}

MLF_EXPORT int mlock(const void *addr, size_t len)
{
	enum mlf_route route;
	int ret = lock(addr, len, 0, &route);

	if (to_kernel(route))
		ret = libc_mlock(addr, len);
	mlf_trace(route, ret, "mlock(%p, %zu)", addr, len);
	return ret;
}

MLF_EXPORT int mlock2(const void *addr, size_t len, unsigned int flags)
{
	enum mlf_route route;
	int ret = lock(addr, len, flags, &route);

	if (to_kernel(route))
		ret = libc_mlock2(addr, len, flags);
	mlf_trace(route, ret, "mlock2(%p, %zu, %#x)", addr, len, flags);
	return ret;
}

MLF_EXPORT int munlock(const void *addr, size_t len)
{
	enum mlf_route route;
	int ret = unlock(addr, len, &route);

	if (to_kernel(route))
		ret = libc_munlock(addr, len);
	mlf_trace(route, ret, "munlock(%p, %zu)", addr, len);
	return ret;
}

MLF_EXPORT int mlockall(int flags)
{
	enum mlf_route route;
	int ret = lockall(flags, &route);

	if (to_kernel(route))
		ret = libc_mlockall(flags);
	mlf_trace(route, ret, "mlockall(%#x)", flags);
	return ret;
}

MLF_EXPORT int munlockall(void)
{
	enum mlf_route route;
	int ret = unlockall(&route);

	if (to_kernel(route))
		ret = libc_munlockall();
	mlf_trace(route, ret, "munlockall()");
	return ret;
}

/*
 * glibc's syscall(number, ...) for the mlock family's numbers: six argument
 * registers are read whatever the number, as glibc's own does; the kernel
 * takes mlock2's and mlockall's flags as int.
 */
#ifdef __x86_64__
__attribute__((visibility("hidden"), used)) long mlf_syscall_family(long number, ...)
#else
MLF_EXPORT long syscall(long number, ...)
#endif
{
	enum mlf_route route;
	const void *addr;
	va_list ap;
	long a[6], ret;

	va_start(ap, number);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	addr = (const void *)a[0];
	switch (number) {
	case SYS_mlock:
		ret = lock(addr, a[1], 0, &route);
		break;
	case SYS_mlock2:
		ret = lock(addr, a[1], (unsigned int)a[2], &route);
		break;
	case SYS_munlock:
		ret = unlock(addr, a[1], &route);
		break;
	case SYS_mlockall:
		ret = lockall((int)a[0], &route);
		break;
	case SYS_munlockall:
		ret = unlockall(&route);
		break;
	default:
		return mlf_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
	}
	if (to_kernel(route))
		ret = mlf_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
	mlf_trace(route, ret, "syscall(%ld, %#lx, %#lx, %#lx)", number, a[0], a[1], a[2]);
	return ret;
}

#ifdef __x86_64__
/* A failed system call of syscall() below: errno, and -1. */
__attribute__((visibility("hidden"), used)) long mlf_syscall_failed(long ret)
{
	errno = (int)-ret;
	return -1;
}

#define MLF_STR_(x)	#x
#define MLF_STR(x)	MLF_STR_(x)
/* Built with -fcf-protection (dpkg's hardening from trixie on): a branch target. */
#if defined(__CET__) && (__CET__ & 1)
#define MLF_ENDBR	"	endbr64\n"
#else
#define MLF_ENDBR	""
#endif
_Static_assert(SYS_munlock == SYS_mlock + 1 && SYS_mlockall == SYS_mlock + 2 &&
	       SYS_munlockall == SYS_mlock + 3, "syscall() below tests one range");

/*
 * syscall() itself, every program's (Rust's futexes go through it): any
 * number but the mlock family's is made as glibc makes it, the registers
 * shifted and one syscall instruction, so that preloading costs it a
 * compare (a C variadic function would read all six arguments, some 50
 * instructions a call).  The family's numbers jump, with every register
 * and the stack as the caller left them, to mlf_syscall_family() above.
 */
__asm__(
"	.text\n"
"	.globl	syscall\n"
"	.type	syscall, @function\n"
"	.p2align 4\n"
"syscall:\n"
"	.cfi_startproc\n"
MLF_ENDBR
"	leaq	-" MLF_STR(SYS_mlock) "(%rdi), %r11\n"
"	cmpq	$3, %r11\n"
"	jbe	mlf_syscall_family\n"
"	cmpq	$" MLF_STR(SYS_mlock2) ", %rdi\n"
"	je	mlf_syscall_family\n"
"	movq	%rdi, %rax\n"
"	movq	%rsi, %rdi\n"
"	movq	%rdx, %rsi\n"
"	movq	%rcx, %rdx\n"
"	movq	%r8, %r10\n"
"	movq	%r9, %r8\n"
"	movq	8(%rsp), %r9\n"
"	syscall\n"
"	cmpq	$-4095, %rax\n"
"	jae	1f\n"
"	ret\n"
"1:	movq	%rax, %rdi\n"
"	jmp	mlf_syscall_failed\n"
"	.cfi_endproc\n"
"	.size	syscall, .-syscall\n"
);
#endif
