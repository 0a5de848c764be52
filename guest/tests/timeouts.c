// Calls' timeouts, checked against what Linux does (the test runs natively
// too, with the same lines): SO_SNDTIMEO ends a send, a splice, a sendfile
// or a connect that waits (EAGAIN, the bytes a send moved, EINPROGRESS for
// TCP's connect), SO_RCVTIMEO an accept; select, pselect6 and ppoll write
// the time left back into their timeout however they return, and select
// carries microseconds past a second; a futex wait with a timeout that a
// stop interrupts ends at its first deadline. Times are compared loosely
// (native timing is noisy; inside Rewind they are virtual). Prints
// `ok: ...` lines, then `all passed`.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

// A socket's timeout.
#define TIMEO_MS 100
// Longer than any timed-out wait may take natively, even on a loaded host.
#define SLOW_MS 2000

static char big[4 << 20];
static char dir[] = "/tmp/timeoutsXXXXXX";

static long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void nap(int ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) == -1 && errno == EINTR) {
    }
}

static long res(long r) { return r < 0 ? -errno : r; }

static const char *outcome(long r) {
    static char b[32];
    if (r < 0)
        return strerrorname_np(-r);
    snprintf(b, sizeof b, "%ld", r);
    return b;
}

// Sets `r` to `call`'s result and `ms` to how long it took.
#define TIMED(r, ms, call)             \
    do {                               \
        long t0_ = now_ms();           \
        r = (call);                    \
        ms = now_ms() - t0_;           \
    } while (0)

// The wait ended by its timeout: at least it, and not much more.
static int after_timeout(long ms) { return ms >= TIMEO_MS - 5 && ms < SLOW_MS; }

static void set_timeo(int fd, int name, int ms) {
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, name, &tv, sizeof tv);
}

// Sends `len`-byte messages on `fd` until it would block.
static void fill(int fd, size_t len) {
    while (send(fd, big, len, MSG_DONTWAIT) > 0) {
    }
}

// A socketpair of `type` whose first end is full, with SO_SNDTIMEO of `ms`.
static void full_pair(int type, int sv[2], int ms) {
    socketpair(AF_UNIX, type, 0, sv);
    fill(sv[0], type == SOCK_STREAM ? 65536 : 1024);
    set_timeo(sv[0], SO_SNDTIMEO, ms);
}

static volatile sig_atomic_t hits;
static void on_usr1(int sig) {
    (void)sig;
    hits++;
}

// SIGUSR1 is handled, with SA_RESTART.
static void handle_usr1(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
}

// Sends SIGUSR1 to `arg` (a thread) after `SIGNAL_MS`.
#define SIGNAL_MS 100
static void *signal_later(void *arg) {
    nap(SIGNAL_MS);
    pthread_kill(*(pthread_t *)arg, SIGUSR1);
    return NULL;
}

// Writes a byte to the pipe `arg` after `SIGNAL_MS`.
static void *write_later(void *arg) {
    nap(SIGNAL_MS);
    write(*(int *)arg, "x", 1);
    return NULL;
}

// ---- SO_SNDTIMEO ------------------------------------------------------------

static struct iovec iov = {big, 1024};

static long by_write(int fd, size_t len) { return res(write(fd, big, len)); }
static long by_send(int fd, size_t len) { return res(send(fd, big, len, 0)); }
static long by_sendto(int fd, size_t len) { return res(sendto(fd, big, len, 0, NULL, 0)); }
static long by_sendmsg(int fd, size_t len) {
    iov.iov_len = len;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    return res(sendmsg(fd, &m, 0));
}

static const struct {
    const char *name;
    long (*call)(int, size_t);
} sends[] = {
    {"write", by_write},
    {"send", by_send},
    {"sendto", by_sendto},
    {"sendmsg", by_sendmsg},
};

static void unix_sends(void) {
    for (size_t i = 0; i < sizeof sends / sizeof sends[0]; i++) {
        int types[] = {SOCK_STREAM, SOCK_DGRAM};
        for (int t = 0; t < 2; t++) {
            int sv[2];
            full_pair(types[t], sv, TIMEO_MS);
            long r, ms;
            TIMED(r, ms, sends[i].call(sv[0], 1024));
            CHECK(r == -EAGAIN && after_timeout(ms),
                  "%s to a full AF_UNIX %s socket with SO_SNDTIMEO: %s after its timeout",
                  sends[i].name, t == 0 ? "stream" : "datagram", outcome(r));
            close(sv[0]);
            close(sv[1]);
        }
    }

    // What fits goes, then the timeout ends the write with its count.
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    set_timeo(sv[0], SO_SNDTIMEO, TIMEO_MS);
    long r, ms;
    TIMED(r, ms, by_write(sv[0], sizeof big));
    CHECK(r > 0 && r < (long)sizeof big && after_timeout(ms),
          "a write of 4 MiB to an AF_UNIX stream socket with SO_SNDTIMEO: the bytes that fit "
          "once its timeout passes");
    close(sv[0]);
    close(sv[1]);

    // splice from a pipe into a full socket.
    int p[2];
    pipe(p);
    write(p[1], big, 1024);
    full_pair(SOCK_STREAM, sv, TIMEO_MS);
    TIMED(r, ms, res(splice(p[0], NULL, sv[0], NULL, 1024, 0)));
    CHECK(r == -EAGAIN && after_timeout(ms),
          "splice from a pipe into a full AF_UNIX stream socket with SO_SNDTIMEO: %s after its "
          "timeout",
          outcome(r));
    close(p[0]);
    close(p[1]);
    close(sv[0]);
    close(sv[1]);

    // sendfile from a file into a full socket.
    char path[64];
    snprintf(path, sizeof path, "%s/file", dir);
    int f = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    write(f, big, 1024);
    lseek(f, 0, SEEK_SET);
    full_pair(SOCK_STREAM, sv, TIMEO_MS);
    TIMED(r, ms, res(sendfile(sv[0], f, NULL, 1024)));
    CHECK(r == -EAGAIN && after_timeout(ms) && lseek(f, 0, SEEK_CUR) == 0,
          "sendfile from a file into a full AF_UNIX stream socket with SO_SNDTIMEO: %s after "
          "its timeout, the offset where it was",
          outcome(r));
    close(f);
    unlink(path);
    close(sv[0]);
    close(sv[1]);

    // A datagram to a bound socket whose queue is full.
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s/dgram", dir);
    int rx = socket(AF_UNIX, SOCK_DGRAM, 0);
    bind(rx, (struct sockaddr *)&a, sizeof a);
    int tx = socket(AF_UNIX, SOCK_DGRAM, 0);
    while (sendto(tx, big, 1024, MSG_DONTWAIT, (struct sockaddr *)&a, sizeof a) > 0) {
    }
    set_timeo(tx, SO_SNDTIMEO, TIMEO_MS);
    TIMED(r, ms, res(sendto(tx, big, 1024, 0, (struct sockaddr *)&a, sizeof a)));
    CHECK(r == -EAGAIN && after_timeout(ms),
          "sendto a bound AF_UNIX datagram socket whose queue is full, with SO_SNDTIMEO: %s "
          "after its timeout",
          outcome(r));
    close(tx);
    close(rx);
    unlink(a.sun_path);

    // A signal ends the wait with EINTR, even under SA_RESTART (sock_intr_errno).
    handle_usr1();
    full_pair(SOCK_STREAM, sv, 10 * SLOW_MS);
    pthread_t self = pthread_self(), t;
    hits = 0;
    pthread_create(&t, NULL, signal_later, &self);
    r = by_write(sv[0], 1024);
    pthread_join(t, NULL);
    CHECK(r == -EINTR && hits == 1,
          "a write waiting under SO_SNDTIMEO, signalled with a SA_RESTART handler: %s",
          outcome(r));
    close(sv[0]);
    close(sv[1]);
}

// A full TCP socket (its receiver reads nothing): a send waits.
static void tcp_send(int fd) {
    fill(fd, 65536);
    nap(20);
    fill(fd, 65536);
    set_timeo(fd, SO_SNDTIMEO, TIMEO_MS);
    long r, ms;
    TIMED(r, ms, by_send(fd, 65536));
    CHECK(r == -EAGAIN && after_timeout(ms),
          "send on a full TCP socket with SO_SNDTIMEO: %s after its timeout", outcome(r));
}

// A stream listener of `family` at `a` (bind fills in its port) whose
// backlog holds one: a second connect waits, until its SO_SNDTIMEO (`want`:
// EAGAIN for AF_UNIX, EINPROGRESS for TCP, which goes on connecting); once
// the queue is empty, accept waits until its SO_RCVTIMEO.
static void connect_and_accept(int family, struct sockaddr *a, socklen_t len, long want,
                               const char *what) {
    int l = socket(family, SOCK_STREAM, 0);
    bind(l, a, len);
    listen(l, 0);
    getsockname(l, a, &len);
    int c1 = socket(family, SOCK_STREAM, 0);
    int first = connect(c1, a, len);
    int c2 = socket(family, SOCK_STREAM, 0);
    set_timeo(c2, SO_SNDTIMEO, TIMEO_MS);
    long r, ms;
    TIMED(r, ms, res(connect(c2, a, len)));
    CHECK(first == 0 && r == want && after_timeout(ms),
          "connect to a %s listener whose backlog is full, with SO_SNDTIMEO: %s after its "
          "timeout",
          what, outcome(r));
    close(c2);
    int s = accept(l, NULL, NULL);
    if (family == AF_INET)
        tcp_send(c1);
    set_timeo(l, SO_RCVTIMEO, TIMEO_MS);
    TIMED(r, ms, res(accept(l, NULL, NULL)));
    CHECK(s >= 0 && r == -EAGAIN && after_timeout(ms),
          "accept on a %s listener with nothing queued, with SO_RCVTIMEO: %s after its timeout",
          what, outcome(r));
    close(s);
    close(c1);
    close(l);
}

static void listeners(void) {
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    snprintf(un.sun_path, sizeof un.sun_path, "%s/listener", dir);
    connect_and_accept(AF_UNIX, (struct sockaddr *)&un, sizeof un, -EAGAIN, "AF_UNIX");
    unlink(un.sun_path);
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    connect_and_accept(AF_INET, (struct sockaddr *)&in, sizeof in, -EINPROGRESS, "TCP");
}

static void timeo_options(void) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct timeval tv = {1, 1000000}, back;
    socklen_t len = sizeof back;
    CHECK(res(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv)) == -EDOM,
          "SO_SNDTIMEO with tv_usec of a million: EDOM");
    CHECK(res(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, 8)) == -EINVAL,
          "SO_RCVTIMEO shorter than a timeval: EINVAL");
    tv = (struct timeval){2, 500000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &back, &len);
    CHECK(len == sizeof back && back.tv_sec == 2 && back.tv_usec == 500000,
          "SO_SNDTIMEO reads back as set");
    // A negative timeout does not wait at all, and reads back as none.
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    tv = (struct timeval){-1, 0};
    setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    getsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &back, &len);
    long r = res(read(sv[0], big, 8));
    CHECK(r == -EAGAIN && back.tv_sec == 0 && back.tv_usec == 0,
          "a negative SO_RCVTIMEO: a read that would wait is %s at once, and it reads back as "
          "zero",
          outcome(r));
    close(sv[0]);
    close(sv[1]);
    close(fd);
}

// ---- the time left, written back ---------------------------------------------

#define WAIT_MS 500

enum how { READY, SIGNALLED, EXPIRED };
static const char *hows[] = {"a descriptor ready", "a signal", "its timeout"};

// select, pselect6 or ppoll (raw, so the kernel's write-back is seen) on
// pipe `p` for `ms`: the result, and the time left it wrote, in ms.
static long wait_on(const char *call, int p, int ms, long *left_ms) {
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    fd_set rs;
    FD_ZERO(&rs);
    FD_SET(p, &rs);
    struct pollfd f = {p, POLLIN, 0};
    long r;
    if (strcmp(call, "select") == 0) {
        r = res(syscall(SYS_select, p + 1, &rs, NULL, NULL, &tv));
        *left_ms = tv.tv_sec * 1000 + tv.tv_usec / 1000;
        return r;
    }
    if (strcmp(call, "pselect6") == 0)
        r = res(syscall(SYS_pselect6, p + 1, &rs, NULL, NULL, &ts, NULL));
    else
        r = res(syscall(SYS_ppoll, &f, 1, &ts, NULL, 8));
    *left_ms = ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    return r;
}

static void time_left(void) {
    const char *calls[] = {"select", "pselect6", "ppoll"};
    handle_usr1();
    pthread_t self = pthread_self();
    for (int c = 0; c < 3; c++) {
        for (enum how h = READY; h <= EXPIRED; h++) {
            int p[2];
            pipe(p);
            pthread_t t;
            if (h == READY)
                pthread_create(&t, NULL, write_later, &p[1]);
            if (h == SIGNALLED)
                pthread_create(&t, NULL, signal_later, &self);
            long left;
            long r = wait_on(calls[c], p[0], h == EXPIRED ? TIMEO_MS : WAIT_MS, &left);
            if (h != EXPIRED)
                pthread_join(t, NULL);
            // Some time went, not all of it.
            int spent = left > 0 && left < WAIT_MS - SIGNAL_MS / 2;
            int ok = h == READY       ? r == 1 && spent
                     : h == SIGNALLED ? r == -EINTR && spent
                                      : r == 0 && left == 0;
            CHECK(ok, "%s of %d ms ended by %s: %s, the time left written back", calls[c],
                  h == EXPIRED ? TIMEO_MS : WAIT_MS, hows[h], outcome(r));
            close(p[0]);
            close(p[1]);
        }
    }
}

// select's microseconds past a second carry into its seconds; a negative
// remainder is EINVAL.
static void select_timeval(void) {
    int p[2];
    pipe(p);
    write(p[1], "x", 1);
    fd_set rs;
    FD_ZERO(&rs);
    FD_SET(p[0], &rs);
    struct timeval tv = {0, 1500000};
    long r = res(syscall(SYS_select, p[0] + 1, &rs, NULL, NULL, &tv));
    CHECK(r == 1 && tv.tv_sec == 1 && tv.tv_usec > 400000,
          "select with tv_usec of 1.5 s: %s, 1.5 s less what went left", outcome(r));
    tv = (struct timeval){1, -1};
    r = res(syscall(SYS_select, p[0] + 1, &rs, NULL, NULL, &tv));
    CHECK(r == -EINVAL, "select with tv_usec of -1: %s", outcome(r));
    close(p[0]);
    close(p[1]);
}

// ---- a futex wait restarted after a stop keeps its deadline ---------------------

#define FUTEX_MS 200

static int word;

static long futex_wait_ms(int ms) {
    struct timespec t = {0, ms * 1000000L};
    return res(syscall(SYS_futex, &word, FUTEX_WAIT, 0, &t));
}

static void futex_stopped(void) {
    pid_t pid = fork();
    if (pid == 0) {
        long r, ms;
        TIMED(r, ms, futex_wait_ms(FUTEX_MS));
        _exit(r == -ETIMEDOUT && ms >= FUTEX_MS - 5 && ms < FUTEX_MS + 50 ? 0 : 1);
    }
    int st;
    nap(FUTEX_MS / 2);
    kill(pid, SIGSTOP);
    int stopped = waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st);
    kill(pid, SIGCONT);
    waitpid(pid, &st, 0);
    CHECK(stopped && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "a futex wait of %d ms stopped and continued halfway: ETIMEDOUT at its first "
          "deadline, not a whole timeout later",
          FUTEX_MS);

    // Under a handler, SA_RESTART or not, Linux ends a timed wait with EINTR.
    handle_usr1();
    pthread_t self = pthread_self(), t;
    hits = 0;
    pthread_create(&t, NULL, signal_later, &self);
    long r, ms;
    TIMED(r, ms, futex_wait_ms(FUTEX_MS * 2));
    pthread_join(t, NULL);
    CHECK(r == -EINTR && hits == 1 && ms < FUTEX_MS * 2,
          "a futex wait with a timeout, signalled with a SA_RESTART handler: %s", outcome(r));
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    mkdtemp(dir);
    unix_sends();
    listeners();
    timeo_options();
    time_left();
    select_timeval();
    futex_stopped();
    rmdir(dir);
    if (failures == 0)
        printf("all passed\n");
    return failures != 0;
}
