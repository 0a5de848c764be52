/* proc-environ: /proc/<pid>/environ and cmdline. A process's own environ is its environ
 * strings as execve gave them, NUL-separated; a parent reads a child's
 * after the child's execve with an environment of its choosing; what the
 * program writes over those strings shows (the file reads its memory),
 * setenv's new strings do not; the thread's file is the process's; a
 * zombie's does not open (ESRCH); the file is 0400. cmdline too reads
 * the process's memory: what it writes over an argument shows, and a
 * title written over the whole area runs on into the environment's
 * (setproctitle), as Linux's get_mm_cmdline reads it. Prints `ok: ...` lines, then `all
 * passed`; the same natively and inside Rewind. */
#define _GNU_SOURCE
#include "check.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* The whole of `path`; its length in *len (-1 when it cannot be read). */
static char *slurp(const char *path, long *len)
{
    static char buf[4][65536];
    static int next;
    char *b = buf[next++ % 4];
    int fd = open(path, O_RDONLY);
    *len = -1;
    if (fd < 0)
        return b;
    long n, got = 0;
    while ((n = read(fd, b + got, sizeof buf[0] - got)) > 0)
        got += n;
    close(fd);
    *len = got;
    return b;
}

/* environ's strings, NUL-separated. */
static long joined(char *out)
{
    long at = 0;
    for (char **e = environ; *e; e++) {
        size_t n = strlen(*e) + 1;
        memcpy(out + at, *e, n);
        at += n;
    }
    return at;
}

static void show(const char *what, const char *b, long len)
{
    printf("%s (%ld bytes):", what, len);
    for (long i = 0; i < len; i++)
        putchar(b[i] ? b[i] : '|');
    printf("\n");
    fflush(stdout);
}

/* argv's strings, NUL-separated, as they are in memory now. */
static long args_now(char **argv, int argc, char *out)
{
    long at = 0;
    for (int i = 0; i < argc; i++) {
        size_t n = strlen(argv[i]) + 1;
        memcpy(out + at, argv[i], n);
        at += n;
    }
    return at;
}

static int child(int ready, int argc, char **argv)
{
    static char want[4096];
    long len, wlen = args_now(argv, argc, want);
    char *b = slurp("/proc/self/cmdline", &len);
    CHECK(len == wlen && memcmp(b, want, len) == 0, "/proc/self/cmdline is argv's strings");
    argv[1][0] = 'C';
    wlen = args_now(argv, argc, want);
    b = slurp("/proc/self/cmdline", &len);
    CHECK(len == wlen && memcmp(b, want, len) == 0 && memcmp(b + strlen(argv[0]) + 1, "Child", 5) == 0,
          "what the program writes over an argument shows in it");

    b = slurp("/proc/self/environ", &len);
    show("the child's own", b, len);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/environ", gettid());
    long tlen;
    char *t = slurp(path, &tlen);
    CHECK(tlen == len && memcmp(t, b, len) == 0, "its thread's file is the same");
    environ[0][0] = 'Z';
    setenv("LATER", "1", 1);
    b = slurp("/proc/self/environ", &len);
    show("after writing over A and setenv", b, len);
    /* setproctitle: the arguments' area written over, its last NUL too. */
    memset(argv[0], 'x', wlen);
    b = slurp("/proc/self/cmdline", &len);
    CHECK(len == wlen + 4 && b[0] == 'x' && b[wlen - 1] == 'x' && memcmp(b + wlen, "Z=1", 4) == 0,
          "cmdline over a title that covers its last NUL runs on into the environment, to its first NUL");
    write(ready, "r", 1);
    pause();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "child"))
        return child(atoi(argv[2]), argc, argv);

    long len;
    char *b = slurp("/proc/self/environ", &len);
    static char want[65536];
    long wlen = joined(want);
    CHECK(len == wlen && memcmp(b, want, len) == 0, "/proc/self/environ is environ's strings");
    struct stat st;
    stat("/proc/self/environ", &st);
    CHECK((st.st_mode & 07777) == 0400, "it is mode %o", st.st_mode & 07777);

    int p[2];
    pipe(p);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        char fd[16];
        snprintf(fd, sizeof fd, "%d", p[1]);
        char *args[] = {argv[0], "child", fd, NULL};
        char *env[] = {"A=1", "BB=two words", "EMPTY=", "NOEQUALS", NULL};
        execve("/proc/self/exe", args, env);
        _exit(127);
    }
    close(p[1]);
    char c;
    CHECK(read(p[0], &c, 1) == 1, "the child is ready");
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", pid);
    b = slurp(path, &len);
    show("the parent reads the child's", b, len);
    kill(pid, SIGKILL);
    siginfo_t si;
    waitid(P_PID, pid, &si, WEXITED | WNOWAIT);
    int fd = open(path, O_RDONLY);
    CHECK(fd == -1 && errno == ESRCH, "a zombie's does not open: ESRCH");
    waitpid(pid, NULL, 0);
    b = slurp(path, &len);
    CHECK(len == -1, "and gone once it is reaped");
    if (!failures)
        printf("all passed\n");
    return failures != 0;
}
