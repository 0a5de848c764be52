// signalfd and signalfd4, checked against what Linux does (the test runs
// natively too): flags, reads of struct signalfd_siginfo (non-blocking,
// blocking, several records at once), the thread's queue before the
// process's, real-time signals queued in order, sigqueue's value, SIGCHLD's
// pid and status, a new mask on an existing descriptor, poll and epoll
// readiness, a child reading its own signals through an inherited
// descriptor, a handled signal interrupting a blocked read (EINTR, or a
// restart under SA_RESTART), and the calls' EINVAL and EBADF cases.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static void sleep_ms(int ms) {
    struct timespec t = {0, ms * 1000000L};
    nanosleep(&t, NULL);
}

static pthread_t main_thread;
static int later_sig, later_sig2;

// After a pause, sends later_sig (then later_sig2) to the main thread.
static void *send_later(void *arg) {
    (void)arg;
    sleep_ms(20);
    pthread_kill(main_thread, later_sig);
    if (later_sig2) {
        sleep_ms(20);
        pthread_kill(main_thread, later_sig2);
    }
    return NULL;
}

static pthread_t start_sender(int sig, int sig2) {
    later_sig = sig;
    later_sig2 = sig2;
    pthread_t t;
    pthread_create(&t, NULL, send_later, NULL);
    return t;
}

static volatile int handled;
static void on_usr2(int sig) { handled = sig; }

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    main_thread = pthread_self();
    sigset_t all;
    sigemptyset(&all);
    sigaddset(&all, SIGUSR1);
    sigaddset(&all, SIGUSR2);
    sigaddset(&all, SIGCHLD);
    sigaddset(&all, SIGRTMIN);
    sigprocmask(SIG_BLOCK, &all, NULL);

    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    int fd = signalfd(-1, &usr1, SFD_NONBLOCK | SFD_CLOEXEC);
    CHECK(fd >= 0, "signalfd4 gives a descriptor");
    CHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) && (fcntl(fd, F_GETFL) & O_NONBLOCK),
          "SFD_CLOEXEC and SFD_NONBLOCK are the descriptor's flags");
    char link[64] = {0}, path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    readlink(path, link, sizeof link - 1);
    CHECK(strcmp(link, "anon_inode:[signalfd]") == 0, "/proc/self/fd names it %s", link);

    struct signalfd_siginfo si;
    errno = 0;
    CHECK(read(fd, &si, sizeof si) == -1 && errno == EAGAIN, "nothing pending: EAGAIN");
    struct pollfd p = {fd, POLLIN, 0};
    CHECK(poll(&p, 1, 0) == 0, "nothing pending: poll says not readable");

    kill(getpid(), SIGUSR1);
    p.revents = 0;
    CHECK(poll(&p, 1, 0) == 1 && p.revents == POLLIN, "SIGUSR1 pending: poll says POLLIN");
    memset(&si, 0xff, sizeof si);
    ssize_t n = read(fd, &si, sizeof si);
    CHECK(n == sizeof si && si.ssi_signo == SIGUSR1 && si.ssi_code == SI_USER &&
              si.ssi_pid == (uint32_t)getpid() && si.ssi_uid == getuid() && si.ssi_errno == 0,
          "kill: a record with signo %u code %d, the sender's pid and uid", si.ssi_signo,
          si.ssi_code);
    sigset_t pend;
    sigpending(&pend);
    CHECK(!sigismember(&pend, SIGUSR1), "the read took it off the pending set");
    errno = 0;
    CHECK(read(fd, &si, sizeof si) == -1 && errno == EAGAIN, "then EAGAIN again");

    union sigval v = {.sival_int = 42};
    sigqueue(getpid(), SIGUSR1, v);
    n = read(fd, &si, sizeof si);
    CHECK(n == sizeof si && si.ssi_code == SI_QUEUE && si.ssi_int == 42 && si.ssi_ptr == 42,
          "sigqueue: SI_QUEUE, ssi_int and ssi_ptr carry the value");

    char small[100];
    kill(getpid(), SIGUSR1);
    errno = 0;
    CHECK(read(fd, small, sizeof small) == -1 && errno == EINVAL,
          "a buffer smaller than one record: EINVAL");
    n = read(fd, &si, sizeof si);
    CHECK(n == sizeof si && si.ssi_signo == SIGUSR1, "and the signal is still there");

    // The calling thread's queue first, then the process's.
    sigset_t both = usr1;
    sigaddset(&both, SIGUSR2);
    int fd2 = syscall(SYS_signalfd, fd, &both, 8);
    CHECK(fd2 == fd, "signalfd on an existing descriptor returns it (%d)", fd2);
    kill(getpid(), SIGUSR1);
    syscall(SYS_tgkill, getpid(), gettid(), SIGUSR2);
    struct signalfd_siginfo two[3];
    n = read(fd, two, sizeof two);
    CHECK(n == 2 * sizeof si && two[0].ssi_signo == SIGUSR2 && two[0].ssi_code == SI_TKILL &&
              two[1].ssi_signo == SIGUSR1,
          "one read takes both: the thread's SIGUSR2 (SI_TKILL), then the process's SIGUSR1");

    // A new mask: SIGUSR1 is no longer read, and stays pending.
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    signalfd(fd, &usr2, 0);
    kill(getpid(), SIGUSR1);
    errno = 0;
    CHECK(read(fd, &si, sizeof si) == -1 && errno == EAGAIN,
          "after a new mask without SIGUSR1: EAGAIN");
    sigpending(&pend);
    CHECK(sigismember(&pend, SIGUSR1), "SIGUSR1 still pending");
    struct timespec zero = {0, 0};
    CHECK(sigtimedwait(&usr1, NULL, &zero) == SIGUSR1, "sigtimedwait takes it");

    // Real-time signals queue, in order, with their values.
    sigset_t rt;
    sigemptyset(&rt);
    sigaddset(&rt, SIGRTMIN);
    int rfd = signalfd(-1, &rt, SFD_NONBLOCK);
    for (int i = 1; i <= 3; i++) {
        union sigval rv = {.sival_int = i * 10};
        sigqueue(getpid(), SIGRTMIN, rv);
    }
    struct signalfd_siginfo r[4];
    n = read(rfd, r, sizeof r);
    CHECK(n == 3 * sizeof si && r[0].ssi_int == 10 && r[1].ssi_int == 20 && r[2].ssi_int == 30,
          "three queued SIGRTMIN in one read, in order (%zd bytes)", n);
    close(rfd);

    // SIGCHLD: the child's pid and exit status.
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int cfd = signalfd(-1, &chld, 0);
    pid_t child = fork();
    if (child == 0)
        _exit(7);
    n = read(cfd, &si, sizeof si);
    CHECK(n == sizeof si && si.ssi_signo == SIGCHLD && si.ssi_code == CLD_EXITED &&
              si.ssi_pid == (uint32_t)child && si.ssi_status == 7,
          "SIGCHLD: a blocking read gives CLD_EXITED, the child's pid and status 7");
    waitpid(child, NULL, 0);

    // A forked child reads its own signals through the inherited descriptor.
    int sfd = signalfd(-1, &usr2, SFD_NONBLOCK);
    kill(getpid(), SIGUSR2);
    child = fork();
    if (child == 0) {
        struct signalfd_siginfo c;
        if (read(sfd, &c, sizeof c) != -1 || errno != EAGAIN)
            _exit(1); // the parent's pending signal is not the child's
        kill(getpid(), SIGUSR2);
        if (read(sfd, &c, sizeof c) != sizeof c || c.ssi_pid != (uint32_t)getpid())
            _exit(2);
        _exit(0);
    }
    int st;
    waitpid(child, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "a child reads only its own signals through the inherited descriptor (%d)",
          WEXITSTATUS(st));
    n = read(sfd, &si, sizeof si);
    CHECK(n == sizeof si && si.ssi_signo == SIGUSR2 && si.ssi_pid == (uint32_t)getpid(),
          "and the parent's SIGUSR2 waited for the parent");

    // Blocking read, woken by a signal another thread sends.
    int bfd = signalfd(-1, &usr1, 0);
    pthread_t t = start_sender(SIGUSR1, 0);
    n = read(bfd, &si, sizeof si);
    CHECK(n == sizeof si && si.ssi_signo == SIGUSR1 && si.ssi_code == SI_TKILL,
          "a blocking read waits for a signal another thread sends");
    pthread_join(t, NULL);

    // epoll: readable while a signal of the set is pending.
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 77};
    epoll_ctl(ep, EPOLL_CTL_ADD, bfd, &ev);
    CHECK(epoll_wait(ep, &ev, 1, 0) == 0, "epoll: nothing pending, nothing ready");
    t = start_sender(SIGUSR1, 0);
    memset(&ev, 0, sizeof ev);
    int got = epoll_wait(ep, &ev, 1, 5000);
    CHECK(got == 1 && ev.events == EPOLLIN && ev.data.u32 == 77,
          "epoll_wait wakes when another thread sends SIGUSR1");
    CHECK(epoll_wait(ep, &ev, 1, 0) == 1, "level-triggered: still ready until read");
    read(bfd, &si, sizeof si);
    CHECK(epoll_wait(ep, &ev, 1, 0) == 0, "read: not ready any more");
    pthread_join(t, NULL);
    close(ep);

    // A handled signal the reader does not block ends a blocking read...
    sigset_t u2;
    sigemptyset(&u2);
    sigaddset(&u2, SIGUSR2);
    struct sigaction sa = {0};
    sa.sa_handler = on_usr2;
    sigaction(SIGUSR2, &sa, NULL);
    sigprocmask(SIG_UNBLOCK, &u2, NULL);
    t = start_sender(SIGUSR2, 0);
    errno = 0;
    n = read(bfd, &si, sizeof si);
    CHECK(n == -1 && errno == EINTR && handled == SIGUSR2,
          "a handler without SA_RESTART ends a blocked read with EINTR");
    pthread_join(t, NULL);
    // ...and under SA_RESTART the read goes on, to the next SIGUSR1.
    handled = 0;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR2, &sa, NULL);
    t = start_sender(SIGUSR2, SIGUSR1);
    n = read(bfd, &si, sizeof si);
    CHECK(n == sizeof si && si.ssi_signo == SIGUSR1 && handled == SIGUSR2,
          "under SA_RESTART the read restarts after the handler and reads SIGUSR1");
    pthread_join(t, NULL);

    // Bad arguments.
    errno = 0;
    CHECK(syscall(SYS_signalfd4, -1, &usr1, 4, 0) == -1 && errno == EINVAL,
          "a sigset size other than 8: EINVAL");
    errno = 0;
    CHECK(signalfd(-1, &usr1, 0x1) == -1 && errno == EINVAL, "unknown flags: EINVAL");
    int pfd[2];
    pipe(pfd);
    errno = 0;
    CHECK(signalfd(pfd[0], &usr1, 0) == -1 && errno == EINVAL,
          "a descriptor that is not a signalfd: EINVAL");
    errno = 0;
    CHECK(signalfd(1000, &usr1, 0) == -1 && errno == EBADF, "a closed descriptor: EBADF");
    errno = 0;
    CHECK(signalfd(-1, (sigset_t *)8, 0) == -1 && errno == EFAULT, "a bad mask pointer: EFAULT");
    errno = 0;
    CHECK(write(fd, &si, sizeof si) == -1 && errno == EINVAL, "a write: EINVAL");
    kill(getpid(), SIGUSR2);
    sigprocmask(SIG_BLOCK, &u2, NULL);
    signalfd(fd, &usr2, 0);
    raise(SIGUSR2);
    errno = 0;
    void *volatile bad = (void *)8;
    CHECK(read(fd, bad, sizeof si) == -1 && errno == EFAULT,
          "a read into a bad buffer: EFAULT");
    errno = 0;
    CHECK(read(fd, &si, sizeof si) == -1 && errno == EAGAIN,
          "the record that could not be copied is gone, as on Linux");

    if (failures == 0)
        printf("all passed\n");
    return failures != 0;
}
