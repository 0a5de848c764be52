/* fs-tool: small file commands, for tests that look at the guest's file
 * tree (a --root image, /dev, /proc). Arguments are pairs COMMAND PATH:
 *
 *   cat P       the file's bytes, then a newline if they lack one
 *   ls P        "P: name/ name@ name ..." (getdents64 order; / dir, @ link)
 *   stat P      "P: type=reg|dir|lnk|chr|fifo mode=0644 size=N nlink=N uid=0"
 *   ino P       "P: ino=N" (for comparing runs)
 *   readlink P  "P -> target"
 *   hex P       the first 16 bytes as hex
 *   write P     writes "written by fs-tool\n" (O_CREAT|O_TRUNC)
 *   rm P        unlink
 *   stdin -     standard input: "stdin: N bytes" then the bytes
 *   tty -       what isatty and fstat say of 0, 1 and 2
 *
 * A failing command prints "P: error: <strerror>" and the exit status
 * counts them. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int errors;

static int fail(const char *p)
{
    printf("%s: error: %s\n", p, strerror(errno));
    errors++;
    return 0;
}

static const char *type(mode_t m)
{
    return S_ISREG(m) ? "reg" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "lnk" : S_ISCHR(m) ? "chr"
         : S_ISFIFO(m) ? "fifo" : "other";
}

static void cat(const char *p)
{
    int fd = open(p, O_RDONLY);
    if (fd < 0) {
        fail(p);
        return;
    }
    char buf[4096];
    ssize_t n, total = 0;
    char last = '\n';
    while ((n = read(fd, buf, sizeof buf)) > 0) {
        fwrite(buf, 1, n, stdout);
        last = buf[n - 1];
        total += n;
    }
    if (n < 0)
        fail(p);
    if (last != '\n')
        putchar('\n');
    close(fd);
}

static void ls(const char *p)
{
    int fd = open(p, O_RDONLY | O_DIRECTORY);
    if (fd < 0) {
        fail(p);
        return;
    }
    printf("%s:", p);
    char buf[1024];
    long n;
    while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            struct {
                unsigned long ino;
                long off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *d = (void *)(buf + off);
            printf(" %s%s", d->name, d->type == DT_DIR ? "/" : d->type == DT_LNK ? "@" : "");
            off += d->reclen;
        }
    }
    printf("\n");
    if (n < 0)
        fail(p);
    close(fd);
}

static void do_stat(const char *p, int ino_only)
{
    struct stat st;
    if (lstat(p, &st) != 0) {
        fail(p);
        return;
    }
    if (ino_only)
        printf("%s: ino=%lu\n", p, (unsigned long)st.st_ino);
    else
        printf("%s: type=%s mode=%04o size=%ld nlink=%lu uid=%u\n", p, type(st.st_mode),
               st.st_mode & 07777, (long)st.st_size, (unsigned long)st.st_nlink, st.st_uid);
}

static void tty(void)
{
    for (int fd = 0; fd < 3; fd++) {
        struct stat st;
        int r = fstat(fd, &st);
        printf("fd %d: isatty=%d fstat=%d type=%s\n", fd, isatty(fd), r,
               r == 0 ? type(st.st_mode) : "-");
    }
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *c = argv[i], *p = argv[i + 1];
        if (!strcmp(c, "cat"))
            cat(p);
        else if (!strcmp(c, "ls"))
            ls(p);
        else if (!strcmp(c, "stat"))
            do_stat(p, 0);
        else if (!strcmp(c, "ino"))
            do_stat(p, 1);
        else if (!strcmp(c, "readlink")) {
            char buf[4096];
            ssize_t n = readlink(p, buf, sizeof buf - 1);
            if (n < 0)
                fail(p);
            else
                printf("%s -> %.*s\n", p, (int)n, buf);
        } else if (!strcmp(c, "hex")) {
            unsigned char b[16];
            int fd = open(p, O_RDONLY);
            if (fd < 0 || read(fd, b, 16) != 16)
                fail(p);
            else {
                printf("%s:", p);
                for (int j = 0; j < 16; j++)
                    printf(" %02x", b[j]);
                printf("\n");
            }
            if (fd >= 0)
                close(fd);
        } else if (!strcmp(c, "write")) {
            int fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0644);
            const char *m = "written by fs-tool\n";
            if (fd < 0 || write(fd, m, strlen(m)) != (ssize_t)strlen(m))
                fail(p);
            if (fd >= 0)
                close(fd);
        } else if (!strcmp(c, "rm")) {
            if (unlink(p) != 0)
                fail(p);
        } else if (!strcmp(c, "stdin")) {
            char buf[65536];
            ssize_t n, total = 0;
            while ((n = read(0, buf + total, sizeof buf - total)) > 0)
                total += n;
            printf("stdin: %ld bytes\n", (long)total);
            fwrite(buf, 1, total, stdout);
        } else if (!strcmp(c, "tty"))
            tty();
        else {
            printf("%s: unknown command\n", c);
            errors++;
        }
    }
    return errors;
}
