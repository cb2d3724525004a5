// SPDX-License-Identifier: GPL-2.0
/*
 * The measuring tools, test_mlock and mlock_scale, as a user runs them:
 * argument errors, the output formats (the table, --json, the per-second
 * lines), and that a run leaves Mlocked, Unevictable and the caller's VmLck
 * where they were.  No speed is asserted: only shapes and relations.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mlf_test.h"
#include "mlf_diff.h"

#define OUT	"/tmp/mlf_tools.out"
#define ERR	"/tmp/mlf_tools.err"

struct result {
	int status;
	int orphans;	/* processes reparented to us and reaped, -1: timeout */
	char *out, *err;
};

static void result_free(struct result *r)
{
	free(r->out);
	free(r->err);
}

/*
 * As a child subreaper this process inherits whatever a tool leaves behind;
 * reap it.  The number reaped, or -1 if some child is still alive after 10 s.
 */
static int reap_orphans(void)
{
	int n = 0;

	for (int ms = 0; ms < 10000; ms += 10) {
		pid_t pid = waitpid(-1, NULL, WNOHANG);

		if (pid > 0) {
			n++;
			continue;
		}
		if (pid < 0)
			return n;	/* ECHILD: none left */
		usleep(10000);
	}
	return -1;
}

static void settle(void)
{
	mlf_drain();
	drain_everything();
}

/*
 * Run a tool through the shell with stdout and stderr captured, and check
 * that it left Mlocked, Unevictable and this process's VmLck as it found them.
 */
static struct result tool(struct __test_metadata *_metadata, const char *cmd)
{
	struct result r;
	long mlocked, unevictable, vmlck;

	settle();
	mlocked = meminfo_kb("Mlocked");
	unevictable = meminfo_kb("Unevictable");
	vmlck = status_kb("VmLck");
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	r.status = run("{ %s; } >" OUT " 2>" ERR, cmd);
	r.orphans = reap_orphans();
	r.out = read_file(OUT);
	r.err = read_file(ERR);
	unlink(OUT);
	unlink(ERR);
	settle();
	EXPECT_EQ(mlocked, meminfo_kb("Mlocked")) TH_LOG("Mlocked after: %s", cmd);
	EXPECT_EQ(unevictable, meminfo_kb("Unevictable"))
		TH_LOG("Unevictable after: %s", cmd);
	EXPECT_EQ(vmlck, status_kb("VmLck")) TH_LOG("caller's VmLck after: %s", cmd);
	if (!r.out)
		r.out = strdup("");
	if (!r.err)
		r.err = strdup("");
	return r;
}

/* The next line of *text (NUL-terminated in place), or NULL at the end. */
static char *next_line(char **text)
{
	char *line = *text, *nl;

	if (!line || !*line)
		return NULL;
	nl = strchr(line, '\n');
	if (nl) {
		*nl = 0;
		*text = nl + 1;
	} else {
		*text = line + strlen(line);
	}
	return line;
}

static void expect_usage(struct __test_metadata *_metadata, const char *cmd)
{
	struct result r = tool(_metadata, cmd);

	EXPECT_EQ(2, r.status) TH_LOG("%s", cmd);
	EXPECT_NE(NULL, strstr(r.err, "usage:")) TH_LOG("%s: stderr '%s'", cmd, r.err);
	EXPECT_STREQ("", r.out) TH_LOG("%s: stdout", cmd);
	result_free(&r);
}

TEST(test_mlock_bad_arguments_give_usage)
{
	static const char * const cmds[] = {
		"test_mlock -x", "test_mlock -c 0", "test_mlock -c 10 -m bogus",
		"test_mlock -c 10 -m syscall,nope", "test_mlock -c 10 -s 0",
		"test_mlock -c 10 -s 12Q", "test_mlock -c 10 -f pipe",
		"test_mlock -c 10 -r 0", "test_mlock -c 10 -w -1",
		"test_mlock -c 10 extra", "test_mlock --bogus",
	};

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		expect_usage(_metadata, cmds[i]);
	}
}

TEST(mlock_scale_bad_arguments_give_usage)
{
	static const char * const cmds[] = {
		"mlock_scale", "mlock_scale -t 0", "mlock_scale -t x",
		"mlock_scale -t 1 -m bogus", "mlock_scale -t 1 -d 0",
		"mlock_scale -t 1 -s 0", "mlock_scale -t 1 -s 1Q",
		"mlock_scale -t 1 extra", "mlock_scale -t 1 --bogus",
		"mlock_scale -t 100000",
	};

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		expect_usage(_metadata, cmds[i]);
	}
}

/* A table row: mode size count real user sys ns/pair pairs/s ratio. */
struct row {
	char mode[16], size[16], ratio[32];
	long count;
	double real, user, sys, ns, pairs;
};

static bool parse_row(const char *line, struct row *w)
{
	int n = -1;

	return sscanf(line, "%15s %15s %ld %lf %lf %lf %lf %lf %31s %n", w->mode,
		      w->size, &w->count, &w->real, &w->user, &w->sys, &w->ns,
		      &w->pairs, w->ratio, &n) == 9 && n == (int)strlen(line);
}

/* Run test_mlock without --json and check the table: header, then rows. */
static void check_table(struct __test_metadata *_metadata, const char *modes,
			const char * const *want, int nwant, bool ratio)
{
	char cmd[256], *text, *line;
	struct result r;
	int rows = 0, header = 0;

	snprintf(cmd, sizeof(cmd), "test_mlock -c 200 -s 64K -w 100 -m %s", modes);
	r = tool(_metadata, cmd);
	ASSERT_EQ(0, r.status) TH_LOG("%s: %s", cmd, r.err);
	text = r.out;
	while ((line = next_line(&text))) {
		struct row w;

		if (line[0] == '#')
			continue;
		if (!strncmp(line, "mode ", 5)) {
			EXPECT_EQ(0, rows) TH_LOG("header after a row");
			EXPECT_NE(NULL, strstr(line, "ns/pair"));
			EXPECT_NE(NULL, strstr(line, "pairs/s"));
			EXPECT_NE(NULL, strstr(line, "vs syscall"));
			header++;
			continue;
		}
		ASSERT_TRUE(parse_row(line, &w)) TH_LOG("bad row '%s'", line);
		ASSERT_LT(rows, nwant) TH_LOG("extra row '%s'", line);
		EXPECT_STREQ(want[rows], w.mode);
		EXPECT_STREQ("64K", w.size);
		EXPECT_EQ(200, w.count);
		EXPECT_GT(w.real, 0);
		EXPECT_GE(w.user, 0);
		EXPECT_GE(w.sys, 0);
		EXPECT_GT(w.ns, 0);
		EXPECT_GT(w.pairs, 0);
		if (ratio) {
			size_t len = strlen(w.ratio);
			char *end;
			double x = strtod(w.ratio, &end);

			EXPECT_TRUE(len > 1 && end == w.ratio + len - 1 && *end == 'x')
				TH_LOG("ratio '%s'", w.ratio);
			EXPECT_GT(x, 0);
			if (!strcmp(w.mode, "syscall")) {
				EXPECT_STREQ("1.00x", w.ratio);
			}
		} else {
			EXPECT_STREQ("-", w.ratio);
		}
		rows++;
	}
	EXPECT_EQ(1, header);
	EXPECT_EQ(nwant, rows);
	result_free(&r);
}

TEST(test_mlock_table_has_a_row_per_mode)
{
	static const char * const with[] = { "syscall", "preload", "deferred", "reclaim" };
	static const char * const without[] = { "ioctl", "eager" };

	check_table(_metadata, "syscall,preload,deferred,reclaim", with, 4, true);
	check_table(_metadata, "ioctl,eager", without, 2, false);
}

/* -m preload is mlock()/munlock() routed by libmlockfast: the device's calls. */
TEST(test_mlock_preload_goes_through_the_device)
{
	struct mlockfast_stats s0, s1;
	struct result r;

	ASSERT_EQ(0, mlf_stats(&s0));
	r = tool(_metadata, "test_mlock -c 300 -s 16K -w 0 -m preload");
	ASSERT_EQ(0, mlf_stats(&s1));
	EXPECT_EQ(0, r.status) TH_LOG("%s", r.err);
	EXPECT_NE(NULL, strstr(r.out, "\npreload ")) TH_LOG("%s", r.out);
	EXPECT_EQ(300, s1.calls_lock - s0.calls_lock);
	EXPECT_EQ(300, s1.calls_unlock - s0.calls_unlock);
	EXPECT_EQ(0, s1.errors - s0.errors);
	result_free(&r);
	/* and the syscall mode stays libc's */
	ASSERT_EQ(0, mlf_stats(&s0));
	r = tool(_metadata, "test_mlock -c 300 -s 16K -w 0 -m syscall,preload");
	ASSERT_EQ(0, mlf_stats(&s1));
	EXPECT_EQ(0, r.status) TH_LOG("%s", r.err);
	EXPECT_EQ(300, s1.calls_lock - s0.calls_lock);
	result_free(&r);
}

/*
 * A strict parser for test_mlock's flat JSON object: string keys, string or
 * number values, no nesting, no whitespace, nothing after the closing brace.
 */
#define JSON_KEYS 8
static const char * const json_keys[JSON_KEYS] = {
	"mode", "size", "count", "repeat", "real_s", "user_s", "sys_s", "ns_per_pair",
};

struct measurement {
	char mode[16];
	double v[JSON_KEYS];	/* indexed like json_keys; v[0] unused */
	bool seen[JSON_KEYS];
};

static const char *json_string(const char *p, char *out, size_t n)
{
	size_t i = 0;

	if (*p++ != '"')
		return NULL;
	while (*p && *p != '"') {
		if (*p == '\\' || (unsigned char)*p < 0x20 || i + 1 >= n)
			return NULL;
		out[i++] = *p++;
	}
	out[i] = 0;
	return *p == '"' ? p + 1 : NULL;
}

static bool parse_json(const char *line, struct measurement *m)
{
	const char *p = line;

	memset(m, 0, sizeof(*m));
	if (*p++ != '{')
		return false;
	for (;;) {
		char key[32];
		int k;

		p = json_string(p, key, sizeof(key));
		if (!p || *p++ != ':')
			return false;
		for (k = 0; k < JSON_KEYS && strcmp(key, json_keys[k]); k++)
			;
		if (k == JSON_KEYS || m->seen[k])
			return false;	/* unknown or repeated key */
		m->seen[k] = true;
		if (k == 0) {
			p = json_string(p, m->mode, sizeof(m->mode));
			if (!p)
				return false;
		} else {
			char *end;

			if (!(*p == '-' || (*p >= '0' && *p <= '9')))
				return false;
			m->v[k] = strtod(p, &end);
			if (end == p)
				return false;
			/* size, count and repeat are integers */
			if (k <= 3 && memchr(p, '.', end - p))
				return false;
			p = end;
		}
		if (*p == '}')
			break;
		if (*p++ != ',')
			return false;
	}
	if (p[1])
		return false;
	for (int k = 0; k < JSON_KEYS; k++)
		if (!m->seen[k])
			return false;
	return true;
}

TEST(json_parser_is_strict)
{
	struct measurement m;
	static const char *good =
		"{\"mode\":\"syscall\",\"size\":4096,\"count\":10,\"repeat\":0,"
		"\"real_s\":0.001000,\"user_s\":0.000000,\"sys_s\":0.001000,"
		"\"ns_per_pair\":100000.0}";
	static const char * const bad[] = {
		"{\"mode\":\"syscall\",\"size\":4096,\"count\":10,\"repeat\":0,"
		"\"real_s\":0.001000,\"user_s\":0.000000,\"sys_s\":0.001000}",
		"{\"mode\":\"syscall\",\"size\":4096,\"count\":10,\"repeat\":0,"
		"\"real_s\":0.001000,\"user_s\":0.000000,\"sys_s\":0.001000,"
		"\"ns_per_pair\":100000.0} ",
		"{\"mode\":\"syscall\",\"size\":4096,\"count\":10,\"repeat\":0,"
		"\"real_s\":x,\"user_s\":0.000000,\"sys_s\":0.001000,"
		"\"ns_per_pair\":100000.0}",
		"{\"mode\":\"syscall\",\"size\":4096,\"count\":1.5,\"repeat\":0,"
		"\"real_s\":0.001000,\"user_s\":0.000000,\"sys_s\":0.001000,"
		"\"ns_per_pair\":100000.0}",
		"{\"mode\":\"syscall\",\"mode\":\"x\",\"size\":4096,\"count\":10,\"repeat\":0,"
		"\"real_s\":0.001000,\"user_s\":0.000000,\"sys_s\":0.001000,"
		"\"ns_per_pair\":100000.0}",
		"{\"mode\":\"syscall\",\"size\":4096,\"count\":10,\"repeat\":0,"
		"\"real_s\":0.001000,\"user_s\":0.000000,\"sys_s\":0.001000,"
		"\"ns_per_pair\":100000.0,\"extra\":1}",
		"# warm-up", "",
	};

	EXPECT_TRUE(parse_json(good, &m));
	EXPECT_STREQ("syscall", m.mode);
	EXPECT_EQ(10, (long)m.v[2]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_FALSE(parse_json(bad[i], &m)) TH_LOG("accepted '%s'", bad[i]);
	}
}

TEST(test_mlock_json_is_one_object_per_measurement)
{
	static const char * const modes[] = { "syscall", "ioctl", "deferred" };
	const int repeats = 3, count = 150;
	int seen[3][3] = { { 0 } }, lines = 0;
	struct result r;
	char *text, *line;

	r = tool(_metadata, "test_mlock --json -c 150 -s 4K -m syscall,ioctl,deferred -r 3 -w 50");
	ASSERT_EQ(0, r.status) TH_LOG("%s", r.err);
	text = r.out;
	while ((line = next_line(&text))) {
		struct measurement m;
		double d;
		int i;

		ASSERT_TRUE(parse_json(line, &m)) TH_LOG("bad JSON line '%s'", line);
		for (i = 0; i < 3 && strcmp(m.mode, modes[i]); i++)
			;
		ASSERT_LT(i, 3) TH_LOG("mode '%s'", m.mode);
		EXPECT_EQ(4096, m.v[1]);
		EXPECT_EQ(count, m.v[2]);
		ASSERT_GE(m.v[3], 0);
		ASSERT_LT(m.v[3], repeats);
		seen[i][(int)m.v[3]]++;
		EXPECT_GT(m.v[4], 0);
		EXPECT_GE(m.v[5], 0);
		EXPECT_GE(m.v[6], 0);
		/* ns_per_pair is real_s per pair, to its printed precision */
		EXPECT_GT(m.v[7], 0);
		d = m.v[4] * 1e9 / count - m.v[7];
		EXPECT_LE(d < 0 ? -d : d, 1e3 / count + 1)
			TH_LOG("real_s %f, ns_per_pair %f", m.v[4], m.v[7]);
		lines++;
	}
	EXPECT_EQ(3 * repeats, lines);
	for (int i = 0; i < 3; i++) {
		for (int j = 0; j < repeats; j++) {
			EXPECT_EQ(1, seen[i][j]) TH_LOG("%s repeat %d", modes[i], j);
		}
	}
	result_free(&r);
}

/* "min:N max:N total:N", whole line; *avg for the "average: " form. */
static bool parse_scale(const char *line, bool avg, unsigned long long *v)
{
	int n = -1;

	if (avg)
		return sscanf(line, "average: min:%llu max:%llu total:%llu%n",
			      &v[0], &v[1], &v[2], &n) == 3 && n == (int)strlen(line);
	return sscanf(line, "min:%llu max:%llu total:%llu%n", &v[0], &v[1],
		      &v[2], &n) == 3 && n == (int)strlen(line);
}

static void check_scale(struct __test_metadata *_metadata, const char *args,
			int copies)
{
	char cmd[128], *text, *line, *all;
	int seconds = 0, averages = 0;
	struct result r;

	snprintf(cmd, sizeof(cmd), "mlock_scale -d 3 -t %d %s", copies, args);
	r = tool(_metadata, cmd);
	all = strdup(r.out);	/* r.out is cut into lines below */
	ASSERT_EQ(0, r.status) TH_LOG("%s: %s", cmd, r.err);
	EXPECT_STREQ("", r.err);
	EXPECT_NE(NULL, strstr(r.out, "\n# average")) TH_LOG("no note on the average");
	text = r.out;
	while ((line = next_line(&text))) {
		unsigned long long v[3];

		if (line[0] == '#')
			continue;
		if (!strncmp(line, "average:", 8)) {
			EXPECT_TRUE(parse_scale(line, true, v)) TH_LOG("'%s'", line);
			EXPECT_EQ(3, seconds) TH_LOG("average before the seconds");
			averages++;
		} else {
			ASSERT_TRUE(parse_scale(line, false, v)) TH_LOG("'%s'", line);
			EXPECT_EQ(0, averages) TH_LOG("a second after the average");
			seconds++;
		}
		EXPECT_LE(v[0], v[1]) TH_LOG("%s: '%s'", cmd, line);
		EXPECT_LE(v[1], v[2]) TH_LOG("%s: '%s'", cmd, line);
		EXPECT_GT(v[2], 0) TH_LOG("%s: a second without progress:\n%s", cmd, all);
		if (copies == 1) {
			EXPECT_EQ(v[0], v[2]) TH_LOG("%s: '%s'", cmd, line);
		}
	}
	EXPECT_EQ(3, seconds) TH_LOG("%s", cmd);
	EXPECT_EQ(1, averages) TH_LOG("%s", cmd);
	free(all);
	result_free(&r);
}

TEST(mlock_scale_prints_a_line_a_second)
{
	check_scale(_metadata, "-m syscall", 2);
}

TEST(mlock_scale_ioctl_modes)
{
	check_scale(_metadata, "-m deferred -s 16K", 2);
	check_scale(_metadata, "-m reclaim --threads", 2);
	check_scale(_metadata, "-m ioctl", 1);
	check_scale(_metadata, "-m preload --threads", 2);
}

TEST(mlock_scale_copies_are_reaped)
{
	struct result r = tool(_metadata, "mlock_scale -d 1 -t 3 -m eager");

	EXPECT_EQ(0, r.status) TH_LOG("%s", r.err);
	/* mlock_scale waited for its copies: none was left to us */
	EXPECT_EQ(0, r.orphans);
	result_free(&r);
}

TEST(mlock_scale_copies_die_with_the_parent)
{
	/*
	 * The shell leaves mlock_scale to us, and its copies once it dies;
	 * killed after 5 s, time enough for a loaded guest to start the
	 * copies and print a second's line.
	 */
	struct result r = tool(_metadata,
			       "mlock_scale -d 60 -t 2 -m deferred & sleep 5; kill -9 $!");

	EXPECT_EQ(0, r.status) TH_LOG("%s", r.err);
	/* the 2 copies, and the parent unless the shell reaped it first */
	EXPECT_TRUE(r.orphans == 2 || r.orphans == 3)
		TH_LOG("%d processes left to us (-1: one lived on 10 s)", r.orphans);
	EXPECT_NE(NULL, strstr(r.out, "min:")) TH_LOG("it ran for 5 s: '%s'", r.out);
	result_free(&r);
}

TEST_HARNESS_MAIN
