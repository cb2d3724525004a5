/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the benchmark programs here share: the monotonic clock in ns (under
 * --icount, guest instructions) and the p50 and p99 of a set of samples.
 */
#ifndef MLF_TIMING_H
#define MLF_TIMING_H

#include <stdlib.h>
#include <time.h>

static inline long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static inline int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

/* Sort the @n samples of @v; their p50 and p99. */
static inline void pct(long long *v, int n, long long *p50, long long *p99)
{
	int i99 = (n * 99) / 100;

	qsort(v, n, sizeof(*v), cmp_ll);
	*p50 = v[n / 2];
	*p99 = v[i99 < n ? i99 : n - 1];
}

#endif
