// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>
#include "mlf_diff.h"
#include "mlf_seq.h"
#include "mlf_test.h"

struct diff_log {
	char *buf;
	size_t len, cap;
	long mlocked0;
};

static int sys_lock(const void *a, size_t l) { return mlock(a, l); }
static int sys_lock2(const void *a, size_t l, unsigned int f)
{
	return syscall(SYS_mlock2, a, l, f) ? -1 : 0;
}
static int sys_unlock(const void *a, size_t l) { return munlock(a, l); }
static int sys_lockall(int f) { return mlockall(f); }
static int sys_unlockall(void) { return munlockall(); }

/* The ioctl paths carry their mode in the flags. */
static unsigned int cur_mode;

static int io_lock(const void *a, size_t l) { return mlf_lock2(a, l, cur_mode); }
static int io_lock2(const void *a, size_t l, unsigned int f)
{
	return mlf_lock2(a, l, f | cur_mode);
}
static int io_unlock(const void *a, size_t l) { return mlf_unlock_mode(a, l, cur_mode); }
static int io_lockall(int f) { return mlf_lockall(f | cur_mode); }
static int io_unlockall(void) { return mlf_unlockall(); }

#define SYS_OPS	sys_lock, sys_lock2, sys_unlock, sys_lockall, sys_unlockall
#define IO_OPS	io_lock, io_lock2, io_unlock, io_lockall, io_unlockall

const struct path_ops diff_paths[] = {
	{ "syscall", 0, NULL, SYS_OPS },
	{ "eager", MLOCKFAST_MODE_EAGER, NULL, IO_OPS },
	{ "deferred", MLOCKFAST_MODE_DEFERRED, NULL, IO_OPS },
	{ "reclaim", MLOCKFAST_MODE_RECLAIM, NULL, IO_OPS },
	{ "routed-eager", 0, "eager", SYS_OPS },
	{ "routed-deferred", 0, "deferred", SYS_OPS },
	{ "routed-reclaim", 0, "reclaim", SYS_OPS },
};
const int diff_npaths = sizeof(diff_paths) / sizeof(diff_paths[0]);

static void log_vprintf(struct diff_log *log, const char *fmt, va_list ap)
{
	va_list aq;
	int n;

	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	while (log->len + n + 2 > log->cap) {
		log->cap = log->cap ? log->cap * 2 : 1 << 16;
		log->buf = realloc(log->buf, log->cap);
		if (!log->buf)
			abort();
	}
	vsnprintf(log->buf + log->len, n + 1, fmt, ap);
	log->len += n;
	log->buf[log->len++] = '\n';
	log->buf[log->len] = 0;
}

void diff_note(struct diff_log *log, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vprintf(log, fmt, ap);
	va_end(ap);
}

void diff_ret(struct diff_log *log, const char *what, int ret)
{
	diff_note(log, "%s = %d%s%s", what, ret, ret ? " errno " : "",
		  ret ? strerror(errno) : "");
}

char *diff_map(size_t off, size_t len, int prot, int flags, int fd)
{
	char *p = mmap(DIFF_BASE + off, len, prot, flags | MAP_FIXED_NOREPLACE,
		       fd, 0);

	if (p != DIFF_BASE + off) {
		fprintf(stderr, "diff_map(%#zx, %#zx): %s\n", off, len,
			strerror(errno));
		_exit(99);
	}
	return p;
}

void diff_touch(char *p, size_t len, int write)
{
	for (size_t i = 0; i < len; i += PAGE) {
		if (write)
			((volatile char *)p)[i] = 1;
		else
			(void)((volatile char *)p)[i];
	}
}

void diff_limit(unsigned long bytes)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	struct rlimit rl = { bytes, bytes };

	if (syscall(SYS_capget, &h, d) == 0) {
		d[0].effective &= ~(1U << CAP_IPC_LOCK);
		d[0].permitted &= ~(1U << CAP_IPC_LOCK);
		if (syscall(SYS_capset, &h, d))
			_exit(98);
	}
	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		_exit(97);
}

static void log_residency(struct diff_log *log, unsigned long s,
			  unsigned long e)
{
	size_t n = (e - s) / PAGE;
	unsigned char *vec = calloc(n, 1);
	uint64_t *pm = calloc(n, sizeof(*pm));
	char *line = calloc(n + 1, 1);
	int fd = open("/proc/self/pagemap", O_RDONLY);

	if (mincore((void *)s, e - s, vec))
		memset(vec, 0, n);
	if (fd < 0 || pread(fd, pm, n * 8, s / PAGE * 8) != (ssize_t)(n * 8))
		memset(pm, 0, n * 8);
	for (size_t i = 0; i < n; i++)
		line[i] = seq_page_state(vec[i], pm[i]);
	diff_note(log, "  res %s", line);
	if (fd >= 0)
		close(fd);
	free(vec);
	free(pm);
	free(line);
}

static void diff_state_once(struct diff_log *log, const char *label)
{
	char *smaps = read_file("/proc/self/smaps"), *l, *next;
	unsigned long lo = (unsigned long)DIFF_BASE, hi = lo + DIFF_SPAN;
	int in = 0;

	diff_note(log, "== %s", label);
	for (l = smaps; l && *l; l = next) {
		unsigned long s, e;

		next = strchr(l, '\n');
		if (next)
			*next++ = 0;
		else
			next = l + strlen(l);
		/* a VMA's header line, "start-end perms ..." */
		if (sscanf(l, "%lx-%lx ", &s, &e) == 2) {
			in = s < hi && e > lo;
			if (in) {
				char perms[8] = "", path[8] = "";
				unsigned long off;

				/* Each run has its own file: no inode, no name. */
				sscanf(l, "%*s %7s %lx %*s %*s %7s", perms, &off,
				       path);
				diff_note(log, "%lx-%lx %s %lx %s", s, e, perms,
					  off, path[0] ? "file" : "anon");
				log_residency(log, s, e);
			}
			continue;
		}
		if (in && seq_wanted_field(l))
			diff_note(log, "  %s", l);
	}
	free(smaps);
	diff_note(log, "VmLck %ld kB", status_kb("VmLck"));
	/* Exact only once stat_refresh folds the per-CPU deltas: root only. */
	if (access("/proc/sys/vm/stat_refresh", W_OK))
		diff_note(log, "Mlocked (not exact without root)");
	else
		diff_note(log, "Mlocked %+ld kB", meminfo_kb("Mlocked") - log->mlocked0);
}

struct diff_read {
	struct diff_log *log;
	const char *label;
};

static int diff_state_read(void *arg)
{
	struct diff_read *r = arg;

	diff_state_once(r->log, r->label);
	return 0;
}

/* Read until settled, as seq_window_state() does, and for its reasons. */
void diff_state(struct diff_log *log, const char *label)
{
	struct diff_read r = { log, label };

	if (seq_read_settled(&log->buf, &log->len, diff_state_read, &r) < 0)
		diff_note(log, "state not stable after %d reads",
			  SEQ_STATE_TRIES + 1);
}

/*
 * The texts live in static buffers: the parent's heap must look the same at
 * every fork, or mlockall() would lock a different amount in each child.
 */
#define DIFF_TEXT_MAX	(1 << 20)
static char diff_want[DIFF_TEXT_MAX], diff_got[DIFF_TEXT_MAX];

int diff_path_enter(const struct path_ops *p)
{
	cur_mode = p->mode;
	/* A module without routing (ENOTTY) has the syscall path only. */
	if (!p->mode)
		mlf_route(p->routed_mode ? MLOCKFAST_ROUTE_ON :
			  MLOCKFAST_ROUTE_NEVER, NULL);
	return p->routed_mode && mlf_routed() != 1 ? -1 : 0;
}

int diff_path_prepare(const struct path_ops *p)
{
	static char *route;

	if (!p->routed_mode)
		return 0;
	free(route);
	route = mlf_route_param();
	if (!route || !strcmp(route, "off"))
		return 1;
	return write_file_str(DEFAULT_MODE, p->routed_mode) ? -1 : 0;
}

static void run_path(const struct path_ops *p, scenario_fn fn, int *status,
		     char *out)
{
	size_t len = 0;
	int pfd[2];
	ssize_t n;
	pid_t pid;

	if (pipe(pfd))
		abort();
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		struct diff_log log = { 0 };

		close(pfd[0]);
		if (diff_path_enter(p))
			diff_note(&log, "not routed");
		log.mlocked0 = meminfo_kb("Mlocked");
		fn(p, &log);
		for (size_t off = 0; off < log.len; ) {
			n = write(pfd[1], log.buf + off, log.len - off);
			if (n <= 0)
				_exit(96);
			off += n;
		}
		_exit(0);
	}
	close(pfd[1]);
	while ((n = read(pfd[0], out + len, DIFF_TEXT_MAX - len - 1)) > 0)
		len += n;
	out[len] = 0;
	close(pfd[0]);
	waitpid(pid, status, 0);
}

void diff_print(scenario_fn fn)
{
	struct diff_log log = { 0 };

	log.mlocked0 = meminfo_kb("Mlocked");
	fn(&diff_paths[0], &log);
	if (log.buf)
		fputs(log.buf, stdout);
	free(log.buf);
}

void drain_everything(void)
{
	int fd = open("/proc/sys/vm/compact_memory", O_WRONLY);

	mlf_drain();
	if (fd >= 0) {
		if (write(fd, "1", 1) < 0)
			perror("compact_memory");
		close(fd);
	}
}

/* First differing line of a and b, for the log. */
static void show_difference(const char *a, const char *b)
{
	int line = 1;

	while (*a && *a == *b) {
		if (*a == '\n')
			line++;
		a++;
		b++;
	}
	fprintf(stderr, "# first difference at line %d\n#  syscall: %.*s\n#  ioctl:   %.*s\n",
		line, (int)strcspn(a, "\n"), a, (int)strcspn(b, "\n"), b);
}

int diff_run(const char *name, scenario_fn fn)
{
	int bad = 0;

	char *mode0 = read_file(DEFAULT_MODE);

	for (int i = 0; i < diff_npaths; i++) {
		char *got = i ? diff_got : diff_want;
		long mlocked, unevictable;
		int status, skip = diff_path_prepare(&diff_paths[i]);

		if (skip < 0) {
			fprintf(stderr, "# %s/%s: default_mode: %m\n", name,
				diff_paths[i].name);
			bad = 1;
		}
		if (skip)
			continue;
		drain_everything();
		mlocked = meminfo_kb("Mlocked");
		unevictable = meminfo_kb("Unevictable");
		run_path(&diff_paths[i], fn, &status, got);
		if (getenv("MLF_DIFF_VERBOSE"))
			fprintf(stderr, "# --- %s/%s\n%s", name,
				diff_paths[i].name, got);
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			fprintf(stderr, "# %s/%s: child status %#x\n", name,
				diff_paths[i].name, status);
			bad = 1;
		}
		if (i && strcmp(diff_want, got)) {
			fprintf(stderr, "# %s: %s differs from syscall\n",
				name, diff_paths[i].name);
			show_difference(diff_want, got);
			bad = 1;
		}
		drain_everything();
		if (meminfo_kb("Mlocked") != mlocked ||
		    meminfo_kb("Unevictable") != unevictable) {
			fprintf(stderr, "# %s/%s: leaked: Mlocked %ld -> %ld kB, Unevictable %ld -> %ld kB\n",
				name, diff_paths[i].name, mlocked,
				meminfo_kb("Mlocked"), unevictable,
				meminfo_kb("Unevictable"));
			bad = 1;
		}
	}
	if (mode0)
		write_file_str(DEFAULT_MODE, mode0);
	free(mode0);
	return bad;
}

/*
 * route=all for the rest of this program (its diff_run()s then check the
 * routed paths too), put back as it was when the program exits.  Call it
 * from main's process, before the harness forks the tests.
 */
static char *route_before;

static void route_put_back(void)
{
	if (route_before)
		mlf_set_route_param(route_before);
}

int diff_route_all(void)
{
	route_before = mlf_route_param();
	if (!route_before)
		return -1;
	atexit(route_put_back);
	return mlf_set_route_param("all");
}
