/* enosys: calls a number no kernel has (999) and a real call the engine does
 * not implement (io_uring_setup). Both must fail with ENOSYS, and the
 * program goes on. Exits 0 when both did, 1 otherwise. Given call numbers
 * as arguments, it makes each of those instead (all arguments zero) and
 * exits 0 when every one failed with ENOSYS. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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

int main(int argc, char **argv)
{
    if (argc > 1) {
        int all = 1;
        for (int i = 1; i < argc; i++) {
            long nr = strtol(argv[i], NULL, 10);
            char what[32];
            snprintf(what, sizeof what, "call %ld", nr);
            all &= expect_enosys(what, syscall(nr, 0, 0, 0, 0, 0, 0));
        }
        return all ? 0 : 1;
    }
    int ok = expect_enosys("syscall(999)", syscall(999, 1, 2, 3));
    ok &= expect_enosys("io_uring_setup", syscall(SYS_io_uring_setup, 8, NULL));
    printf("still running\n");
    return ok ? 0 : 1;
}
