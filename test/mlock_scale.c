// SPDX-License-Identifier: GPL-2.0
/*
 * mlock_scale: a will-it-scale style scaling test of mlock+munlock.
 *
 *   mlock_scale -t COPIES [-s SIZE] [-d SECONDS] [-m MODE] [--threads]
 *
 * COPIES processes (or threads) each map a SIZE buffer of their own (a VMA
 * between two PROT_NONE guard pages, touched first, as test_mlock does) and
 * lock and unlock it in a loop through MODE, counting iterations in a
 * cache-line-padded slot of a shared area.  Once a second the parent prints,
 * as will-it-scale does,
 *
 *   min:X max:Y total:Z
 *
 * the per-copy iteration deltas over that second (smallest, largest, sum),
 * and at the end one line "average: min:X max:Y total:Z", the per-second
 * averages over the run less its first second (warm-up).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/mlockfast.h>
#include "mlf_tool.h"

#define MAX_COPIES	4096

/* One cache line per copy, so the counters do not bounce between CPUs. */
struct slot {
	uint64_t count;
	uint32_t ready;
	uint32_t failed;
	char pad[48];
} __attribute__((aligned(64)));

/* The shared area: control line, then one slot per copy. */
struct shared {
	uint32_t go;
	uint32_t stop;
	char pad[56];
	struct slot slot[];
} __attribute__((aligned(64)));

static struct shared *sh;
static int dev_fd = -1;
static int mode = M_SYSCALL;
static size_t size = 64 << 10;
static volatile sig_atomic_t interrupted;

static void usage(void)
{
	fprintf(stderr,
		"usage: mlock_scale -t COPIES [-s SIZE] [-d SECONDS] [-m MODE] [--threads]\n"
		"  COPIES processes (threads with --threads) each lock+unlock a SIZE\n"
		"  buffer of their own in a loop; every second prints\n"
		"  'min:X max:Y total:Z' (iterations per copy in that second), then\n"
		"  'average: min:X max:Y total:Z' (first second excluded).\n"
		"  MODE: syscall (default), preload (mlock/munlock routed by libmlockfast),\n"
		"        ioctl (the module's default mode), eager, deferred, reclaim, legacy.\n"
		"        SIZE takes K/M suffixes, default 64K.\n"
		"  SECONDS: default 5. COPIES: 1..%d.\n", MAX_COPIES);
	exit(2);
}

static long parse_num(const char *s, bool suffix)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || v <= 0 || end == s)
		return -1;
	if (suffix && (*end == 'K' || *end == 'k'))
		v <<= 10, end++;
	else if (suffix && (*end == 'M' || *end == 'm'))
		v <<= 20, end++;
	return *end ? -1 : v;
}

static uint32_t load32(const uint32_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void store32(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* One copy: map, touch, wait for the start, loop until told to stop. */
static int copy_main(int i)
{
	struct slot *s = &sh->slot[i];
	uint64_t n = 0;
	char *buf = map_guarded(size, MAP_PRIVATE | MAP_ANONYMOUS, -1);

	if (!buf) {
		fprintf(stderr, "mlock_scale: copy %d: cannot map %zu bytes: %s\n",
			i, size, strerror(errno));
		store32(&s->failed, 1);
		return 1;
	}
	store32(&s->ready, 1);
	while (!load32(&sh->go) && !load32(&sh->stop))
		sched_yield();
	while (!load32(&sh->stop)) {
		if (lock_pair(dev_fd, mode, buf, size)) {
			fprintf(stderr, "mlock_scale: copy %d: %s: %s\n", i,
				mode_names[mode], strerror(errno));
			store32(&s->failed, 1);
			return 1;
		}
		__atomic_store_n(&s->count, ++n, __ATOMIC_RELAXED);
	}
	munmap(buf - GUARD, size + 2 * GUARD);
	return 0;
}

static void *thread_main(void *arg)
{
	copy_main((int)(intptr_t)arg);
	return NULL;
}

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Sleep until CLOCK_MONOTONIC reaches t (seconds); false if interrupted. */
static bool sleep_until(double t)
{
	struct timespec ts = {
		.tv_sec = (time_t)t,
		.tv_nsec = (long)((t - (time_t)t) * 1e9),
	};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		if (interrupted)
			return false;
	return !interrupted;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "threads", no_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	long copies = 0, seconds = 5, v;
	bool threads = false, failed = false;
	int opt, m, rc = 0;
	pid_t *pids = NULL;
	pthread_t *tids = NULL;
	uint64_t *prev;
	double sum_min = 0, sum_max = 0, sum_total = 0, t0;
	long measured = 0, started = 0;
	size_t area;

	while ((opt = getopt_long(argc, argv, "t:s:d:m:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 't':
			copies = parse_num(optarg, false);
			if (copies <= 0 || copies > MAX_COPIES)
				usage();
			break;
		case 's':
			v = parse_num(optarg, true);
			if (v <= 0)
				usage();
			size = (size_t)v;
			break;
		case 'd':
			seconds = parse_num(optarg, false);
			if (seconds <= 0)
				usage();
			break;
		case 'm':
			for (m = 0; m < M_NR && strcmp(optarg, mode_names[m]); m++)
				;
			if (m == M_NR) {
				fprintf(stderr, "mlock_scale: unknown mode '%s'\n", optarg);
				usage();
			}
			mode = m;
			break;
		case 'T':
			threads = true;
			break;
		case 'h':
		default:
			usage();
		}
	}
	if (optind != argc || copies <= 0)
		usage();

	if (mode == M_PRELOAD && preload_open("mlock_scale"))
		return 1;
	if (mode >= M_IOCTL) {
		dev_fd = open(MLOCKFAST_DEVICE, O_RDWR | O_CLOEXEC);
		if (dev_fd < 0) {
			fprintf(stderr,
				"mlock_scale: %s: %s: load the module (modprobe mlockfast, after\n"
				"  make install or dkms install), or use -m syscall\n",
				MLOCKFAST_DEVICE, strerror(errno));
			return 1;
		}
	}

	area = sizeof(struct shared) + copies * sizeof(struct slot);
	sh = mmap(NULL, area, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	prev = calloc(copies, sizeof(*prev));
	pids = calloc(copies, sizeof(*pids));
	tids = calloc(copies, sizeof(*tids));
	if (sh == MAP_FAILED || !prev || !pids || !tids) {
		perror("mlock_scale");
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);

	printf("# mlock_scale: %ld %s, %zu bytes each, mode %s, %ld s\n", copies,
	       threads ? "threads" : "processes", size, mode_names[mode], seconds);
	fflush(stdout);

	for (long i = 0; i < copies; i++, started++) {
		if (threads) {
			errno = pthread_create(&tids[i], NULL, thread_main,
					       (void *)(intptr_t)i);
			if (errno) {
				perror("mlock_scale: pthread_create");
				failed = true;
				break;
			}
			continue;
		}
		pid_t parent = getpid();

		pids[i] = fork();
		if (pids[i] < 0) {
			perror("mlock_scale: fork");
			failed = true;
			break;
		}
		if (pids[i] == 0) {
			/* Die with the parent; it may have died before this. */
			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
				_exit(1);
			_exit(copy_main((int)i));
		}
	}

	/* Wait until every copy has its buffer mapped and touched. */
	for (long i = 0; !failed && i < started; i++) {
		while (!load32(&sh->slot[i].ready)) {
			if (load32(&sh->slot[i].failed) || interrupted ||
			    (!threads && waitpid(pids[i], NULL, WNOHANG) == pids[i])) {
				if (!threads)
					pids[i] = 0;	/* reaped */
				failed = true;
				break;
			}
			usleep(1000);
		}
	}

	if (!failed) {
		printf("# average: per-second means over seconds 2..%ld; the first second is warm-up\n",
		       seconds);
		fflush(stdout);
		t0 = now();
		store32(&sh->go, 1);
		for (long sec = 1; sec <= seconds; sec++) {
			uint64_t lo = UINT64_MAX, hi = 0, total = 0;

			if (!sleep_until(t0 + sec)) {
				failed = true;
				break;
			}
			for (long i = 0; i < copies; i++) {
				uint64_t c = __atomic_load_n(&sh->slot[i].count,
							     __ATOMIC_RELAXED);
				uint64_t d = c - prev[i];

				prev[i] = c;
				lo = d < lo ? d : lo;
				hi = d > hi ? d : hi;
				total += d;
				if (load32(&sh->slot[i].failed))
					failed = true;
			}
			printf("min:%llu max:%llu total:%llu\n", (unsigned long long)lo,
			       (unsigned long long)hi, (unsigned long long)total);
			fflush(stdout);
			if (failed)
				break;
			if (sec > 1 || seconds == 1) {
				sum_min += lo;
				sum_max += hi;
				sum_total += total;
				measured++;
			}
		}
	}

	/* Stop and reap every copy, with SIGKILL for one that does not stop. */
	store32(&sh->stop, 1);
	if (threads) {
		for (long i = 0; i < started; i++)
			pthread_join(tids[i], NULL);
	} else {
		double deadline = now() + 10;

		for (long i = 0; i < started; i++) {
			int st;

			if (!pids[i])
				continue;
			while (waitpid(pids[i], &st, WNOHANG) == 0) {
				if (now() > deadline)
					kill(pids[i], SIGKILL);
				usleep(1000);
			}
			if (!WIFEXITED(st) || WEXITSTATUS(st))
				failed = true;
		}
	}
	for (long i = 0; i < started; i++)
		if (load32(&sh->slot[i].failed))
			failed = true;

	if (failed || interrupted) {
		fprintf(stderr, "mlock_scale: %s\n",
			interrupted ? "interrupted" : "a copy failed");
		rc = 1;
	} else {
		printf("average: min:%.0f max:%.0f total:%.0f\n", sum_min / measured,
		       sum_max / measured, sum_total / measured);
	}
	munmap(sh, area);
	free(prev);
	free(pids);
	free(tids);
	return rc;
}
