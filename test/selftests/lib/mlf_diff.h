/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differential testing: a scenario runs once per path (the syscalls, then
 * the ioctls in each mode) in a fresh child, on mappings at the same fixed
 * addresses, and writes down what a process can observe: return values and
 * errnos, /proc/self/maps, smaps (VmFlags, Rss, Locked), VmLck, residency
 * (mincore and pagemap) and the change in Mlocked.  The texts must be equal.
 */
#ifndef MLF_DIFF_H
#define MLF_DIFF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define DIFF_BASE	((char *)0x200000000000UL)	/* 2 MiB aligned */
#define DIFF_SPAN	(16UL << 20)
#define PAGE		4096UL

struct path_ops {
	const char *name;
	unsigned int mode;	/* MLOCKFAST_MODE_* for the ioctl paths */
	/*
	 * The routed paths: the plain syscalls from a process that chose
	 * MLOCKFAST_ROUTE_ON, with the module's default_mode set to this
	 * (they run only while the route parameter is on).  The syscall path
	 * chooses MLOCKFAST_ROUTE_NEVER: the kernel's own code, always.
	 */
	const char *routed_mode;
	int (*lock)(const void *addr, size_t len);
	int (*lock2)(const void *addr, size_t len, unsigned int flags);
	int (*unlock)(const void *addr, size_t len);
	int (*lockall)(int flags);
	int (*unlockall)(void);
};

/*
 * The paths: [0] the syscalls, then one per ioctl mode, then the routed
 * syscalls in each mode.
 */
extern const struct path_ops diff_paths[];
extern const int diff_npaths;

struct diff_log;
typedef void (*scenario_fn)(const struct path_ops *p, struct diff_log *log);

/* Record an operation's result (call right after it: reads errno). */
void diff_ret(struct diff_log *log, const char *what, int ret);
/* Record the observable state of [DIFF_BASE, DIFF_BASE + DIFF_SPAN). */
void diff_state(struct diff_log *log, const char *label);
/* Record a free-form line. */
void diff_note(struct diff_log *log, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* mmap at DIFF_BASE + off (MAP_FIXED_NOREPLACE), or abort the scenario. */
char *diff_map(size_t off, size_t len, int prot, int flags, int fd);
/* Touch every page of [p, p+len) for writing (or reading). */
void diff_touch(char *p, size_t len, int write);
/* Drop CAP_IPC_LOCK so RLIMIT_MEMLOCK applies; set RLIMIT_MEMLOCK. */
void diff_limit(unsigned long bytes);

/*
 * Run @fn once per path in a child, compare each ioctl path's text with the
 * syscall's.  Returns 0 when all match, else prints the first difference.
 * Also checks that Mlocked and Unevictable come back to where they were.
 */
int diff_run(const char *name, scenario_fn fn);

/*
 * Before a child takes path @p, in the parent: a routed path sets the
 * module's default_mode (0), or is skipped while routing is off (1); -1
 * with errno.  In the child: choose its routing (the syscall path never,
 * a routed one on); -1 if a routed path is not routed.
 */
int diff_path_prepare(const struct path_ops *p);
int diff_path_enter(const struct path_ops *p);

/*
 * Turn routing on (route=all) until this program exits, so that
 * diff_run() checks the routed paths too.  0, or -1 with errno.
 */
int diff_route_all(void);

/*
 * Run @fn on the syscall path in this process and write its text to stdout
 * (libmlockfast's tests compare it with and without the library).
 */
void diff_print(scenario_fn fn);

/* Fold per-CPU LRU and mlock batches on every CPU (lru_add_drain_all). */
void drain_everything(void);

#endif
