/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * mlockfast: mlock(2), mlock2(2), munlock(2), mlockall(2) and munlockall(2)
 * through ioctls on /dev/mlockfast.
 *
 * Every argument struct starts with a size field that must equal the
 * struct's size, and ends in reserved fields that must be zero; anything
 * else is -EINVAL.  New fields go where the reserved ones are, so the ABI can
 * grow without new command numbers.  Return values are 0 or -1 with errno,
 * exactly as the matching system call would give for the same request.
 */
#ifndef _UAPI_LINUX_MLOCKFAST_H
#define _UAPI_LINUX_MLOCKFAST_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define MLOCKFAST_DEVICE	"/dev/mlockfast"
#define MLOCKFAST_ABI_VERSION	1

/* Not taken in Documentation/userspace-api/ioctl/ioctl-number.rst. */
#define MLOCKFAST_IOC_MAGIC	0xBC

/*
 * Mode of the unevictable-LRU moves, bits 8..10 of the flags of LOCK, LOCKV
 * and LOCKALL (UNLOCK and UNLOCKV take 0 or a mode; 0 picks the module's
 * default_mode parameter):
 *   EAGER     moves applied before the ioctl returns: the syscall's end state;
 *   DEFERRED  the moves of private anonymous pages recorded per process and
 *             applied defer_ms later; an unlock that comes first cancels them;
 *   RECLAIM   no move at all: reclaim culls the pages when it meets them;
 *   LEGACY    for measurement only: a drain queued and waited for on every
 *             online CPU, then the stock system call (pre-4.15 mlock).
 * Every mode leaves PG_mlocked, Mlocked, VmLck and the VMAs exact at return.
 */
#define MLOCKFAST_MODE_SHIFT	8
#define MLOCKFAST_MODE_MASK	(7U << MLOCKFAST_MODE_SHIFT)
#define MLOCKFAST_MODE_DEFAULT	(0U << MLOCKFAST_MODE_SHIFT)
#define MLOCKFAST_MODE_EAGER	(1U << MLOCKFAST_MODE_SHIFT)
#define MLOCKFAST_MODE_DEFERRED	(2U << MLOCKFAST_MODE_SHIFT)
#define MLOCKFAST_MODE_RECLAIM	(3U << MLOCKFAST_MODE_SHIFT)
#define MLOCKFAST_MODE_LEGACY	(4U << MLOCKFAST_MODE_SHIFT)

/* Feature bits reported by MLOCKFAST_IOC_INFO. */
#define MLOCKFAST_FEAT_LOCK	(1ULL << 0)	/* LOCK and UNLOCK */
#define MLOCKFAST_FEAT_LOCKALL	(1ULL << 1)	/* LOCKALL and UNLOCKALL */
#define MLOCKFAST_FEAT_VEC	(1ULL << 2)	/* LOCKV and UNLOCKV */
#define MLOCKFAST_FEAT_DRAIN	(1ULL << 3)
#define MLOCKFAST_FEAT_STATS	(1ULL << 4)
#define MLOCKFAST_FEAT_EAGER	(1ULL << 5)
#define MLOCKFAST_FEAT_DEFERRED	(1ULL << 6)
#define MLOCKFAST_FEAT_RECLAIM	(1ULL << 7)
#define MLOCKFAST_FEAT_LEGACY	(1ULL << 8)
#define MLOCKFAST_FEAT_ROUTE	(1ULL << 9)	/* ROUTE, the route parameter */

struct mlockfast_info {
	__u32 size;			/* out: sizeof(struct mlockfast_info) */
	__u32 abi_version;		/* MLOCKFAST_ABI_VERSION */
	__u64 features;			/* MLOCKFAST_FEAT_* */
	char module_version[32];	/* NUL-terminated */
	char kernel_release[72];	/* UTS_RELEASE built for, NUL-terminated */
	__u32 default_mode;		/* MLOCKFAST_MODE_* in effect for 0 */
	__u32 batch_size;		/* 0: the module keeps no batch of its own */
	__u64 reserved[6];
};

/* LOCK: as mlock2(addr, len, flags); UNLOCK: as munlock(addr, len). */
struct mlockfast_range {
	__u32 size;			/* sizeof(struct mlockfast_range) */
	__u32 flags;			/* MLOCK_ONFAULT | MLOCKFAST_MODE_* */
	__u64 addr;
	__u64 len;
	__u64 reserved[2];
};

/* An element of a LOCKV/UNLOCKV vector. */
struct mlockfast_iovec {
	__u64 addr;
	__u64 len;
};

/*
 * LOCKV/UNLOCKV: the ranges in order, under one mmap_lock hold where the
 * syscall would not drop it, stopping at the first error.  On return, done
 * is the number of ranges that completed (also on error).
 */
struct mlockfast_vec {
	__u32 size;			/* sizeof(struct mlockfast_vec) */
	__u32 flags;			/* as for LOCK; 0 or a mode for UNLOCKV */
	__u64 iov;			/* user pointer to struct mlockfast_iovec[] */
	__u32 count;			/* at most MLOCKFAST_VEC_MAX */
	__u32 done;			/* out */
	__u64 reserved[2];
};

#define MLOCKFAST_VEC_MAX	1024

/* LOCKALL: as mlockall(flags) with MCL_* and MLOCKFAST_MODE_* bits. */
struct mlockfast_all {
	__u32 size;			/* sizeof(struct mlockfast_all) */
	__u32 flags;
	__u64 reserved[2];
};

/* Per-mode slots of the per-mode counters. */
enum {
	MLOCKFAST_STAT_MODE_EAGER,
	MLOCKFAST_STAT_MODE_DEFERRED,
	MLOCKFAST_STAT_MODE_RECLAIM,
	MLOCKFAST_STAT_MODE_LEGACY,
	MLOCKFAST_STAT_NR_MODES,
};

/* Counters since load, summed over CPUs; also /sys/class/misc/mlockfast/stats. */
struct mlockfast_stats {
	__u32 size;			/* sizeof(struct mlockfast_stats) */
	__u32 reserved0;
	__u64 calls_lock;
	__u64 calls_unlock;
	__u64 calls_lockall;
	__u64 calls_unlockall;
	__u64 calls_lockv;
	__u64 calls_unlockv;
	__u64 calls_drain;
	__u64 errors;			/* calls that returned an error */
	__u64 pages_locked;		/* pages the lock walks acted on */
	__u64 pages_unlocked;		/* pages the unlock walks acted on */
	__u64 moves_queued;		/* pages whose move a lock owed or made */
	__u64 moves_applied;		/* folios moved to the unevictable LRU */
	__u64 moves_cancelled;		/* owed moves an unlock cancelled */
	__u64 batches_applied;		/* pays of a process's owed moves */
	__u64 populate_calls;		/* calls into the kernel's populate */
	__u64 legacy_drains;		/* all-CPU drains done by legacy mode */
	__u64 mode_calls[MLOCKFAST_STAT_NR_MODES];
	__u64 mode_pages[MLOCKFAST_STAT_NR_MODES];
	/* Gauges, not counters: what the module holds at the time of reading. */
	__u64 mms_tracked;		/* processes with per-mm state */
	__u64 folios_held;		/* 0: no folio is held (was: per queued move) */
	__u64 calls_routed;		/* system calls the route hook sent here */
	__u64 reserved[5];
};

/*
 * ROUTE: the caller's choice for its own plain mlock(2), mlock2(2),
 * munlock(2), mlockall(2) and munlockall(2) calls, kept by the process
 * (every thread) and inherited by its children across fork and exec.  A
 * routed call runs the module's path in its default mode, after the
 * kernel's syscall entry (seccomp, audit and ptrace see the syscall as
 * ever), with the syscall's results.  Who is routed:
 *   route=off     nobody, whatever was chosen (the hook is not registered);
 *   route=group   a process that chose ON, and one that chose nothing
 *                 whose credentials hold the group of /dev/mlockfast;
 *   route=all     every process but one that chose NEVER.
 * The choice wins over the group; route=off wins over the choice.  The
 * group is checked at each call against the caller's credentials then; a
 * choice stays across setuid(), setgid() and exec, as it grants nothing:
 * a routed call checks RLIMIT_MEMLOCK and CAP_IPC_LOCK as the syscall does.
 */
#define MLOCKFAST_ROUTE_QUERY	0	/* choice: change nothing, report */
#define MLOCKFAST_ROUTE_DEFAULT	1	/* as the route parameter says */
#define MLOCKFAST_ROUTE_ON	2	/* route me (unless route=off) */
#define MLOCKFAST_ROUTE_NEVER	3	/* never route me */

#define MLOCKFAST_ROUTING_OFF	0	/* the route parameter */
#define MLOCKFAST_ROUTING_GROUP	1
#define MLOCKFAST_ROUTING_ALL	2

struct mlockfast_route {
	__u32 size;			/* sizeof(struct mlockfast_route) */
	__u32 choice;			/* in: MLOCKFAST_ROUTE_*; out: the choice now */
	__u32 routing;			/* out: MLOCKFAST_ROUTING_* */
	__u32 routed;			/* out: 1 if the caller's calls are routed now */
	__u64 reserved[2];
};

#define MLOCKFAST_IOC_INFO	_IOR(MLOCKFAST_IOC_MAGIC, 0x01, struct mlockfast_info)
#define MLOCKFAST_IOC_LOCK	_IOW(MLOCKFAST_IOC_MAGIC, 0x02, struct mlockfast_range)
#define MLOCKFAST_IOC_UNLOCK	_IOW(MLOCKFAST_IOC_MAGIC, 0x03, struct mlockfast_range)
#define MLOCKFAST_IOC_LOCKALL	_IOW(MLOCKFAST_IOC_MAGIC, 0x04, struct mlockfast_all)
#define MLOCKFAST_IOC_UNLOCKALL	_IO(MLOCKFAST_IOC_MAGIC, 0x05)
#define MLOCKFAST_IOC_LOCKV	_IOWR(MLOCKFAST_IOC_MAGIC, 0x06, struct mlockfast_vec)
#define MLOCKFAST_IOC_UNLOCKV	_IOWR(MLOCKFAST_IOC_MAGIC, 0x07, struct mlockfast_vec)
#define MLOCKFAST_IOC_DRAIN	_IO(MLOCKFAST_IOC_MAGIC, 0x08)
#define MLOCKFAST_IOC_STATS	_IOR(MLOCKFAST_IOC_MAGIC, 0x09, struct mlockfast_stats)
#define MLOCKFAST_IOC_ROUTE	_IOWR(MLOCKFAST_IOC_MAGIC, 0x0a, struct mlockfast_route)

#endif /* _UAPI_LINUX_MLOCKFAST_H */
