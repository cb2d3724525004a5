/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kernel functions resolved at load, one line each: MLF_SYMBOL(name,
 * "symbol") is static call mlf_sc_<name>, of type mlf_proto_<name>
 * (compat.h), patched at load to jump to the kernel's "symbol".  Read by
 * compat.h (the declarations) and compat.c (the definitions and the
 * lookups); no include guard, by design.
 */
#ifdef MLF_HAVE_THP
MLF_SYMBOL(pmd_trans_huge_lock, "__pmd_trans_huge_lock");
#endif
MLF_SYMBOL(populate_vma_page_range, "populate_vma_page_range");
MLF_SYMBOL(lru_add_drain, "lru_add_drain");
MLF_SYMBOL(schedule_on_each_cpu, "schedule_on_each_cpu");
MLF_SYMBOL(vma_is_secretmem, "vma_is_secretmem");
MLF_SYMBOL(mlock_folio, "mlock_folio");
MLF_SYMBOL(sys_mlock2, "__x64_sys_mlock2");
MLF_SYMBOL(sys_munlock, "__x64_sys_munlock");
MLF_SYMBOL(sys_mlockall, "__x64_sys_mlockall");
MLF_SYMBOL(sys_munlockall, "__x64_sys_munlockall");
MLF_SYMBOL(mlock_drain_local, MLF_MLOCK_DRAIN_LOCAL);
MLF_SYMBOL(need_mlock_drain, MLF_NEED_MLOCK_DRAIN);
#ifdef MLF_HAVE_MUNLOCK_FOLIO
MLF_SYMBOL(munlock_folio, "munlock_folio");
#else
MLF_SYMBOL(munlock_page, "munlock_page");
#endif
#ifdef MLF_PTE_TABLES_MAY_VANISH
MLF_SYMBOL(pte_offset_map_lock, __stringify(MLF_PTE_OFFSET_MAP_LOCK));
#endif
#ifdef MLF_HAVE_VMA_MODIFY_FLAGS
MLF_SYMBOL(vma_modify_flags, "vma_modify_flags");
#else
MLF_SYMBOL(vma_merge, "vma_merge");
MLF_SYMBOL(split_vma, "split_vma");
#endif
