/* fs-locks: flock, open-file-description and POSIX record locks exclude
 * as on Linux. Two threads that each open the file contend for flock and
 * OFD locks (one blocks until the other lets go); one process's record
 * locks are shared by its descriptors and go when any of them closes.
 * Prints one line per fact; "FAIL" on any surprise. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

/* The file: argv[1], else /tmp/locked. */
static const char *PATH = "/tmp/locked";

static void check(int ok, const char *what)
{
    printf("%s %s\n", ok ? "ok" : "FAIL", what);
}

static void nap(void)
{
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
}

static int order[8];
static int norder;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

static void note(int who)
{
    pthread_mutex_lock(&m);
    order[norder++] = who;
    pthread_mutex_unlock(&m);
}

static void *flock_waiter(void *arg)
{
    (void)arg;
    int fd = open(PATH, O_RDWR);
    check(flock(fd, LOCK_EX | LOCK_NB) == -1 && errno == EWOULDBLOCK,
          "flock LOCK_NB on a file another description holds: EWOULDBLOCK");
    note(2);
    check(flock(fd, LOCK_EX) == 0, "flock LOCK_EX waits, then gets it");
    note(3);
    flock(fd, LOCK_UN);
    close(fd);
    return NULL;
}

static int ofd(int fd, int cmd, short type, off_t start, off_t len)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
    return fcntl(fd, cmd, &fl);
}

static void *ofd_waiter(void *arg)
{
    (void)arg;
    int fd = open(PATH, O_RDWR);
    check(ofd(fd, F_OFD_SETLK, F_WRLCK, 0, 10) == -1 && errno == EAGAIN,
          "F_OFD_SETLK over a held range: EAGAIN");
    check(ofd(fd, F_OFD_SETLK, F_WRLCK, 10, 10) == 0, "F_OFD_SETLK on a free range");
    struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 5, .l_len = 1};
    check(fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_WRLCK && fl.l_start == 0 &&
              fl.l_len == 10 && fl.l_pid == -1,
          "F_OFD_GETLK names the lock in the way");
    note(5);
    check(ofd(fd, F_OFD_SETLKW, F_WRLCK, 0, 10) == 0, "F_OFD_SETLKW waits, then gets it");
    note(6);
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        PATH = argv[1];
    int fd = open(PATH, O_RDWR | O_CREAT | O_TRUNC, 0644);
    write(fd, "0123456789abcdefghij", 20);

    /* flock between two descriptions, one per thread. */
    check(flock(fd, LOCK_EX) == 0, "flock LOCK_EX");
    note(1);
    pthread_t t;
    pthread_create(&t, NULL, flock_waiter, NULL);
    while (norder < 2)
        nap();
    nap();
    check(norder == 2, "the waiter is still waiting");
    /* Printed after the join: the waiter prints as soon as it has the lock,
     * so printing here would race with it (natively too). */
    int unlocked = flock(fd, LOCK_UN) == 0;
    pthread_join(t, NULL);
    check(unlocked, "flock LOCK_UN");
    check(norder == 3 && order[2] == 3, "the waiter got the lock after the unlock");

    /* Open-file-description locks. */
    norder = 0;
    check(ofd(fd, F_OFD_SETLK, F_WRLCK, 0, 10) == 0, "F_OFD_SETLK write lock on 0..10");
    pthread_create(&t, NULL, ofd_waiter, NULL);
    while (norder < 1)
        nap();
    nap();
    check(norder == 1, "the OFD waiter is still waiting");
    unlocked = ofd(fd, F_OFD_SETLK, F_UNLCK, 0, 10) == 0;
    pthread_join(t, NULL);
    check(unlocked, "F_OFD_SETLK unlock");
    check(norder == 2 && order[1] == 6, "the OFD waiter got the range");

    /* POSIX record locks: owned by the process. */
    int a = open(PATH, O_RDWR), b = open(PATH, O_RDWR);
    check(ofd(a, F_SETLK, F_WRLCK, 0, 0) == 0, "F_SETLK write lock on the whole file");
    check(ofd(b, F_SETLK, F_WRLCK, 0, 0) == 0, "the same process locks it again by another descriptor");
    int c = open(PATH, O_RDWR);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    check(fcntl(c, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_WRLCK && fl.l_pid == getpid(),
          "an OFD lock meets the process's record lock");
    close(b);
    fl.l_type = F_WRLCK;
    fl.l_pid = 0;
    check(fcntl(c, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK,
          "closing any descriptor of the file drops the process's record locks");
    check(ofd(c, F_SETLK, F_RDLCK, 0, 0) == 0, "a read lock on a read-write descriptor");
    check(ofd(c, F_SETLK, F_UNLCK, 0, 0) == 0, "and its unlock");
    int ro = open(PATH, O_RDONLY);
    check(ofd(ro, F_SETLK, F_WRLCK, 0, 0) == -1 && errno == EBADF,
          "a write lock needs a descriptor open for writing");
    check(flock(fd, 0) == -1 && errno == EINVAL, "flock with a bad operation: EINVAL");
    check(ofd(c, F_SETLK, 7, 0, 0) == -1 && errno == EINVAL, "a bad lock type: EINVAL");
    close(a);
    close(c);
    close(ro);
    close(fd);
    printf("done\n");
    return 0;
}
