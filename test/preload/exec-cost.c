// SPDX-License-Identifier: GPL-2.0
/*
 * mlf-exec-cost N PROGRAM [ARGS...]: fork, exec and reap PROGRAM N times
 * (after 20 unmeasured), print the CLOCK_MONOTONIC time per exec.  In an
 * --icount guest that is instructions: run it with and without LD_PRELOAD
 * to see what preloading a library costs a program (make preload-cost).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int one(char **argv)
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -1;
}

int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[1]) : 0;
	const char *pre = getenv("LD_PRELOAD");
	long long t0;

	if (n <= 0) {
		fprintf(stderr, "usage: mlf-exec-cost N PROGRAM [ARGS...]\n");
		return 2;
	}
	for (int i = 0; i < 20; i++)
		if (one(argv + 2))
			goto failed;
	t0 = now_ns();
	for (int i = 0; i < n; i++)
		if (one(argv + 2))
			goto failed;
	printf("exec-cost: %s, LD_PRELOAD=%s: %lld ns per exec\n", argv[2], pre ? pre : "",
	       (now_ns() - t0) / n);
	return 0;
failed:
	fprintf(stderr, "mlf-exec-cost: %s failed\n", argv[2]);
	return 1;
}
