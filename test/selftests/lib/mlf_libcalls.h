/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the library's tests share (mlockfast_preload_test, _privdrop_test):
 * a captured run of a program, the library's MLOCKFAST_STATS lines, the
 * module's counters, settling pending moves, and comparing two outputs.
 * Include after kselftest_harness.h and mlf_test.h.
 */
#ifndef MLF_LIBCALLS_H
#define MLF_LIBCALLS_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/mlockfast.h>

/* Calls mlf-preload-calls leaves to libc (flags the device does not take). */
#define LIBC_ONLY_CALLS	5

/* A program's exit status and what it wrote. */
struct result {
	int status;
	char *out, *err;
};

static inline void result_free(struct result *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

/* Take what the program wrote to the files @out and @err, and remove them. */
static inline void result_collect(struct result *r, const char *out,
				  const char *err)
{
	r->out = read_file(out);
	r->err = read_file(err);
	unlink(out);
	unlink(err);
	if (!r->out)
		r->out = strdup("");
	if (!r->err)
		r->err = strdup("");
}

static inline int count(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* The library's MLOCKFAST_STATS lines, summed over processes. */
enum { L_LOCK, L_UNLOCK, L_LOCKALL, L_UNLOCKALL, L_LOCKV, L_UNLOCKV, L_DRAIN,
       L_STATS, L_SYSCALL, L_REFUSED, L_NR };
struct lib_stats {
	unsigned long v[L_NR];
	int lines;
};

static inline struct lib_stats lib_stats(const char *err)
{
	struct lib_stats s = { { 0 }, 0 };

	for (const char *p = err; (p = strstr(p, ": device lock ")); p++) {
		unsigned long v[L_NR];

		if (sscanf(p, ": device lock %lu unlock %lu lockall %lu unlockall %lu lockv %lu unlockv %lu drain %lu stats %lu; syscall %lu; refused %lu",
			   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7],
			   &v[8], &v[9]) == L_NR) {
			for (int i = 0; i < L_NR; i++)
				s.v[i] += v[i];
			s.lines++;
		}
	}
	return s;
}

/* The module's counters through a descriptor of our own, closed at once. */
static inline int dev_stats(struct mlockfast_stats *s)
{
	int fd = open(MLOCKFAST_DEVICE, O_RDWR | O_CLOEXEC), ret;

	memset(s, 0, sizeof(*s));
	s->size = sizeof(*s);
	if (fd < 0)
		return -1;
	ret = ioctl(fd, MLOCKFAST_IOC_STATS, s);
	close(fd);
	return ret;
}

/* Apply pending moves so Mlocked and Unevictable can be compared. */
static inline void settle(void)
{
	int fd = open(MLOCKFAST_DEVICE, O_RDWR | O_CLOEXEC);

	if (fd >= 0) {
		ioctl(fd, MLOCKFAST_IOC_DRAIN);
		close(fd);
	}
	run("echo 1 >/proc/sys/vm/compact_memory");
}

/* The first line where a and b differ, for the log. */
static inline void show_difference(struct __test_metadata *_metadata,
				   const char *a, const char *b)
{
	int line = 1;

	while (*a && *a == *b) {
		line += *a == '\n';
		a++;
		b++;
	}
	TH_LOG("line %d: without '%.*s', with '%.*s'", line, (int)strcspn(a, "\n"),
	       a, (int)strcspn(b, "\n"), b);
}

#define EXPECT_SAME(without, with) do {						\
	EXPECT_EQ(0, strcmp(without, with)) show_difference(_metadata, without, with); \
} while (0)

#endif
