// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "mlf_test.h"

static int fd = -1;

int mlf_fd(void)
{
	if (fd < 0)
		fd = open(MLOCKFAST_DEVICE, O_RDWR | O_CLOEXEC);
	return fd;
}

void mlf_fd_close(void)
{
	if (fd >= 0)
		close(fd);
	fd = -1;
}

static int mlf_ioctl(unsigned long cmd, void *arg)
{
	int ret = ioctl(mlf_fd(), cmd, arg);

	return ret < 0 ? -1 : 0;
}

static int mlf_range(unsigned long cmd, const void *addr, size_t len,
		     unsigned int flags)
{
	struct mlockfast_range r = {
		.size = sizeof(r), .flags = flags,
		.addr = (uintptr_t)addr, .len = len,
	};

	return mlf_ioctl(cmd, &r);
}

int mlf_make_state_fd(int dev_fd)
{
	long page = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, page, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	/* Eager: the state is made, and no work of it is left queued. */
	struct mlockfast_range r = {
		.size = sizeof(r), .flags = MLOCKFAST_MODE_EAGER,
		.addr = (uintptr_t)p, .len = page,
	};
	int ret = 0;

	if (p == MAP_FAILED)
		return -1;
	p[0] = 1;
	for (int i = 0; i < 2 && !ret; i++)
		if (ioctl(dev_fd, MLOCKFAST_IOC_LOCK, &r) ||
		    ioctl(dev_fd, MLOCKFAST_IOC_UNLOCK, &r))
			ret = -1;
	munmap(p, page);
	return ret;
}

int mlf_make_state(void)
{
	return mlf_make_state_fd(mlf_fd());
}

int mlf_lock2(const void *addr, size_t len, unsigned int flags)
{
	return mlf_range(MLOCKFAST_IOC_LOCK, addr, len, flags);
}

int mlf_unlock(const void *addr, size_t len)
{
	return mlf_range(MLOCKFAST_IOC_UNLOCK, addr, len, 0);
}

int mlf_unlock_mode(const void *addr, size_t len, unsigned int mode)
{
	return mlf_range(MLOCKFAST_IOC_UNLOCK, addr, len, mode);
}

int mlf_lockall(int flags)
{
	struct mlockfast_all a = { .size = sizeof(a), .flags = flags };

	return mlf_ioctl(MLOCKFAST_IOC_LOCKALL, &a);
}

int mlf_unlockall(void)
{
	return mlf_ioctl(MLOCKFAST_IOC_UNLOCKALL, NULL);
}

int mlf_drain(void)
{
	return mlf_ioctl(MLOCKFAST_IOC_DRAIN, NULL);
}

int mlf_stats(struct mlockfast_stats *s)
{
	return mlf_ioctl(MLOCKFAST_IOC_STATS, s);
}

int mlf_route(unsigned int choice, struct mlockfast_route *out)
{
	struct mlockfast_route r = { .size = sizeof(r), .choice = choice };
	int ret = mlf_ioctl(MLOCKFAST_IOC_ROUTE, &r);

	if (!ret && out)
		*out = r;
	return ret;
}

int mlf_routed(void)
{
	struct mlockfast_route r;

	return mlf_route(MLOCKFAST_ROUTE_QUERY, &r) ? -1 : (int)r.routed;
}

#define ROUTE_PARAM	"/sys/module/mlockfast/parameters/route"

char *mlf_route_param(void)
{
	char *v = read_file(ROUTE_PARAM);

	if (v)
		v[strcspn(v, "\n")] = 0;
	return v;
}

int mlf_set_route_param(const char *v)
{
	return write_file_str(ROUTE_PARAM, v);
}

char *thp_setting(const char *path)
{
	char *v = read_file(path), *b = v ? strchr(v, '[') : NULL;

	if (!b) {
		free(v);
		return NULL;
	}
	memmove(v, b + 1, strlen(b + 1) + 1);
	v[strcspn(v, "]")] = 0;
	return v;
}

char *read_file(const char *path)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	int f = open(path, O_RDONLY);
	ssize_t n;

	if (f < 0 || !buf) {
		free(buf);
		if (f >= 0)
			close(f);
		return NULL;
	}
	while ((n = read(f, buf + len, cap - len - 1)) > 0) {
		len += n;
		if (cap - len < 2) {
			cap *= 2;
			buf = realloc(buf, cap);
		}
	}
	close(f);
	buf[len] = 0;
	return buf;
}

static long field_kb(const char *path, const char *field)
{
	char *buf = read_file(path), *p;
	size_t flen = strlen(field);
	long val = -1;

	for (p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (!strncmp(p, field, flen) && p[flen] == ':') {
			val = strtol(p + flen + 1, NULL, 10);
			break;
		}
	}
	free(buf);
	return val;
}

long meminfo_kb(const char *field)
{
	/* Fold the per-CPU vmstat deltas so the totals are exact. */
	int f = open("/proc/sys/vm/stat_refresh", O_WRONLY);

	if (f >= 0) {
		if (write(f, "1", 1) < 0 && errno != EINVAL)
			perror("stat_refresh");
		close(f);
	}
	return field_kb("/proc/meminfo", field);
}

long status_kb(const char *field)
{
	return field_kb("/proc/self/status", field);
}

long proc_status_kb(int pid, const char *field)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	return field_kb(path, field);
}

/* Sum of smaps Locked: over the VMAs meeting [lo, hi). */
long locked_kb(const void *lo, const void *hi)
{
	char *smaps = read_file("/proc/self/smaps"), *l;
	unsigned long s, e;
	long sum = 0;
	int in = 0;

	for (l = smaps; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (sscanf(l, "%lx-%lx ", &s, &e) == 2 && strchr(l, ' ') &&
		    strchr(l, '-') < strchr(l, ' ')) {
			in = s < (unsigned long)hi && e > (unsigned long)lo;
			continue;
		}
		if (in && !strncmp(l, "Locked:", 7))
			sum += strtol(l + 7, NULL, 10);
	}
	free(smaps);
	return sum;
}

long read_long(const char *path)
{
	char *buf = read_file(path);
	long v = buf ? strtol(buf, NULL, 0) : -1;

	free(buf);
	return v;
}

int mlf_module_loaded(void)
{
	char *mods = read_file("/proc/modules");
	int yes = mods && strstr(mods, "mlockfast ") != NULL;

	free(mods);
	return yes;
}

int run(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	fflush(NULL);
	st = system(cmd);
	return st < 0 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}

/*
 * The kernel log through /dev/kmsg, whose records carry a sequence number:
 * a mark stays right when the ring buffer wraps and drops the oldest
 * records (a byte offset into dmesg's text did not, after the stress
 * test's hotplug messages).
 */
static long long dmesg_mark_seq = -1;	/* -1: no mark, the whole log */

/*
 * Occurrences of @needle (NULL: none) in the messages of records after
 * sequence number @after; returns the last record's in *@last.
 */
static int kmsg_scan(const char *needle, long long after, long long *last)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	char rec[8192];
	int n = 0;

	if (fd < 0)
		return -1;
	for (;;) {
		ssize_t len = read(fd, rec, sizeof(rec) - 1);
		long long seq;
		char *msg, *p;

		if (len < 0 && errno == EPIPE)
			continue;	/* overwritten while we read: go on */
		if (len <= 0)
			break;
		rec[len] = 0;
		msg = strchr(rec, ';');
		if (sscanf(rec, "%*u,%lld", &seq) != 1 || !msg)
			continue;
		*last = seq;
		if (seq <= after || !needle)
			continue;
		/* the message only, not the key=value lines after it */
		p = strchr(++msg, '\n');
		if (p)
			*p = 0;
		for (p = msg; (p = strstr(p, needle)); p += strlen(needle))
			n++;
	}
	close(fd);
	return n;
}

void dmesg_mark(void)
{
	long long last = -1;

	if (kmsg_scan(NULL, -1, &last) >= 0)
		dmesg_mark_seq = last;
}

int dmesg_count(const char *needle)
{
	long long last;

	return kmsg_scan(needle, dmesg_mark_seq, &last);
}

int mlf_mapping(uintptr_t addr, const char *name, unsigned long *start,
		unsigned long *end)
{
	char *maps = read_file("/proc/self/maps"), *l;
	unsigned long s, e;
	int ret = -1;

	for (l = maps; l && *l && ret; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (sscanf(l, "%lx-%lx", &s, &e) != 2)
			continue;
		if (name ? memmem(l, strcspn(l, "\n"), name, strlen(name)) != NULL :
			   s <= addr && addr < e) {
			*start = s;
			*end = e;
			ret = 0;
		}
	}
	free(maps);
	return ret;
}

void mlocked_pages_report(void)
{
	char *maps = read_file("/proc/self/maps"), *l;
	int pm = open("/proc/self/pagemap", O_RDONLY);
	int kf = open("/proc/kpageflags", O_RDONLY);

	for (l = maps; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		unsigned long s, e, a, at[4], pfn[4];
		int n = 0, i;

		if (sscanf(l, "%lx-%lx", &s, &e) != 2 || s >= 0xffff800000000000UL)
			continue;
		for (a = s; a < e; a += 4096) {
			uint64_t v, f;

			/* present: PFN in bits 0-54; KPF_MLOCKED is bit 33 */
			if (pread(pm, &v, 8, a / 4096 * 8) != 8 || !(v >> 63) ||
			    pread(kf, &f, 8, (v & ((1ULL << 55) - 1)) * 8) != 8)
				continue;
			if (!(f & (1ULL << 33)))
				continue;
			if (n < 4) {
				at[n] = a;
				pfn[n] = v & ((1ULL << 55) - 1);
			}
			n++;
		}
		if (n)
			fprintf(stderr, "# %d PG_mlocked pages in %.*s\n", n,
				(int)strcspn(l, "\n"), l);
		/* Where and which: the pfn finds the page in a kernel trace. */
		for (i = 0; i < n && i < 4; i++)
			fprintf(stderr, "#   %lx pfn %lx\n", at[i], pfn[i]);
	}
	if (pm >= 0)
		close(pm);
	if (kf >= 0)
		close(kf);
	free(maps);
}

int write_file_str(const char *path, const char *s)
{
	int f = open(path, O_WRONLY), ok;

	if (f < 0)
		return -1;
	ok = write(f, s, strlen(s)) == (ssize_t)strlen(s);
	close(f);
	return ok ? 0 : -1;
}

int write_file_long(const char *path, long v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%ld", v);
	return write_file_str(path, buf);
}

int cgroup2_memory_ready(int *mounted)
{
	char *ctl = read_file(CG_ROOT "/cgroup.controllers");
	int ok;

	*mounted = 0;
	if (!ctl) {
		mkdir(CG_ROOT, 0755);
		if (mount("none", CG_ROOT, "cgroup2", 0, NULL))
			return -1;
		*mounted = 1;
		ctl = read_file(CG_ROOT "/cgroup.controllers");
	}
	ok = ctl && strstr(ctl, "memory");
	free(ctl);
	if (!ok || write_file_str(CG_ROOT "/cgroup.subtree_control", "+memory"))
		return -1;
	return 0;
}

void cgroup2_memory_done(int mounted)
{
	if (mounted) {
		write_file_str(CG_ROOT "/cgroup.subtree_control", "-memory");
		umount(CG_ROOT);
	}
}

/* A counter of /proc/vmstat, or -1. */
long vmstat(const char *name)
{
	char *vm = read_file("/proc/vmstat"), *p = vm;
	size_t len = strlen(name);
	long v = -1;

	while (p && *p) {
		if (!strncmp(p, name, len) && p[len] == ' ') {
			v = strtol(p + len + 1, NULL, 10);
			break;
		}
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	free(vm);
	return v;
}

/* Copy the running program to @path (new, mode 0700): 0, or -1. */
int copy_self(const char *path)
{
	int in = open("/proc/self/exe", O_RDONLY);
	int out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
	char buf[1 << 16];
	ssize_t n = -1;

	while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n) {
			n = -1;
			break;
		}
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return n == 0 ? 0 : -1;
}

void run_from_private_copy(char **argv)
{
	const char *copy = getenv("MLF_PRIVATE_COPY");
	char path[64], self[64];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	self[n > 0 ? n : 0] = '\0';
	/* We are the copy (and never unlink what an inherited name says). */
	if (copy && !strcmp(self, copy)) {
		unlink(copy);
		unsetenv("MLF_PRIVATE_COPY");
		return;
	}
	snprintf(path, sizeof(path), "/tmp/mlf-copy-%d", getpid());
	unlink(path);
	if (!copy_self(path)) {
		setenv("MLF_PRIVATE_COPY", path, 1);
		execv(path, argv);
	}
	/* Without the copy, the tests after this one would not be exact. */
	fprintf(stderr, "run_from_private_copy: %s: %s\n", path, strerror(errno));
	unlink(path);
	exit(2);
}

void become_nobody(int keep_ipc_lock)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2] = { { 0 } };

	if (prctl(PR_SET_KEEPCAPS, keep_ipc_lock) || setgroups(0, NULL) ||
	    setgid(NOBODY) || setuid(NOBODY))
		_exit(95);
	if (keep_ipc_lock) {
		d[0].effective = d[0].permitted = 1U << CAP_IPC_LOCK;
		if (syscall(SYS_capset, &h, d))
			_exit(94);
	}
}

const char *mlf_bindir(void)
{
	static char dir[PATH_MAX];

	if (!dir[0]) {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

		exe[n > 0 ? n : 0] = 0;
		snprintf(dir, sizeof(dir), "%s", dirname(exe));
	}
	return dir;
}
