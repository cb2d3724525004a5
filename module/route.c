// SPDX-License-Identifier: GPL-2.0
/*
 * Routing: the plain mlock(2), mlock2(2), munlock(2), mlockall(2) and
 * munlockall(2) of the processes an administrator chooses run the module's
 * path, with no library in the process.
 *
 * The kernel's own mechanism for redirecting a function, the one livepatch
 * uses: an ftrace_ops with FTRACE_OPS_FL_IPMODIFY on each syscall's entry
 * function, whose handler points the saved instruction pointer at ours
 * when the caller is routed and leaves it alone otherwise.  Nothing is
 * written to the syscall table or to kernel text by us; the redirection
 * happens after the syscall entry (seccomp, audit and ptrace have seen
 * the call), and the function we return from is the syscall's own caller.
 * With route=off (the default) no ops is registered and the syscalls run
 * exactly as without the module.
 *
 * Who is routed (include/uapi/linux/mlockfast.h): a process's own choice,
 * made through the device, else the route parameter (group: credentials
 * that hold the group of /dev/mlockfast; all).  Choices are kept per
 * process (its tgid's struct pid, which exec keeps) in a small hash, and
 * a fork copies the parent's into the child from the sched_process_fork
 * tracepoint.  That probe runs with preemption off and may not allocate
 * (on PREEMPT_RT the allocator sleeps), so it takes a spare entry that a
 * work item keeps in stock.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cred.h>
#include <linux/delay.h>
#include <linux/ftrace.h>
#include <linux/hashtable.h>
#include <linux/mman.h>
#include <linux/namei.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>
#include "compat.h"
#include "mlockfast.h"
#include "route.h"

/* ------------------------------------------------------------------ */
/* Per-process choices */

struct mlf_route_proc {
	struct hlist_node node;
	struct pid *pid;	/* the process's tgid, held */
	unsigned int choice;	/* MLOCKFAST_ROUTE_ON or _NEVER */
	struct rcu_head rcu;
};

#define MLF_ROUTE_HASH_BITS	8
/* Spare entries kept for forks, and the level that orders more. */
#define MLF_ROUTE_SPARE		128
#define MLF_ROUTE_SPARE_LOW	64

static DEFINE_HASHTABLE(mlf_route_procs, MLF_ROUTE_HASH_BITS);
/* Raw: the fork probe takes it with preemption off, on PREEMPT_RT too. */
static DEFINE_RAW_SPINLOCK(mlf_route_procs_lock);
static atomic_t mlf_route_nprocs = ATOMIC_INIT(0);
static HLIST_HEAD(mlf_route_spare);
static unsigned int mlf_route_nspare;		/* under mlf_route_procs_lock */
static atomic_long_t mlf_route_inherit_lost = ATOMIC_LONG_INIT(0);

static void mlf_route_refill(struct work_struct *work);
static void mlf_route_prune(struct work_struct *work);
static DECLARE_WORK(mlf_route_refill_work, mlf_route_refill);
static DECLARE_DELAYED_WORK(mlf_route_prune_work, mlf_route_prune);
static DEFINE_MUTEX(mlf_route_mutex);	/* the parameter, the hooks, the probe */
static struct tracepoint *mlf_route_fork_tp;	/* the fork probe's, or NULL */
static void mlf_route_fork(void *data, struct task_struct *parent,
			   struct task_struct *child);

/* Under mlf_route_procs_lock, or with preemption off (RCU readers). */
static notrace struct mlf_route_proc *mlf_route_find(struct pid *pid)
{
	struct mlf_route_proc *p;

	hash_for_each_possible_rcu_notrace(mlf_route_procs, p, node,
					   (unsigned long)pid)
		if (p->pid == pid)
			return p;
	return NULL;
}

static void mlf_route_proc_free(struct rcu_head *rcu)
{
	struct mlf_route_proc *p = container_of(rcu, struct mlf_route_proc,
						rcu);

	put_pid(p->pid);
	kfree(p);
}

/* Take @p out of the table; the caller frees it after a grace period. */
static void mlf_route_unhash(struct mlf_route_proc *p)
{
	hash_del_rcu(&p->node);
	atomic_dec(&mlf_route_nprocs);
}

/*
 * Keep MLF_ROUTE_SPARE entries for the fork probe.  Process context: the
 * allocation may sleep.
 */
static void mlf_route_refill(struct work_struct *work)
{
	for (;;) {
		struct mlf_route_proc *p;
		bool full;

		raw_spin_lock_irq(&mlf_route_procs_lock);
		full = mlf_route_nspare >= MLF_ROUTE_SPARE;
		raw_spin_unlock_irq(&mlf_route_procs_lock);
		if (full)
			return;
		p = kzalloc(sizeof(*p), GFP_KERNEL);
		if (!p)
			return;
		raw_spin_lock_irq(&mlf_route_procs_lock);
		hlist_add_head(&p->node, &mlf_route_spare);
		mlf_route_nspare++;
		raw_spin_unlock_irq(&mlf_route_procs_lock);
	}
}

/*
 * Forget the processes that are gone (their tgid has no task: reaped).
 * Runs every second while the table holds anything; when it is empty the
 * fork probe goes too, so that forks pay nothing while no one has chosen.
 */
static void mlf_route_prune(struct work_struct *work)
{
	struct mlf_route_proc *p;
	struct hlist_node *tmp;
	int bkt;

	mutex_lock(&mlf_route_mutex);
	raw_spin_lock_irq(&mlf_route_procs_lock);
	hash_for_each_safe(mlf_route_procs, bkt, tmp, p, node) {
		if (!pid_has_task(p->pid, PIDTYPE_TGID)) {
			mlf_route_unhash(p);
			call_rcu(&p->rcu, mlf_route_proc_free);
		}
	}
	raw_spin_unlock_irq(&mlf_route_procs_lock);
	if (atomic_read(&mlf_route_nprocs)) {
		schedule_delayed_work(&mlf_route_prune_work, HZ);
	} else if (mlf_route_fork_tp) {
		/* (its code stays: unload waits for a probe still running) */
		tracepoint_probe_unregister(mlf_route_fork_tp, mlf_route_fork,
					    NULL);
		mlf_route_fork_tp = NULL;
	}
	mutex_unlock(&mlf_route_mutex);
}

/*
 * sched_process_fork: a new process (not a thread) starts with its
 * parent's choice.  The child has not run yet, so its first call sees it.
 */
static void notrace mlf_route_fork(void *data, struct task_struct *parent,
				   struct task_struct *child)
{
	struct mlf_route_proc *p, *c = NULL;
	unsigned long flags;
	bool low;

	if (!atomic_read(&mlf_route_nprocs) || same_thread_group(parent, child))
		return;
	raw_spin_lock_irqsave(&mlf_route_procs_lock, flags);
	p = mlf_route_find(task_tgid(parent));
	if (p && !hlist_empty(&mlf_route_spare)) {
		c = hlist_entry(mlf_route_spare.first, struct mlf_route_proc,
				node);
		hlist_del(&c->node);
		mlf_route_nspare--;
		c->pid = get_pid(task_tgid(child));
		c->choice = p->choice;
		hash_add_rcu(mlf_route_procs, &c->node, (unsigned long)c->pid);
		atomic_inc(&mlf_route_nprocs);
	}
	low = mlf_route_nspare < MLF_ROUTE_SPARE_LOW;
	raw_spin_unlock_irqrestore(&mlf_route_procs_lock, flags);
	if (p && !c)
		atomic_long_inc(&mlf_route_inherit_lost);
	if (p && low)
		schedule_work(&mlf_route_refill_work);
}

/* The fork probe, in while anyone has a choice; under mlf_route_mutex. */
static int mlf_route_probe_start(void)
{
	struct tracepoint *tp;
	int ret;

	if (mlf_route_fork_tp)
		return 0;
	tp = mlf_compat_tracepoint("sched_process_fork");
	ret = tp ? tracepoint_probe_register(tp, mlf_route_fork, NULL) : -ENOENT;
	if (ret)
		pr_warn("no per-process routing: sched_process_fork probe: %d\n",
			ret);
	else
		mlf_route_fork_tp = tp;
	return ret;
}

/* Set the calling process's choice (MLOCKFAST_ROUTE_DEFAULT: none). */
static int mlf_route_choose(unsigned int choice)
{
	struct mlf_route_proc *p, *new = NULL, *old = NULL;
	struct pid *pid = task_tgid(current);
	int ret;

	if (choice != MLOCKFAST_ROUTE_DEFAULT) {
		new = kzalloc(sizeof(*new), GFP_KERNEL);
		if (!new)
			return -ENOMEM;
	}
	/* The probe and the entry together: pruning may not come between. */
	mutex_lock(&mlf_route_mutex);
	ret = new ? mlf_route_probe_start() : 0;
	if (ret) {
		mutex_unlock(&mlf_route_mutex);
		kfree(new);
		return ret;
	}
	raw_spin_lock_irq(&mlf_route_procs_lock);
	p = mlf_route_find(pid);
	if (p && new) {
		WRITE_ONCE(p->choice, choice);
	} else if (p) {
		mlf_route_unhash(p);
		old = p;
	} else if (new) {
		new->pid = get_pid(pid);
		new->choice = choice;
		hash_add_rcu(mlf_route_procs, &new->node, (unsigned long)pid);
		atomic_inc(&mlf_route_nprocs);
		new = NULL;
	}
	raw_spin_unlock_irq(&mlf_route_procs_lock);
	if (atomic_read(&mlf_route_nprocs))
		schedule_delayed_work(&mlf_route_prune_work, HZ);
	mutex_unlock(&mlf_route_mutex);
	if (old)
		call_rcu(&old->rcu, mlf_route_proc_free);
	if (choice != MLOCKFAST_ROUTE_DEFAULT)
		mlf_route_refill(NULL);
	kfree(new);
	return 0;
}

static notrace unsigned int mlf_route_choice(void)
{
	struct mlf_route_proc *p;
	unsigned int choice;

	if (likely(!atomic_read(&mlf_route_nprocs)))
		return MLOCKFAST_ROUTE_DEFAULT;
	preempt_disable_notrace();
	p = mlf_route_find(task_tgid(current));
	choice = p ? READ_ONCE(p->choice) : MLOCKFAST_ROUTE_DEFAULT;
	preempt_enable_notrace();
	return choice;
}

/* ------------------------------------------------------------------ */
/* The route parameter and who it routes */

static unsigned int mlf_routing;	/* MLOCKFAST_ROUTING_* in force */
static unsigned int mlf_routing_at_load;	/* asked before init */
static bool mlf_route_ready;		/* init done: hooks may go in */
/* /dev/mlockfast, whose group route=group routes (udev may set it late). */
static struct path mlf_route_dev;
static bool mlf_route_have_dev;

static notrace bool mlf_route_in_group(void)
{
	struct inode *inode;

	/* pairs with mlf_route_find_dev(): the path is filled in */
	if (!smp_load_acquire(&mlf_route_have_dev))
		return false;
	inode = d_inode(mlf_route_dev.dentry);
	return in_group_p(READ_ONCE(inode->i_gid));
}

/* Are the calling process's mlock-family calls routed, with @routing? */
static notrace bool mlf_route_wanted(unsigned int routing)
{
	unsigned int choice;

	if (routing == MLOCKFAST_ROUTING_OFF)
		return false;
	choice = mlf_route_choice();
	if (choice != MLOCKFAST_ROUTE_DEFAULT)
		return choice == MLOCKFAST_ROUTE_ON;
	return routing == MLOCKFAST_ROUTING_ALL || mlf_route_in_group();
}

/* ------------------------------------------------------------------ */
/* The routed calls */

/* Calls the hooks sent here that have not returned: unload waits. */
static DEFINE_PER_CPU(long, mlf_route_inflight);
static DEFINE_PER_CPU(u64, mlf_route_seen);

/*
 * The per-file cache of a routed call.  No file: a sentinel mm that is
 * never the caller's keeps mlf_mm_lookup() from caching, and the "seen"
 * that delays an mm's state to its second lock is kept per CPU.
 */
static struct mlf_mm mlf_route_nocache;

static long mlf_route_done(struct mlf_file *f, long ret)
{
	this_cpu_write(mlf_route_seen, f->seen);
	this_cpu_dec(mlf_route_inflight);
	return ret;
}

static void mlf_route_file(struct mlf_file *f)
{
	f->mm = &mlf_route_nocache;
	f->seen = this_cpu_read(mlf_route_seen);
	mlf_count(calls_routed, 1);
}

/* The syscall wrappers' conventions: pt_regs, int flags sign-extended. */
static long mlf_sys_mlock(const struct pt_regs *regs)
{
	struct mlf_file f;

	mlf_route_file(&f);
	return mlf_route_done(&f, mlf_lock(&f, READ_ONCE(mlf_default_mode),
					   regs->di, regs->si, 0));
}

static long mlf_sys_mlock2(const struct pt_regs *regs)
{
	struct mlf_file f;

	mlf_route_file(&f);
	return mlf_route_done(&f, mlf_lock(&f, READ_ONCE(mlf_default_mode),
					   regs->di, regs->si,
					   (int)regs->dx));
}

static long mlf_sys_munlock(const struct pt_regs *regs)
{
	struct mlf_file f;

	mlf_route_file(&f);
	return mlf_route_done(&f, mlf_unlock(&f, READ_ONCE(mlf_default_mode),
					     regs->di, regs->si));
}

static long mlf_sys_mlockall(const struct pt_regs *regs)
{
	struct mlf_file f;

	mlf_route_file(&f);
	return mlf_route_done(&f, mlf_lockall(&f, READ_ONCE(mlf_default_mode),
					      (int)regs->di));
}

/* __do_sys_munlockall(void), which __x64_sys_munlockall aliases */
static long mlf_sys_munlockall(const struct pt_regs *regs)
{
	struct mlf_file f;

	mlf_route_file(&f);
	return mlf_route_done(&f, mlf_unlockall(&f,
						READ_ONCE(mlf_default_mode)));
}

enum mlf_call { MLF_MLOCK, MLF_MLOCK2, MLF_MUNLOCK, MLF_MLOCKALL, MLF_MUNLOCKALL };

struct mlf_hook {
	const char *sym;
	long (*to)(const struct pt_regs *regs);
	enum mlf_call call;
	unsigned long addr;
	struct ftrace_ops ops;
};

static struct mlf_hook mlf_hooks[] = {
	{ "__x64_sys_mlock", mlf_sys_mlock, MLF_MLOCK },
	{ "__x64_sys_mlock2", mlf_sys_mlock2, MLF_MLOCK2 },
	{ "__x64_sys_munlock", mlf_sys_munlock, MLF_MUNLOCK },
	{ "__x64_sys_mlockall", mlf_sys_mlockall, MLF_MLOCKALL },
	{ "__x64_sys_munlockall", mlf_sys_munlockall, MLF_MUNLOCKALL },
};

/*
 * A call that does nothing or fails on its arguments alone (no length,
 * flags the syscall refuses), and an unlock in a process that has nothing
 * locked (no locked_vm, no MCL_FUTURE: at most the syscall's ENOMEM), is
 * left to the syscall: the same result, and all our path could add is
 * cost.  Nothing is owed then either: moves are owed for locked ranges.
 */
static notrace bool mlf_route_trivial(enum mlf_call call,
				      const struct pt_regs *regs)
{
	struct mm_struct *mm = current->mm;
	int flags;

	switch (call) {
	case MLF_MLOCK2:
		if ((int)regs->dx & ~MLOCK_ONFAULT)
			return true;
		fallthrough;
	case MLF_MLOCK:
		return !regs->si;
	case MLF_MUNLOCK:
		if (!regs->si)
			return true;
		fallthrough;
	case MLF_MUNLOCKALL:
		return !READ_ONCE(mm->locked_vm) &&
		       !(READ_ONCE(mm->def_flags) & VM_LOCKED);
	case MLF_MLOCKALL:
		flags = (int)regs->di;
		return !flags || flags == MCL_ONFAULT ||
		       (flags & ~(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT));
	}
	return false;
}

/*
 * At the syscall function's entry, before its first instruction: a routed
 * caller returns from the trampoline into our function instead, with the
 * same arguments and the same return address.
 */
static void notrace mlf_route_hook(unsigned long ip, unsigned long parent_ip,
				   struct ftrace_ops *op,
				   struct ftrace_regs *fregs)
{
	struct mlf_hook *h = container_of(op, struct mlf_hook, ops);
	const struct pt_regs *regs = (void *)mlf_ftrace_arg0(fregs);

	if (mlf_route_trivial(h->call, regs) ||
	    !mlf_route_wanted(READ_ONCE(mlf_routing)))
		return;
	this_cpu_inc(mlf_route_inflight);
	ftrace_regs_set_instruction_pointer(fregs, (unsigned long)h->to);
}

static void mlf_hooks_remove(int n)
{
	while (n--) {
		struct mlf_hook *h = &mlf_hooks[n];

		unregister_ftrace_function(&h->ops);
		ftrace_free_filter(&h->ops);
	}
}

/* Every hook in, or none (the errno, and one line that says why). */
static int mlf_hooks_add(void)
{
	int i, ret = 0;

	for (i = 0; i < ARRAY_SIZE(mlf_hooks); i++) {
		struct mlf_hook *h = &mlf_hooks[i];

		memset(&h->ops, 0, sizeof(h->ops));
		h->ops.func = mlf_route_hook;
		h->ops.flags = MLF_FTRACE_IPMODIFY_FLAGS;
		ret = ftrace_set_filter_ip(&h->ops, h->addr, 0, 0);
		if (ret) {
			pr_warn("route stays off: %s cannot be traced (%d)\n",
				h->sym, ret);
			break;
		}
		ret = register_ftrace_function(&h->ops);
		if (ret) {
			ftrace_free_filter(&h->ops);
			pr_warn("route stays off: %s is taken (%d): another IPMODIFY user, a livepatch?\n",
				h->sym, ret);
			break;
		}
	}
	if (ret)
		mlf_hooks_remove(i);
	return ret;
}

/*
 * Unload: no hook calls us any more (unregistering waited for every task
 * in a trampoline), the calls already sent here finish, then a task that
 * is past its count but not yet out of our text leaves it (RCU tasks: a
 * voluntary switch or a return to user space).
 */
static void mlf_route_drain_inflight(void)
{
	for (;;) {
		long n = 0;
		int cpu;

		for_each_possible_cpu(cpu)
			n += per_cpu(mlf_route_inflight, cpu);
		if (!n)
			break;
		msleep(20);
	}
	synchronize_rcu_tasks();
}

static const char * const mlf_routing_names[] = {
	[MLOCKFAST_ROUTING_OFF] = "off",
	[MLOCKFAST_ROUTING_GROUP] = "group",
	[MLOCKFAST_ROUTING_ALL] = "all",
};

/* /dev/mlockfast's node, for its group: once, when group routing starts. */
static int mlf_route_find_dev(void)
{
	int ret;

	if (mlf_route_have_dev)
		return 0;
	ret = kern_path(MLOCKFAST_DEVICE, LOOKUP_FOLLOW, &mlf_route_dev);
	if (ret) {
		pr_warn("route=group: no %s (%d)\n", MLOCKFAST_DEVICE, ret);
		return ret;
	}
	/* pairs with mlf_route_in_group() */
	smp_store_release(&mlf_route_have_dev, true);
	return 0;
}

/* Switch routing to @to; under mlf_route_mutex. */
static int mlf_route_switch(unsigned int to)
{
	unsigned int from = mlf_routing;
	int ret;

	if (to == MLOCKFAST_ROUTING_GROUP) {
		ret = mlf_route_find_dev();
		if (ret)
			return ret;
	}
	if (from == MLOCKFAST_ROUTING_OFF && to != MLOCKFAST_ROUTING_OFF) {
		ret = mlf_hooks_add();
		if (ret)
			return ret;
	}
	WRITE_ONCE(mlf_routing, to);
	if (from != MLOCKFAST_ROUTING_OFF && to == MLOCKFAST_ROUTING_OFF)
		mlf_hooks_remove(ARRAY_SIZE(mlf_hooks));
	if (to != from)
		pr_info("route=%s\n", mlf_routing_names[to]);
	return 0;
}

static int mlf_route_set(const char *val, const struct kernel_param *kp)
{
	int to = sysfs_match_string(mlf_routing_names, val);
	int ret = 0;

	if (to < 0)
		return -EINVAL;
	mutex_lock(&mlf_route_mutex);
	if (mlf_route_ready)
		ret = mlf_route_switch(to);
	else
		mlf_routing_at_load = to;
	mutex_unlock(&mlf_route_mutex);
	return ret;
}

static int mlf_route_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%s\n", mlf_routing_names[READ_ONCE(mlf_routing)]);
}

static const struct kernel_param_ops mlf_route_ops = {
	.set = mlf_route_set,
	.get = mlf_route_get,
};

module_param_cb(route, &mlf_route_ops, NULL, 0644);
MODULE_PARM_DESC(route, "Route the mlock-family system calls of: off (default), group (of /dev/mlockfast), all");

/*
 * Testing: hold function @val with an IPMODIFY ops of our own that does
 * nothing, as a livepatch of it would (an empty write lets it go), so
 * that a test can see route refused cleanly.
 */
static struct ftrace_ops mlf_debug_holder;
static bool mlf_debug_holding;

static void notrace mlf_debug_hold(unsigned long ip, unsigned long parent_ip,
				   struct ftrace_ops *op,
				   struct ftrace_regs *fregs)
{
}

static int mlf_debug_ipmodify_set(const char *val, const struct kernel_param *kp)
{
	char sym[KSYM_NAME_LEN];
	unsigned long addr;
	int ret = 0;

	strscpy(sym, val, sizeof(sym));
	strim(sym);
	if (!mlf_route_ready)
		return -EBUSY;
	mutex_lock(&mlf_route_mutex);
	if (mlf_debug_holding) {
		unregister_ftrace_function(&mlf_debug_holder);
		ftrace_free_filter(&mlf_debug_holder);
		mlf_debug_holding = false;
	}
	if (*sym) {
		addr = mlf_compat_func_addr(sym);
		memset(&mlf_debug_holder, 0, sizeof(mlf_debug_holder));
		mlf_debug_holder.func = mlf_debug_hold;
		mlf_debug_holder.flags = MLF_FTRACE_IPMODIFY_FLAGS;
		ret = addr ? ftrace_set_filter_ip(&mlf_debug_holder, addr, 0, 0) :
			     -ENOENT;
		if (!ret) {
			ret = register_ftrace_function(&mlf_debug_holder);
			if (ret)
				ftrace_free_filter(&mlf_debug_holder);
		}
		mlf_debug_holding = !ret;
	}
	mutex_unlock(&mlf_route_mutex);
	return ret;
}

static const struct kernel_param_ops mlf_debug_ipmodify_ops = {
	.set = mlf_debug_ipmodify_set,
};

module_param_cb(debug_ipmodify, &mlf_debug_ipmodify_ops, NULL, 0200);
MODULE_PARM_DESC(debug_ipmodify, "Testing: hold this function as a livepatch would (empty: let go)");

/* ------------------------------------------------------------------ */
/* The device's side */

long mlf_route_ioctl(struct mlockfast_route __user *u)
{
	struct mlockfast_route r;
	int ret;

	if (copy_from_user(&r, u, sizeof(r)))
		return -EFAULT;
	if (r.size != sizeof(r) || r.routing || r.routed || r.reserved[0] ||
	    r.reserved[1] || r.choice > MLOCKFAST_ROUTE_NEVER)
		return -EINVAL;
	if (r.choice != MLOCKFAST_ROUTE_QUERY) {
		ret = mlf_route_choose(r.choice);
		if (ret)
			return ret;
	}
	r.choice = mlf_route_choice();
	r.routing = READ_ONCE(mlf_routing);
	r.routed = mlf_route_wanted(r.routing);
	return copy_to_user(u, &r, sizeof(r)) ? -EFAULT : 0;
}

unsigned long mlf_route_procs_tracked(void)
{
	return atomic_read(&mlf_route_nprocs);
}

unsigned long mlf_route_inherit_failures(void)
{
	return atomic_long_read(&mlf_route_inherit_lost);
}

int mlf_route_init(void)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(mlf_hooks); i++) {
		mlf_hooks[i].addr = mlf_compat_func_addr(mlf_hooks[i].sym);
		if (!mlf_hooks[i].addr)
			return -ENOENT;
	}
	/*
	 * route= given at load: a refusal is said in the log, as for a sysfs
	 * write, and the module loads with route=off.
	 */
	mutex_lock(&mlf_route_mutex);
	mlf_route_ready = true;
	if (mlf_routing_at_load != MLOCKFAST_ROUTING_OFF)
		mlf_route_switch(mlf_routing_at_load);
	mutex_unlock(&mlf_route_mutex);
	return 0;
}

void mlf_route_exit(void)
{
	struct mlf_route_proc *p;
	struct hlist_node *tmp;
	HLIST_HEAD(spare);
	int bkt;

	mutex_lock(&mlf_route_mutex);
	if (mlf_routing != MLOCKFAST_ROUTING_OFF)
		mlf_hooks_remove(ARRAY_SIZE(mlf_hooks));
	if (mlf_debug_holding) {
		unregister_ftrace_function(&mlf_debug_holder);
		ftrace_free_filter(&mlf_debug_holder);
		mlf_debug_holding = false;
	}
	WRITE_ONCE(mlf_routing, MLOCKFAST_ROUTING_OFF);
	mlf_route_ready = false;
	if (mlf_route_fork_tp) {
		tracepoint_probe_unregister(mlf_route_fork_tp, mlf_route_fork,
					    NULL);
		mlf_route_fork_tp = NULL;
	}
	mutex_unlock(&mlf_route_mutex);
	/* Also after a probe pruning took out: one may still be running. */
	tracepoint_synchronize_unregister();
	mlf_route_drain_inflight();
	cancel_work_sync(&mlf_route_refill_work);
	cancel_delayed_work_sync(&mlf_route_prune_work);
	raw_spin_lock_irq(&mlf_route_procs_lock);
	hash_for_each_safe(mlf_route_procs, bkt, tmp, p, node) {
		mlf_route_unhash(p);
		call_rcu(&p->rcu, mlf_route_proc_free);
	}
	hlist_move_list(&mlf_route_spare, &spare);
	mlf_route_nspare = 0;
	raw_spin_unlock_irq(&mlf_route_procs_lock);
	/* (not under the raw lock: on PREEMPT_RT kfree() may sleep) */
	hlist_for_each_entry_safe(p, tmp, &spare, node)
		kfree(p);
	/* The frees above run before the module's text goes. */
	rcu_barrier();
	if (mlf_route_have_dev)
		path_put(&mlf_route_dev);
	mlf_route_have_dev = false;
}
