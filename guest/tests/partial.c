/* partial: asks calls the engine serves in part for what they lack. Each
 * is refused with the errno Linux gives for what it does not support
 * (EINVAL), never ENOSYS, except futex's priority-inheritance operations:
 * ENOSYS, as from a Linux built without CONFIG_FUTEX_PI. fcntl's F_SETOWN
 * and F_GETOWN are accepted. One line each; exits 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x1000
#endif

/* clone_args up to version 2 (88 bytes: set_tid and cgroup). */
struct clone_args2 {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
    uint64_t set_tid, set_tid_size, cgroup;
};

static void report(const char *what, long r)
{
    int e = errno;
    printf("%s = %ld (%s)\n", what, r, r == -1 ? strerrorname_np(e) : "ok");
}

/* A child the engine should not have made ends at once. */
static long clone3_with(struct clone_args2 *a, size_t size)
{
    long r = syscall(SYS_clone3, a, size);
    if (r == 0)
        _exit(0);
    return r;
}

int main(void)
{
    long r = syscall(SYS_clone, CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0);
    if (r == 0)
        _exit(0);
    report("clone(CLONE_NEWNS)", r);
    r = syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, 0, 0, 0);
    if (r == 0)
        _exit(0);
    report("clone(CLONE_FILES)", r);

    struct clone_args2 a;
    pid_t want = 4242;
    memset(&a, 0, sizeof a);
    a.exit_signal = SIGCHLD;
    a.set_tid = (uintptr_t)&want;
    a.set_tid_size = 1;
    report("clone3(set_tid)", clone3_with(&a, sizeof a));
    int pidfd = -1;
    memset(&a, 0, sizeof a);
    a.flags = CLONE_PIDFD;
    a.pidfd = (uintptr_t)&pidfd;
    a.exit_signal = SIGCHLD;
    report("clone3(CLONE_PIDFD)", clone3_with(&a, 64));

    uint32_t word = 0;
    report("futex(FUTEX_LOCK_PI)", syscall(SYS_futex, &word, FUTEX_LOCK_PI, 0, NULL, NULL, 0));

    report("fcntl(F_SETOWN)", fcntl(1, F_SETOWN, getpid()));
    report("fcntl(F_GETOWN)", fcntl(1, F_GETOWN)); /* glibc asks F_GETOWN_EX */
    report("raw fcntl(F_GETOWN)", syscall(SYS_fcntl, 1, F_GETOWN));
    report("fcntl(F_SETSIG)", fcntl(1, F_SETSIG, SIGIO));
    printf("still running\n");
    return 0;
}
