// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel behaviour, not a module bug: the syscalls alone leave pages of a
 * locked VMA unlocked on one CPU, on 6.1 and 6.12 too (7.2: see
 * kernel-unmap-queued-munlock-undercount.c, the same race without a
 * reschedule).
 *
 * X locks a memfd mapping V and unmaps it, over and over.  The unmap's zap
 * queues an munlock of each page in the CPU's mlock batch (flushed every 15
 * entries, and by the drain at the end of the unmap), and reschedules
 * between page tables (cond_resched() in zap_pmd_range()) with up to 14
 * munlocks still queued.  Y maps the same memfd as W, locks it on fault,
 * sleeps a little (its wakeup makes X reschedule at the next such point:
 * X is SCHED_IDLE) and touches the pages that end each of V's page tables.
 * A fault of a page whose munlock is queued finds PG_mlocked still set and
 * queues its mlock behind it; when the batch drains, the munlock takes the
 * count to 0 and clears PG_mlocked, and the mlock finds the page evictable
 * and counts nothing.  W is locked, the page is not.
 *
 * Needs root (/proc/kpageflags).  Prints what it found; exit 0: reproduced
 * (some page of W unlocked), 1: not in the time given, 2: setup failed.
 * usage: kernel-zap-queued-munlock-undercount [SECONDS]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PG		4096UL
#define PMD_PAGES	512UL
#define NPMD		8UL
#define NPAGES		(NPMD * PMD_PAGES)
#define TAIL		14UL	/* munlocks a 15-entry batch can still hold */

static int mlocked(int pm, int kf, const char *p)
{
	uint64_t e = 0, f = 0;

	if (pread(pm, &e, 8, (uintptr_t)p / PG * 8) != 8 || !(e >> 63))
		return -1;	/* not present */
	if (pread(kf, &f, 8, (e & ((1ULL << 55) - 1)) * 8) != 8)
		return -1;
	return (f >> 33) & 1;	/* KPF_MLOCKED */
}

/* X: lock and unlock-by-unmap V, at 2 MiB alignment, for ever. */
static void locker(int fd)
{
	struct sched_param sp = { 0 };
	char *hole = mmap(NULL, NPAGES * PG + PMD_PAGES * PG, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *at;

	if (hole == MAP_FAILED || sched_setscheduler(0, SCHED_IDLE, &sp))
		_exit(2);
	at = (char *)(((uintptr_t)hole + PMD_PAGES * PG - 1) &
		      ~(PMD_PAGES * PG - 1));
	munmap(hole, NPAGES * PG + PMD_PAGES * PG);
	for (;;) {
		char *v = mmap(at, NPAGES * PG, PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_FIXED, fd, 0);

		if (v == MAP_FAILED || mlock(v, NPAGES * PG))
			_exit(2);
		munmap(v, NPAGES * PG);
	}
}

int main(int argc, char **argv)
{
	int fd = memfd_create("zap-queued-munlock", 0), found = 0, pm, kf;
	long seconds = argc > 1 ? atol(argv[1]) : 60, rounds = 0;
	char *scratch;
	cpu_set_t one;
	time_t end;
	pid_t x;

	CPU_ZERO(&one);
	CPU_SET(0, &one);	/* the batches are per CPU: both on one */
	if (fd < 0 || ftruncate(fd, NPAGES * PG) ||
	    sched_setaffinity(0, sizeof(one), &one))
		return 2;
	scratch = mmap(NULL, PG, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	pm = open("/proc/self/pagemap", O_RDONLY);
	kf = open("/proc/kpageflags", O_RDONLY);
	if (scratch == MAP_FAILED || pm < 0 || kf < 0)
		return 2;
	x = fork();
	if (x == 0)
		locker(fd);
	end = time(NULL) + seconds;
	srand(getpid());
	while (!found && time(NULL) < end) {
		char *w = mmap(NULL, NPAGES * PG, PROT_READ | PROT_WRITE,
			       MAP_SHARED, fd, 0);

		if (w == MAP_FAILED || mlock2(w, NPAGES * PG, MLOCK_ONFAULT))
			break;
		usleep(rand() % 400);
		for (unsigned long k = 1; k <= NPMD; k++)
			for (unsigned long i = k * PMD_PAGES - TAIL; i < k * PMD_PAGES; i++)
				(void)*(volatile char *)(w + i * PG);
		/* munlock(2) drains this CPU's batches before its walk. */
		munlock(scratch, PG);
		for (unsigned long k = 1; k <= NPMD; k++)
			for (unsigned long i = k * PMD_PAGES - TAIL; i < k * PMD_PAGES; i++)
				found += mlocked(pm, kf, w + i * PG) == 0;
		munmap(w, NPAGES * PG);
		rounds++;
	}
	kill(x, SIGKILL);
	waitpid(x, NULL, 0);
	printf("# a locked VMA beside a locked mapping unmapped over and over: %d pages left unlocked, %ld rounds\n",
	       found, rounds);
	return found ? 0 : 1;
}
