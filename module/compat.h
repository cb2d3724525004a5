/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The compat layer: every difference between the supported kernels and
 * every kernel symbol the module resolves at load time lives here and in
 * compat.c.  Adding a kernel series means adding a block to the feature
 * table below, any new symbol to compat.c's list, and a row in the README's
 * supported-kernels table.
 *
 * The resolved functions are not exported.  Where a kernel header declares
 * one, compat.c asserts at build time that our prototype is its type; the
 * others are declared only in mm/internal.h or nowhere, so a wrong prototype
 * there is a crash, not a build error: each is written for, and gated on,
 * the feature it was read from.
 */
#ifndef MLOCKFAST_COMPAT_H
#define MLOCKFAST_COMPAT_H

#include <linux/version.h>
#include <linux/mm.h>
#include <linux/huge_mm.h>
#include <linux/static_call.h>

/*
 * The kernel differences, each named after what it stands for.  The series
 * blocks below are the one table of them and the only place a series is
 * named: a new series is a block that says which it has.
 *
 * MLF_HAVE_VMA_MODIFY_FLAGS	vma_modify_flags() merges or splits a VMA
 *				for new flags (6.12); else vma_merge() and
 *				split_vma() (6.1)
 * MLF_HAVE_MUNLOCK_FOLIO	munlock_folio(); else munlock_page()
 * MLF_MLOCK_DRAIN_LOCAL	the kernel's "drain this CPU's mlock batch"
 * MLF_PTE_TABLES_MAY_VANISH	khugepaged frees a file VMA's page tables
 *				holding no mmap_lock, so they are mapped the
 *				kernel's way, __pte_offset_map_lock() (6.12)
 * MLF_HAVE_PTDESC		a page table's lock is in its struct ptdesc
 * MLF_MAS_HAS_STATUS		struct ma_state has status and end (6.12)
 * MLF_VMA_FLAGS_NEED_WRITE_LOCK a VMA's flags change through vm_flags_*()
 *				after vma_start_write() (per-VMA locks, 6.12)
 * MLF_MLOCK_LARGE_FOLIOS	mlock acts on pte-mapped large folios (6.12:
 *				locks one the range maps whole, unlocks any);
 *				else it leaves them alone (6.1)
 * MLF_HAVE_MM_LOCK_SEQ		mm->mm_lock_seq counts the mmap_lock's write
 *				holds (6.12, with CONFIG_PER_VMA_LOCK)
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 1, 0) && \
	LINUX_VERSION_CODE < KERNEL_VERSION(6, 2, 0)
#define MLF_SERIES "6.1"
#define MLF_MLOCK_DRAIN_LOCAL	"mlock_page_drain_local"
#elif LINUX_VERSION_CODE >= KERNEL_VERSION(6, 12, 0) && \
	LINUX_VERSION_CODE < KERNEL_VERSION(6, 13, 0)
#define MLF_SERIES "6.12"
#define MLF_HAVE_VMA_MODIFY_FLAGS 1
#define MLF_HAVE_MUNLOCK_FOLIO 1
#define MLF_MLOCK_DRAIN_LOCAL	"mlock_drain_local"
#define MLF_PTE_TABLES_MAY_VANISH 1
#define MLF_HAVE_PTDESC 1
#define MLF_MAS_HAS_STATUS 1
#define MLF_VMA_FLAGS_NEED_WRITE_LOCK 1
#define MLF_MLOCK_LARGE_FOLIOS 1
#ifdef CONFIG_PER_VMA_LOCK
#define MLF_HAVE_MM_LOCK_SEQ 1
#endif
#else
#error "mlockfast supports the 6.1 and 6.12 kernel series only (see README)"
#endif

/*
 * Kernel configurations the module adapts to, named after the feature.
 *
 * MLF_HAVE_THP: transparent huge pages.  PREEMPT_RT kernels have none
 * (Kconfig forbids THP with PREEMPT_RT), so there no pmd maps a folio, and
 * __pmd_trans_huge_lock and huge_zero_pfn do not exist.
 */
#ifdef CONFIG_TRANSPARENT_HUGEPAGE
#define MLF_HAVE_THP 1
#endif

/*
 * What the module cannot do without: kallsyms_lookup_name is found through
 * a kprobe, the stale-move notifier is an mmu notifier.  dkms.conf's
 * BUILD_EXCLUSIVE_CONFIG declines such a kernel before this is reached.
 */
#if !defined(CONFIG_KPROBES) || !defined(CONFIG_KALLSYMS) || \
	!defined(CONFIG_MMU_NOTIFIER) || !defined(CONFIG_X86_64) || \
	!defined(CONFIG_SMP)
#error "mlockfast needs X86_64, SMP, KPROBES, KALLSYMS and MMU_NOTIFIER"
#endif

/*
 * Kernel functions resolved through kallsyms at load.  They are called
 * through static calls, not function pointers: a static call is a direct
 * jump patched in at load, which IBT does not police.  That matters on 6.12
 * (CONFIG_X86_KERNEL_IBT=y), where the kernel seals (poisons) the ENDBR64 of
 * every function nobody takes the address of, these ones included, so an
 * indirect call to them would fault on IBT hardware.
 *
 * compat.c resolves each mlf_sc_<name> below to the kernel symbol named
 * beside it; the prototypes are the kernel's, per series.
 */
/* kallsyms_lookup_name, found through a kprobe */
unsigned long mlf_proto_lookup(const char *name);
DECLARE_STATIC_CALL(mlf_sc_lookup, mlf_proto_lookup);

#ifdef MLF_HAVE_THP
/* __pmd_trans_huge_lock */
spinlock_t *mlf_proto_pmd_trans_huge_lock(pmd_t *pmd,
					  struct vm_area_struct *vma);
DECLARE_STATIC_CALL(mlf_sc_pmd_trans_huge_lock, mlf_proto_pmd_trans_huge_lock);
#endif

/* __mm_populate */
int mlf_proto_mm_populate(unsigned long start, unsigned long len,
			  int ignore_errors);
DECLARE_STATIC_CALL(mlf_sc_mm_populate, mlf_proto_mm_populate);

void mlf_proto_lru_add_drain(void);
DECLARE_STATIC_CALL(mlf_sc_lru_add_drain, mlf_proto_lru_add_drain);

int mlf_proto_schedule_on_each_cpu(work_func_t func);
DECLARE_STATIC_CALL(mlf_sc_schedule_on_each_cpu,
		    mlf_proto_schedule_on_each_cpu);

void mlf_proto_mlock_folio(struct folio *folio);
DECLARE_STATIC_CALL(mlf_sc_mlock_folio, mlf_proto_mlock_folio);

bool mlf_proto_vma_is_secretmem(struct vm_area_struct *vma);
DECLARE_STATIC_CALL(mlf_sc_vma_is_secretmem, mlf_proto_vma_is_secretmem);

/* __x64_sys_mlock2, __x64_sys_munlock, ... for legacy mode */
long mlf_proto_syscall(const struct pt_regs *regs);
DECLARE_STATIC_CALL(mlf_sc_sys_mlock2, mlf_proto_syscall);
DECLARE_STATIC_CALL(mlf_sc_sys_munlock, mlf_proto_syscall);
DECLARE_STATIC_CALL(mlf_sc_sys_mlockall, mlf_proto_syscall);
DECLARE_STATIC_CALL(mlf_sc_sys_munlockall, mlf_proto_syscall);

/* MLF_MLOCK_DRAIN_LOCAL */
void mlf_proto_mlock_drain_local(void);
DECLARE_STATIC_CALL(mlf_sc_mlock_drain_local, mlf_proto_mlock_drain_local);

#ifdef MLF_HAVE_MUNLOCK_FOLIO
void mlf_proto_munlock_folio(struct folio *folio);
DECLARE_STATIC_CALL(mlf_sc_munlock_folio, mlf_proto_munlock_folio);
#else
void mlf_proto_munlock_page(struct page *page);
DECLARE_STATIC_CALL(mlf_sc_munlock_page, mlf_proto_munlock_page);
#endif

#ifdef MLF_PTE_TABLES_MAY_VANISH
/* __pte_offset_map_lock */
pte_t *mlf_proto_pte_offset_map_lock(struct mm_struct *mm, pmd_t *pmd,
				     unsigned long addr, spinlock_t **ptlp);
DECLARE_STATIC_CALL(mlf_sc_pte_offset_map_lock,
		    mlf_proto_pte_offset_map_lock);
#endif

#ifdef MLF_HAVE_VMA_MODIFY_FLAGS
struct vm_area_struct *
mlf_proto_vma_modify_flags(struct vma_iterator *vmi,
			   struct vm_area_struct *prev,
			   struct vm_area_struct *vma, unsigned long start,
			   unsigned long end, unsigned long new_flags);
DECLARE_STATIC_CALL(mlf_sc_vma_modify_flags, mlf_proto_vma_modify_flags);
#else
struct vm_area_struct *
mlf_proto_vma_merge(struct mm_struct *mm, struct vm_area_struct *prev,
		    unsigned long addr, unsigned long end,
		    unsigned long vm_flags, struct anon_vma *anon_vma,
		    struct file *file, pgoff_t pgoff, struct mempolicy *policy,
		    struct vm_userfaultfd_ctx uctx,
		    struct anon_vma_name *anon_name);
DECLARE_STATIC_CALL(mlf_sc_vma_merge, mlf_proto_vma_merge);

int mlf_proto_split_vma(struct mm_struct *mm, struct vm_area_struct *vma,
			unsigned long addr, int new_below);
DECLARE_STATIC_CALL(mlf_sc_split_vma, mlf_proto_split_vma);
#endif

#define mlf_call(name) static_call(mlf_sc_##name)

#ifdef MLF_HAVE_THP
/* Kernel variables resolved at load (not exported). */
extern unsigned long *mlf_huge_zero_pfn;
#endif

int mlf_compat_init(const char *debug_require_symbol);
int mlf_maple_selftest(void);

/*
 * Hold on to this CPU while using its batch, as local_lock() does: without
 * PREEMPT_RT by disabling preemption; with it, by disabling migration only.
 * On RT spinlock_t sleeps, and what runs under a batch's lock takes
 * sleeping locks (the kernel's mlock_folio(), munlock_folio(), folio_put(),
 * mlock_drain_local()), so the task must stay preemptible there.
 */
static __always_inline void mlf_cpu_pin(void)
{
	if (IS_ENABLED(CONFIG_PREEMPT_RT))
		migrate_disable();
	else
		preempt_disable();
}

static __always_inline void mlf_cpu_unpin(void)
{
	if (IS_ENABLED(CONFIG_PREEMPT_RT))
		migrate_enable();
	else
		preempt_enable();
}

/*
 * Before a call into the kernel that takes sleeping locks on PREEMPT_RT:
 * there, being atomic is a bug ("scheduling while atomic" once the lock is
 * contended).  Debian's RT kernels lack CONFIG_DEBUG_ATOMIC_SLEEP, which
 * would catch it in the kernel; this catches it in the module, always, and
 * costs nothing elsewhere.
 */
static __always_inline void mlf_rt_assert_sleepable(void)
{
	if (IS_ENABLED(CONFIG_PREEMPT_RT))
		WARN_ON_ONCE(!preemptible());
}

/* The kernel's own per-CPU mlock batch, used where counts must be exact. */
static inline void mlf_kernel_mlock(struct folio *folio)
{
	mlf_rt_assert_sleepable();
	mlf_call(mlock_folio)(folio);
}

static inline void mlf_kernel_munlock(struct folio *folio)
{
	mlf_rt_assert_sleepable();
#ifdef MLF_HAVE_MUNLOCK_FOLIO
	mlf_call(munlock_folio)(folio);
#else
	mlf_call(munlock_page)(&folio->page);
#endif
}

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
 * could be PROT_NONE or huge each time).
 */
static inline pte_t *mlf_pte_map_lock(struct vm_area_struct *vma, pmd_t *pmd,
				      unsigned long addr, spinlock_t **ptl)
{
	unsigned long val = mlf_pmd_val(READ_ONCE(*pmd)), pfn;

#ifdef MLF_PTE_TABLES_MAY_VANISH
	/* (a present table, not a huge page: anything else, ask the kernel) */
	if (!vma_is_anonymous(vma) ||
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
	if (!(val & (_PAGE_PSE | _PAGE_DEVMAP)) &&
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

static inline struct folio *mlf_pmd_folio(pmd_t pmd)
{
	return page_folio(pmd_page(pmd));
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

/*
 * Which pte-mapped folios mlock acts on differs by series: 6.1 skips every
 * pte-mapped compound page; 6.12 mlocks a large folio only when the range
 * maps all of it, and munlocks it whenever it is met.  Returns how many ptes
 * the folio spans from @pte (the walk steps over them) and sets @act.
 */
unsigned int mlf_pte_folio_step(struct folio *folio, struct vm_area_struct *vma,
				pte_t *pte, unsigned long addr,
				unsigned long start, unsigned long end,
				bool lock, bool *act);

/* Whether mlock may set VM_LOCKED on the VMA (mlock_fixup's filter). */
bool mlf_vma_lockable(struct vm_area_struct *vma);

/* Set a VMA's flags with the mmap_lock held for writing. */
static inline void mlf_vma_set_flags(struct vm_area_struct *vma,
				     vm_flags_t flags)
{
#ifdef MLF_VMA_FLAGS_NEED_WRITE_LOCK
	vma_start_write(vma);
	vm_flags_reset_once(vma, flags);
#else
	WRITE_ONCE(vma->vm_flags, flags);
#endif
}

/* 6.1's VM_LOCKED_CLEAR_MASK, 6.12's ~VM_LOCKED_MASK */
#define MLF_VM_LOCKED_CLEAR_MASK	(~(VM_LOCKED | VM_LOCKONFAULT))

/*
 * The VMA half of mlock_fixup for one VMA piece: merge or split @vma so that
 * [start, end) is one VMA, account mm->locked_vm, and call the engine's
 * mlf_walk_pages() (with the flags set as mlock sets them) when the pages'
 * lock state changes, or its mlf_skip_pages() for a piece mlock leaves alone
 * but the populate step still visits.  The iteration over VMAs differs by
 * series, so the loops live in compat.c.  Direct calls: this is every
 * call's path, and an indirect call costs a retpoline.
 */
struct mlf_ctx;	/* the engine's, opaque here */
void mlf_walk_pages(struct mlf_ctx *c, struct vm_area_struct *vma,
		    unsigned long start, unsigned long end);
void mlf_skip_pages(struct mlf_ctx *c, struct vm_area_struct *vma,
		    unsigned long start, unsigned long end);

/*
 * The VMA an mm's last call found alone (neither split nor merged), for the
 * next call to use without a walk if the mm's tree cannot have changed since
 * (6.12, whose per-VMA locks count the mmap_lock's write holds; compat.c
 * says how).  Kept in the mm's state and used with the mmap_lock held for
 * writing.
 */
#ifdef MLF_HAVE_MM_LOCK_SEQ
#define MLF_VMA_CACHE 1
#endif

struct mlf_vma_cache {
#ifdef MLF_VMA_CACHE
	struct vm_area_struct *vma;	/* NULL: none */
	void *prev, *next;	/* the tree's entries beside it */
	unsigned int seq;	/* mm->mm_lock_seq in that call */
	unsigned long stamp;	/* jiffies then */
#endif
};

/*
 * As apply_vma_lock_flags(): 0, -ENOMEM for a hole, -EINVAL, or a split
 * error.  @vc: the mm's cache, or NULL.
 */
int mlf_apply_range(struct mm_struct *mm, struct mlf_vma_cache *vc,
		    unsigned long start, unsigned long len, vm_flags_t flags,
		    struct mlf_ctx *ctx);

/* As apply_mlockall_flags() for the VMAs: errors are ignored, as there. */
void mlf_apply_all(struct mm_struct *mm, vm_flags_t to_add,
		   struct mlf_ctx *ctx);

#endif /* MLOCKFAST_COMPAT_H */
