// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel behaviour, not a module bug: the syscalls alone leave a shared page
 * mlocked for good, with no stranded page to show for it.
 *
 * A task faults pages into a VMA it locked on fault: each fault's mlock
 * waits in that CPU's mlock batch.  The task moves to another CPU and
 * munlocks them: munlock(2) drains only its new CPU's batch, finds the
 * pages not yet moved and clears their lock.  Another process locks them
 * (on any CPU: counted once).  When the first CPU's batch drains, the
 * fault's mlocks count again, and once the other process unlocks, the pages
 * stay mlocked.  6.1 (pagevec of 15) leaks the last page of 16, 6.12 all 16.
 * Needs two CPUs and root (/proc/kpageflags).  Exit 0: reproduced.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG	4096
#define N	16

static int pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	return sched_setaffinity(0, sizeof(s), &s);
}

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

/* Drain every CPU's batches: a lock and unlock there drain them. */
static void drain_cpus(void)
{
	for (int cpu = 0; cpu < 2; cpu++) {
		pid_t pid = fork();

		if (pid == 0) {
			char *x = mmap(NULL, PG, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			_exit(x == MAP_FAILED || pin(cpu) || mlock(x, PG) ||
			      munlock(x, PG));
		}
		waitpid(pid, NULL, 0);
	}
}

int main(void)
{
	int fd = memfd_create("migrated-fault", 0), go[2], ready[2];
	char *m, c;
	pid_t pid;

	if (fd < 0 || ftruncate(fd, N * PG) || pipe(go) || pipe(ready))
		return 2;
	for (int i = 0; i < N; i++)	/* in the page cache, not mapped */
		if (pwrite(fd, "x", 1, (off_t)i * PG) != 1)
			return 2;
	m = mmap(NULL, N * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return 2;
	pid = fork();
	if (pid == 0) {		/* the other process */
		if (pin(1) || read(go[0], &c, 1) != 1 || mlock(m, N * PG) ||
		    write(ready[1], "l", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(1);
		_exit(munlock(m, N * PG) != 0);
	}
	if (pid < 0 || pin(0) || mlock2(m, N * PG, MLOCK_ONFAULT))
		return 2;
	for (int i = 0; i < N; i++)
		(void)*(volatile char *)(m + i * PG);
	if (pin(1) || munlock(m, N * PG))	/* CPU 0 still holds the mlocks */
		return 2;
	if (write(go[1], "g", 1) != 1 || read(ready[0], &c, 1) != 1)
		return 2;
	drain_cpus();
	printf("# the other process's lock: %d of %d pages mlocked\n",
	       mlocked_pages(m), N);
	if (write(go[1], "g", 1) != 1 || waitpid(pid, NULL, 0) != pid)
		return 2;
	drain_cpus();
	printf("# every lock gone: %d pages still mlocked\n", mlocked_pages(m));
	return mlocked_pages(m) ? 0 : 1;
}
