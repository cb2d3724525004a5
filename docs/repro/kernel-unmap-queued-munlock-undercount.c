// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel behaviour, not a module bug: on 7.2 the syscalls alone leave a
 * page of a locked VMA unlocked, on one CPU.
 *
 * One process maps a memfd twice: A locked (the pages counted once), B
 * locked on fault (nothing mapped yet).  munmap(A) queues an munlock of each
 * page in this CPU's mlock batch; 7.2 no longer drains the batches when
 * an unmap frees its pages (6.12 did).  Touching B then faults the pages
 * in: each fault's mlock finds PG_mlocked still set (the munlock has not
 * run) and queues behind it.  When the batch drains, the munlock comes
 * first, takes the count to 0 and clears PG_mlocked; the mlock after it
 * finds the page evictable and counts nothing.  B stays locked, its pages
 * do not.  6.12: 0 of 16 pages unlocked, 7.2: 16 of 16.
 * Needs root (/proc/kpageflags).  Exit 0: reproduced.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#define PG	4096
#define N	16

static int mlocked_pages(const char *p)
{
	int pm = open("/proc/self/pagemap", O_RDONLY);
	int kf = open("/proc/kpageflags", O_RDONLY), n = 0;

	for (int i = 0; pm >= 0 && kf >= 0 && i < N; i++) {
		uint64_t e = 0, f = 0;

		if (pread(pm, &e, 8, (uintptr_t)(p + i * PG) / PG * 8) == 8 &&
		    (e >> 63) &&
		    pread(kf, &f, 8, (e & ((1ULL << 55) - 1)) * 8) == 8)
			n += (f >> 33) & 1;	/* KPF_MLOCKED */
	}
	close(pm);
	close(kf);
	return n;
}

int main(void)
{
	int fd = memfd_create("unmap-queued-munlock", 0), n;
	char *a, *b, *scratch;
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(0, &one);	/* the batches are per CPU: stay on one */
	if (fd < 0 || ftruncate(fd, N * PG) || sched_setaffinity(0, sizeof(one), &one))
		return 2;
	a = mmap(NULL, N * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	b = mmap(NULL, N * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	scratch = mmap(NULL, PG, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED || b == MAP_FAILED || scratch == MAP_FAILED ||
	    mlock(a, N * PG) || mlock2(b, N * PG, MLOCK_ONFAULT) ||
	    munmap(a, N * PG))
		return 2;
	for (int i = 0; i < N; i++)
		(void)*(volatile char *)(b + i * PG);
	/* munlock(2) drains this CPU's batches before its walk. */
	if (munlock(scratch, PG))
		return 2;
	n = mlocked_pages(b);
	printf("# a locked VMA, after an unmap of another locked mapping: %d of %d pages mlocked\n",
	       n, N);
	munlock(b, N * PG);
	return n < N ? 0 : 1;
}
