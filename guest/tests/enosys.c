/* enosys: calls a number no kernel has (999) and a real call the engine does
 * not implement (io_uring_setup). Both must fail with ENOSYS, and the
 * program goes on. Exits 0 when both did, 1 otherwise. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif

static int expect_enosys(const char *what, long r)
{
    int e = errno;
    printf("%s = %ld (%s)\n", what, r, r == -1 ? strerrorname_np(e) : "no error");
    return r == -1 && e == ENOSYS;
}

int main(void)
{
    int ok = expect_enosys("syscall(999)", syscall(999, 1, 2, 3));
    ok &= expect_enosys("io_uring_setup", syscall(SYS_io_uring_setup, 8, NULL));
    printf("still running\n");
    return ok ? 0 : 1;
}
