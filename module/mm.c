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
 * Lifetime: the notifier lives as long as its mm (one reference, dropped when
 * the mm exits or the module unloads) and each file that caches it holds one
 * more, so that a cached pointer is never stale.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mmu_notifier.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include "mlockfast.h"

enum {
	MLF_MM_FRESH,		/* allocated, its mm-lifetime reference not taken */
	MLF_MM_DROPPED,		/* its mm-lifetime reference is gone */
};

struct mlf_mm {
	struct mmu_notifier mn;
	atomic_t pending;	/* live batch entries owned by this mm */
	unsigned long state;
	struct list_head node;	/* on mlf_mms until freed */
};

static LIST_HEAD(mlf_mms);
static DEFINE_SPINLOCK(mlf_mms_lock);	/* guards mlf_mms */

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

static int mlf_mm_invalidate(struct mmu_notifier *mn,
			     const struct mmu_notifier_range *r)
{
	struct mlf_mm *m = container_of(mn, struct mlf_mm, mn);

	if (mlf_event_keeps_mapping(r) || !atomic_read(&m->pending))
		return 0;
	mlf_batch_void(m, r->start, r->end);
	return 0;
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
	mlf_mm_drop(m);
}

static struct mmu_notifier *mlf_mm_alloc(struct mm_struct *mm)
{
	struct mlf_mm *m = kzalloc(sizeof(*m), GFP_KERNEL);

	if (!m)
		return ERR_PTR(-ENOMEM);
	__set_bit(MLF_MM_FRESH, &m->state);
	spin_lock_bh(&mlf_mms_lock);
	list_add(&m->node, &mlf_mms);
	spin_unlock_bh(&mlf_mms_lock);
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

/*
 * current->mm's state, for the owner of the entries a lock queues, or NULL
 * if it cannot be had (no memory, a signal during registration): the caller
 * then pays its moves before it returns.  @cache is the file's: the first mm
 * to use a file keeps its state there.  Call with mmap_lock held for writing.
 */
struct mlf_mm *mlf_mm_current(struct mlf_mm **cache)
{
	struct mlf_mm *m = READ_ONCE(*cache);

	if (likely(m && m->mn.mm == current->mm))
		return m;
	m = mlf_mm_get();
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

/* Unload: every notifier goes, and nothing of ours may run after this. */
void mlf_mm_exit(void)
{
	struct mlf_mm *m;

	spin_lock_bh(&mlf_mms_lock);
	list_for_each_entry(m, &mlf_mms, node)
		mlf_mm_drop(m);
	spin_unlock_bh(&mlf_mms_lock);
	mmu_notifier_synchronize();
}
