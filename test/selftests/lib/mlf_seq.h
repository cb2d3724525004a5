/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the sequence tests (random, concurrency): a seeded RNG, CPU
 * pinning, and the observable state of an address window written into a
 * caller's buffer without malloc (so two processes that must keep identical
 * address spaces can both call it).
 */
#ifndef MLF_SEQ_H
#define MLF_SEQ_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* splitmix64: tiny, seedable, good enough to pick operations. */
struct seq_rng {
	uint64_t s;
};

uint64_t seq_next(struct seq_rng *r);
/* Uniform in [0, n); 0 when n is 0. */
unsigned long seq_below(struct seq_rng *r, unsigned long n);
/* True with probability num/den. */
int seq_chance(struct seq_rng *r, unsigned int num, unsigned int den);
/* A well-mixed seed derived from @base and @salt. */
uint64_t seq_mix(uint64_t base, uint64_t salt);

/* Text written into a fixed buffer; overflow is recorded, never fatal. */
struct seq_buf {
	char *buf;
	size_t len, cap;
	int overflow;
};

void sb_init(struct seq_buf *b, char *mem, size_t cap);
void sb_printf(struct seq_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void sb_vprintf(struct seq_buf *b, const char *fmt, va_list ap);

/* Read a whole file into @buf (NUL-terminated); length or -1. */
long seq_read_into(const char *path, char *buf, size_t cap);

/* Online CPUs this process may run on (at least 1). */
int seq_ncpus(void);
/* Pin the calling thread to the @idx-th allowed CPU (modulo their number). */
int seq_pin(int idx);

/*
 * Push this CPU's pending LRU and mlock batches through, cheaply and in a
 * way that works under mlockall() and RLIMIT_MEMLOCK: moving a VMA unmaps
 * its old place, and munmap drains them first thing on 6.1 and 6.12; 7.2's
 * munmap no longer does, but its MADV_POPULATE_READ drains after the
 * fault-in whatever it found (faultin_page_range()), the scratch's
 * PROT_NONE page included.  @at is where the one-page scratch VMA is now,
 * @other a free address to move it to; returns the new address (pass it
 * back as @at next time), MAP_FAILED on error.
 */
char *seq_local_drain(char *at, char *other);

/*
 * One page's residency from mincore and pagemap: E/P mapped (E exclusively),
 * S swapped or migrating, r cached, . none.  A page under migration is
 * remembered until seq_take_migrating() (true if one was met since), which
 * clears it.
 */
char seq_page_state(unsigned char incore, uint64_t pm);
int seq_take_migrating(void);

/* Is smaps line @l one of the fields the states compare? */
int seq_wanted_field(const char *l);

/*
 * The observable state of [lo, hi): for each VMA meeting it (from
 * /proc/self/smaps, read into @tmp), its range, perms, offset and kind
 * (anon, shmem, memfd, file), the smaps fields Rss, Locked, Anonymous,
 * AnonHugePages and VmFlags, one character per page of residency (mincore
 * and pagemap: E exclusive, P present, S swapped, r cached, . none), and,
 * if @kpf, one per page of PG_mlocked from /proc/kpageflags (M mlocked,
 * - not, . not present).  Then VmLck.  Read until no page is migrating and
 * two reads in a row agree (at most SEQ_STATE_TRIES + 1 reads, some 3 s), so
 * that a page migrating meanwhile does not show; a state that never settles
 * says so in a last line.
 */
#define SEQ_STATE_TRIES	50

/*
 * Append to the text at *@buf, *@len bytes long, the state that @read(@arg)
 * appends there, read again until no page is migrating and two reads in a
 * row agree, waiting 1, 2, 4 ... 64 ms between them.  @read returns nonzero
 * when it had no room, and the read before it stands.  The number of reads,
 * or -1 if the state never settled (the last read stands).
 */
int seq_read_settled(char **buf, size_t *len, int (*read)(void *), void *arg);
void seq_window_state(struct seq_buf *out, unsigned long lo, unsigned long hi,
		      char *tmp, size_t tmpcap, int kpf);

/*
 * One-sided Fisher exact test: the chance that runs of a variant show @x or
 * more events of @n runs when @xc of @nc runs of the control show it and
 * both have the same rate (hypergeometric, given the @x + @xc events in
 * all).  Exact for any rate: a verdict "worse than the control" taken at
 * p < alpha is wrong by chance with probability at most alpha.  1 when
 * either side has no runs.
 */
double seq_fisher_greater(long x, long n, long xc, long nc);

/* Monotonic seconds. */
double seq_now(void);

/* The seed of a random test: MLF_SEED if set (to replay), else fresh. */
uint64_t seq_seed(void);
/* A numeric environment variable, or @dflt when unset or empty. */
long seq_env_long(const char *name, long dflt);
/*
 * A randomised test's default budget (runs, ops, seconds): @dflt, shared
 * among the MLF_BUDGET_SHARE builds of one kernel source that one suite run
 * tests (test/check sets it: 6.12's bookworm and trixie builds differ in
 * their compiler alone), so that the source gets @dflt in all; at least 1.
 */
long seq_budget(long dflt);

#endif
