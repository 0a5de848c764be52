// Pipes between threads, checked inside the guest: empty and full pipes
// block until the other side moves, O_NONBLOCK says EAGAIN, end of file when
// the last writer closes, EPIPE and SIGPIPE when the last reader has, writes
// up to PIPE_BUF are atomic, F_GETPIPE_SZ/F_SETPIPE_SZ, dup/dup2/dup3/fcntl
// and close_range on pipe ends, and poll over pipes with a timeout in
// virtual time. Prints `ok: ...` lines, then `all passed` (or FAIL lines).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int fds[2];

static void *late_writer(void *arg) {
    (void)arg;
    struct timespec d = {0, 50 * 1000 * 1000};
    nanosleep(&d, 0);
    write(fds[1], "hello", 5);
    return 0;
}

static void *drainer(void *arg) {
    long total = 0;
    char buf[4096];
    for (;;) {
        ssize_t n = read(fds[0], buf, sizeof buf);
        if (n <= 0)
            break;
        total += n;
    }
    *(long *)arg = total;
    return 0;
}

static void *closer(void *arg) {
    (void)arg;
    struct timespec d = {0, 10 * 1000 * 1000};
    nanosleep(&d, 0);
    close(fds[1]);
    return 0;
}

static volatile sig_atomic_t sigpipes;
static void on_sigpipe(int s) {
    (void)s;
    sigpipes++;
}

static void *atomic_writer(void *arg) {
    char c = *(char *)arg;
    char buf[PIPE_BUF];
    memset(buf, c, sizeof buf);
    for (int i = 0; i < 8; i++)
        write(fds[1], buf, sizeof buf);
    return 0;
}

int main(void) {
    pthread_t t;
    char buf[128];

    // An empty pipe: the reader blocks until the writer writes.
    CHECK(pipe(fds) == 0, "pipe gives %d and %d", fds[0], fds[1]);
    double t0 = now();
    pthread_create(&t, 0, late_writer, 0);
    ssize_t n = read(fds[0], buf, sizeof buf);
    double waited = now() - t0;
    pthread_join(t, 0);
    CHECK(n == 5 && memcmp(buf, "hello", 5) == 0, "a read of an empty pipe waits for the writer (%zd bytes)", n);
    CHECK(waited >= 0.05, "it waited for the writer's sleep (virtual time)");

    // O_NONBLOCK: EAGAIN on an empty pipe.
    int fl = fcntl(fds[0], F_GETFL);
    CHECK(fcntl(fds[0], F_SETFL, fl | O_NONBLOCK) == 0 && (fcntl(fds[0], F_GETFL) & O_NONBLOCK), "F_SETFL sets O_NONBLOCK");
    errno = 0;
    CHECK(read(fds[0], buf, sizeof buf) == -1 && errno == EAGAIN, "a non-blocking read of an empty pipe is EAGAIN");
    fcntl(fds[0], F_SETFL, fl);

    // Capacity: 64 KiB, then a non-blocking write is EAGAIN; a blocking one waits for the reader.
    CHECK(fcntl(fds[1], F_GETPIPE_SZ) == 65536, "F_GETPIPE_SZ is 65536");
    fcntl(fds[1], F_SETFL, O_NONBLOCK);
    char *big = malloc(1 << 20);
    memset(big, 'x', 1 << 20);
    ssize_t filled = write(fds[1], big, 1 << 20);
    CHECK(filled == 65536, "a non-blocking write fills the pipe and stops at 65536 (%zd)", filled);
    errno = 0;
    CHECK(write(fds[1], big, 1) == -1 && errno == EAGAIN, "a full pipe's non-blocking write is EAGAIN");
    int avail = 0;
    ioctl(fds[0], FIONREAD, &avail);
    CHECK(avail == 65536, "FIONREAD says 65536 bytes wait");
    struct pollfd pw = {fds[1], POLLOUT, 0};
    CHECK(poll(&pw, 1, 0) == 0, "poll: a full pipe is not writable");
    fcntl(fds[1], F_SETFL, 0);
    long drained = 0;
    pthread_create(&t, 0, drainer, &drained);
    ssize_t w = write(fds[1], big, 1 << 20);
    CHECK(w == 1 << 20, "a blocking 1 MiB write into a full pipe completes as the reader drains (%zd)", w);
    close(fds[1]);
    pthread_join(t, 0);
    CHECK(drained == 65536 + (1 << 20), "the reader got every byte, then end of file (%ld)", drained);
    close(fds[0]);

    // End of file when the last writer closes, while the reader waits.
    pipe(fds);
    int dupw = dup(fds[1]);
    pthread_create(&t, 0, closer, 0);
    close(dupw);
    t0 = now();
    n = read(fds[0], buf, sizeof buf);
    pthread_join(t, 0);
    CHECK(n == 0 && now() - t0 >= 0.01, "a waiting reader gets end of file when the last writer (of two references) closes");
    struct pollfd ph = {fds[0], POLLIN, 0};
    CHECK(poll(&ph, 1, 0) == 1 && (ph.revents & POLLHUP), "poll: POLLHUP with no writer");
    close(fds[0]);

    // EPIPE and SIGPIPE when the reader is gone.
    pipe(fds);
    close(fds[0]);
    signal(SIGPIPE, on_sigpipe);
    errno = 0;
    CHECK(write(fds[1], "x", 1) == -1 && errno == EPIPE && sigpipes == 1, "a write with no reader is EPIPE and raises SIGPIPE (%d)", (int)sigpipes);
    signal(SIGPIPE, SIG_IGN);
    errno = 0;
    CHECK(write(fds[1], "x", 1) == -1 && errno == EPIPE && sigpipes == 1, "SIGPIPE ignored: EPIPE only");
    close(fds[1]);

    // Writes of PIPE_BUF bytes from two threads never interleave.
    pipe(fds);
    pthread_t a, b;
    char ca = 'a', cb = 'b';
    pthread_create(&a, 0, atomic_writer, &ca);
    pthread_create(&b, 0, atomic_writer, &cb);
    int whole = 1;
    for (int i = 0; i < 16; i++) {
        char chunk[PIPE_BUF];
        size_t got = 0;
        while (got < sizeof chunk) {
            ssize_t r = read(fds[0], chunk + got, sizeof chunk - got);
            if (r <= 0)
                break;
            got += r;
        }
        for (size_t j = 1; j < got; j++)
            if (chunk[j] != chunk[0])
                whole = 0;
    }
    pthread_join(a, 0);
    pthread_join(b, 0);
    CHECK(whole, "16 writes of PIPE_BUF bytes from two threads arrive whole");
    close(fds[0]);
    close(fds[1]);

    // pipe2 flags, dup2/dup3/fcntl on pipe ends.
    CHECK(pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0, "pipe2(O_CLOEXEC|O_NONBLOCK)");
    CHECK(fcntl(fds[0], F_GETFD) == FD_CLOEXEC && (fcntl(fds[1], F_GETFL) & O_NONBLOCK), "both ends are close-on-exec and non-blocking");
    CHECK((fcntl(fds[0], F_GETFL) & O_ACCMODE) == O_RDONLY && (fcntl(fds[1], F_GETFL) & O_ACCMODE) == O_WRONLY, "the read end is O_RDONLY, the write end O_WRONLY");
    CHECK(dup2(fds[1], 50) == 50 && fcntl(50, F_GETFD) == 0, "dup2 to 50, without close-on-exec");
    CHECK(dup3(fds[1], 51, O_CLOEXEC) == 51 && fcntl(51, F_GETFD) == FD_CLOEXEC, "dup3 with O_CLOEXEC");
    errno = 0;
    CHECK(dup3(51, 51, 0) == -1 && errno == EINVAL, "dup3 to itself is EINVAL");
    CHECK(fcntl(fds[0], F_DUPFD, 60) == 60 && fcntl(fds[0], F_DUPFD_CLOEXEC, 60) == 61 && fcntl(61, F_GETFD) == FD_CLOEXEC, "F_DUPFD and F_DUPFD_CLOEXEC take the lowest free at or above 60");
    CHECK(fcntl(60, F_SETFD, FD_CLOEXEC) == 0 && fcntl(60, F_GETFD) == FD_CLOEXEC, "F_SETFD");
    write(50, "via50", 5);
    n = read(61, buf, sizeof buf);
    CHECK(n == 5 && memcmp(buf, "via50", 5) == 0, "a duplicate shares the pipe");
    CHECK(fcntl(fds[1], F_SETPIPE_SZ, 100000) == 131072 && fcntl(50, F_GETPIPE_SZ) == 131072, "F_SETPIPE_SZ rounds up to a power of two pages");
    CHECK(close_range(50, 61, 0) == 0 && fcntl(50, F_GETFD) == -1 && fcntl(61, F_GETFD) == -1, "close_range closes 50 to 61");
    close(fds[1]);
    struct pollfd pr = {fds[0], POLLIN, 0};
    CHECK(poll(&pr, 1, 0) == 1 && pr.revents == POLLHUP, "closing every write end (and its duplicates) hangs up the read end");
    close(fds[0]);

    // poll with a timeout: nothing ready, then woken by a writer.
    pipe(fds);
    struct pollfd pp = {fds[0], POLLIN, 0};
    t0 = now();
    int r = poll(&pp, 1, 30);
    double took = now() - t0;
    CHECK(r == 0 && took >= 0.03 && took < 0.031, "poll with nothing ready times out after 30 ms of virtual time (%.6f)", took);
    pthread_create(&t, 0, late_writer, 0);
    r = poll(&pp, 1, -1);
    pthread_join(t, 0);
    CHECK(r == 1 && pp.revents == POLLIN, "poll wakes when another thread writes");
    close(fds[0]);
    close(fds[1]);

    if (failures == 0)
        printf("all passed\n");
    return failures != 0;
}
