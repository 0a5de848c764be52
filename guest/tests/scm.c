/* scm: ancillary data on AF_UNIX sockets. SCM_RIGHTS: a pipe's read end
 * passed from a child to its parent over a socketpair (the child closes
 * and exits before the parent receives it), several descriptors at once
 * and in two records, MSG_CMSG_CLOEXEC, a datagram's rights and a peek's,
 * where rights sit in a stream (a receive stops after the bytes that carry
 * them), short control buffers (MSG_CTRUNC, and what did not fit closed),
 * rights in flight to a socket that closes, a long send that blocks
 * while its sender closes what it passed. SCM_CREDENTIALS with
 * SO_PASSCRED: the sender's own, others passed by root, ESRCH and EINVAL,
 * and a stream receive that does not join two senders' bytes. SO_PEERCRED
 * of a socketpair, a client and an accepted socket (which inherits the
 * listener's SO_PASSCRED). Hostile
 * records: bad lengths, bad descriptors, too many, ENOBUFS, EFAULT, and a
 * pseudo-random mix whose outcomes are summed. Prints `ok: ...` lines and
 * values, then `all passed`; the same natively and inside Rewind. */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Sends `len` bytes of `data` with `n` descriptors in one SCM_RIGHTS record. */
static ssize_t send_fds(int s, const char *data, size_t len, const int *fds, int n)
{
    char ctl[CMSG_SPACE(sizeof(int) * 253)];
    struct iovec iov = {(void *)data, len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n > 0) {
        memset(ctl, 0, sizeof ctl);
        m.msg_control = ctl;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * n);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
    }
    return sendmsg(s, &m, 0);
}

/* What one recvmsg got. */
struct got {
    ssize_t n;
    int fds[253];
    int nfds;
    int flags;
    size_t controllen;
    int has_creds;
    struct ucred creds;
};

/* Receives into `buf` with `room` bytes of control buffer (or none for -1). */
static struct got recv_fds(int s, char *buf, size_t len, long room, int flags)
{
    static char ctl[CMSG_SPACE(sizeof(int) * 253) + CMSG_SPACE(sizeof(struct ucred))];
    struct got g;
    memset(&g, 0, sizeof g);
    struct iovec iov = {buf, len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (room >= 0) {
        memset(ctl, 0, sizeof ctl);
        m.msg_control = ctl;
        m.msg_controllen = room;
    }
    g.n = recvmsg(s, &m, flags);
    g.flags = m.msg_flags;
    g.controllen = m.msg_controllen;
    if (g.n < 0 || room < 0)
        return g;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            memcpy(g.fds + g.nfds, CMSG_DATA(c), n * sizeof(int));
            g.nfds += n;
        } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
            g.has_creds = 1;
            memcpy(&g.creds, CMSG_DATA(c), sizeof g.creds);
        }
    }
    return g;
}

/* The lowest descriptor not open. */
static int lowest_free(void)
{
    int fd = dup(0);
    close(fd);
    return fd;
}

/* Whether `got` are the `n` lowest descriptors that were free before
 * they were received (the file-descriptor table may have holes). */
static int lowest_n(const int *got, int n, const int *before)
{
    for (int i = 0; i < n; i++)
        if (got[i] != before[i])
            return 0;
    return 1;
}

/* The `n` lowest free descriptors now. */
static void free_fds(int *out, int n)
{
    for (int fd = 0, i = 0; i < n; fd++)
        if (fcntl(fd, F_GETFD) == -1)
            out[i++] = fd;
}

/* Whether every writer of the pipe whose read end is `r` is gone: a
 * non-blocking read sees end of file rather than EAGAIN. */
static int writers_gone(int r)
{
    char c;
    int fl = fcntl(r, F_GETFL);
    fcntl(r, F_SETFL, fl | O_NONBLOCK);
    int n = read(r, &c, 1);
    fcntl(r, F_SETFL, fl);
    return n == 0;
}

static void rights_from_a_child(void)
{
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    pid_t pid = fork();
    if (pid == 0) {
        int p[2];
        close(sv[0]);
        pipe(p);
        write(p[1], "from the child's pipe", 21);
        close(p[1]);
        send_fds(sv[1], "x", 1, &p[0], 1);
        close(p[0]);
        _exit(0);
    }
    close(sv[1]);
    int st;
    waitpid(pid, &st, 0);
    int want = lowest_free();
    char buf[64];
    struct got g = recv_fds(sv[0], buf, sizeof buf, CMSG_SPACE(sizeof(int)), 0);
    CHECK(g.n == 1 && buf[0] == 'x' && g.nfds == 1, "a child's pipe end arrives with its byte, after the child exited");
    CHECK(g.fds[0] == want, "as the lowest free descriptor");
    CHECK(g.controllen == CMSG_SPACE(sizeof(int)) && g.flags == 0, "msg_controllen %zu, msg_flags %#x", g.controllen, g.flags);
    int n = read(g.fds[0], buf, sizeof buf);
    CHECK(n == 21 && memcmp(buf, "from the child's pipe", 21) == 0, "it reads the child's bytes (%d)", n);
    CHECK(read(g.fds[0], buf, sizeof buf) == 0, "then end of file: the child's write end is closed");
    CHECK(!(fcntl(g.fds[0], F_GETFD) & FD_CLOEXEC), "without MSG_CMSG_CLOEXEC it is not close-on-exec");
    close(g.fds[0]);
    close(sv[0]);
}

static void several_at_once(void)
{
    int sv[2], p[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    pipe(p);
    char path[] = "/tmp/scmXXXXXX";
    int f = mkstemp(path);
    write(f, "0123456789", 10);
    int null = open("/dev/null", O_WRONLY);
    int fds[3] = {p[0], f, null};
    CHECK(send_fds(sv[0], "abc", 3, fds, 3) == 3, "sendmsg with three descriptors");
    char buf[16];
    int before[3];
    free_fds(before, 3);
    struct got g = recv_fds(sv[1], buf, sizeof buf, CMSG_SPACE(sizeof(int) * 3), MSG_CMSG_CLOEXEC);
    CHECK(g.n == 3 && g.nfds == 3, "three arrive (%d)", g.nfds);
    CHECK(lowest_n(g.fds, 3, before), "at the lowest free descriptors, in order");
    CHECK(g.flags == MSG_CMSG_CLOEXEC, "msg_flags %#x", g.flags);
    CHECK((fcntl(g.fds[0], F_GETFD) & FD_CLOEXEC) && (fcntl(g.fds[2], F_GETFD) & FD_CLOEXEC),
          "MSG_CMSG_CLOEXEC makes them close-on-exec");
    lseek(g.fds[1], 3, SEEK_SET);
    CHECK(lseek(f, 0, SEEK_CUR) == 3, "the file's is the same description: one offset");
    CHECK((fcntl(g.fds[2], F_GETFL) & O_ACCMODE) == O_WRONLY, "/dev/null's keeps its access mode");
    write(p[1], "!", 1);
    CHECK(read(g.fds[0], buf, 1) == 1 && buf[0] == '!', "the pipe's reads what the original's write end wrote");
    for (int i = 0; i < 3; i++)
        close(g.fds[i]);

    /* Two records in one message: one list of three on arrival. */
    char ctl[CMSG_SPACE(sizeof(int) * 2) + CMSG_SPACE(sizeof(int))];
    memset(ctl, 0, sizeof ctl);
    struct iovec iov = {"d", 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * 2);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * 2);
    c = CMSG_NXTHDR(&m, c);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &null, sizeof(int));
    CHECK(sendmsg(sv[0], &m, 0) == 1, "two SCM_RIGHTS records in one message");
    g = recv_fds(sv[1], buf, sizeof buf, CMSG_SPACE(sizeof(int) * 3), 0);
    CHECK(g.nfds == 3 && g.controllen == CMSG_SPACE(sizeof(int) * 3), "arrive as one record of three (%zu)", g.controllen);
    for (int i = 0; i < g.nfds; i++)
        close(g.fds[i]);
    close(p[0]);
    close(p[1]);
    close(f);
    close(null);
    unlink(path);
    close(sv[0]);
    close(sv[1]);
}

static void in_the_stream(void)
{
    int sv[2], p[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    pipe(p);
    send(sv[0], "aaa", 3, 0);
    send_fds(sv[0], "bbb", 3, &p[0], 1);
    send(sv[0], "ccc", 3, 0);
    char buf[64];
    struct got g = recv_fds(sv[1], buf, sizeof buf, CMSG_SPACE(sizeof(int)), 0);
    CHECK(g.n == 6 && memcmp(buf, "aaabbb", 6) == 0 && g.nfds == 1,
          "a receive takes the bytes before the rights and theirs, and stops (%zd)", g.n);
    close(g.fds[0]);
    g = recv_fds(sv[1], buf, sizeof buf, CMSG_SPACE(sizeof(int)), 0);
    CHECK(g.n == 3 && g.nfds == 0 && g.controllen == 0, "the next gets the rest, no rights (%zd)", g.n);

    send_fds(sv[0], "hello", 5, &p[0], 1);
    send(sv[0], "!", 1, 0);
    g = recv_fds(sv[1], buf, 2, CMSG_SPACE(sizeof(int)), 0);
    CHECK(g.n == 2 && g.nfds == 1, "a short receive of the message gets its rights");
    close(g.fds[0]);
    g = recv_fds(sv[1], buf, sizeof buf, CMSG_SPACE(sizeof(int)), 0);
    CHECK(g.n == 4 && g.nfds == 0, "the rest of it, and what follows, without them (%zd)", g.n);

    send_fds(sv[0], "peek", 4, &p[0], 1);
    g = recv_fds(sv[1], buf, sizeof buf, CMSG_SPACE(sizeof(int)), MSG_PEEK);
    CHECK(g.n == 4 && g.nfds == 1, "a peek gets the rights as a descriptor");
    int peeked = g.fds[0];
    g = recv_fds(sv[1], buf, sizeof buf, CMSG_SPACE(sizeof(int)), 0);
    CHECK(g.n == 4 && g.nfds == 1 && g.fds[0] == peeked + 1, "and the receive after it, another");
    close(peeked);
    close(g.fds[0]);

    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    CHECK(send_fds(sv[0], "", 0, &p[0], 1) == 0, "a stream sendmsg of no bytes sends 0");
    g = recv_fds(sv[1], buf, sizeof buf, CMSG_SPACE(sizeof(int)), 0);
    CHECK(g.n == -1 && errno == EAGAIN, "and nothing: its rights are not sent");

    send_fds(sv[0], "r", 1, &p[0], 1);
    CHECK(read(sv[1], buf, sizeof buf) == 1, "read(2) of a message with rights");
    CHECK(recv(sv[1], buf, sizeof buf, 0) == -1 && errno == EAGAIN, "closes them: nothing more");
    close(p[0]);
    close(p[1]);
    close(sv[0]);
    close(sv[1]);
}

static void datagrams(void)
{
    int sv[2], p[2];
    socketpair(AF_UNIX, SOCK_DGRAM, 0, sv);
    pipe(p);
    CHECK(send_fds(sv[0], "", 0, &p[1], 1) == 0, "an empty datagram with a descriptor");
    char buf[16];
    struct got g = recv_fds(sv[1], buf, sizeof buf, CMSG_SPACE(sizeof(int)), MSG_PEEK);
    CHECK(g.n == 0 && g.nfds == 1, "a peek of it gets the descriptor");
    close(g.fds[0]);
    g = recv_fds(sv[1], buf, sizeof buf, CMSG_SPACE(sizeof(int)), 0);
    CHECK(g.n == 0 && g.nfds == 1, "so does the receive");
    close(p[1]);
    CHECK(!writers_gone(p[0]), "the received write end holds the pipe open");
    close(g.fds[0]);
    CHECK(writers_gone(p[0]), "until it is closed");

    /* A datagram truncated to the buffer keeps its rights. */
    pipe(p);
    send_fds(sv[0], "0123456789", 10, &p[1], 1);
    g = recv_fds(sv[1], buf, 4, CMSG_SPACE(sizeof(int)), 0);
    CHECK(g.n == 4 && g.nfds == 1 && g.flags == MSG_TRUNC, "a cut datagram: MSG_TRUNC and its rights (%#x)", g.flags);
    close(g.fds[0]);
    close(p[1]);
    CHECK(writers_gone(p[0]), "nothing else holds the write end");
    close(p[0]);
    close(sv[0]);
    close(sv[1]);
}

static void short_control(void)
{
    int sv[2], p[2], q[2];
    socketpair(AF_UNIX, SOCK_DGRAM, 0, sv);
    pipe(p);
    pipe(q);
    char buf[16];
    int fds[3] = {p[0], p[0], q[1]};
    send_fds(sv[0], "m", 1, fds, 3);
    close(q[1]);
    /* CMSG_SPACE(4) holds two: (24 - 16) / 4. */
    struct got g = recv_fds(sv[1], buf, sizeof buf, CMSG_SPACE(sizeof(int)), 0);
    CHECK(g.nfds == 2 && (g.flags & MSG_CTRUNC), "room for two of three: two, MSG_CTRUNC (%d, %#x)", g.nfds, g.flags);
    CHECK(g.controllen == CMSG_SPACE(sizeof(int)), "msg_controllen %zu", g.controllen);
    CHECK(writers_gone(q[0]), "the third, a write end, was closed");
    close(g.fds[0]);
    close(g.fds[1]);

    struct {
        long room;
        const char *what;
    } rooms[] = {
        {-1, "no control buffer"}, {0, "a length of 0"}, {16, "a header's length"},
        {17, "a header and a byte"}, {20, "a header and one int"}, {27, "a header and 11 bytes"},
    };
    int base = lowest_free();
    for (unsigned i = 0; i < sizeof rooms / sizeof rooms[0]; i++) {
        int fds2[3] = {p[0], p[0], p[0]};
        send_fds(sv[0], "m", 1, fds2, 3);
        int want = lowest_free();
        g = recv_fds(sv[1], buf, sizeof buf, rooms[i].room, 0);
        CHECK(g.n == 1, "%s: %d descriptors, msg_flags %#x, msg_controllen %zu, at the lowest free: %d",
              rooms[i].what, g.nfds, g.flags, g.controllen, g.nfds == 0 || g.fds[0] == want);
        for (int j = 0; j < g.nfds; j++)
            close(g.fds[j]);
    }
    CHECK(lowest_free() == base, "no descriptor was left behind");
    close(p[0]);
    close(p[1]);
    close(q[0]);
    close(sv[0]);
    close(sv[1]);
}

static void in_flight_to_a_closed_socket(void)
{
    int sv[2], p[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    pipe(p);
    send_fds(sv[0], "x", 1, &p[1], 1);
    close(p[1]);
    CHECK(!writers_gone(p[0]), "a write end in flight holds the pipe open after its sender closed it");
    close(sv[1]);
    close(sv[0]);
    CHECK(writers_gone(p[0]), "the receiving socket's close closes it");
    close(p[0]);

    /* A socket in flight to itself's peer, carrying a pipe's end. */
    int a[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    socketpair(AF_UNIX, SOCK_STREAM, 0, a);
    pipe(p);
    send_fds(a[0], "y", 1, &p[1], 1);
    close(p[1]);
    send_fds(sv[0], "z", 1, &a[1], 1);
    close(a[0]);
    close(a[1]);
    CHECK(!writers_gone(p[0]), "a socket in flight keeps what is in flight to it");
    close(sv[0]);
    close(sv[1]);
    CHECK(writers_gone(p[0]), "closing the chain closes it all");
    close(p[0]);
}

/* Sends "c" with credentials `c` (NULL: none passed); the result or -errno. */
static long send_creds(int s, const struct ucred *c, size_t len)
{
    char ctl[CMSG_SPACE(sizeof(struct ucred))];
    memset(ctl, 0, sizeof ctl);
    struct iovec iov = {"c", 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (c) {
        m.msg_control = ctl;
        m.msg_controllen = CMSG_SPACE(sizeof *c);
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_CREDENTIALS;
        h->cmsg_len = len;
        memcpy(CMSG_DATA(h), c, sizeof *c);
    }
    long r = sendmsg(s, &m, 0);
    return r < 0 ? -errno : r;
}

static void credentials(void)
{
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    int on = 1;
    setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
    pid_t me = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        send(sv[0], "aa", 2, 0);
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    send(sv[0], "bb", 2, 0);
    char buf[16];
    long room = CMSG_SPACE(sizeof(struct ucred));
    struct got g = recv_fds(sv[1], buf, sizeof buf, room, 0);
    CHECK(g.n == 2 && g.has_creds && g.creds.pid == pid && g.creds.uid == 0 && g.creds.gid == 0,
          "SO_PASSCRED: the child's bytes alone, with its pid, uid %u, gid %u", g.creds.uid, g.creds.gid);
    CHECK(g.controllen == CMSG_SPACE(sizeof(struct ucred)), "msg_controllen %zu", g.controllen);
    g = recv_fds(sv[1], buf, sizeof buf, room, 0);
    CHECK(g.n == 2 && g.has_creds && g.creds.pid == me, "then the parent's, with its pid");
    g = recv_fds(sv[1], buf, sizeof buf, 20, MSG_DONTWAIT);
    CHECK(g.n == -1 && errno == EAGAIN, "then nothing");

    struct ucred c = {me, 0, 0};
    CHECK(send_creds(sv[0], &c, CMSG_LEN(sizeof c)) == 1, "a sender passes its own credentials");
    g = recv_fds(sv[1], buf, sizeof buf, room, 0);
    CHECK(g.has_creds && g.creds.pid == me, "they arrive");
    pid = fork();
    if (pid == 0) {
        pause();
        _exit(0);
    }
    c = (struct ucred){pid, 1000, 1000};
    CHECK(send_creds(sv[0], &c, CMSG_LEN(sizeof c)) == 1, "root passes another process's pid and other ids");
    g = recv_fds(sv[1], buf, sizeof buf, room, 0);
    CHECK(g.has_creds && g.creds.pid == pid && g.creds.uid == 1000 && g.creds.gid == 1000, "they arrive too");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    c = (struct ucred){0x3ffffff0, 0, 0};
    CHECK(send_creds(sv[0], &c, CMSG_LEN(sizeof c)) == -ESRCH, "a pid that is no process's: ESRCH");
    c = (struct ucred){me, (uid_t)-1, 0};
    CHECK(send_creds(sv[0], &c, CMSG_LEN(sizeof c)) == -EINVAL, "uid -1: EINVAL");
    c = (struct ucred){me, 0, (gid_t)-1};
    CHECK(send_creds(sv[0], &c, CMSG_LEN(sizeof c)) == -EINVAL, "gid -1: EINVAL");
    c = (struct ucred){me, 0, 0};
    CHECK(send_creds(sv[0], &c, CMSG_LEN(8)) == -EINVAL, "a record of the wrong length: EINVAL");

    /* Short room: the record cut, MSG_CTRUNC. */
    send(sv[0], "d", 1, 0);
    g = recv_fds(sv[1], buf, sizeof buf, 20, 0);
    CHECK(g.n == 1 && (g.flags & MSG_CTRUNC) && g.controllen == 20,
          "20 bytes of room: the record cut, msg_flags %#x, msg_controllen %zu", g.flags, g.controllen);
    send(sv[0], "e", 1, 0);
    g = recv_fds(sv[1], buf, sizeof buf, -1, 0);
    CHECK(g.n == 1 && g.flags == MSG_CTRUNC, "no control buffer: MSG_CTRUNC (%#x)", g.flags);

    /* Without SO_PASSCRED: nothing, and two senders' bytes join. */
    on = 0;
    setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
    pid = fork();
    if (pid == 0) {
        send(sv[0], "aa", 2, 0);
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    send(sv[0], "bb", 2, 0);
    g = recv_fds(sv[1], buf, sizeof buf, room, 0);
    CHECK(g.n == 4 && !g.has_creds && g.controllen == 0, "without SO_PASSCRED: both senders' bytes, no credentials");

    /* Credentials and rights together: credentials first. */
    setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &(int){1}, sizeof(int));
    int zero = 0;
    send_fds(sv[0], "f", 1, &zero, 1);
    g = recv_fds(sv[1], buf, sizeof buf, room + CMSG_SPACE(sizeof(int)), 0);
    CHECK(g.has_creds && g.nfds == 1 && g.controllen == room + CMSG_SPACE(sizeof(int)),
          "credentials and rights, %zu bytes", g.controllen);
    close(g.fds[0]);
    close(sv[0]);
    close(sv[1]);

    /* Datagrams carry them too. */
    socketpair(AF_UNIX, SOCK_DGRAM, 0, sv);
    setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &(int){1}, sizeof(int));
    send(sv[0], "g", 1, 0);
    g = recv_fds(sv[1], buf, sizeof buf, room, 0);
    CHECK(g.n == 1 && g.has_creds && g.creds.pid == me, "a datagram's credentials");
    close(sv[0]);
    close(sv[1]);
}

static int big_sv[2], victim;

static void *send_big(void *arg)
{
    static char big[1 << 20];
    memset(big, 'b', sizeof big);
    return (void *)send_fds(big_sv[0], big, sizeof big, &victim, 1);
}

/* A long stream sendmsg blocks after its first bytes; the sender closes
 * the descriptor it passed meanwhile; the receiver still gets it. */
static void long_send(void)
{
    int p[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, big_sv);
    pipe(p);
    victim = p[1];
    pthread_t t;
    pthread_create(&t, NULL, send_big, NULL);
    usleep(20000);
    close(victim);
    static char buf[65536];
    long got = 0;
    int fds = 0, fd = -1;
    while (got < (1 << 20)) {
        struct got g = recv_fds(big_sv[1], buf, sizeof buf, CMSG_SPACE(sizeof(int)), 0);
        if (g.n <= 0)
            break;
        got += g.n;
        fds += g.nfds;
        if (g.nfds)
            fd = g.fds[0];
    }
    void *sent;
    pthread_join(t, &sent);
    CHECK((long)sent == 1 << 20 && got == 1 << 20, "a 1 MiB sendmsg with rights that blocks midway sends it all (%ld)", (long)sent);
    CHECK(fds == 1 && write(fd, "w", 1) == 1 && read(p[0], buf, 1) == 1 && buf[0] == 'w',
          "its rights arrive once, though the sender closed the descriptor while it waited");
    close(fd);
    close(p[0]);
    close(big_sv[0]);
    close(big_sv[1]);
}

static struct ucred peercred(int s)
{
    struct ucred c = {-1, 0, 0};
    socklen_t len = sizeof c;
    getsockopt(s, SOL_SOCKET, SO_PEERCRED, &c, &len);
    return c;
}

static void peer_credentials(void)
{
    int sv[2];
    pid_t me = getpid();
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    struct ucred c = peercred(sv[0]);
    CHECK(c.pid == me && c.uid == 0 && c.gid == 0 && peercred(sv[1]).pid == me,
          "SO_PEERCRED of a socketpair's ends: its maker, uid %u, gid %u", c.uid, c.gid);
    pid_t pid = fork();
    if (pid == 0)
        _exit(peercred(sv[1]).pid == me ? 0 : 1);
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a child that inherits an end sees its maker too");
    close(sv[0]);
    close(sv[1]);

    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    c = peercred(l);
    CHECK(c.pid == 0 && c.uid == (uid_t)-1 && c.gid == (gid_t)-1, "an unconnected socket's: pid %d, uid %d, gid %d", c.pid, (int)c.uid, (int)c.gid);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, "\0rewind-scm-peer", 16);
    socklen_t alen = offsetof(struct sockaddr_un, sun_path) + 16;
    bind(l, (struct sockaddr *)&a, alen);
    setsockopt(l, SOL_SOCKET, SO_PASSCRED, &(int){1}, sizeof(int));
    listen(l, 1);
    pid = fork();
    if (pid == 0) {
        int s = socket(AF_UNIX, SOCK_STREAM, 0);
        connect(s, (struct sockaddr *)&a, alen);
        int ok = peercred(s).pid == me;
        int q[2];
        pipe(q);
        write(q[1], "via connect", 11);
        send_fds(s, "c", 1, &q[0], 1);
        _exit(ok ? 0 : 1);
    }
    int conn = accept(l, NULL, NULL);
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a client's: the listener's");
    CHECK(peercred(conn).pid == pid, "the accepted socket's: the client's");
    int on = 0;
    socklen_t len = sizeof on;
    getsockopt(conn, SOL_SOCKET, SO_PASSCRED, &on, &len);
    CHECK(on == 1, "which has the listener's SO_PASSCRED");
    char buf[4];
    struct got g = recv_fds(conn, buf, sizeof buf, CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int)), 0);
    CHECK(g.n == 1 && g.has_creds && g.creds.pid == pid, "and so gets the client's credentials");
    char text[16] = {0};
    CHECK(g.nfds == 1 && read(g.fds[0], text, sizeof text) == 11 && !strcmp(text, "via connect"),
          "and the pipe end it passed over the connection");
    close(g.fds[0]);
    close(conn);

    /* A datagram socket bound to a name, and a child's sendto with rights. */
    int d = socket(AF_UNIX, SOCK_DGRAM, 0);
    memcpy(a.sun_path, "\0rewind-scm-dgrm", 16);
    bind(d, (struct sockaddr *)&a, alen);
    pid = fork();
    if (pid == 0) {
        int s = socket(AF_UNIX, SOCK_DGRAM, 0);
        int q[2];
        pipe(q);
        write(q[1], "via sendto", 10);
        char ctl[CMSG_SPACE(sizeof(int))] = {0};
        struct iovec iov = {"d", 1};
        struct msghdr m = {.msg_name = &a, .msg_namelen = alen, .msg_iov = &iov, .msg_iovlen = 1,
                           .msg_control = ctl, .msg_controllen = sizeof ctl};
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(h), &q[0], sizeof(int));
        _exit(sendmsg(s, &m, 0) == 1 ? 0 : 1);
    }
    waitpid(pid, &st, 0);
    g = recv_fds(d, buf, sizeof buf, CMSG_SPACE(sizeof(int)), 0);
    memset(text, 0, sizeof text);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && g.nfds == 1 && read(g.fds[0], text, sizeof text) == 10 &&
              !strcmp(text, "via sendto"),
          "a child's sendto to a bound datagram socket passes a pipe end");
    close(g.fds[0]);
    close(d);
    close(l);
    int t = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(peercred(t).pid == 0 && peercred(t).uid == (uid_t)-1, "a TCP socket's: none");
    close(t);
}

/* sendmsg with a control buffer of `len` bytes at `ctl`: the result or -errno. */
static long send_ctl(int s, void *ctl, size_t len)
{
    struct iovec iov = {"h", 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = len};
    long r = sendmsg(s, &m, MSG_DONTWAIT);
    return r < 0 ? -errno : r;
}

/* A record at `at`: its length, level and type, and its data's first int. */
static void record(char *at, uint64_t len, int level, int type, int fd)
{
    struct cmsghdr h = {.cmsg_len = len, .cmsg_level = level, .cmsg_type = type};
    memcpy(at, &h, sizeof h);
    memcpy(at + sizeof h, &fd, sizeof fd);
}

static void drain(int s)
{
    char buf[16];
    struct got g;
    do {
        g = recv_fds(s, buf, sizeof buf, sizeof(int) * 253 + 64, MSG_DONTWAIT);
        for (int i = 0; i < g.nfds; i++)
            close(g.fds[i]);
    } while (g.n >= 0);
}

static void hostile(void)
{
    int sv[2], p[2];
    socketpair(AF_UNIX, SOCK_DGRAM, 0, sv);
    pipe(p);
    static char ctl[CMSG_SPACE(sizeof(int) * 300) + 64];
    memset(ctl, 0, sizeof ctl);
    record(ctl, 8, SOL_SOCKET, SCM_RIGHTS, p[0]);
    CHECK(send_ctl(sv[0], ctl, 64) == -EINVAL, "cmsg_len 8, shorter than a header: EINVAL");
    record(ctl, 100, SOL_SOCKET, SCM_RIGHTS, p[0]);
    CHECK(send_ctl(sv[0], ctl, 64) == -EINVAL, "cmsg_len past msg_controllen: EINVAL");
    record(ctl, 1ULL << 63, SOL_SOCKET, SCM_RIGHTS, p[0]);
    CHECK(send_ctl(sv[0], ctl, 64) == -EINVAL, "cmsg_len 2^63: EINVAL");
    record(ctl, CMSG_LEN(4), SOL_SOCKET, 99, p[0]);
    CHECK(send_ctl(sv[0], ctl, 64) == -EINVAL, "an unknown SOL_SOCKET type: EINVAL");
    record(ctl, CMSG_LEN(4), 0, 1, p[0]);
    CHECK(send_ctl(sv[0], ctl, CMSG_SPACE(4)) == 1, "another level's record is passed over");
    CHECK(send_ctl(sv[0], ctl, 64) == -EINVAL, "the zeros after it are a record of length 0: EINVAL");
    record(ctl, CMSG_LEN(4), SOL_SOCKET, SCM_RIGHTS, -1);
    CHECK(send_ctl(sv[0], ctl, CMSG_SPACE(4)) == -EBADF, "descriptor -1: EBADF");
    record(ctl, CMSG_LEN(4), SOL_SOCKET, SCM_RIGHTS, 999);
    CHECK(send_ctl(sv[0], ctl, CMSG_SPACE(4)) == -EBADF, "a descriptor that is not open: EBADF");
    record(ctl, CMSG_LEN(0), SOL_SOCKET, SCM_RIGHTS, 0);
    CHECK(send_ctl(sv[0], ctl, CMSG_SPACE(0)) == 1, "a record of no descriptors: sent without any");
    record(ctl, CMSG_LEN(4) + 3, SOL_SOCKET, SCM_RIGHTS, p[0]);
    CHECK(send_ctl(sv[0], ctl, CMSG_SPACE(8)) == 1, "cmsg_len 23: one descriptor, the odd bytes ignored");
    record(ctl, CMSG_LEN(4), SOL_SOCKET, SCM_RIGHTS, p[0]);
    CHECK(send_ctl(sv[0], ctl, CMSG_SPACE(4) + 15) == 1, "trailing bytes shorter than a header are ignored");
    CHECK(send_ctl(sv[0], NULL, 64) == -EFAULT, "a null control buffer of 64 bytes: EFAULT");
    CHECK(send_ctl(sv[0], ctl, 1UL << 40) == -ENOBUFS, "msg_controllen 2^40: ENOBUFS");
    CHECK(send_ctl(sv[0], ctl, 1 << 20) == -ENOBUFS, "msg_controllen 1 MiB: ENOBUFS");
    CHECK(send_ctl(sv[0], ctl, 10) == 1, "msg_controllen 10, less than a header: no records");
    drain(sv[1]);

    /* SCM_MAX_FD: 253 descriptors go, 254 do not, nor 200 + 100 in two records. */
    int many[254];
    for (int i = 0; i < 254; i++)
        many[i] = p[0];
    CHECK(send_fds(sv[0], "m", 1, many, 253) == 1, "253 descriptors in one message");
    char buf[16];
    int before[253];
    free_fds(before, 253);
    struct got g = recv_fds(sv[1], buf, sizeof buf, CMSG_SPACE(sizeof(int) * 253), 0);
    CHECK(g.nfds == 253 && lowest_n(g.fds, 253, before), "arrive as 253 descriptors, the lowest free");
    for (int i = 0; i < g.nfds; i++)
        close(g.fds[i]);
    record(ctl, CMSG_LEN(sizeof(int) * 254), SOL_SOCKET, SCM_RIGHTS, p[0]);
    memcpy(CMSG_DATA((struct cmsghdr *)ctl), many, sizeof(int) * 254);
    CHECK(send_ctl(sv[0], ctl, CMSG_SPACE(sizeof(int) * 254)) == -EINVAL, "254: EINVAL");
    record(ctl, CMSG_LEN(sizeof(int) * 200), SOL_SOCKET, SCM_RIGHTS, p[0]);
    memcpy(CMSG_DATA((struct cmsghdr *)ctl), many, sizeof(int) * 200);
    char *second = ctl + CMSG_SPACE(sizeof(int) * 200);
    record(second, CMSG_LEN(sizeof(int) * 100), SOL_SOCKET, SCM_RIGHTS, p[0]);
    memcpy(second + CMSG_LEN(0), many, sizeof(int) * 100);
    CHECK(send_ctl(sv[0], ctl, CMSG_SPACE(sizeof(int) * 200) + CMSG_SPACE(sizeof(int) * 100)) == -EINVAL,
          "200 and 100 in two records: EINVAL");

    /* A failed send gives back what it took: the write end closes. */
    int q[2];
    pipe(q);
    int two[2] = {q[1], -1};
    CHECK(send_fds(sv[0], "n", 1, two, 2) == -1 && errno == EBADF, "a good descriptor, then -1: EBADF");
    close(q[1]);
    CHECK(writers_gone(q[0]), "and the good one's reference was given back");
    close(q[0]);

    /* An internet socket takes no rights, and passes them over. */
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in lo = {.sin_family = AF_INET, .sin_port = htons(9), .sin_addr.s_addr = htonl(0x7f000001)};
    connect(u, (struct sockaddr *)&lo, sizeof lo);
    record(ctl, CMSG_LEN(4), SOL_SOCKET, SCM_RIGHTS, p[0]);
    CHECK(send_ctl(u, ctl, CMSG_SPACE(4)) == 1, "SCM_RIGHTS on a UDP socket is passed over");
    record(ctl, CMSG_LEN(4), SOL_SOCKET, 99, p[0]);
    CHECK(send_ctl(u, ctl, CMSG_SPACE(4)) == -EINVAL, "an unknown SOL_SOCKET type there: EINVAL");
    close(u);

    /* Pseudo-random records: lengths, levels, types and descriptors; the
     * outcomes counted by errno, and the descriptors received summed. */
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    int count[140] = {0};
    long fds_got = 0;
    int base = lowest_free();
    for (int round = 0; round < 3000; round++) {
        memset(ctl, 0, 512);
        size_t at = 0, len = 0;
        int records = 1 + round % 3;
        for (int r = 0; r < records; r++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            static const uint64_t lens[] = {0, 1, 15, 16, 17, 20, 24, 27, 28, 32, 36, 64, 200, 1ULL << 32, ~0ULL};
            uint64_t clen = lens[x % 15];
            int level = (x >> 8) % 4 == 0 ? 0 : SOL_SOCKET;
            /* No SCM_CREDENTIALS: pids differ natively. */
            static const int types[] = {0, SCM_RIGHTS, 3, SCM_RIGHTS};
            int type = types[(x >> 12) % 4];
            int fd = (int)((x >> 16) % 8) - 2;
            if (fd == 5)
                fd = p[0];
            record(ctl + at, clen, level, type, fd);
            at += CMSG_SPACE(sizeof(int));
            len = at;
        }
        size_t room = (x >> 24) % 3 == 0 ? len - (x >> 28) % 16 : len;
        long r = send_ctl(sv[0], ctl, room);
        count[r >= 0 ? 0 : -r]++;
        g = recv_fds(sv[1], buf, sizeof buf, (x >> 32) % 48, MSG_DONTWAIT);
        if (g.n >= 0) {
            fds_got += g.nfds;
            count[g.flags & MSG_CTRUNC ? 131 : 130]++;
        }
        for (int i = 0; i < g.nfds; i++)
            close(g.fds[i]);
    }
    CHECK(lowest_free() == base, "3000 random records: sent %d, EINVAL %d, EBADF %d, ESRCH %d, "
          "received %d (%d cut), %ld descriptors",
          count[0], count[EINVAL], count[EBADF], count[ESRCH], count[130] + count[131], count[131], fds_got);
    close(p[0]);
    close(p[1]);
    close(sv[0]);
    close(sv[1]);
}

int main(void)
{
    rights_from_a_child();
    several_at_once();
    in_the_stream();
    datagrams();
    short_control();
    in_flight_to_a_closed_socket();
    credentials();
    peer_credentials();
    long_send();
    hostile();
    if (!failures)
        printf("all passed\n");
    return failures != 0;
}
