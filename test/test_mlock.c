// SPDX-License-Identifier: GPL-2.0
/*
 * test_mlock: time COUNT mlock+munlock pairs through the stock syscall,
 * through libmlockfast's mlock/munlock (preload: what an unmodified program
 * gets with LD_PRELOAD) and through /dev/mlockfast in each mode, side by
 * side in one run.
 *
 *   test_mlock -c COUNT [-s SIZE] [-m MODE[,MODE...]|all] [-f anon|file|shmem]
 *              [-r REPEATS] [-w WARMUP] [--json]
 *
 * Under `test/vm/run --icount` guest nanoseconds are instructions, so
 * ns/pair is then instructions per pair.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <linux/mlockfast.h>
#include "mlf_tool.h"

struct sample {
	double real, user, sys;
};

static int dev_fd = -1;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: test_mlock -c COUNT [-s SIZE] [-m MODE[,MODE...]|all]\n"
		"                  [-f anon|file|shmem] [-r REPEATS] [-w WARMUP] [--json]\n"
		"  MODE: syscall, preload (mlock/munlock routed by libmlockfast), ioctl\n"
		"        (the module's default mode), eager, deferred, reclaim, legacy;\n"
		"        default all. SIZE takes K/M suffixes, default 64K.\n"
		"  WARMUP: syscall pairs run once before measuring (default 30000).\n");
}

static long parse_size(const char *s)
{
	char *end;
	long v = strtol(s, &end, 0);

	if (v <= 0 || end == s)
		return -1;
	if (*end == 'K' || *end == 'k')
		v <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		v <<= 20, end++;
	return *end ? -1 : v;
}

static int parse_modes(const char *arg, bool *want)
{
	char *copy = strdup(arg), *tok, *save = NULL;
	int n = 0;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int m;

		if (!strcmp(tok, "all")) {
			for (m = 0; m < M_NR; m++)
				want[m] = true;
			n += M_NR;
			continue;
		}
		for (m = 0; m < M_NR && strcmp(tok, mode_names[m]); m++)
			;
		if (m == M_NR) {
			fprintf(stderr, "test_mlock: unknown mode '%s'\n", tok);
			free(copy);
			return -1;
		}
		want[m] = true;
		n++;
	}
	free(copy);
	return n;
}

static char *map_buffer(const char *kind, size_t size)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS, fd = -1;
	char *p;

	if (!strcmp(kind, "file") || !strcmp(kind, "shmem")) {
		char path[] = "/tmp/test_mlock.XXXXXX";

		if (!strcmp(kind, "shmem"))
			fd = memfd_create("test_mlock", 0);
		else if ((fd = mkstemp(path)) >= 0)
			unlink(path);
		if (fd < 0 || ftruncate(fd, size))
			return NULL;
		flags = MAP_SHARED;
	}
	p = map_guarded(size, flags, fd);
	if (fd >= 0)
		close(fd);
	return p;
}

static double now(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double tv(struct timeval t)
{
	return t.tv_sec + t.tv_usec / 1e6;
}

static int measure(int mode, char *buf, size_t size, long count,
		   struct sample *s)
{
	struct rusage r0, r1;
	double t0;

	getrusage(RUSAGE_SELF, &r0);
	t0 = now(CLOCK_MONOTONIC);
	for (long i = 0; i < count; i++) {
		if (lock_pair(dev_fd, mode, buf, size)) {
			fprintf(stderr, "test_mlock: %s: %s\n", mode_names[mode],
				strerror(errno));
			return -1;
		}
	}
	s->real = now(CLOCK_MONOTONIC) - t0;
	getrusage(RUSAGE_SELF, &r1);
	s->user = tv(r1.ru_utime) - tv(r0.ru_utime);
	s->sys = tv(r1.ru_stime) - tv(r0.ru_stime);
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void fmt_size(char *out, size_t n, long size)
{
	if (size % (1 << 20) == 0)
		snprintf(out, n, "%ldM", size >> 20);
	else if (size % 1024 == 0)
		snprintf(out, n, "%ldK", size >> 10);
	else
		snprintf(out, n, "%ld", size);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	long count = 100000, size = 64 << 10, warmup = 30000;
	const char *kind = "anon";
	bool want[M_NR] = { false }, json = false, any = false;
	int repeats = 1, opt, rc = 0;
	struct sample *samples[M_NR] = { NULL };
	char sz[32];

	while ((opt = getopt_long(argc, argv, "c:s:m:f:r:w:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			count = strtol(optarg, NULL, 0);
			break;
		case 's':
			size = parse_size(optarg);
			break;
		case 'm':
			if (parse_modes(optarg, want) < 0) {
				usage(stderr);
				return 2;
			}
			break;
		case 'f':
			kind = optarg;
			break;
		case 'r':
			repeats = atoi(optarg);
			break;
		case 'w':
			warmup = strtol(optarg, NULL, 0);
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || count <= 0 || size <= 0 || repeats <= 0 ||
	    warmup < 0 || (strcmp(kind, "anon") && strcmp(kind, "file") &&
			   strcmp(kind, "shmem"))) {
		usage(stderr);
		return 2;
	}
	for (int m = 0; m < M_NR; m++)
		any |= want[m];
	if (!any)
		for (int m = 0; m < M_NR; m++)
			want[m] = true;

	if (want[M_PRELOAD] && preload_open("test_mlock"))
		return 1;
	dev_fd = open(MLOCKFAST_DEVICE, O_RDWR | O_CLOEXEC);
	if (dev_fd < 0) {
		fprintf(stderr,
			"test_mlock: %s: %s: load the module (modprobe mlockfast, after\n"
			"  make install or dkms install); the ioctl modes are skipped\n",
			MLOCKFAST_DEVICE, strerror(errno));
		for (int m = M_IOCTL; m < M_NR; m++)
			want[m] = false;
		rc = 1;
	}
	for (int m = 0; m < M_NR; m++) {
		if (!want[m])
			continue;
		samples[m] = calloc(repeats, sizeof(struct sample));
		if (!samples[m]) {
			fprintf(stderr, "test_mlock: out of memory\n");
			return 1;
		}
	}
	fmt_size(sz, sizeof(sz), size);
	if (warmup && !json)
		printf("# warm-up: %ld syscall pairs of %s first (6.12 settles after ~20,000)\n",
		       warmup, sz);
	if (warmup) {
		char *w = map_buffer(kind, size);

		if (!w)
			return 1;
		for (long i = 0; i < warmup; i++)
			if (lock_pair(dev_fd, M_SYSCALL, w, size)) {
				fprintf(stderr, "test_mlock: warm-up: %s\n", strerror(errno));
				return 1;
			}
		munmap(w - GUARD, size + 2 * GUARD);
	}
	/* Interleave the modes, A B A B ..., so drift hits all of them alike. */
	for (int r = 0; r < repeats; r++) {
		for (int m = 0; m < M_NR; m++) {
			struct sample *s;
			char *buf;

			if (!want[m])
				continue;
			s = &samples[m][r];
			/*
			 * A buffer of its own for each measurement, unmapped
			 * after: every mode then runs at the same place in the
			 * same address space (the hole the last one left), with
			 * the same neighbours in the kernel's VMA tree, whose
			 * lookups both paths pay.
			 */
			buf = map_buffer(kind, size);
			if (!buf) {
				fprintf(stderr, "test_mlock: cannot map %ld bytes: %s\n",
					size, strerror(errno));
				return 1;
			}
			if (measure(m, buf, size, count, s))
				return 1;
			munmap(buf - GUARD, size + 2 * GUARD);
			if (json)
				printf("{\"mode\":\"%s\",\"size\":%ld,\"count\":%ld,\"repeat\":%d,"
				       "\"real_s\":%.6f,\"user_s\":%.6f,\"sys_s\":%.6f,"
				       "\"ns_per_pair\":%.1f}\n",
				       mode_names[m], size, count, r, s->real, s->user,
				       s->sys, s->real * 1e9 / count);
			else
				printf("# %-8s run %d: real %.3fs user %.3fs sys %.3fs\n",
				       mode_names[m], r + 1, s->real, s->user, s->sys);
			fflush(stdout);
		}
	}
	if (json)
		return rc;

	double base = 0;

	printf("%-9s %5s %9s %9s %9s %9s %12s %12s %10s%s\n", "mode", "size",
	       "count", "real(s)", "user(s)", "sys(s)", "ns/pair", "pairs/s",
	       "vs syscall", repeats > 1 ? "  real min-max (s)" : "");
	for (int m = 0; m < M_NR; m++) {
		double real[repeats], user[repeats], sys[repeats], med, lo, hi;

		if (!want[m])
			continue;
		for (int r = 0; r < repeats; r++) {
			real[r] = samples[m][r].real;
			user[r] = samples[m][r].user;
			sys[r] = samples[m][r].sys;
		}
		med = median(real, repeats);
		lo = real[0];
		hi = real[repeats - 1];
		if (m == M_SYSCALL)
			base = med;
		printf("%-9s %5s %9ld %9.3f %9.3f %9.3f %12.1f %12.0f ", mode_names[m],
		       sz, count, med, median(user, repeats), median(sys, repeats),
		       med * 1e9 / count, count / med);
		if (base > 0)
			printf("%9.2fx", base / med);
		else
			printf("%10s", "-");
		if (repeats > 1)
			printf("  %.3f-%.3f", lo, hi);
		printf("\n");
	}
	return rc;
}
