/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Raw reads of page tables, page flags and mm fields, for the engine's walk
 * and the VMA cache: the kernel's accessors cost more per page than the
 * rest of the fast paths.  The kernel facts they rely on (x86-64, every
 * supported series):
 *
 *  - a pte, pmd, pud or p4d is its raw value everywhere but under Xen PV
 *    (pte_val() and friends are paravirt calls, patched into a move);
 *  - _PAGE_PRESENT, _PAGE_PSE (a leaf above the pte level), _PAGE_RW,
 *    _PAGE_SPECIAL and PTE_PFN_MASK mean what arch/x86's pgtable_types.h
 *    says, and a present entry has no PROT_NONE inversion to undo;
 *  - a page table's lock is its page's (or ptdesc's) ptlock;
 *  - a page's and a folio's flags are one word holding the PG_* bits and,
 *    at ZONEID_PGSHIFT, the zone id; a small folio mapped once has
 *    _mapcount 0;
 *  - mm->context.ctx_id is never reused; mm->mm_lock_seq counts the
 *    mmap_lock's write holds (MLF_HAVE_MM_LOCK_SEQ);
 *  - a writer holding an rwsem is its owner: the owner word holds its task
 *    (bit 0 set only for readers, bit 1 a flag), or on PREEMPT_RT the
 *    rtmutex inside is held by it (bit 0 of its owner a flag).
 *
 * Where a series differs, the feature table in compat.h says so.
 */
#ifndef MLOCKFAST_RAW_MM_H
#define MLOCKFAST_RAW_MM_H

#include <linux/mm.h>
#include <linux/pgtable.h>
#include "compat.h"

/*
 * pte_val() and pmd_val() are paravirt calls (CONFIG_PARAVIRT_XXL: Debian
 * builds both series with Xen PV support), patched at boot into a move of
 * the raw value everywhere but under Xen PV, where they translate machine
 * frames.  The patched call site still costs instructions on every entry
 * the walk reads: take the raw value directly unless this is Xen PV.
 */
static __always_inline unsigned long mlf_pte_val(pte_t pte)
{
	if (cpu_feature_enabled(X86_FEATURE_XENPV))
		return pte_val(pte);
	return native_pte_val(pte);
}

static __always_inline unsigned long mlf_pmd_val(pmd_t pmd)
{
	if (cpu_feature_enabled(X86_FEATURE_XENPV))
		return pmd_val(pmd);
	return native_pmd_val(pmd);
}

/*
 * vm_normal_page() for the VMAs mlock walks: they are never VM_PFNMAP or
 * VM_MIXEDMAP (mlf_vma_lockable), so a special pte (the zero page, devmap)
 * never has a normal folio behind it and any other pte does.
 */
static __always_inline struct folio *mlf_pte_folio(pte_t pte)
{
	struct page *page;

	if (pte_special(pte))
		return NULL;
	page = pfn_to_page(pte_pfn(pte));
	if (is_zone_device_page(page))
		return NULL;
	return page_folio(page);
}

/*
 * The page table @pmd points to, mapped and locked; @pmd was seen to point
 * to one.  NULL (6.12 only) when the table went away: the walk retries.
 *
 * A table stays while the mmap_lock is held, for writing (the lock and
 * unlock walks) or reading (mlf_pay_run()), except on 6.12 where khugepaged
 * retracts a file VMA's tables holding neither, which is why the kernel's
 * pte_offset_map_lock() maps under RCU and checks the pmd again.  An
 * anonymous VMA's tables are collapsed only under the mmap_lock held for
 * writing, and 6.1 retracts under it too: for those, find the table's page
 * once (pte_offset_map_lock() finds it twice, and decodes the pmd as if it
 * could be PROT_NONE or huge each time).  Where MADV_DONTNEED frees empty
 * tables under the read lock (MLF_ANON_TABLES_FREED_SHARED), a walk holding
 * only that (@shared) asks the kernel too.
 */
static __always_inline pte_t *mlf_pte_map_lock(struct vm_area_struct *vma,
					       pmd_t *pmd, unsigned long addr,
					       spinlock_t **ptl, bool shared)
{
	unsigned long val = mlf_pmd_val(READ_ONCE(*pmd)), pfn;

#ifdef MLF_PTE_TABLES_MAY_VANISH
#ifndef MLF_ANON_TABLES_FREED_SHARED
	shared = false;
#endif
	/* (a present table, not a huge page: anything else, ask the kernel) */
	if (!vma_is_anonymous(vma) || shared ||
	    (val & (_PAGE_PRESENT | _PAGE_PSE)) != _PAGE_PRESENT)
		return mlf_call(pte_offset_map_lock)(vma->vm_mm, pmd, addr,
						     ptl);
#endif
	pfn = (val & PTE_PFN_MASK) >> PAGE_SHIFT;
#ifdef MLF_HAVE_PTDESC
	*ptl = ptlock_ptr(page_ptdesc(pfn_to_page(pfn)));
#else
	*ptl = ptlock_ptr(pfn_to_page(pfn));
#endif
#ifdef MLF_PTE_TABLES_MAY_VANISH
	rcu_read_lock();	/* as pte_offset_map(): pte_unmap() ends it */
#endif
	spin_lock(*ptl);
	return (pte_t *)__va(PFN_PHYS(pfn)) + pte_index(addr);
}

/*
 * Whether the pte of @addr in the page table @pmd points to is not present,
 * read without the table's lock: a first look, which a fault then settles
 * (the pte may change as soon as it is read, locked or not).  Under RCU,
 * which frees a table that goes (pte_offset_map() maps under it too).
 * False when @pmd is no page table.
 */
static inline bool mlf_pte_absent(pmd_t *pmd, unsigned long addr)
{
	unsigned long val;
	bool absent = false;

	rcu_read_lock();
	val = mlf_pmd_val(READ_ONCE(*pmd));
	if ((val & (_PAGE_PRESENT | _PAGE_PSE)) == _PAGE_PRESENT) {
		pte_t *table = __va(PFN_PHYS((val & PTE_PFN_MASK) >> PAGE_SHIFT));

		absent = !pte_present(ptep_get(table + pte_index(addr)));
	}
	rcu_read_unlock();
	return absent;
}

/*
 * The huge pmd's lock if @pmd maps a folio (or a migration entry of one),
 * else NULL: walk its page table.  Without THP no pmd maps a folio.
 */
static inline spinlock_t *mlf_pmd_huge_lock(pmd_t *pmd,
					    struct vm_area_struct *vma)
{
#ifdef MLF_HAVE_THP
	pmd_t pmdv = READ_ONCE(*pmd);
	unsigned long val = mlf_pmd_val(pmdv);

	/*
	 * Not pmd_trans_huge() nor pmd_devmap(): neither flag; nor
	 * is_swap_pmd(): none, or present (pmd_present() without _PAGE_PSE).
	 */
#ifdef MLF_HAVE_PAGE_DEVMAP
	const unsigned long huge = _PAGE_PSE | _PAGE_DEVMAP;
#else
	const unsigned long huge = _PAGE_PSE;
#endif

	if (!(val & huge) &&
	    (pmd_none(pmdv) || (val & (_PAGE_PRESENT | _PAGE_PROTNONE))))
		return NULL;
	return mlf_call(pmd_trans_huge_lock)(pmd, vma);
#else
	return NULL;
#endif
}

/* is_huge_zero_pmd() without the unexported huge_zero_pfn reference. */
static inline bool mlf_is_huge_zero_pmd(pmd_t pmd)
{
#ifdef MLF_HAVE_THP
	return pmd_present(pmd) &&
	       READ_ONCE(*mlf_huge_zero_pfn) == pmd_pfn(pmd);
#else
	return false;
#endif
}

/* The folio a present pmd maps, NULL for one mlock leaves alone. */
static inline struct folio *mlf_pmd_folio(pmd_t pmd)
{
	struct folio *folio = page_folio(pmd_page(pmd));

#ifdef MLF_MLOCK_SKIPS_DEVICE_PMD
	if (folio_is_zone_device(folio))
		return NULL;
#endif
	return folio;
}

/*
 * A number that names @mm for the life of the boot: x86's TLB generation id
 * (mm->context.ctx_id), never reused and never 0, unlike the mm's address,
 * which a fork loop's next child usually gets.
 */
static inline u64 mlf_mm_id(const struct mm_struct *mm)
{
	return mm->context.ctx_id;
}

/* The word of a page's or folio's flags (a memdesc_flags_t's, 7.2). */
#ifdef MLF_HAVE_MEMDESC_FLAGS
#define MLF_FLAGS_WORD(flags)	((flags).f)
#else
#define MLF_FLAGS_WORD(flags)	(flags)
#endif

/* A folio's or a page's flags word, read once. */
static __always_inline unsigned long mlf_folio_flags(const struct folio *folio)
{
	return READ_ONCE(MLF_FLAGS_WORD(folio->flags));
}

static __always_inline unsigned long mlf_page_flags(const struct page *page)
{
	return READ_ONCE(MLF_FLAGS_WORD(page->flags));
}

/* A small folio mapped by exactly one pte (folio_mapcount() == 1). */
static __always_inline bool mlf_folio_mapped_once(const struct folio *folio)
{
	return atomic_read(&folio->_mapcount) == 0;
}

/*
 * The small page a pte maps if it is present, writable where COW matters
 * (@cow) and not special; else NULL.
 */
static __always_inline struct page *mlf_plain_page(pte_t ptent, bool cow)
{
	unsigned long want = _PAGE_PRESENT | (cow ? _PAGE_RW : 0);
	unsigned long val = mlf_pte_val(ptent);

	if ((val & (want | _PAGE_SPECIAL)) != want)
		return NULL;
	/* Present: no PROT_NONE inversion to undo, as pte_pfn() checks. */
	return pfn_to_page((val & PTE_PFN_MASK) >> PAGE_SHIFT);
}

/*
 * An upper-level entry the walk can descend through: present and not a leaf.
 * The VMAs mlock walks map no 1G pages (hugetlb and DAX are skipped), so
 * anything else is empty or bad, and the kernel's walker treats both as
 * empty (it clears bad ones; we leave them alone).  One test of the raw
 * flags costs less than pXd_none() and pXd_bad() together.
 */
static __always_inline bool mlf_table_entry(unsigned long val)
{
	return (val & (_PAGE_PRESENT | _PAGE_PSE)) == _PAGE_PRESENT;
}

#ifdef MLF_HAVE_MM_LOCK_SEQ
/* mm->mm_lock_seq: one more at each write lock and each unlock. */
static __always_inline unsigned int mlf_mm_write_seq(const struct mm_struct *mm)
{
	return READ_ONCE(mm->mm_lock_seq.sequence);
}
#endif

#endif /* MLOCKFAST_RAW_MM_H */
