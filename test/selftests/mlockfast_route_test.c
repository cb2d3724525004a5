// SPDX-License-Identifier: GPL-2.0
/*
 * Routing: the route parameter and the per-process choice decide whose
 * plain mlock-family syscalls run the module's path (calls_routed counts
 * them), choices are inherited across fork and exec, a routed call gives
 * the syscall's results and errnos, seccomp still sees the syscall, a
 * function held by another IPMODIFY user keeps route off, and switching
 * route or unloading the module while calls are in flight loses nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "kselftest_harness.h"
#include "mlf_test.h"

#define PG		4096UL
#define PARAM		"/sys/module/mlockfast/parameters/"
#define NOGROUP		4242	/* a group nobody here holds */

static long routed_calls(void)
{
	struct mlockfast_stats s;

	return mlf_stats(&s) ? -1 : (long)s.calls_routed;
}

/* The five calls once each, on a page of its own; 0 if all succeeded. */
static int five_calls(void)
{
	char *p = mmap(NULL, PG, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int bad = 0;

	if (p == MAP_FAILED)
		return -1;
	bad |= mlock(p, PG);
	bad |= munlock(p, PG);
	bad |= (int)syscall(SYS_mlock2, p, PG, MLOCK_ONFAULT);
	bad |= munlock(p, PG);
	bad |= mlockall(MCL_CURRENT | MCL_ONFAULT);
	bad |= munlockall();
	munmap(p, PG);
	return bad ? -1 : 0;
}

/* In a child with @choice (QUERY: none): routed calls its 6 calls made. */
static long child_routed_calls(unsigned int choice)
{
	long before = routed_calls(), after;
	int st;
	pid_t pid = fork();

	if (!pid) {
		if (choice != MLOCKFAST_ROUTE_QUERY &&
		    mlf_route(choice, NULL))
			_exit(90);
		_exit(five_calls() ? 91 : 0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st))
		return -1;
	after = routed_calls();
	return after - before;
}

/* route, the device's group and default_mode as they were, put back. */
FIXTURE(route) {
	char *route;
	struct stat dev;
};

FIXTURE_SETUP(route)
{
	ASSERT_LE(0, mlf_fd());
	self->route = mlf_route_param();
	ASSERT_NE(NULL, self->route);
	ASSERT_EQ(0, stat(MLOCKFAST_DEVICE, &self->dev));
	/* This process and its children: no choice of their own. */
	ASSERT_EQ(0, mlf_route(MLOCKFAST_ROUTE_DEFAULT, NULL));
}

FIXTURE_TEARDOWN(route)
{
	write_file_str(PARAM "debug_ipmodify", "\n");
	mlf_route(MLOCKFAST_ROUTE_DEFAULT, NULL);
	EXPECT_EQ(0, mlf_set_route_param(self->route));
	EXPECT_EQ(0, chown(MLOCKFAST_DEVICE, -1, self->dev.st_gid));
	free(self->route);
}

TEST_F(route, parameter_is_off_by_default_and_takes_three_values)
{
	char *v;

	/* The suite loads the module with no parameter. */
	EXPECT_STREQ("off", self->route);
	EXPECT_EQ(-1, mlf_set_route_param("sometimes"));
	EXPECT_EQ(EINVAL, errno);
	for (int i = 0; i < 2; i++) {
		for (const char *const *w = (const char *const[]){ "group", "all", "off", NULL };
		     *w; w++) {
			ASSERT_EQ(0, mlf_set_route_param(*w));
			v = mlf_route_param();
			ASSERT_NE(NULL, v);
			EXPECT_STREQ(*w, v);
			free(v);
		}
	}
}

TEST_F(route, off_routes_nobody_whatever_they_chose)
{
	struct mlockfast_route r;

	ASSERT_EQ(0, mlf_set_route_param("off"));
	EXPECT_EQ(0, child_routed_calls(MLOCKFAST_ROUTE_ON));
	EXPECT_EQ(0, child_routed_calls(MLOCKFAST_ROUTE_QUERY));
	ASSERT_EQ(0, mlf_route(MLOCKFAST_ROUTE_ON, &r));
	EXPECT_EQ(MLOCKFAST_ROUTE_ON, r.choice);
	EXPECT_EQ(MLOCKFAST_ROUTING_OFF, r.routing);
	EXPECT_EQ(0, r.routed);
}

TEST_F(route, all_routes_every_call_but_of_those_who_chose_never)
{
	ASSERT_EQ(0, mlf_set_route_param("all"));
	EXPECT_EQ(6, child_routed_calls(MLOCKFAST_ROUTE_QUERY));
	EXPECT_EQ(6, child_routed_calls(MLOCKFAST_ROUTE_ON));
	EXPECT_EQ(0, child_routed_calls(MLOCKFAST_ROUTE_NEVER));
	EXPECT_EQ(6, child_routed_calls(MLOCKFAST_ROUTE_DEFAULT));
}

/* In a child: supplementary groups @g (or none), then five_calls(). */
static long routed_with_groups(int with_group, unsigned int choice)
{
	long before = routed_calls();
	gid_t g = NOGROUP;
	int st;
	pid_t pid = fork();

	if (!pid) {
		if (setgroups(with_group, &g))
			_exit(92);
		if (choice != MLOCKFAST_ROUTE_QUERY && mlf_route(choice, NULL))
			_exit(90);
		_exit(five_calls() ? 91 : 0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st))
		return -1;
	return routed_calls() - before;
}

TEST_F(route, group_routes_members_of_the_device_group)
{
	ASSERT_EQ(0, chown(MLOCKFAST_DEVICE, -1, NOGROUP));
	ASSERT_EQ(0, mlf_set_route_param("group"));
	EXPECT_EQ(6, routed_with_groups(1, MLOCKFAST_ROUTE_QUERY));
	EXPECT_EQ(0, routed_with_groups(0, MLOCKFAST_ROUTE_QUERY));
	/* The choice wins over the group, both ways. */
	EXPECT_EQ(6, routed_with_groups(0, MLOCKFAST_ROUTE_ON));
	EXPECT_EQ(0, routed_with_groups(1, MLOCKFAST_ROUTE_NEVER));
	/* The group is read at each call: udev may set it after the load. */
	ASSERT_EQ(0, chown(MLOCKFAST_DEVICE, -1, NOGROUP + 1));
	EXPECT_EQ(0, routed_with_groups(1, MLOCKFAST_ROUTE_QUERY));
}

/* The stats' route_procs gauge, polled for up to 10 s; its last value. */
static long route_procs_back_to_zero(void)
{
	long n = -1;

	for (int i = 0; i < 100 && n; i++) {
		char *st = read_file("/sys/class/misc/mlockfast/stats");
		char *at = st ? strstr(st, "route_procs ") : NULL;

		n = at ? atol(at + strlen("route_procs ")) : -1;
		free(st);
		if (n)
			usleep(100 * 1000);
	}
	return n;
}

/*
 * A grandchild (fork) and an exec'd program see the choice: exit status
 * 10 + choice * 2 + routed, from a query in each.
 */
static int query_status(void)
{
	struct mlockfast_route r;

	mlf_fd_close();
	if (mlf_route(MLOCKFAST_ROUTE_QUERY, &r))
		return 99;
	return 10 + r.choice * 2 + r.routed;
}

static int inherited_status(unsigned int choice, int exec)
{
	int st;
	pid_t pid = fork();

	if (!pid) {
		pid_t gc;

		if (mlf_route(choice, NULL))
			_exit(90);
		mlf_fd_close();
		gc = fork();
		if (!gc) {
			if (exec) {
				execl("/proc/self/exe", "mlockfast_route_test",
				      "--query", (char *)NULL);
				_exit(98);
			}
			_exit(query_status());
		}
		if (gc < 0 || waitpid(gc, &st, 0) != gc || !WIFEXITED(st))
			_exit(97);
		_exit(WEXITSTATUS(st));
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

TEST_F(route, choices_are_inherited_across_fork_and_exec)
{
	ASSERT_EQ(0, chown(MLOCKFAST_DEVICE, -1, NOGROUP));
	ASSERT_EQ(0, mlf_set_route_param("group"));
	for (int exec = 0; exec < 2; exec++) {
		EXPECT_EQ(10 + MLOCKFAST_ROUTE_ON * 2 + 1,
			  inherited_status(MLOCKFAST_ROUTE_ON, exec))
			TH_LOG("route me, %s", exec ? "exec" : "fork");
	}
	ASSERT_EQ(0, mlf_set_route_param("all"));
	for (int exec = 0; exec < 2; exec++) {
		EXPECT_EQ(10 + MLOCKFAST_ROUTE_NEVER * 2,
			  inherited_status(MLOCKFAST_ROUTE_NEVER, exec))
			TH_LOG("never, %s", exec ? "exec" : "fork");
		EXPECT_EQ(10 + MLOCKFAST_ROUTE_DEFAULT * 2 + 1,
			  inherited_status(MLOCKFAST_ROUTE_DEFAULT, exec))
			TH_LOG("no choice, %s", exec ? "exec" : "fork");
	}
	/* The choices of processes that are gone go within seconds. */
	EXPECT_EQ(0, route_procs_back_to_zero());
}

/*
 * Calls that fail or do nothing, each's return and errno in a text: the
 * same routed as not.
 */
static void bad_calls(char *out, size_t cap)
{
	char *p = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	size_t n = 0;

#define ONE(call) do {							\
		long r;							\
		errno = 0;						\
		r = (call);						\
		n += snprintf(out + n, cap - n, "%s = %ld %d\n", #call, r, \
			      errno);					\
	} while (0)
	munmap(p + 2 * PG, PG);
	ONE(mlock(p, 0));
	ONE(munlock(p, 0));
	ONE(mlock(p + 1, PG));
	ONE(mlock(p, 4 * PG));
	ONE(munlock(p, 4 * PG));
	ONE(mlock(p, -PG));
	ONE(mlock((void *)-PG, 2 * PG));
	ONE(syscall(SYS_mlock2, p, PG, 2));
	ONE(syscall(SYS_mlock2, p, PG, -1));
	ONE(syscall(SYS_mlock2, p, 0, MLOCK_ONFAULT));
	ONE(mlockall(0));
	ONE(mlockall(MCL_ONFAULT));
	ONE(mlockall(8));
	ONE(mlockall(-1));
	ONE(syscall(SYS_mlockall, 1UL << 32 | MCL_CURRENT));
	ONE(munlockall());
	ONE(syscall(SYS_mlock, 0UL, 1UL << 47));
	ONE(mlock(p, PG));
	ONE(munlock(p, PG));
#undef ONE
	munmap(p, 4 * PG);
}

static int bad_calls_in_child(unsigned int choice, char *out, size_t cap)
{
	int pfd[2], st;
	ssize_t got = 0, r;
	pid_t pid;

	if (pipe(pfd))
		return -1;
	pid = fork();
	if (!pid) {
		char buf[4096] = "";

		close(pfd[0]);
		if (mlf_route(choice, NULL))
			_exit(90);
		bad_calls(buf, sizeof(buf));
		if (write(pfd[1], buf, strlen(buf)) < 0)
			_exit(91);
		_exit(0);
	}
	close(pfd[1]);
	while ((r = read(pfd[0], out + got, cap - 1 - got)) > 0)
		got += r;
	out[got] = 0;
	close(pfd[0]);
	return waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	       !WEXITSTATUS(st) ? 0 : -1;
}

TEST_F(route, errors_are_the_syscalls_errors)
{
	static char stock[4096], routed[4096];
	long before;

	ASSERT_EQ(0, mlf_set_route_param("all"));
	ASSERT_EQ(0, bad_calls_in_child(MLOCKFAST_ROUTE_NEVER, stock, sizeof(stock)));
	before = routed_calls();
	ASSERT_EQ(0, bad_calls_in_child(MLOCKFAST_ROUTE_ON, routed, sizeof(routed)));
	/*
	 * The 9 that fail or do nothing on their arguments alone (no length,
	 * flags refused) are left to the syscall; the other 10 are routed.
	 */
	EXPECT_EQ(10, routed_calls() - before);
	EXPECT_STREQ(stock, routed);
}

/*
 * seccomp runs at the syscall's entry, before the routing: a filter that
 * fails mlock() with EXDEV fails it routed too, and mlock2() still goes.
 */
TEST_F(route, seccomp_still_sees_the_syscall)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mlock, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EXDEV),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = 4, .filter = f };
	long before;
	int st;
	pid_t pid;

	ASSERT_EQ(0, mlf_set_route_param("all"));
	before = routed_calls();
	pid = fork();
	if (!pid) {
		char *p = mmap(NULL, PG, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED || mlf_route(MLOCKFAST_ROUTE_ON, NULL) ||
		    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
			_exit(90);
		if (mlock(p, PG) != -1 || errno != EXDEV)
			_exit(91);
		if (syscall(SYS_mlock2, p, PG, 0) || munlock(p, PG))
			_exit(92);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st)) TH_LOG("status %#x", st);
	/* mlock2 and munlock reached the module; the denied mlock did not. */
	EXPECT_EQ(2, routed_calls() - before);
}

TEST_F(route, a_function_held_by_another_ipmodify_user_keeps_route_off)
{
	char *v;

	ASSERT_EQ(0, mlf_set_route_param("off"));
	dmesg_mark();
	ASSERT_EQ(0, write_file_str(PARAM "debug_ipmodify", "__x64_sys_munlock"));
	EXPECT_EQ(-1, mlf_set_route_param("all"));
	EXPECT_EQ(EBUSY, errno);
	v = mlf_route_param();
	ASSERT_NE(NULL, v);
	EXPECT_STREQ("off", v);
	free(v);
	EXPECT_EQ(1, dmesg_count("route stays off: __x64_sys_munlock is taken"));
	/* Nothing else changed: the stock calls, nothing routed. */
	EXPECT_EQ(0, child_routed_calls(MLOCKFAST_ROUTE_ON));
	/* (an empty write never reaches the module: a newline) */
	ASSERT_EQ(0, write_file_str(PARAM "debug_ipmodify", "\n"));
	EXPECT_EQ(0, mlf_set_route_param("all"));
	EXPECT_EQ(6, child_routed_calls(MLOCKFAST_ROUTE_ON));
}

/*
 * Threads lock and unlock their own pages in a loop, each call checked
 * against what the syscall gives (0, and the page's Locked state in
 * smaps through VmLck), while @flip switches route or reloads the module.
 */
#define LOOPERS	4

struct looper {
	atomic_int *stop;
	long calls, bad;
};

static void *loop_calls(void *arg)
{
	struct looper *l = arg;
	char *p = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		l->bad++;
		return NULL;
	}
	memset(p, 1, 4 * PG);
	while (!atomic_load(l->stop)) {
		unsigned char vec[4];

		l->bad += mlock(p, 4 * PG) != 0;
		l->bad += mincore(p, 4 * PG, vec) || !(vec[0] & vec[3] & 1);
		l->bad += munlock(p, 4 * PG) != 0;
		l->bad += syscall(SYS_mlock2, p, 2 * PG, MLOCK_ONFAULT) != 0;
		l->bad += munlock(p, 2 * PG) != 0;
		l->calls += 4;
	}
	munmap(p, 4 * PG);
	return NULL;
}

/* A child of LOOPERS threads until *stop; exit 0 if every call was right. */
static pid_t start_loopers(atomic_int *stop)
{
	pid_t pid = fork();

	if (!pid) {
		struct looper l[LOOPERS] = { 0 };
		pthread_t t[LOOPERS];
		long bad = 0, calls = 0;

		if (mlf_route(MLOCKFAST_ROUTE_ON, NULL))
			_exit(90);
		mlf_fd_close();
		for (int i = 0; i < LOOPERS; i++) {
			l[i].stop = stop;
			if (pthread_create(&t[i], NULL, loop_calls, &l[i]))
				_exit(91);
		}
		for (int i = 0; i < LOOPERS; i++) {
			pthread_join(t[i], NULL);
			bad += l[i].bad;
			calls += l[i].calls;
		}
		/* Everything unlocked: VmLck back to nothing. */
		_exit(bad ? 92 : !calls ? 93 : status_kb("VmLck") ? 94 : 0);
	}
	return pid;
}

static atomic_int *shared_flag(void)
{
	atomic_int *f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (f == MAP_FAILED)
		return NULL;
	atomic_store(f, 0);
	return f;
}

/*
 * The loopers run while route is switched six times (@reload false), or
 * while the module is unloaded and loaded again with route=all (true);
 * then their verdict, and Mlocked back where it was.
 */
static void calls_in_flight(struct __test_metadata *_metadata, bool reload)
{
	atomic_int *stop = shared_flag();
	long ml0 = meminfo_kb("Mlocked");
	int st;
	pid_t pid;

	ASSERT_NE(NULL, stop);
	pid = start_loopers(stop);
	ASSERT_LT(0, pid);
	if (reload) {
		usleep(200 * 1000);
		mlf_fd_close();
		EXPECT_EQ(0, run("rmmod mlockfast"));
		usleep(200 * 1000);
		EXPECT_EQ(0, run("modprobe mlockfast route=all"));
		usleep(200 * 1000);
	}
	for (int i = 0; !reload && i < 6; i++) {
		EXPECT_EQ(0, mlf_set_route_param(i % 3 == 0 ? "all" :
						  i % 3 == 1 ? "group" : "off"));
		usleep(100 * 1000);
	}
	atomic_store(stop, 1);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st)) TH_LOG("status %#x", st);
	mlf_drain();
	EXPECT_EQ(ml0, meminfo_kb("Mlocked"));
}

TEST_F(route, switching_route_while_calls_are_in_flight)
{
	calls_in_flight(_metadata, false);
}

/* Last: it reloads the module, with route=all, under the same load. */
TEST_F(route, unloading_while_calls_are_in_flight)
{
	ASSERT_EQ(0, mlf_set_route_param("all"));
	calls_in_flight(_metadata, true);
	/* Loaded again, and routing: the loopers' calls were counted. */
	ASSERT_LE(0, mlf_fd());
	EXPECT_LT(0, routed_calls());
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--query"))
		return query_status();
	return test_harness_run(argc, argv);
}
