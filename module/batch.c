// SPDX-License-Identifier: GPL-2.0
/*
 * Per-CPU batches of pending moves to the unevictable LRU.
 *
 * The lock path sets PG_mlocked itself (Mlocked is exact at once) and
 * records here that the folio owes the kernel one mlock: an entry is a folio
 * (with a reference) and the mm and address of the lock it stands for.
 * Applying an entry calls the kernel's mlock_folio(), which moves the folio
 * and counts the lock in mlock_count, exactly as the syscall would have.  An
 * unlock that comes first finds the entry through a small hash and takes it
 * back: the move is cancelled.  A folio has at most one live entry: locking
 * it again through us pays the first one (see the engine).  The mm's notifier
 * (mm.c) voids entries whose mapping the kernel tears down.
 *
 * Each batch has a spinlock rather than a local lock so that DRAIN, CPU
 * offline and unload can apply another CPU's batch from here, without
 * queueing work on that CPU or waiting for it.  Its own CPU takes it pinned
 * there (mlf_cpu_pin(): preemption off, or on PREEMPT_RT migration off,
 * where the lock and what runs under it sleep), so that the kernel's per-CPU
 * mlock batch it feeds is the one it drains.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpuhotplug.h>
#include <linux/hash.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include "compat.h"
#include "mlockfast.h"

#define MLF_HASH_BITS	(ilog2(MLF_BATCH_MAX) + 1)	/* load <= 1/2 */
#define MLF_HASH_SIZE	BIT(MLF_HASH_BITS)

/*
 * An entry whose folio owes nothing (an unlock cancelled it) stays in place,
 * dead, holding no reference, until the batch empties or is compacted: an
 * unlock then costs one hash probe and no deletion, and a lock of the same
 * folio revives the entry.
 */
struct mlf_entry {
	struct folio *folio;
	struct mlf_mm *owner;	/* whose lock it is (NULL: paid at once) */
	unsigned long addr;	/* where owner maps the folio */
	bool live;		/* owes the kernel its mlock */
	u16 slot;		/* its hash slot */
};

struct mlf_batch {
	spinlock_t lock;	/* guards everything below */
	unsigned int nr;	/* entries[] in use, dead ones included */
	unsigned int live;	/* entries owing something */
	struct delayed_work work;
	struct mlf_entry entries[MLF_BATCH_MAX];
	u16 hash[MLF_HASH_SIZE];	/* index + 1 into entries; 0: free */
};

static struct mlf_batch **mlf_batches;
static enum cpuhp_state mlf_cpuhp_state;
/* Batches with a live entry: an unlock asks "any but mine?" in O(1). */
static atomic_t mlf_busy;

/* Linear probing: the hash slot of @folio, or of the free slot ending it. */
static unsigned int mlf_slot(struct mlf_batch *b, struct folio *folio)
{
	unsigned int i = hash_ptr(folio, MLF_HASH_BITS);

	while (b->hash[i] && b->entries[b->hash[i] - 1].folio != folio)
		i = (i + 1) & (MLF_HASH_SIZE - 1);
	return i;
}

static struct mlf_entry *mlf_find(struct mlf_batch *b, struct folio *folio)
{
	unsigned int i;

	if (!b->live)
		return NULL;
	i = mlf_slot(b, folio);
	return b->hash[i] ? &b->entries[b->hash[i] - 1] : NULL;
}

static void mlf_kill(struct mlf_batch *b, struct mlf_entry *e)
{
	mlf_rt_assert_sleepable();	/* folio_put() may free it */
	e->live = false;
	mlf_mm_pending_add(e->owner, -1);
	folio_put(e->folio);
	if (!--b->live)
		atomic_dec(&mlf_busy);
}

/* Forget every entry (all dead by now). */
static void mlf_reset(struct mlf_batch *b)
{
	unsigned int i;

	for (i = 0; i < b->nr; i++)
		b->hash[b->entries[i].slot] = 0;
	b->nr = 0;
}

/* Drop the dead entries, keeping the live ones and their order. */
static void mlf_compact(struct mlf_batch *b)
{
	unsigned int i, kept = 0;

	mlf_reset(b);
	for (i = 0; kept < b->live; i++) {
		struct mlf_entry *e = &b->entries[i];

		if (!e->live)
			continue;
		e->slot = mlf_slot(b, e->folio);
		b->hash[e->slot] = kept + 1;
		b->entries[kept++] = *e;
	}
	b->nr = kept;
}

/* Pay what each entry owes, or drop it if an unlock voided it. */
static void mlf_batch_apply(struct mlf_batch *b)
{
	unsigned int i, applied = 0, voided = 0;

	lockdep_assert_held(&b->lock);
	for (i = 0; i < b->nr; i++) {
		struct mlf_entry *e = &b->entries[i];

		if (!e->live)
			continue;
		if (folio_test_mlocked(e->folio)) {
			mlf_kernel_mlock(e->folio);
			applied++;
		} else {
			voided++;
		}
	}
	/*
	 * The entries die only once the kernel has counted their mlocks.
	 * Until then an unlock of the folio (DRAIN and the timer run without
	 * mmap_lock) must find them live and wait for b->lock: were they gone
	 * first, it would find the folio mlocked but not yet moved, take that
	 * lock for uncounted and only clear PG_mlocked, and the mlock still
	 * queued in the kernel's batch would count a later lock a second time.
	 */
	if (applied)
		mlf_call(mlock_drain_local)();
	for (i = 0; i < b->nr; i++)
		if (b->entries[i].live)
			mlf_kill(b, &b->entries[i]);
	mlf_reset(b);
	if (applied || voided)
		mlf_count(batches_applied, 1);
	mlf_count(moves_applied, applied);
	mlf_count(moves_cancelled, voided);
}

/*
 * Drop the entries of folios no longer mlocked: something outside the
 * module (munmap, a COW break) munlocked them and the kernel took the
 * "that was the last mlock" view of them, as it does for its own batch.
 */
static void mlf_batch_prune(struct mlf_batch *b)
{
	unsigned int i, voided = 0;

	for (i = 0; i < b->nr; i++) {
		struct mlf_entry *e = &b->entries[i];

		if (e->live && !folio_test_mlocked(e->folio)) {
			mlf_kill(b, e);
			voided++;
		}
	}
	mlf_compact(b);
	mlf_count(moves_cancelled, voided);
}

struct mlf_batch *mlf_batch_get(void)
{
	struct mlf_batch *b;

	mlf_cpu_pin();
	b = mlf_batches[smp_processor_id()];
	spin_lock(&b->lock);
	return b;
}

void mlf_batch_put(struct mlf_batch *b, bool deferred)
{
	if (deferred && b->live && !delayed_work_pending(&b->work))
		schedule_delayed_work_on(smp_processor_id(), &b->work,
					 msecs_to_jiffies(mlf_defer_ms));
	spin_unlock(&b->lock);
	mlf_cpu_unpin();
}

/*
 * @folio, which the caller has just mlocked for @owner at @addr, owes the
 * kernel that mlock.  Returns false, queueing nothing, if the folio is off
 * the LRU: whoever isolated it puts it back, and that culls it.
 *
 * The owner's count goes up before the LRU test: reclaim and migration take
 * the folio off the LRU before they tell the notifier, so either we see it
 * off the LRU here or the notifier sees the count and voids this entry.
 */
bool mlf_batch_push(struct mlf_batch *b, struct folio *folio,
		    struct mlf_mm *owner, unsigned long addr)
{
	struct mlf_entry *e;
	unsigned int i;

	mlf_mm_pending_add(owner, 1);
	smp_mb__after_atomic();	/* count, then LRU test: see above */
	if (!folio_test_lru(folio)) {
		mlf_mm_pending_add(owner, -1);
		return false;
	}
	if (!b->live && b->nr)
		mlf_reset(b);
	i = mlf_slot(b, folio);
	if (b->hash[i]) {
		e = &b->entries[b->hash[i] - 1];
		/*
		 * A live one was voided by an munlock since (the caller has
		 * just set PG_mlocked): this lock replaces it.
		 */
		if (e->live)
			mlf_kill(b, e);
	} else {
		if (b->nr >= READ_ONCE(mlf_batch_size)) {
			mlf_batch_prune(b);
			if (b->nr >= READ_ONCE(mlf_batch_size))
				mlf_batch_apply(b);
			i = mlf_slot(b, folio);
		}
		e = &b->entries[b->nr];
		e->slot = i;
		b->hash[i] = ++b->nr;
	}
	folio_get(folio);
	e->folio = folio;
	e->owner = owner;
	e->addr = addr;
	e->live = true;
	if (!b->live++)
		atomic_inc(&mlf_busy);
	mlf_count(moves_queued, 1);
	return true;
}

/*
 * Take back the mlock @folio owes, if this batch queued one: was it taken
 * through @owner's mapping at @addr (the lock being undone) or another?
 */
int mlf_batch_cancel(struct mlf_batch *b, struct folio *folio,
		     struct mlf_mm *owner, unsigned long addr)
{
	struct mlf_entry *e = mlf_find(b, folio);
	int how;

	if (!e || !e->live)
		return MLF_CANCEL_NONE;
	how = e->owner == owner && e->addr == addr ? MLF_CANCEL_SAME :
						     MLF_CANCEL_OTHER;
	mlf_count(moves_cancelled, 1);
	mlf_kill(b, e);
	return how;
}

static bool mlf_cpu_pending(int cpu)
{
	return mlf_batches[cpu] && READ_ONCE(mlf_batches[cpu]->live);
}

/* mlf_batch_cancel() on the other CPUs' batches; call with none held. */
int mlf_batch_cancel_remote(struct folio *folio, struct mlf_mm *owner,
			    unsigned long addr)
{
	int cpu, self = raw_smp_processor_id(), found = MLF_CANCEL_NONE;

	for_each_possible_cpu(cpu) {
		struct mlf_batch *b = mlf_batches[cpu];

		if (cpu == self || !mlf_cpu_pending(cpu))
			continue;
		spin_lock(&b->lock);
		found = mlf_batch_cancel(b, folio, owner, addr);
		spin_unlock(&b->lock);
		if (found)
			break;
	}
	return found;
}

/* Does any CPU but this one hold entries?  (Every unlock asks.) */
bool mlf_batch_remote_pending(void)
{
	int busy = atomic_read(&mlf_busy);

	return busy > 1 ||
	       (busy && !mlf_cpu_pending(raw_smp_processor_id()));
}

/*
 * The kernel is about to unmap or replace @owner's pages in [start, end):
 * the locks taken through them end there, so their moves must not be paid.
 */
void mlf_batch_void(struct mlf_mm *owner, unsigned long start,
		    unsigned long end)
{
	unsigned int i, voided;
	int cpu;

	for_each_possible_cpu(cpu) {
		struct mlf_batch *b = mlf_batches[cpu];

		if (!mlf_cpu_pending(cpu))
			continue;
		voided = 0;
		spin_lock(&b->lock);
		for (i = 0; i < b->nr; i++) {
			struct mlf_entry *e = &b->entries[i];

			if (e->live && e->owner == owner && e->addr < end &&
			    e->addr + folio_size(e->folio) > start) {
				mlf_kill(b, e);
				voided++;
			}
		}
		spin_unlock(&b->lock);
		mlf_count(moves_cancelled, voided);
	}
}

/*
 * Does this CPU's batch hold no entry?  The caller holds its mm's mmap_lock
 * for writing and is pinned to this CPU (a page table's lock pins it), so
 * an empty batch gets no entry of that mm until the caller lets go: those
 * are added only by a lock walk of the mm, on the CPU it runs on.  Entries
 * of other mms may come at any time (on PREEMPT_RT from a task that preempts
 * the caller here, as from other CPUs on every kernel): the unlock's fast
 * path never assumed their absence.
 */
bool mlf_batch_idle(void)
{
	return !READ_ONCE(mlf_batches[smp_processor_id()]->live);
}

/* Folio references the batches hold: one per live entry. */
unsigned long mlf_batch_held(void)
{
	unsigned long n = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		n += READ_ONCE(mlf_batches[cpu]->live);
	return n;
}

/* @cpu's batch, from whichever CPU the caller is on now. */
void mlf_batch_apply_cpu(int cpu)
{
	struct mlf_batch *b = mlf_batches[cpu];

	if (!mlf_cpu_pending(cpu))
		return;
	/* Another CPU's batch: the moves land on this CPU's kernel batch. */
	mlf_cpu_pin();
	spin_lock(&b->lock);
	mlf_batch_apply(b);
	spin_unlock(&b->lock);
	mlf_cpu_unpin();
}

void mlf_batch_apply_all(void)
{
	int cpu;

	for_each_possible_cpu(cpu)
		mlf_batch_apply_cpu(cpu);
}

static void mlf_batch_work(struct work_struct *work)
{
	struct mlf_batch *b = container_of(to_delayed_work(work),
					   struct mlf_batch, work);

	mlf_cpu_pin();
	spin_lock(&b->lock);
	mlf_batch_apply(b);
	spin_unlock(&b->lock);
	mlf_cpu_unpin();
}

/* Runs on a surviving CPU once @cpu is dead. */
static int mlf_batch_cpu_dead(unsigned int cpu)
{
	mlf_batch_apply_cpu(cpu);
	return 0;
}

static void mlf_batch_free(void)
{
	int cpu;

	for_each_possible_cpu(cpu)
		kvfree(mlf_batches[cpu]);
	kfree(mlf_batches);
}

int mlf_batch_init(void)
{
	int cpu, ret;

	ret = mlf_mm_init();
	if (ret)
		return ret;
	mlf_batches = kcalloc(nr_cpu_ids, sizeof(*mlf_batches), GFP_KERNEL);
	if (!mlf_batches) {
		mlf_mm_exit();
		return -ENOMEM;
	}
	for_each_possible_cpu(cpu) {
		struct mlf_batch *b = kvzalloc_node(sizeof(*b), GFP_KERNEL,
						    cpu_to_node(cpu));

		if (!b) {
			mlf_batch_free();
			mlf_mm_exit();
			return -ENOMEM;
		}
		spin_lock_init(&b->lock);
		INIT_DELAYED_WORK(&b->work, mlf_batch_work);
		mlf_batches[cpu] = b;
	}
	ret = cpuhp_setup_state_nocalls(CPUHP_BP_PREPARE_DYN, "mlockfast:dead",
					NULL, mlf_batch_cpu_dead);
	if (ret < 0) {
		mlf_batch_free();
		mlf_mm_exit();
		return ret;
	}
	mlf_cpuhp_state = ret;
	return 0;
}

/*
 * Unload: nothing may stay queued, so stop the timers and apply all; then
 * the notifiers go (they look at the batches), then the batches.
 */
void mlf_batch_exit(void)
{
	int cpu;

	cpuhp_remove_state_nocalls(mlf_cpuhp_state);
	for_each_possible_cpu(cpu)
		cancel_delayed_work_sync(&mlf_batches[cpu]->work);
	mlf_batch_apply_all();
	mlf_mm_exit();
	mlf_batch_free();
}
