/* waiter: a parent checks a flag its SIGCHLD handler sets, then pauses: a child that ends in between leaves it asleep forever.
 *
 * The parent starts a worker process and waits for it the old way: its
 * SIGCHLD handler sets `child_done`, and the parent calls pause() unless
 * the flag is already set. Between the check and the pause it says that it
 * is waiting. If the child ends there, the handler runs before pause(), the
 * flag is set too late to matter, and pause() waits for a signal that has
 * already come: the run deadlocks in the parent's pause. The fix is
 * waiter-fixed.c: SIGCHLD blocked around the check, and sigsuspend.
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
    pid_t worker = fork();
    if (worker == 0) {
        printf("worker: compressing the logs\n");
        fflush(stdout);
        _exit(0);
    }
    if (!child_done) {
        printf("parent: waiting for worker %d\n", (int)worker);
        fflush(stdout);
        pause(); /* the child may have ended since the check */
    }
    int status = 0;
    waitpid(worker, &status, 0);
    printf("parent: worker finished with %d\n", WEXITSTATUS(status));
    return 0;
}
