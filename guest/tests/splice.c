/* splice: bytes moved by the kernel. splice from a pipe to a file (at the
 * file's offset and at a given one), from a file into a pipe, from a pipe
 * to a socket and to another pipe, from a socket (stream and datagram)
 * into a pipe; tee leaving the bytes in the first pipe; sendfile from a
 * socket into a pipe (to a file: EINVAL);
 * sendfile to a socket, a large one blocking until a forked reader drains
 * it; a blocking splice waiting for a writer; SPLICE_F_NONBLOCK, end of
 * file, and the errors (no pipe, an offset on a pipe, the same pipe, bad
 * flags). Prints `ok ...` lines, then `all passed` (or FAIL lines); the
 * same natively and inside Rewind. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static int file_is(const char *path, const char *want)
{
    char buf[256];
    int fd = open(path, O_RDONLY);
    int n = read(fd, buf, sizeof buf);
    close(fd);
    return n == (int)strlen(want) && memcmp(buf, want, n) == 0;
}

int main(void)
{
    char buf[256];
    int p[2], q[2], sv[2], n;
    char path[] = "/tmp/spliceXXXXXX";
    int f = mkstemp(path);

    /* A pipe to a file. */
    pipe(p);
    write(p[1], "hello world", 11);
    CHECK(splice(p[0], NULL, f, NULL, 5, 0) == 5, "splice 5 bytes from a pipe to a file");
    CHECK(lseek(f, 0, SEEK_CUR) == 5 && file_is(path, "hello"), "the file has them, its offset moved");
    loff_t off = 20;
    CHECK(splice(p[0], NULL, f, &off, 100, SPLICE_F_MOVE | SPLICE_F_MORE) == 6 && off == 26,
          "the rest at offset 20 (what the pipe held), the offset argument moved");
    CHECK(lseek(f, 0, SEEK_CUR) == 5, "the file's own offset did not");
    CHECK(splice(p[0], NULL, f, NULL, 5, SPLICE_F_NONBLOCK) == -1 && errno == EAGAIN,
          "an empty pipe with SPLICE_F_NONBLOCK: EAGAIN");

    /* A file into a pipe. */
    off = 1;
    CHECK(splice(f, &off, p[1], NULL, 3, 0) == 3 && off == 4, "splice 3 bytes of the file from offset 1 into a pipe");
    CHECK(read(p[0], buf, sizeof buf) == 3 && memcmp(buf, "ell", 3) == 0, "the pipe holds them");
    off = 1000;
    CHECK(splice(f, &off, p[1], NULL, 3, 0) == 0, "past the file's end: 0");

    /* tee: the bytes stay in the first pipe. */
    pipe(q);
    write(p[1], "abc", 3);
    CHECK(tee(p[0], q[1], 100, 0) == 3, "tee copies 3 bytes");
    CHECK(read(q[0], buf, sizeof buf) == 3 && memcmp(buf, "abc", 3) == 0, "the second pipe has them");
    CHECK(read(p[0], buf, sizeof buf) == 3 && memcmp(buf, "abc", 3) == 0, "and the first still does");
    CHECK(tee(p[0], q[1], 100, SPLICE_F_NONBLOCK) == -1 && errno == EAGAIN, "tee of an empty pipe, non-blocking: EAGAIN");
    CHECK(tee(p[0], p[1], 1, 0) == -1 && errno == EINVAL, "tee of a pipe to itself: EINVAL");

    /* A pipe to a pipe, and to a socket. */
    write(p[1], "xyz", 3);
    CHECK(splice(p[0], NULL, q[1], NULL, 2, 0) == 2 && read(q[0], buf, 10) == 2 && memcmp(buf, "xy", 2) == 0,
          "splice between pipes moves 2 of 3");
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    CHECK(splice(p[0], NULL, sv[0], NULL, 10, 0) == 1 && read(sv[1], buf, 10) == 1 && buf[0] == 'z',
          "splice from a pipe to a socket");

    /* A socket's bytes into a pipe, and sendfile from a socket. */
    send(sv[1], "socket bytes", 12, 0);
    CHECK(splice(sv[0], NULL, q[1], NULL, 6, 0) == 6 && read(q[0], buf, 20) == 6 && memcmp(buf, "socket", 6) == 0,
          "splice 6 bytes from a socket into a pipe");
    CHECK(splice(sv[0], NULL, q[1], NULL, 100, 0) == 6 && read(q[0], buf, 20) == 6 && memcmp(buf, " bytes", 6) == 0,
          "then the rest it holds");
    CHECK(splice(sv[0], NULL, q[1], NULL, 100, SPLICE_F_NONBLOCK) == -1 && errno == EAGAIN,
          "an empty socket with SPLICE_F_NONBLOCK: EAGAIN");
    off = 0;
    CHECK(splice(sv[0], &off, q[1], NULL, 1, 0) == -1 && errno == EINVAL, "an offset for the socket: EINVAL");
    int dv[2];
    socketpair(AF_UNIX, SOCK_DGRAM, 0, dv);
    send(dv[1], "datagram", 8, 0);
    send(dv[1], "next", 4, 0);
    CHECK(splice(dv[0], NULL, q[1], NULL, 4, 0) == 4 && read(q[0], buf, 20) == 4 && memcmp(buf, "data", 4) == 0,
          "splice from a datagram socket takes a datagram, cut to the length");
    CHECK(splice(dv[0], NULL, q[1], NULL, 100, 0) == 4 && read(q[0], buf, 20) == 4 && memcmp(buf, "next", 4) == 0,
          "the rest of it is gone: then the next datagram");
    close(dv[0]);
    close(dv[1]);
    /* sendfile from a socket goes into a pipe only (to a file: EINVAL). */
    send(sv[1], "to a pipe", 9, 0);
    CHECK(sendfile(f, sv[0], NULL, 100) == -1 && errno == EINVAL, "sendfile from a socket to a file: EINVAL");
    off = 0;
    CHECK(sendfile(f, sv[0], &off, 100) == -1 && errno == ESPIPE, "sendfile from a socket at an offset: ESPIPE");
    CHECK(sendfile(q[1], sv[0], NULL, 100) == 9 && read(q[0], buf, 20) == 9 && memcmp(buf, "to a pipe", 9) == 0,
          "sendfile from a socket to a pipe");
    CHECK(sendfile(f, p[0], NULL, 1) == -1 && errno == EINVAL, "sendfile from a pipe: EINVAL");

    /* Errors. */
    CHECK(splice(f, NULL, sv[0], NULL, 1, 0) == -1 && errno == EINVAL, "no pipe on either side: EINVAL");
    off = 0;
    CHECK(splice(p[0], &off, f, NULL, 1, 0) == -1 && errno == ESPIPE, "an offset for the pipe: ESPIPE");
    CHECK(splice(p[0], NULL, f, NULL, 1, 0x100) == -1 && errno == EINVAL, "an unknown flag: EINVAL");
    CHECK(splice(p[1], NULL, f, NULL, 1, 0) == -1 && errno == EBADF, "from a pipe's write end: EBADF");

    /* A blocking splice waits for the writer; end of file after it closes. */
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        usleep(10000);
        write(p[1], "later", 5);
        _exit(0);
    }
    close(p[1]);
    lseek(f, 0, SEEK_SET);
    ftruncate(f, 0);
    CHECK(splice(p[0], NULL, f, NULL, 100, 0) == 5 && file_is(path, "later"), "a blocking splice waits for the writer's bytes");
    waitpid(pid, NULL, 0);
    CHECK(splice(p[0], NULL, f, NULL, 100, 0) == 0, "then end of file");

    /* sendfile to a socket: 1 MiB, more than the socket holds, while a
     * child reads it. */
    static char big[1 << 20];
    for (int i = 0; i < (int)sizeof big; i++)
        big[i] = i * 7;
    ftruncate(f, 0);
    pwrite(f, big, sizeof big, 0);
    pid = fork();
    if (pid == 0) {
        close(sv[0]);
        long got = 0, sum = 0;
        while ((n = read(sv[1], buf, sizeof buf)) > 0) {
            for (int i = 0; i < n; i++)
                sum += (unsigned char)buf[i] ^ (unsigned char)big[got + i];
            got += n;
        }
        _exit(got == sizeof big && sum == 0 ? 0 : 1);
    }
    close(sv[1]);
    off = 0;
    long sent = 0;
    while (sent < (long)sizeof big && (n = sendfile(sv[0], f, &off, sizeof big - sent)) > 0)
        sent += n;
    CHECK(sent == sizeof big && off == sizeof big, "sendfile of 1 MiB to a socket");
    close(sv[0]);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the reader got every byte in order");

    unlink(path);
    if (failures == 0)
        printf("all passed\n");
    return failures != 0;
}
