// SPDX-License-Identifier: GPL-2.0
/*
 * Per-process state of every mm that has used the device, and the runs of
 * private anonymous pages whose moves a lock left owing (see
 * mlf_lock_one()): a run costs nothing per page until its work, after
 * defer_ms, moves what is still locked (mlf_pay_run()).
 *
 * A move may be left owing only while no lock but the owner's can reach the
 * page: the page is mapped once.  A notifier over the owed ranges (the
 * watch) hears when that ends, as fork() write-protects the pages it is
 * about to share, and pays the moves then, before the child can lock or
 * unlock them.  An unmap or replacement there needs nothing: the pay walk
 * finds other pages, or none, where a run was.  Once nothing is owed, the
 * work removes the watch, and the mm's VM calls reach no code of ours.
 *
 * Lifetime: a second notifier, over a page no mapping can have, hears the
 * exit.  It lives as long as its mm (one reference, dropped from our
 * workqueue after the mm exits, or at unload) and each file that caches the
 * state holds one more, so that a cached pointer is never stale.  At exit
 * the process waits for no grace period and no work of ours.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/hashtable.h>
#include <linux/mmu_notifier.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include "compat.h"
#include "raw_mm.h"
#include "mlockfast.h"

enum {
	MLF_MM_DEAD,		/* the mm has exited: its work may not be queued */
	MLF_MM_GONE,		/* its notifier is removed, or being removed */
};

/*
 * Where the lifetime notifier sits: the top page of the address space,
 * which no process's mapping can reach whatever the paging mode, so only
 * the events over all of an mm reach it: the exit's, and clear_refs'.
 */
#define MLF_MN_START	(-PAGE_SIZE)

/* Every mm with a notifier of ours, keyed by the mm; looked up under RCU. */
static DEFINE_HASHTABLE(mlf_mms, 8);
static DEFINE_SPINLOCK(mlf_mms_lock);	/* guards changes to mlf_mms */
static struct workqueue_struct *mlf_wq;
static atomic_long_t mlf_mm_count;	/* mlf_mm allocated, not yet freed */

/* Pay every run; mmap_lock held. */
static void mlf_mm_pay(struct mlf_mm *m)
{
	unsigned int i, n = m->nr_runs;

	m->nr_runs = 0;
	for (i = 0; i < n; i++)
		mlf_pay_run(m->mm, m->runs[i].start, m->runs[i].end);
}

static const struct mmu_interval_notifier_ops mlf_watch_ops;

/*
 * Remove the watch; mmap_lock held.  Sleeps while an invalidation of the mm
 * is under way: our callbacks never wait for the mmap_lock, nor for us.
 */
static void mlf_mm_unwatch(struct mlf_mm *m)
{
	m->watch_start = 0;
	m->watch_end = 0;
	if (m->watching) {
		m->watching = false;
		mmu_interval_notifier_remove(&m->watch);
	}
}

/*
 * Watch [start, end) instead; mmap_lock held for writing, so that no fork
 * runs meanwhile.  False if the watch is not live when this returns (the
 * kernel inserts one only after the invalidations under way end, and a
 * fork could start before): the runs are then paid, and the caller must
 * owe nothing.
 */
static bool mlf_mm_watch_range(struct mlf_mm *m, unsigned long start,
			       unsigned long end)
{
	mlf_mm_unwatch(m);
	if (!mmu_interval_notifier_insert_locked(&m->watch, m->mm, start,
						 end - start, &mlf_watch_ops)) {
		m->watching = true;
		if (!RB_EMPTY_NODE(&m->watch.interval_tree.rb)) {
			m->watch_start = start;
			m->watch_end = end;
			return true;
		}
	}
	mlf_mm_pay(m);
	return false;
}

/*
 * A reclaim-mode lock: its moves are owed wherever it locks, and a fork pays
 * them VMA by VMA: watch all of the mm, for good.  False: it must not owe.
 */
bool mlf_mm_watch_all(struct mlf_mm *m)
{
	if (m->unmoved)
		return true;
	if (!mlf_mm_watch_range(m, 0, ULONG_MAX))
		return false;
	WRITE_ONCE(m->unmoved, true);
	return true;
}

/*
 * The release does not wait for this work: the watch's removal here may
 * wait for the exit's invalidations to end.  A pay under way then walks
 * beside the exit's unmap, both holding the mmap_lock for reading, as a
 * fault would; the retire waits for it.  No mm_users reference is taken:
 * the last mmput() would fall to us, and the exiting process's memory,
 * Mlocked included, would outlive it for a while.
 */
static void mlf_mm_work(struct work_struct *work)
{
	struct mlf_mm *m = container_of(to_delayed_work(work), struct mlf_mm,
					work);
	struct mm_struct *mm = m->mm;

	/* An mm on its way out unmaps everything: nothing to pay. */
	if (!atomic_read(&mm->mm_users))
		return;
	mmap_read_lock(mm);
	if (m->nr_runs)
		WRITE_ONCE(m->held_long, true);
	mlf_mm_pay(m);
	if (!m->unmoved)
		mlf_mm_unwatch(m);
	mmap_read_unlock(mm);
}

static void mlf_mm_queue(struct mlf_mm *m, unsigned long delay)
{
	spin_lock(&m->lock);
	if (!test_bit(MLF_MM_DEAD, &m->state))
		mod_delayed_work(mlf_wq, &m->work, delay);
	spin_unlock(&m->lock);
}

/*
 * mlf_mm_add_run() beyond its common case: the watch grows to the runs'
 * span, or if it cannot, all are paid now; runs that touch merge; with no
 * room left, all are paid at once.
 */
void mlf_mm_merge_run(struct mlf_mm *m, unsigned long start, unsigned long end)
{
	unsigned long lo = start, hi = end;
	struct mlf_run *r;
	unsigned int i;

	if (start < m->watch_start || end > m->watch_end) {
		for (i = 0; i < m->nr_runs; i++) {
			lo = min(lo, m->runs[i].start);
			hi = max(hi, m->runs[i].end);
		}
		if (!mlf_mm_watch_range(m, lo, hi)) {
			mlf_pay_run(m->mm, start, end);
			return;
		}
	}
	for (i = 0; i < m->nr_runs; i++) {
		r = &m->runs[i];
		if (start <= r->end && end >= r->start) {
			r->start = min(r->start, start);
			r->end = max(r->end, end);
			return;
		}
	}
	if (m->nr_runs == MLF_MM_RUNS)
		mlf_mm_pay(m);
	m->runs[m->nr_runs++] = (struct mlf_run){ start, end };
	if (!delayed_work_pending(&m->work))
		mlf_mm_queue(m, msecs_to_jiffies(READ_ONCE(mlf_defer_ms)));
}

/*
 * mlf_mm_trim() beyond its common case.  A run cut in two with no room for
 * the second half is paid instead, before the unlock walks it.
 */
void mlf_mm_cut(struct mlf_mm *m, unsigned long start, unsigned long end)
{
	unsigned long cut = 0;
	unsigned int i;

	for (i = 0; i < m->nr_runs; ) {
		struct mlf_run *r = &m->runs[i];

		if (start >= r->end || end <= r->start) {
			i++;
			continue;
		}
		if (start > r->start && end < r->end &&
		    m->nr_runs == MLF_MM_RUNS) {
			mlf_pay_run(m->mm, r->start, r->end);
			*r = m->runs[--m->nr_runs];
			continue;
		}
		cut += min(end, r->end) - max(start, r->start);
		if (start > r->start && end < r->end) {
			m->runs[m->nr_runs++] = (struct mlf_run){ end, r->end };
			r->end = start;
		} else if (start > r->start) {
			r->end = start;
		} else if (end < r->end) {
			r->start = end;
		} else {
			*r = m->runs[--m->nr_runs];
			continue;
		}
		i++;
	}
	mlf_count(moves_cancelled, cut >> PAGE_SHIFT);
}

/* DRAIN: every mm's runs paid now.  Sleeps; hold no mmap_lock. */
void mlf_mm_pay_all(void)
{
	struct mlf_mm *m;
	int bkt;

	spin_lock(&mlf_mms_lock);
	hash_for_each(mlf_mms, bkt, m, node)
		if (READ_ONCE(m->nr_runs))
			mlf_mm_queue(m, 0);
	spin_unlock(&mlf_mms_lock);
	flush_workqueue(mlf_wq);
}

/*
 * fork() is about to share the mm's anonymous pages in [start, end) with
 * the child (copy_page_range() write-protects them first).  The child's
 * mlock(2) of one would count its own lock, and a munlock(2) of it would
 * then take the page for unlocked while ours still holds: every move owed
 * there is paid now, the runs' (all of them: a fork copies every VMA) and
 * those a reclaim-mode lock left.  The forking task holds the mmap_lock
 * for writing, as a pay needs it held.
 */
static bool mlf_event_is_fork(struct mlf_mm *m,
			      const struct mmu_notifier_range *r)
{
	return r->event == MMU_NOTIFY_PROTECTION_PAGE &&
	       (m->nr_runs || READ_ONCE(m->unmoved)) &&
	       mmu_notifier_range_blockable(r) && current->mm == m->mm &&
	       mlf_mmap_write_held_by_current(m->mm);
}

static void mlf_mm_pay_for_fork(struct mlf_mm *m, unsigned long start,
				unsigned long end)
{
	mlf_mm_pay(m);
	if (READ_ONCE(m->unmoved))
		mlf_pay_run(m->mm, start, end);
}

static void mlf_mm_put(struct mlf_mm *m)
{
	if (refcount_dec_and_test(&m->ref)) {
		mmdrop(m->mm);
		kfree_rcu(m, rcu);	/* mlf_mm_find() may be looking at it */
		atomic_long_dec(&mlf_mm_count);
	}
}

/* No work may be queued for @m from now on. */
static void mlf_mm_kill(struct mlf_mm *m)
{
	spin_lock(&m->lock);
	set_bit(MLF_MM_DEAD, &m->state);
	spin_unlock(&m->lock);
}

/*
 * Remove the notifiers, once, and drop the reference that they stood for.
 * Sleeps while a callback of them or the work runs: never call from one.
 * The mm has exited, or no file is open: no call changes the watch.
 */
static void mlf_mm_retire(struct mlf_mm *m)
{
	if (test_and_set_bit(MLF_MM_GONE, &m->state))
		return;
	cancel_delayed_work_sync(&m->work);
	if (m->watching)
		mmu_interval_notifier_remove(&m->watch);
	mmu_interval_notifier_remove(&m->mn);
	spin_lock(&mlf_mms_lock);
	hash_del_rcu(&m->node);
	spin_unlock(&mlf_mms_lock);
	mlf_mm_put(m);
}

static void mlf_mm_retire_work(struct work_struct *work)
{
	struct mlf_mm *m = container_of(work, struct mlf_mm, retire);

	mlf_mm_retire(m);
	mlf_mm_put(m);
}

/*
 * The mm is exiting: its mappings are going away, and so are our moves.  The
 * notifiers are removed later, from our workqueue, since a callback cannot
 * remove itself; the exit waits for nothing of ours.
 */
static bool mlf_mm_invalidate(struct mmu_interval_notifier *mn,
			      const struct mmu_notifier_range *r,
			      unsigned long cur_seq)
{
	struct mlf_mm *m = container_of(mn, struct mlf_mm, mn);

	/* Only the exit (mn_itree_release()) sends RELEASE. */
	if (r->event == MMU_NOTIFY_RELEASE) {
		mlf_mm_kill(m);
		refcount_inc(&m->ref);
		queue_work(mlf_wq, &m->retire);
	}
	return true;
}

static const struct mmu_interval_notifier_ops mlf_mm_ops = {
	.invalidate = mlf_mm_invalidate,
};

static bool mlf_watch_invalidate(struct mmu_interval_notifier *mn,
				 const struct mmu_notifier_range *r,
				 unsigned long cur_seq)
{
	struct mlf_mm *m = container_of(mn, struct mlf_mm, watch);

	if (mlf_event_is_fork(m, r))
		mlf_mm_pay_for_fork(m, r->start, r->end);
	return true;
}

static const struct mmu_interval_notifier_ops mlf_watch_ops = {
	.invalidate = mlf_watch_invalidate,
};

/*
 * State for @mm, with its lifetime notifier; mmap_lock held for writing.  An
 * interval notifier rather than a plain one: at exit the kernel
 * waits for an SRCU grace period (mn_hlist_release()) if the mm has any plain
 * notifier, which every process that used us would pay, and none for
 * interval notifiers.  @m holds the mm_struct (not its pages) until freed, so
 * that no other mm can take its address while a file's cache points at @m.
 */
static struct mlf_mm *mlf_mm_create(struct mm_struct *mm)
{
	struct mlf_mm *m = kzalloc(sizeof(*m), GFP_KERNEL);

	if (!m)
		return NULL;
	refcount_set(&m->ref, 1);	/* the notifier's, until it goes */
	mmgrab(mm);
	m->mm = mm;
	m->zone_id = -1;
	spin_lock_init(&m->lock);
	INIT_DELAYED_WORK(&m->work, mlf_mm_work);
	INIT_WORK(&m->retire, mlf_mm_retire_work);
	atomic_long_inc(&mlf_mm_count);
	if (mmu_interval_notifier_insert_locked(&m->mn, mm, MLF_MN_START,
						PAGE_SIZE, &mlf_mm_ops)) {
		set_bit(MLF_MM_GONE, &m->state);
		mlf_mm_put(m);
		return NULL;
	}
	spin_lock(&mlf_mms_lock);
	hash_add_rcu(mlf_mms, &m->node, (unsigned long)mm);
	spin_unlock(&mlf_mms_lock);
	return m;
}

/*
 * @mm's state, or NULL; @mm is current's, with its mmap_lock held for
 * writing, so that no other task adds it meanwhile, and the mm cannot exit
 * (we hold mm_users) nor its state go.  Under RCU, not the lock: a forked
 * child calling through its parent's descriptor looks up on every call.
 */
static struct mlf_mm *mlf_mm_find(struct mm_struct *mm)
{
	struct mlf_mm *m;

	rcu_read_lock();
	hash_for_each_possible_rcu(mlf_mms, m, node, (unsigned long)mm)
		if (m->mm == mm && !test_bit(MLF_MM_DEAD, &m->state))
			break;
	rcu_read_unlock();
	return m;
}

/*
 * mlf_mm_current() when the file's cache does not hold current->mm's.  An
 * mm's first lock makes no state and runs eager: the mm's first notifier
 * costs more than a small lock (mm_take_all_locks() takes every anon_vma and
 * file mapping lock of the mm), and a process that locks once, as a secure
 * memory pool does, has no use for it.  Its next lock through the same file
 * makes it.
 */
struct mlf_mm *mlf_mm_lookup(struct mlf_file *file, bool create)
{
	struct mm_struct *mm = current->mm;
	struct mlf_mm *m = mlf_mm_find(mm);

	if (!m) {
		if (!create)
			return NULL;
		if (READ_ONCE(file->seen) != mlf_mm_id(mm)) {
			WRITE_ONCE(file->seen, mlf_mm_id(mm));
			return NULL;
		}
		m = mlf_mm_create(mm);
		if (!m)
			return NULL;
	}
	if (READ_ONCE(file->mm))
		return m;
	/* The file's first mm with state: the cache holds a reference. */
	refcount_inc(&m->ref);
	if (cmpxchg(&file->mm, NULL, m))
		mlf_mm_put(m);
	return m;
}

/* The file is closed: drop the reference its cache holds. */
void mlf_mm_uncache(struct mlf_mm *m)
{
	if (m)
		mlf_mm_put(m);
}

/* A gauge for STATS: a count that never comes back down is a leak. */
unsigned long mlf_mm_tracked(void)
{
	return atomic_long_read(&mlf_mm_count);
}

int mlf_mm_init(void)
{
	mlf_wq = alloc_workqueue("mlockfast", WQ_UNBOUND, 0);
	return mlf_wq ? 0 : -ENOMEM;
}

/*
 * Unload, with no file open: the runs are paid, then every notifier goes,
 * and nothing of ours may run after this.
 */
void mlf_mm_exit(void)
{
	struct mlf_mm *m, *next;
	LIST_HEAD(all);
	int bkt;

	mlf_mm_pay_all();
	spin_lock(&mlf_mms_lock);
	hash_for_each(mlf_mms, bkt, m, node) {
		refcount_inc(&m->ref);
		list_add(&m->unload, &all);
	}
	spin_unlock(&mlf_mms_lock);
	list_for_each_entry_safe(m, next, &all, unload) {
		mlf_mm_kill(m);
		/* Waits for a release that is running: its retire is queued. */
		mlf_mm_retire(m);
		mlf_mm_put(m);
	}
	flush_workqueue(mlf_wq);
	WARN_ON(atomic_long_read(&mlf_mm_count));
	destroy_workqueue(mlf_wq);
}
