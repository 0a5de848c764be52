/* file-maps: file mappings at their edges, as on Linux. MAP_SHARED_VALIDATE
 * refuses flags it does not know (EOPNOTSUPP) and anonymous memory
 * (EINVAL) where MAP_SHARED ignores them. For a private and a shared
 * mapping alike: the rest of the file's last page reads zeros, a page
 * wholly past the end is SIGBUS (BUS_ADRERR at the address touched, in a
 * forked child too) and EFAULT for a read() into it, a page the file grew
 * into reads the file, and a truncate takes the pages past the new end,
 * a private mapping's own copies too. A private page dropped with
 * MADV_DONTNEED reads the file again. A store through a shared mapping
 * moves the file's mtime and ctime when it is the first to its page since
 * the mapping was made or the last msync(MS_SYNC) or fsync, as stat shows
 * them (a page-cache filesystem's, /tmp's natively). Prints `ok: ...` lines, then
 * `all passed`: the same natively and inside Rewind. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define PAGE 4096
#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif
#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif
/* A bit no mmap flag uses (as LTP's mmap20 takes). */
#define UNKNOWN_FLAG (1 << 10)

static sigjmp_buf back;
static volatile int bus_code;
static void *volatile bus_addr;

static void on_bus(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    bus_code = si->si_code;
    bus_addr = si->si_addr;
    siglongjmp(back, 1);
}

/* The byte at p, after storing 'w' there if `store`; -1 after a SIGBUS,
 * whose si_code and si_addr are in bus_code and bus_addr. */
static int touch(volatile char *p, int store)
{
    bus_code = 0;
    bus_addr = NULL;
    if (sigsetjmp(back, 1))
        return -1;
    if (store)
        *p = 'w';
    return (unsigned char)*p;
}

/* SIGBUS with BUS_ADRERR at p, for a load and for a store. */
static int bus_at(char *p)
{
    int load = touch(p, 0) == -1 && bus_code == BUS_ADRERR && bus_addr == p;
    int store = touch(p, 1) == -1 && bus_code == BUS_ADRERR && bus_addr == p;
    return load && store;
}

static int file_says(int fd, off_t at, char want)
{
    char c = 0;
    return pread(fd, &c, 1, at) == 1 && c == want;
}

/* The files' directory, its own (natively, other copies of this program
 * may run at once), and a name in it. */
static char dir[] = "/tmp/file-mapsXXXXXX";
static const char *in_dir(const char *name)
{
    static char path[3][64];
    static int i;
    char *p = path[i++ % 3];
    snprintf(p, sizeof path[0], "%s/%s", dir, name);
    return p;
}

/* A file of `len` bytes of 'x'. */
static int file_of(const char *path, size_t len)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    char *buf = malloc(len);
    memset(buf, 'x', len);
    write(fd, buf, len);
    free(buf);
    return fd;
}

static void validate(void)
{
    int fd = file_of(in_dir("validate"), PAGE);
    void *m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | UNKNOWN_FLAG, fd, 0);
    CHECK(m == MAP_FAILED && errno == EOPNOTSUPP,
          "MAP_SHARED_VALIDATE with a flag it does not know: EOPNOTSUPP");
    m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0);
    CHECK(m == MAP_FAILED && errno == EOPNOTSUPP,
          "MAP_SHARED_VALIDATE with MAP_SYNC on a file without DAX: EOPNOTSUPP");
    void *hole = mmap(NULL, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(hole, PAGE);
    m = mmap(hole, PAGE, PROT_READ, MAP_SHARED_VALIDATE | MAP_FIXED_NOREPLACE, fd, 0);
    CHECK(m == MAP_FAILED && errno == EOPNOTSUPP,
          "MAP_SHARED_VALIDATE with MAP_FIXED_NOREPLACE: EOPNOTSUPP (not a legacy flag)");
    m = mmap(NULL, PAGE, PROT_READ, MAP_SHARED_VALIDATE | MAP_32BIT, fd, 0);
    CHECK(m != MAP_FAILED, "MAP_SHARED_VALIDATE with MAP_32BIT, a legacy flag, maps");
    munmap(m, PAGE);
    m = mmap(NULL, PAGE, PROT_READ, MAP_SHARED_VALIDATE | UNKNOWN_FLAG, 99, 0);
    CHECK(m == MAP_FAILED && errno == EBADF, "the descriptor is checked first: EBADF");
    m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m == MAP_FAILED && errno == EINVAL, "MAP_SHARED_VALIDATE of anonymous memory: EINVAL");
    m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, 0x0c, fd, 0);
    CHECK(m == MAP_FAILED && errno == EINVAL, "a mapping type that is none: EINVAL");

    char *s = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
                   MAP_SHARED_VALIDATE | MAP_POPULATE | MAP_NORESERVE, fd, 0);
    CHECK(s != MAP_FAILED, "MAP_SHARED_VALIDATE takes the flags it knows");
    if (s != MAP_FAILED) {
        s[1] = 'v';
        CHECK(file_says(fd, 1, 'v'), "and maps the file shared");
        munmap(s, PAGE);
    }
    /* (Not MAP_SYNC: ext4 refuses it even so.) */
    s = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | UNKNOWN_FLAG, fd, 0);
    CHECK(s != MAP_FAILED, "MAP_SHARED ignores the flags it does not know");
    if (s != MAP_FAILED) {
        s[2] = 's';
        CHECK(file_says(fd, 2, 's'), "and maps the file shared");
        munmap(s, PAGE);
    }
    s = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | UNKNOWN_FLAG, fd, 0);
    CHECK(s != MAP_FAILED && s[0] == 'x', "so does MAP_PRIVATE");
    munmap(s, PAGE);
    close(fd);
    unlink(in_dir("validate"));
}

static void past_end(int shared)
{
    const char *kind = shared ? "shared" : "private";
    const char *path = in_dir("end");
    /* A page and 100 bytes, mapped over three pages. */
    int fd = file_of(path, PAGE + 100);
    char *p = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, shared ? MAP_SHARED : MAP_PRIVATE,
                   fd, 0);
    CHECK(p != MAP_FAILED, "%s: mmap of three pages over a page and 100 bytes", kind);
    CHECK(p[0] == 'x' && p[PAGE + 99] == 'x', "%s: the file's bytes", kind);
    CHECK(p[PAGE + 100] == 0 && p[2 * PAGE - 1] == 0, "%s: the rest of the last page reads zeros",
          kind);
    CHECK(bus_at(p + 2 * PAGE + 8), "%s: a page wholly past the end is SIGBUS (BUS_ADRERR)",
          kind);

    int fd2 = open(path, O_RDONLY);
    errno = 0;
    CHECK(read(fd2, p + 2 * PAGE, 10) == -1 && errno == EFAULT,
          "%s: a read() into that page is EFAULT", kind);
    close(fd2);

    pid_t pid = fork();
    if (pid == 0)
        _exit(bus_at(p + 2 * PAGE) ? 7 : 1);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 7,
          "%s: a forked child's touch there is SIGBUS too", kind);

    /* The file grows into the page: it reads the file. */
    CHECK(pwrite(fd, "grown", 5, 2 * PAGE) == 5 && !memcmp(p + 2 * PAGE, "grown", 5),
          "%s: once the file grew, the page reads the file", kind);

    p[PAGE] = 'Q';
    CHECK(file_says(fd, PAGE, shared ? 'Q' : 'x'), "%s: a store %s the file", kind,
          shared ? "reaches" : "does not reach");
    if (!shared) {
        p[0] = 'P';
        CHECK(madvise(p, PAGE, MADV_DONTNEED) == 0 && p[0] == 'x',
              "private: a page dropped with MADV_DONTNEED reads the file again");
    }

    /* Truncated to one page: the second page goes, a private copy too. */
    CHECK(ftruncate(fd, PAGE) == 0 && bus_at(p + PAGE), "%s: past a truncate, SIGBUS", kind);
    CHECK(p[0] == 'x', "%s: the page before the new end stays", kind);
    munmap(p, 3 * PAGE);
    close(fd);
    unlink(path);
}

static struct timespec seen_m, seen_c;

/* Whether mtime and ctime both moved since the last look (-1: only one). */
static int times_moved(int fd)
{
    struct stat st;
    fstat(fd, &st);
    int m = st.st_mtim.tv_sec != seen_m.tv_sec || st.st_mtim.tv_nsec != seen_m.tv_nsec;
    int c = st.st_ctim.tv_sec != seen_c.tv_sec || st.st_ctim.tv_nsec != seen_c.tv_nsec;
    seen_m = st.st_mtim;
    seen_c = st.st_ctim;
    return m && c ? 1 : m || c ? -1 : 0;
}

static void nap(void)
{
    struct timespec t = {0, 10 * 1000 * 1000};
    nanosleep(&t, NULL);
}

static void times(void)
{
    const char *path = in_dir("times");
    int fd = file_of(path, 2 * PAGE);
    char *m = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    char b[4];
    times_moved(fd);
    nap();
    CHECK(m[0] + m[PAGE] == 2 * 'x' && times_moved(fd) == 0, "times: loads leave them");
    nap();
    m[0] = 'a';
    CHECK(times_moved(fd) == 1, "times: a store moves mtime and ctime");
    nap();
    m[1] = 'b';
    CHECK(times_moved(fd) == 0, "times: another store to that page leaves them");
    nap();
    m[PAGE] = 'c';
    CHECK(times_moved(fd) == 1, "times: a store to another page moves them");
    nap();
    CHECK(msync(m, 2 * PAGE, MS_ASYNC) == 0 && times_moved(fd) == 0, "times: msync leaves them");
    nap();
    m[2] = 'd';
    CHECK(times_moved(fd) == 0, "times: after MS_ASYNC a store to a stored page leaves them");
    nap();
    CHECK(msync(m, 2 * PAGE, MS_SYNC) == 0 && times_moved(fd) == 0,
          "times: MS_SYNC leaves them");
    nap();
    m[0] = 'e';
    CHECK(times_moved(fd) == 1, "times: after MS_SYNC a store moves them again");
    nap();
    pread(fd, b, 4, 0);
    m[0] = 'f';
    nap();
    pread(fd, b, 4, 0);
    CHECK(times_moved(fd) == 0, "times: a store to that page again, read() between, leaves them");
    fsync(fd);
    nap();
    m[PAGE] = 'g';
    CHECK(times_moved(fd) == 1, "times: after fsync a store moves them");
    nap();
    m[PAGE + 2] = 'h';
    sync();
    nap();
    m[PAGE + 3] = 'h';
    CHECK(times_moved(fd) == 1, "times: after sync a store moves them");
    nap();
    syncfs(fd);
    nap();
    m[PAGE + 4] = 'h';
    CHECK(times_moved(fd) == 1, "times: after syncfs a store moves them");
    nap();
    m[PAGE + 1] = 'h';
    CHECK(munmap(m, 2 * PAGE) == 0 && times_moved(fd) == 0,
          "times: munmap after a store to a stored page leaves them");
    m = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    nap();
    m[PAGE] = 'i';
    CHECK(times_moved(fd) == 1, "times: a new mapping's first store to a page moves them");
    munmap(m, 2 * PAGE);
    close(fd);
    unlink(path);
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_bus;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGBUS, &sa, NULL);
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    validate();
    past_end(0);
    past_end(1);
    times();
    rmdir(dir);
    if (!failures)
        printf("all passed\n");
    return failures != 0;
}
