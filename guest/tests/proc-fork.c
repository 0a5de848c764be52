/* proc-fork: processes, checked from inside. fork gives the child a copy
 * of memory and the parent the child's pid; wait4 and waitid with every
 * option; exit statuses (exited, killed, the core flag); SIGCHLD with its
 * siginfo, SIG_IGN and SA_NOCLDWAIT reaping by themselves; vfork; orphans
 * reparented to the first process and PR_SET_PDEATHSIG; process groups and
 * sessions, kill to a group, 0 and -1; prctl, umask and rlimits.
 * Prints `ok: ...` per check, `FAIL ...` when one fails, `all passed`. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;

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

static volatile int shared_word = 1;
static volatile sig_atomic_t chld_hits, chld_pid, chld_status, chld_code;

static void on_chld(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    chld_hits++;
    chld_pid = si->si_pid;
    chld_status = si->si_status;
    chld_code = si->si_code;
}

static void fork_and_wait(void)
{
    pid_t me = getpid();
    pid_t c = fork();
    if (c == 0) {
        shared_word = 2; /* the parent must not see it */
        _exit(getppid() == me ? 7 : 1);
    }
    check(c > me, "fork returns the child's pid, above the parent's");
    int st = 0;
    pid_t w = waitpid(c, &st, 0);
    check(w == c && WIFEXITED(st) && WEXITSTATUS(st) == 7,
          "waitpid: the child exited 7 and saw its parent with getppid");
    check(shared_word == 1, "the child's write stayed in its own memory");
    check(waitpid(-1, &st, WNOHANG) == -1 && errno == ECHILD, "no children left: ECHILD");
    check(wait4(c, &st, 0, NULL) == -1 && errno == ECHILD, "a reaped child is gone");
}

static void wnohang_and_any(void)
{
    int pfd[2]; /* no pipes: the children sleep instead */
    (void)pfd;
    pid_t a = fork();
    if (a == 0) {
        usleep(1000);
        _exit(3);
    }
    pid_t b = fork();
    if (b == 0)
        _exit(4);
    int st = 0;
    /* b has not run yet under schedule 0: WNOHANG finds nothing. */
    check(waitpid(-1, &st, WNOHANG) == 0, "WNOHANG with live children: 0");
    struct rusage ru;
    memset(&ru, 0xff, sizeof ru);
    pid_t w1 = wait4(-1, &st, 0, &ru);
    int s1 = WEXITSTATUS(st);
    pid_t w2 = wait4(-1, &st, 0, NULL);
    int s2 = WEXITSTATUS(st);
    check((w1 == b && s1 == 4 && w2 == a && s2 == 3) || (w1 == a && s1 == 3 && w2 == b && s2 == 4),
          "wait4(-1) reaps both, each with its own status");
    check(ru.ru_utime.tv_sec == 0 && ru.ru_maxrss == 0, "wait4 fills the rusage");
}

static void killed_and_core(void)
{
    pid_t c = fork();
    if (c == 0) {
        raise(SIGTERM);
        _exit(0);
    }
    int st = 0;
    waitpid(c, &st, 0);
    check(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM && !WCOREDUMP(st),
          "killed by SIGTERM: WIFSIGNALED, no core flag");
    struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
    c = fork();
    if (c == 0) {
        setrlimit(RLIMIT_CORE, &rl);
        abort();
    }
    waitpid(c, &st, 0);
    check(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && WCOREDUMP(st),
          "SIGABRT with RLIMIT_CORE raised: the core flag");
}

static void sigchld(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_chld;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGCHLD, &sa, NULL);
    pid_t c = fork();
    if (c == 0)
        _exit(9);
    int st = 0;
    check(waitpid(c, &st, 0) == c && WEXITSTATUS(st) == 9,
          "a wait the child ends returns its pid, the handler runs after");
    check(chld_hits == 1 && chld_pid == c && chld_status == 9 && chld_code == CLD_EXITED,
          "SIGCHLD: si_pid, si_status, CLD_EXITED");
    /* SA_NOCLDWAIT: no zombie; the wait finds no child. */
    sa.sa_flags = SA_SIGINFO | SA_NOCLDWAIT;
    sigaction(SIGCHLD, &sa, NULL);
    c = fork();
    if (c == 0)
        _exit(1);
    check(waitpid(c, &st, 0) == -1 && errno == ECHILD, "SA_NOCLDWAIT: reaped by itself, ECHILD");
    check(chld_hits == 2, "SA_NOCLDWAIT still sends SIGCHLD");
    signal(SIGCHLD, SIG_IGN);
    c = fork();
    if (c == 0)
        _exit(1);
    check(waitpid(c, &st, 0) == -1 && errno == ECHILD, "SIGCHLD ignored: reaped by itself");
    signal(SIGCHLD, SIG_DFL);
}

static void waitid_options(void)
{
    pid_t c = fork();
    if (c == 0)
        _exit(5);
    siginfo_t si;
    memset(&si, 0xff, sizeof si);
    check(waitid(P_PID, c, &si, WEXITED | WNOHANG) == 0 && si.si_pid == 0,
          "waitid WNOHANG before the child ran: 0, si_pid 0");
    memset(&si, 0, sizeof si);
    check(waitid(P_PID, c, &si, WEXITED | WNOWAIT) == 0 && si.si_pid == c && si.si_status == 5 &&
              si.si_code == CLD_EXITED && si.si_signo == SIGCHLD,
          "waitid WNOWAIT: the child's siginfo, left a zombie");
    memset(&si, 0, sizeof si);
    check(waitid(P_ALL, 0, &si, WEXITED) == 0 && si.si_pid == c, "waitid P_ALL reaps it");
    check(waitid(P_ALL, 0, &si, WEXITED) == -1 && errno == ECHILD, "then ECHILD");
    check(waitid(P_ALL, 0, &si, 0) == -1 && errno == EINVAL, "waitid without WEXITED: EINVAL");
    check(waitpid(-1, NULL, 0x1000) == -1 && errno == EINVAL, "wait4 with a bad option: EINVAL");
    /* A group: the child makes its own, the parent waits on it. */
    c = fork();
    if (c == 0) {
        setpgid(0, 0);
        usleep(100);
        _exit(6);
    }
    setpgid(c, c);
    memset(&si, 0, sizeof si);
    check(waitid(P_PGID, c, &si, WEXITED) == 0 && si.si_pid == c && si.si_status == 6,
          "waitid P_PGID");
    c = fork();
    if (c == 0)
        _exit(8);
    int st;
    check(waitpid(0, &st, 0) == c && WEXITSTATUS(st) == 8, "waitpid(0): a child in my group");
    c = fork();
    if (c == 0)
        _exit(2);
    check(waitpid(c, &st, __WALL | WUNTRACED | WCONTINUED) == c && WEXITSTATUS(st) == 2,
          "waitpid with __WALL, WUNTRACED, WCONTINUED");
}

static void job_control(void)
{
    pid_t c = fork();
    if (c == 0) {
        for (;;)
            pause();
    }
    int st = 0;
    kill(c, SIGSTOP);
    check(waitpid(c, &st, WUNTRACED) == c && WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP,
          "WUNTRACED: stopped by SIGSTOP");
    check(waitpid(c, &st, WUNTRACED | WNOHANG) == 0, "a stop is reported once");
    kill(c, SIGCONT);
    check(waitpid(c, &st, WCONTINUED) == c && WIFCONTINUED(st), "WCONTINUED after SIGCONT");
    kill(c, SIGTSTP);
    siginfo_t si;
    memset(&si, 0, sizeof si);
    check(waitid(P_PID, c, &si, WSTOPPED) == 0 && si.si_code == CLD_STOPPED &&
              si.si_status == SIGTSTP && si.si_pid == c,
          "waitid WSTOPPED: stopped by SIGTSTP in pause");
    kill(c, SIGKILL);
    check(waitpid(c, &st, 0) == c && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
          "a stopped child dies of SIGKILL");
}

static void with_a_pipe(void)
{
    int fd[2];
    if (pipe(fd) != 0) {
        check(0, "pipe");
        return;
    }
    pid_t c = fork();
    if (c == 0) {
        close(fd[0]);
        write(fd[1], "from the child", 14);
        _exit(0);
    }
    close(fd[1]);
    char buf[64] = {0};
    int got = 0, n;
    while ((n = read(fd[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += n;
    close(fd[0]);
    check(got == 14 && !strcmp(buf, "from the child") && n == 0,
          "fork and a pipe: the child's bytes, then EOF when it exits");
    waitpid(c, NULL, 0);
}

static void do_vfork(void)
{
    pid_t c = vfork();
    if (c == 0)
        _exit(11);
    int st;
    check(c > 0 && waitpid(c, &st, 0) == c && WEXITSTATUS(st) == 11, "vfork and _exit");
}

static void orphans(void)
{
    pid_t first = getpid();
    unlink("/orphan");
    pid_t c = fork();
    if (c == 0) {
        pid_t g = fork();
        if (g == 0) {
            prctl(PR_SET_PDEATHSIG, SIGUSR1);
            int sig = 0;
            prctl(PR_GET_PDEATHSIG, &sig);
            sigset_t set;
            sigemptyset(&set);
            sigaddset(&set, SIGUSR1);
            sigprocmask(SIG_BLOCK, &set, NULL);
            int got = 0;
            sigwait(&set, &got); /* the parent's death */
            int fd = open("/orphan", O_WRONLY | O_CREAT, 0644);
            char b[64];
            int n = snprintf(b, sizeof b, "%d %d %d\n", (int)getppid(), got, sig);
            write(fd, b, n);
            close(fd);
            _exit(0);
        }
        usleep(1000); /* the grandchild sets its death signal first */
        _exit(0);
    }
    int st;
    waitpid(c, &st, 0);
    /* The grandchild is mine now: wait for it. */
    pid_t g = wait(&st);
    check(g > c && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the orphan is reaped by the first process");
    char b[64] = {0};
    int fd = open("/orphan", O_RDONLY);
    read(fd, b, sizeof b - 1);
    close(fd);
    int ppid = 0, got = 0, sig = 0;
    sscanf(b, "%d %d %d", &ppid, &got, &sig);
    check(ppid == first, "an orphan's getppid is the first process");
    check(got == SIGUSR1 && sig == SIGUSR1, "PR_SET_PDEATHSIG: SIGUSR1 when its parent died");
}

static void groups(void)
{
    pid_t me = getpid();
    check(getpgrp() == me && getpgid(0) == me && getsid(0) == me,
          "the first process leads its group and session");
    check(setsid() == -1 && errno == EPERM, "setsid of a group leader: EPERM");
    check(getpgid(99999) == -1 && errno == ESRCH, "getpgid of nobody: ESRCH");
    pid_t a = fork();
    if (a == 0) {
        setpgid(0, 0);
        pause();
        _exit(0);
    }
    setpgid(a, a);
    pid_t b = fork();
    if (b == 0) {
        pause();
        _exit(0);
    }
    check(setpgid(b, a) == 0 && getpgid(b) == a, "setpgid puts a child in another group");
    check(setpgid(99999, 0) == -1 && errno == ESRCH, "setpgid of a stranger: ESRCH");
    check(kill(-a, SIGTERM) == 0, "kill(-pgid) to the group");
    int st1, st2;
    pid_t w1 = waitpid(a, &st1, 0), w2 = waitpid(b, &st2, 0);
    check(w1 == a && w2 == b && WTERMSIG(st1) == SIGTERM && WTERMSIG(st2) == SIGTERM,
          "both members of the group were killed");
    check(kill(-a, 0) == -1 && errno == ESRCH, "an empty group: ESRCH");
    pid_t s = fork();
    if (s == 0) {
        pid_t sid = setsid();
        _exit(sid == getpid() && getsid(0) == getpid() && getpgrp() == getpid() ? 0 : 1);
    }
    int st;
    waitpid(s, &st, 0);
    check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "setsid in a child: a new session and group");
    pid_t z = fork();
    if (z == 0)
        _exit(0);
    usleep(100);
    check(kill(z, 0) == 0, "kill(pid, 0) of a zombie succeeds");
    waitpid(z, NULL, 0);
    /* kill(-1): every process but me. */
    pid_t v = fork();
    if (v == 0) {
        pause();
        _exit(0);
    }
    usleep(100);
    check(kill(-1, SIGKILL) == 0, "kill(-1)");
    waitpid(v, &st, 0);
    check(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "kill(-1) reached the child, not me");
}

static void misc(void)
{
    char name[16] = {0};
    prctl(PR_SET_NAME, "renamed");
    prctl(PR_GET_NAME, name);
    check(!strcmp(name, "renamed"), "prctl PR_SET_NAME/PR_GET_NAME");
    check(prctl(PR_SET_PDEATHSIG, 99) == -1 && errno == EINVAL, "PR_SET_PDEATHSIG 99: EINVAL");
    mode_t old = umask(077);
    check(old == 022 && umask(old) == 077, "umask");
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    check(rl.rlim_cur == 1024, "RLIMIT_NOFILE is 1024");
    rl.rlim_cur = 512;
    check(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit");
    struct rlimit back;
    getrlimit(RLIMIT_NOFILE, &back);
    check(back.rlim_cur == 512 && back.rlim_max == rl.rlim_max, "getrlimit reads it back");
    rl.rlim_cur = rl.rlim_max + 1;
    check(setrlimit(RLIMIT_NOFILE, &rl) == -1 && errno == EINVAL, "soft above hard: EINVAL");
    pid_t c = fork();
    if (c == 0) {
        struct rlimit r;
        getrlimit(RLIMIT_NOFILE, &r);
        _exit(r.rlim_cur == 512 ? 0 : 1);
    }
    int st;
    waitpid(c, &st, 0);
    check(WEXITSTATUS(st) == 0, "a child inherits its parent's limits");
    check(prlimit(c, RLIMIT_NOFILE, NULL, &rl) == -1 && errno == ESRCH, "prlimit of a reaped child: ESRCH");
    getrlimit(RLIMIT_NPROC, &rl);
    check(rl.rlim_cur >= 64 && rl.rlim_cur != RLIM_INFINITY, "RLIMIT_NPROC is the process cap");
}

/* `proc-fork long N`: a child makes N system calls while its parent waits
 * (a two-process run long enough for keyframes). */
static int long_run(long n)
{
    pid_t c = fork();
    if (c == 0) {
        long sum = 0;
        for (long i = 0; i < n; i++)
            sum += getppid();
        printf("child: %ld calls\n", n);
        fflush(stdout);
        _exit(sum == (long)getppid() * n ? 0 : 1);
    }
    int st = 0;
    waitpid(c, &st, 0);
    printf("parent: the child exited %d\n", WEXITSTATUS(st));
    return WEXITSTATUS(st);
}

/* `proc-fork forks N PAGES`: touches PAGES pages of its heap, then forks
 * N children that exit at once, each waited for (the cost of a fork as a
 * function of the memory its parent touched). */
static int forks(long n, long pages)
{
    char *heap = malloc(pages * 4096 + 1);
    for (long i = 0; i < pages; i++)
        heap[i * 4096] = 1;
    for (long i = 0; i < n; i++) {
        pid_t c = fork();
        if (c == 0)
            _exit(heap[0]);
        waitpid(c, NULL, 0);
    }
    printf("%ld forks with %ld pages touched\n", n, pages);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "long"))
        return long_run(atol(argv[2]));
    if (argc > 3 && !strcmp(argv[1], "forks"))
        return forks(atol(argv[2]), atol(argv[3]));
    fork_and_wait();
    wnohang_and_any();
    killed_and_core();
    sigchld();
    waitid_options();
    job_control();
    with_a_pipe();
    do_vfork();
    orphans();
    groups();
    misc();
    if (failures == 0)
        printf("all passed\n");
    return failures != 0;
}
