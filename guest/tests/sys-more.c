/* sys-more: the calls added to reach 200 served, each against what Linux
 * does: sendfile (file to file, to a pipe, with an offset pointer),
 * copy_file_range, getdents (the old records), utimes, utime, futimesat,
 * msync, mincore, mlock, munlock, mlock2, mlockall, munlockall, times,
 * getpriority and setpriority (inherited by a child), the sched_* family,
 * membarrier and sync_file_range. One line per fact; "FAIL" on any
 * surprise, "all passed" at the end. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/times.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

static int failed;

static void check(int ok, const char *what)
{
    printf("%s %s\n", ok ? "ok" : "FAIL", what);
    failed |= !ok;
}

static void write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    write(fd, text, strlen(text));
    close(fd);
}

static int read_file(const char *path, char *buf, int room)
{
    int fd = open(path, O_RDONLY);
    int n = read(fd, buf, room - 1);
    close(fd);
    buf[n < 0 ? 0 : n] = 0;
    return n;
}

static void copies(const char *dir)
{
    char src[256], dst[256], buf[256];
    snprintf(src, sizeof src, "%s/src.txt", dir);
    snprintf(dst, sizeof dst, "%s/dst.txt", dir);
    write_file(src, "0123456789abcdef");

    int in = open(src, O_RDONLY);
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    check(sendfile(out, in, NULL, 10) == 10 && lseek(in, 0, SEEK_CUR) == 10,
          "sendfile file to file advances the input's offset");
    off_t off = 12;
    check(sendfile(out, in, &off, 100) == 4 && off == 16 && lseek(in, 0, SEEK_CUR) == 10,
          "sendfile with an offset: up to the end, the offset moved, the file's not");
    close(out);
    read_file(dst, buf, sizeof buf);
    check(!strcmp(buf, "0123456789cdef"), "sendfile wrote the bytes");

    int p[2];
    pipe(p);
    off = 0;
    check(sendfile(p[1], in, &off, 5) == 5 && read(p[0], buf, 64) == 5 && !memcmp(buf, "01234", 5),
          "sendfile to a pipe");
    out = open(dst, O_WRONLY | O_APPEND);
    check(sendfile(out, p[0], NULL, 5) == -1 && errno == EINVAL, "sendfile from a pipe: EINVAL");
    check(sendfile(out, in, NULL, 5) == -1 && errno == EINVAL, "sendfile to O_APPEND: EINVAL");
    close(out);
    close(p[0]);
    close(p[1]);

    /* More than a pipe holds: sendfile blocks until the child reads. */
    char big[256];
    snprintf(big, sizeof big, "%s/big.bin", dir);
    int bf = open(big, O_RDWR | O_CREAT | O_TRUNC, 0644);
    static char block[200000];
    for (int i = 0; i < (int)sizeof block; i++)
        block[i] = (char)(i * 7);
    write(bf, block, sizeof block);
    lseek(bf, 0, SEEK_SET);
    pipe(p);
    pid_t kid = fork();
    if (kid == 0) {
        close(p[1]);
        long got = 0, sum = 0;
        int r;
        while ((r = read(p[0], buf, sizeof buf)) > 0) {
            for (int i = 0; i < r; i++)
                sum += (unsigned char)buf[i];
            got += r;
        }
        long want = 0;
        for (int i = 0; i < (int)sizeof block; i++)
            want += (unsigned char)block[i];
        _exit(got == (long)sizeof block && sum == want ? 0 : 1);
    }
    close(p[0]);
    long sent = 0, r;
    while (sent < (long)sizeof block && (r = sendfile(p[1], bf, NULL, sizeof block - sent)) > 0)
        sent += r;
    close(p[1]);
    int st = 1;
    waitpid(kid, &st, 0);
    check(sent == (long)sizeof block && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "sendfile of 200000 bytes through a pipe to a child");
    close(bf);

    int a = open(src, O_RDONLY);
    int b = open(dst, O_RDWR | O_TRUNC);
    loff_t ia = 4, ob = 2;
    check(copy_file_range(a, &ia, b, &ob, 6, 0) == 6 && ia == 10 && ob == 8,
          "copy_file_range with offsets moves them");
    check(copy_file_range(a, NULL, b, NULL, 3, 0) == 3 && lseek(a, 0, SEEK_CUR) == 3,
          "copy_file_range without offsets moves the files'");
    check(copy_file_range(a, NULL, b, NULL, 3, 1) == -1 && errno == EINVAL,
          "copy_file_range flags: EINVAL");
    close(b);
    int n = read_file(dst, buf, sizeof buf);
    check(n == 8 && !memcmp(buf, "01256789", 8), "copy_file_range wrote the bytes");
    check(copy_file_range(a, NULL, a, NULL, 3, 0) == -1 && errno == EBADF,
          "copy_file_range into a read-only file: EBADF");
    close(a);
    close(in);
}

/* The old linux_dirent: ino, off, reclen, name, then the type last. */
struct old_dirent {
    unsigned long d_ino;
    unsigned long d_off;
    unsigned short d_reclen;
    char d_name[];
};

static void old_getdents(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/sub", dir);
    mkdir(path, 0755);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    char buf[4096];
    long n = syscall(SYS_getdents, fd, buf, sizeof buf);
    int saw_src = 0, saw_sub = 0, dots = 0;
    for (long at = 0; at < n;) {
        struct old_dirent *d = (struct old_dirent *)(buf + at);
        char type = buf[at + d->d_reclen - 1];
        if (!strcmp(d->d_name, "src.txt"))
            saw_src = type == DT_REG;
        if (!strcmp(d->d_name, "sub"))
            saw_sub = type == DT_DIR;
        dots += !strcmp(d->d_name, ".") || !strcmp(d->d_name, "..");
        at += d->d_reclen;
    }
    check(n > 0 && saw_src && saw_sub && dots == 2, "getdents: names and types");
    check(syscall(SYS_getdents, fd, buf, sizeof buf) == 0, "getdents: then the end");
    close(fd);
}

static void times_of_files(const char *dir)
{
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/src.txt", dir);
    struct timeval tv[2] = {{1000000, 250000}, {2000000, 500000}};
    check(syscall(SYS_utimes, path, tv) == 0 && stat(path, &st) == 0 && st.st_atime == 1000000 &&
              st.st_atim.tv_nsec == 250000000 && st.st_mtime == 2000000 &&
              st.st_mtim.tv_nsec == 500000000,
          "utimes");
    struct utimbuf ub = {3000000, 4000000};
    check(syscall(SYS_utime, path, &ub) == 0 && stat(path, &st) == 0 && st.st_atime == 3000000 &&
              st.st_mtime == 4000000 && st.st_mtim.tv_nsec == 0,
          "utime");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    tv[1].tv_sec = 5000000;
    check(syscall(SYS_futimesat, dfd, "src.txt", tv) == 0 && stat(path, &st) == 0 &&
              st.st_mtime == 5000000,
          "futimesat");
    tv[0].tv_usec = 1000000;
    check(syscall(SYS_utimes, path, tv) == -1 && errno == EINVAL, "utimes: a bad tv_usec is EINVAL");
    close(dfd);
    check(syscall(SYS_utimes, "/no/such/file", NULL) == -1 && errno == ENOENT, "utimes: ENOENT");
}

static void memory(void)
{
    long page = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    m[0] = 1;
    check(msync(m, 4 * page, MS_SYNC) == 0, "msync");
    check(msync(m + 1, page, MS_SYNC) == -1 && errno == EINVAL, "msync unaligned: EINVAL");
    check(msync(m, page, MS_SYNC | MS_ASYNC) == -1 && errno == EINVAL,
          "msync MS_SYNC|MS_ASYNC: EINVAL");
    unsigned char vec[4] = {9, 9, 9, 9};
    check(mincore(m, 4 * page, vec) == 0 && (vec[0] & 1), "mincore: a touched page is resident");
    munmap(m + 2 * page, page);
    check(msync(m, 4 * page, MS_ASYNC) == -1 && errno == ENOMEM, "msync over a hole: ENOMEM");
    check(mincore(m, 4 * page, vec) == -1 && errno == ENOMEM, "mincore over a hole: ENOMEM");
    check(mlock(m + 10, page) == 0 && munlock(m, page) == 0, "mlock, munlock");
    check(mlock(m, 4 * page) == -1 && errno == ENOMEM, "mlock over a hole: ENOMEM");
    check(syscall(SYS_mlock2, m, page, 1) == 0, "mlock2 MLOCK_ONFAULT");
    check(syscall(SYS_mlock2, m, page, 8) == -1 && errno == EINVAL, "mlock2 bad flags: EINVAL");
    check(mlockall(MCL_CURRENT) == 0 && munlockall() == 0, "mlockall, munlockall");
    check(mlockall(0) == -1 && errno == EINVAL, "mlockall(0): EINVAL");
}

static void scheduling(void)
{
    struct tms t;
    clock_t c = times(&t);
    check(c != (clock_t)-1 && t.tms_cutime == 0, "times");
    errno = 0;
    int prio = getpriority(PRIO_PROCESS, 0);
    /* Natively the test may run under nice: only raising it is sure to be allowed. */
    check(errno == 0 && prio >= -20 && prio <= 19, "getpriority");
    printf("nice at the start: %d\n", prio);
    check(setpriority(PRIO_PROCESS, 0, 18) == 0 && getpriority(PRIO_PROCESS, 0) == 18,
          "setpriority to 18");
    check(setpriority(PRIO_PROCESS, 0, 50) == 0 && getpriority(PRIO_PROCESS, 0) == 19,
          "setpriority clamps to 19");
    pid_t kid = fork();
    if (kid == 0)
        _exit(getpriority(PRIO_PROCESS, 0));
    int st = 0;
    waitpid(kid, &st, 0);
    check(WIFEXITED(st) && WEXITSTATUS(st) == 19, "a child inherits the nice value");
    setpgid(0, 0);
    check(getpriority(PRIO_PGRP, 0) == 19, "getpriority of the group");
    check(getpriority(PRIO_PROCESS, 999999) == -1 && errno == ESRCH, "getpriority: ESRCH");
    check(getpriority(9, 0) == -1 && errno == EINVAL, "getpriority: bad which");

    check(sched_getscheduler(0) == SCHED_OTHER, "sched_getscheduler: SCHED_OTHER");
    struct sched_param sp = {.sched_priority = 42};
    check(sched_getparam(0, &sp) == 0 && sp.sched_priority == 0, "sched_getparam: 0");
    sp.sched_priority = 0;
    check(sched_setscheduler(0, SCHED_BATCH, &sp) == 0, "sched_setscheduler SCHED_BATCH");
    check(sched_setparam(0, &sp) == 0, "sched_setparam 0");
    sp.sched_priority = 3;
    check(sched_setparam(0, &sp) == -1 && errno == EINVAL, "sched_setparam 3: EINVAL");
    check(sched_get_priority_max(SCHED_FIFO) == 99 && sched_get_priority_min(SCHED_FIFO) == 1 &&
              sched_get_priority_max(SCHED_OTHER) == 0 && sched_get_priority_min(SCHED_OTHER) == 0,
          "sched_get_priority_max and min");
    check(sched_get_priority_max(77) == -1 && errno == EINVAL, "sched_get_priority_max: EINVAL");
    struct timespec ts = {-1, -1};
    check(sched_rr_get_interval(0, &ts) == 0 && ts.tv_sec >= 0 && ts.tv_nsec >= 0,
          "sched_rr_get_interval");
    check(sched_getscheduler(-1) == -1 && errno == EINVAL, "sched_getscheduler(-1): EINVAL");
    check(sched_getscheduler(999999) == -1 && errno == ESRCH, "sched_getscheduler: ESRCH");

    long q = syscall(SYS_membarrier, 0, 0, 0);
    check(q > 0 && (q & 1), "membarrier QUERY has MEMBARRIER_CMD_GLOBAL");
    check(syscall(SYS_membarrier, 1, 0, 0) == 0, "membarrier GLOBAL");
    check(syscall(SYS_membarrier, 0, 1, 0) == -1 && errno == EINVAL, "membarrier bad flags");
}

static void sync_range(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/src.txt", dir);
    int fd = open(path, O_RDWR);
    check(sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE) == 0, "sync_file_range");
    check(sync_file_range(fd, -1, 0, 0) == -1 && errno == EINVAL, "sync_file_range: EINVAL");
    int p[2];
    pipe(p);
    check(sync_file_range(p[0], 0, 0, 0) == -1 && errno == ESPIPE, "sync_file_range a pipe");
    close(fd);
}

int main(void)
{
    char dir[] = "/tmp/sys-more-XXXXXX";
    if (!mkdtemp(dir)) {
        check(0, "mkdtemp");
        return 1;
    }
    copies(dir);
    old_getdents(dir);
    times_of_files(dir);
    memory();
    scheduling();
    sync_range(dir);
    if (!failed)
        printf("all passed\n");
    return failed;
}
