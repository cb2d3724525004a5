// SPDX-License-Identifier: GPL-2.0
/*
 * test_mlock: time COUNT mlock+munlock pairs through the stock syscall,
 * through libmlockfast's mlock/munlock (preload: what an unmodified program
 * gets with LD_PRELOAD), through the syscall routed to the module (routed:
 * what it gets under mlockfast-run) and through /dev/mlockfast in each mode,
 * side by side in one run.
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

/* routed is test_mlock's alone: mlock_scale would time it unrouted. */
enum { M_ROUTED = M_NR, T_NR };

/* Rows in this order: routed beside preload, the other unmodified-program way. */
_Static_assert(M_NR == 7, "order[] lists every mode");
static const int order[T_NR] = {
	M_SYSCALL, M_PRELOAD, M_ROUTED, M_IOCTL, M_EAGER, M_DEFERRED, M_RECLAIM, M_LEGACY,
};

static const char *name(int m)
{
	return m == M_ROUTED ? "routed" : mode_names[m];
}

/*
 * Syscall routing: the choice this process came with, put back after each
 * mode that makes its own (0: the module has no routing, nothing to make);
 * and why -m routed cannot run (NULL: it can).
 */
static unsigned int route_prev;
static const char *route_why;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: test_mlock -c COUNT [-s SIZE] [-m MODE[,MODE...]|all]\n"
		"                  [-f anon|file|shmem] [-r REPEATS] [-w WARMUP] [--json]\n"
		"  MODE: syscall, preload (mlock/munlock routed by libmlockfast), routed\n"
		"        (the syscalls routed to the module: MLOCKFAST_IOC_ROUTE ON),\n"
		"        ioctl (the module's default mode), eager, deferred, reclaim,\n"
		"        legacy; default all (with routed if the module routes).\n"
		"        SIZE takes K/M suffixes, default 64K.\n"
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

/* @all: "all" was among them (routed is added later, if it can run). */
static int parse_modes(const char *arg, bool *want, bool *all)
{
	char *copy = strdup(arg), *tok, *save = NULL;
	int n = 0;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int m;

		if (!strcmp(tok, "all")) {
			for (m = 0; m < M_NR; m++)
				want[m] = true;
			*all = true;
			n += M_NR;
			continue;
		}
		for (m = 0; m < T_NR && strcmp(tok, name(m)); m++)
			;
		if (m == T_NR) {
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

/*
 * Whether the module routes syscalls, and this process's choice: sets
 * route_prev and route_why.  Without the device, or with a module that
 * routes nothing, no one is routed and there is nothing to opt out of.
 */
static void route_probe(void)
{
	struct mlockfast_info info = { 0 };
	struct mlockfast_route r;
	FILE *f;
	char param[16] = "";

	if (dev_fd < 0) {
		route_why = "it needs " MLOCKFAST_DEVICE;
		/* route=all routes us, and without the device we cannot opt out */
		f = fopen("/sys/module/mlockfast/parameters/route", "r");
		if (f && fgets(param, sizeof(param), f) && !strcmp(param, "all\n"))
			fprintf(stderr, "test_mlock: warning: route=all, and without %s the syscall\n"
				"  rows cannot opt out: they time the routed path, not the stock one\n",
				MLOCKFAST_DEVICE);
		if (f)
			fclose(f);
		return;
	}
	if (ioctl(dev_fd, MLOCKFAST_IOC_INFO, &info) || !(info.features & MLOCKFAST_FEAT_ROUTE)) {
		route_why = "this mlockfast module has no syscall routing (no MLOCKFAST_FEAT_ROUTE)";
		return;
	}
	if (route_choose(dev_fd, MLOCKFAST_ROUTE_QUERY, &r)) {
		route_why = errno == ENOTTY ?
			"this mlockfast module has no syscall routing (MLOCKFAST_IOC_ROUTE: ENOTTY)" :
			"MLOCKFAST_IOC_ROUTE failed";
		fprintf(stderr, "test_mlock: MLOCKFAST_IOC_ROUTE: %s\n", strerror(errno));
		return;
	}
	route_prev = r.choice ? r.choice : MLOCKFAST_ROUTE_DEFAULT;
	if (r.routing == MLOCKFAST_ROUTING_OFF)
		route_why = "routing is off (route=off): the syscalls would take the stock path";
}

/*
 * Make @choice this process's (0: leave it); for ON, check that the module
 * then routes us, so that a stock figure is never labelled routed.
 */
static int route_set(unsigned int choice)
{
	struct mlockfast_route r;

	if (!route_prev || !choice)
		return 0;
	if (route_choose(dev_fd, choice, &r)) {
		fprintf(stderr, "test_mlock: MLOCKFAST_IOC_ROUTE %u: %s\n", choice, strerror(errno));
		return -1;
	}
	if (choice == MLOCKFAST_ROUTE_ON && !r.routed) {
		fprintf(stderr, "test_mlock: routed: the module does not route this process (route=%s)\n",
			r.routing == MLOCKFAST_ROUTING_OFF ? "off" :
			r.routing == MLOCKFAST_ROUTING_GROUP ? "group" : "all");
		return -1;
	}
	return 0;
}

/* The choice a mode runs with: the stock figures never routed (route=all). */
static unsigned int route_choice(int mode)
{
	if (mode == M_ROUTED)
		return MLOCKFAST_ROUTE_ON;
	if (mode == M_SYSCALL || mode == M_LEGACY)
		return MLOCKFAST_ROUTE_NEVER;
	return 0;
}

/* @count pairs through @mode; routed's are the plain calls. */
static int run_pairs(int mode, char *buf, size_t size, long count, const char *what)
{
	if (mode == M_ROUTED)
		mode = M_SYSCALL;
	for (long i = 0; i < count; i++) {
		if (lock_pair(dev_fd, mode, buf, size)) {
			fprintf(stderr, "test_mlock: %s: %s\n", what, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* The choice is made and put back outside the timed loop. */
static int measure(int mode, char *buf, size_t size, long count,
		   struct sample *s)
{
	struct rusage r0, r1;
	double t0;

	if (route_set(route_choice(mode)))
		return -1;
	getrusage(RUSAGE_SELF, &r0);
	t0 = now(CLOCK_MONOTONIC);
	if (run_pairs(mode, buf, size, count, name(mode)))
		return -1;
	s->real = now(CLOCK_MONOTONIC) - t0;
	getrusage(RUSAGE_SELF, &r1);
	s->user = tv(r1.ru_utime) - tv(r0.ru_utime);
	s->sys = tv(r1.ru_stime) - tv(r0.ru_stime);
	return route_choice(mode) ? route_set(route_prev) : 0;
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
	bool want[T_NR] = { false }, json = false, any = false, all = false;
	int repeats = 1, opt, rc = 0;
	struct sample *samples[T_NR] = { NULL };
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
			if (parse_modes(optarg, want, &all) < 0) {
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
	for (int m = 0; m < T_NR; m++)
		any |= want[m];
	if (!any) {
		for (int m = 0; m < M_NR; m++)
			want[m] = true;
		all = true;
	}

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
	route_probe();
	if (want[M_ROUTED] && route_why) {
		fprintf(stderr, "test_mlock: -m routed: %s\n", route_why);
		if (route_prev)	/* routing, but off */
			fprintf(stderr, "  turn it on: echo group >/sys/module/mlockfast/parameters/route\n");
		return 1;
	}
	if (all && !route_why)
		want[M_ROUTED] = true;
	else if (all && dev_fd >= 0 && !json)
		printf("# routed: skipped: %s\n", route_why);
	for (int m = 0; m < T_NR; m++) {
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
		if (route_set(MLOCKFAST_ROUTE_NEVER) ||
		    run_pairs(M_SYSCALL, w, size, warmup, "warm-up") || route_set(route_prev))
			return 1;
		munmap(w - GUARD, size + 2 * GUARD);
	}
	/* Interleave the modes, A B A B ..., so drift hits all of them alike. */
	for (int r = 0; r < repeats; r++) {
		for (int i = 0; i < T_NR; i++) {
			int m = order[i];
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
				       name(m), size, count, r, s->real, s->user,
				       s->sys, s->real * 1e9 / count);
			else
				printf("# %-8s run %d: real %.3fs user %.3fs sys %.3fs\n",
				       name(m), r + 1, s->real, s->user, s->sys);
			fflush(stdout);
		}
	}
	if (json)
		return rc;

	double base = 0;

	printf("%-9s %5s %9s %9s %9s %9s %12s %12s %10s%s\n", "mode", "size",
	       "count", "real(s)", "user(s)", "sys(s)", "ns/pair", "pairs/s",
	       "vs syscall", repeats > 1 ? "  real min-max (s)" : "");
	for (int i = 0; i < T_NR; i++) {
		int m = order[i];
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
		printf("%-9s %5s %9ld %9.3f %9.3f %9.3f %12.1f %12.0f ", name(m),
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
