/* proc-exec: execve and execveat, checked from inside. The program execs
 * itself (a static program from the image) in a child with a mode in
 * argv[1]: the new image checks what survived (descriptors without
 * close-on-exec, ignored signals, the mask, the pid) and what did not
 * (close-on-exec descriptors, handlers, the old memory). `#!` scripts:
 * the interpreter line with one optional argument, scripts of scripts,
 * the recursion limit (ELOOP), and ENOEXEC, ENOENT and EACCES as Linux
 * gives them. Prints `ok: ...`, `FAIL ...`, then `all passed`. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;
static const char *self;

static void check(int ok, const char *what)
{
    if (ok)
        printf("ok: %s\n", what);
    else {
        printf("FAIL %s (errno %d)\n", what, errno);
        failures++;
    }
    fflush(stdout);
}

static void on_usr1(int sig) { (void)sig; }

/* The image after exec: exit 0 when everything is as Linux leaves it. */
static int after_exec(int argc, char **argv)
{
    int bad = 0;
    struct sigaction sa;
    sigaction(SIGUSR1, NULL, &sa);
    bad |= (sa.sa_handler != SIG_DFL) << 0;
    sigaction(SIGUSR2, NULL, &sa);
    bad |= (sa.sa_handler != SIG_IGN) << 1;
    sigset_t mask;
    sigprocmask(SIG_SETMASK, NULL, &mask);
    bad |= (!sigismember(&mask, SIGTERM)) << 2;
    bad |= (fcntl(5, F_GETFD) != -1 || errno != EBADF) << 3; /* close-on-exec */
    bad |= (fcntl(6, F_GETFD) != 0) << 4;                     /* kept */
    bad |= (argc != 4 || strcmp(argv[2], "two") || strcmp(argv[3], "three")) << 5;
    bad |= (getenv("PROC_EXEC") == NULL || strcmp(getenv("PROC_EXEC"), "yes")) << 6;
    char buf[8] = {0};
    bad |= (pread(6, buf, 5, 0) != 5 || strcmp(buf, "hello")) << 8;
    return bad;
}

/* A script's interpreter: prints its argv, one line. */
static int as_interpreter(int argc, char **argv)
{
    printf("interp:");
    for (int i = 0; i < argc; i++)
        printf(" [%s]", i == 0 ? "self" : argv[i]);
    printf("\n");
    return 0;
}

static int run_child(char *const argv[], char *const envp[])
{
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        execve(argv[0], argv, envp);
        _exit(100 + errno);
    }
    int st = 0;
    waitpid(c, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 200 + WTERMSIG(st);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    write(fd, text, strlen(text));
    close(fd);
    chmod(path, mode);
}

static void exec_self(void)
{
    int cloexec = open("/exec-data", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    write(cloexec, "hello", 5);
    dup2(cloexec, 5);
    fcntl(5, F_SETFD, FD_CLOEXEC);
    dup2(cloexec, 6);
    close(cloexec);
    signal(SIGUSR1, on_usr1);
    signal(SIGUSR2, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    char *argv[] = {(char *)self, "after-exec", "two", "three", NULL};
    char *envp[] = {"PROC_EXEC=yes", NULL};
    int r = run_child(argv, envp);
    if (r != 0)
        printf("after-exec said %#x\n", r);
    check(r == 0, "exec: close-on-exec closed, handlers reset, SIG_IGN, mask, fds and env kept");
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    signal(SIGUSR1, SIG_DFL);
    signal(SIGUSR2, SIG_DFL);
    close(5);
    close(6);
}

static void exec_errors(void)
{
    char *envp[] = {NULL};
    char *missing[] = {"/no/such/program", NULL};
    check(run_child(missing, envp) == 100 + ENOENT, "a missing program: ENOENT");
    char *dir[] = {"/", NULL};
    check(run_child(dir, envp) == 100 + EACCES, "a directory: EACCES");
    write_file("/not-exec", "#!/bin/sh\n", 0644);
    char *noexec[] = {"/not-exec", NULL};
    check(run_child(noexec, envp) == 100 + EACCES, "no execute permission: EACCES");
    write_file("/garbage", "this is not a program\n", 0755);
    char *garbage[] = {"/garbage", NULL};
    check(run_child(garbage, envp) == 100 + ENOEXEC, "neither ELF nor #!: ENOEXEC");
    write_file("/bad-interp", "#!/no/such/interpreter\n", 0755);
    char *badi[] = {"/bad-interp", NULL};
    check(run_child(badi, envp) == 100 + ENOENT, "a missing interpreter: ENOENT");
    write_file("/empty-interp", "#!   \n", 0755);
    char *emptyi[] = {"/empty-interp", NULL};
    check(run_child(emptyi, envp) == 100 + ENOEXEC, "an empty #! line: ENOEXEC");
    /* Five scripts in a row: one more than Linux follows. */
    char text[256];
    write_file("/loop0", "#!/loop0\n", 0755);
    char *loop[] = {"/loop0", NULL};
    check(run_child(loop, envp) == 100 + ELOOP, "a script that names itself: ELOOP");
    snprintf(text, sizeof text, "#!%s interp\n", self);
    write_file("/s1", text, 0755);
    write_file("/s2", "#!/s1\n", 0755);
    write_file("/s3", "#!/s2\n", 0755);
    write_file("/s4", "#!/s3\n", 0755);
    write_file("/s5", "#!/s4\n", 0755);
    char *s4[] = {"/s4", "x", NULL};
    check(run_child(s4, envp) == 0, "four scripts deep runs");
    char *s5[] = {"/s5", "x", NULL};
    check(run_child(s5, envp) == 100 + ELOOP, "five scripts deep: ELOOP");
    errno = 0;
    check(syscall(SYS_execve, (char *)0xdead0000, missing, envp) == -1 && errno == EFAULT,
          "a bad path pointer: EFAULT");
    check(syscall(SYS_execve, "/garbage", (char **)0xdead0000, envp) == -1 && errno == EFAULT,
          "a bad argv pointer: EFAULT");
}

static void scripts(void)
{
    char text[256];
    snprintf(text, sizeof text, "#!  %s   interp  one arg  \necho not read\n", self);
    write_file("/script", text, 0755);
    char *argv[] = {"ignored", "a", "b", NULL};
    char *envp[] = {NULL};
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        execve("/script", argv, envp);
        _exit(100 + errno);
    }
    int st;
    waitpid(c, &st, 0);
    check(WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "#! script: [interpreter, its one argument, the script, a, b]");
    /* execveat: a directory descriptor and AT_EMPTY_PATH. */
    int root = open("/", O_RDONLY | O_DIRECTORY);
    c = fork();
    if (c == 0) {
        syscall(SYS_execveat, root, "script", argv, envp, 0);
        _exit(100 + errno);
    }
    waitpid(c, &st, 0);
    check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "execveat from a directory descriptor");
    int fd = open(self, O_RDONLY);
    char *em[] = {"self", "interp", "by-fd", NULL};
    c = fork();
    if (c == 0) {
        syscall(SYS_execveat, fd, "", em, envp, AT_EMPTY_PATH);
        _exit(100 + errno);
    }
    waitpid(c, &st, 0);
    check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "execveat AT_EMPTY_PATH of an open program");
    check(syscall(SYS_execveat, root, "script", argv, envp, 0x12345) == -1 && errno == EINVAL,
          "execveat with bad flags: EINVAL");
    close(fd);
    close(root);
}

int main(int argc, char **argv)
{
    self = argv[0];
    if (argc > 1 && !strcmp(argv[1], "after-exec"))
        return after_exec(argc, argv);
    if (argc > 1 && !strncmp(argv[1], "interp", 6))
        return as_interpreter(argc, argv);
    exec_self();
    exec_errors();
    scripts();
    if (failures == 0)
        printf("all passed\n");
    return failures != 0;
}
