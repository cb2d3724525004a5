// SPDX-License-Identifier: GPL-2.0
/*
 * Seeded random sequences on a small window of fixed addresses: mmap (anon
 * private and shared, memfd, a tmpfs file), munmap, mprotect, mremap,
 * madvise, fork, touching pages, and the lock calls.  Two processes forked
 * from one parent run the same list side by side: A through the system
 * calls, B through the ioctls (the mode changes from op to op, and B moves
 * between CPUs so that deferred batches are met from elsewhere).  After
 * every op both report their return values and the window's observable
 * state, and the parent compares them op by op: they must be equal.  When
 * both have exited and everything is drained, Mlocked and Unevictable must
 * be back where they started.
 *
 * On a failure the seed, the op, both states, the shortest failing prefix
 * and a reduced op list are printed.  MLF_SEED (or --seed=N) fixes the
 * base seed, MLF_OPS (or --ops=N) the number of ops per test, MLF_KEEP=i,j,..
 * runs only those ops of the sequence (a reduced list), MLF_VERBOSE=1 (2)
 * prints every op and A's (and B's) state, MLF_MINIMIZE_S bounds the
 * reduction (seconds, 0: none), MLF_PROFILE=1 times each kind of op, and
 * MLF_INJECT=k fakes a difference at op k to show the report.
 *
 * The fixed_* tests are sequences the random runs found, kept as they are.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mlf_diff.h"
#include "mlf_seq.h"
#include "mlf_test.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ	22
#define MADV_POPULATE_WRITE	23
#endif
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP	4
#endif

#define WBASE		0x300000000000UL	/* 2 MiB aligned, far from all else */
#define GUARD		4			/* unmapped pages each side */
#define MAXW		64			/* largest window, pages */
#define FPAGES		48			/* memfd and file size, pages */
#define SCRATCH1	((char *)0x310000000000UL)
#define SCRATCH2	((char *)0x310000200000UL)
#define REPLY_MAX	(48 << 10)
#define SMAPS_MAX	(128 << 10)
#define MAX_HELD	2

enum op_type {
	OP_MMAP, OP_MUNMAP, OP_MPROTECT, OP_MREMAP, OP_MADVISE, OP_LOCK,
	OP_UNLOCK, OP_LOCKV, OP_UNLOCKV, OP_LOCKALL, OP_UNLOCKALL, OP_FORK,
	OP_FORK_HOLD, OP_RELEASE, OP_TOUCH, OP_DRAIN, OP_SLEEP, NR_OP_TYPES,
};

static const char * const op_names[NR_OP_TYPES] = {
	"mmap", "munmap", "mprotect", "mremap", "madvise", "lock", "unlock",
	"lockv", "unlockv", "lockall", "unlockall", "fork", "fork_hold",
	"release", "touch", "drain", "sleep",
};

enum map_kind {
	K_ANON_PRIV, K_ANON_SHARED, K_MEMFD_SHARED, K_MEMFD_PRIV, K_FILE_PRIV,
	K_FILE_SHARED, NR_KINDS,
};

static const char * const kind_names[NR_KINDS] = {
	"anon-private", "anon-shared", "memfd-shared", "memfd-private",
	"file-private", "file-shared",
};

struct range {
	int a, n;		/* first page (from WBASE, may be < 0), pages */
	int off;		/* bytes added to the address */
	int extra;		/* bytes added to the length (may be < 0) */
	int wrap;		/* length that wraps the address space */
};

struct op {
	int idx;		/* index in the generated sequence */
	int type;
	struct range r;
	/* mmap extra flags, mlock2/mlockall/mremap flags, advice, write */
	unsigned int flags;
	unsigned int mode;	/* MLOCKFAST_MODE_* for B */
	int prot, kind, fpage;
	int t, tn;		/* mremap target page and new size */
	int nv;			/* LOCKV/UNLOCKV: number of ranges */
	struct range v[3];
	int bslot;		/* B's CPU slot for this op */
	int use_mlock;		/* A: mlock() instead of mlock2(..., 0) */
};

struct cfg {
	const char *name;
	uint64_t seed;
	int nops;
	int wpages;
	unsigned long memlock;	/* 0: unlimited (CAP_IPC_LOCK) */
	int inject;		/* op index where B fakes a difference, or -1 */
	int selfcheck;		/* the injection is the test (no shrinking) */
	int light;		/* state after the last op only (shrinking) */
	int routed;		/* B: the routed syscalls, not the ioctls */
};

static int verbose;
/* MLF_PROFILE=1: where the time goes, per op type. */
static int profile;
static double prof_time[NR_OP_TYPES];
static int prof_count[NR_OP_TYPES];

/* ---- generation: from the seed alone, never from results ---- */

static void gen_range(struct seq_rng *r, const struct cfg *c, struct range *g,
		      int outside, int jitter)
{
	int lo = outside ? -GUARD : 0, hi = c->wpages + (outside ? GUARD : 0);
	int max;

	memset(g, 0, sizeof(*g));
	g->a = lo + (int)seq_below(r, hi - lo);
	max = hi - g->a;
	if (seq_chance(r, 1, 4))
		g->n = 1 + (int)seq_below(r, max);
	else
		g->n = 1 + (int)seq_below(r, max < 8 ? max : 8);
	if (outside && seq_chance(r, 1, 25))
		g->n = 0;
	if (!jitter)
		return;
	if (seq_chance(r, 1, 5))
		g->off = (int)seq_below(r, PAGE);
	if (seq_chance(r, 1, 5))
		g->extra = (int)seq_below(r, PAGE) - (int)PAGE / 2;
	if (seq_chance(r, 1, 80))
		g->wrap = 1;
}

static int gen_prot(struct seq_rng *r)
{
	unsigned long x = seq_below(r, 10);

	return x < 7 ? PROT_READ | PROT_WRITE : x < 9 ? PROT_READ : PROT_NONE;
}

static unsigned int gen_lock_flags(struct seq_rng *r)
{
	static const unsigned int bad[] = { 2, 4, 0x80000000U };

	if (seq_chance(r, 1, 30))
		return bad[seq_below(r, 3)];
	return seq_chance(r, 2, 5) ? MLOCK_ONFAULT : 0;
}

static unsigned int gen_lockall_flags(struct seq_rng *r)
{
	static const unsigned int good[] = {
		MCL_CURRENT, MCL_CURRENT, MCL_CURRENT, MCL_FUTURE, MCL_FUTURE,
		MCL_CURRENT | MCL_FUTURE, MCL_CURRENT | MCL_FUTURE,
		MCL_CURRENT | MCL_ONFAULT, MCL_CURRENT | MCL_ONFAULT,
		MCL_FUTURE | MCL_ONFAULT, MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT,
	};
	static const unsigned int bad[] = { 0, MCL_ONFAULT, 8 };

	if (seq_chance(r, 1, 12))
		return bad[seq_below(r, 3)];
	return good[seq_below(r, sizeof(good) / sizeof(good[0]))];
}

/* Op weights; RELEASE only counts while a held child exists. */
static const int weights[NR_OP_TYPES] = {
	[OP_MMAP] = 9, [OP_MUNMAP] = 4, [OP_MPROTECT] = 6, [OP_MREMAP] = 5,
	[OP_MADVISE] = 5, [OP_LOCK] = 14, [OP_UNLOCK] = 12, [OP_LOCKV] = 4,
	[OP_UNLOCKV] = 3, [OP_LOCKALL] = 3, [OP_UNLOCKALL] = 3, [OP_FORK] = 2,
	[OP_FORK_HOLD] = 1, [OP_RELEASE] = 2, [OP_TOUCH] = 14, [OP_DRAIN] = 2,
	[OP_SLEEP] = 1,
};

static void gen_ops(const struct cfg *c, struct op *ops, int n)
{
	static const unsigned int cycle[] = {
		MLOCKFAST_MODE_EAGER, MLOCKFAST_MODE_DEFERRED,
		MLOCKFAST_MODE_RECLAIM,
	};
	struct seq_rng r = { c->seed };
	int held = 0, bslot = 1;

	for (int i = 0; i < n; i++) {
		struct op *o = &ops[i];
		int total = 0, pick, w = c->wpages;

		memset(o, 0, sizeof(*o));
		o->idx = i;
		for (int t = 0; t < NR_OP_TYPES; t++)
			total += (t == OP_RELEASE && !held) ||
				 (t == OP_FORK_HOLD && held >= MAX_HELD) ?
				 0 : weights[t];
		pick = (int)seq_below(&r, total);
		for (o->type = 0; ; o->type++) {
			int wt = (o->type == OP_RELEASE && !held) ||
				 (o->type == OP_FORK_HOLD && held >= MAX_HELD) ?
				 0 : weights[o->type];

			if (pick < wt)
				break;
			pick -= wt;
		}
		o->mode = cycle[i % 3];
		if (seq_chance(&r, 1, 16))
			o->mode = MLOCKFAST_MODE_LEGACY;
		else if (seq_chance(&r, 1, 15))
			o->mode = MLOCKFAST_MODE_DEFAULT;
		if (seq_chance(&r, 1, 4))
			bslot ^= 1;
		o->bslot = bslot;
		o->use_mlock = seq_chance(&r, 1, 2);

		switch (o->type) {
		case OP_MMAP: {
			static const int kinds[] = {
				K_ANON_PRIV, K_ANON_PRIV, K_ANON_PRIV, K_ANON_PRIV,
				K_ANON_SHARED, K_ANON_SHARED, K_MEMFD_SHARED,
				K_MEMFD_SHARED, K_MEMFD_SHARED, K_MEMFD_PRIV,
				K_FILE_PRIV, K_FILE_PRIV, K_FILE_PRIV, K_FILE_SHARED,
			};

			gen_range(&r, c, &o->r, 0, 0);
			o->kind = kinds[seq_below(&r, sizeof(kinds) / sizeof(kinds[0]))];
			o->fpage = (int)seq_below(&r, FPAGES);
			o->prot = gen_prot(&r);
			if (seq_chance(&r, 1, 8))
				o->flags |= MAP_POPULATE;
			if (seq_chance(&r, 1, 12))
				o->flags |= MAP_LOCKED;
			break;
		}
		case OP_MUNMAP:
		case OP_MPROTECT:
			gen_range(&r, c, &o->r, 1, 0);
			if (seq_chance(&r, 1, 30))
				o->r.off = 1;	/* EINVAL: unaligned */
			o->prot = gen_prot(&r);
			break;
		case OP_MREMAP: {
			unsigned long v = seq_below(&r, 20);

			o->r.a = (int)seq_below(&r, w);
			o->r.n = 1 + (int)seq_below(&r, w - o->r.a < 12 ? w - o->r.a : 12);
			if (v < 8) {		/* resize in place */
				o->tn = 1 + (int)seq_below(&r, w - o->r.a);
			} else if (v < 17) {	/* move, maybe resize */
				o->flags = MREMAP_MAYMOVE | MREMAP_FIXED;
				o->t = (int)seq_below(&r, w);
				o->tn = 1 + (int)seq_below(&r, w - o->t);
			} else {		/* move, keep the old VMA */
				o->flags = MREMAP_MAYMOVE | MREMAP_FIXED |
					   MREMAP_DONTUNMAP;
				o->tn = o->r.n;
				o->t = (int)seq_below(&r, w - o->r.n + 1);
			}
			break;
		}
		case OP_MADVISE: {
			static const unsigned int adv[] = {
				MADV_DONTNEED, MADV_DONTNEED, MADV_DONTNEED,
				MADV_DONTNEED, MADV_FREE, MADV_FREE,
				MADV_POPULATE_READ, MADV_POPULATE_WRITE,
			};

			gen_range(&r, c, &o->r, 1, 0);
			o->flags = adv[seq_below(&r, sizeof(adv) / sizeof(adv[0]))];
			break;
		}
		case OP_LOCK:
			gen_range(&r, c, &o->r, 1, 1);
			o->flags = gen_lock_flags(&r);
			break;
		case OP_UNLOCK:
			gen_range(&r, c, &o->r, 1, 1);
			break;
		case OP_LOCKV:
		case OP_UNLOCKV:
			o->nv = 1 + (int)seq_below(&r, 3);
			for (int k = 0; k < o->nv; k++)
				gen_range(&r, c, &o->v[k], seq_chance(&r, 1, 3), 1);
			if (o->type == OP_LOCKV)
				o->flags = gen_lock_flags(&r);
			break;
		case OP_LOCKALL:
			o->flags = gen_lockall_flags(&r);
			break;
		case OP_FORK_HOLD:
			held++;
			break;
		case OP_RELEASE:
			held--;
			break;
		case OP_TOUCH:
			gen_range(&r, c, &o->r, seq_chance(&r, 1, 8), 0);
			o->flags = seq_chance(&r, 3, 5);
			break;
		default:
			break;
		}
	}
}

static const char *mode_name(unsigned int mode)
{
	switch (mode) {
	case MLOCKFAST_MODE_DEFAULT: return "default";
	case MLOCKFAST_MODE_EAGER: return "eager";
	case MLOCKFAST_MODE_DEFERRED: return "deferred";
	case MLOCKFAST_MODE_RECLAIM: return "reclaim";
	case MLOCKFAST_MODE_LEGACY: return "legacy";
	}
	return "?";
}

static void range_str(struct seq_buf *b, const struct range *g)
{
	sb_printf(b, "W%+dp", g->a);
	if (g->off)
		sb_printf(b, "+%d", g->off);
	if (g->wrap)
		sb_printf(b, ", -%dp(wraps)", 2);
	else
		sb_printf(b, ", %dp%+d", g->n, g->extra);
}

static const char *prot_name(int prot)
{
	return prot == (PROT_READ | PROT_WRITE) ? "RW" :
	       prot == PROT_READ ? "R" : "NONE";
}

static void op_str(const struct op *o, char *mem, size_t cap)
{
	struct seq_buf b;

	sb_init(&b, mem, cap);
	sb_printf(&b, "#%d [B cpu slot %d] %s(", o->idx, o->bslot, op_names[o->type]);
	switch (o->type) {
	case OP_MMAP:
		sb_printf(&b, "W%+dp, %dp, %s, %s off %dp%s%s)", o->r.a, o->r.n,
			  prot_name(o->prot), kind_names[o->kind], o->fpage,
			  o->flags & MAP_POPULATE ? " POPULATE" : "",
			  o->flags & MAP_LOCKED ? " LOCKED" : "");
		return;
	case OP_MUNMAP:
	case OP_MPROTECT:
		sb_printf(&b, "W%+dp%s, %dp", o->r.a, o->r.off ? "+1" : "", o->r.n);
		if (o->type == OP_MPROTECT)
			sb_printf(&b, ", %s", prot_name(o->prot));
		sb_printf(&b, ")");
		return;
	case OP_MREMAP:
		sb_printf(&b, "W%+dp, %dp -> ", o->r.a, o->r.n);
		if (o->flags & MREMAP_FIXED)
			sb_printf(&b, "W%+dp, ", o->t);
		sb_printf(&b, "%dp%s%s)", o->tn,
			  o->flags & MREMAP_FIXED ? " MAYMOVE|FIXED" : "",
			  o->flags & MREMAP_DONTUNMAP ? "|DONTUNMAP" : "");
		return;
	case OP_MADVISE:
		sb_printf(&b, "W%+dp, %dp, %s)", o->r.a, o->r.n,
			  o->flags == MADV_DONTNEED ? "DONTNEED" :
			  o->flags == MADV_FREE ? "FREE" :
			  o->flags == MADV_POPULATE_READ ? "POPULATE_READ" :
			  "POPULATE_WRITE");
		return;
	case OP_LOCK:
	case OP_UNLOCK:
		range_str(&b, &o->r);
		if (o->type == OP_LOCK)
			sb_printf(&b, ", flags %#x", o->flags);
		break;
	case OP_LOCKV:
	case OP_UNLOCKV:
		for (int k = 0; k < o->nv; k++) {
			sb_printf(&b, "%s{", k ? ", " : "");
			range_str(&b, &o->v[k]);
			sb_printf(&b, "}");
		}
		if (o->type == OP_LOCKV)
			sb_printf(&b, ", flags %#x", o->flags);
		break;
	case OP_LOCKALL:
		sb_printf(&b, "%#x", o->flags);
		break;
	case OP_TOUCH:
		sb_printf(&b, "W%+dp, %dp, %s)", o->r.a, o->r.n,
			  o->flags ? "write" : "read");
		return;
	default:
		sb_printf(&b, ")");
		return;
	}
	sb_printf(&b, ") B: %s%s", mode_name(o->mode),
		  o->use_mlock && o->type == OP_LOCK && !o->flags ? ", A: mlock" : "");
}

/* ---- the two processes ---- */

enum { ROLE_A, ROLE_B };

/* Static, not malloc'd: A and B must keep identical address spaces. */
static char reply_mem[REPLY_MAX];
static char smaps_mem[SMAPS_MAX];
static struct mlockfast_iovec iov_mem[3];
static sigjmp_buf touch_env;
static int comm_fd;
static struct { pid_t pid; int fd; } held[MAX_HELD];
static int nheld;

static void on_fault(int sig)
{
	siglongjmp(touch_env, sig);
}

/* Deep enough for everything after it, so the stack VMA never grows. */
static void __attribute__((noinline)) grow_stack(void)
{
	volatile char pad[256 << 10];

	for (size_t i = 0; i < sizeof(pad); i += PAGE)
		pad[i] = 0;
}

static unsigned long range_addr(const struct range *g)
{
	return WBASE + (long)g->a * (long)PAGE + g->off;
}

static size_t range_len(const struct range *g)
{
	long len = (long)g->n * (long)PAGE + g->extra;

	if (g->wrap)
		return -2 * PAGE;
	return len < 0 ? 0 : (size_t)len;
}

static void put_ret(struct seq_buf *out, const char *what, long ret, int err)
{
	const char *name = ret < 0 ? strerrorname_np(err) : NULL;

	if (ret < 0)
		sb_printf(out, "%s = %ld %s\n", what, ret, name ? name : "?");
	else
		sb_printf(out, "%s = %ld\n", what, ret);
}

static int a_lock(const struct op *o, const struct range *g, unsigned int flags)
{
	if (!flags && o->use_mlock)
		return mlock((void *)range_addr(g), range_len(g));
	return syscall(SYS_mlock2, range_addr(g), range_len(g), flags) ? -1 : 0;
}

/*
 * A routed B makes the syscalls as A does; the module's default_mode is
 * set to the op's mode first (route_b_mode()), so every mode is met.
 */
static int routed_b;

static void route_b_mode(int role, const struct op *o)
{
	static const char *const names[] = { NULL, "eager", "deferred", "reclaim" };
	unsigned int m = o->mode >> MLOCKFAST_MODE_SHIFT;

	if (role == ROLE_B && routed_b && m < 4 && names[m])
		write_file_str(DEFAULT_MODE, names[m]);
}

static int xlock(int role, const struct op *o, const struct range *g)
{
	route_b_mode(role, o);
	if (role == ROLE_A || routed_b)
		return a_lock(o, g, o->flags);
	return mlf_lock2((void *)range_addr(g), range_len(g),
			 o->flags | o->mode);
}

static int xunlock(int role, const struct op *o, const struct range *g)
{
	route_b_mode(role, o);
	if (role == ROLE_A || routed_b)
		return munlock((void *)range_addr(g), range_len(g));
	return mlf_unlock_mode((void *)range_addr(g), range_len(g), o->mode);
}

/* LOCKV/UNLOCKV; A does the same one range at a time, to the first error. */
static void do_vec(int role, const struct op *o, struct seq_buf *out)
{
	int lock = o->type == OP_LOCKV, ret = 0, err = 0;
	unsigned int done = 0;

	if (role == ROLE_A || routed_b) {
		for (; done < (unsigned int)o->nv; done++) {
			ret = lock ? xlock(role, o, &o->v[done]) :
				     xunlock(role, o, &o->v[done]);
			if (ret) {
				err = errno;
				break;
			}
		}
	} else {
		struct mlockfast_vec v = {
			.size = sizeof(v), .flags = o->flags | o->mode,
			.iov = (uintptr_t)iov_mem, .count = o->nv,
		};

		if (!lock)
			v.flags = o->mode;
		for (int k = 0; k < o->nv; k++) {
			iov_mem[k].addr = range_addr(&o->v[k]);
			iov_mem[k].len = range_len(&o->v[k]);
		}
		ret = ioctl(mlf_fd(), lock ? MLOCKFAST_IOC_LOCKV :
			    MLOCKFAST_IOC_UNLOCKV, &v) ? -1 : 0;
		err = errno;
		done = v.done;
	}
	put_ret(out, lock ? "lockv" : "unlockv", ret, err);
	sb_printf(out, "done %u\n", done);
}

static void do_touch(const struct op *o, struct seq_buf *out)
{
	char res[MAXW + 2 * GUARD + 1];
	volatile int i;

	for (i = 0; i < o->r.n; i++) {
		volatile char *p = (volatile char *)(WBASE +
						     (long)(o->r.a + i) * (long)PAGE);
		int sig = sigsetjmp(touch_env, 1);

		if (sig) {
			res[i] = sig == SIGSEGV ? 'S' : sig == SIGBUS ? 'B' : '?';
			continue;
		}
		if (o->flags)
			*p = 1;
		else
			(void)*p;
		res[i] = o->flags ? 'w' : 'r';
	}
	res[o->r.n] = 0;
	sb_printf(out, "touch %s\n", res);
}

static void do_fork(const struct op *o, struct seq_buf *out)
{
	int st = 0, pfd[2];
	pid_t pid;

	if (o->type == OP_FORK) {
		pid = fork();
		if (pid == 0)
			_exit(0);
		if (pid < 0 || waitpid(pid, &st, 0) != pid)
			put_ret(out, "fork", -1, errno);
		else
			sb_printf(out, "fork child status %#x\n", st);
		return;
	}
	if (pipe(pfd))
		_exit(87);
	pid = fork();
	if (pid == 0) {
		char c;

		/* Hold the COW-shared pages until released; no one else's fds. */
		close(pfd[1]);
		close(comm_fd);
		for (int k = 0; k < nheld; k++)
			close(held[k].fd);
		while (read(pfd[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(pfd[0]);
	if (pid < 0) {
		close(pfd[1]);
		sb_printf(out, "fork_hold failed\n");
		return;
	}
	held[nheld].pid = pid;
	held[nheld].fd = pfd[1];
	nheld++;
	sb_printf(out, "fork_hold ok\n");
}

static void release_one(struct seq_buf *out)
{
	int st = 0;

	if (!nheld) {
		sb_printf(out, "release none\n");
		return;
	}
	nheld--;
	close(held[0].fd);
	waitpid(held[0].pid, &st, 0);
	held[0] = held[1];
	sb_printf(out, "release status %#x\n", st);
}

static void do_op(int role, const struct op *o, int memfd, int filefd,
		  struct seq_buf *out)
{
	unsigned long addr = range_addr(&o->r);
	size_t len = (size_t)o->r.n * PAGE;
	long ret = 0;
	int err = 0;

	errno = 0;
	switch (o->type) {
	case OP_MMAP: {
		static const int mflags[NR_KINDS] = {
			MAP_PRIVATE | MAP_ANONYMOUS, MAP_SHARED | MAP_ANONYMOUS,
			MAP_SHARED, MAP_PRIVATE, MAP_PRIVATE, MAP_SHARED,
		};
		int fd = o->kind == K_MEMFD_SHARED || o->kind == K_MEMFD_PRIV ?
			 memfd : o->kind >= K_FILE_PRIV ? filefd : -1;
		char *p = mmap((void *)addr, len, o->prot,
			       mflags[o->kind] | MAP_FIXED | o->flags, fd,
			       fd >= 0 ? (off_t)o->fpage * PAGE : 0);

		err = errno;
		ret = p == MAP_FAILED ? -1 : (long)((unsigned long)p - WBASE) / (long)PAGE;
		put_ret(out, "mmap", ret, err);
		return;
	}
	case OP_MUNMAP:
		ret = munmap((void *)addr, len);
		put_ret(out, "munmap", ret, errno);
		return;
	case OP_MPROTECT:
		ret = mprotect((void *)addr, len, o->prot);
		put_ret(out, "mprotect", ret, errno);
		return;
	case OP_MREMAP: {
		char *p = mremap((void *)addr, len, (size_t)o->tn * PAGE, o->flags,
				 (void *)(WBASE + (long)o->t * (long)PAGE));

		err = errno;
		ret = p == MAP_FAILED ? -1 : (long)((unsigned long)p - WBASE) / (long)PAGE;
		put_ret(out, "mremap", ret, err);
		return;
	}
	case OP_MADVISE:
		ret = madvise((void *)addr, len, o->flags);
		put_ret(out, "madvise", ret, errno);
		return;
	case OP_LOCK:
		ret = xlock(role, o, &o->r);
		put_ret(out, "lock", ret, errno);
		return;
	case OP_UNLOCK:
		ret = xunlock(role, o, &o->r);
		put_ret(out, "unlock", ret, errno);
		return;
	case OP_LOCKV:
	case OP_UNLOCKV:
		do_vec(role, o, out);
		return;
	case OP_LOCKALL:
		route_b_mode(role, o);
		ret = role == ROLE_A || routed_b ? mlockall(o->flags) :
		      mlf_lockall(o->flags | o->mode);
		put_ret(out, "lockall", ret, errno);
		return;
	case OP_UNLOCKALL:
		route_b_mode(role, o);
		ret = role == ROLE_A || routed_b ? munlockall() : mlf_unlockall();
		put_ret(out, "unlockall", ret, errno);
		return;
	case OP_FORK:
	case OP_FORK_HOLD:
		do_fork(o, out);
		return;
	case OP_RELEASE:
		release_one(out);
		return;
	case OP_TOUCH:
		do_touch(o, out);
		return;
	case OP_DRAIN:
		/* The module's batches only; A has nothing to match it with. */
		ret = role == ROLE_B ? mlf_drain() : 0;
		put_ret(out, "drain", ret, errno);
		return;
	case OP_SLEEP: {
		/* Long enough for deferred batches' timers (defer_ms) to fire. */
		struct timespec ts = { 0, 25 * 1000 * 1000 };

		nanosleep(&ts, NULL);
		sb_printf(out, "slept\n");
		return;
	}
	}
}

static int read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			return -1;
		got += n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	size_t put = 0;
	ssize_t n;

	while (put < len) {
		n = write(fd, (const char *)buf + put, len - put);
		if (n <= 0)
			return -1;
		put += n;
	}
	return 0;
}

/* B's CPU for slot 0/1: away from A where there are CPUs enough. */
static int b_cpu(int slot)
{
	int n = seq_ncpus();

	if (n >= 3)
		return 1 + slot;
	return n == 2 ? (slot ? 1 : 0) : 0;
}

static void __attribute__((noreturn))
child_main(const struct cfg *c, int role, const struct op *ops, int n, int wfd)
{
	unsigned long lo = WBASE - GUARD * PAGE;
	unsigned long hi = WBASE + (c->wpages + GUARD) * PAGE;
	struct sigaction sa = { .sa_handler = on_fault };
	char path[64], page[PAGE], *scratch, *p;
	int memfd, filefd;

	comm_fd = wfd;
	grow_stack();
	if (seq_pin(role == ROLE_A ? 0 : b_cpu(1)))
		_exit(86);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	memfd = memfd_create("mlf-rand", 0);
	if (memfd < 0 || ftruncate(memfd, FPAGES * PAGE))
		_exit(85);
	snprintf(path, sizeof(path), "/tmp/mlf-rand-%d", getpid());
	filefd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (filefd < 0)
		_exit(84);
	unlink(path);
	memset(page, 'f', sizeof(page));
	for (int i = 0; i < FPAGES; i++)
		if (write(filefd, page, PAGE) != (ssize_t)PAGE)
			_exit(83);
	/* The window and its guards must be ours alone. */
	p = mmap((void *)lo, hi - lo, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p != (void *)lo || munmap(p, hi - lo))
		_exit(82);
	scratch = mmap(SCRATCH1, PAGE, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (scratch != SCRATCH1)
		_exit(81);
	if (role == ROLE_B && mlf_fd() < 0)
		_exit(80);
	/* A never routed; a routed B must be (route=all: random_run()). */
	if (mlf_route(role == ROLE_B && routed_b ? MLOCKFAST_ROUTE_ON :
		      MLOCKFAST_ROUTE_NEVER, NULL) ||
	    (role == ROLE_B && routed_b && mlf_routed() != 1))
		_exit(79);
	if (c->memlock)
		diff_limit(c->memlock);

	for (int i = 0; i < n; i++) {
		const struct op *o = &ops[i];
		struct seq_buf out;
		uint32_t len;
		char *moved;

		if (role == ROLE_B && seq_pin(b_cpu(o->bslot)))
			_exit(78);
		sb_init(&out, reply_mem + sizeof(len), sizeof(reply_mem) - sizeof(len));
		do_op(role, o, memfd, filefd, &out);
		if (role == ROLE_B && o->idx == c->inject)
			sb_printf(&out, "injected difference\n");
		/*
		 * Leave no kernel batch pending: PG_mlocked is read next (and a
		 * light run must leave the kernel as a full one would).
		 */
		moved = seq_local_drain(scratch, scratch == SCRATCH1 ? SCRATCH2 :
					SCRATCH1);
		if (moved == MAP_FAILED)
			sb_printf(&out, "local drain failed: %s\n", strerror(errno));
		else
			scratch = moved;
		if (!c->light || i == n - 1)
			seq_window_state(&out, lo, hi, smaps_mem, sizeof(smaps_mem), 1);
		if (out.overflow)
			_exit(77);
		len = out.len;
		memcpy(reply_mem, &len, sizeof(len));
		if (write_full(wfd, reply_mem, sizeof(len) + len))
			_exit(76);
	}
	while (nheld) {
		struct seq_buf dummy;

		sb_init(&dummy, reply_mem, sizeof(reply_mem));
		release_one(&dummy);
	}
	_exit(0);
}

/* ---- the parent: run, compare, report, bisect, reduce ---- */

/* Does the VMA block holding line @l (up to the next header) say VM_LOCKED? */
static int block_locked(const char *l)
{
	for (l = strchr(l, '\n'); l && l[1] == ' '; l = strchr(l + 1, '\n'))
		if (!strncmp(l + 1, "  VmFlags:", 10)) {
			const char *end = strchr(l + 1, '\n');
			const char *lo = strstr(l + 1, " lo ");

			return lo && (!end || lo < end);
		}
	return 0;
}

/*
 * The states must be equal, but for what the kernel itself does not keep
 * exact: PG_mlocked, whose mlock_count "might undercount" (mm/mlock.c) when
 * a folio is off the LRU or still in another CPU's batch at the wrong
 * moment, and which the kernel's munlock clears on the "assume that was the
 * last mlock" view or keeps on a count that is one too high.  That depends
 * on which CPU did what when, so the syscall side cannot be the reference:
 * - in a VMA locked on both sides, either flag;
 * - in a VMA locked on neither, a page the syscall side left mlocked and
 *   the ioctl side did not: the kernel's leftover (seen on 6.12, where the
 *   last op was the syscall's munlock on both sides), which reclaim culls;
 * - in a VMA locked on neither, a file page that a VMA locked on both sides
 *   maps too: its flag is that VMA's page's, which may differ (the syscall
 *   side's undercount, seen on 7.2, shows in both VMAs).  A shared
 *   anonymous object is such a file too once mremap(MREMAP_DONTUNMAP) has
 *   left two VMAs over it (the states number the objects: "shmem:N").
 * A page the ioctl side left mlocked in an unlocked VMA is a leak: every
 * other difference fails.
 */

/* A VMA header of the state: "start-end perms offset kind", window-relative. */
struct vma_head {
	unsigned long start, off;
	char kind[16];
};

static int vma_head(const char *l, struct vma_head *h)
{
	char perms[8];

	return l[0] != ' ' &&
	       sscanf(l, "%lx-%*x %7s %lx %15s", &h->start, perms, &h->off,
		      h->kind) == 4;
}

/* The file offset of page @i of an "  mlk" line under @h. */
static unsigned long vma_page_off(const struct vma_head *h, size_t i)
{
	long rel = (long)h->start;	/* negative: the VMA begins below */

	return h->off + (rel < 0 ? (unsigned long)-rel : 0) + i * PAGE;
}

/* Is page @off of @kind's file in a VMA that @state shows locked? */
static int file_page_locked(const char *state, const char *kind,
			    unsigned long off)
{
	struct vma_head h;

	if (strcmp(kind, "memfd") && strcmp(kind, "file") &&
	    strncmp(kind, "shmem:", 6))
		return 0;
	for (const char *l = state; *l; ) {
		/* seq_vma_pages(): the header, "  res ...", "  mlk ..." */
		const char *res = strchr(l, '\n');
		const char *mlk = res ? strchr(res + 1, '\n') : NULL;

		if (vma_head(l, &h) && !strcmp(h.kind, kind) && mlk &&
		    !strncmp(res + 1, "  res ", 6) &&
		    !strncmp(mlk + 1, "  mlk ", 6) && block_locked(l) &&
		    off >= vma_page_off(&h, 0) &&
		    off < vma_page_off(&h, strcspn(mlk + 7, "\n")))
			return 1;
		if (!res)
			break;
		l = res + 1;
	}
	return 0;
}

/*
 * An unlocked VMA's "  mlk" lines @a (syscall) and @b (ioctl), of @len,
 * under the header @h: equal but where the kernel's results may differ.
 */
static int unlocked_mlk_equal(const char *sa, const struct vma_head *h,
			      const char *a, const char *b, size_t len)
{
	for (size_t i = 6; i < len; i++) {
		if (a[i] == b[i] || (a[i] == 'M' && b[i] == '-'))
			continue;
		if (!h || a[i] != '-' || b[i] != 'M' ||
		    !file_page_locked(sa, h->kind, vma_page_off(h, i - 6)))
			return 0;
	}
	return 1;
}

/* 0 if states @a and @b are equal, else the (1-based) line that is not. */
static int state_mismatch(const char *a, const char *b)
{
	const char *sa = a;
	struct vma_head h;
	int have_head = 0, line = 1;

	if (!strcmp(a, b))
		return 0;
	for (; *a && *b; line++) {
		size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");

		if (la != lb)
			return line;
		if (a[0] != ' ')
			have_head = vma_head(a, &h);
		if (strncmp(a, b, la) &&
		    (strncmp(a, "  mlk ", 6) || strncmp(b, "  mlk ", 6)))
			return line;
		if (strncmp(a, b, la) && !(block_locked(a) && block_locked(b)) &&
		    (block_locked(a) || block_locked(b) ||
		     !unlocked_mlk_equal(sa, have_head ? &h : NULL, a, b, la)))
			return line;
		a += la + (a[la] == '\n');
		b += lb + (b[lb] == '\n');
	}
	return *a || *b ? line : 0;
}

struct result {
	int fail_at;		/* first op whose results differ, or -1 */
	int crashed;		/* a child died or misbehaved */
	int leak;		/* Mlocked/Unevictable not back at the end */
	long migrated;		/* pages the guest migrated during the run */
	char why[512];
};

static char reply_a[REPLY_MAX], reply_b[REPLY_MAX];
static char opbuf[512];

/* The start of line @n (1-based) of @s, or its end if it has fewer. */
static const char *nth_line(const char *s, int n)
{
	while (--n > 0 && *s) {
		s += strcspn(s, "\n");
		s += *s == '\n';
	}
	return s;
}

/* Lines [from, to] of a state (1-based), or all of it if @to is 0. */
static void print_state_lines(const char *who, const char *s, int from, int to)
{
	for (int line = 1; *s && (!to || line <= to); line++) {
		int n = (int)strcspn(s, "\n");

		if (line >= from)
			fprintf(stderr, "#   %s|%4d %.*s\n", who, line, n, s);
		s += n + (s[n] == '\n');
	}
}

static void print_state(const char *who, const char *s)
{
	print_state_lines(who, s, 1, 0);
}

static int get_reply(int fd, char *buf)
{
	uint32_t len;

	if (read_full(fd, &len, sizeof(len)) || len >= REPLY_MAX ||
	    read_full(fd, buf, len))
		return -1;
	buf[len] = 0;
	return 0;
}

/* Kill what is left of a run and reap it all, orphans included. */
static void reap_all(pid_t pa, pid_t pb, int *st_a, int *st_b, int kill_them)
{
	pid_t pid;
	int st;

	if (kill_them) {
		kill(pa, SIGKILL);
		kill(pb, SIGKILL);
	}
	/* We are a subreaper: held grandchildren come back to us. */
	while ((pid = waitpid(-1, &st, 0)) > 0) {
		if (pid == pa)
			*st_a = st;
		else if (pid == pb)
			*st_b = st;
	}
}

/*
 * A and B get the op list by inheritance and run it through, each writing
 * its state after every op down a pipe; the parent compares them op by op
 * as they come.  A round trip per op would cost more than the op itself
 * under TCG.
 */
static void run_ops(const struct cfg *c, const struct op *ops, int n,
		    struct result *res, int report)
{
	int a_out[2], b_out[2], st_a = 0, st_b = 0, stop = 0;
	long mlocked, unevictable, ml_end, ue_end, migrated;
	pid_t pa, pb;

	memset(res, 0, sizeof(*res));
	res->fail_at = -1;
	drain_everything();
	mlocked = meminfo_kb("Mlocked");
	unevictable = meminfo_kb("Unevictable");
	migrated = vmstat("pgmigrate_success");
	if (pipe(a_out) || pipe(b_out)) {
		res->crashed = 1;
		snprintf(res->why, sizeof(res->why), "pipe: %s", strerror(errno));
		return;
	}
	/* Slack, so that neither waits on the parent often. */
	fcntl(a_out[1], F_SETPIPE_SZ, 1 << 20);
	fcntl(b_out[1], F_SETPIPE_SZ, 1 << 20);
	fflush(NULL);
	/* A and B fork from the same parent state: identical address spaces. */
	pa = fork();
	if (pa == 0) {
		close(a_out[0]);
		close(b_out[0]);
		close(b_out[1]);
		child_main(c, ROLE_A, ops, n, a_out[1]);
	}
	pb = fork();
	if (pb == 0) {
		close(b_out[0]);
		close(a_out[0]);
		close(a_out[1]);
		child_main(c, ROLE_B, ops, n, b_out[1]);
	}
	close(a_out[1]);
	close(b_out[1]);

	for (int i = 0; i < n; i++) {
		double t = seq_now();
		const char *la, *lb;
		int line;

		if (get_reply(a_out[0], reply_a) || get_reply(b_out[0], reply_b)) {
			res->crashed = 1;
			res->fail_at = i;
			snprintf(res->why, sizeof(res->why),
				 "a process died at op %d", i);
			stop = 1;
			break;
		}
		if (profile) {
			prof_time[ops[i].type] += seq_now() - t;
			prof_count[ops[i].type]++;
		}
		if (verbose) {
			op_str(&ops[i], opbuf, sizeof(opbuf));
			fprintf(stderr, "# %s\n", opbuf);
			print_state("A", reply_a);
			if (verbose > 1)
				print_state("B", reply_b);
		}
		line = state_mismatch(reply_a, reply_b);
		if (!line)
			continue;
		res->fail_at = i;
		stop = 1;
		la = nth_line(reply_a, line);
		lb = nth_line(reply_b, line);
		/* Migration is the guest's: it says how quiet the run was. */
		snprintf(res->why, sizeof(res->why),
			 "op %d: state line %d: syscall \"%.*s\" ioctl \"%.*s\" (%ld pages migrated in the guest meanwhile)",
			 i, line, (int)strcspn(la, "\n"), la,
			 (int)strcspn(lb, "\n"), lb,
			 vmstat("pgmigrate_success") - migrated);
		if (report) {
			op_str(&ops[i], opbuf, sizeof(opbuf));
			fprintf(stderr, "# MISMATCH at op %d of %s (seed %" PRIu64 "): %s\n",
				i, c->name, c->seed, opbuf);
			fprintf(stderr, "# the line that differs, %d:\n#   syscall: %.*s\n#   ioctl:   %.*s\n",
				line, (int)strcspn(la, "\n"), la,
				(int)strcspn(lb, "\n"), lb);
			/* Around the difference; all of it with MLF_VERBOSE. */
			fprintf(stderr, "# state after the op, A (syscall) and B (ioctl)%s:\n",
				verbose ? "" : ", lines around the difference");
			print_state_lines("A", reply_a, verbose ? 1 : line - 8,
					  verbose ? 0 : line + 4);
			print_state_lines("B", reply_b, verbose ? 1 : line - 8,
					  verbose ? 0 : line + 4);
		}
		break;
	}
	close(a_out[0]);
	close(b_out[0]);
	reap_all(pa, pb, &st_a, &st_b, stop);
	if (res->crashed) {
		/* Exit codes 76-99 are child_main()'s and the helpers' _exit()s. */
		snprintf(res->why, sizeof(res->why),
			 "a process died at op %d: status A %#x, B %#x",
			 res->fail_at, st_a, st_b);
	} else if (!stop && (!WIFEXITED(st_a) || WEXITSTATUS(st_a) ||
			     !WIFEXITED(st_b) || WEXITSTATUS(st_b))) {
		snprintf(res->why, sizeof(res->why),
			 "child status: A %#x, B %#x", st_a, st_b);
		res->crashed = 1;
	}
	res->migrated = vmstat("pgmigrate_success") - migrated;
	mlf_drain();
	drain_everything();
	ml_end = meminfo_kb("Mlocked");
	ue_end = meminfo_kb("Unevictable");
	if (ml_end != mlocked || ue_end != unevictable) {
		res->leak = 1;
		if (report)
			fprintf(stderr, "# LEAK after %d ops of %s: Mlocked %ld -> %ld kB, Unevictable %ld -> %ld kB\n",
				res->fail_at >= 0 ? res->fail_at + 1 : n, c->name,
				mlocked, ml_end, unevictable, ue_end);
	}
}

static int failed(const struct result *r)
{
	return r->fail_at >= 0 || r->crashed || r->leak;
}

/* The base seed, fixed in main() so every test of one run shares it. */
static uint64_t base_seed;

/* Bisect [lo, hi): lo ops pass, hi ops fail; the least failing count. */
static int bisect(const struct cfg *c, const struct op *ops, int lo, int hi)
{
	struct result r;

	while (hi - lo > 1) {
		int mid = lo + (hi - lo) / 2;

		run_ops(c, ops, mid, &r, 0);
		if (failed(&r))
			hi = mid;
		else
			lo = mid;
	}
	return hi;
}

/*
 * A failure: find the shortest failing prefix, then cut ops out of it
 * (halves, quarters, ... single ops) while it still fails, for at most
 * MLF_MINIMIZE_S seconds, and print what is left.  Every op is compared,
 * so a mismatch at op k makes k + 1 the shortest prefix unless the first k
 * ops already fail the end-of-run check: two runs tell, and only then, or
 * for a failure seen at the end alone, is the count bisected.  The
 * reduction's trials compare results after every op but the state after
 * the last one only, which makes them several times faster.
 */
static void shrink(const struct cfg *c, struct op *ops, int n,
		   const struct result *first)
{
	double budget = seq_env_long("MLF_MINIMIZE_S", 60), t0;
	struct cfg lc = *c;
	int hi = n, len;
	struct op *trial = calloc(n, sizeof(*trial));
	struct result r;

	if (!trial)
		return;
	lc.light = 1;
	if (first->fail_at >= 0) {
		hi = first->fail_at + 1;
		run_ops(c, ops, hi, &r, 0);
		if (!failed(&r)) {
			fprintf(stderr, "# the first %d ops alone did not fail again: not reproducible\n",
				hi);
			free(trial);
			return;
		}
		run_ops(c, ops, hi - 1, &r, 0);
		if (failed(&r))
			hi = bisect(&lc, ops, 0, hi - 1);
	} else {
		hi = bisect(&lc, ops, 0, n);
	}
	fprintf(stderr, "# shortest failing prefix: %d ops (reproduce: MLF_SEED=%" PRIu64 " MLF_OPS=%d mlockfast_random_test -t %s)\n",
		hi, base_seed, hi, c->name);

	/* Reduce: drop chunks while the sequence still fails. */
	len = hi;
	t0 = seq_now();
	for (int chunk = len / 2; chunk >= 1 && seq_now() - t0 < budget; chunk /= 2) {
		for (int s = 0; s + chunk <= len && seq_now() - t0 < budget; ) {
			int m = 0;

			for (int i = 0; i < len; i++)
				if (i < s || i >= s + chunk)
					trial[m++] = ops[i];
			run_ops(&lc, trial, m, &r, 0);
			if (failed(&r)) {
				memcpy(ops, trial, m * sizeof(*ops));
				len = m;
			} else {
				s += chunk;
			}
		}
	}
	fprintf(stderr, "# reduced to %d ops in %.0f s (MLF_MINIMIZE_S=%.0f):\n", len,
		seq_now() - t0, budget);
	for (int i = 0; i < len; i++) {
		op_str(&ops[i], opbuf, sizeof(opbuf));
		fprintf(stderr, "#   %s\n", opbuf);
	}
	fprintf(stderr, "# reproduce: MLF_SEED=%" PRIu64 " MLF_OPS=%d MLF_KEEP=", base_seed,
		ops[len - 1].idx + 1);
	for (int i = 0; i < len; i++)
		fprintf(stderr, "%d%s", ops[i].idx, i + 1 < len ? "," : "");
	fprintf(stderr, " MLF_VERBOSE=1 mlockfast_random_test -t %s\n", c->name);
	run_ops(c, ops, len, &r, 1);
	fprintf(stderr, "# the reduced sequence, every state compared: %s\n",
		failed(&r) ? r.why : "passed this time");
	free(trial);
}

static void random_run(struct __test_metadata *_metadata, struct cfg *c,
		       uint64_t salt)
{
	struct result res;
	struct op *ops;
	double t0;

	ASSERT_LE(0, mlf_fd());
	routed_b = c->routed;
	c->seed = seq_mix(base_seed, salt);
	/* The self-check keeps its length: its difference is at a fixed op. */
	if (c->inject < 0) {
		c->nops = (int)seq_env_long("MLF_OPS", seq_budget(c->nops));
		/* By hand: fake a difference at that op to see the report. */
		c->inject = (int)seq_env_long("MLF_INJECT", -1);
		c->selfcheck = 0;
	}
	ASSERT_GT(c->nops, 0);
	verbose = (int)seq_env_long("MLF_VERBOSE", 0);
	profile = seq_env_long("MLF_PROFILE", 0) > 0;
	fprintf(stderr, "# %s: MLF_SEED=%" PRIu64 " (test seed %" PRIu64 "), %d ops, window %d pages%s, %d CPUs\n",
		c->name, base_seed, c->seed, c->nops, c->wpages,
		c->memlock ? ", RLIMIT_MEMLOCK without CAP_IPC_LOCK" : "",
		seq_ncpus());
	ops = calloc(c->nops, sizeof(*ops));
	ASSERT_NE(NULL, ops);
	gen_ops(c, ops, c->nops);
	/* MLF_KEEP=i,j,...: only those ops of the sequence (a reduced one). */
	if (getenv("MLF_KEEP") && c->inject < 0) {
		const char *k = getenv("MLF_KEEP");
		int m = 0;

		while (*k) {
			char *end;
			long idx = strtol(k, &end, 10);

			ASSERT_NE(k, end) TH_LOG("MLF_KEEP: bad list");
			ASSERT_GT(c->nops, idx) TH_LOG("MLF_KEEP: op %ld > MLF_OPS", idx);
			ops[m++] = ops[idx];
			k = *end == ',' ? end + 1 : end;
		}
		c->nops = m;
	}
	signal(SIGPIPE, SIG_IGN);
	ASSERT_EQ(0, prctl(PR_SET_CHILD_SUBREAPER, 1));
	t0 = seq_now();
	run_ops(c, ops, c->nops, &res, 1);
	fprintf(stderr, "# %s: %d ops in %.1f s, %ld pages migrated in the guest meanwhile%s%s\n",
		c->name, res.fail_at >= 0 ? res.fail_at + 1 : c->nops,
		seq_now() - t0, res.migrated,
		failed(&res) ? ": FAILED: " : "", failed(&res) ? res.why : "");
	for (int t = 0; profile && t < NR_OP_TYPES; t++)
		fprintf(stderr, "#   %-10s %5d ops %7.3f s %6.2f ms/op\n", op_names[t],
			prof_count[t], prof_time[t],
			prof_count[t] ? prof_time[t] * 1e3 / prof_count[t] : 0);
	if (c->selfcheck) {
		/* The self-check: the fake difference must be found, exactly. */
		EXPECT_EQ(c->inject, res.fail_at);
		EXPECT_FALSE(res.crashed);
		EXPECT_FALSE(res.leak);
		free(ops);
		return;
	}
	if (failed(&res))
		shrink(c, ops, c->nops, &res);
	EXPECT_EQ(-1, res.fail_at) TH_LOG("seed %" PRIu64 ": %s", c->seed, res.why);
	EXPECT_FALSE(res.crashed) TH_LOG("%s", res.why);
	EXPECT_FALSE(res.leak);
	free(ops);
}

#define DEFER_MS	"/sys/module/mlockfast/parameters/defer_ms"


FIXTURE(random) {
	long defer_ms;
};

FIXTURE_SETUP(random)
{
	self->defer_ms = read_long(DEFER_MS);
	ASSERT_LE(0, self->defer_ms);
}

FIXTURE_TEARDOWN(random)
{
	if (read_long(DEFER_MS) != self->defer_ms)
		EXPECT_EQ(0, write_file_long(DEFER_MS, self->defer_ms));
}

/*
 * 12,500 ops in all, in five differently shaped runs (each its share where
 * MLF_BUDGET_SHARE builds of one source share the budget: seq_budget()).
 */
TEST_F_TIMEOUT(random, mixed_a, 900)
{
	struct cfg c = {
		.name = "mixed_a", .nops = 3000, .wpages = 64, .inject = -1,
	};

	random_run(_metadata, &c, 1);
}

TEST_F_TIMEOUT(random, mixed_b, 900)
{
	struct cfg c = {
		.name = "mixed_b", .nops = 3000, .wpages = 64, .inject = -1,
	};

	random_run(_metadata, &c, 2);
}

/* Few pages: ranges overlap all the time, VMAs split and merge. */
TEST_F_TIMEOUT(random, dense, 900)
{
	struct cfg c = {
		.name = "dense", .nops = 2000, .wpages = 16, .inject = -1,
	};

	random_run(_metadata, &c, 3);
}

/*
 * B through the routed syscalls, the module's default_mode set to each
 * op's mode before it: route=all, A chooses never to be routed.
 */
TEST_F_TIMEOUT(random, routed, 900)
{
	struct cfg c = {
		.name = "routed", .nops = 2000, .wpages = 64, .inject = -1,
		.routed = 1,
	};
	char *route = mlf_route_param(), *mode = read_file(DEFAULT_MODE);

	ASSERT_NE(NULL, route);
	ASSERT_NE(NULL, mode);
	ASSERT_EQ(0, mlf_set_route_param("all"));
	random_run(_metadata, &c, 5);
	EXPECT_EQ(0, mlf_set_route_param(route));
	EXPECT_EQ(0, write_file_str(DEFAULT_MODE, mode));
	free(route);
	free(mode);
}

/* The rlimit paths: RLIMIT_MEMLOCK of 24 pages and no CAP_IPC_LOCK. */
TEST_F_TIMEOUT(random, rlimit, 900)
{
	struct cfg c = {
		.name = "rlimit", .nops = 2500, .wpages = 64,
		.memlock = 24 * PAGE, .inject = -1,
	};

	random_run(_metadata, &c, 4);
}

/*
 * Found by the random runs, kept as fixed sequences: a deferred lock's
 * queued moves, voided when munmap (here: a MAP_FIXED mmap over the range)
 * munlocks the pages, must not be taken for a live lock once the kernel
 * mlocks the same pages again for another VMA (MCL_FUTURE): neither paid
 * by a later DRAIN nor cancelled by a later unlock in place of the
 * kernel's own lock.  Either leaves the pages mlocked after munlockall.
 */
static void fixed_run(struct __test_metadata *_metadata, const char *name,
		      const struct op *ops, int n, int wpages)
{
	struct cfg c = {
		.name = name, .nops = n, .wpages = wpages, .inject = -1,
	};
	struct op *o = calloc(n, sizeof(*o));
	struct result res;

	ASSERT_NE(NULL, o);
	ASSERT_LE(0, mlf_fd());
	/*
	 * Queued moves are applied by the DRAIN ops only, not by a timer that
	 * may or may not fire in between (the fixture restores defer_ms).
	 */
	ASSERT_EQ(0, write_file_long(DEFER_MS, 100000));
	ASSERT_EQ(0, prctl(PR_SET_CHILD_SUBREAPER, 1));
	signal(SIGPIPE, SIG_IGN);
	verbose = (int)seq_env_long("MLF_VERBOSE", 0);
	for (int i = 0; i < n; i++) {
		o[i] = ops[i];
		o[i].idx = i;
	}
	run_ops(&c, o, n, &res, 1);
	EXPECT_EQ(-1, res.fail_at) TH_LOG("%s", res.why);
	EXPECT_FALSE(res.crashed) TH_LOG("%s", res.why);
	EXPECT_FALSE(res.leak);
	free(o);
}

#define OP(t, ...)	{ .type = (t), __VA_ARGS__ }
#define RNG(first, pages)	.r = { .a = (first), .n = (pages) }

/* B stays on the CPU it started on: the file's pages are on the LRU there. */
#define OPB(t, ...)	{ .type = (t), .bslot = 1, __VA_ARGS__ }

/*
 * Pages 2-5 of the file: locked (queued), unmapped, mapped again locked
 * (MCL_FUTURE, set first: an eager LOCKALL applies the batch itself).
 */
static const struct op stale_then_unlock[] = {
	OPB(OP_MMAP, RNG(0, 8), .kind = K_FILE_SHARED, .prot = PROT_READ | PROT_WRITE),
	OPB(OP_TOUCH, RNG(0, 8)),
	OPB(OP_LOCKALL, .flags = MCL_FUTURE, .mode = MLOCKFAST_MODE_EAGER),
	OPB(OP_LOCK, RNG(2, 4), .mode = MLOCKFAST_MODE_DEFERRED),
	OPB(OP_MUNMAP, RNG(2, 4)),
	OPB(OP_MMAP, RNG(8, 4), .kind = K_FILE_SHARED, .fpage = 2, .prot = PROT_READ),
	OPB(OP_UNLOCKALL),
};

static const struct op stale_then_drain[] = {
	OPB(OP_MMAP, RNG(0, 8), .kind = K_FILE_SHARED, .prot = PROT_READ | PROT_WRITE),
	OPB(OP_TOUCH, RNG(0, 8)),
	OPB(OP_LOCKALL, .flags = MCL_FUTURE, .mode = MLOCKFAST_MODE_EAGER),
	OPB(OP_LOCK, RNG(2, 4), .mode = MLOCKFAST_MODE_DEFERRED),
	OPB(OP_MUNMAP, RNG(2, 4)),
	OPB(OP_MMAP, RNG(8, 4), .kind = K_FILE_SHARED, .fpage = 2, .prot = PROT_READ),
	OPB(OP_DRAIN),
	OPB(OP_UNLOCKALL),
};

/*
 * mlock's loop steps over the rest of a VMA that a piece merged into, but
 * populate still covers the whole range: here pages 48 and 49 of the
 * 48-page memfd, so mlock fails with ENOMEM, and must with the ioctl too.
 */
static const struct op merge_into_locked_next[] = {
	OPB(OP_MMAP, RNG(8, 6), .kind = K_MEMFD_PRIV, .fpage = 44,
	    .prot = PROT_READ | PROT_WRITE),
	OPB(OP_TOUCH, RNG(8, 4), .flags = 1),
	OPB(OP_LOCK, RNG(11, 3), .mode = MLOCKFAST_MODE_EAGER),
	OPB(OP_LOCK, RNG(8, 3), .flags = MLOCK_ONFAULT,
	    .mode = MLOCKFAST_MODE_DEFERRED),
	OPB(OP_LOCK, RNG(9, 5), .mode = MLOCKFAST_MODE_DEFERRED),
	OPB(OP_UNLOCK, RNG(8, 6), .mode = MLOCKFAST_MODE_EAGER),
};

/*
 * mlockall's loop steps over a locked VMA that the one before it merged
 * into, but mlockall(2) populates every VMA: here the pages still locked
 * since the mmap (MCL_FUTURE), shared with a child since, need the COW
 * break too.  The random runs' reduction (MLF_SEED=5048382714103, mixed_a),
 * after populate was given only the spans the walk noted.
 */
static const struct op lockall_merged_next[] = {
	OPB(OP_LOCKALL, .flags = MCL_FUTURE, .mode = MLOCKFAST_MODE_RECLAIM),
	OPB(OP_MMAP, RNG(54, 10), .kind = K_MEMFD_PRIV, .fpage = 24,
	    .prot = PROT_READ | PROT_WRITE),
	OPB(OP_UNLOCKV, .nv = 1, .v = { { .a = 54, .n = 6 } }),
	OPB(OP_FORK_HOLD),
	OPB(OP_LOCKALL, .flags = MCL_CURRENT | MCL_FUTURE,
	    .mode = MLOCKFAST_MODE_EAGER),
};

TEST_F_TIMEOUT(random, fixed_lockall_populates_merged_next, 120)
{
	fixed_run(_metadata, "fixed_lockall_populates_merged_next",
		  lockall_merged_next,
		  sizeof(lockall_merged_next) / sizeof(lockall_merged_next[0]),
		  64);
}

TEST_F_TIMEOUT(random, fixed_merge_into_locked_next, 120)
{
	fixed_run(_metadata, "fixed_merge_into_locked_next",
		  merge_into_locked_next,
		  sizeof(merge_into_locked_next) / sizeof(merge_into_locked_next[0]),
		  16);
}

/* The random runs' own reduction (MLF_SEED=646041082433, mixed_a). */
static const struct op stale_reduced[] = {
	OP(OP_MMAP, RNG(27, 7), .kind = K_FILE_SHARED, .fpage = 5,
	   .prot = PROT_READ | PROT_WRITE, .bslot = 1),
	OP(OP_LOCKALL, .flags = MCL_FUTURE, .mode = MLOCKFAST_MODE_EAGER,
	   .bslot = 1),
	OP(OP_TOUCH, RNG(27, 7)),
	OP(OP_LOCK, RNG(29, 5), .mode = MLOCKFAST_MODE_DEFERRED, .use_mlock = 1),
	OP(OP_MMAP, RNG(6, 25), .kind = K_FILE_SHARED, .fpage = 6,
	   .prot = PROT_READ),
	OP(OP_UNLOCKALL),
};

TEST_F_TIMEOUT(random, fixed_stale_move_reduced, 120)
{
	fixed_run(_metadata, "fixed_stale_move_reduced", stale_reduced,
		  sizeof(stale_reduced) / sizeof(stale_reduced[0]), 64);
}

TEST_F_TIMEOUT(random, fixed_stale_move_then_unlock, 120)
{
	fixed_run(_metadata, "fixed_stale_move_then_unlock", stale_then_unlock,
		  sizeof(stale_then_unlock) / sizeof(stale_then_unlock[0]), 16);
}

TEST_F_TIMEOUT(random, fixed_stale_move_then_drain, 120)
{
	fixed_run(_metadata, "fixed_stale_move_then_drain", stale_then_drain,
		  sizeof(stale_then_drain) / sizeof(stale_then_drain[0]), 16);
}

/* The comparison itself must catch a difference, at the op it happens. */
TEST_F_TIMEOUT(random, detects_injected_difference, 300)
{
	struct cfg c = {
		.name = "detects_injected_difference", .nops = 200,
		.wpages = 64, .inject = 137, .selfcheck = 1,
	};

	random_run(_metadata, &c, 5);
}

int main(int argc, char **argv)
{
	int m = 1;

	/* A and B lock the same text (mlockall) from two CPUs. */
	run_from_private_copy(argv);
	/* --seed=N and --ops=N are ours; the rest goes to the harness. */
	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "--seed=", 7))
			setenv("MLF_SEED", argv[i] + 7, 1);
		else if (!strncmp(argv[i], "--ops=", 6))
			setenv("MLF_OPS", argv[i] + 6, 1);
		else
			argv[m++] = argv[i];
	}
	argv[m] = NULL;
	if (getenv("MLF_SEED") && *getenv("MLF_SEED"))
		base_seed = strtoull(getenv("MLF_SEED"), NULL, 0);
	else
		base_seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	return test_harness_run(m, argv);
}
