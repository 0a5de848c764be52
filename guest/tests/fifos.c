/* fifos: named pipes (mkfifo, mknod) between processes. The node's type and
 * mode; O_NONBLOCK opens (a reader at once, a writer without a reader is
 * ENXIO); a blocking open waits for the other side, in either order; the
 * bytes, end of file when the writer closes, EPIPE and SIGPIPE when the
 * reader has; O_RDWR never waits; unread bytes go with the last close; an
 * open a signal interrupts is EINTR and leaves no reader behind; a FIFO
 * unlinked while open still works; mknod's other types. Prints `ok ...`
 * lines, one `info ...` line (a device node: EPERM inside Rewind, made
 * natively by root), then `all passed` (or FAIL lines). The same output
 * natively and inside Rewind. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static char dir[] = "/tmp/fifosXXXXXX";

static const char *at(const char *name)
{
    static char buf[4][64];
    static int i;
    char *b = buf[i++ % 4];
    snprintf(b, 64, "%s/%s", dir, name);
    return b;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int reaped_ok(pid_t pid)
{
    int st;
    return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static volatile int pipes_seen, alarms;
static void on_pipe(int s) { (void)s; pipes_seen++; }
static void on_alarm(int s) { (void)s; alarms++; }

int main(void)
{
    struct stat st;
    char buf[64];
    int fd, wfd, n;
    pid_t pid;

    umask(022);
    CHECK(mkdtemp(dir) != NULL, "a fresh directory");
    const char *p = at("p");
    CHECK(mkfifo(p, 0666) == 0, "mkfifo");
    CHECK(stat(p, &st) == 0 && S_ISFIFO(st.st_mode) && (st.st_mode & 0777) == 0644 &&
              st.st_size == 0,
          "stat: a FIFO, mode 0644 after the umask, size 0");
    CHECK(mkfifo(p, 0666) == -1 && errno == EEXIST, "mkfifo again is EEXIST");

    /* O_NONBLOCK opens. */
    CHECK(open(p, O_WRONLY | O_NONBLOCK) == -1 && errno == ENXIO,
          "a non-blocking write-only open without a reader is ENXIO");
    fd = open(p, O_RDONLY | O_NONBLOCK);
    CHECK(fd >= 0, "a non-blocking read-only open goes on at once");
    CHECK(read(fd, buf, sizeof buf) == 0, "its read with no writer is end of file");
    wfd = open(p, O_WRONLY | O_NONBLOCK);
    CHECK(wfd >= 0, "with a reader, a non-blocking write-only open goes on");
    CHECK(read(fd, buf, sizeof buf) == -1 && errno == EAGAIN,
          "a read with a writer and nothing written is EAGAIN");
    CHECK(write(wfd, "abc", 3) == 3, "write 3 bytes");
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    CHECK(poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN), "poll: readable");
    CHECK(fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode), "fstat of the open FIFO: a FIFO");
    CHECK(read(fd, buf, sizeof buf) == 3 && memcmp(buf, "abc", 3) == 0, "read them back");
    close(wfd);
    pfd.revents = 0;
    CHECK(poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLHUP), "poll: POLLHUP once the writer closed");
    close(fd);

    /* A blocking reader waits for a writer that comes later. The clock
     * starts before the fork: natively, a parent scheduled late could find
     * the writer already waiting, and its open would not wait. */
    double t0 = now();
    pid = fork();
    if (pid == 0) {
        usleep(20000);
        int w = open(p, O_WRONLY);
        if (w < 0 || write(w, "hello", 5) != 5)
            _exit(1);
        usleep(20000);
        _exit(0);
    }
    fd = open(p, O_RDONLY);
    CHECK(fd >= 0 && now() - t0 >= 0.015, "a blocking read-only open waits for the writer's open");
    n = read(fd, buf, sizeof buf);
    CHECK(n == 5 && memcmp(buf, "hello", 5) == 0, "the writer's bytes");
    CHECK(read(fd, buf, sizeof buf) == 0, "end of file when the writer exits");
    close(fd);
    CHECK(reaped_ok(pid), "the writer exited 0");

    /* A blocking writer waits for a reader that comes later. */
    t0 = now();
    pid = fork();
    if (pid == 0) {
        usleep(20000);
        int r = open(p, O_RDONLY);
        int got = r < 0 ? -1 : (int)read(r, buf, sizeof buf);
        _exit(got == 4 && memcmp(buf, "ping", 4) == 0 ? 0 : 1);
    }
    wfd = open(p, O_WRONLY);
    CHECK(wfd >= 0 && now() - t0 >= 0.015, "a blocking write-only open waits for the reader's open");
    CHECK(write(wfd, "ping", 4) == 4, "write to the reader");
    CHECK(reaped_ok(pid), "the reader got the bytes");
    signal(SIGPIPE, on_pipe);
    CHECK(write(wfd, "x", 1) == -1 && errno == EPIPE && pipes_seen == 1,
          "a write after the reader closed is EPIPE and raises SIGPIPE");
    close(wfd);

    /* O_RDWR: never waits, both ends. */
    fd = open(p, O_RDWR);
    CHECK(fd >= 0, "O_RDWR opens at once");
    CHECK(write(fd, "both", 4) == 4 && read(fd, buf, sizeof buf) == 4 && memcmp(buf, "both", 4) == 0,
          "O_RDWR writes and reads back");
    CHECK(write(fd, "lost", 4) == 4, "bytes left unread");
    close(fd);
    fd = open(p, O_RDONLY | O_NONBLOCK);
    wfd = open(p, O_WRONLY | O_NONBLOCK);
    CHECK(fd >= 0 && wfd >= 0 && read(fd, buf, sizeof buf) == -1 && errno == EAGAIN,
          "what was unread at the last close is gone");
    close(wfd);
    close(fd);

    /* A signal interrupts a blocking open: EINTR, and no reader stays. */
    struct sigaction sa = {.sa_handler = on_alarm};
    sigaction(SIGALRM, &sa, NULL);
    alarm(1);
    CHECK(open(p, O_RDONLY) == -1 && errno == EINTR && alarms == 1,
          "a signal without SA_RESTART ends a waiting open with EINTR");
    CHECK(open(p, O_WRONLY | O_NONBLOCK) == -1 && errno == ENXIO,
          "the interrupted open left no reader");

    /* O_CREAT and O_TRUNC on a FIFO open it; unlinked, it still works. */
    fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode), "O_CREAT|O_TRUNC opens the FIFO");
    CHECK(unlink(p) == 0 && write(fd, "gone", 4) == 4 && read(fd, buf, 4) == 4,
          "an unlinked FIFO still carries bytes");
    close(fd);

    /* mknod's types. */
    CHECK(mknod(at("q"), S_IFIFO | 0600, 0) == 0 && stat(at("q"), &st) == 0 && S_ISFIFO(st.st_mode),
          "mknod S_IFIFO makes a FIFO");
    CHECK(mknod(at("r"), S_IFREG | 0600, 0) == 0 && stat(at("r"), &st) == 0 && S_ISREG(st.st_mode),
          "mknod S_IFREG makes an empty file");
    CHECK(mknod(at("r0"), 0600, 0) == 0 && stat(at("r0"), &st) == 0 && S_ISREG(st.st_mode),
          "mknod with no type makes a file");
    CHECK(mknod(at("s"), S_IFSOCK | 0600, 0) == 0 && stat(at("s"), &st) == 0 && S_ISSOCK(st.st_mode),
          "mknod S_IFSOCK makes a socket's node");
    CHECK(open(at("s"), O_RDONLY) == -1 && errno == ENXIO, "opening a socket's node is ENXIO");
    CHECK(mknod(at("q"), S_IFIFO | 0600, 0) == -1 && errno == EEXIST, "mknod over a name is EEXIST");
    CHECK(mknod(at("d"), S_IFDIR | 0700, 0) == -1 && errno == EPERM, "mknod S_IFDIR is EPERM");
    CHECK(mknod(at("l"), S_IFLNK | 0700, 0) == -1 && errno == EINVAL, "mknod S_IFLNK is EINVAL");
    int dev = mknod(at("c"), S_IFCHR | 0600, makedev(1, 3));
    printf("info: mknod S_IFCHR: %s\n", dev == 0 ? "made" : strerror(errno));

    unlink(at("q"));
    unlink(at("r"));
    unlink(at("r0"));
    unlink(at("s"));
    unlink(at("c"));
    CHECK(rmdir(dir) == 0, "the directory is empty again");
    if (failures == 0)
        printf("all passed\n");
    return failures != 0;
}
