// Sockets inside the machine, checked inside the guest: a TCP client and
// server on 127.0.0.1 (and ::1), over a Unix socket at a path, socketpair
// with half-close, UDP datagrams, ECONNREFUSED with no listener (blocking and
// non-blocking), ENETUNREACH for 8.8.8.8, getsockname/getpeername, options.
// Prints `ok: ...` lines, then `all passed` (or FAIL lines).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"

static int listener;

// Echoes one connection back, upper-cased, until end of file.
static void *echo_server(void *arg) {
    (void)arg;
    struct sockaddr_storage peer;
    socklen_t len = sizeof peer;
    int c = accept(listener, (struct sockaddr *)&peer, &len);
    char buf[256];
    ssize_t n;
    while ((n = read(c, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] >= 'a' && buf[i] <= 'z')
                buf[i] -= 32;
        write(c, buf, n);
    }
    close(c);
    return 0;
}

static ssize_t read_all(int fd, char *buf, size_t want) {
    size_t got = 0;
    while (got < want) {
        ssize_t n = read(fd, buf + got, want - got);
        if (n <= 0)
            break;
        got += n;
    }
    return got;
}

int main(void) {
    pthread_t t;
    char buf[256];

    // TCP on 127.0.0.1, the port the kernel chose.
    listener = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    CHECK(setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0, "SO_REUSEADDR");
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(listener, (struct sockaddr *)&sa, sizeof sa) == 0, "bind 127.0.0.1:0");
    socklen_t sl = sizeof sa;
    getsockname(listener, (struct sockaddr *)&sa, &sl);
    CHECK(ntohs(sa.sin_port) >= 32768, "an ephemeral port: %d", ntohs(sa.sin_port));
    CHECK(listen(listener, 4) == 0, "listen");
    int v = 0;
    socklen_t vl = sizeof v;
    CHECK(getsockopt(listener, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl) == 0 && v == 1, "SO_ACCEPTCONN");
    pthread_create(&t, 0, echo_server, 0);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
    CHECK(connect(c, (struct sockaddr *)&sa, sizeof sa) == 0, "connect to 127.0.0.1:%d", ntohs(sa.sin_port));
    CHECK(setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0, "TCP_NODELAY set");
    v = 0;
    CHECK(getsockopt(c, IPPROTO_TCP, TCP_NODELAY, &v, &vl) == 0 && v == 1, "TCP_NODELAY reads back");
    CHECK(getsockopt(c, SOL_SOCKET, SO_TYPE, &v, &vl) == 0 && v == SOCK_STREAM, "SO_TYPE");
    struct sockaddr_in me, peer;
    sl = sizeof me;
    getsockname(c, (struct sockaddr *)&me, &sl);
    sl = sizeof peer;
    getpeername(c, (struct sockaddr *)&peer, &sl);
    CHECK(me.sin_addr.s_addr == htonl(INADDR_LOOPBACK) && ntohs(me.sin_port) >= 32768 && peer.sin_port == sa.sin_port,
          "getsockname %s:%d, getpeername port %d", inet_ntoa(me.sin_addr), ntohs(me.sin_port), ntohs(peer.sin_port));
    CHECK(send(c, "hello server", 12, 0) == 12, "send");
    CHECK(read_all(c, buf, 12) == 12 && memcmp(buf, "HELLO SERVER", 12) == 0, "the server echoes upper-cased");
    CHECK(shutdown(c, SHUT_WR) == 0, "shutdown(SHUT_WR)");
    CHECK(read(c, buf, sizeof buf) == 0, "the server saw end of file and closed: end of file here");
    pthread_join(t, 0);
    close(c);
    close(listener);

    // ::1, dual-stack listener on ::, an IPv4 client.
    listener = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_port = htons(8080), .sin6_addr = IN6ADDR_ANY_INIT};
    CHECK(bind(listener, (struct sockaddr *)&s6, sizeof s6) == 0 && listen(listener, 1) == 0, "listen on [::]:8080");
    pthread_create(&t, 0, echo_server, 0);
    c = socket(AF_INET6, SOCK_STREAM, 0);
    s6.sin6_addr = in6addr_loopback;
    CHECK(connect(c, (struct sockaddr *)&s6, sizeof s6) == 0, "connect to [::1]:8080");
    write(c, "six", 3);
    CHECK(read_all(c, buf, 3) == 3 && memcmp(buf, "SIX", 3) == 0, "echo over IPv6");
    close(c);
    pthread_join(t, 0);
    close(listener);

    // No listener: ECONNREFUSED, at once or (non-blocking) through SO_ERROR.
    c = socket(AF_INET, SOCK_STREAM, 0);
    sa.sin_port = htons(9);
    errno = 0;
    CHECK(connect(c, (struct sockaddr *)&sa, sizeof sa) == -1 && errno == ECONNREFUSED, "connect with no listener: ECONNREFUSED");
    close(c);
    c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    errno = 0;
    CHECK(connect(c, (struct sockaddr *)&sa, sizeof sa) == -1 && errno == EINPROGRESS, "non-blocking: EINPROGRESS");
    struct pollfd p = {c, POLLOUT, 0};
    CHECK(poll(&p, 1, 100) == 1 && (p.revents & POLLERR), "poll says POLLERR");
    v = 0;
    vl = sizeof v;
    CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &v, &vl) == 0 && v == ECONNREFUSED, "SO_ERROR is ECONNREFUSED");
    close(c);

    // Another network: ENETUNREACH.
    c = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in google = {.sin_family = AF_INET, .sin_port = htons(53)};
    inet_pton(AF_INET, "8.8.8.8", &google.sin_addr);
    errno = 0;
    CHECK(connect(c, (struct sockaddr *)&google, sizeof google) == -1 && errno == ENETUNREACH, "8.8.8.8: ENETUNREACH");
    close(c);
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    errno = 0;
    CHECK(sendto(u, "q", 1, 0, (struct sockaddr *)&google, sizeof google) == -1 && errno == ENETUNREACH, "UDP to 8.8.8.8: ENETUNREACH");
    close(u);

    // A Unix stream socket at a path.
    unlink("/tmp/echo.sock");
    mkdir("/tmp", 0777);
    listener = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    strcpy(un.sun_path, "/tmp/echo.sock");
    CHECK(bind(listener, (struct sockaddr *)&un, sizeof un) == 0, "bind /tmp/echo.sock");
    struct stat st;
    CHECK(stat("/tmp/echo.sock", &st) == 0 && S_ISSOCK(st.st_mode), "bind made a socket file");
    errno = 0;
    CHECK(bind(socket(AF_UNIX, SOCK_STREAM, 0), (struct sockaddr *)&un, sizeof un) == -1 && errno == EADDRINUSE, "a second bind: EADDRINUSE");
    listen(listener, 1);
    pthread_create(&t, 0, echo_server, 0);
    c = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(connect(c, (struct sockaddr *)&un, sizeof un) == 0, "connect to /tmp/echo.sock");
    write(c, "unix", 4);
    CHECK(read_all(c, buf, 4) == 4 && memcmp(buf, "UNIX", 4) == 0, "echo over a Unix socket");
    close(c);
    pthread_join(t, 0);
    close(listener);
    errno = 0;
    c = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(connect(c, (struct sockaddr *)&un, sizeof un) == -1 && errno == ECONNREFUSED, "the file stays, nobody listens: ECONNREFUSED");
    close(c);

    // socketpair and half-close.
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    write(sv[0], "ab", 2);
    shutdown(sv[0], SHUT_WR);
    CHECK(read_all(sv[1], buf, 2) == 2 && read(sv[1], buf, 1) == 0, "the peer reads the bytes, then end of file");
    CHECK(write(sv[1], "back", 4) == 4 && read_all(sv[0], buf, 4) == 4 && memcmp(buf, "back", 4) == 0, "the other direction still works");
    close(sv[1]);
    signal(SIGPIPE, SIG_IGN);
    errno = 0;
    CHECK(write(sv[0], "x", 1) == -1 && errno == EPIPE, "writing to a closed peer: EPIPE");
    close(sv[0]);
    CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0, "a datagram socketpair");
    send(sv[0], "one", 3, 0);
    send(sv[0], "two!", 4, 0);
    CHECK(recv(sv[1], buf, sizeof buf, 0) == 3 && recv(sv[1], buf, sizeof buf, 0) == 4, "datagrams keep their boundaries");
    close(sv[0]);
    close(sv[1]);

    // UDP on loopback.
    int srv = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in ua = {.sin_family = AF_INET, .sin_port = htons(5353)};
    ua.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(srv, (struct sockaddr *)&ua, sizeof ua) == 0, "UDP bind 127.0.0.1:5353");
    int cli = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(sendto(cli, "ping", 4, 0, (struct sockaddr *)&ua, sizeof ua) == 4, "sendto");
    struct sockaddr_in from;
    socklen_t fl = sizeof from;
    ssize_t n = recvfrom(srv, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
    CHECK(n == 4 && memcmp(buf, "ping", 4) == 0 && ntohs(from.sin_port) >= 32768, "recvfrom gets it and the sender's port %d", ntohs(from.sin_port));
    CHECK(sendto(srv, "pong", 4, 0, (struct sockaddr *)&from, fl) == 4 && recv(cli, buf, sizeof buf, 0) == 4, "and the reply comes back");
    struct msghdr mh = {0};
    struct iovec iov[2] = {{buf, 2}, {buf + 2, 10}};
    mh.msg_iov = iov;
    mh.msg_iovlen = 2;
    sendto(cli, "scatter", 7, 0, (struct sockaddr *)&ua, sizeof ua);
    CHECK(recvmsg(srv, &mh, 0) == 7 && memcmp(buf, "scatter", 7) == 0, "recvmsg into two buffers");
    close(srv);
    close(cli);

    if (failures == 0)
        printf("all passed\n");
    return failures != 0;
}
