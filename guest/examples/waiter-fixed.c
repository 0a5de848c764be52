/* waiter-fixed: SIGCHLD is blocked from before the fork until sigsuspend, which unblocks it and waits in one step.
 *
 * The fix of waiter.c: the flag is checked with SIGCHLD blocked, so the
 * handler cannot run between the check and the wait; sigsuspend() lets the
 * signal in and waits atomically, and a SIGCHLD that came early is pending
 * and ends it at once.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t child_done;

static void on_child(int sig)
{
    (void)sig;
    child_done = 1;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_child;
    sigaction(SIGCHLD, &sa, NULL);
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);
    pid_t worker = fork();
    if (worker == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        printf("worker: compressing the logs\n");
        fflush(stdout);
        _exit(0);
    }
    while (!child_done) {
        printf("parent: waiting for worker %d\n", (int)worker);
        fflush(stdout);
        sigsuspend(&old); /* SIGCHLD unblocked and waited for at once */
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    int status = 0;
    waitpid(worker, &status, 0);
    printf("parent: worker finished with %d\n", WEXITSTATUS(status));
    return 0;
}
