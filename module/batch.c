// SPDX-License-Identifier: GPL-2.0
/*
 * Per-CPU batches of folios waiting to move to the unevictable LRU.
 *
 * The lock path sets PG_mlocked itself (exact Mlocked at once) and queues
 * the folio here, holding a reference.  Applying an entry moves the folio
 * only if it is still mlocked and still on an evictable LRU list, so an
 * entry is idempotent: an unlock that came first (PG_mlocked clear) cancels
 * it, and a stale or duplicate entry can never raise mlock_count twice.
 * Moves themselves go through the kernel's mlock_folio(), so mlock_count and
 * the LRU bookkeeping stay the kernel's.
 *
 * Each batch has a spinlock rather than a local lock so that DRAIN, CPU
 * offline and unload can apply another CPU's batch from here, without
 * queueing work on that CPU or waiting for it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpuhotplug.h>
#include <linux/mm.h>
#include <linux/mm_inline.h>
#include <linux/percpu.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include "compat.h"
#include "mlockfast.h"

struct mlf_batch {
	spinlock_t lock;	/* guards nr and folios[] */
	unsigned int nr;
	struct delayed_work work;
	struct folio *folios[MLF_BATCH_MAX];
};

static struct mlf_batch __percpu *mlf_batches;
static enum cpuhp_state mlf_cpuhp_state;

/* Should this queued move still happen? */
static bool mlf_move_wanted(struct folio *folio)
{
	return folio_test_mlocked(folio) && folio_test_lru(folio) &&
	       !folio_test_unevictable(folio);
}

static void mlf_batch_apply(struct mlf_batch *b)
{
	unsigned int i, applied = 0, cancelled = 0;

	lockdep_assert_held(&b->lock);
	if (!b->nr)
		return;
	for (i = 0; i < b->nr; i++) {
		struct folio *folio = b->folios[i];

		if (mlf_move_wanted(folio)) {
			mlf_kernel_mlock(folio);
			applied++;
		} else if (!folio_test_mlocked(folio)) {
			cancelled++;
		}
		folio_put(folio);
	}
	b->nr = 0;
	mlf_call(mlock_drain_local)();
	mlf_count(moves_applied, applied);
	mlf_count(moves_cancelled, cancelled);
	mlf_count(batches_applied, 1);
}

/* Drop entries with nothing left to do, keeping the order of the rest. */
static void mlf_batch_prune(struct mlf_batch *b)
{
	unsigned int i, kept = 0, cancelled = 0;

	lockdep_assert_held(&b->lock);
	for (i = 0; i < b->nr; i++) {
		struct folio *folio = b->folios[i];

		if (mlf_move_wanted(folio)) {
			b->folios[kept++] = folio;
			continue;
		}
		if (!folio_test_mlocked(folio))
			cancelled++;
		folio_put(folio);
	}
	b->nr = kept;
	mlf_count(moves_cancelled, cancelled);
}

struct mlf_batch *mlf_batch_get(void)
{
	struct mlf_batch *b = get_cpu_ptr(mlf_batches);

	spin_lock(&b->lock);
	return b;
}

void mlf_batch_put(struct mlf_batch *b, bool deferred)
{
	if (deferred && b->nr && !delayed_work_pending(&b->work))
		schedule_delayed_work_on(smp_processor_id(), &b->work,
					 msecs_to_jiffies(mlf_defer_ms));
	spin_unlock(&b->lock);
	put_cpu_ptr(mlf_batches);
}

void mlf_batch_push(struct mlf_batch *b, struct folio *folio)
{
	if (b->nr >= mlf_batch_size) {
		mlf_batch_prune(b);
		if (b->nr >= mlf_batch_size)
			mlf_batch_apply(b);
	}
	folio_get(folio);
	b->folios[b->nr++] = folio;
	mlf_count(moves_queued, 1);
}

void mlf_batch_apply_local(void)
{
	struct mlf_batch *b = mlf_batch_get();

	mlf_batch_apply(b);
	mlf_batch_put(b, false);
}

/* After an unlock: most entries are cancelled now, so make room cheaply. */
void mlf_batch_prune_local(void)
{
	struct mlf_batch *b = mlf_batch_get();

	if (b->nr > mlf_batch_size / 2)
		mlf_batch_prune(b);
	mlf_batch_put(b, false);
}

static void mlf_batch_apply_cpu(int cpu)
{
	struct mlf_batch *b = per_cpu_ptr(mlf_batches, cpu);

	if (!READ_ONCE(b->nr))
		return;
	/* Another CPU's batch: the moves land on this CPU's kernel batch. */
	preempt_disable();
	spin_lock(&b->lock);
	mlf_batch_apply(b);
	spin_unlock(&b->lock);
	preempt_enable();
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

	preempt_disable();
	spin_lock(&b->lock);
	mlf_batch_apply(b);
	spin_unlock(&b->lock);
	preempt_enable();
}

/* Runs on a surviving CPU once @cpu is dead. */
static int mlf_batch_cpu_dead(unsigned int cpu)
{
	mlf_batch_apply_cpu(cpu);
	return 0;
}

int mlf_batch_init(void)
{
	int cpu, ret;

	mlf_batches = alloc_percpu(struct mlf_batch);
	if (!mlf_batches)
		return -ENOMEM;
	for_each_possible_cpu(cpu) {
		struct mlf_batch *b = per_cpu_ptr(mlf_batches, cpu);

		spin_lock_init(&b->lock);
		INIT_DELAYED_WORK(&b->work, mlf_batch_work);
	}
	ret = cpuhp_setup_state_nocalls(CPUHP_BP_PREPARE_DYN, "mlockfast:dead",
					NULL, mlf_batch_cpu_dead);
	if (ret < 0) {
		free_percpu(mlf_batches);
		return ret;
	}
	mlf_cpuhp_state = ret;
	return 0;
}

/* Unload: nothing may stay queued, so stop the timers, then apply all. */
void mlf_batch_exit(void)
{
	int cpu;

	cpuhp_remove_state_nocalls(mlf_cpuhp_state);
	for_each_possible_cpu(cpu)
		cancel_delayed_work_sync(&per_cpu_ptr(mlf_batches, cpu)->work);
	mlf_batch_apply_all();
	free_percpu(mlf_batches);
}
