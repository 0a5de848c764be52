// Event descriptors, checked inside the guest: eventfd (counter and
// semaphore), timerfd on the virtual clock (one-shot, periodic, absolute),
// epoll over pipes, sockets, eventfds and timerfds (level and edge
// triggered, EPOLLONESHOT), and select. Prints `ok: ...` lines, then
// `all passed` (or FAIL lines).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int efd;

static void *poster(void *arg) {
    (void)arg;
    struct timespec d = {0, 20 * 1000 * 1000};
    nanosleep(&d, 0);
    uint64_t one = 1;
    write(efd, &one, 8);
    return 0;
}

int main(void) {
    uint64_t v;
    pthread_t t;

    // eventfd: a counter.
    efd = eventfd(3, EFD_CLOEXEC);
    CHECK(efd >= 0, "eventfd(3)");
    v = 4;
    write(efd, &v, 8);
    CHECK(read(efd, &v, 8) == 8 && v == 7, "a read takes the whole count (7)");
    errno = 0;
    fcntl(efd, F_SETFL, O_NONBLOCK);
    CHECK(read(efd, &v, 8) == -1 && errno == EAGAIN, "then it is empty: EAGAIN");
    fcntl(efd, F_SETFL, 0);
    errno = 0;
    CHECK(read(efd, &v, 4) == -1 && errno == EINVAL, "a read of fewer than 8 bytes: EINVAL");
    pthread_create(&t, 0, poster, 0);
    double t0 = now();
    CHECK(read(efd, &v, 8) == 8 && v == 1 && now() - t0 >= 0.02, "a blocking read waits for another thread's write");
    pthread_join(t, 0);
    close(efd);
    int sem = eventfd(2, EFD_SEMAPHORE | EFD_NONBLOCK);
    CHECK(read(sem, &v, 8) == 8 && v == 1 && read(sem, &v, 8) == 8 && v == 1 && read(sem, &v, 8) == -1, "EFD_SEMAPHORE counts down by one");
    close(sem);

    // timerfd on the virtual clock.
    int tfd = timerfd_create(CLOCK_MONOTONIC, 0);
    struct itimerspec its = {.it_value = {0, 50 * 1000 * 1000}};
    // Checked after the wait: a CHECK's output is a step of virtual time.
    int armed = timerfd_settime(tfd, 0, &its, 0);
    struct itimerspec cur;
    timerfd_gettime(tfd, &cur);
    t0 = now();
    ssize_t expired = read(tfd, &v, 8);
    double took = now() - t0;
    CHECK(armed == 0, "timerfd armed for 50 ms");
    CHECK(cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec > 40000000 && cur.it_value.tv_nsec <= 50000000, "timerfd_gettime: %ld ns left", cur.it_value.tv_nsec);
    CHECK(expired == 8 && v == 1, "a read waits for the expiry: 1");
    CHECK(took >= 0.05 && took < 0.051, "after 50 ms of virtual time (%.6f)", took);
    its.it_interval.tv_nsec = 10 * 1000 * 1000;
    its.it_value.tv_nsec = 10 * 1000 * 1000;
    timerfd_settime(tfd, 0, &its, 0);
    struct timespec d = {0, 35 * 1000 * 1000};
    nanosleep(&d, 0);
    CHECK(read(tfd, &v, 8) == 8 && v == 3, "a 10 ms periodic timer expired 3 times in 35 ms (%lu)", (unsigned long)v);
    struct timespec abs;
    clock_gettime(CLOCK_REALTIME, &abs);
    abs.tv_sec += 2;
    int rt = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK);
    struct itimerspec at = {.it_value = abs};
    timerfd_settime(rt, TFD_TIMER_ABSTIME, &at, 0);
    errno = 0;
    CHECK(read(rt, &v, 8) == -1 && errno == EAGAIN, "an absolute realtime timer not yet due: EAGAIN");
    struct pollfd p = {rt, POLLIN, 0};
    t0 = now();
    CHECK(poll(&p, 1, -1) == 1 && now() - t0 > 1.9, "poll waits for it (%.3f s, no wall time)", now() - t0);
    close(rt);

    // epoll over a pipe, a socket pair, an eventfd and the timerfd.
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int pp[2], sv[2];
    pipe(pp);
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    efd = eventfd(0, 0);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 1};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, pp[0], &ev) == 0, "EPOLL_CTL_ADD a pipe");
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u64 = 2;
    epoll_ctl(ep, EPOLL_CTL_ADD, sv[1], &ev);
    ev.events = EPOLLIN | EPOLLONESHOT;
    ev.data.u64 = 3;
    epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev);
    errno = 0;
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, pp[0], &ev) == -1 && errno == EEXIST, "adding it again: EEXIST");
    errno = 0;
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, 0, &ev) == -1 && errno == EPERM, "stdin (a plain pipe of the console): EPERM");
    struct epoll_event out[8];
    CHECK(epoll_wait(ep, out, 8, 0) == 0, "nothing ready");
    write(pp[1], "x", 1);
    write(sv[0], "y", 1);
    v = 1;
    write(efd, &v, 8);
    int n = epoll_wait(ep, out, 8, -1);
    uint64_t seen = 0;
    for (int i = 0; i < n; i++)
        seen |= 1 << out[i].data.u64;
    CHECK(n == 3 && seen == 0xe, "three ready: the pipe, the socket and the eventfd (%d)", n);
    n = epoll_wait(ep, out, 8, 0);
    CHECK(n == 1 && out[0].data.u64 == 1, "again: only the level-triggered pipe (edge and one-shot are quiet)");
    write(sv[0], "z", 1);
    n = epoll_wait(ep, out, 8, 0);
    seen = 0;
    for (int i = 0; i < n; i++)
        seen |= 1 << out[i].data.u64;
    CHECK(seen == 0x6, "new bytes on the edge-triggered socket report it again");
    ev.events = EPOLLIN | EPOLLONESHOT;
    ev.data.u64 = 3;
    CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, efd, &ev) == 0, "EPOLL_CTL_MOD re-arms the one-shot");
    n = epoll_wait(ep, out, 8, 0);
    seen = 0;
    for (int i = 0; i < n; i++)
        seen |= 1 << out[i].data.u64;
    CHECK(seen & 0x8, "and it reports once more");
    char c;
    read(pp[0], &c, 1);
    epoll_ctl(ep, EPOLL_CTL_DEL, efd, 0);
    epoll_ctl(ep, EPOLL_CTL_DEL, sv[1], 0);
    read(efd, &v, 8);
    pthread_create(&t, 0, poster, 0);
    ev.events = EPOLLIN;
    ev.data.u64 = 9;
    epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev);
    t0 = now();
    n = epoll_wait(ep, out, 8, 1000);
    CHECK(n == 1 && out[0].data.u64 == 9 && now() - t0 >= 0.02, "epoll_wait blocks until another thread's eventfd write");
    pthread_join(t, 0);
    read(efd, &v, 8);
    t0 = now();
    CHECK(epoll_wait(ep, out, 8, 15) == 0 && now() - t0 >= 0.015, "epoll_wait times out in virtual time");
    close(pp[1]);
    n = epoll_wait(ep, out, 8, 0);
    CHECK(n == 1 && (out[0].events & EPOLLHUP), "the pipe's writer closed: EPOLLHUP");
    close(pp[0]);
    CHECK(epoll_wait(ep, out, 8, 0) == 0, "closing the read end removed it from the set");

    // select over the socket pair.
    fd_set rd, wr;
    FD_ZERO(&rd);
    FD_ZERO(&wr);
    FD_SET(sv[1], &rd);
    FD_SET(sv[0], &wr);
    struct timeval tv = {1, 0};
    n = select(sv[1] + 1, &rd, &wr, 0, &tv);
    CHECK(n == 2 && FD_ISSET(sv[1], &rd) && FD_ISSET(sv[0], &wr), "select: readable and writable (%d)", n);
    char buf[8];
    read(sv[1], buf, sizeof buf);
    FD_ZERO(&rd);
    FD_SET(sv[1], &rd);
    tv.tv_sec = 0;
    tv.tv_usec = 20000;
    t0 = now();
    CHECK(select(sv[1] + 1, &rd, 0, 0, &tv) == 0 && !FD_ISSET(sv[1], &rd) && now() - t0 >= 0.02, "select times out with the set cleared");
    FD_ZERO(&rd);
    FD_SET(77, &rd);
    errno = 0;
    CHECK(select(78, &rd, 0, 0, &tv) == -1 && errno == EBADF, "select of a closed descriptor: EBADF");

    if (failures == 0)
        printf("all passed\n");
    return failures != 0;
}
