/* job-orphans: job control in orphaned process groups, as on Linux. Each
 * case runs in a new session (setsid), so that none depends on where the
 * program runs. SIGTSTP, SIGTTIN and SIGTTOU with their default action do
 * nothing to a process whose group is orphaned (a blocked one stays
 * pending, and is dropped once unblocked; a handled one runs its handler),
 * while SIGSTOP stops it and SIGTSTP stops a process of a group that is
 * not orphaned. A group left orphaned, by the exit of its members' parent
 * or of the member whose parent linked it, gets SIGHUP (si_code SI_KERNEL)
 * then SIGCONT when one of its members is stopped, and nothing when none
 * is or when another member still links it. Prints `ok: ...` lines, then
 * `all passed`: the same natively and inside Rewind. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static volatile sig_atomic_t hups, hup_code, conts, tstps;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (sig == SIGHUP) {
        hups++;
        hup_code = si->si_code;
    } else if (sig == SIGCONT) {
        conts++;
    } else if (sig == SIGTSTP) {
        tstps++;
    }
}

static void handle(int sig)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(sig, &sa, NULL);
}

static int pending(int sig)
{
    sigset_t set;
    sigpending(&set);
    return sigismember(&set, sig);
}

/* The exit code of `pid`, reporting a stop as a failure (and continuing it). */
static int exit_code(pid_t pid)
{
    int st;
    if (waitpid(pid, &st, WUNTRACED) != pid)
        return -1;
    if (WIFSTOPPED(st)) {
        printf("FAIL: %d stopped by signal %d\n", (int)pid, WSTOPSIG(st));
        failures++;
        kill(pid, SIGCONT);
        waitpid(pid, &st, 0);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs `body` in a child that leads a new session; its exit code. */
static int in_session(int (*body)(void))
{
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        _exit(body());
    }
    return exit_code(pid);
}

/* A session leader's group is orphaned: its parent is in another session. */
static int dropped(void)
{
    const int sigs[] = {SIGTSTP, SIGTTIN, SIGTTOU};
    const char *names[] = {"SIGTSTP", "SIGTTIN", "SIGTTOU"};
    for (int i = 0; i < 3; i++) {
        kill(getpid(), sigs[i]);
        CHECK(!pending(sigs[i]), "%s to an orphaned group does nothing: the process runs on",
              names[i]);
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTSTP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    kill(getpid(), SIGTSTP);
    int was = pending(SIGTSTP);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    CHECK(was && !pending(SIGTSTP), "a blocked SIGTSTP stays pending, and goes when unblocked");

    handle(SIGTSTP);
    kill(getpid(), SIGTSTP);
    CHECK(tstps == 1, "a handled SIGTSTP runs its handler");
    signal(SIGTSTP, SIG_DFL);

    /* A group of its own in this session, its parent outside it: not orphaned. */
    pid_t c = fork();
    if (c == 0) {
        setpgid(0, 0);
        kill(getpid(), SIGTSTP);
        _exit(5);
    }
    setpgid(c, c);
    int st;
    CHECK(waitpid(c, &st, WUNTRACED) == c && WIFSTOPPED(st) && WSTOPSIG(st) == SIGTSTP,
          "SIGTSTP stops a child in a group its parent links");
    kill(c, SIGCONT);
    CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 5,
          "continued, it exits 5");

    /* SIGSTOP stops even here: the parent sees it and continues it. */
    raise(SIGSTOP);
    return failures != 0;
}

/* What a member of a group that was left orphaned got. */
struct report {
    int hups, hup_code, conts, tstp_dropped;
};

/* Reports what this process got; hung up, it raises SIGTSTP first, which
 * must do nothing in its group, orphaned now. */
static void send_report(int fd)
{
    if (hups)
        raise(SIGTSTP);
    struct report r = {hups, hup_code, conts, hups != 0};
    write(fd, &r, sizeof r);
}

static void check_report(int fd, const char *how, int want_hup)
{
    struct report r = {-1, -1, -1, -1};
    int n = read(fd, &r, sizeof r);
    if (want_hup)
        CHECK(n == sizeof r && r.hups == 1 && r.hup_code == SI_KERNEL && r.conts == 1,
              "%s: SIGHUP (si_code SI_KERNEL) and SIGCONT", how);
    else
        CHECK(n == sizeof r && r.hups == 0, "%s: no SIGHUP (%d SIGCONT)", how, n > 0 ? r.conts : -1);
    if (want_hup)
        CHECK(n == sizeof r && r.tstp_dropped, "%s: then SIGTSTP does nothing to it", how);
}

/* The group's member that linked it exits, leaving a member behind
 * (stopped or not), and another member (`linked`) or none. */
static int leaver_exits(int stopped, int linked)
{
    int rep[2], go[2];
    pipe(rep);
    pipe(go);
    pid_t c = fork();
    if (c == 0) {
        setpgid(0, 0);
        pid_t d = fork();
        if (d == 0) {
            handle(SIGHUP);
            handle(SIGCONT);
            if (stopped) {
                raise(SIGSTOP);
            } else {
                char x;
                read(go[0], &x, 1);
            }
            send_report(rep[1]);
            _exit(0);
        }
        int st;
        if (stopped)
            waitpid(d, &st, WUNTRACED);
        _exit(0);
    }
    setpgid(c, c);
    pid_t e = 0;
    if (linked) {
        e = fork();
        if (e == 0) {
            setpgid(0, c);
            for (;;)
                pause();
        }
        setpgid(e, c);
    }
    close(rep[1]);
    CHECK(exit_code(c) == 0, "the group's leader exits");
    const char *how = linked ? "another member still links the group"
                      : stopped ? "the orphaned group has a stopped member"
                                : "the orphaned group has no stopped member";
    if (linked)
        kill(-c, SIGCONT);
    else if (!stopped)
        write(go[1], "x", 1);
    check_report(rep[0], how, stopped && !linked);
    if (e) {
        kill(e, SIGKILL);
        waitpid(e, NULL, 0);
    }
    return failures != 0;
}

static int hup_stopped(void) { return leaver_exits(1, 0); }
static int no_hup_running(void) { return leaver_exits(0, 0); }
static int no_hup_linked(void) { return leaver_exits(1, 1); }

/* The parent that linked the group exits: its stopped child is hung up. */
static void parent_exits(void)
{
    int rep[2];
    pipe(rep);
    pid_t s = fork();
    if (s == 0) {
        setsid();
        pid_t c = fork();
        if (c == 0) {
            setpgid(0, 0);
            handle(SIGHUP);
            handle(SIGCONT);
            raise(SIGSTOP);
            send_report(rep[1]);
            _exit(0);
        }
        setpgid(c, c);
        int st;
        waitpid(c, &st, WUNTRACED);
        _exit(0);
    }
    close(rep[1]);
    CHECK(exit_code(s) == 0, "the parent of a stopped child in another group exits");
    check_report(rep[0], "its parent exited", 1);
    close(rep[0]);
}

int main(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    pid_t s = fork();
    if (s == 0) {
        setsid();
        _exit(dropped());
    }
    int st;
    CHECK(waitpid(s, &st, WUNTRACED) == s && WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP,
          "SIGSTOP stops a process of an orphaned group");
    kill(s, SIGCONT);
    CHECK(exit_code(s) == 0, "continued, it exits 0");

    CHECK(in_session(hup_stopped) == 0, "a group with a stopped member, orphaned");
    CHECK(in_session(no_hup_running) == 0, "a group with no stopped member, orphaned");
    CHECK(in_session(no_hup_linked) == 0, "a group still linked");
    parent_exits();
    if (!failures)
        printf("all passed\n");
    return failures != 0;
}
