// Signals between threads: tgkill to another thread blocked in pause();
// kill() to the process, taken by the one thread that does not block it,
// which was asleep in nanosleep (EINTR, with the time left); a futex wait
// that SA_RESTART restarts and one without it that ends in EINTR.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static volatile pid_t handled_by[65];
static void handler(int sig) { handled_by[sig] = gettid(); }

static sem_t ready, done;
static volatile pid_t worker_tid;
static volatile int pause_ret, pause_errno;

static void *pauser(void *arg) {
    worker_tid = gettid();
    sem_post(&ready);
    pause_ret = pause();
    pause_errno = errno;
    sem_post(&done);
    return NULL;
}

static volatile int sleep_ret, sleep_errno;
static struct timespec left;
static void *sleeper(void *arg) {
    // This thread takes SIGUSR2; main blocks it.
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR2);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    worker_tid = gettid();
    sem_post(&ready);
    struct timespec ten = {10, 0};
    sleep_ret = nanosleep(&ten, &left);
    sleep_errno = errno;
    return NULL;
}

static int word;
static volatile long futex_ret;
static volatile int futex_errno;
static void *waiter(void *arg) {
    worker_tid = gettid();
    sem_post(&ready);
    futex_ret = syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    futex_errno = errno;
    return NULL;
}

static void settle(void) {
    // Let the worker block (virtual time in Rewind, real time natively).
    struct timespec t = {0, 100 * 1000 * 1000};
    nanosleep(&t, NULL);
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    sem_init(&ready, 0, 0);
    sem_init(&done, 0, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGHUP, &sa, NULL);

    // tgkill to a thread in pause().
    pthread_t t;
    pthread_create(&t, NULL, pauser, NULL);
    sem_wait(&ready);
    settle();
    pthread_kill(t, SIGUSR1);
    sem_wait(&done);
    pthread_join(t, NULL);
    CHECK(handled_by[SIGUSR1] == worker_tid && handled_by[SIGUSR1] != gettid(),
          "tgkill: the handler ran in the target thread");
    CHECK(pause_ret == -1 && pause_errno == EINTR, "its pause() ended with EINTR");

    // kill() to the process: main blocks SIGUSR2, so the sleeper takes it.
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    pthread_create(&t, NULL, sleeper, NULL);
    sem_wait(&ready);
    settle();
    kill(getpid(), SIGUSR2);
    pthread_join(t, NULL);
    CHECK(handled_by[SIGUSR2] == worker_tid, "kill: the one thread not blocking it handled it");
    CHECK(sleep_ret == -1 && sleep_errno == EINTR && left.tv_sec >= 9 && left.tv_sec < 10,
          "nanosleep ended with EINTR, %lds left", (long)left.tv_sec);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);

    // SA_RESTART: a futex wait interrupted by SIGHUP goes on waiting.
    pthread_create(&t, NULL, waiter, NULL);
    sem_wait(&ready);
    settle();
    pthread_kill(t, SIGHUP);
    settle();
    CHECK(handled_by[SIGHUP] == worker_tid, "SIGHUP handled by the futex waiter");
    word = 1;
    syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    pthread_join(t, NULL);
    CHECK(futex_ret == 0, "SA_RESTART: the futex wait was restarted and woken (ret %ld)", futex_ret);

    // Without SA_RESTART: EINTR.
    word = 0;
    pthread_create(&t, NULL, waiter, NULL);
    sem_wait(&ready);
    settle();
    pthread_kill(t, SIGUSR1);
    pthread_join(t, NULL);
    CHECK(futex_ret == -1 && futex_errno == EINTR, "no SA_RESTART: the futex wait ended in EINTR");

    // tgkill of a thread that is gone, and of the wrong process.
    CHECK(syscall(SYS_tgkill, getpid(), 999999, SIGUSR1) == -1 && errno == ESRCH,
          "tgkill of no such thread: ESRCH");
    CHECK(syscall(SYS_tgkill, getpid() + 1, gettid(), SIGUSR1) == -1 && errno == ESRCH,
          "tgkill with the wrong tgid: ESRCH");
    CHECK(kill(getpid(), 0) == 0, "kill(self, 0) is 0");
    CHECK(kill(getpid(), 65) == -1 && errno == EINVAL, "kill with signal 65: EINVAL");
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures != 0;
}
