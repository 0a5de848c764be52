// Signals against every blocking call, checked against what Linux does
// (the test runs natively too, with the same lines). Each call of the table
// blocks in the main thread; a helper thread sends it SIGUSR1, whose handler
// was installed with SA_RESTART or without, then releases the call. Linux
// restarts the calls it restarts under SA_RESTART and ends the others with
// EINTR (signal(7)); a write that moved bytes returns them. Then: a stopped
// and continued child (no handler) goes on in its call, or sees EINTR where
// Linux gives it; ppoll, pselect6 and epoll_pwait apply their mask;
// SO_RCVTIMEO ends a receive with EAGAIN;
// rt_sigtimedwait and its siginfo; job control (SIGTSTP, SIGTTIN, SIGCONT,
// WUNTRACED, WCONTINUED, CLD_STOPPED and CLD_CONTINUED, SA_NOCLDSTOP); a
// signal to a process group. Prints `ok: ...` lines, then `all passed`.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

// Long enough natively for the caller to be blocked, under a loaded test
// machine too (40 ms was not, at load 10); inside Rewind, time
// is virtual and the order is the schedule's.
#define DELAY_MS 80

static void nap(int ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) == -1 && errno == EINTR) {
    }
}

// Waits until thread `tid` of process `pid` sleeps in a call (its state in
// /proc is S), for up to 4 s: a fixed nap was not enough natively at load 2
// with a dozen copies running. Inside Rewind, /proc gives the same state.
static void await_blocked(pid_t pid, pid_t tid) {
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", pid, tid);
    for (int i = 0; i < 1000; i++) {
        int fd = open(path, O_RDONLY);
        ssize_t n = fd < 0 ? -1 : read(fd, stat, sizeof stat - 1);
        if (fd >= 0)
            close(fd);
        if (n > 0) {
            stat[n] = 0;
            const char *end = strrchr(stat, ')');
            if (end && end[1] == ' ' && end[2] == 'S')
                return;
        }
        nap(4);
    }
}

static pthread_t main_thread;
static pid_t main_tid;
static volatile sig_atomic_t hits;
static void on_usr1(int sig) {
    (void)sig;
    hits++;
}

static void handle_usr1(int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = flags;
    sigaction(SIGUSR1, &sa, NULL);
}

// The descriptors and children of the case being run.
static int p[2], q[2], sv[2], efd, tfd, sfd, epfd, lfd, cfd, rel[2];
static pid_t child;
static int futex_word;
static char buf[1 << 20];
static char dir[] = "/tmp/restartXXXXXX";

static const char *at(const char *name) {
    static char path[2][128];
    static int i;
    char *b = path[i++ % 2];
    snprintf(b, 128, "%s/%s", dir, name);
    return b;
}

static void set_nonblock(int fd, int on) {
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

// Writes to `fd` until it is full.
static void fill(int fd) {
    set_nonblock(fd, 1);
    while (write(fd, buf, sizeof buf) > 0) {
    }
    set_nonblock(fd, 0);
}

// Reads everything `fd` holds now.
static void drain(int fd) {
    set_nonblock(fd, 1);
    while (read(fd, buf, sizeof buf) > 0) {
    }
    set_nonblock(fd, 0);
}

static long res(long r) { return r < 0 ? -errno : r; }

// ---- setups, calls and releases -------------------------------------------

static void s_pipe(void) { pipe(p); }
static void s_full_pipe(void) {
    pipe(p);
    fill(p[1]);
}
static void s_pipes(void) {
    pipe(p);
    pipe(q);
}
static void s_stream(void) { socketpair(AF_UNIX, SOCK_STREAM, 0, sv); }
static void s_dgram(void) { socketpair(AF_UNIX, SOCK_DGRAM, 0, sv); }
static void s_full_stream(void) {
    s_stream();
    fill(sv[0]);
}
static void s_timeo(void) {
    s_stream();
    struct timeval tv = {10, 0};
    setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}
static void s_eventfd(void) { efd = eventfd(0, 0); }
static void s_timerfd(void) {
    tfd = timerfd_create(CLOCK_MONOTONIC, 0);
    struct itimerspec its = {{0, 0}, {0, 3 * DELAY_MS * 1000000L}};
    timerfd_settime(tfd, 0, &its, NULL);
}
static void s_signalfd(void) {
    sigset_t u2;
    sigemptyset(&u2);
    sigaddset(&u2, SIGUSR2);
    sfd = signalfd(-1, &u2, 0);
}
static void s_epoll(void) {
    pipe(p);
    epfd = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(epfd, EPOLL_CTL_ADD, p[0], &ev);
}
static void s_listener(void) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", at("sock"));
    unlink(a.sun_path);
    lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    bind(lfd, (struct sockaddr *)&a, sizeof a);
    listen(lfd, 0);
}
static int connect_to_listener(int nonblock) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", at("sock"));
    int fd = socket(AF_UNIX, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
    return connect(fd, (struct sockaddr *)&a, sizeof a) == 0 ? fd : -1;
}
static void s_full_backlog(void) {
    s_listener();
    // A backlog of 0 holds one connection; the next connect waits.
    sv[1] = connect_to_listener(1);
}
// A child that waits for a byte on `rel`, then exits.
static void s_child(void) {
    pipe(rel);
    child = fork();
    if (child == 0) {
        char c;
        read(rel[0], &c, 1);
        _exit(0);
    }
}
// A child that holds a lock on the file (flock, or a record lock) until released.
static void s_locker(int record) {
    int ready[2];
    pipe(ready);
    pipe(rel);
    close(open(at("lock"), O_CREAT | O_RDWR, 0600));
    child = fork();
    if (child == 0) {
        int fd = open(at("lock"), O_RDWR);
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (record)
            fcntl(fd, F_SETLK, &fl);
        else
            flock(fd, LOCK_EX);
        write(ready[1], "r", 1);
        char c;
        read(rel[0], &c, 1);
        _exit(0);
    }
    char c;
    read(ready[0], &c, 1);
    close(ready[0]);
    close(ready[1]);
    cfd = open(at("lock"), O_RDWR);
}
static void s_flock(void) { s_locker(0); }
static void s_record(void) { s_locker(1); }
static void s_fifo(void) {
    unlink(at("fifo"));
    mkfifo(at("fifo"), 0600);
}
static void s_fifo_open(void) {
    s_fifo();
    p[0] = open(at("fifo"), O_RDONLY | O_NONBLOCK);
    p[1] = open(at("fifo"), O_WRONLY);
    set_nonblock(p[0], 0);
}
static void s_futex(void) { futex_word = 0; }
static void s_none(void) {}

static long c_read_p(void) { return res(read(p[0], buf, 8)); }
static long c_write_p(void) { return res(write(p[1], "x", 1)); }
static long c_readv_p(void) {
    struct iovec v[2] = {{buf, 4}, {buf + 4, 4}};
    return res(readv(p[0], v, 2));
}
static long c_writev_p(void) {
    struct iovec v[1] = {{"x", 1}};
    return res(writev(p[1], v, 1));
}
static long c_open_fifo(void) {
    int fd = open(at("fifo"), O_RDONLY);
    if (fd >= 0)
        p[0] = fd;
    return fd >= 0 ? 0 : -errno;
}
static long c_read_s(void) { return res(read(sv[0], buf, 8)); }
static long c_recvfrom_s(void) { return res(recvfrom(sv[0], buf, 8, 0, NULL, NULL)); }
static long c_recvmsg_s(void) {
    struct iovec v = {buf, 8};
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
    return res(recvmsg(sv[0], &m, 0));
}
static long c_send_s(void) { return res(send(sv[0], "x", 1, 0)); }
static long c_sendmsg_s(void) {
    struct iovec v = {"x", 1};
    struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
    return res(sendmsg(sv[0], &m, 0));
}
static long c_read_e(void) {
    uint64_t v;
    return res(read(efd, &v, 8));
}
static long c_read_t(void) {
    uint64_t v;
    return res(read(tfd, &v, 8));
}
static long c_read_sfd(void) {
    struct signalfd_siginfo si;
    return res(read(sfd, &si, sizeof si));
}
static long c_accept(void) {
    int fd = accept(lfd, NULL, NULL);
    if (fd >= 0)
        close(fd);
    return fd >= 0 ? 0 : -errno;
}
static long c_connect(void) {
    cfd = connect_to_listener(0);
    return cfd >= 0 ? 0 : -errno;
}
static long c_wait4(void) {
    long r = res(wait4(child, NULL, 0, NULL));
    return r == child ? 0 : r;
}
static long c_waitid(void) {
    siginfo_t si;
    return res(waitid(P_PID, child, &si, WEXITED));
}
static long c_futex(void) { return res(syscall(SYS_futex, &futex_word, FUTEX_WAIT, 0, NULL)); }
static long c_futex_timed(void) {
    struct timespec t = {10, 0};
    return res(syscall(SYS_futex, &futex_word, FUTEX_WAIT, 0, &t));
}
static long c_flock(void) { return res(flock(cfd, LOCK_EX)); }
static long c_setlkw(void) {
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    return res(fcntl(cfd, F_SETLKW, &fl));
}
static long c_splice(void) { return res(splice(p[0], NULL, q[1], NULL, 8, 0)); }
static long c_tee(void) { return res(tee(p[0], q[1], 8, 0)); }
static long c_poll(void) {
    struct pollfd f = {p[0], POLLIN, 0};
    return res(poll(&f, 1, -1));
}
static long c_ppoll(void) {
    struct pollfd f = {p[0], POLLIN, 0};
    return res(ppoll(&f, 1, NULL, NULL));
}
static long c_select(void) {
    fd_set r;
    FD_ZERO(&r);
    FD_SET(p[0], &r);
    return res(select(p[0] + 1, &r, NULL, NULL, NULL));
}
static long c_pselect(void) {
    fd_set r;
    FD_ZERO(&r);
    FD_SET(p[0], &r);
    return res(pselect(p[0] + 1, &r, NULL, NULL, NULL, NULL));
}
static long c_epoll_wait(void) {
    struct epoll_event ev;
    return res(epoll_wait(epfd, &ev, 1, -1));
}
static long c_epoll_pwait(void) {
    struct epoll_event ev;
    return res(epoll_pwait(epfd, &ev, 1, -1, NULL));
}
static long c_nanosleep(void) {
    struct timespec t = {10, 0};
    return res(nanosleep(&t, NULL));
}
static long c_clock_nanosleep(void) {
    struct timespec t = {10, 0};
    return -clock_nanosleep(CLOCK_MONOTONIC, 0, &t, NULL);
}
static long c_pause(void) { return res(pause()); }
static long c_sigsuspend(void) {
    sigset_t m;
    sigprocmask(SIG_BLOCK, NULL, &m);
    return res(sigsuspend(&m));
}
static sigset_t usr2_set(void) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR2);
    return s;
}
static long c_sigtimedwait(void) {
    sigset_t s = usr2_set();
    struct timespec t = {10, 0};
    return res(sigtimedwait(&s, NULL, &t));
}
static long c_sigwaitinfo(void) {
    sigset_t s = usr2_set();
    return res(sigwaitinfo(&s, NULL));
}

static void r_write_p(void) { write(p[1], "x", 1); }
static void r_drain_p(void) { drain(p[0]); }
static void r_write_s(void) { write(sv[1], "x", 1); }
static void r_drain_s(void) { drain(sv[1]); }
static void r_write_e(void) {
    uint64_t v = 1;
    write(efd, &v, 8);
}
static void r_usr2(void) { pthread_kill(main_thread, SIGUSR2); }
static void r_connect(void) { cfd = connect_to_listener(1); }
static void r_accept(void) { close(accept(lfd, NULL, NULL)); }
static void r_rel(void) { write(rel[1], "x", 1); }
static void r_open_writer(void) { cfd = open(at("fifo"), O_WRONLY | O_NONBLOCK); }
static void r_futex(void) {
    __atomic_store_n(&futex_word, 1, __ATOMIC_SEQ_CST);
    syscall(SYS_futex, &futex_word, FUTEX_WAKE, 1);
}
static void r_none(void) {}

struct blocking {
    const char *name;
    void (*setup)(void);
    long (*call)(void);
    void (*release)(void);
    // What the call returns once released; EINTR when Linux never restarts it.
    long restarted;
};

#define NEVER (-EINTR)
static const struct blocking table[] = {
    {"read of an empty pipe", s_pipe, c_read_p, r_write_p, 1},
    {"write to a full pipe", s_full_pipe, c_write_p, r_drain_p, 1},
    {"readv of an empty pipe", s_pipe, c_readv_p, r_write_p, 1},
    {"writev to a full pipe", s_full_pipe, c_writev_p, r_drain_p, 1},
    {"read of an empty FIFO", s_fifo_open, c_read_p, r_write_p, 1},
    {"open of a FIFO without a writer", s_fifo, c_open_fifo, r_open_writer, 0},
    {"read of a stream socket", s_stream, c_read_s, r_write_s, 1},
    {"recvfrom a datagram socket", s_dgram, c_recvfrom_s, r_write_s, 1},
    {"recvmsg of a stream socket", s_stream, c_recvmsg_s, r_write_s, 1},
    {"send to a full stream socket", s_full_stream, c_send_s, r_drain_s, 1},
    {"sendmsg to a full stream socket", s_full_stream, c_sendmsg_s, r_drain_s, 1},
    {"read of an eventfd at 0", s_eventfd, c_read_e, r_write_e, 8},
    {"accept with nothing queued", s_listener, c_accept, r_connect, 0},
    {"connect to a full backlog", s_full_backlog, c_connect, r_accept, 0},
    {"wait4 for a running child", s_child, c_wait4, r_rel, 0},
    {"waitid for a running child", s_child, c_waitid, r_rel, 0},
    {"futex wait", s_futex, c_futex, r_futex, 0},
    {"flock of a locked file", s_flock, c_flock, r_rel, 0},
    {"fcntl F_SETLKW of a locked range", s_record, c_setlkw, r_rel, 0},
    {"read of a signalfd", s_signalfd, c_read_sfd, r_usr2, 128},
    {"read of an unexpired timerfd", s_timerfd, c_read_t, r_none, 8},
    {"splice from an empty pipe", s_pipes, c_splice, r_write_p, 1},
    {"tee from an empty pipe", s_pipes, c_tee, r_write_p, 1},
    {"read of a socket with SO_RCVTIMEO", s_timeo, c_read_s, r_write_s, NEVER},
    {"futex wait with a timeout", s_futex, c_futex_timed, r_futex, NEVER},
    {"poll", s_pipe, c_poll, r_write_p, NEVER},
    {"ppoll", s_pipe, c_ppoll, r_write_p, NEVER},
    {"select", s_pipe, c_select, r_write_p, NEVER},
    {"pselect6", s_pipe, c_pselect, r_write_p, NEVER},
    {"epoll_wait", s_epoll, c_epoll_wait, r_write_p, NEVER},
    {"epoll_pwait", s_epoll, c_epoll_pwait, r_write_p, NEVER},
    {"nanosleep", s_none, c_nanosleep, r_none, NEVER},
    {"clock_nanosleep", s_none, c_clock_nanosleep, r_none, NEVER},
    {"pause", s_none, c_pause, r_none, NEVER},
    {"sigsuspend", s_none, c_sigsuspend, r_none, NEVER},
    {"sigtimedwait", s_none, c_sigtimedwait, r_none, NEVER},
    {"sigwaitinfo", s_none, c_sigwaitinfo, r_none, NEVER},
};

static const struct blocking *current;

// Signals the main thread once its call blocks, then releases the call.
static void *sender(void *arg) {
    (void)arg;
    await_blocked(getpid(), main_tid);
    pthread_kill(main_thread, SIGUSR1);
    // Released only once the handler ran and the call restarted or ended:
    // a release first would let the call complete without seeing EINTR.
    for (int i = 0; i < 1000 && hits == 0; i++)
        nap(4);
    await_blocked(getpid(), main_tid);
    current->release();
    return NULL;
}

// A thread that takes none of the process's signals.
static pthread_t start(void *(*fn)(void *)) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    pthread_create(&t, NULL, fn, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return t;
}

static const char *outcome(long r) {
    static char s[64];
    if (r >= 0)
        snprintf(s, sizeof s, "returns %ld", r);
    else
        snprintf(s, sizeof s, "%s", strerrorname_np((int)-r));
    return s;
}

static void close_all(void) {
    int *fds[] = {&p[0], &p[1], &q[0], &q[1], &sv[0], &sv[1], &efd,
                  &tfd,  &sfd,  &epfd, &lfd,  &cfd,  &rel[0], &rel[1]};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        if (*fds[i] > 2)
            close(*fds[i]);
        *fds[i] = -1;
    }
    if (child > 0)
        waitpid(child, NULL, 0);
    child = 0;
    // A SIGUSR2 a signalfd did not take.
    struct timespec zero = {0, 0};
    sigset_t s = usr2_set();
    sigtimedwait(&s, NULL, &zero);
}

static void run_table(int flags) {
    handle_usr1(flags);
    const char *how = flags ? "SA_RESTART" : "no SA_RESTART";
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        current = &table[i];
        current->setup();
        hits = 0;
        pthread_t t = start(sender);
        long r = current->call();
        pthread_join(t, NULL);
        long want = flags && current->restarted != NEVER ? current->restarted : -EINTR;
        CHECK(r == want && hits == 1, "%s, %s: %s after the handler", current->name, how,
              outcome(r));
        close_all();
    }
}

// ---- a write that moved bytes ----------------------------------------------

static void partial_writes(int flags) {
    handle_usr1(flags);
    const char *how = flags ? "SA_RESTART" : "no SA_RESTART";
    static const struct blocking drain_pipe = {"", s_none, NULL, r_drain_p, 0};
    current = &drain_pipe;
    pipe(p);
    hits = 0;
    pthread_t t = start(sender);
    long r = res(write(p[1], buf, sizeof buf));
    pthread_join(t, NULL);
    CHECK(r == 65536 && hits == 1, "a pipe write of %zu bytes, %s: returns the %ld it moved",
          sizeof buf, how, r);
    close_all();

    s_stream();
    static const struct blocking drain_socket = {"", s_none, NULL, r_drain_s, 0};
    current = &drain_socket;
    hits = 0;
    t = start(sender);
    r = res(write(sv[0], buf, sizeof buf));
    pthread_join(t, NULL);
    CHECK(r > 0 && r < (long)sizeof buf && hits == 1,
          "a socket write of %zu bytes, %s: returns the bytes it moved", sizeof buf, how);
    close_all();
}

// ---- a child stopped and continued in its call -----------------------------

static int efd_child;
static long sc_read(void) { return c_read_p(); }
static long sc_nanosleep(void) {
    struct timespec t = {0, 4 * DELAY_MS * 1000000L};
    return res(nanosleep(&t, NULL));
}
static long sc_poll(void) {
    struct pollfd f = {p[0], POLLIN, 0};
    return res(poll(&f, 1, -1));
}
static long sc_poll_timeout(void) {
    struct pollfd f = {p[0], POLLIN, 0};
    return res(poll(&f, 1, 4 * DELAY_MS));
}
static long sc_epoll(void) {
    struct epoll_event ev;
    return res(epoll_wait(efd_child, &ev, 1, -1));
}
static long sc_sigtimedwait(void) { return c_sigtimedwait(); }
static long sc_futex(void) { return c_futex(); }

struct stopped {
    const char *name;
    long (*call)(void);
    long want;
};

static void stop_and_continue(void) {
    static const struct stopped table2[] = {
        {"read of a pipe", sc_read, 1},
        {"nanosleep", sc_nanosleep, 0},
        {"poll without a timeout", sc_poll, 1},
        {"poll with a timeout", sc_poll_timeout, 1},
        {"epoll_wait", sc_epoll, -EINTR},
        {"sigtimedwait", sc_sigtimedwait, -EINTR},
        {"futex wait", sc_futex, 0},
    };
    for (size_t i = 0; i < sizeof table2 / sizeof table2[0]; i++) {
        const struct stopped *c = &table2[i];
        pipe(p);
        efd_child = epoll_create1(0);
        struct epoll_event ev = {.events = EPOLLIN};
        epoll_ctl(efd_child, EPOLL_CTL_ADD, p[0], &ev);
        futex_word = 0;
        pipe(rel);
        pid_t pid = fork();
        if (pid == 0) {
            long r = c->call();
            // Ends only when told: a call that ends at SIGCONT must not
            // exit before the parent's WCONTINUED wait sees the continue.
            char x;
            read(rel[0], &x, 1);
            _exit(r == c->want ? 0 : 1);
        }
        int st;
        await_blocked(pid, pid);
        kill(pid, SIGSTOP);
        int stopped = waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st);
        nap(DELAY_MS);
        kill(pid, SIGCONT);
        int continued = waitpid(pid, &st, WCONTINUED) == pid && WIFCONTINUED(st);
        nap(DELAY_MS / 2);
        write(p[1], "x", 1);
        write(rel[1], "x", 1);
        // Nothing wakes the child's futex word (its own copy): it must
        // still be waiting, and is killed.
        if (c->call == sc_futex) {
            nap(DELAY_MS);
            kill(pid, SIGKILL);
        }
        waitpid(pid, &st, 0);
        int ended = c->call == sc_futex ? WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL
                                         : WIFEXITED(st) && WEXITSTATUS(st) == 0;
        CHECK(stopped && continued && ended, "stopped and continued in %s: %s", c->name,
              c->call == sc_futex ? "still waiting" : outcome(c->want));
        close(p[0]);
        close(p[1]);
        close(rel[0]);
        close(rel[1]);
        close(efd_child);
    }
}

// ---- ppoll, pselect6 and epoll_pwait apply their mask ----------------------

static void masks(void) {
    handle_usr1(SA_RESTART);
    sigset_t usr1, open, now;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, NULL);
    sigprocmask(SIG_BLOCK, NULL, &open);
    sigdelset(&open, SIGUSR1);

    // A blocked SIGUSR1 pending: the call's mask lets it in at once.
    s_epoll();
    hits = 0;
    raise(SIGUSR1);
    struct pollfd f = {p[0], POLLIN, 0};
    long r = res(ppoll(&f, 1, NULL, &open));
    sigprocmask(SIG_BLOCK, NULL, &now);
    CHECK(r == -EINTR && hits == 1 && sigismember(&now, SIGUSR1),
          "ppoll's mask lets a pending signal in: %s, and the old mask is back", outcome(r));

    hits = 0;
    raise(SIGUSR1);
    fd_set rs;
    FD_ZERO(&rs);
    FD_SET(p[0], &rs);
    r = res(pselect(p[0] + 1, &rs, NULL, NULL, NULL, &open));
    sigprocmask(SIG_BLOCK, NULL, &now);
    CHECK(r == -EINTR && hits == 1 && sigismember(&now, SIGUSR1),
          "pselect6's mask lets a pending signal in: %s, and the old mask is back", outcome(r));

    // Sent while it waits.
    static const struct blocking none = {"", s_none, NULL, r_none, 0};
    current = &none;
    hits = 0;
    pthread_t t = start(sender);
    struct epoll_event ev;
    r = res(epoll_pwait(epfd, &ev, 1, -1, &open));
    pthread_join(t, NULL);
    sigprocmask(SIG_BLOCK, NULL, &now);
    CHECK(r == -EINTR && hits == 1 && sigismember(&now, SIGUSR1),
          "epoll_pwait's mask lets a signal sent while it waits in: %s", outcome(r));

    // A ready descriptor: the call returns it and the signal stays pending.
    write(p[1], "x", 1);
    hits = 0;
    raise(SIGUSR1);
    r = res(ppoll(&f, 1, NULL, &open));
    sigset_t pending;
    sigpending(&pending);
    CHECK(r == 1 && hits == 0 && sigismember(&pending, SIGUSR1),
          "ppoll with a ready descriptor: %s, the signal still pending", outcome(r));
    sigprocmask(SIG_UNBLOCK, &usr1, NULL);
    CHECK(hits == 1, "and delivered once unblocked");
    close_all();
}

// ---- SO_RCVTIMEO on its own -----------------------------------------------

static void receive_timeout(void) {
    s_stream();
    struct timeval tv = {0, DELAY_MS * 1000};
    setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    long r = res(read(sv[0], buf, 8));
    CHECK(r == -EAGAIN, "a read of a socket whose SO_RCVTIMEO passes: %s", outcome(r));
    write(sv[1], "x", 1);
    r = res(read(sv[0], buf, 8));
    CHECK(r == 1, "and one with bytes to read: %s", outcome(r));
    close_all();
}

// ---- rt_sigtimedwait ------------------------------------------------------

static void *queue_later(void *arg) {
    (void)arg;
    nap(DELAY_MS);
    union sigval v = {.sival_int = 42};
    sigqueue(getpid(), SIGUSR2, v);
    return NULL;
}

static void sigtimedwait_cases(void) {
    sigset_t s = usr2_set();
    siginfo_t si;
    struct timespec zero = {0, 0}, short_wait = {0, DELAY_MS * 1000000L};
    long r = res(sigtimedwait(&s, &si, &zero));
    CHECK(r == -EAGAIN, "sigtimedwait with a zero timeout and nothing pending: %s", outcome(r));
    r = res(sigtimedwait(&s, &si, &short_wait));
    CHECK(r == -EAGAIN, "sigtimedwait whose timeout passes: %s", outcome(r));

    kill(getpid(), SIGUSR2);
    memset(&si, 0, sizeof si);
    r = res(sigtimedwait(&s, &si, &zero));
    CHECK(r == SIGUSR2 && si.si_signo == SIGUSR2 && si.si_code == SI_USER &&
              si.si_pid == getpid() && si.si_uid == getuid(),
          "sigtimedwait takes a pending kill: signo, SI_USER, si_pid, si_uid");

    pthread_t t = start(queue_later);
    memset(&si, 0, sizeof si);
    r = res(sigwaitinfo(&s, &si));
    pthread_join(t, NULL);
    CHECK(r == SIGUSR2 && si.si_code == SI_QUEUE && si.si_value.sival_int == 42 &&
              si.si_pid == getpid(),
          "sigwaitinfo waits for a sigqueue: SI_QUEUE, si_value 42");

    struct timespec long_wait = {10, 0};
    pid_t pid = fork();
    if (pid == 0) {
        nap(DELAY_MS);
        kill(getppid(), SIGUSR2);
        _exit(0);
    }
    memset(&si, 0, sizeof si);
    r = res(sigtimedwait(&s, &si, &long_wait));
    waitpid(pid, NULL, 0);
    CHECK(r == SIGUSR2 && si.si_pid == pid && si.si_code == SI_USER,
          "sigtimedwait with a timeout takes another process's kill, with its pid");
}

// ---- job control ----------------------------------------------------------

static volatile sig_atomic_t chld_code, chld_status, chld_hits;
static void on_chld(int sig, siginfo_t *si, void *uc) {
    (void)sig;
    (void)uc;
    chld_code = si->si_code;
    chld_status = si->si_status;
    chld_hits++;
}

// Waits for the next SIGCHLD, or a while.
static void await_chld(int before) {
    for (int i = 0; i < 20 && chld_hits == before; i++)
        nap(DELAY_MS / 4);
}

static void job_control(int nocldstop) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_chld;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | (nocldstop ? SA_NOCLDSTOP : 0);
    sigaction(SIGCHLD, &sa, NULL);
    const char *how = nocldstop ? "SA_NOCLDSTOP" : "SIGCHLD handled";
    int stops[] = {SIGSTOP, SIGTSTP, SIGTTIN};
    const char *names[] = {"SIGSTOP", "SIGTSTP", "SIGTTIN"};
    for (int i = 0; i < 3; i++) {
        pipe(p);
        // Its own group, whose parent is outside it: not orphaned, so
        // SIGTSTP and SIGTTIN stop it (Linux drops them in an orphaned group).
        pid_t pid = fork();
        if (pid == 0) {
            setpgid(0, 0);
            char c;
            read(p[0], &c, 1);
            _exit(7);
        }
        setpgid(pid, pid);
        int st, before = chld_hits;
        await_blocked(pid, pid);
        kill(pid, stops[i]);
        int r = waitpid(pid, &st, WUNTRACED);
        CHECK(r == pid && WIFSTOPPED(st) && WSTOPSIG(st) == stops[i],
              "%s: %s stops the child, WUNTRACED sees WSTOPSIG %d", how, names[i], stops[i]);
        await_chld(before);
        if (nocldstop)
            CHECK(chld_hits == before, "%s: no SIGCHLD for the stop", how);
        else
            CHECK(chld_hits == before + 1 && chld_code == CLD_STOPPED && chld_status == stops[i],
                  "%s: SIGCHLD with CLD_STOPPED and si_status %d", how, stops[i]);
        CHECK(waitpid(pid, &st, WUNTRACED | WNOHANG) == 0, "%s: the stop is reported once", how);
        before = chld_hits;
        kill(pid, SIGCONT);
        r = waitpid(pid, &st, WCONTINUED);
        CHECK(r == pid && WIFCONTINUED(st), "%s: SIGCONT continues it, WCONTINUED sees it", how);
        await_chld(before);
        if (nocldstop)
            CHECK(chld_hits == before, "%s: no SIGCHLD for the continue", how);
        else
            CHECK(chld_hits == before + 1 && chld_code == CLD_CONTINUED &&
                      chld_status == SIGCONT,
                  "%s: SIGCHLD with CLD_CONTINUED and si_status SIGCONT", how);
        write(p[1], "x", 1);
        r = waitpid(pid, &st, 0);
        CHECK(r == pid && WIFEXITED(st) && WEXITSTATUS(st) == 7,
              "%s: the continued child's read goes on and it exits 7", how);
        close(p[0]);
        close(p[1]);
    }
    signal(SIGCHLD, SIG_DFL);
}

static void process_group(void) {
    pipe(p);
    pid_t kids[2];
    for (int i = 0; i < 2; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            setpgid(0, i == 0 ? 0 : kids[0]);
            char c;
            read(p[0], &c, 1);
            _exit(0);
        }
        setpgid(kids[i], kids[0]);
    }
    nap(DELAY_MS);
    CHECK(kill(-kids[0], SIGTERM) == 0, "kill(-pgrp) of the children's group");
    int both = 1;
    for (int i = 0; i < 2; i++) {
        int st;
        both &= waitpid(kids[i], &st, 0) == kids[i] && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM;
    }
    CHECK(both, "both children of the group end by SIGTERM");
    CHECK(kill(-kids[0], 0) == -1 && errno == ESRCH, "then the group is gone: ESRCH");
    close(p[0]);
    close(p[1]);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    main_thread = pthread_self();
    main_tid = gettid();
    mkdtemp(dir);
    sigset_t u2 = usr2_set();
    sigprocmask(SIG_BLOCK, &u2, NULL);

    run_table(SA_RESTART);
    run_table(0);
    partial_writes(SA_RESTART);
    partial_writes(0);
    stop_and_continue();
    masks();
    receive_timeout();
    sigtimedwait_cases();
    job_control(0);
    job_control(1);
    process_group();

    unlink(at("sock"));
    unlink(at("lock"));
    unlink(at("fifo"));
    rmdir(dir);
    if (failures == 0)
        printf("all passed\n");
    return failures != 0;
}
