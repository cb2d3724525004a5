// SPDX-License-Identifier: GPL-2.0
/*
 * The VMA half of mlock: mlock_fixup() and the loops over VMAs of
 * apply_vma_lock_flags() and apply_mlockall_flags() (mm/mlock.c), with the
 * shortcuts that make a small call cheap: a whole VMA that no neighbour
 * could merge with only changes its flags, found by a raw maple walk
 * (raw_maple.h) or, on kernels that count the mmap_lock's write holds, by
 * the mm's VMA cache without a walk.
 *
 * Calls go down to the compat layer (compat.h: the merge or split, the
 * flags' write) and, for each piece whose pages change, back up to the
 * engine's mlf_walk_pages() or mlf_skip_pages(): that one cycle is
 * mlock_fixup() calling mlock_vma_pages_range() in the kernel, and a direct
 * call on every call's path (an indirect one costs a retpoline).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mm.h>
#include <linux/sched.h>
#include "compat.h"
#include "raw_maple.h"
#include "raw_mm.h"
#include "vma.h"

/* The pages' lock state changes: set the flags the way mlock does, walk. */
static __always_inline void mlf_fixup_pages(struct vm_area_struct *vma,
					    unsigned long start,
					    unsigned long end,
					    vm_flags_t oldflags,
					    vm_flags_t newflags, struct mlf_ctx *ctx)
{
	if ((newflags & VM_LOCKED) && (oldflags & VM_LOCKED)) {
		/* No page work, and mlocking twice would be wrong. */
		mlf_vma_set_flags(vma, newflags);
		mlf_skip_pages(ctx, vma, start, end);
		return;
	}
	/*
	 * VM_IO with VM_LOCKED tells rmap walkers (reclaim, migration) not to
	 * mlock pages of this VMA while the walk does: that would count them
	 * twice.  mlock_vma_pages_range() does the same.
	 */
	mlf_vma_set_flags(vma, (newflags & VM_LOCKED) ? newflags | VM_IO :
			  newflags);
	mlf_walk_pages(ctx, vma, start, end);
	if (newflags & VM_LOCKED)
		mlf_vma_set_flags(vma, newflags);
}

static bool mlf_mergeable_flags(struct vm_area_struct *vma, vm_flags_t flags)
{
	return !((vma->vm_flags ^ flags) & ~MLF_VM_MERGE_IGNORED);
}

/*
 * The piece is a whole VMA and neither neighbour could merge with it (merging
 * needs equal vm_flags): the kernel's merge attempt would change nothing, so
 * only the flags change.  Saves the merge attempt on every call.  @at is a
 * maple state standing on @vma: the next VMA is one step from it, not a walk
 * from the root.
 */
static bool mlf_stays_alone(struct vm_area_struct *vma,
			    struct vm_area_struct *prev,
			    const struct ma_state *at, unsigned long start,
			    unsigned long end, vm_flags_t newflags)
{
	struct ma_state mas = *at;
	struct vm_area_struct *next;

	if (start != vma->vm_start || end != vma->vm_end)
		return false;
	if (prev && prev != vma && prev->vm_end == start &&
	    mlf_mergeable_flags(prev, newflags))
		return false;
	next = mas_next(&mas, ULONG_MAX);
	return !next || next->vm_start != end ||
	       !mlf_mergeable_flags(next, newflags);
}

/*
 * The piece merged with the VMA after it, already in the new state, and the
 * loop steps over the rest of that VMA as mlock's does.  The syscall's
 * populate still visits the part inside the range.
 */
static void mlf_merged_over(struct vm_area_struct *vma, unsigned long from,
			    unsigned long to, struct mlf_ctx *ctx)
{
	if (from < to)
		mlf_skip_pages(ctx, vma, from, to);
}

/*
 * mlockall: the VMA ending at @end merged with the one after it, which the
 * loop now steps over.  mlockall(2) populates every VMA, that one too: its
 * pages may need a COW break (shared with a child since it was locked).
 */
static void mlf_merged_next(struct vm_area_struct *vma, unsigned long end,
			    struct mlf_ctx *ctx)
{
	if (vma && vma->vm_end > end)
		mlf_skip_pages(ctx, vma, end, vma->vm_end);
}

static void mlf_account(struct mm_struct *mm, unsigned long start,
			unsigned long end, vm_flags_t oldflags,
			vm_flags_t newflags)
{
	long nr_pages = (end - start) >> PAGE_SHIFT;

	if (!(newflags & VM_LOCKED))
		nr_pages = -nr_pages;
	else if (oldflags & VM_LOCKED)
		nr_pages = 0;
	mm->locked_vm += nr_pages;
}

/* Could @entry, touching the VMA before or after it (at @at), merge in @flags? */
static __always_inline bool mlf_side_merges(void *entry, bool before,
					    unsigned long at, vm_flags_t flags)
{
	struct vm_area_struct *vma = entry;

	if (xa_is_internal(entry))
		return true;	/* not a VMA: let the kernel's merge look */
	return vma && (before ? vma->vm_end : vma->vm_start) == at &&
	       mlf_mergeable_flags(vma, flags);
}

/*
 * mlf_stays_alone() for the common call, a whole VMA, right after the walk
 * that found it, without the previous VMA in hand.
 */
static bool mlf_walked_alone(const struct ma_state *mas,
			     struct vm_area_struct *vma, unsigned long start,
			     unsigned long end, vm_flags_t newflags,
			     void **prev, void **next)
{
	unsigned int sides;

	if (start != vma->vm_start || end != vma->vm_end)
		return false;
	sides = mlf_leaf_sides(mas, prev, next);
	if (!(sides & MLF_LEAF_PREV))
		*prev = mlf_tree_side(mas, true);
	if (mlf_side_merges(*prev, true, start, newflags))
		return false;
	if (!(sides & MLF_LEAF_NEXT))
		*next = mlf_tree_side(mas, false);
	return !mlf_side_merges(*next, false, end, newflags);
}

/*
 * The neighbour on one side of @vma that a merge could take: the entry
 * that touches it, or NULL (a gap, or the tree's edge).
 */
static void *mlf_touching(void *entry, struct vm_area_struct *vma, bool before)
{
	struct vm_area_struct *n = entry;

	if (!entry || xa_is_internal(entry))
		return entry;
	return (before ? n->vm_end == vma->vm_start :
			 n->vm_start == vma->vm_end) ? entry : NULL;
}

/*
 * Does the hand-written walk above agree with the kernel's own at @addr?
 * The VMA, every ma_state field mas_walk() sets, and the neighbours (as
 * mlf_walked_alone() reads them) against mas_prev() and mas_next().
 */
static bool mlf_maple_agrees(struct mm_struct *mm, struct vm_area_struct *vma,
			     unsigned long addr)
{
	MA_STATE(ours, &mm->mm_mt, addr, addr);
	MA_STATE(ref, &mm->mm_mt, addr, addr);
	struct ma_state rp, rn;
	void *prev = NULL, *next = NULL;
	unsigned int sides;

	if (mlf_tree_walk(&ours) != vma || mas_walk(&ref) != vma)
		return false;
	if (ours.node != ref.node || ours.offset != ref.offset ||
	    ours.index != ref.index || ours.last != ref.last ||
	    ours.min != ref.min || ours.max != ref.max)
		return false;
#ifdef MLF_MAS_HAS_STATUS
	if (ours.status != ref.status || ours.end != ref.end)
		return false;
#endif
	sides = mlf_leaf_sides(&ours, &prev, &next);
	if (!(sides & MLF_LEAF_PREV))
		prev = mlf_tree_side(&ours, true);
	if (!(sides & MLF_LEAF_NEXT))
		next = mlf_tree_side(&ours, false);
	rp = ref;
	rn = ref;
	return mlf_touching(prev, vma, true) ==
	       mlf_touching(mas_prev(&rp, 0), vma, true) &&
	       mlf_touching(next, vma, false) ==
	       mlf_touching(mas_next(&rn, ULONG_MAX), vma, false);
}

/*
 * debug_selftest: check the raw maple reads on the caller's mm at the first,
 * middle and last page of each VMA; -EINVAL (and what differed, once) if any
 * disagrees.  The suite runs it on a process with hundreds of VMAs, so
 * that its tree has inner nodes and leaf edges.
 */
int mlf_maple_selftest(void)
{
	VMA_ITERATOR(vmi, current->mm, 0);
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	unsigned long checked = 0, bad = 0;
	int i;

	if (!mm)
		return -EINVAL;
	if (mmap_write_lock_killable(mm))
		return -EINTR;
	for_each_vma(vmi, vma) {
		unsigned long at[3] = {
			vma->vm_start,
			vma->vm_start + ((vma->vm_end - vma->vm_start) / 2 & PAGE_MASK),
			vma->vm_end - 1,
		};

		for (i = 0; i < 3; i++, checked++) {
			if (mlf_maple_agrees(mm, vma, at[i]))
				continue;
			if (!bad++)
				pr_err("maple self-test: the walk at %#lx differs from mas_walk()\n",
				       at[i]);
		}
	}
	mmap_write_unlock(mm);
	pr_info("maple self-test: %lu walks, %lu differ\n", checked, bad);
	return bad ? -EINVAL : 0;
}

/* mlock_fixup() of a piece that neither splits nor merges. */
static void mlf_fixup_in_place(struct vm_area_struct *vma, unsigned long start,
			       unsigned long end, vm_flags_t newflags, struct mlf_ctx *ctx)
{
	vm_flags_t oldflags = vma->vm_flags;

	if (newflags == oldflags || !mlf_vma_lockable(vma)) {
		mlf_skip_pages(ctx, vma, start, end);
		return;
	}
	mlf_account(vma->vm_mm, start, end, oldflags, newflags);
	mlf_fixup_pages(vma, start, end, oldflags, newflags, ctx);
}

/* mlock_fixup(); on error *prev is an ERR_PTR, as in the kernel's. */
static int mlf_fixup(struct vma_iterator *vmi, struct vm_area_struct *vma,
		     struct vm_area_struct **prev, unsigned long start,
		     unsigned long end, vm_flags_t newflags, struct mlf_ctx *ctx)
{
	vm_flags_t oldflags = vma->vm_flags;
	int ret = 0;

	if (newflags == oldflags || !mlf_vma_lockable(vma)) {
		mlf_skip_pages(ctx, vma, start, end);
		goto out;
	}
	if (!mlf_stays_alone(vma, *prev, &vmi->mas, start, end, newflags))
		vma = mlf_vma_modify_flags(vmi, *prev, vma, start, end,
					   &newflags);
	if (IS_ERR(vma)) {
		ret = PTR_ERR(vma);
		goto out;
	}
	mlf_account(vma->vm_mm, start, end, oldflags, newflags);
	mlf_fixup_pages(vma, start, end, oldflags, newflags, ctx);
out:
	*prev = vma;
	return ret;
}

/*
 * The cached VMA, if [start, end) is all of it and the mm's tree cannot have
 * changed since the call that cached it.  The tree, and every VMA's extent
 * and flags, change only under the mmap_lock held for writing, and
 * mlf_mm_write_seq() counts those holds: two more than in the caching call
 * means ours is the very next one.  A count a wrap of
 * 2^31 holds later would read the same: entries older than a second, which
 * no machine wraps it in, are not used.  Taken either way: kept only if
 * this call, too, leaves the tree as it is (mlf_vc_keep()).
 */
static struct vm_area_struct *mlf_vc_take(struct mlf_vma_cache *vc,
					  struct mm_struct *mm,
					  unsigned long start,
					  unsigned long end)
{
#ifdef MLF_VMA_CACHE
	struct vm_area_struct *vma = vc->vma;

	vc->vma = NULL;
	if (!vma || mlf_mm_write_seq(mm) != vc->seq + 2 ||
	    time_after(jiffies, vc->stamp + HZ) ||
	    vma->vm_start != start || vma->vm_end != end)
		return NULL;
	return vma;
#else
	return NULL;
#endif
}

static void mlf_vc_keep(struct mlf_vma_cache *vc, struct mm_struct *mm,
			struct vm_area_struct *vma, void *prev, void *next)
{
#ifdef MLF_VMA_CACHE
	vc->vma = vma;
	vc->prev = prev;
	vc->next = next;
	vc->seq = mlf_mm_write_seq(mm);
	vc->stamp = jiffies;
#endif
}

int mlf_apply_range(struct mm_struct *mm, struct mlf_vma_cache *vc,
		    unsigned long start, unsigned long len, vm_flags_t flags,
		    struct mlf_ctx *ctx)
{
	VMA_ITERATOR(vmi, mm, start);
	unsigned long nstart, end, tmp;
	struct vm_area_struct *vma, *prev;
	vm_flags_t newflags;
	void *sides[2];
	int error;

	lockdep_assert_held_write(&mm->mmap_lock);	/* VMAs change */
	end = start + len;
	if (end < start)
		return -EINVAL;
	if (end == start)
		return 0;
	vma = vc ? mlf_vc_take(vc, mm, start, end) : NULL;
#ifdef MLF_VMA_CACHE
	if (vma) {
		/* Its neighbours are as they were: only the flags asked differ. */
		newflags = (vma->vm_flags & MLF_VM_LOCKED_CLEAR_MASK) | flags;
		if (!mlf_side_merges(vc->prev, true, start, newflags) &&
		    !mlf_side_merges(vc->next, false, end, newflags)) {
			mlf_vc_keep(vc, mm, vma, vc->prev, vc->next);
			mlf_fixup_in_place(vma, start, end, newflags, ctx);
			return 0;
		}
	}
#endif
	vma = mlf_tree_walk(&vmi.mas);
	if (!vma)
		return -ENOMEM;
	newflags = (vma->vm_flags & MLF_VM_LOCKED_CLEAR_MASK) | flags;
	if (mlf_walked_alone(&vmi.mas, vma, start, end, newflags, &sides[0],
			     &sides[1])) {
		if (vc)
			mlf_vc_keep(vc, mm, vma, sides[0], sides[1]);
		mlf_fixup_in_place(vma, start, end, newflags, ctx);
		return 0;
	}
	if (start > vma->vm_start) {
		prev = vma;
	} else {
		struct ma_state back = vmi.mas;	/* the iterator stays on vma */

		prev = mas_prev(&back, 0);
	}

	for (nstart = start; ; ) {
		newflags = (vma->vm_flags & MLF_VM_LOCKED_CLEAR_MASK) | flags;
		tmp = min(vma->vm_end, end);
		error = mlf_fixup(&vmi, vma, &prev, nstart, tmp, newflags,
				  ctx);
		if (error)
			return error;
		/* The iterator is on prev, the VMA now holding the piece. */
		nstart = max(tmp, prev->vm_end);
		mlf_merged_over(prev, tmp, min(nstart, end), ctx);
		if (nstart >= end)
			return 0;
		vma = vma_next(&vmi);
		if (!vma || vma->vm_start != nstart)
			return -ENOMEM;
	}
}

void mlf_apply_all(struct mm_struct *mm, vm_flags_t to_add, struct mlf_ctx *ctx)
{
	VMA_ITERATOR(vmi, mm, 0);
	struct vm_area_struct *vma, *prev = NULL;

	lockdep_assert_held_write(&mm->mmap_lock);	/* VMAs change */
	for_each_vma(vmi, vma) {
		vm_flags_t newflags = (vma->vm_flags & MLF_VM_LOCKED_CLEAR_MASK) |
				      to_add;
		unsigned long end = vma->vm_end;

		if (mlf_fixup(&vmi, vma, &prev, vma->vm_start, end, newflags,
			      ctx))
			prev = vma;
		mlf_merged_next(prev, end, ctx);
		cond_resched();
	}
}
