/* fs-files: the file calls on the run's overlay. Writes a file, reads it
 * back, lists a directory, stats, seeks, renames, unlinks, and more; prints
 * one line per check ("ok: ..." or "FAIL (...): ...") and the listing, then
 * "fs-files: N failures". Exits with the number of failures. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "check.h"

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
    const char *msg = "hello, overlay\n";
    char buf[256];

    CHECK(mkdir("/tmp/d", 0755) == 0, "mkdir /tmp/d");
    CHECK(mkdir("/tmp/d", 0755) == -1 && errno == EEXIST, "mkdir again is EEXIST");
    CHECK(chdir("/tmp/d") == 0, "chdir /tmp/d");
    CHECK(getcwd(buf, sizeof buf) && strcmp(buf, "/tmp/d") == 0, "getcwd is /tmp/d");

    int fd = open("a.txt", O_CREAT | O_WRONLY | O_TRUNC, 0644);
    CHECK(fd >= 3, "create a.txt");
    CHECK(write(fd, msg, strlen(msg)) == (ssize_t)strlen(msg), "write a.txt");
    CHECK(close(fd) == 0, "close a.txt");
    CHECK(open("a.txt", O_CREAT | O_EXCL | O_WRONLY, 0644) == -1 && errno == EEXIST,
          "O_EXCL on an existing file is EEXIST");

    fd = open("/tmp/d/a.txt", O_RDONLY);
    CHECK(fd >= 0, "open a.txt again");
    memset(buf, 0, sizeof buf);
    CHECK(read(fd, buf, sizeof buf) == (ssize_t)strlen(msg) && strcmp(buf, msg) == 0,
          "read back what was written");
    CHECK(read(fd, buf, sizeof buf) == 0, "read at the end gives 0");
    CHECK(lseek(fd, 7, SEEK_SET) == 7, "lseek SEEK_SET 7");
    memset(buf, 0, sizeof buf);
    CHECK(read(fd, buf, 7) == 7 && memcmp(buf, "overlay", 7) == 0, "read after lseek");
    CHECK(lseek(fd, -3, SEEK_END) == (off_t)strlen(msg) - 3, "lseek SEEK_END -3");
    CHECK(lseek(fd, 0, SEEK_CUR) == (off_t)strlen(msg) - 3, "lseek SEEK_CUR 0");
    CHECK(lseek(fd, -100, SEEK_SET) == -1 && errno == EINVAL, "lseek before 0 is EINVAL");
    CHECK(pread(fd, buf, 5, 0) == 5 && memcmp(buf, "hello", 5) == 0, "pread at 0");
    CHECK(write(fd, "x", 1) == -1 && errno == EBADF, "write to a read-only fd is EBADF");

    struct stat st;
    CHECK(fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == (off_t)strlen(msg),
          "fstat: a regular file of the right size");
    CHECK((st.st_mode & 0777) == 0644, "mode 0644 (umask 022)");
    CHECK(st.st_uid == 0 && st.st_gid == 0 && st.st_nlink == 1, "owned by root, one link");
    ino_t ino = st.st_ino;
    struct stat st2;
    CHECK(stat("a.txt", &st2) == 0 && st2.st_ino == ino, "stat by path: same inode");
    close(fd);

    fd = open("a.txt", O_WRONLY | O_APPEND);
    CHECK(fd >= 0 && write(fd, "more\n", 5) == 5, "O_APPEND write");
    CHECK(fstat(fd, &st) == 0 && st.st_size == (off_t)strlen(msg) + 5, "size after append");
    int fd2 = dup(fd);
    CHECK(fd2 > fd, "dup");
    CHECK(fcntl(fd2, F_GETFL) & O_APPEND, "F_GETFL shows O_APPEND on the dup");
    CHECK(fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 && fcntl(fd, F_GETFD) == FD_CLOEXEC,
          "F_SETFD/F_GETFD");
    CHECK(fcntl(fd2, F_GETFD) == 0, "close-on-exec is per descriptor");
    CHECK(dup2(fd2, 20) == 20 && fcntl(20, F_GETFD) == 0, "dup2 to 20");
    CHECK(dup3(fd2, 21, O_CLOEXEC) == 21 && fcntl(21, F_GETFD) == FD_CLOEXEC, "dup3 O_CLOEXEC");
    CHECK(fcntl(fd2, F_DUPFD, 30) == 30, "F_DUPFD 30");
    close(fd);
    close(fd2);
    close(20);
    close(21);
    close(30);
    CHECK(close(30) == -1 && errno == EBADF, "close twice is EBADF");

    fd = open("a.txt", O_RDWR);
    CHECK(pwrite(fd, "H", 1, 0) == 1 && lseek(fd, 0, SEEK_CUR) == 0, "pwrite leaves the offset");
    struct iovec iov[2] = {{buf, 5}, {buf + 5, 3}};
    memset(buf, 0, sizeof buf);
    CHECK(readv(fd, iov, 2) == 8 && memcmp(buf, "Hello, o", 8) == 0, "readv after pwrite");
    char w1[] = "AB", w2[] = "CD";
    struct iovec wv[2] = {{w1, 2}, {w2, 2}};
    CHECK(lseek(fd, 0, SEEK_SET) == 0 && writev(fd, wv, 2) == 4, "writev");
    CHECK(ftruncate(fd, 4) == 0 && fstat(fd, &st) == 0 && st.st_size == 4, "ftruncate to 4");
    memset(buf, 0, sizeof buf);
    CHECK(pread(fd, buf, sizeof buf, 0) == 4 && strcmp(buf, "ABCD") == 0, "contents ABCD");
    CHECK(fsync(fd) == 0, "fsync");
    close(fd);

    CHECK(symlink("a.txt", "link") == 0, "symlink link -> a.txt");
    memset(buf, 0, sizeof buf);
    CHECK(readlink("link", buf, sizeof buf) == 5 && strcmp(buf, "a.txt") == 0, "readlink");
    CHECK(lstat("link", &st) == 0 && S_ISLNK(st.st_mode), "lstat sees a link");
    CHECK(stat("link", &st) == 0 && st.st_ino == ino, "stat follows it");
    CHECK(open("link", O_RDONLY | O_NOFOLLOW) == -1 && errno == ELOOP, "O_NOFOLLOW is ELOOP");
    CHECK(link("a.txt", "hard") == 0 && stat("hard", &st) == 0 && st.st_nlink == 2,
          "hard link: two links");

    CHECK(mkdir("sub", 0700) == 0, "mkdir sub");
    fd = open("sub/b.txt", O_CREAT | O_RDWR, 0600);
    CHECK(fd >= 0 && write(fd, "b", 1) == 1 && close(fd) == 0, "create sub/b.txt");
    CHECK(open("sub", O_WRONLY) == -1 && errno == EISDIR, "a directory opened to write is EISDIR");
    CHECK(open("a.txt", O_RDONLY | O_DIRECTORY) == -1 && errno == ENOTDIR, "O_DIRECTORY on a file is ENOTDIR");
    CHECK(open("nope", O_RDONLY) == -1 && errno == ENOENT, "a missing file is ENOENT");
    CHECK(open("a.txt/x", O_RDONLY) == -1 && errno == ENOTDIR, "a file as a directory is ENOTDIR");
    CHECK(access("a.txt", R_OK | W_OK) == 0, "access R_OK|W_OK");
    CHECK(access("a.txt", X_OK) == -1 && errno == EACCES, "access X_OK on 0644 is EACCES");
    CHECK(chmod("a.txt", 0755) == 0 && access("a.txt", X_OK) == 0, "chmod 0755, then X_OK");
    CHECK(faccessat(AT_FDCWD, "sub/b.txt", F_OK, 0) == 0, "faccessat");

    /* The listing: sorted by the monitor; printed sorted here too. */
    DIR *d = opendir(".");
    CHECK(d != NULL, "opendir .");
    char *names[32];
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) && n < 32)
        names[n++] = strdup(e->d_name);
    if (d)
        closedir(d);
    qsort(names, n, sizeof names[0], cmp_names);
    printf("listing:");
    for (int i = 0; i < n; i++)
        printf(" %s", names[i]);
    printf("\n");

    CHECK(rename("a.txt", "c.txt") == 0, "rename a.txt c.txt");
    CHECK(stat("a.txt", &st) == -1 && errno == ENOENT, "the old name is gone");
    CHECK(stat("c.txt", &st) == 0 && st.st_ino == ino, "the new name has the inode");
    CHECK(rename("c.txt", "sub/c.txt") == 0, "rename into sub");
    CHECK(rename("sub", "sub/x") == -1 && errno == EINVAL, "a directory into itself is EINVAL");
    CHECK(rmdir("sub") == -1 && errno == ENOTEMPTY, "rmdir of a full directory is ENOTEMPTY");
    CHECK(unlink("sub") == -1 && errno == EISDIR, "unlink of a directory is EISDIR");

    fd = open("sub/c.txt", O_RDONLY);
    CHECK(unlink("sub/c.txt") == 0, "unlink sub/c.txt");
    memset(buf, 0, sizeof buf);
    CHECK(read(fd, buf, sizeof buf) == 4 && strcmp(buf, "ABCD") == 0, "an unlinked open file still reads");
    close(fd);
    CHECK(unlink("sub/b.txt") == 0 && rmdir("sub") == 0, "empty sub and rmdir it");
    CHECK(unlink("link") == 0 && unlink("hard") == 0, "unlink link and hard");
    CHECK(chdir("/") == 0 && rmdir("/tmp/d") == 0, "rmdir /tmp/d");
    CHECK(stat("/tmp/d", &st) == -1 && errno == ENOENT, "/tmp/d is gone");

    /* A big file through stdio, read back through mmap-free stdio. */
    FILE *f = fopen("/tmp/big", "w");
    for (int i = 0; f && i < 10000; i++)
        fprintf(f, "line %d\n", i);
    CHECK(f && fclose(f) == 0, "write /tmp/big with stdio");
    f = fopen("/tmp/big", "r");
    long sum = 0;
    int lines = 0, v;
    while (f && fscanf(f, "line %d\n", &v) == 1) {
        sum += v;
        lines++;
    }
    CHECK(lines == 10000 && sum == 49995000L, "read /tmp/big back with stdio");
    if (f)
        fclose(f);

    /* A private file mapping sees the file; its changes stay in memory. */
    fd = open("/tmp/big", O_RDONLY);
    char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 4096);
    CHECK(m != MAP_FAILED, "mmap /tmp/big at 4096");
    if (m != MAP_FAILED) {
        CHECK(pread(fd, buf, 16, 4096) == 16 && memcmp(m, buf, 16) == 0, "the mapping holds the file");
        m[0] = '#';
        CHECK(pread(fd, buf, 1, 4096) == 1 && buf[0] != '#', "a private change stays private");
        munmap(m, 8192);
    }
    close(fd);
    CHECK(unlink("/tmp/big") == 0, "unlink /tmp/big");

    /* The monitor's devices and /proc/self. */
    fd = open("/dev/null", O_RDWR);
    CHECK(fd >= 0 && write(fd, "x", 1) == 1 && read(fd, buf, 1) == 0, "/dev/null");
    close(fd);
    fd = open("/dev/zero", O_RDONLY);
    memset(buf, 1, 8);
    CHECK(fd >= 0 && read(fd, buf, 8) == 8 && buf[0] == 0 && buf[7] == 0, "/dev/zero");
    close(fd);
    fd = open("/dev/full", O_WRONLY);
    CHECK(fd >= 0 && write(fd, "x", 1) == -1 && errno == ENOSPC, "/dev/full is ENOSPC");
    close(fd);
    fd = open("/tmp", O_TMPFILE | O_RDWR, 0600);
    CHECK(fd >= 0 && write(fd, "tmp", 3) == 3 && pread(fd, buf, 3, 0) == 3 &&
          memcmp(buf, "tmp", 3) == 0, "O_TMPFILE");
    close(fd);
    f = fopen("/proc/self/maps", "r");
    int stack = 0;
    while (f && fgets(buf, sizeof buf, f))
        stack |= strstr(buf, "[stack]") != NULL;
    CHECK(stack, "/proc/self/maps shows the stack");
    if (f)
        fclose(f);
    CHECK(open("/proc/self/new", O_CREAT | O_WRONLY, 0644) == -1 && errno == EACCES,
          "/proc cannot be written");

    printf("fs-files: %d failures\n", failures);
    return failures;
}
