// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "mlf_seq.h"

#define SEQ_PAGE	4096UL
#define KPF_MLOCKED_BIT	33

uint64_t seq_next(struct seq_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

unsigned long seq_below(struct seq_rng *r, unsigned long n)
{
	return n ? seq_next(r) % n : 0;
}

int seq_chance(struct seq_rng *r, unsigned int num, unsigned int den)
{
	return seq_below(r, den) < num;
}

uint64_t seq_mix(uint64_t base, uint64_t salt)
{
	struct seq_rng r = { base ^ (salt * 0xd1b54a32d192ed03ULL) };

	return seq_next(&r);
}

void sb_init(struct seq_buf *b, char *mem, size_t cap)
{
	b->buf = mem;
	b->cap = cap;
	b->len = 0;
	b->overflow = 0;
	if (cap)
		mem[0] = 0;
}

void sb_vprintf(struct seq_buf *b, const char *fmt, va_list ap)
{
	size_t room = b->cap - b->len;
	int n = vsnprintf(b->buf + b->len, room, fmt, ap);

	if (n < 0 || (size_t)n >= room) {
		b->overflow = 1;
		b->len = b->cap - 1;
		return;
	}
	b->len += n;
}

void sb_printf(struct seq_buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sb_vprintf(b, fmt, ap);
	va_end(ap);
}

long seq_read_into(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0;
	ssize_t n;

	if (fd < 0)
		return -1;
	while (len + 1 < cap && (n = read(fd, buf + len, cap - len - 1)) > 0)
		len += n;
	close(fd);
	buf[len] = 0;
	return len;
}

int seq_ncpus(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 1;
	n = CPU_COUNT(&set);
	return n > 0 ? n : 1;
}

/* The allowed set at first use: pinning must not shrink what we pick from. */
static cpu_set_t seq_allowed;
static int seq_allowed_valid;

int seq_pin(int idx)
{
	cpu_set_t one;
	int n, cpu, seen = 0;

	if (!seq_allowed_valid) {
		if (sched_getaffinity(0, sizeof(seq_allowed), &seq_allowed))
			return -1;
		seq_allowed_valid = 1;
	}
	n = CPU_COUNT(&seq_allowed);
	if (n <= 0)
		return -1;
	idx %= n;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &seq_allowed))
			continue;
		if (seen++ == idx)
			break;
	}
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	return sched_setaffinity(0, sizeof(one), &one);
}

char *seq_local_drain(char *at, char *other)
{
	char *moved = mremap(at, SEQ_PAGE, SEQ_PAGE,
			     MREMAP_MAYMOVE | MREMAP_FIXED, other);

	/* (fails on the PROT_NONE page, after the drain) */
	if (moved != MAP_FAILED)
		(void)madvise(moved, SEQ_PAGE, MADV_POPULATE_READ);
	return moved;
}

/* Swap areas the guest has: a "swapped" entry of another type is no swap. */
static unsigned int seq_swap_areas(void)
{
	static int n = -1;
	char buf[4096], *l;

	if (n >= 0)
		return n;
	n = 0;
	if (seq_read_into("/proc/swaps", buf, sizeof(buf)) > 0)
		for (l = strchr(buf, '\n'); l && l[1]; l = strchr(l + 1, '\n'))
			n++;
	return n;
}

/* The last read met a page under migration (see seq_window_state()). */
static int seq_migrating;

char seq_page_state(unsigned char incore, uint64_t pm)
{
	if (pm & (1ULL << 63))
		return (pm & (1ULL << 56)) ? 'E' : 'P';
	if (pm & (1ULL << 62)) {
		/* pagemap's swap type (root): past the swap areas, migration */
		if ((pm & 0x1f) >= seq_swap_areas())
			seq_migrating = 1;
		return 'S';
	}
	return incore & 1 ? 'r' : '.';
}

int seq_take_migrating(void)
{
	int m = seq_migrating;

	seq_migrating = 0;
	return m;
}

/* pagemap is per process: never use a descriptor inherited over fork. */
static int seq_pagemap_fd(void)
{
	static int fd = -1;
	static pid_t owner;

	if (fd >= 0 && owner != getpid()) {
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
		owner = getpid();
	}
	return fd;
}

static int seq_kpageflags_fd(void)
{
	static int fd = -1;

	if (fd < 0)
		fd = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
	return fd;
}

#define SEQ_MAX_PAGES	512
#define SEQ_MAX_OBJECTS	64

static void seq_vma_pages(struct seq_buf *out, unsigned long s,
			  unsigned long e, int kpf)
{
	static unsigned char vec[SEQ_MAX_PAGES];
	static uint64_t pm[SEQ_MAX_PAGES];
	char line[SEQ_MAX_PAGES + 1];
	size_t n = (e - s) / SEQ_PAGE, i;
	int fd = seq_pagemap_fd();

	if (n > SEQ_MAX_PAGES) {
		sb_printf(out, "  (%zu pages: too many to show)\n", n);
		return;
	}
	if (mincore((void *)s, e - s, vec))
		memset(vec, 0, n);
	if (fd < 0 || pread(fd, pm, n * 8, s / SEQ_PAGE * 8) != (ssize_t)(n * 8))
		memset(pm, 0, n * 8);
	for (i = 0; i < n; i++)
		line[i] = seq_page_state(vec[i], pm[i]);
	line[n] = 0;
	sb_printf(out, "  res %s\n", line);
	if (!kpf)
		return;
	for (i = 0; i < n; i++) {
		uint64_t flags = 0;
		uint64_t pfn = pm[i] & ((1ULL << 55) - 1);

		if (!(pm[i] & (1ULL << 63)) || !pfn) {
			line[i] = '.';
			continue;
		}
		if (pread(seq_kpageflags_fd(), &flags, 8, pfn * 8) != 8)
			line[i] = '?';
		else
			line[i] = flags & (1ULL << KPF_MLOCKED_BIT) ? 'M' : '-';
	}
	sb_printf(out, "  mlk %s\n", line);
}

int seq_wanted_field(const char *l)
{
	static const char * const f[] = {
		"Rss:", "Locked:", "Anonymous:", "VmFlags:", "AnonHugePages:",
	};

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (!strncmp(l, f[i], strlen(f[i])))
			return 1;
	return 0;
}

/* Field @n (from 0: range, perms, offset, device, inode, path) of a header. */
static const char *seq_field(const char *header, int n)
{
	const char *p = header;

	for (int f = 0; f < n; f++) {
		while (*p && *p != ' ')
			p++;
		while (*p == ' ')
			p++;
	}
	return p;
}

/* Each process has its own files: name the kind, not the file. */
static const char *seq_kind(const char *header)
{
	const char *p = seq_field(header, 5);

	if (!*p)
		return "anon";
	if (!strncmp(p, "/dev/zero", 9) || !strncmp(p, "/SYSV", 5))
		return "shmem";
	if (!strncmp(p, "/memfd:", 7))
		return "memfd";
	return "file";
}

/*
 * Which shared anonymous object a "shmem" VMA maps, numbered in the order
 * the read meets them (@nr of them so far): mremap(MREMAP_DONTUNMAP) leaves
 * two VMAs over one object, and which pages two VMAs share matters.
 */
static unsigned int seq_shmem_object(const char *header, unsigned long *ino,
				     unsigned int *nr, unsigned int max)
{
	unsigned long inode = strtoul(seq_field(header, 4), NULL, 10);
	unsigned int i;

	for (i = 0; i < *nr; i++)
		if (ino[i] == inode)
			return i + 1;
	if (*nr < max)
		ino[(*nr)++] = inode;
	return *nr;
}

static int seq_vma_header(const char *l, unsigned long *s, unsigned long *e,
			  char perms[8], unsigned long *off)
{
	char *p;
	int i;

	if (!((*l >= '0' && *l <= '9') || (*l >= 'a' && *l <= 'f')))
		return 0;
	*s = strtoul(l, &p, 16);
	if (*p != '-')
		return 0;
	*e = strtoul(p + 1, &p, 16);
	if (*p != ' ')
		return 0;
	for (i = 0, p++; i < 7 && *p && *p != ' '; i++)
		perms[i] = *p++;
	perms[i] = 0;
	*off = strtoul(p, NULL, 16);
	return 1;
}

static void seq_window_state_once(struct seq_buf *out, unsigned long lo,
				  unsigned long hi, char *tmp, size_t tmpcap,
				  int kpf)
{
	unsigned long shmem[SEQ_MAX_OBJECTS];
	unsigned int nshmem = 0;
	char *l, *next;
	int in = 0;

	if (seq_read_into("/proc/self/smaps", tmp, tmpcap) < 0) {
		sb_printf(out, "smaps unreadable: %s\n", strerror(errno));
		return;
	}
	for (l = tmp; *l; l = next) {
		unsigned long s, e, off;
		char perms[8] = "";
		const char *kind;

		next = strchr(l, '\n');
		if (next)
			*next++ = 0;
		else
			next = l + strlen(l);
		/*
		 * A VMA's header line, "start-end perms offset ...": fields
		 * start with a capital.  No sscanf: it is slow under TCG.
		 */
		if (seq_vma_header(l, &s, &e, perms, &off)) {
			in = s < hi && e > lo;
			if (!in)
				continue;
			kind = seq_kind(l);
			if (!strcmp(kind, "shmem"))
				sb_printf(out, "%lx-%lx %s %lx shmem:%u\n", s - lo,
					  e - lo, perms, off,
					  seq_shmem_object(l, shmem, &nshmem,
							   SEQ_MAX_OBJECTS));
			else
				sb_printf(out, "%lx-%lx %s %lx %s\n", s - lo,
					  e - lo, perms, off, kind);
			seq_vma_pages(out, s > lo ? s : lo, e < hi ? e : hi, kpf);
			continue;
		}
		if (in && seq_wanted_field(l))
			sb_printf(out, "  %s\n", l);
	}
	if (seq_read_into("/proc/self/status", tmp, tmpcap) > 0) {
		char *v = strstr(tmp, "\nVmLck:");

		if (v)
			sb_printf(out, "VmLck %ld kB\n", strtol(v + 7, NULL, 10));
	}
}

/*
 * Page migration (compaction, kcompactd's proactive runs) shows in what a
 * snapshot reads for as long as it takes: a migration entry is "swapped" to
 * pagemap (and counted in smaps' Rss), and a page cache folio's copy is not
 * yet uptodate to mincore.  Neither is the process's state.  A batch of
 * migrations (up to 512 folios) keeps its entries until the whole batch is
 * copied, two reads apart or more: hence the growing waits.
 */
int seq_read_settled(char **buf, size_t *len, int (*read)(void *), void *arg)
{
	size_t base = *len, first;
	int turn, was_migrating;

	seq_take_migrating();
	if (read(arg))
		return 1;
	for (turn = 0; turn < SEQ_STATE_TRIES; turn++) {
		struct timespec ts = { 0, (1L << (turn < 6 ? turn : 6)) * 1000000 };

		was_migrating = seq_take_migrating();
		first = *len;
		if (read(arg)) {
			/* No room for two: the first stands. */
			*len = first;
			(*buf)[first] = 0;
			return turn + 1;
		}
		/* (the second read's migration stays noted for the next turn) */
		if (!was_migrating && !seq_migrating &&
		    *len - first == first - base &&
		    !memcmp(*buf + base, *buf + first, first - base)) {
			*len = first;
			(*buf)[first] = 0;
			return turn + 2;
		}
		/* The second read is the newer: it replaces the first. */
		memmove(*buf + base, *buf + first, *len - first + 1);
		*len = base + (*len - first);
		nanosleep(&ts, NULL);
	}
	return -1;
}

struct seq_window {
	struct seq_buf *out;
	unsigned long lo, hi;
	char *tmp;
	size_t tmpcap;
	int kpf, reads;
};

/* One read; a second one without room gives way (the first overflowing stays). */
static int seq_window_read(void *arg)
{
	struct seq_window *w = arg;

	seq_window_state_once(w->out, w->lo, w->hi, w->tmp, w->tmpcap, w->kpf);
	if (!w->out->overflow || !w->reads++)
		return w->out->overflow;
	w->out->overflow = 0;
	return 1;
}

void seq_window_state(struct seq_buf *out, unsigned long lo, unsigned long hi,
		      char *tmp, size_t tmpcap, int kpf)
{
	struct seq_window w = { out, lo, hi, tmp, tmpcap, kpf, 0 };

	if (seq_read_settled(&out->buf, &out->len, seq_window_read, &w) < 0)
		sb_printf(out, "state not stable after %d reads%s\n",
			  SEQ_STATE_TRIES + 1,
			  seq_migrating ? ", a page still migrating" : "");
}

double seq_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

uint64_t seq_seed(void)
{
	const char *s = getenv("MLF_SEED");
	struct timespec ts;

	if (s && *s)
		return strtoull(s, NULL, 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	return seq_mix((uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec,
		       (uint64_t)getpid());
}

long seq_env_long(const char *name, long dflt)
{
	const char *v = getenv(name);

	return v && *v ? strtol(v, NULL, 0) : dflt;
}

long seq_budget(long dflt)
{
	long share = seq_env_long("MLF_BUDGET_SHARE", 1);

	if (share < 1)
		share = 1;
	return dflt / share > 0 ? dflt / share : 1;
}

double seq_fisher_greater(long x, long n, long xc, long nc)
{
	long k = x + xc, lo, hi, i;
	double t = 1, all = 0, tail = 0;

	if (n <= 0 || nc <= 0 || x < 0 || xc < 0 || x > n || xc > nc)
		return 1;
	/* X: events of the @n runs, given @k in all: hypergeometric. */
	lo = k - nc > 0 ? k - nc : 0;
	hi = k < n ? k : n;
	/*
	 * Terms relative to the first, by their ratio: no factorials, no
	 * libm.  Rescaled before they could overflow.
	 */
	for (i = lo; i <= hi; i++) {
		if (i >= x)
			tail += t;
		all += t;
		if (t > 1e250 || all > 1e250) {
			t /= 1e250;
			all /= 1e250;
			tail /= 1e250;
		}
		t *= (double)(k - i) * (n - i) / ((i + 1.0) * (nc - k + i + 1.0));
	}
	return all > 0 ? tail / all : 1;
}
