// SPDX-License-Identifier: GPL-2.0
/*
 * Symbol resolution and the per-series VMA code (see compat.h).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kprobes.h>
#include <linux/kallsyms.h>
#include <linux/uaccess.h>
#include <linux/mman.h>
#include <linux/secretmem.h>
#include <linux/hugetlb.h>
#include <linux/dax.h>
#include <linux/mempolicy.h>
#include <linux/userfaultfd_k.h>
#include <linux/mm_inline.h>
#include <linux/swap.h>
#include <linux/workqueue.h>
#include "compat.h"

/*
 * Where the kernel's own headers declare a function or variable resolved
 * here, its type and our prototype's must be one: a changed signature is
 * then a build error, not an oops.  The others (mlock_folio, munlock_*, the
 * mlock drain, vma_modify_flags, the syscall entry points) are declared in
 * mm/internal.h, mm/vma.h or nowhere, and were read from each series'
 * source.
 */
static_assert(__same_type(&kallsyms_lookup_name, &mlf_proto_lookup));
static_assert(__same_type(&__mm_populate, &mlf_proto_mm_populate));
static_assert(__same_type(&lru_add_drain, &mlf_proto_lru_add_drain));
static_assert(__same_type(&schedule_on_each_cpu,
			  &mlf_proto_schedule_on_each_cpu));
static_assert(__same_type(&vma_is_secretmem, &mlf_proto_vma_is_secretmem));
#ifdef MLF_HAVE_THP
static_assert(__same_type(&__pmd_trans_huge_lock,
			  &mlf_proto_pmd_trans_huge_lock));
static_assert(__same_type(&huge_zero_pfn, mlf_huge_zero_pfn));
#endif
#ifdef MLF_PTE_TABLES_MAY_VANISH
static_assert(__same_type(&__pte_offset_map_lock,
			  &mlf_proto_pte_offset_map_lock));
#endif
#ifndef MLF_HAVE_VMA_MODIFY_FLAGS
static_assert(__same_type(&vma_merge, &mlf_proto_vma_merge));
static_assert(__same_type(&split_vma, &mlf_proto_split_vma));
#endif

#ifdef MLF_HAVE_THP
DEFINE_STATIC_CALL_NULL(mlf_sc_pmd_trans_huge_lock,
			mlf_proto_pmd_trans_huge_lock);
#endif
DEFINE_STATIC_CALL_NULL(mlf_sc_mm_populate, mlf_proto_mm_populate);
DEFINE_STATIC_CALL_NULL(mlf_sc_lru_add_drain, mlf_proto_lru_add_drain);
DEFINE_STATIC_CALL_NULL(mlf_sc_schedule_on_each_cpu,
			mlf_proto_schedule_on_each_cpu);
DEFINE_STATIC_CALL_NULL(mlf_sc_mlock_folio, mlf_proto_mlock_folio);
DEFINE_STATIC_CALL_NULL(mlf_sc_vma_is_secretmem, mlf_proto_vma_is_secretmem);
DEFINE_STATIC_CALL_NULL(mlf_sc_sys_mlock2, mlf_proto_syscall);
DEFINE_STATIC_CALL_NULL(mlf_sc_sys_munlock, mlf_proto_syscall);
DEFINE_STATIC_CALL_NULL(mlf_sc_sys_mlockall, mlf_proto_syscall);
DEFINE_STATIC_CALL_NULL(mlf_sc_sys_munlockall, mlf_proto_syscall);
DEFINE_STATIC_CALL_NULL(mlf_sc_mlock_drain_local, mlf_proto_mlock_drain_local);
#ifdef MLF_HAVE_MUNLOCK_FOLIO
DEFINE_STATIC_CALL_NULL(mlf_sc_munlock_folio, mlf_proto_munlock_folio);
#else
DEFINE_STATIC_CALL_NULL(mlf_sc_munlock_page, mlf_proto_munlock_page);
#endif
#ifdef MLF_PTE_TABLES_MAY_VANISH
DEFINE_STATIC_CALL_NULL(mlf_sc_pte_offset_map_lock,
			mlf_proto_pte_offset_map_lock);
#endif
#ifdef MLF_HAVE_VMA_MODIFY_FLAGS
DEFINE_STATIC_CALL_NULL(mlf_sc_vma_modify_flags, mlf_proto_vma_modify_flags);
#else
DEFINE_STATIC_CALL_NULL(mlf_sc_vma_merge, mlf_proto_vma_merge);
DEFINE_STATIC_CALL_NULL(mlf_sc_split_vma, mlf_proto_split_vma);
#endif

#ifdef MLF_HAVE_THP
unsigned long *mlf_huge_zero_pfn;
#endif

/* Each static call and the kernel function it must jump to. */
struct mlf_func {
	const char *sym;
	struct static_call_key *key;
	void *tramp;
};

#define MLF_FUNC(name, sym) { \
	sym, &STATIC_CALL_KEY(mlf_sc_##name), STATIC_CALL_TRAMP_ADDR(mlf_sc_##name) \
}

static const struct mlf_func mlf_funcs[] = {
#ifdef MLF_HAVE_THP
	MLF_FUNC(pmd_trans_huge_lock, "__pmd_trans_huge_lock"),
#endif
	MLF_FUNC(mm_populate, "__mm_populate"),
	MLF_FUNC(lru_add_drain, "lru_add_drain"),
	MLF_FUNC(schedule_on_each_cpu, "schedule_on_each_cpu"),
	MLF_FUNC(mlock_folio, "mlock_folio"),
	MLF_FUNC(vma_is_secretmem, "vma_is_secretmem"),
	MLF_FUNC(sys_mlock2, "__x64_sys_mlock2"),
	MLF_FUNC(sys_munlock, "__x64_sys_munlock"),
	MLF_FUNC(sys_mlockall, "__x64_sys_mlockall"),
	MLF_FUNC(sys_munlockall, "__x64_sys_munlockall"),
	MLF_FUNC(mlock_drain_local, MLF_MLOCK_DRAIN_LOCAL),
#ifdef MLF_HAVE_MUNLOCK_FOLIO
	MLF_FUNC(munlock_folio, "munlock_folio"),
#else
	MLF_FUNC(munlock_page, "munlock_page"),
#endif
#ifdef MLF_PTE_TABLES_MAY_VANISH
	MLF_FUNC(pte_offset_map_lock, "__pte_offset_map_lock"),
#endif
#ifdef MLF_HAVE_VMA_MODIFY_FLAGS
	MLF_FUNC(vma_modify_flags, "vma_modify_flags"),
#else
	MLF_FUNC(vma_merge, "vma_merge"),
	MLF_FUNC(split_vma, "split_vma"),
#endif
};

DEFINE_STATIC_CALL_NULL(mlf_sc_lookup, mlf_proto_lookup);

/*
 * The offset of @addr into its symbol, from the exported symbol printer;
 * with @want, -1 unless that symbol is @want (aliases print another name).
 */
static long mlf_symbol_offset(unsigned long addr, const char *want)
{
	char buf[KSYM_SYMBOL_LEN], *plus, *slash;
	unsigned long off;

	/* "name+0x4/0x1f0", with " [module]" after it for module symbols */
	sprint_symbol(buf, addr);
	plus = strchr(buf, '+');
	slash = plus ? strchr(plus, '/') : NULL;
	if (!slash || (want && (strlen(want) != plus - buf ||
				strncmp(buf, want, plus - buf))))
		return -1;
	*slash = 0;
	if (kstrtoul(plus + 1, 0, &off))
		return -1;
	return off;
}

/*
 * kallsyms_lookup_name is not exported; a kprobe on it yields an address
 * inside it (past the ENDBR64 on 6.12), and the symbol printer tells how far
 * inside.
 */
static int mlf_find_lookup(void)
{
	struct kprobe kp = { .symbol_name = "kallsyms_lookup_name" };
	unsigned long addr;
	long off;
	int ret;

	ret = register_kprobe(&kp);
	if (ret) {
		pr_err("cannot load: no kprobe on kallsyms_lookup_name (%d)\n",
		       ret);
		return ret;
	}
	addr = (unsigned long)kp.addr;
	unregister_kprobe(&kp);
	off = mlf_symbol_offset(addr, "kallsyms_lookup_name");
	if (off < 0) {
		pr_err("cannot load: kprobe address %pS is not in kallsyms_lookup_name\n",
		       (void *)addr);
		return -ENOENT;
	}
	__static_call_update(&STATIC_CALL_KEY(mlf_sc_lookup),
			     STATIC_CALL_TRAMP_ADDR(mlf_sc_lookup),
			     (void *)(addr - off));
	return 0;
}

/* The start of function @sym, or 0 (with the reason logged). */
static unsigned long mlf_resolve(const char *sym, bool func)
{
	unsigned long addr = static_call(mlf_sc_lookup)(sym);

	if (!addr) {
		pr_err("cannot load: kernel symbol %s not found\n", sym);
		return 0;
	}
	if (func && mlf_symbol_offset(addr, NULL) != 0) {
		pr_err("cannot load: kernel symbol %s resolves to %pS\n", sym,
		       (void *)addr);
		return 0;
	}
	return addr;
}

int mlf_compat_init(const char *debug_require_symbol)
{
	unsigned long addr;
	unsigned int i;
	int ret;

	ret = mlf_find_lookup();
	if (ret)
		return ret;
	for (i = 0; i < ARRAY_SIZE(mlf_funcs); i++) {
		addr = mlf_resolve(mlf_funcs[i].sym, true);
		if (!addr)
			return -ENOENT;
		__static_call_update(mlf_funcs[i].key, mlf_funcs[i].tramp,
				     (void *)addr);
	}
#ifdef MLF_HAVE_THP
	mlf_huge_zero_pfn = (unsigned long *)mlf_resolve("huge_zero_pfn", false);
	if (!mlf_huge_zero_pfn)
		return -ENOENT;
#endif
	/* Lets a test prove that a missing symbol fails the load cleanly. */
	if (debug_require_symbol && *debug_require_symbol &&
	    !mlf_resolve(debug_require_symbol, false))
		return -ENOENT;
	return 0;
}

/*
 * mlock_fixup()'s test, less its gate VMA check: the VMAs here come from the
 * mm's tree, and the gate VMA is never in it.
 */
bool mlf_vma_lockable(struct vm_area_struct *vma)
{
	if (vma->vm_flags & VM_SPECIAL)
		return false;
#ifdef VM_DROPPABLE
	if (vma->vm_flags & VM_DROPPABLE)
		return false;
#endif
	if (is_vm_hugetlb_page(vma))
		return false;
	/* DAX and secretmem are files: anonymous memory skips the calls. */
	return !vma->vm_file ||
	       (!vma_is_dax(vma) && !mlf_call(vma_is_secretmem)(vma));
}

#ifndef MLF_MLOCK_LARGE_FOLIOS
unsigned int mlf_pte_folio_step(struct folio *folio, struct vm_area_struct *vma,
				pte_t *pte, unsigned long addr,
				unsigned long start, unsigned long end,
				bool lock, bool *act)
{
	/* 6.1 leaves pte-mapped THPs alone in both directions. */
	*act = !folio_test_large(folio);
	return 1;
}
#else
/* How many ptes from @pte map consecutive pages of @folio, up to @end. */
static unsigned int mlf_folio_pte_run(struct folio *folio, pte_t *pte,
				      unsigned long addr, unsigned long end)
{
	unsigned long pfn = pte_pfn(ptep_get(pte));
	unsigned long last = folio_pfn(folio) + folio_nr_pages(folio);
	unsigned int max = min((end - addr) >> PAGE_SHIFT, last - pfn);
	unsigned int n;

	for (n = 1; n < max; n++) {
		pte_t next = ptep_get(pte + n);

		if (!pte_present(next) || pte_pfn(next) != pfn + n)
			break;
	}
	return n;
}

/* folio_within_range(): does the folio lie wholly in [start, end) of vma? */
static bool mlf_folio_within(struct folio *folio, struct vm_area_struct *vma,
			     unsigned long start, unsigned long end)
{
	pgoff_t pgoff = folio_pgoff(folio);
	unsigned long addr;

	start = max(start, vma->vm_start);
	end = min(end, vma->vm_end);
	if (!in_range(pgoff, vma->vm_pgoff, vma_pages(vma)))
		return false;
	addr = vma->vm_start + ((pgoff - vma->vm_pgoff) << PAGE_SHIFT);
	return !(addr < start || end - addr < folio_size(folio));
}

unsigned int mlf_pte_folio_step(struct folio *folio, struct vm_area_struct *vma,
				pte_t *pte, unsigned long addr,
				unsigned long start, unsigned long end,
				bool lock, bool *act)
{
	unsigned int step;

	if (!folio_test_large(folio)) {
		*act = true;
		return 1;
	}
	step = mlf_folio_pte_run(folio, pte, addr, end);
	*act = !lock || (mlf_folio_within(folio, vma, start, end) &&
			 step == folio_nr_pages(folio));
	return step;
}
#endif

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
	return !((vma->vm_flags ^ flags) & ~VM_SOFTDIRTY);
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

#ifndef MLF_HAVE_VMA_MODIFY_FLAGS
/* mlock_fixup() of 6.1; *prev is left at the VMA now covering the piece. */
static int mlf_fixup(struct ma_state *mas, struct vm_area_struct *vma,
		     struct vm_area_struct **prev, unsigned long start,
		     unsigned long end, vm_flags_t newflags, struct mlf_ctx *ctx)
{
	struct mm_struct *mm = vma->vm_mm;
	vm_flags_t oldflags = vma->vm_flags;
	struct vm_area_struct *merged;
	pgoff_t pgoff;
	int ret = 0;

	if (newflags == oldflags || !mlf_vma_lockable(vma)) {
		mlf_skip_pages(ctx, vma, start, end);
		goto out;
	}

	if (mlf_stays_alone(vma, *prev, mas, start, end, newflags))
		goto modified;
	pgoff = vma->vm_pgoff + ((start - vma->vm_start) >> PAGE_SHIFT);
	merged = mlf_call(vma_merge)(mm, *prev, start, end, newflags,
				     vma->anon_vma, vma->vm_file, pgoff,
				     vma_policy(vma), vma->vm_userfaultfd_ctx,
				     anon_vma_name(vma));
	if (merged) {
		vma = merged;
	} else {
		if (start != vma->vm_start) {
			ret = mlf_call(split_vma)(mm, vma, start, 1);
			if (ret)
				goto out;
		}
		if (end != vma->vm_end) {
			ret = mlf_call(split_vma)(mm, vma, end, 0);
			if (ret)
				goto out;
		}
	}
modified:
	mlf_account(mm, start, end, oldflags, newflags);
	mlf_fixup_pages(vma, start, end, oldflags, newflags, ctx);
out:
	*prev = vma;
	return ret;
}

int mlf_apply_range(struct mm_struct *mm, struct mlf_vma_cache *vc,
		    unsigned long start, unsigned long len, vm_flags_t flags,
		    struct mlf_ctx *ctx)
{
	MA_STATE(mas, &mm->mm_mt, start, start);
	unsigned long nstart, end, tmp;
	struct vm_area_struct *vma, *prev;
	void *sides[2];
	vm_flags_t newflags;
	int error;

	lockdep_assert_held_write(&mm->mmap_lock);	/* VMAs change */
	end = start + len;
	if (end < start)
		return -EINVAL;
	if (end == start)
		return 0;
	vma = mlf_tree_walk(&mas);
	if (!vma)
		return -ENOMEM;
	newflags = (vma->vm_flags & MLF_VM_LOCKED_CLEAR_MASK) | flags;
	if (mlf_walked_alone(&mas, vma, start, end, newflags, &sides[0],
			     &sides[1])) {
		mlf_fixup_in_place(vma, start, end, newflags, ctx);
		return 0;
	}
	if (start > vma->vm_start) {
		prev = vma;
	} else {
		struct ma_state back = mas;

		prev = mas_prev(&back, 0);
	}

	for (nstart = start; ; ) {
		newflags = (vma->vm_flags & MLF_VM_LOCKED_CLEAR_MASK) | flags;
		tmp = min(vma->vm_end, end);
		error = mlf_fixup(&mas, vma, &prev, nstart, tmp, newflags,
				  ctx);
		if (error)
			return error;
		nstart = max(tmp, prev->vm_end);
		mlf_merged_over(prev, tmp, min(nstart, end), ctx);
		if (nstart >= end)
			return 0;
		/* A merge or split may have changed the tree: walk again. */
		mas_set(&mas, prev->vm_end);
		vma = mas_find(&mas, ULONG_MAX);
		if (!vma || vma->vm_start != nstart)
			return -ENOMEM;
	}
}

void mlf_apply_all(struct mm_struct *mm, vm_flags_t to_add, struct mlf_ctx *ctx)
{
	MA_STATE(mas, &mm->mm_mt, 0, 0);
	struct vm_area_struct *vma, *prev = NULL;

	lockdep_assert_held_write(&mm->mmap_lock);	/* VMAs change */
	mas_for_each(&mas, vma, ULONG_MAX) {
		vm_flags_t newflags = (vma->vm_flags & MLF_VM_LOCKED_CLEAR_MASK) |
				      to_add;
		unsigned long end = vma->vm_end;

		mlf_fixup(&mas, vma, &prev, vma->vm_start, end, newflags, ctx);
		mlf_merged_next(prev, end, ctx);
		mas_pause(&mas);
		cond_resched();
	}
}
#else /* MLF_HAVE_VMA_MODIFY_FLAGS */
/* mlock_fixup() of 6.12; on error *prev is an ERR_PTR, as there. */
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
		vma = mlf_call(vma_modify_flags)(vmi, *prev, vma, start, end,
						 newflags);
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
 * mm->mm_lock_seq, a seqcount, counts those holds: two more than in the
 * caching call means ours is the very next one.  The same counter tells the
 * kernel's per-VMA locks whether a VMA is being written.  A count a wrap of
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
	if (!vma || READ_ONCE(mm->mm_lock_seq.sequence) != vc->seq + 2 ||
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
	vc->seq = READ_ONCE(mm->mm_lock_seq.sequence);
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
	prev = vma_prev(&vmi);
	if (start > vma->vm_start)
		prev = vma;

	nstart = start;
	tmp = vma->vm_start;
	for_each_vma_range(vmi, vma, end) {
		int error;

		newflags = (vma->vm_flags & MLF_VM_LOCKED_CLEAR_MASK) | flags;

		if (vma->vm_start != tmp)
			return -ENOMEM;
		tmp = min(vma->vm_end, end);
		error = mlf_fixup(&vmi, vma, &prev, nstart, tmp, newflags,
				  ctx);
		if (error)
			return error;
		/* vma_iter_end(): where the VMA now holding the piece ends. */
		nstart = vmi.mas.last + 1;
		mlf_merged_over(prev, tmp, min(nstart, end), ctx);
		tmp = nstart;
	}
	return tmp < end ? -ENOMEM : 0;
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
#endif /* MLF_HAVE_VMA_MODIFY_FLAGS */
