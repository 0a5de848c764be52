// POSIX timers, checked against what Linux does (the test runs natively
// too): a one-shot timer's SI_TIMER signal with its id and value, a
// periodic one's overruns while its signal waits, an absolute CLOCK_REALTIME
// expiry, SIGEV_NONE, SIGEV_THREAD_ID to another thread, glibc's
// SIGEV_THREAD, a handler interrupting pause, a CPU-time clock, timer_delete,
// a fork's child and an exec'd program without the timers, and the calls'
// EINVAL cases. Run with `after-exec ID` it checks that timer ID is gone.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static void sleep_ms(int ms) {
    struct timespec t = {0, ms * 1000000L};
    while (nanosleep(&t, &t) == -1 && errno == EINTR) {
    }
}

static int64_t now_ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static timer_t make(int notify, int sig, int value, pid_t tid) {
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = notify;
    ev.sigev_signo = sig;
    ev.sigev_value.sival_int = value;
    ev._sigev_un._tid = tid;
    timer_t t = 0;
    if (timer_create(CLOCK_MONOTONIC, &ev, &t) != 0)
        printf("timer_create: %s\n", strerror(errno));
    return t;
}

static void arm(timer_t t, long value_ns, long interval_ns) {
    struct itimerspec its = {{0, interval_ns}, {0, value_ns}};
    timer_settime(t, 0, &its, NULL);
}

static volatile pid_t worker_tid;
static volatile int worker_code, worker_value;
static sem_t worker_ready;
static void *worker(void *arg) {
    (void)arg;
    worker_tid = gettid();
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    sem_post(&worker_ready);
    siginfo_t si;
    if (sigwaitinfo(&s, &si) == SIGUSR1) {
        worker_code = si.si_code;
        worker_value = si.si_value.sival_int;
    }
    return NULL;
}

static sem_t thread_fired;
static volatile int thread_value;
static void on_expiry(union sigval v) {
    thread_value = v.sival_int;
    sem_post(&thread_fired);
}

static volatile int alarms;
static void on_alarm(int sig) {
    (void)sig;
    alarms++;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "after-exec") == 0) {
        struct itimerspec cur;
        errno = 0;
        int r = timer_gettime((timer_t)(intptr_t)atoi(argv[2]), &cur);
        return r == -1 && errno == EINVAL ? 0 : 1;
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGUSR1);
    sigaddset(&blocked, SIGUSR2);
    sigprocmask(SIG_BLOCK, &blocked, NULL);

    // One shot: SI_TIMER, its id and value.
    timer_t t1 = make(SIGEV_SIGNAL, SIGUSR1, 7, 0);
    struct itimerspec cur;
    timer_gettime(t1, &cur);
    CHECK(cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec == 0, "a new timer is disarmed");
    int64_t start = now_ns(CLOCK_MONOTONIC);
    arm(t1, 30000000, 0);
    timer_gettime(t1, &cur);
    CHECK(cur.it_value.tv_nsec > 0 && cur.it_value.tv_nsec <= 30000000 &&
              cur.it_interval.tv_nsec == 0,
          "armed for 30 ms: timer_gettime says what is left");
    sigset_t u1;
    sigemptyset(&u1);
    sigaddset(&u1, SIGUSR1);
    siginfo_t si;
    int sig = sigwaitinfo(&u1, &si);
    int64_t waited = now_ns(CLOCK_MONOTONIC) - start;
    CHECK(sig == SIGUSR1 && si.si_code == SI_TIMER && si.si_value.sival_int == 7 &&
              si.si_timerid == (int)(intptr_t)t1 && si.si_overrun == 0,
          "it expires with SI_TIMER, its id and value 7, no overrun");
    CHECK(waited >= 30000000, "not before its 30 ms");
    timer_gettime(t1, &cur);
    CHECK(cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec == 0, "a one-shot timer is spent");

    // Periodic, its signal left waiting: later expirations are overruns.
    timer_t t2 = make(SIGEV_SIGNAL, SIGUSR2, 9, 0);
    arm(t2, 10000000, 10000000);
    timer_gettime(t2, &cur);
    CHECK(cur.it_interval.tv_nsec == 10000000, "the interval is kept (10 ms)");
    sleep_ms(55);
    sigset_t u2;
    sigemptyset(&u2);
    sigaddset(&u2, SIGUSR2);
    struct timespec zero = {0, 0};
    sig = sigtimedwait(&u2, &si, &zero);
    int over = si.si_overrun;
    CHECK(sig == SIGUSR2 && over >= 4 && over <= 6,
          "five expirations in 55 ms: one signal, the others overruns");
    CHECK(timer_getoverrun(t2) == over, "timer_getoverrun says the same");
    errno = 0;
    CHECK(sigtimedwait(&u2, &si, &zero) == -1 && errno == EAGAIN,
          "and only one signal was queued");
    struct itimerspec off = {{0, 0}, {0, 0}}, old;
    timer_settime(t2, 0, &off, &old);
    CHECK(old.it_interval.tv_nsec == 10000000 && old.it_value.tv_nsec > 0,
          "disarming gives back the old setting");

    // Absolute, on CLOCK_REALTIME.
    struct sigevent ev = {0};
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGUSR1;
    ev.sigev_value.sival_int = 11;
    timer_t t3;
    CHECK(timer_create(CLOCK_REALTIME, &ev, &t3) == 0, "a CLOCK_REALTIME timer");
    struct timespec at;
    clock_gettime(CLOCK_REALTIME, &at);
    at.tv_nsec += 40000000;
    if (at.tv_nsec >= 1000000000) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000;
    }
    struct itimerspec abs = {{0, 0}, at};
    timer_settime(t3, TIMER_ABSTIME, &abs, NULL);
    sig = sigwaitinfo(&u1, &si);
    struct timespec after;
    clock_gettime(CLOCK_REALTIME, &after);
    CHECK(sig == SIGUSR1 && si.si_value.sival_int == 11 &&
              (after.tv_sec > at.tv_sec ||
               (after.tv_sec == at.tv_sec && after.tv_nsec >= at.tv_nsec)),
          "TIMER_ABSTIME: it expires at the wall-clock time asked for");
    timer_delete(t3);

    // SIGEV_NONE: it counts down and sends nothing.
    timer_t t4 = make(SIGEV_NONE, 0, 0, 0);
    arm(t4, 20000000, 0);
    sleep_ms(30);
    timer_gettime(t4, &cur);
    sigset_t pend;
    sigpending(&pend);
    CHECK(cur.it_value.tv_nsec == 0 && !sigismember(&pend, SIGUSR1) &&
              !sigismember(&pend, SIGUSR2),
          "SIGEV_NONE: it expired and sent nothing");

    // SIGEV_THREAD_ID: to one thread.
    sem_init(&worker_ready, 0, 0);
    pthread_t w;
    pthread_create(&w, NULL, worker, NULL);
    sem_wait(&worker_ready);
    timer_t t5 = make(SIGEV_SIGNAL | SIGEV_THREAD_ID, SIGUSR1, 5, worker_tid);
    arm(t5, 10000000, 0);
    pthread_join(w, NULL);
    CHECK(worker_code == SI_TIMER && worker_value == 5,
          "SIGEV_THREAD_ID: the thread named takes it");
    timer_delete(t5);

    // glibc's SIGEV_THREAD: a new thread runs the function at each expiry.
    sem_init(&thread_fired, 0, 0);
    struct sigevent tev = {0};
    tev.sigev_notify = SIGEV_THREAD;
    tev.sigev_notify_function = on_expiry;
    tev.sigev_value.sival_int = 33;
    timer_t t6;
    CHECK(timer_create(CLOCK_MONOTONIC, &tev, &t6) == 0, "a SIGEV_THREAD timer");
    arm(t6, 5000000, 5000000);
    for (int i = 0; i < 3; i++)
        sem_wait(&thread_fired);
    timer_delete(t6);
    CHECK(thread_value == 33, "SIGEV_THREAD: its function ran three times, with value 33");

    // A handler: the default sigevent is SIGALRM; pause ends with EINTR.
    struct sigaction sa = {0};
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    timer_t t7;
    CHECK(timer_create(CLOCK_BOOTTIME, NULL, &t7) == 0, "a CLOCK_BOOTTIME timer, no sigevent");
    arm(t7, 15000000, 0);
    errno = 0;
    int r = pause();
    CHECK(r == -1 && errno == EINTR && alarms == 1,
          "without a sigevent it sends SIGALRM, whose handler ends pause");

    // CPU time: a process CPU-time timer expires while the process works.
    timer_t t8;
    ev.sigev_signo = SIGALRM;
    CHECK(timer_create(CLOCK_PROCESS_CPUTIME_ID, &ev, &t8) == 0, "a CPU-time timer");
    arm(t8, 10000000, 0);
    int64_t began = now_ns(CLOCK_MONOTONIC);
    while (alarms < 2 && now_ns(CLOCK_MONOTONIC) - began < 5000000000LL)
        getppid();
    CHECK(alarms == 2, "it expires after 10 ms of work");
    timer_delete(t8);

    // timer_delete: the id is gone.
    CHECK(timer_delete(t1) == 0, "timer_delete");
    errno = 0;
    CHECK(timer_gettime(t1, &cur) == -1 && errno == EINVAL, "a deleted timer's id: EINVAL");

    // A fork's child has none of its parent's timers; execve deletes them.
    pid_t child = fork();
    if (child == 0) {
        errno = 0;
        _exit(timer_gettime(t2, &cur) == -1 && errno == EINVAL ? 0 : 1);
    }
    int st;
    waitpid(child, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a fork's child has no timers");
    child = fork();
    if (child == 0) {
        char id[16];
        snprintf(id, sizeof id, "%d", (int)(intptr_t)t2);
        execl("/proc/self/exe", "posix-timers", "after-exec", id, (char *)NULL);
        _exit(2);
    }
    waitpid(child, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "after execve the timers are gone");

    // Bad arguments.
    timer_t bad;
    errno = 0;
    CHECK(timer_create(12345, NULL, &bad) == -1 && errno == EINVAL, "an unknown clock: EINVAL");
    struct sigevent bev = {0};
    bev.sigev_notify = SIGEV_SIGNAL;
    bev.sigev_signo = 0;
    errno = 0;
    CHECK(timer_create(CLOCK_MONOTONIC, &bev, &bad) == -1 && errno == EINVAL,
          "signal 0: EINVAL");
    bev.sigev_signo = SIGUSR1;
    bev.sigev_notify = 99;
    errno = 0;
    CHECK(syscall(SYS_timer_create, CLOCK_MONOTONIC, &bev, &bad) == -1 && errno == EINVAL,
          "an unknown sigev_notify: EINVAL");
    bev.sigev_notify = SIGEV_SIGNAL | SIGEV_THREAD_ID;
    bev._sigev_un._tid = getppid();
    errno = 0;
    CHECK(syscall(SYS_timer_create, CLOCK_MONOTONIC, &bev, &bad) == -1 && errno == EINVAL,
          "SIGEV_THREAD_ID naming another process's thread: EINVAL");
    errno = 0;
    CHECK(syscall(SYS_timer_create, CLOCK_MONOTONIC, NULL, (void *)8) == -1 && errno == EFAULT,
          "a bad place for the id: EFAULT");
    struct itimerspec badspec = {{0, 0}, {0, 1000000000}};
    errno = 0;
    CHECK(timer_settime(t2, 0, &badspec, NULL) == -1 && errno == EINVAL,
          "tv_nsec of a second: EINVAL");
    errno = 0;
    CHECK(syscall(SYS_timer_settime, t2, 0, NULL, NULL) == -1 && errno == EINVAL,
          "no new setting: EINVAL");
    errno = 0;
    CHECK(syscall(SYS_timer_gettime, 4242, &cur) == -1 && errno == EINVAL,
          "an id never made: EINVAL");
    errno = 0;
    CHECK(syscall(SYS_timer_delete, 4242) == -1 && errno == EINVAL, "timer_delete of it: EINVAL");
    timer_delete(t2);
    timer_delete(t4);
    timer_delete(t7);

    if (failures == 0)
        printf("all passed\n");
    return failures != 0;
}
