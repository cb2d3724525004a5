// SPDX-License-Identifier: GPL-2.0
/*
 * Per-process state: an mmu notifier on every mm that has used the device.
 *
 * A queued move is only right while the lock it pays for still stands.  When
 * the kernel tears down or replaces the mapping that lock was taken through
 * (munmap, a COW break, mremap, migration, exit), it munlocks the folio
 * itself; a later mlock of the same folio by a fault or another VMA would
 * then be counted twice if our move were still paid.  The notifier hears of
 * every such change before the page tables change, and voids the entries of
 * that range.
 *
 * It also keeps the runs of private anonymous pages a deferred lock left on
 * the evictable LRU (see mlf_lock_one()): a run costs nothing per page until
 * its work, after defer_ms, moves what is still locked (mlf_pay_run()).
 *
 * Lifetime: the notifier lives as long as its mm (one reference, dropped when
 * the mm exits or the module unloads) and each file that caches it holds one
 * more, so that a cached pointer is never stale.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mmu_notifier.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include "compat.h"
#include "mlockfast.h"

enum {
	MLF_MM_FRESH,		/* allocated, its mm-lifetime reference not taken */
	MLF_MM_DROPPED,		/* its mm-lifetime reference is gone */
	MLF_MM_DEAD,		/* the mm has exited: its work may not be queued */
};

static LIST_HEAD(mlf_mms);
static DEFINE_SPINLOCK(mlf_mms_lock);	/* guards mlf_mms */
static struct workqueue_struct *mlf_wq;
static atomic_long_t mlf_mm_count;	/* mlf_mm allocated, not yet freed */

/* Pay every run; mmap_lock held. */
static void mlf_mm_pay(struct mlf_mm *m)
{
	unsigned int i, n = m->nr_runs;

	m->nr_runs = 0;
	for (i = 0; i < n; i++)
		mlf_pay_run(m->mn.mm, m->runs[i].start, m->runs[i].end);
}

/*
 * No reference on the mm is taken: exit_mmap() calls our release before it
 * touches the mappings, and release waits for this work to end.  (Holding
 * mm_users instead would leave the last mmput() to us, and the exiting
 * process's memory, Mlocked included, would outlive it for a while.)
 */
static void mlf_mm_work(struct work_struct *work)
{
	struct mlf_mm *m = container_of(to_delayed_work(work), struct mlf_mm,
					work);
	struct mm_struct *mm = m->mn.mm;

	/* An mm on its way out unmaps everything: nothing to pay. */
	if (!atomic_read(&mm->mm_users))
		return;
	mmap_read_lock(mm);
	mlf_mm_pay(m);
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
 * mlf_mm_add_run() beyond its common case: runs that touch merge; with no
 * room left, all are paid at once.
 */
void mlf_mm_merge_run(struct mlf_mm *m, unsigned long start, unsigned long end)
{
	struct mlf_run *r;
	unsigned int i;

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
			mlf_pay_run(m->mn.mm, r->start, r->end);
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

	spin_lock_bh(&mlf_mms_lock);
	list_for_each_entry(m, &mlf_mms, node)
		if (READ_ONCE(m->nr_runs))
			mlf_mm_queue(m, 0);
	spin_unlock_bh(&mlf_mms_lock);
	flush_workqueue(mlf_wq);
}

void mlf_mm_pending_add(struct mlf_mm *m, int n)
{
	if (m)
		atomic_add(n, &m->pending);
}

/*
 * Mapping changes that leave the page mapped (mprotect, write-protection for
 * fork or KSM, soft-dirty) munlock nothing: the queued moves stay right.
 */
static bool mlf_event_keeps_mapping(const struct mmu_notifier_range *r)
{
	return r->event == MMU_NOTIFY_PROTECTION_VMA ||
	       r->event == MMU_NOTIFY_PROTECTION_PAGE ||
	       r->event == MMU_NOTIFY_SOFT_DIRTY;
}

/*
 * Any change to the range of the remembered pmd table forgets it: those that
 * free page tables (munmap, mremap, exit) come with one, and they hold the
 * mmap_lock, so no walk is using the table meanwhile.
 */
static void mlf_pt_forget(struct mlf_pt_cache *pt, unsigned long start,
			  unsigned long end)
{
	if (READ_ONCE(pt->pmds) && start < pt->base + PUD_SIZE &&
	    end > pt->base)
		WRITE_ONCE(pt->pmds, NULL);
}

static int mlf_mm_invalidate(struct mmu_notifier *mn,
			     const struct mmu_notifier_range *r)
{
	struct mlf_mm *m = container_of(mn, struct mlf_mm, mn);

	mlf_pt_forget(&m->pt, r->start, r->end);
	if (mlf_event_keeps_mapping(r) || !atomic_read(&m->pending))
		return 0;
	mlf_batch_void(m, r->start, r->end);
	return 0;
}

/* No work may be queued for @m from now on. */
static void mlf_mm_kill(struct mlf_mm *m)
{
	spin_lock(&m->lock);
	set_bit(MLF_MM_DEAD, &m->state);
	spin_unlock(&m->lock);
}

static void mlf_mm_drop(struct mlf_mm *m)
{
	if (!test_and_set_bit(MLF_MM_DROPPED, &m->state))
		mmu_notifier_put(&m->mn);
}

/* The mm is exiting: its mappings are going away, and so are our moves. */
static void mlf_mm_release(struct mmu_notifier *mn, struct mm_struct *mm)
{
	struct mlf_mm *m = container_of(mn, struct mlf_mm, mn);

	if (atomic_read(&m->pending))
		mlf_batch_void(m, 0, ULONG_MAX);
	mlf_mm_kill(m);
	cancel_delayed_work_sync(&m->work);
	mlf_mm_drop(m);
}

static struct mmu_notifier *mlf_mm_alloc(struct mm_struct *mm)
{
	struct mlf_mm *m = kzalloc(sizeof(*m), GFP_KERNEL);

	if (!m)
		return ERR_PTR(-ENOMEM);
	__set_bit(MLF_MM_FRESH, &m->state);
	m->zone_id = -1;
	spin_lock_init(&m->lock);
	INIT_DELAYED_WORK(&m->work, mlf_mm_work);
	spin_lock_bh(&mlf_mms_lock);
	list_add(&m->node, &mlf_mms);
	spin_unlock_bh(&mlf_mms_lock);
	atomic_long_inc(&mlf_mm_count);
	return &m->mn;
}

/* From an SRCU callback once the last reference is put: cannot sleep. */
static void mlf_mm_free(struct mmu_notifier *mn)
{
	struct mlf_mm *m = container_of(mn, struct mlf_mm, mn);

	spin_lock_bh(&mlf_mms_lock);
	list_del(&m->node);
	spin_unlock_bh(&mlf_mms_lock);
	kfree(m);
	atomic_long_dec(&mlf_mm_count);
}

/* A gauge for STATS: a count that never comes back down is a leak. */
unsigned long mlf_mm_tracked(void)
{
	return atomic_long_read(&mlf_mm_count);
}

static const struct mmu_notifier_ops mlf_mm_ops = {
	.invalidate_range_start = mlf_mm_invalidate,
	.release = mlf_mm_release,
	.alloc_notifier = mlf_mm_alloc,
	.free_notifier = mlf_mm_free,
};

/* A reference on current->mm's state; mmap_lock held for writing. */
static struct mlf_mm *mlf_mm_get(void)
{
	struct mmu_notifier *mn = mmu_notifier_get_locked(&mlf_mm_ops,
							  current->mm);
	struct mlf_mm *m;

	if (IS_ERR(mn))
		return NULL;
	m = container_of(mn, struct mlf_mm, mn);
	/* A new one: take the reference that lasts until the mm exits. */
	if (test_and_clear_bit(MLF_MM_FRESH, &m->state))
		mmu_notifier_get_locked(&mlf_mm_ops, current->mm);
	return m;
}

/* mlf_mm_current() when the file's cache does not hold current->mm's. */
struct mlf_mm *mlf_mm_lookup(struct mlf_mm **cache)
{
	struct mlf_mm *m = mlf_mm_get();

	if (!m)
		return NULL;
	if (cmpxchg(cache, NULL, m))
		/* The mm-lifetime reference keeps it for this call. */
		mmu_notifier_put(&m->mn);
	return m;
}

/* The file is closed: drop the reference its cache holds. */
void mlf_mm_uncache(struct mlf_mm *m)
{
	if (m)
		mmu_notifier_put(&m->mn);
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
	struct mlf_mm *m;

	mlf_mm_pay_all();
	spin_lock_bh(&mlf_mms_lock);
	list_for_each_entry(m, &mlf_mms, node) {
		mlf_mm_kill(m);
		cancel_delayed_work(&m->work);	/* an idle timer at most */
	}
	spin_unlock_bh(&mlf_mms_lock);
	/* A timer that fired meanwhile: its work ends before any state goes. */
	flush_workqueue(mlf_wq);
	spin_lock_bh(&mlf_mms_lock);
	list_for_each_entry(m, &mlf_mms, node)
		mlf_mm_drop(m);
	spin_unlock_bh(&mlf_mms_lock);
	mmu_notifier_synchronize();
	destroy_workqueue(mlf_wq);
}
