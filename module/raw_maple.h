/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Raw reads of the mm's maple tree, for the VMA code's walk (vma.c): the
 * kernel's own mas_walk(), mas_prev() and mas_next() cost more than the rest
 * of a small mlock.  They rely on these kernel facts, the same in every
 * supported series (include/linux/maple_tree.h, lib/maple_tree.c):
 *
 *  - the mm's tree (MT_FLAGS_ALLOC_RANGE) is made of maple_arange_64 inner
 *    nodes and maple_leaf_64 leaves; pivots, then slots, as the header lays
 *    them out; a node's last slot is found as ma_data_end() finds it;
 *  - a VMA is stored over exactly its extent, a gap between VMAs is a NULL
 *    slot;
 *  - a node's parent pointer holds, in its low byte, a root bit, the
 *    parent's type and the node's slot in the parent; the tree's root
 *    pointer has MAPLE_ROOT_NODE set;
 *  - the tree changes only under the mmap_lock held for writing, which every
 *    caller here holds: no dead nodes to check for.
 *
 * Anything else the reads meet is left to the kernel's own walk.  vma.c's
 * self-test (debug_selftest) compares them with mas_walk(), mas_prev() and
 * mas_next() on a process with hundreds of VMAs, and the suite runs it.
 */
#ifndef MLOCKFAST_RAW_MAPLE_H
#define MLOCKFAST_RAW_MAPLE_H

#include <linux/maple_tree.h>
#include <linux/mm_types.h>
#include "compat.h"

/*
 * The maple tree's private encodings that the walk and the sibling step
 * below read, the same in both series (lib/maple_tree.c): a node's parent
 * pointer holds, in its low byte, a root bit, the parent's type
 * (MAPLE_PARENT_RANGE64 for the 64-bit range nodes of the mm's tree) and the
 * node's slot in the parent; the tree's root pointer has MAPLE_ROOT_NODE set.
 */
#define MLF_MAPLE_PARENT_TYPE	0x07	/* root bit and type bits */
#define MLF_MAPLE_PARENT_RANGE64	0x06	/* not the root, 64-bit ranges */
#define MLF_MAPLE_PARENT_SLOT(p)	(((p) & 0xF8) >> 3)
#define MLF_MAPLE_ROOT_NODE	0x02	/* in the tree's root pointer */

static __always_inline struct maple_node *mlf_mte_node(unsigned long enode)
{
	return (struct maple_node *)(enode & ~MAPLE_NODE_MASK);
}

/* An encoded node that is a maple_leaf_64. */
static __always_inline bool mlf_mte_leaf64(unsigned long enode)
{
	return !(enode & 3) &&
	       ((enode >> MAPLE_NODE_TYPE_SHIFT) & MAPLE_NODE_TYPE_MASK) ==
	       maple_leaf_64;
}

#define MLF_LEAF_PREV	1
#define MLF_LEAF_NEXT	2

/*
 * The entries on either side of the one a maple walk (mas_walk()) stopped
 * at, read from the walk's leaf: a mas_prev() or mas_next() step costs more
 * than the rest of a small mlock.  The leaves of the mm's tree are
 * maple_leaf_64 nodes (pivots, then slots, as include/linux/maple_tree.h
 * lays them out in both series), and a gap between VMAs is a NULL slot.
 * Returns which of *@prev (MLF_LEAF_PREV) and *@next (MLF_LEAF_NEXT) it set:
 * not those in another node.
 */
static __always_inline unsigned int mlf_leaf_sides(const struct ma_state *mas,
						   void **prev, void **next)
{
	unsigned long enode = (unsigned long)mas->node;
	struct maple_range_64 *leaf;
	unsigned int sides = 0;

#ifdef MLF_MAS_HAS_STATUS
	if (mas->status != ma_active)
		return 0;
#endif
	/* (6.1: MAS_START, MAS_NONE, ... and MA_ERROR() have a low bit set.) */
	if (!mlf_mte_leaf64(enode))
		return 0;
	leaf = &mlf_mte_node(enode)->mr64;
	/*
	 * The slot before covers up to mas->index - 1, the next from
	 * mas->last + 1.  The tree only changes under the mmap_lock, held for
	 * writing here.
	 */
	if (mas->offset) {
		*prev = rcu_dereference_protected(leaf->slot[mas->offset - 1],
						  true);
		sides |= MLF_LEAF_PREV;
	}
	if (mas->last < mas->max) {
		*next = rcu_dereference_protected(leaf->slot[mas->offset + 1],
						  true);
		sides |= MLF_LEAF_NEXT;
	}
	return sides;
}

/*
 * The neighbour of the walk's entry that lies in the leaf beside the walk's
 * leaf (the entry is first or last there), one step through their parent:
 * the last slot of the leaf before, or the first of the leaf after.  false
 * when that leaf has another parent, or the nodes are not what the mm's
 * tree is made of: ask the tree then.
 */
static bool mlf_sibling_side(const struct ma_state *mas, bool before,
			     void **entry)
{
	struct maple_node *node = mlf_mte_node((unsigned long)mas->node);
	unsigned long parent = (unsigned long)node->parent, sib;
	struct maple_arange_64 *pn;
	struct maple_range_64 *leaf;
	unsigned int slot, end;

	if (!(mas->tree->ma_flags & MT_FLAGS_ALLOC_RANGE) ||
	    (parent & MLF_MAPLE_PARENT_TYPE) != MLF_MAPLE_PARENT_RANGE64)
		return false;
	pn = &mlf_mte_node(parent)->ma64;
	slot = MLF_MAPLE_PARENT_SLOT(parent);
	/* An allocation-range parent: its metadata holds its last slot. */
	if (before ? !slot : slot >= pn->meta.end)
		return false;
	sib = (unsigned long)rcu_dereference_protected(pn->slot[before ? slot - 1 :
								  slot + 1],
						       true);
	if (!mlf_mte_leaf64(sib))
		return false;
	leaf = &mlf_mte_node(sib)->mr64;
	if (!before) {
		*entry = rcu_dereference_protected(leaf->slot[0], true);
		return true;
	}
	/* The leaf's last slot, found as ma_data_end() finds it. */
	end = MAPLE_RANGE64_SLOTS - 2;
	if (!leaf->pivot[end])
		end = leaf->meta.end;
	else if (leaf->pivot[end] != mas->min - 1)
		end = MAPLE_RANGE64_SLOTS - 1;
	*entry = rcu_dereference_protected(leaf->slot[end], true);
	return true;
}

/* A neighbour in another leaf (kept out of line). */
static noinline void *mlf_tree_side(const struct ma_state *mas, bool before)
{
	struct ma_state step = *mas;
	void *entry;

	if (mlf_sibling_side(mas, before, &entry))
		return entry;
	return before ? mas_prev(&step, 0) : mas_next(&step, ULONG_MAX);
}

/*
 * mas_walk() for the mm's tree, in fewer instructions: each node's pivots
 * are binary searched, not scanned, and nothing is checked that only a
 * walker without the mmap_lock needs (dead nodes: the tree does not change
 * while the lock is held for writing).  The nodes are the maple_arange_64
 * and maple_leaf_64 of include/linux/maple_tree.h; a node's last slot is
 * found as ma_data_end() finds it (lib/maple_tree.c, the same in both
 * series).  @mas ends as mas_walk() leaves it (every field mas_walk() sets),
 * for the neighbour reads above and the tree's own calls after.  Any other
 * shape of tree, and a miss, is left to mas_walk() itself.
 */
static __always_inline void *mlf_tree_walk(struct ma_state *mas)
{
	unsigned long root = (unsigned long)
		rcu_dereference_protected(mas->tree->ma_root, true);
	unsigned long enode = root & ~MLF_MAPLE_ROOT_NODE;
	unsigned long index = mas->index, min = 0, max = ULONG_MAX;
	struct vm_area_struct *vma;

#ifdef MLF_MAS_CHECKS_LOCK_HOLD
	/* The tree's calls check the lock hold that mas_walk() records. */
	goto walk;
#endif
	if (!xa_is_node((void *)root))
		goto walk;
	for (;;) {
		unsigned int type = (enode >> MAPLE_NODE_TYPE_SHIFT) &
				    MAPLE_NODE_TYPE_MASK;
		struct maple_node *node = mlf_mte_node(enode);
		unsigned long *pivots, lmin, lmax;
		unsigned int end, lo, hi;
		void __rcu **slots;

		if (type == maple_arange_64) {
			pivots = node->ma64.pivot;
			slots = node->ma64.slot;
			end = node->ma64.meta.end;
			if (end >= MAPLE_ARANGE64_SLOTS)
				goto walk;
		} else if (type == maple_leaf_64 || type == maple_range_64) {
			pivots = node->mr64.pivot;
			slots = node->mr64.slot;
			end = MAPLE_RANGE64_SLOTS - 2;
			if (!pivots[end])
				end = node->mr64.meta.end;
			else if (pivots[end] != max)
				end = MAPLE_RANGE64_SLOTS - 1;
			if (end >= MAPLE_RANGE64_SLOTS)
				goto walk;
		} else {
			goto walk;
		}
		/* The first slot reaching @index; the last one's end is implied. */
		for (lo = 0, hi = end; lo < hi; ) {
			unsigned int mid = (lo + hi) / 2;

			if (pivots[mid] < index)
				lo = mid + 1;
			else
				hi = mid;
		}
		lmin = lo ? pivots[lo - 1] + 1 : min;
		lmax = lo < end ? pivots[lo] : max;
		if (type != maple_leaf_64) {
			enode = (unsigned long)rcu_dereference_protected(slots[lo],
									 true);
			if (!enode || (enode & 3))	/* not a node */
				goto walk;
			min = lmin;
			max = lmax;
			continue;
		}
		/* A VMA is stored over exactly its extent: that checks it all. */
		vma = rcu_dereference_protected(slots[lo], true);
		if (!vma || xa_is_internal(vma) || vma->vm_start != lmin ||
		    vma->vm_end - 1 != lmax)
			goto walk;
		mas->node = (struct maple_enode *)enode;
		mas->offset = lo;
		mas->index = lmin;
		mas->last = lmax;
		mas->min = min;
		mas->max = max;
		mas->depth = 1;
#ifdef MLF_MAS_HAS_STATUS
		mas->status = ma_active;
		mas->end = end;
#endif
		return vma;
	}
walk:
	mas_set(mas, index);
	return mas_walk(mas);
}

#endif /* MLOCKFAST_RAW_MAPLE_H */
