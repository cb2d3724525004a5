/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The VMA code (vma.c): mlock_fixup() and the loops over VMAs.
 */
#ifndef MLOCKFAST_VMA_H
#define MLOCKFAST_VMA_H

#include <linux/mm_types.h>
#include "compat.h"

struct mlf_ctx;	/* the engine's, opaque here */

/*
 * The VMA an mm's last call found alone (neither split nor merged), for the
 * next call to use without a walk if the mm's tree cannot have changed since
 * (kernels that count the mmap_lock's write holds: raw_mm.h).  Kept in the
 * mm's state and used with the mmap_lock held for writing.
 */
#ifdef MLF_HAVE_MM_LOCK_SEQ
#define MLF_VMA_CACHE 1
#endif

struct mlf_vma_cache {
#ifdef MLF_VMA_CACHE
	struct vm_area_struct *vma;	/* NULL: none */
	void *prev, *next;	/* the tree's entries beside it */
	unsigned int seq;	/* mlf_mm_write_seq() in that call */
	unsigned long stamp;	/* jiffies then */
#endif
};

/*
 * As apply_vma_lock_flags(): 0, -ENOMEM for a hole, -EINVAL, or a split
 * error.  For each piece, as mlock_fixup(): merge or split the VMA so that
 * the piece is one VMA, account mm->locked_vm, and call the engine's
 * mlf_walk_pages() (with the flags set as mlock sets them) when the pages'
 * lock state changes, or its mlf_skip_pages() for a piece mlock leaves
 * alone but the populate step still visits.  @vc: the mm's cache, or NULL.
 */
int mlf_apply_range(struct mm_struct *mm, struct mlf_vma_cache *vc,
		    unsigned long start, unsigned long len, vm_flags_t flags,
		    struct mlf_ctx *ctx);

/* As apply_mlockall_flags() for the VMAs: errors are ignored, as there. */
void mlf_apply_all(struct mm_struct *mm, vm_flags_t to_add,
		   struct mlf_ctx *ctx);

/* debug_selftest: the raw maple reads against the kernel's walk. */
int mlf_maple_selftest(void);

/* The engine's (engine.c), called for each piece. */
void mlf_walk_pages(struct mlf_ctx *c, struct vm_area_struct *vma,
		    unsigned long start, unsigned long end);
void mlf_skip_pages(struct mlf_ctx *c, struct vm_area_struct *vma,
		    unsigned long start, unsigned long end);

#endif /* MLOCKFAST_VMA_H */
