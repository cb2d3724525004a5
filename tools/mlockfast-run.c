// SPDX-License-Identifier: GPL-2.0
/*
 * mlockfast-run: run a command with its plain mlock-family system calls
 * routed to the module (or, with -n, never routed), as nice(1) runs one
 * with another priority.  The choice is the process's and is kept across
 * exec and fork, so it is made here and the command exec'd in its place;
 * the device is closed first (the command needs no descriptor: the kernel
 * routes its calls).  Exit status as env(1)'s: 125 ours, 126 and 127 the
 * command's exec.
 *
 *   mlockfast-run [-n|--never] [-q|--quiet] [--] CMD [ARGS...]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <linux/mlockfast.h>

#define EXIT_OURS	125
#define EXIT_CANNOT_RUN	126
#define EXIT_NOT_FOUND	127

static void usage(FILE *f)
{
	fprintf(f,
		"usage: mlockfast-run [-n|--never] [-q|--quiet] [--] CMD [ARGS...]\n"
		"Run CMD with its mlock(2), mlock2(2), munlock(2), mlockall(2) and\n"
		"munlockall(2) calls routed to the mlockfast module (kept by its\n"
		"children, across fork and exec).\n"
		"  -n, --never  never route them, whatever the route parameter says\n"
		"  -q, --quiet  no warning when routing is off (route=off)\n"
		"  -h, --help   this text\n"
		"Exit status: CMD's; 125 if mlockfast-run failed, 126 if CMD cannot\n"
		"be run, 127 if it is not found.\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "never", no_argument, NULL, 'n' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct mlockfast_route r = { .size = sizeof(r), .choice = MLOCKFAST_ROUTE_ON };
	bool quiet = false;
	int opt, fd, err;

	/* '+': the options end at CMD, whose own are its. */
	while ((opt = getopt_long(argc, argv, "+nqh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'n':
			r.choice = MLOCKFAST_ROUTE_NEVER;
			break;
		case 'q':
			quiet = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_OURS;
		}
	}
	if (optind == argc) {
		fprintf(stderr, "mlockfast-run: no command\n");
		usage(stderr);
		return EXIT_OURS;
	}

	fd = open(MLOCKFAST_DEVICE, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		fprintf(stderr, "mlockfast-run: %s: %s", MLOCKFAST_DEVICE, strerror(err));
		if (err == ENOENT || err == ENXIO || err == ENODEV)
			fprintf(stderr, ": the module is not loaded (modprobe mlockfast)\n");
		else if (err == EACCES || err == EPERM)
			fprintf(stderr, ": it is for root and the mlockfast group\n");
		else
			fprintf(stderr, "\n");
		return EXIT_OURS;
	}
	if (ioctl(fd, MLOCKFAST_IOC_ROUTE, &r)) {
		err = errno;
		if (err == ENOTTY)
			fprintf(stderr, "mlockfast-run: this mlockfast module has no syscall routing"
				" (MLOCKFAST_IOC_ROUTE: ENOTTY): a newer module is needed\n");
		else
			fprintf(stderr, "mlockfast-run: MLOCKFAST_IOC_ROUTE: %s\n", strerror(err));
		return EXIT_OURS;
	}
	close(fd);
	/* -n wants no routing and gets none: only ON can be in vain. */
	if (r.choice == MLOCKFAST_ROUTE_ON && !r.routed && !quiet) {
		if (r.routing == MLOCKFAST_ROUTING_OFF)
			fprintf(stderr, "mlockfast-run: warning: routing is off (route=off): %s's calls"
				" take the stock path until an administrator sets"
				" /sys/module/mlockfast/parameters/route\n", argv[optind]);
		else
			fprintf(stderr, "mlockfast-run: warning: the module does not route this"
				" process\n");
	}

	execvp(argv[optind], argv + optind);
	err = errno;
	fprintf(stderr, "mlockfast-run: %s: %s\n", argv[optind], strerror(err));
	return err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN;
}
