/* proc-net: sockets and POSIX record locks between processes. A forked
 * child is a TCP server on 127.0.0.1 (an ephemeral port, told to the
 * parent through a pipe) and a Unix-socket server at a path; the parent is
 * the client of both, with a half-close the server sees as end of file.
 * Meanwhile the parent holds a write lock on bytes 0-9 of a file: the
 * child's F_SETLK is EAGAIN, F_GETLK names the parent, a lock on bytes
 * 10-19 is granted, and its F_SETLKW waits until the parent unlocks.
 * Prints `ok ...` lines, then `all passed` (or FAIL lines). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int failed;

static void check(int ok, const char *who, const char *what)
{
    printf("%s %s: %s\n", ok ? "ok" : "FAIL", who, what);
    fflush(stdout);
    failed |= !ok;
}

static int lock(int fd, int cmd, short type, off_t start, off_t len, struct flock *out)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
    int r = fcntl(fd, cmd, &fl);
    if (out)
        *out = fl;
    return r;
}

/* Reads until end of file: how many bytes, into buf. */
static int read_all(int fd, char *buf, int room)
{
    int n = 0, r;
    while (n < room && (r = read(fd, buf + n, room - n)) > 0)
        n += r;
    return n;
}

static void child(const char *file, const char *unix_path, int tell, int go)
{
    const char *me = "child";
    int fd = open(file, O_RDWR);
    struct flock fl;
    check(lock(fd, F_SETLK, F_WRLCK, 0, 10, NULL) == -1 && (errno == EAGAIN || errno == EACCES),
          me, "F_SETLK on the parent's range: EAGAIN");
    check(lock(fd, F_GETLK, F_WRLCK, 5, 1, &fl) == 0 && fl.l_type == F_WRLCK &&
              fl.l_pid == getppid() && fl.l_start == 0 && fl.l_len == 10,
          me, "F_GETLK names the parent's lock");
    check(lock(fd, F_SETLK, F_WRLCK, 10, 10, NULL) == 0, me, "a lock beside it is granted");

    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    check(bind(ls, (struct sockaddr *)&a, sizeof a) == 0 && listen(ls, 4) == 0 &&
              getsockname(ls, (struct sockaddr *)&a, &alen) == 0 && a.sin_port != 0,
          me, "a TCP listener on 127.0.0.1, an ephemeral port");
    int us = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    strncpy(un.sun_path, unix_path, sizeof un.sun_path - 1);
    check(bind(us, (struct sockaddr *)&un, sizeof un) == 0 && listen(us, 1) == 0, me,
          "a Unix listener at a path");
    unsigned short port = ntohs(a.sin_port);
    write(tell, &port, sizeof port);

    struct sockaddr_in peer;
    socklen_t plen = sizeof peer;
    int c = accept(ls, (struct sockaddr *)&peer, &plen);
    check(c >= 0 && peer.sin_addr.s_addr == htonl(INADDR_LOOPBACK), me,
          "accepted the parent from 127.0.0.1");
    char buf[256];
    int n = read_all(c, buf, sizeof buf);
    check(n == 4 && !memcmp(buf, "ping", 4), me, "read ping, then the half-close's end of file");
    check(write(c, "pong", 4) == 4, me, "answered pong after the half-close");
    close(c);

    c = accept(us, NULL, NULL);
    n = read(c, buf, sizeof buf);
    check(n == 5 && !memcmp(buf, "hello", 5) && write(c, "olleh", 5) == 5, me,
          "echoed over the Unix socket");
    close(c);

    char g;
    read(go, &g, 1);
    /* The parent unlocks once it has read this process's answers: wait for it. */
    check(lock(fd, F_SETLKW, F_WRLCK, 0, 10, NULL) == 0, me, "F_SETLKW got the range once free");
    check(pwrite(fd, "child", 5, 0) == 5, me, "wrote under its lock");
    _exit(failed);
}

int main(void)
{
    const char *me = "parent";
    char file[] = "/tmp/proc-net-XXXXXX";
    int fd = mkstemp(file);
    char unix_path[64];
    snprintf(unix_path, sizeof unix_path, "%s.sock", file);
    check(fd >= 0 && write(fd, "....................", 20) == 20, me, "a file of 20 bytes");
    check(lock(fd, F_SETLK, F_WRLCK, 0, 10, NULL) == 0, me, "a write lock on bytes 0-9");
    int tell[2], go[2];
    pipe(tell);
    pipe(go);
    pid_t kid = fork();
    if (kid == 0) {
        close(tell[0]);
        close(go[1]);
        child(file, unix_path, tell[1], go[0]);
    }
    close(tell[1]);
    close(go[0]);
    unsigned short port = 0;
    check(read(tell[0], &port, sizeof port) == sizeof port && port != 0, me, "the server's port");

    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    check(connect(s, (struct sockaddr *)&a, sizeof a) == 0, me, "connected over TCP");
    check(write(s, "ping", 4) == 4 && shutdown(s, SHUT_WR) == 0, me, "sent ping, half-closed");
    char buf[256];
    int n = read_all(s, buf, sizeof buf);
    check(n == 4 && !memcmp(buf, "pong", 4), me, "read pong, then end of file");
    close(s);

    int u = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    strncpy(un.sun_path, unix_path, sizeof un.sun_path - 1);
    check(connect(u, (struct sockaddr *)&un, sizeof un) == 0 && write(u, "hello", 5) == 5, me,
          "connected over the Unix socket");
    n = read(u, buf, sizeof buf);
    check(n == 5 && !memcmp(buf, "olleh", 5), me, "the echo");
    close(u);

    write(go[1], "g", 1);
    usleep(10000); /* the child waits in F_SETLKW meanwhile */
    check(lock(fd, F_SETLK, F_UNLCK, 0, 10, NULL) == 0, me, "unlocked bytes 0-9");
    int st = 1;
    check(waitpid(kid, &st, 0) == kid && WIFEXITED(st) && WEXITSTATUS(st) == 0, me,
          "the child passed and exited 0");
    n = pread(fd, buf, 20, 0);
    check(n == 20 && !memcmp(buf, "child", 5), me, "the child's write under its lock");
    unlink(unix_path);
    unlink(file);
    if (!failed)
        printf("all passed\n");
    return failed;
}
