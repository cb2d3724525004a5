// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/mlockfast: the misc device, its ioctl dispatch, module parameters
 * and counters.  Every ioctl acts on the caller's own mm (current->mm),
 * never on the mm of whoever opened the file.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <generated/utsrelease.h>
#include "compat.h"
#include "mlockfast.h"
#include "route.h"

DEFINE_PER_CPU(struct mlf_stats, mlf_stats);

static const char * const mlf_mode_names[] = {
	[MLF_EAGER] = "eager",
	[MLF_DEFERRED] = "deferred",
	[MLF_RECLAIM] = "reclaim",
	[MLF_LEGACY] = "legacy",
};

unsigned int mlf_default_mode = MLF_DEFERRED;
unsigned int mlf_defer_ms = 10;
static ushort dev_mode = 0600;
static char *debug_require_symbol;
static char *debug_release;

static int mlf_mode_set(const char *val, const struct kernel_param *kp)
{
	int i;

	/* Not sysfs_match_string(): it stops at the empty slot 0. */
	for (i = MLF_EAGER; i < ARRAY_SIZE(mlf_mode_names); i++) {
		/* Legacy is for measurement only: never a default. */
		if (i != MLF_LEGACY && sysfs_streq(mlf_mode_names[i], val)) {
			WRITE_ONCE(mlf_default_mode, i);
			return 0;
		}
	}
	return -EINVAL;
}

static int mlf_mode_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%s\n", mlf_mode_names[READ_ONCE(mlf_default_mode)]);
}

static const struct kernel_param_ops mlf_mode_ops = {
	.set = mlf_mode_set,
	.get = mlf_mode_get,
};

module_param_cb(default_mode, &mlf_mode_ops, NULL, 0644);
MODULE_PARM_DESC(default_mode, "Mode when a call names none: eager, deferred (default) or reclaim");

module_param_named(defer_ms, mlf_defer_ms, uint, 0644);
MODULE_PARM_DESC(defer_ms, "Deferred mode: pay a process's owed moves this long after its lock (default 10)");
module_param(dev_mode, ushort, 0444);
MODULE_PARM_DESC(dev_mode, "File mode of /dev/mlockfast (default 0600)");
module_param(debug_require_symbol, charp, 0444);
MODULE_PARM_DESC(debug_require_symbol, "Testing: also require this kernel symbol at load");
module_param(debug_release, charp, 0444);
MODULE_PARM_DESC(debug_release, "Testing: check this kernel release against the supported ones, not the running kernel's");

/* Writing 1 (or loading with it) checks the raw maple reads on the writer's mm. */
static int mlf_selftest_set(const char *val, const struct kernel_param *kp)
{
	bool run;
	int ret = kstrtobool(val, &run);

	return ret ? ret : run ? mlf_maple_selftest() : 0;
}

static const struct kernel_param_ops mlf_selftest_ops = {
	.set = mlf_selftest_set,
};

module_param_cb(debug_selftest, &mlf_selftest_ops, NULL, 0200);
MODULE_PARM_DESC(debug_selftest, "Testing: 1 compares our maple walk with the kernel's on the caller's mm");

void mlf_stats_read(struct mlockfast_stats *out)
{
	int cpu, i;

	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	for_each_possible_cpu(cpu) {
		const struct mlf_stats *s = per_cpu_ptr(&mlf_stats, cpu);

		out->calls_lock += s->calls_lock;
		out->calls_unlock += s->calls_unlock;
		out->calls_lockall += s->calls_lockall;
		out->calls_unlockall += s->calls_unlockall;
		out->calls_lockv += s->calls_lockv;
		out->calls_unlockv += s->calls_unlockv;
		out->calls_drain += s->calls_drain;
		out->errors += s->errors;
		out->pages_locked += s->pages_locked;
		out->pages_unlocked += s->pages_unlocked;
		out->moves_queued += s->moves_queued;
		out->moves_applied += s->moves_applied;
		out->moves_cancelled += s->moves_cancelled;
		out->batches_applied += s->batches_applied;
		out->populate_calls += s->populate_calls;
		out->legacy_drains += s->legacy_drains;
		out->calls_routed += s->calls_routed;
		for (i = 0; i < MLOCKFAST_STAT_NR_MODES; i++) {
			out->mode_calls[i] += s->mode_calls[i];
			out->mode_pages[i] += s->mode_pages[i];
		}
	}
	out->mms_tracked = mlf_mm_tracked();
	out->folios_held = 0;	/* no folio is held for a move any more */
}

/* The mode bits of @flags, or the default; -EINVAL for an unknown one. */
static int mlf_mode_of(u32 flags)
{
	u32 mode = (flags & MLOCKFAST_MODE_MASK) >> MLOCKFAST_MODE_SHIFT;

	if (!mode)
		return READ_ONCE(mlf_default_mode);
	return mode <= MLF_LEGACY ? mode : -EINVAL;
}

static bool mlf_zero(const u64 *reserved, size_t n)
{
	while (n--)
		if (*reserved++)
			return false;
	return true;
}

/* An argument struct's size field and reserved fields are as they must be. */
static int mlf_check_arg(u32 size, size_t want, const u64 *reserved, size_t n)
{
	return size == want && mlf_zero(reserved, n) ? 0 : -EINVAL;
}

static void mlf_count_call(int mode)
{
	if (mode >= MLF_EAGER)
		mlf_count(mode_calls[mode - MLF_EAGER], 1);
}

static long mlf_ioc_info(void __user *uarg)
{
	struct mlockfast_info info = {
		.size = sizeof(info),
		.abi_version = MLOCKFAST_ABI_VERSION,
		.features = MLOCKFAST_FEAT_LOCK | MLOCKFAST_FEAT_LOCKALL |
			    MLOCKFAST_FEAT_VEC | MLOCKFAST_FEAT_DRAIN |
			    MLOCKFAST_FEAT_STATS | MLOCKFAST_FEAT_EAGER |
			    MLOCKFAST_FEAT_DEFERRED | MLOCKFAST_FEAT_RECLAIM |
			    MLOCKFAST_FEAT_LEGACY | MLOCKFAST_FEAT_ROUTE,
		.default_mode = READ_ONCE(mlf_default_mode) << MLOCKFAST_MODE_SHIFT,
		.batch_size = 0,	/* no batch of the module's own */
	};

	strscpy(info.module_version, MLOCKFAST_VERSION,
		sizeof(info.module_version));
	strscpy(info.kernel_release, UTS_RELEASE, sizeof(info.kernel_release));
	return copy_to_user(uarg, &info, sizeof(info)) ? -EFAULT : 0;
}

/*
 * copy_from_user() of the range, field by field: for a 40-byte struct the
 * generic copy costs more than the rest of the argument handling.
 */
static int mlf_get_range(struct mlockfast_range *r, void __user *uarg)
{
	struct mlockfast_range __user *u = uarg;

	if (!user_access_begin(u, sizeof(*u)))
		return -EFAULT;
	unsafe_get_user(r->size, &u->size, fault);
	unsafe_get_user(r->flags, &u->flags, fault);
	unsafe_get_user(r->addr, &u->addr, fault);
	unsafe_get_user(r->len, &u->len, fault);
	unsafe_get_user(r->reserved[0], &u->reserved[0], fault);
	unsafe_get_user(r->reserved[1], &u->reserved[1], fault);
	user_access_end();
	return 0;
fault:
	user_access_end();
	return -EFAULT;
}

static __always_inline long mlf_ioc_range(struct mlf_file *f,
					  void __user *uarg, bool lock)
{
	struct mlockfast_range r;
	int mode, ret;

	BUILD_BUG_ON(sizeof(r) != 40);	/* mlf_get_range() reads every field */
	if (mlf_get_range(&r, uarg))
		return -EFAULT;
	ret = mlf_check_arg(r.size, sizeof(r), r.reserved, ARRAY_SIZE(r.reserved));
	if (ret)
		return ret;
	mode = mlf_mode_of(r.flags);
	if (mode < 0)
		return mode;
	mlf_count_call(mode);
	r.flags &= ~MLOCKFAST_MODE_MASK;
	if (lock)
		return mlf_lock(f, mode, r.addr, r.len, r.flags);
	if (r.flags)
		return -EINVAL;
	return mlf_unlock(f, mode, r.addr, r.len);
}

static long mlf_ioc_vec(struct mlf_file *f, void __user *uarg, bool lock)
{
	struct mlockfast_vec v;
	unsigned int done = 0;
	int mode, ret;

	if (copy_from_user(&v, uarg, sizeof(v)))
		return -EFAULT;
	ret = mlf_check_arg(v.size, sizeof(v), v.reserved, ARRAY_SIZE(v.reserved));
	if (ret)
		return ret;
	if (v.done || v.count > MLOCKFAST_VEC_MAX)
		return -EINVAL;
	mode = mlf_mode_of(v.flags);
	if (mode < 0)
		return mode;
	v.flags &= ~MLOCKFAST_MODE_MASK;
	if (!lock && v.flags)
		return -EINVAL;
	mlf_count_call(mode);
	ret = mlf_lockv(f, mode, u64_to_user_ptr(v.iov), v.count, v.flags,
			lock, &done);
	if (put_user(done, &((struct mlockfast_vec __user *)uarg)->done))
		return -EFAULT;
	return ret;
}

static long mlf_ioc_lockall(struct mlf_file *f, void __user *uarg)
{
	struct mlockfast_all a;
	int mode, ret;

	if (copy_from_user(&a, uarg, sizeof(a)))
		return -EFAULT;
	ret = mlf_check_arg(a.size, sizeof(a), a.reserved, ARRAY_SIZE(a.reserved));
	if (ret)
		return ret;
	mode = mlf_mode_of(a.flags);
	if (mode < 0)
		return mode;
	mlf_count_call(mode);
	return mlf_lockall(f, mode, a.flags & ~MLOCKFAST_MODE_MASK);
}

static long mlf_ioc_stats(void __user *uarg)
{
	struct mlockfast_stats s;

	mlf_stats_read(&s);
	return copy_to_user(uarg, &s, sizeof(s)) ? -EFAULT : 0;
}

static long mlf_dispatch(struct mlf_file *f, unsigned int cmd,
			 void __user *uarg)
{
	switch (cmd) {
	case MLOCKFAST_IOC_INFO:
		return mlf_ioc_info(uarg);
	case MLOCKFAST_IOC_LOCK:
		mlf_count(calls_lock, 1);
		return mlf_ioc_range(f, uarg, true);
	case MLOCKFAST_IOC_UNLOCK:
		mlf_count(calls_unlock, 1);
		return mlf_ioc_range(f, uarg, false);
	case MLOCKFAST_IOC_LOCKALL:
		mlf_count(calls_lockall, 1);
		return mlf_ioc_lockall(f, uarg);
	case MLOCKFAST_IOC_UNLOCKALL:
		mlf_count(calls_unlockall, 1);
		mlf_count_call(READ_ONCE(mlf_default_mode));
		return mlf_unlockall(f, READ_ONCE(mlf_default_mode));
	case MLOCKFAST_IOC_LOCKV:
		mlf_count(calls_lockv, 1);
		return mlf_ioc_vec(f, uarg, true);
	case MLOCKFAST_IOC_UNLOCKV:
		mlf_count(calls_unlockv, 1);
		return mlf_ioc_vec(f, uarg, false);
	case MLOCKFAST_IOC_DRAIN:
		mlf_count(calls_drain, 1);
		mlf_mm_pay_all();
		return mlf_drain_kernel_batches();
	case MLOCKFAST_IOC_STATS:
		return mlf_ioc_stats(uarg);
	case MLOCKFAST_IOC_ROUTE:
		return mlf_route_ioctl(uarg);
	}
	return -ENOTTY;
}

static long mlf_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	long ret;

	/* A kernel thread, or a task past exit_mm(), has nothing to lock. */
	if (!current->mm || (current->flags & PF_KTHREAD))
		return -EINVAL;
	ret = mlf_dispatch(file->private_data, cmd, (void __user *)arg);
	if (ret && ret != -ENOTTY)
		mlf_count(errors, 1);
	return ret;
}

static int mlf_open(struct inode *inode, struct file *file)
{
	struct mlf_file *f = kzalloc(sizeof(*f), GFP_KERNEL);

	if (!f)
		return -ENOMEM;
	file->private_data = f;
	return 0;
}

static int mlf_release(struct inode *inode, struct file *file)
{
	struct mlf_file *f = file->private_data;

	mlf_mm_uncache(f->mm);
	kfree(f);
	return 0;
}

static const struct file_operations mlf_fops = {
	.owner = THIS_MODULE,
	.open = mlf_open,
	.release = mlf_release,
	.unlocked_ioctl = mlf_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

static ssize_t stats_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	struct mlockfast_stats s;
	static const char * const modes[] = {
		"eager", "deferred", "reclaim", "legacy"
	};
	int len, i;

	mlf_stats_read(&s);
	len = sysfs_emit(buf,
			 "calls_lock %llu\ncalls_unlock %llu\ncalls_lockall %llu\n"
			 "calls_unlockall %llu\ncalls_lockv %llu\ncalls_unlockv %llu\n"
			 "calls_drain %llu\nerrors %llu\npages_locked %llu\n"
			 "pages_unlocked %llu\nmoves_queued %llu\nmoves_applied %llu\n"
			 "moves_cancelled %llu\nbatches_applied %llu\n"
			 "populate_calls %llu\nlegacy_drains %llu\n",
			 s.calls_lock, s.calls_unlock, s.calls_lockall,
			 s.calls_unlockall, s.calls_lockv, s.calls_unlockv,
			 s.calls_drain, s.errors, s.pages_locked,
			 s.pages_unlocked, s.moves_queued, s.moves_applied,
			 s.moves_cancelled, s.batches_applied, s.populate_calls,
			 s.legacy_drains);
	for (i = 0; i < MLOCKFAST_STAT_NR_MODES; i++)
		len += sysfs_emit_at(buf, len, "%s_calls %llu\n%s_pages %llu\n",
				     modes[i], s.mode_calls[i], modes[i],
				     s.mode_pages[i]);
	len += sysfs_emit_at(buf, len, "mms_tracked %llu\nfolios_held %llu\n",
			     s.mms_tracked, s.folios_held);
	len += sysfs_emit_at(buf, len,
			     "calls_routed %llu\nroute_procs %lu\nroute_inherit_lost %lu\n",
			     s.calls_routed, mlf_route_procs_tracked(),
			     mlf_route_inherit_failures());
	return len;
}
static DEVICE_ATTR_RO(stats);

static struct attribute *mlf_attrs[] = {
	&dev_attr_stats.attr,
	NULL,
};
ATTRIBUTE_GROUPS(mlf);

static struct miscdevice mlf_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "mlockfast",
	.fops = &mlf_fops,
	.groups = mlf_groups,
};

static int __init mlf_init(void)
{
	int ret = mlf_compat_init(debug_require_symbol, debug_release);

	if (ret)
		return ret;
	ret = mlf_mm_init();
	if (ret)
		return ret;
	mlf_misc.mode = dev_mode;
	ret = misc_register(&mlf_misc);
	if (ret) {
		mlf_mm_exit();
		return ret;
	}
	ret = mlf_route_init();
	if (ret) {
		misc_deregister(&mlf_misc);
		mlf_mm_exit();
		return ret;
	}
	pr_info("%s loaded for %s (series %s), default mode %s\n",
		MLOCKFAST_VERSION, UTS_RELEASE, MLF_SERIES,
		mlf_mode_names[mlf_default_mode]);
	return 0;
}

static void __exit mlf_exit(void)
{
	mlf_route_exit();
	misc_deregister(&mlf_misc);
	mlf_mm_exit();
}

module_init(mlf_init);
module_exit(mlf_exit);

MODULE_LICENSE("GPL");
MODULE_AUTHOR("The mlockfast developers");
MODULE_DESCRIPTION("mlock(2) and friends through /dev/mlockfast, without global LRU drains");
MODULE_VERSION(MLOCKFAST_VERSION);
