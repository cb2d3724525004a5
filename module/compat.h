/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The compat layer, the module's bottom: every difference between the
 * supported kernels and every kernel symbol the module resolves at load
 * lives here, in compat_symbols.h and compat.c, and in the two headers of
 * kernel internals read directly (raw_maple.h, raw_mm.h).  None of them
 * calls anything of the module's.  Adding a kernel series means adding a
 * block to the feature table below, any new symbol to compat_symbols.h, a
 * shim where an API changed, and a row in the README's supported-kernels
 * table.
 *
 * The resolved functions are not exported.  Where a kernel header declares
 * one, our prototype is its type (typeof); the others are declared only in
 * mm/internal.h or nowhere, so a wrong prototype there is a crash, not a
 * build error: each is written for, and gated on, the feature it was read
 * from.
 */
#ifndef MLOCKFAST_COMPAT_H
#define MLOCKFAST_COMPAT_H

#include <linux/version.h>
#include <linux/mm.h>
#include <linux/huge_mm.h>
#include <linux/static_call.h>
#include <linux/stringify.h>
#include <linux/dax.h>
#include <linux/hugetlb_inline.h>
#include <linux/secretmem.h>
#include <linux/swap.h>
#include <linux/workqueue.h>

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
 * MLF_NEED_MLOCK_DRAIN		the kernel's "does that CPU's mlock batch
 *				hold anything"
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
 *				holds (6.12 on, with CONFIG_PER_VMA_LOCK)
 * MLF_PTE_OFFSET_MAP_LOCK	the kernel function that maps and locks a
 *				page table: __pte_offset_map_lock (6.12),
 *				pte_offset_map_lock (7.2 on)
 * MLF_HAVE_PAGE_DEVMAP		x86's _PAGE_DEVMAP bit (pmd_devmap()); gone
 *				in 7.2
 * MLF_HAVE_VMA_FLAGS_T		a VMA's flags are a vma_flags_t (7.2 on): set
 *				with vma_flags_reset_once(), and
 *				vma_modify_flags() takes them by pointer and
 *				gives back the merged VMA's sticky flags
 * MLF_HAVE_MEMDESC_FLAGS	page->flags and folio->flags are a
 *				memdesc_flags_t (7.2 on)
 * MLF_MLOCK_SKIPS_DEVICE_PMD	mlock leaves a pmd-mapped zone-device folio
 *				alone (7.2 on)
 * MLF_ZAP_LEAVES_MUNLOCKS_QUEUED unmapping leaves its munlocks in this CPU's
 *				mlock batch (7.2 on: free_pages_and_swap_cache()
 *				no longer drains), for the next drain
 * MLF_HAVE_FTRACE_REGS_SET_IP	an ftrace handler sets the traced function's
 *				new ip with ftrace_regs_set_instruction_pointer()
 *				and reads the regs through arch_ftrace_regs()
 *				(6.12 on); else ftrace_instruction_pointer_set()
 *				and fregs->regs (6.1)
 * MLF_LRU_ADD_DRAIN_MM_INTERNAL lru_add_drain() is declared in mm/internal.h
 *				only (7.3: no longer in linux/swap.h), so its
 *				prototype is ours
 * MLF_HAVE_ANON_PGOFF		a VMA has an anonymous page offset apart from
 *				vm_pgoff, vma_start_anon_pgoff(), from which
 *				its anonymous folios' index counts (7.3): they
 *				differ in a MAP_PRIVATE file or /dev/zero VMA
 * MLF_MAS_CHECKS_LOCK_HOLD	a maple state records the lock hold it was
 *				walked in (ld_seq), which the tree's calls
 *				check (7.3 with CONFIG_LOCKDEP): only the
 *				kernel's own walk may start one
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 1, 0) && \
	LINUX_VERSION_CODE < KERNEL_VERSION(6, 2, 0)
#define MLF_SERIES "6.1"
#define MLF_MLOCK_DRAIN_LOCAL	"mlock_page_drain_local"
#define MLF_NEED_MLOCK_DRAIN	"need_mlock_page_drain"
#define MLF_HAVE_PAGE_DEVMAP 1
#elif LINUX_VERSION_CODE >= KERNEL_VERSION(6, 12, 0) && \
	LINUX_VERSION_CODE < KERNEL_VERSION(6, 13, 0)
#define MLF_SERIES "6.12"
#define MLF_HAVE_VMA_MODIFY_FLAGS 1
#define MLF_HAVE_MUNLOCK_FOLIO 1
#define MLF_MLOCK_DRAIN_LOCAL	"mlock_drain_local"
#define MLF_NEED_MLOCK_DRAIN	"need_mlock_drain"
#define MLF_PTE_TABLES_MAY_VANISH 1
#define MLF_PTE_OFFSET_MAP_LOCK	__pte_offset_map_lock
#define MLF_HAVE_PAGE_DEVMAP 1
#define MLF_HAVE_FTRACE_REGS_SET_IP 1
#define MLF_HAVE_PTDESC 1
#define MLF_MAS_HAS_STATUS 1
#define MLF_VMA_FLAGS_NEED_WRITE_LOCK 1
#define MLF_MLOCK_LARGE_FOLIOS 1
#ifdef CONFIG_PER_VMA_LOCK
#define MLF_HAVE_MM_LOCK_SEQ 1
#endif
#elif LINUX_VERSION_CODE >= KERNEL_VERSION(7, 2, 0) && \
	LINUX_VERSION_CODE < KERNEL_VERSION(7, 3, 0)
#define MLF_SERIES "7.2"
#define MLF_HAVE_VMA_MODIFY_FLAGS 1
#define MLF_HAVE_MUNLOCK_FOLIO 1
#define MLF_MLOCK_DRAIN_LOCAL	"mlock_drain_local"
#define MLF_NEED_MLOCK_DRAIN	"need_mlock_drain"
#define MLF_PTE_TABLES_MAY_VANISH 1
#define MLF_PTE_OFFSET_MAP_LOCK	pte_offset_map_lock
#define MLF_HAVE_FTRACE_REGS_SET_IP 1
#define MLF_HAVE_PTDESC 1
#define MLF_MAS_HAS_STATUS 1
#define MLF_VMA_FLAGS_NEED_WRITE_LOCK 1
#define MLF_MLOCK_LARGE_FOLIOS 1
#define MLF_HAVE_VMA_FLAGS_T 1
#define MLF_HAVE_MEMDESC_FLAGS 1
#define MLF_MLOCK_SKIPS_DEVICE_PMD 1
#define MLF_ZAP_LEAVES_MUNLOCKS_QUEUED 1
#ifdef CONFIG_PER_VMA_LOCK
#define MLF_HAVE_MM_LOCK_SEQ 1
#endif
#elif LINUX_VERSION_CODE >= KERNEL_VERSION(7, 3, 0) && \
	LINUX_VERSION_CODE < KERNEL_VERSION(7, 4, 0)
#define MLF_SERIES "7.3"
#define MLF_HAVE_VMA_MODIFY_FLAGS 1
#define MLF_HAVE_MUNLOCK_FOLIO 1
#define MLF_MLOCK_DRAIN_LOCAL	"mlock_drain_local"
#define MLF_NEED_MLOCK_DRAIN	"need_mlock_drain"
#define MLF_PTE_TABLES_MAY_VANISH 1
#define MLF_PTE_OFFSET_MAP_LOCK	pte_offset_map_lock
#define MLF_HAVE_FTRACE_REGS_SET_IP 1
#define MLF_HAVE_PTDESC 1
#define MLF_MAS_HAS_STATUS 1
#define MLF_VMA_FLAGS_NEED_WRITE_LOCK 1
#define MLF_MLOCK_LARGE_FOLIOS 1
#define MLF_HAVE_VMA_FLAGS_T 1
#define MLF_HAVE_MEMDESC_FLAGS 1
#define MLF_MLOCK_SKIPS_DEVICE_PMD 1
#define MLF_ZAP_LEAVES_MUNLOCKS_QUEUED 1
#define MLF_LRU_ADD_DRAIN_MM_INTERNAL 1
#define MLF_HAVE_ANON_PGOFF 1
#ifdef CONFIG_PER_VMA_LOCK
#define MLF_HAVE_MM_LOCK_SEQ 1
#endif
#ifdef CONFIG_LOCKDEP
#define MLF_MAS_CHECKS_LOCK_HOLD 1
#endif
#else
#error "mlockfast supports the 6.1, 6.12, 7.2 and 7.3 kernel series only (see README)"
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
 * MLF_ANON_TABLES_FREED_SHARED: MADV_DONTNEED may free an anonymous VMA's
 * empty page tables holding the mmap_lock for reading only
 * (CONFIG_PT_RECLAIM), so a walk under the read lock maps them the
 * kernel's way.
 */
#ifdef CONFIG_PT_RECLAIM
#define MLF_ANON_TABLES_FREED_SHARED 1
#endif

/*
 * The flags VMA merging ignores: VM_SOFTDIRTY, and VM_MAYBE_GUARD where the
 * kernel has it (both "sticky": a merged VMA keeps them).
 */
#ifdef VM_MAYBE_GUARD
#define MLF_VM_MERGE_IGNORED	(VM_SOFTDIRTY | VM_MAYBE_GUARD)
#else
#define MLF_VM_MERGE_IGNORED	VM_SOFTDIRTY
#endif

/* User shadow stacks (6.12 on): GUP refuses to write to them. 6.1: none. */
#ifdef VM_SHADOW_STACK
#define MLF_VM_SHADOW_STACK	VM_SHADOW_STACK
#else
#define MLF_VM_SHADOW_STACK	VM_NONE
#endif

/*
 * Userfaultfd read-write protection (7.3, CONFIG_USERFAULTFD_RWP): its
 * protected ptes are present PROT_NONE ones, and GUP faults on every
 * PROT_NONE pte of such a VMA (gup_can_follow_protnone()), so mlock(2)'s
 * populate faults them in although they are present.  Before 7.3: none.
 */
#ifdef VM_UFFD_RWP
#define MLF_VM_UFFD_RWP		VM_UFFD_RWP
#else
#define MLF_VM_UFFD_RWP		VM_NONE
#endif

/*
 * Routing (route.c) redirects the syscalls the way livepatch does: an
 * ftrace_ops that modifies the ip, on a trampoline that saves the regs.
 */
#if !defined(CONFIG_DYNAMIC_FTRACE_WITH_REGS) || !defined(CONFIG_TRACEPOINTS) || \
	!defined(CONFIG_TASKS_RCU)
#error "mlockfast needs DYNAMIC_FTRACE_WITH_REGS, TRACEPOINTS and TASKS_RCU"
#endif

#include <linux/ftrace.h>
#ifndef MLF_HAVE_FTRACE_REGS_SET_IP
#define ftrace_regs_set_instruction_pointer(fregs, ip) \
	ftrace_instruction_pointer_set(fregs, ip)
#define arch_ftrace_regs(fregs) (fregs)
#endif

/* The traced function's first argument: a syscall wrapper's pt_regs. */
static __always_inline unsigned long mlf_ftrace_arg0(struct ftrace_regs *fregs)
{
	return arch_ftrace_regs(fregs)->regs.di;
}

/*
 * What an ftrace_ops that moves the ip asks for.  With
 * DYNAMIC_FTRACE_WITH_ARGS (every kernel here) the plain trampoline, which
 * saves only the argument registers, takes a new ip, as livepatch relies
 * on; else only the one that saves all the regs does.
 */
#ifdef CONFIG_HAVE_DYNAMIC_FTRACE_WITH_ARGS
#define MLF_FTRACE_IPMODIFY_FLAGS	FTRACE_OPS_FL_IPMODIFY
#else
#define MLF_FTRACE_IPMODIFY_FLAGS	(FTRACE_OPS_FL_IPMODIFY | \
					 FTRACE_OPS_FL_SAVE_REGS)
#endif

/*
 * What the module cannot do without: kallsyms_lookup_name is found through
 * a kprobe, forks and exits are heard through tracepoints.  dkms.conf's
 * BUILD_EXCLUSIVE_CONFIG declines such a kernel before this is reached.
 */
#if !defined(CONFIG_KPROBES) || !defined(CONFIG_KALLSYMS) || \
	!defined(CONFIG_TRACEPOINTS) || !defined(CONFIG_X86_64) || \
	!defined(CONFIG_SMP)
#error "mlockfast needs X86_64, SMP, KPROBES, KALLSYMS and TRACEPOINTS"
#endif

/*
 * Kernel functions resolved through kallsyms at load.  They are called
 * through static calls, not function pointers: a static call is a direct
 * jump patched in at load, which IBT does not police.  That matters on 6.12
 * (CONFIG_X86_KERNEL_IBT=y), where the kernel seals (poisons) the ENDBR64 of
 * every function nobody takes the address of, these ones included, so an
 * indirect call to them would fault on IBT hardware.
 *
 * compat_symbols.h lists them: each static call mlf_sc_<name>, of the
 * type mlf_proto_<name> below, and the kernel symbol compat.c resolves it
 * to.
 */
/* kallsyms_lookup_name, found through a kprobe */
unsigned long mlf_proto_lookup(const char *name);
DECLARE_STATIC_CALL(mlf_sc_lookup, mlf_proto_lookup);

/*
 * Where a kernel header declares the function, our prototype is its type
 * (typeof): a changed signature is a build error, not an oops.  The others
 * are declared in mm/internal.h, mm/vma.h or nowhere, and were read from
 * each series' source, under the feature that names them.
 */
#ifdef MLF_HAVE_THP
typeof(__pmd_trans_huge_lock) mlf_proto_pmd_trans_huge_lock;
#endif
#ifdef MLF_LRU_ADD_DRAIN_MM_INTERNAL
/* in mm/internal.h, defined in mm/folio.c */
void mlf_proto_lru_add_drain(void);
#else
typeof(lru_add_drain) mlf_proto_lru_add_drain;
#endif
typeof(schedule_on_each_cpu) mlf_proto_schedule_on_each_cpu;
typeof(vma_is_secretmem) mlf_proto_vma_is_secretmem;
void mlf_proto_mlock_folio(struct folio *folio);
long mlf_proto_populate_vma_page_range(struct vm_area_struct *vma,
				       unsigned long start, unsigned long end,
				       int *locked);

/* __x64_sys_mlock2 and the others, for legacy mode */
long mlf_proto_sys_mlock2(const struct pt_regs *regs);
long mlf_proto_sys_munlock(const struct pt_regs *regs);
long mlf_proto_sys_mlockall(const struct pt_regs *regs);
long mlf_proto_sys_munlockall(const struct pt_regs *regs);

/* MLF_MLOCK_DRAIN_LOCAL, MLF_NEED_MLOCK_DRAIN */
void mlf_proto_mlock_drain_local(void);
bool mlf_proto_need_mlock_drain(int cpu);

#ifdef MLF_HAVE_MUNLOCK_FOLIO
void mlf_proto_munlock_folio(struct folio *folio);
#else
void mlf_proto_munlock_page(struct page *page);
#endif

#ifdef MLF_PTE_TABLES_MAY_VANISH
typeof(MLF_PTE_OFFSET_MAP_LOCK) mlf_proto_pte_offset_map_lock;
#endif

#if defined(MLF_HAVE_VMA_FLAGS_T)
/* in mm/vma.h: *vma_flags_ptr in, and out with the merged VMA's flags */
struct vm_area_struct *
mlf_proto_vma_modify_flags(struct vma_iterator *vmi,
			   struct vm_area_struct *prev,
			   struct vm_area_struct *vma, unsigned long start,
			   unsigned long end, vma_flags_t *vma_flags_ptr);
#elif defined(MLF_HAVE_VMA_MODIFY_FLAGS)
struct vm_area_struct *
mlf_proto_vma_modify_flags(struct vma_iterator *vmi,
			   struct vm_area_struct *prev,
			   struct vm_area_struct *vma, unsigned long start,
			   unsigned long end, unsigned long new_flags);
#else
typeof(vma_merge) mlf_proto_vma_merge;
typeof(split_vma) mlf_proto_split_vma;
#endif

#define MLF_SYMBOL(name, ...) \
	DECLARE_STATIC_CALL(mlf_sc_##name, mlf_proto_##name)
#include "compat_symbols.h"
#undef MLF_SYMBOL

#define mlf_call(name) static_call(mlf_sc_##name)

#ifdef MLF_HAVE_THP
/* Kernel variables resolved at load (not exported). */
extern unsigned long *mlf_huge_zero_pfn;
#endif

int mlf_compat_init(const char *debug_require_symbol, const char *debug_release);

/* The start of function @sym (the route hooks' targets), or 0, logged. */
unsigned long mlf_compat_func_addr(const char *sym);
/* The kernel's tracepoint @name, or NULL. */
struct tracepoint *mlf_compat_tracepoint(const char *name);

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
 * Which pte-mapped folios mlock acts on differs by series: 6.1 skips every
 * pte-mapped compound page; 6.12 mlocks a large folio only when the range
 * maps all of it, and munlocks it whenever it is met.  Returns how many ptes
 * the folio spans from @pte (the walk steps over them) and sets @act.
 */
unsigned int mlf_pte_folio_step(struct folio *folio, struct vm_area_struct *vma,
				pte_t *pte, unsigned long addr,
				unsigned long start, unsigned long end,
				bool lock, bool *act);

/*
 * mlock_fixup()'s test, less its gate VMA check: the VMAs here come from the
 * mm's tree, and the gate VMA is never in it.
 */
static inline bool mlf_vma_lockable(struct vm_area_struct *vma)
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

/* Set a VMA's flags with the mmap_lock held for writing. */
static inline void mlf_vma_set_flags(struct vm_area_struct *vma,
				     vm_flags_t flags)
{
#if defined(MLF_HAVE_VMA_FLAGS_T)
	vma_flags_t f = legacy_to_vma_flags(flags);

	vma_start_write(vma);
	vma_flags_reset_once(vma, &f);
#elif defined(MLF_VMA_FLAGS_NEED_WRITE_LOCK)
	vma_start_write(vma);
	vm_flags_reset_once(vma, flags);
#else
	WRITE_ONCE(vma->vm_flags, flags);
#endif
}

/* 6.1's VM_LOCKED_CLEAR_MASK, 6.12's ~VM_LOCKED_MASK */
#define MLF_VM_LOCKED_CLEAR_MASK	(~(VM_LOCKED | VM_LOCKONFAULT))

/*
 * vma_modify_flags(): make [start, end) of @vma one VMA with *@newflags,
 * merged into a neighbour (@prev, or the VMA after) or split off.  Returns
 * the VMA that now holds the piece, or an ERR_PTR; @vmi is left on it, so
 * that vma_next() goes on after it.  *@newflags comes back with the flags a
 * merge gave the VMA (a kernel whose merges keep sticky flags), else as it
 * went.
 */
#if defined(MLF_HAVE_VMA_FLAGS_T)
static inline struct vm_area_struct *
mlf_vma_modify_flags(struct vma_iterator *vmi, struct vm_area_struct *prev,
		     struct vm_area_struct *vma, unsigned long start,
		     unsigned long end, vm_flags_t *newflags)
{
	vma_flags_t f = legacy_to_vma_flags(*newflags);

	vma = mlf_call(vma_modify_flags)(vmi, prev, vma, start, end, &f);
	*newflags = vma_flags_to_legacy(f);
	return vma;
}
#elif defined(MLF_HAVE_VMA_MODIFY_FLAGS)
static inline struct vm_area_struct *
mlf_vma_modify_flags(struct vma_iterator *vmi, struct vm_area_struct *prev,
		     struct vm_area_struct *vma, unsigned long start,
		     unsigned long end, vm_flags_t *newflags)
{
	return mlf_call(vma_modify_flags)(vmi, prev, vma, start, end,
					  *newflags);
}
#else
struct vm_area_struct *
mlf_vma_modify_flags(struct vma_iterator *vmi, struct vm_area_struct *prev,
		     struct vm_area_struct *vma, unsigned long start,
		     unsigned long end, vm_flags_t *newflags);
#endif

#endif /* MLOCKFAST_COMPAT_H */
