// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel behaviour, not a module bug: under RLIMIT_MEMLOCK, mlock(2) counts
 * the pages of a range it cannot lock (the vdso, VM_SPECIAL) in the request
 * but never in locked_vm, so the same lock is allowed once and refused after
 * another lock.  Run as root: it sets a 4-page limit and becomes nobody.
 * Prints the three results (0 0 ENOMEM is the kernel's behaviour), then, with
 * an argument N, forks and execs itself N times and counts the execs whose
 * [vvar] starts right at the stack's top (6.1 places the vDSO above the
 * stack, so the fuzzer's stack ranges could reach it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* The bounds of the mapping whose maps line names @name; 0 if found. */
static int mapping(const char *name, unsigned long *s, unsigned long *e)
{
	char l[512];
	FILE *f = fopen("/proc/self/maps", "r");
	int ret = -1;

	while (f && ret && fgets(l, sizeof(l), f))
		if (strstr(l, name) && sscanf(l, "%lx-%lx", s, e) == 2)
			ret = 0;
	if (f)
		fclose(f);
	return ret;
}

int main(int argc, char **argv)
{
	unsigned long vs, ve, ss, se, as, ae;
	struct rlimit rl = { 4 << 12, 4 << 12 };
	char *m;
	int n, adjacent = 0;

	if (argc > 1 && !strcmp(argv[1], "--adjacent"))
		return mapping("[stack]", &ss, &se) || mapping("[vvar]", &as, &ae) ||
		       se != as;
	m = mmap(NULL, 4 << 12, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (m == MAP_FAILED || mapping("[vdso]", &vs, &ve) ||
	    setrlimit(RLIMIT_MEMLOCK, &rl) || setuid(65534))
		return 2;
	printf("vdso %lu pages, RLIMIT_MEMLOCK 4 pages\n", (ve - vs) >> 12);
	printf("mlock(vdso): %s\n", mlock((void *)vs, ve - vs) ? strerror(errno) : "0");
	printf("mlock(4 anonymous pages): %s\n", mlock(m, 4 << 12) ? strerror(errno) : "0");
	printf("mlock(vdso) again: %s\n", mlock((void *)vs, ve - vs) ? strerror(errno) : "0");
	n = argc > 1 ? atoi(argv[1]) : 0;
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		int st;

		if (!pid) {
			execl("/proc/self/exe", argv[0], "--adjacent", (char *)NULL);
			_exit(3);
		}
		if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		    !WEXITSTATUS(st))
			adjacent++;
	}
	if (n)
		printf("[vvar] at the stack's top in %d of %d execs\n", adjacent, n);
	return 0;
}
