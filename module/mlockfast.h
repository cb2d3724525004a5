/* SPDX-License-Identifier: GPL-2.0 */
/* Declarations shared by the device, the engine and the per-process state. */
#ifndef MLOCKFAST_H
#define MLOCKFAST_H

#include <linux/percpu.h>
#include <linux/mm_types.h>
#include <linux/pgtable.h>
#include <linux/refcount.h>
#include <linux/workqueue.h>
#include <linux/mlockfast.h>
#include "compat.h"
#include "vma.h"

#define MLOCKFAST_VERSION "0.1.0"

enum mlf_mode {
	MLF_EAGER = 1,
	MLF_DEFERRED,
	MLF_RECLAIM,
	MLF_LEGACY,
};

/* Counters, summed over CPUs when read: see struct mlockfast_stats. */
struct mlf_stats {
	u64 calls_lock, calls_unlock, calls_lockall, calls_unlockall;
	u64 calls_lockv, calls_unlockv, calls_drain, errors;
	u64 pages_locked, pages_unlocked;
	u64 moves_queued, moves_applied, moves_cancelled, batches_applied;
	u64 populate_calls, legacy_drains, calls_routed;
	u64 mode_calls[MLOCKFAST_STAT_NR_MODES];
	u64 mode_pages[MLOCKFAST_STAT_NR_MODES];
};

DECLARE_PER_CPU(struct mlf_stats, mlf_stats);

#define mlf_count(field, n)	this_cpu_add(mlf_stats.field, (n))

void mlf_stats_read(struct mlockfast_stats *out);

/* Module parameters. */
extern unsigned int mlf_default_mode;
extern unsigned int mlf_defer_ms;

/* engine.c: the system calls' semantics, current->mm only. */
struct mlf_mm;
struct mlf_file;

/* @file: the file the call came through, whose cache it uses (mm.c). */
int mlf_lock(struct mlf_file *file, enum mlf_mode mode, unsigned long start,
	     unsigned long len, unsigned int flags);
int mlf_unlock(struct mlf_file *file, enum mlf_mode mode, unsigned long start,
	       unsigned long len);
int mlf_lockall(struct mlf_file *file, enum mlf_mode mode, unsigned int flags);
int mlf_unlockall(struct mlf_file *file, enum mlf_mode mode);
int mlf_lockv(struct mlf_file *file, enum mlf_mode mode,
	      const struct mlockfast_iovec __user *iov, unsigned int count,
	      unsigned int flags, bool lock, unsigned int *done);

/* mm.c: per-mm state, whose runs hold the moves owed, paid by a fork. */
struct mlf_file {
	struct mlf_mm *mm;	/* the first mm with state to use this file */
	/*
	 * The last mm to lock through this file while it had no state, by
	 * mlf_mm_id(): its next lock makes the state (mlf_mm_lookup()).
	 */
	u64 seen;
};

/* Runs of private anon pages whose moves a deferred lock owes. */
struct mlf_run {
	unsigned long start, end;
};

/*
 * The pmd table a call's walk last went through, so that its next pmd in
 * the same 1G skips the descent from the pgd.  A call's own; and the mm's,
 * for the next call, only where the mmap_lock's write holds are counted
 * (MLF_HAVE_MM_LOCK_SEQ): a pmd table is freed only under a write hold
 * (munmap, mremap, exit), which nothing of ours hears.
 */
struct mlf_pt_cache {
	unsigned long base;	/* the PUD_SIZE-aligned range it maps */
	pmd_t *pmds;		/* its first entry, or NULL: none */
};

#define MLF_MM_RUNS	16

/*
 * Defined here, not in mm.c, so that the engine's every-call steps on it
 * (whose is this mm, its caches, a run added or cut) are inline; mm.c has
 * the rest.
 */
struct mlf_mm {
	struct mm_struct *mm;	/* mmgrab()bed until @m is freed */
	/* the hash's, each caching file's, each forked child's not yet run */
	refcount_t ref;
	unsigned long state;
	struct hlist_node node;	/* in mlf_mms until retired */
	struct list_head unload;	/* on the unload's list */
	raw_spinlock_t lock;	/* orders queueing the work against DEAD */
	struct delayed_work work;	/* pays the runs, or all after a fork */
	struct work_struct retire;	/* unhashes it after exit */
	struct rcu_head rcu;
	/*
	 * Runs of locked private anon pages whose moves are owed.  The
	 * mmap_lock guards them: the ioctls change them holding it for
	 * writing, the work (never run twice at once) holding it for reading.
	 * The caches below are the ioctls' alone (held for writing).
	 */
	unsigned int nr_runs;
	struct mlf_run runs[MLF_MM_RUNS];
	struct mlf_vma_cache vc;	/* (compat.h) */
#ifdef MLF_HAVE_MM_LOCK_SEQ
	/* The last call's pmd table, its write hold and when (engine.c). */
	struct mlf_pt_cache pt;
	unsigned int pt_seq;
	unsigned long pt_stamp;
#endif
	/* The zone of the pages the mm's last walk counted, or -1: none. */
	struct zone *zone;
	int zone_id;
	/*
	 * The mm's locks outlive defer_ms: its work paid runs since an unlock
	 * last came within defer_ms of a lock (locked_at, jiffies).  Its
	 * deferred locks then run eager: a move paid later costs a second
	 * walk, which only an unlock in time saves.
	 */
	bool held_long;
	unsigned long locked_at;
	/*
	 * Moves may be owed that no run records: a reclaim-mode lock left
	 * them, or runs were paid whose pages an mremap() may have moved.
	 * A fork pays them, walking every locked VMA, and clears it (mm.c).
	 */
	bool unmoved;
};

struct mlf_mm *mlf_mm_lookup(struct mlf_file *file, bool create);
void mlf_mm_uncache(struct mlf_mm *m);
unsigned long mlf_mm_tracked(void);
int mlf_mm_init(void);
void mlf_mm_exit(void);
void mlf_mm_merge_run(struct mlf_mm *m, unsigned long start, unsigned long end);
void mlf_mm_cut(struct mlf_mm *m, unsigned long start, unsigned long end);
void mlf_mm_pay_all(void);
/*
 * engine.c: the moves a run owes, for what is still locked there; also
 * those a reclaim-mode lock or an mremap() left, for a fork.
 */
void mlf_pay_run(struct mm_struct *mm, unsigned long start, unsigned long end);
/* engine.c: every CPU's kernel LRU and mlock batches, for DRAIN. */
int mlf_drain_kernel_batches(void);

/*
 * current->mm's state, for the runs a lock leaves owing and its caches, or
 * NULL: the caller then makes its moves before it returns.  NULL when it
 * cannot be had (no memory), for an unlock when the mm has none (it then
 * owes nothing), and for an mm's first lock (mlf_mm_lookup()).  Call with
 * mmap_lock held for writing.
 */
static inline struct mlf_mm *mlf_mm_current(struct mlf_file *file,
					    bool create)
{
	struct mlf_mm *m = READ_ONCE(file->mm);

	if (likely(m && m->mm == current->mm))
		return m;
	return mlf_mm_lookup(file, create);
}

/*
 * A deferred lock left [start, end) of private anon pages unmoved; mmap_lock
 * held for writing.  Inline: the first run while the work is already queued
 * (a lock after the unlock that cut the last one).
 */
static inline void mlf_mm_add_run(struct mlf_mm *m, unsigned long start,
				  unsigned long end)
{
	mlf_count(moves_queued, (end - start) >> PAGE_SHIFT);
	if (likely(!m->nr_runs && delayed_work_pending(&m->work))) {
		m->runs[0] = (struct mlf_run){ start, end };
		m->nr_runs = 1;
		return;
	}
	mlf_mm_merge_run(m, start, end);
}

/*
 * [start, end) is unlocked; mmap_lock held for writing.  What the runs owed
 * there is cancelled.  Inline: no runs, or one that is all of the range
 * (the unlock of what a lock just left).
 */
static inline void mlf_mm_trim(struct mlf_mm *m, unsigned long start,
			       unsigned long end)
{
	if (!m->nr_runs)
		return;
	if (m->nr_runs == 1 && m->runs[0].start == start &&
	    m->runs[0].end == end) {
		m->nr_runs = 0;
		mlf_count(moves_cancelled, (end - start) >> PAGE_SHIFT);
		return;
	}
	mlf_mm_cut(m, start, end);
}

static inline void mlf_pt_remember(struct mlf_pt_cache *pt, unsigned long addr,
				   pmd_t *pmd)
{
	pt->base = addr & PUD_MASK;
	pt->pmds = pmd - pmd_index(addr);
}

#endif /* MLOCKFAST_H */
