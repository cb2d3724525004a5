// SPDX-License-Identifier: GPL-2.0
/*
 * The compat layer's code (see compat.h): the kernel symbols resolved at
 * load, and the kernel differences that are functions.  It calls nothing
 * of the module's.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ctype.h>
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
#include <linux/tracepoint.h>
#include <linux/workqueue.h>
#include <linux/utsname.h>
#include "compat.h"
#include "supported.h"

/*
 * A kernel header declares these: their types must be ours (see compat.h
 * for the functions of compat_symbols.h).
 */
static_assert(__same_type(&kallsyms_lookup_name, &mlf_proto_lookup));
#ifdef MLF_HAVE_THP
static_assert(__same_type(&huge_zero_pfn, mlf_huge_zero_pfn));
#endif

#define MLF_SYMBOL(name, ...) \
	DEFINE_STATIC_CALL_NULL(mlf_sc_##name, mlf_proto_##name)
#include "compat_symbols.h"
#undef MLF_SYMBOL

#ifdef MLF_HAVE_THP
unsigned long *mlf_huge_zero_pfn;
#endif

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

/* Point static call @key (@tramp) at function @sym: 0, or -ENOENT. */
static int mlf_patch(struct static_call_key *key, void *tramp, const char *sym)
{
	unsigned long addr = mlf_resolve(sym, true);

	if (!addr)
		return -ENOENT;
	__static_call_update(key, tramp, (void *)addr);
	return 0;
}

unsigned long mlf_compat_func_addr(const char *sym)
{
	return mlf_resolve(sym, true);
}

struct mlf_tp_find {
	const char *name;
	struct tracepoint *tp;
};

static void mlf_tp_match(struct tracepoint *tp, void *priv)
{
	struct mlf_tp_find *f = priv;

	if (!strcmp(tp->name, f->name))
		f->tp = tp;
}

struct tracepoint *mlf_compat_tracepoint(const char *name)
{
	struct mlf_tp_find f = { .name = name };

	for_each_kernel_tracepoint(mlf_tp_match, &f);
	return f.tp;
}

/* Does @rel match @pat, where '#' stands for one or more digits? */
static bool mlf_release_matches(const char *pat, const char *rel)
{
	for (; *pat; pat++) {
		if (*pat != '#') {
			if (*rel++ != *pat)
				return false;
			continue;
		}
		if (!isdigit(*rel))
			return false;
		while (isdigit(*rel))
			rel++;
	}
	return !*rel;
}

/*
 * The series block of compat.h admits a whole series; the kernels tested
 * are narrower (supported.h: a flavour, a Debian build), and a build of
 * the series that was never tested may differ in what matters here (its
 * compiler, its config).  Decline it as DKMS does.
 */
static int mlf_check_release(const char *rel)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(mlf_supported_releases); i++)
		if (mlf_release_matches(mlf_supported_releases[i], rel))
			return 0;
	pr_err("cannot load: kernel %s is not one mlockfast supports (see its supported-kernels)\n",
	       rel);
	return -ENODEV;
}

int mlf_compat_init(const char *debug_require_symbol, const char *debug_release)
{
	int ret;

	ret = mlf_check_release(debug_release && *debug_release ?
				debug_release : init_utsname()->release);
	if (ret)
		return ret;
	ret = mlf_find_lookup();
	if (ret)
		return ret;
	/* (up to the first that fails) */
#define MLF_SYMBOL(name, sym) \
	(ret = ret ?: mlf_patch(&STATIC_CALL_KEY(mlf_sc_##name), \
				STATIC_CALL_TRAMP_ADDR(mlf_sc_##name), sym))
#include "compat_symbols.h"
#undef MLF_SYMBOL
	if (ret)
		return ret;
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

/*
 * The page offset of @vma's start that @folio's index counts from: 7.3's
 * anonymous folios count from the VMA's anonymous offset, which a
 * MAP_PRIVATE file or /dev/zero VMA keeps apart from vm_pgoff.
 */
static pgoff_t mlf_vma_pgoff_of(struct folio *folio,
				struct vm_area_struct *vma)
{
#ifdef MLF_HAVE_ANON_PGOFF
	if (folio_test_anon(folio))
		return vma_start_anon_pgoff(vma);
#endif
	return vma->vm_pgoff;
}

/* folio_within_range(): does the folio lie wholly in [start, end) of vma? */
static bool mlf_folio_within(struct folio *folio, struct vm_area_struct *vma,
			     unsigned long start, unsigned long end)
{
	pgoff_t pgoff = folio_pgoff(folio);
	pgoff_t vma_pgoff = mlf_vma_pgoff_of(folio, vma);
	unsigned long addr;

	start = max(start, vma->vm_start);
	end = min(end, vma->vm_end);
	if (!in_range(pgoff, vma_pgoff, vma_pages(vma)))
		return false;
	addr = vma->vm_start + ((pgoff - vma_pgoff) << PAGE_SHIFT);
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

#ifndef MLF_HAVE_VMA_MODIFY_FLAGS
/*
 * vma_modify_flags() from 6.1's mlock_fixup(): vma_merge(), else a split at
 * either end.  vma_merge() and split_vma() change the tree through maple
 * states of their own, so @vmi is put on the resulting VMA the way
 * mas_pause() leaves a state: the next vma_next() walks from its end.
 */
struct vm_area_struct *
mlf_vma_modify_flags(struct vma_iterator *vmi, struct vm_area_struct *prev,
		     struct vm_area_struct *vma, unsigned long start,
		     unsigned long end, vm_flags_t *newflags)
{
	struct mm_struct *mm = vma->vm_mm;
	struct vm_area_struct *merged;
	pgoff_t pgoff;
	int ret = 0;

	pgoff = vma->vm_pgoff + ((start - vma->vm_start) >> PAGE_SHIFT);
	merged = mlf_call(vma_merge)(mm, prev, start, end, *newflags,
				     vma->anon_vma, vma->vm_file, pgoff,
				     vma_policy(vma), vma->vm_userfaultfd_ctx,
				     anon_vma_name(vma));
	if (merged) {
		vma = merged;
		goto out;
	}
	if (start != vma->vm_start) {
		ret = mlf_call(split_vma)(mm, vma, start, 1);
		if (ret)
			goto out;
	}
	if (end != vma->vm_end)
		ret = mlf_call(split_vma)(mm, vma, end, 0);
out:
	vmi->mas.index = vma->vm_start;
	vmi->mas.last = vma->vm_end - 1;
	mas_pause(&vmi->mas);
	return ret ? ERR_PTR(ret) : vma;
}
#endif
