// SPDX-License-Identifier: GPL-2.0
/*
 * Per-process state of every mm that has used the device, and the runs of
 * private anonymous pages whose moves a lock left owing (see
 * mlf_lock_one()): a run costs nothing per page until its work, after
 * defer_ms, moves what is still locked (mlf_pay_run()).
 *
 * A move may be left owing only while no lock but the owner's can reach the
 * page: the page is mapped once.  A fork ends that.  The sched_process_fork
 * tracepoint hears it before the child first runs, and gives the child a
 * task work that pays every move its parent owes (the whole mm's locked
 * VMAs: runs are addresses, and an mremap() may have moved their pages)
 * before it returns to user mode, where it could lock or unlock them.  The
 * child waits for that, uninterruptibly: for the parent's mmap_lock, read,
 * and one walk.
 * An unmap or replacement needs nothing: the pay walk finds other pages, or
 * none, where a run was.  No mmu notifier: the kernel keeps one's
 * bookkeeping until the mm exits, and every VM call of the mm would look
 * at it.
 *
 * Lifetime: the exit_mmap tracepoint hears the mm go.  A state holds the
 * mm_struct (mmgrab(), not its pages), and each file that caches it holds
 * one more reference, so that a cached pointer is never stale.  At exit the
 * process waits for no grace period, and for no work of ours unless it is
 * a child killed before it paid its parent's moves.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/hashtable.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/task_work.h>
#include <linux/tracepoint.h>
#include <linux/workqueue.h>
#include "compat.h"
#include "raw_mm.h"
#include "mlockfast.h"

enum {
	MLF_MM_DEAD,		/* the mm has exited: its work may not be queued */
	MLF_MM_GONE,		/* unhashed, or being unhashed */
	MLF_MM_FORKED,		/* a child waits for the work to pay everything */
};

/* Every mm with state, keyed by the mm; looked up under RCU. */
static DEFINE_HASHTABLE(mlf_mms, 8);
static DEFINE_SPINLOCK(mlf_mms_lock);	/* guards changes to mlf_mms */
static struct workqueue_struct *mlf_wq;
static atomic_long_t mlf_mm_count;	/* mlf_mm allocated, not yet freed */

/*
 * A run is being paid where its pages were locked, but an mremap() may have
 * taken them elsewhere, owed still: until a fork's walk of every locked VMA,
 * the mm owes moves no run records.  Before the runs go (release).
 */
static void mlf_mm_paid_where_locked(struct mlf_mm *m)
{
	if (!m->unmoved)
		WRITE_ONCE(m->unmoved, true);
}

/*
 * Pay every run; mmap_lock held.  The runs go once paid, not before: the
 * fork probe, which holds no lock, takes runs for moves still owed.
 */
static void mlf_mm_pay(struct mlf_mm *m)
{
	unsigned int i;

	if (!m->nr_runs)
		return;
	mlf_mm_paid_where_locked(m);
	for (i = 0; i < m->nr_runs; i++)
		mlf_pay_run(m->mm, m->runs[i].start, m->runs[i].end);
	/* pairs with the fork probe's acquire: it then sees @unmoved set */
	smp_store_release(&m->nr_runs, 0);
}

/*
 * No mm_users reference is taken: the last mmput() would fall to us, and
 * the exiting process's memory, Mlocked included, would outlive it for a
 * while.  A pay under way when the mm exits walks beside the exit's unmap,
 * both holding the mmap_lock for reading, as a fault would.
 *
 * After a fork (MLF_MM_FORKED), everything owed is paid: the runs, what a
 * reclaim-mode lock left, and the pages an mremap() took away from a run,
 * all found by walking every locked VMA; then the mm owes nothing, which
 * the fork probe may see only once it is so.  Only the timed work counts
 * as locks that outlived defer_ms.
 */
static void mlf_mm_work(struct work_struct *work)
{
	struct mlf_mm *m = container_of(to_delayed_work(work), struct mlf_mm,
					work);
	bool forked = test_and_clear_bit(MLF_MM_FORKED, &m->state);
	struct mm_struct *mm = m->mm;

	/* An mm on its way out unmaps everything: nothing to pay. */
	if (!atomic_read(&mm->mm_users))
		return;
	mmap_read_lock(mm);
	if (forked) {
		mlf_pay_run(mm, 0, ULONG_MAX);
		/* pairs with the fork probe's acquire: "owes nothing" when paid */
		smp_store_release(&m->nr_runs, 0);
		/* (likewise) */
		smp_store_release(&m->unmoved, false);
	} else {
		if (m->nr_runs)
			WRITE_ONCE(m->held_long, true);
		mlf_mm_pay(m);
	}
	mmap_read_unlock(mm);
}

/* Also from the tracepoints: a raw lock, on PREEMPT_RT too. */
static void mlf_mm_queue(struct mlf_mm *m, unsigned long delay)
{
	unsigned long flags;

	raw_spin_lock_irqsave(&m->lock, flags);
	if (!test_bit(MLF_MM_DEAD, &m->state))
		mod_delayed_work(mlf_wq, &m->work, delay);
	raw_spin_unlock_irqrestore(&m->lock, flags);
}

/*
 * mlf_mm_add_run() beyond its common case: runs that touch merge; with no
 * room left, all are paid at once.
 */
void mlf_mm_merge_run(struct mlf_mm *m, unsigned long start, unsigned long end)
{
	struct mlf_run *r;
	unsigned int i;

	for (i = 0; i < m->nr_runs; i++) {
		r = &m->runs[i];
		if (start <= r->end && end >= r->start) {
			r->start = min(r->start, start);
			r->end = max(r->end, end);
			return;
		}
	}
	if (m->nr_runs == MLF_MM_RUNS)
		mlf_mm_pay(m);
	m->runs[m->nr_runs++] = (struct mlf_run){ start, end };
	if (!delayed_work_pending(&m->work))
		mlf_mm_queue(m, msecs_to_jiffies(READ_ONCE(mlf_defer_ms)));
}

/*
 * mlf_mm_trim() beyond its common case.  A run cut in two with no room for
 * the second half is paid instead, before the unlock walks it.
 */
void mlf_mm_cut(struct mlf_mm *m, unsigned long start, unsigned long end)
{
	unsigned long cut = 0;
	unsigned int i;

	for (i = 0; i < m->nr_runs; ) {
		struct mlf_run *r = &m->runs[i];

		if (start >= r->end || end <= r->start) {
			i++;
			continue;
		}
		if (start > r->start && end < r->end &&
		    m->nr_runs == MLF_MM_RUNS) {
			mlf_mm_paid_where_locked(m);
			mlf_pay_run(m->mm, r->start, r->end);
			*r = m->runs[--m->nr_runs];
			continue;
		}
		cut += min(end, r->end) - max(start, r->start);
		if (start > r->start && end < r->end) {
			m->runs[m->nr_runs++] = (struct mlf_run){ end, r->end };
			r->end = start;
		} else if (start > r->start) {
			r->end = start;
		} else if (end < r->end) {
			r->start = end;
		} else {
			*r = m->runs[--m->nr_runs];
			continue;
		}
		i++;
	}
	mlf_count(moves_cancelled, cut >> PAGE_SHIFT);
}

static void mlf_mm_put(struct mlf_mm *m)
{
	if (refcount_dec_and_test(&m->ref)) {
		mmdrop(m->mm);
		kfree_rcu(m, rcu);	/* mlf_mm_find() may be looking at it */
		atomic_long_dec(&mlf_mm_count);
	}
}

/* No work may be queued for @m from now on. */
static void mlf_mm_kill(struct mlf_mm *m)
{
	unsigned long flags;

	raw_spin_lock_irqsave(&m->lock, flags);
	set_bit(MLF_MM_DEAD, &m->state);
	raw_spin_unlock_irqrestore(&m->lock, flags);
}

/*
 * Unhash @m, once, and drop the reference the hash stood for.  Sleeps
 * while the work runs: never call from it.
 */
static void mlf_mm_retire(struct mlf_mm *m)
{
	if (test_and_set_bit(MLF_MM_GONE, &m->state))
		return;
	cancel_delayed_work_sync(&m->work);
	spin_lock(&mlf_mms_lock);
	hash_del_rcu(&m->node);
	spin_unlock(&mlf_mms_lock);
	mlf_mm_put(m);
}

static void mlf_mm_retire_work(struct work_struct *work)
{
	struct mlf_mm *m = container_of(work, struct mlf_mm, retire);

	mlf_mm_retire(m);
	mlf_mm_put(m);
}

/* @m's mm is gone: retire it from our workqueue, once.  Any context. */
static void mlf_mm_gone(struct mlf_mm *m)
{
	unsigned long flags;
	bool first;

	raw_spin_lock_irqsave(&m->lock, flags);
	first = !test_and_set_bit(MLF_MM_DEAD, &m->state);
	raw_spin_unlock_irqrestore(&m->lock, flags);
	/* (the hash's reference stands until a retire) */
	if (first && refcount_inc_not_zero(&m->ref))
		queue_work(mlf_wq, &m->retire);
}

/*
 * Retire the state of every mm that has exited unheard: exit_mmap() skips
 * its tracepoint when the mm has no mapping left (6.1 returns, 6.12 jumps
 * past it).  At a state's creation and at DRAIN, so that such states do
 * not pile up.
 */
static void mlf_mm_sweep(void)
{
	struct mlf_mm *m;
	int bkt;

	rcu_read_lock();
	hash_for_each_rcu(mlf_mms, bkt, m, node)
		if (!atomic_read(&m->mm->mm_users))
			mlf_mm_gone(m);
	rcu_read_unlock();
}

/* DRAIN: every mm's runs paid now.  Sleeps; hold no mmap_lock. */
void mlf_mm_pay_all(void)
{
	struct mlf_mm *m;
	int bkt;

	mlf_mm_sweep();
	spin_lock(&mlf_mms_lock);
	hash_for_each(mlf_mms, bkt, m, node)
		if (READ_ONCE(m->nr_runs))
			mlf_mm_queue(m, 0);
	spin_unlock(&mlf_mms_lock);
	flush_workqueue(mlf_wq);
}

/*
 * @mm's state, or NULL.  Under RCU, not the lock: a forked child calling
 * through its parent's descriptor looks up on every call, and the
 * tracepoints look up at every fork and exit.
 */
static struct mlf_mm *mlf_mm_find(struct mm_struct *mm)
{
	struct mlf_mm *m;

	rcu_read_lock();
	hash_for_each_possible_rcu(mlf_mms, m, node, (unsigned long)mm)
		if (m->mm == mm && !test_bit(MLF_MM_DEAD, &m->state))
			break;
	rcu_read_unlock();
	return m;
}

/*
 * The task works that make a forked child pay its parent's moves, taken
 * from a pool: the fork probe runs with preemption off, where PREEMPT_RT
 * may not allocate (other kernels allocate when the pool runs out).  Only
 * a fork of an mm that owes takes one, and the child gives it back once
 * paid, on its first return to user mode.
 */
struct mlf_fork_pay {
	struct callback_head cb;
	struct mlf_mm *m;
	struct mlf_fork_pay *next;	/* on the free list */
	bool allocated;			/* not the pool's: kfree() it */
};

#define MLF_FORK_PAYS	256
static struct mlf_fork_pay mlf_fork_pays[MLF_FORK_PAYS];
static struct mlf_fork_pay *mlf_fork_free;
static DEFINE_RAW_SPINLOCK(mlf_fork_lock);	/* guards mlf_fork_free */
static atomic_t mlf_fork_inflight;	/* taken, for unload to wait on */
static bool mlf_fork_used;	/* a child was given one since load */
static struct tracepoint *mlf_fork_tp, *mlf_exit_tp;

static struct mlf_fork_pay *mlf_fork_pay_get(void)
{
	struct mlf_fork_pay *f;
	unsigned long flags;

	raw_spin_lock_irqsave(&mlf_fork_lock, flags);
	f = mlf_fork_free;
	if (f)
		mlf_fork_free = f->next;
	raw_spin_unlock_irqrestore(&mlf_fork_lock, flags);
	if (!f && !IS_ENABLED(CONFIG_PREEMPT_RT)) {
		f = kmalloc(sizeof(*f), GFP_ATOMIC | __GFP_NOWARN);
		if (f)
			f->allocated = true;
	}
	if (f)
		atomic_inc(&mlf_fork_inflight);
	return f;
}

static void mlf_fork_pay_give(struct mlf_fork_pay *f)
{
	unsigned long flags;

	if (f->allocated) {
		kfree(f);
	} else {
		raw_spin_lock_irqsave(&mlf_fork_lock, flags);
		f->next = mlf_fork_free;
		mlf_fork_free = f;
		raw_spin_unlock_irqrestore(&mlf_fork_lock, flags);
	}
	if (atomic_dec_and_test(&mlf_fork_inflight))
		wake_up_var(&mlf_fork_inflight);
}

/*
 * In the child, before its first instruction in user mode (or in its exit,
 * if killed first): wait until the parent's work has paid everything.
 */
static void mlf_fork_paid(struct callback_head *cb)
{
	struct mlf_fork_pay *f = container_of(cb, struct mlf_fork_pay, cb);
	struct mlf_mm *m = f->m;

	mlf_mm_queue(m, 0);
	flush_delayed_work(&m->work);
	mlf_mm_put(m);
	mlf_fork_pay_give(f);
}

/*
 * sched_process_fork, in the parent, before the child can run: a child
 * with a copy of an mm that owes moves pays them before it runs.  Its
 * mlock(2) of a page still owed would count its own lock alone, and its
 * munlock(2) would then take the page for unlocked while the parent's lock
 * still holds.  With no task work to be had (PREEMPT_RT, MLF_FORK_PAYS
 * children of owing parents not yet run), the work is queued now instead,
 * and the child may run before it: said once in the log.
 */
static void notrace mlf_mm_fork(void *data, struct task_struct *parent,
				struct task_struct *child)
{
	struct mm_struct *mm = parent->mm;
	struct mlf_fork_pay *f;
	struct mlf_mm *m;

	if (!mm || !child->mm || child->mm == mm)
		return;
	rcu_read_lock();
	m = mlf_mm_find(mm);
	if (!m)
		goto out;
	/* pairs with the work's release: nothing owed is all of it paid */
	if (!smp_load_acquire(&m->nr_runs) &&
	    /* (likewise) */
	    !smp_load_acquire(&m->unmoved))
		goto out;
	set_bit(MLF_MM_FORKED, &m->state);
	f = mlf_fork_pay_get();
	if (f && refcount_inc_not_zero(&m->ref)) {
		f->m = m;
		init_task_work(&f->cb, mlf_fork_paid);
		if (!task_work_add(child, &f->cb, TWA_RESUME)) {
			WRITE_ONCE(mlf_fork_used, true);
			goto out;
		}
		/*
		 * Not reached (only a task past its exit refuses a work), and
		 * not the last reference: a live mm's state is retired only at
		 * unload, which takes this probe out first.
		 */
		refcount_dec(&m->ref);
	}
	if (f)
		mlf_fork_pay_give(f);
	else
		pr_notice_once("a forked child may run before its parent's moves are paid: no task work to spare\n");
	mlf_mm_queue(m, 0);
out:
	rcu_read_unlock();
}

/* exit_mmap, its last step: the mm's state goes. */
static void notrace mlf_mm_exit_mmap(void *data, struct mm_struct *mm)
{
	struct mlf_mm *m;

	rcu_read_lock();
	m = mlf_mm_find(mm);
	if (m)
		mlf_mm_gone(m);
	rcu_read_unlock();
}

/*
 * State for @mm; mmap_lock held for writing.  @m holds the mm_struct (not
 * its pages) until freed, so that no other mm can take its address while a
 * file's cache points at @m.
 */
static struct mlf_mm *mlf_mm_create(struct mm_struct *mm)
{
	struct mlf_mm *m = kzalloc(sizeof(*m), GFP_KERNEL);

	if (!m)
		return NULL;
	mlf_mm_sweep();
	refcount_set(&m->ref, 1);	/* the hash's, until retired */
	mmgrab(mm);
	m->mm = mm;
	m->zone_id = -1;
	raw_spin_lock_init(&m->lock);
	INIT_DELAYED_WORK(&m->work, mlf_mm_work);
	INIT_WORK(&m->retire, mlf_mm_retire_work);
	atomic_long_inc(&mlf_mm_count);
	spin_lock(&mlf_mms_lock);
	hash_add_rcu(mlf_mms, &m->node, (unsigned long)mm);
	spin_unlock(&mlf_mms_lock);
	return m;
}

/*
 * mlf_mm_current() when the file's cache does not hold current->mm's; the
 * mmap_lock held for writing, so that no other task adds it meanwhile, and
 * the mm cannot exit (we hold mm_users) nor its state go.  An mm's first
 * lock makes no state and runs eager: a process that locks once, as a
 * secure memory pool does, has no use for it.  Its next lock through the
 * same file makes it.
 */
struct mlf_mm *mlf_mm_lookup(struct mlf_file *file, bool create)
{
	struct mm_struct *mm = current->mm;
	struct mlf_mm *m = mlf_mm_find(mm);

	if (!m) {
		if (!create)
			return NULL;
		if (READ_ONCE(file->seen) != mlf_mm_id(mm)) {
			WRITE_ONCE(file->seen, mlf_mm_id(mm));
			return NULL;
		}
		m = mlf_mm_create(mm);
		if (!m)
			return NULL;
	}
	if (READ_ONCE(file->mm))
		return m;
	/* The file's first mm with state: the cache holds a reference. */
	refcount_inc(&m->ref);
	if (cmpxchg(&file->mm, NULL, m))
		mlf_mm_put(m);
	return m;
}

/* The file is closed: drop the reference its cache holds. */
void mlf_mm_uncache(struct mlf_mm *m)
{
	if (m)
		mlf_mm_put(m);
}

/* A gauge for STATS: a count that never comes back down is a leak. */
unsigned long mlf_mm_tracked(void)
{
	return atomic_long_read(&mlf_mm_count);
}

static void mlf_mm_probes_off(void)
{
	if (mlf_fork_tp)
		tracepoint_probe_unregister(mlf_fork_tp, mlf_mm_fork, NULL);
	if (mlf_exit_tp)
		tracepoint_probe_unregister(mlf_exit_tp, mlf_mm_exit_mmap, NULL);
	mlf_fork_tp = NULL;
	mlf_exit_tp = NULL;
	tracepoint_synchronize_unregister();
}

int mlf_mm_init(void)
{
	struct tracepoint *fork_tp, *exit_tp;
	int i, ret;

	for (i = 0; i < MLF_FORK_PAYS; i++) {
		mlf_fork_pays[i].next = mlf_fork_free;
		mlf_fork_free = &mlf_fork_pays[i];
	}
	mlf_wq = alloc_workqueue("mlockfast", WQ_UNBOUND, 0);
	if (!mlf_wq)
		return -ENOMEM;
	fork_tp = mlf_compat_tracepoint("sched_process_fork");
	exit_tp = mlf_compat_tracepoint("exit_mmap");
	ret = fork_tp && exit_tp ? 0 : -ENOENT;
	if (!ret)
		ret = tracepoint_probe_register(fork_tp, mlf_mm_fork, NULL);
	if (!ret) {
		mlf_fork_tp = fork_tp;
		ret = tracepoint_probe_register(exit_tp, mlf_mm_exit_mmap,
						NULL);
	}
	if (!ret) {
		mlf_exit_tp = exit_tp;
		return 0;
	}
	pr_err("cannot hear forks and exits (sched_process_fork, exit_mmap): %d\n",
	       ret);
	mlf_mm_probes_off();
	destroy_workqueue(mlf_wq);
	return ret;
}

/*
 * Unload, with no file open: the probes go, the children given a task work
 * have run it (and left our code: RCU tasks), the runs are paid, then every
 * state goes, and nothing of ours may run after this.
 */
void mlf_mm_exit(void)
{
	struct mlf_mm *m, *next;
	LIST_HEAD(all);
	int bkt;

	mlf_mm_probes_off();
	wait_var_event(&mlf_fork_inflight, !atomic_read(&mlf_fork_inflight));
	if (READ_ONCE(mlf_fork_used))
		synchronize_rcu_tasks();
	mlf_mm_pay_all();
	spin_lock(&mlf_mms_lock);
	hash_for_each(mlf_mms, bkt, m, node) {
		refcount_inc(&m->ref);
		list_add(&m->unload, &all);
	}
	spin_unlock(&mlf_mms_lock);
	list_for_each_entry_safe(m, next, &all, unload) {
		mlf_mm_kill(m);
		mlf_mm_retire(m);
		mlf_mm_put(m);
	}
	flush_workqueue(mlf_wq);
	WARN_ON(atomic_long_read(&mlf_mm_count));
	destroy_workqueue(mlf_wq);
}
