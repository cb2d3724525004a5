// SPDX-License-Identifier: GPL-2.0
/*
 * mlf-small-calls [N]: the calls that do little or nothing, and one other
 * system call, each N times (after as many unmeasured), with their p50
 * and p99 in ns per call (under --icount, instructions): what routing
 * adds to a call that is routed, to one that is not, and to a syscall it
 * does not hook.  Prints "small NAME P50 P99" lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "timing.h"

#define PG	4096UL

static char *page, *hole;

static void c_getppid(void) { syscall(SYS_getppid); }
static void c_mlock0(void) { mlock(page, 0); }
static void c_mlock2_einval(void) { syscall(SYS_mlock2, page, PG, 8); }
static void c_munlock_enomem(void) { munlock(hole, PG); }
static void c_mlockall_einval(void) { mlockall(0); }
static void c_munlock_4k(void) { munlock(page, PG); }
static void c_pair_4k(void)
{
	mlock(page, PG);
	munlock(page, PG);
}

static const struct {
	const char *name;
	void (*fn)(void);
} calls[] = {
	{ "getppid", c_getppid },
	{ "mlock-len0", c_mlock0 },
	{ "mlock2-einval", c_mlock2_einval },
	{ "munlock-enomem", c_munlock_enomem },
	{ "mlockall-einval", c_mlockall_einval },
	{ "munlock-4K-unlocked", c_munlock_4k },
	{ "pair-4K", c_pair_4k },
};

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2000;
	long long *v = calloc(n > 0 ? n : 1, sizeof(*v)), p50, p99;

	page = mmap(NULL, 3 * PG, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (n <= 0 || !v || page == MAP_FAILED) {
		fprintf(stderr, "usage: mlf-small-calls [N]\n");
		return 2;
	}
	page[0] = 1;
	hole = page + 2 * PG;
	munmap(hole, PG);
	for (size_t c = 0; c < sizeof(calls) / sizeof(calls[0]); c++) {
		for (int i = 0; i < n; i++)
			calls[c].fn();
		for (int i = 0; i < n; i++) {
			long long t0 = now_ns();

			calls[c].fn();
			v[i] = now_ns() - t0;
		}
		pct(v, n, &p50, &p99);
		printf("small %s %lld %lld\n", calls[c].name, p50, p99);
	}
	return 0;
}
