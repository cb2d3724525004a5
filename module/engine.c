// SPDX-License-Identifier: GPL-2.0
/*
 * The lock/unlock engine: mlock(2), mlock2(2), munlock(2), mlockall(2) and
 * munlockall(2) for current->mm, with the syscalls' checks, errnos, VMA
 * layout and accounting, but one page-table walk per VMA piece:
 *
 *  - the walk sets or clears PG_mlocked and Mlocked itself; the LRU move of
 *    a private anon page is owed, on the process's runs (mm.c), and an
 *    unlock that comes first cancels it; every other folio is moved through
 *    the kernel's own per-CPU mlock batch, drained once per page table;
 *  - folios already on the unevictable list, whose mlock_count matters, go
 *    through the kernel's own mlock_folio()/munlock_folio();
 *  - the walk notes what is missing or needs COW, and only that span goes
 *    through the kernel's populate (a second, GUP walk) afterwards;
 *  - nothing drains or waits on another CPU.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/capability.h>
#include <linux/dax.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/mmu_context.h>
#include <linux/mm_inline.h>
#include <linux/sched/signal.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/userfaultfd_k.h>
#include <linux/vmstat.h>
#include "compat.h"
#include "raw_mm.h"
#include "vma.h"
#include "mlockfast.h"

/* What a walk does to the pages it meets. */
enum mlf_walk {
	MLF_WALK_UNLOCK,	/* munlock: clear, cancel owed moves */
	MLF_WALK_LOCK,		/* mlock: set, owe or make the moves */
	MLF_WALK_PAY,		/* mm.c's work: make the moves runs owe */
};

struct mlf_ctx {
	enum mlf_mode mode;
	enum mlf_walk walk;
	bool kernel_batch;	/* this CPU's kernel mlock batch holds ours */
	bool drained;		/* mlf_drain_once() ran */
	struct mlf_file *file;	/* the file, whose cache has ... */
	struct mlf_mm *owner;	/* ... current->mm's state (mm.c) */
	struct mlf_pt_cache pt;
	unsigned int nr_pop;	/* ranges populate must visit, in pop[] */
	unsigned int pop_absent;	/* bit i: the walk saw pop[i] must fault */
	unsigned long pages;
	struct zone *zone;	/* NR_MLOCK change not yet applied ... */
	long zone_pages;	/* ... to this zone, in pages */
	int zone_id;		/* page_zone_id() of zone's pages, or -1 */
	unsigned int nr_runs;	/* lock: runs of private anon pages ... */
	struct mlf_run runs[4];	/* ... left unmoved, for owner's work */
	struct mlf_run pop[4];	/* (last: not zeroed, as runs[]) */
};

static __always_inline bool mlf_locks(const struct mlf_ctx *c)
{
	return c->walk == MLF_WALK_LOCK;
}

/* Apply the pending NR_MLOCK change and its vm events. */
static __always_inline void mlf_acct_flush(struct mlf_ctx *c)
{
	long nr = c->zone_pages;

	if (!nr)
		return;
	mod_zone_page_state(c->zone, NR_MLOCK, mlf_locks(c) ? nr : -nr);
	count_vm_events(mlf_locks(c) ? UNEVICTABLE_PGMLOCKED :
			UNEVICTABLE_PGMUNLOCKED, nr);
	c->pages += nr;
	c->zone_pages = 0;
}

/* From now on count in @folio's zone. */
static void mlf_acct_zone(struct mlf_ctx *c, struct folio *folio)
{
	mlf_acct_flush(c);
	c->zone = folio_zone(folio);
	c->zone_id = page_zone_id(&folio->page);
}

/*
 * Count a folio's pages in or out of Mlocked.  Folios of one walk share a
 * zone, so this batches what mlock_folio() does per folio.
 */
static __always_inline void mlf_acct(struct mlf_ctx *c, struct folio *folio)
{
	if (folio_zone(folio) != c->zone)
		mlf_acct_zone(c, folio);
	c->zone_pages += folio_nr_pages(folio);
}

static __always_inline void mlf_ctx_init(struct mlf_ctx *c, enum mlf_mode mode,
					 enum mlf_walk walk, struct mlf_file *file)
{
	/* runs[], pop[] are written before read: zero only what comes before. */
	memset(c, 0, offsetof(struct mlf_ctx, runs));
	c->mode = mode;
	c->walk = walk;
	c->file = file;
	c->zone_id = -1;
}

/*
 * As mlock does before its walk: this CPU's pending LRU additions first, so
 * that fresh folios are on the LRU.  Only once the walk meets a page the
 * fast paths do not take: those they take are on the LRU, or rechecked
 * after (mlf_unlock_fast()), and a drain costs more than a small call's
 * page work.  (The kernel's mlock batch is looked at every page table:
 * mlf_apply_queued_mlocks().)  Under a page table's lock, as the kernel's
 * own mlock_folio() drains.
 */
static void mlf_drain_once(struct mlf_ctx *c)
{
	if (!c->drained) {
		mlf_call(lru_add_drain)();
		c->drained = true;
	}
}

/*
 * The owner's pmd table, if no other write hold of the mmap_lock came
 * since the call that kept it: this hold or the very next, as the VMA
 * cache (vma.c), and within a second, before the count could wrap.  Still
 * good in this hold, so kept for the next.
 */
static __always_inline void mlf_pt_take(struct mlf_ctx *c)
{
#ifdef MLF_HAVE_MM_LOCK_SEQ
	struct mlf_mm *m = c->owner;
	unsigned int seq = mlf_mm_write_seq(m->mm);
	unsigned long now = jiffies;

	if ((seq == m->pt_seq || seq == m->pt_seq + 2) &&
	    !time_after(now, m->pt_stamp + HZ)) {
		c->pt = m->pt;
		m->pt_seq = seq;
		m->pt_stamp = now;
	}
#endif
}

/* The call's pmd table, for the owner's next call (mlf_pt_take()). */
static __always_inline void mlf_pt_keep(struct mlf_ctx *c)
{
#ifdef MLF_HAVE_MM_LOCK_SEQ
	struct mlf_mm *m = c->owner;

	if (m) {
		m->pt = c->pt;
		m->pt_seq = mlf_mm_write_seq(m->mm);
		m->pt_stamp = jiffies;
	}
#endif
}

/*
 * current->mm's state, and the zone its last walk counted in: a process's
 * pages are mostly in one, and finding a page's zone costs more than the
 * rest of a small call's accounting.
 */
static __always_inline void mlf_ctx_set_owner(struct mlf_ctx *c)
{
	c->owner = mlf_mm_current(c->file, mlf_locks(c));
	if (c->owner) {
		c->zone = c->owner->zone;
		c->zone_id = c->owner->zone_id;
		mlf_pt_take(c);
	}
}

/* Before an unlock walks, with mmap_lock held: whose runs it trims. */
static __always_inline void mlf_ctx_unlocker(struct mlf_ctx *c)
{
	mlf_ctx_set_owner(c);
	/* Undone in time: deferral pays again (mlf_ctx_owner()). */
	if (c->owner && unlikely(READ_ONCE(c->owner->held_long)) &&
	    time_before(jiffies, c->owner->locked_at +
			msecs_to_jiffies(READ_ONCE(mlf_defer_ms))))
		WRITE_ONCE(c->owner->held_long, false);
}

/* Before a lock walks, with mmap_lock held: who owns the moves it owes. */
static __always_inline void mlf_ctx_owner(struct mlf_ctx *c)
{
	mlf_ctx_set_owner(c);
	/* No state would pay a move owed when the mm forks: make all now. */
	if (!c->owner) {
		c->mode = MLF_EAGER;
		return;
	}
	c->owner->locked_at = jiffies;
	/* Reclaim mode leaves moves owing; a fork pays them (mm.c). */
	if (c->mode == MLF_RECLAIM && !c->owner->unmoved)
		WRITE_ONCE(c->owner->unmoved, true);
	/* Its moves would be paid later, by a second walk: pay them now. */
	if (c->mode == MLF_DEFERRED && unlikely(READ_ONCE(c->owner->held_long)))
		c->mode = MLF_EAGER;
}

/* The owner's VMA cache (compat.h), if there is an owner. */
static __always_inline struct mlf_vma_cache *mlf_ctx_vc(struct mlf_ctx *c)
{
	return c->owner ? &c->owner->vc : NULL;
}

/*
 * Populate's GUP walk costs about as much per present page as per missing
 * one: give it only the spans that need it (a few), not one span from the
 * lowest to the highest, which for mlockall() takes in every present
 * region between.  Spans closer than this are one: a populate call costs
 * more than the pages between.
 */
#define MLF_POP_GAP	(32 * PAGE_SIZE)

static void mlf_need_populate(struct mlf_ctx *c, unsigned long start,
			      unsigned long end)
{
	struct mlf_run *last = c->nr_pop ? &c->pop[c->nr_pop - 1] : NULL;
	unsigned int i, at;

	if (last && start < last->start) {	/* not upwards: one span of all */
		c->pop_absent = 0;
		c->pop[0].start = min(c->pop[0].start, start);
		c->pop[0].end = max(last->end, end);
		c->nr_pop = 1;
		return;
	}
	/* The walk goes up: extend the last span, or start one above it. */
	if (last && start <= last->end + MLF_POP_GAP) {
		/* (a span that grows may take in pages the walk saw present) */
		c->pop_absent &= ~(1U << (c->nr_pop - 1));
		last->end = max(last->end, end);
		return;
	}
	if (c->nr_pop < ARRAY_SIZE(c->pop)) {
		c->pop[c->nr_pop++] = (struct mlf_run){ start, end };
		return;
	}
	/* Full: close the smallest gap, counting the new span's. */
	c->pop_absent = 0;
	at = ARRAY_SIZE(c->pop) - 1;
	for (i = 0; i + 1 < ARRAY_SIZE(c->pop); i++)
		if (c->pop[i + 1].start - c->pop[i].end <
		    c->pop[at].start - c->pop[at - 1].end)
			at = i + 1;
	if (start - last->end < c->pop[at].start - c->pop[at - 1].end) {
		last->end = end;
		return;
	}
	c->pop[at - 1].end = c->pop[at].end;
	for (i = at; i + 1 < ARRAY_SIZE(c->pop); i++)
		c->pop[i] = c->pop[i + 1];
	c->pop[i] = (struct mlf_run){ start, end };
}

/*
 * As mlf_need_populate(), for pages the walk saw populate must fault in (no
 * pte, or a read-only one a write fault would COW), under the mmap_lock
 * held for writing: populate faults a one-page span without looking first.
 */
static void mlf_need_fault(struct mlf_ctx *c, unsigned long start,
			   unsigned long end)
{
	unsigned int n = c->nr_pop;

	mlf_need_populate(c, start, end);
	if (c->nr_pop == n + 1)		/* a span of its own */
		c->pop_absent |= 1U << n;
}

/* Would populate's write fault (COW) change this present pte? */
static bool mlf_needs_cow(struct vm_area_struct *vma, bool writable)
{
	return (vma->vm_flags & (VM_WRITE | VM_SHARED)) == VM_WRITE &&
	       !writable;
}

static bool mlf_populates(struct vm_area_struct *vma)
{
	return !(vma->vm_flags & VM_LOCKONFAULT);
}

/* Whether populate's fault of a page of @vma is a write (to break COW). */
static bool mlf_populate_writes(struct vm_area_struct *vma)
{
	return (vma->vm_flags & (VM_WRITE | VM_SHARED)) == VM_WRITE;
}

/*
 * Would populate's GUP refuse @vma (check_vma_flags(): EFAULT, mlock's
 * ENOMEM)?  PROT_NONE; a protection key closed to this thread; a shadow
 * stack, which GUP writes to only with FOLL_FORCE (6.12 on: populate asks
 * it for reads only).  Secretmem, which GUP refuses too, is never walked:
 * mlock leaves it as it is (mlf_vma_lockable()).
 */
static __always_inline bool mlf_gup_refuses(struct vm_area_struct *vma)
{
	bool write = mlf_populate_writes(vma);

	return !vma_is_accessible(vma) ||
	       (write && (vma->vm_flags & MLF_VM_SHADOW_STACK)) ||
	       !arch_vma_access_permitted(vma, write, false, false);
}

static bool mlf_folio_private(struct folio *folio)
{
	return folio_test_anon(folio) && !folio_test_large(folio) &&
	       mlf_folio_mapped_once(folio);
}

/*
 * The kernel's mlock batch is per CPU, and only its CPU drains it.  Drain
 * what the walk queued there before the task can move to another CPU (a
 * page table's lock keeps it here until then): an mlock left behind could
 * be counted after an unlock undid it, on top of a later lock, and the page
 * would stay mlocked for good.  munlock(2) drains before it can move, too.
 */
static void mlf_kernel_drain(struct mlf_ctx *c)
{
	if (c->kernel_batch) {
		mlf_call(mlock_drain_local)();
		c->kernel_batch = false;
	}
}

/*
 * What waits in this CPU's kernel mlock batch is applied before the walk
 * sets or clears a lock here, as munlock(2) and mlock(2) drain before their
 * walks: an mlock a fault into a locked VMA queued for a folio whose lock
 * the walk then clears would be counted when the batch drains, on top of a
 * lock taken meanwhile on another CPU, and the folio would stay locked for
 * good.  One look a page table: the task may have moved since the last,
 * and other tasks queue here too.  Under the page table's lock, which keeps
 * the task on this CPU.
 */
static void mlf_apply_queued_mlocks(void)
{
	if (mlf_call(need_mlock_drain)(smp_processor_id()))
		mlf_call(mlock_drain_local)();
}

/* Leave the folio to the kernel's own mlock_folio()/munlock_folio(). */
static void mlf_to_kernel(struct mlf_ctx *c, struct folio *folio)
{
	if (mlf_locks(c))
		mlf_kernel_mlock(folio);
	else
		mlf_kernel_munlock(folio);
	c->kernel_batch = true;
	c->pages += folio_nr_pages(folio);
}

/*
 * The move now, by the kernel's own per-page step, as mlock(2) takes it (it
 * finds PG_mlocked set and counts nothing again), into its per-CPU batch,
 * drained before this page table is left (mlf_kernel_drain()).  Eager mode
 * does this for every page, the others for every page another lock could
 * reach before a later move: a folio shared with another mapping, or a file
 * folio.  Left owing, its lock could be undone by a munlock(2) of another
 * path, unseen, and the move paid on top of a lock taken again since
 * (mlock_count one too high: locked for good), or a munlock of that other
 * lock could find it uncounted (one too low).
 */
static void mlf_lock_now(struct mlf_ctx *c, struct folio *folio)
{
	mlf_kernel_mlock(folio);
	c->kernel_batch = true;
	mlf_count(moves_queued, folio_nr_pages(folio));
	mlf_count(moves_applied, folio_nr_pages(folio));
}

/* Add the page at @addr to the call's runs; false when they are full. */
static __always_inline bool mlf_run_extend(struct mlf_ctx *c, unsigned long addr)
{
	if (c->nr_runs && c->runs[c->nr_runs - 1].end == addr) {
		c->runs[c->nr_runs - 1].end += PAGE_SIZE;
		return true;
	}
	if (c->nr_runs == ARRAY_SIZE(c->runs))
		return false;
	c->runs[c->nr_runs++] = (struct mlf_run){ addr, addr + PAGE_SIZE };
	return true;
}

/* Hand the call's runs to the owner, once no page table is locked. */
static void mlf_runs_flush(struct mlf_ctx *c)
{
	unsigned int i;

	for (i = 0; i < c->nr_runs; i++)
		mlf_mm_add_run(c->owner, c->runs[i].start, c->runs[i].end);
	c->nr_runs = 0;
}

/* The hot per-page steps are inlined into the walk: a call each costs more. */
static __always_inline void mlf_lock_one(struct mlf_ctx *c, struct folio *folio,
					 unsigned long addr)
{
	if (folio_test_unevictable(folio)) {
		/* mlock_count is live: let the kernel raise it. */
		mlf_to_kernel(c, folio);
		return;
	}
	if (folio_test_set_mlocked(folio)) {
		/*
		 * Locked but not yet moved: its mlock(2) or fault waits in a
		 * kernel mlock batch (another CPU's: the walk drained this
		 * one).  The kernel counts this lock too when that drains,
		 * as for mlock(2).  No move we owe is behind it: those are
		 * of pages mapped once, which a fork pays before another
		 * lock can reach them.
		 */
		if (folio_test_lru(folio))
			mlf_to_kernel(c, folio);
		return;
	}
	mlf_acct(c, folio);
	/*
	 * A small anon folio mapped once can be locked by no VMA but this
	 * one until the mm forks, and the child pays its move before it
	 * runs (mm.c): reclaim mode leaves the move to reclaim, deferred mode
	 * to the owner's work, which walks the run again (mlf_pay_run()).
	 * Either way the page costs nothing more now, nor when it is unlocked.
	 */
	if (c->mode != MLF_EAGER && mlf_folio_private(folio) &&
	    folio_test_lru(folio)) {
		if (c->mode == MLF_RECLAIM) {
			mlf_count(moves_queued, 1);	/* owed, to reclaim */
			return;
		}
		if (mlf_run_extend(c, addr))
			return;
	}
	mlf_lock_now(c, folio);
}

/*
 * PG_mlocked off a folio not (yet) on the unevictable list, by the kernel's
 * munlock, which clears it under the LRU lock.  A move to the unevictable
 * list under way (another mapping's mlock_folio(), a putback) tests the
 * flag first and moves the folio after: cleared here in between, the folio
 * would stay on that list, unlocked, for good.
 */
static void mlf_clear_mlocked(struct mlf_ctx *c, struct folio *folio)
{
	if (folio_test_mlocked(folio))
		mlf_to_kernel(c, folio);
}

/*
 * Off the unevictable list nothing counted the lock (a move owed on a run,
 * or a kernel mlock still batched): clear the flag.  On it, the kernel
 * counts the locks: it takes this one off.  A move owed on a run is
 * cancelled by the walk's trim (mlf_walk_pages()).
 */
static __always_inline void mlf_unlock_one(struct mlf_ctx *c,
					   struct folio *folio)
{
	if (!folio_test_unevictable(folio))
		mlf_clear_mlocked(c, folio);
	else
		mlf_to_kernel(c, folio);
}

/*
 * The common pages, in fewer instructions: one read of the flags decides.
 * A small page not on the unevictable list (device pages never get here:
 * mlf_pte_folio() leaves them out).  false: nothing was done, take the
 * general path.
 */
#define MLF_FAST_FLAGS	(BIT(PG_head) | BIT(PG_lru) | BIT(PG_unevictable) | \
			 BIT(PG_mlocked))

/* Count one small page, whose flags were read, in or out of Mlocked. */
static __always_inline void mlf_acct_one(struct mlf_ctx *c, struct folio *folio,
					 unsigned long flags)
{
	if (((flags >> ZONEID_PGSHIFT) & ZONEID_MASK) != c->zone_id)
		mlf_acct_zone(c, folio);
	c->zone_pages++;
}

/*
 * The last of the call's runs, while a page table is walked, ends at *@rend
 * (0: not followed): one compare a page.  Write it back before anything else
 * looks at the runs.
 */
static __always_inline void mlf_run_sync(struct mlf_ctx *c, unsigned long *rend)
{
	if (*rend) {
		c->runs[c->nr_runs - 1].end = *rend;
		*rend = 0;
	}
}

/*
 * The lock fast path takes a small folio, whose flags were read, when it is
 * private anon, on the LRU and not yet locked: PG_mlocked goes on.  false:
 * not taken (or locked meanwhile), nothing done.
 */
static __always_inline bool mlf_fast_set(struct folio *folio,
					 unsigned long flags)
{
	return (flags & MLF_FAST_FLAGS) == BIT(PG_lru) &&
	       folio_test_anon(folio) && mlf_folio_mapped_once(folio) &&
	       !folio_test_set_mlocked(folio);
}

/* The unlock fast path takes a small locked folio off the unevictable list. */
static __always_inline bool mlf_fast_clearable(unsigned long flags)
{
	return (flags & (MLF_FAST_FLAGS & ~BIT(PG_lru))) == BIT(PG_mlocked);
}

/*
 * The unlock fast path has cleared PG_mlocked.  A move to the unevictable
 * list takes the folio off the LRU, tests PG_mlocked, moves it, and puts it
 * back on the LRU.  One that tested before our clear shows now either as
 * moved or as still off the LRU (one read of the flags sees both): either
 * way the kernel's munlock looks again, under the LRU lock, and moves it
 * back.
 */
static __always_inline void mlf_fast_cleared(struct mlf_ctx *c,
					     struct folio *folio)
{
	unsigned long flags;

	smp_mb__after_atomic();	/* the clear, then the second read */
	flags = mlf_folio_flags(folio);
	if (unlikely((flags & (BIT(PG_lru) | BIT(PG_unevictable))) != BIT(PG_lru))) {
		mlf_kernel_munlock(folio);
		c->kernel_batch = true;
	}
}

/*
 * Lock: a private anon page not yet locked goes on the call's runs (@runs,
 * deferred mode; *@rend as above) or is left to reclaim.
 */
static __always_inline bool
mlf_lock_fast(struct mlf_ctx *c, struct folio *folio, unsigned long addr,
	      bool runs, unsigned long *rend)
{
	unsigned long flags = mlf_folio_flags(folio);

	if (!mlf_fast_set(folio, flags))
		return false;
	mlf_acct_one(c, folio, flags);
	if (!runs) {
		mlf_count(moves_queued, 1);	/* owed, to reclaim */
		return true;
	}
	if (*rend == addr) {
		*rend += PAGE_SIZE;
		return true;
	}
	mlf_run_sync(c, rend);
	if (mlf_run_extend(c, addr)) {
		*rend = c->runs[c->nr_runs - 1].end;
		return true;
	}
	/* No room for another run: the move now. */
	mlf_lock_now(c, folio);
	return true;
}

/* Unlock of a page off the unevictable list: clear the flag. */
static __always_inline bool mlf_unlock_fast(struct mlf_ctx *c,
					    struct folio *folio)
{
	unsigned long flags = mlf_folio_flags(folio);

	if (!mlf_fast_clearable(flags))
		return false;
	if (!folio_test_clear_mlocked(folio))
		return true;	/* unlocked meanwhile: nothing to undo */
	mlf_acct_one(c, folio, flags);
	mlf_fast_cleared(c, folio);
	return true;
}

/*
 * The fast paths' loops.  From @addr, they take the pages that
 * mlf_lock_fast() or mlf_unlock_fast() would take, with nothing else done per
 * page: a present, writable where COW matters, not special pte, mapping a
 * small page in the zone being counted.  They return where they stopped:
 * the general loop takes that page, then comes back.
 */

/*
 * Is @page, whose flags were read, counted in the zone being counted?  With
 * nothing counted yet (@pending: none in the caller either), its zone becomes
 * that zone; a device page never does.
 */
static __always_inline bool mlf_in_zone(struct mlf_ctx *c, struct page *page,
					unsigned long flags, bool pending)
{
	int id = (flags >> ZONEID_PGSHIFT) & ZONEID_MASK;

	if (likely(id == c->zone_id))
		return true;
	if (pending || c->zone_pages || is_zone_device_page(page))
		return false;
	c->zone = page_zone(page);
	c->zone_id = id;
	if (c->owner) {
		c->owner->zone = c->zone;
		c->owner->zone_id = id;
	}
	return true;
}

/* Lock, deferred (@runs) or reclaim mode. */
static __always_inline unsigned long
mlf_lock_ptes(struct mlf_ctx *c, pte_t *pte, unsigned long addr,
	      unsigned long end, bool cow, bool runs, unsigned long *rend)
{
	unsigned long start = addr;

	/* The pages will be one run: there must be room for it. */
	if (runs && *rend != addr && c->nr_runs == ARRAY_SIZE(c->runs))
		return addr;
	for (; addr != end; pte++, addr += PAGE_SIZE) {
		struct page *page = mlf_plain_page(ptep_get(pte), cow);
		unsigned long flags;

		if (!page || PageTail(page))
			break;
		flags = mlf_page_flags(page);
		if (!mlf_in_zone(c, page, flags, addr != start) ||
		    !mlf_fast_set(page_folio(page), flags))
			break;
	}
	if (addr == start)
		return addr;
	c->zone_pages += (addr - start) >> PAGE_SHIFT;
	if (!runs) {
		mlf_count(moves_queued, (addr - start) >> PAGE_SHIFT);
		return addr;
	}
	if (*rend == start) {
		*rend = addr;
		return addr;
	}
	mlf_run_sync(c, rend);
	if (c->nr_runs && c->runs[c->nr_runs - 1].end == start)
		c->runs[c->nr_runs - 1].end = addr;
	else
		c->runs[c->nr_runs++] = (struct mlf_run){ start, addr };
	*rend = addr;
	return addr;
}

static __always_inline unsigned long
mlf_unlock_ptes(struct mlf_ctx *c, pte_t *pte, unsigned long addr,
		unsigned long end)
{
	long n = 0;

	for (; addr != end; pte++, addr += PAGE_SIZE) {
		struct page *page = mlf_plain_page(ptep_get(pte), false);
		unsigned long flags;

		if (!page || PageTail(page))
			break;
		flags = mlf_page_flags(page);
		if (unlikely(!mlf_fast_clearable(flags))) {
			/*
			 * Locked and moved: the kernel counts its locks, so
			 * let it undo ours (mlf_to_kernel() inline: a small
			 * folio, no PG_head, one page).
			 */
			if ((flags & (MLF_FAST_FLAGS & ~BIT(PG_lru))) !=
			    (BIT(PG_unevictable) | BIT(PG_mlocked)) ||
			    is_zone_device_page(page))
				break;
			mlf_kernel_munlock(page_folio(page));
			c->kernel_batch = true;
			c->pages++;
			continue;
		}
		if (!mlf_in_zone(c, page, flags, n))
			break;
		if (!folio_test_clear_mlocked(page_folio(page)))
			continue;	/* unlocked meanwhile: nothing to undo */
		n++;
		mlf_fast_cleared(c, page_folio(page));
	}
	c->zone_pages += n;
	return addr;
}

static __always_inline void mlf_folio_op(struct mlf_ctx *c,
					 struct folio *folio, unsigned long addr)
{
	if (mlf_locks(c))
		mlf_lock_one(c, folio, addr);
	else
		mlf_unlock_one(c, folio);
}

static void mlf_pmd_huge(struct mlf_ctx *c, pmd_t *pmd, spinlock_t *ptl,
			 unsigned long addr, unsigned long end,
			 struct vm_area_struct *vma)
{
	pmd_t val = *pmd;
	struct folio *folio;

	folio = pmd_present(val) && !mlf_is_huge_zero_pmd(val) ?
		mlf_pmd_folio(val) : NULL;
	if (!folio) {
		if (mlf_locks(c) && mlf_populates(vma))
			mlf_need_populate(c, addr, end);
		goto out;
	}
	if (mlf_locks(c) && mlf_populates(vma) &&
	    mlf_needs_cow(vma, pmd_write(val)))
		mlf_need_populate(c, addr, end);
	mlf_drain_once(c);
	mlf_folio_op(c, folio, addr & PMD_MASK);
	mlf_acct_flush(c);
	mlf_kernel_drain(c);
out:
	spin_unlock(ptl);
}

/*
 * A run's pages: the move of each small anon folio that is still mlocked and
 * still on the evictable LRU is owed; mlock_folio() pays it.  One already
 * moved was counted by whoever moved it (or culled by reclaim): leave it.
 */
static void mlf_pay_ptes(struct mlf_ctx *c, pte_t *pte, unsigned long addr,
			 unsigned long end)
{
	for (; addr != end; pte++, addr += PAGE_SIZE) {
		pte_t ptent = ptep_get(pte);
		struct folio *folio;

		if (!pte_present(ptent))
			continue;
		folio = mlf_pte_folio(ptent);
		if (!folio || folio_test_large(folio) ||
		    !folio_test_anon(folio) || !folio_test_mlocked(folio) ||
		    !folio_test_lru(folio) || folio_test_unevictable(folio))
			continue;
		mlf_kernel_mlock(folio);
		c->kernel_batch = true;
		c->pages++;
	}
}

/*
 * One pmd's worth, [addr, end), of a present pmd.  Returns false when the
 * page table went away before it could be mapped (6.12): look again.
 */
static bool mlf_walk_pmd(struct mlf_ctx *c, struct vm_area_struct *vma,
			 pmd_t *pmd, unsigned long addr, unsigned long end)
{
	bool populates = mlf_locks(c) && mlf_populates(vma);
	bool cow = populates && mlf_needs_cow(vma, false);
	bool lock = mlf_locks(c), runs = c->mode == MLF_DEFERRED;
	unsigned long start = addr, rend = 0;
	pte_t *start_pte, *pte;
	spinlock_t *ptl;	/* the page table's lock, from the kernel */
	bool fast;

	ptl = mlf_pmd_huge_lock(pmd, vma);
	if (ptl) {
		if (c->walk == MLF_WALK_PAY) {
			spin_unlock(ptl);	/* runs hold small folios only */
		} else {
			mlf_apply_queued_mlocks();
			mlf_pmd_huge(c, pmd, ptl, addr, end, vma);
		}
		return true;
	}
	start_pte = mlf_pte_map_lock(vma, pmd, addr, &ptl,
				     c->walk == MLF_WALK_PAY);
	if (!start_pte)
		return false;
	if (c->walk == MLF_WALK_PAY) {
		mlf_pay_ptes(c, start_pte, addr, end);
		mlf_kernel_drain(c);
		pte_unmap_unlock(start_pte, ptl);
		cond_resched();
		return true;
	}
	mlf_apply_queued_mlocks();
	/*
	 * The fast paths: a lock whose private anon pages go on runs (or to
	 * reclaim); every unlock.
	 */
	fast = !lock || runs || c->mode == MLF_RECLAIM;
	for (pte = start_pte; addr != end; pte++, addr += PAGE_SIZE) {
		pte_t ptent;
		struct folio *folio;
		unsigned int step;
		bool act;

		if (fast) {
			unsigned long to = lock ?
				mlf_lock_ptes(c, pte, addr, end, cow, runs, &rend) :
				mlf_unlock_ptes(c, pte, addr, end);

			pte += (to - addr) >> PAGE_SHIFT;
			addr = to;
			if (addr == end)
				break;
		}
		mlf_drain_once(c);
		ptent = ptep_get(pte);
		if (!pte_present(ptent)) {
			unsigned long from = addr;

			/* Holes come in runs (a forked child's file pages). */
			while (addr + PAGE_SIZE != end &&
			       !pte_present(ptep_get(pte + 1))) {
				pte++;
				addr += PAGE_SIZE;
			}
			if (populates)
				mlf_need_fault(c, from, addr + PAGE_SIZE);
			continue;
		}
		if (cow && !pte_write(ptent)) {
			/* (a NUMA-hinting pte is GUP's: mlf_touch()) */
			if (pte_protnone(ptent))
				mlf_need_populate(c, addr, addr + PAGE_SIZE);
			else
				mlf_need_fault(c, addr, addr + PAGE_SIZE);
		}
		folio = mlf_pte_folio(ptent);
		if (!folio)
			continue;
		/* (the fast paths take small folios only) */
		if (fast && (lock ? mlf_lock_fast(c, folio, addr, runs, &rend) :
				    mlf_unlock_fast(c, folio)))
			continue;
		mlf_run_sync(c, &rend);
		if (likely(!folio_test_large(folio))) {
			mlf_folio_op(c, folio, addr);
			continue;
		}
		step = mlf_pte_folio_step(folio, vma, pte, addr, start, end,
					  mlf_locks(c), &act);
		if (act)
			mlf_folio_op(c, folio, addr);
		pte += step - 1;
		addr += (step - 1) << PAGE_SHIFT;
	}
	mlf_run_sync(c, &rend);
	mlf_acct_flush(c);
	mlf_kernel_drain(c);
	pte_unmap_unlock(start_pte, ptl);
	cond_resched();
	return true;
}

/*
 * The pmd covering @addr, or NULL if a level above it is empty; *next is
 * where the walk goes on from, at most @end.
 */
static pmd_t *mlf_pmd_of(struct mm_struct *mm, unsigned long addr,
			 unsigned long end, unsigned long *next)
{
	pgd_t *pgd = pgd_offset(mm, addr);
	p4d_t *p4d;
	pud_t *pud;

	*next = pgd_addr_end(addr, end);
	if (pgd_none(*pgd) || pgd_bad(*pgd))	/* folded: free */
		return NULL;
	p4d = p4d_offset(pgd, addr);
	*next = p4d_addr_end(addr, end);
	if (!mlf_table_entry(native_p4d_val(*p4d)))
		return NULL;
	pud = pud_offset(p4d, addr);
	*next = pud_addr_end(addr, end);
	if (!mlf_table_entry(native_pud_val(*pud)))
		return NULL;
	*next = pmd_addr_end(addr, end);
	return pmd_offset(pud, addr);
}

/*
 * The page tables of [addr, end) within @vma.  Our own walk rather than
 * walk_page_range(): that one looks the VMA up again and dispatches every
 * level through function pointers, which costs more than a small range's
 * page work.  The mmap_lock is held (for writing, or for reading by the
 * runs' work), so no level above the pmd can go away under us: tables go
 * only after the VMAs over them.  Inline in its one caller,
 * mlf_walk_pages().
 */
static __always_inline void mlf_walk_range(struct mlf_ctx *c,
					   struct vm_area_struct *vma,
					   unsigned long addr,
					   unsigned long end)
{
	bool populates = mlf_locks(c) && mlf_populates(vma);
	struct mlf_pt_cache *pt = &c->pt;
	unsigned long next;

	for (; addr < end; addr = next) {
		pmd_t *pmd, *pmds = pt->pmds;

		if (pmds && (addr & PUD_MASK) == pt->base) {
			next = pmd_addr_end(addr, end);
			pmd = pmds + pmd_index(addr);
		} else {
			pmd = mlf_pmd_of(vma->vm_mm, addr, end, &next);
			if (pmd) {
				mlf_pt_remember(pt, addr, pmd);
				mlf_pt_keep(c);
			}
		}
		if (!pmd || pmd_none(READ_ONCE(*pmd))) {
			if (populates)
				mlf_need_fault(c, addr, next);
			continue;
		}
		if (!mlf_walk_pmd(c, vma, pmd, addr, next))
			next = addr;
	}
}

void mlf_walk_pages(struct mlf_ctx *c, struct vm_area_struct *vma,
		    unsigned long start, unsigned long end)
{
	/*
	 * The syscall drains this CPU's batches before its walk.  Ours does
	 * only when its walk needs it, but where an unmap leaves munlocks
	 * queued there, that drain is what applies them, and Mlocked would
	 * read otherwise until the next one: drain as the syscall does.
	 */
#ifdef MLF_ZAP_LEAVES_MUNLOCKS_QUEUED
	if (c->walk != MLF_WALK_PAY)
		mlf_drain_once(c);
#endif
	/*
	 * GUP's refusal is the call's error, and GUP faults every PROT_NONE
	 * pte of a userfaultfd-RWP VMA (7.3), present or not: let populate
	 * meet both.
	 */
	if (mlf_locks(c) && mlf_populates(vma) &&
	    (mlf_gup_refuses(vma) || (vma->vm_flags & MLF_VM_UFFD_RWP)))
		mlf_need_populate(c, start, end);
	if (!mlf_locks(c) && c->owner)
		mlf_mm_trim(c->owner, start, end);
	mlf_walk_range(c, vma, start, end);
	if (c->nr_runs)
		mlf_runs_flush(c);
}

static void mlf_drain_one(struct work_struct *work);

static DEFINE_PER_CPU(struct work_struct, mlf_mlock_drain_work);
static struct cpumask mlf_mlock_drain_cpus;	/* under the mutex */
static DEFINE_MUTEX(mlf_mlock_drain_mutex);

/*
 * The kernel's mlock batches of the CPUs that hold something, drained
 * there.  A pay walk needs them empty: a folio whose mlock(2) still waits
 * in one looks like one whose move we owe (mlocked, not yet moved), and
 * paying it would count that lock twice.  The mm's own mlock(2) calls are
 * shut out meanwhile by its mmap_lock, which the caller holds.  Only the
 * CPUs that need it, as lru_add_drain_all() picks them, and only for the
 * mlock batch: usually none.
 */
static void mlf_drain_kernel_mlocks(void)
{
	bool any = false;
	int cpu;

	for_each_online_cpu(cpu)
		any |= mlf_call(need_mlock_drain)(cpu);
	if (!any)
		return;
	mutex_lock(&mlf_mlock_drain_mutex);
	cpumask_clear(&mlf_mlock_drain_cpus);
	for_each_online_cpu(cpu) {
		struct work_struct *w = per_cpu_ptr(&mlf_mlock_drain_work, cpu);

		if (!mlf_call(need_mlock_drain)(cpu))
			continue;
		INIT_WORK(w, mlf_drain_one);
		/* the kernel's per-CPU queue, whatever its name (7.2 renamed it) */
		schedule_work_on(cpu, w);
		__cpumask_set_cpu(cpu, &mlf_mlock_drain_cpus);
	}
	for_each_cpu(cpu, &mlf_mlock_drain_cpus)
		flush_work(per_cpu_ptr(&mlf_mlock_drain_work, cpu));
	mutex_unlock(&mlf_mlock_drain_mutex);
}

/*
 * For mm.c: pay the moves a run of private anon pages owes, where the
 * pages are still locked; mmap_lock held.
 */
void mlf_pay_run(struct mm_struct *mm, unsigned long start, unsigned long end)
{
	VMA_ITERATOR(vmi, mm, start);
	struct mlf_ctx c = { .walk = MLF_WALK_PAY };
	struct vm_area_struct *vma;

	lockdep_assert_held(&mm->mmap_lock);	/* for reading, at least */
	mlf_drain_kernel_mlocks();
	/* Folios just put back on the LRU show up as such. */
	mlf_call(lru_add_drain)();
	for_each_vma_range(vmi, vma, end)
		if (vma->vm_flags & VM_LOCKED)
			mlf_walk_pages(&c, vma, max(start, vma->vm_start),
				       min(end, vma->vm_end));
	/* (each page table's walk has drained what it paid) */
	mlf_count(moves_applied, c.pages);
	mlf_count(batches_applied, 1);
}

/* mlock leaves the VMA as it is, but the syscall still populates it. */
void mlf_skip_pages(struct mlf_ctx *c, struct vm_area_struct *vma,
		    unsigned long start, unsigned long end)
{
	if (mlf_locks(c))
		mlf_need_populate(c, start, end);
}

/* Before the mmap_lock is dropped: make the end state what the mode says. */
static void mlf_finish(struct mlf_ctx *c)
{
	mlf_kernel_drain(c);
	if (c->mode >= MLF_EAGER && c->mode <= MLF_LEGACY)
		mlf_count(mode_pages[c->mode - MLF_EAGER], c->pages);
	if (mlf_locks(c))
		mlf_count(pages_locked, c->pages);
	else
		mlf_count(pages_unlocked, c->pages);
}

/* As __mlock_posix_error_return(). */
static int mlf_populate_errno(long ret)
{
	if (ret == -EFAULT)
		return -ENOMEM;
	if (ret == -ENOMEM)
		return -EAGAIN;
	return ret;
}

/*
 * Populate's follow_page() of @addr, with its FOLL_TOUCH: 1 when it finds
 * a present pte of a normal folio, writable where populate's fault is a
 * write, and touched it; 0 when it would fault first (no page, or a
 * write to break COW); -1 for anything else (a huge pmd, PROT_NONE for
 * NUMA, a special pte): GUP's turn, nothing done.  *@pmdp: the pmd of
 * @addr if known (NULL: look it up, and keep it there), which stays while
 * the mmap_lock is held: tables above the pte go only with their VMAs.
 */
static int mlf_touch(struct vm_area_struct *vma, unsigned long addr,
		     bool write, pmd_t **pmdp)
{
	struct folio *folio = NULL;
	unsigned long next, val;
	spinlock_t *ptl;	/* the page table's lock, from the kernel */
	pte_t *pte, ptent;
	pmd_t *pmd = *pmdp;
	int ret = -1;

	if (!pmd)
		*pmdp = pmd = mlf_pmd_of(vma->vm_mm, addr, addr + PAGE_SIZE,
					 &next);
	val = pmd ? mlf_pmd_val(READ_ONCE(*pmd)) : 0;
	if (!val)
		return 0;
	if (!mlf_table_entry(val))
		return -1;
	pte = mlf_pte_map_lock(vma, pmd, addr, &ptl, true);
	if (!pte)
		return 0;	/* the table went: as pmd none */
	ptent = ptep_get(pte);
	if (!pte_present(ptent) || (write && !pte_write(ptent) &&
				    !pte_protnone(ptent)))
		ret = 0;
	else if (!pte_protnone(ptent))
		folio = mlf_pte_folio(ptent);
	if (folio) {
		if (write && !pte_dirty(ptent) && !folio_test_dirty(folio))
			folio_mark_dirty(folio);
		folio_mark_accessed(folio);
		ret = 1;
	}
	pte_unmap_unlock(pte, ptl);
	return ret;
}

/*
 * A VMA populate's GUP takes as plain memory: readable, refused nothing
 * (mlf_gup_refuses(), secretmem), no hugetlb, DAX or userfaultfd path, and
 * not MLOCK_ONFAULT, which populate leaves alone.  Anything else is GUP's.
 */
static bool mlf_gup_plain(struct vm_area_struct *vma)
{
	return (vma->vm_flags & VM_READ) &&
	       !(vma->vm_flags & (VM_LOCKONFAULT | VM_SPECIAL | VM_HUGETLB)) &&
	       !mlf_gup_refuses(vma) && !userfaultfd_armed(vma) &&
	       !vma_is_dax(vma) && !mlf_call(vma_is_secretmem)(vma);
}

/*
 * A span of one page, the common lock of a fresh page: populate's GUP
 * would look its VMA up again, find no page, fault, and look the page up
 * once more to touch it, which costs more than the fault of a fresh page
 * (a third of a one-page mlock(2) is that).  Here: the fault as GUP makes
 * it (faultin_page(): a write where it breaks COW, retry and kill
 * allowed), then the touch.
 */
static bool mlf_fault_here(struct vm_area_struct *vma, unsigned long addr,
			   unsigned long end)
{
	return end - addr == PAGE_SIZE && mlf_gup_plain(vma);
}

/*
 * GUP's follow_page() over [addr, end) while every page is there, as
 * populate meets a range locked already (a lock again, mlockall() again,
 * each round of stress-ng's --mlockmany): its FOLL_TOUCH on each page
 * (mlf_touch()), a pte apart rather than a walk from the top each.
 * Returns where it stopped: the first page GUP does more for (none, a
 * COW to break, a NUMA-hinting, special or huge mapping) or a fatal
 * signal, which GUP then takes from there.  Under the mmap_lock.
 */
static unsigned long mlf_touch_range(struct vm_area_struct *vma,
				     unsigned long addr, unsigned long end)
{
	bool write = mlf_populate_writes(vma);
	unsigned long next;

	for (; addr < end; cond_resched()) {
		pmd_t *pmd = mlf_pmd_of(vma->vm_mm, addr, end, &next);
		spinlock_t *ptl;	/* the page table's lock, from the kernel */
		pte_t *start_pte, *pte;

		if (!pmd || !mlf_table_entry(mlf_pmd_val(READ_ONCE(*pmd))))
			break;
		start_pte = mlf_pte_map_lock(vma, pmd, addr, &ptl, true);
		if (!start_pte)
			break;
		for (pte = start_pte; addr != next; pte++, addr += PAGE_SIZE) {
			pte_t ptent = ptep_get(pte);
			struct folio *folio;

			if (!pte_present(ptent) || pte_protnone(ptent) ||
			    (write && !pte_write(ptent)) ||
			    fatal_signal_pending(current))
				break;
			folio = mlf_pte_folio(ptent);
			if (!folio)
				break;
			if (write && !pte_dirty(ptent) && !folio_test_dirty(folio))
				folio_mark_dirty(folio);
			folio_mark_accessed(folio);
		}
		pte_unmap_unlock(start_pte, ptl);
		if (addr != next)
			break;
	}
	return addr;
}

/*
 * 1: faulted in and touched; 0: GUP's turn, or *locked dropped; or errno.
 * @absent: the lock's walk saw that GUP's first look would find no page
 * to touch, and the mmap_lock has been held since (downgraded): fault at
 * once.  A fault of another thread since is GUP's own race, between its
 * look and its fault: the fault finds the page and does what GUP's
 * retry would.
 */
static long mlf_fault_in(struct vm_area_struct *vma, unsigned long addr,
			 bool absent, int *locked)
{
	bool write = mlf_populate_writes(vma);
	unsigned int flags = FAULT_FLAG_ALLOW_RETRY | FAULT_FLAG_KILLABLE;
	unsigned long next;
	pmd_t *pmd = NULL;
	vm_fault_t ret;

	if (fatal_signal_pending(current))
		return 0;	/* GUP's -EINTR */
	if (!absent) {
		/* An empty pte needs no lock to say so: the fault settles it. */
		pmd = mlf_pmd_of(vma->vm_mm, addr, addr + PAGE_SIZE, &next);
		absent = !pmd || pmd_none(READ_ONCE(*pmd)) ||
			 mlf_pte_absent(pmd, addr);
	}
	switch (absent ? 0 : mlf_touch(vma, addr, write, &pmd)) {
	case 1:
		return 1;
	case -1:
		return 0;
	}
	ret = handle_mm_fault(vma, addr, flags | (write ? FAULT_FLAG_WRITE : 0),
			      NULL);
	if (ret & (VM_FAULT_RETRY | VM_FAULT_COMPLETED)) {
		*locked = 0;	/* the fault dropped the mmap_lock */
		return 0;
	}
	if (ret & VM_FAULT_ERROR)
		return vm_fault_to_errno(ret, 0);
	return mlf_touch(vma, addr, write, &pmd) > 0;
}

/*
 * __mm_populate() over [addr, end), from the mmap_lock held for reading
 * (*locked): the same VMAs skipped, the same errors, and the same retake
 * of the lock where a fault dropped it.
 */
static long mlf_populate_span(struct mm_struct *mm, unsigned long addr,
			      unsigned long end, bool absent,
			      int ignore_errors, int *locked)
{
	struct vm_area_struct *vma = NULL;
	unsigned long vend;
	long ret;

	while (addr < end) {
		if (!*locked) {
			mmap_read_lock(mm);
			*locked = 1;
			vma = NULL;
			absent = false;	/* the walk's view is gone */
		}
		if (!vma || addr >= vma->vm_end)
			vma = find_vma_intersection(mm, vma ? vma->vm_end : addr,
						    end);
		if (!vma)
			break;
		vend = min(end, vma->vm_end);
		if (vma->vm_flags & (VM_IO | VM_PFNMAP)) {
			addr = vend;
			continue;
		}
		addr = max(addr, vma->vm_start);
		ret = 0;
		if (mlf_fault_here(vma, addr, vend)) {
			ret = mlf_fault_in(vma, addr, absent, locked);
			if (ret || !*locked)
				mlf_call(lru_add_drain)();	/* as GUP's */
			if (!*locked)
				continue;	/* again from addr, as GUP */
		} else if (!absent && mlf_gup_plain(vma)) {
			addr = mlf_touch_range(vma, addr, vend);
			if (addr == vend) {
				mlf_call(lru_add_drain)();	/* as populate's */
				continue;
			}
		}
		if (!ret)
			ret = mlf_call(populate_vma_page_range)(vma, addr, vend,
								locked);
		if (ret < 0 && !ignore_errors)
			return ret;
		addr = ret < 0 ? vend : addr + (ret << PAGE_SHIFT);
	}
	return 0;
}

/*
 * Called with the mmap_lock held for writing, returns with it released.
 * The syscall drops it and takes it again for reading to populate: a
 * downgrade is the same exclusion, and one lock and __mm_populate() less.
 */
static int mlf_populate(struct mlf_ctx *c, int ignore_errors)
{
	struct mm_struct *mm = current->mm;
	unsigned int i;
	int locked = 1;
	long ret = 0;

	if (!c->nr_pop) {
		mmap_write_unlock(mm);
		return 0;
	}
	mlf_count(populate_calls, 1);
	mmap_write_downgrade(mm);
	for (i = 0; i < c->nr_pop && !ret; i++)
		ret = mlf_populate_span(mm, c->pop[i].start, c->pop[i].end,
					c->pop_absent & (1U << i),
					ignore_errors, &locked);
	if (locked)
		mmap_read_unlock(mm);
	/*
	 * The faults mlocked what they mapped through this CPU's kernel
	 * batch: count those locks now, while they still hold (see
	 * mlf_kernel_drain(); pages faulted in on a CPU the task has left
	 * wait for that CPU, as they do after mlock(2)).
	 */
	mlf_call(mlock_drain_local)();
	return ret ? mlf_populate_errno(ret) : 0;
}

/* count_mm_mlocked_page_nr(): pages of [start, start+len) already locked. */
static unsigned long mlf_locked_pages_in(struct mm_struct *mm,
					 unsigned long start,
					 unsigned long len)
{
	VMA_ITERATOR(vmi, mm, start);
	unsigned long end, count = 0;
	struct vm_area_struct *vma;

	end = ULONG_MAX - len < start ? ULONG_MAX : start + len;
	for_each_vma_range(vmi, vma, end) {
		if (!(vma->vm_flags & VM_LOCKED))
			continue;
		if (start > vma->vm_start)
			count -= start - vma->vm_start;
		if (end < vma->vm_end) {
			count += end - vma->vm_start;
			break;
		}
		count += vma->vm_end - vma->vm_start;
	}
	return count >> PAGE_SHIFT;
}

static int mlf_legacy_lock(unsigned long start, unsigned long len,
			   unsigned int flags);

/* do_mlock() up to populate, mmap_lock held for writing. */
static __always_inline int mlf_lock_range(struct mlf_ctx *c,
					  unsigned long start,
					  unsigned long len,
					  vm_flags_t vmflags)
{
	struct mm_struct *mm = current->mm;
	unsigned long lock_limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	unsigned long locked = (len >> PAGE_SHIFT) + mm->locked_vm;
	int ret;

	if (locked > lock_limit && !capable(CAP_IPC_LOCK))
		locked -= mlf_locked_pages_in(mm, start, len);
	if (locked > lock_limit && !capable(CAP_IPC_LOCK))
		return -ENOMEM;
	mlf_ctx_owner(c);
	ret = mlf_apply_range(mm, mlf_ctx_vc(c), start, len, vmflags, c);
	mlf_finish(c);
	return ret;
}

static void mlf_align(unsigned long *start, unsigned long *len)
{
	unsigned long s = untagged_addr(*start);

	*len = PAGE_ALIGN(*len + offset_in_page(s));
	*start = s & PAGE_MASK;
}

static int mlf_check_lock(unsigned int flags, vm_flags_t *vmflags)
{
	if (flags & ~MLOCK_ONFAULT)
		return -EINVAL;
	*vmflags = VM_LOCKED | ((flags & MLOCK_ONFAULT) ? VM_LOCKONFAULT : 0);
	if (!can_do_mlock())
		return -EPERM;
	return 0;
}

static __always_inline int mlf_do_lock(struct mlf_file *file,
				       enum mlf_mode mode, unsigned long start,
				       unsigned long len, unsigned int flags)
{
	struct mm_struct *mm = current->mm;
	vm_flags_t vmflags;
	struct mlf_ctx c __uninitialized;	/* mlf_ctx_init() */
	int ret;

	ret = mlf_check_lock(flags, &vmflags);
	if (ret)
		return ret;
	mlf_align(&start, &len);
	mlf_ctx_init(&c, mode, MLF_WALK_LOCK, file);
	if (mmap_write_lock_killable(mm))
		return -EINTR;
	ret = mlf_lock_range(&c, start, len, vmflags);
	if (ret) {
		mmap_write_unlock(mm);
		return ret;
	}
	return mlf_populate(&c, 0);	/* and unlock */
}

int mlf_lock(struct mlf_file *file, enum mlf_mode mode, unsigned long start,
	     unsigned long len, unsigned int flags)
{
	if (mode == MLF_LEGACY)
		return mlf_legacy_lock(start, len, flags);
	return mlf_do_lock(file, mode, start, len, flags);
}

static __always_inline int mlf_unlock_range(struct mlf_ctx *c,
					    unsigned long start,
					    unsigned long len)
{
	int ret;

	mlf_ctx_unlocker(c);
	ret = mlf_apply_range(current->mm, mlf_ctx_vc(c), start, len, 0, c);

	mlf_finish(c);
	return ret;
}

static int mlf_legacy_unlock(unsigned long start, unsigned long len);

int mlf_unlock(struct mlf_file *file, enum mlf_mode mode, unsigned long start,
	       unsigned long len)
{
	struct mm_struct *mm = current->mm;
	struct mlf_ctx c __uninitialized;	/* mlf_ctx_init() */
	int ret;

	if (mode == MLF_LEGACY)
		return mlf_legacy_unlock(start, len);
	mlf_align(&start, &len);
	mlf_ctx_init(&c, mode, MLF_WALK_UNLOCK, file);
	if (mmap_write_lock_killable(mm))
		return -EINTR;
	ret = mlf_unlock_range(&c, start, len);
	mmap_write_unlock(mm);
	return ret;
}

/*
 * LOCKV/UNLOCKV: the ranges in order, as that many syscalls would do them,
 * but the mmap_lock is kept from one range to the next unless a populate
 * (which takes it for reading itself) must run in between.
 */
int mlf_lockv(struct mlf_file *file, enum mlf_mode mode,
	      const struct mlockfast_iovec __user *iov, unsigned int count,
	      unsigned int flags, bool lock, unsigned int *done)
{
	struct mm_struct *mm = current->mm;
	struct mlockfast_iovec *vec;
	unsigned int readable;
	unsigned long bytes;
	vm_flags_t vmflags = 0;
	bool held = false;
	int ret = 0;

	*done = 0;
	if (lock) {
		ret = mlf_check_lock(flags, &vmflags);
		if (ret)
			return ret;
	}
	if (!count)
		return 0;
	/*
	 * Copy the vector in before taking mmap_lock: a fault on it with the
	 * lock held for writing would deadlock.  Ranges before an unreadable
	 * element are still done, then -EFAULT.
	 */
	vec = kvmalloc_array(count, sizeof(*vec), GFP_KERNEL);
	if (!vec)
		return -ENOMEM;
	bytes = count * sizeof(*vec);
	readable = (bytes - copy_from_user(vec, iov, bytes)) / sizeof(*vec);
	for (; *done < readable; (*done)++) {
		unsigned long start = vec[*done].addr, len = vec[*done].len;
		struct mlf_ctx c __uninitialized;	/* mlf_ctx_init() */

		if (mode == MLF_LEGACY) {
			ret = lock ? mlf_legacy_lock(start, len, flags) :
				     mlf_legacy_unlock(start, len);
			if (ret)
				break;
			continue;
		}
		mlf_align(&start, &len);
		mlf_ctx_init(&c, mode, lock ? MLF_WALK_LOCK : MLF_WALK_UNLOCK,
			     file);
		if (!held && mmap_write_lock_killable(mm)) {
			ret = -EINTR;
			break;
		}
		held = true;
		ret = lock ? mlf_lock_range(&c, start, len, vmflags) :
			     mlf_unlock_range(&c, start, len);
		if (!ret && c.nr_pop) {
			held = false;
			ret = mlf_populate(&c, 0);	/* and unlock */
		}
		if (ret)
			break;
		if (fatal_signal_pending(current)) {
			(*done)++;
			ret = -EINTR;
			break;
		}
	}
	if (held)
		mmap_write_unlock(mm);
	kvfree(vec);
	if (!ret && *done < count)
		ret = -EFAULT;
	return ret;
}

static int mlf_legacy_lockall(unsigned int flags);

/* apply_mlockall_flags(), then populate as mlockall(MCL_CURRENT) does. */
int mlf_lockall(struct mlf_file *file, enum mlf_mode mode, unsigned int flags)
{
	struct mm_struct *mm = current->mm;
	unsigned long lock_limit;
	vm_flags_t to_add = 0;
	struct mlf_ctx c __uninitialized;	/* mlf_ctx_init() */
	int ret;

	if (!flags || (flags & ~(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT)) ||
	    flags == MCL_ONFAULT)
		return -EINVAL;
	if (!can_do_mlock())
		return -EPERM;
	if (mode == MLF_LEGACY)
		return mlf_legacy_lockall(flags);
	lock_limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	mlf_ctx_init(&c, mode, MLF_WALK_LOCK, file);
	if (mmap_write_lock_killable(mm))
		return -EINTR;
	ret = -ENOMEM;
	if (!(flags & MCL_CURRENT) || mm->total_vm <= lock_limit ||
	    capable(CAP_IPC_LOCK)) {
		mm->def_flags &= MLF_VM_LOCKED_CLEAR_MASK;
		if (flags & MCL_FUTURE) {
			mm->def_flags |= VM_LOCKED;
			if (flags & MCL_ONFAULT)
				mm->def_flags |= VM_LOCKONFAULT;
		}
		if (flags & MCL_CURRENT) {
			mlf_ctx_owner(&c);
			to_add = VM_LOCKED;
			if (flags & MCL_ONFAULT)
				to_add |= VM_LOCKONFAULT;
			mlf_apply_all(mm, to_add, &c);
		}
		mlf_finish(&c);
		ret = 0;
	}
	if (!ret && (flags & MCL_CURRENT))
		mlf_populate(&c, 1);	/* and unlock */
	else
		mmap_write_unlock(mm);
	return ret;
}

int mlf_unlockall(struct mlf_file *file, enum mlf_mode mode)
{
	struct mm_struct *mm = current->mm;
	struct mlf_ctx c __uninitialized;	/* mlf_ctx_init() */

	if (mode == MLF_LEGACY) {
		struct pt_regs regs = {};

		return mlf_call(sys_munlockall)(&regs);
	}
	mlf_ctx_init(&c, mode, MLF_WALK_UNLOCK, file);
	if (mmap_write_lock_killable(mm))
		return -EINTR;
	mlf_ctx_unlocker(&c);
	mm->def_flags &= MLF_VM_LOCKED_CLEAR_MASK;
	mlf_apply_all(mm, 0, &c);
	mlf_finish(&c);
	mmap_write_unlock(mm);
	return 0;
}

/*
 * Legacy mode reproduces pre-4.15 mlock for measurement: mlock() and
 * mlockall() queued lru_add_drain on every online CPU and waited for all of
 * them, then ran the normal path.  Here the normal path is the stock syscall.
 */
static void mlf_drain_one(struct work_struct *work)
{
	mlf_call(lru_add_drain)();
}

static int mlf_legacy_drain(void)
{
	mlf_count(legacy_drains, 1);
	return mlf_call(schedule_on_each_cpu)(mlf_drain_one);
}

/*
 * DRAIN: every CPU's kernel LRU and mlock batches too, so that the gauges
 * read exact after it whatever the kernel left queued there (munlocks of an
 * unmap or an exit, see MLF_ZAP_LEAVES_MUNLOCKS_QUEUED).
 */
int mlf_drain_kernel_batches(void)
{
	return mlf_call(schedule_on_each_cpu)(mlf_drain_one);
}

static int mlf_legacy_lock(unsigned long start, unsigned long len,
			   unsigned int flags)
{
	struct pt_regs regs = { .di = start, .si = len, .dx = flags };
	int ret = mlf_legacy_drain();

	return ret ? ret : mlf_call(sys_mlock2)(&regs);
}

static int mlf_legacy_unlock(unsigned long start, unsigned long len)
{
	struct pt_regs regs = { .di = start, .si = len };

	return mlf_call(sys_munlock)(&regs);
}

static int mlf_legacy_lockall(unsigned int flags)
{
	struct pt_regs regs = { .di = flags };
	int ret = mlf_legacy_drain();

	return ret ? ret : mlf_call(sys_mlockall)(&regs);
}
