// SPDX-License-Identifier: GPL-2.0
/*
 * mlf-real-libs WHAT [N]: N times (after 10 unmeasured) what Debian's own
 * libraries do with mlock, unmodified, and the time per iteration, p50 and
 * p99, in ns: instructions under --icount.  Run with and without
 * LD_PRELOAD=libmlockfast.so.1 to compare the library with the syscall.
 *   sodium-malloc   libsodium's guarded heap: sodium_malloc(4096), which maps
 *                   guard pages and mlocks, then sodium_free()
 *   sodium-mlock    sodium_mlock() and sodium_munlock() of a 4 KiB buffer
 *   gcrypt-secmem   a forked child sets up libgcrypt's 32 KiB secure memory
 *                   (one mlock, the first of the process) and exits; the
 *                   time is that of the set-up call, in the child
 * libsodium is linked by its soname (Debian ships no -dev symlink without
 * libsodium-dev); its prototypes are declared here, as sodium.h has them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <gcrypt.h>
#include "timing.h"

int sodium_init(void);
void *sodium_malloc(size_t size);
void sodium_free(void *ptr);
int sodium_mlock(void *addr, size_t len);
int sodium_munlock(void *addr, size_t len);



static char buf[4096] __attribute__((aligned(4096)));
static long long *child_ns;	/* shared: what a forked child timed, or -1 */

static int sodium_malloc_once(void)
{
	char *p = sodium_malloc(4096);

	if (!p)
		return -1;
	p[0] = 1;
	sodium_free(p);
	return 0;
}

static int sodium_mlock_once(void)
{
	buf[0]++;
	if (sodium_mlock(buf, sizeof(buf)))
		return -1;
	return sodium_munlock(buf, sizeof(buf));
}

static int gcrypt_secmem_once(void)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		long long t0;

		if (!gcry_check_version(NULL))
			_exit(2);
		t0 = now_ns();
		gcry_control(GCRYCTL_INIT_SECMEM, 32768, 0);
		*child_ns = now_ns() - t0;
		gcry_control(GCRYCTL_INITIALIZATION_FINISHED, 0);
		/* The pool is locked, or libgcrypt said "insecure memory". */
		_exit(gcry_control(GCRYCTL_ANY_INITIALIZATION_P) ? 0 : 3);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -1;
}

int main(int argc, char **argv)
{
	int (*once)(void) = NULL;
	int n = argc > 2 ? atoi(argv[2]) : 200;
	long long *t, t0, p50, p99;

	if (argc > 1 && !strcmp(argv[1], "sodium-malloc"))
		once = sodium_malloc_once;
	else if (argc > 1 && !strcmp(argv[1], "sodium-mlock"))
		once = sodium_mlock_once;
	else if (argc > 1 && !strcmp(argv[1], "gcrypt-secmem"))
		once = gcrypt_secmem_once;
	if (!once || n <= 0) {
		fprintf(stderr, "usage: mlf-real-libs sodium-malloc|sodium-mlock|gcrypt-secmem [N]\n");
		return 2;
	}
	if (sodium_init() < 0)
		return 1;
	t = calloc(n, sizeof(*t));
	child_ns = mmap(NULL, sizeof(*child_ns), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!t || child_ns == MAP_FAILED)
		return 1;
	for (int i = 0; i < 10; i++)
		if (once())
			goto failed;
	for (int i = 0; i < n; i++) {
		*child_ns = -1;
		t0 = now_ns();
		if (once())
			goto failed;
		t[i] = *child_ns >= 0 ? *child_ns : now_ns() - t0;
	}
	pct(t, n, &p50, &p99);
	printf("real-libs %-14s n %d: p50 %lld p99 %lld ns per iteration\n",
	       argv[1], n, p50, p99);
	free(t);
	return 0;
failed:
	fprintf(stderr, "mlf-real-libs: %s failed\n", argv[1]);
	return 1;
}
