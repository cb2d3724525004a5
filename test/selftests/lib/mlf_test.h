/* SPDX-License-Identifier: GPL-2.0 */
/* Helpers shared by the in-guest tests: the ioctls as syscall look-alikes,
 * and readers for the state the tests compare. */
#ifndef MLF_TEST_H
#define MLF_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <linux/mlockfast.h>

/* mlock2() and mlockall() flags older libcs lack. */
#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT	0x01
#endif
#ifndef MCL_ONFAULT
#define MCL_ONFAULT	4
#endif

/* The ioctls, returning 0 or -1 with errno exactly like the syscalls. */
int mlf_fd(void);
/* Close it (before an rmmod); mlf_fd() opens it again. */
void mlf_fd_close(void);
int mlf_lock2(const void *addr, size_t len, unsigned int flags);
int mlf_unlock(const void *addr, size_t len);
int mlf_unlock_mode(const void *addr, size_t len, unsigned int mode);
int mlf_lockall(int flags);
int mlf_unlockall(void);
int mlf_drain(void);
int mlf_stats(struct mlockfast_stats *s);
/* MLOCKFAST_IOC_ROUTE with @choice; the reply in @out (may be NULL). */
int mlf_route(unsigned int choice, struct mlockfast_route *out);
/* 1 if this process's mlock-family syscalls are routed, 0 if not, -1 */
int mlf_routed(void);
#define DEFAULT_MODE	"/sys/module/mlockfast/parameters/default_mode"
/* The route parameter ("off", "group", "all"; malloc'ed, or NULL), set it */
char *mlf_route_param(void);
int mlf_set_route_param(const char *v);
/*
 * A process's first lock through a file makes no per-process state and pays
 * its moves before it returns; from its second on, moves are deferred.  Lock
 * and unlock a page of our own twice through @dev_fd (or mlf_fd()), so that
 * a test of deferred moves sees them queued.  0, or -1 with errno.
 */
int mlf_make_state_fd(int dev_fd);
int mlf_make_state(void);

/* A kB field of /proc/meminfo, after folding the per-CPU counters. */
long meminfo_kb(const char *field);
/* A kB field of /proc/self/status (e.g. "VmLck"), or of another process. */
long status_kb(const char *field);
long proc_status_kb(int pid, const char *field);
/* Sum of smaps Locked: over this process's VMAs meeting [lo, hi). */
long locked_kb(const void *lo, const void *hi);
/* A counter of /proc/vmstat, or -1. */
long vmstat(const char *name);
/* Read a whole file into a malloc'd NUL-terminated buffer. */
char *read_file(const char *path);
/* The bracketed word of a THP "enabled" file ("always [never]"), or NULL. */
char *thp_setting(const char *path);
/*
 * The mapping of /proc/self/maps holding @addr, or (@name not NULL) the
 * one whose line names @name ("[vdso]"): its bounds; 0, or -1 if none.
 */
int mlf_mapping(uintptr_t addr, const char *name, unsigned long *start,
		unsigned long *end);
/* Read a sysfs/module parameter as a long; -1 if absent. */
long read_long(const char *path);
/* Whether mlockfast is in /proc/modules. */
int mlf_module_loaded(void);
/* The directory of the running program: the other programs are there. */
const char *mlf_bindir(void);
/* Run a shell command, return its exit status (or -1). */
int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Lines of the kernel log containing @needle since the last mark. */
int dmesg_count(const char *needle);
/* Remember the current end of the kernel log for dmesg_count(). */
void dmesg_mark(void);
/* On stderr: each VMA of this process holding PG_mlocked pages, and how many. */
void mlocked_pages_report(void);

/* Write @s to @path; 0 or -1. */
int write_file_str(const char *path, const char *s);
/* The same for a number, as sysfs parameters take it. */
int write_file_long(const char *path, long v);
/*
 * A copy of the running program at @path, for a test that runs a process
 * from it: pages a kernel leaves mlocked there go with the copy.
 */
int copy_self(const char *path);

/*
 * For a test whose processes lock its own text and data from several CPUs
 * (mlockall): from a constructor, re-exec the program from a copy of itself
 * in /tmp, unlinked as soon as it runs.  The pages the kernel's own races
 * leave mlocked in that copy's page cache are freed when the program exits,
 * instead of staying mlocked in the shared binary's, where a later test's
 * compaction or reclaim would unlock them under its exact Mlocked count.
 */
void run_from_private_copy(char **argv);

#define NOBODY	65534
/* Give up root: uid/gid nobody, no capabilities but CAP_IPC_LOCK if @keep;
 * _exit()s (94, 95) if it cannot. */
void become_nobody(int keep_ipc_lock);

#define CG_ROOT	"/sys/fs/cgroup"
/* cgroup v2 at CG_ROOT with the memory controller enabled for children,
 * mounted if it was not (*mounted); 0 or -1. */
int cgroup2_memory_ready(int *mounted);
/* Undo what cgroup2_memory_ready() did if it mounted. */
void cgroup2_memory_done(int mounted);

#endif
